//! What the preresolver reports: one line per module and the totals table
//! (`--json` serializes the same structures).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::{Mode, Reason, Relocations};
use crate::compress::Compression;
use crate::kernel::KernelSummary;
use crate::table::{Table, thousands};
use crate::tree::FileError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Rewritten with at least one symbol preresolved.
    Preresolved,
    /// Nothing vmlinux exports could be preresolved; written unchanged.
    Unchanged,
    /// Already marked by a preresolver for this kernel; skipped.
    AlreadyPreresolved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SigAction {
    None,
    /// Unchanged module, its signature is still valid.
    Kept,
    /// The old signature no longer matches and was removed.
    Removed,
    /// Re-signed with the given key.
    Resigned,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleResult {
    pub name: String,
    /// The path as shown: relative to its input directory.
    pub display: String,
    pub input: PathBuf,
    pub output: PathBuf,
    pub status: Status,
    /// How the module is written (null when it was left unchanged).
    pub mode: Option<Mode>,
    pub undefined: usize,
    pub preresolved: usize,
    /// Exported by vmlinux but kept SHN_UNDEF, by reason.
    pub kept: BTreeMap<Reason, usize>,
    /// Left to the loader because modules export them.
    pub module_symbols: usize,
    pub signature: SigAction,
    pub compression: Compression,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_symbols: Vec<(String, Reason)>,
    /// Local data symbols removed by `--trim-symtab`.
    pub symbols_trimmed: usize,
    /// AArch64 with `--fold-symbols`: the relocations against the
    /// preresolved symbols, by class, folded or kept against their symbol.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub relocations: BTreeMap<crate::reloc::Class, Relocations>,
    /// With `--fold-symbols`: of `preresolved`, the symbols folded and
    /// removed (the rest stay SHN_ABS; on x86-64 all are folded).
    pub symbols_folded: usize,
    /// With a `.preresolved_slide` table: the values (symbols and
    /// relocations) the loader moves by the kernel's slide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slide: Option<usize>,
}

impl ModuleResult {
    pub fn fully(&self) -> bool {
        self.undefined > 0 && self.preresolved == self.undefined
    }

    /// SHN_ABS is the default and not named in the line; folding is, and
    /// so are addresses the loader moves by the slide.
    fn mode_note(&self) -> &'static str {
        match (self.mode == Some(Mode::Folded), self.slide.is_some()) {
            (true, true) => ", folded, slide",
            (true, false) => ", folded",
            (false, true) => ", slide",
            (false, false) => "",
        }
    }

    /// The line printed per module: `PRERESV fs/ext4/ext4.ko (551/616 preresolved)`.
    pub fn line(&self) -> String {
        match self.status {
            Status::AlreadyPreresolved => {
                format!("PRERESV {} (already preresolved{}, skipped)", self.display, self.mode_note())
            }
            _ if self.fully() => {
                format!(
                    "PRERESV {} ({}/{} *fully* preresolved{})",
                    self.display,
                    self.preresolved,
                    self.undefined,
                    self.mode_note()
                )
            }
            _ => {
                let mut s = format!(
                    "PRERESV {} ({}/{} preresolved{}",
                    self.display,
                    self.preresolved,
                    self.undefined,
                    self.mode_note()
                );
                if !self.kept.is_empty() {
                    let kept: Vec<String> = self.kept.iter().map(|(r, n)| format!("{n} {}", r.label())).collect();
                    s.push_str(&format!("; kept: {}", kept.join(", ")));
                }
                s.push(')');
                s
            }
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub modules: usize,
    pub preresolved_modules: usize,
    /// Of `preresolved_modules`, written with the symbols folded.
    pub folded_modules: usize,
    pub fully_preresolved: usize,
    pub unchanged: usize,
    pub already: usize,
    pub undefined: usize,
    /// Symbols preresolved by this run.
    pub preresolved: usize,
    /// Symbols of the modules skipped as already preresolved, resolved by
    /// an earlier run.
    pub already_symbols: usize,
    pub module_symbols: usize,
    pub kept: BTreeMap<Reason, usize>,
    pub errors: usize,
    /// Symbols folded and removed by this run (`--fold-symbols`).
    pub symbols_folded: usize,
    /// The modules' [`ModuleResult::relocations`], added up.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub relocations: BTreeMap<crate::reloc::Class, Relocations>,
    /// Modules written with a `.preresolved_slide` table, and the values
    /// they list.
    pub slide_modules: usize,
    pub slide_values: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: KernelSummary,
    pub assume_nokaslr: bool,
    /// Where the addresses written hold: `link_time`, or `slide`.
    pub addresses: super::Addresses,
    pub totals: Totals,
    pub modules: Vec<ModuleResult>,
    pub errors: Vec<FileError>,
}

impl Totals {
    /// Add up the modules' results.
    pub fn of(modules: &[ModuleResult], errors: usize) -> Totals {
        let mut totals = Totals::default();
        let t = &mut totals;
        for m in modules {
            t.modules += 1;
            t.undefined += m.undefined;
            if m.status == Status::AlreadyPreresolved {
                t.already_symbols += m.preresolved;
            } else {
                t.preresolved += m.preresolved;
            }
            t.module_symbols += m.module_symbols;
            match m.status {
                Status::Preresolved => {
                    t.preresolved_modules += 1;
                    t.folded_modules += (m.mode == Some(Mode::Folded)) as usize;
                }
                Status::Unchanged => t.unchanged += 1,
                Status::AlreadyPreresolved => t.already += 1,
            }
            t.fully_preresolved += m.fully() as usize;
            for (r, n) in &m.kept {
                *t.kept.entry(*r).or_default() += n;
            }
            if m.status == Status::Preresolved {
                t.symbols_folded += m.symbols_folded;
                if let Some(n) = m.slide {
                    t.slide_modules += 1;
                    t.slide_values += n;
                }
            }
            for (c, n) in &m.relocations {
                let sum = t.relocations.entry(*c).or_default();
                sum.folded += n.folded;
                sum.kept += n.kept;
            }
        }
        t.errors = errors;
        totals
    }
}

impl Report {}

impl crate::report::Report for Report {
    fn render(&self) -> String {
        let mut s = String::new();
        for m in &self.modules {
            s.push_str(&m.line());
            s.push('\n');
        }
        let t = &self.totals;
        s.push('\n');
        let mut tab = Table::new(&["", "modules", "undefined symbols"]);
        tab.row(vec!["read".into(), thousands(t.modules), thousands(t.undefined)]);
        tab.row(vec!["preresolved".into(), thousands(t.preresolved_modules), thousands(t.preresolved)]);
        if t.already > 0 {
            tab.row(vec!["already preresolved (skipped)".into(), thousands(t.already), thousands(t.already_symbols)]);
        }
        tab.row(vec!["  fully (now or before)".into(), thousands(t.fully_preresolved), "".into()]);
        if t.folded_modules > 0 {
            tab.row(vec!["  folded into relocations".into(), thousands(t.folded_modules), thousands(t.symbols_folded)]);
        }
        if t.slide_modules > 0 {
            tab.row(vec![
                "  moved by the slide (values)".into(),
                thousands(t.slide_modules),
                thousands(t.slide_values),
            ]);
        }
        tab.row(vec!["left to modules' exports".into(), "".into(), thousands(t.module_symbols)]);
        for (r, n) in &t.kept {
            tab.row(vec![format!("kept: {}", r.label()), "".into(), thousands(*n)]);
        }
        tab.row(vec!["unchanged".into(), thousands(t.unchanged), "".into()]);
        if t.errors > 0 {
            tab.row(vec!["refused or unreadable".into(), thousands(t.errors), "".into()]);
        }
        s.push_str(&tab.render());
        if !t.relocations.is_empty() {
            s.push_str("\nrelocations against the preresolved symbols (AArch64: a symbol that CALL26/JUMP26 branch to stays SHN_ABS with all its relocations, for the module PLTs)\n");
            let mut tab = Table::new(&["class", "folded", "kept"]);
            for (c, n) in &t.relocations {
                tab.row(vec![c.label().into(), thousands(n.folded), thousands(n.kept)]);
            }
            s.push_str(&tab.render());
        }
        s
    }
}
