//! The lab's inputs and bootlink's own cache, hostile (issue 47): run
//! records, kernel logs, LAVA jobs directories and job logs damaged one
//! way each by class (tests/damaged/lab.rs, seeded like the other
//! generators), through `bootlink chart` and `bootlink lava import`: no
//! panic, no hang, a marked file refused in one line naming it, nothing
//! written for it, the good logs of a batch still imported. `chart`'s time
//! and memory against the number of modules (linear, not quadratic). And
//! cache entries damaged in place (tests/damaged/caches.rs): the
//! decompressed-image cache, a build of the repository's C and the
//! reordering's test program made again, the same answer given, no input
//! blamed.

use crate::common;
// The damaged-input suite's generator and runner, declared once (in
// damaged.rs); this file's own generators beside them.
use crate::damaged::{generate, records, suite};
#[path = "../damaged/caches.rs"]
mod caches;
#[path = "../damaged/lab.rs"]
mod lab;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use bootlink::rng::Rng;
use common::TestCommand;

fn seed() -> u64 {
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    seed
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_owned()).collect()
}

/// The checked-in LAVA jobs directory and job logs (`tests/fixtures/lava/`)
/// in `dir`: its manifest, and the logs of jobs 101 (stock) and 102
/// (unsigned), decompressed.
fn lava_fixtures(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let src = fixtures().join("lava");
    let jobs = dir.join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::copy(src.join("bootlink-lava.json"), jobs.join("bootlink-lava.json")).unwrap();
    let log = |id: &str| {
        let p = dir.join(format!("{id}.yaml"));
        std::fs::write(&p, common::sh("xz", &["-dc", src.join(format!("{id}.yaml.xz")).to_str().unwrap()])).unwrap();
        p
    };
    (jobs, log("101"), log("102"))
}

fn each_class_alone(
    dir: &Path,
    files: &[generate::Damaged],
    commands: &[suite::OneInput],
    classes: &[&str],
    noun: &str,
    title: &str,
) {
    let mut counts = suite::Counts::default();
    suite::each_alone(dir, files, commands, &mut counts);
    for class in classes {
        assert!(counts.by_class.contains_key(*class), "no damaged {noun} of class {class}");
    }
    common::report("damaged", &counts.render(title));
}

/// `chart` refuses damaged run records and kernel logs in one line each
/// (random bytes no longer chart as an empty boot, two boots in one log no
/// longer as one), and charts the hostile numbers it accepts without
/// hanging or taking memory for them.
#[test]
fn damaged_runs_and_kernel_logs_are_refused_by_chart() {
    let mut rng = Rng(seed() ^ 0x6368_6172);
    let dir = common::tmpdir("damaged-chart");
    let (jobs, l101, l102) = lava_fixtures(&dir);
    let run = dir.join("run");
    TestCommand::new(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &run, &l101, &l102]).ok();
    let base = std::fs::read_to_string(run.join("run.json")).unwrap();
    TestCommand::new(&[&"chart", &run.join("run.json"), &"--json"]).ok();
    let chart: Vec<suite::OneInput> = vec![
        ("chart -o", Box::new(|p: &Path, out: &Path| os(&[&"chart", &p, &"-o", &out]))),
        ("chart --json", Box::new(|p: &Path, _: &Path| os(&[&"chart", &p, &"--json"]))),
    ];
    let runs = lab::runs(&base, &mut rng, 6);
    each_class_alone(&dir.join("runs"), &runs, &chart, lab::RUN_CLASSES, "run.json", "damaged run records (chart)");

    let log = std::fs::read_to_string(fixtures().join("dmesg-6.1-vfat.log")).unwrap();
    TestCommand::new(&[&"chart", &fixtures().join("dmesg-6.1-vfat.log"), &"--json"]).ok();
    let logs = lab::kernel_logs(&log, &mut rng, 6);
    each_class_alone(&dir.join("logs"), &logs, &chart, lab::LOG_CLASSES, "kernel log", "damaged kernel logs (chart)");
}

