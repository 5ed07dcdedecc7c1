//! The system's console read into a typed record: what the report service
//! printed between its markers (systemd-analyze and its critical chain and
//! blame, /proc/modules now and as the initramfs left it, the kernel's log,
//! the trace) becomes a [`Boot`].
//!
//! The module loads come from the kernel's function_graph trace of the
//! lab's landmarks, which the lab's parser ([`crate::run::ftrace::parse`])
//! cuts into phases. The lab's /init writes a marker naming each module
//! before its insmod; here udev and systemd-modules-load load them, so the
//! marker is put in afterwards: each load_module of a task, with the file
//! read just before it, is named by the `module_load` event the kernel
//! records inside it. A load_module without that event failed (most often
//! a second request for a module already loading, which the kernel refuses
//! only after reading the file and checking its signature).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::lab::initramfs::framed;
use crate::run::results::{ModuleLoad, Phase};

use super::links::{self, INIT_BOTTOM, INIT_TOP, Initcalls, Link, RUN_INIT, SYSTEMD_STARTS, logged_at};
pub use super::oncpu::CpuTime;
use super::oncpu::{Switches, pid_of};
pub use super::spans::Loading;
use super::spans::{loading, under_way};

/// The name given to a load the kernel refused (no module_load event).
const FAILED: &str = "(failed load)";

/// `systemd-analyze`'s first lines, as it printed them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Analyze {
    /// Until systemd started (with an initramfs-tools initrd this holds the
    /// initrd too: systemd knows no initrd stage it did not run itself).
    pub kernel_ms: f64,
    /// Only when systemd ran in the initrd (dracut's systemd); None here.
    pub initrd_ms: Option<f64>,
    pub userspace_ms: f64,
    pub total_ms: f64,
    /// The default target and when it was reached, after userspace began.
    pub target: String,
    pub target_reached_ms: Option<f64>,
}

/// One line of `systemd-analyze critical-chain`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChainLink {
    pub unit: String,
    /// 0 for the target, then one more per level.
    pub depth: usize,
    /// When it became active, after userspace began.
    pub at_ms: Option<f64>,
    /// How long it took to start.
    pub took_ms: Option<f64>,
    /// Of that start (from `at - took` to `at`), the time during which a
    /// module load was under way (traced boots; none for a unit whose
    /// start took no time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loading_ms: Option<f64>,
}

/// One line of `systemd-analyze blame`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Blame {
    pub unit: String,
    pub ms: f64,
}

/// A module in /proc/modules once the boot has finished.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Module {
    pub name: String,
    /// Its size in memory (/proc/modules).
    pub size: u64,
    /// Loaded in the initramfs (in /proc/modules when its init-bottom ran).
    pub in_initrd: bool,
    /// The load as the kernel traced it: read + load_module (init included);
    /// None when the trace has no load of it.
    pub load_us: Option<f64>,
    /// When its load began, on the kernel's clock.
    pub start_ms: Option<f64>,
    /// The lab's phases of that load (read, signature, layout, symbols,
    /// relocation, finalize, init).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// The same load's time on the CPU and off it, in all and by phase
    /// (the boot traced the scheduler's switches; records made before
    /// that have none): [`super::oncpu`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cpu: Option<CpuTime>,
}

/// A load the kernel refused (load_module without a module_load event).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailedLoad {
    /// The task that asked (`comm-pid`).
    pub task: String,
    pub start_ms: f64,
    pub load_us: f64,
    pub phases: Vec<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cpu: Option<CpuTime>,
}

