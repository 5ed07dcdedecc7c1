//! Run results: what a boot measured, as the lab records it and the charts
//! read it, and everything computed from them. A layer below both the lab
//! and the charts: the lab produces a [`Run`], the CLI hands runs to the
//! charts.
//!
//! - [`results`]: the `run.json` format (variants, repetitions, module loads
//!   and their phases, initcalls, and the list of the workloads' records,
//!   each from its folder, `workload/<name>/record.rs`);
//! - [`dmesg`]: kernel logs (printk times, `initcall_debug`) into runs;
//! - [`ftrace`]: per-module load phases from a function_graph trace;
//! - [`model`]: the before/after summary, per-module means, longest links;
//! - [`taint`]: the kernel's taint mask in letters and words.

pub mod dmesg;
pub mod ftrace;
pub mod model;
pub mod results;
pub mod taint;

use std::path::Path;

use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;
use bootlink::table::Table;

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
    if first == Some(&b'{') { parse_run_json(&data, path) } else { dmesg::load_log(&data, path) }
}

/// A `run.json`'s contents. Read in passes over the bytes, none of them
/// building the whole document as a tree (a run of 100,000 modules would
/// take several times its size): its format, its times' range, then the
/// run itself (through a tree only for format 1, which is moved about).
pub fn parse_run_json(data: &[u8], path: &Path) -> Result<Run> {
    let bad = |e: serde_json::Error| {
        Error::file(Kind::Format, path, format!("not a bootlink run.json: {}", json_error(data, &e)))
    };
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(default)]
        format: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_slice(data).map_err(bad)?;
    let format = head.format.and_then(|f| f.as_u64()).unwrap_or(0);
    if format > FORMAT_VERSION as u64 {
        return Err(Error::file(
            Kind::Format,
            path,
            format!("run.json format {format} is newer than this bootlink reads ({FORMAT_VERSION})"),
        ));
    }
    {
        use serde::de::DeserializeSeed;
        let mut at = Vec::new();
        let mut de = serde_json::Deserializer::from_slice(data);
        TimesInRange { at: &mut at, time: false }.deserialize(&mut de).map_err(bad)?;
    }
    let mut run: Run = if format < 2 {
        let mut value: serde_json::Value = serde_json::from_slice(data).map_err(bad)?;
        processes_to_repetitions(&mut value);
        workloads_of_format_1(&mut value);
        serde_json::from_value(value).map_err(bad)?
    } else {
        serde_json::from_slice(data).map_err(bad)?
    };
    run.format = FORMAT_VERSION;
    Ok(run)
}

/// A JSON reader's error on `data`, said as "truncated" when it is where
/// the file ends (serde_json says "EOF while parsing" only when the file
/// ends between values, not inside a number or a word).
pub(crate) fn json_error(data: &[u8], e: &serde_json::Error) -> String {
    let last_line = data.iter().filter(|&&b| b == b'\n').count() + 1;
    let last_column = data.len() - data.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
    let at_end = e.line() == last_line && e.column() + 1 >= last_column;
    if e.is_eof() || at_end { format!("truncated (it ends inside a value): {e}") } else { e.to_string() }
}

/// The largest time (µs) a run.json may give: 10^12 µs, 11.6 days, far
/// past any boot. The charts' scales and ticks step through times; past it
/// a step can be smaller than a time's precision, and a value like 1e300
/// would be drawn from nothing anyway.
pub const MAX_TIME_US: f64 = 1e12;

/// A pass over a JSON document that keeps nothing: every number of a
/// field named `*_us` within ±[`MAX_TIME_US`], else an error naming where
/// (`at`: the fields and indexes walked to here).
struct TimesInRange<'a> {
    at: &'a mut Vec<String>,
    /// The value is a `*_us` field's.
    time: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for TimesInRange<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl TimesInRange<'_> {
    fn number<E: serde::de::Error>(self, t: f64) -> std::result::Result<(), E> {
        if self.time && t.abs() > MAX_TIME_US {
            return Err(E::custom(format!(
                "{} is {t:e} µs, past any boot's times (at most 1e12 µs, 11.6 days)",
                self.at.concat().trim_start_matches('.')
            )));
        }
        Ok(())
    }
}