/// `lava import` refuses damaged jobs directories (a run without variants
/// used to panic on an index) and damaged job logs (a boot that repeats
/// used to import both boots' initcalls as one) in one line naming the
/// file, writes nothing for them, and still imports the good logs given
/// with them.
#[test]
fn damaged_lava_jobs_and_logs_are_refused_by_lava_import() {
    let mut rng = Rng(seed() ^ 0x6c61_7661);
    let dir = common::tmpdir("damaged-lava");
    let (jobs, l101, l102) = lava_fixtures(&dir);
    let manifest = std::fs::read_to_string(jobs.join("bootlink-lava.json")).unwrap();

    let good = l101.clone();
    let with_jobs: Vec<suite::OneInput> = vec![(
        "lava import --jobs",
        Box::new(move |p: &Path, out: &Path| {
            os(&[&"lava", &"import", &"--jobs", &p.parent().unwrap(), &"-o", &out, &good])
        }),
    )];
    let damaged_jobs = lab::jobs(&manifest, &mut rng, 6);
    each_class_alone(
        &dir.join("jobs-damaged"),
        &damaged_jobs,
        &with_jobs,
        lab::JOBS_CLASSES,
        "jobs directory",
        "damaged LAVA jobs directories (lava import)",
    );

    let base = std::fs::read_to_string(&l101).unwrap();
    let logs = lab::lava_logs(&base, &mut rng, 6);
    let j = jobs.clone();
    let with_log: Vec<suite::OneInput> = vec![(
        "lava import",
        Box::new(move |p: &Path, out: &Path| os(&[&"lava", &"import", &"--jobs", &j, &"-o", &out, &p])),
    )];
    each_class_alone(
        &dir.join("logs"),
        &logs,
        &with_log,
        lab::LAVA_LOG_CLASSES,
        "LAVA log",
        "damaged LAVA job logs (lava import)",
    );

    // All of them in one import with a good log: each marked one refused
    // in its line, the good one imported alone, nothing of the others.
    let batch = dir.join("batch");
    std::fs::create_dir_all(&batch).unwrap();
    let mut paths = Vec::new();
    for (n, f) in logs.iter().enumerate() {
        let p = batch.join(format!("{n}-{}", f.name));
        suite::place(&p, f, n);
        paths.push(p);
    }
    let out = dir.join("batch-run");
    let mut c = TestCommand::new(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &out, &l102]);
    for p in &paths {
        c = c.arg(p);
    }
    let o = c.cmd_output();
    assert!(!o.status.success(), "the batch holds refused logs");
    let err = common::stderr(&o);
    for (f, p) in logs.iter().zip(&paths).filter(|(f, _)| f.invalid) {
        let prefix = format!("bootlink: {}: ", p.display());
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with(&prefix)).collect();
        assert_eq!(lines.len(), 1, "{} ({}): not one line:\n{err}", p.display(), f.class);
        assert!(generate::gives_reason(lines[0], f), "{} ({}): {}", p.display(), f.class, lines[0]);
    }
    let run = bootlink_lab::run::load(&out).unwrap();
    let unsigned = run.variants.iter().find(|v| v.name == "unsigned").expect("the good log's variant");
    assert_eq!(unsigned.repetitions.len(), 1);
    assert_eq!(unsigned.repetitions[0].job.as_deref(), Some("102"));
    let jobs_in: Vec<&str> =
        run.variants.iter().flat_map(|v| &v.repetitions).filter_map(|r| r.job.as_deref()).collect();
    let accepted = logs.iter().filter(|f| !f.invalid).count();
    assert!(jobs_in.len() <= 1 + accepted, "{jobs_in:?}");
}

