//! Every process of a lab boot on the kernel's timeline, like bootchart:
//! the /init the lab builds starts an ftrace instance of its own
//! (`bootlink-procs`) with sched_process_fork/exec/exit as soon as the
//! kernel file systems are mounted, before it starts the body, and the body
//! stops it and prints it as its last section before the trace and the
//! kernel log. The instance's clock is "global" (printk's local_clock:
//! sched_clock plus its offset), so the events sit on the kernel log's time
//! axis; "local", the default, is raw sched_clock (~0.1 s apart on these
//! kernels). An instance keeps the events out of the top-level buffer that
//! the load phases' function_graph trace and the storm's kprobes use.
//!
//! /init itself (PID 1) is exec'd by the kernel before anything can be
//! traced: [`with_init`] adds it from the kernel log's "Run /init" time.
//!
//! What it costs, measured on Debian's 6.1 under -icount (deterministic;
//! a changed kernel command line alone moves a boot's module-set total by
//! about 60 us, a module by up to 10 us): the events themselves little
//! (crc16, mbcache and crc32c_generic, without trace events, move by at
//! most 40 us, either way), but an instance
//! is a trace array, and the kernel gives every trace array the event
//! files of each module it loads: ext4 3.3 ms (0.9 %) and jbd2 0.6 ms
//! (1 %) slower, their "trace event files" step of finalize doubled (3.8
//! -> 6.9 ms, 0.7 -> 1.3 ms). So [`recorded`] follows the lab's tracing
//! switch: on in traced boots (the cost is then part of the tracing
//! overhead `--measure-overhead` measures, and of that step), off with
//! `--no-trace`, whose figures stay as they were; and on in every boot
//! that starts a program (`order:`, `ddlink:`, `run:`), whose point is
//! user space.

use crate::run::results::Process;

pub(crate) const TRACEFS: &str = "/sys/kernel/tracing";
const INSTANCE: &str = "/sys/kernel/tracing/instances/bootlink-procs";
pub const SECTION: &str = "@@@ bootlink processes @@@";
pub const END: &str = "@@@ bootlink processes end @@@";

/// Whether a boot records its processes: traced (`traced`: the lab traces
/// the load phases) or starting a program (`user_space`). See the module's
/// documentation for why not always.
pub fn recorded(traced: bool, user_space: bool) -> bool {
    traced || user_space
}

/// The lines /init runs before the body: mount tracefs, start the
/// instance. A kernel without it says so and boots on.
pub fn start() -> String {
    format!(
        "mount -t tracefs none {TRACEFS}\n\
         mkdir {INSTANCE} && echo global > {INSTANCE}/trace_clock && \
         for e in fork exec exit; do echo 1 > {INSTANCE}/events/sched/sched_process_$e/enable; done && \
         echo 1 > {INSTANCE}/tracing_on || echo 'bootlink: no process events'\n"
    )
}

/// The body's last lines before the trace: stop the instance, print it.
pub(crate) fn stop_and_print() -> String {
    format!(
        "echo 0 > {INSTANCE}/tracing_on 2>/dev/null\necho '{SECTION}'\ncat {INSTANCE}/trace 2>/dev/null\necho '{END}'\n"
    )
}

/// The processes of a boot's framed output (empty without the section).
pub fn parse(main: &str) -> Vec<Process> {
    let Some((_, rest)) = main.split_once(SECTION) else { return Vec::new() };
    processes(rest.split_once(END).map(|(a, _)| a).unwrap_or(rest))
}

/// `procs` with /init (PID 1) first: exec'd by the kernel at `init_start_us`
/// (0: unknown, nothing added), still running when the trace stopped.
pub(crate) fn with_init(mut procs: Vec<Process>, init_start_us: f64) -> Vec<Process> {
    if init_start_us > 0.0 && !procs.is_empty() && !procs.iter().any(|p| p.pid == 1) {
        let init = Process {
            pid: 1,
            parent: 0,
            name: "init".into(),
            start_us: init_start_us,
            exec_us: Some(init_start_us),
            end_us: None,
        };
        procs.insert(0, init);
    }
    procs
}

