//! `bootlink inspect`: what load-time symbol resolution costs for a set of
//! modules against a kernel, and how much of it could move to build time.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Kind, Result};
use crate::kernel::KernelImage;
use crate::module::Module;
use crate::table::{Table, percent, thousands};
use crate::tree;

pub use crate::kernel::KernelSummary;
pub use crate::tree::FileError;

#[derive(Debug, Clone, Serialize)]
pub struct ModuleRow {
    pub name: String,
    pub path: PathBuf,
    /// Undefined symbol references (the loader's work today: "Std").
    pub undefined: usize,
    /// ...of which vmlinux exports (preresolvable at build time).
    pub vmlinux: usize,
    /// ...exported only by other modules.
    pub modules: usize,
    /// ...exported by nobody in the given set.
    pub unresolved: usize,
    /// Undefined symbols left after preresolution ("Preres").
    pub after: usize,
    pub fully_preresolvable: bool,
    pub signed: bool,
    pub preresolved: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved_names: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub modules: usize,
    pub undefined: usize,
    pub vmlinux: usize,
    pub modules_only: usize,
    pub unresolved: usize,
    pub after: usize,
    pub distinct_names: usize,
    pub fully_preresolvable: usize,
    pub no_undefined: usize,
    pub signed: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: KernelSummary,
    pub totals: Totals,
    pub modules: Vec<ModuleRow>,
    pub errors: Vec<FileError>,
}

/// Read the kernel and the modules (in parallel with each other) and analyse.
pub fn run(kernel: &Path, config: Option<&Path>, inputs: &[PathBuf]) -> Result<Report> {
    let paths = tree::find_modules(inputs)?;
    if paths.is_empty() {
        return Err(Error::new(Kind::Usage, "no modules given"));
    }
    let (k, mods) =
        rayon::join(|| KernelImage::open(kernel, config), || tree::read_all_with(&paths, crate::module::read_analysed));
    let k = k?;
    Ok(analyse(&k, mods))
}

pub(crate) fn analyse(k: &KernelImage, mods: Vec<Result<Module>>) -> Report {
    let kexports: HashSet<&str> = k.exports.iter().map(|e| e.name.as_str()).collect();
    let mut errors = Vec::new();
    let mut ok = Vec::new();
    // A module of another machine than the kernel is that file's error,
    // in one line naming both.
    for m in mods {
        match m.and_then(|m| k.same_machine(&m, "not counted").map(|()| m)) {
            Ok(m) => ok.push(m),
            Err(e) => errors.push(FileError::from(e)),
        }
    }
    let mut mod_exports: HashMap<&str, usize> = HashMap::new();
    for m in &ok {
        for e in &m.exports {
            *mod_exports.entry(e.name.as_str()).or_default() += 1;
        }
    }
    let mut distinct: HashSet<&str> = HashSet::new();
    let mut rows = Vec::with_capacity(ok.len());
    let mut t = Totals::default();
    for m in &ok {
        let (mut v, mut o, mut names) = (0, 0, Vec::new());
        for u in &m.undefined {
            distinct.insert(u.as_str());
            if kexports.contains(u.as_str()) {
                v += 1;
            } else if mod_exports.contains_key(u.as_str()) {
                o += 1;
            } else {
                names.push(u.clone());
            }
        }
        let n = m.undefined.len();
        let row = ModuleRow {
            name: m.name.clone(),
            path: m.path.clone(),
            undefined: n,
            vmlinux: v,
            modules: o,
            unresolved: names.len(),
            after: n - v,
            fully_preresolvable: v == n,
            signed: m.signature.is_some(),
            preresolved: m.preresolved,
            unresolved_names: names,
        };
        t.modules += 1;
        t.undefined += n;
        t.vmlinux += v;
        t.modules_only += o;
        t.unresolved += row.unresolved;
        t.after += row.after;
        t.fully_preresolvable += row.fully_preresolvable as usize;
        t.no_undefined += (n == 0) as usize;
        t.signed += row.signed as usize;
        rows.push(row);
    }
    t.distinct_names = distinct.len();
    Report { kernel: KernelSummary::of(k), totals: t, modules: rows, errors }
}

/// A report as `inspect` shows it: the text lists the `top` modules by cost
/// (all of them with None); the JSON is the whole report.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Listed<'a> {
    pub report: &'a Report,
    #[serde(skip)]
    pub top: Option<usize>,
}