/// A run.json of `n` modules per repetition (two variants, each module
/// with five phases, an initcall each).
fn big_run(n: usize) -> String {
    let rep = |i: usize| {
        let mut modules = Vec::with_capacity(n);
        let mut t = 1_000_000.0;
        for k in 0..n {
            let phases: Vec<serde_json::Value> = ["read", "layout", "symbols", "relocation", "init"]
                .iter()
                .enumerate()
                .map(|(j, p)| serde_json::json!({"name": p, "start_us": t + 10.0 * j as f64, "duration_us": 10.0}))
                .collect();
            modules.push(serde_json::json!({"name": format!("mod{k}"), "start_us": t, "total_us": 60.0,
                "phases": phases, "lookups": 12, "size": 4000, "status": 0}));
            t += 70.0;
        }
        let initcalls: Vec<serde_json::Value> = (0..n)
            .map(
                |k| serde_json::json!({"name": format!("init_{k}"), "start_us": 1000.0 + k as f64, "duration_us": 1.0}),
            )
            .collect();
        serde_json::json!({"index": i, "boot_wall_s": 1.0, "init_start_us": 900_000.0, "modules_total_us": t - 1e6,
            "initcalls": initcalls, "modules": modules, "log": "logs/x.log"})
    };
    let run = serde_json::json!({"format": 2, "source": "lab", "kernel_release": "6.1", "kernel": "/k", "cmdline": "",
        "timing": "deterministic", "module_set": "big",
        "variants": [{"name": "a", "repetitions": [rep(0)]}, {"name": "b", "repetitions": [rep(0)]}]});
    serde_json::to_string(&run).unwrap()
}

/// `chart` of a run with 8 times the modules takes at most about 8 times
/// the CPU time and memory (linear, with slack for a loaded machine): it
/// took 10 times the time for 4 times the modules (a list searched per
/// module, over a minute at 100,000 modules).
#[test]
fn chart_takes_time_and_memory_linear_in_the_modules() {
    let dir = common::tmpdir("chart-scale");
    let mut cost = Vec::new();
    for n in [1_000, 8_000] {
        let run = dir.join(format!("run-{n}.json"));
        std::fs::write(&run, big_run(n)).unwrap();
        let out = dir.join(format!("out-{n}"));
        let (cpu, rss) = common::measured(&[
            &"chart",
            &run,
            &"--json",
            &"-o",
            &out.with_extension("html"),
            &"--svg",
            &out.with_extension("svg"),
            &"--perfetto",
            &out.with_extension("trace.json"),
        ]);
        cost.push((cpu, rss));
        let size = std::fs::metadata(&run).unwrap().len() >> 10;
        println!(
            "chart of {n} modules per repetition ({size} KiB of run.json): {cpu:.2} s CPU, {} MiB peak",
            rss >> 10
        );
    }
    let line = common::linear_in_the_input("chart (1,000 -> 8,000 modules per repetition)", cost[0], cost[1]);
    common::report("chart scale", &line);
}

/// The entry `kernel-info IMAGE` leaves in the decompressed-image cache:
/// (the vmlinux, its record).
fn image_entry(cache: &Path) -> (PathBuf, PathBuf) {
    let mut elfs: Vec<PathBuf> = std::fs::read_dir(cache.join("vmlinux"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "elf"))
        .collect();
    assert_eq!(elfs.len(), 1, "{elfs:?}");
    let elf = elfs.pop().unwrap();
    (elf.clone(), elf.with_extension("json"))
}

