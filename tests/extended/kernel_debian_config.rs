//! The series built with Debian's own config keeps Debian's module ABI
//! (issue 26): `bootlink kernel build --config debian` (Debian's config
//! and release of the tested line, 6.1 or BOOTLINK_TEST_LINE=6.12, the
//! series' options, the image alone), then
//!
//! - `bootlink kernel abi`: every vmlinux export in Debian's
//!   Module.symvers (linux-headers-<release>) is in the build with the same
//!   CRC;
//! - a boot of that image under QEMU loads Debian's own modules, as Debian
//!   ships them, and a module built against Debian's headers (bl_plain,
//!   tests/modules), with no "disagrees about version of symbol" and no
//!   "bad gnu.linkonce.this_module" (struct module's size is the one
//!   Debian's modules were built with).
//!
//! A Debian-config vmlinux is a long build on 2 cores (cached by content
//! and resumed when interrupted): the extended tier (`make test-extended`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bootlink_lab::lab::{Initramfs, QemuOptions, busybox};

/// Debian's modules the boot loads (with their dependencies, in order), by
/// name: 6.1 ships them as `.ko`, 6.12 as `.ko.xz` (copied decompressed).
const DEBIAN_MODULES: &[&str] = &[
    "fat",
    "vfat",
    "nls_cp437",
    // libcrc32c's init asks the crypto API for crc32c (its softdep)
    "crc32c_generic",
    "libcrc32c",
    "udp_tunnel",
    "ip6_udp_tunnel",
    "sctp",
    // exports blake2b_compress_generic: the series must not export it
    // from vmlinux too (patch `blake2b-lib`; `kernel abi` says "clashing")
    "blake2b_generic",
];

struct Built {
    vmlinux: PathBuf,
    symvers: PathBuf,
    release: String,
    modules: Option<PathBuf>,
}

fn build() -> Built {
    let t0 = std::time::Instant::now();
    let o = common::TestCommand::new(&[
        &"kernel",
        &"build",
        &"--lab",
        &"--line",
        &common::line(),
        &"--config",
        &"debian",
        &"--json",
    ])
    .ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Its options come back whole from its build.json (what `apply` and
    // `manifest write --bzimage` make the tree hold again): a whole
    // config, Debian's release, the image alone.
    let report: bootlink::kbuild::Report = serde_json::from_slice(&o.stdout).unwrap();
    let opts = bootlink::kbuild::options_of(&report).unwrap().expect("the Debian-config build's options");
    assert!(
        matches!(opts.base, bootlink::kbuild::ConfigBase::Whole(_))
            && opts.lab_series.is_some()
            && !opts.modules
            && opts.release.as_deref() == Some(report.release.as_str()),
        "{opts:?}"
    );
    common::report(
        "kernel build --config debian",
        &format!("{} in {:.0} s (cached: {})", v["release"], t0.elapsed().as_secs_f64(), v["cached"]),
    );
    Built {
        vmlinux: v["vmlinux"].as_str().unwrap().into(),
        symvers: v["module_symvers"].as_str().unwrap().into(),
        release: v["release"].as_str().unwrap().into(),
        modules: v["modules"].as_str().map(PathBuf::from),
    }
}

fn debian_headers(release: &str) -> Option<PathBuf> {
    let d = PathBuf::from(format!("/usr/src/linux-headers-{release}"));
    d.join("Module.symvers").is_file().then_some(d)
}

#[test]
fn debian_config_build_keeps_debians_module_abi_and_loads_its_modules() {
    let test = "kernel_debian_config";
    let k = common::debian_of_line();
    // 6.1: the reference package (its exact release); 6.12: the newest one
    if common::line() == "6.1" && !common::reference(test, k) {
        return;
    }
    let Some(headers) = debian_headers(&k.release) else {
        return common::skip(
            test,
            &format!("no /usr/src/linux-headers-{}: apt-get install linux-headers-{}", k.release, k.release),
        );
    };
    let b = build();
    assert_eq!(b.release, k.release, "built as Debian's release");
    assert!(b.modules.is_none(), "the image alone: Debian's modules are used as they are");

    // The ABI: vmlinux's exports and their CRCs.
    let theirs = headers.join("Module.symvers");
    let o = common::run(&[&"kernel", &"abi", &b.symvers, &theirs]);
    let said = common::stdout(&o);
    common::report("kernel abi (ours vs Debian's)", &said);
    assert!(o.status.success() && said.contains("ABI kept"), "{said}{}", common::stderr(&o));

    // A module built against Debian's headers.
    let out = common::tmpdir("debian-config-modules");
    let m = Command::new("make")
        .arg("-C")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules"))
        .arg(format!("KDIR={}", headers.display()))
        .arg(format!("O={}", out.display()))
        .arg("main")
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL")
        .output()
        .unwrap();
    assert!(m.status.success(), "building bl_plain: {}", common::stderr(&m));

    // Boot: Debian's modules as shipped, then bl_plain.
    let bb = busybox::busybox().unwrap();
    let mut ir = Initramfs::new(&bb);
    let mut script = String::from("set -e\n");
    let tree = bootlink::kmod::ModTree::read(&k.modules).unwrap();
    for (i, name) in DEBIAN_MODULES.iter().enumerate() {
        let e = tree.module(name).unwrap_or_else(|| panic!("{name} is not a module of {}", k.release));
        let (bytes, _) = bootlink::module::load_bytes(&e.path).unwrap();
        let dest = format!("m/{i}.ko");
        ir.file(&dest, 0o644, bytes.to_vec());
        script += &format!("insmod /{dest}\n");
    }
    ir.copy_file("m/bl_plain.ko", out.join("bl_plain.ko"));
    script += "insmod /m/bl_plain.ko\ncat /proc/modules\n";
    let initrd = out.join("initrd.cpio");
    ir.tag("abi").body(&script).write(&initrd).unwrap();
    let opts = QemuOptions {
        initrd: Some(initrd),
        cmdline: "console=ttyS0 nokaslr".into(),
        timeout: Duration::from_secs(180),
        ..QemuOptions::new(&b.vmlinux)
    };
    let boot = bootlink_lab::lab::qemu::run(&opts).unwrap();
    if let Err(e) = boot.check() {
        panic!("{e}");
    }
    let loaded = boot.framed("abi").unwrap_or_else(|| panic!("no framed output:\n{}", boot.excerpt(40)));
    for name in ["fat", "vfat", "nls_cp437", "sctp", "bl_plain"] {
        assert!(loaded.lines().any(|l| l.starts_with(&format!("{name} "))), "{name} not loaded:\n{loaded}");
    }
    for bad in ["disagrees about version of symbol", "bad gnu.linkonce.this_module", "Unknown symbol"] {
        assert!(!boot.log.contains(bad), "\"{bad}\" in the console:\n{}", boot.excerpt(40));
    }
    common::report("Debian's modules on the Debian-config build", &loaded);
}
