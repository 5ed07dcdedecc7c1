//! A program started in the guest under DDLink's patched ld.so
//! ([`crate::run::results::DdlinkStarts`]): per series and loader mode, the
//! medians over every start of every repetition, and the before/after
//! table (normal loading is the baseline) that `bootlink lab` and
//! `bootlink chart` print and the HTML report shows.

use serde::Serialize;

use crate::run::model::{Med, Series, series};
use crate::run::results::{DdlinkStart, Run, USER_MODES};
use bootlink::table::{Table, ms, thousands};

/// One loader mode of one series.
#[derive(Debug, Clone, Serialize)]
pub struct ModeRow {
    pub mode: String,
    pub starts: usize,
    /// Guest time from the marker before the start to the one after the exit.
    pub startup_us: Med,
    /// ld.so's whole startup and its relocation (`LD_DEBUG=statistics`).
    pub loader_us: Option<Med>,
    pub relocation_us: Option<Med>,
    /// Symbol lookups (median).
    pub lookups: Option<f64>,
    /// Starts that did not exit 0.
    pub failed: usize,
    /// Every start printed what the first start of the series printed.
    pub output_identical: bool,
    /// The loader's decision (its line for this mode, without the cache's path).
    pub decision: String,
}

/// The table of one series.
#[derive(Debug, Clone, Serialize)]
pub struct UserTable {
    pub label: String,
    /// `LD.SO PROGRAM ARGS` as started.
    pub command: String,
    pub timing: String,
    pub repetitions: usize,
    pub rows: Vec<ModeRow>,
}

impl UserTable {
    /// The program's file name, for titles.
    pub fn program(&self) -> &str {
        let prog = self.command.split_whitespace().nth(1).unwrap_or(&self.command);
        prog.rsplit('/').next().unwrap_or(prog)
    }

    /// The row of the baseline (normal loading), if measured.
    pub fn baseline(&self) -> Option<&ModeRow> {
        self.rows.iter().find(|r| r.mode == USER_MODES[0])
    }
}

/// The decision line that says what this mode did (else the first line).
fn decision(s: &DdlinkStart) -> String {
    let want = match s.mode.as_str() {
        "skip" => "skip mode",
        "file-read" => "file-read mode",
        _ => "normal loading",
    };
    let lines: Vec<&str> = s.decision.split("; ").collect();
    let line = lines.iter().find(|l| l.starts_with(want)).or(lines.first()).copied().unwrap_or("");
    line.split_once(" from /").map(|(a, _)| a).unwrap_or(line).to_string()
}

/// The tables of every series that started a program.
pub fn tables(runs: &[Run]) -> Vec<UserTable> {
    series(runs).iter().filter_map(table).collect()
}

fn table(s: &Series) -> Option<UserTable> {
    let all: Vec<&DdlinkStart> =
        s.variant.repetitions.iter().filter_map(|r| r.ddlink()).flat_map(|u| &u.starts).collect();
    let u = s.variant.repetitions.iter().find_map(|r| r.ddlink())?;
    let command = u.command.clone();
    let first = all.first().map(|x| x.output.as_str());
    let mut modes: Vec<&str> = USER_MODES.to_vec();
    for x in &all {
        if !modes.contains(&x.mode.as_str()) {
            modes.push(&x.mode);
        }
    }
    let rows = modes
        .iter()
        .filter_map(|m| {
            let st: Vec<&DdlinkStart> = all.iter().copied().filter(|x| x.mode == *m).collect();
            Some(ModeRow {
                mode: m.to_string(),
                starts: st.len(),
                startup_us: Med::of(st.iter().map(|x| x.duration_us))?,
                loader_us: Med::of(st.iter().filter_map(|x| x.loader_us)),
                relocation_us: Med::of(st.iter().filter_map(|x| x.relocation_us)),
                lookups: Med::of(st.iter().filter_map(|x| x.lookups.map(|l| l as f64))).map(|m| m.median),
                failed: st.iter().filter(|x| x.exit != 0).count(),
                output_identical: st.iter().all(|x| Some(x.output.as_str()) == first),
                decision: st.first().map(|x| decision(x)).unwrap_or_default(),
            })
        })
        .collect();
    Some(UserTable {
        label: s.label.clone(),
        command,
        timing: s.run.timing.clone(),
        repetitions: s.variant.repetitions.len(),
        rows,
    })
}

/// `12.3 (12.1–12.9)` in ms, or the median alone for one value.
pub(crate) fn ms_spread(m: &Med) -> String {
    let (lo, hi) = (ms(m.min), ms(m.max));
    if m.n > 1 && lo != hi { format!("{} ({lo}–{hi})", ms(m.median)) } else { ms(m.median) }
}

/// How many times faster than the baseline: `3.41x`.
pub(crate) fn speedup(base: Option<&Med>, this: Option<&Med>) -> String {
    match (base, this) {
        (Some(b), Some(t)) if t.median > 0.0 => format!("{:.2}x", b.median / t.median),
        _ => "-".into(),
    }
}