/// One system boot, as the console showed it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Boot {
    /// `systemctl is-system-running` once the boot had finished.
    pub state: String,
    pub analyze: Analyze,
    /// The boot cut at the kernel's start of /init and at systemd's start:
    /// kernel + initrd + userspace = total. kernel: printk time of "Run
    /// /init"; initrd: from there to systemd's start (systemd-analyze's
    /// kernel figure less the kernel's); userspace: systemd-analyze's.
    pub kernel_ms: f64,
    pub initrd_ms: f64,
    pub userspace_ms: f64,
    pub total_ms: f64,
    /// multi-user.target reached, from the kernel's start.
    pub multi_user_ms: f64,
    /// Landmarks on the kernel's (printk) clock: /init started, the
    /// initramfs's last script, systemd's first line.
    pub init_started_ms: Option<f64>,
    pub initrd_done_ms: Option<f64>,
    pub systemd_started_ms: Option<f64>,
    pub critical_chain: Vec<ChainLink>,
    /// The 30 longest units.
    pub blame: Vec<Blame>,
    pub failed_units: Vec<String>,
    /// `_text`'s address from /proc/kallsyms, and whether it moved (KASLR):
    /// against the booted image's own link-time address ([`super::moved`]).
    pub kernel_text: Option<String>,
    pub kaslr: Option<bool>,
    pub modules: Vec<Module>,
    pub failed_loads: Vec<FailedLoad>,
    /// Module loading in the initramfs, after switch_root up to
    /// multi-user.target, and both together; then what udev still loaded
    /// once the target was reached (not part of the boot's time).
    pub loading_initrd: Loading,
    pub loading_after: Loading,
    pub loading: Loading,
    pub loading_late: Loading,
    /// `loading.busy_us` over the time to multi-user.target.
    pub share_of_boot: f64,
    /// Events the trace buffer lost (must be 0).
    pub trace_overrun: u64,
    /// The whole boot in time order, to multi-user.target ([`links`]).
    #[serde(default)]
    pub links: Vec<Link>,
    /// The kernel's built-in initcalls (a traced boot has initcall_debug).
    #[serde(default)]
    pub initcalls: Initcalls,
    /// Modules in /proc/modules loaded after the trace was stopped (their
    /// init's `calling` line in the kernel's log is later than the trace's
    /// last event): not in the trace, and not a problem (the report service
    /// stops the trace first, and udev may still be loading then).
    #[serde(default)]
    pub after_trace: Vec<String>,
    /// What is missing or inconsistent; empty for a good record.
    pub problems: Vec<String>,
}

/// A systemd time span ("1min 2.345s", "843ms", "12us") in milliseconds.
pub fn timespan_ms(s: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for tok in s.split_whitespace() {
        let split = tok.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (n, unit) = tok.split_at(split);
        let n: f64 = n.parse().ok()?;
        let scale = match unit {
            "d" => 86_400_000.0,
            "h" => 3_600_000.0,
            "min" => 60_000.0,
            "s" => 1000.0,
            "ms" => 1.0,
            "us" | "µs" => 0.001,
            _ => return None,
        };
        total += n * scale;
        any = true;
    }
    any.then_some(total)
}

/// `Startup finished in A (kernel) + B (initrd) + C (userspace) = T` and
/// `TARGET reached after X in userspace`.
pub fn analyze(text: &str) -> Option<Analyze> {
    let line = text.lines().find(|l| l.starts_with("Startup finished in "))?;
    let body = line.strip_prefix("Startup finished in ")?;
    let (parts, total) = body.rsplit_once(" = ")?;
    let mut a = Analyze { total_ms: timespan_ms(total.trim())?, ..Default::default() };
    let mut have = (false, false);
    for part in parts.split(" + ") {
        let (span, label) = part.trim().rsplit_once(" (")?;
        let ms = timespan_ms(span)?;
        match label.trim_end_matches(')') {
            "kernel" => (a.kernel_ms, have.0) = (ms, true),
            "initrd" => a.initrd_ms = Some(ms),
            "userspace" => (a.userspace_ms, have.1) = (ms, true),
            _ => {} // firmware, loader: not on this machine
        }
    }
    if !(have.0 && have.1) {
        return None;
    }
    if let Some(l) = text.lines().find(|l| l.contains(" reached after ")) {
        let (target, rest) = l.split_once(" reached after ")?;
        a.target = target.trim().to_string();
        a.target_reached_ms = rest.trim_end().trim_end_matches('.').strip_suffix(" in userspace").and_then(timespan_ms);
    }
    Some(a)
}

/// `systemd-analyze critical-chain`'s tree (UTF-8 or ASCII branches).
pub fn critical_chain(text: &str) -> Vec<ChainLink> {
    let mut out = Vec::new();
    for line in text.lines() {
        // The branch glyphs (UTF-8 or, in the C locale, ASCII) before the
        // unit, whose own name may begin with '-' (-.mount, -.slice).
        let body = line.trim_start_matches([' ', '│', '|']);
        let body = ["└─", "├─", "`-", "|-"].iter().find_map(|g| body.strip_prefix(g)).unwrap_or(body);
        let Some(unit) = body.split_whitespace().next() else { continue };
        if !unit.contains('.') || unit.ends_with(':') || body.starts_with("The time") {
            continue;
        }
        let prefix = line.chars().count() - body.chars().count();
        let mut link =
            ChainLink { unit: unit.to_string(), depth: prefix / 2, at_ms: None, took_ms: None, loading_ms: None };
        for tok in body.split_whitespace().skip(1) {
            if let Some(t) = tok.strip_prefix('@') {
                link.at_ms = timespan_ms(t);
            } else if let Some(t) = tok.strip_prefix('+') {
                link.took_ms = timespan_ms(t);
            }
        }
        if link.at_ms.is_some() || link.took_ms.is_some() {
            out.push(link);
        }
    }
    out
}

