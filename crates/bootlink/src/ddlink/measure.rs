//! Measuring a program's startup under each loader mode: Debian's own
//! ld.so, the patched ld.so without a cache, File Read Mode and Relocation
//! Skip Mode. For each: the loader's relocation time and its whole time
//! before the program's code (`LD_DEBUG=statistics`, N runs; glibc 2.36
//! prints those cycle counts 10x too small, so they are scaled back and
//! converted with the TSC rate measured here), the symbol lookups it made
//! at startup and by the program's exit, `perf stat` task-clock and page
//! faults of each of N more runs, each figure as its median with the
//! quartiles and the extremes, and the program's output (which must be
//! identical in every mode). The patched ld.so also times the relocation
//! `dlopen` does (glibc patch 0010, printed at exit, exact cycles): for a
//! program that opens objects after startup, that is the rest of its
//! relocation (Debian's ld.so does not time it).

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

/// A figure over the runs: its median, quartiles and extremes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    /// The first and third quartiles (linear between the nearest runs).
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Of the runs' values (all 0 when there are none).
    pub fn of(values: &[f64]) -> Spread {
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |p: f64| -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            let x = p * (v.len() - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
        };
        Spread { median: at(0.5), q1: at(0.25), q3: at(0.75), min: at(0.0), max: at(1.0) }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    pub mode: String,
    /// Median relocation time in the loader, ms (`relocation.median`).
    pub relocation_ms: f64,
    pub relocation: Spread,
    /// Median total time in the loader before the program's own code, ms.
    pub loader_ms: f64,
    pub loader: Spread,
    /// Symbol lookups by the program's exit ("final number of
    /// relocations": startup, lazy binding, and objects opened later).
    pub lookups: u64,
    /// Symbol lookups of the startup relocation ("number of relocations").
    pub startup_lookups: u64,
    /// Relative relocations the loader applied at startup (no lookup:
    /// the load address added; none for an image at its base in Skip Mode).
    pub relative_relocations: u64,
    /// The relocation `dlopen` did by the program's exit, ms, and the
    /// objects it relocated (None: a loader that does not time it).
    pub dlopen_relocation: Option<Spread>,
    pub dlopen_objects: Option<u64>,
    /// Startup and dlopen relocation together, per run, ms.
    pub all_relocation: Option<Spread>,
    /// perf stat of each run: median task-clock (ms), its spread.
    pub task_clock_ms: f64,
    pub task_clock: Spread,
    /// Median page faults (minor and major), and their spread.
    pub page_faults: f64,
    pub page_fault_spread: Spread,
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
    startup_lookups: u64,
    relative: u64,
    /// dlopen's relocation (cycles, exact) and its objects.
    dlopen: Option<(u64, u64)>,
    decisions: Vec<String>,
    stdout: Vec<u8>,
}

/// The patched loader's exit line "time needed for dlopen relocation: N
/// cycles (M objects)".
fn dlopen_statistics(text: &str) -> Option<(u64, u64)> {
    const KEY: &str = "time needed for dlopen relocation:";
    let cycles = stat_value(text, KEY)?;
    let line = text.lines().find(|l| l.contains(KEY))?;
    let objects = line.split_once(" cycles (")?.1.split_whitespace().next()?.parse().ok()?;
    Some((cycles, objects))
}

fn statistics_run(mode: &Mode, program: &Program) -> Result<StatsRun> {
    let tmp = scratch()?;
    let env: Vec<(&str, OsString)> = mode.env.iter().map(|(k, v)| (k.as_str(), OsString::from(v))).collect();
    let (out, text) = run_debug(&mode.loader, program, &env, "statistics,ddlink", tmp.path())?;
    // Debian's ld.so does not know the ddlink option and says so on stderr.
    let reloc = stat_value(&text, "time needed for relocation:");
    let total = stat_value(&text, "total startup time in dynamic loader:");
    let lookups = stat_value(&text, "final number of relocations:");
    // (the startup line's key is the end of the final line's: the first
    // line that has it, the startup statistics, comes before the final)
    let startup = stat_value(&text, "number of relocations:");
    let relative = stat_value(&text, "number of relative relocations:");
    let (Some(reloc), Some(total), Some(lookups), Some(startup_lookups), Some(relative)) =
        (reloc, total, lookups, startup, relative)
    else {
        return Err(Error::file(
            Kind::Tool,
            &mode.loader,
            format!("printed no relocation statistics for {}", program.path.display()),
        ));
    };
    let decisions = ddlink_lines(&text).map(str::to_string).collect();
    Ok(StatsRun {
        reloc_cycles: reloc,
        loader_cycles: total,
        lookups,
        startup_lookups,
        relative,
        dlopen: dlopen_statistics(&text),
        decisions,
        stdout: out.stdout,
    })
}

