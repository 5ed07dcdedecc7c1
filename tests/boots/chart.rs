//! `bootlink chart` against real kernel logs.
//!
//! One boot of the reference Debian kernel under QEMU with `initcall_debug`:
//! /init loads fat, vfat, nls_cp437, crc16, mbcache, jbd2, ext4 three times
//! as shipped (signed) and three times with their signatures stripped,
//! unloading them in between, marks each insmod in the kernel log through
//! /dev/kmsg, and prints the kernel log (`dmesg`). The tests then:
//! - check that every initcall duration bootlink parses is the number its
//!   `returned ... after N usecs` line prints;
//! - chart the plain log, and a run.json made from it (module loads from
//!   the insmod markers, their "init" phase from the module's initcall);
//! - open the charts in headless Chromium: no console errors, one bar per
//!   loaded module, a legend, axes with units, a non-blank screenshot
//!   (target/test-artifacts/chart.png);
//! - time parsing and charting a 100,000-line log.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bootlink_lab::chart;
use bootlink_lab::lab::{Initramfs, QemuOptions, TempDir, busybox, initramfs, qemu};
use bootlink_lab::run::results::{
    FORMAT_VERSION, Initcall, LoaderResult, ModuleLoad, Phase, Repetition, Run, Storm, Variant, WorkloadResult,
};
use bootlink_lab::run::{self, dmesg};

const TAG: &str = "chart";
/// Booted with `-icount shift=0,sleep=off` (guest time follows executed
/// instructions, so the figures repeat). `quiet` keeps the debug lines off
/// the slow serial console; the body
/// prints the ring buffer (8 MiB, so nothing is lost) with `dmesg`.
/// /dev/kmsg writes are rate-limited unless `printk.devkmsg=on`.
const CMDLINE: &str = "console=ttyS0 nokaslr panic=-1 oops=panic quiet initcall_debug log_buf_len=8M printk.devkmsg=on";
/// In dependency order (ext4 needs crc16, mbcache, jbd2; vfat needs fat).
const MODULES: &[&str] = &["fat", "vfat", "nls_cp437", "crc16", "mbcache", "jbd2", "ext4"];
const VARIANTS: &[&str] = &["stock", "unsigned"];
const REPS: usize = 3;
const MARK: &str = "bootlink-chart:";

fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let d = target.join("test-artifacts");
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Booted {
    /// The kernel log the guest printed (a plain dmesg), kept as an artifact.
    log_path: PathBuf,
    log: String,
    release: String,
    sizes: HashMap<(String, String), u64>,
}

static BOOTED: OnceLock<Result<Booted, String>> = OnceLock::new();

fn booted() -> &'static Booted {
    match BOOTED.get_or_init(boot) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

/// The module's bytes without the appended signature.
fn unsigned(data: &[u8]) -> Vec<u8> {
    let (elf_len, _) = bootlink::module::split_signature(data).expect("a readable signature");
    data[..elf_len].to_vec()
}

fn boot() -> Result<Booted, String> {
    let t0 = Instant::now();
    let k = common::kernel();
    let bb = busybox::busybox().map_err(|e| format!("busybox: {e}"))?;
    let tmp = TempDir::new("chart-boot").map_err(|e| e.to_string())?;
    let mut ir = Initramfs::new(&bb);
    ir.tag(TAG);
    let mut sizes = HashMap::new();
    for m in MODULES {
        let path = walk_find(&k.modules, &format!("{m}.ko"))
            .ok_or_else(|| format!("{m}.ko not in {}", k.modules.display()))?;
        let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let plain = unsigned(&data);
        assert!(plain.len() < data.len(), "{m}.ko is not signed");
        sizes.insert(("stock".to_string(), m.to_string()), data.len() as u64);
        sizes.insert(("unsigned".to_string(), m.to_string()), plain.len() as u64);
        ir.file(&format!("lib/modules/stock/{m}.ko"), 0o644, data);
        ir.file(&format!("lib/modules/unsigned/{m}.ko"), 0o644, plain);
    }
    let load = MODULES.join(" ");
    let unload = MODULES.iter().rev().copied().collect::<Vec<_>>().join(" ");
    let body = format!(
        "for v in {variants}; do\n  for r in $(seq {REPS}); do\n    for m in {load}; do\n      \
         echo \"{MARK} begin $v $r $m\" > /dev/kmsg\n      insmod /lib/modules/$v/$m.ko; s=$?\n      \
         echo \"{MARK} end $v $r $m $s\" > /dev/kmsg\n    done\n    for m in {unload}; do rmmod $m; done\n  done\ndone\n\
         dmesg -s 8388608\n",
        variants = VARIANTS.join(" ")
    );
    ir.body(&body);
    let initrd = tmp.path().join("initrd.cpio");
    ir.write(&initrd).map_err(|e| format!("building the initramfs: {e}"))?;
    let opts = QemuOptions {
        initrd: Some(initrd),
        cmdline: CMDLINE.into(),
        timeout: Duration::from_secs(240),
        deterministic: true,
        ..QemuOptions::new(&k.vmlinux)
    };
    let b = qemu::boot(&opts).map_err(|e| e.to_string())?;
    let text = b.framed(TAG).ok_or_else(|| format!("no framed output; console ends:\n{}", b.excerpt(40)))?;
    if initramfs::body_status(&b.log, TAG) != Some(0) {
        return Err(format!("the body failed:\n{}", b.excerpt(40)));
    }
    let log_path = artifacts().join("chart-dmesg.log");
    std::fs::write(&log_path, &text).unwrap();
    println!(
        "boot: {} {} in {:.1} s wall ({:.1} s with set-up), kernel log {} lines -> {}",
        k.package,
        k.version,
        b.wall.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        text.lines().count(),
        log_path.display()
    );
    Ok(Booted { log_path, log: text, release: k.release.clone(), sizes })
}

