//! `bootlink survey`: which modules of a kernel's tree load under QEMU, and
//! what a variant's workload says over all of them.
//!
//! Every module of the tree (or of a set) is loaded in dependency order on
//! one variant, in batches of boots: each batch loads its modules after the
//! hard dependencies they need (loaded again in every batch that needs
//! them). A module whose `insmod` fails is recorded with the reason the
//! guest gave (insmod's message, the kernel's lines during the load); a
//! module that needs one that did not load is not tried. A boot that dies
//! (a panic, a hang, a reset) is cut at the module being loaded when it
//! died: that module is recorded with the console's fault and the batch goes
//! on from the next one in a new boot. The modules that loaded are written
//! as a list file in load order (`loadable.list`, for `bootlink lab --set`
//! and for another survey), the rest with their reasons in `survey.json`.
//!
//! Each batch is an ordinary lab run (`batch-NNN/run.json`, its console
//! log), so a variant's steps, kernel command line and workloads (e.g. a
//! `run:` program printing a kernel's counters) apply as in `bootlink lab`,
//! and every batch's workload output is kept in the report.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::lab::setup::{self, Request};
use crate::lab::target::Target;
use crate::lab::variant::Variant;
use crate::run::results::WorkloadResult;
use bootlink::error::{Error, Kind, Result};
use bootlink::kmod::ModTree;

#[derive(Debug, Clone)]
pub struct Options {
    pub target: Target,
    /// vmlinux or bzImage; None: Debian's reference kernel, fetched.
    pub kernel: Option<PathBuf>,
    /// `lib/modules/<release>` of that kernel.
    pub modules_dir: Option<PathBuf>,
    /// The modules to survey: a named set or list file; None and no names: every module of the tree.
    pub set: Option<String>,
    /// Module names or aliases to survey (with their dependencies).
    pub names: Vec<String>,
    /// The one variant every batch boots (default: stock).
    pub variant: Variant,
    /// Modules tried per boot (their dependencies come on top).
    pub batch: usize,
    /// Seconds before a boot is killed.
    pub timeout: Duration,
    pub memory_mib: u32,
    pub extra_cmdline: String,
    /// The survey's directory (must not hold a survey yet).
    pub out: PathBuf,
}

/// What happened to one module.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// insmod returned 0.
    Loaded,
    /// insmod failed: its message and the kernel's lines during the load.
    Failed { reason: String },
    /// Not tried: it needs a module that did not load.
    NeedsFailed { dependency: String },
    /// The guest died (panic, hang, reset) while this module was loading.
    KilledGuest { fault: String },
    /// The host could not read the file (bootlink's module reader refused it).
    Unreadable { reason: String },
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Loaded => "loaded",
            Outcome::Failed { .. } => "insmod failed",
            Outcome::NeedsFailed { .. } => "needs a module that did not load",
            Outcome::KilledGuest { .. } => "the guest died loading it",
            Outcome::Unreadable { .. } => "unreadable",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleResult {
    pub name: String,
    /// Path in the tree (`kernel/fs/fat/fat.ko`).
    pub rel: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The batch (boot) that decided it; None when not booted.
    pub batch: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BatchResult {
    pub index: usize,
    /// The lab run's directory (run.json, logs/).
    pub dir: PathBuf,
    /// Modules in the boot's list (the batch's and their dependencies).
    pub modules: usize,
    /// Of them loaded in this boot.
    pub loaded: usize,
    /// The boot powered off cleanly.
    pub completed: bool,
    /// Why it did not (the console's fault), if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    pub wall_s: f64,
    /// What the variant's workloads printed (e.g. a `run:` program's output).
    pub outputs: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: PathBuf,
    pub kernel_release: String,
    pub modules_dir: PathBuf,
    pub variant: String,
    pub transform: String,
    pub surveyed: usize,
    pub loaded: usize,
    pub failed: usize,
    pub needs_failed: usize,
    pub killed_guest: usize,
    pub unreadable: usize,
    /// The modules that loaded, in load order: a list file.
    pub loadable_list: PathBuf,
    pub batches: Vec<BatchResult>,
    pub modules: Vec<ModuleResult>,
    pub wall_s: f64,
}

/// What the survey has decided: each module's outcome and the batch (boot)
/// that decided it.
type Decided = HashMap<String, (Outcome, Option<usize>)>;

/// What every batch of one survey shares: the kernel and its tree, the
/// one load order, and the directory for the batches' list files.
struct Survey<'a> {
    opts: &'a Options,
    kernel: PathBuf,
    tree_dir: PathBuf,
    tree: &'a ModTree,
    order: Vec<&'a bootlink::kmod::Entry>,
    position: HashMap<&'a str, usize>,
    work: PathBuf,
}

