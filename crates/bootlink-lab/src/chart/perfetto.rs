//! Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open:
//! one process per series (variant of a run), threads per repetition for
//! built-in initcalls, module loads (their phases nested inside) and module
//! init functions (a parallel loader's module loads: a thread per worker),
//! a thread per DDLink loader mode or reordering mode for a program started
//! in the guest (its time to UI an "i" instant event), the boot's processes
//! packed into threads like bootchart, "X" complete events with ts/dur in
//! µs, "M" metadata
//! events naming processes and threads. Written directly (tens of thousands
//! of initcalls in a few milliseconds).

use std::fmt::Write;

use crate::run::results::{DdlinkStart, Initcall, ModuleLoad, OrderStart, Process, Repetition, Run, USER_MODES};

use super::svg::segments;
use super::svg::userspace::{StartBar, process_lanes, program_name};
use crate::run::model;

/// Threads per kind per repetition: overlapping slices go to further lanes.
const LANES: u64 = 8;
const TIDS_PER_REP: u64 = 3 * LANES;

struct Trace {
    out: String,
    first: bool,
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A JSON number (non-finite values, which JSON cannot hold, become 0).
fn num(v: f64) -> String {
    if v.is_finite() { format!("{v}") } else { "0".into() }
}

impl Trace {
    fn begin(&mut self) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out.push('\n');
    }

