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
//! The runs, their parsing and what is computed from them (the summary,
//! the longest links) live in [`crate::run`]; here are the renderers only:
//! `svg`, `html`, `perfetto`.

mod html;
mod loaders;
mod perfetto;
pub(crate) mod svg;

/// Text escaped for HTML and SVG (`recommend`'s chart too).
pub(crate) use svg::esc;
mod userspace;

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
    loaders::render_text(&model::series(runs))
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

/// Where `bootlink chart` writes.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    pub html: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub perfetto: Option<PathBuf>,
    /// Print the before/after summary as JSON instead of a table.
    pub json: bool,
}

/// `bootlink chart`: load the inputs, write the files asked for, and
/// return what to print (the before/after table or its JSON, and the files
/// written).
pub fn command(inputs: &[PathBuf], out: &Outputs) -> Result<String> {
    if inputs.is_empty() {
        return Err(Error::new(Kind::Usage, "chart: give at least one run directory, run.json or kernel log"));
    }
    if out.html.is_none() && out.svg.is_none() && out.perfetto.is_none() && !out.json {
        return Err(Error::new(
            Kind::Usage,
            "chart: say what to write: -o FILE.html, --svg FILE, --perfetto FILE or --json",
        ));
    }
    let runs = inputs.iter().map(|p| load(p)).collect::<Result<Vec<Run>>>()?;
    let mut text = String::new();
    for (path, format) in [(&out.html, Format::Html), (&out.svg, Format::Svg), (&out.perfetto, Format::Perfetto)] {
        if let Some(p) = path {
            write(p, &runs, format)?;
            if !out.json {
                text.push_str(&format!("wrote {}\n", p.display()));
            }
        }
    }
    let sum = summary(&runs);
    if out.json {
        text.push_str(&summary_json(&sum));
    } else {
        if sum.series.len() >= 2 {
            text.push('\n');
            text.push_str(&crate::run::render_summary_text(&sum));
        }
        let tables = render_loaders_text(&runs);
        if !tables.is_empty() {
            text.push('\n');
            text.push_str(&tables);
        }
        let mut user = crate::run::userspace::render_text(&runs);
        user.push_str(&crate::workload::order::table::render_text(&runs));
        if !user.is_empty() {
            text.push('\n');
            text.push_str(&user);
        }
    }
    Ok(text)
}
