//! The lab's LAVA jobs run for real (tier 3: QEMU boots): `bootlink lab
//! --lava` writes the jobs of two variants of a small module set for the
//! qemu device type, Debian's `lava-run` (lava-dispatcher, no server) runs
//! each with the device dictionary bootlink wrote, `bootlink lava import`
//! reads the job logs, and `bootlink chart` shows them next to the lab's
//! own boot of the same variants. The jobs carry the lab's clock
//! (-icount), so the LAVA boots must measure what the lab's boots measure.

mod common;

use std::path::Path;

use bootlink::run::results::Run;
use common::{TestCommand, skip, tmpdir};

/// The module set's load time of each variant (guest µs).
fn set_times(run: &Run) -> Vec<(String, f64)> {
    run.variants.iter().map(|v| (v.name.clone(), v.repetitions[0].modules_total_us)).collect()
}

#[test]
fn generated_jobs_run_through_lava_run_and_chart_beside_the_lab() {
    let lava_run = Path::new("/usr/bin/lava-run");
    if !lava_run.exists() {
        skip("lava_boot", "lava-run is not installed (scripts/install-deps installs lava-dispatcher)");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("lava_boot", "lava-run runs jobs as root only");
        return;
    }
    let dir = tmpdir("lava-boot");
    let jobs = dir.join("jobs");
    let variants: [&dyn AsRef<std::ffi::OsStr>; 4] = [&"--variant", &"stock", &"--variant", &"unsigned"];
    let mut c = TestCommand::new(&[&"lab", &"vfat"]);
    for v in variants {
        c = c.arg(v);
    }
    c.arg(&"--lava").arg(&jobs).show_dir(&jobs).ok();
    // Each job through the real dispatcher; job ids unique to this process
    // (lava-run works under /var/lib/lava/dispatcher/tmp/ID).
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut imported = Vec::new();
    for (k, job) in ["stock-0", "unsigned-0"].iter().enumerate() {
        let id = format!("{}", 800_000 + std::process::id() * 2 + k as u32);
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
            "lava-run {job}: {}\n{}",
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
    let from_lava = bootlink::run::load(&lava).unwrap();
    assert_eq!((from_lava.source.as_str(), from_lava.timing.as_str()), ("lava", "deterministic"));
    for v in &from_lava.variants {
        let r = &v.repetitions[0];
        assert!(r.failure.is_none(), "{}: {:?}", v.name, r.failure);
        assert_eq!(r.modules.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
        assert!(r.modules.iter().all(|m| !m.phases.is_empty()));
    }
    // The lab's own boot of the same variants.
    let lab = dir.join("lab");
    let mut c = TestCommand::new(&[&"lab", &"vfat", &"-o", &lab]);
    for v in variants {
        c = c.arg(v);
    }
    c.ok();
    let from_lab = bootlink::run::load(&lab).unwrap();
    // Same kernel, initramfs (but its marker tag), command line, CPU and
    // clock; LAVA's qemu device adds a virtio NIC. Measured on 2026-11-28:
    // the module set's time within 0.03 %.
    for ((name, a), (_, b)) in set_times(&from_lab).iter().zip(set_times(&from_lava)) {
        let diff = (b - a) / a * 100.0;
        common::report(
            "lava_boot",
            &format!("{name}: module set {a:.0} us in the lab, {b:.0} us under lava-run ({diff:+.3} %)"),
        );
        assert!(diff.abs() < 1.0, "{name}: {a} vs {b} us ({diff:+.3} %)");
    }
    // From machine reset to /init: LAVA's qemu device also has its NIC's
    // option ROM for the firmware to load (2.2 ms more on 2026-11-28).
    let init = |r: &Run| r.variants[0].repetitions[0].boot_clock.map(|c| c.init_us);
    let (a, b) = (init(&from_lab).unwrap(), init(&from_lava).expect("a deterministic LAVA boot keeps its boot clock"));
    common::report("lava_boot", &format!("reset to /init: {a:.0} us in the lab, {b:.0} us under lava-run"));
    // Side by side in one chart, labelled by where they ran.
    let html = dir.join("chart.html");
    let o = TestCommand::new(&[&"chart", &lab, &lava, &"-o", &html]).ok();
    let table = common::stdout(&o);
    for label in ["stock (lab)", "unsigned (lab)", "stock (lava qemu)", "unsigned (lava qemu)"] {
        assert!(table.contains(label), "{label} in\n{table}");
    }
    assert!(std::fs::read_to_string(&html).unwrap().contains("stock (lava qemu)"));
}
