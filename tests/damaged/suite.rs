#![allow(dead_code)]
//! Runs every module command of the real binary over damaged files (see
//! generate.rs) and checks, per file and command: no panic, no hang, no
//! silent success for a file marked invalid (non-zero exit and one line
//! `bootlink: FILE: ...` that gives its class's reason), nothing written
//! for a refused file, and the good files of the same batch still written.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::generate::{Damaged, gives_reason};

pub struct Ran {
    pub code: i32,
    pub stderr: String,
}

/// Run the binary with a deadline: a hang is a failure, not a stuck test.
pub fn run_timed(args: &[&std::ffi::OsStr], timeout: Duration) -> Ran {
    run_timed_env(args, timeout, &[])
}

/// [`run_timed`] with these environment variables set.
pub fn run_timed_env(args: &[&std::ffi::OsStr], timeout: Duration, env: &[(&str, &str)]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bootlink"))
        .args(args)
        .envs(env.iter().copied())
        .env("BOOTLINK_QUIET", "1")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bootlink");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bootlink {args:?} hung: no exit after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = t_out.join();
    let stderr = t_err.join().unwrap();
    let code = status.code().unwrap_or_else(|| panic!("bootlink {args:?} killed by a signal: {status}\n{stderr}"));
    assert_ne!(code, 101, "bootlink {args:?} panicked:\n{stderr}");
    for bad in ["panicked", "internal error", "stack backtrace", "RUST_BACKTRACE", "memory allocation of"] {
        assert!(!stderr.contains(bad), "bootlink {args:?} printed {bad:?}:\n{stderr}");
    }
    Ran { code, stderr }
}

/// The module commands: a label and the arguments before the inputs
/// (`OUT` stands for the command's output directory, None for a command
/// that writes nothing).
pub fn commands(kernel: &Path, nokaslr: bool) -> Vec<(&'static str, Vec<String>, bool)> {
    let k = kernel.display().to_string();
    let mut pre = vec!["preresolve".to_string(), "--kernel".into(), k.clone()];
    if nokaslr {
        pre.push("--assume-nokaslr".into());
    }
    let with = |extra: &str| {
        let mut v = pre.clone();
        v.push(extra.into());
        v
    };
    vec![
        ("inspect", vec!["inspect".into(), k.clone()], false),
        ("preresolve", pre.clone(), true),
        ("preresolve --fold-symbols", with("--fold-symbols"), true),
        ("preresolve --trim-symtab", with("--trim-symtab"), true),
        ("finalize", vec!["finalize".into(), "--kernel".into(), k.clone()], true),
        ("symhash", vec!["symhash".into(), "--kernel".into(), k], true),
    ]
}

/// What one suite run counted.
#[derive(Default)]
pub struct Counts {
    pub files: usize,
    pub invalid: usize,
    pub runs: usize,
    /// class -> (files, refusals over all commands, command runs on them)
    pub by_class: BTreeMap<&'static str, (usize, usize, usize)>,
}

impl Counts {
    pub fn render(&self, what: &str) -> String {
        let mut s = format!(
            "{what}: {} damaged files ({} marked invalid), {} command runs: 0 panics, 0 hangs, 0 silent successes\n",
            self.files, self.invalid, self.runs
        );
        s.push_str(&format!("{:<28} {:>6} {:>10} {:>6}\n", "class", "files", "refusals", "runs"));
        for (class, (files, refused, runs)) in &self.by_class {
            s.push_str(&format!("{class:<28} {files:>6} {refused:>10} {runs:>6}\n"));
        }
        s
    }
}

fn refusal_lines<'a>(stderr: &'a str, file: &Path) -> Vec<&'a str> {
    let prefix = format!("bootlink: {}:", file.display());
    stderr.lines().filter(|l| l.starts_with(&prefix)).collect()
}

/// Write `files` and the `good` modules into one input directory, run every
/// command once over the whole batch, and check each file.
pub fn batch(dir: &Path, kernel: &Path, nokaslr: bool, files: &[Damaged], good: &[PathBuf], counts: &mut Counts) {
    batch_of(dir, &commands(kernel, nokaslr), files, good, counts)
}

