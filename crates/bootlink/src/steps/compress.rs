//! The guest's module files compressed as the kernel's `make
//! modules_install` compresses them (scripts/Makefile.modinst, 6.1 and
//! 6.12), by the same programs with the same options: `xz --check=crc32
//! --lzma2=dict=1MiB`, `zstd -q` (6.1 adds `-T0`, which writes the same
//! single frame for files of a module's size), `gzip -n` (level 6: kbuild
//! passes no level for modules). Before the manifest, which lists each
//! module by its decompressed digest (what the kernel hashes on either
//! path).

use std::path::Path;
use std::process::Command;

use crate::compress::Compression;
use crate::error::{Error, Result};
use crate::fsutil;

use super::Tree;

/// The command kbuild runs for `kind`, writing to stdout, and its package.
pub(crate) fn command(kind: Compression, file: &Path) -> Option<(Command, &'static str)> {
    let (prog, args, package): (&str, &[&str], &str) = match kind {
        Compression::Xz => ("xz", &["--check=crc32", "--lzma2=dict=1MiB", "-c"], "xz-utils"),
        Compression::Zstd => ("zstd", &["-q", "-c"], "zstd"),
        Compression::Gzip => ("gzip", &["-n", "-c"], "gzip"),
        Compression::None => return None,
    };
    let mut c = Command::new(prog);
    c.args(args).arg(file);
    Some((c, package))
}

pub fn apply(t: &mut Tree, dir: &Path, kind: Compression) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for (name, path) in std::mem::take(&mut t.modules) {
        let Some((mut cmd, package)) = command(kind, &path) else {
            files.push((name, path));
            continue;
        };
        let what = format!("compressing {} ({})", path.display(), kind.name());
        let data = crate::hosttool::run_bytes(&mut cmd, &what, package)?;
        let dest = dir.join(format!("{name}.ko{}", kind.suffix()));
        fsutil::write_atomic_nosync(&dest, &data)?;
        files.push((name, dest));
    }
    t.modules = files;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each program's output is the format the kernel and the batch
    /// loader recognise by magic, and decompresses to the same bytes.
    #[test]
    fn kbuild_commands_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let plain: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let f = dir.path().join("m.ko");
        std::fs::write(&f, &plain).unwrap();
        for kind in [Compression::Xz, Compression::Zstd, Compression::Gzip] {
            let (mut c, package) = command(kind, &f).unwrap();
            let out = crate::hosttool::run_bytes(&mut c, "test", package).unwrap();
            assert_eq!(Compression::detect(&out), kind);
            assert!(out.len() < plain.len() / 4, "{kind:?}: {} bytes", out.len());
            assert_eq!(crate::compress::decompress(&out, kind, plain.len()).unwrap(), plain);
        }
        assert!(command(Compression::None, &f).is_none());
    }
}