impl<'de> serde::de::Visitor<'de> for TimesInRange<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<(), E> {
        self.number(v as f64)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<(), E> {
        self.number(v as f64)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<(), E> {
        self.number(v)
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            self.at.push(format!("[{i}]"));
            let more = seq.next_element_seed(TimesInRange { at: self.at, time: false })?;
            self.at.pop();
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            self.at.push(format!(".{key}"));
            map.next_value_seed(TimesInRange { at: self.at, time: key.ends_with("_us") })?;
            self.at.pop();
        }
        Ok(())
    }
}

/// Runs written before every boot recorded its processes kept those of
/// `order:` starts in `userspace.processes`: move them to the repetition's
/// `processes`, where they are now.
fn processes_to_repetitions(run: &mut serde_json::Value) {
    let Some(variants) = run.get_mut("variants").and_then(|v| v.as_array_mut()) else { return };
    for v in variants {
        let Some(reps) = v.get_mut("repetitions").and_then(|r| r.as_array_mut()) else { continue };
        for rep in reps.iter_mut().filter_map(|r| r.as_object_mut()) {
            let old = rep.get_mut("userspace").and_then(|u| u.as_object_mut()).and_then(|u| u.remove("processes"));
            if let Some(old) = old
                && !rep.contains_key("processes")
            {
                rep.insert("processes".into(), old);
            }
        }
    }
}

/// Format 1 kept each workload's results in fields of the repetition:
/// `loader`, `storm`, `userspace` (DDLink's starts untagged or
/// `"kind":"ddlink"`, reordering's `"kind":"order"`) and `run_output`. Move
/// them into `workloads`, tagged, in the order /init ran them.
fn workloads_of_format_1(run: &mut serde_json::Value) {
    let Some(variants) = run.get_mut("variants").and_then(|v| v.as_array_mut()) else { return };
    for v in variants {
        let Some(reps) = v.get_mut("repetitions").and_then(|r| r.as_array_mut()) else { continue };
        for rep in reps.iter_mut().filter_map(|r| r.as_object_mut()) {
            let mut workloads = Vec::new();
            let tagged = |tag: &str, v: serde_json::Value| {
                let mut o = v.as_object().cloned().unwrap_or_default();
                o.insert("workload".into(), tag.into());
                serde_json::Value::Object(o)
            };
            for key in ["loader", "storm"] {
                if let Some(x) = rep.remove(key).filter(|x| !x.is_null()) {
                    workloads.push(tagged(key, x));
                }
            }
            if let Some(mut u) = rep.remove("userspace").filter(|x| x.is_object()) {
                let kind = u.as_object_mut().and_then(|o| o.remove("kind"));
                let tag = match kind.as_ref().and_then(|k| k.as_str()) {
                    Some("order") => "order",
                    _ => "ddlink",
                };
                workloads.push(tagged(tag, u));
            }
            if let Some(out) = rep.remove("run_output").filter(|x| !x.is_null()) {
                workloads.push(serde_json::json!({ "workload": "program", "output": out }));
            }
            if !workloads.is_empty() {
                rep.insert("workloads".into(), workloads.into());
            }
        }
    }
}

/// Write `run.json` into the run directory `out`, atomically.
pub(crate) fn save(run: &Run, out: &Path) -> Result<()> {
    fsutil::write_atomic(&out.join("run.json"), &json(run))
}

/// The bytes of a run's `run.json`.
pub(crate) fn json(run: &Run) -> Vec<u8> {
    serde_json::to_vec_pretty(run).expect("serializable")
}

/// The before/after comparison (the first series is the baseline).
pub fn summary(runs: &[Run]) -> Summary {
    model::summary(runs)
}

