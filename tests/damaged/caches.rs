#![allow(dead_code)]
//! Damage to bootlink's own cache entries, by class: a file of an entry
//! (or its seal, or its record) damaged in place, one way each. Unlike the
//! other generators' files, none of these may be refused: an entry is the
//! cache's, not the user's input, and bootlink must make it again and give
//! the same answer as with a whole one, naming no input.

use std::path::Path;

use bootlink::rng::Rng;

pub const CLASSES: &[&str] =
    &["truncated", "bit-flips", "random-bytes", "emptied", "removed", "a-directory", "a-fifo", "a-link-to-dev-zero"];

/// Damage the file at `path` by `class` (its first `keep` bytes are left
/// as they were by the classes that can: an ELF header, say, so the damage
/// is not found by the magic alone).
pub fn damage(path: &Path, class: &str, keep: usize, rng: &mut Rng) {
    let data = std::fs::read(path).unwrap_or_default();
    let replace = |p: &Path| {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir_all(p).unwrap();
        } else if std::fs::symlink_metadata(p).is_ok() {
            std::fs::remove_file(p).unwrap();
        }
    };
    match class {
        "truncated" => {
            let cut = keep.min(data.len()) + rng.below(data.len().saturating_sub(keep).max(1));
            std::fs::write(path, &data[..cut.min(data.len().saturating_sub(1))]).unwrap();
        }
        "bit-flips" => {
            let mut d = data;
            for _ in 0..1 + rng.below(4) {
                let i = keep.min(d.len() - 1) + rng.below((d.len() - keep.min(d.len() - 1)).max(1));
                d[i] ^= 1 << rng.below(8);
            }
            std::fs::write(path, d).unwrap();
        }
        "random-bytes" => {
            let n = 1 + rng.below(4096);
            let mut d: Vec<u8> = data[..keep.min(data.len())].to_vec();
            d.extend((0..n).map(|_| rng.below(256) as u8));
            std::fs::write(path, d).unwrap();
        }
        "emptied" => std::fs::write(path, b"").unwrap(),
        "removed" => replace(path),
        "a-directory" => {
            replace(path);
            std::fs::create_dir(path).unwrap();
            std::fs::write(path.join("x"), b"x").unwrap();
        }
        "a-fifo" => {
            replace(path);
            let st = std::process::Command::new("mkfifo").arg(path).status().expect("run mkfifo");
            assert!(st.success(), "mkfifo {}", path.display());
        }
        "a-link-to-dev-zero" => {
            replace(path);
            std::os::unix::fs::symlink("/dev/zero", path).unwrap();
        }
        _ => panic!("no cache damage class {class}"),
    }
}
