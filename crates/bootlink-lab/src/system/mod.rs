//! A real Debian system booted in the lab (`bootlink system`): a bookworm
//! root with systemd and udev on a virtual disk, Debian's kernel installed
//! in it as a package (its initrd made by initramfs-tools), booted under
//! the lab's QEMU on a PC with the devices udev loads drivers for. A
//! service ordered after multi-user.target prints systemd-analyze's
//! figures, the loaded modules and the kernel's trace of their loads, then
//! powers off; the console becomes a typed record ([`parse::Boot`]) and a
//! report that says what share of the boot module loading is.
//!
//! - [`kernel`]: the kernel package it installs (Debian's, or Debian's
//!   with the series' image and its modules through `bootlink apply`);
//! - [`image`]: the system's disk, kernel and initrd, built once per content;
//! - [`machine`]: the PC and the kernel command line;
//! - [`parse`]: the console read into a [`parse::Boot`];
//! - [`links`]: the boot cut into its links in time order;
//! - [`oncpu`]: each load's time on the CPU (the scheduler's switches);
//! - [`spans`]: the time module loads were under way, overlaps counted once.

pub mod image;
pub mod kernel;
pub mod links;
pub mod machine;
pub mod oncpu;
pub mod parse;
pub mod spans;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;
use bootlink::kbuild::Line;
use bootlink::table::Table;

use crate::run;

pub use image::Image;
pub use kernel::Kernel;
pub use machine::Clock;
pub use parse::Boot;

/// What to boot and where the record goes.
#[derive(Debug, Clone)]
pub struct Request {
    /// The kernel package the system installs.
    pub kernel: Kernel,
    /// Its kernel line: Debian's package of that line, or the series of
    /// that line built with Debian's config.
    pub line: Line,
    pub clock: Clock,
    /// Trace every module load (function_graph from the kernel's command
    /// line); without it the stages are the boot's own, no load is timed.
    pub trace: bool,
    /// With `trace`: the scheduler's context switches too (each load's
    /// time on the CPU); false only to measure what tracing them costs.
    pub switches: bool,
    /// Boot parameters added to the command line (after the system's and
    /// those apply's plan asks for), e.g. `cryptomgr.notests=1`.
    pub cmdline: Vec<String>,
    /// QEMU is killed when this runs out.
    pub timeout: Duration,
    /// system.json and console.log are written here.
    pub out: PathBuf,
}

/// A finished boot: the image it booted, how it was timed, the record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub image: Image,
    /// "icount" (instruction-counted, sleep=on) or "realtime".
    pub clock: String,
    pub cpus: u32,
    /// Module loads traced.
    pub traced: bool,
    /// The scheduler's switches traced too (each load's time on the CPU);
    /// false in records made before they were.
    #[serde(default)]
    pub traced_switches: bool,
    /// The kernel command line.
    pub cmdline: String,
    /// What of it the request added ([`Request::cmdline`]).
    #[serde(default)]
    pub added: Vec<String>,
    /// QEMU, as it was run.
    pub qemu_command: String,
    /// The host's wall time of the boot and of getting the image.
    pub boot_wall_s: f64,
    pub image_wall_s: f64,
    pub boot: Boot,
    #[serde(skip)]
    pub out: PathBuf,
}

impl Report {
    /// The record is complete and consistent.
    pub fn ok(&self) -> bool {
        self.boot.problems.is_empty()
    }
}

