//! `bootlink symhash` on Debian's real 6.1 modules: the tables it adds find
//! every export (checked here against the names read independently, sorted
//! as the kernel's linker script sorts them), `.undef.hash` holds each
//! undefined symbol's hash in .symtab order, `__versions` is the same set of
//! records sorted, inputs stay untouched, and bad input fails clearly.

use crate::common;

use std::path::Path;

use bootlink::elf::{ANALYSED_MACHINES, Elf, LE, Want};
use bootlink::module;
use bootlink::symhash::{self, Method, Tables};
use common::*;
use object::read::elf::{SectionHeader, Sym};

fn section<'d>(data: &'d [u8], name: &str) -> &'d [u8] {
    let elf = Elf::parse_for(data, Want::Relocatable, ANALYSED_MACHINES).unwrap();
    elf.named_section_data(name).unwrap().unwrap_or_else(|| panic!("no {name}"))
}

/// Exports of each table, read through bootlink's module reader and sorted
/// by name (the order `SORT(___ksymtab+*)` gives the tables).
fn exports(m: &module::Module) -> [Vec<String>; 2] {
    let mut t: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for e in &m.exports {
        t[e.gpl as usize].push(e.name.clone());
    }
    t.iter_mut().for_each(|v| v.sort());
    t
}

fn sha(p: &Path) -> Vec<u8> {
    sh("sha256sum", &[p.to_str().unwrap()])
}

#[test]
fn tables_find_every_export_of_debian_modules() {
    let k = kernel();
    let out = tmpdir("symhash-all");
    let tree = k.modules.join("kernel");
    let sunrpc_in = module("net/sunrpc/sunrpc.ko");
    let before = sha(&sunrpc_in);
    let o = TestCommand::new(&[&"symhash", &"--json", &"--sort-versions", &"--kernel", &k.vmlinuz, &tree, &"-o", &out])
        .show_dir(&out)
        .ok();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = report["modules"].as_array().unwrap().len();
    assert!(n > 4000, "{n} modules hashed, Debian 6.1 has 4,023");
    assert_eq!(report["errors"].as_array().unwrap().len(), 0);
    assert_eq!(sha(&sunrpc_in), before, "the input was changed");

    for rel in ["net/sunrpc/sunrpc.ko", "drivers/usb/core/usbcore.ko", "fs/jbd2/jbd2.ko", "drivers/mtd/mtd.ko"] {
        check_tables(rel, &module(rel), &out.join(rel));
    }
}

