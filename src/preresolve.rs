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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use crate::compress::{self, Compression};
use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::kernel::{Export, Kaslr, KernelImage, KernelSummary};
use crate::module::{self, Module, PRERESOLVED_SECTION};
use crate::progress::Progress;
use crate::sign::{self, SignKey};
use crate::table::{Table, thousands};
use crate::tree::FileError;

/// Licenses the kernel treats as GPL-compatible (include/linux/license.h).
pub const GPL_COMPATIBLE: &[&str] =
    &["GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL", "Dual MIT/GPL", "Dual MPL/GPL"];

pub fn license_is_gpl_compatible(license: &str) -> bool {
    GPL_COMPATIBLE.contains(&license)
}

/// Why a symbol that vmlinux exports was left for the kernel to resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A GPL-only export used by a module whose license is not GPL-compatible.
    GplOnly,
    /// An export in a namespace the module does not import.
    Namespace,
    /// The module's __versions CRC differs from the kernel's.
    CrcMismatch,
    /// The module has __versions but no entry for this symbol.
    NoVersionEntry,
    /// The module has no __versions at all while the kernel has CRCs.
    NoVersions,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::GplOnly => "GPL-only",
            Reason::Namespace => "namespace not imported",
            Reason::CrcMismatch => "CRC mismatch",
            Reason::NoVersionEntry => "no __versions entry",
            Reason::NoVersions => "no __versions",
        }
    }
}

#[derive(Debug, Clone)]
pub enum Output {
    /// Write into this directory, mirroring paths under each input directory.
    Dir(PathBuf),
    /// Replace the inputs (atomically).
    InPlace,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub output: Output,
    /// The target boots with `nokaslr` (or an entry that does not randomize).
    pub assume_nokaslr: bool,
    pub sign: Option<SignKey>,
    /// Fold the preresolved symbols into the relocations and remove them
    /// from .symtab instead of making them SHN_ABS.
    pub fold: bool,
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
}

impl ModuleResult {
    pub fn fully(&self) -> bool {
        self.undefined > 0 && self.preresolved == self.undefined
    }

    /// SHN_ABS is the default and not named in the line; folding is.
    fn mode_note(&self) -> &'static str {
        if self.mode == Some(Mode::Folded) { ", folded" } else { "" }
    }

    /// The seed's line: `PRERESV fs/ext4/ext4.ko (551/616 preresolved)`.
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
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: KernelSummary,
    pub assume_nokaslr: bool,
    pub totals: Totals,
    pub modules: Vec<ModuleResult>,
    pub errors: Vec<FileError>,
}

/// Refuse what cannot be made safe before any module is touched.
pub fn check_kernel(k: &KernelImage, opts: &Options) -> Result<()> {
    if !opts.assume_nokaslr {
        let why = match &k.kaslr {
            Kaslr::No { .. } => None,
            Kaslr::Possible { source } => Some(format!("CONFIG_RANDOMIZE_BASE=y in {source}")),
            Kaslr::Unknown => Some("no kernel config was found, so KASLR cannot be ruled out (pass --config)".into()),
        };
        if let Some(why) = why {
            return Err(Error::file(
                Kind::WrongKernel,
                &k.path,
                format!(
                    "refusing to preresolve: the kernel may randomize its base address at boot (KASLR: {why}). \
                     Preresolved modules hold link-time addresses and oops under KASLR. If the target boots with \
                     `nokaslr` on its command line (or through an entry that does not randomize, such as a PVH boot \
                     of vmlinux), pass --assume-nokaslr"
                ),
            ));
        }
    }
    if k.vermagic.is_none() {
        return Err(Error::file(
            Kind::WrongKernel,
            &k.path,
            "the kernel's vermagic is unknown, so modules cannot be checked against it: give a vmlinux or vmlinuz",
        ));
    }
    Ok(())
}

struct Job {
    input: PathBuf,
    display: String,
    output: PathBuf,
}

