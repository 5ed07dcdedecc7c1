//! `manifest`: boot a copy of the kernel (a vmlinux with kernel/patches
//! 0011) whose module hash manifest lists the variant's final modules,
//! kept in the run directory as `kernels/<variant>-vmlinux`.

use std::path::PathBuf;

use crate::error::{Error, Result};

use super::Tree;

pub fn apply(t: &mut Tree) -> Result<()> {
    let paths: Vec<PathBuf> = t.modules.iter().map(|(_, p)| p.clone()).collect();
    let (manifest, _) = crate::manifest::of_modules(&paths)?;
    let dir = t.out.join("kernels");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let copy = dir.join(format!("{}-vmlinux", t.variant));
    crate::manifest::fill(&t.kernel, &manifest, &copy)?;
    t.kernel = copy;
    Ok(())
}