/// A damaged entry of the decompressed-image cache (its vmlinux cut,
/// flipped past its ELF header, replaced; its record damaged) made the
/// good image unreadable and blamed it; now the entry is made again from
/// the image and the answer is the same.
#[test]
fn a_damaged_image_cache_entry_is_made_again() {
    let mut rng = Rng(seed() ^ 0x696d_6763);
    let dir = common::tmpdir("image-cache");
    let cache = dir.join("cache");
    let vmlinux = std::fs::read(fixtures().join("vmlinux")).unwrap();
    let image = dir.join("vmlinux.xz");
    std::fs::write(&image, bootlink::compress::compress(&vmlinux, bootlink::compress::Compression::Xz).unwrap())
        .unwrap();
    let info = || {
        let o = TestCommand::new(&[&"kernel-info", &image, &"--json"])
            .env("BOOTLINK_CACHE", cache.to_str().unwrap())
            .cmd_output();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), common::stderr(&o))
    };
    let (code, want, err) = info();
    assert_eq!((code, err.as_str()), (Some(0), ""), "{want}");
    let (elf, record) = image_entry(&cache);
    let whole = (std::fs::read(&elf).unwrap(), std::fs::read(&record).unwrap());
    assert_eq!(whole.0, vmlinux, "the cache holds the image's vmlinux");
    let mut runs = 0;
    for class in caches::CLASSES {
        for (what, file, keep) in [("vmlinux", &elf, 64), ("record", &record, 0)] {
            for _ in 0..2 {
                caches::damage(file, class, keep, &mut rng);
                let (code, got, err) = info();
                runs += 1;
                assert_eq!(code, Some(0), "{class} {what}: the good image refused:\n{err}");
                assert!(err.is_empty(), "{class} {what}: said something:\n{err}");
                assert_eq!(got, want, "{class} {what}: another answer");
                assert_eq!(image_entry(&cache), (elf.clone(), record.clone()));
                assert_eq!(std::fs::read(&elf).unwrap(), whole.0, "{class} {what}: the entry not made again");
                assert_eq!(std::fs::read(&record).unwrap(), whole.1, "{class} {what}: the record not made again");
            }
        }
    }
    common::report(
        "damaged",
        &format!(
            "decompressed-image cache: {} classes x 2 files x 2: {runs} runs, every one answered as with a whole entry and the entry made again",
            caches::CLASSES.len()
        ),
    );
}

