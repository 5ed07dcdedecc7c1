//! Outputs that never destroy a file (issue 47, part C), on the fixtures:
//! an output that is a device, FIFO or directory is refused before any
//! work and stays what it was; an output that is an input (by any name:
//! `./`, a symbolic link, a hard link) is refused and the input kept; two
//! outputs that are one file are refused; a full file system (a 16 KiB
//! tmpfs, as root) or a file size limit (`ulimit -f`) leaves nothing new
//! behind and says so in one line; one module named twice by any spelling
//! is one input of inspect, preresolve, symhash, finalize and manifest
//! write; `lava import` writes nothing outside its run directory whatever
//! the jobs' manifest names its variants.

use crate::common;
#[path = "../damaged/outputs.rs"]
mod aliases;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use common::TestCommand;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The fixture vmlinux with a 4 KiB `__modhashes` section added (what
/// patch `hash-manifest` reserves), so `manifest write` takes it.
fn listed_vmlinux(dir: &Path) -> PathBuf {
    let zeros = dir.join("zeros");
    std::fs::write(&zeros, vec![0u8; 4096]).unwrap();
    let v = dir.join("vmlinux");
    let section = format!("__modhashes={}", zeros.display());
    let (from, to) = (fixtures().join("vmlinux"), v.display().to_string());
    common::sh(
        "objcopy",
        &[
            "--add-section",
            &section,
            "--set-section-flags",
            "__modhashes=alloc,contents,load,readonly",
            from.to_str().unwrap(),
            &to,
        ],
    );
    std::fs::remove_file(&zeros).unwrap();
    v
}

/// A fixture module copied into `dir` as `x.ko`.
fn module(dir: &Path) -> PathBuf {
    common::copy_to(&fixtures().join("modules/bl_plain.ko"), dir, "x.ko")
}

fn mknod(path: &Path, mode: libc::mode_t, dev: libc::dev_t) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mknod(c.as_ptr(), mode, dev) }, 0, "mknod {}", path.display());
}

/// Run and check the refusal: a non-zero exit and one line on stderr,
/// `bootlink: PATH: ...WANT...`.
fn refused(cmd: TestCommand, path: &Path, want: &str) -> String {
    let err = cmd.fails_with(want);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("bootlink: {}: ", path.display())), "{err}");
    err
}

/// The files below `dir` (names relative to it), sorted.
fn files(dir: &Path) -> Vec<String> {
    common::files_below(dir, |_| true).into_keys().collect()
}

/// The commands that write one file, writing `out`: extract-vmlinux,
/// manifest write, chart (HTML), each with good inputs in `dir`.
fn writers(dir: &Path, out: &Path) -> Vec<(&'static str, TestCommand)> {
    let v = dir.join("vmlinux");
    let log = fixtures().join("dmesg-6.1-vfat.log");
    vec![
        ("extract-vmlinux", TestCommand::new(&[&"extract-vmlinux", &v, &"-o", &out])),
        (
            "manifest write",
            TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &out, &dir.join("x.ko")]),
        ),
        ("chart", TestCommand::new(&[&"chart", &log, &"-o", &out])),
    ]
}

