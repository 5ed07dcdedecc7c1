//! The decompressed-image cache: hits give the same kernel, a damaged entry
//! is never trusted, and the cache can be turned off.

use crate::common;

use bootlink::kernel::{KernelImage, Source};
use common::*;

#[test]
fn cached_image_reads_the_same_and_damaged_entries_are_rebuilt() {
    let k = kernel(); // fetched with the real cache before it is redirected
    let cache = tmpdir("image-cache");
    // SAFETY: this test binary has one test, so no other thread reads the env.
    unsafe { std::env::set_var("BOOTLINK_CACHE", &cache) };
    let first = KernelImage::open(&k.vmlinuz, None).unwrap();
    let entries: Vec<_> = std::fs::read_dir(cache.join("vmlinux")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 2, "{entries:?}"); // .elf + .json
    let second = KernelImage::open(&k.vmlinuz, None).unwrap();
    assert!(matches!(second.source, Source::BzImage { .. }), "{:?}", second.source);
    assert_eq!(first.exports.len(), second.exports.len());
    assert!(
        first.exports.iter().zip(&second.exports).all(|(a, b)| (a.addr, &a.name, a.crc) == (b.addr, &b.name, b.crc))
    );
    // Damage the entry: it is not ELF any more, so it is decompressed anew.
    let elf = entries.iter().find(|p| p.extension().unwrap() == "elf").unwrap();
    std::fs::write(elf, b"garbage").unwrap();
    let third = KernelImage::open(&k.vmlinuz, None).unwrap();
    assert_eq!(third.exports.len(), first.exports.len());
    assert!(std::fs::read(elf).unwrap().starts_with(b"\x7fELF"), "rebuilt");
    unsafe { std::env::set_var("BOOTLINK_NO_IMAGE_CACHE", "1") };
    std::fs::remove_dir_all(cache.join("vmlinux")).unwrap();
    let fourth = KernelImage::open(&k.vmlinuz, None).unwrap();
    assert_eq!(fourth.exports.len(), first.exports.len());
    assert!(!cache.join("vmlinux").exists(), "nothing cached when turned off");
    std::fs::remove_dir_all(&cache).unwrap();
}