/// Get the image (cached or built), boot it once, read and write the record.
pub fn run(req: &Request) -> Result<Report> {
    if let Clock::Realtime { cpus: 0 } = req.clock {
        return Err(Error::new(Kind::Usage, "--smp: at least one CPU"));
    }
    // Before the image is made: a record directory that is a file, a
    // device or a FIFO, or holds one where its files go, is refused.
    bootlink::fsutil::check_outputs_in(&req.out, &["system.json", "console.log"], &[])?;
    let t0 = Instant::now();
    // A kernel refused (its build not cached) or an image that cannot be
    // made leaves no record directory behind.
    let package = kernel::package(&req.kernel, req.line)?;
    let image = image::with_package(&package)?;
    let image_wall_s = t0.elapsed().as_secs_f64();
    std::fs::create_dir_all(&req.out).map_err(|e| Error::io(&req.out, e))?;
    let log = req.out.join("console.log");
    let mut booted = image.clone();
    booted.cmdline.extend(req.cmdline.iter().cloned());
    let tracing = match (req.trace, req.switches) {
        (false, _) => machine::Tracing::Off,
        (true, false) => machine::Tracing::Loads,
        (true, true) => machine::Tracing::LoadsAndSwitches,
    };
    let opts = machine::options(&booted, req.clock, tracing, req.timeout, &log)?;
    bootlink::progress::status(&format!(
        "booting {} (line {}) under QEMU ({}, {} CPU)",
        image.release,
        image.line,
        clock_name(req.clock),
        opts.cpus
    ));
    let boot = crate::lab::qemu::run(&opts)?;
    boot.check()?;
    let mut record = parse::boot(&boot.log, req.trace);
    record.kaslr = moved(&image.vmlinuz, record.kernel_text.as_deref())?;
    let report = Report {
        clock: clock_name(req.clock).to_string(),
        cpus: opts.cpus,
        traced: req.trace,
        traced_switches: tracing == machine::Tracing::LoadsAndSwitches,
        cmdline: opts.cmdline.clone(),
        added: req.cmdline.clone(),
        qemu_command: boot.command.clone(),
        boot_wall_s: boot.wall.as_secs_f64(),
        image_wall_s,
        boot: record,
        image,
        out: req.out.clone(),
    };
    save(&report, &req.out)?;
    Ok(report)
}

/// A boot's console (`DIR/console.log`) read again into its record
/// (`DIR/system.json`), booting nothing: for records made before this
/// bootlink read more of the console (the boot's links).
pub fn reread(dir: &Path) -> Result<Report> {
    let file = dir.join("system.json");
    let text = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
    let mut report: Report = serde_json::from_slice(&text)
        .map_err(|e| Error::file(Kind::Format, &file, format!("not a bootlink system.json: {e}")))?;
    let log_path = dir.join("console.log");
    let log = std::fs::read(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let kaslr = report.boot.kaslr;
    report.boot = parse::boot(&String::from_utf8_lossy(&log), report.traced);
    // The image may be gone since (images are cached by content); what the
    // record said then stands only while the address it read is the same.
    report.boot.kaslr = match moved(&report.image.vmlinuz, report.boot.kernel_text.as_deref()) {
        Ok(k) => k,
        Err(_) if !report.image.vmlinuz.exists() => kaslr.filter(|_| report.boot.kernel_text.is_some()),
        Err(e) => return Err(e),
    };
    report.out = dir.to_path_buf();
    save(&report, dir)?;
    Ok(report)
}

/// Whether the kernel moved (KASLR): `_text` as the boot's /proc/kallsyms
/// read it, against the link-time address of the image booted (the
/// vmlinux inside `vmlinuz`); None when the boot printed no address (or
/// 0: kallsyms hid it).
pub fn moved(vmlinuz: &Path, text: Option<&str>) -> Result<Option<bool>> {
    let Some(text) = text else { return Ok(None) };
    let at = u64::from_str_radix(text, 16)
        .map_err(|_| Error::new(Kind::Format, format!("_text at {text:?}: not a hexadecimal address")))?;
    if at == 0 {
        return Ok(None);
    }
    Ok(Some(at != crate::lab::scenario::link_text(vmlinuz)?))
}

fn clock_name(c: Clock) -> &'static str {
    match c {
        Clock::Deterministic => "icount",
        Clock::Realtime { .. } => "realtime",
    }
}

/// `system.json` in `dir`, written atomically.
pub fn save(report: &Report, dir: &Path) -> Result<()> {
    let json = serde_json::to_string_pretty(report).expect("serializable");
    fsutil::write_atomic(&dir.join("system.json"), json.as_bytes())
}

