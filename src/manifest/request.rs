//! The manifest capability as a request: list the final modules' digests in
//! a copy of the kernel and, when asked, rebuild its bzImage.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::manifest::bzimage::{self, Rebuilt};
use crate::manifest::{FillReport, Listed, fill, of_modules_for, secureboot};
use crate::tree::FileError;

/// `bootlink manifest write`.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// The kernel (a vmlinux built with kernel/6.1/patches 0011).
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
    /// Sign the written bzImage for Secure Boot with this key and
    /// certificate (sbsign, checked with sbverify); used only with `bzimage`.
    pub sign: Option<(PathBuf, PathBuf)>,
}

/// What [`write`] did (fields in the order `--json` has always printed).
#[derive(Debug, Serialize)]
pub struct WriteReport {
    pub bzimage: Option<Rebuilt>,
    /// The inputs refused as modules of this kernel (each not listed).
    pub errors: Vec<FileError>,
    pub modules: Vec<Listed>,
    /// Written only when at least one module was listed.
    pub report: Option<FillReport>,
    /// The certificate the bzImage was signed for Secure Boot with.
    pub secure_boot_cert: Option<PathBuf>,
}

/// Find the object tree and check it (and the signing key) before anything
/// is written, parse every input as a module of this kernel (the refused
/// ones are reported, not listed), list the rest, write the kernel, then its
/// bzImage, signed when a key was given. Nothing is written when no module
/// is left.
pub fn write(req: &WriteRequest) -> Result<WriteReport> {
    let tree = match (&req.bzimage, &req.tree) {
        (Some(_), Some(t)) => Some(t.clone()),
        (Some(_), None) => Some(crate::kbuild::object_tree_of(&req.vmlinux)?),
        (None, _) => None,
    };
    if let Some(t) = &tree {
        bzimage::check(t, &req.vmlinux)?;
        if let Some((key, cert)) = &req.sign {
            // The tree's own bzImage tells whether the new one can be signed.
            secureboot::check_signable(&t.join("arch/x86/boot/bzImage"), key, cert)?;
        }
    }
    let k = crate::kernel::KernelImage::open(&req.vmlinux, None)?;
    k.rewritable_by("manifest write")?;
    let (m, modules, errors) = of_modules_for(&k, &req.modules)?;
    if modules.is_empty() {
        return Ok(WriteReport { bzimage: None, errors, modules, report: None, secure_boot_cert: None });
    }
    let report = fill(&req.vmlinux, &m, &req.output)?;
    let bzimage = match (&req.bzimage, &tree) {
        (Some(b), Some(t)) => Some(bzimage::rebuild(t, &req.output, b)?),
        _ => None,
    };
    let mut secure_boot_cert = None;
    if let (Some(r), Some((key, cert))) = (&bzimage, &req.sign) {
        secureboot::sign(&r.bzimage, key, cert)?;
        secure_boot_cert = Some(cert.clone());
    }
    Ok(WriteReport { bzimage, errors, modules, report: Some(report), secure_boot_cert })
}