/// `systemd-analyze blame`: a time span, then the unit.
pub fn blame(text: &str) -> Vec<Blame> {
    text.lines()
        .filter_map(|l| {
            let (span, unit) = l.trim().rsplit_once(' ')?;
            Some(Blame { unit: unit.to_string(), ms: timespan_ms(span.trim())? })
        })
        .collect()
}

/// /proc/modules: each module's name and size.
pub fn proc_modules(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            let size = f.next()?.parse().ok()?;
            Some((name.to_string(), size))
        })
        .collect()
}

/// One line of a function_graph trace with the funcgraph-proc column:
/// its time and CPU as printed, the task (`comm-pid`), and the function column.
struct Line<'a> {
    time: &'a str,
    cpu: &'a str,
    task: &'a str,
    func: &'a str,
}

fn trace_line(line: &str) -> Option<Line<'_>> {
    let (time, rest) = line.split_once('|')?;
    time.trim().parse::<f64>().ok()?;
    let (cpu, rest) = rest.split_once(')')?;
    cpu.trim().parse::<u32>().ok()?;
    let (task, rest) = rest.split_once('|')?;
    let (_, func) = rest.split_once('|')?;
    Some(Line { time: time.trim(), cpu: cpu.trim(), task: task.trim(), func: func.trim() })
}