/// What the kernel is, in words.
fn kernel_line(i: &Image) -> String {
    match i.kernel.as_str() {
        "debian" | "" => "Debian's, as shipped (modules signed by Debian)".into(),
        k => format!(
            "{k}: bootlink's series built with Debian's config; Debian's modules through apply: {}",
            if i.steps.is_empty() { "-".to_string() } else { i.steps.join(", ") }
        ),
    }
}

fn ms(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0} ms") } else { format!("{v:.1} ms") }
}

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 { format!("{:.1} %", 100.0 * part / whole) } else { "-".into() }
}

/// A stage's module loading: the time a load was under way, and how many.
fn loads(traced: bool, l: &parse::Loading) -> String {
    if traced { format!("{} ({} loads)", ms(l.busy_us / 1000.0), l.loads) } else { "-".into() }
}

/// The loads that began before multi-user.target (refused ones
/// included): their wall phases and, when traced, their time on the CPU.
fn loads_to_target(b: &Boot) -> Vec<(&[run::results::Phase], Option<&parse::CpuTime>)> {
    let target = b.multi_user_ms * 1000.0;
    b.modules
        .iter()
        .filter(|m| m.start_ms.is_some_and(|t| t * 1000.0 < target))
        .map(|m| (m.phases.as_slice(), m.on_cpu.as_ref()))
        .chain(
            b.failed_loads
                .iter()
                .filter(|f| f.start_ms * 1000.0 < target)
                .map(|f| (f.phases.as_slice(), f.on_cpu.as_ref())),
        )
        .collect()
}

/// Phase names with their summed times, longest first, as "name N %".
fn shares<'a>(times: impl Iterator<Item = (&'a str, f64)>) -> (String, f64) {
    let mut sums: Vec<(&str, f64)> = Vec::new();
    for (name, d) in times {
        match sums.iter_mut().find(|s| s.0 == name) {
            Some(s) => s.1 += d,
            None => sums.push((name, d)),
        }
    }
    let total: f64 = sums.iter().map(|s| s.1).sum();
    sums.sort_by(|x, y| y.1.total_cmp(&x.1));
    let parts: Vec<String> = sums.iter().map(|(n, d)| format!("{n} {}", pct(*d, total))).collect();
    (parts.join(", "), total)
}

/// Where the loads' own time went, phase by phase (the lab's phases, all
/// loads up to multi-user.target together, refused ones included): on the
/// CPU when the boot traced the scheduler's switches (with one CPU a
/// load's wall phases also hold the time other tasks ran), then how much
/// of the loads' wall time was off the CPU, then the wall phases.
fn phase_lines(b: &Boot) -> String {
    let loads = loads_to_target(b);
    let (wall, wall_us) = shares(loads.iter().flat_map(|l| l.0).map(|p| (p.name.as_str(), p.duration_us)));
    if loads.is_empty() || loads.iter().any(|l| l.1.is_none()) {
        return format!("the loads' time by phase: {wall}\n");
    }
    let cpu: Vec<&parse::CpuTime> = loads.iter().filter_map(|l| l.1).collect();
    let (on, on_us) = shares(cpu.iter().flat_map(|c| &c.phases).map(|p| (p.name.as_str(), p.on_cpu_us)));
    let preempted: f64 = cpu.iter().map(|c| c.preempted_us).sum();
    let blocked: f64 = cpu.iter().map(|c| c.blocked_us).sum();
    format!(
        "the loads' time on the CPU by phase: {on}\n\
         the loads' wall time, {}: on the CPU {} ({}), off it runnable (preempted) {} ({}), asleep or blocked {} ({})\n\
         the loads' wall time by phase (on the CPU or not): {wall}\n",
        ms(wall_us / 1000.0),
        ms(on_us / 1000.0),
        pct(on_us, wall_us),
        ms(preempted / 1000.0),
        pct(preempted, wall_us),
        ms(blocked / 1000.0),
        pct(blocked, wall_us),
    )
}