/// `-o` naming a device (as root: one made with mknod, the numbers of
/// /dev/null), a FIFO or a directory: refused in one line naming it,
/// before any work (chart's other output is not written), and the node
/// is still what it was; a symbolic link to a device is refused too.
#[test]
fn outputs_that_are_no_regular_file_are_refused_and_kept() {
    let test = "outputs_that_are_no_regular_file_are_refused_and_kept";
    let dir = common::tmpdir("out-nodes");
    listed_vmlinux(&dir);
    module(&dir);
    let mut nodes: Vec<(&str, PathBuf)> = Vec::new();
    if is_root() {
        let null = dir.join("null");
        mknod(&null, libc::S_IFCHR | 0o666, libc::makedev(1, 3));
        nodes.push(("is a device, not a regular file: not written", null));
        let link = dir.join("null-link");
        std::os::unix::fs::symlink("null", &link).unwrap();
        nodes.push(("is a device, not a regular file: not written", link));
    } else {
        common::skip(test, "a device node needs root to make (mknod); the FIFO and the directory are checked");
    }
    let fifo = dir.join("fifo");
    mknod(&fifo, libc::S_IFIFO | 0o644, 0);
    nodes.push(("is a FIFO (named pipe), not a regular file: not written", fifo));
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    nodes.push(("is a directory, not a regular file: not written", sub));
    let kind = |p: &Path| std::fs::metadata(p).unwrap().file_type();
    for (want, node) in &nodes {
        let before = kind(node);
        for (what, cmd) in writers(&dir, node) {
            refused(cmd, node, want);
            let after = kind(node);
            assert!(
                after.is_char_device() == before.is_char_device()
                    && after.is_fifo() == before.is_fifo()
                    && after.is_dir() == before.is_dir(),
                "{what}: {} is no longer what it was",
                node.display()
            );
        }
        // Before any work: chart's HTML, asked first, is not written either.
        let html = dir.join("chart.html");
        let log = fixtures().join("dmesg-6.1-vfat.log");
        refused(TestCommand::new(&[&"chart", &log, &"-o", &html, &"--svg", node]), node, want);
        assert!(!html.exists(), "chart wrote its HTML before refusing --svg {}", node.display());
    }
    // A module's output in a -o directory that is a FIFO: refused, the FIFO kept.
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let fifo = out.join("x.ko");
    mknod(&fifo, libc::S_IFIFO | 0o644, 0);
    let (v, x, ko) = (dir.join("vmlinux"), dir.join("x.ko"), "-o");
    for cmd in ["preresolve", "symhash", "finalize"] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&cmd, &"--kernel", &v];
        if cmd == "preresolve" {
            args.push(&"--assume-nokaslr");
        }
        args.extend([&x as &dyn AsRef<std::ffi::OsStr>, &ko, &out]);
        refused(TestCommand::new(&args), &fifo, "is a FIFO (named pipe), not a regular file: not written");
        assert!(kind(&fifo).is_fifo(), "{cmd} replaced the FIFO");
    }
}

/// An output that is an input, by its own name, `./` its name, a symbolic
/// link or a hard link: refused in one line, the input unchanged. The
/// one input an output may replace is manifest write's VMLINUX (`-o
/// VMLINUX`, in place), which still works.
#[test]
fn an_output_never_replaces_an_input() {
    let dir = common::tmpdir("out-inputs");
    let v = listed_vmlinux(&dir);
    let x = module(&dir);
    let gz = dir.join("vmlinux.gz");
    std::fs::write(&gz, common::sh("gzip", &["-9c", v.to_str().unwrap()])).unwrap();
    let sym = dir.join("sym.gz");
    std::os::unix::fs::symlink("vmlinux.gz", &sym).unwrap();
    let hard = dir.join("hard.gz");
    std::fs::hard_link(&gz, &hard).unwrap();
    let dot = dir.join(".").join("vmlinux.gz");
    let gz_bytes = std::fs::read(&gz).unwrap();
    for out in [&gz, &dot, &sym, &hard] {
        refused(TestCommand::new(&[&"extract-vmlinux", &gz, &"-o", out]), out, "is the input");
        assert_eq!(std::fs::read(&gz).unwrap(), gz_bytes, "extract-vmlinux -o {} changed its input", out.display());
    }
    assert!(std::fs::symlink_metadata(&sym).unwrap().file_type().is_symlink());

    // manifest write: -o a module, --bzimage the vmlinux, two outputs one file.
    let (v_bytes, x_bytes) = (std::fs::read(&v).unwrap(), std::fs::read(&x).unwrap());
    let x_link = dir.join("x-link.ko");
    std::os::unix::fs::symlink("x.ko", &x_link).unwrap();
    for out in [&x, &x_link] {
        refused(TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", out, &x]), out, "is the input");
    }
    let bz = dir.join("bzImage");
    refused(
        TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &dir.join("new"), &"--bzimage", &v, &x]),
        &v,
        "is the input",
    );
    refused(
        TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &bz, &"--bzimage", &bz, &x]),
        &bz,
        "named as two outputs",
    );
    assert_eq!((std::fs::read(&v).unwrap(), std::fs::read(&x).unwrap()), (v_bytes, x_bytes.clone()));
    assert!(!bz.exists() && !dir.join("new").exists());
    // In place of VMLINUX, as asked: written, and it lists the module.
    TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &v, &x]).ok();
    let shown = common::stdout(&TestCommand::new(&[&"manifest", &"show", &v]).ok());
    assert_eq!(shown.lines().count(), 1, "{shown}");

    // chart: -o its input log (a copy), two outputs one file.
    let log = common::copy_to(&fixtures().join("dmesg-6.1-vfat.log"), &dir, "boot.log");
    let log_bytes = std::fs::read(&log).unwrap();
    refused(TestCommand::new(&[&"chart", &log, &"-o", &log]), &log, "is the input");
    let html = dir.join("c.html");
    refused(TestCommand::new(&[&"chart", &log, &"-o", &html, &"--svg", &html]), &html, "named as two outputs");
    assert_eq!(std::fs::read(&log).unwrap(), log_bytes);

    // preresolve -o the input's own directory: every output is its input.
    let o = TestCommand::new(&[&"preresolve", &"--kernel", &v, &"--assume-nokaslr", &x, &"-o", &dir]);
    refused(o, &x, "is the input");
    assert_eq!(std::fs::read(&x).unwrap(), x_bytes, "preresolve -o DIR rewrote its input in DIR");
}

