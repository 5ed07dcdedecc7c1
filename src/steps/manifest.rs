//! `manifest`: a copy of the kernel (a vmlinux with kernel/6.1/patches 0011)
//! whose module hash manifest lists the final modules, written to the
//! tree's `kernel_copy` (the lab keeps it in the run directory as
//! `kernels/<variant>-vmlinux`), which then boots.

use std::path::PathBuf;

use crate::error::{Error, Result};

use super::Tree;

pub fn apply(t: &mut Tree) -> Result<()> {
    let paths: Vec<PathBuf> = t.modules.iter().map(|(_, p)| p.clone()).collect();
    let (manifest, _) = crate::manifest::of_modules(&paths)?;
    let copy = t.kernel_copy.clone();
    if let Some(dir) = copy.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    crate::manifest::fill(&t.kernel, &manifest, &copy)?;
    t.kernel = copy;
    Ok(())
}