    fn meta(&mut self, what: &str, pid: u64, tid: u64, name: &str) {
        self.begin();
        let _ =
            write!(self.out, r#"{{"name":"{what}","ph":"M","pid":{pid},"tid":{tid},"args":{{"name":{}}}}}"#, js(name));
    }

    fn sort(&mut self, what: &str, pid: u64, tid: u64, index: u64) {
        self.begin();
        let _ =
            write!(self.out, r#"{{"name":"{what}","ph":"M","pid":{pid},"tid":{tid},"args":{{"sort_index":{index}}}}}"#);
    }

    #[allow(clippy::too_many_arguments)]
    fn slice(&mut self, name: &str, cat: &str, ts: f64, dur: f64, pid: u64, tid: u64, args: &str) {
        self.begin();
        let _ = write!(
            self.out,
            r#"{{"name":{},"cat":"{cat}","ph":"X","ts":{},"dur":{},"pid":{pid},"tid":{tid},"args":{{{args}}}}}"#,
            js(name),
            num(ts),
            num(dur.max(0.0))
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn instant(&mut self, name: &str, cat: &str, ts: f64, pid: u64, tid: u64, args: &str) {
        self.begin();
        let _ = write!(
            self.out,
            r#"{{"name":{},"cat":"{cat}","ph":"i","s":"t","ts":{},"pid":{pid},"tid":{tid},"args":{{{args}}}}}"#,
            js(name),
            num(ts)
        );
    }

    fn name_lanes(&mut self, pid: u64, base: u64, used: &[bool], label: &str) {
        for (l, u) in used.iter().enumerate() {
            if *u {
                let name = if l == 0 { label.to_string() } else { format!("{label} ({})", l + 1) };
                self.meta("thread_name", pid, base + l as u64, &name);
                self.sort("thread_sort_index", pid, base + l as u64, base + l as u64);
            }
        }
    }
}

/// Lanes so that slices on one thread never overlap (Perfetto wants
/// properly nested slices per thread); when all lanes are taken, the one
/// that frees first.
fn lanes(spans: &[(f64, f64)]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| spans[a].0.total_cmp(&spans[b].0));
    let mut ends: Vec<f64> = Vec::new();
    let mut out = vec![0; spans.len()];
    for i in order {
        let (s, d) = spans[i];
        let l = match ends.iter().position(|&e| e <= s) {
            Some(l) => l,
            None if (ends.len() as u64) < LANES => {
                ends.push(f64::NEG_INFINITY);
                ends.len() - 1
            }
            None => ends.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).map(|(k, _)| k).unwrap_or(0),
        };
        ends[l] = ends[l].max(s + d);
        out[i] = l as u64;
    }
    out
}

fn initcalls(t: &mut Trace, pid: u64, base: u64, label: &str, calls: &[&Initcall]) {
    let spans: Vec<(f64, f64)> = calls.iter().map(|i| (i.start_us, i.duration_us)).collect();
    let lanes = lanes(&spans);
    let mut used = vec![false; LANES as usize];
    for (i, c) in calls.iter().enumerate() {
        used[lanes[i] as usize] = true;
        let tid = base + lanes[i];
        if c.module.is_empty() {
            t.slice(&c.name, "initcall", c.start_us, c.duration_us, pid, tid, &format!(r#""ret":{}"#, c.ret));
        } else {
            let args = format!(r#""ret":{},"module":{}"#, c.ret, js(&c.module));
            t.slice(&format!("{} [{}]", c.name, c.module), "module_init", c.start_us, c.duration_us, pid, tid, &args);
        }
    }
    t.name_lanes(pid, base, &used, label);
}

/// A parallel loader's modules: a track per worker (thread name "worker
/// W"), its loads one after the other on it; loads that overlap on one
/// worker (which a worker cannot do) go to further tracks of that worker
/// ("worker W (2)"). Thread ids are taken from `next`, which counts up
/// from past the fixed ones of the process. Returns false when no module
/// has a worker.
fn worker_tracks(t: &mut Trace, pid: u64, sort: u64, tag: &str, rep: &Repetition, next: &mut u64) -> bool {
    let Some(max) = rep.modules.iter().filter_map(|m| m.worker).max() else { return false };
    // Each worker's loads (in the order of the repetition), by worker; loads
    // without a worker get a track of their own after the workers.
    let mut by_worker: std::collections::BTreeMap<u64, Vec<&ModuleLoad>> = std::collections::BTreeMap::new();
    for m in &rep.modules {
        by_worker.entry(m.worker.map(u64::from).unwrap_or(max as u64 + 1)).or_default().push(m);
    }
    for (w, mods) in by_worker {
        let spans: Vec<(f64, f64)> = mods.iter().map(|m| (m.start_us, m.total_us)).collect();
        let lanes = lanes(&spans);
        let used = lanes.iter().max().map(|l| l + 1).unwrap_or(0);
        let base = *next;
        *next += used;
        for (i, m) in mods.iter().enumerate() {
            module_slices(t, pid, base + lanes[i], m);
        }
        for l in 0..used {
            let mut name = if w > max as u64 { format!("{tag}no worker") } else { format!("{tag}worker {w}") };
            if l > 0 {
                name.push_str(&format!(" ({})", l + 1));
            }
            t.meta("thread_name", pid, base + l, &name);
            t.sort("thread_sort_index", pid, base + l, sort);
        }
    }
    true
}

/// A module's slice and its phases nested inside, on thread `tid`.
fn module_slices(t: &mut Trace, pid: u64, tid: u64, m: &ModuleLoad) {
    let mut args = format!(r#""size":{},"status":{}"#, m.size, m.status);
    if let Some(l) = m.lookups {
        let _ = write!(args, r#","symbol_lookups":{l}"#);
    }
    if let Some(w) = m.worker {
        let _ = write!(args, r#","worker":{w}"#);
    }
    t.slice(&m.name, "module", m.start_us, m.total_us, pid, tid, &args);
    let margs = format!(r#""module":{}"#, js(&m.name));
    for (p, s, d) in segments(m) {
        t.slice(p, "phase", s, d, pid, tid, &margs);
    }
}

/// A start's own arguments in its Perfetto slice.
trait SliceArgs: StartBar {
    fn args(&self, args: &mut String);
}

impl SliceArgs for DdlinkStart {
    fn args(&self, args: &mut String) {
        for (k, v) in [
            ("ld_so_us", self.loader_us),
            ("load_objects_us", self.load_objects_us),
            ("relocation_us", self.relocation_us),
        ] {
            if let Some(v) = v {
                let _ = write!(args, r#","{k}":{}"#, num(v));
            }
        }
        if let Some(l) = self.lookups {
            let _ = write!(args, r#","symbol_lookups":{l}"#);
        }
        let _ = write!(args, r#","decision":{}"#, js(&self.decision));
    }
}

impl SliceArgs for OrderStart {
    fn args(&self, args: &mut String) {
        for (k, v) in [
            ("major_faults", self.major_faults),
            ("minor_faults", self.minor_faults),
            ("read_bytes", self.read_bytes),
            ("read_requests", self.read_requests),
        ] {
            if let Some(v) = v {
                let _ = write!(args, r#","{k}":{v}"#);
            }
        }
    }
}

/// A program's starts (`what`: the workload, "ddlink" or "order"): a track
/// per mode ("ddlink MODE"), each start a slice with ld.so's part and its
/// relocation nested inside, or its time-to-UI instant. Thread ids come
/// from `next`.
#[allow(clippy::too_many_arguments)]
fn user_tracks<S: SliceArgs>(
    t: &mut Trace,
    pid: u64,
    sort: u64,
    tag: &str,
    what: &str,
    command: &str,
    starts: &[S],
    next: &mut u64,
) {
    let program = program_name(command);
    for (m, row) in model::grouped(starts, |s| s.mode.as_str(), USER_MODES) {
        let tid = *next;
        *next += 1;
        for s in row {
            let mut args = format!(r#""mode":{},"exit":{}"#, js(&s.mode), s.exit);
            s.args(&mut args);
            let name = format!("{program} ({} #{})", s.mode, s.index + 1);
            t.slice(&name, "ddlink", s.start_us, s.duration_us, pid, tid, &args);
            let (ldso, reloc) = s.spans();
            let margs = format!(r#""mode":{}"#, js(&s.mode));
            if let Some((a, d)) = ldso {
                t.slice("ld.so", "ddlink-loader", a, d, pid, tid, &margs);
            }
            if let Some((a, d)) = reloc {
                t.slice("relocation", "ddlink-loader", a, d, pid, tid, &margs);
            }
            if let Some(ui) = s.ui_us() {
                let args = format!(r#""mode":{},"time_to_ui_us":{}"#, js(&s.mode), num(ui));
                t.instant(
                    &format!("UI: {program} ({} #{})", s.mode, s.index + 1),
                    "ui",
                    s.start_us + ui,
                    pid,
                    tid,
                    &args,
                );
            }
        }
        t.meta("thread_name", pid, tid, &format!("{tag}{what} {m}"));
        t.sort("thread_sort_index", pid, tid, sort);
    }
}

/// The boot's processes from /init on (fork to exit, the exec nested),
/// packed into tracks like bootchart ("processes", "processes (2)", ...):
/// user space after the kernel's initcalls. One still running when the
/// trace stopped ends there (`"running_at_end":true`).
fn process_tracks(t: &mut Trace, pid: u64, sort: u64, tag: &str, procs: &[Process], next: &mut u64) {
    let (lanes, n, _) = process_lanes(procs);
    let base = *next;
    *next += n as u64;
    for (p, &(l, end)) in procs.iter().zip(&lanes) {
        let tid = base + l as u64;
        let mut args = format!(r#""pid":{},"parent":{}"#, p.pid, p.parent);
        if p.end_us.is_none() {
            args.push_str(r#","running_at_end":true"#);
        }
        t.slice(&format!("{} [{}]", p.name, p.pid), "process", p.start_us, end - p.start_us, pid, tid, &args);
        if let Some(x) = p.exec_us {
            t.slice(&format!("exec {}", p.name), "process", x, end - x, pid, tid, &args);
        }
    }
    for l in 0..n as u64 {
        let name = if l == 0 { format!("{tag}processes") } else { format!("{tag}processes ({})", l + 1) };
        t.meta("thread_name", pid, base + l, &name);
        t.sort("thread_sort_index", pid, base + l, sort + 1);
    }
}

fn repetition(t: &mut Trace, pid: u64, k: usize, n: usize, rep: &Repetition, next: &mut u64) {
    // Thread ids are unique across processes too.
    let base = pid * 100_000 + 1 + k as u64 * TIDS_PER_REP;
    let tag = if n > 1 { format!("rep {} ", k + 1) } else { String::new() };
    let builtin: Vec<&Initcall> = model::builtin(rep).collect();
    initcalls(t, pid, base, &format!("{tag}initcalls"), &builtin);
    let inits: Vec<&Initcall> = model::module_inits(rep).collect();
    initcalls(t, pid, base + 2 * LANES, &format!("{tag}module init"), &inits);
    // After the kernel's tracks of this repetition.
    if let Some(u) = rep.ddlink() {
        user_tracks(t, pid, base + TIDS_PER_REP - 1, &tag, "ddlink", &u.command, &u.starts, next);
    }
    if let Some(u) = rep.order() {
        user_tracks(t, pid, base + TIDS_PER_REP - 1, &tag, "order", &u.command, &u.starts, next);
    }
    process_tracks(t, pid, base + TIDS_PER_REP - 1, &tag, &rep.processes, next);

    let mbase = base + LANES;
    // Sorted where the module loads' lanes would be.
    if worker_tracks(t, pid, mbase, &tag, rep, next) {
        return;
    }
    let spans: Vec<(f64, f64)> = rep.modules.iter().map(|m| (m.start_us, m.total_us)).collect();
    let lanes = lanes(&spans);
    let mut used = vec![false; LANES as usize];
    for (i, m) in rep.modules.iter().enumerate() {
        used[lanes[i] as usize] = true;
        module_slices(t, pid, mbase + lanes[i], m);
    }
    t.name_lanes(pid, mbase, &used, &format!("{tag}module loads"));
}

/// The trace of all runs: `{"traceEvents": [...], "displayTimeUnit": "ms", ...}`.
pub fn render(runs: &[Run]) -> String {
    let mut t = Trace { out: String::with_capacity(1 << 16), first: true };
    t.out.push_str(r#"{"displayTimeUnit":"ms","otherData":{"generator":"#);
    t.out.push_str(&js(&format!("bootlink {}", env!("CARGO_PKG_VERSION"))));
    t.out.push_str(r#","clock":"guest time since boot, microseconds"},"traceEvents":["#);
    for (si, s) in model::series(runs).iter().enumerate() {
        let pid = si as u64 + 1;
        let mut pname = s.label.clone();
        if !s.run.kernel_release.is_empty() {
            pname.push_str(&format!(" ({})", s.run.kernel_release));
        }
        t.meta("process_name", pid, 0, &pname);
        t.sort("process_sort_index", pid, 0, pid);
        let n = s.variant.repetitions.len();
        // Worker tracks take thread ids after the fixed ones of every repetition.
        let mut next = pid * 100_000 + 1 + n as u64 * TIDS_PER_REP;
        for (k, rep) in s.variant.repetitions.iter().enumerate() {
            repetition(&mut t, pid, k, n, rep, &mut next);
        }
    }
    t.out.push_str("\n]}\n");
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_never_overlap() {
        let l = lanes(&[(0.0, 10.0), (5.0, 10.0), (10.0, 1.0), (12.0, 1.0)]);
        assert_eq!(l, vec![0, 1, 0, 0]);
    }

    #[test]
    fn empty_and_odd_input_is_valid_json() {
        let v: serde_json::Value = serde_json::from_str(&render(&[])).unwrap();
        assert_eq!(v["traceEvents"].as_array().unwrap().len(), 0);
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(js("a\"b\n"), r#""a\"b\n""#);
    }
}
