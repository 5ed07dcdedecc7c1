//! Preresolving that survives KASLR (patch `preresolved-slide`), on the
//! lab kernel (its config has CONFIG_RANDOMIZE_BASE, as distributions')
//! booted as a bzImage without `nokaslr`: modules preresolved at link-time
//! addresses, SHN_ABS and folded, with the `.preresolved_slide` table. Lab
//! patch `slide-check` (module.slide_check=1) compares every preresolved
//! value, after the loader added the slide, with what the stock lookup of
//! its name gives: 0 disagreements, over boots whose slides differ (the
//! decompressor's seed hashes boot_params and reads RDRAND and the TSC;
//! under -icount and QEMU's -seed they depend only on what the boot is
//! given, so a longer command line gives another slide, the same one at
//! every run). The slide the loader used is checked against _text in
//! /proc/kallsyms. Then the refusals, one line each: a patched kernel
//! refuses a module whose table names another build, and Debian's stock
//! kernel refuses a marked module in its vermagic check.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bootlink::elf::{Elf, LE, Want};
use bootlink::preresolve::{SLIDE_SECTION, SlideTable};
use bootlink_lab::run::results::{Repetition, Run};
use common::TestCommand;
use object::read::elf::SectionHeader;

/// vfat with fat and nls_cp437, xfs with its crc32c: 4 to 5 modules,
/// several hundred preresolved symbols, x86-64 per-CPU exports among them
/// (xfs uses `this_cpu_off` and `current_task`).
const SET: &[&str] = &["vfat", "nls_cp437", "xfs"];

/// The line's lab kernel (`common::self_built`), whose config randomizes
/// its base.
fn kaslr_build() -> common::SelfBuilt {
    let k = common::self_built(false);
    let config = std::fs::read_to_string(k.dir.join(format!("config-{}", k.release))).unwrap();
    assert!(config.lines().any(|l| l == "CONFIG_RANDOMIZE_BASE=y"), "the lab config randomizes its base");
    k
}

fn rep<'a>(run: &'a Run, v: &str) -> &'a Repetition {
    &run.variants.iter().find(|x| x.name == v).unwrap_or_else(|| panic!("no variant {v}")).repetitions[0]
}

/// `_text`'s link-time address, from the build's System.map.
fn link_text(k: &common::SelfBuilt) -> u64 {
    let map = std::fs::read_to_string(k.dir.join("System.map")).unwrap();
    map.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == "_text").then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .expect("_text in System.map")
}

#[test]
fn every_moved_value_is_what_the_stock_lookup_gives_over_several_slides() {
    let k = kaslr_build();
    let link = link_text(&k);
    let dir = common::tmpdir("slide-exact");
    let out = dir.join("run");
    let kk = common::build_kernel();
    // Each padding lengthens the command line: another slide.
    let mut specs = Vec::new();
    // Both ways of preresolving; three boots keep the file under a minute.
    // The third is what `bootlink apply` does on such a kernel: folded for
    // the slide, then finalized (ORC and ftrace records rearranged).
    for (mode, steps, pad) in [
        ("abs", "preresolve-slide", ""),
        ("folded", "fold-slide", "x"),
        ("finalized", "fold-slide+unsign+finalize", "xxxxxxxxxxxxxxxx"),
    ] {
        specs.push(format!(
            "{mode}{}={kk},image:bzimage,kaslr:on,steps:{steps},cmdline:module.slide_check=1 bootlink.pad={pad}.,{}",
            pad.len(),
            common::slide::PROGRAM
        ));
    }
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"lab", &"-n", &"1", &"--no-trace", &"-o", &out];
    for s in &specs {
        args.push(&"--variant");
        args.push(s);
    }
    for m in SET {
        args.push(m);
    }
    let t0 = std::time::Instant::now();
    let o = TestCommand::new(&args).show_dir(&out).ok();
    println!("bootlink lab: {:.0} s wall", t0.elapsed().as_secs_f64());
    print!("{}", common::stdout(&o));
    let run: Run = serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    let mut slides = BTreeSet::new();
    for v in &run.variants {
        let r = rep(&run, &v.name);
        assert!(r.failure.is_none(), "{}: {:?}", v.name, r.failure);
        assert!(!v.cmdline.split(' ').any(|w| w == "nokaslr"), "{}: {}", v.name, v.cmdline);
        assert!(r.modules.len() > SET.len() && r.modules.iter().all(|m| m.status == 0), "{}: {:?}", v.name, r.modules);
        // the lab's record of the slide comes from the booted bzImage's own link-time _text
        let s = common::slide::check_boot(&v.name, r, link, 400);
        slides.insert(s.slide);
        let log = std::fs::read_to_string(out.join(&r.log)).unwrap();
        assert!(!log.contains("the lookup gives"), "{}: a disagreement in dmesg", v.name);
    }
    println!("{} boots, {} distinct slides: {slides:x?}", run.variants.len(), slides.len());
    assert!(slides.len() >= 3, "the command lines gave too few distinct slides: {slides:x?}");
}

