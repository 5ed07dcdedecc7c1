//! Per-module load phases from an ftrace function_graph trace, limited to a
//! few landmark functions so tracing costs little.
//!
//! Debian's 6.1 kernel inlines layout_and_allocate, simplify_symbols and
//! apply_relocations, so the phases are cut at functions that stay
//! traceable, in the order load_module runs them:
//!
//! | phase      | from                                   | to                                   |
//! |------------|----------------------------------------|--------------------------------------|
//! | read       | kernel_read_file_from_fd (6.1) entry   | its exit (before load_module)        |
//! |            | or kernel_read_file (6.6 and later)    |                                      |
//! | signature  | module_sig_check entry                 | its exit                             |
//! | layout     | module_sig_check exit                  | simplify_symbols entry (or the first |
//! |            |                                        | resolve_symbol, or the relocation)   |
//! | symbols    | simplify_symbols entry, or the first   | its exit, or the last resolve_symbol |
//! |            | resolve_symbol entry                   | exit                                 |
//! | relocation | first apply_relocate_add entry         | last apply_relocate_add exit         |
//! | finalize   | last apply_relocate_add exit           | do_init_module entry                 |
//! | init       | do_init_module entry                   | its exit                             |
//!
//! "layout" therefore also holds the ELF checks before layout_and_allocate;
//! the symbols phase is simplify_symbols where the kernel keeps it a
//! function (the self-built 6.1 kernel), traced once per load, and the
//! lookups are counted from the module files on the host; a kernel that
//! inlines it (Debian's 6.1, the 6.12 build) has every resolve_symbol call
//! traced and counted, which costs each lookup about 1 µs of tracing under
//! TCG. The total is read + load_module, and the phases never add up to more
//! (a leaf call is printed at its ring-buffer entry time, a few µs late
//! under TCG, so do_init_module's end is clamped to load_module's return).

use crate::run::results::{ModuleLoad, Phase};

/// The functions that cut a load into its phases.
pub(crate) const PHASE_FUNCTIONS: &[&str] = &[
    "kernel_read_file_from_fd",
    "kernel_read_file",
    "load_module",
    "module_sig_check",
    SYMBOLS_LANDMARK.0,
    "apply_relocate_add",
    "do_init_module",
];

/// The symbols phase's landmark, and the one traced where the kernel has
/// no such function (inlined): every lookup.
const SYMBOLS_LANDMARK: (&str, &str) = ("simplify_symbols", "resolve_symbol");

/// What a run records as the function its symbols phase was timed at
/// (`symbols_timed_at`): [`SYMBOLS_LANDMARK`]'s first, simplify_symbols,
/// one traced call per load, where the kernel keeps it a function; its
/// second, resolve_symbol, where the kernel inlined it and every lookup
/// was traced (each paying the tracer's cost, about 1 µs under TCG).
/// None when the trace has neither (no load reached its symbols).
pub fn symbols_timed_at(trace: &str) -> Option<&'static str> {
    let mut each = false;
    for ev in trace.lines().filter_map(parse_line) {
        if let Kind::Open(f) | Kind::Leaf(f) = ev.kind {
            if f == SYMBOLS_LANDMARK.0 {
                return Some(SYMBOLS_LANDMARK.0);
            }
            each |= f == SYMBOLS_LANDMARK.1;
        }
    }
    each.then_some(SYMBOLS_LANDMARK.1)
}

/// Every function to put in set_ftrace_filter: the phases', finalize's and init's landmarks.
pub fn traced() -> impl Iterator<Item = &'static str> {
    PHASE_FUNCTIONS.iter().chain(FINALIZE_LANDMARKS).chain(INIT_LANDMARKS.iter().map(|l| &l.0)).copied()
}

/// The functions inside do_init_module that cut init into its links
/// ([`crate::run::results::INIT_STEPS`]): the module's init function and
/// the exported helpers init functions spend their time in, each with the
/// link it counts for. All are called often at boot, rarely after it, so
/// tracing them costs the load little.
const INIT_LANDMARKS: &[(&str, &str)] = &[
    ("do_one_initcall", "init function"),
    ("crypto_register_alg", "crypto registration"),
    ("kmem_cache_create_usercopy", "slab caches"),
    ("register_pernet_subsys", "per-netns setup"),
    ("register_pernet_device", "per-netns setup"),
    ("alloc_workqueue", "workqueues"),
    ("register_filesystem", "filesystem registration"),
    ("async_synchronize_full", "async wait"),
];

/// Cut init [start, end) into [`crate::run::results::INIT_STEPS`]: each
/// helper's calls that no other traced helper encloses are its link's;
/// "init function" is do_one_initcall less the links inside it; "async
/// wait" is do_init_module's async_synchronize_full; "after init" is the
/// rest of do_init_module (the LIVE notifiers, the uevent, freeing init
/// memory), so the links add up to init exactly. No do_one_initcall
/// traced (a kernel that cannot trace it): no links.
fn init_steps(marks: &[(String, f64, f64)], start: f64, end: f64) -> Vec<Phase> {
    let mut inside: Vec<&(String, f64, f64)> = marks.iter().filter(|m| m.1 >= start && m.1 <= end).collect();
    inside.sort_by(|x, y| x.1.total_cmp(&y.1));
    let Some(call) = inside.iter().find(|m| m.0 == "do_one_initcall").map(|m| (m.1, m.2.min(end))) else {
        return Vec::new();
    };
    let link_of = |f: &str| INIT_LANDMARKS.iter().find(|l| l.0 == f).map(|l| l.1);
    // (link, first entry, summed duration)
    let mut sums: Vec<(&str, f64, f64)> = Vec::new();
    let mut covered_to = f64::MIN;
    for m in inside.iter().filter(|m| m.0 != "do_one_initcall") {
        if m.1 < covered_to {
            continue; // inside an earlier helper: that helper's time
        }
        let Some(link) = link_of(&m.0) else { continue };
        let (a, b) = (m.1, m.2.min(end).max(m.1));
        covered_to = b;
        match sums.iter_mut().find(|s| s.0 == link) {
            Some(s) => s.2 += b - a,
            None => sums.push((link, a, b - a)),
        }
    }
    let in_call: f64 = sums.iter().filter(|s| s.0 != "async wait").map(|s| s.2).sum();
    let total = end - start;
    let mut out: Vec<Phase> = Vec::new();
    for name in crate::run::results::INIT_STEPS {
        let (a, d) = match *name {
            "init function" => (call.0, (call.1 - call.0 - in_call).max(0.0)),
            "after init" => continue,
            n => match sums.iter().find(|s| s.0 == n) {
                Some(s) => (s.1, s.2),
                None => continue,
            },
        };
        out.push(Phase { name: name.to_string(), start_us: a, duration_us: d });
    }
    add_up(out, total, "after init", call.1)
}

