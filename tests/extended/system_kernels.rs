//! The real Debian system (tests/boots/system_boot.rs) with bootlink's
//! kernel instead of Debian's: the series built with Debian's own config
//! (`kernel build --config debian`, made first when the cache has none:
//! about an hour on 2 cores), put into Debian's own linux-image package in
//! place of Debian's image, installed with dpkg, booted under
//! `module.sig_enforce=1` with KASLR on:
//!
//! - `patched`: Debian's modules signed again with the build's key (the
//!   kernel trusts its build's key, not Debian's): every module udev and
//!   systemd load passes its signature check, none is refused;
//! - `applied`: Debian's modules taken through `bootlink apply`'s whole
//!   plan (their hashes listed in the image instead of signatures,
//!   finalized, symbol tables): the same modules load, none refused, and
//!   module loading takes less of the boot than with `patched`.
//!
//! Each package's record says what apply did; each boot's record the
//! kernel's KASLR and the modules. Two boots of several minutes each under
//! TCG, run at once (one core each), and each image made once (apply,
//! dpkg-deb, mmdebstrap).

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

const TEST: &str = "system_kernels";

fn boot(kernel: &str, dir: &Path) -> serde_json::Value {
    let t0 = std::time::Instant::now();
    common::TestCommand::new(&[&"system", &"--kernel", &kernel, &"-o", &dir, &"--json"]).show_dir(dir).ok();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("system.json")).unwrap()).unwrap();
    common::report(
        TEST,
        &format!(
            "{kernel}: {:.0} s wall; multi-user.target at {:.0} ms, module loading {:.0} ms, {} modules",
            t0.elapsed().as_secs_f64(),
            v["boot"]["multi_user_ms"].as_f64().unwrap_or(0.0),
            v["boot"]["loading"]["busy_us"].as_f64().unwrap_or(0.0) / 1000.0,
            v["boot"]["modules"].as_array().map_or(0, Vec::len),
        ),
    );
    v
}

fn modules(v: &serde_json::Value) -> BTreeSet<String> {
    v["boot"]["modules"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap().to_string()).collect()
}

/// The checks every boot of a patched kernel must pass: a clean boot,
/// KASLR on, every module checked and none refused or tainting.
fn clean(kernel: &str, v: &serde_json::Value, dir: &Path) {
    let b = &v["boot"];
    assert_eq!(b["problems"].as_array().map_or(1, Vec::len), 0, "{kernel}: {}", b["problems"]);
    assert_eq!(b["state"], "running", "{kernel}: failed units {}", b["failed_units"]);
    assert_eq!(b["kaslr"], true, "{kernel}: _text at {}", b["kernel_text"]);
    assert!(v["cmdline"].as_str().unwrap().contains("module.sig_enforce=1"), "{}", v["cmdline"]);
    assert_eq!(b["failed_loads"].as_array().map_or(1, Vec::len), 0, "{kernel}: {}", b["failed_loads"]);
    let log = std::fs::read_to_string(dir.join("console.log")).unwrap();
    for bad in ["Key was rejected", "module verification failed", "Loading of unsigned module"] {
        assert!(!log.contains(bad), "{kernel}: the console says {bad:?}");
    }
    assert!(modules(v).contains("virtio_blk"), "{kernel}: the root disk's driver");
}

#[test]
fn patched_and_applied_debian_systems_load_every_module_checked() {
    if !common::can_boot_system(TEST) {
        return;
    }
    let t0 = std::time::Instant::now();
    let o = common::TestCommand::new(&[&"kernel", &"build", &"--config", &"debian", &"--json"]).ok();
    let build: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    common::report(TEST, &format!("kernel build --config debian: {:.0} s", t0.elapsed().as_secs_f64()));
    let dir = common::tmpdir("system-kernels").keep();

    // Both boots at once: each makes its own package and image (under the
    // caches' locks) and boots on the instruction-counted clock, so what
    // one measures does not depend on the other, and the core one leaves
    // idle the other uses (issue 44: one after the other they took 301 s).
    let (patched, applied) = std::thread::scope(|s| {
        let patched = s.spawn(|| boot("patched", &dir.join("patched")));
        let applied = s.spawn(|| boot("applied", &dir.join("applied")));
        let join = |h: std::thread::ScopedJoinHandle<'_, serde_json::Value>| {
            h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
        };
        (join(patched), join(applied))
    });
    clean("patched", &patched, &dir.join("patched"));
    assert_eq!(patched["image"]["kernel"], "patched");
    assert_eq!(patched["image"]["steps"], serde_json::json!(["sign"]));
    assert!(patched["image"]["kernel_version"].as_str().unwrap().contains("+bootlink."));

    clean("applied", &applied, &dir.join("applied"));
    let steps: Vec<&str> = applied["image"]["steps"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert!(steps.contains(&"manifest") && steps.contains(&"finalize") && !steps.contains(&"sign"), "{steps:?}");
    assert_eq!(
        applied["image"]["release"], build["release"],
        "the package keeps Debian's release: Debian's modules' vermagic"
    );

    // The same drivers for the same PC, each checked; less time loading.
    assert_eq!(modules(&patched), modules(&applied));
    let busy = |v: &serde_json::Value| v["boot"]["loading"]["busy_us"].as_f64().unwrap();
    assert!(busy(&applied) < busy(&patched), "applied {} us, patched {} us", busy(&applied), busy(&patched));
}