/// A full file system (a 16 KiB tmpfs): the write fails in one line
/// saying so, and nothing new is left, neither in the full file system
/// nor elsewhere (chart's HTML, written to a roomy directory before its
/// 77 KB trace fills the small one).
#[test]
fn a_full_file_system_leaves_nothing_new_behind() {
    let test = "a_full_file_system_leaves_nothing_new_behind";
    let dir = common::tmpdir("out-enospc");
    let v = listed_vmlinux(&dir);
    let x = module(&dir);
    let small = match common::Tmpfs::mount(&dir.join("small"), 16 * 1024) {
        Ok(m) => m,
        Err(why) => return common::skip(test, &format!("{why}: the file size limit test covers EFBIG only")),
    };
    let full = small.0.join("vmlinux.out");
    for cmd in [
        TestCommand::new(&[&"extract-vmlinux", &v, &"-o", &full]),
        TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &full, &x]),
    ] {
        refused(cmd, &full, "no space left on device: not written, nothing left behind");
        assert!(files(&small.0).is_empty(), "{:?}", files(&small.0));
    }
    let html = dir.join("c.html");
    let trace = small.0.join("c.json");
    let log = fixtures().join("dmesg-6.1-vfat.log");
    refused(
        TestCommand::new(&[&"chart", &log, &"-o", &html, &"--perfetto", &trace]),
        &trace,
        "no space left on device: not written, nothing left behind",
    );
    assert!(files(&small.0).is_empty(), "{:?}", files(&small.0));
    assert!(!html.exists(), "chart left its HTML behind when its trace did not fit");
}

/// A file size limit (`ulimit -f 8`, 4 KiB): the write fails with EFBIG
/// in one line (not killed by SIGXFSZ), nothing left behind.
#[test]
fn a_file_size_limit_leaves_nothing_behind() {
    let dir = common::tmpdir("out-efbig");
    let v = listed_vmlinux(&dir);
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let target = out.join("vmlinux.out");
    let o = std::process::Command::new("sh")
        .args(["-c", "ulimit -f 8 && exec \"$0\" \"$@\"", common::bin(), "extract-vmlinux"])
        .arg(&v)
        .arg("-o")
        .arg(&target)
        .env("BOOTLINK_QUIET", "1")
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{:?}: {err}", o.status);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("{}: file too large", target.display())), "{err}");
    assert!(err.contains("nothing left behind"), "{err}");
    assert!(files(&out).is_empty(), "{:?}", files(&out));
}

