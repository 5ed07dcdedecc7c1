//! What the parallel loaders and the duplicate-request storms measured, per
//! series: the figures of [`crate::workload::modules::record::LoaderResult`] and
//! [`crate::workload::modules::record::Storm`] as medians over repetitions with their
//! min–max spread, and their tables (HTML for the report, plain text for
//! the `bootlink chart` command's output).

use std::collections::HashMap;
use std::fmt::Write;

use crate::run::model::{Series, distinct};
use crate::run::results::Repetition;
use crate::workload::modules::record::Storm;
use bootlink::table::{Table, thousands};

use crate::chart::svg::{esc, ms};

/// The kernel statistic that says how much memory failed loads took.
pub(crate) const WASTED: &str = "Virtual mem wasted bytes";

pub use crate::run::model::Med;

/// One series' storm figures.
#[derive(Debug, Clone)]
pub(crate) struct StormRow {
    pub label: String,
    pub workers: Med,
    pub requests: Med,
    /// Per result (its short name: "loaded", "EEXIST", ...), in the order
    /// first met, "loaded" first; repetitions without it count 0.
    pub results: Vec<(String, Med)>,
    pub kernel_reads: Med,
    pub bytes_read: Med,
    pub duplicate_read_bytes: Med,
    pub load_module_calls: Option<Med>,
    /// Peak VmallocUsed above its level before the storm, KiB.
    pub vmalloc_above_kb: Med,
    pub quiescence_us: Med,
    /// [`WASTED`], where the kernel counts it.
    pub wasted_bytes: Option<Med>,
    /// The kernel's module statistics (name, median), where it has them.
    pub kernel_stats: Vec<(String, Med)>,
}

/// One series' parallel (or other non-insmod) loader figures.
#[derive(Debug, Clone)]
pub(crate) struct LoaderRow {
    pub label: String,
    /// The loader kinds seen, joined with "/".
    pub kind: String,
    pub workers: Med,
    pub wall_us: Med,
    pub load_calls: Med,
    /// The most duplicates in any repetition, and their names.
    pub duplicates: usize,
    pub duplicate_names: Vec<String>,
    /// The most modules not loaded in any repetition, and (name, result).
    pub not_loaded: usize,
    pub not_loaded_list: Vec<(String, String)>,
    /// Non-zero exit statuses of the loader.
    pub failed_exits: Vec<i32>,
}

/// A result as busybox insmod prints it, by its errno name.
pub(crate) fn result_name(r: &str) -> String {
    let name = match r {
        "0" | "loaded" => "loaded",
        "File exists" => "EEXIST",
        "Device or resource busy" => "EBUSY",
        "No such file or directory" => "ENOENT",
        "Operation not permitted" => "EPERM",
        "Invalid argument" => "EINVAL",
        "Cannot allocate memory" => "ENOMEM",
        "Exec format error" => "ENOEXEC",
        "Key was rejected by service" => "EKEYREJECTED",
        "Required key not available" => "ENOKEY",
        "Bad message" => "EBADMSG",
        "Resource temporarily unavailable" => "EAGAIN",
        "Interrupted system call" => "EINTR",
        "Text file busy" => "ETXTBSY",
        "No space left on device" => "ENOSPC",
        "Operation not supported" | "Not supported" => "EOPNOTSUPP",
        "Function not implemented" => "ENOSYS",
        "Bad address" => "EFAULT",
        "Permission denied" => "EACCES",
        "Unknown symbol in module" => "unknown symbol",
        other => other,
    };
    name.to_string()
}

/// Lines of the kernel's statistics that are failed modules ("name count"
/// with the last error as the value), not counters.
fn is_counter(name: &str) -> bool {
    name.rsplit_once(' ').is_none_or(|(_, last)| last.parse::<i64>().is_err())
}

fn storms<'a>(s: &'a Series) -> Vec<&'a Storm> {
    s.variant.repetitions.iter().filter_map(|r| r.storm()).collect()
}