/// The module at `rel` of the build, preresolved for the slide and folded
/// into `dir`.
fn folded_slide(k: &common::SelfBuilt, rel: &str, dir: &Path) -> PathBuf {
    let input = k.dir.join("lib/modules").join(&k.release).join("kernel").join(rel);
    let vmlinux = k.dir.join("vmlinux");
    let o = TestCommand::new(&[&"preresolve", &"--fold-symbols", &"--kernel", &vmlinux, &input, &"-o", &dir]).ok();
    let name = Path::new(rel).file_name().unwrap();
    let line = format!("PRERESV {} (", name.to_string_lossy());
    let out = common::stdout(&o);
    assert!(out.lines().any(|l| l.starts_with(&line) && l.ends_with(", folded, slide)")), "{out}");
    // --assume-nokaslr writes link-time addresses only: no table, no marker.
    let plain = dir.with_extension("nokaslr");
    let o = TestCommand::new(&[
        &"preresolve",
        &"--fold-symbols",
        &"--assume-nokaslr",
        &"--json",
        &"--kernel",
        &vmlinux,
        &input,
        &"-o",
        &plain,
    ])
    .ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["addresses"], "link_time", "{v}");
    let bytes = std::fs::read(plain.join(name)).unwrap();
    let elf = Elf::parse(&bytes, Want::Relocatable).unwrap();
    assert!(elf.section(SLIDE_SECTION).is_none());
    assert!(!bytes.windows(17).any(|w| w == b"preresolved-slide"));
    dir.join(name)
}

