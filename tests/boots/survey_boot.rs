//! `bootlink survey` on Debian's kernel: a small tree of Debian's own
//! modules and four test modules built against Debian's headers (one whose
//! init fails, one that needs it, one whose init oopses, one that loads).
//! Every module gets the outcome it must: the oops kills the first boot and
//! is named with the console's fault, the survey goes on in a second boot
//! from the next module, kvm_intel fails for want of VMX with the kernel's
//! reason, and the loadable list holds exactly the modules that loaded, in
//! an order `bootlink lab --set` accepts.

use crate::common;

use std::path::Path;

use serde_json::Value;

#[test]
fn a_survey_names_what_fails_and_what_kills_the_guest_and_goes_on() {
    let test = "survey_boot";
    let k = common::kernel();
    if !common::reference(test, k) {
        return;
    }
    let headers = format!("/usr/src/linux-headers-{}", k.release);
    if !Path::new(&headers).join("Makefile").is_file() {
        return common::skip(test, &format!("no {headers}: apt-get install linux-headers-{}", k.release));
    }
    let tmp = common::tmpdir("survey");
    let built = tmp.join("built");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules");
    common::sh(
        "make",
        &["-s", "-C", src.to_str().unwrap(), "survey", &format!("KDIR={headers}"), &format!("O={}", built.display())],
    );
    // A tree of the release: a few of Debian's modules, ours under extra/.
    let tree = tmp.join("lib/modules").join(&k.release);
    for rel in [
        "kernel/fs/fat/fat.ko",
        "kernel/fs/fat/vfat.ko",
        "kernel/virt/lib/irqbypass.ko",
        "kernel/arch/x86/kvm/kvm.ko",
        "kernel/arch/x86/kvm/kvm-intel.ko",
        "modules.builtin",
        "modules.builtin.modinfo",
    ] {
        let dest = tree.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(k.modules.join(rel), &dest).unwrap();
    }
    std::fs::create_dir_all(tree.join("extra")).unwrap();
    for m in ["bl_fail", "bl_needs_fail", "bl_oops", "bl_plain"] {
        std::fs::copy(built.join(format!("{m}.ko")), tree.join(format!("extra/{m}.ko"))).unwrap();
    }
    let out = tmp.join("survey");
    let o = common::TestCommand::new(&[
        &"survey",
        &"--kernel",
        &k.vmlinux,
        &"--modules",
        &tree,
        &"--timeout",
        &"240",
        &"-o",
        &out,
        &"--json",
    ])
    .ok();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let outcome = |name: &str| -> &Value {
        r["modules"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap_or_else(|| panic!("{name}: {r}"))
    };
    for name in ["bl_plain", "irqbypass", "kvm", "fat", "vfat"] {
        assert_eq!(outcome(name)["outcome"], "loaded", "{name}: {}", outcome(name));
    }
    let fail = outcome("bl_fail");
    assert_eq!(fail["outcome"], "failed");
    assert!(fail["reason"].as_str().unwrap().starts_with("No such device"), "{fail}");
    assert!(fail["reason"].as_str().unwrap().contains("bl_fail: init fails on purpose"), "{fail}");
    let needs = outcome("bl_needs_fail");
    assert_eq!((needs["outcome"].as_str(), needs["dependency"].as_str()), (Some("needs_failed"), Some("bl_fail")));
    let kvm = outcome("kvm_intel");
    assert_eq!(kvm["outcome"], "failed");
    assert!(kvm["reason"].as_str().unwrap().contains("no hardware support"), "{kvm}");
    let oops = outcome("bl_oops");
    assert_eq!(oops["outcome"], "killed_guest", "{oops}");
    assert!(!oops["fault"].as_str().unwrap().is_empty(), "{oops}");
    // The oops ended the first boot; the second went on from the next module.
    let batches = r["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 2, "{r}");
    assert_eq!((batches[0]["completed"].as_bool(), batches[1]["completed"].as_bool()), (Some(false), Some(true)));
    assert_eq!(oops["batch"], 0);
    assert_eq!(outcome("bl_plain")["batch"], 1);
    assert_eq!(
        (r["surveyed"].as_u64(), r["loaded"].as_u64(), r["failed"].as_u64(), r["needs_failed"].as_u64()),
        (Some(9), Some(5), Some(2), Some(1))
    );
    // The loadable list: exactly what loaded, in an order the lab takes.
    let list = std::fs::read_to_string(out.join("loadable.list")).unwrap();
    let mut listed: Vec<&str> = list.lines().collect();
    let pos = |rel: &str| listed.iter().position(|l| *l == rel).unwrap_or_else(|| panic!("{rel} not in {list}"));
    assert!(pos("kernel/virt/lib/irqbypass.ko") < pos("kernel/arch/x86/kvm/kvm.ko"));
    assert!(pos("kernel/fs/fat/fat.ko") < pos("kernel/fs/fat/vfat.ko"));
    listed.sort_unstable();
    assert_eq!(
        listed,
        [
            "extra/bl_plain.ko",
            "kernel/arch/x86/kvm/kvm.ko",
            "kernel/fs/fat/fat.ko",
            "kernel/fs/fat/vfat.ko",
            "kernel/virt/lib/irqbypass.ko"
        ]
    );
    // Nothing else written: one lab run per boot, the report, the list.
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["batch-000", "batch-001", "loadable.list", "survey.json"]);
    // A second survey into the same directory is refused.
    let again = common::run(&[&"survey", &"--kernel", &k.vmlinux, &"--modules", &tree, &"-o", &out]);
    assert!(!again.status.success() && common::stderr(&again).contains("already holds a survey"));
    // Bad requests are refused in one line before anything boots.
    let fresh = tmp.join("refused");
    for (args, said) in [
        (vec!["--set", "nothere"], "--set \"nothere\": neither a named set"),
        (vec!["--batch", "0"], "--batch must be at least 1"),
        (vec!["--set", "none", "vfat"], "give either --set or module names, not both"),
    ] {
        let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"survey", &"--kernel", &k.vmlinux, &"--modules", &tree, &"-o", &fresh];
        all.extend(args.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
        let o = common::run(&all);
        assert!(!o.status.success() && common::stderr(&o).contains(said), "{args:?}: {}", common::stderr(&o));
        assert!(!fresh.exists(), "{args:?}: wrote {}", fresh.display());
    }
    common::report(
        "survey (Debian's kernel, 9 modules)",
        &format!("{} boots, {:.0} s", batches.len(), r["wall_s"].as_f64().unwrap_or(0.0)),
    );
}