/// One module named as `x.ko`, `./x.ko`, a symbolic link, a hard link and
/// by its directory: one input, counted and written once (under its first
/// name); with --in-place too.
#[test]
fn one_file_named_twice_is_one_input() {
    let dir = common::tmpdir("out-twice");
    let v = listed_vmlinux(&dir);
    let mods = dir.join("mods");
    std::fs::create_dir(&mods).unwrap();
    let x = module(&mods);
    std::os::unix::fs::symlink("x.ko", mods.join("sym.ko")).unwrap();
    std::fs::hard_link(&x, mods.join("hard.ko")).unwrap();
    let names: Vec<PathBuf> =
        vec![x.clone(), mods.join(".").join("x.ko"), mods.join("sym.ko"), mods.join("hard.ko"), mods.clone()];
    let with = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = TestCommand::new(args);
        for n in &names {
            c = c.arg(n);
        }
        c
    };
    let o = with(&[&"inspect", &v, &"--json"]).ok();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["totals"]["modules"], 1, "{report}");
    for cmd in ["preresolve", "symhash", "finalize"] {
        let out = dir.join(format!("out-{cmd}"));
        let o = if cmd == "preresolve" {
            with(&[&cmd, &"--kernel", &v, &"--assume-nokaslr", &"-o", &out, &"--json"]).ok()
        } else {
            with(&[&cmd, &"--kernel", &v, &"-o", &out, &"--json"]).ok()
        };
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["modules"].as_array().map(Vec::len), Some(1), "{cmd}: {report}");
        assert_eq!(files(&out), ["x.ko"], "{cmd}");
    }
    let o = with(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &dir.join("listed"), &"--json"]).ok();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["modules"].as_array().map(Vec::len), Some(1), "{report}");
    // In place: the file is rewritten once, the links stay links.
    with(&[&"preresolve", &"--kernel", &v, &"--assume-nokaslr", &"--in-place"]).ok();
    assert!(std::fs::symlink_metadata(mods.join("sym.ko")).unwrap().file_type().is_symlink());
}

/// `lava import` with a jobs manifest whose variant is named `../../x`
/// (or holds a `/`, or is `..`), or whose run lacks one of its jobs'
/// variants: refused in one line naming the manifest, nothing written
/// inside or outside the run directory.
#[test]
fn lava_import_writes_nothing_outside_its_run_directory() {
    let dir = common::tmpdir("out-lava");
    let jobs = dir.join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    let log = jobs.join("101.yaml");
    let xz = fixtures().join("lava/101.yaml.xz");
    std::fs::write(&log, common::sh("xz", &["-dc", xz.to_str().unwrap()])).unwrap();
    let text = std::fs::read_to_string(fixtures().join("lava/bootlink-lava.json")).unwrap();
    for name in ["../../escaped", "a/b", ".."] {
        let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
        m["variants"][0]["name"] = name.into();
        m["run"]["variants"][0]["name"] = name.into();
        let manifest = jobs.join("bootlink-lava.json");
        std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();
        let out = dir.join("a/b/run");
        let err = refused(
            TestCommand::new(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &out, &log]),
            &manifest,
            "not a file name",
        );
        assert!(err.contains(name), "{err}");
        assert!(!dir.join("a").exists(), "{name}: {:?}", files(&dir));
        assert_eq!(files(&jobs), ["101.yaml", "bootlink-lava.json"], "{name}");
    }
    // A run whose variants are not the jobs' (one fewer): refused the same way.
    let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["run"]["variants"].as_array_mut().unwrap().pop();
    let manifest = jobs.join("bootlink-lava.json");
    std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let out = dir.join("run");
    refused(
        TestCommand::new(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &out, &log]),
        &manifest,
        "the run lists 1 variant(s), the jobs 2: not as `bootlink lab --lava` writes it",
    );
    assert!(!out.exists());
}

