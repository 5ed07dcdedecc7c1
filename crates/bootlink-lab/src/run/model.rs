//! What the charts show, computed once from the runs: the series (one per
//! variant of each run), per-module means over repetitions, per-phase sums,
//! the before/after comparison and the longest links.

use std::collections::HashMap;

use serde::Serialize;

use crate::run::results::{Initcall, ModuleLoad, PHASES, Repetition, Run, Variant};

/// Time in a module's load that no phase accounts for.
pub(crate) const OTHER: &str = "other";

/// Median and range of one figure over repetitions (or starts).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Med {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Med {
    /// None without a finite value.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Med> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Med { n, median, min: v[0], max: v[n - 1] })
    }
}

/// Each value once, in the order first met (a set beside the list: one
/// look-up per value, where `contains` on the list is quadratic).
pub(crate) fn distinct<T: Eq + std::hash::Hash + Clone>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    values.into_iter().filter(|v| seen.insert(v.clone())).collect()
}

/// `items` grouped by `key` in one pass: the keys of `first` that occur,
/// in that order, then the others in the order met, each with its items in
/// their order. (A scan of the items per key is quadratic when a run's
/// file gives every item a key of its own.)
pub(crate) fn grouped<'a, T>(
    items: &'a [T],
    key: impl Fn(&'a T) -> &'a str,
    first: &[&str],
) -> Vec<(&'a str, Vec<&'a T>)> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<(&'a str, Vec<&'a T>)> = Vec::new();
    for it in items {
        let k = key(it);
        let i = *at.entry(k).or_insert_with(|| {
            groups.push((k, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(it);
    }
    let rank = |k: &str| first.iter().position(|f| *f == k).unwrap_or(first.len());
    // Stable: the others keep the order met.
    groups.sort_by_key(|(k, _)| rank(k));
    groups
}

/// One variant of one run.
pub struct Series<'a> {
    pub label: String,
    pub run_index: usize,
    pub run: &'a Run,
    pub variant: &'a Variant,
}

/// The variants of all runs, in order; labels are the variant names,
/// made unique with the run's number when two runs share a name.
pub fn series(runs: &[Run]) -> Vec<Series<'_>> {
    let mut out = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        for v in &run.variants {
            out.push(Series { label: v.name.clone(), run_index: ri, run, variant: v });
        }
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    for s in &out {
        *count.entry(s.label.clone()).or_default() += 1;
    }
    // A label given twice: by the runs' architectures when they tell the
    // series apart (an x86-64 and an arm64 run of the same set), else by
    // where they ran (a lab run beside a LAVA one), else by run.
    let arch = |r: &Run| if r.arch.is_empty() { "x86-64".to_string() } else { r.arch.clone() };
    // else by where they ran: the lab's own boots, or a LAVA device type
    let origin = |r: &Run| match r.source.as_str() {
        "lava" => format!("lava {}", r.device_type),
        s => s.to_string(),
    };
    let labels: Vec<String> = out
        .iter()
        .map(|s| {
            if count[&s.label] == 1 {
                return s.label.clone();
            }
            let distinct = |f: &dyn Fn(&Run) -> String| {
                let all: Vec<String> = out.iter().filter(|o| o.label == s.label).map(|o| f(o.run)).collect();
                all.iter().all(|a| all.iter().filter(|b| *b == a).count() == 1)
            };
            if distinct(&arch) {
                format!("{} ({})", s.label, arch(s.run))
            } else if distinct(&origin) {
                format!("{} ({})", s.label, origin(s.run))
            } else {
                format!("{} (run {})", s.label, s.run_index + 1)
            }
        })
        .collect();
    for (s, l) in out.iter_mut().zip(labels) {
        s.label = l;
    }
    out
}

/// Mean, median and spread of one quantity over repetitions (the
/// before/after tables show the median and min–max: boots timed in real
/// time, on a board or a busy host, spread, and a slow outlier moves the
/// mean).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Stat {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
}

