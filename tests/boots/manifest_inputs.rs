//! `manifest write` on the self-built kernel (patch `hash-manifest`) given
//! files that are not modules of that kernel, and its bzImage's Secure Boot
//! state: each bad file is one line and not listed, the build's modules
//! are; the new bzImage is said to be unsigned; signing is refused before
//! anything is written when the kernel has no EFI stub (the lab config).

use crate::common;
#[path = "../damaged/generate.rs"]
mod generate;

use common::*;

#[test]
fn manifest_write_refuses_what_is_not_a_module_of_the_kernel() {
    let k = self_built(true);
    let dir = tmpdir("manifest-inputs-bin");
    let modules = k.dir.join("lib/modules").join(&k.release);
    let n_good = bootlink::tree::find_modules(std::slice::from_ref(&modules)).unwrap().len();
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let empty_xz = bootlink::compress::compress(b"", bootlink::compress::Compression::Xz).unwrap();
    let mut rng = bootlink::rng::Rng(23);
    let random: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
    let cases: [(&str, &[u8], &str); 4] = [
        ("empty.ko", b"", "not an ELF file"),
        ("magic.ko", b"\x7fELF", "truncated ELF file"),
        ("random.ko.xz", &random, "not an ELF file"),
        ("empty.ko.xz", &empty_xz, "decompresses to nothing"),
    ];
    for (name, data, _) in &cases {
        std::fs::write(bad.join(name), data).unwrap();
    }
    // Debian's fat.ko: a module of another kernel.
    let debian = copy_to(&module("fs/fat/fat.ko"), &bad, "debian_fat.ko");
    let (vm, bz) = (dir.join("vmlinux.listed"), dir.join("bzImage.listed"));
    let o = run(&[
        &"manifest",
        &"write",
        &"--json",
        &"--vmlinux",
        &k.dir.join("vmlinux"),
        &"-o",
        &vm,
        &"--bzimage",
        &bz,
        &modules,
        &bad,
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for (name, _, want) in cases {
        let line = err.lines().find(|l| l.starts_with(&format!("bootlink: {}: ", bad.join(name).display())));
        assert!(line.is_some_and(|l| l.contains(want)), "{name}: {err}");
    }
    assert!(err.contains(&format!("bootlink: {}: built for another kernel", debian.display())), "{err}");
    assert!(err.contains(&format!("bootlink: {}: not signed for Secure Boot", bz.display())), "{err}");
    assert_eq!(err.lines().count(), 6, "one line each: {err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["report"]["modules"].as_u64(), Some(n_good as u64), "only the build's modules are listed");
    assert_eq!(v["errors"].as_array().unwrap().len(), 5);

    // Signing: the lab kernel has no EFI stub, so its bzImage is no PE
    // image; refused before anything is written.
    let (key, cert) = key_pair(&dir, "lab");
    let (vm2, bz2) = (dir.join("vmlinux.signed"), dir.join("bzImage.signed"));
    let o = run(&[
        &"manifest",
        &"write",
        &"--vmlinux",
        &k.dir.join("vmlinux"),
        &"-o",
        &vm2,
        &"--bzimage",
        &bz2,
        &"--sign-key",
        &key,
        &"--sign-cert",
        &cert,
        &modules,
    ]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert_eq!(
        err.trim_end(),
        format!(
            "bootlink: {}: not a PE image (a kernel built without CONFIG_EFI_STUB): it cannot be signed for Secure Boot",
            k.tree.join("arch/x86/boot/bzImage").display()
        )
    );
    assert!(!vm2.exists() && !bz2.exists(), "nothing written");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The damaged-input suite through `manifest write`: modules of the
/// self-built kernel damaged one way each (tests/damaged/generate.rs,
/// BOOTLINK_DAMAGED_SEED replays another seed) in one batch with the
/// build's own modules. Each marked file is refused in one line and not
/// listed; the build's modules are listed; nothing panics or hangs.
#[test]
fn manifest_write_refuses_damaged_modules_and_lists_the_good_ones() {
    let k = self_built(true);
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23u64);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    let mut rng = bootlink::rng::Rng(seed ^ 0x6d61_6e69);
    let modules = k.dir.join("lib/modules").join(&k.release);
    let good = bootlink::tree::find_modules(std::slice::from_ref(&modules)).unwrap();
    let dir = tmpdir("manifest-damaged");
    let damaged = dir.join("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    let mut files = Vec::new();
    for p in good.iter().take(4) {
        let (bytes, _) = bootlink::module::load_bytes(p).unwrap();
        let (elf_len, _) = bootlink::module::split_signature(&bytes).unwrap();
        files.extend(generate::modules(&bootlink::module::name_from_path(p), &bytes[..elf_len], &mut rng, 3));
    }
    for f in &files {
        std::fs::write(damaged.join(&f.name), &f.bytes).unwrap();
    }
    let marked = files.iter().filter(|f| f.invalid).count();
    let vm = dir.join("vmlinux.listed");
    let args: [&dyn AsRef<std::ffi::OsStr>; 8] =
        [&"manifest", &"write", &"--json", &"--vmlinux", &k.dir.join("vmlinux"), &"-o", &vm, &modules];
    let mut args = args.to_vec();
    args.push(&damaged);
    let t0 = std::time::Instant::now();
    let o = run(&args);
    let err = stderr(&o);
    assert!(t0.elapsed() < std::time::Duration::from_secs(600), "manifest write took {:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(1), "{err}");
    for bad in ["panicked", "internal error", "stack backtrace", "memory allocation of"] {
        assert!(!err.contains(bad), "{bad}: {err}");
    }
    assert!(err.lines().all(|l| l.starts_with("bootlink: ")), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths = |key: &str| -> Vec<std::path::PathBuf> {
        v[key].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap().into()).collect()
    };
    let (listed, refused) = (paths("modules"), paths("errors"));
    let mut per_class: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for f in &files {
        let p = damaged.join(&f.name);
        let lines = err.lines().filter(|l| l.starts_with(&format!("bootlink: {}: ", p.display()))).count();
        let is_refused = refused.contains(&p);
        assert_eq!(lines, is_refused as usize, "{}: {lines} lines, refused: {is_refused}\n{err}", f.name);
        assert_ne!(is_refused, listed.contains(&p), "{}: listed and refused, or neither", f.name);
        if f.invalid {
            assert!(is_refused, "{} ({}) was listed:\n{err}", f.name, f.class);
        }
        let e = per_class.entry(f.class).or_default();
        e.0 += 1;
        e.1 += is_refused as usize;
    }
    for g in &good {
        assert!(listed.contains(g), "the build's module {} was not listed:\n{err}", g.display());
    }
    assert_eq!(v["report"]["modules"].as_u64(), Some(listed.len() as u64));
    let mut text = format!(
        "manifest write: {} damaged modules ({marked} marked invalid) + {} of the build's, one run: {} refused, {} listed; \
         0 panics, 0 hangs, 0 silent successes\n{:<28} {:>6} {:>8}\n",
        files.len(),
        good.len(),
        refused.len(),
        listed.len(),
        "class",
        "files",
        "refused"
    );
    for (class, (n, r)) in per_class {
        text += &format!("{class:<28} {n:>6} {r:>8}\n");
    }
    report("manifest_inputs", &text);
    let _ = std::fs::remove_dir_all(&dir);
}