/// Runs the command after its arguments N times (`$1`), its output discarded,
/// stopping at the first that fails.
const REPEAT_SCRIPT: &str =
    r#"n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do "$@" >/dev/null || exit $?; i=$((i + 1)); done"#;

/// `perf stat` of each of `runs` runs: (task-clock ms, page faults) per run.
///
/// With prelinked images in place, perf is started by the mode's loader
/// (the patched one): it runs inside the images' namespace and links
/// libraries the program's images may replace (libm), and Debian's ld.so
/// refuses a marked DT_RELR image (glibc patch 0009) rather than relocate
/// it twice. perf only starts the program; its own loading is not counted.
fn perf_stat(mode: &Mode, program: &Program, runs: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let env: Vec<(&str, OsString)> = mode.env.iter().map(|(k, v)| (k.as_str(), OsString::from(v))).collect();
    let tmp = scratch()?;
    let file = tmp.path().join("perf.csv");
    let perf = crate::hosttool::find("perf").ok_or_else(|| {
        crate::hosttool::spawn_error(
            "perf",
            "measuring startup",
            "linux-perf",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let (runs_text, file_text, perf_text) = (runs.to_string(), file.display().to_string(), perf.display().to_string());
    let loader_text = mode.loader.display().to_string();
    let mut prefix = vec!["sh", "-c", REPEAT_SCRIPT, "sh", &runs_text];
    if program.overlay.is_some() {
        prefix.push(&loader_text);
    }
    prefix.extend([&perf_text as &str, "stat", "-x", ",", "--append", "-o", &file_text]);
    prefix.extend(["-e", "task-clock,page-faults", "--"]);
    let mut cmd = command_with(&prefix, &mode.loader, program, &env);
    cmd.stdout(std::process::Stdio::null()).stdin(std::process::Stdio::null());
    let out = cmd.output().map_err(|e| crate::hosttool::spawn_error("sh", "measuring startup", "dash", e))?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let field = |event: &str| -> Vec<f64> {
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f.len() > 3 && f[2].starts_with(event)).then(|| f[0].parse().ok()).flatten()
            })
            .collect()
    };
    let (clock, faults) = (field("task-clock"), field("page-faults"));
    if !out.status.success() || clock.len() != runs || faults.len() != runs {
        return Err(Error::new(
            Kind::Tool,
            format!(
                "perf stat of {} ({}): {} of {runs} runs measured: {}",
                program.path.display(),
                mode.name,
                clock.len().min(faults.len()),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok((clock, faults))
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
        let (mut lookups, mut startup_lookups, mut relative_relocations) = (0, 0, 0);
        let (mut dlopen, mut dlopen_objects, mut all) = (Vec::new(), None, Vec::new());
        let mut decisions: Vec<String> = Vec::new();
        let mut identical = true;
        for _ in 0..runs {
            let r = statistics_run(mode, program)?;
            // HP_TIMING_PRINT drops the last digit: scale back by 10.
            let reloc_ms = r.reloc_cycles as f64 * 10.0 / hz * 1e3;
            reloc.push(reloc_ms);
            total.push(r.loader_cycles as f64 * 10.0 / hz * 1e3);
            lookups = r.lookups;
            startup_lookups = r.startup_lookups;
            relative_relocations = r.relative;
            if let Some((cycles, objects)) = r.dlopen {
                let ms = cycles as f64 / hz * 1e3;
                dlopen.push(ms);
                all.push(reloc_ms + ms);
                dlopen_objects = Some(objects);
            }
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
        let (clock, faults) = perf_stat(mode, program, runs)?;
        let (relocation, loader) = (Spread::of(&reloc), Spread::of(&total));
        let (task_clock, page_fault_spread) = (Spread::of(&clock), Spread::of(&faults));
        results.push(ModeResult {
            mode: mode.name.clone(),
            relocation_ms: relocation.median,
            relocation,
            loader_ms: loader.median,
            loader,
            lookups,
            startup_lookups,
            relative_relocations,
            // Every run printed it, or none did.
            dlopen_relocation: (dlopen.len() == runs).then(|| Spread::of(&dlopen)),
            dlopen_objects,
            all_relocation: (all.len() == runs).then(|| Spread::of(&all)),
            task_clock_ms: task_clock.median,
            task_clock,
            page_faults: page_fault_spread.median,
            page_fault_spread,
            output_identical: identical,
            ddlink: (!decisions.is_empty()).then(|| decisions.join("; ")),
        });
    }
    Ok(ProgramResult { program: program.clone(), runs, modes: results, load_average: (load_before, load_average()) })
}

impl ProgramResult {
    /// The load average before or after, whichever is higher, if above
    /// what a quiet machine of `cores` cores shows (the measurement itself
    /// keeps one core busy).
    pub fn loaded(&self, cores: usize) -> Option<f64> {
        let worst = self.load_average.0.max(self.load_average.1);
        (worst > BUSY_PER_CORE * cores as f64).then_some(worst)
    }
}

/// `median (q1-q3)` with `digits` decimals.
fn with_quartiles(s: &Spread, digits: usize) -> String {
    format!("{:.digits$} ({:.digits$}-{:.digits$})", s.median, s.q1, s.q3)
}

impl crate::report::Report for ProgramResult {
    fn render(&self) -> String {
        let mut t = crate::table::Table::new(&[
            "mode",
            "relocation ms",
            "dlopen relocation ms",
            "loader ms",
            "lookups: startup, by exit",
            "task-clock ms",
            "page faults",
            "output",
        ]);
        for m in &self.modes {
            t.row(vec![
                m.mode.clone(),
                with_quartiles(&m.relocation, 2),
                match (&m.dlopen_relocation, m.dlopen_objects) {
                    (Some(s), Some(n)) => format!("{} ({n} objects)", with_quartiles(s, 2)),
                    _ => "-".into(),
                },
                with_quartiles(&m.loader, 2),
                format!("{}, {}", m.startup_lookups, m.lookups),
                with_quartiles(&m.task_clock, 2),
                with_quartiles(&m.page_fault_spread, 0),
                if m.output_identical { "identical".into() } else { "DIFFERS".into() },
            ]);
        }
        let name = self.program.path.display();
        let mut out = format!(
            "{name} {} ({} runs each; medians, quartiles in parentheses)\n{}",
            self.program.args.join(" "),
            self.runs,
            t.render()
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (before, after) = self.load_average;
        if self.loaded(cores).is_some() {
            out += &format!(
                "warning: load average {before:.2} before, {after:.2} after on {cores} cores: the relocation and loader \
                 times (rdtsc) include time the program was not running; measure on a quiet machine\n"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The median and quartiles of runs in any order; an even count takes
    /// the middle of the two middle runs; no run gives zeros.
    #[test]
    fn spread_of_runs() {
        let s = Spread::of(&[5.0, 1.0, 4.0, 2.0, 3.0]);
        assert_eq!(s, Spread { median: 3.0, q1: 2.0, q3: 4.0, min: 1.0, max: 5.0 });
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.median, s.q1, s.q3), (2.5, 1.75, 3.25));
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    /// The startup line's count and the exit line's are told apart.
    #[test]
    fn startup_and_final_lookups() {
        let text = "  1: number of relocations: 123\n  1: number of relocations from cache: 7\n\
                    \n  1: final number of relocations: 13591\n";
        assert_eq!(stat_value(text, "number of relocations:"), Some(123));
        assert_eq!(stat_value(text, "final number of relocations:"), Some(13591));
        assert_eq!(dlopen_statistics(text), None);
        let exit = "  7: \n  7: runtime linker statistics:\n  7:      time needed for dlopen relocation: 4567 cycles (37 objects)\n";
        assert_eq!(dlopen_statistics(exit), Some((4567, 37)));
    }
}
