//! The damaged-input suite from real Debian modules (tier 2): modules of
//! the reference kernel package, their signatures cut off, damaged one way
//! each (tests/damaged/generate.rs, BOOTLINK_DAMAGED_SEED replays another
//! seed) and run through every module command against Debian's vmlinuz
//! (tests/damaged/suite.rs), with the undamaged modules in the same batch.

mod common;
#[path = "damaged/generate.rs"]
mod generate;
#[path = "damaged/suite.rs"]
mod suite;

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
    let dir = tmpdir("damaged-real");
    let mut counts = suite::Counts::default();
    let k = &kernel().vmlinuz;
    suite::batch(&dir, k, true, &files, &good, &mut counts);
    suite::singles(&dir, k, true, &files, &mut counts);
    assert!(counts.files >= 300, "only {} damaged modules", counts.files);
    report("damaged_real", &counts.render("damaged modules (Debian's)"));
    let _ = std::fs::remove_dir_all(&dir);
}
