//! DDLink's bad input through the binary, without the patched glibc: a
//! truncated or foreign record, a record whose files changed or are gone,
//! a corrupt cache, a missing loader. Each is a one-line error naming the
//! file and the problem, a non-zero exit, and no cache written.

use crate::common;

use std::path::{Path, PathBuf};

use bootlink::ddlink::objects::ObjFile;
use common::TestCommand;

/// A record of /bin/true with its real identity, as the loader writes it.
fn record_of_true(build_id_hex: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/bin/true").unwrap();
    format!(
        "ddlink-record 1\nloader 00\nobj 0 2 0 0 0 0 0 {build_id_hex} \n\
         obj 1 0 {} {} {} {} {} {build_id_hex} /bin/true\nscope 0 1\nbind 0 1 1 1 1\nend 1\n",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    )
}

fn true_build_id() -> String {
    bootlink::ddlink::record::hex(&ObjFile::read(Path::new("/bin/true")).unwrap().build_id)
}

fn write_cmd(dir: &Path, record: &str) -> (TestCommand, std::path::PathBuf) {
    write_cmd_for(dir, record, Path::new("/bin/true"))
}

/// `record` written into `dir`, and `ddlink write` of it for `program`
/// into `dir/out.cache` (the command, not run yet, and the cache's path).
fn write_cmd_for(dir: &Path, record: &str, program: &Path) -> (TestCommand, std::path::PathBuf) {
    let rec = dir.join("record");
    std::fs::write(&rec, record).unwrap();
    let out = dir.join("out.cache");
    let cmd = TestCommand::new(&[
        &"ddlink",
        &"write",
        &"--loader",
        &"/bin/true",
        &"--record",
        &rec,
        &"--program",
        &program,
        &"-o",
        &out,
    ])
    .show_dir(dir);
    (cmd, out)
}