/// The commands that write into a directory they are given (`order write
/// -o DIR`, `order data -o DIR`, `lab -o`, `survey -o`, `system -o`):
/// a DIR that is a regular file (here an input), a FIFO or a device is
/// refused in one line before any work, and so is a DIR holding a FIFO, a
/// directory or an input where one of the command's files goes; the
/// input and the node stay what they were. Before, `order write` read
/// everything, then failed on "File exists" (a file as DIR) or replaced
/// the input named like its output (`--trace DIR/order.ld`); `system`
/// made its image before finding its record directory unusable.
#[test]
fn output_directories_are_checked_before_any_work() {
    let test = "output_directories_are_checked_before_any_work";
    let dir = common::tmpdir("out-dirs");
    let trace = dir.join("trace");
    std::fs::write(&trace, "bl-trace 1\n").unwrap();
    let program = common::copy_to(Path::new("/bin/true"), &dir, "program");
    let fifo = dir.join("fifo");
    mknod(&fifo, libc::S_IFIFO | 0o644, 0);
    let mut not_dirs: Vec<(PathBuf, &str)> =
        vec![(trace.clone(), "is a regular file"), (fifo.clone(), "is a FIFO (named pipe)")];
    if is_root() {
        let null = dir.join("null");
        mknod(&null, libc::S_IFCHR | 0o666, libc::makedev(1, 3));
        not_dirs.push((null, "is a device"));
    } else {
        common::skip(test, "a device node needs root to make (mknod); the file and the FIFO are checked");
    }
    let nothing = dir.join("no-such-kernel");
    let commands = |out: &Path| -> Vec<TestCommand> {
        vec![
            TestCommand::new(&[&"order", &"write", &"--trace", &trace, &"--binary", &program, &"-o", &out]),
            TestCommand::new(&[&"order", &"data", &"-o", &out, &program]),
            TestCommand::new(&[&"lab", &"--kernel", &nothing, &"--modules", &nothing, &"-o", &out]),
            TestCommand::new(&[&"survey", &"--kernel", &nothing, &"--modules", &nothing, &"--set", &"x", &"-o", &out]),
            TestCommand::new(&[&"system", &"--kernel", &"debian", &"-o", &out]),
        ]
    };
    let trace_bytes = std::fs::read(&trace).unwrap();
    for (out, what) in &not_dirs {
        for cmd in commands(out) {
            refused(cmd, out, &format!("{what}, not a directory: nothing written into it"));
        }
        assert!(!std::fs::metadata(out).unwrap().is_dir(), "{} made a directory", out.display());
    }
    assert_eq!(std::fs::read(&trace).unwrap(), trace_bytes, "the trace changed");
    // A directory holding something other than a regular file where one
    // of the command's files goes.
    let run = dir.join("run");
    std::fs::create_dir(&run).unwrap();
    for (name, cmds) in [("order.ld", 0..2), ("run.json", 2..3), ("survey.json", 3..4), ("system.json", 4..5)] {
        let node = run.join(name);
        mknod(&node, libc::S_IFIFO | 0o644, 0);
        for cmd in commands(&run).drain(cmds) {
            refused(cmd, &node, "is a FIFO (named pipe), not a regular file: not written");
        }
        assert!(std::fs::metadata(&node).unwrap().file_type().is_fifo(), "{name} replaced");
        std::fs::remove_file(&node).unwrap();
    }
    let sub = run.join("order.lld");
    std::fs::create_dir(&sub).unwrap();
    for cmd in commands(&run).drain(0..2) {
        refused(cmd, &sub, "is a directory, not a regular file: not written");
    }
    std::fs::remove_dir(&sub).unwrap();
    // An input where an order file goes: the trace as DIR/order.gold, the
    // program as DIR/order.lld (a hard link).
    let gold = run.join("order.gold");
    std::fs::rename(&trace, &gold).unwrap();
    refused(
        TestCommand::new(&[&"order", &"write", &"--trace", &gold, &"--binary", &program, &"-o", &run]),
        &gold,
        "is the input (the same file): writing it would destroy that input: nothing written",
    );
    assert_eq!(std::fs::read(&gold).unwrap(), trace_bytes, "the trace changed");
    let lld = run.join("order.lld");
    std::fs::hard_link(&program, &lld).unwrap();
    refused(
        TestCommand::new(&[&"order", &"data", &"-o", &run, &program]),
        &lld,
        "writing it would destroy that input: nothing written",
    );
    assert_eq!(std::fs::read(&lld).unwrap(), std::fs::read("/bin/true").unwrap(), "the program changed");
}

