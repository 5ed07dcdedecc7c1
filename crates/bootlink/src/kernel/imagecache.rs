//! A content-addressed cache of decompressed kernel images.
//!
//! Decompressing a distribution vmlinuz (one XZ block, ~8 MB to ~66 MB) takes
//! ~0.7 s and cannot be parallelised; reading all modules of the same kernel
//! takes ~0.25 s. The uncompressed vmlinux is kept under
//! `<cache>/vmlinux/<hash>.elf`, keyed by a hash of the compressed image's
//! bytes (so a changed image is never served stale), with the most recent
//! few kept. `BOOTLINK_NO_IMAGE_CACHE=1` turns it off.
//!
//! Never trusted ([`crate::cache`]): `<hash>.json`, written after the
//! vmlinux, holds its size and SHA-256, and an entry is used only when the
//! vmlinux still has them (hashing 66 MB takes ~40 ms; decompressing it
//! again 0.7 s). A damaged entry (cut, changed, replaced by a FIFO or a
//! directory, its record damaged) is made again from the image: it is never
//! the image's fault, nor a reason to refuse it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Source, Vmlinux, find_vmlinux};
use crate::error::Error;
use crate::fsutil;

const KEEP: usize = 4;

/// The most a record (`<hash>.json`) may hold.
const MAX_RECORD: u64 = 1 << 20;

/// What `<hash>.json` says of `<hash>.elf`.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    source: Source,
    size: u64,
    sha256: String,
}

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

/// The cached vmlinux of an entry when it is whole; Err: what is wrong.
fn cached(elf: &Path, record: &Path) -> std::result::Result<Vmlinux, String> {
    let r = fsutil::read_input(record, MAX_RECORD).map_err(|e| format!("its record: {}", e.msg))?;
    let r: Record = serde_json::from_slice(&r).map_err(|e| format!("its record does not read: {e}"))?;
    let data = fsutil::map_file(elf).map_err(|e| e.msg)?;
    if data.len() as u64 != r.size {
        return Err(format!("{} bytes, {} when written", data.len(), r.size));
    }
    if crate::cache::sha256_hex(&data) != r.sha256 {
        return Err("its contents changed since it was written (SHA-256)".into());
    }
    Ok(Vmlinux { data, source: r.source })
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
    if std::fs::symlink_metadata(&elf).is_ok() || std::fs::symlink_metadata(&meta).is_ok() {
        match cached(&elf, &meta) {
            Ok(v) => return Ok(v),
            Err(why) => crate::progress::status(&format!(
                "bootlink: the decompressed kernel image in the cache ({}) is damaged ({why}): made again",
                elf.display()
            )),
        }
    }
    let v = find_vmlinux(image)?;
    if !matches!(v.source, Source::Vmlinux) && worth_keeping(&v.data) && std::fs::create_dir_all(dir()).is_ok() {
        // A cache that cannot be written is only slower, never an error.
        // The record goes last: an entry without one is not used.
        let _ = std::fs::remove_file(&meta);
        let record =
            Record { source: v.source.clone(), size: v.data.len() as u64, sha256: crate::cache::sha256_hex(&v.data) };
        let json = serde_json::to_vec(&record).expect("serializable");
        if replace(&elf, &v.data).is_ok() && replace(&meta, &json).is_ok() {
            prune();
        }
    }
    Ok(v)
}

/// Only what could be a kernel is kept: an executable ELF file with
/// bytes to load. A stream that merely starts with an ELF header (zeros
/// after it, the image refused by every command) would otherwise take a
/// cache entry as large as the stream, for nothing.
fn worth_keeping(data: &[u8]) -> bool {
    crate::elf::Elf::parse(data, crate::elf::Want::Executable).and_then(|e| e.loadable_bytes()).is_ok_and(|n| n > 0)
}

/// Write `path` atomically, whatever is there now.
fn replace(path: &Path, data: &[u8]) -> crate::Result<()> {
    // What is there is the cache's own: anything but a regular file (a
    // directory, a FIFO, a link) goes first, as write_atomic refuses to
    // write over it (an output is never a device, a FIFO or a directory).
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(m) if !m.is_file() => {
            let _ = std::fs::remove_file(path);
        }
        _ => {}
    }
    fsutil::write_atomic(path, data)
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