/// The five longest loads by `key` (µs), as "name N ms".
fn longest(b: &Boot, key: impl Fn(&parse::Module) -> Option<f64>) -> Option<String> {
    let mut all: Vec<(&str, f64)> = b.modules.iter().filter_map(|m| Some((m.name.as_str(), key(m)?))).collect();
    all.sort_by(|x, y| y.1.total_cmp(&x.1));
    let top: Vec<String> = all.iter().take(5).map(|(n, us)| format!("{n} {}", ms(us / 1000.0))).collect();
    (!top.is_empty()).then(|| top.join(", "))
}

/// The whole boot in time order ([`links`]): each link's time, its share
/// of the time to multi-user.target, the module loading in it and its
/// largest parts.
fn links_table(b: &Boot) -> String {
    let whole = b.multi_user_ms;
    let mut s = String::from("\nthe whole boot in time order (the kernel's clock), its links:\n");
    let mut t = Table::new(&["link", "from", "took", "of the boot", "a module load under way", "its largest parts"]);
    for l in &b.links {
        let parts: Vec<String> = l.parts.iter().take(3).map(|p| format!("{} {}", p.name, ms(p.ms))).collect();
        t.row(vec![
            l.name.clone(),
            format!("{:.2} s", l.start_ms / 1000.0),
            ms(l.ms()),
            pct(l.ms(), whole),
            l.loading_ms.map_or("-".to_string(), |m| {
                if m > 0.0 { format!("{} ({})", ms(m), pct(m, l.ms())) } else { "-".into() }
            }),
            parts.join(", "),
        ]);
    }
    s.push_str(&t.render());
    let c = &b.initcalls;
    if c.count > 0 {
        s.push_str(&format!("built-in initcalls: {} of them, {} together", c.count, ms(c.sum_ms)));
        if let Some((from, to)) = c.unpack_ms {
            s.push_str(&format!("; the initramfs unpacked beside them from {:.2} s, {}", from / 1000.0, ms(to - from)));
        }
        s.push('\n');
    }
    s
}