/// A batch on a full file system (a 16 KiB tmpfs as `-o`, room for two
/// of the four rewritten modules): preresolve, symhash and finalize name
/// each module that does not fit in one line and still try the rest;
/// each module written is whole (the bytes a roomy directory gets), and
/// no temporary is left.
#[test]
fn a_full_file_system_fails_a_batch_file_by_file() {
    let test = "a_full_file_system_fails_a_batch_file_by_file";
    let dir = common::tmpdir("out-batch-full");
    let v = fixtures().join("vmlinux");
    let mods: Vec<PathBuf> = ["bl_plain", "bl_ns_import", "bl_ns_missing", "bl_proprietary"]
        .iter()
        .map(|m| fixtures().join(format!("modules/{m}.ko")))
        .collect();
    let small = match common::Tmpfs::mount(&dir.join("small"), 16 * 1024) {
        Ok(m) => m,
        Err(why) => return common::skip(test, &why),
    };
    for cmd in ["preresolve", "symhash", "finalize"] {
        let run = |out: &Path| {
            let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&cmd, &"--kernel", &v];
            if cmd == "preresolve" {
                args.push(&"--assume-nokaslr");
            }
            for m in &mods {
                args.push(m);
            }
            args.extend([&"-o" as &dyn AsRef<std::ffi::OsStr>, &out]);
            TestCommand::new(&args).cmd_output()
        };
        let roomy = dir.join(format!("roomy-{cmd}"));
        assert!(run(&roomy).status.success(), "{cmd} into a roomy directory");
        for f in files(&small.0) {
            std::fs::remove_file(small.0.join(f)).unwrap();
        }
        let o = run(&small.0);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {err}");
        let written = files(&small.0);
        assert!(!written.is_empty(), "{cmd}: nothing fitted: the test needs more room");
        for m in &mods {
            let name = m.file_name().unwrap().to_str().unwrap();
            let line = format!(
                "bootlink: {}: no space left on device: not written, nothing left behind",
                small.0.join(name).display()
            );
            let named = err.lines().filter(|l| *l == line).count();
            if written.iter().any(|w| w == name) {
                assert_eq!(named, 0, "{cmd}: {name} written and refused\n{err}");
                assert_eq!(
                    std::fs::read(small.0.join(name)).unwrap(),
                    std::fs::read(roomy.join(name)).unwrap(),
                    "{cmd}: {name} not whole"
                );
            } else {
                assert_eq!(named, 1, "{cmd}: {name} neither written nor refused in one line\n{err}");
            }
        }
        assert_eq!(err.lines().count(), mods.len() - written.len(), "{cmd}: {err}");
        assert!(written.iter().all(|w| !w.contains(".bootlink-tmp.")), "{cmd}: {written:?}");
    }
}

/// What a directory holds, not following links: each entry's type, and a
/// regular file's bytes or a link's target.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, (String, Vec<u8>)> {
    let mut m = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            let (kind, content) = if t.is_symlink() {
                ("link", std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes())
            } else if t.is_dir() {
                todo.push(p.clone());
                ("directory", Vec::new())
            } else if t.is_file() {
                ("file", std::fs::read(&p).unwrap())
            } else if t.is_char_device() {
                ("device", Vec::new())
            } else if t.is_fifo() {
                ("FIFO", Vec::new())
            } else {
                ("socket", Vec::new())
            };
            m.insert(p.strip_prefix(dir).unwrap().to_path_buf(), (kind.to_string(), content));
        }
    }
    m
}

