//! The lab as LAVA jobs, without booting: `bootlink lab --lava DIR` on
//! Debian's 6.1 kernel (the jobs checked against LAVA's own job schema,
//! `lava_common.schemas.validate`, and by the dispatcher's `lava-run
//! --validate`; the artifacts and their digests), and `bootlink lava
//! import` of real job logs `lava-run` wrote for such jobs
//! (`tests/fixtures/lava/`): the runs they make, and every bad log refused
//! in one line naming it while the rest is imported.

use crate::common;

use std::path::{Path, PathBuf};

use bootlink_lab::lava::job::{self, BootMethod, DeployTo, Job};
use bootlink_lab::run::results::Run;
use common::{TestCommand, skip, tmpdir};

/// Validate job files with LAVA's schema (Debian's `lava-common`); None
/// when lava_common is not installed here.
fn lava_schema_validate(jobs: &[PathBuf]) -> Option<Result<(), String>> {
    let probe = std::process::Command::new("/usr/bin/python3").args(["-c", "import lava_common.schemas"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let script = "import sys, yaml\nfrom lava_common.schemas import validate\n\
                  for f in sys.argv[1:]:\n    validate(yaml.safe_load(open(f)), strict=True)\n    print('valid', f)\n";
    let o =
        std::process::Command::new("/usr/bin/python3").arg("-c").arg(script).args(jobs).output().expect("run python3");
    Some(if o.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&o.stderr).into_owned()) })
}

