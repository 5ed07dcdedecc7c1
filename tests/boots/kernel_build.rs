//! The self-built kernel: `bootlink kernel build` makes Debian's
//! linux-source of the tested line (6.1, or BOOTLINK_TEST_LINE=6.12) with
//! bootlink's patch series and the lab config, and
//! everything else works on it unchanged (kernel-info, inspect, preresolve,
//! the lab). Under `module.sig_enforce=1` modules signed with the build's
//! key load (as installed, and preresolved then re-signed with
//! `--sign-key/--sign-cert`), unsigned and foreign-signed ones are refused.
//!
//! The first build is the slow part (about 10 minutes cold on 2 cores, a
//! few seconds once cached); every test here shares it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use bootlink::kbuild::Report;
use bootlink::kmod::ModTree;
use bootlink_lab::lab::{Initramfs, QemuOptions, busybox, initramfs, qemu};

fn build_json() -> Report {
    let o = Command::new(common::bin())
        .args(["kernel", "build", "--lab", "--line", common::line(), "--json"])
        .env("BOOTLINK_QUIET", "1")
        .output()
        .expect("run bootlink kernel build");
    assert!(o.status.success(), "bootlink kernel build failed: {}", common::stderr(&o));
    serde_json::from_slice(&o.stdout).expect("kernel build --json")
}

/// The build, made (or found in the cache) once per test run.
fn built() -> &'static Report {
    static B: OnceLock<Report> = OnceLock::new();
    B.get_or_init(|| {
        let b = build_json();
        println!("kernel build: {} ({} in {:.1} s)", b.release, if b.cached { "cached" } else { "built" }, b.seconds);
        b
    })
}

/// Every module-loader feature the line's series declares
/// (`+MODULE_LOADER_FEATURE("name");` in its patches), sorted, but for
/// `exports-sealed`: its code is built by the `sealed` flavour only.
fn series_features() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernel").join(common::line()).join("patches");
    let mut names = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("+MODULE_LOADER_FEATURE(\"") {
                names.insert(rest.split('"').next().unwrap().to_string());
            }
        }
    }
    names.remove("exports-sealed");
    names.into_iter().collect()
}

/// The lab build's installed modules (it always builds them).
fn modules(b: &Report) -> &std::path::Path {
    b.modules.as_deref().expect("the lab's build installs its modules")
}