/// The console without what the serial getty printed into it: the system
/// reaches multi-user.target while the report service writes, and getty's
/// banner (`Debian GNU/Linux 12 HOST ttyS0`, blank lines) and its `HOST
/// login: ` prompt land between or before the report's lines (a 6.12 boot
/// had `bootlink-system login: Startup finished in ...`, and systemd-analyze's
/// figures were not found).
fn without_getty(log: &str) -> String {
    let prompt = format!("{} login: ", super::image::HOSTNAME);
    let banner_end = format!(" {} ttyS0", super::image::HOSTNAME);
    let mut out = String::with_capacity(log.len());
    for line in log.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.starts_with("Debian GNU/Linux ") && line.trim_end().ends_with(&banner_end) {
            continue;
        }
        let mut rest = line;
        while let Some(r) = rest.strip_prefix(&prompt) {
            rest = r;
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// When each module's init was called (seconds, the kernel's clock), from
/// initcall_debug's lines as the lab's dmesg parser reads them.
fn module_inits(dmesg: &str) -> HashMap<String, f64> {
    let mut at = HashMap::new();
    for c in crate::run::dmesg::parse(dmesg.as_bytes()).initcalls {
        if !c.module.is_empty() {
            at.entry(c.module).or_insert(c.start_us / 1e6);
        }
    }
    at
}

/// The trace with the lab's marker before each load (see the module's
/// doc): a task's load begins at its read of the file (6.1's
/// kernel_read_file_from_fd, or kernel_read_file) just before load_module,
/// and is named by the module_load event inside it.
pub fn with_load_markers(trace: &str) -> String {
    /// A task's state: the read that may begin its next load, and the load
    /// under way (its index in `loads`) with the depth of calls inside it.
    /// Depth is counted from load_module's entry only: before it, a task
    /// (PID 1 running the built-in initcalls) may have braces whose other
    /// half is not in the trace.
    #[derive(Default)]
    struct Task {
        read_at: Option<usize>,
        load: Option<usize>,
        depth: usize,
    }
    let lines: Vec<&str> = trace.lines().collect();
    // (line the load begins at, task, name)
    let mut loads: Vec<(usize, String, Option<String>)> = Vec::new();
    let mut tasks: HashMap<&str, Task> = HashMap::new();
    for (i, raw) in lines.iter().enumerate() {
        let Some(l) = trace_line(raw) else { continue };
        let t = tasks.entry(l.task).or_default();
        if let Some(event) = l.func.strip_prefix("/* module_load: ") {
            if let Some(j) = t.load {
                let name = event.trim_end_matches("*/").split_whitespace().next().unwrap_or("");
                loads[j].2 = Some(name.to_string());
            }
            continue;
        }
        if l.func.starts_with('}') {
            if t.load.is_some() {
                t.depth = t.depth.saturating_sub(1);
                if t.depth == 0 {
                    t.load = None;
                }
            }
            continue;
        }
        let (name, opens) = if let Some(f) = l.func.strip_suffix("() {") {
            (f, true)
        } else if let Some(f) = l.func.strip_suffix("();") {
            (f, false)
        } else {
            continue;
        };
        if t.load.is_some() {
            t.depth += usize::from(opens);
            continue;
        }
        match name {
            // 6.1 reads a module's file here (finit_module); 6.6 and later
            // call kernel_read_file directly. Inside kernel_read_file_from_fd
            // kernel_read_file is the same read.
            "kernel_read_file_from_fd" => t.read_at = Some(i),
            "kernel_read_file" if t.read_at.is_none() => t.read_at = Some(i),
            "kernel_read_file" => {}
            "load_module" => {
                loads.push((t.read_at.take().unwrap_or(i), l.task.to_string(), None));
                if opens {
                    t.load = Some(loads.len() - 1);
                    t.depth = 1;
                }
            }
            _ => t.read_at = None,
        }
    }
    let mut at: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, task, name) in &loads {
        let l = trace_line(lines[*i]).expect("a load begins at a trace line");
        let name = name.as_deref().unwrap_or(FAILED);
        at.entry(*i).or_default().push(format!(
            "{} |  {}) {} |               |  /* {}{name} */",
            l.time,
            l.cpu,
            task,
            crate::run::ftrace::MARKER
        ));
    }
    let mut out = String::with_capacity(trace.len() + loads.len() * 80);
    for (i, line) in lines.iter().enumerate() {
        for m in at.get(&i).into_iter().flatten() {
            out.push_str(m);
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The module loads in the trace, each with its task: named ones and
/// refused ones.
fn loads(trace: &str) -> Vec<(String, ModuleLoad)> {
    let marked = with_load_markers(trace);
    // The task of each marker, in order, to give each refused load its asker.
    let tasks: Vec<String> = marked
        .lines()
        .filter(|l| l.contains(crate::run::ftrace::MARKER))
        .filter_map(|l| trace_line(l).map(|t| t.task.to_string()))
        .collect();
    let parsed = crate::run::ftrace::parse(&marked);
    // One ModuleLoad per marker followed by a load_module, in marker order.
    tasks.into_iter().zip(parsed).collect()
}

/// A load's time on the CPU, when the trace has the scheduler's switches
/// and the load's task its pid.
fn on_cpu(switches: &Switches, task: &str, l: &ModuleLoad) -> Option<CpuTime> {
    if !switches.traced() {
        return None;
    }
    Some(switches.cpu_time(pid_of(task)?, &l.phases))
}

/// Read one boot's console; `traced`: the kernel traced the module loads.
pub fn boot(log: &str, traced: bool) -> Boot {
    let log = &without_getty(log);
    let mut b = Boot::default();
    let mut problem = |p: String| b.problems.push(p);
    let section = |tag: &str| framed(log, tag);
    let mut missing = Vec::new();
    let mut get = |tag: &'static str| {
        section(tag).unwrap_or_else(|| {
            missing.push(tag);
            String::new()
        })
    };
    let state = get("state");
    let analyze_text = get("analyze");
    let chain = get("critical-chain");
    let blame_text = get("blame");
    let failed = get("failed");
    let kaslr = get("kaslr");
    let modules = get("modules");
    let initrd_modules = get("initrd-modules");
    let dmesg = get("dmesg");
    let stats = get("trace-stats");
    let trace = get("trace");
    if !missing.is_empty() {
        problem(format!("the console has no {} section (the report service did not finish)", missing.join(", ")));
    }
    let mut b = Boot { problems: std::mem::take(&mut b.problems), ..Boot::default() };
    b.state = state.trim().to_string();
    match analyze(&analyze_text) {
        Some(a) => b.analyze = a,
        None => b.problems.push(format!("systemd-analyze's figures not found in: {}", analyze_text.trim())),
    }
    b.critical_chain = critical_chain(&chain);
    b.blame = blame(&blame_text);
    b.failed_units = failed.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect();
    if let Some(addr) = kaslr.split_whitespace().next() {
        b.kernel_text = Some(addr.to_string());
    }
    b.init_started_ms = logged_at(&dmesg, RUN_INIT);
    b.initrd_done_ms = logged_at(&dmesg, INIT_BOTTOM);
    b.systemd_started_ms = logged_at(&dmesg, SYSTEMD_STARTS);
    if logged_at(&dmesg, INIT_TOP).is_none() {
        b.problems.push("the initramfs's init-top line is not in the kernel's log".into());
    }

    // The split: kernel, initrd (up to systemd), userspace.
    let a = &b.analyze;
    match b.init_started_ms {
        Some(k) => {
            b.kernel_ms = k;
            b.initrd_ms = a.kernel_ms + a.initrd_ms.unwrap_or(0.0) - k;
        }
        None => b.problems.push(format!("no '{RUN_INIT}' line in the kernel's log")),
    }
    b.userspace_ms = a.userspace_ms;
    b.total_ms = a.total_ms;
    let reached = match (a.target.as_str(), a.target_reached_ms) {
        ("multi-user.target", Some(t)) => Some(t),
        _ => b.critical_chain.iter().find(|l| l.unit == "multi-user.target" && l.depth == 0).and_then(|l| l.at_ms),
    };
    match reached {
        Some(t) => b.multi_user_ms = a.kernel_ms + a.initrd_ms.unwrap_or(0.0) + t,
        None => b.problems.push("multi-user.target's time is neither in systemd-analyze nor its critical chain".into()),
    }

    // Modules: /proc/modules, the initramfs's list, the trace's loads.
    let in_initrd: BTreeSet<String> = proc_modules(&initrd_modules).into_iter().map(|m| m.0).collect();
    if in_initrd.is_empty() {
        b.problems.push("the initramfs recorded no module".into());
    }
    let loads = loads(&trace);
    let switches = super::oncpu::switches(&trace);
    let on_cpu = |task: &str, l: &ModuleLoad| on_cpu(&switches, task, l);
    let mut by_name: HashMap<&str, (&str, &ModuleLoad)> = HashMap::new();
    for (task, l) in &loads {
        if l.name != FAILED {
            by_name.insert(&l.name, (task.as_str(), l));
        }
    }
    for (name, size) in proc_modules(&modules) {
        let load = by_name.get(name.as_str());
        b.modules.push(Module {
            in_initrd: in_initrd.contains(&name),
            load_us: load.map(|l| l.1.total_us),
            start_ms: load.map(|l| l.1.start_us / 1000.0),
            phases: load.map(|l| l.1.phases.clone()).unwrap_or_default(),
            on_cpu: load.and_then(|&(task, l)| on_cpu(task, l)),
            name,
            size,
        });
    }
    b.modules.sort_by(|x, y| x.start_ms.unwrap_or(f64::MAX).total_cmp(&y.start_ms.unwrap_or(f64::MAX)));
    b.failed_loads = loads
        .iter()
        .filter(|(_, l)| l.name == FAILED)
        .map(|(task, l)| FailedLoad {
            task: task.clone(),
            start_ms: l.start_us / 1000.0,
            load_us: l.total_us,
            phases: l.phases.clone(),
            on_cpu: on_cpu(task.as_str(), l),
        })
        .collect();
    let spans: Vec<(f64, f64)> = loads.iter().map(|(_, l)| (l.start_us, l.total_us)).collect();
    // multi-user.target on the kernel's clock: systemd's figures count
    // from CLOCK_MONOTONIC's zero, the trace from sched_clock's; they differ
    // by less than the rounding of systemd's milliseconds (docs/system.md).
    let target = if b.multi_user_ms > 0.0 { b.multi_user_ms * 1000.0 } else { f64::MAX };
    let switch = b.initrd_done_ms.map_or(target, |t| t * 1000.0);
    b.loading_initrd = loading(&spans, 0.0, switch);
    b.loading_after = loading(&spans, switch, target);
    b.loading = loading(&spans, 0.0, target);
    b.loading_late = loading(&spans, target, f64::MAX);
    // Each unit of the critical chain: its start's interval on the kernel's
    // clock (systemd's "@" counts from userspace's start, systemd-analyze's
    // kernel figure) and the loads under way in it.
    if traced {
        let zero = b.analyze.kernel_ms;
        for link in &mut b.critical_chain {
            if let (Some(at), Some(took)) = (link.at_ms, link.took_ms) {
                let (from, to) = ((zero + at - took) * 1000.0, (zero + at) * 1000.0);
                link.loading_ms = Some(under_way(&spans, from, to) / 1000.0);
            }
        }
    }
    if b.multi_user_ms > 0.0 {
        let units: Vec<links::Part> = b
            .critical_chain
            .iter()
            .filter_map(|l| Some(links::Part { name: l.unit.clone(), ms: l.took_ms.filter(|t| *t > 0.0)? }))
            .collect();
        let frame = links::Frame { target_ms: b.multi_user_ms, units, loads: traced.then_some(spans.as_slice()) };
        let (cut, calls, problems) = links::cut(&dmesg, &frame);
        (b.links, b.initcalls) = (cut, calls);
        b.problems.extend(problems);
        if traced && b.initcalls.count == 0 {
            b.problems.push("a traced boot without initcall_debug's lines: the kernel's link is not cut".into());
        }
        b.share_of_boot = b.loading.busy_us / 1000.0 / b.multi_user_ms;
    }
    b.trace_overrun =
        stats.lines().filter_map(|l| l.rsplit_once("overrun:").and_then(|(_, n)| n.trim().parse::<u64>().ok())).sum();
    if b.trace_overrun > 0 {
        b.problems.push(format!("the trace buffer lost {} events: loads are missing", b.trace_overrun));
    }
    if b.modules.is_empty() {
        b.problems.push("/proc/modules lists no module".into());
    }
    let trace_end = trace.lines().rev().filter_map(trace_line).find_map(|l| l.time.parse::<f64>().ok());
    let inits = module_inits(&dmesg);
    let mut untraced: Vec<&str> = Vec::new();
    for m in b.modules.iter().filter(|m| m.load_us.is_none()) {
        match (trace_end, inits.get(m.name.as_str())) {
            (Some(end), Some(&at)) if at > end => b.after_trace.push(m.name.clone()),
            _ => untraced.push(&m.name),
        }
    }
    if traced && !untraced.is_empty() {
        b.problems.push(format!("{} module(s) without a load in the trace: {}", untraced.len(), untraced.join(" ")));
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_time_spans() {
        assert_eq!(timespan_ms("2.345s"), Some(2345.0));
        assert_eq!(timespan_ms("843ms"), Some(843.0));
        assert_eq!(timespan_ms("1min 2.5s"), Some(62_500.0));
        assert_eq!(timespan_ms("500us"), Some(0.5));
        assert_eq!(timespan_ms("abc"), None);
        assert_eq!(timespan_ms(""), None);
    }

    #[test]
    fn analyze_lines() {
        let a = analyze(
            "Startup finished in 2.022s (kernel) + 1min 7.937s (userspace) = 1min 9.960s \n\
             multi-user.target reached after 1min 7.900s in userspace.\n",
        )
        .unwrap();
        let close = |x: f64, y: f64| (x - y).abs() < 1e-6;
        assert!(close(a.kernel_ms, 2022.0) && close(a.userspace_ms, 67_937.0) && close(a.total_ms, 69_960.0), "{a:?}");
        assert_eq!(a.initrd_ms, None);
        assert_eq!(a.target, "multi-user.target");
        assert!(close(a.target_reached_ms.unwrap(), 67_900.0));
        let b = analyze("Startup finished in 1s (kernel) + 2s (initrd) + 3s (userspace) = 6s").unwrap();
        assert_eq!(b.initrd_ms, Some(2000.0));
        assert!(analyze("Bootup is not yet finished").is_none());
    }

    #[test]
    fn critical_chain_in_both_glyph_sets() {
        let text = "The time when unit became active or started is printed after the \"@\" character.\n\
                    The time the unit took to start is printed after the \"+\" character.\n\n\
                    multi-user.target @7.900s\n\
                    `-cron.service @7.899s\n  `-basic.target @7.800s\n    `-systemd-udev-settle.service @2.1s +3.5s\n\
                    \x20     `--.mount @687ms\n";
        let c = critical_chain(text);
        assert_eq!(c.len(), 5, "{c:?}");
        assert_eq!((c[4].unit.as_str(), c[4].depth), ("-.mount", 4));
        assert_eq!((c[0].unit.as_str(), c[0].depth, c[0].at_ms), ("multi-user.target", 0, Some(7900.0)));
        assert_eq!((c[3].depth, c[3].took_ms), (3, Some(3500.0)));
        let u = critical_chain("multi-user.target @7.900s\n└─cron.service @7.899s\n  └─basic.target @7.8s\n");
        assert_eq!(u.iter().map(|l| l.depth).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(u[1].unit, "cron.service");
    }

    #[test]
    fn blame_lines() {
        let b = blame("     3.123s systemd-udev-settle.service\n1min 2.000s slow.service\n 12ms a.mount\n");
        assert_eq!(b.len(), 3);
        assert_eq!((b[1].unit.as_str(), b[1].ms), ("slow.service", 62_000.0));
    }

    /// A load by a udev worker, a refused duplicate by another, as Debian
    /// 6.1's function_graph prints them with funcgraph-proc.
    const TRACE: &str = "# tracer: function_graph
    3.100000 |   0)  (udev-worker)-130  | # 1000.000 us |  kernel_read_file_from_fd();
    3.101000 |   0)  (udev-worker)-130  |               |  load_module() {
    3.101010 |   0)  (udev-worker)-130  | # 3000.000 us |    module_sig_check();
    3.105000 |   0)  (udev-worker)-130  |   1.000 us    |    resolve_symbol();
    3.106000 |   0)  (udev-worker)-130  |   5.000 us    |    apply_relocate_add();
    3.107000 |   0)  (udev-worker)-130  |               |  /* module_load: e1000e */
    3.107100 |   0)  (udev-worker)-130  |               |    do_init_module() {
    3.107200 |   0)  (udev-worker)-130  | + 50.000 us   |      do_one_initcall();
    3.108000 |   0)  (udev-worker)-130  | ! 900.000 us  |    }
    3.108100 |   0)  (udev-worker)-130  | # 7100.000 us |  }
    3.200000 |   0)  (udev-worker)-131  | # 1000.000 us |  kernel_read_file_from_fd();
    3.201000 |   0)  (udev-worker)-131  |               |  load_module() {
    3.201010 |   0)  (udev-worker)-131  | # 3000.000 us |    module_sig_check();
    3.205000 |   0)  (udev-worker)-131  | # 4000.000 us |  }