/// The processes of ftrace's sched_process_fork/exec/exit lines
/// (`COMM-PID [CPU] FLAGS SECONDS: sched_process_exec: filename=F pid=P ...`),
/// in the order they were forked (or first executed); `end_us` None for
/// those still running when the trace stopped.
pub fn processes(trace: &str) -> Vec<Process> {
    let mut out: Vec<Process> = Vec::new();
    for line in trace.lines() {
        let Some(i) = line.find(": sched_process_") else { continue };
        let Some(t) = line[..i].split_whitespace().last().and_then(|t| t.parse::<f64>().ok()) else { continue };
        let t = (t * 1e6).round();
        let rest = &line[i + ": sched_process_".len()..];
        let Some((event, fields)) = rest.split_once(": ") else { continue };
        let field =
            |k: &str| fields.split_whitespace().find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('=')));
        let pid = |k: &str| field(k).and_then(|v| v.parse::<u32>().ok());
        match event {
            "fork" => {
                if let (Some(child), Some(parent)) = (pid("child_pid"), pid("pid")) {
                    let name = field("child_comm").unwrap_or_default().to_string();
                    out.push(Process { pid: child, parent, name, start_us: t, ..Default::default() });
                }
            }
            "exec" => {
                let Some(p) = pid("pid") else { continue };
                let name = field("filename").unwrap_or_default();
                let name = name.rsplit('/').next().unwrap_or(name).to_string();
                match out.iter_mut().rev().find(|x| x.pid == p && x.end_us.is_none()) {
                    Some(x) => {
                        x.exec_us = Some(t);
                        x.name = name;
                    }
                    None => out.push(Process { pid: p, name, start_us: t, exec_us: Some(t), ..Default::default() }),
                }
            }
            "exit" => {
                let Some(p) = pid("pid") else { continue };
                if let Some(x) = out.iter_mut().rev().find(|x| x.pid == p && x.end_us.is_none()) {
                    x.end_us = Some(t);
                    // busybox re-executes itself as /proc/self/exe, or runs a
                    // NOEXEC applet (insmod) in the forked shell without an
                    // exec: either way the applet's name is its comm at exit.
                    if (x.name == "exe" || x.exec_us.is_none())
                        && let Some(c) = field("comm")
                    {
                        x.name = c.to_string();
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_from_the_sched_events() {
        let t = "# tracer: nop
              sh-52      [000] .....     2.100000: sched_process_fork: comm=sh pid=52 child_comm=sh child_pid=75
              sh-75      [000] .....     2.100100: sched_process_exec: filename=/mnt/bootlink-order/unordered pid=75 old_pid=75
       unordered-75      [000] .....     2.600000: sched_process_exit: comm=unordered pid=75 prio=120
";
        let p = processes(t);
        assert_eq!(
            p,
            [Process {
                pid: 75,
                parent: 52,
                name: "unordered".into(),
                start_us: 2_100_000.0,
                exec_us: Some(2_100_100.0),
                end_us: Some(2_600_000.0)
            }]
        );
    }

    #[test]
    fn the_section_gives_init_its_children_and_the_applets_names() {
        // As the guest prints it: the body's shell forked by /init, an
        // insmod that busybox re-executed as /proc/self/exe, one it ran in
        // the forked shell (no exec; its comm at exit), a PID reused, one
        // process still running when the trace stopped.
        let main = "INSMOD crc16 0
@@@ bootlink processes @@@
# tracer: nop
#
            init-1       [000] .....     1.800000: sched_process_fork: comm=init pid=1 child_comm=init child_pid=60
            init-60      [000] .....     1.800200: sched_process_exec: filename=/bin/sh pid=60 old_pid=60
              sh-60      [000] .....     1.900000: sched_process_fork: comm=sh pid=60 child_comm=sh child_pid=61
              sh-61      [000] .....     1.900300: sched_process_exec: filename=/proc/self/exe pid=61 old_pid=61
          insmod-61      [000] .....     1.950000: sched_process_exit: comm=insmod pid=61 prio=120
              sh-60      [000] .....     1.960000: sched_process_fork: comm=sh pid=60 child_comm=sh child_pid=62
          insmod-62      [000] .....     1.970000: sched_process_exit: comm=insmod pid=62 prio=120
              sh-60      [000] .....     2.000000: sched_process_fork: comm=sh pid=60 child_comm=sh child_pid=61
              sh-61      [000] .....     2.000100: sched_process_exec: filename=/bin/cat pid=61 old_pid=61
@@@ bootlink processes end @@@
";
        let p = with_init(parse(main), 1_700_000.0);
        let row = |pid, parent, name: &str, start_us, exec_us, end_us| Process {
            pid,
            parent,
            name: name.into(),
            start_us,
            exec_us: Some(exec_us),
            end_us,
        };
        assert_eq!(
            p,
            [
                row(1, 0, "init", 1_700_000.0, 1_700_000.0, None),
                row(60, 1, "sh", 1_800_000.0, 1_800_200.0, None),
                row(61, 60, "insmod", 1_900_000.0, 1_900_300.0, Some(1_950_000.0)),
                Process {
                    pid: 62,
                    parent: 60,
                    name: "insmod".into(),
                    start_us: 1_960_000.0,
                    exec_us: None,
                    end_us: Some(1_970_000.0)
                },
                row(61, 60, "cat", 2_000_000.0, 2_000_100.0, None),
            ]
        );
        // No section, no processes; no trace, no /init either.
        assert!(parse("INSMOD crc16 0\n").is_empty());
        assert!(with_init(Vec::new(), 1_700_000.0).is_empty());
        assert_eq!(with_init(p.clone(), 1_700_000.0), p);
    }

    #[test]
    fn the_script_records_into_its_own_instance_on_the_kernel_log_clock() {
        let s = start();
        assert!(s.starts_with("mount -t tracefs none /sys/kernel/tracing\n"), "{s}");
        for want in [
            "mkdir /sys/kernel/tracing/instances/bootlink-procs",
            "echo global > /sys/kernel/tracing/instances/bootlink-procs/trace_clock",
            "sched_process_$e/enable; done",
            "echo 1 > /sys/kernel/tracing/instances/bootlink-procs/tracing_on",
        ] {
            assert!(s.contains(want), "{want} not in\n{s}");
        }
        let e = stop_and_print();
        assert!(e.find("tracing_on").unwrap() < e.find(SECTION).unwrap(), "stopped before it is printed\n{e}");
        assert!(e.contains("cat /sys/kernel/tracing/instances/bootlink-procs/trace"), "{e}");
    }
}