#[test]
fn another_build_and_a_stock_kernel_refuse_in_one_line() {
    let k = kaslr_build();
    let dir = common::tmpdir("slide-refuse");
    // One request per module (the batch loader; busybox insmod tries
    // init_module after finit_module fails: two lines).
    // A table naming another build: the build ID's last byte changed.
    let good = folded_slide(&k, "fs/nls/nls_cp437.ko", &dir.join("good"));
    let mut bytes = std::fs::read(&good).unwrap();
    let (off, size) = {
        let elf = Elf::parse(&bytes, Want::Relocatable).unwrap();
        let (_, sh) = elf.section(SLIDE_SECTION).expect("the table");
        let (o, s) = sh.file_range(LE).unwrap();
        (o as usize, s as usize)
    };
    let t = SlideTable::parse(&bytes[off..off + size]).unwrap();
    bytes[off + 28 + t.build_id.len() - 1] ^= 0xff;
    let other = dir.join("other-build.ko");
    std::fs::write(&other, &bytes).unwrap();
    // A table whose bitmap also marks a relocation that names a symbol.
    let mut bytes = std::fs::read(&good).unwrap();
    let (sec, ent) = mark_an_unfolded_relocation(&mut bytes);
    let unfolded = dir.join("unfolded.ko");
    std::fs::write(&unfolded, &bytes).unwrap();
    // Debian's own nls_cp437, unsigned and marked as the preresolver marks
    // a module for the slide (its table names Debian's build).
    let f = common::kernel();
    let deb = f.modules.join("kernel/fs/nls/nls_cp437.ko");
    let data = std::fs::read(&deb).unwrap();
    let m = bootlink::module::parse(&deb, &data, bootlink::compress::Compression::None).unwrap();
    let elf_len = m.signature.as_ref().map_or(data.len(), |s| s.offset);
    let table =
        SlideTable { build_id: vec![0x5a; 20], link_text: 0xffff_ffff_8100_0000, symbols: vec![], relocations: vec![] };
    let marked = dir.join("deb-marked.ko");
    std::fs::write(&marked, bootlink::preresolve::mark_module(data[..elf_len].to_vec(), &table).unwrap()).unwrap();
    let out = dir.join("run");
    let kk = common::build_kernel();
    let (a, b, c) = (
        format!(
            "other={kk},image:bzimage,kaslr:on,modules:folded-slide,raw:nls_cp437={},loader:batch",
            other.display()
        ),
        format!("stock=kernel:debian,modules:unsigned,raw:nls_cp437={},loader:batch", marked.display()),
        format!(
            "unfolded={kk},image:bzimage,kaslr:on,modules:folded-slide,raw:nls_cp437={},loader:batch",
            unfolded.display()
        ),
    );
    let (run, o) = common::lab_run_either_way(
        &[
            &"lab",
            &"-n",
            &"1",
            &"--no-trace",
            &"--jobs",
            &"2",
            &"--variant",
            &a,
            &"--variant",
            &b,
            &"--variant",
            &c,
            &"-o",
            &out,
            &"nls_cp437",
        ],
        &out,
    );
    print!("{}", common::stdout(&o));
    let log = |v: &str| std::fs::read_to_string(out.join(&rep(&run, v).log)).unwrap();
    let (olog, slog, ulog) = (log("other"), log("stock"), log("unfolded"));
    // The kernel's messages, each once (the log holds the console and the
    // kernel's buffer read after the loads: a message with its timestamp
    // may be in both).
    let lines = |log: &str, want: &str| -> Vec<String> {
        let set: BTreeSet<&str> = log.lines().filter(|l| l.contains("nls_cp437") && l.contains(want)).collect();
        set.into_iter().map(str::to_string).collect()
    };
    let other_lines = lines(&olog, "preresolved for another kernel build");
    println!("patched kernel, another build: {other_lines:?}");
    assert_eq!(other_lines.len(), 1, "{olog}");
    let stock_lines = lines(&slog, "version magic");
    println!("stock kernel: {stock_lines:?}");
    assert_eq!(stock_lines.len(), 1, "{slog}");
    assert!(stock_lines[0].contains("preresolved-slide ' should be '"), "{}", stock_lines[0]);
    let unfolded_lines = lines(&ulog, "marks no preresolved value");
    println!("patched kernel, a bitmap marking section {sec}'s entry {ent}: {unfolded_lines:?}");
    assert_eq!(unfolded_lines.len(), 1, "{ulog}");
    assert!(unfolded_lines[0].contains(&format!("bitmap of section {sec} ")), "{}", unfolded_lines[0]);
    for v in ["other", "stock", "unfolded"] {
        let r = rep(&run, v);
        assert!(r.modules.iter().any(|m| m.name == "nls_cp437" && m.status != 0), "{v}: {:?}", r.modules);
    }
}

/// Mark in the module's `.preresolved_slide` bitmaps one more relocation,
/// one that names a symbol (not folded), inside the words the table
/// already has so that it keeps its size; returns its (section, entry).
fn mark_an_unfolded_relocation(bytes: &mut [u8]) -> (u32, u32) {
    let (off, size, table, place) = {
        let elf = Elf::parse(bytes, Want::Relocatable).unwrap();
        let (_, sh) = elf.section(SLIDE_SECTION).expect("the table");
        let (o, s) = sh.file_range(LE).unwrap();
        let (off, size) = (o as usize, s as usize);
        let mut t = SlideTable::parse(&bytes[off..off + size]).unwrap();
        let mut place = None;
        for &(sec, _) in &t.relocations {
            let last = t.relocations.iter().filter(|r| r.0 == sec).map(|r| r.1).max().unwrap();
            let rs = elf.section_by_index(sec as usize).unwrap();
            let relas: &[object::elf::Rela64<object::LittleEndian>] = rs.data_as_array(LE, &*bytes).unwrap();
            let words_end = ((last / 32 + 1) * 32).min(relas.len() as u32);
            place = (0..words_end).find(|&e| relas[e as usize].r_sym(LE, false) != 0).map(|e| (sec, e));
            if place.is_some() {
                break;
            }
        }
        let place = place.expect("a relocation naming a symbol among the bitmaps' entries");
        t.relocations.push(place);
        (off, size, t, place)
    };
    let new = table.to_bytes();
    assert_eq!(new.len(), size, "the table keeps its size");
    bytes[off..off + size].copy_from_slice(&new);
    place
}