/// A job file bootlink wrote, read.
fn job(path: &Path) -> Job {
    let text = std::fs::read_to_string(path).unwrap();
    job::parse_job(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

#[test]
fn qemu_jobs_are_valid_lava_jobs_with_their_artifacts() {
    let dir = tmpdir("lava-jobs");
    let jobs = dir.join("jobs");
    let o = TestCommand::new(&[&"lab", &"vfat", &"--variant", &"stock", &"--variant", &"unsigned", &"-n", &"2"])
        .arg(&"--lava")
        .arg(&jobs)
        .show_dir(&jobs)
        .ok();
    let out = common::stdout(&o);
    assert!(out.contains("4 LAVA job(s) for device type qemu (boot method qemu, timing deterministic)"), "{out}");
    let files: Vec<PathBuf> =
        ["stock-0", "stock-1", "unsigned-0", "unsigned-1"].iter().map(|j| jobs.join(format!("{j}.yaml"))).collect();
    for (i, f) in files.iter().enumerate() {
        let j = job(f);
        let variant = if i < 2 { "stock" } else { "unsigned" };
        let tag = if i < 2 { "lava-v0" } else { "lava-v1" };
        assert_eq!(j.device_type, "qemu");
        assert_eq!((j.metadata.variant.as_str(), j.metadata.tag.as_str()), (variant, tag));
        let boot = j.boot().unwrap();
        assert_eq!(boot.parameters.kernel_start_message, format!("=== BOOTLINK BEGIN {tag} ==="));
        // the lab's clock and CPU for the qemu device type
        let extra = j.context.extra_options.as_deref().unwrap_or_default();
        for opt in
            ["-icount shift=0,sleep=off", "-seed 1", "-cpu Haswell-v2,-pcid,-x2apic,-tsc-deadline,-invpcid,enforce"]
        {
            assert!(extra.iter().any(|o| o == opt), "{opt} in {extra:?}");
        }
        // every artifact named is in the directory with the digest the job gives
        let deploy = j.deploy().unwrap();
        let artifacts = deploy.artifacts();
        assert_eq!(artifacts.len(), 2, "{j:?}");
        for a in artifacts {
            let p = Path::new(a.url.strip_prefix("file://").expect("a file:// URL"));
            assert!(p.starts_with(jobs.canonicalize().unwrap()), "{}", a.url);
            assert_eq!(common::sha256_hex(p), a.sha256sum, "{}", a.url);
        }
        let kernel_arg = deploy.images.as_ref().and_then(|i| i.kernel.image_arg.as_deref()).unwrap_or("");
        assert!(kernel_arg.contains("-append \"console=ttyS0 nokaslr"), "{kernel_arg}");
    }
    // the initramfs holds the lab's /init with the variant's tag, and the modules
    let cpio = std::fs::read(jobs.join("artifacts/unsigned/initramfs.cpio")).unwrap();
    let text = String::from_utf8_lossy(&cpio);
    assert!(text.contains("=== BOOTLINK BEGIN lava-v1 ===") && text.contains("bootlink: insmod"));
    assert!(text.contains("vfat.ko") && text.contains("fat.ko"));
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(jobs.join("bootlink-lava.json")).unwrap()).unwrap();
    assert_eq!(m["device_type"], "qemu");
    assert_eq!(m["run"]["source"], "lava");
    assert_eq!(m["variants"][1]["jobs"], serde_json::json!(["unsigned-0.yaml", "unsigned-1.yaml"]));
    assert!(jobs.join("device-qemu.yaml").is_file());
    match lava_schema_validate(&files) {
        None => {
            skip("lava schema", "Debian's lava-common is not installed (scripts/install-deps installs lava-dispatcher)")
        }
        Some(r) => r.unwrap_or_else(|e| panic!("LAVA's schema refuses the jobs:\n{e}")),
    }
    // The dispatcher itself parses and validates a job against the device
    // dictionary (without booting it): lava-run --validate.
    let lava_run = Path::new("/usr/bin/lava-run");
    if !lava_run.exists() || unsafe { libc::geteuid() } != 0 {
        skip("lava-run --validate", "lava-run is not installed or this is not root (lava-run runs as root)");
        return;
    }
    let id = format!("{}", 700_000 + std::process::id());
    let o = std::process::Command::new(lava_run)
        .args(["--validate", "--job-id", &id, "--output-dir"])
        .arg(dir.join("validate"))
        .arg("--device")
        .arg(jobs.join("device-qemu.yaml"))
        .arg(&files[0])
        .output()
        .unwrap();
    // a validation does not clean up its scratch directory as a run does
    let _ = std::fs::remove_dir_all(Path::new("/var/lib/lava/dispatcher/tmp").join(&id));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "lava-run --validate:\n{log}");
    assert!(log.contains(r#""case": "validate", "definition": "lava", "result": "pass""#), "{log}");
}

/// A second write into the same directory replaces the first: a variant
/// and a repetition the new run does not have leave no job behind.
#[test]
fn a_second_write_replaces_the_first() {
    let dir = tmpdir("lava-again");
    let jobs = dir.join("jobs");
    let write = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = vec![&"lab" as &dyn AsRef<std::ffi::OsStr>, &"vfat"];
        c.extend_from_slice(args);
        TestCommand::new(&c).arg(&"--lava").arg(&jobs).ok();
    };
    write(&[&"--variant", &"stock", &"--variant", &"unsigned", &"-n", &"2"]);
    assert!(jobs.join("unsigned-1.yaml").exists() && jobs.join("artifacts/unsigned").is_dir());
    // a file of the user's in the directory is not bootlink's to remove
    std::fs::write(jobs.join("notes.txt"), "mine").unwrap();
    write(&[&"--variant", &"stock"]);
    let mut names: Vec<String> =
        std::fs::read_dir(&jobs).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["artifacts", "bootlink-lava.json", "device-qemu.yaml", "notes.txt", "stock-0.yaml"]);
    let arts: Vec<String> = std::fs::read_dir(jobs.join("artifacts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(arts, ["stock"]);
}

#[test]
fn board_jobs_name_the_boot_method_and_refusals_are_one_line() {
    let dir = tmpdir("lava-boards");
    let uboot = dir.join("uboot");
    let dtb = dir.join("board.dtb");
    std::fs::write(&dtb, b"\xd0\x0d\xfe\xed a device tree").unwrap();
    TestCommand::new(&[&"lab", &"vfat", &"--variant", &"stock", &"--variant", &"unsigned"])
        .arg(&"--lava")
        .arg(&uboot)
        .arg(&"--lava-device-type")
        .arg(&"bcm2711-rpi-4-b")
        .arg(&"--lava-boot")
        .arg(&"u-boot")
        .arg(&"--lava-url")
        .arg(&"http://files.example/lab/")
        .arg(&"--lava-dtb")
        .arg(&dtb)
        .ok();
    let j = job(&uboot.join("stock-0.yaml"));
    let (deploy, boot) = (j.deploy().unwrap(), j.boot().unwrap());
    assert_eq!(boot.method, BootMethod::UBoot);
    assert_eq!(deploy.to, DeployTo::Tftp);
    assert_eq!(boot.commands.as_deref(), Some("ramdisk"));
    let urls: Vec<&str> = deploy.artifacts().iter().map(|a| a.url.as_str()).collect();
    assert!(urls.iter().all(|u| u.starts_with("http://files.example/lab/artifacts/")), "{urls:?}");
    assert_eq!(urls.len(), 3, "kernel, ramdisk, dtb: {j:?}");
    // U-Boot takes the ramdisk by its legacy header (LAVA's u-boot boot
    // passes booti its address only): the lab's newc cpio behind it
    assert_eq!(deploy.ramdisk.as_ref().and_then(|r| r.header.as_deref()), Some("u-boot"), "{j:?}");
    let img = std::fs::read(uboot.join("artifacts/stock/initramfs.cpio.uboot")).unwrap();
    assert_eq!(&img[..4], &[0x27, 0x05, 0x19, 0x56], "U-Boot's image magic");
    assert_eq!(u32::from_be_bytes(img[12..16].try_into().unwrap()) as usize, img.len() - 64, "the data's size");
    assert_eq!(&img[64..70], b"070701", "a newc cpio behind the header");
    let args = j.context.extra_kernel_args.as_deref().unwrap_or("");
    assert!(args.starts_with("nokaslr") && !args.contains("console="), "{j:?}");
    assert!(!uboot.join("device-qemu.yaml").exists(), "no qemu dictionary for a board");
    let grub = dir.join("grub");
    TestCommand::new(&[&"lab", &"vfat", &"--variant", &"stock", &"--lava"])
        .arg(&grub)
        .arg(&"--lava-device-type")
        .arg(&"x86-pc")
        .arg(&"--lava-boot")
        .arg(&"grub")
        .ok();
    let g = job(&grub.join("stock-0.yaml"));
    assert_eq!(g.boot().unwrap().method, BootMethod::Grub);
    assert!(
        g.deploy().unwrap().ramdisk.as_ref().is_some_and(|r| r.header.is_none())
            && grub.join("artifacts/stock/initramfs.cpio").exists(),
        "GRUB: the raw cpio"
    );
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(grub.join("bootlink-lava.json")).unwrap()).unwrap();
    assert_eq!(m["timing"], "realtime (hardware)");
    match lava_schema_validate(&[uboot.join("stock-0.yaml"), uboot.join("unsigned-0.yaml"), grub.join("stock-0.yaml")])
    {
        None => skip("lava schema (boards)", "Debian's lava-common is not installed"),
        Some(r) => r.unwrap_or_else(|e| panic!("LAVA's schema refuses the board jobs:\n{e}")),
    }
    // what the jobs cannot carry is refused before anything is written
    let none = dir.join("none");
    let e = TestCommand::new(&[&"lab", &"vfat", &"--lava"])
        .arg(&none)
        .arg(&"--lava-device-type")
        .arg(&"x86-pc")
        .fails_with("--lava-device-type x86-pc: name its boot method with --lava-boot u-boot or grub");
    assert_eq!(e.lines().count(), 1, "{e}");
    TestCommand::new(&[&"lab", &"vfat", &"--lava"])
        .arg(&none)
        .arg(&"--lava-boot")
        .arg(&"fastboot")
        .fails_with("--lava-boot \"fastboot\": use qemu, u-boot or grub");
    TestCommand::new(&[&"lab", &"vfat", &"--variant", &"b=loader:batch", &"--lava"])
        .arg(&none)
        .fails_with("variant b runs a workload or a loader other than insmod");
    assert!(!none.join("bootlink-lava.json").exists());
}

/// The fixtures' logs, decompressed into `dir` (ID.yaml).
fn fixture_logs(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lava");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for id in ["101", "102", "103"] {
        let text = common::sh("xz", &["-dc", src.join(format!("{id}.yaml.xz")).to_str().unwrap()]);
        std::fs::write(logs.join(format!("{id}.yaml")), text).unwrap();
    }
    std::fs::copy(src.join("bootlink-lava.json"), dir.join("bootlink-lava.json")).unwrap();
    logs
}

