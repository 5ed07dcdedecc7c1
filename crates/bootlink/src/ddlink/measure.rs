//! Measuring a program's startup under each loader mode: Debian's own
//! ld.so, the patched ld.so without a cache, and File Read Mode. For each:
//! the loader's relocation time (`LD_DEBUG=statistics`, median of N runs;
//! glibc 2.36 prints those cycle counts 10x too small, so they are scaled
//! back and converted with the TSC rate measured here), the symbol lookups
//! it made, `perf stat` task-clock and page faults over N runs, and the
//! program's output (which must be identical in every mode).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::run::{Program, command_with, ddlink_lines, run_debug, scratch};
use crate::error::{Error, Kind, Result};

/// One way of starting the program.
#[derive(Debug, Clone, Serialize)]
pub struct Mode {
    pub name: String,
    pub loader: PathBuf,
    /// Extra environment (the cache, or none).
    pub env: Vec<(String, String)>,
    /// The DDLink decision the loader must print (`file-read mode`, `skip
    /// mode`), else the figures would be normal loading's under this mode's
    /// name.
    pub expect: Option<String>,
    /// Run with these prelinked images in place (`Program::overlay`).
    pub overlay: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    pub mode: String,
    /// Median relocation time in the loader, ms.
    pub relocation_ms: f64,
    /// Median total time in the loader before the program's own code, ms.
    pub loader_ms: f64,
    /// Symbol lookups ("number of relocations": the lookups the loader made).
    pub lookups: u64,
    /// perf stat: mean task-clock (ms) and its relative spread (%).
    pub task_clock_ms: f64,
    pub task_clock_spread: f64,
    pub page_faults: f64,
    /// stdout identical to the first mode's.
    pub output_identical: bool,
    /// The loader's DDLink decisions (LD_DEBUG=ddlink lines), if it printed any.
    pub ddlink: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgramResult {
    pub program: Program,
    pub runs: usize,
    pub modes: Vec<ModeResult>,
    /// The 1-minute load average before and after the measurement: the
    /// loader's relocation times come from rdtsc and count the time the
    /// process was not running, so they mean little on a busy machine.
    pub load_average: (f64, f64),
}

/// The 1-minute load average (0 when /proc/loadavg cannot be read).
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// Above this 1-minute load average per core, `render` warns.
const BUSY_PER_CORE: f64 = 0.75;

/// TSC ticks per second, measured against the monotonic clock.
pub(crate) fn tsc_hz() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        let t0 = std::time::Instant::now();
        // SAFETY: rdtsc has no preconditions on x86_64.
        let c0 = unsafe { std::arch::x86_64::_rdtsc() };
        std::thread::sleep(std::time::Duration::from_millis(200));
        let c1 = unsafe { std::arch::x86_64::_rdtsc() };
        (c1 - c0) as f64 / t0.elapsed().as_secs_f64()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        1e9
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The number after `key` in the loader's `LD_DEBUG=statistics` text.
pub fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (_, rest) = l.split_once(key)?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// What one run under LD_DEBUG=statistics,ddlink reported.
struct StatsRun {
    reloc_cycles: u64,
    loader_cycles: u64,
    lookups: u64,
    decisions: Vec<String>,
    stdout: Vec<u8>,
}

fn statistics_run(mode: &Mode, program: &Program) -> Result<StatsRun> {
    let tmp = scratch()?;
    let env: Vec<(&str, OsString)> = mode.env.iter().map(|(k, v)| (k.as_str(), OsString::from(v))).collect();
    let (out, text) = run_debug(&mode.loader, program, &env, "statistics,ddlink", tmp.path())?;
    // Debian's ld.so does not know the ddlink option and says so on stderr.
    let reloc = stat_value(&text, "time needed for relocation:");
    let total = stat_value(&text, "total startup time in dynamic loader:");
    let lookups = stat_value(&text, "final number of relocations:");
    let (Some(reloc), Some(total), Some(lookups)) = (reloc, total, lookups) else {
        return Err(Error::file(
            Kind::Tool,
            &mode.loader,
            format!("printed no relocation statistics for {}", program.path.display()),
        ));
    };
    let decisions = ddlink_lines(&text).map(str::to_string).collect();
    Ok(StatsRun { reloc_cycles: reloc, loader_cycles: total, lookups, decisions, stdout: out.stdout })
}

/// perf stat -r N: (task-clock ms mean, spread %, page faults mean).
fn perf_stat(mode: &Mode, program: &Program, runs: usize) -> Result<(f64, f64, f64)> {
    let env: Vec<(&str, OsString)> = mode.env.iter().map(|(k, v)| (k.as_str(), OsString::from(v))).collect();
    let runs = runs.to_string();
    let prefix = ["perf", "stat", "-x", ",", "-r", &runs, "-e", "task-clock,page-faults", "--"];
    let mut cmd = command_with(&prefix, &mode.loader, program, &env);
    cmd.stdout(std::process::Stdio::null()).stdin(std::process::Stdio::null());
    let out = cmd.output().map_err(|e| crate::hosttool::spawn_error("perf", "measuring startup", "linux-perf", e))?;
    let text = String::from_utf8_lossy(&out.stderr);
    let field = |event: &str| -> Option<(f64, f64)> {
        text.lines().find_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() > 3 && f[2].starts_with(event) {
                let v = f[0].parse().ok()?;
                let spread = f[3].trim_end_matches('%').parse().unwrap_or(0.0);
                Some((v, spread))
            } else {
                None
            }
        })
    };
    let (Some((clock, spread)), Some((faults, _))) = (field("task-clock"), field("page-faults")) else {
        return Err(Error::new(Kind::Tool, format!("perf stat printed no task-clock/page-faults: {}", text.trim())));
    };
    Ok((clock, spread, faults))
}

