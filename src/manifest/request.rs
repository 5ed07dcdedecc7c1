//! The manifest capability as a request: list the final modules' digests in
//! a copy of the kernel and, when asked, rebuild its bzImage.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::manifest::bzimage::{self, Rebuilt};
use crate::manifest::{FillReport, Listed, fill, of_modules};

/// `bootlink manifest write`.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// The kernel (a vmlinux built with kernel/patches 0012).
    pub vmlinux: PathBuf,
    /// Where the kernel with the manifest goes (may be `vmlinux`).
    pub output: PathBuf,
    /// Also write the bzImage of the written vmlinux here.
    pub bzimage: Option<PathBuf>,
    /// The kernel's object tree (default: from the build.json beside
    /// `vmlinux`); used only with `bzimage`.
    pub tree: Option<PathBuf>,
    /// The final modules: files or directories.
    pub modules: Vec<PathBuf>,
}

/// What [`write`] did (fields in the order `--json` has always printed).
#[derive(Debug, Serialize)]
pub struct WriteReport {
    pub bzimage: Option<Rebuilt>,
    pub modules: Vec<Listed>,
    pub report: FillReport,
}

/// Find the object tree and check it before anything is written, list the
/// modules, write the kernel, then its bzImage.
pub fn write(req: &WriteRequest) -> Result<WriteReport> {
    let tree = match (&req.bzimage, &req.tree) {
        (Some(_), Some(t)) => Some(t.clone()),
        (Some(_), None) => Some(crate::kbuild::object_tree_of(&req.vmlinux)?),
        (None, _) => None,
    };
    if let Some(t) = &tree {
        bzimage::check(t, &req.vmlinux)?;
    }
    let (m, modules) = of_modules(&req.modules)?;
    let report = fill(&req.vmlinux, &m, &req.output)?;
    let bzimage = match (&req.bzimage, &tree) {
        (Some(b), Some(t)) => Some(bzimage::rebuild(t, &req.output, b)?),
        _ => None,
    };
    Ok(WriteReport { bzimage, modules, report })
}
