//! `scripts/finalize-split` (docs/lab.md's table of finalize cut into its
//! links) reads a lab run's record as the lab writes it: a run made of the
//! lab's own types and serialized by them, its table's sums and shares
//! computed from that run's links, largest first and "rest" last; and a
//! run it cannot read (no run.json, no such variant, no finalize links)
//! is one line on stderr, exit 1, nothing printed. The table says the
//! variant's kernel and whether KASLR was on, as the record says (the
//! `nokaslr` on its command line, the slides its boots found).

use bootlink_lab::run::results::{ModuleLoad, Phase, Repetition, Run, Variant};
use std::path::Path;
use std::process::{Command, Output};

fn split(dir: &Path, variant: Option<&str>) -> Output {
    let mut c = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/finalize-split"));
    c.arg(dir);
    if let Some(v) = variant {
        c.arg(v);
    }
    // Never into the docs, whatever the caller's environment asks.
    c.env_remove("BOOTLINK_WRITE_DOCS").output().unwrap()
}

fn phase(name: &str, us: f64) -> Phase {
    Phase { name: name.to_string(), start_us: 0.0, duration_us: us }
}

/// A module whose finalize phase is exactly its links, as the lab records it.
fn module(name: &str, links: &[(&str, f64)], other_us: f64) -> ModuleLoad {
    let fin: f64 = links.iter().map(|l| l.1).sum();
    ModuleLoad {
        name: name.to_string(),
        start_us: 0.0,
        total_us: fin + other_us,
        phases: vec![phase("symbols", other_us), phase("finalize", fin)],
        lookups: None,
        size: 0,
        status: 0,
        finalize_steps: links.iter().map(|(n, us)| phase(n, *us)).collect(),
        init_steps: Vec::new(),
        worker: None,
    }
}

fn write_run(dir: &Path, modules: Vec<ModuleLoad>) {
    write_run_booted(dir, modules, "", None);
}

/// A run whose variant booted with `cmdline`, its boot finding `slide`.
fn write_run_booted(dir: &Path, modules: Vec<ModuleLoad>, cmdline: &str, slide: Option<u64>) {
    let mut v = Variant::named("unsigned");
    v.cmdline = cmdline.to_string();
    v.repetitions.push(Repetition { modules, kaslr_slide: slide, ..Default::default() });
    let run = Run {
        format: 1,
        source: "lab".into(),
        kernel_release: "6.1.0-test".into(),
        timing: "deterministic".into(),
        module_set: "two-modules".into(),
        variants: vec![v],
        ..Default::default()
    };
    std::fs::write(dir.join("run.json"), serde_json::to_vec(&run).unwrap()).unwrap();
}

#[test]
fn the_table_sums_each_link_over_the_set_largest_first() {
    let d = tempfile::tempdir().unwrap();
    let xfs = [("ORC sort", 40_000.0), ("rest", 300_000.0), ("ftrace weak-fn check", 500_000.0)];
    let ext4 = [("ORC sort", 15_000.0), ("ftrace weak-fn check", 70_000.0), ("rest", 1_000.0)];
    write_run(d.path(), vec![module("xfs", &xfs, 10_000.0), module("ext4", &ext4, 5_000.0)]);
    let o = split(d.path(), None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let fin: f64 = xfs.iter().chain(&ext4).map(|l| l.1).sum();
    let total = fin + 15_000.0;
    let head = format!(
        "finalize takes {:.0} ms of the set's {:.0} ms load time ({:.1} %)",
        fin / 1e3,
        total / 1e3,
        fin / total * 100.0
    );
    assert!(out.starts_with("Variant unsigned of the lab run in ") && out.contains(&head), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| link")).collect();
    // Largest first, "rest" last although it is larger than ORC sort; btrfs,
    // which the set lacks, has no column.
    assert!(out.contains("| link | the set | share of finalize | xfs | ext4 |"), "{out}");
    let weak = 500_000.0 + 70_000.0;
    assert_eq!(
        rows[0],
        format!("| ftrace weak-fn check | {:.0} ms | {:.1} % | 500 ms | 70.0 ms |", weak / 1e3, weak / fin * 100.0)
    );
    assert!(rows[1].starts_with("| ORC sort | 55.0 ms |"), "{rows:?}");
    assert!(rows[2].starts_with("| rest ("), "{rows:?}");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(
        out.contains(&format!("ftrace weak-fn check, is {:.1} % of the set's load time", weak / total * 100.0)),
        "{out}"
    );
}

#[test]
fn a_run_it_cannot_read_is_one_line_and_nothing_printed() {
    let d = tempfile::tempdir().unwrap();
    let missing = split(d.path(), None);
    write_run(d.path(), vec![module("xfs", &[("ORC sort", 1_000.0)], 1_000.0)]);
    let no_variant = split(d.path(), Some("folded"));
    write_run(d.path(), vec![module("xfs", &[], 1_000.0)]);
    let untraced = split(d.path(), None);
    for (what, o) in [("no run.json", missing), ("no such variant", no_variant), ("no links", untraced)] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert!(o.stdout.is_empty(), "{what}: printed {:?}", String::from_utf8_lossy(&o.stdout));
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.starts_with(&format!("finalize-split: {}: ", d.path().display())), "{what}: {err}");
    }
}

