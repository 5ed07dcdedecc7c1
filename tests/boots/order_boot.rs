//! Tier 3: function reordering in the lab. The self-built kernel with no
//! modules (`--set none`, untraced) whose /init loads null_blk and
//! squashfs, fills one emulated flash device per SquashFS block size (4k,
//! 64k, 128k) and starts `order synth`'s program, unordered and reordered
//! by GNU ld, cold (page cache dropped) with readahead 0 and the default
//! (`--variant o=order:synth,starts:1`): the same output everywhere, fewer
//! faults and fewer bytes read for the reordered build, the starts in
//! order on the kernel's timeline, the table and grid in the charts. Each
//! start's time to UI (its first output line) lies between its markers.
//! (The real program, CPython, is the extended tier's order_python_boot:
//! its build is needed by no other test here.)
//! And the whole user space on the kernel's clock in a boot without
//! `order:`: /init, its shell, an insmod per module.

use crate::common;

use std::path::PathBuf;
use std::process::Output;
use std::sync::OnceLock;

use bootlink_lab::run::results::{OrderStart, OrderStarts, Run};
use common::TestCommand;

struct Booted {
    dir: PathBuf,
    out: Output,
    run: Run,
}

fn booted() -> &'static Booted {
    static B: OnceLock<Booted> = OnceLock::new();
    B.get_or_init(|| {
        let (dir, out, run) = common::boot_without_modules("order-boot", "o=order:synth,starts:1");
        Booted { dir, out, run }
    })
}

fn userspace(b: &Booted) -> &OrderStarts {
    let v = &b.run.variants[0];
    assert_eq!(v.repetitions.len(), 1);
    v.repetitions[0].order().expect("the repetition has the program's starts")
}

fn start<'a>(u: &'a OrderStarts, mode: &str) -> &'a OrderStart {
    u.starts.iter().find(|s| s.mode == mode).unwrap_or_else(|| panic!("no start {mode}"))
}

#[test]
fn reordered_starts_fault_and_read_less_with_the_same_output() {
    let b = booted();
    print!("{}", common::stdout(&b.out));
    assert!(b.out.status.success(), "bootlink lab failed:\n{}\n{}", common::stdout(&b.out), common::stderr(&b.out));
    assert!(!b.run.partial);
    let u = userspace(b);
    let tags: Vec<&str> = b.run.variants[0].repetitions[0].workloads.iter().map(|w| w.name()).collect();
    assert_eq!(tags.iter().filter(|t| **t == "order").count(), 1, "run.json tags the starts order: {tags:?}");
    // 3 block sizes x readahead 0 and default x 3 builds (unordered,
    // reordered, reordered+data), once each.
    assert_eq!(u.starts.len(), 18, "{:?}", u.starts.iter().map(|s| &s.mode).collect::<Vec<_>>());
    let out = &u.starts[0].output;
    assert!(out.starts_with("checksum "), "{out}");
    for s in &u.starts {
        assert_eq!(s.exit, 0, "{}", s.mode);
        assert_eq!(&s.output, out, "{}: output differs", s.mode);
        assert!(s.major_faults.is_some() && s.read_bytes.is_some() && s.read_requests.is_some(), "{}", s.mode);
    }
    for block in [4, 64, 128] {
        let (un, re) = (start(u, &format!("unordered/{block}k/ra0")), start(u, &format!("reordered/{block}k/ra0")));
        common::report(
            "order synth (self-built kernel): unordered -> reordered",
            &format!(
                "{block}k ra0: {:.1} -> {:.1} ms, major {} -> {}, read {} -> {} bytes",
                un.duration_us / 1e3,
                re.duration_us / 1e3,
                un.major_faults.unwrap(),
                re.major_faults.unwrap(),
                un.read_bytes.unwrap(),
                re.read_bytes.unwrap()
            ),
        );
        assert!(re.major_faults < un.major_faults, "{block}k: major faults");
        assert!(re.read_bytes < un.read_bytes, "{block}k: bytes read");
        assert!(re.duration_us < un.duration_us, "{block}k: wall");
    }
    // Page-sized blocks, no readahead: what the reordering is for. TCG with
    // -icount and the pinned CPU is deterministic, so the floors sit within
    // 10 % of what was measured (2026-11-25: major faults 167 -> 22, 7.59x;
    // 1,871.8 -> 263.5 ms, 7.10x).
    let (un, re) = (start(u, "unordered/4k/ra0"), start(u, "reordered/4k/ra0"));
    let faults = un.major_faults.unwrap() as f64 / re.major_faults.unwrap() as f64;
    assert!(faults >= 0.9 * 7.59, "4k: major faults cut {faults:.2}x, measured 7.59x");
    let speed = un.duration_us / re.duration_us;
    assert!(speed >= 0.9 * 7.10, "4k: {speed:.2}x faster, measured 7.10x");
    // The data order's layout (issue 29): the start-up spans its floor of
    // two 64 KiB blocks, the first read by exec, so one major fault is
    // left (2026-11-28, Debian's kernel: 11 -> 1, 5.24x faster).
    let (un, re, da) =
        (start(u, "unordered/64k/ra0"), start(u, "reordered/64k/ra0"), start(u, "reordered+data/64k/ra0"));
    common::report(
        "order synth (self-built kernel): unordered -> reordered+data",
        &format!(
            "64k ra0: {:.1} -> {:.1} ms ({:.2}x), major {} -> {}, read {} -> {} bytes",
            un.duration_us / 1e3,
            da.duration_us / 1e3,
            un.duration_us / da.duration_us,
            un.major_faults.unwrap(),
            da.major_faults.unwrap(),
            un.read_bytes.unwrap(),
            da.read_bytes.unwrap()
        ),
    );
    assert_eq!(da.major_faults, Some(1), "64k: the data order's major faults");
    assert_eq!(da.output, un.output);
    assert!(da.duration_us < re.duration_us && da.read_bytes < re.read_bytes, "64k: data order against reordered");
    // The 5.24x above is Debian's kernel; this boots the self-built one,
    // whose requests take two jiffies instead of 4 ms (no HIGH_RES_TIMERS:
    // docs/order.md): 536.8 -> 97.5 ms, 5.51x (this test, 2026-11-29).
    // Deterministic, so the floor is 90 % of that, above issue 29's goal
    // of 4.2x.
    let speed = un.duration_us / da.duration_us;
    assert!(speed >= 0.9 * 5.51, "64k: the data order {speed:.2}x faster, measured 5.51x (goal 4.2x)");
}

