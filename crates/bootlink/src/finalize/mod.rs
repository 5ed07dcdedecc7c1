//! Build-time finalize work (`bootlink finalize`): what 6.1's loader does
//! for every module after relocation and could have been done when the
//! module was built. The ORC unwind table sorted ([`orc`]); ftrace's
//! weak-function check decided, the records it would disable dropped
//! ([`mcount`]). Each module is marked so a patched kernel (patches
//! `orc-sort-skip`, `ftrace-checked`) checks the work in O(n) instead of
//! doing it; a stock kernel
//! ignores the marks and does the work as before, on tables that are then
//! already sorted and already clean.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Kind, Result};
use crate::kernel::{KernelImage, KernelSummary};
use crate::modwrite::{self, Output};
use crate::sign::SignKey;
use crate::table::{Table, thousands};
use crate::tree::FileError;

/// Why a step cannot be done on a module (a table of a shape the step
/// does not handle): the step is skipped or the module refused.
fn unsupported(msg: impl Into<String>) -> Error {
    Error::new(Kind::Unsupported, msg)
}

pub mod mcount;
mod module;
pub mod orc;
mod symbols;
mod targets;

#[derive(Debug, Clone)]
pub struct Options {
    pub output: Output,
    pub sign: Option<SignKey>,
    pub dry_run: bool,
    /// Sort the ORC tables.
    pub orc: bool,
    /// Check the ftrace records.
    pub mcount: bool,
}

/// What was done to one module.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleResult {
    pub name: String,
    pub display: String,
    pub output: PathBuf,
    /// ORC entries, and whether they were sorted and marked.
    pub orc_entries: usize,
    pub orc_sorted: bool,
    /// ftrace records, those dropped, and whether the rest were marked checked.
    pub mcount_records: usize,
    pub mcount_dropped: usize,
    pub mcount_checked: bool,
    /// Why a step was not done for this module (the module is still written).
    pub skipped: Vec<String>,
    pub resigned: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: Option<KernelSummary>,
    pub modules: Vec<ModuleResult>,
    pub errors: Vec<FileError>,
}

impl Report {}

impl crate::report::Report for Report {
    fn render(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        let mut t = Table::new(&["module", "ORC entries", "sorted", "ftrace records", "dropped", "checked"]);
        for m in &self.modules {
            t.row(vec![
                m.display.clone(),
                thousands(m.orc_entries),
                yes(m.orc_sorted),
                thousands(m.mcount_records),
                thousands(m.mcount_dropped),
                yes(m.mcount_checked),
            ]);
        }
        let sum = |f: fn(&ModuleResult) -> usize| thousands(self.modules.iter().map(f).sum::<usize>());
        t.row(vec![
            format!("{} modules", self.modules.len()),
            sum(|m| m.orc_entries),
            sum(|m| m.orc_sorted as usize),
            sum(|m| m.mcount_records),
            sum(|m| m.mcount_dropped),
            sum(|m| m.mcount_checked as usize),
        ]);
        let mut s = t.render();
        for m in &self.modules {
            for why in &m.skipped {
                s.push_str(&format!("{}: {why}\n", m.display));
            }
        }
        if !self.errors.is_empty() {
            s.push_str(&format!("{} module(s) failed\n", self.errors.len()));
        }
        s
    }
}

/// Finalize every module under `inputs`; with `kernel`, modules built for
/// another kernel are refused.
pub fn run(kernel: Option<&KernelImage>, inputs: &[PathBuf], opts: &Options) -> Result<Report> {
    if let Some(k) = kernel
        && k.machine == crate::elf::machine_name(object::elf::EM_AARCH64)
    {
        // What finalize does ahead of load time is x86-64's: measured in
        // the arm64 lab, these links are absent there (docs/arm64.md).
        return Err(Error::file(
            Kind::Unsupported,
            &k.path,
            "AArch64: nothing to finalize: arm64 has no ORC unwinder, and 6.1 checks module ftrace records \
             for weak functions only where FTRACE_MCOUNT_MAX_OFFSET is defined (x86)",
        ));
    }
    if let Some(k) = &opts.sign {
        k.check()?;
    }
    let read = modwrite::read_besides(kernel, opts.sign.as_ref());
    let (modules, errors) = modwrite::run_batch(inputs, &read, &opts.output, !opts.dry_run, "finalizing", |j| {
        module::one(kernel, j, opts)
    })?;
    Ok(Report { kernel: kernel.map(KernelSummary::of), modules, errors })
}