#[test]
fn a_good_record_makes_a_cache_status_can_read() {
    let dir = common::tmpdir("ddlink-good");
    let (cmd, out) = write_cmd(&dir, &record_of_true(&true_build_id()));
    cmd.ok();
    let cache = bootlink::ddlink::format::decode(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(cache.objects.len(), 2);
    assert_eq!(cache.entries(), 1);
}

#[test]
fn truncated_and_foreign_records_are_refused() {
    let dir = common::tmpdir("ddlink-trunc");
    let good = record_of_true(&true_build_id());
    let cut = &good[..good.find("end").unwrap()];
    let (cmd, out) = write_cmd(&dir, cut);
    let err = cmd.fails_with("truncated record");
    assert!(err.contains("record:"), "the error names the file: {err}");
    assert!(!out.exists(), "a refused record left a cache");
    let (cmd, out) = write_cmd(&dir, "\x7fELF not a record");
    cmd.fails_with("not a DDLink record");
    assert!(!out.exists());
}

#[test]
fn a_record_of_other_files_is_stale() {
    let dir = common::tmpdir("ddlink-stale");
    // The recorded build ID is not /bin/true's: a library replaced since.
    let (cmd, out) = write_cmd(&dir, &record_of_true("0123456789abcdef0123456789abcdef01234567"));
    let err = cmd.fails_with("profile again");
    assert!(err.contains("/bin/true") && err.contains("build ID"), "{err}");
    assert!(!out.exists());
    // A symbol index the file does not have.
    let rec = record_of_true(&true_build_id()).replace("bind 0 1 1 1 1", "bind 0 1 1 1 999999");
    let (cmd, out) = write_cmd(&dir, &rec);
    cmd.fails_with("does not have");
    assert!(!out.exists());
    // A reference bound to a symbol of another name (ld.so would refuse
    // the cache: it checks both names, glibc/patches 0008).
    let rec = record_of_true(&true_build_id()).replace("bind 0 1 1 1 1", "bind 0 1 1 1 2");
    let (cmd, out) = write_cmd(&dir, &rec);
    let err = cmd.fails_with("another name");
    assert!(err.contains("of the program to `") && err.contains("of /bin/true, another name"), "{err}");
    assert!(!out.exists());
    // A library that is gone.
    let rec = record_of_true(&true_build_id()).replace(" /bin/true\n", " /nonexistent/libgone.so\n");
    let (cmd, out) = write_cmd(&dir, &rec);
    cmd.fails_with("/nonexistent/libgone.so: no such file");
    assert!(!out.exists());
}

#[test]
fn corrupt_caches_and_missing_loaders_are_named() {
    let dir = common::tmpdir("ddlink-corrupt");
    let (cmd, out) = write_cmd(&dir, &record_of_true(&true_build_id()));
    cmd.ok();
    let mut bytes = std::fs::read(&out).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    let bad = dir.join("bad.cache");
    std::fs::write(&bad, &bytes).unwrap();
    let err = TestCommand::new(&[&"ddlink", &"status", &"--loader", &"/bin/true", &"--cache", &bad, &"/bin/true"])
        .fails_with("checksum");
    assert!(err.contains("bad.cache"), "{err}");
    let err = TestCommand::new(&[
        &"ddlink",
        &"profile",
        &"--loader",
        &"/nonexistent/ld.so",
        &"-o",
        &dir.join("r"),
        &"/bin/true",
    ])
    .fails_with("no such file");
    assert!(err.contains("/nonexistent/ld.so"), "{err}");
    assert!(!dir.join("r").exists());
}

const LIBZ: &str = "/lib/x86_64-linux-gnu/libz.so.1";
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

fn identity(path: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    format!("{} {} {} {} {}", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec())
}

fn dynsym_index(path: &str, name: &str) -> u32 {
    let f = ObjFile::read(Path::new(path)).unwrap();
    (0..f.nsyms()).find(|&i| f.name(i) == name).unwrap_or_else(|| panic!("{path} has no {name}"))
}

/// /bin/true's record extended with Debian's libz (RELA, lazy PLT) and
/// libc (DT_RELR), libz's `free` bound to libc's.
fn record_with_libz() -> String {
    let id = |p: &str| bootlink::ddlink::record::hex(&ObjFile::read(Path::new(p)).unwrap().build_id);
    format!(
        "ddlink-record 1\nloader 00\nobj 0 2 0 0 0 0 0 {} \nobj 1 0 {} {} {LIBZ}\nobj 2 0 {} {} {LIBC}\n\
         scope 0 1 2\nbind 1 {} 1 2 {}\nend 1\n",
        id("/bin/true"),
        identity(LIBZ),
        id(LIBZ),
        identity(LIBC),
        id(LIBC),
        dynsym_index(LIBZ, "free"),
        dynsym_index(LIBC, "free"),
    )
}

/// Skip Mode's bases: drawn at random for each build unless `--base` fixes
/// them (then exactly that), and the cache and the report say which.
#[test]
fn each_image_build_draws_its_own_base_unless_one_is_given() {
    if !Path::new(LIBZ).is_file() {
        common::skip("each_image_build_draws_its_own_base_unless_one_is_given", "libz1 is not installed");
        return;
    }
    let dir = common::tmpdir("ddlink-bases");
    let base_of = |name: &str, fixed: Option<&str>| -> u64 {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let (cmd, out) = write_cmd(&d, &record_with_libz());
        let mut cmd = cmd.arg(&"--prelink").arg(&d.join("images")).arg(&"--json");
        if let Some(b) = fixed {
            cmd = cmd.arg(&"--base").arg(&b);
        }
        let report: serde_json::Value = serde_json::from_slice(&cmd.ok().stdout).unwrap();
        let cache = bootlink::ddlink::format::decode(&std::fs::read(&out).unwrap()).unwrap();
        // The first image, the program's (/bin/true is a PIE), is at the base.
        let base = cache.objects[0].prelink.as_ref().unwrap().base;
        assert_eq!(report["prelink"]["base"], base, "{report}");
        base
    };
    let drawn: Vec<u64> = (0..3).map(|i| base_of(&format!("random{i}"), None)).collect();
    assert!(drawn.windows(2).any(|w| w[0] != w[1]), "three builds, one base: {drawn:x?}");
    assert_eq!(base_of("fixed", Some("0x3000000000")), 0x30_0000_0000);
}

/// Skip Mode's images without a loader: the image differs from the library
/// exactly at the relocations bootlink applied (each with the value the
/// loader would write at the image's base) and at GOT[1]; libc (DT_RELR)
/// is imaged too, marked as such in the cache.
#[test]
fn prelinked_image_holds_exactly_the_applied_relocations() {
    use object::read::{Object, ObjectSegment, ObjectSymbol, ObjectSymbolTable};
    if !Path::new(LIBZ).is_file() {
        common::skip("prelinked_image_holds_exactly_the_applied_relocations", "libz1 is not installed");
        return;
    }
    let dir = common::tmpdir("ddlink-prelink");
    let (cmd, out) = write_cmd(&dir, &record_with_libz());
    let images = dir.join("images");
    let cmd = cmd.arg(&"--prelink").arg(&images).arg(&"--json");
    let report: serde_json::Value = serde_json::from_slice(&cmd.ok().stdout).unwrap();
    // /bin/true, libz and libc (DT_RELR: imaged too, its words relocated
    // in place and the image marked).
    assert_eq!(report["prelink"]["images"], 3, "{report}");
    let cache = bootlink::ddlink::format::decode(&std::fs::read(&out).unwrap()).unwrap();
    let (z, c) = (&cache.objects[1], &cache.objects[2]);
    use bootlink::ddlink::format::{OBJ_PRELINKED, OBJ_RELR};
    assert_eq!(z.flags & (OBJ_PRELINKED | OBJ_RELR), OBJ_PRELINKED, "libz: RELA only");
    assert_eq!(c.flags & (OBJ_PRELINKED | OBJ_RELR), OBJ_PRELINKED | OBJ_RELR, "libc has DT_RELR");
    let (zbase, cbase) = (z.prelink.as_ref().unwrap().base, c.prelink.as_ref().unwrap().base);
    // No --base: a first base drawn for this build, inside the documented
    // range (docs/ddlink-security.md, the ASLR trade-off).
    use bootlink::ddlink::prelink::{RANDOM_BASE_ALIGN, RANDOM_BASES};
    // The program (/bin/true, a PIE) is imaged first, at the drawn base.
    let first = cache.objects[0].prelink.as_ref().unwrap().base;
    assert!(RANDOM_BASES.contains(&first) && first.is_multiple_of(RANDOM_BASE_ALIGN), "{first:#x}");
    assert!(cbase > zbase && zbase > first);

    let orig = std::fs::read(LIBZ).unwrap();
    let img = std::fs::read(images.join(LIBZ.trim_start_matches('/'))).unwrap();
    assert_eq!(orig.len(), img.len());
    let elf = object::File::parse(&*orig).unwrap();
    let libc = std::fs::read(LIBC).unwrap();
    let libc_elf = object::File::parse(&*libc).unwrap();
    let free = libc_elf.dynamic_symbol_table().unwrap().symbols().find(|s| s.name() == Ok("free")).unwrap().address();
    let file_off = |vaddr: u64| -> usize {
        elf.segments()
            .find_map(|s| {
                let (off, size) = s.file_range();
                (vaddr >= s.address() && vaddr + 8 <= s.address() + size).then(|| (off + vaddr - s.address()) as usize)
            })
            .unwrap()
    };
    let word = |d: &[u8], off: usize| u64::from_le_bytes(d[off..off + 8].try_into().unwrap());
    let runtime = &z.prelink.as_ref().unwrap().runtime;
    let mut expected = std::collections::BTreeMap::new();
    let (mut relative, mut bound) = (0, 0);
    for (i, (at, r)) in elf.dynamic_relocations().unwrap().enumerate() {
        let object::RelocationFlags::Elf { r_type } = r.flags() else { panic!("not ELF") };
        match r_type {
            object::elf::R_X86_64_RELATIVE => {
                expected.insert(file_off(at), zbase.wrapping_add_signed(r.addend()));
                relative += 1;
            }
            object::elf::R_X86_64_JUMP_SLOT if !runtime.contains(&(i as u32)) => {
                expected.insert(file_off(at), cbase + free);
                bound += 1;
            }
            _ => assert!(runtime.contains(&(i as u32)), "relocation {i} (type {r_type}) neither applied nor left"),
        }
    }
    assert!(relative > 0 && bound == 1, "{relative} relative, {bound} bound to libc's free");
    let changed: Vec<usize> = (0..orig.len() / 8).map(|w| w * 8).filter(|&o| orig[o..o + 8] != img[o..o + 8]).collect();
    for &off in &changed {
        match expected.get(&off) {
            Some(&v) => assert_eq!(word(&img, off), v, "word at file offset {off:#x}"),
            // GOT[1]: the PLT stub base, so a lazy loader can reset the slots.
            None => assert_eq!(word(&orig, off), 0, "unexpected change at {off:#x}"),
        }
    }
    assert!(
        changed.len() <= expected.len() + 1,
        "{} words changed, {} expected + GOT[1]",
        changed.len(),
        expected.len()
    );
    for (&off, &v) in &expected {
        assert_eq!(word(&img, off), v, "relocation target at {off:#x} not written");
    }
}

#[test]
fn prelink_bad_requests_write_nothing() {
    if !Path::new(LIBZ).is_file() {
        common::skip("prelink_bad_requests_write_nothing", "libz1 is not installed");
        return;
    }
    let dir = common::tmpdir("ddlink-prelink-bad");
    let (cmd, out) = write_cmd(&dir, &record_with_libz());
    cmd.arg(&"--prelink").arg(&dir.join("img")).arg(&"--base").arg(&"0x3000000123").fails_with("page size");
    assert!(!out.exists() && !dir.join("img").exists());
    // A file where the image directory should be.
    std::fs::write(dir.join("blocked"), "x").unwrap();
    let (cmd, out) = write_cmd(&dir, &record_with_libz());
    let err = cmd.arg(&"--prelink").arg(&dir.join("blocked")).fails_with("blocked");
    assert!(!out.exists(), "a cache was written though its images were not: {err}");
    let (cmd, _) = write_cmd(&dir, &record_with_libz());
    cmd.arg(&"--prelink").arg(&dir.join("img")).arg(&"--base").arg(&"0xzz").fails_with("not an address");
}

/// The addresses `readelf -r` lists for a file's DT_RELR table (binutils
/// decodes the bitmaps itself: an oracle independent of bootlink's).
fn readelf_relr(path: &Path) -> Vec<u64> {
    let out = std::process::Command::new("readelf").arg("-rW").arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(start) = text.find("Relocation section '.relr.dyn'") else { return Vec::new() };
    text[start..]
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| u64::from_str_radix(l.trim(), 16).ok())
        .collect()
}