#[test]
fn the_table_says_the_kernel_and_kaslr_as_the_record_does() {
    let d = tempfile::tempdir().unwrap();
    let links = [("ORC sort", 1_000.0)];
    let line = |cmdline: &str, slide: Option<u64>| {
        write_run_booted(d.path(), vec![module("xfs", &links, 1_000.0)], cmdline, slide);
        let o = split(d.path(), None);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8(o.stdout).unwrap();
        let found: Vec<&str> = out.lines().filter(|l| l.starts_with("Kernel and KASLR (run.json): ")).collect();
        assert_eq!(found.len(), 1, "{out}");
        found[0].to_string()
    };
    // The record names no kernel: the line says so rather than guess.
    let off = line("console=ttyS0 nokaslr quiet", Some(0));
    assert!(
        off.ends_with("unsigned: 6.1.0-test, a kernel whose config the records do not say, KASLR off (nokaslr)."),
        "{off}"
    );
    let on = line("console=ttyS0 quiet", Some(0x1e00000));
    assert!(on.ends_with("KASLR on (the kernel moved in 1 of 1 boots)."), "{on}");
    // A record from before variants kept their command line: not known.
    let unknown = line("", None);
    assert!(unknown.ends_with("KASLR not recorded (no command line in the record)."), "{unknown}");
}

/// A variant the lab gave an image of its own (its hash list linked into
/// a bzImage in the run's directory) is named by the kernel it was made
/// from: here the lab's kernel:distro, whose record names the series'
/// Debian-config build.
#[test]
fn a_variants_own_image_is_named_by_the_kernel_it_was_made_from() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let build = cache.join("kernels/build-0123abcd");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::write(
        build.join("build.json"),
        r#"{"line": "6.1", "config_base": "/boot/config-6.1.0-56-amd64", "flavours": []}"#,
    )
    .unwrap();
    let distro = d.path().join("distro");
    std::fs::create_dir_all(&distro).unwrap();
    std::fs::write(distro.join("kernel.json"), r#"{"build_key": "0123abcd"}"#).unwrap();
    std::fs::write(distro.join("vmlinux"), b"").unwrap();
    let mut v = Variant::named("listed");
    v.kernel = d.path().join("run/listed-bzImage");
    v.made_from = distro.join("vmlinux");
    v.kernel_release = "6.1.0-56-amd64".into();
    v.cmdline = "console=ttyS0 module.sig_enforce=1".into();
    v.repetitions.push(Repetition { kaslr_slide: Some(0x2a00000), ..Default::default() });
    let run = Run { format: 1, source: "lab".into(), variants: vec![v], ..Default::default() };
    let rec = d.path().join("run.json");
    std::fs::write(&rec, serde_json::to_vec(&run).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/doc_output.py");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .arg("boot-line")
        .arg(&rec)
        .env("BOOTLINK_CACHE", &cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        out.trim(),
        "Kernel and KASLR (run.json): listed: 6.1.0-56-amd64, Debian's config (Debian's config-6.1.0-56-amd64 \
         with kernel/6.1/configs/series.config), Debian's modules signed with its key (kernel:distro), KASLR on \
         (the kernel moved in 1 of 1 boots).",
        "{out}"
    );
}
