//! One lock per kernel line (`kbuild::lock`): a 6.1 operation that takes
//! its line's lock goes on while a 6.12 build holds 6.12's, and waits,
//! saying for which line, while 6.1's is held.
//!
//! The operation is real and cheap: `bootlink kernel build --config debian
//! --tree --cached-only` (the 6.1 series built with Debian's config, from
//! the shared cache; `--tree` asks whether its object tree holds it, which
//! is answered under the line's and the tree's locks, as `bootlink system`
//! packaging does through `kbuild::with_tree`). The locks are held here as
//! a build holds them: flock on the lock files the code uses. Tier 2: it
//! needs the cached 6.1 Debian-config build (`bootlink kernel build
//! --config debian`, about an hour on 2 cores), a counted skip without it.

use crate::common;

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bootlink::kbuild::{Line, lock};

const TEST: &str = "kernel_build_lock";

fn tree_lookup(stderr: &Path) -> Child {
    Command::new(common::bin())
        .args(["kernel", "build", "--config", "debian", "--tree", "--cached-only", "--json"])
        .stdout(Stdio::piped())
        .stderr(File::create(stderr).unwrap())
        .spawn()
        .unwrap()
}

/// Wait up to `limit` for `child`; None (and the child killed) past it.
fn finish_within(child: &mut Child, limit: Duration) -> Option<(std::process::ExitStatus, Duration)> {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status, t0.elapsed()));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the lookup answered: the build's report when its tree holds it,
/// or the one line saying it is not in the cache (another build of the
/// line switched the tree since); anything else fails the test.
fn answer(child: Child, status: std::process::ExitStatus, stderr: &Path) -> String {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.unwrap(), &mut out).unwrap();
    let err = std::fs::read_to_string(stderr).unwrap();
    if status.success() {
        let b: bootlink::kbuild::Report = serde_json::from_slice(&out).expect("kernel build --json");
        assert_eq!(b.line, "6.1");
        format!("the tree holds build {}", b.key)
    } else {
        assert!(err.contains("not in the cache"), "the lookup failed otherwise: {err}");
        "the tree holds another build now".into()
    }
}

#[test]
fn a_6_1_tree_lookup_goes_on_while_6_12_is_locked_and_waits_for_6_1() {
    let o = Command::new(common::bin())
        .args(["kernel", "build", "--config", "debian", "--cached-only", "--json"])
        .env("BOOTLINK_QUIET", "1")
        .output()
        .unwrap();
    if !o.status.success() {
        common::skip(TEST, &format!("no cached 6.1 Debian-config build: {}", common::stderr(&o).trim()));
        return;
    }
    // Its options come back from its build.json (what `apply` and
    // `manifest write --bzimage` make the tree hold again).
    let built: bootlink::kbuild::Report = serde_json::from_slice(&o.stdout).unwrap();
    let opts = bootlink::kbuild::options_of(&built).unwrap().expect("the Debian-config build's options");
    assert!(opts.lab_series.is_none() && !opts.modules && opts.release.as_deref() == Some(built.release.as_str()));
    let kbuild = common::cache().join("kbuild");
    let dir = common::tmpdir("kernel-build-lock");
    let open = |p: &Path| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(p).unwrap()
    };

    // 6.12's lock held (by this test, or by a real 6.12 build already).
    let v612 = open(&lock::line_path(&kbuild, Line::V6_12));
    let ours = v612.try_lock().is_ok();
    let stderr_a = dir.join("with-6.12-held.stderr");
    let mut a = tree_lookup(&stderr_a);
    let Some((status, took)) = finish_within(&mut a, Duration::from_secs(300)) else {
        panic!("the 6.1 lookup did not finish in 300 s with 6.12's lock held: {}", read(&stderr_a));
    };
    let err = read(&stderr_a);
    if err.contains("waiting for another kernel build of line 6.1")
        || err.contains("older bootlink")
        || err.contains("in object tree")
    {
        common::skip(TEST, &format!("a real 6.1 build (or an older bootlink's) held a lock meanwhile: {err}"));
        return;
    }
    assert!(!err.contains("waiting"), "6.12's lock made the 6.1 lookup wait: {err}");
    let first = answer(a, status, &stderr_a);
    println!(
        "6.12's lock held ({}): the 6.1 lookup finished in {:.1} s without waiting: {first}",
        if ours { "by this test" } else { "by a 6.12 build" },
        took.as_secs_f64()
    );
    if ours {
        v612.unlock().unwrap();
    }

    // 6.1's lock held: the lookup waits, says for which line, and finishes
    // once it is released.
    let v61 = open(&lock::line_path(&kbuild, Line::V6_1));
    if v61.try_lock().is_err() {
        common::skip(TEST, "a real 6.1 build holds 6.1's lock: cannot hold it here to see the lookup wait");
        return;
    }
    let stderr_b = dir.join("with-6.1-held.stderr");
    let mut b = tree_lookup(&stderr_b);
    let t0 = Instant::now();
    let said = common::wait_for_stderr(
        &mut b,
        &stderr_b,
        "waiting for another kernel build of line 6.1 to finish",
        "the lookup with 6.1's lock held",
    );
    std::thread::sleep(Duration::from_secs(3));
    assert!(b.try_wait().unwrap().is_none(), "the lookup went on while 6.1's lock was held");
    assert!(
        said.contains(&lock::line_path(&kbuild, Line::V6_1).display().to_string()),
        "the waiting line names the lock: {said}"
    );
    let held_for = t0.elapsed();
    v61.unlock().unwrap();
    let Some((status, after)) = finish_within(&mut b, Duration::from_secs(300)) else {
        panic!("the 6.1 lookup did not finish in 300 s after 6.1's lock was released: {}", read(&stderr_b));
    };
    let second = answer(b, status, &stderr_b);
    println!(
        "6.1's lock held {:.1} s: the lookup waited, saying {:?}; finished {:.1} s after the release: {second}",
        held_for.as_secs_f64(),
        said.lines().find(|l| l.contains("waiting")).unwrap_or_default(),
        after.as_secs_f64()
    );
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