impl Stat {
    pub fn of(values: &[f64]) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let var = if n > 1 { values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let median = Med::of(values.iter().copied()).map_or(mean, |m| m.median);
        Some(Stat { n, mean, median, min, max, stddev: var.sqrt() })
    }
}

/// (new - old) / old * 100, the gain; None when old is 0.
pub fn gain_pct(old: f64, new: f64) -> Option<f64> {
    (old != 0.0).then(|| (new - old) / old * 100.0)
}

/// The phases that occur in any of the runs: [`PHASES`] order first, then
/// unknown names in the order met, then [`OTHER`] if any load has time no
/// phase accounts for.
pub(crate) fn phase_order(runs: &[Run]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut other = false;
    for m in runs.iter().flat_map(|r| &r.variants).flat_map(|v| &v.repetitions).flat_map(|r| &r.modules) {
        for p in &m.phases {
            if !seen.contains(&p.name) {
                seen.push(p.name.clone());
            }
        }
        if unattributed(m) > 0.0 {
            other = true;
        }
    }
    let mut out: Vec<String> = PHASES.iter().filter(|p| seen.iter().any(|s| s == *p)).map(|p| p.to_string()).collect();
    out.extend(seen.into_iter().filter(|s| !PHASES.contains(&s.as_str()) && s != OTHER));
    if other {
        out.push(OTHER.to_string());
    }
    out
}

/// A load's time that none of its phases covers (0 if they cover it all).
pub fn unattributed(m: &ModuleLoad) -> f64 {
    let phases: f64 = m.phases.iter().filter(|p| p.name != OTHER).map(|p| p.duration_us).sum();
    (m.total_us - phases).max(0.0)
}

/// The time of `phase` in one load ([`OTHER`]: the unattributed rest).
pub(crate) fn phase_time(m: &ModuleLoad, phase: &str) -> f64 {
    if phase == OTHER {
        return unattributed(m) + m.phases.iter().filter(|p| p.name == OTHER).map(|p| p.duration_us).sum::<f64>();
    }
    m.phases.iter().filter(|p| p.name == phase).map(|p| p.duration_us).sum()
}

/// The phases cut into links, each with every link name it can have, in
/// kernel order.
const LINKED: [(&str, &[&str]); 2] =
    [("finalize", crate::run::results::FINALIZE_STEPS), ("init", crate::run::results::INIT_STEPS)];

/// A load's links of `phase` (none for a phase that is not cut).
pub(crate) fn phase_steps<'a>(m: &'a ModuleLoad, phase: &str) -> &'a [crate::run::results::Phase] {
    match phase {
        "finalize" => &m.finalize_steps,
        "init" => &m.init_steps,
        _ => &[],
    }
}

fn step_names(phase: &str) -> &'static [&'static str] {
    LINKED.iter().find(|(p, _)| *p == phase).map_or(&[], |(_, names)| names)
}

/// The time of one of `phase`'s links ([`crate::run::results::FINALIZE_STEPS`],
/// [`crate::run::results::INIT_STEPS`]) in one load.
pub(crate) fn step_time(m: &ModuleLoad, phase: &str, step: &str) -> f64 {
    phase_steps(m, phase).iter().filter(|p| p.name == step).map(|p| p.duration_us).sum()
}

/// The links of `phase` any load of `variants` has, in kernel order.
pub(crate) fn step_order<'a>(phase: &str, variants: impl IntoIterator<Item = &'a Variant>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    for v in variants {
        for m in v.repetitions.iter().flat_map(|r| &r.modules) {
            seen.extend(phase_steps(m, phase).iter().map(|p| p.name.as_str()));
        }
    }
    step_names(phase).iter().filter(|s| seen.contains(*s)).map(|s| s.to_string()).collect()
}

/// A link's name: "finalize: ORC sort" for a finalize step.
pub(crate) fn step_link(phase: &str, step: &str) -> String {
    format!("{phase}: {step}")
}

