//! The damaged-input suite, offline: several hundred modules and kernel
//! images damaged one way each (tests/damaged/generate.rs, seeded:
//! BOOTLINK_DAMAGED_SEED replays another seed) from the checked-in fixtures,
//! through every command of the real binary (tests/damaged/suite.rs).
//! tests/damaged_real.rs does the same from real Debian modules.

mod common;
#[path = "damaged/generate.rs"]
mod generate;
#[path = "damaged/suite.rs"]
mod suite;

use std::path::{Path, PathBuf};

use bootlink::rng::Rng;

fn seed() -> u64 {
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    seed
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The fixture modules, uncompressed: (stem, bytes).
fn bases() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures().join("modules"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .map(|p| {
            let (bytes, _) = bootlink::module::load_bytes(&p).unwrap();
            (bootlink::module::name_from_path(&p), bytes.to_vec())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn damaged_modules_are_refused_and_the_good_ones_still_written() {
    let mut rng = Rng(seed());
    let files: Vec<_> = bases().iter().flat_map(|(stem, b)| generate::modules(stem, b, &mut rng, 4)).collect();
    let good: Vec<PathBuf> =
        std::fs::read_dir(fixtures().join("modules")).unwrap().flatten().map(|e| e.path()).collect();
    let dir = common::tmpdir("damaged-modules");
    let mut counts = suite::Counts::default();
    suite::batch(&dir, &fixtures().join("vmlinux"), false, &files, &good, &mut counts);
    suite::singles(&dir, &fixtures().join("vmlinux"), false, &files, &mut counts);
    assert!(counts.files >= 300, "only {} damaged modules", counts.files);
    for class in generate::ELF_CLASSES.iter().chain(generate::MODULE_CLASSES) {
        assert!(counts.by_class.contains_key(class), "no damaged module of class {class}");
    }
    common::report("damaged", &counts.render("damaged modules (fixtures)"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_kernel_images_are_refused_by_every_command() {
    let mut rng = Rng(seed() ^ 0x6b65_726e);
    let base = std::fs::read(fixtures().join("vmlinux")).unwrap();
    let images = generate::kernels(&base, &mut rng, 3);
    let dir = common::tmpdir("damaged-kernels");
    let mut counts = suite::Counts::default();
    suite::kernels(&dir, &images, &fixtures().join("modules/bl_plain.ko"), &mut counts);
    common::report("damaged", &counts.render("damaged kernel images (fixture vmlinux)"));
    let _ = std::fs::remove_dir_all(&dir);
}
