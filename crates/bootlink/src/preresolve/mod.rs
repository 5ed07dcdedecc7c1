//! `bootlink preresolve`: resolve module symbols against vmlinux at build
//! time (the LKM Preresolver, ELC-E 2010), with the checks the kernel skips
//! for SHN_ABS symbols done here instead.
//!
//! Every SHN_UNDEF symbol that vmlinux exports becomes SHN_ABS with the
//! export's address, unless a check fails: then it stays SHN_UNDEF and the
//! kernel decides at load time exactly as it would have. Symbols exported by
//! other modules stay SHN_UNDEF. A module with at least one preresolved
//! symbol gets an empty `.preresolved` section.
//!
//! With `fold` (`--fold-symbols`) the same symbols are instead folded into
//! the relocations that use them (symbol 0, the address added to the addend)
//! and removed from .symtab, so the kernel's per-load kallsyms scans do not
//! walk them; `.preresolved` then lists them with their addresses.
//!
//! For a kernel that may randomize its base and has patch
//! `preresolved-slide`, either way is written with a `.preresolved_slide`
//! table of the values the loader moves by the slide ([`slide`]).

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::kernel::{KernelImage, KernelSummary};
use crate::modwrite;
use crate::sign::SignKey;

mod aarch64;
mod checks;
mod report;
mod rewrite;
mod slide;

pub use crate::modwrite::Output;
pub use aarch64::Relocations;
pub use checks::{GPL_COMPATIBLE, Reason, check_kernel, license_is_gpl_compatible};
pub use report::{ModuleResult, Report, SigAction, Status, Totals};
pub use rewrite::trim;
pub use slide::{
    FEATURE as SLIDE_FEATURE, SECTION as SLIDE_SECTION, SlideBase, SlideTable, VERMAGIC_TOKEN, mark_module,
    unmarked_vermagic,
};

#[derive(Debug, Clone)]
pub struct Options {
    pub output: Output,
    /// The target boots with `nokaslr` (or an entry that does not randomize).
    pub assume_nokaslr: bool,
    pub sign: Option<SignKey>,
    /// Fold the preresolved symbols into the relocations and remove them
    /// from .symtab instead of making them SHN_ABS.
    pub fold: bool,
    /// Also remove local data symbols no relocation uses (`--trim-symtab`).
    pub trim: bool,
    /// Do and check everything in memory, write nothing.
    pub dry_run: bool,
}

/// How a preresolved module is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The symbols stay in .symtab as SHN_ABS with the export's address.
    Abs,
    /// The addresses are in the relocations' addends; the symbols are gone.
    Folded,
}

/// Where the addresses a run writes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Addresses {
    /// As linked: a kernel that does not move (or `--assume-nokaslr`).
    LinkTime,
    /// As linked, listed in `.preresolved_slide` for the loader to move by
    /// the kernel's slide (patch `preresolved-slide`).
    Slide,
}

pub fn run(kernel: &KernelImage, inputs: &[PathBuf], opts: &Options) -> Result<Report> {
    let slide = check_kernel(kernel, opts)?;
    if let Some(k) = &opts.sign {
        k.check()?;
    }
    let exports = kernel.export_map();
    let read = modwrite::read_besides(Some(kernel), opts.sign.as_ref());
    let (modules, errors) = modwrite::run_batch(inputs, &read, &opts.output, !opts.dry_run, "preresolving", |j| {
        rewrite::one(kernel, &exports, j, opts, slide)
    })?;
    let totals = Totals::of(&modules, errors.len());
    Ok(Report {
        kernel: KernelSummary::of(kernel),
        assume_nokaslr: opts.assume_nokaslr,
        addresses: if slide.is_some() { Addresses::Slide } else { Addresses::LinkTime },
        totals,
        modules,
        errors,
    })
}