/// A phase's links made to add up to its `total` exactly: scaled down when
/// the rounding of printed times makes them exceed it, then `rest` (from
/// `rest_start`) takes what they leave.
fn add_up(mut links: Vec<Phase>, total: f64, rest: &str, rest_start: f64) -> Vec<Phase> {
    let used: f64 = links.iter().map(|p| p.duration_us).sum();
    if used > total {
        for p in &mut links {
            p.duration_us *= total / used;
        }
    }
    let used: f64 = links.iter().map(|p| p.duration_us).sum();
    links.push(Phase { name: rest.into(), start_us: rest_start, duration_us: (total - used).max(0.0) });
    links
}

/// Landmarks renamed after 6.1: (6.1's name, the name since 6.4). 6.4 split
/// a module's memory into `mod->mem[]` regions, and complete_formation()
/// now calls module_enable_rodata_ro(), module_enable_data_nx() and
/// module_enable_text_rox() where 6.1 calls module_enable_ro(),
/// module_enable_nx() and module_enable_x(): the same first and last
/// step of the memory protection. The guest traces whichever name its
/// kernel has; the trace is read in 6.1's names.
const RENAMED: &[(&str, &str)] =
    &[("module_enable_ro", "module_enable_rodata_ro"), ("module_enable_x", "module_enable_text_rox")];

/// A traced function's name in 6.1's terms.
fn canonical(f: &str) -> &str {
    RENAMED.iter().find(|r| r.1 == f).map_or(f, |r| r.0)
}

/// The lines that put every landmark in `$T/set_ftrace_filter`: a renamed
/// one by its 6.1 name, else (quietly) by its later name; a function the
/// kernel cannot trace (inlined, notrace, not built) is said once by its
/// 6.1 name.
pub fn filter_script() -> String {
    let mut s = String::new();
    for f in traced() {
        let add = |name: &str| format!("echo {name} >> $T/set_ftrace_filter");
        if f == SYMBOLS_LANDMARK.0 {
            let each = SYMBOLS_LANDMARK.1;
            s.push_str(&format!("{} 2>/dev/null || {} || echo 'bootlink: cannot trace {each}'\n", add(f), add(each)));
            continue;
        }
        match RENAMED.iter().find(|r| r.0 == f) {
            Some(&(_, later)) => {
                s.push_str(&format!("{} 2>/dev/null || {} || echo 'bootlink: cannot trace {f}'\n", add(f), add(later)))
            }
            None => s.push_str(&format!("{} || echo 'bootlink: cannot trace {f}'\n", add(f))),
        }
    }
    s
}

/// The functions around finalize that Debian's 6.1 kernel lets ftrace see
/// (ftrace_module_init/enable, the trace notifiers, bpf_event_notify and
/// ddebug_add_module are notrace): the links between them are timed as gaps.
const FINALIZE_LANDMARKS: &[&str] = &[
    "add_kallsyms",
    "module_finalize",
    "unwind_module_init",
    "module_enable_ro",
    "module_enable_x",
    "klp_module_coming",
    "blocking_notifier_call_chain_robust",
    "jump_label_module_notify",
    "tracepoint_module_notify",
    "srcu_module_notify",
    "static_call_module_notify",
    "kprobes_module_callback",
    "btf_module_notify",
    "parse_args",
    "mod_sysfs_setup",
];

/// Cut finalize [start, end) into [`FINALIZE_STEPS`] from its landmarks:
/// - kallsyms: add_kallsyms; ORC sort: unwind_module_init; alternatives:
///   the rest of module_finalize;
/// - memory protection: module_enable_ro's entry to module_enable_x's exit
///   (6.12: module_enable_rodata_ro's to module_enable_text_rox's, read
///   under the 6.1 names, see [`RENAMED`]);
/// - ftrace weak-fn check: from module_enable_x's exit to the next landmark
///   (klp_module_coming or the COMING notifier chain): ftrace_module_enable
///   runs there and nothing else does;
/// - in the notifier chain (blocking_notifier_call_chain_robust), the
///   notifiers run by priority, and in the order they registered within
///   one priority. trace_events' (priority 1, registered after
///   jump_label's) adds the event files: notrace, so "trace event files"
///   is the gap after jump_label_module_notify. trace.c's (priority 0)
///   updates the eval maps; it registers from a workqueue queued at
///   fs_initcall, so where it sits among the priority-0 notifiers is
///   decided by a race at boot (Debian's x86-64 6.1: before
///   tracepoint_module_notify; arm64: after it). "trace eval maps" is
///   therefore every untraced gap of the chain after the event files (from
///   the exit of the next traced notifier to the chain's end, the traced
///   notifiers taken out): the eval maps wherever they ran, and the other
///   notrace notifiers (bpf_event_notify), which take microseconds;
/// - jump labels, static calls, BTF: the traced notifiers' own calls
///   (jump_label_module_notify, static_call_module_notify,
///   btf_module_notify); sysfs: mod_sysfs_setup (the module's kobject,
///   its parameters' and sections' attributes, holders);
/// - rest: what is left, so the steps add up to finalize exactly
///   (ftrace_module_init and the bug table, the other notifiers,
///   parse_args, the small gaps).
fn finalize_steps(marks: &[(String, f64, f64)], start: f64, end: f64) -> Vec<Phase> {
    if marks.is_empty() || end <= start {
        return Vec::new();
    }
    let inside: Vec<&(String, f64, f64)> = marks.iter().filter(|m| m.1 >= start && m.1 <= end).collect();
    let find = |n: &str| inside.iter().find(|m| m.0 == n).map(|m| (m.1, m.2.min(end)));
    let mut steps: Vec<(&str, f64, f64)> = Vec::new();
    if let Some((a, b)) = find("add_kallsyms") {
        steps.push(("kallsyms", a, b));
    }
    let orc = find("unwind_module_init");
    if let Some((a, b)) = find("module_finalize") {
        let orc_us = orc.map(|(x, y)| y - x).unwrap_or(0.0);
        // Start at module_finalize, as long as it minus the sort.
        steps.push(("alternatives", a, (b - orc_us).max(a)));
    }
    if let Some((a, b)) = orc {
        steps.push(("ORC sort", a, b));
    }
    let x_end = find("module_enable_x").map(|(_, b)| b);
    if let (Some((a, _)), Some(b)) = (find("module_enable_ro"), x_end) {
        steps.push(("memory protection", a, b));
    }
    let chain = find("blocking_notifier_call_chain_robust");
    if let Some(a) = x_end {
        let next =
            inside.iter().filter(|m| m.1 >= a && m.0 != "module_enable_x").map(|m| m.1).fold(f64::INFINITY, f64::min);
        if next.is_finite() {
            steps.push(("ftrace weak-fn check", a, next));
        }
    }
    if let Some((c0, c1)) = chain {
        // The traced notifiers inside the chain, in order.
        let notifier = |n: &str| n.ends_with("_notify") || n == "kprobes_module_callback";
        let mut calls: Vec<&&(String, f64, f64)> =
            inside.iter().filter(|m| m.1 >= c0 && m.1 <= c1 && notifier(&m.0)).collect();
        calls.sort_by(|x, y| x.1.total_cmp(&y.1));
        let next_after = |t: f64| calls.iter().map(|m| m.1).find(|&s| s >= t).unwrap_or(c1);
        if let Some(j) = calls.iter().position(|m| m.0 == "jump_label_module_notify") {
            let a = calls[j].2;
            steps.push(("trace event files", a, next_after(a)));
            // The untraced gaps after the event files, to the chain's end:
            // one step starting at the first gap, as long as all of them.
            let rest = &calls[j + 1..];
            if let Some(last) = rest.last() {
                let between: f64 = rest.windows(2).map(|w| (w[1].1 - w[0].2).max(0.0)).sum();
                let gaps = between + (c1 - last.2).max(0.0);
                let a = rest[0].2;
                steps.push(("trace eval maps", a, a + gaps));
            }
        }
    }
    // Notifiers and setup steps the kernel lets ftrace see: each its own
    // call (the first inside finalize; do_init_module's LIVE calls are
    // past its end).
    for (step, f) in [
        ("jump labels", "jump_label_module_notify"),
        ("static calls", "static_call_module_notify"),
        ("BTF", "btf_module_notify"),
        ("sysfs", "mod_sysfs_setup"),
    ] {
        if let Some((a, b)) = find(f) {
            steps.push((step, a, b));
        }
    }
    let total = end - start;
    let mut out: Vec<Phase> = Vec::new();
    for name in crate::run::results::FINALIZE_STEPS {
        if let Some(&(_, a, b)) = steps.iter().find(|s| s.0 == *name) {
            out.push(Phase { name: name.to_string(), start_us: a, duration_us: (b - a).max(0.0) });
        }
    }
    add_up(out, total, "rest", start)
}

