//! The lab patch `hash-bytes-read` (`module.hashes_of_read=1` with a
//! manifest of the compressed files, `manifest:read`) on the self-built
//! kernel's MODULE_DECOMPRESS flavour (xz on 6.1, zstd on 6.12), the
//! modules xfs, ext4 and vfat with their dependencies loaded by the batch
//! loader under `module.sig_enforce=1`: what it saves against the safe
//! manifest of the decompressed modules, why it is not kept (the same list
//! refuses every module without the parameter or when user space
//! decompresses), and that `bootlink recommend` never recommends it.
//! Moved from tests/boots/compress_modules.rs (tier 3), which checks the
//! kept paths, because no other test of tier 3 needs these three boots.

use crate::common;

use bootlink_lab::run::results::Variant;
use common::TestCommand;

const MODULES: [&str; 3] = ["xfs", "ext4", "vfat"];

/// With a manifest of the compressed files the kernel path loads the set
/// hashing a fraction of the bytes, faster than hashing the decompressed
/// modules; the same manifest without the patch's parameter, or with user
/// space decompressing, refuses every module (the kernel then hashes plain
/// bytes, which that list does not hold: the reason the safe manifest
/// lists decompressed modules); and recommend leaves it out.
#[test]
fn hashing_the_bytes_read_saves_time_but_covers_only_the_kernel_path() {
    let k = common::build_kernel();
    let format = common::module_decompress_format();
    let stored = format!("{k}+modules-{format},modules:unsigned,loader:batch-1,compress:{format},decompress:kernel");
    let variants = [
        format!("kernel={stored},manifest:on,cmdline:module.sig_enforce=1"),
        format!("read={stored},manifest:read,cmdline:module.sig_enforce=1 module.hashes_of_read=1"),
    ];
    let mut head = vec!["--no-trace", "-n", "1"];
    head.extend(MODULES);
    let (dir, run) = common::lab_variants("compress-hash-read", &head, &variants);
    let (kernel, read) = (common::variant(&run, "kernel"), common::variant(&run, "read"));
    let l = common::loader_of(read);
    let n = read.module_files.as_ref().unwrap().files;
    assert!(l.not_loaded.is_empty() && l.decompressed_by_kernel == n, "{l:?}");
    let load = |v: &Variant| v.repetitions[0].modules_total_us;
    assert!(load(read) < load(kernel), "read {} vs decompressed {}", load(read), load(kernel));
    println!(
        "hash of the bytes read: {:.1} ms; of the decompressed modules: {:.1} ms ({n} modules)",
        load(read) / 1000.0,
        load(kernel) / 1000.0
    );

    // the hash of the bytes read is measured, never recommended
    let o = TestCommand::new(&[&"recommend", &dir, &"--storage", &"nand", &"--json"]).ok();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = r["modules"].as_array().unwrap().iter().map(|m| m["variant"].as_str().unwrap()).collect();
    assert_eq!(names, ["kernel"], "{names:?}");
    let left: Vec<&str> = r["left_out"].as_array().unwrap().iter().map(|l| l["variant"].as_str().unwrap()).collect();
    assert!(left.contains(&"read"), "{left:?}");

    let plain = format!("{k}+modules-{format},modules:unsigned,manifest:read,loader:batch-1,compress:{format}");
    let (off, user) = (
        format!("off={plain},decompress:kernel,cmdline:module.sig_enforce=1"),
        format!("user={plain},decompress:user,cmdline:module.sig_enforce=1 module.hashes_of_read=1"),
    );
    for (name, spec) in [("off", &off), ("user", &user)] {
        // EKEYREJECTED: unsigned and not listed by the digest it was checked by
        let (out, run) = common::failing_lab(&format!("compress-hash-read-{name}"), &MODULES, spec);
        assert!(out.contains("insmod exited 129"), "{name}: {out}");
        let v = common::variant(&run, name);
        let l = common::loader_of(v);
        assert_eq!(l.not_loaded.len() as u64, v.module_files.as_ref().unwrap().files, "{name}: {l:?}");
        assert_eq!((l.decompressed_by_kernel, l.decompressed_by_user), (0, 0), "{name}: {l:?}");
    }
}
