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

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bootlink::chart;
use bootlink::lab::{Initramfs, QemuOptions, TempDir, busybox, initramfs, qemu};
use bootlink::run::results::{FORMAT_VERSION, Initcall, ModuleLoad, Phase, Repetition, Run, Variant};
use bootlink::run::{self, dmesg};

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
                        run_output: None,
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
        qemu_command: Vec::new(),
        timing: "deterministic".into(),
        module_set: format!("test: {} (insmod spans from /dev/kmsg markers, one boot)", MODULES.join(" ")),
        variants,
        partial: false,
        tracing_overhead_pct: None,
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
    assert!((g - (new.mean - old.mean) / old.mean * 100.0).abs() < 1e-9);
    println!("{}", run::render_summary_text(&s));
    println!(
        "insmod of the set: stock {:.1} ms, unsigned {:.1} ms, gain {g:+.1} %",
        old.mean / 1000.0,
        new.mean / 1000.0
    );
    // Guest time follows executed instructions (-icount): checking the
    // signatures is work the unsigned loads do not do, in every repetition.
    assert!(new.max < old.min, "unsigned loads are not faster: {new:?} vs {old:?}");
    let json: serde_json::Value = serde_json::from_str(&chart::render(&[run], chart::Format::Json)).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), s.rows.len());
}

/// A 100,000-line log (the real one's lines repeated, later copies shifted
/// in time) parsed and charted in all three forms.
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
    assert!(t_html < Duration::from_millis(500), "parse + HTML took {t_html:?} (goal < 0.5 s)");
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
    // An empty log is a run with nothing in it, and still charts.
    let empty = tmp.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let run = run::load(&empty).unwrap();
    let html = chart::render_html(std::slice::from_ref(&run));
    assert!(html.contains("No initcalls or module loads"));
    let out = chart::command(std::slice::from_ref(&empty), &chart::Outputs::default()).unwrap_err().to_string();
    assert!(out.contains("-o FILE.html"), "{out}");
    let o = chart::Outputs { html: Some(tmp.path().join("e.html")), ..Default::default() };
    assert!(chart::command(&[empty], &o).unwrap().contains("e.html"));
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