/// The marker the init script writes to trace_marker before each insmod.
pub(crate) const MARKER: &str = "bootlink begin ";

#[derive(Debug, Clone, PartialEq)]
struct Event {
    /// Seconds (as printed).
    t: f64,
    /// The CPU column.
    cpu: u32,
    /// The PID of the funcgraph-proc column ("insmod-88"), when printed.
    pid: Option<u32>,
    /// For leaf calls: duration in µs; for closing braces: duration; None for an opening brace.
    dur: Option<f64>,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Leaf(String),
    Open(String),
    Close,
    Marker(String),
}

fn parse_line(line: &str) -> Option<Event> {
    // "    3.156786 |   0)               |  load_module() {"
    // With funcgraph-proc, the task follows the CPU in its own column:
    // "    3.156786 |   0)   insmod-88    |               |  load_module() {"
    let (t, rest) = line.split_once('|')?;
    let t: f64 = t.trim().parse().ok()?;
    let (cpu, after) = rest.split_once(')')?;
    let cpu: u32 = cpu.trim().parse().ok()?;
    let (first, rest) = after.split_once('|')?;
    let pid = first.trim().rsplit_once('-').and_then(|(_, p)| p.parse::<u32>().ok());
    let (dur_col, func) = match pid {
        Some(_) => rest.split_once('|')?,
        None => (first, rest),
    };
    let func = func.trim();
    let dur = dur_col
        .trim()
        .trim_start_matches(['+', '!', '#', '*', '@', '$'])
        .trim()
        .strip_suffix("us")
        .and_then(|d| d.trim().parse::<f64>().ok());
    let kind = if let Some(c) = func.strip_prefix("/*").and_then(|c| c.strip_suffix("*/")) {
        Kind::Marker(c.trim().to_string())
    } else if func.starts_with('}') {
        Kind::Close
    } else if let Some(f) = func.strip_suffix("() {") {
        Kind::Open(f.to_string())
    } else if let Some(f) = func.strip_suffix("();") {
        Kind::Leaf(f.to_string())
    } else {
        return None;
    };
    Some(Event { t, cpu, pid, dur, kind })
}

#[derive(Default)]
struct Acc {
    name: String,
    read: Option<(f64, f64)>,
    /// kernel_read_file: inside kernel_read_file_from_fd on 6.1, called
    /// directly by init_module_from_file on 6.6 and later.
    read_inner: Option<(f64, f64)>,
    load: Option<(f64, f64)>,
    sig: Option<(f64, f64)>,
    sym_first: Option<f64>,
    sym_last: Option<f64>,
    lookups: u64,
    /// simplify_symbols was traced: the lookups were not.
    symbols_whole: bool,
    rel_first: Option<f64>,
    rel_last: Option<f64>,
    init: Option<(f64, f64)>,
    /// Finalize's landmark calls inside load_module: name, entry, exit.
    marks: Vec<(String, f64, f64)>,
    /// Init's landmark calls inside load_module: name, entry, exit.
    init_marks: Vec<(String, f64, f64)>,
}

impl Acc {
    fn finish(self) -> Option<ModuleLoad> {
        let (l0, l1) = self.load?;
        let (r0, r1) = self.read.or(self.read_inner).map(|(a, b)| (a.min(l0), b.min(l0))).unwrap_or((l0, l0));
        let mut phases = vec![Phase { name: "read".to_string(), start_us: r0, duration_us: (r1 - r0).max(0.0) }];
        // The phases inside load_module follow one another: a leaf's printed
        // time is its ring-buffer entry, a few µs after the call, so its
        // entry + duration can overlap the next phase or pass load_module's
        // return. Each phase starts where the previous one ended and stops
        // at the return, so together they never exceed the load.
        let mut cursor = l0;
        let mut push = |name: &str, a: f64, b: f64| {
            let start = a.max(cursor).min(l1);
            let end = b.min(l1).max(start);
            cursor = end;
            phases.push(Phase { name: name.to_string(), start_us: start, duration_us: end - start });
        };
        let sig_end = match self.sig {
            Some((a, b)) => {
                push("signature", a, b);
                b
            }
            None => l0,
        };
        let init_start = self.init.map(|(a, _)| a).unwrap_or(l1);
        let rel = self.rel_first.zip(self.rel_last);
        let sym = self.sym_first.zip(self.sym_last);
        let layout_end = sym.map(|(a, _)| a).or(rel.map(|(a, _)| a)).unwrap_or(init_start);
        push("layout", sig_end, layout_end);
        if let Some((a, b)) = sym {
            push("symbols", a, b);
        }
        let fin_start = match rel {
            Some((a, b)) => {
                push("relocation", a, b);
                b
            }
            None => sym.map(|(_, b)| b).unwrap_or(layout_end),
        };
        push("finalize", fin_start, init_start);
        let finalize_steps = finalize_steps(&self.marks, fin_start, init_start);
        let mut init_steps = Vec::new();
        if let Some((a, b)) = self.init {
            push("init", a, b);
            let init = phases.last().expect("init was pushed");
            init_steps = self::init_steps(&self.init_marks, init.start_us, init.start_us + init.duration_us);
        }
        Some(ModuleLoad {
            name: self.name,
            start_us: r0,
            total_us: (r1 - r0) + (l1 - l0),
            phases,
            lookups: (!self.symbols_whole).then_some(self.lookups),
            size: 0,
            status: 0,
            finalize_steps,
            init_steps,
            worker: None,
        })
    }
}