pub fn loaded(rep: &Repetition) -> impl Iterator<Item = &ModuleLoad> {
    rep.modules.iter().filter(|m| m.status == 0)
}

/// One module across a series' repetitions (loads that succeeded).
#[derive(Debug, Clone)]
pub struct ModuleMean {
    pub name: String,
    pub total: Stat,
    /// Mean per phase, in the order of [`phase_order`].
    pub phases: Vec<(String, f64)>,
    /// The same with finalize cut into its links where they were traced
    /// (the longest links rank these), in the same order for every module
    /// of a series.
    pub links: Vec<(String, f64)>,
    pub lookups: Option<f64>,
    pub size: u64,
    /// Mean start (for ordering).
    pub start_us: f64,
}

/// Per-module means, longest first.
pub(crate) fn module_means(s: &Series, phases: &[String]) -> Vec<ModuleMean> {
    let mut by: Vec<(String, Vec<&ModuleLoad>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for rep in &s.variant.repetitions {
        for m in loaded(rep) {
            let i = *index.entry(m.name.as_str()).or_insert_with(|| {
                by.push((m.name.clone(), Vec::new()));
                by.len() - 1
            });
            by[i].1.push(m);
        }
    }
    let steps: Vec<(&str, Vec<String>)> = LINKED.iter().map(|(p, _)| (*p, step_order(p, [s.variant]))).collect();
    let mut out: Vec<ModuleMean> = by
        .into_iter()
        .map(|(name, loads)| {
            let mean = |f: &dyn Fn(&ModuleLoad) -> f64| loads.iter().map(|m| f(m)).sum::<f64>() / loads.len() as f64;
            let mut links = Vec::new();
            for p in phases {
                if let Some((_, st)) = steps.iter().find(|(q, st)| q == p && !st.is_empty()) {
                    links.extend(st.iter().map(|st| (step_link(p, st), mean(&|m| step_time(m, p, st)))));
                } else {
                    links.push((p.clone(), mean(&|m| phase_time(m, p))));
                }
            }
            let n = loads.len() as f64;
            let totals: Vec<f64> = loads.iter().map(|m| m.total_us).collect();
            let lookups: Vec<f64> = loads.iter().filter_map(|m| m.lookups).map(|l| l as f64).collect();
            ModuleMean {
                name,
                total: Stat::of(&totals).expect("at least one load"),
                phases: phases
                    .iter()
                    .map(|p| (p.clone(), loads.iter().map(|m| phase_time(m, p)).sum::<f64>() / n))
                    .collect(),
                links,
                lookups: (!lookups.is_empty()).then(|| lookups.iter().sum::<f64>() / lookups.len() as f64),
                size: loads[0].size,
                start_us: loads.iter().map(|m| m.start_us).sum::<f64>() / n,
            }
        })
        .collect();
    out.sort_by(|a, b| b.total.mean.total_cmp(&a.total.mean).then_with(|| a.name.cmp(&b.name)));
    out
}

/// Modules that failed to load in some repetition: (name, status).
pub(crate) fn failed_modules(s: &Series) -> Vec<(String, i32)> {
    let mut seen = std::collections::HashSet::new();
    s.variant
        .repetitions
        .iter()
        .flat_map(|r| &r.modules)
        .filter(|m| m.status != 0 && seen.insert(m.name.as_str()))
        .map(|m| (m.name.clone(), m.status))
        .collect()
}

/// The repetition a timeline shows: the median by module-set time (or by
/// the end of the last initcall when no modules were loaded).
pub(crate) fn median_repetition(v: &Variant) -> Option<(usize, &Repetition)> {
    let key = |r: &Repetition| {
        let m: f64 = loaded(r).map(|m| m.total_us).sum();
        if m > 0.0 { m } else { r.initcalls.iter().map(|i| i.start_us + i.duration_us).fold(0.0, f64::max) }
    };
    let mut idx: Vec<usize> = (0..v.repetitions.len()).collect();
    idx.sort_by(|&a, &b| key(&v.repetitions[a]).total_cmp(&key(&v.repetitions[b])));
    let i = *idx.get((idx.len().saturating_sub(1)) / 2)?;
    Some((i, &v.repetitions[i]))
}

pub fn builtin(rep: &Repetition) -> impl Iterator<Item = &Initcall> {
    rep.initcalls.iter().filter(|i| i.module.is_empty())
}

pub(crate) fn module_inits(rep: &Repetition) -> impl Iterator<Item = &Initcall> {
    rep.initcalls.iter().filter(|i| !i.module.is_empty())
}

/// One row of the before/after table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    /// "us" or "count".
    pub unit: &'static str,
    /// Per series, over its repetitions (None: not measured there).
    pub values: Vec<Option<Stat>>,
    /// Per series against the first (None for the first, and when the
    /// baseline is 0 or missing).
    pub gain_pct: Vec<Option<f64>>,
}

