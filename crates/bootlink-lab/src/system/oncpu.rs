//! Each load's time on the CPU, from the scheduler's context switches.
//!
//! A load's phases are cut at landmark functions' entry and exit times:
//! wall-clock intervals. On a system boot udev's workers load several
//! modules at once and systemd's units run beside them, so with one CPU an
//! interval also holds the time the loading task was switched out:
//! preempted by another task while it could run, or asleep (waiting for
//! `module_mutex`, for another load of the same module, for a read). A
//! traced system boot also records `sched:sched_switch`; every switch names
//! the task leaving the CPU (its pid and state) and the one coming in. A
//! task is off the CPU from a switch that takes it off to the next that
//! puts it back, on whichever CPU: so the stretches are per task, and a
//! boot with several CPUs is read the same way (its trace merges the
//! CPUs' buffers in time order). A phase's on-CPU time is its interval
//! less the loading task's stretches off the CPU in it.
//!
//! What "on the CPU" still holds: interrupts and softirqs that ran while
//! the task was current (no event says when they ran).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::run::results::Phase;

/// One phase of a load (the lab's phases), its wall time split.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseCpu {
    pub name: String,
    /// The loading task on the CPU.
    pub on_cpu_us: f64,
    /// Off it while runnable: switched out with state R (preempted, or it
    /// yielded at a cond_resched), waiting for the CPU.
    pub preempted_us: f64,
    /// Off it asleep (any other state: S, D): a mutex, a wait for another
    /// task, I/O.
    pub blocked_us: f64,
}

/// A load's wall time split into on and off the CPU, in all and by phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuTime {
    pub on_cpu_us: f64,
    pub preempted_us: f64,
    pub blocked_us: f64,
    /// In the order of the load's `phases`.
    pub phases: Vec<PhaseCpu>,
}

/// A stretch a task spent off the CPU (µs, the trace's clock).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Away {
    from: f64,
    to: f64,
    runnable: bool,
}

/// One `sched_switch` event as function_graph prints it (a comment line).
#[derive(Debug, Clone, PartialEq)]
struct Switch {
    /// Seconds, as printed.
    t: f64,
    prev_pid: u32,
    /// The state the task leaving the CPU was left in starts with R.
    prev_runnable: bool,
    next_pid: u32,
}

/// `   5.123456 |   0)  task-130  |               |  /* sched_switch: prev_comm=... prev_pid=130
/// prev_prio=120 prev_state=R+ ==> next_comm=... next_pid=12 next_prio=120 */`
fn switch(line: &str) -> Option<Switch> {
    let (_, body) = line.split_once("/* sched_switch: ")?;
    let t: f64 = line.split_once('|')?.0.trim().parse().ok()?;
    let body = body.trim_end().trim_end_matches("*/");
    // A comm may hold spaces: the fields are found by their keys; the
    // arrow splits the leaving task's from the coming one's.
    let (prev, next) = body.split_once(" ==> ")?;
    let field = |part: &str, key: &str| -> Option<String> {
        part.split_whitespace().filter_map(|w| w.strip_prefix(key)).next_back().map(str::to_string)
    };
    let state = field(prev, "prev_state=")?;
    Some(Switch {
        t,
        prev_pid: field(prev, "prev_pid=")?.parse().ok()?,
        prev_runnable: state.starts_with('R'),
        next_pid: field(next, "next_pid=")?.parse().ok()?,
    })
}

/// The time (µs) and task pid of a function_graph line with the
/// funcgraph-proc column (`   6.503066 |   0)  modprob-172   | ...`).
fn running(line: &str) -> Option<(f64, u32)> {
    let (t, rest) = line.split_once('|')?;
    let t: f64 = t.trim().parse().ok()?;
    let (_, rest) = rest.split_once(')')?;
    let (task, _) = rest.split_once('|')?;
    Some((t * 1e6, pid_of(task.trim())?))
}

/// Every task's stretches off the CPU in a trace.
#[derive(Debug, Default)]
pub struct Switches {
    away: HashMap<u32, Vec<Away>>,
    /// sched_switch events read.
    pub events: usize,
}

