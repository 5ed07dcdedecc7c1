//! Charts of boots: `bootlink chart RUN...`.
//!
//! Input: lab run directories (their `run.json`), `run.json` files, or
//! plain kernel logs (dmesg or a serial console with printk times and
//! `initcall_debug`), see [`load`]. Output, see [`render`]:
//! - HTML: one self-contained file (inline SVG and CSS, no script, nothing
//!   fetched): a bootgraph-like timeline of initcalls and module loads with
//!   each module's phases inside its bar, per-module stacked phase bars, the
//!   longest links, and with two or more variants the before/after tables
//!   (gain = (new − old) / old × 100, spread over repetitions); parallel
//!   loaders' modules in one timeline row per worker, and the loaders' and
//!   duplicate-request storms' tables where a variant has them; a program
//!   started under DDLink's ld.so in the guest: its starts in the timeline
//!   (one row per loader mode) and the before/after table of its modes;
//! - SVG: the timelines alone, as one standalone SVG;
//! - Perfetto: Chrome trace-event JSON for ui.perfetto.dev;
//! - JSON: the before/after [`Summary`] for machines.
//!
//! `bootlink system` records (their directories or system.json files)
//! chart apart ([`system`]): each boot's links side by side, as SVG or
//! HTML.
//!
//! The runs, their parsing and what is computed from them (the summary,
//! the longest links) live in [`crate::run`]; here are the renderers only:
//! `svg` (its drawing primitives, below the workloads, and the timeline),
//! `html`, `perfetto`. Each workload's own sections and panels are in its
//! folder, reached through the registry ([`crate::workload`]).

mod html;
mod perfetto;
pub(crate) mod svg;
pub mod system;

/// Text escaped for HTML and SVG (`recommend`'s chart too).
pub(crate) use svg::esc;

use std::path::{Path, PathBuf};

use crate::run::model;
use crate::run::results::Run;
use crate::run::{Summary, load, summary};
use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;

/// The HTML report.
pub fn render_html(runs: &[Run]) -> String {
    html::render(runs)
}

/// The timeline of every series (its median repetition) as one standalone SVG.
pub fn render_svg(runs: &[Run]) -> String {
    let phases = model::phase_order(runs);
    let parts: Vec<String> = model::series(runs).iter().filter_map(|s| svg::series_timeline(s, &phases)).collect();
    svg::stack("bootlink timeline", &parts)
}

/// Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing).
pub fn render_perfetto(runs: &[Run]) -> String {
    perfetto::render(runs)
}

/// The loaders' and the duplicate-request storms' tables as plain text
/// (empty when no variant has such figures): what `bootlink chart` prints
/// after the before/after table.
pub fn render_loaders_text(runs: &[Run]) -> String {
    crate::workload::modules::chart::render_text(&model::series(runs))
}

/// What [`render`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Svg,
    Perfetto,
    /// The [`Summary`], pretty-printed.
    Json,
}

pub fn render(runs: &[Run], format: Format) -> String {
    match format {
        Format::Html => render_html(runs),
        Format::Svg => render_svg(runs),
        Format::Perfetto => render_perfetto(runs),
        Format::Json => summary_json(&summary(runs)),
    }
}

fn summary_json(s: &Summary) -> String {
    serde_json::to_string_pretty(s).expect("serializable") + "\n"
}

/// Render and write `path` atomically.
pub fn write(path: &Path, runs: &[Run], format: Format) -> Result<()> {
    fsutil::write_atomic(path, render(runs, format).as_bytes())
}

/// What `bootlink chart` is asked for: the files to write, and whether the
/// before/after summary alone is an answer (the CLI's `--json`).
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    pub html: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub perfetto: Option<PathBuf>,
    /// The summary is asked for, so writing no file is not a mistake.
    pub summary: bool,
}

/// What `bootlink chart` did: the files it wrote and the runs' before/after
/// [`Summary`]. Its JSON is the summary alone (the files are what the
/// request named); its text the files written, the before/after table
/// (with two or more series), and the loaders', storms' and workloads'
/// tables where the runs have them.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(transparent)]
pub struct ChartReport {
    pub summary: Summary,
    #[serde(skip)]
    pub written: Vec<PathBuf>,
    /// The loaders', storms' and workloads' text tables (empty without).
    #[serde(skip)]
    pub tables: String,
}

