//! `bootlink symhash`: precomputed symbol hash tables for the module loader
//! (the Fast LKM loader, ELC 2009), built at kernel build time.
//!
//! For vmlinux's and every module's export tables: the DJB hash of each
//! export, a SysV ELF hash table, a GNU hash table with a Bloom filter and a
//! perfect hash (see `tables` for the layout). For each module also the
//! hash of each undefined symbol (`.undef.hash`), so the loader never hashes
//! a name, and optionally `__versions` sorted by name so `check_version`
//! can binary-search it. The kernel side is patches `symhash-tables` to `direct-binding`;
//! `module.symlookup=` chooses the method at boot.
//!
//! vmlinux's tables are written into the `__ksymhash` section the kernel
//! reserves at link time (`fill_vmlinux`, run by the kernel build as its
//! KSYMHASH hook), so no address moves. A module's go into two new
//! sections: `.ksymhash` (allocated: the loader keeps it for later lookups)
//! and `.undef.hash` (load time only); then it is re-signed.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::kernel::{KernelImage, KernelSummary};
use crate::modwrite::{self, Output};
use crate::sign::SignKey;
use crate::table::{Table, thousands};
use crate::tree::FileError;

mod hash;
mod module;
pub mod tables;
mod vmlinux;

pub use hash::djb;
pub use tables::{Method, Tables};
pub use vmlinux::{VmlinuxResult, fill_vmlinux};

/// Section names, as the kernel patch knows them.
pub(crate) const EXPORTS_SECTION: &str = ".ksymhash";
pub(crate) const UNDEF_SECTION: &str = ".undef.hash";
pub const VMLINUX_SECTION: &str = "__ksymhash";

#[derive(Debug, Clone)]
pub struct Options {
    pub output: Output,
    pub sign: Option<SignKey>,
    /// Sort `__versions` by name (and say so in `.undef.hash`).
    pub sort_versions: bool,
    /// Give each undefined symbol its slot in the kernel's export tables
    /// (`.undef.hash`): where the kernel looks first.
    pub export_slots: bool,
    /// Build, write into memory and check everything, but write no file.
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleResult {
    pub name: String,
    pub display: String,
    pub output: PathBuf,
    pub exports: usize,
    pub gpl_exports: usize,
    pub undefined: usize,
    /// Bytes of `.ksymhash` + `.undef.hash`.
    pub table_bytes: usize,
    /// `__versions` entries sorted (0 when not asked or absent).
    pub versions_sorted: usize,
    /// Undefined symbols whose `__versions` index `.undef.hash` gives
    /// (sorted modules only).
    pub versions_indexed: usize,
    /// Undefined symbols given the slot of vmlinux's export of their name.
    pub slotted: usize,
    pub resigned: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: KernelSummary,
    pub sort_versions: bool,
    pub modules: Vec<ModuleResult>,
    pub errors: Vec<FileError>,
}

impl Report {}

impl crate::report::Report for Report {
    fn render(&self) -> String {
        let mut t = Table::new(&[
            "module",
            "exports",
            "gpl",
            "undefined",
            "table bytes",
            "__versions sorted",
            "indexed",
            "slotted",
        ]);
        for m in &self.modules {
            t.row(vec![
                m.display.clone(),
                thousands(m.exports),
                thousands(m.gpl_exports),
                thousands(m.undefined),
                thousands(m.table_bytes),
                thousands(m.versions_sorted),
                thousands(m.versions_indexed),
                thousands(m.slotted),
            ]);
        }
        let sum = |f: fn(&ModuleResult) -> usize| thousands(self.modules.iter().map(f).sum::<usize>());
        t.row(vec![
            format!("{} modules", self.modules.len()),
            sum(|m| m.exports),
            sum(|m| m.gpl_exports),
            sum(|m| m.undefined),
            sum(|m| m.table_bytes),
            sum(|m| m.versions_sorted),
            sum(|m| m.versions_indexed),
            sum(|m| m.slotted),
        ]);
        let mut s = t.render();
        if !self.errors.is_empty() {
            s.push_str(&format!("{} module(s) failed\n", self.errors.len()));
        }
        s
    }
}

/// Add tables to modules built for `kernel`.
pub fn run(kernel: &KernelImage, inputs: &[PathBuf], opts: &Options) -> Result<Report> {
    if let Some(k) = &opts.sign {
        k.check()?;
    }
    let read = modwrite::read_besides(Some(kernel), opts.sign.as_ref());
    let (modules, errors) =
        modwrite::run_batch(inputs, &read, &opts.output, !opts.dry_run, "hashing", |j| module::one(kernel, j, opts))?;
    Ok(Report { kernel: KernelSummary::of(kernel), sort_versions: opts.sort_versions, modules, errors })
}
