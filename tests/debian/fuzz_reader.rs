//! Mutated real modules fed to the readers for a bounded time: no input may
//! panic. BOOTLINK_FUZZ_SECS sets the time (default 20 s), BOOTLINK_FUZZ_SEED
//! the seed (default: from the clock, printed so a failure can be replayed).

use crate::common;

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
            0 => common::mutate::shared(rng, &mut d, 0),
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
            3 => common::mutate::shared(rng, &mut d, 2),
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
    crate::common::report(
        "fuzz_reader",
        &format!("{runs} mutated modules read, {rejected} rejected with an error, 0 panics"),
    );
    assert!(runs > 100, "the fuzz loop ran only {runs} times");
    assert!(rejected > 0, "no mutation was ever rejected: the mutator is not doing anything");
}

/// One mutation of any input, text or binary: bit flips, random runs,
/// interesting numbers (as text and as little-endian words at aligned
/// offsets), a line dropped or repeated, truncation.
fn mutate_any(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    use common::mutate::{SHARED, shared};
    const TEXT: [&[u8]; 8] =
        [b"0", b"-1", b"ffffffffffffffff", b"18446744073709551615", b"4294967295", b"?", b" ", b"\n"];
    let words: [u64; 6] = [0, 1, 0x7fff_ffff, 0xffff_ffff, u64::MAX, base.len() as u64];
    let mut d = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        if d.is_empty() {
            break;
        }
        match rng.below(SHARED + 3) {
            arm if arm < SHARED => shared(rng, &mut d, arm),
            arm if arm == SHARED => {
                let i = rng.below(d.len());
                let t = TEXT[rng.below(TEXT.len())];
                d.splice(i..(i + rng.below(20)).min(d.len()), t.iter().copied());
            }
            arm if arm == SHARED + 1 => {
                let off = rng.below(d.len() / 4) * 4;
                let v = words[rng.below(words.len())].to_le_bytes();
                let w = [4, 8][rng.below(2)].min(d.len() - off);
                d[off..off + w].copy_from_slice(&v[..w]);
            }
            _ => {
                // drop or repeat one line
                let lines: Vec<&[u8]> = d.split_inclusive(|&b| b == b'\n').collect();
                let k = rng.below(lines.len());
                let mut out = Vec::with_capacity(d.len() + 64);
                for (j, l) in lines.iter().enumerate() {
                    if j != k || rng.below(2) == 0 {
                        out.extend_from_slice(l);
                    }
                    if j == k {
                        out.extend_from_slice(l);
                    }
                }
                d = out;
            }
        }
    }
    d
}

/// A DDLink cache of three objects with bindings, scope and a prelinked
/// image, and a dlopen group of one more, as `ddlink write` encodes it.
fn sample_cache() -> Vec<u8> {
    use bootlink::ddlink::format::*;
    let obj = |name: &str, flags, entries, prelink| Object {
        name: name.into(),
        flags,
        identity: FileIdentity { dev: 2049, ino: 77, size: 4096, mtime_sec: 1_700_000_000, mtime_nsec: 5 },
        nsyms: 10,
        build_id: vec![0xab; 20],
        entries,
        prelink,
    };
    let cache = Cache {
        loader_build_id: vec![1, 2, 3, 4],
        objects: vec![
            obj("", OBJ_MAIN, vec![Entry { symidx: 1, tclass: 1, defobj: 2, defsym: 3, name_hash: 0 }], None),
            obj("/lib64/ld-linux-x86-64.so.2", OBJ_LOADER, vec![], None),
            obj(
                "/lib/libx.so",
                OBJ_PRELINKED,
                vec![
                    Entry { symidx: 2, tclass: 0, defobj: 2, defsym: 9, name_hash: 0 },
                    Entry { symidx: 5, tclass: 0, defobj: UNRESOLVED, defsym: 0, name_hash: 0 },
                ],
                Some(Prelink { base: 0x30_0000_0000, runtime: vec![1, 4, 9] }),
            ),
            // A dlopen group's object, binding to itself and to libx.
            obj(
                "/lib/plug.so",
                0,
                vec![
                    Entry { symidx: 1, tclass: 0, defobj: 3, defsym: 2, name_hash: 0 },
                    Entry { symidx: 2, tclass: 1, defobj: 2, defsym: 9, name_hash: 0 },
                ],
                None,
            ),
        ],
        scope: vec![0, 2],
        groups: vec![Group { first: 3, count: 1, scopes: vec![vec![vec![0, 2], vec![3, 2]]] }],
    };
    encode(&cache).unwrap()
}

