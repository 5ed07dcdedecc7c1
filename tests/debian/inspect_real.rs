//! `bootlink inspect` and the kernel/module readers on a real Debian kernel
//! package: the figures ../shared/MEASURED.md lists for
//! linux-image-6.1.0-56-amd64, or invariants on a newer 6.1 package; the
//! exports against Debian's Module.symvers and inspect's totals against
//! binutils' `nm` with it, counts bootlink's reader did not make.

use crate::common;

use std::collections::HashMap;

use bootlink::compress::Compression;
use bootlink::kernel::{Kaslr, KernelImage};
use bootlink::module;
use common::*;
use common::{arm64, independent};

#[test]
fn exports_release_and_kaslr_from_vmlinuz() {
    let k = kernel();
    let img = KernelImage::open(&k.vmlinuz, None).unwrap();
    let gpl = img.gpl_exports();
    println!(
        "{}: {} exports ({} + {} GPL-only), release {:?}",
        k.package,
        img.exports.len(),
        img.exports.len() - gpl,
        gpl,
        img.release
    );
    assert_eq!(img.release.as_deref(), Some(k.release.as_str()));
    assert_eq!(img.vermagic.as_deref(), Some(format!("{} SMP preempt mod_unload modversions ", k.release).as_str()));
    assert!(matches!(img.kaslr, Kaslr::Possible { .. }), "{:?}", img.kaslr);
    assert!(img.exports.iter().all(|e| e.crc.is_some()));
    // Text and data live in the kernel's high half; per-CPU variables are
    // offsets into the per-CPU area, linked at 0 on x86_64.
    let percpu = img.exports.iter().filter(|e| e.addr < 0x10_0000).count();
    assert!(img.exports.iter().all(|e| e.addr >= 0xffff_ffff_8000_0000 || e.addr < 0x10_0000));
    assert!(percpu > 10 && img.exports.iter().any(|e| e.name == "cpu_number" && e.addr < 0x10_0000), "{percpu}");
    if reference("exports_release_and_kaslr_from_vmlinuz: export counts", k) {
        assert_eq!(img.exports.len(), 10_503);
        assert_eq!(gpl, 5_526);
        assert_eq!(img.exports.len() - gpl, 4_977);
    }
    // Names are unique (Kbuild guarantees it), and the raw vmlinux reads the same.
    let mut names: Vec<&str> = img.exports.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), img.exports.len());
    let raw = KernelImage::open(&k.vmlinux, Some(&k.config)).unwrap();
    assert_eq!(raw.exports.len(), img.exports.len());
    assert!(raw.exports.iter().zip(&img.exports).all(|(a, b)| a.name == b.name && a.addr == b.addr && a.crc == b.crc));
}

#[test]
fn crcs_gpl_flags_and_namespaces_equal_debians_module_symvers() {
    let k = kernel();
    let symvers = std::path::PathBuf::from(format!("/usr/src/linux-headers-{}/Module.symvers", k.release));
    if !symvers.is_file() {
        common::skip(
            "Module.symvers",
            &format!("{} absent (make test installs linux-headers-{})", symvers.display(), k.release),
        );
        return;
    }
    let text = std::fs::read_to_string(&symvers).unwrap();
    let theirs: HashMap<&str, bootlink::kernel::sysmap::SymversEntry> = bootlink::kernel::sysmap::parse_symvers(&text)
        .unwrap()
        .into_iter()
        .filter(|e| e.module == "vmlinux")
        .map(|e| (e.name, e))
        .collect();
    let img = KernelImage::open(&k.vmlinuz, None).unwrap();
    assert_eq!(theirs.len(), img.exports.len());
    for e in &img.exports {
        let t = theirs.get(e.name.as_str()).unwrap_or_else(|| panic!("{} not in Module.symvers", e.name));
        assert_eq!((e.crc, e.gpl, e.namespace.as_deref()), (Some(t.crc), t.gpl, t.namespace), "{}", e.name);
    }
    println!("{} exports agree with {} (CRC, GPL flag, namespace)", img.exports.len(), symvers.display());
}

#[test]
fn inspect_all_modules_of_the_package() {
    let k = kernel();
    let o = run(&[&"inspect", &"--json", &k.vmlinuz, &k.modules]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &r["totals"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    println!("totals: {t}");
    let files = bootlink::tree::find_modules(std::slice::from_ref(&k.modules)).unwrap().len() as u64;
    assert_eq!(n(&t["modules"]), files);
    assert_eq!(n(&t["vmlinux"]) + n(&t["modules_only"]) + n(&t["unresolved"]), n(&t["undefined"]));
    let mods = r["modules"].as_array().unwrap();
    assert_eq!(mods.iter().map(|m| n(&m["undefined"])).sum::<u64>(), n(&t["undefined"]));
    assert_eq!(mods.iter().map(|m| n(&m["vmlinux"])).sum::<u64>(), n(&t["vmlinux"]));
    assert_eq!(mods.iter().filter(|m| m["fully_preresolvable"] == true).count() as u64, n(&t["fully_preresolvable"]));
    assert_eq!(n(&t["unresolved"]), 0, "every undefined symbol is exported by vmlinux or a module of the package");
    assert!(r["errors"].as_array().unwrap().is_empty());
    // The same totals counted another way: each module's undefined symbols
    // by binutils' `nm -u`, resolved against Debian's own Module.symvers.
    let symvers = std::path::PathBuf::from(format!("/usr/src/linux-headers-{}/Module.symvers", k.release));
    if symvers.is_file() {
        let want = independent::totals(&independent::undefined_by_nm(&k.modules), &arm64::read_symvers(&symvers));
        independent::assert_inspect_equals(&r, &want);
        println!("every total and every module's figures equal nm's count against {}", symvers.display());
    } else {
        common::skip(
            "inspect_all_modules_of_the_package",
            &format!("{} absent (make test installs linux-headers-{})", symvers.display(), k.release),
        );
    }
    if reference("inspect totals of the package", k) {
        assert_eq!(n(&t["modules"]), 4_023);
        assert_eq!(n(&t["undefined"]), 184_890);
        assert_eq!(n(&t["vmlinux"]), 143_845);
        assert_eq!(n(&t["modules_only"]), 41_045);
        assert_eq!(n(&t["distinct_names"]), 18_111);
        assert_eq!(n(&t["fully_preresolvable"]), 1_076);
        let by_name: HashMap<&str, &serde_json::Value> =
            mods.iter().map(|m| (m["name"].as_str().unwrap(), m)).collect();
        for (name, undef, vml) in [
            ("i915", 1160, 705),
            ("amdgpu", 957, 591),
            ("ext4", 616, 551),
            ("mlx5_core", 605, 600),
            ("btrfs", 569, 558),
        ] {
            let m = by_name[name];
            assert_eq!((n(&m["undefined"]), n(&m["vmlinux"])), (undef, vml), "{name}");
        }
    }
    // The human form carries the same totals.
    let o = run(&[&"inspect", &"--top", &"5", &k.vmlinuz, &k.modules]);
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "Undefined symbol references  {}",
            bootlink::table::thousands(n(&t["undefined"]) as usize)
        )),
        "{text}"
    );
    assert_eq!(text.lines().filter(|l| l.contains(".ko ")).count(), 5, "{text}");
}