/// Parse the trace; one ModuleLoad per marker that was followed by a
/// load_module. Times become microseconds.
///
/// With funcgraph-proc, lines are attributed by PID: each marker starts the
/// accumulator of the task that wrote it (the init script writes it from
/// the subshell that then execs insmod), so loads running at once on
/// several CPUs, their lines interleaved, each get their own. Open braces
/// are matched per task (the kernel keeps the return stack per task, and a
/// task may move to another CPU inside load_module); without the proc
/// column, per CPU, and every line belongs to the last marker.
pub fn parse(trace: &str) -> Vec<ModuleLoad> {
    use std::collections::HashMap;
    let us = |s: f64| s * 1e6;
    // Loads in marker order; `open` maps a PID (None: no proc column) to its
    // load still being read.
    let mut loads: Vec<Acc> = Vec::new();
    let mut open: HashMap<Option<u32>, usize> = HashMap::new();
    // Open braces not yet closed, per task (or per CPU): function name and entry time.
    type Stack = Vec<(String, f64)>;
    let mut stacks: HashMap<(Option<u32>, u32), Stack> = HashMap::new();
    for line in trace.lines() {
        let Some(ev) = parse_line(line) else { continue };
        let stack_key = match ev.pid {
            Some(p) => (Some(p), 0),
            None => (None, ev.cpu),
        };
        match ev.kind {
            Kind::Marker(m) => {
                if let Some(name) = m.strip_prefix(MARKER.trim_end()) {
                    stacks.remove(&stack_key);
                    if ev.pid.is_none() {
                        stacks.clear();
                    }
                    open.insert(ev.pid, loads.len());
                    loads.push(Acc { name: name.trim().to_string(), ..Default::default() });
                }
            }
            Kind::Open(f) => stacks.entry(stack_key).or_default().push((f, us(ev.t))),
            Kind::Close => {
                let Some((f, t0)) = stacks.get_mut(&stack_key).and_then(Vec::pop) else { continue };
                if let Some(&i) = open.get(&ev.pid) {
                    record(&mut loads[i], &f, t0, us(ev.t));
                }
            }
            Kind::Leaf(f) => {
                let t0 = us(ev.t);
                if let Some(&i) = open.get(&ev.pid) {
                    record(&mut loads[i], &f, t0, t0 + ev.dur.unwrap_or(0.0));
                }
            }
        }
    }
    // simplify_symbols traced in any load: no lookup was (the script traces
    // one or the other), so no load's count is known from the trace, even
    // a module's without undefined symbols.
    if loads.iter().any(|a| a.symbols_whole) {
        for a in &mut loads {
            a.symbols_whole = true;
        }
    }
    let mut out: Vec<ModuleLoad> = loads.into_iter().filter_map(Acc::finish).collect();
    // do_one_initcall was traced if any load called it: a load that did not
    // has no init function (a library module), and its init is all "after init".
    if out.iter().any(|m| !m.init_steps.is_empty()) {
        for m in out.iter_mut().filter(|m| m.init_steps.is_empty()) {
            if let Some(p) = m.phases.iter().find(|p| p.name == "init") {
                m.init_steps = vec![Phase { name: "after init".into(), ..p.clone() }];
            }
        }
    }
    out
}

fn record(a: &mut Acc, f: &str, t0: f64, t1: f64) {
    match canonical(f) {
        "kernel_read_file_from_fd" => a.read = Some((t0, t1)),
        // The first one only: a module's init may read firmware.
        "kernel_read_file" if a.load.is_none() && a.read_inner.is_none() => a.read_inner = Some((t0, t1)),
        "load_module" => a.load = Some((t0, t1)),
        "module_sig_check" => a.sig = Some((t0, t1)),
        "simplify_symbols" => {
            a.symbols_whole = true;
            a.sym_first = Some(a.sym_first.map_or(t0, |f| f.min(t0)));
            a.sym_last = Some(a.sym_last.map_or(t1, |l| l.max(t1)));
        }
        "resolve_symbol" => {
            a.lookups += 1;
            a.sym_first.get_or_insert(t0);
            a.sym_last = Some(t1);
        }
        "apply_relocate_add" => {
            a.rel_first.get_or_insert(t0);
            a.rel_last = Some(t1);
        }
        "do_init_module" => a.init = Some((t0, t1)),
        // Finalize's landmarks count only inside load_module, before init
        // (do_init_module runs the same notifiers again for MODULE_STATE_LIVE).
        f if FINALIZE_LANDMARKS.contains(&f) && a.init.is_none() && a.load.is_none() => {
            a.marks.push((f.to_string(), t0, t1))
        }
        f if INIT_LANDMARKS.iter().any(|l| l.0 == f) && a.load.is_none() => a.init_marks.push((f.to_string(), t0, t1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as Debian 6.1's function_graph prints them (funcgraph-abstime).
    const SAMPLE: &str = "# tracer: function_graph
    3.151471 |   0)               |  /* bootlink begin crc16 */
 ------------------------------------------
 0)     sh-83      =>   insmod-88
 ------------------------------------------

    3.155684 |   0) # 1087.279 us |  kernel_read_file_from_fd();
    3.156786 |   0)               |  load_module() {
    3.156815 |   0) # 3888.597 us |    module_sig_check();
    3.163000 |   0)   1.500 us    |    resolve_symbol();
    3.163100 |   0)   2.000 us    |    resolve_symbol();
    3.163907 |   0) + 89.454 us   |    apply_relocate_add();
    3.164005 |   0)   7.311 us    |    apply_relocate_add();
    3.166879 |   0) ! 416.564 us  |    do_init_module();
    3.167305 |   0) * 10522.55 us |  }
    3.171386 |   0)               |  /* bootlink begin mbcache */
    3.173719 |   0) ! 326.630 us  |  kernel_read_file_from_fd();
    3.174044 |   0)               |  load_module() {
    3.174047 |   0) # 2900.115 us |    module_sig_check();
    3.177762 |   0) + 11.908 us   |    apply_relocate_add();
    3.182312 |   0) ! 824.786 us  |    do_init_module();
    3.183143 |   0) # 9099.846 us |  }