/// The scheduler's switches in a function_graph trace (none when the boot
/// did not trace `sched:sched_switch`).
pub fn switches(trace: &str) -> Switches {
    let mut s = Switches::default();
    // A task switched out and not yet back: when, and whether runnable.
    let mut out: HashMap<u32, (f64, bool)> = HashMap::new();
    for line in trace.lines() {
        let Some(sw) = switch(line) else {
            // Any other line of a task is written while it runs: a task
            // seen here is back on the CPU even if its switch back in was
            // printed first (several CPUs' buffers are merged by their
            // clocks, which may differ by a little).
            if let Some((t, pid)) = running(line)
                && let Some(&(from, runnable)) = out.get(&pid)
                && t >= from
            {
                out.remove(&pid);
                s.away.entry(pid).or_default().push(Away { from, to: t, runnable });
            }
            continue;
        };
        s.events += 1;
        let t = sw.t * 1e6;
        // pid 0: the idle task, never a loader.
        if sw.prev_pid != 0 {
            out.insert(sw.prev_pid, (t, sw.prev_runnable));
        }
        if sw.next_pid != 0 {
            // A task whose first switch puts it on the CPU was made before
            // the trace or just forked: no stretch to close.
            if let Some((from, runnable)) = out.remove(&sw.next_pid) {
                s.away.entry(sw.next_pid).or_default().push(Away { from, to: t.max(from), runnable });
            }
        }
    }
    // Off the CPU when the trace stopped.
    for (pid, (from, runnable)) in out {
        s.away.entry(pid).or_default().push(Away { from, to: f64::INFINITY, runnable });
    }
    for v in s.away.values_mut() {
        v.sort_by(|x, y| x.from.total_cmp(&y.from));
    }
    s
}

impl Switches {
    /// Whether the trace had the scheduler's switches.
    pub fn traced(&self) -> bool {
        self.events > 0
    }

    /// Of [from, to) (µs), the time task `pid` was off the CPU: (runnable, asleep).
    fn off(&self, pid: u32, from: f64, to: f64) -> (f64, f64) {
        let (mut runnable, mut asleep) = (0.0, 0.0);
        for a in self.away.get(&pid).into_iter().flatten() {
            if a.from >= to {
                break;
            }
            let d = a.to.min(to) - a.from.max(from);
            if d > 0.0 {
                if a.runnable {
                    runnable += d;
                } else {
                    asleep += d;
                }
            }
        }
        (runnable, asleep)
    }

    /// A load's phases (wall intervals) split for its task `pid`.
    pub fn cpu_time(&self, pid: u32, phases: &[Phase]) -> CpuTime {
        let mut c = CpuTime::default();
        for p in phases {
            let (preempted, blocked) = self.off(pid, p.start_us, p.start_us + p.duration_us);
            let on = (p.duration_us - preempted - blocked).max(0.0);
            c.on_cpu_us += on;
            c.preempted_us += preempted;
            c.blocked_us += blocked;
            c.phases.push(PhaseCpu {
                name: p.name.clone(),
                on_cpu_us: on,
                preempted_us: preempted,
                blocked_us: blocked,
            });
        }
        c
    }
}

/// The pid of a funcgraph-proc task column (`(udev-worker)-130`).
pub fn pid_of(task: &str) -> Option<u32> {
    task.rsplit_once('-')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRC32C: &str = include_str!("testdata/crc32c-generic-6.1.trace");

    #[test]
    fn a_real_switch_line() {
        let line = CRC32C.lines().find(|l| l.contains("6.508950 |")).unwrap();
        let s = switch(line).unwrap();
        assert_eq!(s, Switch { t: 6.508950, prev_pid: 172, prev_runnable: false, next_pid: 173 });
        let preempted = CRC32C.lines().find(|l| l.contains("6.504416 |")).unwrap();
        assert!(switch(preempted).unwrap().prev_runnable);
        assert_eq!(running(line), Some((6.508950e6, 172)));
        assert!(switch(" 0)   rcu_pre-15   =>  modprob-172  ").is_none());
    }

    /// A switch back in that the trace lacks (or printed before the switch
    /// out: several CPUs' clocks): the task's next line of its own ends
    /// its stretch off the CPU. Here modprobe's switch back at 6.504444 is
    /// taken out of the real excerpt: its next line is module_sig_check's
    /// return at 6.508554.
    #[test]
    fn a_tasks_own_line_puts_it_back_on_the_cpu() {
        let cut: String = CRC32C.lines().filter(|l| !l.contains("6.504444 |")).map(|l| format!("{l}\n")).collect();
        let s = switches(&cut);
        let phase = |a: f64, b: f64| vec![Phase { name: "x".into(), start_us: a * 1e6, duration_us: (b - a) * 1e6 }];
        let c = s.cpu_time(172, &phase(6.503097, 6.508554));
        assert!((c.preempted_us - (6.508554 - 6.504416) * 1e6).abs() < 0.01, "{c:?}");
        // With rcu_preempt's switch into modprobe at 6.504444 in the trace,
        // the stretch ends there.
        let full = switches(CRC32C).off(172, 6.503097e6, 6.508554e6);
        assert!((full.0 - (6.504444 - 6.504416) * 1e6).abs() < 0.01 && full.1 == 0.0, "{full:?}");
    }

    #[test]
    fn pids_of_task_columns() {
        assert_eq!(pid_of("(udev-worker)-130"), Some(130));
        assert_eq!(pid_of("kworker/u2:1-45"), Some(45));
        assert_eq!(pid_of("<...>"), None);
    }
}
