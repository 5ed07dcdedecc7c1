//! The lab's LAVA jobs run for real (tier 3: QEMU boots): `bootlink lab
//! --lava` writes the jobs of two variants of a small module set for the
//! qemu device type, Debian's `lava-run` (lava-dispatcher, no server) runs
//! each with the device dictionary bootlink wrote, `bootlink lava import`
//! reads the job logs, and `bootlink chart` shows them next to the lab's
//! own boot of the same variants. The jobs carry the lab's clock
//! (-icount), so the LAVA boots must measure what the lab's boots measure.
//! On x86-64 and on arm64 (`qemu-system-aarch64`, virt, Cortex-A72).

use crate::common;

use std::path::{Path, PathBuf};

use bootlink_lab::run::results::Run;
use common::{TestCommand, skip, tmpdir};

/// The module set's load time of each variant (guest µs).
fn set_times(run: &Run) -> Vec<(String, f64)> {
    run.variants.iter().map(|v| (v.name.clone(), v.repetitions[0].modules_total_us)).collect()
}

/// lava-run, when this machine can run jobs with it (installed, root).
fn lava_run(test: &str) -> Option<&'static Path> {
    let p = Path::new("/usr/bin/lava-run");
    if !p.exists() {
        skip(test, "lava-run is not installed (scripts/install-deps installs lava-dispatcher)");
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "lava-run runs jobs as root only");
        return None;
    }
    Some(p)
}