fn load(dir: &Path) -> Run {
    bootlink_lab::run::load(dir).unwrap()
}

#[test]
fn real_lava_logs_import_into_a_run_the_charts_read() {
    let dir = tmpdir("lava-import");
    let logs = fixture_logs(&dir);
    let out = dir.join("run");
    let o = TestCommand::new(&[&"lava", &"import", &"--jobs", &dir, &"-o", &out])
        .arg(&logs.join("102.yaml"))
        .arg(&logs.join("101.yaml"))
        .ok();
    let text = common::stdout(&o);
    assert!(text.contains("2 of 2 log(s) imported (device type qemu)"), "{text}");
    let run = load(&out);
    assert_eq!((run.source.as_str(), run.device_type.as_str(), run.timing.as_str()), ("lava", "qemu", "deterministic"));
    assert!(
        run.qemu_command.iter().any(|a| a == "-icount") && run.qemu_version.contains("7.2"),
        "{:?}",
        run.qemu_command
    );
    let names: Vec<&str> = run.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["stock", "unsigned"]);
    for (v, job) in run.variants.iter().zip(["101", "102"]) {
        let r = &v.repetitions[0];
        assert_eq!(r.job.as_deref(), Some(job));
        assert!(r.failure.is_none() && !r.partial, "{:?}", r.failure);
        let loaded: Vec<&str> = r.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(loaded, ["fat", "vfat"]);
        assert!(r.modules.iter().all(|m| m.status == 0 && !m.phases.is_empty() && m.size > 0));
        assert!(r.modules_total_us > 0.0 && r.init_start_us > 1e6 && !r.initcalls.is_empty());
        assert!(r.boot_wall_s > 0.0, "host seconds of the boot from LAVA's timestamps");
        // under -icount the guest's cycle counter is QEMU's clock from reset
        assert!(r.boot_clock.is_some_and(|c| c.init_us > 1e6), "{:?}", r.boot_clock);
        assert!(out.join(&r.log).is_file());
    }
    // the stock modules' signatures are checked, the unsigned ones' are not
    let sig = |v: usize| -> f64 {
        run.variants[v].repetitions[0]
            .modules
            .iter()
            .flat_map(|m| &m.phases)
            .filter(|p| p.name == "signature")
            .map(|p| p.duration_us)
            .sum()
    };
    // The logs are fixtures: what they hold is fixed, so the import gives
    // the same figures every time (stock 33,769.892 us, unsigned 1.491 us,
    // bootlink lava import of these two logs, 2026-11-29). Held to 0.1 %,
    // the lab's bound where two boots agree.
    for (v, want) in [(0, 33_769.892), (1, 1.491)] {
        let got = sig(v);
        assert!(
            (got - want).abs() <= 0.001 * want,
            "{}: signature phases {got} us, the fixture's {want} us",
            run.variants[v].name
        );
    }
    let html = dir.join("chart.html");
    let o = TestCommand::new(&[&"chart", &out, &"-o", &html]).ok();
    assert!(common::stdout(&o).contains("signature"));
    assert!(std::fs::read_to_string(&html).unwrap().contains("unsigned"));
}

