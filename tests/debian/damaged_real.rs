//! The damaged-input suite from real Debian modules (tier 2): modules of
//! the reference kernel package, their signatures cut off, damaged one way
//! each (tests/damaged/generate.rs, BOOTLINK_DAMAGED_SEED replays another
//! seed) and run through every module command against Debian's vmlinuz
//! (tests/damaged/suite.rs), with the undamaged modules in the same batch.

#[path = "../damaged/bzimage.rs"]
mod bzimage;
use crate::common;
#[path = "../damaged/generate.rs"]
pub(crate) mod generate;
#[path = "../damaged/images.rs"]
pub(crate) mod images;
#[path = "../damaged/suite.rs"]
mod suite;

use std::ffi::OsString;
use std::path::Path;

use bootlink::rng::Rng;
use common::*;

const MODULES: &[&str] = &["fs/fat/fat.ko", "lib/libcrc32c.ko", "drivers/usb/storage/uas.ko", "fs/nls/nls_cp437.ko"];

#[test]
fn damaged_debian_modules_are_refused_and_the_good_ones_still_written() {
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23u64);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let good: Vec<_> = MODULES.iter().map(|m| module(m)).collect();
    let mut files = Vec::new();
    for p in &good {
        let (bytes, _) = bootlink::module::load_bytes(p).unwrap();
        let (elf_len, _) = bootlink::module::split_signature(&bytes).unwrap();
        files.extend(generate::modules(&bootlink::module::name_from_path(p), &bytes[..elf_len], &mut rng, 3));
    }
    // The classes of tests/damaged/images.rs from a stream of their own.
    let mut rng = Rng(seed ^ 0x696d_6167);
    for p in &good {
        let (bytes, _) = bootlink::module::load_bytes(p).unwrap();
        let (elf_len, _) = bootlink::module::split_signature(&bytes).unwrap();
        files.extend(images::modules(&bootlink::module::name_from_path(p), &bytes[..elf_len], &mut rng, 2));
    }
    let dir = tmpdir("damaged-real");
    let mut counts = suite::Counts::default();
    let k = &kernel().vmlinuz;
    suite::batch(&dir, k, true, &files, &good, &mut counts);
    suite::singles(&dir, k, true, &files, &mut counts);
    assert!(counts.files >= 300, "only {} damaged modules", counts.files);
    report("damaged_real", &counts.render("damaged modules (Debian's)"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same classes from Debian's arm64 modules (signatures cut off),
/// against Debian's arm64 Image: every module command but finalize (which
/// has nothing to do on arm64 and refuses the kernel itself), each batch
/// with the undamaged modules, and each class alone.
#[test]
fn damaged_debian_arm64_modules_are_refused_and_the_good_ones_still_written() {
    let test = "damaged_debian_arm64_modules_are_refused_and_the_good_ones_still_written";
    let Some(k) = common::arm64::arm64(test) else { return };
    let mut rng = Rng(seed() ^ 0x6172_6d36);
    let good: Vec<_> = ["fs/fat/fat.ko", "lib/libcrc32c.ko"].iter().map(|m| k.modules.join("kernel").join(m)).collect();
    let mut files = Vec::new();
    for p in &good {
        let (bytes, _) = bootlink::module::load_bytes(p).unwrap();
        let (elf_len, _) = bootlink::module::split_signature(&bytes).unwrap();
        assert_eq!(generate::u16_at(&bytes, 0x12), 183, "{}: an AArch64 module", p.display());
        let name = bootlink::module::name_from_path(p);
        files.extend(generate::modules(&name, &bytes[..elf_len], &mut rng, 2));
        files.extend(images::modules(&name, &bytes[..elf_len], &mut rng, 2));
    }
    let commands: Vec<_> = suite::commands(&k.vmlinuz, true).into_iter().filter(|c| c.0 != "finalize").collect();
    let dir = tmpdir("damaged-real-arm64");
    let mut counts = suite::Counts::default();
    suite::batch_of(&dir, &commands, &files, &good, &mut counts);
    suite::singles_of(&dir, &commands, &files, &mut counts);
    assert!(counts.by_class.contains_key("foreign-machine"), "no module of another machine");
    report("damaged_real", &counts.render("damaged arm64 modules (Debian's)"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Damaged copies of Debian's vmlinuz (its x86 boot header and its xz
/// payload; tests/damaged/bzimage.rs) through every command that reads a
/// kernel image: each refused in one line naming it and giving its
/// class's reason, nothing written, no temporary file left.
#[test]
fn damaged_debian_vmlinuz_is_refused_by_every_command() {
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23u64);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    let mut rng = Rng(seed ^ 0x627a_696d);
    let base = std::fs::read(&kernel().vmlinuz).unwrap();
    // An ELF kernel image of another machine: the fixture vmlinux as AArch64.
    let mut foreign = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vmlinux")).unwrap();
    foreign[0x12..0x14].copy_from_slice(&183u16.to_le_bytes());
    let images = bzimage::images(&base, &foreign, &mut rng, 2);
    let m = module("fs/fat/fat.ko");
    let s = |a: &str| OsString::from(a);
    let with = |mut a: Vec<OsString>, p: &Path, rest: &[&dyn AsRef<std::ffi::OsStr>]| {
        a.push(p.into());
        a.extend(rest.iter().map(|r| r.as_ref().to_owned()));
        a
    };
    let commands: Vec<suite::OneInput> = vec![
        ("kernel-info", Box::new(|p: &Path, _: &Path| with(vec![s("kernel-info")], p, &[]))),
        ("inspect", Box::new(|p: &Path, _: &Path| with(vec![s("inspect")], p, &[&m]))),
        (
            "preresolve",
            Box::new(|p: &Path, o: &Path| {
                with(vec![s("preresolve"), s("--kernel")], p, &[&"--assume-nokaslr", &m, &"-o", &o])
            }),
        ),
        ("finalize", Box::new(|p: &Path, o: &Path| with(vec![s("finalize"), s("--kernel")], p, &[&m, &"-o", &o]))),
        ("symhash", Box::new(|p: &Path, o: &Path| with(vec![s("symhash"), s("--kernel")], p, &[&m, &"-o", &o]))),
        ("extract-vmlinux", Box::new(|p: &Path, o: &Path| with(vec![s("extract-vmlinux")], p, &[&"-o", &o]))),
        ("manifest show", Box::new(|p: &Path, _: &Path| with(vec![s("manifest"), s("show")], p, &[]))),
        (
            "manifest write",
            Box::new(|p: &Path, o: &Path| with(vec![s("manifest"), s("write"), s("--vmlinux")], p, &[&"-o", &o, &m])),
        ),
    ];
    let dir = tmpdir("damaged-vmlinuz");
    let mut counts = suite::Counts::default();
    // Not the shared image cache: damaged images would push the good ones out.
    suite::each_alone_env(&dir, &images, &commands, &[("BOOTLINK_NO_IMAGE_CACHE", "1")], &mut counts);
    for class in bzimage::CLASSES {
        assert!(counts.by_class.contains_key(class), "no damaged vmlinuz of class {class}");
    }
    report("damaged_real", &counts.render("damaged vmlinuz (Debian's)"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn seed() -> u64 {
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23u64);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    seed
}

/// Debian's arm64 Image (its vmlinuz) damaged in its boot header and its
/// export entries (tests/damaged/images.rs) through every command that
/// takes a kernel image: refused in one line giving the damage by each
/// that reads the Image, as with the undamaged Image by the others
/// (`extract-vmlinux` and `manifest show` refuse an arm64 Image whole).
#[test]
fn damaged_debian_arm64_images_are_refused_by_every_command_that_reads_them() {
    let test = "damaged_debian_arm64_images_are_refused_by_every_command_that_reads_them";
    let Some(k) = common::arm64::arm64(test) else { return };
    let base = std::fs::read(&k.vmlinuz).unwrap();
    let entries = images::arm64_entries(&base);
    assert!(entries.len() > 10_000, "{} export entries found by hand", entries.len());
    let mut rng = Rng(seed() ^ 0x6172_6d36);
    let files = images::arm64(&base, &entries, &mut rng, 2);
    let dir = tmpdir("damaged-arm64-image");
    let module = k.modules.join("kernel/fs/fat/fat.ko");
    let mods = images::modules_dir(&dir, &k.release, &module);
    let mut counts = suite::Counts::default();
    let name = format!("vmlinuz-{}", k.release);
    let commands = images::commands(&module, &mods, true);
    images::run(&dir.join("runs"), &name, &base, &files, &commands, &[("BOOTLINK_NO_IMAGE_CACHE", "1")], &mut counts);
    for class in images::ARM64_CLASSES {
        assert!(counts.by_class.contains_key(class), "no damaged arm64 Image of class {class}");
    }
    report("damaged_real", &counts.render("damaged arm64 Image (Debian's)"));
}

/// Debian's vmlinux (with the sections the series reserves, added) damaged
/// in its export entries and reserved sections (tests/damaged/images.rs)
/// through every command that takes a kernel image.
#[test]
fn damaged_debian_vmlinux_tables_are_refused_by_every_command_that_reads_them() {
    let k = kernel();
    let dir = tmpdir("damaged-vmlinux-tables");
    let base = images::with_reserved_sections(&k.vmlinux, &dir, 1 << 20);
    let mut rng = Rng(seed() ^ 0x7461_626c);
    let files = images::vmlinux(&base, &mut rng, 1);
    let module = module("fs/fat/fat.ko");
    let mods = images::modules_dir(&dir, &k.release, &module);
    let mut counts = suite::Counts::default();
    let commands = images::commands(&module, &mods, false);
    images::run(
        &dir.join("runs"),
        "vmlinux",
        &base,
        &files,
        &commands,
        &[("BOOTLINK_NO_IMAGE_CACHE", "1")],
        &mut counts,
    );
    for class in images::VMLINUX_CLASSES {
        assert!(counts.by_class.contains_key(class), "no damaged vmlinux of class {class}");
    }
    report("damaged_real", &counts.render("damaged vmlinux tables (Debian's, reserved sections added)"));
}
