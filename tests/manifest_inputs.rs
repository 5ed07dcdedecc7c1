//! `manifest write` on the self-built kernel (kernel/patches 0011) given
//! files that are not modules of that kernel, and its bzImage's Secure Boot
//! state: each bad file is one line and not listed, the build's modules
//! are; the new bzImage is said to be unsigned; signing is refused before
//! anything is written when the kernel has no EFI stub (the lab config).

mod common;

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
