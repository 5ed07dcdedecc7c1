//! One lock per kernel line (`kbuild::lock`): an operation that takes its
//! line's lock goes on while a build of the other line holds that line's,
//! and waits, saying for which line, while its own line's is held.
//!
//! The operation is real and cheap: `bootlink kernel build --lab --tree
//! --cached-only` (the lab build of the tested line, from the shared cache;
//! `--tree` asks whether its object tree holds it, which is answered under
//! the line's and the tree's locks, as `bootlink system` packaging does
//! through `kbuild::with_tree`). The locks are held here as a build holds
//! them: flock on the lock files the code uses. Tier 3, where the lab
//! build is made for the boots anyway (the test asks for it first, so it
//! never depends on what ran before it; it once looked up the Debian-config
//! build, which nothing in `make test` makes, and skipped on a fresh
//! machine).

use crate::common;

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bootlink::kbuild::{Line, lock};

fn tree_lookup(stderr: &Path) -> Child {
    Command::new(common::bin())
        .args(["kernel", "build", "--lab", "--line", common::line(), "--tree", "--cached-only", "--json"])
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
        assert_eq!(b.line, common::line());
        format!("the tree holds build {}", b.key)
    } else {
        assert!(err.contains("not in the cache"), "the lookup failed otherwise: {err}");
        "the tree holds another build now".into()
    }
}

/// A real build of the tested line (tier 3's other lane builds flavours of
/// the lab kernel) makes a lookup wait for it: that is the lock working,
/// not what this test looks at, so the test waits for such a build to end
/// (as any build would) and looks again.
const ATTEMPTS: usize = 4;
const A_BUILD: Duration = Duration::from_secs(3600);

#[test]
fn a_tree_lookup_goes_on_while_the_other_line_is_locked_and_waits_for_its_own() {
    let line = Line::parse(common::line()).unwrap();
    let other = if line == Line::V6_1 { Line::V6_12 } else { Line::V6_1 };
    let waiting_own = format!("waiting for another kernel build of line {}", common::line());
    // The build it looks up, made first (cached after the first boot
    // test of the run to ask; built here otherwise).
    let k = common::self_built(true);
    let built: bootlink::kbuild::Report =
        serde_json::from_slice(&std::fs::read(k.dir.join("build.json")).unwrap()).unwrap();
    let kbuild = common::cache().join("kbuild");
    let dir = common::tmpdir("kernel-build-lock");
    let open = |p: &Path| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(p).unwrap()
    };

    // The other line's lock held (by this test, or by a real build of it).
    let held_other = open(&lock::line_path(&kbuild, other));
    let ours = held_other.try_lock().is_ok();
    let stderr_a = dir.join("with-other-line-held.stderr");
    let mut first = None;
    for attempt in 1..=ATTEMPTS {
        // Started once no build of the tested line holds its lock.
        drop(lock::Held::line(&kbuild, line).unwrap());
        let mut a = tree_lookup(&stderr_a);
        let Some((status, took)) = finish_within(&mut a, A_BUILD) else {
            panic!("the {line} lookup did not finish in an hour with {other}'s lock held: {}", read(&stderr_a));
        };
        let err = read(&stderr_a);
        if err.contains(&waiting_own) {
            println!("attempt {attempt}: a real {line} build held its line's lock meanwhile; looking again");
            continue;
        }
        assert!(!err.contains("waiting"), "{other}'s lock made the {line} lookup wait: {err}");
        first = Some((answer(a, status, &stderr_a), took));
        break;
    }
    let Some((first, took)) = first else {
        panic!("{ATTEMPTS} lookups each met a real {line} build: the lock was never free for a second");
    };
    println!(
        "{other}'s lock held ({}): the {line} lookup of build {} finished in {:.1} s without waiting: {first}",
        if ours { "by this test" } else { "by a build of that line" },
        built.key,
        took.as_secs_f64()
    );
    if ours {
        held_other.unlock().unwrap();
    }

    // The tested line's lock held: the lookup waits, says for which line,
    // and finishes once it is released.
    let held = lock::Held::line(&kbuild, line).unwrap();
    let stderr_b = dir.join("with-own-line-held.stderr");
    let mut b = tree_lookup(&stderr_b);
    let t0 = Instant::now();
    let said = common::wait_for_stderr(&mut b, &stderr_b, &waiting_own, "the lookup with its line's lock held");
    std::thread::sleep(Duration::from_secs(3));
    assert!(b.try_wait().unwrap().is_none(), "the lookup went on while {line}'s lock was held");
    assert!(
        said.contains(&lock::line_path(&kbuild, line).display().to_string()),
        "the waiting line names the lock: {said}"
    );
    let held_for = t0.elapsed();
    drop(held);
    let Some((status, after)) = finish_within(&mut b, A_BUILD) else {
        panic!("the {line} lookup did not finish in an hour after its lock was released: {}", read(&stderr_b));
    };
    let second = answer(b, status, &stderr_b);
    println!(
        "{line}'s lock held {:.1} s: the lookup waited, saying {:?}; finished {:.1} s after the release: {second}",
        held_for.as_secs_f64(),
        said.lines().find(|l| l.contains("waiting")).unwrap_or_default(),
        after.as_secs_f64()
    );
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