/// Debian's ld.so, the patched one with no cache, the patched one with `cache`.
pub(crate) fn standard_modes(stock: &Path, loader: &Path, cache: &Path) -> Vec<Mode> {
    let env = |c: &Path| vec![("LD_DDLINK".to_string(), c.display().to_string())];
    vec![
        Mode { name: "debian ld.so".into(), loader: stock.to_path_buf(), env: vec![], expect: None, overlay: None },
        Mode {
            name: "patched, no cache".into(),
            loader: loader.to_path_buf(),
            env: env(Path::new("/nonexistent")),
            expect: None,
            overlay: None,
        },
        Mode {
            name: "file-read".into(),
            loader: loader.to_path_buf(),
            env: env(cache),
            expect: Some("file-read mode".into()),
            overlay: None,
        },
    ]
}

/// Relocation Skip Mode: the patched ld.so with `cache` and the prelinked
/// images under `images` in place.
pub fn skip_mode(loader: &Path, cache: &Path, images: &Path) -> Mode {
    Mode {
        name: "skip".into(),
        loader: loader.to_path_buf(),
        env: vec![("LD_DDLINK".to_string(), cache.display().to_string())],
        expect: Some("skip mode".into()),
        overlay: Some(images.to_path_buf()),
    }
}

/// Measure `program` in every mode, `runs` times each.
pub fn measure(program: &Program, modes: &[Mode], runs: usize) -> Result<ProgramResult> {
    let load_before = load_average();
    let hz = tsc_hz();
    let mut results = Vec::new();
    let mut first_out: Option<Vec<u8>> = None;
    for mode in modes {
        let program = &Program { overlay: mode.overlay.clone().or_else(|| program.overlay.clone()), ..program.clone() };
        let (mut reloc, mut total) = (Vec::new(), Vec::new());
        let mut lookups = 0;
        let mut decisions: Vec<String> = Vec::new();
        let mut identical = true;
        for _ in 0..runs {
            let r = statistics_run(mode, program)?;
            // HP_TIMING_PRINT drops the last digit: scale back by 10.
            reloc.push(r.reloc_cycles as f64 * 10.0 / hz * 1e3);
            total.push(r.loader_cycles as f64 * 10.0 / hz * 1e3);
            lookups = r.lookups;
            decisions = r.decisions;
            match &first_out {
                None => first_out = Some(r.stdout),
                Some(f) => identical &= *f == r.stdout,
            }
        }
        if let Some(want) = &mode.expect
            && !decisions.iter().any(|d| d.starts_with(want.as_str()))
        {
            return Err(Error::new(
                Kind::Stale,
                format!(
                    "{}: the loader did not use the cache ({}): profile and write it again",
                    program.path.display(),
                    decisions.last().map_or("no DDLink decision printed", String::as_str)
                ),
            ));
        }
        let (clock, spread, faults) = perf_stat(mode, program, runs)?;
        results.push(ModeResult {
            mode: mode.name.clone(),
            relocation_ms: median(&mut reloc),
            loader_ms: median(&mut total),
            lookups,
            task_clock_ms: clock,
            task_clock_spread: spread,
            page_faults: faults,
            output_identical: identical,
            ddlink: (!decisions.is_empty()).then(|| decisions.join("; ")),
        });
    }
    Ok(ProgramResult { program: program.clone(), runs, modes: results, load_average: (load_before, load_average()) })
}

impl ProgramResult {}

impl crate::report::Report for ProgramResult {
    fn render(&self) -> String {
        let mut t = crate::table::Table::new(&[
            "mode",
            "relocation ms",
            "loader ms",
            "lookups",
            "task-clock ms",
            "page faults",
            "output",
        ]);
        for m in &self.modes {
            t.row(vec![
                m.mode.clone(),
                format!("{:.2}", m.relocation_ms),
                format!("{:.2}", m.loader_ms),
                m.lookups.to_string(),
                format!("{:.2} ±{:.1}%", m.task_clock_ms, m.task_clock_spread),
                format!("{:.0}", m.page_faults),
                if m.output_identical { "identical".into() } else { "DIFFERS".into() },
            ]);
        }
        let name = self.program.path.display();
        let mut out = format!("{name} {} ({} runs each)\n{}", self.program.args.join(" "), self.runs, t.render());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let (before, after) = self.load_average;
        if before.max(after) > BUSY_PER_CORE * cores {
            out += &format!(
                "warning: load average {before:.2} before, {after:.2} after on {cores} cores: the relocation and loader \
                 times (rdtsc) include time the program was not running; measure on a quiet machine\n"
            );
        }
        out
    }
}