/// The same on Debian's arm64 package: the tables are over names, so an
/// AArch64 module gets the same ones against the arm64 Image; a module of
/// the other machine is refused in one line, the rest of the batch done.
#[test]
fn tables_find_every_export_of_debian_arm64_modules() {
    let test = "tables_find_every_export_of_debian_arm64_modules";
    let Some(a) = arm64::arm64(test) else { return };
    let out = tmpdir("symhash-arm64");
    let tree = a.modules.join("kernel");
    let x86_fat = kernel().modules.join("kernel/fs/fat/fat.ko");
    let o = TestCommand::new(&[
        &"symhash",
        &"--json",
        &"--sort-versions",
        &"--kernel",
        &a.vmlinuz,
        &tree,
        &x86_fat,
        &"-o",
        &out,
    ])
    .cmd_output();
    assert_eq!(o.status.code(), Some(1), "the x86 module fails the batch: {}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = report["modules"].as_array().unwrap().len();
    assert_eq!(n, 3685, "every arm64 module of the package");
    let errors = report["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0]["error"].as_str().unwrap();
    assert!(e.contains("a module for x86_64, the kernel is aarch64: no tables added") && !e.contains('\n'), "{e}");
    for rel in ["net/sunrpc/sunrpc.ko", "drivers/usb/core/usbcore.ko", "fs/jbd2/jbd2.ko", "drivers/mtd/mtd.ko"] {
        check_tables(rel, &a.modules.join("kernel").join(rel), &out.join(rel));
    }
}

/// What `symhash --sort-versions` wrote for `input` at `outp`: tables that
/// find every export and none of the imports, `.undef.hash` in .symtab
/// order, `__versions` the same records sorted, every symbol unchanged.
fn check_tables(rel: &str, input_path: &Path, outp: &Path) {
    {
        let input = module::read_analysed(input_path).unwrap();
        let written = module::read_analysed(outp).unwrap();
        let data = std::fs::read(outp).unwrap();
        let names = exports(&input);
        let (a, b): (Vec<&str>, Vec<&str>) =
            (names[0].iter().map(String::as_str).collect(), names[1].iter().map(String::as_str).collect());
        assert!(a.len() + b.len() > 10, "{rel}: too few exports to test ({})", a.len() + b.len());
        let t = Tables::parse(section(&data, ".ksymhash")).unwrap();
        t.verify([&a, &b]).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for m in Method::ALL {
            for u in input.undefined.iter().take(50) {
                assert_eq!(t.lookup(m, 0, &a, u), None, "{rel}: {} finds its import {u}", m.name());
                assert_eq!(t.lookup(m, 1, &b, u), None, "{rel}: {} finds its import {u}", m.name());
            }
        }
        // .undef.hash: magic, version, count, flags, then one hash per import
        let u = section(&data, ".undef.hash");
        let word = |i: usize| u32::from_le_bytes(u[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(word(0), symhash::tables::UNDEF_MAGIC);
        assert_eq!(word(2) as usize, input.undefined.len(), "{rel}");
        use symhash::tables::{NONE, VERSIONS_INDEXED, VERSIONS_SORTED};
        assert_eq!(word(3), VERSIONS_SORTED | VERSIONS_INDEXED);
        let count = input.undefined.len();
        assert_eq!(u.len(), 16 + 8 * count, "{rel}: hashes and __versions indexes");
        for (i, name) in input.undefined.iter().enumerate() {
            assert_eq!(word(4 + i), symhash::djb(name.as_bytes()), "{rel}: hash of {name}");
            // each import's __versions index names it in the sorted table
            let v = word(4 + count + i);
            match written.versions.get(v as usize) {
                Some((n, _)) => assert_eq!(n, name, "{rel}: __versions index {v} of {name}"),
                None => {
                    assert_eq!(v, NONE, "{rel}: {name}");
                    assert!(!written.versions.iter().any(|(n, _)| n == name), "{rel}: {name} has a record");
                }
            }
        }
        // the loader keeps .ksymhash (SHF_ALLOC), not .undef.hash
        let elf = Elf::parse_for(&data, Want::Relocatable, ANALYSED_MACHINES).unwrap();
        let flags = |name| elf.section(name).unwrap().1.sh_flags(LE);
        assert_eq!(flags(".ksymhash"), object::elf::SHF_ALLOC);
        assert_eq!(flags(".undef.hash"), Default::default());
        // __versions: the same records, sorted by name
        let mut want = input.versions.clone();
        want.sort();
        assert_eq!(written.versions, want, "{rel}: __versions not the same records sorted");
        assert!(written.signature.is_none(), "{rel}: the old signature no longer matches and must go");
        assert_eq!(written.undefined, input.undefined);
        // every symbol keeps its name, value and section
        let (ei, eo) = (std::fs::read(input_path).unwrap(), data.clone());
        let (si, so) = (
            Elf::parse_for(&ei, Want::Relocatable, ANALYSED_MACHINES).unwrap(),
            Elf::parse_for(&eo, Want::Relocatable, ANALYSED_MACHINES).unwrap(),
        );
        let (ti, to) = (si.symbols().unwrap(), so.symbols().unwrap());
        assert_eq!(ti.len(), to.len());
        for (x, y) in ti.iter().zip(to.iter()) {
            assert_eq!(
                (x.st_value(LE), x.st_shndx(LE), x.st_name(LE)),
                (y.st_value(LE), y.st_shndx(LE), y.st_name(LE))
            );
        }
    }
}

#[test]
fn bad_input_fails_clearly_and_writes_nothing() {
    let k = kernel();
    let dir = tmpdir("symhash-bad");
    let out = dir.join("out");
    // a module of another build: the same module with another vermagic
    let mut data = std::fs::read(module("fs/fat/fat.ko")).unwrap();
    let release = k.release.as_bytes();
    let at = data.windows(release.len() + 9).position(|w| w.starts_with(b"vermagic=")).unwrap() + 9;
    data[at] = if data[at] == b'9' { b'8' } else { b'9' };
    let other = dir.join("other.ko");
    std::fs::write(&other, &data).unwrap();
    let err =
        TestCommand::new(&[&"symhash", &"--kernel", &k.vmlinuz, &other, &"-o", &out]).fails_with("another kernel");
    assert!(err.contains("other.ko"), "{err}");
    assert!(!out.join("other.ko").exists());

    // truncated
    let whole = std::fs::read(module("fs/fat/fat.ko")).unwrap();
    let cut = dir.join("cut.ko");
    std::fs::write(&cut, &whole[..whole.len() / 3]).unwrap();
    let err = TestCommand::new(&[&"symhash", &"--kernel", &k.vmlinuz, &cut, &"-o", &out]).fails_with("cut.ko");
    assert!(err.contains("truncated") || err.contains("outside the file"), "{err}");
    assert!(!out.join("cut.ko").exists());

    // tables twice
    let once = dir.join("once");
    TestCommand::new(&[&"symhash", &"--kernel", &k.vmlinuz, &module("fs/fat/fat.ko"), &"-o", &once]).ok();
    TestCommand::new(&[&"symhash", &"--kernel", &k.vmlinuz, &once.join("fat.ko"), &"-o", &out])
        .fails_with("already has symbol hash tables");

    // a vmlinux without the reserved section (Debian's, unpatched)
    let vml = dir.join("vmlinux");
    let img = bootlink::kernel::KernelImage::open(&k.vmlinuz, None).unwrap();
    drop(img);
    let data = bootlink::kernel::find_vmlinux(bootlink::fsutil::map_file(&k.vmlinuz).unwrap()).unwrap().data;
    std::fs::write(&vml, &data[..]).unwrap();
    let before = sha(&vml);
    TestCommand::new(&[&"symhash", &"--vmlinux", &vml]).fails_with("no __ksymhash section");
    assert_eq!(sha(&vml), before, "a refused vmlinux was changed");
}