/// Seeded cases of outputs that must not be written (tests/damaged/outputs.rs,
/// BOOTLINK_DAMAGED_SEED replays another seed): for extract-vmlinux,
/// manifest write, chart (its HTML, SVG and trace) and preresolve, symhash
/// and finalize (their module in `-o DIR`), one output named as one of the
/// command's inputs (by its name, `./`, `sub/../`, a symbolic or a hard
/// link), as another of its outputs, or as a device node, a link to one,
/// a FIFO, a directory or a socket. Each is refused: a non-zero exit, one
/// line `bootlink: ...`, and nothing in its directory changed (every
/// input's bytes, every node and link as it was, no new file). Each
/// command with every output a new file succeeds first (no false refusal).
#[test]
fn outputs_aliasing_inputs_or_nodes_are_refused_and_kept() {
    use aliases::{Alias, Spelling};
    let seed = std::env::var("BOOTLINK_DAMAGED_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(23u64);
    println!("damaged-input seed {seed} (BOOTLINK_DAMAGED_SEED={seed} replays it)");
    let dir = common::tmpdir("out-aliases");
    // Each command: its inputs (file names in the case's directory), its
    // outputs (a file, or a module `x.ko` in an output directory), and its
    // arguments given those paths.
    type Args = fn(&[PathBuf], &[PathBuf]) -> Vec<std::ffi::OsString>;
    // (name, inputs, outputs, whether the outputs are modules in `-o DIR`, arguments)
    type Command = (&'static str, &'static [&'static str], &'static [&'static str], bool, Args);
    fn a(v: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<std::ffi::OsString> {
        v.iter().map(|a| a.as_ref().to_owned()).collect()
    }
    let commands: [Command; 6] = [
        ("extract-vmlinux", &["vmlinux.gz"], &["out"], false, |i, o| a(&[&"extract-vmlinux", &i[0], &"-o", &o[0]])),
        ("manifest write", &["vmlinux", "x.ko"], &["listed"], false, |i, o| {
            a(&[&"manifest", &"write", &"--vmlinux", &i[0], &"-o", &o[0], &i[1]])
        }),
        ("chart", &["boot.log"], &["c.html", "c.svg", "c.json"], false, |i, o| {
            a(&[&"chart", &i[0], &"-o", &o[0], &"--svg", &o[1], &"--perfetto", &o[2]])
        }),
        ("preresolve", &["vmlinux", "x.ko"], &["x.ko"], true, |i, o| {
            a(&[&"preresolve", &"--kernel", &i[0], &"--assume-nokaslr", &i[1], &"-o", &o[0].parent().unwrap()])
        }),
        ("symhash", &["vmlinux", "x.ko"], &["x.ko"], true, |i, o| {
            a(&[&"symhash", &"--kernel", &i[0], &i[1], &"-o", &o[0].parent().unwrap()])
        }),
        ("finalize", &["vmlinux", "x.ko"], &["x.ko"], true, |i, o| {
            a(&[&"finalize", &"--kernel", &i[0], &i[1], &"-o", &o[0].parent().unwrap()])
        }),
    ];
    let shapes: Vec<aliases::Shape> = commands
        .iter()
        .map(|(name, ins, outs, _, _)| aliases::Shape {
            inputs: ins.len(),
            outputs: outs.len(),
            in_place: if *name == "manifest write" { &[(0, 0)] } else { &[] },
        })
        .collect();
    // A case's directory: the inputs every command reads.
    let make_inputs = |d: &Path| {
        std::fs::create_dir_all(d).unwrap();
        let v = listed_vmlinux(d);
        std::fs::write(d.join("vmlinux.gz"), common::sh("gzip", &["-9c", v.to_str().unwrap()])).unwrap();
        module(d);
        common::copy_to(&fixtures().join("dmesg-6.1-vfat.log"), d, "boot.log");
    };
    let run = |args: &[std::ffi::OsString]| {
        let a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_os_str()).collect();
        crate::damaged::suite::run_timed(&a, std::time::Duration::from_secs(60))
    };
    let mut failures = Vec::new();
    let mut runs = 0;
    // Every command with new outputs: written, exit 0.
    for (n, (name, ins, outs, module_dir, args)) in commands.iter().enumerate() {
        let d = dir.join(format!("good-{n}"));
        make_inputs(&d);
        let i: Vec<PathBuf> = ins.iter().map(|f| d.join(f)).collect();
        let o: Vec<PathBuf> =
            outs.iter().map(|f| if *module_dir { d.join("out").join(f) } else { d.join(f) }).collect();
        let r = run(&args(&i, &o));
        runs += 1;
        if r.code != 0 || !o.iter().all(|p| p.is_file()) {
            failures.push(format!("{name} (undamaged): refused (exit {}): {}", r.code, r.stderr));
        }
    }
    let mut rng = bootlink::rng::Rng(seed ^ 0x6f75_7470);
    let cases = aliases::cases(&shapes, is_root(), &mut rng, 40);
    for (n, case) in cases.iter().enumerate() {
        let (name, ins, outs, module_dir, args) = &commands[case.command];
        let d = dir.join(format!("{n}"));
        make_inputs(&d);
        std::fs::create_dir(d.join("sub")).unwrap();
        let i: Vec<PathBuf> = ins.iter().map(|f| d.join(f)).collect();
        let mut o: Vec<PathBuf> =
            outs.iter().map(|f| if *module_dir { d.join("out").join(f) } else { d.join(f) }).collect();
        let target = o[case.output].clone();
        let file = target.file_name().unwrap().to_os_string();
        // Where the aliased output goes: in a module directory the
        // directory itself is spelled, or a fresh one holds the alias.
        let spell = |p: &Path, how: Spelling| -> PathBuf {
            let (parent, base) = (p.parent().unwrap(), p.file_name().unwrap());
            match how {
                Spelling::Plain => p.to_path_buf(),
                Spelling::DotSlash => parent.join(".").join(base),
                Spelling::Parent => parent.join("sub").join("..").join(base),
                Spelling::Symlink => {
                    let l = d.join("alias-link");
                    std::os::unix::fs::symlink(p, &l).unwrap();
                    l
                }
                Spelling::Hardlink => {
                    let l = d.join("alias-hard");
                    std::fs::hard_link(p, &l).unwrap();
                    l
                }
            }
        };
        let node = |what: Alias| -> PathBuf {
            let p = d.join("alias-node");
            match what {
                Alias::Device | Alias::DeviceLink => {
                    mknod(&p, libc::S_IFCHR | 0o666, libc::makedev(1, 3));
                    if what == Alias::DeviceLink {
                        let l = d.join("alias-node-link");
                        std::os::unix::fs::symlink(&p, &l).unwrap();
                        return l;
                    }
                }
                Alias::Fifo => mknod(&p, libc::S_IFIFO | 0o644, 0),
                Alias::Directory => std::fs::create_dir(&p).unwrap(),
                _ => drop(std::os::unix::net::UnixListener::bind(&p).unwrap()),
            }
            p
        };
        let aliased = match case.alias {
            // in a module directory only a link can name another input x.ko
            Alias::Input(k, Spelling::Plain | Spelling::DotSlash | Spelling::Parent)
                if *module_dir && i[k].file_name() != Some(file.as_os_str()) =>
            {
                spell(&i[k], Spelling::Symlink)
            }
            Alias::Input(k, how) => spell(&i[k], how),
            Alias::Output(k, how) => {
                let other = o[k].clone();
                match how {
                    Spelling::DotSlash => other.parent().unwrap().join(".").join(other.file_name().unwrap()),
                    _ => other,
                }
            }
            node_kind => node(node_kind),
        };
        if *module_dir {
            // `-o DIR` writes DIR/x.ko: DIR is the alias's directory when
            // it is so named, else a fresh directory holding the alias.
            if aliased.file_name() == Some(file.as_os_str()) {
                o[case.output] = aliased;
            } else {
                let out = d.join("o");
                std::fs::create_dir(&out).unwrap();
                std::fs::rename(&aliased, out.join(&file)).unwrap();
                o[case.output] = out.join(&file);
            }
        } else {
            o[case.output] = aliased;
        }
        let before = snapshot(&d);
        let r = run(&args(&i, &o));
        runs += 1;
        let what = format!("{name} {} ({})", o[case.output].display(), format!("{:?}", case.alias).replace(' ', ""));
        if r.code == 0 {
            failures.push(format!("{what}: not refused, exit 0: {}", r.stderr));
        } else if r.stderr.lines().count() != 1 || !r.stderr.starts_with("bootlink: ") {
            failures.push(format!("{what}: not one line `bootlink: ...`:\n{}", r.stderr));
        }
        let after = snapshot(&d);
        if after != before {
            let changed: Vec<_> = before
                .keys()
                .chain(after.keys())
                .filter(|k| before.get(*k) != after.get(*k))
                .map(|k| k.display().to_string())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            failures.push(format!("{what}: refused but its directory changed (input changed or written): {changed:?}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    common::report(
        "outputs",
        &format!(
            "seed {seed}: {} cases of outputs, {runs} command runs: every one refused, nothing changed",
            cases.len()
        ),
    );
}
