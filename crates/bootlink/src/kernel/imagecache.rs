//! A content-addressed cache of decompressed kernel images.
//!
//! Decompressing a distribution vmlinuz (one XZ block, ~8 MB to ~66 MB) takes
//! ~0.7 s and cannot be parallelised; reading all modules of the same kernel
//! takes ~0.25 s. The uncompressed vmlinux is kept under
//! `<cache>/vmlinux/<hash>.elf`, keyed by a hash of the compressed image's
//! bytes (so a changed image is never served stale), with the most recent
//! few kept. `BOOTLINK_NO_IMAGE_CACHE=1` turns it off.

use std::path::PathBuf;

use super::{Source, Vmlinux, find_vmlinux};
use crate::error::Error;
use crate::fsutil;

const KEEP: usize = 4;

/// SHA-256 of the image (first 128 bits, hex) and its length: stable
/// across Rust releases and machines, unlike the standard library's hasher.
fn key(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(data);
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}-{}", data.len())
}

fn dir() -> PathBuf {
    fsutil::cache_dir().join("vmlinux")
}

/// The vmlinux inside a compressed image, from the cache when it is there.
/// The image is handed on as it was mapped, never copied: one of gigabytes
/// is refused by [`find_vmlinux`] (a file over [`super::MAX_IMAGE`] before it is
/// hashed here).
pub fn vmlinux(image: fsutil::Bytes) -> std::result::Result<Vmlinux, Error> {
    if std::env::var_os("BOOTLINK_NO_IMAGE_CACHE").is_some() {
        return find_vmlinux(image);
    }
    super::check_image_size(&image)?;
    let k = key(&image);
    let elf = dir().join(format!("{k}.elf"));
    let meta = dir().join(format!("{k}.json"));
    if let (Ok(m), true) = (std::fs::read(&meta), elf.is_file())
        && let (Ok(source), Ok(data)) = (serde_json::from_slice::<Source>(&m), fsutil::map_file(&elf))
        && data.starts_with(&object::elf::ELFMAG)
    {
        return Ok(Vmlinux { data, source });
    }
    let v = find_vmlinux(image)?;
    if !matches!(v.source, Source::Vmlinux) && std::fs::create_dir_all(dir()).is_ok() {
        // A cache that cannot be written is only slower, never an error.
        let json = serde_json::to_vec(&v.source).expect("serializable");
        if fsutil::write_atomic(&elf, &v.data).is_ok() && fsutil::write_atomic(&meta, &json).is_ok() {
            prune();
        }
    }
    Ok(v)
}

/// Keep the most recently written entries only.
fn prune() {
    let Ok(rd) = std::fs::read_dir(dir()) else { return };
    let mut elfs: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "elf"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    elfs.sort();
    let excess = elfs.len().saturating_sub(KEEP);
    for (_, p) in elfs.into_iter().take(excess) {
        let _ = std::fs::remove_file(p.with_extension("json"));
        let _ = std::fs::remove_file(p);
    }
}
