//! The modules made plain once the module steps are done: compressed ones
//! (`.ko.xz` & co.) decompressed on the host, the rest as they are.
//! busybox's insmod would decompress them in user space, at TCG speed and
//! outside any phase the lab traces, and would do so differently for
//! variants that are written uncompressed (unsigned): every variant gets
//! the same plain bytes, so what is compared is the kernel's work.

use crate::compress::Compression;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::module;

use super::Tree;

pub fn apply(t: &mut Tree) -> Result<()> {
    let dir = t.work.join("plain");
    let mut files = Vec::new();
    for (name, path) in std::mem::take(&mut t.modules) {
        let (data, compression) = module::load_bytes(&path)?;
        if compression == Compression::None {
            files.push((name, path));
            continue;
        }
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let dest = dir.join(format!("{name}.ko"));
        fsutil::write_atomic_nosync(&dest, &data)?;
        files.push((name, dest));
    }
    t.modules = files;
    Ok(())
}