/// The jobs of vfat stock and unsigned on `arch` through lava-run and
/// imported, and the lab's own boot of them: (lab run dir, LAVA run dir,
/// both runs). `id_base` keeps the jobs' ids apart from other tests'
/// (lava-run works under /var/lib/lava/dispatcher/tmp/ID).
fn lava_and_lab(lava_run: &Path, dir: &Path, arch: &str, id_base: u32) -> (PathBuf, PathBuf, Run, Run) {
    let jobs = dir.join("jobs");
    let base: [&dyn AsRef<std::ffi::OsStr>; 7] =
        [&"lab", &"vfat", &"--arch", &arch, &"--variant", &"stock", &"--variant"];
    TestCommand::new(&base).arg(&"unsigned").arg(&"--lava").arg(&jobs).show_dir(&jobs).ok();
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut imported = Vec::new();
    for (k, job) in ["stock-0", "unsigned-0"].iter().enumerate() {
        let id = format!("{}", id_base + (std::process::id() % 10_000) * 2 + k as u32);
        let log = logs.join(format!("{id}.yaml"));
        let o = std::process::Command::new(lava_run)
            .args(["--job-id", &id, "--output-dir"])
            .arg(dir.join(format!("out-{id}")))
            .arg("--device")
            .arg(jobs.join("device-qemu.yaml"))
            .arg(jobs.join(format!("{job}.yaml")))
            .output()
            .unwrap();
        std::fs::write(&log, &o.stderr).unwrap();
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "lava-run {job} ({arch}): {}\n{}",
            o.status,
            text.lines().rev().take(30).collect::<Vec<_>>().join("\n")
        );
        assert!(text.contains(r#""case": "job", "definition": "lava", "result": "pass""#));
        assert!(text.contains(r#""lvl": "target", "msg": "=== BOOTLINK END lava-v"#), "the guest's markers in the log");
        imported.push(log);
    }
    let lava = dir.join("lava-run");
    let o = TestCommand::new(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &lava, &imported[0], &imported[1]]).ok();
    assert!(common::stdout(&o).contains("2 of 2 log(s) imported (device type qemu)"));
    let from_lava = bootlink_lab::run::load(&lava).unwrap();
    assert_eq!((from_lava.source.as_str(), from_lava.timing.as_str()), ("lava", "deterministic"));
    assert_eq!(from_lava.arch, arch);
    for v in &from_lava.variants {
        let r = &v.repetitions[0];
        assert!(r.failure.is_none(), "{}: {:?}", v.name, r.failure);
        assert_eq!(r.modules.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
        assert!(r.modules.iter().all(|m| !m.phases.is_empty()));
    }
    // The lab's own boot of the same variants.
    let lab = dir.join("lab");
    TestCommand::new(&base).arg(&"unsigned").arg(&"-o").arg(&lab).ok();
    let from_lab = bootlink_lab::run::load(&lab).unwrap();
    common::report("lava_boot", &format!("{arch}: {}", common::boot_line(&[("lab", &lab), ("lava-run", &lava)])));
    // Same kernel, initramfs (but its marker tag), command line, CPU and
    // clock; LAVA's qemu device adds a virtio NIC. Both boots are
    // deterministic (-icount), so they differ by what the NIC and the tag
    // change, not by chance: measured on 2026-11-28 (scripts/lava-measure,
    // docs/lava.md) x86-64 stock +0.026 %, unsigned -0.075 %, arm64 stock
    // -0.018 %, unsigned -0.065 %. The bound is 3x the largest of them.
    const MEASURED_PCT: f64 = 0.075;
    for ((name, a), (_, b)) in set_times(&from_lab).iter().zip(set_times(&from_lava)) {
        let diff = (b - a) / a * 100.0;
        common::report(
            "lava_boot",
            &format!("{arch} {name}: module set {a:.0} us in the lab, {b:.0} us under lava-run ({diff:+.3} %)"),
        );
        assert!(
            diff.abs() <= 3.0 * MEASURED_PCT,
            "{arch} {name}: {a} vs {b} us ({diff:+.3} %; measured at most {MEASURED_PCT} % apart, bound 3x that)"
        );
    }
    (lab, lava, from_lab, from_lava)
}

/// Both runs in one chart, labelled by where they ran.
fn charted_side_by_side(dir: &Path, lab: &Path, lava: &Path) {
    let html = dir.join("chart.html");
    let o = TestCommand::new(&[&"chart", &lab, &lava, &"-o", &html]).ok();
    let table = common::stdout(&o);
    for label in ["stock (lab)", "unsigned (lab)", "stock (lava qemu)", "unsigned (lava qemu)"] {
        assert!(table.contains(label), "{label} in\n{table}");
    }
    assert!(std::fs::read_to_string(&html).unwrap().contains("stock (lava qemu)"));
}

#[test]
fn generated_jobs_run_through_lava_run_and_chart_beside_the_lab() {
    let Some(lava_run) = lava_run("lava_boot") else { return };
    let dir = tmpdir("lava-boot");
    let (lab, lava, from_lab, from_lava) = lava_and_lab(lava_run, &dir, "x86-64", 800_000);
    // From machine reset to /init: LAVA's qemu device also has its NIC's
    // option ROM for the firmware to load (2.1 ms more on 2026-11-28).
    let init = |r: &Run| r.variants[0].repetitions[0].boot_clock.map(|c| c.init_us);
    let (a, b) = (init(&from_lab).unwrap(), init(&from_lava).expect("a deterministic LAVA boot keeps its boot clock"));
    common::report("lava_boot", &format!("reset to /init: {a:.0} us in the lab, {b:.0} us under lava-run"));
    charted_side_by_side(&dir, &lab, &lava);
}

#[test]
fn arm64_jobs_run_through_lava_run_as_the_arm64_lab_boots() {
    let Some(lava_run) = lava_run("lava_boot arm64") else { return };
    let dir = tmpdir("lava-boot-arm64");
    let (lab, lava, _, from_lava) = lava_and_lab(lava_run, &dir, "arm64", 830_000);
    // the arm64 template's own -cpu and -machine, from the jobs' context
    let cmd = from_lava.qemu_command.join(" ");
    assert!(cmd.contains("qemu-system-aarch64 -cpu cortex-a72 -machine virt"), "{cmd}");
    charted_side_by_side(&dir, &lab, &lava);
}