/// The before/after comparison as a terminal table: medians over
/// repetitions, with min-max when there are several.
pub fn render_summary_text(s: &Summary) -> String {
    let mut header =
        vec!["".to_string(), format!("{} (old)", s.series.first().map(|x| x.label.as_str()).unwrap_or(""))];
    for x in s.series.iter().skip(1) {
        header.push(x.label.clone());
        header.push("gain".into());
    }
    let cell = |v: Option<Stat>, unit: &str| match v {
        None => "-".to_string(),
        Some(v) if unit == "count" => bootlink::table::thousands(v.median.round().max(0.0) as usize),
        Some(v) if v.n > 1 => {
            format!(
                "{} ms ({}-{})",
                bootlink::table::ms(v.median),
                bootlink::table::ms(v.min),
                bootlink::table::ms(v.max)
            )
        }
        Some(v) => format!("{} ms", bootlink::table::ms(v.median)),
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
    let mut out = t.render();
    out.push_str(&symbols_timing_text(s));
    out
}

/// How each series' symbols phase was timed, one line per way (naming the
/// series when they differ); nothing when no series recorded it.
fn symbols_timing_text(s: &Summary) -> String {
    let mut ways: Vec<(&str, Vec<&str>)> = Vec::new();
    for x in &s.series {
        let Some(at) = x.symbols_timed_at.as_deref() else { continue };
        match ways.iter_mut().find(|w| w.0 == at) {
            Some(w) => w.1.push(&x.label),
            None => ways.push((at, vec![&x.label])),
        }
    }
    let all = ways.len() == 1 && ways[0].1.len() == s.series.len();
    let mut out = String::new();
    for (at, labels) in ways {
        let how = if at == "simplify_symbols" {
            "timed at simplify_symbols, one traced call per load".to_string()
        } else {
            format!(
                "timed per lookup, every {at} traced (simplify_symbols inlined): each lookup carries the tracer's cost"
            )
        };
        let whose = if all { String::new() } else { format!(" ({})", labels.join(", ")) };
        out.push_str(&format!("symbols phase{whose}: {how}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_runs_keep_their_processes_on_the_repetition() {
        // A run.json from before every boot recorded its processes: an
        // order: repetition with them under userspace.
        let old = r#"{"format":1,"source":"lab","kernel_release":"6.1","kernel":"/k","cmdline":"","timing":"deterministic",
            "module_set":"none","variants":[{"name":"o","repetitions":[
              {"index":0,"boot_wall_s":1.0,"initcalls":[],"modules":[],"log":"logs/o-0.log",
               "userspace":{"command":"synth","starts":[],"kind":"order",
                 "processes":[{"pid":75,"parent":52,"name":"unordered","start_us":2100000.0,"end_us":2600000.0}]}},
              {"index":1,"boot_wall_s":1.0,"initcalls":[],"modules":[],"log":"logs/o-1.log"}]}]}"#;
        let run = parse_run_json(old.as_bytes(), Path::new("run.json")).unwrap();
        let reps = &run.variants[0].repetitions;
        let p = &reps[0].processes;
        assert_eq!((p.len(), p[0].pid, p[0].name.as_str(), p[0].end_us), (1, 75, "unordered", Some(2_600_000.0)));
        assert_eq!(reps[0].order().unwrap().command, "synth");
        assert!(reps[1].processes.is_empty());
        // Before the guest CPU was pinned, a run did not record it.
        assert_eq!(run.cpu_model, "");
        // Written again, they are where new runs have them, once.
        let json = serde_json::to_string(&run).unwrap();
        assert!(json.contains(r#""format":2"#) && json.contains(r#""workload":"order""#), "{json}");
        assert_eq!(json.matches(r#""processes""#).count(), 1, "{json}");
        assert_eq!(parse_run_json(json.as_bytes(), Path::new("run.json")).unwrap(), run);
        assert!(parse_run_json(b"{\"format\":1}", Path::new("x.json")).unwrap_err().to_string().contains("x.json"));
    }

    #[test]
    fn format_1_workload_fields_read_as_tagged_results() {
        // Format 1: DDLink's starts untagged (before the tag) or tagged by
        // "kind", a loader's report, a storm, a program's output, each a
        // field of the repetition.
        let old = r#"{"format":1,"source":"lab","kernel_release":"6.1","kernel":"/k","cmdline":"","timing":"deterministic",
            "module_set":"none","variants":[{"name":"d","repetitions":[
              {"index":0,"boot_wall_s":1.0,"initcalls":[],"modules":[],"log":"logs/d-0.log",
               "userspace":{"command":"/ld.so /p","starts":[{"mode":"skip","index":0,"start_us":1.0,"duration_us":2.0,"exit":0,
                 "relocation_us":0.5,"decision":"skip mode"}]},
               "loader":{"kind":"batch","workers":2,"exit":0,"wall_us":10.0},
               "run_output":"hello\nRUN-EXIT 0"},
              {"index":1,"boot_wall_s":1.0,"initcalls":[],"modules":[],"log":"logs/d-1.log",
               "userspace":{"kind":"ddlink","command":"/ld.so /p","starts":[]},
               "storm":{"workers":2,"requests":4,"results":[["0",2],["EEXIST",2]],"kernel_reads":4,"bytes_read":100,
                 "duplicate_read_bytes":50,"vmalloc_before_kb":1,"vmalloc_peak_kb":2,"quiescence_us":3.0}}]}]}"#;
        let run = parse_run_json(old.as_bytes(), Path::new("run.json")).unwrap();
        let reps = &run.variants[0].repetitions;
        let d = reps[0].ddlink().unwrap();
        assert_eq!((d.command.as_str(), d.starts.len(), d.starts[0].mode.as_str()), ("/ld.so /p", 1, "skip"));
        assert_eq!((d.starts[0].relocation_us, d.starts[0].decision.as_str()), (Some(0.5), "skip mode"));
        assert_eq!(reps[0].loader().unwrap().workers, 2);
        assert_eq!(reps[0].program().unwrap().output, "hello\nRUN-EXIT 0");
        let names: Vec<&str> = reps[0].workloads.iter().map(|w| w.name()).collect();
        assert_eq!(names, ["loader", "ddlink", "program"]);
        assert_eq!(reps[1].ddlink().unwrap().starts.len(), 0);
        assert_eq!(reps[1].storm().unwrap().duplicate_read_bytes, 50);
        assert!(reps[1].order().is_none() && reps[1].loader().is_none());
        let json = serde_json::to_string(&run).unwrap();
        assert!(json.contains(r#""workload":"ddlink""#) && !json.contains("run_output"), "{json}");
        assert_eq!(parse_run_json(json.as_bytes(), Path::new("run.json")).unwrap(), run);
    }

    // The summary says how each series' symbols phase was timed: once when
    // all agree, per series when they differ, nothing when none recorded it.
    #[test]
    fn the_summary_says_how_the_symbols_phase_was_timed() {
        let info = |label: &str, at: Option<&str>| model::SeriesInfo {
            label: label.into(),
            run: 0,
            repetitions: 1,
            modules_loaded: 1,
            modules_failed: 0,
            initcalls: 0,
            symbols_timed_at: at.map(String::from),
        };
        let summary = |series| Summary { baseline: "a".into(), series, rows: Vec::new(), modules: Vec::new() };
        let one = symbols_timing_text(&summary(vec![
            info("a", Some("simplify_symbols")),
            info("b", Some("simplify_symbols")),
        ]));
        assert_eq!(one, "symbols phase: timed at simplify_symbols, one traced call per load\n");
        let two =
            symbols_timing_text(&summary(vec![info("a", Some("simplify_symbols")), info("b", Some("resolve_symbol"))]));
        assert_eq!(
            two,
            "symbols phase (a): timed at simplify_symbols, one traced call per load\n\
             symbols phase (b): timed per lookup, every resolve_symbol traced (simplify_symbols inlined): \
             each lookup carries the tracer's cost\n"
        );
        assert_eq!(symbols_timing_text(&summary(vec![info("a", None)])), "");
    }

    #[test]
    fn a_newer_format_is_refused() {
        let e = parse_run_json(br#"{"format":3}"#, Path::new("r.json")).unwrap_err().to_string();
        assert!(e.contains("r.json") && e.contains("format 3 is newer"), "{e}");
    }
}