/// [`batch`] through the given module commands ([`commands`] or some of them).
pub fn batch_of(
    dir: &Path,
    commands: &[(&'static str, Vec<String>, bool)],
    files: &[Damaged],
    good: &[PathBuf],
    counts: &mut Counts,
) {
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    for f in files {
        std::fs::write(input.join(&f.name), &f.bytes).unwrap();
    }
    let mut good_names = Vec::new();
    for g in good {
        let name = format!("good-{}", g.file_name().unwrap().to_string_lossy());
        std::fs::copy(g, input.join(&name)).unwrap();
        good_names.push(name);
    }
    counts.files += files.len();
    counts.invalid += files.iter().filter(|f| f.invalid).count();
    for f in files {
        counts.by_class.entry(f.class).or_default().0 += 1;
    }
    for &(label, ref args, writes) in commands {
        let out = dir.join(format!("out-{}", label.replace([' ', '-'], "_")));
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        a.push(input.as_os_str());
        if writes {
            a.extend([std::ffi::OsStr::new("-o"), out.as_os_str()]);
        }
        let r = run_timed(&a, Duration::from_secs(300));
        counts.runs += 1;
        assert_ne!(r.code, 0, "{label}: the batch holds invalid modules but the command succeeded:\n{}", r.stderr);
        for line in r.stderr.lines() {
            assert!(
                line.starts_with("bootlink: "),
                "{label}: a stderr line not of the form `bootlink: FILE: ...`: {line}"
            );
        }
        for f in files {
            let path = input.join(&f.name);
            let lines = refusal_lines(&r.stderr, &path);
            assert!(lines.len() <= 1, "{label}: {} refused in more than one line:\n{}", f.name, lines.join("\n"));
            let e = counts.by_class.get_mut(f.class).unwrap();
            e.2 += 1;
            if lines.len() == 1 {
                e.1 += 1;
            }
            if f.invalid {
                assert_eq!(lines.len(), 1, "{label}: {} ({}) was not refused:\n{}", f.name, f.class, r.stderr);
                assert!(
                    gives_reason(lines[0], f),
                    "{label}: {} ({}) refused without its reason ({:?}): {}",
                    f.name,
                    f.class,
                    f.reason,
                    lines[0]
                );
            }
            if writes && lines.len() == 1 {
                assert!(!out.join(&f.name).exists(), "{label}: {} was refused but written", f.name);
            }
        }
        if writes {
            for g in &good_names {
                assert!(
                    out.join(g).is_file(),
                    "{label}: the good module {g} of the batch was not written:\n{}",
                    r.stderr
                );
            }
            let leftovers = temporaries(&out);
            assert!(leftovers.is_empty(), "{label}: temporary files left in the output: {leftovers:?}");
        }
    }
}

/// One invalid file of each class alone through each command: a non-zero
/// exit and its one line, nothing written.
pub fn singles(dir: &Path, kernel: &Path, nokaslr: bool, files: &[Damaged], counts: &mut Counts) {
    singles_of(dir, &commands(kernel, nokaslr), files, counts)
}

/// [`singles`] through the given module commands.
pub fn singles_of(dir: &Path, commands: &[(&'static str, Vec<String>, bool)], files: &[Damaged], counts: &mut Counts) {
    let mut seen = std::collections::BTreeSet::new();
    for f in files.iter().filter(|f| f.invalid && seen.insert(f.class)) {
        let d = dir.join(format!("single-{}", f.name));
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join(&f.name);
        std::fs::write(&path, &f.bytes).unwrap();
        for &(label, ref args, writes) in commands {
            let out = d.join("out");
            let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
            a.push(path.as_os_str());
            if writes {
                a.extend([std::ffi::OsStr::new("-o"), out.as_os_str()]);
            }
            let r = run_timed(&a, Duration::from_secs(60));
            counts.runs += 1;
            assert_ne!(r.code, 0, "{label} {}: refused nothing:\n{}", f.name, r.stderr);
            let lines = refusal_lines(&r.stderr, &path);
            assert_eq!(lines.len(), 1, "{label} {}: no one-line refusal:\n{}", f.name, r.stderr);
            assert!(
                gives_reason(lines[0], f),
                "{label} {} ({}): refused without its reason ({:?}): {}",
                f.name,
                f.class,
                f.reason,
                lines[0]
            );
            assert!(!out.join(&f.name).exists(), "{label} {}: written", f.name);
        }
    }
}

/// Every damaged kernel image through every command that reads one. An
/// image marked invalid is refused: a non-zero exit, the one stderr line
/// `bootlink: IMAGE: ...` giving its class's reason, and nothing written
/// (no output, no temporary file beside the image or in the output).
pub fn kernels(dir: &Path, images: &[Damaged], module: &Path, counts: &mut Counts) {
    std::fs::create_dir_all(dir).unwrap();
    for f in images {
        let path = dir.join(&f.name);
        std::fs::write(&path, &f.bytes).unwrap();
        let e = counts.by_class.entry(f.class).or_default();
        e.0 += 1;
        counts.files += 1;
        counts.invalid += f.invalid as usize;
        let out = dir.join(format!("out-{}", f.name));
        let (p, m, o) = (path.as_os_str(), module.as_os_str(), out.as_os_str());
        let s = std::ffi::OsStr::new;
        let runs: [Vec<&std::ffi::OsStr>; 5] = [
            vec![s("kernel-info"), p],
            vec![s("inspect"), p, m],
            vec![s("preresolve"), s("--kernel"), p, s("--assume-nokaslr"), m, s("-o"), o],
            vec![s("finalize"), s("--kernel"), p, m, s("-o"), o],
            vec![s("symhash"), s("--kernel"), p, m, s("-o"), o],
        ];
        for a in runs {
            let r = run_timed(&a, Duration::from_secs(60));
            counts.runs += 1;
            let lines = refusal_lines(&r.stderr, &path);
            let refused = r.code != 0 && !lines.is_empty();
            let e = counts.by_class.get_mut(f.class).unwrap();
            e.2 += 1;
            e.1 += refused as usize;
            if f.invalid {
                let what = format!("{a:?}: the damaged kernel image {} ({})", f.name, f.class);
                assert_ne!(r.code, 0, "{what} was not refused:\n{}", r.stderr);
                // The image's line is the whole of stderr: the module is
                // good, and nothing else is said about it.
                assert_eq!(r.stderr.lines().count(), 1, "{what}: not one line:\n{}", r.stderr);
                assert_eq!(lines.len(), 1, "{what}: no line naming it:\n{}", r.stderr);
                assert!(gives_reason(lines[0], f), "{what}: refused without its reason ({:?}): {}", f.reason, lines[0]);
                assert!(!out.exists(), "{what}: refused but {} was written", out.display());
                let leftovers = temporaries(dir);
                assert!(leftovers.is_empty(), "{what}: temporary files left: {leftovers:?}");
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
}

/// Put damaged file `f` at `path`: its bytes, or for the class of paths
/// that are not regular files a FIFO, a directory or a symbolic link to
/// /dev/zero (by its copy number).
pub fn place(path: &Path, f: &Damaged, k: usize) {
    if f.class != "not-a-regular-file" {
        std::fs::write(path, &f.bytes).unwrap();
        return;
    }
    match k % 3 {
        0 => {
            let st = Command::new("mkfifo").arg(path).status().expect("run mkfifo");
            assert!(st.success(), "mkfifo {}", path.display());
        }
        1 => std::fs::create_dir(path).unwrap(),
        _ => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
    }
}

/// A command over one input: its arguments given the damaged file and an
/// output path (which must not exist after a refusal).
pub type OneInput<'a> = (&'static str, Box<dyn Fn(&Path, &Path) -> Vec<std::ffi::OsString> + 'a>);

/// Every damaged file alone through every command of `commands`, checked:
/// no panic, no hang, every stderr line `bootlink: ...`; a marked file
/// refused (non-zero exit, exactly one line `bootlink: FILE: ...`, giving
/// its class's reason); nothing written and no temporary file left for a
/// refused one.
pub fn each_alone(dir: &Path, files: &[Damaged], commands: &[OneInput], counts: &mut Counts) {
    each_alone_env(dir, files, commands, &[], counts)
}

/// [`each_alone`] with these environment variables set for every run.
/// Every file is run before the test fails, and the failure lists them all.
pub fn each_alone_env(dir: &Path, files: &[Damaged], commands: &[OneInput], env: &[(&str, &str)], counts: &mut Counts) {
    std::fs::create_dir_all(dir).unwrap();
    let mut failures = Vec::new();
    for (n, f) in files.iter().enumerate() {
        let d = dir.join(format!("{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join(&f.name);
        place(&path, f, n);
        counts.files += 1;
        counts.invalid += f.invalid as usize;
        counts.by_class.entry(f.class).or_default().0 += 1;
        for (label, args) in commands {
            let out = d.join(format!("out-{}", label.replace([' ', '-'], "_")));
            let a = args(&path, &out);
            let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
            let r = run_timed_env(&a, Duration::from_secs(60), env);
            counts.runs += 1;
            let mut fail = |what: String| failures.push(format!("{label} {} ({}): {what}", path.display(), f.class));
            // A refusal says only `bootlink: ...` lines (a success may also
            // say what it did).
            if let Some(line) = r.stderr.lines().filter(|_| r.code != 0).find(|l| !l.starts_with("bootlink: ")) {
                fail(format!("a stderr line not `bootlink: ...`: {line}"));
            }
            let lines = refusal_lines(&r.stderr, &path);
            let refused = r.code != 0 && lines.len() == 1;
            let e = counts.by_class.get_mut(f.class).unwrap();
            e.2 += 1;
            e.1 += refused as usize;
            if f.invalid && !refused {
                fail(format!("not refused in one line `bootlink: FILE: ...` (exit {}):\n{}", r.code, r.stderr));
            } else if f.invalid && !gives_reason(lines[0], f) {
                fail(format!("refused without its reason ({:?}): {}", f.reason, lines[0]));
            }
            if r.code != 0 && out.exists() {
                fail(format!("refused but {} was written", out.display()));
            }
            let leftovers = temporaries(&d);
            if !leftovers.is_empty() {
                fail(format!("temporary files left: {leftovers:?}"));
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The hidden files in `dir`: a temporary bootlink left behind.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}
