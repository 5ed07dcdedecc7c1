//! Run results: what a boot measured, as the lab records it and the charts
//! read it, and everything computed from them. A layer below both the lab
//! and the charts: the lab produces a [`Run`], the CLI hands runs to the
//! charts.
//!
//! - [`results`]: the `run.json` format (variants, repetitions, module loads
//!   and their phases, initcalls);
//! - [`dmesg`]: kernel logs (printk times, `initcall_debug`) into runs;
//! - [`ftrace`]: per-module load phases from a function_graph trace;
//! - [`model`]: the before/after summary, per-module means, longest links;
//! - [`userspace`]: DDLink's program started in the guest, per loader mode;
//! - [`taint`]: the kernel's taint mask in letters and words.

pub mod dmesg;
pub mod ftrace;
pub mod model;
pub mod order;
pub mod results;
pub mod taint;
pub mod userspace;

use std::path::Path;

use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::table::Table;

pub use model::{Stat, Summary};
pub use results::{FORMAT_VERSION, Run};

/// A run from `path`: a run directory (its `run.json`), a `run.json` file,
/// or a plain kernel log (dmesg or console capture).
pub fn load(path: &Path) -> Result<Run> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        let file = path.join("run.json");
        if !file.is_file() {
            return Err(Error::file(Kind::Format, path, "a directory without run.json (expected a lab run directory)"));
        }
        return load(&file);
    }
    let data = fsutil::map_file(path)?;
    let first = data.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') { parse_run_json(&data, path) } else { Ok(dmesg::run_from_log(&data, path)) }
}

/// A `run.json`'s contents.
pub fn parse_run_json(data: &[u8], path: &Path) -> Result<Run> {
    let run: Run = serde_json::from_slice(data)
        .map_err(|e| Error::file(Kind::Format, path, format!("not a bootlink run.json: {e}")))?;
    if run.format > FORMAT_VERSION {
        return Err(Error::file(
            Kind::Format,
            path,
            format!("run.json format {} is newer than this bootlink reads ({FORMAT_VERSION})", run.format),
        ));
    }
    Ok(run)
}

/// Write `run.json` into the run directory `out`, atomically.
pub fn save(run: &Run, out: &Path) -> Result<()> {
    let json = serde_json::to_vec_pretty(run).expect("serializable");
    fsutil::write_atomic(&out.join("run.json"), &json)
}

/// The before/after comparison (the first series is the baseline).
pub fn summary(runs: &[Run]) -> Summary {
    model::summary(runs)
}

/// The before/after comparison as a terminal table.
pub fn render_summary_text(s: &Summary) -> String {
    let mut header =
        vec!["".to_string(), format!("{} (old)", s.series.first().map(|x| x.label.as_str()).unwrap_or(""))];
    for x in s.series.iter().skip(1) {
        header.push(x.label.clone());
        header.push("gain".into());
    }
    let cell = |v: Option<Stat>, unit: &str| match v {
        None => "-".to_string(),
        Some(v) if unit == "count" => crate::table::thousands(v.mean.round().max(0.0) as usize),
        Some(v) if v.n > 1 => {
            format!("{} ms ({}-{})", crate::table::ms(v.mean), crate::table::ms(v.min), crate::table::ms(v.max))
        }
        Some(v) => format!("{} ms", crate::table::ms(v.mean)),
    };
    let mut t = Table::new(&header);
    for r in &s.rows {
        let mut row = vec![r.name.clone(), cell(r.values[0], r.unit)];
        for i in 1..s.series.len() {
            row.push(cell(r.values[i], r.unit));
            row.push(r.gain_pct[i].map(|g| format!("{g:+.2} %")).unwrap_or_else(|| "-".into()));
        }
        t.row(row);
    }
    t.render()
}
