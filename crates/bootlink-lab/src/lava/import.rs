//! `bootlink lava import`: finished LAVA jobs (their job log, or the plain
//! console log) into the lab's run.json. The console is what the lab's
//! /init printed on the board or the LAVA qemu device; it goes through the
//! lab's own parser ([`crate::lab::scenario::parse_boot`]), so a board's
//! boot is read exactly as a lab boot is, and charts the same way.
//!
//! Each log is one repetition of the variant its markers name (the tag
//! `lava-vI` of the jobs' manifest). A log that is not LAVA's nor a
//! console of these jobs, a truncated one, or the log of a job LAVA failed
//! is refused in one line naming it; nothing of it is written, and the
//! other logs are still imported.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::lab::initramfs;
use crate::lava::job::{self, JobVariant, Manifest};
use crate::lava::log::{self, Level};
use crate::run::results::{Repetition, Run};
use crate::workload;
use crate::workload::modules::Loader;
use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;

#[derive(Debug, Clone)]
pub struct Options {
    /// The jobs directory (`bootlink lab --lava DIR`) or its manifest.
    pub jobs: PathBuf,
    /// LAVA job logs (`lava-run`'s output, `lavacli jobs logs ID --raw`)
    /// or plain console logs.
    pub logs: Vec<PathBuf>,
    /// The run directory to write (run.json, logs/).
    pub out: PathBuf,
}

/// One imported log.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    pub log: PathBuf,
    pub variant: String,
    pub repetition: usize,
    pub job: String,
    pub timing: String,
    /// What the lab's checks found wrong with the boot (recorded in run.json).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where run.json was written; None when no log could be imported.
    pub run_dir: Option<PathBuf>,
    pub device_type: String,
    pub imported: Vec<Imported>,
    /// One line per refused log, naming it.
    pub problems: Vec<String>,
}

/// What `bootlink lava import` prints.
impl bootlink::report::Report for Report {
    fn render(&self) -> String {
        let r = self;
        let mut s = String::new();
        for i in &r.imported {
            s.push_str(&format!(
                "{}: variant {} repetition {} (job {}, {}){}\n",
                i.log.display(),
                i.variant,
                i.repetition + 1,
                i.job,
                i.timing,
                i.failure.as_ref().map(|f| format!(": {f}")).unwrap_or_default()
            ));
        }
        match &r.run_dir {
            Some(d) => s.push_str(&format!(
                "{} of {} log(s) imported (device type {}); run: {}\n",
                r.imported.len(),
                r.imported.len() + r.problems.len(),
                r.device_type,
                d.display()
            )),
            None => s.push_str(&format!("no log imported ({} refused); nothing written\n", r.problems.len())),
        }
        s
    }
}

/// What a log says, read.
#[derive(Debug, Clone, Default)]
struct JobLog {
    /// The device's console.
    console: String,
    /// LAVA's job log, whose job passed: LAVA matched the status line as
    /// its prompt (which it may log as the prompt, not as a console line).
    lava_passed: bool,
    /// The SHA-256 LAVA computed of the initramfs it downloaded (the
    /// qemu type's `initrd`, a board's `ramdisk`).
    initramfs_sha256: Option<String>,
    /// From LAVA's log: the QEMU command its qemu boot ran, QEMU's version,
    /// host seconds from the boot action's start to the console's last line.
    qemu_command: Option<String>,
    qemu_version: String,
    wall_s: f64,
}

/// Seconds since 0000-03-01 of LAVA's `dt` (`YYYY-MM-DDTHH:MM:SS.ffffff`, UTC).
fn seconds(dt: &str) -> Option<f64> {
    let (date, time) = dt.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (h, mi, s) = (t.next()?.parse::<f64>().ok()?, t.next()?.parse::<f64>().ok()?, t.next()?.parse::<f64>().ok()?);
    // days from civil (Howard Hinnant's algorithm)
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe;
    Some(days as f64 * 86_400.0 + h * 3600.0 + mi * 60.0 + s)
}