fn plan_jobs(inputs: &[PathBuf], out: &Output) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| Error::io(input, e))?;
        let files = crate::tree::find_modules(std::slice::from_ref(input))?;
        for f in files {
            let rel = if meta.is_dir() {
                f.strip_prefix(input).unwrap_or(&f).to_path_buf()
            } else {
                PathBuf::from(f.file_name().unwrap_or_default())
            };
            let output = match out {
                Output::Dir(d) => d.join(&rel),
                Output::InPlace => f.clone(),
            };
            jobs.push(Job { display: rel.display().to_string(), input: f, output });
        }
    }
    jobs.sort_by(|a, b| a.display.cmp(&b.display));
    Ok(jobs)
}

/// Files beside the modules that depmod reads (modules.order, modules.builtin...).
fn copy_tree_extras(inputs: &[PathBuf], out: &Path) -> Result<()> {
    for input in inputs.iter().filter(|p| p.is_dir()) {
        let rd = std::fs::read_dir(input).map_err(|e| Error::io(input, e))?;
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_file() && (name == "modules.order" || name.starts_with("modules.builtin")) {
                let data = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
                fsutil::write_atomic(&out.join(&name), &data)?;
            }
        }
    }
    Ok(())
}

pub fn run(kernel: &KernelImage, inputs: &[PathBuf], opts: &Options) -> Result<Report> {
    check_kernel(kernel, opts)?;
    if let Some(k) = &opts.sign {
        k.check()?;
    }
    let jobs = plan_jobs(inputs, &opts.output)?;
    if let Output::Dir(d) = &opts.output {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        probe_writable(d)?;
    }
    // A killed earlier run (kill -9 of --in-place) may have left its
    // temporary files where it wrote: remove those of dead processes.
    let dirs: std::collections::BTreeSet<&Path> = jobs.iter().filter_map(|j| j.output.parent()).collect();
    for d in dirs {
        fsutil::remove_stale_temps(d);
    }
    let exports = kernel.export_map();
    let progress = Progress::new("preresolving", jobs.len());
    let results: Vec<Result<ModuleResult>> = jobs
        .par_iter()
        .map(|j| {
            let r = crate::tree::isolated(&j.input, || one(kernel, &exports, j, opts));
            progress.inc();
            r
        })
        .collect();
    drop(progress);
    if let Output::Dir(d) = &opts.output {
        copy_tree_extras(inputs, d)?;
    }
    let mut report = Report {
        kernel: KernelSummary::of(kernel),
        assume_nokaslr: opts.assume_nokaslr,
        totals: Totals::default(),
        modules: Vec::new(),
        errors: Vec::new(),
    };
    for r in results {
        match r {
            Ok(m) => report.modules.push(m),
            Err(e) => {
                report.errors.push(FileError { kind: e.kind, path: e.path.clone().unwrap_or_default(), error: e.msg })
            }
        }
    }
    let t = &mut report.totals;
    for m in &report.modules {
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
    }
    t.errors = report.errors.len();
    Ok(report)
}