/// A module's total in each series (the per-module table).
#[derive(Debug, Clone, Serialize)]
pub struct ModuleRow {
    pub module: String,
    pub values: Vec<Option<Stat>>,
    pub gain_pct: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesInfo {
    pub label: String,
    pub run: usize,
    pub repetitions: usize,
    pub modules_loaded: usize,
    pub modules_failed: usize,
    pub initcalls: usize,
    /// The function its symbols phase was timed at (the first repetition
    /// that recorded one; see [`Repetition::symbols_timed_at`]).
    pub symbols_timed_at: Option<String>,
}

/// The before/after comparison: the first series is the baseline ("old"),
/// every other one is "new"; gain = (new - old) / old * 100 on the medians.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub baseline: String,
    pub series: Vec<SeriesInfo>,
    /// One row per phase, then "total" (module loads), then the other
    /// boot-wide figures that are present.
    pub rows: Vec<Row>,
    pub modules: Vec<ModuleRow>,
}

fn row(name: &str, unit: &'static str, series: &[Series], f: impl Fn(&Repetition) -> Option<f64>) -> Row {
    let values: Vec<Option<Stat>> =
        series.iter().map(|s| Stat::of(&s.variant.repetitions.iter().filter_map(&f).collect::<Vec<_>>())).collect();
    let base = values.first().copied().flatten();
    let gain_pct = values
        .iter()
        .enumerate()
        .map(|(i, v)| match (i, base, v) {
            (0, _, _) => None,
            (_, Some(b), Some(v)) => gain_pct(b.median, v.median),
            _ => None,
        })
        .collect();
    Row { name: name.to_string(), unit, values, gain_pct }
}