";

    #[test]
    fn phases_from_a_real_trace_shape() {
        let m = parse(SAMPLE);
        assert_eq!(m.len(), 2);
        let c = &m[0];
        assert_eq!(c.name, "crc16");
        assert_eq!(c.lookups, Some(2));
        let p: Vec<(&str, f64)> = c.phases.iter().map(|p| (p.name.as_str(), p.duration_us)).collect();
        let get = |n: &str| p.iter().find(|x| x.0 == n).unwrap().1;
        assert!((get("read") - 1087.279).abs() < 1e-3);
        assert!((get("signature") - 3888.597).abs() < 1e-3);
        assert!((get("init") - 416.564).abs() < 1e-3);
        assert!((get("symbols") - (3.163102 - 3.163) * 1e6).abs() < 1e-3);
        // total = read + load_module
        assert!((c.total_us - (1087.279 + (3.167305 - 3.156786) * 1e6)).abs() < 1e-3);
        let sum: f64 = c.phases.iter().map(|p| p.duration_us).sum();
        assert!(sum <= c.total_us + 1e-6, "{sum} > {}", c.total_us);
        // No resolve_symbol at all: no symbols phase, layout runs to the relocation.
        let mb = &m[1];
        assert_eq!(mb.lookups, Some(0));
        assert!(mb.phases.iter().all(|p| p.name != "symbols"));
        let sum: f64 = mb.phases.iter().map(|p| p.duration_us).sum();
        assert!(sum <= mb.total_us + 1e-6);
    }

    // Real lines (overlay, Debian 6.1 under TCG): do_init_module's printed
    // entry + duration ends 7 µs after load_module's closing brace.
    #[test]
    fn a_late_leaf_stays_inside_load_module() {
        let t = "    4.252081 |   0)               |  /* bootlink begin overlay */
    4.252483 |   0) ! 825.511 us  |  kernel_read_file_from_fd();
    4.253310 |   0)               |  load_module() {
    4.253310 |   0)   0.735 us    |    module_sig_check();
    4.255304 |   0)   7.476 us    |    apply_relocate_add();
    4.263071 |   0) ! 264.148 us  |    do_init_module();
    4.263328 |   0) * 10018.07 us |  }
";
        let m = &parse(t)[0];
        let sum: f64 = m.phases.iter().map(|p| p.duration_us).sum();
        assert!(sum <= m.total_us + 1e-6, "{sum} > {}", m.total_us);
        let init = m.phases.iter().find(|p| p.name == "init").unwrap();
        assert!((init.duration_us - 257.0).abs() < 1e-3, "{}", init.duration_us);
    }

    // Debian 6.12: finit_module reads through kernel_read_file directly.
    // A resolve_symbol leaf whose entry + duration passes the first
    // relocation, and a signature check printed late: the phases follow one
    // another, each starts where the previous ended, and their sum stays
    // inside the load (jbd2 once came out 7 µs over).
    #[test]
    fn overlapping_leaves_do_not_add_up_past_the_load() {
        let t = "    5.000000 |   0)               |  /* bootlink begin jbd2 */
    5.000100 |   0) ! 100.000 us  |  kernel_read_file_from_fd();
    5.000300 |   0)               |  load_module() {
    5.000305 |   0) ! 200.000 us  |    module_sig_check();
    5.000400 |   0)   1.000 us    |    module_enable_x();
    5.001000 |   0)  30.000 us    |    resolve_symbol();
    5.001020 |   0)  10.000 us    |    apply_relocate_add();
    5.001100 |   0) ! 150.000 us  |    do_init_module();
    5.001240 |   0) * 940.000 us  |  }
";
        let m = &parse(t)[0];
        let sum: f64 = m.phases.iter().map(|p| p.duration_us).sum();
        assert!(sum <= m.total_us + 1e-6, "{sum} > {}", m.total_us);
        let mut end = f64::MIN;
        for p in m.phases.iter().skip(1) {
            assert!(p.start_us >= end - 1e-6, "{} starts at {} before {end}", p.name, p.start_us);
            end = p.start_us + p.duration_us;
        }
        let sig = m.phases.iter().find(|p| p.name == "signature").unwrap();
        assert!((sig.duration_us - 200.0).abs() < 1e-3, "{}", sig.duration_us);
        let rel = m.phases.iter().find(|p| p.name == "relocation").unwrap();
        // Symbols keep their 30 µs; the relocation, printed inside them, starts after.
        assert!(rel.duration_us.abs() < 1e-3, "{}", rel.duration_us);
        let init = m.phases.iter().find(|p| p.name == "init").unwrap();
        assert!((init.duration_us - 140.0).abs() < 1e-3, "{}", init.duration_us);
    }

    #[test]
    fn read_phase_from_kernel_read_file_on_newer_kernels() {
        let t = "    2.000000 |   0)               |  /* bootlink begin fat */
    2.000100 |   0) ! 300.000 us  |  kernel_read_file();
    2.000500 |   0)               |  load_module() {
    2.000510 |   0)   0.700 us    |    module_sig_check();
    2.000900 |   0)   9.000 us    |    apply_relocate_add();
    2.001000 |   0) ! 100.000 us  |    do_init_module();
    2.001200 |   0) ! 700.000 us  |  }
";
        let m = &parse(t)[0];
        let read = m.phases.iter().find(|p| p.name == "read").unwrap();
        assert!((read.duration_us - 300.0).abs() < 1e-3, "{}", read.duration_us);
        assert!((m.total_us - 1000.0).abs() < 1e-3, "{}", m.total_us);
    }

    // Real lines: xfs on Debian 6.1 under TCG (-icount), the finalize
    // landmarks traced (resolve_symbol and apply_relocate_add lines cut).
    const XFS: &str = "    3.592947 |   0)               |  /* bootlink begin xfs */
    3.593348 |   0)               |  kernel_read_file_from_fd() {
    3.593349 |   0) * 10059.83 us |    kernel_read_file();
    3.603409 |   0) * 10061.23 us |  }
    3.603410 |   0)               |  load_module() {
    3.603411 |   0)   0.735 us    |    module_sig_check();
    3.611725 |   0)   1.952 us    |    resolve_symbol();
    3.618000 |   0)   7.000 us    |    apply_relocate_add();
    3.618707 |   0) # 1393.705 us |    add_kallsyms();
    3.620101 |   0)               |    module_finalize() {
    3.622317 |   0) * 37760.38 us |      unwind_module_init();
    3.660078 |   0) * 39976.58 us |    }
    3.662566 |   0) ! 302.014 us  |    module_enable_ro();
    3.663006 |   0) + 71.321 us   |    module_enable_x();
    4.198822 |   0)   0.769 us    |    klp_module_coming();
    4.198824 |   0)               |    blocking_notifier_call_chain_robust() {
    4.198824 |   0) ! 502.055 us  |      jump_label_module_notify();
    4.225060 |   0) # 5992.977 us |      static_call_module_notify();
    4.231053 |   0)   0.718 us    |      kprobes_module_callback();
    4.231055 |   0) # 4749.759 us |      btf_module_notify();
    4.432367 |   0)   0.996 us    |      tracepoint_module_notify();
    4.432369 |   0)   0.687 us    |      srcu_module_notify();
    4.432370 |   0) @ 233546.9 us |    }
    4.432371 |   0)   0.713 us    |    parse_args();
    4.432372 |   0) ! 108.296 us  |    mod_sysfs_setup();
    4.432811 |   0)               |    do_init_module() {
    4.434698 |   0)   0.962 us    |      jump_label_module_notify();
    4.434703 |   0)   0.729 us    |      btf_module_notify();
    4.434704 |   0)   0.681 us    |      tracepoint_module_notify();
    4.438144 |   0) ! 254.125 us  |      module_enable_ro();
    4.438401 |   0) # 5589.860 us |    }
    4.438401 |   0) @ 834991.2 us |  }