/// A LAVA job log: the console (every `target` record), the job's result,
/// the QEMU command. A failed job, a log without the job's result
/// (truncated, or a job still running) and a line that is no record are
/// errors naming the file.
fn read_lava_log(path: &Path, text: &str) -> Result<JobLog> {
    let mut out = JobLog::default();
    let mut console = Vec::new();
    let mut result: Option<(String, String)> = None;
    let (mut start, mut end) = (None, None);
    for (n, line) in text.lines().enumerate() {
        let r = match log::record(line) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                let last = text.lines().skip(n + 1).all(|l| l.trim().is_empty());
                let why = if last { format!("truncated: its last line is cut ({e})") } else { e };
                return Err(Error::file(Kind::Format, path, format!("line {}: {why}", n + 1)));
            }
        };
        match r.lvl {
            // the device's output; what it printed after LAVA matched the
            // job's prompt (the status line) is read as "feedback" when the
            // connection is closed
            Level::Target | Level::Feedback => {
                if let Some(m) = r.msg.text() {
                    console.push(m.to_string());
                    end = seconds(&r.dt);
                }
            }
            Level::Info => {
                if let Some(cmd) = r.msg.text().and_then(|m| m.strip_prefix("Boot command: ")) {
                    out.qemu_command = Some(cmd.to_string());
                    start = seconds(&r.dt);
                }
            }
            Level::Results => {
                let Some(c) = r.msg.case() else { continue };
                if c.definition == "lava" && c.case == "job" {
                    let why = format!(
                        "{}{}",
                        c.error_type,
                        match c.error_msg.as_str() {
                            "" => String::new(),
                            m => format!(": {}", m.lines().next().unwrap_or("")),
                        }
                    );
                    result = Some((c.result.clone(), why));
                }
                if c.case == "file-download"
                    && matches!(c.extra("label"), Some("initrd" | "ramdisk"))
                    && let Some(sum) = c.extra("sha256sum")
                {
                    out.initramfs_sha256 = Some(sum.to_string());
                }
                if c.case == "execute-qemu"
                    && let Some(v) = c.extra("qemu_version")
                {
                    out.qemu_version = v.to_string();
                }
            }
            _ => {}
        }
    }
    match result {
        None => {
            return Err(Error::file(
                Kind::Format,
                path,
                "truncated: the LAVA log ends without the job's result (cut short, or the job still running)",
            ));
        }
        Some((r, why)) if r != "pass" => {
            return Err(Error::file(Kind::Boot, path, format!("the LAVA job failed ({r}): {why}")));
        }
        Some(_) => {}
    }
    out.wall_s = match (start, end) {
        (Some(s), Some(e)) if e >= s => e - s,
        _ => 0.0,
    };
    out.console = console.join("\n");
    out.console.push('\n');
    out.lava_passed = true;
    Ok(out)
}

/// A log's text: LAVA's job log or a plain console.
fn read_log(path: &Path) -> Result<JobLog> {
    let text = fsutil::read_input_text(path)?;
    if text.trim().is_empty() {
        return Err(Error::file(Kind::Format, path, "the file is empty: neither a LAVA job log nor a console"));
    }
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if first.starts_with('{') || first.starts_with("- {") {
        read_lava_log(path, &text)
    } else {
        Ok(JobLog { console: text, ..Default::default() })
    }
}

/// The timing a log's boot ran with: from the qemu device's command, or
/// for a board's log (no QEMU) the hardware's real time; a plain console
/// says nothing, and the jobs' own timing is taken.
fn timing_of(l: &JobLog, manifest: &Manifest) -> String {
    match &l.qemu_command {
        Some(c) if c.contains("-icount") => "deterministic".into(),
        Some(c) if c.contains("-enable-kvm") => "realtime, kvm".into(),
        Some(_) => "realtime".into(),
        None if manifest.boot_method == job::BootMethod::Qemu => manifest.timing.clone(),
        None => "realtime (hardware)".into(),
    }
}

/// The tag of a begin marker at the end of `line` (`... === BOOTLINK BEGIN <tag> ===`).
fn begin_tag(line: &str) -> Option<&str> {
    const BEGIN: &str = "=== BOOTLINK BEGIN ";
    let rest = line.trim_end().strip_suffix(" ===")?;
    let at = rest.rfind(BEGIN)?;
    Some(&rest[at + BEGIN.len()..])
}

