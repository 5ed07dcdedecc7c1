//! `bootlink apply` on Debian's own kernel (no series, KASLR, signed
//! modules): the plan says what a stock kernel gets and what a patched one
//! would add; signed modules are left alone without a key; with a key (or
//! --allow-unsigned) the module steps run, a second run changes nothing, a
//! module installed again is taken through the steps alone, a damaged
//! module is refused in one line and the rest still done, and --dry-run
//! writes nothing.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::TestCommand;

/// `dir/build` as a kernel build leaves it for apply: Debian's vmlinux,
/// its config as .config, its System.map.
fn build_dir(dir: &Path) -> PathBuf {
    let k = common::kernel();
    let build = dir.join("build");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::copy(&k.vmlinux, build.join("vmlinux")).unwrap();
    std::fs::copy(&k.config, build.join(".config")).unwrap();
    let map = k.vmlinuz.parent().unwrap().join(format!("System.map-{}", k.release));
    std::fs::copy(map, build.join("System.map")).unwrap();
    build
}

/// A build directory (vmlinux, .config, System.map) and an INSTALL_MOD_PATH
/// holding a few directories of Debian's modules.
fn tree(name: &str) -> (common::TestDir, PathBuf, PathBuf, PathBuf) {
    let k = common::kernel();
    let dir = common::tmpdir(name);
    let build = build_dir(&dir);
    let root = dir.join("root");
    let rel = root.join("lib/modules").join(&k.release);
    for sub in ["kernel/fs/fat", "kernel/fs/nls", "kernel/lib"] {
        let to = rel.join(sub);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        common::sh("cp", &["-a", k.modules.join(sub).to_str().unwrap(), to.to_str().unwrap()]);
    }
    (dir, build, root, rel)
}

/// Every file below `dir`: its path below it and SHA-256.
fn digests(dir: &Path) -> BTreeMap<String, String> {
    common::digests_below(dir, |_| true)
}

fn apply(build: &Path, root: &Path, extra: &[&str]) -> TestCommand {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"apply", &"--build", &build, &"--modules", &root];
    for e in extra {
        args.push(e);
    }
    TestCommand::new(&args)
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", common::stdout(o)))
}

