//! The lab on Debian's newest 6.12 package (fetched, not built): its
//! modules are `.ko.xz`, read by the kernel with kernel_read_file; the lab
//! decompresses them on the host for every variant, still finds the read
//! phase, and folded preresolving works there too. Moved here from
//! `tests/boots/lab_run.rs` (issue 44: a second kernel line is the
//! extended tier's; tier 3 boots Debian's 6.1 and the self-built kernel).

use crate::common;

use bootlink_lab::run::results::{Repetition, Run};

fn variant<'a>(run: &'a Run, name: &str) -> &'a [Repetition] {
    &common::variant(run, name).repetitions
}

/// Debian's 6.12 ships `.ko.xz` modules and reads them with
/// kernel_read_file: the lab decompresses on the host for every variant,
/// still finds the read phase, and folded preresolving works there too.
#[test]
fn a_newer_kernel_with_compressed_modules() {
    let k =
        bootlink::fetch::fetch(&bootlink::fetch::Request::Series("6.12".into())).expect("fetch Debian's newest 6.12");
    println!("kernel: {} {}", k.package, k.version);
    let fat = k.modules.join("kernel/fs/fat");
    assert!(fat.join("vfat.ko.xz").is_file(), "6.12 modules are xz-compressed");
    let scratch = common::tmpdir("lab-612");
    let d = scratch.join("run");
    let o = common::run(&[
        &"lab",
        &"vfat",
        &"--kernel",
        &k.vmlinux,
        &"--modules",
        &k.modules,
        &"--variant",
        &"stock",
        &"--variant",
        &"folded",
        &"-o",
        &d,
    ]);
    assert!(o.status.success(), "{}\n{}", common::stdout(&o), common::stderr(&o));
    print!("{}", common::stdout(&o));
    let run: Run = serde_json::from_slice(&std::fs::read(d.join("run.json")).unwrap()).unwrap();
    assert_eq!(run.kernel_release, k.release);
    for v in ["stock", "folded"] {
        let r = &variant(&run, v)[0];
        assert_eq!(r.modules.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
        for m in &r.modules {
            assert_eq!(m.status, 0, "{v}: {}", m.name);
            let read = m.phases.iter().find(|p| p.name == "read").map(|p| p.duration_us).unwrap_or(0.0);
            assert!(read > 0.0, "{v}: {}: read phase found", m.name);
        }
    }
    let lookups = |v: &str| variant(&run, v)[0].modules.iter().map(|m| m.lookups.unwrap()).sum::<u64>();
    assert!(lookups("folded") < lookups("stock"));
}