";

    #[test]
    fn loads_are_named_by_their_module_load_event() {
        let marked = with_load_markers(TRACE);
        assert!(marked.contains("/* bootlink begin e1000e */") && marked.contains(&format!("bootlink begin {FAILED}")));
        let l = loads(TRACE);
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!((l[0].0.as_str(), l[0].1.name.as_str()), ("(udev-worker)-130", "e1000e"));
        assert!((l[0].1.total_us - 8100.0).abs() < 1.0, "{:?}", l[0].1);
        assert!(l[0].1.phases.iter().any(|p| p.name == "signature" && (p.duration_us - 3000.0).abs() < 1.0));
        assert_eq!(l[1].1.name, FAILED);
    }

    /// A real load with the scheduler's switches traced: crc32c_generic
    /// loaded by modprobe (pid 172) in the initrd of a `debian` boot (6.1,
    /// Debian's kernel, one CPU, -icount; 2026-11-29), cut from its
    /// console. The task is preempted (R+) for 28 µs inside its signature
    /// check; in do_init_module it is preempted by kthreadd (48 µs), then
    /// sleeps (D) while kthreadd makes the cryptomgr_test thread (5 µs)
    /// and while that thread runs the algorithm's self-test (810 µs).
    const CRC32C: &str = include_str!("testdata/crc32c-generic-6.1.trace");

    #[test]
    fn a_real_loads_phases_on_the_cpu() {
        let l = loads(CRC32C);
        assert_eq!(l.len(), 1, "{l:?}");
        let (task, load) = &l[0];
        assert_eq!((task.as_str(), load.name.as_str()), ("modprob-172", "crc32c_generic"));
        let sw = super::super::oncpu::switches(CRC32C);
        assert_eq!(sw.events, 11);
        let c = on_cpu(&sw, task, load).unwrap();
        let phase = |n: &str| {
            let w = load.phases.iter().find(|p| p.name == n).unwrap().duration_us;
            let p = c.phases.iter().find(|p| p.name == n).unwrap();
            (w, p.on_cpu_us, p.preempted_us, p.blocked_us)
        };
        let close = |got: f64, want: f64| assert!((got - want).abs() < 0.01, "{got} vs {want}");
        // signature: 6.503097 to 6.508554; off from the switch at 6.504416
        // (prev_state=R+) to modprobe's switch back at 6.504444.
        let (w, on, pre, blk) = phase("signature");
        close(w, (6.508554 - 6.503097) * 1e6);
        close(pre, (6.504444 - 6.504416) * 1e6);
        close(blk, 0.0);
        close(on, w - pre);
        // init: 6.508874 to 6.509819; preempted 6.508898-6.508946, asleep
        // 6.508950-6.508955 and 6.508960-6.509770 (the self-test's thread).
        let (w, on, pre, blk) = phase("init");
        close(w, (6.509819 - 6.508874) * 1e6);
        close(pre, (6.508946 - 6.508898) * 1e6);
        close(blk, (6.508955 - 6.508950 + 6.509770 - 6.508960) * 1e6);
        close(on, w - pre - blk);
        // The other phases ran without a switch: all on the CPU.
        for n in ["read", "layout", "symbols", "relocation", "finalize"] {
            let (w, on, pre, blk) = phase(n);
            assert!(w > 0.0 && on == w && pre == 0.0 && blk == 0.0, "{n}: {:?}", phase(n));
        }
        close(c.preempted_us, (6.504444 - 6.504416 + 6.508946 - 6.508898) * 1e6);
        close(c.on_cpu_us + c.preempted_us + c.blocked_us, load.phases.iter().map(|p| p.duration_us).sum());
        // Without the switches in the trace, no time on the CPU is claimed.
        let plain: String = CRC32C.lines().filter(|l| !l.contains("sched_switch")).map(|l| format!("{l}\n")).collect();
        assert!(on_cpu(&super::super::oncpu::switches(&plain), task, load).is_none());
        // The wall phases are the same with the switches' lines as without.
        assert_eq!(loads(&plain)[0].1, *load);
    }

    /// A module whose init was called after the trace's last event was
    /// loaded once the trace had stopped: listed apart, not a problem; one
    /// whose init ran inside the trace but has no load there is a problem.
    #[test]
    fn a_load_after_the_trace_stopped_is_not_a_missing_one() {
        let section =
            |tag: &str, body: &str| format!("=== BOOTLINK BEGIN {tag} ===\n{body}=== BOOTLINK END {tag} ===\n");
        let modules = "e1000e 1 0 - Live 0x0\nsnd_late 1 0 - Live 0x0\nlost 1 0 - Live 0x0\n";
        let dmesg = "[    3.107150] calling  e1000_init_module+0x0/0x1000 [e1000e] @ 130\n\
                     [    3.107190] initcall e1000_init_module+0x0/0x1000 [e1000e] returned 0 after 40 usecs\n\
                     [    3.150000] calling  lost_init+0x0/0x10 [lost] @ 132\n\
                     [    3.150010] initcall lost_init+0x0/0x10 [lost] returned 0 after 10 usecs\n\
                     [    3.900000] calling  late_init+0x0/0x10 [snd_late] @ 140\n\
                     [    3.900010] initcall late_init+0x0/0x10 [snd_late] returned 0 after 10 usecs\n";
        let log = [section("modules", modules), section("dmesg", dmesg), section("trace", TRACE)].concat();
        let b = boot(&log, true);
        assert_eq!(b.after_trace, ["snd_late"]);
        assert!(b.problems.iter().any(|p| p == "1 module(s) without a load in the trace: lost"), "{:?}", b.problems);
        assert_eq!(module_inits(dmesg).get("snd_late"), Some(&3.9));
    }

    /// getty's banner and prompt written into the report's lines (as a
    /// 6.12 boot had them) do not hide systemd-analyze's figures.
    #[test]
    fn getty_in_the_report_is_read_around() {
        let log = "=== BOOTLINK BEGIN analyze ===\n\nDebian GNU/Linux 12 bootlink-system ttyS0\n\n\
                   bootlink-system login: Startup finished in 6.002s (kernel) + 2.772s (userspace) = 8.775s \n\
                   multi-user.target reached after 2.631s in userspace.\n=== BOOTLINK END analyze ===\n";
        let b = boot(log, false);
        assert_eq!((b.analyze.kernel_ms, b.analyze.userspace_ms), (6002.0, 2772.0));
        assert_eq!(b.analyze.target_reached_ms, Some(2631.0));
        assert!(!without_getty(log).contains("login:"));
    }

    #[test]
    fn a_console_without_the_report_is_a_problem() {
        let b = boot("[    0.000000] Linux version 6.1\n", true);
        assert!(b.problems[0].contains("no state, analyze"), "{:?}", b.problems);
    }
}