/// The tables as plain text (empty when no series started a program).
pub(crate) fn render_text(runs: &[Run]) -> String {
    let mut out = String::new();
    for t in tables(runs) {
        if !out.is_empty() {
            out.push('\n');
        }
        let base = t.baseline();
        out.push_str(&format!(
            "DDLink in the guest, {}: {} under the patched ld.so, {} timing (guest time), medians (range) over {} boot(s)\n",
            t.label,
            t.program(),
            t.timing,
            t.repetitions
        ));
        let mut tab = Table::new(&[
            "mode",
            "starts",
            "startup ms",
            "vs normal",
            "ld.so ms",
            "relocation ms",
            "vs normal",
            "lookups",
            "output",
            "loader's decision",
        ]);
        for r in &t.rows {
            tab.row(vec![
                r.mode.clone(),
                if r.failed > 0 { format!("{} ({} failed)", r.starts, r.failed) } else { r.starts.to_string() },
                ms_spread(&r.startup_us),
                speedup(base.map(|b| &b.startup_us), Some(&r.startup_us)),
                r.loader_us.map(|m| ms(m.median)).unwrap_or_else(|| "-".into()),
                r.relocation_us.as_ref().map(ms_spread).unwrap_or_else(|| "-".into()),
                speedup(base.and_then(|b| b.relocation_us.as_ref()), r.relocation_us.as_ref()),
                r.lookups.map(|l| thousands(l.round().max(0.0) as usize)).unwrap_or_else(|| "-".into()),
                if r.output_identical { "identical".into() } else { "DIFFERS".into() },
                r.decision.clone(),
            ]);
        }
        out.push_str(&tab.render());
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::run::results::{DdlinkStarts, Repetition, Start, Variant, WorkloadResult};

    fn start(mode: &str, index: usize, dur: f64, reloc: f64, decision: &str) -> DdlinkStart {
        DdlinkStart {
            start: Start {
                mode: mode.into(),
                index,
                start_us: 1e6 + index as f64 * 1e5,
                duration_us: dur,
                exit: 0,
                output: "checksum 1".into(),
            },
            loader_us: Some(reloc + 1000.0),
            load_objects_us: Some(500.0),
            relocation_us: Some(reloc),
            lookups: Some(if mode == "normal" { 40_740 } else { 48 }),
            decision: decision.into(),
        }
    }

    /// A run with one variant that started a program three times per mode.
    pub(crate) fn run() -> Run {
        let mut starts = Vec::new();
        for k in 0..3 {
            starts.push(start("normal", k, 56_000.0 + k as f64 * 100.0, 42_500.0, "normal loading: /x: no cache"));
            starts.push(start("file-read", k, 24_000.0, 11_200.0, "file-read mode: 15 objects, 5 bindings from /c"));
            starts.push(start(
                "skip",
                k,
                12_000.0,
                1_000.0,
                "file-read mode: 15 objects from /s; skip mode: 12 prelinked objects, 36 runtime relocations",
            ));
        }
        let rep = Repetition {
            workloads: vec![WorkloadResult::Ddlink(DdlinkStarts {
                command: "/p/ld.so /c/synth-main".into(),
                tsc_mhz: Some(1000.0),
                starts,
            })],
            ..Default::default()
        };
        Run {
            format: crate::run::FORMAT_VERSION,
            source: "lab".into(),
            kernel_release: "6.1.192".into(),
            kernel: "/k/vmlinux".into(),
            cmdline: String::new(),
            qemu_version: String::new(),
            cpu_model: String::new(),
            machine: String::new(),
            arch: String::new(),
            qemu_command: Vec::new(),
            timing: "deterministic".into(),
            module_set: "none".into(),
            variants: vec![Variant { repetitions: vec![rep], ..Variant::named("ddl") }],
            partial: false,
            tracing_overhead_pct: None,
            device_type: String::new(),
        }
    }

    #[test]
    fn medians_ratios_and_decisions_per_mode() {
        let runs = [run()];
        let t = &tables(&runs)[0];
        assert_eq!((t.label.as_str(), t.program()), ("ddl", "synth-main"));
        let modes: Vec<&str> = t.rows.iter().map(|r| r.mode.as_str()).collect();
        assert_eq!(modes, USER_MODES);
        let n = &t.rows[0];
        assert_eq!(
            (n.starts, n.startup_us.median, n.startup_us.min, n.startup_us.max),
            (3, 56_100.0, 56_000.0, 56_200.0)
        );
        assert_eq!(t.rows[2].decision, "skip mode: 12 prelinked objects, 36 runtime relocations");
        assert_eq!(t.rows[1].decision, "file-read mode: 15 objects, 5 bindings");
        assert!(t.rows.iter().all(|r| r.output_identical && r.failed == 0));
        let text = render_text(&runs);
        assert!(text.contains("ddl: synth-main under the patched ld.so, deterministic timing"), "{text}");
        let skip = text.lines().find(|l| l.starts_with("skip")).unwrap();
        // 56.1 / 12.0 startup, 42.5 / 1.0 relocation.
        assert!(skip.contains("4.67x") && skip.contains("42.50x") && skip.contains("identical"), "{skip}");
        // Old runs (no starts) print nothing.
        let mut old = run();
        old.variants[0].repetitions[0].workloads.clear();
        assert_eq!(render_text(&[old]), "");
    }
}