#[test]
fn the_starts_sit_in_order_after_the_kernel_on_one_timeline() {
    let b = booted();
    let rep = &b.run.variants[0].repetitions[0];
    let u = userspace(b);
    let last_initcall = rep.initcalls.iter().map(|i| i.start_us + i.duration_us).fold(0.0, f64::max);
    assert!(rep.init_start_us > 0.0, "/init started");
    let mut prev_end = rep.init_start_us.max(last_initcall);
    for s in &u.starts {
        assert!(s.duration_us > 0.0, "{}", s.mode);
        assert!(s.start_us >= prev_end, "{} starts at {} before the previous end {prev_end}", s.mode, s.start_us);
        prev_end = s.start_us + s.duration_us;
    }
    // The whole user space on the kernel's clock: each start's program
    // forked, executed and exited between its markers, and its first output
    // line (time to UI) arrived after it executed and before the end marker.
    for st in &u.starts {
        let build = st.mode.split('/').next().unwrap();
        let end = st.start_us + st.duration_us;
        let p = rep
            .processes
            .iter()
            .find(|p| p.name == build && p.start_us >= st.start_us && p.start_us <= end)
            .unwrap_or_else(|| panic!("{}: no {build} process between its markers", st.mode));
        let (x, e) = (p.exec_us.expect("executed"), p.end_us.expect("exited"));
        assert!(p.start_us <= x && x <= e && e <= end, "{}: {p:?} outside {}..{end}", st.mode, st.start_us);
        let ui = st.start_us + st.ui_us.unwrap_or_else(|| panic!("{}: no UI mark", st.mode));
        assert!(x < ui && ui <= end, "{}: UI at {ui}, exec {x}, end {end}", st.mode);
    }
    // /init first, on the kernel log's clock, and the script's shells.
    let init = &rep.processes[0];
    assert_eq!((init.pid, init.name.as_str(), init.start_us), (1, "init", rep.init_start_us));
    assert!(rep.processes.iter().any(|p| p.parent == 1 && p.name == "sh"), "the body's shell");
    let html = b.dir.join("report.html");
    let svg = b.dir.join("t.svg");
    let perfetto = b.dir.join("p.json");
    TestCommand::new(&[&"chart", &b.dir, &"-o", &html, &"--svg", &svg, &"--perfetto", &perfetto]).ok();
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains(r#"<section id="order">"#), "no reordering section");
    assert!(html.contains(r#"data-order-cell="64k/ra0/reordered""#));
    assert!(html.contains(r#"<svg class="order-grid""#), "no grid plot");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("reordered/64k/ra0"), "the starts in the SVG timeline");
    assert!(svg.contains(r#"class="tl-proc" data-pid=""#) && svg.contains(r#"data-name="reordered""#), "processes");
    assert_eq!(svg.matches(r#"<rect class="tl-ui""#).count(), u.starts.len(), "a UI mark per start");
    let p = std::fs::read_to_string(&perfetto).unwrap();
    assert!(p.contains("reordered/64k/ra0"), "the starts in the Perfetto trace");
    assert!(p.contains(r#""cat":"process""#) && p.contains("exec reordered"), "processes in the Perfetto trace");
    assert_eq!(p.matches(r#""cat":"ui","ph":"i""#).count(), u.starts.len(), "a UI instant per start");
    assert!(common::stdout(&b.out).contains("UI ms"), "time to UI in the lab's table");
}

#[test]
fn bad_requests_fail_before_booting_in_one_line() {
    let out = common::tmpdir("order-boot-bad");
    for (variant, want) in [
        ("x=order:synth-32k", "order:synth-32k: block size \"32k\": use 4k, 64k or 128k"),
        ("x=order:/nonexistent/prog", "order:/nonexistent/prog: give synth or python, or PROGRAM-BLOCK"),
        ("x=flash:nand", "flash: is the device of order:; give order: too"),
        ("x=order:synth,flash:0-5", "flash:0-5: give slow, nand, nor or MIBS-USEC"),
    ] {
        let dir = out.join("run");
        let err = common::lab_without_modules(variant, &dir).fails_with(want);
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(!dir.join("run.json").exists(), "{variant}: nothing booted");
        println!("{variant}: {}", err.trim_end());
    }
}

/// A traced boot of the self-built kernel loading stp (and llc, its
/// dependency) with insmod, no program started: every process from /init on
/// is recorded. Read against the kernel log's own markers (parsed here):
/// each insmod was forked by the body's shell, executed and exited between
/// `bootlink: insmod NAME` and `insmod-done NAME`. The same boot with
/// `--no-trace` records none (the events follow the tracing switch: their
/// ftrace instance costs modules with trace events a second set of event
/// files).
#[test]
fn a_boot_without_a_program_records_init_and_its_insmods() {
    let k = common::self_built(false);
    let vmlinux = k.dir.join("vmlinux");
    let modules = k.dir.join("lib/modules").join(&k.release);
    let boot = |label: &str, trace: bool| -> (PathBuf, Run) {
        // kept: the closure hands out paths inside it
        let dir = common::tmpdir(label).keep().join("run");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"lab", &"stp", &"--kernel", &vmlinux, &"--modules", &modules, &"--variant", &"stock", &"-o", &dir];
        if !trace {
            args.push(&"--no-trace");
        }
        TestCommand::new(&args).show_dir(&dir).ok();
        let run: Run = serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        (dir, run)
    };
    let (dir, run) = boot("procs-traced", true);
    let rep = &run.variants[0].repetitions[0];
    assert_eq!(rep.modules.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["llc", "stp"]);
    let init = &rep.processes[0];
    assert_eq!((init.pid, init.name.as_str(), init.exec_us), (1, "init", Some(rep.init_start_us)));
    let body = rep.processes.iter().find(|p| p.parent == 1 && p.name == "sh").expect("the body's shell");
    assert!(body.start_us > rep.init_start_us && body.end_us.is_none(), "{body:?}");
    // The kernel log's markers, from the console log.
    let log = std::fs::read_to_string(dir.join(&rep.log)).unwrap();
    let marker = |what: &str| -> f64 {
        let line =
            log.lines().find(|l| l.trim_end().ends_with(what)).unwrap_or_else(|| panic!("no {what:?} in the log"));
        let t = line.split_once(']').unwrap().0.trim_start_matches('[').trim();
        (t.parse::<f64>().unwrap() * 1e6).round()
    };
    let insmods: Vec<_> = rep.processes.iter().filter(|p| p.name == "insmod").collect();
    assert_eq!(insmods.len(), 2, "{:?}", rep.processes);
    for (p, name) in insmods.iter().zip(["llc", "stp"]) {
        let (a, b) = (marker(&format!("bootlink: insmod {name}")), marker(&format!("bootlink: insmod-done {name} 0")));
        // busybox runs insmod in the forked shell (a NOEXEC applet): no exec.
        let e = p.end_us.expect("exited");
        println!("insmod {name}: markers {a}..{b}, forked {} exit {e}", p.start_us);
        assert_eq!(p.parent, body.pid, "{p:?}");
        assert!(a <= p.start_us && p.start_us <= e && e <= b, "{name}: {p:?} outside {a}..{b}");
        assert!(p.exec_us.is_none_or(|x| p.start_us <= x && x <= e), "{p:?}");
    }
    let svg = dir.join("t.svg");
    let perfetto = dir.join("p.json");
    TestCommand::new(&[&"chart", &dir, &"--svg", &svg, &"--perfetto", &perfetto]).ok();
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(svg.matches(r#"data-name="insmod""#).count(), 2, "insmods in the SVG's processes panel");
    assert!(svg.contains(r#"<g class="tl-proc" data-pid="1" data-name="init">"#));
    let p: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).unwrap()).unwrap();
    let names: Vec<&str> = p["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "process")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(
        names.contains(&"init [1]") && names.iter().filter(|n| n.starts_with("insmod [")).count() == 2,
        "{names:?}"
    );

    let (_, plain) = boot("procs-untraced", false);
    let rep = &plain.variants[0].repetitions[0];
    assert_eq!(rep.modules.len(), 2);
    assert!(rep.processes.is_empty(), "--no-trace records no processes: {:?}", rep.processes);
}