/// Every word of one image against the original: the DT_RELR words (from
/// readelf) are the original's plus `base`, the RELA targets in `bound`
/// hold exactly those values, bytes 8..16 carry the mark, and nothing
/// else changed but GOT[1] (0 in the original). Returns the RELR words
/// compared.
fn every_word_of(
    orig_path: &Path,
    image_path: &Path,
    base: u64,
    bound: &std::collections::BTreeMap<u64, u64>,
) -> usize {
    use object::read::{Object, ObjectSegment};
    let (orig, img) = (std::fs::read(orig_path).unwrap(), std::fs::read(image_path).unwrap());
    assert_eq!(orig.len(), img.len(), "{}", image_path.display());
    let elf = object::File::parse(&*orig).unwrap();
    let file_off = |vaddr: u64| -> usize {
        elf.segments()
            .find_map(|s| {
                let (off, size) = s.file_range();
                (vaddr >= s.address() && vaddr + 8 <= s.address() + size).then(|| (off + vaddr - s.address()) as usize)
            })
            .unwrap_or_else(|| panic!("{vaddr:#x} not in the file"))
    };
    let word = |d: &[u8], off: usize| u64::from_le_bytes(d[off..off + 8].try_into().unwrap());
    let relr = readelf_relr(orig_path);
    assert!(!relr.is_empty(), "{} has no DT_RELR words", orig_path.display());
    let mut expected = std::collections::BTreeMap::new();
    for &a in &relr {
        let off = file_off(a);
        expected.insert(off, word(&orig, off).wrapping_add(base));
    }
    for (&a, &v) in bound {
        expected.insert(file_off(a), v);
    }
    let mark = u64::from(orig[8]) | u64::from(b'D') << 8 | (base / 4096) << 16;
    expected.insert(8, mark);
    for (&off, &v) in &expected {
        assert_eq!(word(&img, off), v, "{}: word at file offset {off:#x}", image_path.display());
    }
    for off in (0..orig.len() / 8).map(|w| w * 8) {
        if orig[off..off + 8] != img[off..off + 8] && !expected.contains_key(&off) {
            assert_eq!(word(&orig, off), 0, "{}: unexpected change at {off:#x} (GOT[1] only)", image_path.display());
        }
    }
    relr.len()
}