/// Survey `opts.out`: see the module's documentation. The phases, in
/// order: [`check_options`], [`wanted_modules`] (then one load order for
/// them all), per batch [`next_batch`], [`boot_batch`], [`decide_batch`]
/// and [`settle_batch`], then [`module_results`] and [`write_report`].
pub fn run(opts: &Options) -> Result<Report> {
    let t0 = Instant::now();
    check_options(opts)?;
    let (kernel, tree_dir) = setup::kernel_and_tree(&opts.target, opts.kernel.as_deref(), opts.modules_dir.as_deref())?;
    let tree = ModTree::read(&tree_dir)?;
    let wanted = wanted_modules(opts, &tree)?;
    // One order for the whole survey: every batch's list is a part of it.
    let plan = tree.resolve(&wanted)?;
    let order: Vec<&bootlink::kmod::Entry> = plan.entries();
    let position: HashMap<&str, usize> = order.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
    let mut results: Decided = HashMap::new();
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::io(&opts.out, e))?;
    let work = bootlink::fsutil::TempDir::new("survey")?;
    let survey = Survey { opts, kernel, tree_dir, tree: &tree, order, position, work: work.path().to_path_buf() };
    let mut batches: Vec<BatchResult> = Vec::new();
    let mut pending: Vec<usize> = (0..survey.order.len()).collect();
    let mut release = String::new();
    while !pending.is_empty() {
        let (targets, rest) = next_batch(&survey, pending, &mut results);
        pending = rest;
        if targets.is_empty() {
            continue;
        }
        let mut boot_list: Vec<usize> = closure(&tree, &survey.order, &survey.position, &targets, &results);
        boot_list.sort_unstable();
        let index = batches.len();
        let boot = boot_batch(&survey, index, &boot_list, results.len())?;
        release = boot.release.clone();
        let decided = decide_batch(&survey, index, &boot_list, &targets, &results, &boot);
        let loaded = decided.loaded;
        settle_batch(&survey, index, &targets, decided, &boot, &mut results, &mut pending)?;
        batches.push(BatchResult {
            index,
            dir: boot.dir,
            modules: boot_list.len(),
            loaded,
            completed: boot.completed,
            fault: boot.fault,
            wall_s: boot.started.elapsed().as_secs_f64(),
            outputs: boot.outputs,
        });
    }
    let modules = module_results(&survey, &results);
    write_report(&survey, release, batches, modules, t0)
}

/// Refuse a batch of no module, an `-o` that is no directory (or holds
/// no regular file where the survey's go) and one that already holds a
/// survey.
fn check_options(opts: &Options) -> Result<()> {
    if opts.batch == 0 {
        return Err(Error::new(Kind::Usage, "--batch must be at least 1"));
    }
    let kernel: Vec<&std::path::Path> = opts.kernel.as_deref().into_iter().collect();
    bootlink::fsutil::check_outputs_in(&opts.out, &["survey.json", "loadable.list"], &kernel)?;
    if opts.out.join("survey.json").exists() {
        return Err(Error::file(Kind::Usage, &opts.out, "already holds a survey (survey.json): choose another -o"));
    }
    Ok(())
}

/// The modules to survey, by name: those named, a set's, or every module
/// of the tree (by path).
fn wanted_modules(opts: &Options, tree: &ModTree) -> Result<Vec<String>> {
    Ok(if !opts.names.is_empty() {
        if opts.set.is_some() {
            return Err(Error::new(Kind::Usage, "give either --set or module names, not both"));
        }
        opts.names.clone()
    } else if let Some(set) = &opts.set {
        setup::set_entries(tree, set)?.0.iter().map(|e| e.name.clone()).collect()
    } else {
        let mut all: Vec<&bootlink::kmod::Entry> = tree.entries().iter().collect();
        all.sort_by(|a, b| a.rel.cmp(&b.rel));
        all.iter().map(|e| e.name.clone()).collect()
    })
}