impl bootlink::report::Report for ChartReport {
    fn render(&self) -> String {
        let mut text: String = self.written.iter().map(|p| format!("wrote {}\n", p.display())).collect();
        if self.summary.series.len() >= 2 {
            text.push('\n');
            text.push_str(&crate::run::render_summary_text(&self.summary));
        }
        text.push_str(&self.tables);
        text
    }
}

/// What `bootlink chart` made: from lab runs, or from system boots.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum Charted {
    Runs(ChartReport),
    Systems(SystemsReport),
}

impl bootlink::report::Report for Charted {
    fn render(&self) -> String {
        match self {
            Charted::Runs(r) => r.render(),
            Charted::Systems(r) => r.render(),
        }
    }
}

/// What `bootlink chart` did with system records: the files written, and
/// per boot its time to multi-user.target and its links' times.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SystemsReport {
    #[serde(skip)]
    pub written: Vec<PathBuf>,
    pub boots: Vec<SystemRow>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SystemRow {
    pub name: String,
    pub multi_user_ms: f64,
    pub loading_ms: f64,
    /// Each link's name and time (ms).
    pub links: Vec<(String, f64)>,
}

impl bootlink::report::Report for SystemsReport {
    fn render(&self) -> String {
        let mut text: String = self.written.iter().map(|p| format!("wrote {}\n", p.display())).collect();
        for b in &self.boots {
            text.push_str(&format!(
                "{}: multi-user.target at {} ms, a module load under way {} ms\n",
                b.name,
                svg::ms(b.multi_user_ms * 1000.0),
                svg::ms(b.loading_ms * 1000.0)
            ));
        }
        text
    }
}

/// `bootlink chart` of system records: the SVG (and the HTML holding it).
fn systems(inputs: &[PathBuf], out: &Outputs) -> Result<SystemsReport> {
    let boots = inputs
        .iter()
        .map(|p| {
            let file = system::record_path(p)
                .ok_or_else(|| Error::file(Kind::Usage, p, "not a system record: chart system records alone"))?;
            system::load(&file)
        })
        .collect::<Result<Vec<_>>>()?;
    if out.perfetto.is_some() {
        return Err(Error::new(Kind::Usage, "chart: system records chart as SVG or HTML, not Perfetto"));
    }
    let drawing = system::svg(&boots);
    let mut written = Vec::new();
    let mut staged = fsutil::Staged::new();
    if let Some(p) = &out.svg {
        staged.write(p, drawing.as_bytes())?;
        written.push(p.clone());
    }
    if let Some(p) = &out.html {
        let body = drawing.split_once("?>\n").map_or(drawing.as_str(), |(_, b)| b);
        let html = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bootlink: the system's boot</title></head><body>\n{body}</body></html>\n"
        );
        staged.write(p, html.as_bytes())?;
        written.push(p.clone());
    }
    staged.commit()?;
    let boots = boots
        .iter()
        .map(|b| SystemRow {
            name: b.name.clone(),
            multi_user_ms: b.record.boot.multi_user_ms,
            loading_ms: b.record.boot.loading.busy_us / 1000.0,
            links: b.record.boot.links.iter().map(|l| (l.name.clone(), l.ms())).collect(),
        })
        .collect();
    Ok(SystemsReport { written, boots })
}

impl Outputs {
    /// The files asked for, with what each holds.
    fn asked(&self) -> Vec<(&Path, Format)> {
        [(&self.html, Format::Html), (&self.svg, Format::Svg), (&self.perfetto, Format::Perfetto)]
            .into_iter()
            .filter_map(|(p, f)| p.as_deref().map(|p| (p, f)))
            .collect()
    }

    /// Before any work: no output is an input (a run's directory is read
    /// as its run.json or system.json), a device or another output
    /// ([`fsutil::check_outputs`]).
    fn check(&self, inputs: &[PathBuf]) -> Result<()> {
        let mut read: Vec<PathBuf> = Vec::new();
        for p in inputs {
            read.push(p.clone());
            if p.is_dir() {
                read.extend(["run.json", "system.json"].map(|f| p.join(f)));
            }
        }
        let read: Vec<&Path> = read.iter().map(PathBuf::as_path).collect();
        let planned: Vec<fsutil::Planned> = self.asked().into_iter().map(|(p, _)| fsutil::Planned::new(p)).collect();
        fsutil::check_outputs(&read, &planned)
    }
}