#[test]
fn a_stock_kernel_gets_what_needs_no_patch_and_signed_modules_stay_signed() {
    let (_dir, build, root, rel) = tree("apply-stock");
    let before = digests(&root);
    // Signed modules, a kernel that checks signatures, no key: nothing.
    let o = apply(&build, &root, &["--json"]).ok();
    let v = json(&o);
    assert_eq!(v["plan"]["steps"], serde_json::json!([]), "{v}");
    assert!(v["plan"]["left_out"][0].as_str().unwrap().contains("would be refused"), "{v}");
    assert_eq!(v["loader_features"]["names"], serde_json::json!([]), "Debian's kernel names no features");
    assert_eq!(digests(&root), before, "nothing written");

    // --dry-run with a key: the plan (trim; fold needs nokaslr), nothing written.
    let key_dir = common::tmpdir("apply-stock-key");
    let key = common::key_pair(&key_dir, "k");
    let (k, c) = (key.0.to_str().unwrap().to_string(), key.1.to_str().unwrap().to_string());
    let signing = ["--sign-key", &k, "--sign-cert", &c];
    let mut dry = signing.to_vec();
    dry.extend(["--dry-run", "--json"]);
    let v = json(&apply(&build, &root, &dry).ok());
    assert_eq!(v["plan"]["steps"], serde_json::json!(["trim", "sign"]), "{v}");
    let left: Vec<&str> = v["plan"]["left_out"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(left.iter().any(|l| l.starts_with("fold: the kernel randomizes its base")), "{left:?}");
    assert!(left.iter().any(|l| l.contains("a patched kernel would add them")), "{left:?}");
    let n = v["applied"].as_u64().unwrap();
    assert!(n > 20, "{n} modules");
    assert_eq!(digests(&root), before, "--dry-run wrote something");
    // --only: one fix and what it needs; a fix the plan lacks, or no such
    // step, refused in one line naming it.
    let mut only = dry.clone();
    only.extend(["--only", "sign"]);
    let v = json(&apply(&build, &root, &only).ok());
    assert_eq!(v["plan"]["steps"], serde_json::json!(["sign"]), "{v}");
    for (list, want) in [
        ("fold", "--only fold: not a step for this kernel (fold: the kernel randomizes its base"),
        ("finalise", "--only \"finalise\": no such step"),
    ] {
        let mut args = dry.clone();
        args.extend(["--only", list]);
        let o = apply(&build, &root, &args).cmd_output();
        assert_ne!(o.status.code(), Some(0), "--only {list}");
        let err = common::stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "--only {list}: {err}");
    }
    assert_eq!(digests(&root), before, "a refused --only wrote something");

    // Applied: every module trimmed and signed with the key, depmod run.
    let mut real = signing.to_vec();
    real.extend(["--assume-nokaslr", "--json"]);
    let v = json(&apply(&build, &root, &real).ok());
    assert_eq!(v["plan"]["steps"], serde_json::json!(["fold", "trim", "sign"]), "{v}");
    assert_eq!(v["applied"].as_u64().unwrap(), n);
    assert!(v["depmod"].as_bool().unwrap() && rel.join("modules.dep").is_file(), "depmod ran");
    let vfat = rel.join("kernel/fs/fat/vfat.ko");
    let signed = std::fs::read(&vfat).unwrap();
    assert!(signed.ends_with(b"~Module signature appended~\n"), "vfat is signed again");
    assert_ne!(signed, std::fs::read(common::kernel().modules.join("kernel/fs/fat/vfat.ko")).unwrap());
    let first = digests(&root);
    assert_ne!(first, before);

    // A second run: nothing to do, nothing written.
    let o = apply(&build, &root, &real[..real.len() - 1]).ok();
    assert!(common::stdout(&o).contains("nothing to do"), "{}", common::stdout(&o));
    assert!(common::stdout(&o).lines().any(|l| l == "steps    fold, trim, sign"), "{}", common::stdout(&o));
    assert_eq!(digests(&root), first, "a second run changed the tree");

    // One module installed again (the original bytes): only it is taken
    // through the steps; the rest stay as they were.
    let orig = common::kernel().modules.join("kernel/fs/fat/vfat.ko");
    std::fs::copy(&orig, &vfat).unwrap();
    let v = json(&apply(&build, &root, &real).ok());
    assert_eq!((v["applied"].as_u64(), v["already"].as_u64()), (Some(1), Some(n - 1)), "{v}");
    let third = digests(&root);
    let key = |p: &Path| p.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
    assert_eq!(third.get(&key(&vfat)), first.get(&key(&vfat)), "vfat rewritten as the first run wrote it");

    // A damaged module: one line naming it, exit non-zero, the rest done,
    // the damaged file left as it is.
    let bad = rel.join("kernel/fs/nls/nls_bad.ko");
    let mut bytes = std::fs::read(common::kernel().modules.join("kernel/fs/nls/nls_cp437.ko")).unwrap();
    bytes.truncate(bytes.len() / 3);
    std::fs::write(&bad, &bytes).unwrap();
    std::fs::copy(&orig, &vfat).unwrap();
    let o = apply(&build, &root, &real[..real.len() - 1]).cmd_output();
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("bootlink: ")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("nls_bad.ko"), "{err}");
    assert_eq!(std::fs::read(&bad).unwrap(), bytes, "the damaged module was rewritten");
    assert!(common::stdout(&o).contains("took 1 through the steps"), "{}", common::stdout(&o));
}

#[test]
fn two_modules_of_one_name_are_both_left_alone() {
    let (_dir, build, root, rel) = tree("apply-dup");
    let a = rel.join("kernel/fs/fat/vfat.ko");
    let b = rel.join("kernel/lib/vfat.ko");
    std::fs::copy(&a, &b).unwrap();
    let o = apply(&build, &root, &["--allow-unsigned", "--no-depmod"]).cmd_output();
    assert_eq!(o.status.code(), Some(1));
    let err = common::stderr(&o);
    assert!(err.contains("module vfat also at"), "{err}");
    let orig = std::fs::read(common::kernel().modules.join("kernel/fs/fat/vfat.ko")).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), orig, "{} rewritten", a.display());
    assert_eq!(std::fs::read(&b).unwrap(), orig, "{} rewritten", b.display());
}