/// The variant whose markers frame the console, and the framed text. One
/// pass over the console: its begin markers, looked up by tag. A console
/// whose boot repeats (the board rebooted: /init began twice, or the
/// kernel log it printed holds two kernels' boots) is refused: the
/// initcalls of both boots would be read as one boot's.
fn variant_of<'m>(
    path: &Path,
    l: &JobLog,
    m: &'m Manifest,
    by_tag: &std::collections::HashMap<&str, usize>,
) -> Result<(usize, &'m JobVariant, String)> {
    let console = &l.console;
    // (line number, variant index) of each begin marker of these jobs.
    let begins: Vec<(usize, usize)> =
        console.lines().enumerate().filter_map(|(n, line)| Some((n + 1, *by_tag.get(begin_tag(line)?)?))).collect();
    let Some(&(first_line, i)) = begins.first() else {
        let tags: Vec<&str> = m.variants.iter().map(|v| v.tag.as_str()).collect();
        return Err(Error::file(
            Kind::Format,
            path,
            format!(
                "neither a LAVA job log nor a console of these jobs: no bootlink begin marker with tag {}",
                tags.join(", ")
            ),
        ));
    };
    let v = &m.variants[i];
    if let Some(&(again, _)) = begins.get(1) {
        return Err(Error::file(
            Kind::Format,
            path,
            format!(
                "the boot repeats: the lab's /init began {} times (console lines {first_line} and {again}; the board rebooted?): a log is one boot, not imported",
                begins.len()
            ),
        ));
    }
    let Some(framed) = initramfs::framed(console, &v.tag) else {
        return Err(Error::file(
            Kind::Format,
            path,
            format!("truncated: variant {}'s console ends before its end marker", v.name),
        ));
    };
    if !l.lava_passed && initramfs::body_status(console, &v.tag).is_none() {
        return Err(Error::file(
            Kind::Format,
            path,
            format!("truncated: variant {}'s console ends before its status line", v.name),
        ));
    }
    let kernels = crate::lab::scenario::kernel_boots(&framed);
    if kernels > 1 {
        return Err(Error::file(
            Kind::Format,
            path,
            format!(
                "the boot repeats: the kernel log /init printed holds {kernels} kernel boots (`Linux version` lines; the board rebooted?): a log is one boot, not imported"
            ),
        ));
    }
    if let Some(sum) = &l.initramfs_sha256
        && !v.initramfs_sha256.is_empty()
        && *sum != v.initramfs_sha256
    {
        return Err(Error::file(
            Kind::Stale,
            path,
            format!("a job of other jobs: the initramfs LAVA booted is not variant {}'s in these jobs", v.name),
        ));
    }
    Ok((i, v, framed))
}