impl bootlink::report::Report for Report {
    fn render(&self) -> String {
        let b = &self.boot;
        let i = &self.image;
        let mut s = format!(
            "system    Debian {} ({} packages on minbase), {} {} installed with dpkg\n\
             kernel    line {}, release {}: {}{}{}\n\
             boot      {} ({} CPU), KASLR {}, {:.0} s wall (image {})\n\n",
            i.suite,
            i.packages.len(),
            i.kernel_package,
            i.kernel_version,
            i.line,
            i.release,
            kernel_line(i),
            if i.cmdline.is_empty() {
                String::new()
            } else {
                format!("; added to the command line: {}", i.cmdline.join(" "))
            },
            if self.added.is_empty() { String::new() } else { format!("; and by request: {}", self.added.join(" ")) },
            self.clock,
            self.cpus,
            match b.kaslr {
                Some(true) => "on",
                Some(false) => "off",
                None => "unknown",
            },
            self.boot_wall_s,
            if i.cached { "cached".to_string() } else { format!("built in {:.0} s", self.image_wall_s) },
        );
        let mut t = Table::new(&["stage", "time", "of the time to multi-user", "module loading in it"]);
        let whole = b.multi_user_ms;
        t.row(vec!["kernel (to /init)".into(), ms(b.kernel_ms), pct(b.kernel_ms, whole), "-".into()]);
        t.row(vec![
            "initrd (initramfs-tools, udev)".into(),
            ms(b.initrd_ms),
            pct(b.initrd_ms, whole),
            loads(self.traced, &b.loading_initrd),
        ]);
        let to_target = b.multi_user_ms - b.kernel_ms - b.initrd_ms;
        t.row(vec![
            "userspace to multi-user.target".into(),
            ms(to_target),
            pct(to_target, whole),
            loads(self.traced, &b.loading_after),
        ]);
        let all = if self.traced { ms(b.loading.busy_us / 1000.0) } else { "-".into() };
        t.row(vec!["multi-user.target".into(), ms(whole), "100 %".into(), all]);
        s.push_str(&t.render());
        let initrd = b.modules.iter().filter(|m| m.in_initrd).count();
        s.push_str(&format!(
            "\nsystemd-analyze: {} (kernel) + {} (userspace) = {}; {} reached {} into userspace\n",
            ms(b.analyze.kernel_ms),
            ms(b.analyze.userspace_ms),
            ms(b.analyze.total_ms),
            b.analyze.target,
            b.analyze.target_reached_ms.map_or("-".to_string(), ms),
        ));
        s.push_str(&format!(
            "modules:  {} loaded ({} in the initrd, {} after switch_root), {} refused load(s)\n",
            b.modules.len(),
            initrd,
            b.modules.len() - initrd,
            b.failed_loads.len()
        ));
        if !b.after_trace.is_empty() {
            s.push_str(&format!(
                "          {} loaded after the trace stopped (not timed): {}\n",
                b.after_trace.len(),
                b.after_trace.join(" ")
            ));
        }
        if self.traced {
            s.push_str(&format!(
                "module loading: {} of the boot's {} to multi-user.target had a load under way: {}\n\
                 \x20               (the loads' own times add up to {}; after the target: {} more loads)\n",
                ms(b.loading.busy_us / 1000.0),
                ms(whole),
                pct(b.loading.busy_us / 1000.0, whole),
                ms(b.loading.sum_us / 1000.0),
                b.loading_late.loads,
            ));
        } else {
            s.push_str("module loading: not traced (--no-trace)\n");
        }
        if self.traced {
            s.push_str(&phase_lines(b));
        }
        if let Some(top) = longest(b, |m| m.on_cpu.as_ref().map(|c| c.on_cpu_us)) {
            s.push_str(&format!("longest loads on the CPU: {top}\n"));
        }
        if let Some(top) = longest(b, |m| m.load_us) {
            let wall = if b.modules.iter().any(|m| m.on_cpu.is_some()) { " (wall)" } else { "" };
            s.push_str(&format!("longest loads{wall}: {top}\n"));
        }
        if !b.links.is_empty() {
            s.push_str(&links_table(b));
        }
        if self.traced && b.critical_chain.iter().any(|l| l.loading_ms.is_some()) {
            s.push_str("\nthe critical chain (systemd-analyze critical-chain multi-user.target), each unit's start:\n");
            let mut t = Table::new(&["unit", "active at", "its start took", "a module load under way"]);
            for l in &b.critical_chain {
                let took = l.took_ms.map_or("-".to_string(), ms);
                let during = match (l.loading_ms, l.took_ms) {
                    (Some(m), Some(t)) if t > 0.0 => format!("{} ({})", ms(m), pct(m, t)),
                    _ => "-".into(),
                };
                t.row(vec![
                    format!("{}{}", "  ".repeat(l.depth), l.unit),
                    l.at_ms.map_or("-".to_string(), |a| format!("+{}", ms(a))),
                    took,
                    during,
                ]);
            }
            s.push_str(&t.render());
        }
        if let Some(slow) = b.blame.first() {
            s.push_str(&format!("slowest unit: {} {}\n", slow.unit, ms(slow.ms)));
        }
        if !b.failed_units.is_empty() {
            s.push_str(&format!("failed units: {}\n", b.failed_units.join(" ")));
        }
        for p in &b.problems {
            s.push_str(&format!("problem: {p}\n"));
        }
        s.push_str(&format!("record: {}\n", self.out.join("system.json").display()));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kaslr_is_unknown_without_an_address_and_refused_with_a_bad_one() {
        // No image is opened for these: the address decides first.
        let nowhere = Path::new("/nonexistent/vmlinuz");
        assert_eq!(moved(nowhere, None).unwrap(), None);
        assert_eq!(moved(nowhere, Some("0000000000000000")).unwrap(), None, "kallsyms hid the address");
        let e = moved(nowhere, Some("ffffffffzz000000")).unwrap_err().to_string();
        assert!(e.contains("not a hexadecimal address"), "{e}");
        // An address and no image: the image's own link-time base is needed.
        assert!(moved(nowhere, Some("ffffffff81000000")).is_err());
    }
}