";

    #[test]
    fn finalize_splits_into_its_links_and_adds_up() {
        let m = &parse(XFS)[0];
        let fin = m.phases.iter().find(|p| p.name == "finalize").unwrap().duration_us;
        let sum: f64 = m.finalize_steps.iter().map(|p| p.duration_us).sum();
        assert!((sum - fin).abs() < 1e-6, "{sum} != {fin}");
        let step = |n: &str| m.finalize_steps.iter().find(|p| p.name == n).map(|p| p.duration_us).unwrap();
        let close = |n: &str, want: f64| assert!((step(n) - want).abs() < 1.0, "{n}: {} vs {want}", step(n));
        close("kallsyms", 1393.705);
        close("ORC sort", 37760.38);
        close("alternatives", 39976.58 - 37760.38);
        close("memory protection", (3.663006 - 3.662566) * 1e6 + 302.014 + 71.321 - 302.014);
        // module_enable_x's exit to klp_module_coming: ftrace_module_enable.
        close("ftrace weak-fn check", (4.198822 - 3.663006) * 1e6 - 71.321);
        // jump_label's exit to static_call's entry.
        close("trace event files", (4.225060 - 4.198824) * 1e6 - 502.055);
        // The gaps after static_call's exit: to kprobes', btf's,
        // tracepoint's (the long one: btf's exit to tracepoint's entry),
        // srcu's entries and the chain's end.
        let gaps: [f64; 5] = [
            (4.231053 - 4.225060) * 1e6 - 5992.977,
            (4.231055 - 4.231053) * 1e6 - 0.718,
            (4.432367 - 4.231055) * 1e6 - 4749.759,
            (4.432369 - 4.432367) * 1e6 - 0.996,
            (4.432370 - 4.432369) * 1e6 - 0.687,
        ];
        close("trace eval maps", gaps.iter().map(|g| g.max(0.0)).sum::<f64>());
        close("jump labels", 502.055);
        close("static calls", 5992.977);
        close("BTF", 4749.759);
        close("sysfs", 108.296);
        // The rest: ftrace_module_init and the bug table (2.2 ms between
        // module_finalize and module_enable_ro), parameters and the small
        // gaps: 14.9 ms before static calls, BTF and sysfs were links.
        close("rest", 14_878.5 - 502.055 - 5992.977 - 4749.759 - 108.296);
        let names: Vec<&str> = m.finalize_steps.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, crate::run::results::FINALIZE_STEPS);
        // The same notifiers in do_init_module (MODULE_STATE_LIVE) are not finalize's.
        assert!(m.finalize_steps.iter().all(|p| p.start_us < 4.432811e6));
    }

    // Real lines: xfs on Debian's arm64 6.1 (Cortex-A72, -icount): no ORC,
    // no static_call; trace.c's notifier registered after tracepoint's, so
    // the eval maps run between tracepoint_module_notify and
    // srcu_module_notify (179 ms), not before tracepoint's as on x86-64.
    const XFS_ARM64: &str = "    3.051599 |   0)   insmod-151   |               |  /* bootlink begin xfs */
    3.051676 |   0)   insmod-151   |               |  kernel_read_file_from_fd() {
    3.051677 |   0)   insmod-151   | # 1921.104 us |    kernel_read_file();
    3.053599 |   0)   insmod-151   | # 1922.736 us |  }
    3.053600 |   0)   insmod-151   |               |  load_module() {
    3.053600 |   0)   insmod-151   | @ 195195.2 us |    module_sig_check();
    3.255271 |   0)   insmod-151   |   2.176 us    |    resolve_symbol();
    3.255872 |   0)   insmod-151   |   7.728 us    |    resolve_symbol();
    3.260003 |   0)   insmod-151   | # 1378.880 us |    apply_relocate_add();
    3.262075 |   0)   insmod-151   |   5.280 us    |    apply_relocate_add();
    3.262104 |   0)   insmod-151   | ! 774.384 us  |    add_kallsyms();
    3.262879 |   0)   insmod-151   | + 28.720 us   |    module_finalize();
    3.265985 |   0)   insmod-151   | ! 235.568 us  |    module_enable_ro();
    3.266232 |   0)   insmod-151   |   9.792 us    |    module_enable_x();
    3.266481 |   0)   insmod-151   |               |    blocking_notifier_call_chain_robust() {
    3.266483 |   0)   insmod-151   | ! 544.224 us  |      jump_label_module_notify();
    3.297149 |   0)   insmod-151   |   0.912 us    |      kprobes_module_callback();
    3.297151 |   0)   insmod-151   | # 2998.192 us |      btf_module_notify();
    3.300150 |   0)   insmod-151   |   1.200 us    |      tracepoint_module_notify();
    3.479511 |   0)   insmod-151   |   0.848 us    |      srcu_module_notify();
    3.479513 |   0)   insmod-151   | @ 213031.3 us |    }
    3.479514 |   0)   insmod-151   |   1.168 us    |    parse_args();
    3.479516 |   0)   insmod-151   | ! 108.384 us  |    mod_sysfs_setup();
    3.479857 |   0)   insmod-151   |               |    do_init_module() {
    3.481614 |   0)   insmod-151   |   0.976 us    |      jump_label_module_notify();
    3.481616 |   0)   insmod-151   |   1.296 us    |      kprobes_module_callback();
    3.484781 |   0)   insmod-151   | ! 334.400 us  |      module_enable_ro();
    3.485119 |   0)   insmod-151   | # 5262.080 us |    }
    3.485120 |   0)   insmod-151   | @ 431520.0 us |  }