pub fn summary(runs: &[Run]) -> Summary {
    let series = series(runs);
    let phases = phase_order(runs);
    let has_modules = |r: &Repetition| r.modules.iter().any(|m| m.status == 0);
    let mut rows = Vec::new();
    for p in &phases {
        rows.push(row(p, "us", &series, |r| has_modules(r).then(|| loaded(r).map(|m| phase_time(m, p)).sum())));
        for st in &step_order(p, series.iter().map(|s| s.variant)) {
            // A link no load of the repetition has (arm64's ORC sort) is
            // absent, not zero.
            let has_step = |r: &Repetition| loaded(r).any(|m| phase_steps(m, p).iter().any(|x| &x.name == st));
            rows.push(row(&format!("  {st}"), "us", &series, |r| {
                (has_modules(r) && has_step(r)).then(|| loaded(r).map(|m| step_time(m, p, st)).sum())
            }));
        }
    }
    let any_modules = series.iter().any(|s| s.variant.repetitions.iter().any(has_modules));
    if any_modules {
        rows.push(row("total", "us", &series, |r| has_modules(r).then(|| loaded(r).map(|m| m.total_us).sum())));
    }
    let lookups = |r: &Repetition| {
        let v: Vec<u64> = loaded(r).filter_map(|m| m.lookups).collect();
        // (In f64: a run's file may give counts that overflow a u64 sum.)
        (!v.is_empty()).then(|| v.iter().map(|&n| n as f64).sum::<f64>())
    };
    if series.iter().any(|s| s.variant.repetitions.iter().any(|r| lookups(r).is_some())) {
        rows.push(row("symbol lookups", "count", &series, lookups));
    }
    if series.iter().any(|s| s.variant.repetitions.iter().any(|r| r.modules_total_us > 0.0)) {
        rows.push(row("module set (guest)", "us", &series, |r| {
            (r.modules_total_us > 0.0).then_some(r.modules_total_us)
        }));
    }
    if series.iter().any(|s| s.variant.repetitions.iter().any(|r| builtin(r).next().is_some())) {
        rows.push(row("built-in initcalls", "us", &series, |r| {
            builtin(r).next().is_some().then(|| builtin(r).map(|i| i.duration_us).sum())
        }));
    }
    if series.iter().any(|s| s.variant.repetitions.iter().any(|r| r.init_start_us > 0.0)) {
        rows.push(row("/init started", "us", &series, |r| (r.init_start_us > 0.0).then_some(r.init_start_us)));
    }

    // Per module, in the baseline's order (longest first), then modules
    // only the other series loaded.
    let means: Vec<Vec<ModuleMean>> = series.iter().map(|s| module_means(s, &phases)).collect();
    // Each series' means by name: one look-up per module and series.
    let by_name: Vec<HashMap<&str, &ModuleMean>> =
        means.iter().map(|ms| ms.iter().map(|m| (m.name.as_str(), m)).collect()).collect();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let names: Vec<&str> = means.iter().flatten().map(|m| m.name.as_str()).filter(|n| seen.insert(*n)).collect();
    let modules = names
        .into_iter()
        .map(|name| {
            let values: Vec<Option<Stat>> = by_name.iter().map(|ms| ms.get(name).map(|m| m.total)).collect();
            let base = values[0];
            let gain_pct = values
                .iter()
                .enumerate()
                .map(|(i, v)| if i == 0 { None } else { base.zip(*v).and_then(|(b, v)| gain_pct(b.mean, v.mean)) })
                .collect();
            ModuleRow { module: name.to_string(), values, gain_pct }
        })
        .collect();

    Summary {
        baseline: series.first().map(|s| s.label.clone()).unwrap_or_default(),
        series: series
            .iter()
            .map(|s| SeriesInfo {
                label: s.label.clone(),
                run: s.run_index,
                repetitions: s.variant.repetitions.len(),
                modules_loaded: s.variant.repetitions.first().map(|r| loaded(r).count()).unwrap_or(0),
                modules_failed: failed_modules(s).len(),
                initcalls: s.variant.repetitions.first().map(|r| r.initcalls.len()).unwrap_or(0),
                symbols_timed_at: s.variant.repetitions.iter().find_map(|r| r.symbols_timed_at.clone()),
            })
            .collect(),
        rows,
        modules,
    }
}

/// One line of a "longest links" ranking.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Link {
    pub what: String,
    /// The phase, for (module, phase) links; the module for phase totals.
    pub detail: String,
    pub us: f64,
    /// Share of the whole (module set, or built-in initcalls).
    pub share_pct: f64,
}

/// The module set's time per phase (mean per repetition; finalize by its
/// links where traced), largest first, with the module that spends most in each.
pub(crate) fn links_by_phase(means: &[ModuleMean]) -> Vec<Link> {
    let total: f64 = means.iter().map(|m| m.total.mean).sum();
    let Some(first) = means.first() else { return Vec::new() };
    let mut out: Vec<Link> = (0..first.links.len())
        .map(|k| {
            let us: f64 = means.iter().map(|m| m.links[k].1).sum();
            let top = means.iter().max_by(|a, b| a.links[k].1.total_cmp(&b.links[k].1)).expect("non-empty");
            Link {
                what: first.links[k].0.clone(),
                detail: if top.links[k].1 > 0.0 { top.name.clone() } else { String::new() },
                us,
                share_pct: if total > 0.0 { us / total * 100.0 } else { 0.0 },
            }
        })
        .filter(|l| l.us > 0.0)
        .collect();
    out.sort_by(|a, b| b.us.total_cmp(&a.us));
    out
}