/// A run killed at any moment leaves every module either as installed or
/// as apply writes it, and the next run ends where an uninterrupted run
/// ends: the same bytes everywhere.
#[test]
fn a_killed_run_is_finished_by_the_next() {
    let key_dir = common::tmpdir("apply-kill-key");
    let key = common::key_pair(&key_dir, "k");
    let (k, c) = (key.0.to_str().unwrap().to_string(), key.1.to_str().unwrap().to_string());
    let args = ["--sign-key", &k, "--sign-cert", &c, "--no-depmod"];
    let (_dir, build, root, rel) = tree("apply-kill-ref");
    apply(&build, &root, &args).ok();
    let want = digests(&rel);
    let mut killed = 0;
    // A killed run cannot remove its scratch directory: keep it in ours.
    let scratch = common::tmpdir("apply-kill-scratch");
    for delay_ms in [30u64, 120, 300, 600, 1000] {
        let (_dir, build, root, rel) = tree(&format!("apply-kill-{delay_ms}"));
        let mut child = std::process::Command::new(common::bin())
            .args(["apply", "--build"])
            .arg(&build)
            .arg("--modules")
            .arg(&root)
            .args(args)
            .env("TMPDIR", &*scratch)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            killed += 1;
        }
        child.wait().unwrap();
        apply(&build, &root, &args).ok();
        assert_eq!(digests(&rel), want, "killed after {delay_ms} ms: the next run ends elsewhere");
    }
    assert!(killed >= 2, "only {killed} of the runs were still going when killed: kill earlier");

    // What a run killed while installing leaves beside a module (a
    // temporary file of a process that is gone; seen in a CI run where the
    // kill fell there) is removed by the next run, finished or not.
    let (_dir, build, root, rel) = tree("apply-kill-leftover");
    apply(&build, &root, &args).ok();
    let gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    let mut gone = gone;
    gone.wait().unwrap();
    let fat = digests(&rel).into_keys().find(|k| k.ends_with("/fat.ko")).unwrap();
    let fat = rel.join(fat);
    let left = fat.with_file_name(format!(".fat.ko.bootlink-tmp.{pid}.Ab3xYz"));
    std::fs::write(&left, b"half a module").unwrap();
    apply(&build, &root, &args).ok();
    assert!(!left.exists(), "{} left in place", left.display());
    assert_eq!(digests(&rel), want, "after a leftover");
}

/// A full file system under the modules (the release directory on a
/// tmpfs with room for a few rewritten modules, not for test_bpf.ko's
/// 4.7 MB): each module that does not fit is one line, left as installed
/// and out of the record; those that fit are written; no temporary is
/// left; and every digest the record lists is its file's. Before, the
/// record was written listing every module, then the first module that
/// did not fit ended the run: the record named bytes no file had (the
/// initramfs hook then warns of each), and the modules after it were not
/// tried.
#[test]
fn a_full_file_system_leaves_the_record_true() {
    let test = "a_full_file_system_leaves_the_record_true";
    let k = common::kernel();
    let dir = common::tmpdir("apply-full");
    let build = build_dir(&dir);
    let root = dir.join("root");
    let fs = match common::Tmpfs::mount(&root, 64 << 20) {
        Ok(fs) => fs,
        Err(why) => return common::skip(test, &why),
    };
    let rel = root.join("lib/modules").join(&k.release);
    for sub in ["kernel/fs/fat", "kernel/fs/nls", "kernel/lib"] {
        let to = rel.join(sub);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        common::sh("cp", &["-a", k.modules.join(sub).to_str().unwrap(), to.to_str().unwrap()]);
    }
    let biggest = common::files_below(&rel, |_| true)
        .into_keys()
        .map(|f| std::fs::metadata(rel.join(&f)).unwrap().len())
        .max()
        .unwrap();
    let room = 512 * 1024;
    assert!(biggest > 2 * room, "the largest module ({biggest} bytes) must not fit in {room}");
    fs.resize(fs.used() + room);
    let before = digests(&rel);
    let o = apply(&build, &root, &["--allow-unsigned", "--no-depmod"]).cmd_output();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let full: Vec<&str> = err.lines().filter(|l| l.contains("no space left on device")).collect();
    assert!(!full.is_empty(), "{err}");
    for l in err.lines() {
        assert!(l.starts_with("bootlink: ") && l.contains("no space left on device"), "{l}\n{err}");
    }
    let after = digests(&rel);
    let temps: Vec<&String> = after.keys().filter(|f| f.contains(".bootlink-tmp.")).collect();
    assert!(temps.is_empty(), "left behind: {temps:?}");
    let record = common::record_in(&rel);
    let changed: Vec<&String> =
        after.keys().filter(|f| f.ends_with(".ko") && before.get(*f) != after.get(*f)).collect();
    assert!(!changed.is_empty(), "no module fitted: the test needs more room");
    for (f, sha) in &record {
        assert_eq!(after.get(f), Some(sha), "the record lists {f} with bytes it does not have");
    }
    // Each module not written is named once; each written one is listed.
    for f in before.keys().filter(|f| f.ends_with(".ko")) {
        let named = full.iter().filter(|l| l.contains(&format!("{}: ", rel.join(f).display()))).count();
        if changed.contains(&f) {
            assert!(record.contains_key(f), "{f} written, not in the record");
        } else if record.get(f) != before.get(f) {
            assert_eq!(named, 1, "{f}: neither written nor refused in one line\n{err}");
        }
    }
    common::report(
        test,
        &format!("{} of {} modules written, {} refused for space", changed.len(), before.len(), full.len()),
    );
}