";

    #[test]
    fn eval_maps_are_found_wherever_the_notifier_registered() {
        let m = &parse(XFS_ARM64)[0];
        let step = |n: &str| m.finalize_steps.iter().find(|p| p.name == n).map(|p| p.duration_us);
        let close = |n: &str, want: f64| {
            let got = step(n).unwrap_or_else(|| panic!("no {n}"));
            assert!((got - want).abs() < 1.0, "{n}: {got} vs {want}");
        };
        // tracepoint's exit to srcu's entry holds the eval maps: 179.4 ms.
        let eval = (3.479511 - 3.300150) * 1e6 - 1.200;
        close(
            "trace eval maps",
            eval + ((3.297151 - 3.297149) * 1e6 - 0.912)
                + ((3.300150 - 3.297151) * 1e6 - 2998.192)
                + ((3.479513 - 3.479511) * 1e6 - 0.848),
        );
        close("trace event files", (3.297149 - 3.266483) * 1e6 - 544.224);
        assert_eq!(step("ORC sort"), None);
        // No static_call notifier on arm64.
        assert_eq!(step("static calls"), None);
        close("BTF", 2998.192);
        close("sysfs", 108.384);
        // The rest: ftrace_module_init and the bug table (3.1 ms between
        // module_finalize and module_enable_ro), parameters and the small
        // gaps: 7.0 ms before BTF, jump labels and sysfs were links.
        close("rest", 6_993.0 - 2998.192 - 108.384 - 544.224);
        let fin = m.phases.iter().find(|p| p.name == "finalize").unwrap().duration_us;
        let sum: f64 = m.finalize_steps.iter().map(|p| p.duration_us).sum();
        assert!((sum - fin).abs() < 1e-6, "{sum} != {fin}");
    }

    // The same load as 6.12 (the lab build) would trace it: the read is
    // kernel_read_file() under init_module_from_file(), and the memory
    // protection starts at module_enable_rodata_ro() and ends at
    // module_enable_text_rox() (do_init_module() calls
    // module_enable_rodata_ro() again for ro_after_init).
    #[test]
    fn finalize_steps_from_6_12_names() {
        let renamed = XFS
            .replace("kernel_read_file_from_fd()", "init_module_from_file()")
            .replace("module_enable_ro()", "module_enable_rodata_ro()")
            .replace("module_enable_x()", "module_enable_text_rox()");
        assert!(renamed.contains("module_enable_text_rox();") && !renamed.contains("module_enable_ro();"));
        let (old, new) = (&parse(XFS)[0], &parse(&renamed)[0]);
        // The read is timed by the inner kernel_read_file(), 1.4 µs shorter.
        let inside = |m: &ModuleLoad| m.phases.iter().filter(|p| p.name != "read").cloned().collect::<Vec<_>>();
        assert_eq!(inside(old), inside(new));
        assert_eq!(old.finalize_steps, new.finalize_steps);
        assert!(new.finalize_steps.iter().any(|p| p.name == "memory protection" && p.duration_us > 300.0));
    }

    // do_init_module of a module whose init function registers two crypto
    // algorithms, a per-netns subsystem whose init makes a slab cache, and
    // a slab cache of its own, then waits for async work.
    const INIT: &str = "    6.000000 |   0)               |  /* bootlink begin demo */
    6.000100 |   0) ! 100.000 us  |  kernel_read_file_from_fd();
    6.000300 |   0)               |  load_module() {
    6.000310 |   0)   0.700 us    |    module_sig_check();
    6.000400 |   0)   9.000 us    |    apply_relocate_add();
    6.001000 |   0)               |    do_init_module() {
    6.001010 |   0)               |      do_one_initcall() {
    6.001020 |   0) ! 200.000 us  |        crypto_register_alg();
    6.001230 |   0) ! 100.000 us  |        crypto_register_alg();
    6.001340 |   0)               |        register_pernet_subsys() {
    6.001350 |   0)  50.000 us    |          kmem_cache_create_usercopy();
    6.001500 |   0) ! 160.000 us  |        }
    6.001510 |   0)  40.000 us    |        kmem_cache_create_usercopy();
    6.001600 |   0) ! 590.000 us  |      }
    6.001605 |   0) ! 300.000 us  |      async_synchronize_full();
    6.002000 |   0) * 1000.000 us |    }
    6.002010 |   0) * 1710.000 us |  }
";

    #[test]
    fn init_splits_into_its_links_and_adds_up() {
        let m = &parse(INIT)[0];
        let init = m.phases.iter().find(|p| p.name == "init").unwrap().duration_us;
        assert!((init - 1000.0).abs() < 1e-6, "{init}");
        let got: Vec<(&str, f64)> = m.init_steps.iter().map(|p| (p.name.as_str(), p.duration_us)).collect();
        let want = [
            ("init function", 590.0 - 300.0 - 160.0 - 40.0),
            ("crypto registration", 300.0),
            // The cache made inside the pernet init counts for the pernet setup.
            ("slab caches", 40.0),
            ("per-netns setup", 160.0),
            ("async wait", 300.0),
            ("after init", 1000.0 - 590.0 - 300.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((g, gd), (w, wd)) in got.iter().zip(want) {
            assert_eq!(*g, w);
            assert!((gd - wd).abs() < 1e-3, "{g}: {gd} vs {wd}");
        }
        // The finalize links are not disturbed by init's landmarks.
        assert!(m.finalize_steps.is_empty());
    }

    #[test]
    fn a_module_without_an_init_function_is_all_after_init() {
        // A library module: do_init_module calls no init function.
        let lib = "    7.000000 |   0)               |  /* bootlink begin lib */
    7.000100 |   0) ! 100.000 us  |  kernel_read_file_from_fd();
    7.000300 |   0)               |  load_module() {
    7.000310 |   0)   0.700 us    |    module_sig_check();
    7.000400 |   0)   9.000 us    |    apply_relocate_add();
    7.001000 |   0)  20.000 us    |    do_init_module();
    7.002010 |   0) * 1710.000 us |  }