/// `bootlink chart`: load the inputs and write the files asked for (with
/// [`Outputs::summary`], none need be). System records (every input one)
/// chart apart.
/// The outputs are checked before anything is read, and put in place
/// together once all are written (a full file system leaves none).
pub fn command(inputs: &[PathBuf], out: &Outputs) -> Result<Charted> {
    if inputs.is_empty() {
        return Err(Error::new(Kind::Usage, "chart: give at least one run directory, run.json or kernel log"));
    }
    out.check(inputs)?;
    if inputs.iter().any(|p| system::record_path(p).is_some()) {
        if out.html.is_none() && out.svg.is_none() && !out.summary {
            return Err(Error::new(Kind::Usage, "chart: say what to write: -o FILE.html, --svg FILE or --json"));
        }
        return systems(inputs, out).map(Charted::Systems);
    }
    runs_command(inputs, out).map(Charted::Runs)
}

fn runs_command(inputs: &[PathBuf], out: &Outputs) -> Result<ChartReport> {
    if out.html.is_none() && out.svg.is_none() && out.perfetto.is_none() && !out.summary {
        return Err(Error::new(
            Kind::Usage,
            "chart: say what to write: -o FILE.html, --svg FILE, --perfetto FILE or --json",
        ));
    }
    let runs = inputs.iter().map(|p| load(p)).collect::<Result<Vec<Run>>>()?;
    let mut written = Vec::new();
    let mut staged = fsutil::Staged::new();
    for (p, format) in out.asked() {
        staged.write(p, render(&runs, format).as_bytes())?;
        written.push(p.to_path_buf());
    }
    staged.commit()?;
    let mut tables = String::new();
    for t in [render_loaders_text(&runs), crate::workload::starts_text(&runs)] {
        if !t.is_empty() {
            tables.push('\n');
            tables.push_str(&t);
        }
    }
    Ok(ChartReport { summary: summary(&runs), written, tables })
}

#[cfg(test)]
mod tests {
    use crate::run::results::{OrderStart, OrderStarts, Process, Start, WorkloadResult};
    use crate::workload::ddlink::table::tests::run;

    fn process(pid: u32, parent: u32, name: &str, t: f64, end: Option<f64>) -> Process {
        Process { pid, parent, name: name.into(), start_us: t, exec_us: Some(t + 100.0), end_us: end }
    }

