//! Mutated real modules fed to the readers for a bounded time: no input may
//! panic. BOOTLINK_FUZZ_SECS sets the time (default 20 s), BOOTLINK_FUZZ_SEED
//! the seed (default: from the clock, printed so a failure can be replayed).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use bootlink::compress::{self, Compression};
use bootlink::module;
use common::*;

use bootlink::rng::Rng;

/// One mutation: byte flips, interesting values in the ELF or section
/// headers, truncation, or a signature trailer with a wild length.
fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut d = base.to_vec();
    let shoff = u64::from_le_bytes(d[0x28..0x30].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(d[0x3c..0x3e].try_into().unwrap()) as usize;
    let interesting: [u64; 7] = [0, 1, 0x7fff_ffff, 0xffff_ffff, u64::MAX, 0x8000_0000_0000_0000, d.len() as u64];
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 => {
                // a field of the ELF header
                let off = rng.below(0x40 / 2) * 2;
                let v = interesting[rng.below(interesting.len())].to_le_bytes();
                let w = [2, 4, 8][rng.below(3)].min(0x40 - off);
                d[off..off + w].copy_from_slice(&v[..w]);
            }
            2 if shnum > 0 => {
                // a field of a section header (offset, size, link, entsize...)
                let sh = shoff + 64 * rng.below(shnum) + 8 * rng.below(8);
                if sh + 8 <= d.len() {
                    let v = interesting[rng.below(interesting.len())].to_le_bytes();
                    d[sh..sh + 8].copy_from_slice(&v);
                }
            }
            3 => d.truncate(rng.below(d.len())),
            4 => {
                let sig_len = (rng.next_u64() as u32).to_be_bytes();
                let mut info = vec![0u8, 0, 2, rng.below(256) as u8, rng.below(256) as u8, 0, 0, 0];
                info.extend_from_slice(&sig_len);
                d.extend_from_slice(&info);
                d.extend_from_slice(module::SIG_MAGIC);
            }
            _ => {
                let i = rng.below(d.len());
                let n = rng.below(64).min(d.len() - i);
                d[i..i + n].iter_mut().for_each(|b| *b = rng.next_u64() as u8);
            }
        }
        if d.len() < 0x40 {
            break;
        }
    }
    d
}

#[test]
fn mutated_modules_never_panic() {
    let secs: u64 = std::env::var("BOOTLINK_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let seed: u64 = std::env::var("BOOTLINK_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    println!("fuzz seed {seed} (BOOTLINK_FUZZ_SEED={seed} replays), {secs} s");
    let bases: Vec<Vec<u8>> =
        ["fs/fat/fat.ko", "lib/libcrc32c.ko", "drivers/usb/storage/uas.ko", "fs/nls/nls_cp437.ko"]
            .iter()
            .map(|m| std::fs::read(module(m)).unwrap())
            .collect();
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut runs, mut rejected) = (0u64, 0u64);
    while Instant::now() < deadline {
        let base = &bases[rng.below(bases.len())];
        let input = mutate(&mut rng, base);
        let r = std::panic::catch_unwind(|| module::parse(Path::new("fuzz.ko"), &input, Compression::None));
        match r {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => rejected += 1,
            Err(_) => {
                let p = std::env::temp_dir().join(format!("bootlink-fuzz-crash-{seed}-{runs}.ko"));
                std::fs::write(&p, &input).unwrap();
                panic!("module::parse panicked on input {} (seed {seed}, run {runs})", p.display());
            }
        }
        // Every tenth input also goes through the decompressors.
        if runs % 10 == 0 {
            let kind = [Compression::Xz, Compression::Zstd, Compression::Gzip][rng.below(3)];
            let mut packed = compress::compress(&input[..input.len().min(20_000)], kind).unwrap();
            let i = rng.below(packed.len());
            packed[i] ^= 0xff;
            let r = std::panic::catch_unwind(|| compress::decompress(&packed, kind, 0));
            assert!(r.is_ok(), "decompress panicked (seed {seed}, run {runs})");
        }
        runs += 1;
    }
    println!("{runs} mutated modules read, {rejected} rejected with an error, 0 panics");
    assert!(runs > 100, "the fuzz loop ran only {runs} times");
    assert!(rejected > 0, "no mutation was ever rejected: the mutator is not doing anything");
}