/// A damaged build in the cache (the trace runtime, a product of the
/// repository's C; the reordering's test program, its sources and
/// objects; either's seal) is built again: the same order, the entry whole
/// again.
#[test]
fn a_damaged_build_in_the_cache_is_made_again() {
    let mut rng = Rng(seed() ^ 0x6275_696c);
    let dir = common::tmpdir("build-cache");
    let cache = dir.join("cache");
    let synth = || {
        let o = TestCommand::new(&[
            &"order",
            &"synth",
            &"--json",
            &"--functions",
            &"60",
            &"--startup",
            &"20",
            &"--files",
            &"3",
            &"--seed",
            &"4",
        ])
        .env("BOOTLINK_CACHE", cache.to_str().unwrap())
        .cmd_output();
        assert!(o.status.success(), "order synth failed:\n{}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["mapped"]["order"].clone()
    };
    let order = synth();
    let entry = |sub: &str| -> PathBuf {
        let d: Vec<PathBuf> = std::fs::read_dir(cache.join(sub))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect();
        assert_eq!(d.len(), 1, "{sub}: {d:?}");
        d[0].clone()
    };
    let (trace, program) = (entry("trace"), entry("order-synth"));
    assert_eq!(bootlink::cache::check(&trace), Ok(()));
    assert_eq!(bootlink::cache::check(&program), Ok(()));
    let src = std::fs::read_dir(program.join("src")).unwrap().flatten().next().unwrap().path();
    let obj = std::fs::read_dir(program.join("plain")).unwrap().flatten().next().unwrap().path();
    let files: [(&str, PathBuf, usize); 6] = [
        ("the trace runtime", trace.join("bl-trace.o"), 64),
        ("the runtime's seal", trace.join(bootlink::cache::SEAL), 0),
        ("the program", program.join("synth-order"), 64),
        ("a source", src, 0),
        ("an object", obj, 64),
        ("the program's seal", program.join(bootlink::cache::SEAL), 0),
    ];
    // Each class once on a file in turn (each build is seconds; every class
    // on every kind of file is the cache module's unit test).
    let mut runs = 0;
    for (r, class) in caches::CLASSES.iter().enumerate() {
        let (what, file, keep) = &files[r % files.len()];
        caches::damage(file, class, *keep, &mut rng);
        let got = synth();
        runs += 1;
        assert_eq!(got, order, "{class} {what}: another order");
        assert_eq!(bootlink::cache::check(&trace), Ok(()), "{class} {what}: the runtime not made again");
        assert_eq!(bootlink::cache::check(&program), Ok(()), "{class} {what}: the program not made again");
    }
    common::report(
        "damaged",
        &format!("build cache (trace runtime, order synth): {runs} damaged entries, each built again, the same order"),
    );
}

/// `lava import` of a job log 8 times as long takes at most about 8 times
/// the CPU time and memory (linear, with slack for a loaded machine): the
/// fixture log of job 101 with 8,000 and then 64,000 more symbol lookups
/// traced in its first module's load (lines the importer reads and
/// counts), imported with its jobs directory. Each console is scanned once
/// and a boot's modules looked up in maps; a scan per line or a list
/// searched per module would show here as 64 times the work.
#[test]
fn lava_import_takes_time_and_memory_linear_in_the_log() {
    let dir = common::tmpdir("lava-scale");
    let (jobs, l101, _) = lava_fixtures(&dir);
    let base = std::fs::read_to_string(&l101).unwrap();
    let lines: Vec<&str> = base.lines().collect();
    let at = lines.iter().position(|l| l.contains("resolve_symbol();")).expect("a traced symbol lookup");
    let mut cost = Vec::new();
    for n in [8_000, 64_000] {
        let mut log = lines[..at].join("\n");
        log.push('\n');
        for _ in 0..n {
            log.push_str(lines[at]);
            log.push('\n');
        }
        log.push_str(&lines[at..].join("\n"));
        log.push('\n');
        let p = dir.join(format!("{n}.yaml"));
        std::fs::write(&p, &log).unwrap();
        let out = dir.join(format!("run-{n}"));
        cost.push(common::measured(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &out, &p]));
        let run = bootlink_lab::run::load(&out).unwrap();
        let lookups: u64 =
            run.variants.iter().flat_map(|v| &v.repetitions).flat_map(|r| &r.modules).filter_map(|m| m.lookups).sum();
        assert!(lookups >= n as u64, "{n} lookups added, {lookups} imported");
    }
    let line = common::linear_in_the_input("lava import (8,000 -> 64,000 traced lookups)", cost[0], cost[1]);
    common::report("lava scale", &line);
}

/// `chart` of a kernel log (a dmesg capture) 8 times as long takes at most
/// about 8 times the CPU time and memory: 16,000 and then 128,000 initcalls,
/// each a `calling` and a `returned` line, charted to HTML and SVG.
#[test]
fn chart_of_a_kernel_log_takes_time_and_memory_linear_in_its_lines() {
    let dir = common::tmpdir("chart-log-scale");
    let mut cost = Vec::new();
    for n in [16_000usize, 128_000] {
        let mut log =
            String::from("[    0.000000] Linux version 6.1.0-56-amd64 (x@y) (gcc-12) #1 SMP Debian 6.1.192-2\n");
        for k in 0..n {
            let t = 0.1 + k as f64 * 1e-5;
            log += &format!("[{t:12.6}] calling  init_{k}+0x0/0x40 @ 1\n");
            log += &format!("[{:12.6}] initcall init_{k}+0x0/0x40 returned 0 after 7 usecs\n", t + 7e-6);
        }
        let p = dir.join(format!("{n}.log"));
        std::fs::write(&p, &log).unwrap();
        let out = dir.join(format!("{n}.html"));
        cost.push(common::measured(&[&"chart", &p, &"-o", &out, &"--svg", &out.with_extension("svg")]));
    }
    let line = common::linear_in_the_input("chart of a kernel log (16,000 -> 128,000 initcalls)", cost[0], cost[1]);
    common::report("chart log scale", &line);
}