#[test]
fn module_fields_of_a_real_module() {
    let m = module::read(&module("fs/fat/fat.ko")).unwrap();
    assert_eq!(m.name, "fat");
    assert_eq!(m.license(), Some("GPL"));
    assert_eq!(m.machine, "x86_64");
    assert!(m.signature.is_some(), "Debian modules are signed");
    assert!(!m.preresolved);
    assert!(m.exports.iter().any(|e| e.name == "fat_fill_super" && e.gpl));
    assert!(m.exports.iter().all(|e| e.crc.is_some()));
    // Every undefined symbol has a __versions CRC (MODVERSIONS=y).
    let versioned: std::collections::HashSet<&str> = m.versions.iter().map(|(n, _)| n.as_str()).collect();
    assert!(m.undefined.iter().all(|u| versioned.contains(u.as_str())), "{:?}", m.undefined);
    let ns = module::read(&module("drivers/usb/storage/uas.ko")).unwrap();
    assert_eq!(ns.import_ns(), vec!["USB_STORAGE"]);
    let ext4 = module::read(&module("fs/ext4/ext4.ko")).unwrap();
    assert_eq!(ext4.depends(), vec!["jbd2", "mbcache", "crc16"]);
}

/// The kernel compresses modules with `xz --check=crc32`, `zstd` and `gzip`;
/// each reads exactly like the plain module.
#[test]
fn compressed_modules_read_like_plain_ones() {
    let dir = tmpdir("compressed");
    let plain = module::read(&module("fs/fat/fat.ko")).unwrap();
    for (tool, args, suffix, kind) in [
        ("xz", vec!["--check=crc32", "--lzma2=dict=1MiB", "-k"], "xz", Compression::Xz),
        ("zstd", vec!["-q", "-k"], "zst", Compression::Zstd),
        ("gzip", vec!["-k", "-9"], "gz", Compression::Gzip),
    ] {
        let p = copy_to(&module("fs/fat/fat.ko"), &dir, "fat.ko");
        let mut a = args.clone();
        let ps = p.to_str().unwrap();
        a.push(ps);
        sh(tool, &a);
        let c = module::read(&dir.join(format!("fat.ko.{suffix}"))).unwrap();
        assert_eq!(c.compression, kind);
        assert_eq!(
            (&c.undefined, &c.versions, c.exports.len(), &c.modinfo),
            (&plain.undefined, &plain.versions, plain.exports.len(), &plain.modinfo)
        );
        assert_eq!(c.signature, plain.signature);
        std::fs::remove_file(&p).unwrap();
    }
    let o = run(&[&"inspect", &"--json", &kernel().vmlinuz, &dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["totals"]["modules"], 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A vmlinux compressed as a whole with zstd or gzip (as other boot wrappers
/// carry it) gives the same exports as the bzImage.
#[test]
fn zstd_and_gzip_compressed_vmlinux() {
    let k = kernel();
    let dir = tmpdir("vmlinux-z");
    let reference = KernelImage::open(&k.vmlinuz, None).unwrap();
    for (tool, args, name) in
        [("zstd", vec!["-q", "-1", "-o"], "vmlinux.zst"), ("gzip", vec!["-1", "-c"], "vmlinux.gz")]
    {
        let out = dir.join(name);
        if tool == "zstd" {
            let mut a = args.clone();
            a.push(out.to_str().unwrap());
            a.push(k.vmlinux.to_str().unwrap());
            sh(tool, &a);
        } else {
            let mut a = args.clone();
            a.push(k.vmlinux.to_str().unwrap());
            std::fs::write(&out, sh(tool, &a)).unwrap();
        }
        let img = KernelImage::open(&out, Some(&k.config)).unwrap();
        assert_eq!(img.exports.len(), reference.exports.len(), "{name}");
        assert_eq!(img.release, reference.release);
        assert!(img.source.describe().contains(if tool == "zstd" { "zstd" } else { "gzip" }));
    }
    let o = run(&[&"extract-vmlinux", &k.vmlinuz, &"-o", &dir.join("vmlinux")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(dir.join("vmlinux")).unwrap(), std::fs::read(&k.vmlinux).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}