    #[test]
    fn every_boot_charts_its_processes_and_order_starts_their_time_to_ui() {
        // A boot without a program: /init, the body's shell (both still
        // running at the end), two insmods one after the other.
        let mut plain = run();
        let rep = &mut plain.variants[0].repetitions[0];
        rep.workloads.clear();
        rep.processes = vec![
            process(1, 0, "init", 1_000_000.0, None),
            process(60, 1, "sh", 1_100_000.0, None),
            process(61, 60, "insmod", 1_200_000.0, Some(1_300_000.0)),
            process(62, 60, "insmod", 1_300_000.0, Some(1_500_000.0)),
        ];
        let svg = super::render_svg(std::slice::from_ref(&plain));
        assert_eq!(svg.matches(r#"<g class="tl-proc""#).count(), 4, "{svg}");
        assert!(svg.contains("2 still running when the trace stopped"), "{svg}");
        assert!(svg.contains("init [1], parent 0: 1000–still running at 1500 ms"), "{svg}");
        let trace: serde_json::Value = serde_json::from_str(&super::render_perfetto(&[plain])).unwrap();
        let ev = trace["traceEvents"].as_array().unwrap();
        let procs: Vec<&serde_json::Value> =
            ev.iter().filter(|e| e["cat"] == "process" && e["name"].as_str().unwrap().contains('[')).collect();
        assert_eq!(procs.len(), 4);
        // Still running: drawn to the last event, and said so.
        assert_eq!((procs[0]["ts"].as_f64(), procs[0]["dur"].as_f64()), (Some(1_000_000.0), Some(500_000.0)));
        assert_eq!(procs[0]["args"]["running_at_end"], true);
        // Packed like bootchart: init, sh, and both insmods on a third track.
        let tracks: std::collections::BTreeSet<u64> = procs.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
        assert_eq!(tracks.len(), 3);
        assert_eq!(procs[2]["tid"], procs[3]["tid"]);
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.starts_with("processes"))
            .collect();
        assert_eq!(names, ["processes", "processes (2)", "processes (3)"]);

        // Reordering's starts: a time-to-UI mark inside each bar, an instant in Perfetto.
        let mut ord = run();
        let starts = (0..2)
            .map(|k| OrderStart {
                start: Start {
                    mode: "unordered/4k/ra0".into(),
                    index: k,
                    start_us: 2_000_000.0 + k as f64 * 400_000.0,
                    duration_us: 300_000.0,
                    exit: 0,
                    output: "checksum 1".into(),
                },
                ui_us: Some(290_000.0),
                ..Default::default()
            })
            .collect();
        ord.variants[0].repetitions[0].workloads =
            vec![WorkloadResult::Order(OrderStarts { command: "synth: a vs b".into(), starts })];
        let svg = super::render_svg(std::slice::from_ref(&ord));
        assert_eq!(svg.matches(r#"<rect class="tl-ui" data-ui-us="290000""#).count(), 2, "{svg}");
        assert!(svg.contains("time to UI (first output line): 290 ms") && svg.contains("UI 290 ms"), "{svg}");
        let trace: serde_json::Value = serde_json::from_str(&super::render_perfetto(&[ord])).unwrap();
        let ui: Vec<&serde_json::Value> =
            trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "i").collect();
        assert_eq!(ui.len(), 2);
        assert_eq!((ui[1]["cat"].as_str(), ui[1]["ts"].as_f64()), (Some("ui"), Some(2_690_000.0)));
        assert_eq!(ui[1]["args"]["time_to_ui_us"], 290_000.0);
    }

    #[test]
    fn every_chart_shows_the_starts_by_mode() {
        let runs = [run()];
        let html = super::render_html(&runs);
        assert!(html.contains(r#"<section id="userspace">"#), "no user-space section");
        for m in ["normal", "file-read", "skip"] {
            assert!(html.contains(&format!(r#"<tr data-user-mode="{m}">"#)), "{m} row");
        }
        assert!(html.contains("skip mode: 12 prelinked objects, 36 runtime relocations"));
        let svg = super::render_svg(&runs);
        assert!(svg.contains("User space: synth-main under the patched ld.so"));
        assert_eq!(svg.matches(r#"<g class="tl-user" data-mode="skip""#).count(), 3);
        assert_eq!(svg.matches(r#"data-part="relocation""#).count(), 9);
        let trace: serde_json::Value = serde_json::from_str(&super::render_perfetto(&runs)).unwrap();
        let ev = trace["traceEvents"].as_array().unwrap();
        let threads: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.starts_with("ddlink"))
            .collect();
        assert_eq!(threads, ["ddlink normal", "ddlink file-read", "ddlink skip"]);
        let starts: Vec<&serde_json::Value> = ev.iter().filter(|e| e["cat"] == "ddlink").collect();
        assert_eq!(starts.len(), 9);
        assert_eq!(starts[0]["name"], "synth-main (normal #1)");
        assert_eq!(starts[0]["args"]["symbol_lookups"], 40_740);
        // ld.so and its relocation nest inside their start, on its thread.
        for s in &starts {
            let (t0, t1) = (s["ts"].as_f64().unwrap(), s["ts"].as_f64().unwrap() + s["dur"].as_f64().unwrap());
            let inner: Vec<&serde_json::Value> = ev
                .iter()
                .filter(|e| e["cat"] == "ddlink-loader" && e["tid"] == s["tid"])
                .filter(|e| e["ts"].as_f64().unwrap() >= t0 && e["ts"].as_f64().unwrap() < t1)
                .collect();
            assert_eq!(inner.len(), 2, "{s}");
            assert!(inner.iter().all(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap() <= t1));
        }
    }
}