/// Skip Mode for the whole program, without a loader: a PIE and a library
/// with DT_RELR (the playground's ddlink-relr, built here) and Debian's
/// libc (DT_RELR) are all imaged, every DT_RELR word relocated for its
/// image's base (compared with readelf's list), the PIE's bindings to the
/// library and libc applied, its copy relocation left to the loader, the
/// mark in each header; `check_image` (what `ddlink verify` runs) finds 0
/// differences and names a word changed afterwards.
#[test]
fn whole_program_images_hold_every_relr_word_relocated() {
    use object::read::{Object, ObjectSymbol, ObjectSymbolTable};
    use std::collections::BTreeMap;
    let dir = common::tmpdir("ddlink-relr");
    let fx = dir.join("fx");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ddlink");
    let built = std::process::Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&src)
        .arg(format!("OUT={}", fx.display()))
        .arg(format!("{}/ddlink-relr", fx.display()))
        .output();
    if !matches!(&built, Ok(o) if o.status.success()) || !Path::new(LIBC).is_file() {
        common::skip(
            "whole_program_images_hold_every_relr_word_relocated",
            "cannot build tests/ddlink's ddlink-relr (gcc, make, binutils >= 2.38 with -z pack-relative-relocs)",
        );
        return;
    }
    let (prog, lib) = (fx.join("ddlink-relr"), fx.join("libddr.so"));
    let (p, l) = (prog.to_str().unwrap(), lib.to_str().unwrap());
    let id = |p: &str| bootlink::ddlink::record::hex(&ObjFile::read(Path::new(p)).unwrap().build_id);
    let record = format!(
        "ddlink-record 1\nloader 00\nobj 0 2 0 0 0 0 0 {} \nobj 1 0 {} {} {l}\nobj 2 0 {} {} {LIBC}\nscope 0 1 2\n\
         bind 0 {} 1 1 {}\nbind 0 {} 1 1 {}\nbind 0 {} 1 2 {}\nbind 0 {} 0 2 {}\nend 1\n",
        id(p),
        identity(l),
        id(l),
        identity(LIBC),
        id(LIBC),
        dynsym_index(p, "ddr_word"),
        dynsym_index(l, "ddr_word"),
        dynsym_index(p, "ddr_apply"),
        dynsym_index(l, "ddr_apply"),
        dynsym_index(p, "printf"),
        dynsym_index(LIBC, "printf"),
        dynsym_index(p, "__libc_start_main"),
        dynsym_index(LIBC, "__libc_start_main"),
    );
    let (out, images, stdout) = write_prelinked(&dir, &record, &prog, true);
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(report["prelink"]["images"], 3, "the program, libddr and libc: {report}");
    assert_eq!(report["prelink"]["program_image"], true, "{report}");
    assert!(report["prelink"]["placed"].as_array().unwrap().is_empty(), "nothing only placed: {report}");
    let reasons = report["prelink"]["runtime_reasons"].to_string();
    assert!(reasons.contains("copy relocation"), "the PIE's copy relocation is left to the loader: {reasons}");
    let cache = bootlink::ddlink::format::decode(&std::fs::read(&out).unwrap()).unwrap();
    use bootlink::ddlink::format::{OBJ_MAIN, OBJ_PRELINKED, OBJ_RELR};
    for o in &cache.objects {
        assert_eq!(o.flags & (OBJ_PRELINKED | OBJ_RELR), OBJ_PRELINKED | OBJ_RELR, "{}", o.name);
    }
    assert_ne!(cache.objects[0].flags & OBJ_MAIN, 0);
    let base = |i: usize| cache.objects[i].prelink.as_ref().unwrap().base;
    let (pbase, lbase, cbase) = (base(0), base(1), base(2));
    use bootlink::ddlink::prelink::{PROGRAM_HEAP_GAP, RANDOM_BASE_ALIGN, RANDOM_BASES};
    assert!(RANDOM_BASES.contains(&pbase) && pbase.is_multiple_of(RANDOM_BASE_ALIGN), "{pbase:#x}");
    assert!(lbase >= pbase + PROGRAM_HEAP_GAP && cbase > lbase, "{pbase:#x} {lbase:#x} {cbase:#x}");

    // The PIE's bound relocations, from the original files' own tables.
    let sym = |path: &str, name: &str| {
        let d = std::fs::read(path).unwrap();
        let f = object::File::parse(&*d).unwrap();
        f.dynamic_symbol_table().unwrap().symbols().find(|s| s.name() == Ok(name)).unwrap().address()
    };
    let pdata = std::fs::read(&prog).unwrap();
    let pelf = object::File::parse(&*pdata).unwrap();
    let runtime = &cache.objects[0].prelink.as_ref().unwrap().runtime;
    let mut bound = BTreeMap::new();
    for (i, (at, r)) in pelf.dynamic_relocations().unwrap().enumerate() {
        let object::RelocationFlags::Elf { r_type } = r.flags() else { panic!("not ELF") };
        let object::RelocationTarget::Symbol(s) = r.target() else { continue };
        let name = pelf.dynamic_symbol_table().unwrap().symbol_by_index(s).unwrap().name().unwrap().to_string();
        let value = match name.as_str() {
            "ddr_word" | "ddr_apply" => Some(lbase + sym(l, &name)),
            "printf" | "__libc_start_main" => Some(cbase + sym(LIBC, &name)),
            _ => None,
        };
        match value {
            Some(v) => {
                assert!(!runtime.contains(&(i as u32)), "{name} bound in the image");
                bound.insert(at, v);
            }
            None => assert!(runtime.contains(&(i as u32)), "{name} (type {r_type}) neither applied nor left"),
        }
    }
    assert_eq!(bound.len(), 4, "{bound:x?}");
    let img = |p: &Path| images.join(p.to_str().unwrap().trim_start_matches('/'));
    let n = every_word_of(&prog, &img(&prog), pbase, &bound);
    // The library: its DT_RELR words (its strlen binding is to an IFUNC:
    // left to the loader).
    let m = every_word_of(&lib, &img(&lib), lbase, &BTreeMap::new());
    assert!(n >= 12 && m >= 8, "{n} and {m} DT_RELR words");

    // What `ddlink verify` runs on each image: exact, and it names a word
    // changed afterwards.
    for (orig, b) in [(&prog, pbase), (&lib, lbase)] {
        let (a, i) = (std::fs::read(orig).unwrap(), std::fs::read(img(orig)).unwrap());
        let check = bootlink::ddlink::prelink::check_image(&a, &i, b).unwrap();
        assert!(check.differences.is_empty() && check.relr_words > 0, "{check:?}");
        let mut bad = i.clone();
        let off = {
            let elf = object::File::parse(&*a).unwrap();
            let first = readelf_relr(orig)[0];
            use object::read::ObjectSegment;
            elf.segments()
                .find_map(|s| {
                    let (o, size) = s.file_range();
                    (first >= s.address() && first < s.address() + size).then(|| (o + first - s.address()) as usize)
                })
                .unwrap()
        };
        bad[off] ^= 1;
        let check = bootlink::ddlink::prelink::check_image(&a, &bad, b).unwrap();
        assert_eq!(check.differences.len(), 1, "{check:?}");
        assert!(check.differences[0].contains(&format!("{off:#x}")), "{check:?}");
        // The image of an image is refused (its header is marked).
        assert!(bootlink::ddlink::prelink::check_image(&i, &i, b).is_err());
    }
}

