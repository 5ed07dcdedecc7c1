//! The module hash manifest on the self-built kernel (kernel/patches 0012)
//! under QEMU, with `module.sig_enforce=1`: unsigned modules load when the
//! kernel image lists them (`--variant ...,manifest:on`), are refused
//! without the list and with `module.hashes=0`; the image the variant booted
//! lists exactly the modules it loaded (`bootlink manifest show`). One
//! untraced realtime boot per variant over a few modules of the lab's set.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use bootlink::run::results::Run;
use common::TestCommand;

/// A few modules of the lab's set with dependencies among them.
const MODULES: &[&str] = &["sctp", "nls_cp437", "crc32c_generic"];
const ENFORCE: &str = "module.sig_enforce=1";

fn lab() -> (Run, PathBuf) {
    let k = common::self_built(false);
    let out = common::tmpdir("manifest-boot").join("run");
    let vmlinux = k.dir.join("vmlinux");
    let modules = k.dir.join("lib/modules").join(&k.release);
    let listed = format!("listed=modules:unsigned,manifest:on,cmdline:{ENFORCE}");
    let unlisted = format!("unlisted=modules:unsigned,cmdline:{ENFORCE}");
    let off = format!("off=modules:unsigned,manifest:on,cmdline:{ENFORCE} module.hashes=0");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
        &"lab",
        &"--no-trace",
        &"--realtime",
        &"--kernel",
        &vmlinux,
        &"--modules",
        &modules,
        &"--variant",
        &listed,
        &"--variant",
        &unlisted,
        &"--variant",
        &off,
        &"-o",
        &out,
    ];
    for m in MODULES {
        args.push(m);
    }
    // Refused modules make the lab's checks fail: read run.json either way.
    let o = TestCommand::new(&args).cmd_output();
    let text = std::fs::read(out.join("run.json"))
        .unwrap_or_else(|e| panic!("no run.json ({e}):\n{}\n{}", common::stdout(&o), common::stderr(&o)));
    (serde_json::from_slice(&text).unwrap(), out)
}

#[test]
fn listed_modules_load_unsigned_under_sig_enforce_and_only_they() {
    let (run, out) = lab();
    let by_name = |n: &str| run.variants.iter().find(|v| v.name == n).unwrap_or_else(|| panic!("no variant {n}"));
    let statuses = |n: &str| -> Vec<i32> { by_name(n).repetitions[0].modules.iter().map(|m| m.status).collect() };
    let listed = statuses("listed");
    assert!(!listed.is_empty() && listed.iter().all(|&s| s == 0), "listed: {listed:?}");
    for n in ["unlisted", "off"] {
        let s = statuses(n);
        assert!(!s.is_empty() && s.iter().all(|&s| s != 0), "{n}: an unsigned module loaded under sig_enforce: {s:?}");
        let log = std::fs::read_to_string(out.join(&by_name(n).repetitions[0].log)).unwrap();
        assert!(log.contains("Loading of unsigned module is rejected"), "{n}: the kernel's refusal is in its log");
    }
    let log = std::fs::read_to_string(out.join(&by_name("listed").repetitions[0].log)).unwrap();
    let n = listed.len();
    assert!(log.contains(&format!("module hashes: {n} modules of this build trusted")), "listed's log");
    assert!(!log.contains("tainting kernel"), "a listed module tainted the kernel");

    // The kernel listed's variant booted lists exactly what it loaded.
    let kernel = &by_name("listed").kernel;
    assert!(kernel.starts_with(&out), "the filled kernel is kept in the run: {}", kernel.display());
    let shown = TestCommand::new(&[&"manifest", &"show", &"--json", kernel]).ok();
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let digests: BTreeSet<String> =
        v["digests"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect();
    assert_eq!(digests.len(), n, "{v}");
    assert!(!by_name("unlisted").kernel.starts_with(&out), "unlisted boots the build's own (empty) list");
}