/// The storm figures of every series that has some.
pub(crate) fn storm_rows(series: &[Series]) -> Vec<StormRow> {
    let mut out = Vec::new();
    for s in series {
        let st = storms(s);
        if st.is_empty() {
            continue;
        }
        let med = |f: &dyn Fn(&Storm) -> f64| Med::of(st.iter().map(|x| f(x))).unwrap_or(ZERO);
        let mut keys: Vec<String> = distinct(st.iter().flat_map(|x| &x.results).map(|(k, _)| result_name(k)));
        if let Some(i) = keys.iter().position(|k| k == "loaded") {
            let k = keys.remove(i);
            keys.insert(0, k);
        }
        // Per repetition, each result's count (results of one name summed).
        let per_rep: Vec<HashMap<String, f64>> = st
            .iter()
            .map(|x| {
                let mut m: HashMap<String, f64> = HashMap::new();
                for (r, n) in &x.results {
                    *m.entry(result_name(r)).or_default() += *n as f64;
                }
                m
            })
            .collect();
        let results = keys
            .into_iter()
            .map(|k| {
                let m = Med::of(per_rep.iter().map(|r| r.get(&k).copied().unwrap_or(0.0))).unwrap_or(ZERO);
                (k, m)
            })
            .collect();
        // Per repetition, its kernel statistics by name (the first of a name).
        let stats: Vec<HashMap<&str, f64>> = st
            .iter()
            .map(|x| {
                let mut m = HashMap::new();
                for (n, v) in &x.kernel_stats {
                    m.entry(n.as_str()).or_insert(*v as f64);
                }
                m
            })
            .collect();
        let stat = |name: &str| Med::of(stats.iter().filter_map(|m| m.get(name).copied()));
        let names: Vec<&str> =
            distinct(st.iter().flat_map(|x| &x.kernel_stats).map(|(n, _)| n.as_str()).filter(|n| is_counter(n)));
        out.push(StormRow {
            label: s.label.clone(),
            workers: med(&|x| x.workers as f64),
            requests: med(&|x| x.requests as f64),
            results,
            kernel_reads: med(&|x| x.kernel_reads as f64),
            bytes_read: med(&|x| x.bytes_read as f64),
            duplicate_read_bytes: med(&|x| x.duplicate_read_bytes as f64),
            load_module_calls: Med::of(st.iter().filter_map(|x| x.load_module_calls.map(|v| v as f64))),
            vmalloc_above_kb: med(&|x| x.vmalloc_peak_kb.saturating_sub(x.vmalloc_before_kb) as f64),
            quiescence_us: med(&|x| x.quiescence_us),
            wasted_bytes: stat(WASTED),
            kernel_stats: names.iter().filter_map(|n| Some((n.to_string(), stat(n)?))).collect(),
        })
    }
    out
}

const ZERO: Med = Med { n: 0, median: 0.0, min: 0.0, max: 0.0 };

/// The loader figures of every series whose repetitions have some.
pub(crate) fn loader_rows(series: &[Series]) -> Vec<LoaderRow> {
    let mut out = Vec::new();
    for s in series {
        let reps: Vec<&Repetition> = s.variant.repetitions.iter().filter(|r| r.loader().is_some()).collect();
        let ls: Vec<_> = reps.iter().filter_map(|r| r.loader()).collect();
        if ls.is_empty() {
            continue;
        }
        let med = |f: &dyn Fn(&crate::workload::modules::record::LoaderResult) -> f64| {
            Med::of(ls.iter().map(|x| f(x))).unwrap_or(ZERO)
        };
        let kinds: Vec<&str> = distinct(ls.iter().map(|l| l.kind.as_str()));
        let duplicate_names: Vec<String> = distinct(ls.iter().flat_map(|l| &l.duplicates).cloned());
        let not_loaded_list: Vec<(String, String)> = distinct(ls.iter().flat_map(|l| &l.not_loaded).cloned());
        let failed_exits: Vec<i32> = distinct(ls.iter().map(|l| l.exit).filter(|&e| e != 0));
        out.push(LoaderRow {
            label: s.label.clone(),
            kind: kinds.join("/"),
            workers: med(&|x| x.workers as f64),
            wall_us: med(&|x| x.wall_us),
            load_calls: med(&|x| x.load_calls as f64),
            duplicates: ls.iter().map(|x| x.duplicates.len()).max().unwrap_or(0),
            duplicate_names,
            not_loaded: ls.iter().map(|x| x.not_loaded.len()).max().unwrap_or(0),
            not_loaded_list,
            failed_exits,
        })
    }
    out
}

/// A count ("1,234"; a median between two counts keeps its half).
pub fn count(v: f64) -> String {
    if v.fract() == 0.0 && v >= 0.0 { thousands(v as usize) } else { format!("{v:.1}") }
}

/// Bytes in MiB.
pub fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / 1_048_576.0)
}

/// "40 loaded, 120 EEXIST" (medians).
pub(crate) fn results_text(results: &[(String, Med)]) -> String {
    if results.is_empty() {
        return "—".into();
    }
    results.iter().map(|(k, m)| format!("{} {k}", count(m.median))).collect::<Vec<_>>().join(", ")
}