/// The job's id: the log's file name without its extension (`lavacli jobs
/// logs ID` saved as ID.yaml).
fn job_id(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Import the logs; Err only when the jobs' manifest cannot be read or the
/// run cannot be written.
pub fn import(opts: &Options) -> Result<Report> {
    let manifest = job::read_manifest(&opts.jobs)?;
    let mut problems = Vec::new();
    // (variant index, job id, log path, repetition, timing, the log)
    let mut good: Vec<(usize, String, PathBuf, Repetition, String, JobLog)> = Vec::new();
    // One log named twice by any spelling (./, a link, a hard link); what
    // is not a regular file is refused as such below, whatever it names.
    let mut seen = std::collections::HashSet::new();
    // Each variant by its marker tag, made once for every log (made per
    // log it was the variants times the logs).
    let by_tag: std::collections::HashMap<&str, usize> =
        manifest.variants.iter().enumerate().map(|(i, v)| (v.tag.as_str(), i)).collect();
    for path in &opts.logs {
        let id = fsutil::FileId::of(path).map(Ok).unwrap_or_else(|| Err(path.clone()));
        if std::fs::metadata(path).is_ok_and(|m| m.is_file()) && !seen.insert(id) {
            // one input, as every command takes it (not a problem)
            continue;
        }
        let read = read_log(path).and_then(|l| {
            let (vi, v, framed) = variant_of(path, &l, &manifest, &by_tag)?;
            Ok((vi, v, framed, l))
        });
        let (vi, v, framed, l) = match read {
            Ok(x) => x,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        let ws = workload::build(Loader::Insmod, &[]);
        let facts = crate::lab::scenario::HostFacts { sizes: v.sizes.clone(), lookups: v.lookups.clone() };
        let mut r = crate::lab::scenario::parse_boot(&framed, v.traced, &facts, &ws);
        let problems_of_workloads: Vec<String> = ws.iter().flat_map(|w| w.problems(&mut r)).collect();
        r.boot_wall_s = l.wall_s;
        let timing = timing_of(&l, &manifest);
        if timing != "deterministic" {
            // the cycle counter is the host's or the board's, not QEMU's
            // virtual clock from reset (as in the lab's realtime boots)
            r.boot_clock = None;
        }
        let faults = crate::lab::qemu::find_faults(&l.console);
        let not_loaded: Vec<&str> = r.modules.iter().filter(|m| m.status != 0).map(|m| m.name.as_str()).collect();
        if !faults.is_empty() || r.modules.len() != v.sizes.len() {
            r.partial = true;
            r.failure = Some(match faults.first() {
                Some(f) => format!("kernel fault: {}", f.trim()),
                None => format!("{} of {} modules measured", r.modules.len(), v.sizes.len()),
            });
        } else if !not_loaded.is_empty() {
            r.failure = Some(format!("insmod failed for: {}", not_loaded.join(", ")));
        } else if !problems_of_workloads.is_empty() {
            r.failure = Some(problems_of_workloads.join("; "));
        }
        good.push((vi, job_id(path), path.clone(), r, timing, l));
    }
    let mut report =
        Report { run_dir: None, device_type: manifest.device_type.clone(), imported: Vec::new(), problems };
    if good.is_empty() {
        return Ok(report);
    }
    // Repetitions in job order (numeric ids first, by value), per variant.
    let key = |id: &str| (id.parse::<u64>().map_err(|_| id.to_string()), id.to_string());
    good.sort_by_key(|a| (a.0, key(&a.1)));
    let out = &opts.out;
    let mut run: Run = manifest.run.clone();
    for v in &mut run.variants {
        v.repetitions.clear();
    }
    // Where each log goes (logs/NAME-N.log, the names checked plain when
    // the manifest was read), checked against the inputs before anything
    // is written: no output is a log being imported or the manifest.
    let mut counts = vec![0usize; run.variants.len()];
    let rels: Vec<PathBuf> = good
        .iter()
        .map(|g| {
            let n = counts[g.0];
            counts[g.0] += 1;
            PathBuf::from(format!("logs/{}-{n}.log", run.variants[g.0].name))
        })
        .collect();
    let written: Vec<PathBuf> = rels.iter().map(|r| out.join(r)).chain([out.join("run.json")]).collect();
    let manifest_file = if opts.jobs.is_dir() { opts.jobs.join(job::MANIFEST) } else { opts.jobs.clone() };
    let read: Vec<&Path> = opts.logs.iter().map(PathBuf::as_path).chain([manifest_file.as_path()]).collect();
    let planned: Vec<fsutil::Planned> = written.iter().map(|p| fsutil::Planned::new(p)).collect();
    fsutil::check_outputs(&read, &planned)?;
    // The logs and run.json are put in place together: a full file system
    // leaves none of them, nor the run directory when this import made it.
    let mut made = MadeDir(if out.exists() { None } else { Some(out.clone()) });
    std::fs::create_dir_all(out.join("logs")).map_err(|e| Error::io(out, e))?;
    let mut staged = fsutil::Staged::new();
    let mut timings: Vec<String> = Vec::new();
    for ((vi, id, path, mut r, timing, l), rel) in good.into_iter().zip(rels) {
        let v = &mut run.variants[vi];
        let index = v.repetitions.len();
        staged.write(&out.join(&rel), l.console.as_bytes())?;
        r.index = index;
        r.log = rel;
        r.job = Some(id.clone());
        if let Some(c) = &l.qemu_command
            && run.qemu_command.is_empty()
        {
            run.qemu_command = c.split_whitespace().map(str::to_string).collect();
        }
        if !l.qemu_version.is_empty() {
            run.qemu_version = l.qemu_version.clone();
        }
        if !timings.contains(&timing) {
            timings.push(timing.clone());
        }
        report.imported.push(Imported {
            log: path,
            variant: v.name.clone(),
            repetition: index,
            job: id,
            timing,
            failure: r.failure.clone(),
        });
        if r.partial {
            run.partial = true;
        }
        v.repetitions.push(r);
    }
    run.variants.retain(|v| !v.repetitions.is_empty());
    run.timing = timings.join(" / ");
    staged.write(&out.join("run.json"), &crate::run::json(&run))?;
    staged.commit()?;
    made.0 = None;
    report.run_dir = Some(out.clone());
    Ok(report)
}

/// A directory made for a command's outputs, removed (with what is in it)
/// when dropped: the command failed before its outputs were in place.
struct MadeDir(Option<PathBuf>);

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lava_times_are_seconds() {
        let a = seconds("2026-11-28T00:10:59.394112").unwrap();
        let b = seconds("2026-11-29T00:11:00.394112").unwrap();
        assert!((b - a - 86_401.0).abs() < 1e-6, "{}", b - a);
        assert_eq!(seconds("yesterday"), None);
    }

    #[test]
    fn job_ids_from_file_names() {
        assert_eq!(job_id(Path::new("/x/1234.yaml")), "1234");
        assert_eq!(job_id(Path::new("stock-0.log")), "stock-0");
    }
}