#[test]
fn bad_logs_are_refused_one_line_each_and_the_rest_is_imported() {
    let dir = tmpdir("lava-bad");
    let logs = fixture_logs(&dir);
    let good = std::fs::read_to_string(logs.join("102.yaml")).unwrap();
    // cut short in the middle of the boot, and in the middle of a line
    let truncated = logs.join("104.yaml");
    std::fs::write(&truncated, &good[..good.len() / 2]).unwrap();
    // the plain console: the target's lines as LAVA's log holds them
    let console: String = good
        .lines()
        .filter_map(|l| bootlink_lab::lava::log::record(l).unwrap())
        .filter(|r| r.lvl == bootlink_lab::lava::log::Level::Target)
        .map(|r| format!("{}\n", r.msg.text().unwrap()))
        .collect();
    let plain = logs.join("105.log");
    std::fs::write(&plain, &console).unwrap();
    let foreign = logs.join("notes.txt");
    std::fs::write(&foreign, "a shopping list\nmilk\n").unwrap();
    let lab_console = logs.join("106.log");
    std::fs::write(&lab_console, console.replace("lava-v1", "run")).unwrap();
    let out = dir.join("run");
    let o = TestCommand::new(&[&"lava", &"import", &"--jobs", &dir.join("bootlink-lava.json"), &"-o", &out])
        .arg(&logs.join("101.yaml"))
        .arg(&logs.join("103.yaml"))
        .arg(&truncated)
        .arg(&plain)
        .arg(&foreign)
        .arg(&lab_console)
        .cmd_output();
    assert!(!o.status.success());
    let err = common::stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "one line per bad log:\n{err}");
    let line_of = |p: &Path| lines.iter().find(|l| l.contains(&p.display().to_string())).copied().unwrap_or("");
    assert!(line_of(&logs.join("103.yaml")).contains("the LAVA job failed (fail): Job: sha256 for"), "{err}");
    assert!(line_of(&truncated).contains("truncated"), "{err}");
    assert!(line_of(&foreign).contains("neither a LAVA job log nor a console of these jobs"), "{err}");
    assert!(line_of(&lab_console).contains("no bootlink begin marker with tag lava-v0, lava-v1"), "{err}");
    // what was good is there, and nothing of the bad logs
    let run = load(&out);
    let got: Vec<(&str, Option<&str>)> =
        run.variants.iter().map(|v| (v.name.as_str(), v.repetitions[0].job.as_deref())).collect();
    assert_eq!(got, [("stock", Some("101")), ("unsigned", Some("105"))]);
    assert_eq!(std::fs::read_dir(out.join("logs")).unwrap().count(), 2);
    // the plain console reads as the job log it came from
    let from_yaml = dir.join("yaml");
    TestCommand::new(&[&"lava", &"import", &"--jobs", &dir, &"-o", &from_yaml, &logs.join("102.yaml")]).ok();
    let a = &load(&from_yaml).variants[0].repetitions[0];
    let b = &run.variants[1].repetitions[0];
    assert_eq!((&a.modules, &a.initcalls, a.modules_total_us), (&b.modules, &b.initcalls, b.modules_total_us));
    // a log given twice is imported once; a log of other jobs (its
    // initramfs's digest, as LAVA logged it, is not the variant's here)
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("bootlink-lava.json")).unwrap()).unwrap();
    assert_eq!(m["variants"][0]["initramfs_sha256"].as_str().map(str::len), Some(64));
    m["variants"][0]["initramfs_sha256"] = "00".repeat(32).into();
    std::fs::write(other.join("bootlink-lava.json"), serde_json::to_vec(&m).unwrap()).unwrap();
    let twice = dir.join("twice");
    let o = TestCommand::new(&[&"lava", &"import", &"--jobs", &dir, &"-o", &twice])
        .arg(&logs.join("101.yaml"))
        .arg(&logs.join("101.yaml"))
        .cmd_output();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(load(&twice).variants[0].repetitions.len(), 1);
    TestCommand::new(&[&"lava", &"import", &"--jobs", &other, &"-o", &dir.join("o"), &logs.join("101.yaml")])
        .fails_with("a job of other jobs: the initramfs LAVA booted is not variant stock's in these jobs");
    // nothing importable: nothing written, and the exit says so
    let none = dir.join("none");
    let o = TestCommand::new(&[&"lava", &"import", &"--jobs", &dir, &"-o", &none, &logs.join("103.yaml"), &foreign])
        .cmd_output();
    assert!(!o.status.success() && !none.exists());
    assert!(common::stdout(&o).contains("no log imported (2 refused); nothing written"));
    // a jobs directory that is not one
    TestCommand::new(&[&"lava", &"import", &"--jobs", &logs, &"-o", &none, &logs.join("101.yaml")])
        .fails_with("bootlink-lava.json");
}