/// Every other reader of a file bootlink is given, fed mutations of real
/// inputs for a bounded time (BOOTLINK_FUZZ_SECS, default 8 s here; the
/// same seed variable): DDLink records and caches (the cache's checksum
/// mostly made right again, so the mutation reaches the tables), order
/// traces, run.json and kernel logs, compressed streams and kernel images
/// (tests/fixtures/vmlinux, plain and compressed). No input may panic; a
/// failing case prints its seed and run, and is written out to replay.
#[test]
fn mutated_records_caches_traces_runs_and_images_never_panic() {
    use bootlink::ddlink::{format, record::Record};
    let secs: u64 = std::env::var("BOOTLINK_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let seed: u64 = std::env::var("BOOTLINK_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    println!("fuzz seed {seed} (BOOTLINK_FUZZ_SEED={seed} replays), {secs} s");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let record = b"ddlink-record 2\nloader 0a0b\nobj 0 2 2049 12 3000 1700000000 7 abcd /usr/bin/prog\n\
obj 1 4 0 0 0 0 0 - /lib64/ld-linux-x86-64.so.2\nobj 2 0 2049 13 9000 1700000001 0 ef01 /lib/with space.so\n\
scope 0 2\nbind 0 3 1 2 7\nbind 2 4 0 - -\nbind 2 5 0 ? -\nend 3\ngroup 0 3 1\n\
obj 3 0 2049 14 9000 1700000001 0 ef02 /lib/plug.so\nlscope 3 2 2 0 2 2 3 2\nbind 3 1 0 3 2\nbind 3 2 1 2 9\n\
end-group 0 2\n"
        .to_vec();
    let trace = b"bl-trace 1\nobject 555555554000 -\nobject 7ffff7dd0000 /lib/x86_64-linux-gnu/libc.so.6\n\
fn 555555555139\nfn 555555555150\noverflow\nend 2 40\n"
        .to_vec();
    let dmesg = std::fs::read(fixtures.join("dmesg-6.1-vfat.log")).unwrap();
    let run_json = serde_json::to_vec(&bootlink_lab::run::dmesg::run_from_log(&dmesg, Path::new("dmesg.log"))).unwrap();
    let vmlinux = std::fs::read(fixtures.join("vmlinux")).unwrap();
    let packed: Vec<(Compression, Vec<u8>)> = [Compression::Xz, Compression::Zstd, Compression::Gzip]
        .into_iter()
        .map(|k| (k, compress::compress(&vmlinux, k).unwrap()))
        .collect();
    let cache = sample_cache();
    assert!(format::decode(&cache).is_ok());
    let scratch = tempfile::tempdir().unwrap();
    let image_path = scratch.path().join("vmlinux");

    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut runs, mut rejected) = (0u64, [0u64; 6]);
    while Instant::now() < deadline {
        let target = (runs % 6) as usize;
        let input = match target {
            0 => mutate_any(&mut rng, &record),
            1 => {
                let mut d = mutate_any(&mut rng, &cache);
                // The header's checksum (bytes 24..32): made right again in
                // most runs, so the mutation reaches the tables behind it.
                if d.len() >= 32 && rng.below(8) != 0 {
                    let c = format::checksum(&d);
                    d[24..32].copy_from_slice(&c.to_le_bytes());
                }
                d
            }
            2 => mutate_any(&mut rng, &trace),
            3 => {
                let base = if rng.below(2) == 0 { &run_json } else { &dmesg };
                mutate_any(&mut rng, base)
            }
            4 => {
                let (_, p) = &packed[rng.below(packed.len())];
                mutate_any(&mut rng, p)
            }
            _ => mutate_any(&mut rng, &vmlinux),
        };
        let r = std::panic::catch_unwind(|| -> bool {
            match target {
                0 => Record::parse(&String::from_utf8_lossy(&input)).is_ok(),
                1 => format::decode(&input).is_ok(),
                2 => bootlink::order::trace::Trace::parse(&String::from_utf8_lossy(&input)).is_ok(),
                3 if input.first() == Some(&b'{') => {
                    bootlink_lab::run::parse_run_json(&input, Path::new("run.json")).is_ok()
                }
                3 => bootlink_lab::run::dmesg::load_log(&input, Path::new("dmesg.log")).is_ok(),
                4 => bootlink::kernel::find_vmlinux(input.clone().into()).is_ok(),
                _ => bootlink::kernel::KernelImage::from_vmlinux(
                    &image_path,
                    &input,
                    bootlink::kernel::Source::Vmlinux,
                    None,
                )
                .is_ok(),
            }
        });
        match r {
            Ok(true) => {}
            Ok(false) => rejected[target] += 1,
            Err(_) => {
                let p = std::env::temp_dir().join(format!("bootlink-fuzz-crash-{seed}-{runs}-reader{target}"));
                std::fs::write(&p, &input).unwrap();
                panic!("reader {target} panicked on input {} (seed {seed}, run {runs})", p.display());
            }
        }
        runs += 1;
    }
    crate::common::report(
        "fuzz_reader",
        &format!("{runs} mutated inputs read, rejected per reader {rejected:?}, 0 panics"),
    );
    assert!(runs > 600, "the fuzz loop ran only {runs} times");
    for (i, n) in rejected.iter().enumerate().filter(|&(i, _)| i != 3) {
        assert!(*n > 0, "reader {i}: no mutation was ever rejected: the mutator is not doing anything");
    }
}