impl crate::report::Report for Listed<'_> {
    fn render(&self) -> String {
        self.report.render(self.top)
    }
}

impl Report {
    /// The human report: kernel, the top modules (or all) in the
    /// Std/Preres form, totals, and any errors.
    pub fn render(&self, top: Option<usize>) -> String {
        let k = &self.kernel;
        let t = &self.totals;
        let mut s = String::new();
        s.push_str(&format!(
            "Kernel   {} ({}, {}, {})\n",
            k.path.display(),
            k.release.as_deref().unwrap_or("release unknown"),
            k.machine,
            k.source
        ));
        s.push_str(&format!(
            "Exports  {} ({} + {} GPL-only)\nKASLR    {}\n\n",
            thousands(k.exports),
            thousands(k.exports - k.gpl_exports),
            thousands(k.gpl_exports),
            k.kaslr.describe()
        ));
        let mut rows: Vec<&ModuleRow> = self.modules.iter().collect();
        rows.sort_by(|a, b| b.undefined.cmp(&a.undefined).then(a.name.cmp(&b.name)));
        let shown = top.unwrap_or(rows.len()).min(rows.len());
        s.push_str(&match top {
            Some(_) => format!("Top {shown} modules by undefined symbols"),
            None => "Modules by undefined symbols".to_string(),
        });
        s.push_str(" (Std: resolved at load time today; Preres: left after preresolving against vmlinux)\n");
        let mut tab = Table::new(&["Module", "Std", "vmlinux", "modules", "none", "Preres"]);
        for r in &rows[..shown] {
            tab.row(vec![
                format!("{}.ko", r.name),
                r.undefined.to_string(),
                r.vmlinux.to_string(),
                r.modules.to_string(),
                r.unresolved.to_string(),
                if r.fully_preresolvable { "0 *fully*".into() } else { r.after.to_string() },
            ]);
        }
        s.push_str(&tab.render());
        s.push('\n');
        s.push_str(&format!("Modules                      {}\n", thousands(t.modules)));
        s.push_str(&format!(
            "Undefined symbol references  {} ({} distinct names)\n",
            thousands(t.undefined),
            thousands(t.distinct_names)
        ));
        s.push_str(&format!(
            "  exported by vmlinux        {} ({})\n",
            thousands(t.vmlinux),
            percent(t.vmlinux, t.undefined)
        ));
        s.push_str(&format!(
            "  exported only by modules   {} ({})\n",
            thousands(t.modules_only),
            percent(t.modules_only, t.undefined)
        ));
        s.push_str(&format!("  exported by nobody         {}\n", thousands(t.unresolved)));
        s.push_str(&format!("Fully preresolvable modules  {}\n", thousands(t.fully_preresolvable)));
        if t.no_undefined > 0 {
            s.push_str(&format!("Modules with no undefined    {}\n", thousands(t.no_undefined)));
        }
        if !self.errors.is_empty() {
            s.push_str(&format!("\n{} file(s) could not be read:\n", self.errors.len()));
            for e in &self.errors {
                s.push_str(&format!("  {}: {}\n", e.path.display(), e.error));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module missing from a batch is that file's error, and the chain of
    /// sources leads from the batch's report down to the operating
    /// system's error.
    #[test]
    fn a_missing_module_in_a_batch_keeps_its_io_error() {
        let fixtures = crate::fsutil::source_tree().join("tests/fixtures");
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("gone.ko");
        let inputs = [fixtures.join("modules/bl_plain.ko"), missing.clone()];
        let config = fixtures.join("config-6.1.0-56-amd64");
        let report = run(&fixtures.join("vmlinux"), Some(&config), &inputs).unwrap();
        assert_eq!(report.modules.len(), 1, "the rest of the batch is read");
        let [e] = &report.errors[..] else { panic!("one error: {:?}", report.errors) };
        assert_eq!((e.kind, e.path.as_path()), (Kind::Io, missing.as_path()));
        let mut chain = vec![e.to_string()];
        let mut at: &dyn std::error::Error = e;
        while let Some(next) = at.source() {
            chain.push(next.to_string());
            at = next;
        }
        let io = at.downcast_ref::<std::io::Error>().unwrap_or_else(|| panic!("ends in an io::Error: {chain:?}"));
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(chain.len(), 3, "file error, bootlink's error, the io::Error: {chain:?}");
        assert_eq!(chain[0], format!("{}: no such file or directory", missing.display()));
    }
}