/// The longest (module, phase) pairs of the module set.
pub(crate) fn links_by_module_phase(means: &[ModuleMean], n: usize) -> Vec<Link> {
    let total: f64 = means.iter().map(|m| m.total.mean).sum();
    let mut out: Vec<Link> = means
        .iter()
        .flat_map(|m| {
            m.links.iter().filter(|p| p.1 > 0.0).map(move |(p, us)| Link {
                what: m.name.clone(),
                detail: p.clone(),
                us: *us,
                share_pct: if total > 0.0 { us / total * 100.0 } else { 0.0 },
            })
        })
        .collect();
    out.sort_by(|a, b| b.us.total_cmp(&a.us).then_with(|| a.what.cmp(&b.what)));
    out.truncate(n);
    out
}

/// The longest initcalls of one repetition (built-in and module init).
pub(crate) fn longest_initcalls(rep: &Repetition, n: usize) -> Vec<Link> {
    let total: f64 = rep.initcalls.iter().map(|i| i.duration_us).sum();
    let mut v: Vec<&Initcall> = rep.initcalls.iter().collect();
    v.sort_by(|a, b| b.duration_us.total_cmp(&a.duration_us).then_with(|| a.start_us.total_cmp(&b.start_us)));
    v.into_iter()
        .take(n)
        .map(|i| Link {
            what: i.name.clone(),
            detail: i.module.clone(),
            us: i.duration_us,
            share_pct: if total > 0.0 { i.duration_us / total * 100.0 } else { 0.0 },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::results::{FORMAT_VERSION, Phase};

    fn load(name: &str, total: f64, phases: &[(&str, f64)]) -> ModuleLoad {
        let mut t = 0.0;
        ModuleLoad {
            finalize_steps: Vec::new(),
            init_steps: Vec::new(),
            worker: None,
            name: name.into(),
            start_us: 0.0,
            total_us: total,
            phases: phases
                .iter()
                .map(|(n, d)| {
                    t += d;
                    Phase { name: n.to_string(), start_us: t - d, duration_us: *d }
                })
                .collect(),
            lookups: Some(10),
            size: 1,
            status: 0,
        }
    }

    fn run(variants: Vec<(&str, Vec<Vec<ModuleLoad>>)>) -> Run {
        Run {
            format: FORMAT_VERSION,
            source: "lab".into(),
            kernel_release: "6.1".into(),
            kernel: Default::default(),
            cmdline: String::new(),
            qemu_version: String::new(),
            cpu_model: String::new(),
            machine: String::new(),
            arch: String::new(),
            qemu_command: vec![],
            timing: "deterministic".into(),
            module_set: "t".into(),
            variants: variants
                .into_iter()
                .map(|(n, reps)| Variant {
                    name: n.into(),
                    repetitions: reps
                        .into_iter()
                        .enumerate()
                        .map(|(i, modules)| Repetition { index: i, modules, ..Default::default() })
                        .collect(),
                    ..Variant::named(n)
                })
                .collect(),
            partial: false,
            tracing_overhead_pct: None,
            device_type: String::new(),
        }
    }

    #[test]
    fn stats_and_gain() {
        let s = Stat::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.n, s.mean, s.median, s.min, s.max, s.stddev), (3, 2.0, 2.0, 1.0, 3.0, 1.0));
        let s = Stat::of(&[1.0, 2.0, 9.0]).unwrap();
        assert_eq!((s.mean, s.median), (4.0, 2.0));
        assert_eq!(Stat::of(&[]), None);
        assert_eq!(gain_pct(200.0, 150.0), Some(-25.0));
        assert_eq!(gain_pct(0.0, 1.0), None);
    }

    #[test]
    fn before_after_rows() {
        let r = run(vec![
            (
                "stock",
                vec![
                    vec![load("a", 100.0, &[("symbols", 40.0), ("init", 55.0)])],
                    vec![load("a", 120.0, &[("symbols", 60.0), ("init", 55.0)])],
                ],
            ),
            (
                "preresolved",
                vec![
                    vec![load("a", 60.0, &[("symbols", 5.0), ("init", 50.0)])],
                    vec![load("a", 70.0, &[("symbols", 15.0), ("init", 50.0)])],
                ],
            ),
        ]);
        let s = summary(std::slice::from_ref(&r));
        let names: Vec<&str> = s.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["symbols", "init", "other", "total", "symbol lookups"]);
        let sym = &s.rows[0];
        assert_eq!(sym.values[0].unwrap().mean, 50.0);
        assert_eq!(sym.values[1].unwrap().mean, 10.0);
        assert_eq!(sym.gain_pct, vec![None, Some(-80.0)]);
        let total = &s.rows[3];
        assert_eq!((total.values[0].unwrap().min, total.values[0].unwrap().max), (100.0, 120.0));
        assert_eq!(total.gain_pct[1], Some((65.0 - 110.0) / 110.0 * 100.0));
        assert_eq!(s.modules.len(), 1);
        let other = &s.rows[2];
        assert_eq!(other.values[0].unwrap().mean, 5.0);

        let series = series(std::slice::from_ref(&r));
        let means = module_means(&series[0], &phase_order(std::slice::from_ref(&r)));
        let by_phase = links_by_phase(&means);
        assert_eq!(by_phase[0].what, "init");
        assert_eq!(by_phase[0].detail, "a");
        assert_eq!(by_phase[1].what, "symbols");
        assert!((by_phase.iter().map(|l| l.share_pct).sum::<f64>() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn duplicate_variant_names_get_the_run_number() {
        let a = run(vec![("stock", vec![vec![]])]);
        let labels: Vec<String> = series(&[a.clone(), a]).into_iter().map(|s| s.label).collect();
        assert_eq!(labels, ["stock (run 1)", "stock (run 2)"]);
    }

    #[test]
    fn runs_of_two_architectures_are_labelled_by_them() {
        let x86 = run(vec![("stock", vec![vec![]]), ("unsigned", vec![vec![]])]);
        let mut arm = x86.clone();
        arm.arch = "arm64".into();
        let labels: Vec<String> = series(&[x86.clone(), arm.clone()]).into_iter().map(|s| s.label).collect();
        assert_eq!(labels, ["stock (x86-64)", "unsigned (x86-64)", "stock (arm64)", "unsigned (arm64)"]);
        // Two runs of one architecture beside another: by run.
        let labels: Vec<String> = series(&[x86.clone(), x86, arm]).into_iter().map(|s| s.label).collect();
        assert_eq!(labels[..2], ["stock (run 1)", "unsigned (run 1)"]);
        assert_eq!(labels[4], "stock (run 3)");
    }

    #[test]
    fn a_lab_run_beside_a_lava_run_is_labelled_by_where_it_ran() {
        let lab = run(vec![("stock", vec![vec![]])]);
        let mut lava = lab.clone();
        lava.source = "lava".into();
        lava.device_type = "qemu".into();
        let labels: Vec<String> = series(&[lab.clone(), lava.clone()]).into_iter().map(|s| s.label).collect();
        assert_eq!(labels, ["stock (lab)", "stock (lava qemu)"]);
        // two LAVA runs of one device type: by run
        let labels: Vec<String> = series(&[lab, lava.clone(), lava]).into_iter().map(|s| s.label).collect();
        assert_eq!(labels, ["stock (run 1)", "stock (run 2)", "stock (run 3)"]);
    }
}