fn probe_writable(dir: &Path) -> Result<()> {
    let probe = dir.join(format!(".bootlink-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        Error::file(Kind::Io, dir, format!("output directory is not writable: {}", Error::io(dir, e).msg))
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// What [`decide`] found for one module.
struct Decision {
    /// (symbol index, address) to preresolve.
    edits: Vec<(usize, u64)>,
    /// vmlinux exports left for the loader, and why.
    kept: Vec<(String, Reason)>,
    /// Undefined symbols that only modules export.
    from_modules: usize,
}

/// Decide, for each undefined symbol, whether to preresolve it.
fn decide(k: &KernelImage, exports: &HashMap<&str, &Export>, m: &Module) -> Decision {
    let gpl_ok = m.license().is_some_and(license_is_gpl_compatible);
    let imports = m.import_ns();
    let kernel_has_crcs = k.exports.iter().any(|e| e.crc.is_some());
    let versions: HashMap<&str, u32> = m.versions.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    let (mut edits, mut kept, mut from_modules) = (Vec::new(), Vec::new(), 0);
    for (name, &idx) in m.undefined.iter().zip(&m.undefined_index) {
        let Some(e) = exports.get(name.as_str()) else {
            from_modules += 1;
            continue;
        };
        let reason = if e.gpl && !gpl_ok {
            Some(Reason::GplOnly)
        } else if e.namespace.as_deref().is_some_and(|ns| !imports.contains(&ns)) {
            Some(Reason::Namespace)
        } else if let (true, Some(kcrc)) = (kernel_has_crcs, e.crc) {
            match versions.get(name.as_str()) {
                _ if m.versions.is_empty() => Some(Reason::NoVersions),
                None => Some(Reason::NoVersionEntry),
                Some(&c) if c != kcrc => Some(Reason::CrcMismatch),
                Some(_) => None,
            }
        } else {
            None
        };
        match reason {
            Some(r) => kept.push((name.clone(), r)),
            None => edits.push((idx, e.addr)),
        }
    }
    Decision { edits, kept, from_modules }
}

fn one(k: &KernelImage, exports: &HashMap<&str, &Export>, job: &Job, opts: &Options) -> Result<ModuleResult> {
    let path = &job.input;
    let (data, compression) = module::load_bytes(path)?;
    let m = module::parse(path, &data, compression).map_err(|e| Error::file(Kind::Format, path, e))?;
    let kv = k.vermagic.as_deref().unwrap_or_default();
    match m.vermagic() {
        Some(v) if v == kv => {}
        Some(v) => {
            return Err(Error::file(
                Kind::WrongKernel,
                path,
                format!("built for another kernel: vermagic \"{}\", the kernel's is \"{}\"", v.trim(), kv.trim()),
            ));
        }
        None => {
            return Err(Error::file(
                Kind::WrongKernel,
                path,
                "module has no vermagic: cannot tell which kernel it was built for",
            ));
        }
    }
    let mut result = ModuleResult {
        name: m.name.clone(),
        display: job.display.clone(),
        input: path.clone(),
        output: job.output.clone(),
        status: Status::Unchanged,
        mode: None,
        undefined: m.undefined.len(),
        preresolved: 0,
        kept: BTreeMap::new(),
        module_symbols: 0,
        signature: if m.signature.is_some() { SigAction::Kept } else { SigAction::None },
        compression,
        kept_symbols: Vec::new(),
    };
    if m.preresolved {
        // Its SHN_ABS symbols, or the folded ones listed in .preresolved,
        // must hold this kernel's addresses.
        let resolved_before = || m.absolute.iter().chain(&m.folded);
        for (name, value) in resolved_before() {
            if let Some(e) = exports.get(name.as_str())
                && e.addr != *value
            {
                return Err(Error::file(
                    Kind::WrongKernel,
                    path,
                    format!(
                        "already preresolved for a different kernel build: {name} is {value:#x} here but {:#x} in {}",
                        e.addr,
                        k.path.display()
                    ),
                ));
            }
        }
        let resolved = resolved_before().filter(|(n, _)| exports.contains_key(n.as_str())).count();
        result.status = Status::AlreadyPreresolved;
        result.mode = Some(if m.folded.is_empty() { Mode::Abs } else { Mode::Folded });
        result.preresolved = resolved;
        result.undefined += resolved;
        // What is still undefined is counted as on the first run: left to
        // modules' exports, or kept for a reason.
        let Decision { kept, from_modules, .. } = decide(k, exports, &m);
        result.module_symbols = from_modules;
        for (_, r) in &kept {
            *result.kept.entry(*r).or_default() += 1;
        }
        result.kept_symbols = kept;
        copy_unchanged(path, &job.output, &opts.output)?;
        return Ok(result);
    }
    let Decision { edits, kept, from_modules } = decide(k, exports, &m);
    result.module_symbols = from_modules;
    result.preresolved = edits.len();
    for (_, r) in &kept {
        *result.kept.entry(*r).or_default() += 1;
    }
    result.kept_symbols = kept;
    if edits.is_empty() {
        copy_unchanged(path, &job.output, &opts.output)?;
        return Ok(result);
    }
    let elf_len = m.signature.as_ref().map_or(data.len(), |s| s.offset);
    let mut ed = ElfEdit::new(data[..elf_len].to_vec()).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
    if opts.fold {
        ed.fold_symbols(&edits).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
        let name_of: HashMap<usize, &str> =
            m.undefined_index.iter().copied().zip(m.undefined.iter().map(String::as_str)).collect();
        let pairs: Vec<(&str, u64)> = edits.iter().map(|(idx, addr)| (name_of[idx], *addr)).collect();
        ed.add_section(PRERESOLVED_SECTION, &module::folded_section(&pairs))
            .map_err(|e| Error::file(Kind::Format, path, e))?;
        result.mode = Some(Mode::Folded);
    } else {
        for (idx, addr) in &edits {
            ed.make_absolute(*idx, *addr);
        }
        ed.add_empty_section(PRERESOLVED_SECTION).map_err(|e| Error::file(Kind::Format, path, e))?;
        result.mode = Some(Mode::Abs);
    }
    let mut bytes = ed.data;
    result.signature = match (&opts.sign, m.signature.is_some()) {
        (Some(key), _) => {
            let scratch = job.output.parent().unwrap_or(Path::new("."));
            bytes = sign::sign(&bytes, key, scratch, &m.name)?;
            SigAction::Resigned
        }
        (None, true) => SigAction::Removed,
        (None, false) => SigAction::None,
    };
    // Check what we wrote reads back as the module we meant.
    let check = module::parse(path, &bytes, Compression::None).map_err(|e| {
        Error::file(Kind::Internal, path, format!("internal error: rewritten module does not parse: {e}"))
    })?;
    let (abs_now, folded_now) = if opts.fold { (0, edits.len()) } else { (edits.len(), 0) };
    if !check.preresolved
        || check.undefined.len() != m.undefined.len() - edits.len()
        || check.absolute.len() != m.absolute.len() + abs_now
        || check.folded.len() != folded_now
    {
        return Err(Error::file(
            Kind::Internal,
            path,
            "internal error: rewritten module does not read back as preresolved",
        ));
    }
    // Recompress as the input was compressed (check, dictionary or window,
    // level where the header tells), so the kernel needs no more memory.
    let params = if compression == Compression::None {
        compress::Params::None
    } else {
        let mut head = [0u8; 64];
        let n = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .map_err(|e| Error::io(path, e))?;
        compress::Params::detect(&head[..n], compression)
    };
    let out = compress::compress_with(&bytes, params).map_err(|e| Error::file(Kind::Format, path, e))?;
    write_output(&job.output, &out, &opts.output)?;
    result.status = Status::Preresolved;
    Ok(result)
}

fn write_output(path: &Path, data: &[u8], mode: &Output) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    match mode {
        // Replacing an input: durable before the rename.
        Output::InPlace => fsutil::write_atomic(path, data),
        Output::Dir(_) => fsutil::write_atomic_nosync(path, data),
    }
}

fn copy_unchanged(input: &Path, output: &Path, mode: &Output) -> Result<()> {
    if let Output::Dir(_) = mode {
        let data = std::fs::read(input).map_err(|e| Error::io(input, e))?;
        write_output(output, &data, mode)?;
    }
    Ok(())
}

impl Report {
    pub fn render(&self) -> String {
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
            tab.row(vec!["  folded into relocations".into(), thousands(t.folded_modules), "".into()]);
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
        s
    }
}