fn walk_find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = walk_find(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

#[test]
fn parsed_initcall_durations_equal_the_printed_ones() {
    let b = booted();
    let run = run::load(&b.log_path).expect("load the plain log");
    assert_eq!(run.source, "dmesg");
    assert_eq!(run.kernel_release, b.release);
    assert!(run.cmdline.contains("initcall_debug"), "{}", run.cmdline);
    let rep = &run.variants[0].repetitions[0];
    assert!(rep.init_start_us > 0.0);
    let printed = common::printed_durations(&b.log);
    let parsed = &rep.initcalls;
    assert_eq!(parsed.len(), printed.len(), "initcalls parsed vs returned lines printed");
    let mut modules = 0;
    for (p, (func, n)) in parsed.iter().zip(&printed) {
        let (name, module) = dmesg::split_function(func);
        assert_eq!((&p.name, &p.module), (&name, &module), "{func}");
        assert_eq!(p.duration_us, *n as f64, "{func}: parsed {} us, printed {n} usecs", p.duration_us);
        modules += usize::from(!p.module.is_empty());
    }
    let per_module = |m: &str| parsed.iter().filter(|i| i.module == m).count();
    println!(
        "initcalls compared: {} ({} built-in, {} module init), all equal to the printed usecs",
        parsed.len(),
        parsed.len() - modules,
        modules
    );
    assert!(parsed.len() - modules > 500, "a Debian kernel runs hundreds of built-in initcalls");
    // crc16 has no init function; the others run theirs once per load.
    for m in MODULES {
        let want = if *m == "crc16" { 0 } else { VARIANTS.len() * REPS };
        assert_eq!(per_module(m), want, "module init initcalls of {m}");
    }
    // Each initcall starts at its `calling` line's time.
    let first = parsed.iter().find(|i| i.module.is_empty()).unwrap();
    let calling = b.log.lines().find(|l| l.contains(&format!("calling  {}+", first.name))).unwrap();
    assert_eq!(Some(first.start_us), dmesg::timestamp(calling.as_bytes()).map(|t| t.0), "{calling}");
}

/// The insmod markers: (variant, repetition, module) -> (begin µs, end µs, status).
fn markers(log: &str) -> HashMap<(String, usize, String), (f64, f64, i32)> {
    let mut begin = HashMap::new();
    let mut out = HashMap::new();
    for line in log.lines() {
        let Some(i) = line.find(MARK) else { continue };
        let Some((t, _)) = dmesg::timestamp(line.as_bytes()) else { continue };
        let w: Vec<&str> = line[i + MARK.len()..].split_whitespace().collect();
        let key = (w[1].to_string(), w[2].parse::<usize>().unwrap(), w[3].to_string());
        match w[0] {
            "begin" => {
                begin.insert(key, t);
            }
            "end" => {
                let b = begin[&key];
                out.insert(key, (b, t, w[4].parse().unwrap()));
            }
            _ => {}
        }
    }
    out
}

/// A run.json as the lab will write it, from the real log only: each load
/// spans its insmod (kmsg marker before to marker after), its one known
/// phase is "init" (the module's initcall), the rest stays unattributed.
fn fixture() -> Run {
    let b = booted();
    let parsed = dmesg::parse(b.log.as_bytes());
    let marks = markers(&b.log);
    let builtin: Vec<Initcall> = parsed.initcalls.iter().filter(|i| i.module.is_empty()).cloned().collect();
    let variants = VARIANTS
        .iter()
        .map(|v| Variant {
            name: v.to_string(),
            repetitions: (1..=REPS)
                .map(|r| {
                    let mut initcalls = builtin.clone();
                    let modules: Vec<ModuleLoad> = MODULES
                        .iter()
                        .map(|m| {
                            let (a, e, status) = marks[&(v.to_string(), r, m.to_string())];
                            let init =
                                parsed.initcalls.iter().find(|i| i.module == *m && i.start_us >= a && i.start_us <= e);
                            if let Some(i) = init {
                                initcalls.push(i.clone());
                            }
                            ModuleLoad {
                                name: m.to_string(),
                                start_us: a,
                                total_us: e - a,
                                phases: init
                                    .map(|i| {
                                        vec![Phase {
                                            name: "init".into(),
                                            start_us: i.start_us,
                                            duration_us: i.duration_us,
                                        }]
                                    })
                                    .unwrap_or_default(),
                                lookups: None,
                                size: b.sizes[&(v.to_string(), m.to_string())],
                                status,
                                finalize_steps: Vec::new(),
                                init_steps: Vec::new(),
                                worker: None,
                            }
                        })
                        .collect();
                    let first = modules.first().map(|m| m.start_us).unwrap_or(0.0);
                    let last = modules.last().map(|m| m.start_us + m.total_us).unwrap_or(0.0);
                    Repetition {
                        index: r - 1,
                        boot_wall_s: 0.0,
                        init_start_us: parsed.init_start_us.unwrap_or(0.0),
                        modules_total_us: last - first,
                        initcalls,
                        modules,
                        log: "chart-dmesg.log".into(),
                        partial: false,
                        failure: None,
                        booted_again: None,
                        workloads: Vec::new(),
                        tainted: None,
                        module_taints: Default::default(),
                        kernel_text: None,
                        kernel_stext: None,
                        kaslr_slide: None,
                        processes: Vec::new(),
                        boot_clock: None,
                        symbols_timed_at: None,
                        job: None,
                    }
                })
                .collect(),
            ..Variant::named(v)
        })
        .collect();
    Run {
        format: FORMAT_VERSION,
        source: "lab".into(),
        kernel_release: b.release.clone(),
        kernel: common::kernel().vmlinux.clone(),
        cmdline: CMDLINE.into(),
        qemu_version: String::new(),
        cpu_model: String::new(),
        machine: String::new(),
        arch: String::new(),
        qemu_command: Vec::new(),
        timing: "deterministic".into(),
        module_set: format!("test: {} (insmod spans from /dev/kmsg markers, one boot)", MODULES.join(" ")),
        variants,
        partial: false,
        tracing_overhead_pct: None,
        device_type: String::new(),
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Headless Chromium on a file; None (and SKIP printed) if it is absent.
fn chromium(args: &[&str], url: &Path, profile: &Path) -> Option<(String, String)> {
    let bin = Path::new("/usr/bin/chromium");
    if !bin.exists() {
        common::skip("chart in chromium", "/usr/bin/chromium is absent (Debian package chromium)");
        return None;
    }
    let mut c = Command::new("timeout");
    c.args([
        "120",
        "/usr/bin/chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
    ])
    .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(["--enable-logging=stderr", "--v=0"])
    .args(args)
    .arg(format!("file://{}", url.display()));
    let out = c.output().expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    Some((String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// Messages the page logged to its console, and uncaught exceptions. The
/// charts have no script, so any console message at all is a failure.
/// Chromium logs them as `CONSOLE(n)` (older) or `INFO:CONSOLE:n]` (newer).
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("Uncaught") || l.contains("CONSOLE(") || l.contains(":CONSOLE")).collect()
}

#[test]
fn html_opens_in_headless_chromium() {
    let tmp = TempDir::new("chart-html").unwrap();
    let run = fixture();
    // run.json round trip through chart::load (a run directory).
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    bootlink::fsutil::write_atomic(&dir.join("run.json"), serde_json::to_string_pretty(&run).unwrap().as_bytes())
        .unwrap();
    let loaded = run::load(&dir).unwrap();
    assert_eq!(loaded, run);
    // Kept for `bootlink chart target/test-artifacts/chart-run`.
    let keep = artifacts().join("chart-run");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::copy(dir.join("run.json"), keep.join("run.json")).unwrap();
    let loaded_modules = run.variants[0].repetitions[0].modules.iter().filter(|m| m.status == 0).count();
    assert_eq!(loaded_modules, MODULES.len(), "every module loaded");

    // One variant: one bar per loaded module.
    let mut one = run.clone();
    one.variants.truncate(1);
    let html = tmp.path().join("one.html");
    chart::write(&html, &[one], chart::Format::Html).unwrap();
    // Both variants: the before/after table; the screenshot.
    let html2 = artifacts().join("chart.html");
    chart::write(&html2, std::slice::from_ref(&run), chart::Format::Html).unwrap();
    let text = std::fs::read_to_string(&html2).unwrap();
    for bad in ["<script", "http://", "https://", "<link", "@import", "url("] {
        let hits: Vec<&str> =
            text.match_indices(bad).map(|(i, _)| &text[i.saturating_sub(40)..(i + 60).min(text.len())]).collect();
        // The only URL allowed is the SVG namespace, which is a name, not a fetch.
        assert!(hits.iter().all(|h| h.contains("http://www.w3.org/2000/svg")), "{bad} in the HTML: {hits:?}");
    }

    let empty = tmp.path().join("empty.html");
    std::fs::write(&empty, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let profile = |n: &str| {
        let p = tmp.path().join(format!("profile-{n}"));
        std::fs::create_dir(&p).unwrap();
        p
    };
    // The console check catches a page that does log errors.
    let noisy = tmp.path().join("noisy.html");
    std::fs::write(&noisy, "<html><body><script>console.error('boom'); undefinedFn();</script></body></html>").unwrap();
    let Some((_, err)) = chromium(&["--dump-dom"], &noisy, &profile("z")) else { return };
    assert_eq!(console_errors(&err).len(), 2, "the console check misses errors: {err}");

    let Some((dom, err)) = chromium(&["--dump-dom"], &html, &profile("a")) else { return };
    let bars = count(&dom, r#"class="module-bar""#);
    println!("one variant: {bars} module-bar elements in the DOM for {loaded_modules} loaded modules");
    assert_eq!(bars, loaded_modules);
    for m in MODULES {
        assert_eq!(count(&dom, &format!(r#"class="module-bar" data-module="{m}""#)), 1, "{m}");
    }
    assert!(dom.contains(r#"class="legend""#), "no legend");
    assert!(
        count(&dom, r#"class="axis-label""#) >= 3
            && dom.contains("time since boot (ms)")
            && dom.contains("load time per module (ms)"),
        "axis units"
    );
    assert!(count(&dom, r#"class="tick""#) > 20, "tick labels");
    assert!(!dom.contains(r#"id="before-after""#), "one variant has nothing to compare");
    let errors = console_errors(&err);
    assert!(errors.is_empty(), "console errors: {errors:?}");

    let Some((dom2, err2)) = chromium(&["--dump-dom"], &html2, &profile("b")) else { return };
    assert!(dom2.contains(r#"id="before-after""#));
    for v in VARIANTS {
        assert_eq!(count(&dom2, &format!(r#"data-series="{v}""#)), loaded_modules, "{v} bars");
    }
    assert!(console_errors(&err2).is_empty(), "console errors: {:?}", console_errors(&err2));

    let png = artifacts().join("chart.png");
    let _ = std::fs::remove_file(&png);
    let shot = format!("--screenshot={}", png.display());
    let (_, err3) = chromium(&[&shot, "--window-size=1400,2000"], &html2, &profile("c")).unwrap();
    assert!(console_errors(&err3).is_empty(), "console errors: {:?}", console_errors(&err3));
    let blank = tmp.path().join("blank.png");
    let shot = format!("--screenshot={}", blank.display());
    chromium(&[&shot, "--window-size=1400,2000"], &empty, &profile("d")).unwrap();
    let (size, blank_size) = (std::fs::metadata(&png).unwrap().len(), std::fs::metadata(&blank).unwrap().len());
    println!("screenshot {} ({size} bytes; an empty page is {blank_size} bytes)", png.display());
    assert!(size > 5 * blank_size && size > 50_000, "screenshot looks blank: {size} vs {blank_size} bytes");

    // The standalone SVG opens as an SVG document (an XML error would show).
    let svg = artifacts().join("chart-timeline.svg");
    chart::write(&svg, std::slice::from_ref(&run), chart::Format::Svg).unwrap();
    let Some((sdom, _)) = chromium(&["--dump-dom"], &svg, &profile("e")) else { return };
    assert!(
        !sdom.contains("parsererror") && !sdom.contains("error on line") && !sdom.contains("following errors"),
        "{}",
        &sdom[..sdom.len().min(800)]
    );
    assert!(sdom.contains("time since boot (ms)"));
}

#[test]
fn plain_log_charts() {
    let b = booted();
    let run = run::load(&b.log_path).unwrap();
    let html = chart::render_html(std::slice::from_ref(&run));
    // No module loads in a plain log: module init functions are shown instead.
    assert_eq!(count(&html, r#"class="module-bar""#), 0);
    assert!(html.contains("Module init functions") && html.contains("Kernel initcalls"));
    assert!(html.contains("[ext4] ext4_init_fs") || html.contains("ext4_init_fs"), "ext4's init in the chart");
    assert!(!html.contains(r#"id="before-after""#));
    let out = artifacts().join("chart-dmesg.html");
    bootlink::fsutil::write_atomic(&out, html.as_bytes()).unwrap();
    // Two plain logs: a before/after of their initcalls.
    let two = run::summary(&[run.clone(), run.clone()]);
    let row = two.rows.iter().find(|r| r.name == "built-in initcalls").expect("initcall row");
    assert_eq!(row.gain_pct[1], Some(0.0));
}

/// Properly nested "X" events per (pid, tid), as Perfetto wants them.
#[test]
fn perfetto_trace_is_well_formed() {
    let run = fixture();
    let text = chart::render_perfetto(std::slice::from_ref(&run));
    let out = artifacts().join("chart.perfetto.json");
    std::fs::write(&out, &text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let ev = v["traceEvents"].as_array().expect("traceEvents");
    let mut by_thread: HashMap<(u64, u64), Vec<(f64, f64)>> = HashMap::new();
    let (mut x, mut meta) = (0, 0);
    for e in ev {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        match e["ph"].as_str().unwrap() {
            "X" => {
                x += 1;
                let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                assert!(dur >= 0.0 && ts >= 0.0 && e["name"].as_str().is_some_and(|n| !n.is_empty()), "{e}");
                by_thread.entry((pid, tid)).or_default().push((ts, ts + dur));
            }
            "M" => meta += 1,
            p => panic!("unexpected phase {p}"),
        }
    }
    for ((pid, tid), mut v) in by_thread {
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut stack: Vec<f64> = Vec::new();
        for (a, e) in v {
            while stack.last().is_some_and(|&top| top <= a) {
                stack.pop();
            }
            if let Some(&top) = stack.last() {
                assert!(e <= top + 1e-6, "pid {pid} tid {tid}: slice {a}..{e} crosses its parent's end {top}");
            }
            stack.push(e);
        }
    }
    let loads: usize = run.variants.iter().flat_map(|v| &v.repetitions).map(|r| r.modules.len()).sum();
    let calls: usize = run.variants.iter().flat_map(|v| &v.repetitions).map(|r| r.initcalls.len()).sum();
    let phases: usize =
        run.variants.iter().flat_map(|v| &v.repetitions).flat_map(|r| &r.modules).map(|m| m.phases.len()).sum();
    assert_eq!(x, loads + calls + phases);
    println!("perfetto: {x} slices, {meta} metadata events -> {}", out.display());
}

#[test]
fn before_after_summary_from_the_real_loads() {
    let run = fixture();
    let s = run::summary(std::slice::from_ref(&run));
    assert_eq!(s.baseline, "stock");
    let total = s.rows.iter().find(|r| r.name == "total").unwrap();
    let (old, new) = (total.values[0].unwrap(), total.values[1].unwrap());
    assert_eq!((old.n, new.n), (REPS, REPS));
    let g = total.gain_pct[1].unwrap();
    // the gain is on the medians over repetitions
    assert!((g - (new.median - old.median) / old.median * 100.0).abs() < 1e-9);
    println!("{}", run::render_summary_text(&s));
    println!(
        "insmod of the set: stock {:.1} ms, unsigned {:.1} ms (medians), gain {g:+.1} %",
        old.median / 1000.0,
        new.median / 1000.0
    );
    // Guest time follows executed instructions (-icount): checking the
    // signatures is work the unsigned loads do not do, in every repetition.
    assert!(new.max < old.min, "unsigned loads are not faster: {new:?} vs {old:?}");
    let json: serde_json::Value = serde_json::from_str(&chart::render(&[run], chart::Format::Json)).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), s.rows.len());
}

/// A 100,000-line log (the real one's lines repeated, later copies shifted
/// in time, one `Linux version`) parsed and charted in all three forms.
#[test]
fn hundred_thousand_lines_are_fast() {
    let b = booted();
    let lines: Vec<&str> = b.log.lines().collect();
    let parsed = dmesg::parse(b.log.as_bytes());
    let span = parsed.last_us + 1.0;
    let mut big = String::with_capacity(100_000 * 80);
    let mut n = 0;
    let mut copy = 0;
    while n < 100_000 {
        for l in &lines {
            if n == 100_000 {
                break;
            }
            // One boot's log continued, not a reboot: a second `Linux
            // version` is a log of two boots, which chart refuses.
            if copy > 0 && l.contains("] Linux version ") {
                continue;
            }
            match dmesg::timestamp(l.as_bytes()) {
                Some((t, end)) if copy > 0 => {
                    let t = t + copy as f64 * span;
                    big.push_str(&format!("[{:5}.{:06}]{}\n", (t / 1e6) as u64, (t as u64) % 1_000_000, &l[end..]));
                }
                _ => {
                    big.push_str(l);
                    big.push('\n');
                }
            }
            n += 1;
        }
        copy += 1;
    }
    let tmp = TempDir::new("chart-big").unwrap();
    let path = tmp.path().join("big.dmesg");
    std::fs::write(&path, &big).unwrap();
    let t0 = Instant::now();
    let run = run::load(&path).unwrap();
    let t_parse = t0.elapsed();
    let html = chart::render_html(std::slice::from_ref(&run));
    let t_html = t0.elapsed();
    let svg = chart::render_svg(std::slice::from_ref(&run));
    let perfetto = chart::render_perfetto(std::slice::from_ref(&run));
    let t_all = t0.elapsed();
    let calls = run.variants[0].repetitions[0].initcalls.len();
    println!(
        "100,000 lines ({} MB, {copy} copies of the boot log): {calls} initcalls; parse {:.0} ms, +HTML {:.0} ms ({} KB), +SVG +Perfetto {:.0} ms ({} KB, {} KB)",
        big.len() / 1_000_000,
        t_parse.as_secs_f64() * 1e3,
        t_html.as_secs_f64() * 1e3,
        html.len() / 1024,
        t_all.as_secs_f64() * 1e3,
        svg.len() / 1024,
        perfetto.len() / 1024
    );
    assert!(calls > 30_000, "{calls}");
    // The 0.5 s goal is bench/chart's to check (a timed assertion here
    // failed on a loaded 2-core machine, in a debug build, at 0.52 s).
    // The HTML stays small whatever the number of initcalls.
    assert!(html.len() < 3_000_000, "{} bytes", html.len());
}

/// The real log damaged the ways real captures are: CRLF line ends, junk
/// and binary lines, a cut-off end, lines without timestamps.
#[test]
fn damaged_logs_parse_the_same() {
    let b = booted();
    let clean = dmesg::parse(b.log.as_bytes());
    let n = clean.initcalls.len();

    let crlf = b.log.replace('\n', "\r\n");
    assert_eq!(dmesg::parse(crlf.as_bytes()).initcalls, clean.initcalls, "CRLF");

    let mut junk = Vec::new();
    for (i, l) in b.log.lines().enumerate() {
        junk.extend_from_slice(l.as_bytes());
        junk.push(b'\n');
        if i % 7 == 0 {
            junk.extend_from_slice(b"\x1b[0m\xff\xfe garbage [ 12.34 no bracket\n[  abc] initcall x returned\n\n");
        }
    }
    assert_eq!(dmesg::parse(&junk).initcalls, clean.initcalls, "junk lines");

    // Cut in the middle of the last `returned` line: that initcall is lost, no other.
    let last = b.log.rfind(" returned ").unwrap();
    let cut = dmesg::parse(&b.log.as_bytes()[..last + 12]);
    assert_eq!(cut.initcalls[..], clean.initcalls[..n - 1], "truncated");
    assert_eq!(cut.unfinished, 1);

    // Calling lines without timestamps: the start is the return time minus
    // the printed duration, which is the printed duration still.
    let mut stripped = String::new();
    for l in b.log.lines() {
        match (l.contains("] calling  "), dmesg::timestamp(l.as_bytes())) {
            (true, Some((_, end))) => stripped.push_str(l[end..].trim_start()),
            _ => stripped.push_str(l),
        }
        stripped.push('\n');
    }
    let s = dmesg::parse(stripped.as_bytes());
    assert_eq!(s.initcalls.len(), n);
    let returned: Vec<f64> = b
        .log
        .lines()
        .filter(|l| l.contains("] initcall ") && l.contains(" returned "))
        .filter_map(|l| dmesg::timestamp(l.as_bytes()).map(|t| t.0))
        .collect();
    for ((a, c), r) in s.initcalls.iter().zip(&clean.initcalls).zip(&returned) {
        assert_eq!(a.duration_us, c.duration_us);
        assert_eq!(a.start_us, (r - a.duration_us).max(0.0), "{}", a.name);
    }
    println!("damaged logs: {n} initcalls each (CRLF, junk, cut-off, no calling timestamps)");
}

#[test]
fn load_reports_bad_inputs() {
    let tmp = TempDir::new("chart-load").unwrap();
    let err = run::load(&tmp.path().join("missing")).unwrap_err().to_string();
    assert!(err.contains("missing") && err.contains("no such file"), "{err}");
    let err = run::load(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("without run.json"), "{err}");
    let bad = tmp.path().join("run.json");
    std::fs::write(&bad, "{\"format\": 1}").unwrap();
    let err = run::load(&bad).unwrap_err().to_string();
    assert!(err.contains("run.json") && err.contains("not a bootlink run.json"), "{err}");
    let mut r = dmesg::run_from_log(b"", Path::new("x"));
    r.format = FORMAT_VERSION + 1;
    std::fs::write(&bad, serde_json::to_string(&r).unwrap()).unwrap();
    assert!(run::load(&bad).unwrap_err().to_string().contains("newer"));
    // An empty file is no kernel log (and random bytes, another file, two
    // boots in one log: tests/offline/damaged.rs); a kernel log without
    // initcall_debug's lines is a run with nothing in it, and still charts.
    let empty = tmp.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let err = run::load(&empty).unwrap_err().to_string();
    assert!(err.contains("empty.log: the file is empty"), "{err}");
    let quiet = tmp.path().join("quiet.log");
    std::fs::write(&quiet, "[    0.000000] Linux version 6.1.0-56-amd64\n").unwrap();
    let run = run::load(&quiet).unwrap();
    let html = chart::render_html(std::slice::from_ref(&run));
    assert!(html.contains("No initcalls or module loads"));
    let out = chart::command(std::slice::from_ref(&quiet), &chart::Outputs::default()).unwrap_err().to_string();
    assert!(out.contains("-o FILE.html"), "{out}");
    let o = chart::Outputs { html: Some(tmp.path().join("e.html")), ..Default::default() };
    use bootlink::report::Report;
    assert!(chart::command(&[quiet], &o).unwrap().render().contains("e.html"));
    // Names with markup are escaped.
    let evil = tmp.path().join("<b>&.log");
    std::fs::write(
        &evil,
        "[    0.1] calling  <x>+0x0/0x1 @ 1\n[    0.2] initcall <x>+0x0/0x1 returned 0 after 7 usecs\n",
    )
    .unwrap();
    let html = chart::render_html(&[run::load(&evil).unwrap()]);
    assert!(!html.contains("<x>") && !html.contains("<b>&") && html.contains("&lt;x&gt;"));
}

// ---- Synthetic runs (no QEMU): parallel loaders and duplicate-request storms.

/// A module load with phases laid end to end from `start`.
fn synth_load(name: &str, start: f64, phases: &[(&str, f64)], worker: Option<u32>) -> ModuleLoad {
    let mut t = start;
    let phases: Vec<Phase> = phases
        .iter()
        .map(|(n, d)| {
            t += d;
            Phase { name: n.to_string(), start_us: t - d, duration_us: *d }
        })
        .collect();
    ModuleLoad {
        name: name.into(),
        start_us: start,
        total_us: t - start,
        phases,
        lookups: Some(12),
        size: 40_000,
        status: 0,
        finalize_steps: Vec::new(),
        init_steps: Vec::new(),
        worker,
    }
}

fn synth_builtin() -> Vec<Initcall> {
    (0..5)
        .map(|i| Initcall {
            name: format!("init_{i}"),
            start_us: 1_000.0 + i as f64 * 3_000.0,
            duration_us: 1_500.0 + i as f64 * 100.0,
            ret: 0,
            module: String::new(),
        })
        .collect()
}

fn synth_run(variants: Vec<(&str, Vec<Repetition>)>) -> Run {
    Run {
        format: FORMAT_VERSION,
        source: "lab".into(),
        kernel_release: "6.1.0-synthetic".into(),
        kernel: PathBuf::new(),
        cmdline: String::new(),
        qemu_version: String::new(),
        cpu_model: String::new(),
        machine: String::new(),
        arch: String::new(),
        qemu_command: Vec::new(),
        timing: "deterministic".into(),
        module_set: "synthetic".into(),
        variants: variants.into_iter().map(|(n, reps)| Variant { repetitions: reps, ..Variant::named(n) }).collect(),
        partial: false,
        tracing_overhead_pct: None,
        device_type: String::new(),
    }
}

fn synth_rep(index: usize, modules: Vec<ModuleLoad>) -> Repetition {
    Repetition {
        index,
        init_start_us: 20_000.0,
        modules_total_us: modules.iter().map(|m| m.total_us).sum(),
        initcalls: synth_builtin(),
        modules,
        log: "console.log".into(),
        ..Default::default()
    }
}

/// One variant loaded one module after the other (no worker lanes).
fn synth_sequential() -> Run {
    let mut t = 30_000.0;
    let mods: Vec<ModuleLoad> = ["fat", "vfat", "crc16", "mbcache", "jbd2", "ext4"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let m = synth_load(
                n,
                t,
                &[("read", 200.0 + i as f64 * 10.0), ("symbols", 800.0 * (i + 1) as f64), ("init", 300.0)],
                None,
            );
            t += m.total_us + 50.0;
            m
        })
        .collect();
    synth_run(vec![("stock", vec![synth_rep(0, mods)])])
}

/// A batch loader's boot: 3 workers, their loads overlapping in time.
/// (name, worker, start µs).
const BATCH: &[(&str, u32, f64)] = &[
    ("alpha", 0, 30_000.0),
    ("bravo", 1, 30_200.0),
    ("charlie", 2, 30_300.0),
    ("delta", 0, 35_100.0),
    ("echo", 1, 34_500.0),
    ("foxtrot", 2, 37_400.0),
];

fn synth_batch_rep(index: usize, wall_us: f64) -> Repetition {
    let mods = BATCH
        .iter()
        .enumerate()
        .map(|(i, (n, w, t))| {
            synth_load(n, *t, &[("read", 300.0), ("symbols", 1_500.0 + i as f64 * 400.0), ("init", 2_000.0)], Some(*w))
        })
        .collect();
    Repetition {
        workloads: vec![WorkloadResult::Loader(LoaderResult {
            kind: "batch".into(),
            workers: 3,
            exit: 0,
            wall_us,
            load_calls: BATCH.len() as u64,
            duplicates: Vec::new(),
            not_loaded: Vec::new(),
            decompressed_by_kernel: 0,
            decompressed_by_user: 0,
        })],
        ..synth_rep(index, mods)
    }
}

/// The y of the first rect after `needle` in `svg`.
fn rect_y_after(svg: &str, needle: &str) -> f64 {
    let i = svg.find(needle).unwrap_or_else(|| panic!("{needle} not in the SVG"));
    let rest = &svg[i..];
    let r = &rest[rest.find("<rect ").unwrap()..];
    let y = &r[r.find(" y=\"").unwrap() + 4..];
    y[..y.find('"').unwrap()].parse().unwrap()
}

/// The text of the element that starts at `needle`.
fn text_after<'a>(hay: &'a str, needle: &str) -> &'a str {
    let i = hay.find(needle).unwrap_or_else(|| panic!("{needle} not found"));
    let rest = &hay[i..];
    let a = rest.find('>').unwrap() + 1;
    &rest[a..a + rest[a..].find('<').unwrap()]
}

#[test]
fn parallel_timeline_has_a_lane_per_worker() {
    let run = synth_run(vec![("batch-3", vec![synth_batch_rep(0, 12_000.0)])]);
    let svg = chart::render_svg(std::slice::from_ref(&run));
    // One labelled row per worker, in order, and no sequential overview.
    let mut label_y = Vec::new();
    for w in 0..3 {
        let needle = format!(r#"data-lane-label="{w}""#);
        assert_eq!(text_after(&svg, &needle), format!("worker {w}"));
        let i = svg.find(&needle).unwrap();
        let y = &svg[i..][svg[i..].find(" y=\"").unwrap() + 4..];
        label_y.push(y[..y.find('"').unwrap()].parse::<f64>().unwrap());
    }
    assert!(!svg.contains("worker 3") && !svg.contains("no worker"), "only 3 workers");
    assert!(label_y[0] < label_y[1] && label_y[1] < label_y[2], "{label_y:?}");
    assert!(svg.contains("Module loads by worker") && svg.contains("6 modules on 3 workers"));
    assert!(!svg.contains("all 6 modules") && !svg.contains(r#"<g class="tl-detail""#), "the sequential panel");
    // Each module's bar in its worker's row: the same y for one worker, just below its label's row top.
    for (name, w, start) in BATCH {
        let needle = format!(r#"data-module="{name}" data-lane="{w}">"#);
        assert_eq!(count(&svg, &needle), 1, "{name}");
        let y = rect_y_after(&svg, &needle);
        let row_top = label_y[*w as usize] - 14.0;
        assert!((y - (row_top + 2.5)).abs() < 0.05, "{name}: bar y {y}, worker {w} row from {row_top}");
        // The tooltip names module, start, duration and worker.
        let i = svg.find(&needle).unwrap();
        let tip = &svg[i..][svg[i..].find("<title>").unwrap() + 7..];
        let tip = &tip[..tip.find("</title>").unwrap()];
        let m = &run.variants[0].repetitions[0].modules.iter().find(|m| m.name == *name).unwrap();
        let want = format!("{name}: {} ms (from {} ms)\nworker {w}", chart_ms(m.total_us), chart_ms(*start));
        assert!(tip.starts_with(&want), "{tip:?} vs {want:?}");
        // Phase segments inside the bar, and the name where it fits.
        let group = &svg[i..i + svg[i..].find("</g>").unwrap()];
        assert_eq!(count(group, "data-phase="), 3, "{group}");
        assert!(group.contains(&format!(">{name}</text>")), "no label in {group}");
    }
    // Bars of one worker never overlap; bars of different workers do.
    let rep = &run.variants[0].repetitions[0];
    let (a, b) = (&rep.modules[0], &rep.modules[1]);
    assert!(b.start_us < a.start_us + a.total_us && a.worker != b.worker);
    // The HTML page embeds the same timeline.
    let html = chart::render_html(std::slice::from_ref(&run));
    for w in 0..3 {
        assert!(html.contains(&format!(r#"data-lane-label="{w}" "#)) && html.contains(&format!(">worker {w}<")));
    }
    assert_eq!(count(&html, r#"class="tl-bar tl-lane""#), BATCH.len());
    assert!(!html.contains("NaN"));
}

/// The charts' millisecond format (as `bootlink::table::ms`).
fn chart_ms(us: f64) -> String {
    bootlink::table::ms(us)
}

#[test]
fn parallel_perfetto_puts_each_worker_on_a_track() {
    let run = synth_run(vec![("batch-3", vec![synth_batch_rep(0, 12_000.0), synth_batch_rep(1, 11_000.0)])]);
    let v: serde_json::Value = serde_json::from_str(&chart::render_perfetto(std::slice::from_ref(&run))).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let mut names: HashMap<u64, String> = HashMap::new();
    for e in ev.iter().filter(|e| e["name"] == "thread_name") {
        let prev = names.insert(e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string());
        assert!(prev.is_none(), "thread id named twice: {e}");
    }
    let mut seen = 0;
    for e in ev.iter().filter(|e| e["cat"] == "module") {
        let name = e["name"].as_str().unwrap();
        let (_, w, _) = BATCH.iter().find(|b| b.0 == name).unwrap();
        let track = &names[&e["tid"].as_u64().unwrap()];
        assert!(track.ends_with(&format!("worker {w}")), "{name} on {track}");
        assert_eq!(e["args"]["worker"].as_u64(), Some(*w as u64));
        seen += 1;
    }
    assert_eq!(seen, 2 * BATCH.len());
    let tracks: Vec<&String> = names.values().filter(|n| n.contains("worker")).collect();
    assert_eq!(tracks.len(), 6, "3 workers x 2 repetitions: {tracks:?}");
    assert!(names.values().any(|n| n == "rep 2 worker 2"), "{names:?}");
    assert!(!names.values().any(|n| n.contains("module loads")), "no sequential lanes");
}

fn storm(requests: u64, eexist: u64, quiescence_us: f64, stats: &[(&str, i64)]) -> Storm {
    Storm {
        workers: 4,
        requests,
        results: vec![("loaded".into(), requests - eexist), ("File exists".into(), eexist)],
        kernel_reads: requests,
        bytes_read: requests * 512 * 1024,
        duplicate_read_bytes: eexist * 512 * 1024,
        load_module_calls: if stats.is_empty() { None } else { Some(requests) },
        vmalloc_before_kb: 10_000,
        vmalloc_peak_kb: 10_000 + eexist * 256,
        quiescence_us,
        kernel_stats: stats.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
    }
}

fn storm_rep(index: usize, s: Storm) -> Repetition {
    Repetition { index, workloads: vec![WorkloadResult::Storm(s)], log: "console.log".into(), ..Default::default() }
}

fn synth_storms() -> Run {
    synth_run(vec![
        (
            "storm-stock",
            vec![
                storm_rep(0, storm(160, 120, 80_000.0, &[])),
                storm_rep(1, storm(160, 120, 90_000.0, &[])),
                storm_rep(2, storm(160, 120, 85_000.0, &[])),
            ],
        ),
        (
            "storm-patched",
            vec![storm_rep(
                0,
                storm(
                    160,
                    8,
                    20_000.0,
                    &[("Load requests", 160), ("Virtual mem wasted bytes", 1_572_864), ("bl_fail 3", -22)],
                ),
            )],
        ),
    ])
}

/// The cells of the row of `class` table for `variant`, tags stripped
/// (a spread's text follows its median after a space).
fn row_cells(html: &str, class: &str, variant: &str) -> Vec<String> {
    let t = &html[html.find(&format!(r#"<table class="{class}">"#)).unwrap()..];
    let t = &t[..t.find("</table>").unwrap()];
    let r = &t[t.find(&format!(r#"<tr data-variant="{variant}">"#)).unwrap()..];
    let r = &r[..r.find("</tr>").unwrap()];
    r.split("<td")
        .skip(1)
        .map(|c| {
            let mut out = String::new();
            let mut tag = false;
            for ch in c[c.find('>').unwrap() + 1..].chars() {
                match ch {
                    '<' => {
                        tag = true;
                        out.push(' ');
                    }
                    '>' => tag = false,
                    c if !tag => out.push(c),
                    _ => {}
                }
            }
            out.trim().to_string()
        })
        .collect()
}

#[test]
fn storm_table_shows_the_duplicate_requests() {
    let run = synth_storms();
    let html = chart::render_html(std::slice::from_ref(&run));
    assert!(html.contains(r#"<section id="storm">"#));
    let stock = row_cells(&html, "storm", "storm-stock");
    assert_eq!(
        stock,
        [
            "storm-stock",
            "4 n=3",
            "160 n=3",
            "40 loaded, 120 EEXIST",
            "160 n=3",
            "80.00 n=3",
            "60.00 n=3",
            "—",
            "30.00 n=3",
            "85.0 ms 80.0 ms–90.0 ms · n=3",
            "—",
        ]
    );
    let patched = row_cells(&html, "storm", "storm-patched");
    assert_eq!(
        patched,
        ["storm-patched", "4", "160", "152 loaded, 8 EEXIST", "160", "80.00", "4.00", "160", "2.00", "20.0 ms", "1.50"]
    );
    assert!(
        html.contains("Debian&#39;s kernels have no such counter")
            || html.contains("Debian's kernels have no such counter")
    );
    // The kernel's statistics: counters only (not the failed-module lines).
    assert!(html.contains("<td>Load requests</td><td>—</td><td>160</td>"), "kernel stats table");
    assert!(!html.contains("bl_fail"));
    // Storm variants have no module loads: no empty charts, no NaN.
    assert!(!html.contains(r#"id="before-after""#), "nothing to compare");
    assert!(!html.contains(r#"id="modules""#) && !html.contains(r#"class="longest""#));
    assert_eq!(count(&html, "A duplicate-request storm: no per-module loads"), 2);
    for bad in ["NaN", "inf", "<table><tr><th>Phase</th>"] {
        assert!(!html.contains(bad), "{bad} in the HTML");
    }
    assert!(!html.contains(r#"id="loaders""#), "no loader figures");
    // The same as text.
    let text = chart::render_loaders_text(std::slice::from_ref(&run));
    let line = text.lines().find(|l| l.starts_with("storm-stock")).expect("a stock line");
    for want in ["40 loaded, 120 EEXIST", "85.0 ms (80.0 ms-90.0 ms)", "60.00", "30.00"] {
        assert!(line.contains(want), "{want} not in {line:?}");
    }
    let line = text.lines().find(|l| l.starts_with("storm-patched")).unwrap();
    assert!(line.contains("152 loaded, 8 EEXIST") && line.trim_end().ends_with("1.50"), "{line}");
    assert!(!text.contains("Loaders"));
}

#[test]
fn loader_table_and_mixed_variants() {
    let mut batch: Vec<Repetition> =
        [12_000.0, 10_000.0, 11_000.0].iter().enumerate().map(|(i, w)| synth_batch_rep(i, *w)).collect();
    {
        let l = batch[2].loader_mut();
        l.load_calls = 7;
        l.duplicates = vec!["alpha".into()];
        l.not_loaded = vec![("bl_fail".into(), "Invalid argument".into())];
    }
    let run = synth_run(vec![
        ("stock", synth_sequential().variants.remove(0).repetitions),
        ("batch-3", batch),
        ("storm", vec![storm_rep(0, storm(24, 18, 5_000.0, &[]))]),
    ]);
    let html = chart::render_html(std::slice::from_ref(&run));
    let row = row_cells(&html, "loaders", "batch-3");
    assert_eq!(row, ["batch-3", "batch", "3 n=3", "11.0 ms 10.0 ms–12.0 ms · n=3", "6 6–7 · n=3", "1", "1"]);
    assert!(html.contains("batch-3: loaded more than once: alpha"));
    assert!(html.contains("batch-3: not loaded: bl_fail (Invalid argument)"));
    assert!(!html.contains(r#"<tr data-variant="stock">"#), "the sequential variant has no loader row");
    // One timeline with worker lanes (the batch), one without (stock), one storm note.
    assert_eq!(count(&html, "Module loads by worker"), 1);
    assert_eq!(count(&html, r#"<g class="tl-detail""#), 6);
    assert_eq!(count(&html, "A duplicate-request storm: no per-module loads"), 1);
    // The before/after compares what was measured: no all-dash storm column.
    assert!(html.contains(r#"id="before-after""#) && !html.contains("NaN"));
    let ba = &html[html.find(r#"id="before-after""#).unwrap()..];
    let ba = &ba[..ba.find("</section>").unwrap()];
    assert!(ba.contains("<th>stock (old)</th><th>batch-3</th><th>gain</th></tr>"), "{ba}");
    assert!(ba.contains("Not in these tables (no module loads or initcalls measured): storm."));
    let text = chart::render_loaders_text(std::slice::from_ref(&run));
    assert!(text.contains("Loaders") && text.contains("Duplicate requests"), "{text}");
    let line = text.lines().find(|l| l.starts_with("batch-3")).unwrap();
    assert!(line.contains("11.0 ms (10.0 ms-12.0 ms)") && line.contains("6 (6-7)"), "{line}");
}

#[test]
fn sequential_runs_render_as_before() {
    let run = synth_sequential();
    let svg = chart::render_svg(std::slice::from_ref(&run));
    assert!(!svg.contains("worker") && !svg.contains("data-lane"), "lanes in a sequential run");
    // The overview lane of all loads and one detail row per module.
    assert!(svg.contains(">all 6 modules<") && svg.contains(">each<"));
    assert_eq!(count(&svg, r#"<g class="tl-detail""#), 6);
    assert_eq!(count(&svg, r#"<g class="tl-bar""#), 6, "every load in the overview lane");
    let html = chart::render_html(std::slice::from_ref(&run));
    assert!(!html.contains("worker") && !html.contains(r#"id="storm""#) && !html.contains(r#"id="loaders""#));
    let p = chart::render_perfetto(std::slice::from_ref(&run));
    assert!(p.contains(r#""name":"module loads""#) && !p.contains("worker"));
    assert_eq!(chart::render_loaders_text(std::slice::from_ref(&run)), "");
}