fn cell(m: Med, f: &dyn Fn(f64) -> String) -> String {
    let mut c = format!("<td>{}", f(m.median));
    if m.n > 1 && m.min != m.max {
        let _ = write!(c, r#"<span class="spread">{}–{} · n={}</span>"#, f(m.min), f(m.max), m.n);
    } else if m.n > 1 {
        let _ = write!(c, r#"<span class="spread">n={}</span>"#, m.n);
    }
    c.push_str("</td>");
    c
}

fn opt_cell(m: Option<Med>, f: &dyn Fn(f64) -> String) -> String {
    m.map(|m| cell(m, f)).unwrap_or_else(|| "<td>—</td>".into())
}

/// The HTML sections: the loaders table, then the storm table, each only
/// when some series has such figures.
pub fn html(o: &mut String, series: &[Series]) {
    let loaders = loader_rows(series);
    if !loaders.is_empty() {
        loaders_html(o, &loaders);
    }
    let storms = storm_rows(series);
    if !storms.is_empty() {
        storm_html(o, &storms);
    }
}

fn loaders_html(o: &mut String, rows: &[LoaderRow]) {
    o.push_str(r#"<section id="loaders"><h2>Loaders</h2><p class="note">How each variant's modules were loaded when not one insmod after the other. Wall time: guest time from the loader's start to its exit, median over repetitions (min–max below when there are several). Duplicates: modules the loader loaded more than once (must be 0); not loaded: modules that did not end loaded; both the most in any repetition.</p>"#);
    o.push_str(r#"<table class="loaders"><tr><th>Variant</th><th class="l">loader</th><th>workers</th><th>wall time</th><th>load calls</th><th>duplicates</th><th>not loaded</th></tr>"#);
    for r in rows {
        let warn = |n: usize| if n > 0 { r#" class="gain-up""# } else { "" };
        let _ = write!(
            o,
            r#"<tr data-variant="{}"><td>{}</td><td class="l">{}</td>{}{}{}<td{}>{}</td><td{}>{}</td></tr>"#,
            esc(&r.label),
            esc(&r.label),
            esc(&r.kind),
            cell(r.workers, &count),
            cell(r.wall_us, &|v| format!("{} ms", ms(v))),
            cell(r.load_calls, &count),
            warn(r.duplicates),
            r.duplicates,
            warn(r.not_loaded),
            r.not_loaded,
        );
    }
    o.push_str("</table>");
    for r in rows {
        if !r.duplicate_names.is_empty() {
            let _ = write!(
                o,
                r#"<p class="note warn">{}: loaded more than once: {}</p>"#,
                esc(&r.label),
                esc(&r.duplicate_names.join(", "))
            );
        }
        if !r.not_loaded_list.is_empty() {
            let list: Vec<String> = r.not_loaded_list.iter().map(|(n, why)| format!("{n} ({why})")).collect();
            let _ = write!(o, r#"<p class="note warn">{}: not loaded: {}</p>"#, esc(&r.label), esc(&list.join(", ")));
        }
        if !r.failed_exits.is_empty() {
            let codes: Vec<String> = r.failed_exits.iter().map(|c| c.to_string()).collect();
            let _ = write!(
                o,
                r#"<p class="note warn">{}: the loader exited with status {}</p>"#,
                esc(&r.label),
                codes.join(", ")
            );
        }
    }
    o.push_str("</section>");
}

fn storm_html(o: &mut String, rows: &[StormRow]) {
    o.push_str(r#"<section id="storm"><h2>Duplicate requests (storm)</h2><p class="note">Every worker asks for every module of the set at once, as per-CPU udev workers do. Per variant: the median over repetitions, min–max below when there are several. Results: what the requests got (EEXIST: the module was already loaded or loading). Duplicate read bytes: bytes read beyond one read of each module file. Peak vmalloc: the peak of VmallocUsed during the storm above its level before it. Quiescence: from the first request to the last answer.</p>"#);
    o.push_str(r#"<table class="storm"><tr><th>Variant</th><th>workers</th><th>requests</th><th class="l">results</th><th>kernel reads</th><th style="white-space:normal">bytes read (MiB)</th><th style="white-space:normal">duplicate read (MiB)</th><th style="white-space:normal">load_module calls</th><th style="white-space:normal">peak vmalloc above before (MiB)</th><th>quiescence</th><th style="white-space:normal">Virtual mem wasted (MiB)</th></tr>"#);
    for r in rows {
        let mut res = esc(&results_text(&r.results)).into_owned();
        if r.results.iter().any(|(_, m)| m.min != m.max) {
            let spread: Vec<String> = r
                .results
                .iter()
                .filter(|(_, m)| m.min != m.max)
                .map(|(k, m)| format!("{k} {}–{}", count(m.min), count(m.max)))
                .collect();
            let _ = write!(res, r#"<span class="spread">{}</span>"#, esc(&spread.join(", ")));
        }
        let _ = write!(
            o,
            r#"<tr data-variant="{}"><td>{}</td>{}{}<td class="l">{res}</td>{}{}{}{}{}{}{}</tr>"#,
            esc(&r.label),
            esc(&r.label),
            cell(r.workers, &count),
            cell(r.requests, &count),
            cell(r.kernel_reads, &count),
            cell(r.bytes_read, &mib),
            cell(r.duplicate_read_bytes, &mib),
            opt_cell(r.load_module_calls, &count),
            cell(r.vmalloc_above_kb, &|kb| mib(kb * 1024.0)),
            cell(r.quiescence_us, &|v| format!("{} ms", ms(v))),
            opt_cell(r.wasted_bytes, &mib),
        );
    }
    o.push_str("</table>");
    o.push_str(r#"<p class="note">load_module calls: counted by a kprobe, — where the kernel does not let load_module be probed. Virtual mem wasted: the kernel's own count of the memory failed loads took (<code>/sys/kernel/debug/modules/stats</code>, CONFIG_MODULE_STATS since Linux 6.4, or bootlink's statistics patch on 6.1); Debian's kernels have no such counter, shown as —.</p>"#);
    // The kernel's statistics, where any variant has them.
    let names: Vec<&str> = distinct(rows.iter().flat_map(|r| &r.kernel_stats).map(|(n, _)| n.as_str()));
    // Each row's statistics by name (the first of a name).
    let by_name: Vec<HashMap<&str, Med>> = rows
        .iter()
        .map(|r| {
            let mut m = HashMap::new();
            for (n, v) in &r.kernel_stats {
                m.entry(n.as_str()).or_insert(*v);
            }
            m
        })
        .collect();
    if !names.is_empty() {
        o.push_str("<h3>The kernel's module statistics</h3><table class=\"kernel-stats\"><tr><th>Statistic</th>");
        for r in rows {
            let _ = write!(o, "<th>{}</th>", esc(&r.label));
        }
        o.push_str("</tr>");
        for n in &names {
            let _ = write!(o, "<tr><td>{}</td>", esc(n));
            for r in &by_name {
                o.push_str(&opt_cell(r.get(n).copied(), &count));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    o.push_str("</section>");
}

/// A plain-text cell: the median, and its range when it varies.
fn text(m: Med, f: &dyn Fn(f64) -> String) -> String {
    if m.n > 1 && m.min != m.max { format!("{} ({}-{})", f(m.median), f(m.min), f(m.max)) } else { f(m.median) }
}

fn opt_text(m: Option<Med>, f: &dyn Fn(f64) -> String) -> String {
    m.map(|m| text(m, f)).unwrap_or_else(|| "-".into())
}

/// The two tables as plain text (empty when no series has such figures).
pub(crate) fn render_text(series: &[Series]) -> String {
    let mut out = String::new();
    let loaders = loader_rows(series);
    if !loaders.is_empty() {
        out.push_str("Loaders (median over repetitions, range in brackets)\n");
        let mut t =
            Table::new(&["variant", "loader", "workers", "wall time", "load calls", "duplicates", "not loaded"]);
        for r in &loaders {
            t.row(vec![
                r.label.clone(),
                r.kind.clone(),
                text(r.workers, &count),
                text(r.wall_us, &|v| format!("{} ms", ms(v))),
                text(r.load_calls, &count),
                r.duplicates.to_string(),
                r.not_loaded.to_string(),
            ]);
        }
        out.push_str(&t.render());
    }
    let storms = storm_rows(series);
    if !storms.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("Duplicate requests (storm; median over repetitions, range in brackets; sizes in MiB)\n");
        let mut t = Table::new(&[
            "variant",
            "workers",
            "requests",
            "results",
            "kernel reads",
            "read",
            "duplicate read",
            "load_module calls",
            "peak vmalloc",
            "quiescence",
            "vmem wasted",
        ]);
        for r in &storms {
            t.row(vec![
                r.label.clone(),
                text(r.workers, &count),
                text(r.requests, &count),
                results_text(&r.results),
                text(r.kernel_reads, &count),
                text(r.bytes_read, &mib),
                text(r.duplicate_read_bytes, &mib),
                opt_text(r.load_module_calls, &count),
                text(r.vmalloc_above_kb, &|kb| mib(kb * 1024.0)),
                text(r.quiescence_us, &|v| format!("{} ms", ms(v))),
                opt_text(r.wasted_bytes, &mib),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_names() {
        let m = Med::of([3.0, 1.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((m.n, m.median, m.min, m.max), (3, 2.0, 1.0, 3.0));
        assert_eq!(Med::of([1.0, 2.0]).unwrap().median, 1.5);
        assert_eq!(Med::of([f64::NAN]), None);
        assert_eq!(result_name("File exists"), "EEXIST");
        assert_eq!(result_name("0"), "loaded");
        assert_eq!(result_name("failed (3)"), "failed (3)");
        assert_eq!(count(120.0), "120");
        assert_eq!(count(1500.5), "1500.5");
        assert_eq!(mib(3.0 * 1_048_576.0), "3.00");
        assert!(is_counter("Load requests") && is_counter(WASTED) && !is_counter("bl_fail 3"));
    }
}