";
        let both = format!("{INIT}{lib}");
        let m = parse(&both);
        assert_eq!(m.len(), 2);
        let lib = &m[1];
        let init = lib.phases.iter().find(|p| p.name == "init").unwrap();
        assert_eq!(lib.init_steps.len(), 1, "{:?}", lib.init_steps);
        assert_eq!((lib.init_steps[0].name.as_str(), lib.init_steps[0].duration_us), ("after init", init.duration_us));
    }

    // No load called do_one_initcall (a kernel that cannot trace it): no links.
    #[test]
    fn no_init_links_without_the_init_function_traced() {
        let t =
            INIT.lines().filter(|l| !l.contains("do_one_initcall") && !l.contains("! 590.000 us")).collect::<Vec<_>>();
        let m = &parse(&t.join("\n"))[0];
        assert!(m.phases.iter().any(|p| p.name == "init"));
        assert!(m.init_steps.is_empty(), "{:?}", m.init_steps);
    }

    // The self-built 6.1 kernel keeps simplify_symbols a function: the
    // symbols phase is that one call, and no lookup is counted in the trace.
    #[test]
    fn simplify_symbols_is_the_whole_symbols_phase_where_traced() {
        // SAMPLE with simplify_symbols traced instead of each resolve_symbol.
        let t = SAMPLE
            .replace(
                "    3.163000 |   0)   1.500 us    |    resolve_symbol();\n    3.163100 |   0)   2.000 us    |    resolve_symbol();\n",
                "    3.162900 |   0) + 25.000 us   |    simplify_symbols();\n",
            )
            .replace(
                "    3.177762 |   0) + 11.908 us   |    apply_relocate_add();\n",
                "    3.177000 |   0)   3.000 us    |    simplify_symbols();\n    3.177762 |   0) + 11.908 us   |    apply_relocate_add();\n",
            );
        assert_eq!(t.matches("simplify_symbols").count(), 2);
        assert!(!t.contains("resolve_symbol"));
        let m = parse(&t);
        let get = |l: &ModuleLoad, n: &str| l.phases.iter().find(|p| p.name == n).map(|p| (p.start_us, p.duration_us));
        let (s0, d) = get(&m[0], "symbols").unwrap();
        assert!((s0 - 3_162_900.0).abs() < 1e-3 && (d - 25.0).abs() < 1e-3, "{s0} {d}");
        // layout ends where simplify_symbols starts
        let (l0, ld) = get(&m[0], "layout").unwrap();
        assert!((l0 + ld - 3_162_900.0).abs() < 1e-3, "{l0} {ld}");
        assert!((get(&m[1], "symbols").unwrap().1 - 3.0).abs() < 1e-3);
        // Neither load's lookups are known from this trace (the host counts them).
        assert_eq!(m.iter().map(|l| l.lookups).collect::<Vec<_>>(), [None, None]);
        // and the run says the phase was timed at the landmark
        assert_eq!(symbols_timed_at(&t), Some("simplify_symbols"));
    }

    // A kernel that inlines simplify_symbols: every lookup was traced, and
    // the run says so; a trace with neither says nothing.
    #[test]
    fn a_trace_of_every_lookup_says_the_phase_was_timed_per_lookup() {
        assert_eq!(symbols_timed_at(SAMPLE), Some("resolve_symbol"));
        let none: String = SAMPLE.lines().filter(|l| !l.contains("resolve_symbol")).map(|l| format!("{l}\n")).collect();
        assert_eq!(symbols_timed_at(&none), None);
    }

    #[test]
    fn renamed_landmarks_are_tried_by_both_names() {
        let s = filter_script();
        assert!(s.contains(
            "echo module_enable_ro >> $T/set_ftrace_filter 2>/dev/null || echo module_enable_rodata_ro >> $T/set_ftrace_filter || echo 'bootlink: cannot trace module_enable_ro'\n"
        ), "{s}");
        assert!(
            s.contains("echo module_enable_x >> $T/set_ftrace_filter 2>/dev/null || echo module_enable_text_rox >> "),
            "{s}"
        );
        assert!(
            s.contains("echo load_module >> $T/set_ftrace_filter || echo 'bootlink: cannot trace load_module'\n"),
            "{s}"
        );
        // every lookup traced only where simplify_symbols cannot be
        assert!(
            s.contains("echo simplify_symbols >> $T/set_ftrace_filter 2>/dev/null || echo resolve_symbol >> $T/set_ftrace_filter || echo 'bootlink: cannot trace resolve_symbol'\n"),
            "{s}"
        );
        assert_eq!(s.lines().count(), traced().count());
    }

    // Two loads at once on two CPUs, with funcgraph-proc (the task column
    // as 6.1 prints it: comm-pid centred in 14 characters). Each marker is
    // written by the shell that then execs insmod, so the PID carries over;
    // the lines interleave, and crc16's task moves from CPU 0 to CPU 1
    // inside load_module.
    const TWO_CPUS: &str = "# tracer: function_graph
    3.151471 |   0)   insmod-88    |               |  /* bootlink begin crc16 */
    3.151480 |   1)   insmod-89    |               |  /* bootlink begin mbcache */
    3.152000 |   1)   insmod-89    | ! 326.630 us  |  kernel_read_file_from_fd();
    3.155684 |   0)   insmod-88    | # 1087.279 us |  kernel_read_file_from_fd();
    3.156786 |   0)   insmod-88    |               |  load_module() {
    3.156790 |   1)   insmod-89    |               |  load_module() {
    3.156815 |   0)   insmod-88    | # 3888.597 us |    module_sig_check();
    3.156820 |   1)   insmod-89    | # 2900.115 us |    module_sig_check();
    3.163000 |   0)   insmod-88    |   1.500 us    |    resolve_symbol();
    3.163050 |   1)   insmod-89    | + 11.908 us   |    apply_relocate_add();
    3.163907 |   1)   insmod-88    | + 89.454 us   |    apply_relocate_add();
    3.164000 |   1)   insmod-89    ! 824.786 us  |    do_init_module();
    3.165000 |   1)   insmod-89    | # 8210.000 us |  }
    3.166879 |   1)   insmod-88    | ! 416.564 us  |    do_init_module();
    3.167305 |   1)   insmod-88    | * 10519.00 us |  } /* load_module */
";

    #[test]
    fn concurrent_loads_are_told_apart_by_pid() {
        let m = parse(TWO_CPUS);
        let names: Vec<&str> = m.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["crc16", "mbcache"]);
        let get = |l: &ModuleLoad, n: &str| l.phases.iter().find(|p| p.name == n).map(|p| p.duration_us);
        let (c, mb) = (&m[0], &m[1]);
        // crc16: its own read, signature and lookups, load_module closed on CPU 1.
        assert!((get(c, "read").unwrap() - 1087.279).abs() < 1e-3);
        assert!((get(c, "signature").unwrap() - 3888.597).abs() < 1e-3);
        assert_eq!(c.lookups, Some(1));
        assert!((get(c, "init").unwrap() - 416.564).abs() < 1e-3);
        assert!((c.total_us - (1087.279 + (3.167305 - 3.156786) * 1e6)).abs() < 1e-3);
        // mbcache: no resolve_symbol of crc16's, its own load_module bounds.
        assert_eq!(mb.lookups, Some(0));
        assert!((get(mb, "read").unwrap() - 326.630).abs() < 1e-3);
        assert!((mb.total_us - (326.630 + (3.165 - 3.15679) * 1e6)).abs() < 1e-3);
        // mbcache's do_init_module line is malformed (a '|' lost): skipped, so
        // init runs to load_module's return; nothing of crc16's leaks in.
        assert!(get(mb, "init").is_none());
        assert!((get(mb, "relocation").unwrap() - 11.908).abs() < 1e-3);
    }

    #[test]
    fn junk_and_truncation_do_not_break_parsing() {
        let cut = &SAMPLE[..SAMPLE.len() / 2];
        let m = parse(cut);
        assert!(m.len() <= 1);
        assert!(parse("garbage\n|||\n 1.0 | x | y\n").is_empty());
    }
}
