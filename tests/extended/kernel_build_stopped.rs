//! A kernel build stopped by SIGTERM (a CI timeout, a test harness, `kill`)
//! stops everything it started: make and its jobs die with bootlink, the
//! build's locks stay held until the last of them has exited, and the next
//! build in the same cache finishes from where the stopped one was.
//!
//! Before this was so, make outlived a killed bootlink and went on
//! compiling into the object tree after the lock was released; the next
//! build took the lock and linked in the same tree at the same time (a
//! vmlinux that failed to read, seen in `make test` after a killed run).
//!
//! A cache of the test's own (so the shared one's builds are not
//! disturbed), with ccache shared with the main cache through a symlink
//! (the rebuild hits it for what an earlier run compiled). The build is
//! the series on a small config of its own (x86-64 tinyconfig with
//! modules and the series' options, the image alone): what is checked is
//! how a build stops and resumes, which does not depend on the config,
//! and the lab kernel's ~2,500 objects made this test the extended tier's
//! most expensive warm part (1,240 s of its 1,605 on 2026-11-30, loaded).
//! Extended tier: the source unpack and that build. First run of the lab
//! kernel's version (2026-11-29, beside a Debian-config kernel build):
//! stopped after 20 compiles, everything it started gone 0.7 s after, the
//! next build 545 s, the test 814 s.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Processes (other than this test) whose command line, working directory
/// or environment mentions `dir`.
fn processes_in(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let me = std::process::id();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let p = e.path();
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else { continue };
        if stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')) {
            continue;
        }
        let cmdline = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(p.join("cwd")).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        let env = String::from_utf8_lossy(&std::fs::read(p.join("environ")).unwrap_or_default()).into_owned();
        if cmd.contains(&needle) || cwd.starts_with(&needle) || env.contains(&needle) {
            found.push((pid, cmd.chars().take(120).collect()));
        }
    }
    found
}

/// The build log of the (only) object tree in `kbuild`, once there is one.
fn build_log(kbuild: &Path) -> Option<PathBuf> {
    std::fs::read_dir(kbuild).ok()?.flatten().map(|e| e.path().join("bootlink-build.log")).find(|p| p.is_file())
}

/// The series on x86-64 tinyconfig with modules: the options it needs,
/// nothing of the lab's.
const SMALL_CONFIG: &str = "CONFIG_64BIT=y\nCONFIG_MODULES=y\nCONFIG_MODULE_SYMHASH=y\n";

fn build(cache: &Path) -> Command {
    let fragment = cache.join("small.config");
    std::fs::write(&fragment, SMALL_CONFIG).unwrap();
    let mut c = Command::new(common::bin());
    c.args(["kernel", "build", "--image-only", "--json", "--fragment"])
        .arg(&fragment)
        .env("BOOTLINK_CACHE", cache)
        .env("BOOTLINK_QUIET", "1");
    c
}

#[test]
fn a_stopped_kernel_build_stops_its_make_and_the_next_build_finishes() {
    let dir = common::tmpdir("build-stopped");
    let cache = dir.join("cache");
    let kbuild = cache.join("kbuild");
    std::fs::create_dir_all(&kbuild).unwrap();
    let shared = common::cache().join("ccache");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, cache.join("ccache")).unwrap();

    let mut first = build(&cache).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // Wait until make has compiled for a while (past configuring).
    let t0 = Instant::now();
    let compiling = loop {
        assert!(first.try_wait().unwrap().is_none(), "the build ended before it could be stopped");
        assert!(t0.elapsed() < Duration::from_secs(900), "no compiler ran in 15 minutes");
        let lines = build_log(&kbuild)
            .and_then(|l| std::fs::read_to_string(l).ok())
            .map(|t| t.lines().filter(|l| l.trim_start().starts_with("CC ")).count())
            .unwrap_or(0);
        if lines >= 20 {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let running = processes_in(&cache);
    assert!(running.iter().any(|(_, c)| c.starts_with("make ")), "make is running: {running:?}");
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGTERM) };
    let status = first.wait().unwrap();
    assert!(!status.success(), "killed: {status}");

    // make and every job it started go within seconds, not at the end of
    // the build; until the last has gone, the build's locks are held: the
    // line's (6.1, the lab kernel's), the object tree's, and the one
    // every build shares (which an older bootlink takes exclusively).
    let tree = build_log(&kbuild).and_then(|l| l.parent().map(Path::to_path_buf)).expect("the object tree");
    let locks: Vec<(PathBuf, std::fs::File)> = [
        bootlink::kbuild::lock::line_path(&kbuild, bootlink::kbuild::Line::V6_1),
        bootlink::kbuild::lock::tree_path(&tree),
        bootlink::kbuild::lock::all_lines_path(&kbuild),
    ]
    .into_iter()
    .map(|p| (p.clone(), std::fs::File::open(&p).unwrap()))
    .collect();
    let t1 = Instant::now();
    loop {
        let left = processes_in(&cache);
        if left.is_empty() {
            break;
        }
        for (p, lock) in &locks {
            assert!(lock.try_lock().is_err(), "{} is free while these run: {left:?}", p.display());
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "still running 30 s after bootlink was stopped: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (p, lock) in &locks {
        lock.try_lock()
            .unwrap_or_else(|e| panic!("{} is held after everything the build started exited: {e}", p.display()));
        lock.unlock().unwrap();
    }
    let gone = t1.elapsed().as_secs_f64();

    // The next build takes the same tree and finishes.
    let o = build(&cache).output().unwrap();
    assert!(o.status.success(), "the build after the stopped one failed: {}", common::stderr(&o));
    let b: bootlink::kbuild::Report = serde_json::from_slice(&o.stdout).expect("kernel build --json");
    assert!(!b.cached);
    assert!(b.vmlinux.starts_with(&cache), "{}", b.vmlinux.display());
    let k = bootlink::kernel::KernelImage::open(&b.bzimage, None).expect("the finished kernel reads");
    assert_eq!(k.release.as_deref(), Some(b.release.as_str()));
    println!(
        "stopped after {compiling} compiles; everything gone {gone:.1} s after; the next build: {:.0} s",
        b.seconds
    );
}