#[test]
fn the_build_is_complete_and_cached_by_content() {
    let b = built();
    for p in [&b.vmlinux, &b.bzimage, &b.system_map, &b.module_symvers, &b.config, &b.signing_key, &b.signing_cert] {
        assert!(p.is_file(), "{} missing", p.display());
    }
    assert!(b.release.starts_with(&format!("{}.", common::line())), "{}", b.release);
    assert_eq!(b.line, common::line());
    // kernel/<line>/patches, then the lab-only kernel/<line>/lab-patches under its directory's name.
    let (line, checkout) =
        (bootlink::kbuild::Line::parse(common::line()).unwrap(), std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    let both = bootlink::series::Series::read_stacked(&line.series(checkout), &[&line.lab_series(checkout)]).unwrap();
    let names: Vec<&str> = both.patches.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(b.patches, names);
    assert!(names.first().is_some_and(|n| !n.starts_with("lab-patches/")), "{names:?}");
    assert!(names.last().is_some_and(|n| n.starts_with("lab-patches/")), "{names:?}");
    // A second call finds it: same directory, nothing built.
    let again = build_json();
    assert!(again.cached, "second build was not cached");
    assert_eq!(again.dir, b.dir);
    assert_eq!(again.key, b.key);
    // What is made from the build is keyed by its bytes too: vmlinux's GNU
    // build ID, as binutils' readelf reads it.
    let o = Command::new("readelf").arg("-n").arg(&b.vmlinux).output().unwrap();
    assert!(o.status.success(), "readelf -n {}", b.vmlinux.display());
    let notes = String::from_utf8_lossy(&o.stdout);
    let readelf = notes.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("readelf finds a build ID");
    assert_eq!(b.content_id().unwrap(), readelf);
    // The kernel's own view: signing on, not forced, no KASLR.
    let cfg = std::fs::read_to_string(&b.config).unwrap();
    for line in [
        "CONFIG_MODULE_SIG=y",
        "CONFIG_MODVERSIONS=y",
        "CONFIG_UNWINDER_ORC=y",
        "CONFIG_FUNCTION_GRAPH_TRACER=y",
        "CONFIG_PVH=y",
        // KASLR as distributions ship it; only a bzImage boot randomizes
        "CONFIG_RANDOMIZE_BASE=y",
    ] {
        assert!(cfg.lines().any(|l| l == line), "{line} not in {}", b.config.display());
    }
    assert!(cfg.lines().any(|l| l == "# CONFIG_MODULE_SIG_FORCE is not set"));
}

#[test]
fn inspect_and_kernel_info_read_the_build() {
    let b = built();
    let o = common::run(&[&"kernel-info", &b.vmlinux, &"--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info["release"].as_str(), Some(b.release.as_str()), "{info}");
    let exports = info["exports"].as_u64().unwrap();
    assert!(exports > 3000, "only {exports} exports");
    let text = common::stdout(&common::run(&[&"kernel-info", &b.vmlinux]));
    assert!(text.contains("KASLR     possible (CONFIG_RANDOMIZE_BASE=y in "), "{text}");
    // The series' feature notes (patch `feature-notes`): with the lab
    // config every feature's code is built in, so every note the series
    // declares is there, but for the one only the `sealed` flavour builds.
    let names: Vec<&str> =
        info["loader_features"]["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let want = series_features();
    assert!(want.len() >= 15, "the series declares {want:?}");
    assert_eq!(names, want, "{info}");
    // Every module's undefined symbols are exported by vmlinux or a module.
    let o = common::run(&[&"inspect", &b.vmlinux, &modules(b), &"--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &r["totals"];
    assert!(t["modules"].as_u64().unwrap() >= 198, "{t}");
    assert_eq!(t["unresolved"].as_u64(), Some(0), "{t}");
    assert!(t["vmlinux"].as_u64().unwrap() > 5000, "{t}");
}

/// Every module of the 194-set and xfs, sunrpc, nfs, nfsv4 is built as a
/// module of this kernel: on 6.1 at the path Debian's tree has it; on 6.12
/// by name (gf128mul moved to lib/crypto/), all but the two modes 6.7
/// removed (CFB, OFB).
#[test]
fn the_lab_modules_are_all_there() {
    let b = built();
    let tree = ModTree::read(modules(b)).unwrap();
    let rels = bootlink::kmod::named_set_paths("fs-nls-crypto-net-194").unwrap();
    let found = if common::line() == "6.1" {
        tree.from_list(&rels).unwrap()
    } else {
        let (found, missing) = tree.from_named_set(&rels).unwrap();
        assert_eq!(missing, ["ofb", "cfb"], "in the set's order");
        found
    };
    assert_eq!(found.len() + if common::line() == "6.1" { 0 } else { 2 }, 194);
    for m in ["xfs", "sunrpc", "nfs", "nfsv4"] {
        assert!(tree.module(m).is_some(), "{m} not built");
    }
    assert!(found.iter().all(|e| e.signed), "installed modules are signed with the build's key");
}

const ENFORCE_CMDLINE: &str = "console=ttyS0 nokaslr panic=-1 oops=panic quiet module.sig_enforce=1";

/// Load the same two modules (fat, vfat) as signed, re-signed, unsigned
/// and foreign-signed files under module.sig_enforce=1.
#[test]
fn signature_enforcement_on_the_self_built_kernel() {
    let b = built();
    let tmp = tempfile::tempdir().unwrap();
    let tree = ModTree::read(modules(b)).unwrap();
    let plan = tree.resolve(&["vfat"]).unwrap();
    let names = plan.names();
    assert_eq!(names, ["fat", "vfat"]);
    let inputs: Vec<PathBuf> = plan.entries().iter().map(|e| e.path.clone()).collect();
    let prer = |dir: &str, sign: Option<(&Path, &Path)>| -> PathBuf {
        let out = tmp.path().join(dir);
        let mut c = Command::new(common::bin());
        c.args(["preresolve", "--fold-symbols", "--kernel"]).arg(&b.vmlinux).arg("-o").arg(&out).args(&inputs);
        if let Some((k, cert)) = sign {
            c.arg("--sign-key").arg(k).arg("--sign-cert").arg(cert);
        }
        let o = c.env("BOOTLINK_QUIET", "1").output().unwrap();
        assert!(o.status.success(), "preresolve into {dir}: {}", String::from_utf8_lossy(&o.stderr));
        out
    };
    // A key the kernel does not trust.
    let foreign = tmp.path().join("foreign.pem");
    let o = Command::new("openssl")
        .args([
            "req",
            "-new",
            "-nodes",
            "-x509",
            "-batch",
            "-newkey",
            "rsa:2048",
            "-days",
            "2",
            "-subj",
            "/CN=not trusted",
        ])
        .arg("-keyout")
        .arg(&foreign)
        .arg("-out")
        .arg(&foreign)
        .output()
        .unwrap();
    assert!(o.status.success(), "openssl: {}", String::from_utf8_lossy(&o.stderr));
    let sets: Vec<(&str, PathBuf)> = vec![
        ("unsigned", prer("unsigned", None)),
        ("foreign", prer("foreign", Some((&foreign, &foreign)))),
        ("resigned", prer("resigned", Some((&b.signing_key, &b.signing_cert)))),
    ];
    let bb = busybox::busybox().unwrap();
    let mut init = Initramfs::new(&bb);
    let mut body = String::new();
    // Refused first (nothing stays loaded), then the re-signed set, then
    // the build's own signed modules after unloading.
    for (tag, dir) in &sets {
        for (name, e) in names.iter().zip(plan.entries()) {
            let f = format!("/m/{tag}/{name}.ko");
            init.copy_file(&f, dir.join(e.path.file_name().unwrap()));
            body.push_str(&format!("insmod {f} 2>/dev/null; echo \"LOAD {tag} {name} $?\"\n"));
        }
    }
    body.push_str("rmmod vfat; rmmod fat\n");
    for (name, e) in names.iter().zip(plan.entries()) {
        let f = format!("/m/signed/{name}.ko");
        init.copy_file(&f, &e.path);
        body.push_str(&format!("insmod {f} 2>/dev/null; echo \"LOAD signed {name} $?\"\n"));
    }
    body.push_str("echo \"TAINT $(cat /proc/sys/kernel/tainted)\"\ndmesg | grep -e 'is rejected' -e 'Key was rejected' -e 'bootlink lab patch' | sed 's/^/DMESG /'\n");
    init.tag("sigenforce").body(&body);
    let initrd = tmp.path().join("initrd.cpio");
    init.write(&initrd).unwrap();
    let opts = QemuOptions {
        initrd: Some(initrd),
        cmdline: ENFORCE_CMDLINE.into(),
        timeout: Duration::from_secs(120),
        ..QemuOptions::new(&b.vmlinux)
    };
    let boot = qemu::run(&opts).expect("start qemu");
    boot.check().unwrap_or_else(|e| panic!("{e}\n{}", boot.excerpt(60)));
    let text = boot.framed("sigenforce").unwrap_or_else(|| panic!("no output:\n{}", boot.excerpt(60)));
    assert_eq!(initramfs::body_status(&boot.log, "sigenforce"), Some(0), "{text}");
    println!("{text}");
    let rc = |tag: &str, name: &str| -> i32 {
        let key = format!("LOAD {tag} {name} ");
        text.lines().find_map(|l| l.strip_prefix(&key)).and_then(|r| r.trim().parse().ok()).unwrap_or(-99)
    };
    for name in &names {
        assert_ne!(rc("unsigned", name), 0, "unsigned {name} loaded under sig_enforce\n{text}");
        assert_ne!(rc("foreign", name), 0, "foreign-signed {name} loaded under sig_enforce\n{text}");
        assert_eq!(rc("resigned", name), 0, "re-signed {name} refused\n{text}");
        assert_eq!(rc("signed", name), 0, "build-signed {name} refused\n{text}");
    }
    // fat is refused for what it is; vfat's refusals may stop at fat's absence.
    assert!(text.contains("Loading of unsigned module is rejected"), "{text}");
    assert!(text.contains("Loading of module with unavailable key is rejected"), "{text}");
    assert!(
        text.contains("module: bootlink lab patch series applied"),
        "the patched kernel is not the one booted\n{text}"
    );
    // Nothing unsigned got in: no E taint.
    let taint: u64 = text.lines().find_map(|l| l.strip_prefix("TAINT ")).and_then(|t| t.trim().parse().ok()).unwrap();
    assert_eq!(taint & 8192, 0, "tainted {taint}");
}

/// A two-kernel lab run: Debian's kernel of the line and the self-built one
/// load the same 194-module set (found by name in each tree; on 6.12 what
/// both have as modules, said in the set's label), each module with its
/// phases; the self-built one as installed (signed with the build's key)
/// and folded; the chart labels the columns by variant.
#[test]
fn two_kernels_in_one_lab_run() {
    let b = built();
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run");
    let o = Command::new(common::bin())
        .args(["lab", "--set", "fs-nls-crypto-net-194"])
        .args(["--variant", &format!("debian={},modules:unsigned", common::debian_kernel())])
        .args(["--variant", &format!("ours={},modules:unsigned", common::build_kernel())])
        .args(["--variant", &format!("ours-folded={},modules:folded", common::build_kernel())])
        .arg("-o")
        .arg(&run_dir)
        .env("BOOTLINK_QUIET", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    println!("{stdout}");
    assert!(o.status.success(), "lab failed: {}\n{stdout}", String::from_utf8_lossy(&o.stderr));
    let run = bootlink_lab::run::load(&run_dir).unwrap();
    let names: Vec<&str> = run.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["debian", "ours", "ours-folded"]);
    let debian = common::debian_of_line();
    assert_eq!(run.variants[0].kernel_release, debian.release);
    for v in &run.variants[1..] {
        assert_eq!(v.kernel_release, b.release, "{}", v.name);
        assert_eq!(v.kernel, b.vmlinux, "{}", v.name);
    }
    let (deb_tree, our_tree) = (ModTree::read(&debian.modules).unwrap(), ModTree::read(modules(b)).unwrap());
    let set = common::check_194_set_run(&run, &[&deb_tree, &our_tree]);
    println!("{} modules: {}", set.len(), run.module_set);
    for v in &run.variants {
        let r = &v.repetitions[0];
        assert!(r.modules.iter().all(|m| m.status == 0 && !m.phases.is_empty()), "{}", v.name);
        let log = std::fs::read_to_string(run_dir.join(&r.log)).unwrap();
        let patched = log.contains("module: bootlink lab patch series applied");
        assert_eq!(patched, v.name != "debian", "{}: which kernel booted", v.name);
        // The symbols phase: at simplify_symbols on the self-built kernel
        // (lab patch `symbols-landmark` keeps it a function), per lookup on
        // Debian's, which inlines it; the record says which.
        let want = if v.name == "debian" { "resolve_symbol" } else { "simplify_symbols" };
        assert_eq!(r.symbols_timed_at.as_deref(), Some(want), "{}: how the symbols phase was timed", v.name);
    }
    assert!(
        stdout.contains("symbols phase (debian): timed per lookup, every resolve_symbol traced")
            && stdout
                .contains("symbols phase (ours, ours-folded): timed at simplify_symbols, one traced call per load"),
        "the summary says how each kernel's symbols phase was timed:\n{stdout}"
    );
    let html = out.path().join("chart.html");
    let o = common::run(&[&"chart", &run_dir, &"-o", &html, &"--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let labels: Vec<&str> = v["series"].as_array().unwrap().iter().filter_map(|s| s["label"].as_str()).collect();
    assert_eq!(labels, ["debian", "ours", "ours-folded"]);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("ours-folded") && text.contains("<svg"));
}