/// The next batch: up to `--batch` pending modules whose dependencies did
/// not fail (those that did are decided here), and what stays pending.
fn next_batch(survey: &Survey, pending: Vec<usize>, results: &mut Decided) -> (Vec<usize>, Vec<usize>) {
    let mut targets = Vec::new();
    let mut rest = Vec::new();
    for &i in &pending {
        if targets.len() >= survey.opts.batch {
            rest.push(i);
            continue;
        }
        let e = survey.order[i];
        match failed_dependency(survey.tree, e, results) {
            Some(dep) => {
                results.insert(e.name.clone(), (Outcome::NeedsFailed { dependency: dep }, None));
            }
            None => targets.push(i),
        }
    }
    (targets, rest)
}

/// One batch's boot, read back.
struct BatchBoot {
    /// The lab run's directory.
    dir: PathBuf,
    release: String,
    log_path: PathBuf,
    /// Its console log.
    log: String,
    /// The kernel log /init printed (empty if the boot died before it).
    dmesg: String,
    completed: bool,
    fault: Option<String>,
    outputs: Vec<String>,
    started: Instant,
}

/// Boot the batch's list (`boot_list`, in load order) as an ordinary lab
/// run of the survey's variant, and read its console.
fn boot_batch(survey: &Survey, index: usize, boot_list: &[usize], decided: usize) -> Result<BatchBoot> {
    let (opts, order) = (survey.opts, &survey.order);
    let list_file = survey.work.join(format!("batch-{index:03}.list"));
    let text: String = boot_list.iter().map(|&i| format!("{}\n", order[i].rel.display())).collect();
    bootlink::fsutil::write_atomic(&list_file, text.as_bytes())?;
    bootlink::progress::status(&format!(
        "survey: batch {} ({} modules, {} decided of {})",
        index + 1,
        boot_list.len(),
        decided,
        order.len()
    ));
    let dir = opts.out.join(format!("batch-{index:03}"));
    let req = Request {
        target: opts.target.clone(),
        kernel: Some(survey.kernel.clone()),
        modules_dir: Some(survey.tree_dir.clone()),
        set: Some(list_file.to_string_lossy().into_owned()),
        names: Vec::new(),
        variants: vec![opts.variant.clone()],
        repetitions: 1,
        realtime: true,
        smp: 1,
        no_trace: true,
        measure_overhead: false,
        timeout: opts.timeout,
        memory_mib: opts.memory_mib,
        out: Some(dir.clone()),
        extra_cmdline: opts.extra_cmdline.clone(),
        jobs: None,
    };
    let sc = setup::scenario(&req)?;
    let started = Instant::now();
    let run = crate::lab::scenario::run(&sc)?;
    let v = &run.variants[0];
    let release = v.kernel_release.clone();
    let rep = v.repetitions.first().ok_or_else(|| Error::file(Kind::Boot, &dir, "the lab run recorded no boot"))?;
    let log_path = dir.join(&rep.log);
    let log = std::fs::read_to_string(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let dmesg = crate::lab::framed(&log, crate::lab::initramfs::DEFAULT_TAG).unwrap_or_default();
    let completed = !rep.partial;
    let fault = (!completed)
        .then(|| rep.failure.as_deref().unwrap_or("the boot died").lines().next().unwrap_or("").to_string());
    let outputs = rep
        .workloads
        .iter()
        .filter_map(|w| match w {
            WorkloadResult::Program(p) => Some(p.output.clone()),
            _ => None,
        })
        .collect();
    Ok(BatchBoot { dir, release, log_path, log, dmesg, completed, fault, outputs, started })
}

/// What a batch's console decides, on a copy of the survey's decisions (a
/// boot that died before its kernel log was printed has no reasons for its
/// failures, which are tried again): the decisions, how many modules of
/// the boot's list loaded, and the module the guest died loading, if it did.
struct BatchDecisions {
    now: Decided,
    loaded: usize,
    died_at: Option<usize>,
}

/// Each module of the boot's list by its insmod status, in load order, up
/// to the first that has none (the guest died loading it).
fn decide_batch(
    survey: &Survey,
    index: usize,
    boot_list: &[usize],
    targets: &[usize],
    results: &Decided,
    boot: &BatchBoot,
) -> BatchDecisions {
    let statuses = insmod_statuses(&boot.log);
    let mut now = results.clone();
    let targets_set: HashSet<usize> = targets.iter().copied().collect();
    let mut loaded = 0;
    let mut died_at = None;
    for &i in boot_list {
        let e = survey.order[i];
        match statuses.get(e.name.as_str()) {
            Some(0) => {
                loaded += 1;
                if targets_set.contains(&i) {
                    now.insert(e.name.clone(), (Outcome::Loaded, Some(index)));
                }
            }
            Some(_) => {
                // A module whose dependency failed earlier in this boot
                // failed for that; a dependency that loaded in an earlier
                // batch but not here is recorded too: what needs it is not
                // a fair try.
                let outcome = match failed_dependency(survey.tree, e, &now) {
                    Some(dependency) => Outcome::NeedsFailed { dependency },
                    None => Outcome::Failed { reason: failure_reason(&boot.log, &boot.dmesg, &e.name) },
                };
                if targets_set.contains(&i) || now.get(&e.name).map(|r| &r.0) == Some(&Outcome::Loaded) {
                    now.insert(e.name.clone(), (outcome, Some(index)));
                }
            }
            None => {
                died_at = Some(i);
                break;
            }
        }
    }
    BatchDecisions { now, loaded, died_at }
}

/// Take a batch's decisions into the survey's. A boot that died: what
/// loaded is kept, the module loading when the guest died killed it, and
/// the batch's other modules go first next time. A boot whose every
/// module answered: all of its decisions (a boot that died after them is
/// said in the batch's fault). A boot that finished without answering for
/// a module is an error.
fn settle_batch(
    survey: &Survey,
    index: usize,
    targets: &[usize],
    decided: BatchDecisions,
    boot: &BatchBoot,
    results: &mut Decided,
    pending: &mut Vec<usize>,
) -> Result<()> {
    match (decided.died_at, &boot.fault) {
        (Some(i), None) => Err(Error::file(
            Kind::Boot,
            &boot.log_path,
            format!("the boot finished but printed no insmod result for {}", survey.order[i].name),
        )),
        (Some(i), Some(fault)) => {
            for (name, (o, b)) in decided.now {
                if o == Outcome::Loaded && b == Some(index) {
                    results.insert(name, (o, b));
                }
            }
            let e = survey.order[i];
            results.insert(e.name.clone(), (Outcome::KilledGuest { fault: fault.clone() }, Some(index)));
            let mut again: Vec<usize> =
                targets.iter().copied().filter(|t| !results.contains_key(&survey.order[*t].name)).collect();
            again.append(pending);
            *pending = again;
            Ok(())
        }
        (None, _) => {
            *results = decided.now;
            Ok(())
        }
    }
}

/// Every module's result in load order, then the files the host could not read.
fn module_results(survey: &Survey, results: &Decided) -> Vec<ModuleResult> {
    let mut modules: Vec<ModuleResult> = survey
        .order
        .iter()
        .map(|e| {
            let (outcome, batch) = results
                .get(&e.name)
                .cloned()
                .unwrap_or((Outcome::Failed { reason: "not decided (bootlink bug)".into() }, None));
            ModuleResult { name: e.name.clone(), rel: e.rel.to_string_lossy().into_owned(), outcome, batch }
        })
        .collect();
    for (rel, e) in survey.tree.unreadable() {
        modules.push(ModuleResult {
            name: rel.clone(),
            rel: rel.clone(),
            outcome: Outcome::Unreadable { reason: e.to_string() },
            batch: None,
        });
    }
    modules
}

/// Write `loadable.list` and `survey.json`, and return the report.
fn write_report(
    survey: &Survey,
    release: String,
    batches: Vec<BatchResult>,
    modules: Vec<ModuleResult>,
    t0: Instant,
) -> Result<Report> {
    let opts = survey.opts;
    let loadable: String =
        modules.iter().filter(|m| m.outcome == Outcome::Loaded).map(|m| format!("{}\n", m.rel)).collect();
    let loadable_list = opts.out.join("loadable.list");
    bootlink::fsutil::write_atomic(&loadable_list, loadable.as_bytes())?;
    let count = |f: fn(&Outcome) -> bool| modules.iter().filter(|m| f(&m.outcome)).count();
    let report = Report {
        kernel: survey.kernel.clone(),
        kernel_release: release,
        modules_dir: survey.tree_dir.clone(),
        variant: opts.variant.name.clone(),
        transform: opts.variant.transform(),
        surveyed: modules.len(),
        loaded: count(|o| matches!(o, Outcome::Loaded)),
        failed: count(|o| matches!(o, Outcome::Failed { .. })),
        needs_failed: count(|o| matches!(o, Outcome::NeedsFailed { .. })),
        killed_guest: count(|o| matches!(o, Outcome::KilledGuest { .. })),
        unreadable: count(|o| matches!(o, Outcome::Unreadable { .. })),
        loadable_list,
        batches,
        modules,
        wall_s: t0.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_vec_pretty(&report).map_err(|e| Error::new(Kind::Internal, e.to_string()))?;
    bootlink::fsutil::write_atomic(&opts.out.join("survey.json"), &json)?;
    Ok(report)
}

/// The first hard dependency (transitively) of `e` that did not load.
fn failed_dependency(
    tree: &ModTree,
    e: &bootlink::kmod::Entry,
    results: &HashMap<String, (Outcome, Option<usize>)>,
) -> Option<String> {
    let mut stack: Vec<&str> = e.depends.iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    while let Some(d) = stack.pop() {
        let Some(m) = tree.module(d) else { continue };
        if !seen.insert(m.name.as_str()) {
            continue;
        }
        if let Some((o, _)) = results.get(&m.name)
            && *o != Outcome::Loaded
        {
            return Some(m.name.clone());
        }
        stack.extend(m.depends.iter().map(String::as_str));
    }
    None
}

/// The targets and what they need in the guest, as positions in `order`:
/// hard dependencies, and soft ones (a module's init may ask the crypto API
/// for what a soft dependency provides), transitively; soft dependencies
/// that did not load are left out.
fn closure(
    tree: &ModTree,
    order: &[&bootlink::kmod::Entry],
    position: &HashMap<&str, usize>,
    targets: &[usize],
    results: &HashMap<String, (Outcome, Option<usize>)>,
) -> Vec<usize> {
    let mut seen: HashSet<usize> = HashSet::new();
    let mut stack: Vec<usize> = targets.to_vec();
    while let Some(i) = stack.pop() {
        if !seen.insert(i) {
            continue;
        }
        let e = order[i];
        for d in &e.depends {
            if let Some(m) = tree.module(d)
                && let Some(&p) = position.get(m.name.as_str())
            {
                stack.push(p);
            }
        }
        for s in e.soft_pre.iter().chain(&e.soft_post) {
            if let Ok(Some(bootlink::kmod::Provider::Module(m))) = tree.lookup(s)
                && let Some(&p) = position.get(m.name.as_str())
                && results.get(&m.name).is_none_or(|(o, _)| *o == Outcome::Loaded)
            {
                stack.push(p);
            }
        }
    }
    seen.into_iter().collect()
}

/// `INSMOD <name> <status>` lines /init printed on the console, as far as
/// the boot got.
fn insmod_statuses(log: &str) -> HashMap<&str, i32> {
    let mut out = HashMap::new();
    for line in log.lines() {
        let mut w = line.trim_end_matches('\r').split_whitespace();
        if w.next() == Some("INSMOD")
            && let (Some(name), Some(rc)) = (w.next(), w.next())
            && let Ok(rc) = rc.parse()
        {
            out.insert(name, rc);
        }
    }
    out
}

/// Why `name` did not load: insmod's message on the console and the kernel's
/// lines between the lab's `insmod`/`insmod-done` marks in dmesg.
fn failure_reason(log: &str, dmesg: &str, name: &str) -> String {
    let file = format!("/{name}.ko'");
    let said = log
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .find(|l| l.contains("can't insert") && l.contains(&file))
        .and_then(|l| l.rsplit_once("': "))
        .map(|(_, why)| why.trim().to_string());
    let begin = format!("bootlink: insmod {name}");
    let end = format!("bootlink: insmod-done {name} ");
    let mut kernel = Vec::new();
    let mut inside = false;
    for l in dmesg.lines() {
        if l.ends_with(&begin) {
            inside = true;
        } else if l.contains(&end) {
            break;
        } else if inside {
            let text = l.split_once("] ").map(|(_, t)| t).unwrap_or(l).trim();
            // initcall_debug's "calling" lines and the taint notes say nothing of why.
            let noise = text.is_empty()
                || text.starts_with("bootlink:")
                || text.starts_with("calling ")
                || text.ends_with("taints kernel.")
                || text.ends_with("tainting kernel");
            if !noise && !kernel.iter().any(|k| k == text) {
                kernel.push(text.to_string());
            }
        }
    }
    // Asynchronous work (the TSC's refined calibration, a clocksource switch)
    // prints between the marks too: the lines that name the module come first.
    kernel.sort_by_key(|t| !t.contains(name));
    kernel.truncate(2);
    match (said, kernel.is_empty()) {
        (Some(s), true) => s,
        (Some(s), false) => format!("{s}; kernel: {}", kernel.join(" | ")),
        (None, false) => format!("kernel: {}", kernel.join(" | ")),
        (None, true) => "insmod failed and nothing says why".into(),
    }
}

/// The report as text: counts, the reasons grouped, the list file.
impl bootlink::report::Report for Report {
    fn render(&self) -> String {
        let r = self;
        let mut o = format!(
            "survey of {} modules ({}) on {} ({}), variant {} ({}): {} boots, {:.0} s\n",
            r.surveyed,
            r.modules_dir.display(),
            r.kernel_release,
            r.kernel.display(),
            r.variant,
            r.transform,
            r.batches.len(),
            r.wall_s
        );
        o.push_str(&format!(
            "  loaded {}, insmod failed {}, needs a module that did not load {}, the guest died {}, unreadable {}\n",
            r.loaded, r.failed, r.needs_failed, r.killed_guest, r.unreadable
        ));
        // The reasons, most common first (errno text without the kernel's lines).
        let mut reasons: HashMap<String, Vec<&str>> = HashMap::new();
        for m in &r.modules {
            let key = match &m.outcome {
                Outcome::Loaded => continue,
                Outcome::Failed { reason } => format!("insmod: {}", reason.split(';').next().unwrap_or(reason)),
                Outcome::NeedsFailed { .. } => "needs a module that did not load".to_string(),
                Outcome::KilledGuest { fault } => format!("the guest died: {fault}"),
                Outcome::Unreadable { .. } => "unreadable on the host".to_string(),
            };
            reasons.entry(key).or_default().push(&m.name);
        }
        let mut reasons: Vec<_> = reasons.into_iter().collect();
        reasons.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        for (why, names) in reasons {
            let shown: Vec<&str> = names.iter().take(6).copied().collect();
            let more = if names.len() > 6 { format!(", {} more", names.len() - 6) } else { String::new() };
            o.push_str(&format!("  {:>5}  {why}: {}{more}\n", names.len(), shown.join(", ")));
        }
        for b in &r.batches {
            for out in &b.outputs {
                if let Some(first) = out.lines().find(|l| !l.trim().is_empty()) {
                    o.push_str(&format!("  batch {}: {}\n", b.index + 1, first.trim()));
                }
            }
        }
        o.push_str(&format!("loadable modules, in load order: {}\n", r.loadable_list.display()));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insmod_results_come_from_the_console_as_far_as_the_boot_got() {
        let log = "[    1.0] Run /init\r\nINSMOD crc16 0\r\nINSMOD kvm_intel 1\r\nINSMOD broken\nKernel panic\n";
        let s = insmod_statuses(log);
        assert_eq!(s.get("crc16"), Some(&0));
        assert_eq!(s.get("kvm_intel"), Some(&1));
        assert_eq!(s.get("broken"), None);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn a_failure_is_explained_by_insmod_and_the_kernel_lines_of_that_load() {
        let log = "insmod: can't insert '/lib/modules/kvm_intel.ko': Input/output error\nINSMOD kvm_intel 1\n";
        let dmesg = "[    2.0] bootlink: insmod kvm_intel\n[    2.1] kvm: no hardware support for 'kvm_intel'\n\
                     [    2.2] bootlink: insmod-done kvm_intel 1\n[    2.3] bootlink: insmod other\n[    2.4] other: hello\n";
        assert_eq!(
            failure_reason(log, dmesg, "kvm_intel"),
            "Input/output error; kernel: kvm: no hardware support for 'kvm_intel'"
        );
        assert_eq!(failure_reason(log, dmesg, "nothing"), "insmod failed and nothing says why");
    }

    #[test]
    fn lines_naming_the_module_outrank_asynchronous_kernel_lines() {
        let log = "insmod: can't insert '/lib/modules/bl_fail.ko': No such device\n";
        let dmesg = "[ 2.0] bootlink: insmod bl_fail\n\
                     [ 2.1] tsc: Refined TSC clocksource calibration: 2596.113 MHz\n\
                     [ 2.2] clocksource: tsc: mask: 0xffffffffffffffff\n\
                     [ 2.3] bl_fail: init fails on purpose\n\
                     [ 2.4] bootlink: insmod-done bl_fail 1\n";
        assert_eq!(
            failure_reason(log, dmesg, "bl_fail"),
            "No such device; kernel: bl_fail: init fails on purpose | tsc: Refined TSC clocksource calibration: 2596.113 MHz"
        );
    }
}
