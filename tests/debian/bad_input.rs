//! Bad input: each case is one line on stderr naming the file and the
//! problem, a non-zero exit, and no panic. In a tree, a bad module is
//! reported and the rest are still processed.

use crate::common;

use std::path::Path;

use common::*;

/// Run `bootlink inspect KERNEL PATH` and return stderr; assert failure,
/// no panic, and a single error line that names `named`.
fn one_error(kernel: &Path, path: &Path, named: &Path) -> String {
    let o = run(&[&"inspect", &kernel, &path]);
    let err = stderr(&o);
    assert!(!o.status.success(), "expected failure for {}: {err}", path.display());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("bootlink: ") && err.contains(&named.display().to_string()), "{err}");
    assert!(stdout(&o).is_empty(), "no report when nothing could be read");
    err
}

fn fat() -> std::path::PathBuf {
    module("fs/fat/fat.ko")
}

#[test]
fn truncated_non_elf_32bit_bigendian_and_foreign_elf_modules() {
    let k = &kernel().vmlinuz;
    let dir = tmpdir("bad-modules");
    let good = std::fs::read(fat()).unwrap();
    // The ELF header is whole but the file ends early: the section header
    // table (ld puts it last) runs past its end.
    let p = dir.join("truncated.ko");
    std::fs::write(&p, &good[..good.len() / 3]).unwrap();
    let e = one_error(k, &p, &p);
    assert!(
        e.contains("truncated or corrupt ELF: the section header table") && e.contains("past the end of the file"),
        "{e}"
    );
    let p = dir.join("tiny.ko");
    std::fs::write(&p, &good[..40]).unwrap();
    assert!(one_error(k, &p, &p).contains("truncated ELF file"));
    let p = dir.join("text.ko");
    std::fs::write(&p, b"this is not a module\n").unwrap();
    assert!(one_error(k, &p, &p).contains("not an ELF file"));
    let p = dir.join("elf32.ko");
    let mut b = good.clone();
    b[4] = 1;
    std::fs::write(&p, &b).unwrap();
    assert!(one_error(k, &p, &p).contains("32-bit ELF"));
    let p = dir.join("bigendian.ko");
    let mut b = good.clone();
    b[5] = 2;
    std::fs::write(&p, &b).unwrap();
    assert!(one_error(k, &p, &p).contains("big-endian ELF"));
    // An executable and a plain object file are ELF but not modules.
    let p = copy_to(Path::new("/bin/true"), &dir, "true.ko");
    assert!(one_error(k, &p, &p).contains("not a kernel module: ELF type is ET_DYN"));
    let c = dir.join("x.c");
    std::fs::write(&c, "int x(void) { return 1; }\n").unwrap();
    let o = dir.join("plain.ko");
    sh("cc", &["-c", c.to_str().unwrap(), "-o", o.to_str().unwrap()]);
    assert!(one_error(k, &o, &o).contains("not a kernel module: no .modinfo section"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_compressed_modules() {
    let k = &kernel().vmlinuz;
    let dir = tmpdir("bad-compressed");
    let p = copy_to(&fat(), &dir, "fat.ko");
    sh("xz", &["--check=crc32", p.to_str().unwrap()]);
    let xz = dir.join("fat.ko.xz");
    let mut b = std::fs::read(&xz).unwrap();
    let mid = b.len() / 2;
    b[mid..mid + 16].iter_mut().for_each(|x| *x ^= 0xa5);
    std::fs::write(&xz, &b).unwrap();
    assert!(one_error(k, &xz, &xz).contains("corrupt xz data"));
    // Cut short: the stream never ends.
    std::fs::write(&xz, &b[..mid]).unwrap();
    assert!(one_error(k, &xz, &xz).contains("corrupt xz data"));
    let zst = dir.join("fat.ko.zst");
    let mut z = zstd_bytes(&std::fs::read(fat()).unwrap());
    let n = z.len();
    z.truncate(n - 100);
    std::fs::write(&zst, &z).unwrap();
    assert!(one_error(k, &zst, &zst).contains("corrupt zstd data"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn zstd_bytes(data: &[u8]) -> Vec<u8> {
    bootlink::compress::compress(data, bootlink::compress::Compression::Zstd).unwrap()
}

#[test]
fn empty_directory_missing_file_and_bad_kernel() {
    let k = &kernel().vmlinuz;
    let dir = tmpdir("empty");
    let e = one_error(k, &dir, &dir);
    assert!(e.contains("no kernel modules"), "{e}");
    let missing = dir.join("missing.ko");
    assert!(one_error(k, &missing, &missing).contains("no such file"));
    // A kernel argument that is not a kernel.
    let notk = copy_to(&fat(), &dir, "fat.ko");
    let e = one_error(&notk, &fat(), &notk);
    assert!(e.contains("not a kernel image: ELF type is ET_REL"), "{e}");
    let text = dir.join("vmlinuz");
    std::fs::write(&text, vec![b'x'; 5000]).unwrap();
    assert!(one_error(&text, &fat(), &text).contains("not a kernel image"));
    // A bzImage whose payload is cut off: its boot header places the
    // payload past the end of the file.
    let vmlinuz = std::fs::read(k).unwrap();
    let cut = dir.join("vmlinuz-cut");
    std::fs::write(&cut, &vmlinuz[..vmlinuz.len() / 2]).unwrap();
    let e = one_error(&cut, &fat(), &cut);
    assert!(e.contains("truncated or corrupt bzImage: its boot header places the payload at"), "{e}");
    assert!(e.contains(&format!("past the end of the file ({:#x} bytes)", vmlinuz.len() / 2)), "{e}");
    // A config file that is not one.
    let o = run(&[&"inspect", &"--config", &fat(), &k, &fat()]);
    assert!(!o.status.success() && stderr(&o).contains("not a kernel config"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_bad_module_in_a_tree_does_not_stop_the_rest() {
    let k = &kernel().vmlinuz;
    let dir = tmpdir("mixed-tree");
    std::fs::create_dir_all(dir.join("fs/fat")).unwrap();
    for m in ["fat", "vfat", "msdos"] {
        copy_to(&module(&format!("fs/fat/{m}.ko")), &dir.join("fs/fat"), &format!("{m}.ko"));
    }
    let bad = dir.join("fs/broken.ko");
    std::fs::write(&bad, b"\x7fELF garbage").unwrap();
    let o = run(&[&"inspect", &"--json", &k, &dir]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("broken.ko") && !err.contains("panicked"), "{err}");
    // 12 bytes: the ELF magic, then the file ends inside the ELF header.
    assert!(err.contains("truncated ELF file: 12 bytes, shorter than an ELF header"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["totals"]["modules"], 3);
    assert_eq!(r["errors"].as_array().unwrap().len(), 1);
    // vfat and msdos use fat's exports: resolved by a module of the set.
    assert!(r["totals"]["modules_only"].as_u64().unwrap() > 0);
    assert_eq!(r["totals"]["unresolved"], 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A real module (Debian's fat.ko) with one field of its symbol or
/// relocation tables corrupted, each located through object's typed ELF
/// views: inspect and both preresolve modes refuse it with one line naming
/// the file and the problem, exit 1, write nothing, and leave the input as it was.
#[test]
fn corrupt_symbol_and_relocation_tables_of_a_real_module() {
    use object::LittleEndian as LE;
    use object::elf::{FileHeader64, SHT_RELA, SHT_SYMTAB, SectionHeader64, Sym64};
    use object::read::elf::{FileHeader, SectionHeader};
    let orig = std::fs::read(fat()).unwrap();
    let h = FileHeader64::<LE>::parse(&*orig).unwrap();
    let sections = h.sections(LE, &*orig).unwrap();
    let shoff = h.e_shoff(LE) as usize;
    let shdr_at = |i: usize| shoff + i * size_of::<SectionHeader64<LE>>();
    let (symtab_i, symtab) = sections.iter().enumerate().find(|(_, s)| s.sh_type(LE) == SHT_SYMTAB).unwrap();
    let syms = symtab.data_as_array::<Sym64<LE>, _>(LE, &*orig).unwrap();
    let strings = sections.strings(LE, &*orig, object::SectionIndex(symtab.sh_link(LE) as usize)).unwrap();
    // The first defined global symbol with a name, and where its st_shndx is.
    let (k, sym) = syms
        .iter()
        .enumerate()
        .find(|(_, s)| s.st_shndx.get(LE).0 != 0 && s.st_bind() == object::elf::STB_GLOBAL && s.st_name.get(LE) != 0)
        .unwrap();
    let name = String::from_utf8_lossy(strings.get(sym.st_name.get(LE)).unwrap()).into_owned();
    let sym_at = symtab.sh_offset(LE) as usize + k * size_of::<Sym64<LE>>();
    let shndx_at = sym_at + std::mem::offset_of!(Sym64<LE>, st_shndx);
    let (rela_i, rela) = sections
        .iter()
        .enumerate()
        .find(|(_, s)| s.sh_type(LE) == SHT_RELA && s.sh_link(LE) as usize == symtab_i && s.sh_size(LE) > 0)
        .unwrap();
    let rela_name = String::from_utf8_lossy(sections.section_name(LE, rela).unwrap()).into_owned();
    let rela_off_at = shdr_at(rela_i) + std::mem::offset_of!(SectionHeader64<LE>, sh_offset);
    let rela_entsize_at = shdr_at(rela_i) + std::mem::offset_of!(SectionHeader64<LE>, sh_entsize);
    let rela_info_at =
        rela.sh_offset(LE) as usize + std::mem::offset_of!(object::elf::Rela64<LE>, r_info) + 4 /* r_sym half */;
    type Patch = Box<dyn Fn(&mut [u8])>;
    let put = |at: usize, bytes: Vec<u8>| -> Patch {
        Box::new(move |d: &mut [u8]| d[at..at + bytes.len()].copy_from_slice(&bytes))
    };
    let cases: Vec<(&str, Patch, String)> = vec![
        (
            "reserved st_shndx",
            put(shndx_at, 0xff05u16.to_le_bytes().to_vec()),
            format!("symbol {name} (#{k}) has the reserved section index 0xff05"),
        ),
        (
            "st_shndx past e_shnum",
            put(shndx_at, 5000u16.to_le_bytes().to_vec()),
            format!("symbol {name} (#{k}) has section index 5000, past the"),
        ),
        (
            "relocations past the file",
            put(rela_off_at, (orig.len() as u64 + 4096).to_le_bytes().to_vec()),
            format!("section {rela_i} ({rela_name}) lies outside the file"),
        ),
        (
            "relocation entry size",
            put(rela_entsize_at, 16u64.to_le_bytes().to_vec()),
            format!("corrupt relocation section {rela_name} (#{rela_i}): entry size 16"),
        ),
        (
            "relocation symbol past .symtab",
            put(rela_info_at, 0x00ff_ffffu32.to_le_bytes().to_vec()),
            format!("corrupt relocation section {rela_name} (#{rela_i}): entry 0 names symbol 16777215, past the"),
        ),
    ];
    let k = &kernel().vmlinuz;
    let tmp = tmpdir("bad-tables");
    for (what, patch, want) in cases {
        let bad = tmp.join("fat.ko");
        let mut d = orig.clone();
        patch(&mut d);
        std::fs::write(&bad, &d).unwrap();
        let err = one_error(k, &bad, &bad);
        assert!(err.contains(&want), "{what}: {err}");
        for fold in [false, true] {
            let out = tmp.join(format!("out-{fold}"));
            let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"preresolve", &"--assume-nokaslr", &"--kernel", k];
            if fold {
                args.push(&"--fold-symbols");
            }
            args.extend([&bad as &dyn AsRef<std::ffi::OsStr>, &"-o", &out]);
            let o = run(&args);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{what} (fold {fold}): {e}");
            assert!(
                !e.contains("panicked") && e.contains(&want) && e.contains(&bad.display().to_string()),
                "{what} (fold {fold}): {e}"
            );
            assert!(!out.join("fat.ko").exists(), "{what} (fold {fold}): a module was written");
        }
        assert_eq!(std::fs::read(&bad).unwrap(), d, "{what}: the input was modified");
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// The module hash manifest's bad input: a kernel without the reserved
/// section (Debian's), a file that is no kernel: one line naming the file,
/// nothing written.
#[test]
fn manifest_of_a_kernel_without_the_section_or_of_no_kernel() {
    let k = kernel();
    let dir = tmpdir("manifest-bad");
    let out = dir.join("vmlinux.listed");
    let o = run(&[&"manifest", &"write", &"--vmlinux", &k.vmlinux, &"-o", &out, &fat()]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.lines().count() == 1, "{err}");
    assert!(err.contains(&*k.vmlinux.to_string_lossy()) && err.contains("no __modhashes section"), "{err}");
    assert!(!out.exists(), "a refused manifest left a kernel");
    let o = run(&[&"manifest", &"show", &"/bin/true"]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("/bin/true") && err.contains("not a kernel image"), "{err}");
}

/// The lab's `raw:NAME=FILE` key: a module not in the set, a file that is
/// not there; one line naming what is wrong, before any boot or output.
#[test]
fn lab_raw_module_of_no_set_module_or_no_file() {
    let k = kernel();
    let dir = tmpdir("raw-bad");
    let out = dir.join("run");
    let o = run(&[
        &"lab",
        &"--kernel",
        &k.vmlinux,
        &"--modules",
        &k.modules,
        &"--variant",
        &"a=raw:sctp=/bin/true",
        &"-o",
        &out,
        &"nls_cp437",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("raw:sctp=...: sctp is not a module of the set"), "{err}");
    let missing = dir.join("missing.ko");
    let v = format!("a=raw:nls_cp437={}", missing.display());
    let o =
        run(&[&"lab", &"--kernel", &k.vmlinux, &"--modules", &k.modules, &"--variant", &v, &"-o", &out, &"nls_cp437"]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains(&*missing.to_string_lossy()), "{err}");
    assert!(!out.exists(), "nothing written");
}
