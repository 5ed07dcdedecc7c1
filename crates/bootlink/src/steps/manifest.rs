//! `manifest`: a copy of the kernel (a vmlinux with patch `hash-manifest`)
//! whose module hash manifest lists the final modules, written to the
//! tree's `kernel_copy` (the lab keeps it in the run directory as
//! `kernels/<variant>-vmlinux`), which then boots. An arm64 kernel boots
//! from its Image: the manifest goes into a copy of the Image, placed by
//! the vmlinux beside it (`kernel build --arch arm64`'s directory).

use std::path::PathBuf;

use crate::error::{Error, Result};

use super::Tree;

/// What the list holds of each module file.
pub enum Listing {
    /// Its digest by this hash, decompressed: what the kernel links.
    Decompressed(crate::manifest::Hash),
    /// Its SHA-256 as stored, compressed (the lab's
    /// `module.hashes_of_read=1`).
    Stored,
}

pub fn apply(t: &mut Tree, listing: Listing) -> Result<()> {
    let paths: Vec<PathBuf> = t.modules.iter().map(|(_, p)| p.clone()).collect();
    let manifest = match listing {
        Listing::Stored => crate::manifest::of_stored_files(&paths)?,
        Listing::Decompressed(hash) => {
            crate::manifest::check_takes(t.image, hash, &t.kernel)?;
            crate::manifest::of_modules(hash, &paths)?.0
        }
    };
    let copy = t.kernel_copy.clone();
    if let Some(dir) = copy.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    if crate::manifest::is_arm64_image(&crate::fsutil::map_file(&t.kernel)?) {
        let vmlinux = t.kernel.with_file_name("vmlinux");
        crate::manifest::fill_image(&t.kernel, &vmlinux, &manifest, &copy)?;
    } else {
        crate::manifest::fill(&t.kernel, &manifest, &copy)?;
    }
    t.kernel = copy;
    Ok(())
}