/// A program with text relocations (DT_TEXTREL, built here with gcc) is
/// not imaged: `write --prelink` says so in one line naming the file, the
/// cache does not mark it prelinked, and the libraries are still imaged.
#[test]
fn a_program_with_text_relocations_is_refused_by_name() {
    let dir = common::tmpdir("ddlink-textrel");
    std::fs::write(dir.join("t.c"), "int x = 3;\nint *f(void) { return &x; }\nint main(void) { return *f() - 3; }\n")
        .unwrap();
    let prog = dir.join("textrel-prog");
    let built = std::process::Command::new("gcc")
        .args(["-O1", "-fno-pic", "-mcmodel=large", "-pie", "-Wl,-z,notext", "-Wl,--build-id", "-o"])
        .arg(&prog)
        .arg(dir.join("t.c"))
        .output();
    if !matches!(&built, Ok(o) if o.status.success()) || !Path::new(LIBC).is_file() {
        common::skip("a_program_with_text_relocations_is_refused_by_name", "gcc cannot build a PIE with -z notext");
        return;
    }
    let p = prog.to_str().unwrap();
    let id = |p: &str| bootlink::ddlink::record::hex(&ObjFile::read(Path::new(p)).unwrap().build_id);
    let record = format!(
        "ddlink-record 1\nloader 00\nobj 0 2 0 0 0 0 0 {} \nobj 1 0 {} {} {LIBC}\nscope 0 1\nend 1\n",
        id(p),
        identity(LIBC),
        id(LIBC)
    );
    let (out, images, stdout) = write_prelinked(&dir, &record, &prog, false);
    let text = String::from_utf8(stdout).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("DT_TEXTREL")).collect();
    assert_eq!(lines, [format!("  not prelinked: {p}: text relocations (DT_TEXTREL)")], "{text}");
    let cache = bootlink::ddlink::format::decode(&std::fs::read(&out).unwrap()).unwrap();
    use bootlink::ddlink::format::OBJ_PRELINKED;
    assert_eq!(cache.objects[0].flags & OBJ_PRELINKED, 0);
    assert!(cache.objects[0].prelink.is_none());
    assert_ne!(cache.objects[1].flags & OBJ_PRELINKED, 0, "libc is still imaged");
    assert!(!images.join(p.trim_start_matches('/')).exists(), "an image of the refused program was written");
}

/// `record` written into `dir` and `ddlink write --prelink` run on it for
/// `prog` (`--json` if asked): the cache's path, the images' directory and
/// the command's output.
fn write_prelinked(dir: &Path, record: &str, prog: &Path, json: bool) -> (PathBuf, PathBuf, Vec<u8>) {
    let images = dir.join("images");
    let (mut cmd, out) = write_cmd_for(dir, record, prog);
    cmd = cmd.arg(&"--prelink").arg(&images);
    if json {
        cmd = cmd.arg(&"--json");
    }
    (out, images, cmd.ok().stdout)
}
