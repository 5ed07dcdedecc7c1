//! A peer's tests: the kernel's own module-loading selftests
//! (tools/testing/selftests/kmod/kmod.sh driving lib/test_kmod.c, with
//! lib/test_module.c and the xfs, btrfs and tun modules it asks for),
//! written by people who never saw bootlink, run in the lab on the line's
//! lab kernel with the series and every boot parameter of the series on,
//! and on the same config built without the series (stock). The patched
//! kernel must give stock's results test by test (exit status and every
//! verdict line, return values included), or pass a test stock fails
//! where that difference is named with what was measured about it
//! ([`NAMED_DIFFERENCES`]). Debian's kernel of the line as shipped runs
//! them too, for the record (another config: printed, not compared; its
//! tests check that every test ID ran as many times as asked and
//! reported). The script's tests
//! are run in four groups ([`GROUPS`]), each a test of its own with a boot
//! per kernel, so that no test runs for long (issue 44); on Debian's
//! kernel the two longest, 0006 and 0007, are split further into runs of
//! part of their count ([`DEBIAN_GROUPS`]): its 6.12 build took 619 s for
//! 0006's ten runs in one boot.
//!
//! run-tests: alone (each test keeps both cores busy with its guests: beside
//! another module's tests each would wait for them, see docs/tests.md).
//!
//! The script, test_kmod.c and test_module.c come from the line's
//! linux-source tarball, as they are; the two modules are built out of tree
//! once against the patched kernel's object tree for both self-built
//! kernels, and against Debian's headers for Debian's kernel. The guest is a busybox initramfs with bash, kmod (modprobe) and capsh from
//! the host, and a module tree indexed by depmod.
//!
//! The clock is the lab's instruction-counted one (-icount, one CPU), not
//! realtime: tests 0008 and 0009 start 58 and 62 request_module() threads
//! against kmod's limit of 50 concurrent modprobes, and a thread that
//! waits more than 5 s for a slot gets -ETIME. Under TCG on the host's
//! clock a modprobe takes long enough that this timeout fires (measured
//! here, realtime with 2 vCPUs: Debian's kernel failed 0008's first run
//! with -62, the lab kernel failed 0009 after 28 runs): the emulator's
//! speed, not the kernel. With -icount the guest's time follows its
//! instructions, as on a ~1 GHz machine, the same for both kernels. Each
//! test ID runs on its own (`kmod.sh -t ID`, its recommended count), so
//! one failure does not hide the tests after it; 0008 and 0009 run
//! [`STRESS_RUNS`] times instead of 150 (about 3 s each here: 150 would
//! add over 15 minutes per kernel).

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bootlink::kmod::ModTree;
use bootlink_lab::lab::{Initramfs, QemuOptions, busybox, initramfs, qemu};
use bootlink_lab::workload::modules::stage_module_tree;

/// The modules kmod.sh asks for beside its two test modules (its `config`
/// file: CONFIG_XFS_FS, CONFIG_TUN, CONFIG_BTRFS_FS).
const ASKED_FOR: [&str; 3] = ["xfs", "btrfs", "tun"];

/// kmod.sh's tests (its ALL_TESTS), in the four groups the tests boot for,
/// of about the same guest time (seconds of the instruction-counted clock
/// on stock 6.12: 0001-0005 8 together, 0006 21, 0007 11, 0008 3, 0010-0013
/// under 1, 0009 22; Debian's kernel 51 for 0009).
const GROUPS: [&[&str]; 4] = [
    &["0001", "0002", "0003", "0004", "0005"],
    &["0006"],
    &["0007", "0008", "0010", "0011", "0012", "0013"],
    &["0009"],
];

/// The groups Debian's kernel boots for: [`GROUPS`] with 0006 and 0007
/// split into runs of part of the script's count (`0006x4`: `kmod.sh -c
/// 0006 4`), together the count the script recommends (checked against
/// its ALL_TESTS). Debian's 6.12 modules are compressed (xz), and each of
/// 0006's runs removes and loads xfs again (0007 runs 0005 and 0006): one
/// boot of 0006's ten runs took 593 s of guest wall there, 0007's group
/// 292 s.
const DEBIAN_GROUPS: [&[&str]; 7] = [
    &["0001", "0002", "0003", "0004", "0005"],
    &["0006x4"],
    &["0006x3"],
    &["0006x3"],
    &["0007x3"],
    &["0007x2", "0008", "0010", "0011", "0012", "0013"],
    &["0009"],
];

/// Tests the patched kernel passes where stock fails, by line, with what
/// was measured (a difference not listed here fails the test).
const NAMED_DIFFERENCES: &[(&str, &str, &str)] = &[(
    "6.1",
    "0009",
    "62 threads' get_fs_type(\"xfs\"): on stock one got no file system back (-EINVAL) after modprobe \
     returned, in each run here (2 of 2 on the lab config, 1 of 1 on Debian's kernel); the patched \
     kernel passed all 10 of 0009's runs in each of its 2 runs. kmod's modprobe counts a module whose \
     init runs (COMING) as loaded and returns at once, before xfs's init has registered the file system; the patched kernel's shorter COMING \
     window (less work before the init) is the likely reason it is not hit, not established",
)];

/// The tests stock may fail, as measured on both lines: 0012 (the
/// script's own compare of the taint flags an unprivileged reader sees,
/// '(OE)' against '(OE)') and 0009 on 6.1 (the race NAMED_DIFFERENCES
/// describes).
const STOCK_MAY_FAIL: [&str; 2] = ["0009", "0012"];

/// How many times tests 0008 and 0009 run (the script's default is 150).
const STRESS_RUNS: u32 = 10;

/// Every boot parameter the series adds, on (the lab series' self-checks
/// too); 6.1's series alone has trace_events.lazy_files.
fn series_parameters() -> String {
    let mut p = vec![
        "module.symlookup=gnu",
        "module.symlookup_direct=1",
        "ftrace.module_check=sorted",
        "trace_events.eval_one_pass=1",
        "module.dedup=1",
        "module.hashes=1",
        "module.symlookup_check=1",
        "module.slide_check=1",
    ];
    if common::line() == "6.1" {
        p.push("trace_events.lazy_files=1");
    }
    p.join(" ")
}

/// One kernel's run of kmod.sh's tests.
struct Ran {
    /// Per test ID (as asked: `0006x4` for four runs of 0006): kmod.sh's
    /// exit status, how many runs it started (its `Running test:` lines)
    /// and its distinct verdict lines with their counts (`3
    /// kmod_test_0001_driver: OK! - …`).
    tests: Vec<(String, i32, u32, Vec<String>)>,
    text: String,
    wall_s: f64,
}

/// Extract `members` of the line's linux-source tarball into `dir`.
fn from_source(dir: &Path, members: &[&str]) {
    let line = common::line();
    let tar = format!("/usr/src/linux-source-{line}.tar.xz");
    assert!(Path::new(&tar).is_file(), "{tar} missing: apt-get install linux-source-{line}");
    let mut args = vec!["-xJf".to_string(), tar, "-C".into(), dir.display().to_string(), "--strip-components=1".into()];
    args.extend(members.iter().map(|m| format!("linux-source-{line}/{m}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::sh("tar", &args);
}

/// test_kmod.ko and test_module.ko built out of tree against `kdir`.
fn test_modules(work: &Path, src: &Path, kdir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(work).unwrap();
    for f in ["test_kmod.c", "test_module.c"] {
        std::fs::copy(src.join("lib").join(f), work.join(f)).unwrap();
    }
    std::fs::write(work.join("Kbuild"), "obj-m := test_kmod.o test_module.o\n").unwrap();
    let m = format!("M={}", work.display());
    common::sh("make", &["-s", "-C", kdir.to_str().unwrap(), &m, "modules"]);
    ["test_kmod.ko", "test_module.ko"].iter().map(|k| work.join(k)).collect()
}

/// Boot `kernel` with `tree`'s modules of [`ASKED_FOR`] (and what they
/// need) and the two test modules under extra/, and run kmod.sh.
#[allow(clippy::too_many_arguments)]
fn run(
    dir: &Path,
    src: &Path,
    kernel: &Path,
    tree: &ModTree,
    release: &str,
    tests: &[PathBuf],
    cmdline: &str,
    ids: &[&str],
) -> Ran {
    let plan = tree.resolve(&ASKED_FOR).unwrap();
    let files = plan
        .entries()
        .into_iter()
        .map(|e| (e.path.strip_prefix(tree.root()).unwrap().display().to_string(), e.path.clone()))
        .chain(tests.iter().map(|t| (format!("extra/{}", t.file_name().unwrap().to_string_lossy()), t.clone())));
    let mods = stage_module_tree(&dir.join("root"), release, tree.root(), files).unwrap();

    let mut ir = Initramfs::new(busybox::busybox().unwrap());
    // What kmod.sh calls besides bash, kmod and capsh.
    for a in ["which", "id", "grep", "sed", "sleep", "tr", "wc", "head", "printf", "uname", "cat", "awk", "date"] {
        ir.applet(a);
    }
    for p in ["/usr/bin/bash", "/usr/bin/kmod", "/usr/sbin/capsh"] {
        bootlink_lab::lab::userspace::add(&mut ir, Path::new(p)).unwrap();
    }
    for (link, to) in
        [("/bin/bash", "/usr/bin/bash"), ("/sbin/modprobe", "/usr/bin/kmod"), ("/sbin/lsmod", "/usr/bin/kmod")]
    {
        ir.symlink(link, to);
    }
    ir.copy_tree(&format!("/lib/modules/{release}"), &mods);
    ir.copy_file("/kmod/kmod.sh", src.join("tools/testing/selftests/kmod/kmod.sh"));
    ir.copy_file("/kmod/config", src.join("tools/testing/selftests/kmod/config"));
    // Each test ID on its own, as [`asked`] says (`-t ID`: the script's
    // recommended count; `-c ID N`: N runs), so that one failure does not
    // hide the tests after it.
    let calls: String = ids.iter().map(|p| format!("one {p} {}\n", asked(src, p).0)).collect();
    ir.tag("kmodselftest").body(&format!(
        "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
         echo /sbin/modprobe > /proc/sys/kernel/modprobe\n\
         one() {{\n\
           id=$1; shift\n\
           t0=$(date +%s)\n\
           bash /kmod/kmod.sh \"$@\" > /tmp/out 2>&1; rc=$?\n\
           grep -e ': OK!' -e ': FAIL' /tmp/out | sort | uniq -c | sed 's/^ */VERDICT /'\n\
           runs=$(grep -c '^Running test: ' /tmp/out)\n\
           echo \"KMOD-TEST $id EXIT $rc RUNS $runs SECONDS $(( $(date +%s) - t0 ))\"\n\
           dmesg -c | grep -e 'request_module' -e 'kmod' | sort | uniq -c | sed 's/^ */DMESG /'\n\
         }}\n\
         {calls}"
    ));
    let initrd = dir.join("initrd.cpio");
    ir.write(&initrd).unwrap();
    let opts = QemuOptions {
        initrd: Some(initrd),
        cmdline: format!("console=ttyS0 panic=-1 oops=panic quiet {cmdline}"),
        timeout: Duration::from_secs(3600),
        deterministic: true,
        memory_mib: 2048,
        log: Some(dir.join("console.log")),
        ..QemuOptions::new(kernel)
    };
    let t0 = Instant::now();
    let boot = qemu::run(&opts).expect("start qemu");
    let wall_s = t0.elapsed().as_secs_f64();
    boot.check().unwrap_or_else(|e| panic!("{e}\n{}", boot.excerpt(80)));
    let text = boot.framed("kmodselftest").unwrap_or_else(|| panic!("no output:\n{}", boot.excerpt(80)));
    assert_eq!(initramfs::body_status(&boot.log, "kmodselftest"), Some(0), "{text}");
    let mut tests = Vec::new();
    let mut verdicts = Vec::new();
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("VERDICT ") {
            verdicts.push(v.to_string());
        } else if let Some(rest) = l.strip_prefix("KMOD-TEST ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            assert!(w.len() == 7 && w[1] == "EXIT" && w[3] == "RUNS", "{l}");
            tests.push((w[0].to_string(), w[2].parse().unwrap(), w[4].parse().unwrap(), std::mem::take(&mut verdicts)));
        }
    }
    Ran { tests, text, wall_s }
}

/// The line's lab kernel built from the same config without the series
/// (an empty series file): stock, on the patched kernel's config.
fn unpatched(dir: &Path) -> common::SelfBuilt {
    let empty = dir.join("no-series");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("series"), "").unwrap();
    let line = common::line();
    let o = common::TestCommand::new(&[&"kernel", &"build", &"--series", &empty, &"--line", &line, &"--json"]).ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    common::SelfBuilt {
        dir: v["dir"].as_str().unwrap().into(),
        release: v["release"].as_str().unwrap().into(),
        tree: PathBuf::new(),
    }
}

/// The self-built kernel `b` with its modules and the test modules.
fn self_built_run(
    dir: &Path,
    src: &Path,
    b: &common::SelfBuilt,
    tests: &[PathBuf],
    cmdline: &str,
    ids: &[&str],
) -> Ran {
    let tree = ModTree::read(&b.dir.join("lib/modules").join(&b.release)).unwrap();
    run(&dir.join("boot"), src, &b.dir.join("bzImage"), &tree, &b.release, tests, cmdline, ids)
}

/// The script and the two test modules' sources, from the line's tarball, under `dir/src`.
fn sources(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    from_source(&src, &["tools/testing/selftests/kmod", "lib/test_kmod.c", "lib/test_module.c"]);
    src
}

/// Each kernel's failed tests, in the test's report.
fn report(name: &str, r: &Ran) {
    let failed: Vec<String> = r
        .tests
        .iter()
        .filter(|t| t.1 != 0)
        .map(|t| format!("{} {:?}", t.0, t.3.iter().filter(|v| v.contains("FAIL")).collect::<Vec<_>>()))
        .collect();
    common::report(
        "kmod_selftest",
        &format!("{name}: tests {} run in {:.0} s; failed: {failed:?}", ids_of(r).join(","), r.wall_s),
    );
}

fn ids_of(r: &Ran) -> Vec<&str> {
    r.tests.iter().map(|t| t.0.as_str()).collect()
}

/// A group's part: its test ID and, for `IDxN`, the N runs asked.
fn part_of(part: &str) -> (&str, Option<u32>) {
    match part.split_once('x') {
        Some((id, n)) => (id, Some(n.parse().unwrap())),
        None => (part, None),
    }
}

/// kmod.sh's arguments for `part` and how many runs they ask for: `-c ID
/// N` for `IDxN`, `-c ID` [`STRESS_RUNS`] for 0008 and 0009, else `-t
/// ID` (the script's recommended count).
fn asked(src: &Path, part: &str) -> (String, u32) {
    match part_of(part) {
        (id, Some(n)) => (format!("-c {id} {n}"), n),
        (id, None) if id == "0008" || id == "0009" => (format!("-c {id} {STRESS_RUNS}"), STRESS_RUNS),
        (id, None) => (format!("-t {id}"), recommended_count(src, id)),
    }
}

/// Every test ID of `r` reported, in order, each having started the runs
/// it was asked for: all of them when it passed; when it failed, at least
/// one and no more (kmod.sh stops at a test's first failing run; Debian's
/// 6.12 kernel fails 0009's first). A wrong `-c`/`-t` would make kmod.sh
/// print its usage and run nothing, which a for-the-record run would not
/// otherwise show.
fn check_ran(name: &str, r: &Ran, src: &Path, ids: &[&str]) {
    assert_eq!(ids_of(r), ids, "{name}: every test ID reported\n{}", r.text);
    for (id, exit, runs, _) in &r.tests {
        let asked = asked(src, id).1;
        let started = if *exit == 0 { *runs == asked } else { (1..=asked).contains(runs) };
        assert!(started, "{name}: test {id}: exit {exit}, {runs} of {asked} runs started\n{}", r.text);
    }
}

/// kmod.sh's tests `ids` on stock and on the patched kernel, booted at
/// once, compared test by test.
fn patched_gives_stocks_results(name: &str, ids: &[&str]) {
    let dir = common::tmpdir(name).keep();
    let src = sources(&dir);
    // The test modules, built once against the patched kernel's tree: the
    // series keeps the module ABI (same release, vermagic and CRCs), and
    // `make modules` does not sign them, so they load into both kernels
    // alike (out of tree and unsigned: taints O and E on both).
    let patched_build = common::self_built(true);
    let tests = test_modules(&dir.join("build"), &src, &patched_build.tree);
    // Stock: the same config without the series; then the series with
    // every parameter on.
    let stock_build = unpatched(&dir);
    assert_eq!(stock_build.release, patched_build.release);
    // Both kernels boot at once: each guest's clock counts its own
    // instructions (-icount), so what one measures does not depend on the
    // other, and a core the other lane leaves idle is used.
    let params = series_parameters();
    let (stock, patched) = std::thread::scope(|s| {
        let stock = s.spawn(|| self_built_run(&dir.join("stock"), &src, &stock_build, &tests, "", ids));
        let patched = s.spawn(|| self_built_run(&dir.join("patched"), &src, &patched_build, &tests, &params, ids));
        let join =
            |h: std::thread::ScopedJoinHandle<'_, Ran>| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        (join(stock), join(patched))
    });
    report("stock", &stock);
    report("patched", &patched);
    for (name, r) in [("stock", &stock), ("patched", &patched)] {
        check_ran(name, r, &src, ids);
    }
    // The reference is not vacuous: stock fails no test but those of
    // STOCK_MAY_FAIL (at most two of the whole script, as before the
    // script was run in groups).
    let failed: Vec<&str> = stock.tests.iter().filter(|t| t.1 != 0).map(|t| t.0.as_str()).collect();
    assert!(failed.iter().all(|id| STOCK_MAY_FAIL.contains(id)), "stock failed {failed:?}:\n{}", stock.text);
    // The patched kernel: stock's exit and verdicts, test by test; where
    // it passes a test stock fails, the difference must be one named in
    // NAMED_DIFFERENCES (with what was measured about it). A test stock
    // passes and the patched kernel fails is always a failure.
    for (a, b) in stock.tests.iter().zip(&patched.tests) {
        if a == b {
            continue;
        }
        let named = NAMED_DIFFERENCES.iter().find(|(line, id, _)| *line == common::line() && *id == a.0);
        match named {
            Some((_, _, why)) if a.1 != 0 && b.1 == 0 => {
                common::report("kmod_selftest", &format!("test {}: stock fails, the patched kernel passes: {why}", a.0))
            }
            _ => panic!("test {}: stock {a:?} and the patched kernel {b:?} differ\n{}", a.0, patched.text),
        }
    }
}

/// The count kmod.sh recommends for test `id` (its `ALL_TESTS` entry
/// `ID:COUNT:ENABLED`).
fn recommended_count(src: &Path, id: &str) -> u32 {
    let script = std::fs::read_to_string(src.join("tools/testing/selftests/kmod/kmod.sh")).unwrap();
    let entry = script
        .lines()
        .filter(|l| l.trim_start().starts_with("ALL_TESTS="))
        .flat_map(|l| l.split(|c: char| c == '"' || c.is_whitespace()))
        .find(|w| w.starts_with(&format!("{id}:")))
        .unwrap_or_else(|| panic!("kmod.sh's ALL_TESTS has no {id}"));
    entry.split(':').nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("kmod.sh: {entry:?}"))
}

/// Every test ID's runs across [`DEBIAN_GROUPS`] add up to the count the
/// script recommends, and every ID of [`GROUPS`] is there.
fn check_debian_split(src: &Path) {
    let ids = |groups: &[&[&str]]| -> std::collections::BTreeSet<String> {
        groups.iter().flat_map(|g| g.iter()).map(|p| part_of(p).0.to_string()).collect()
    };
    assert_eq!(ids(&DEBIAN_GROUPS), ids(&GROUPS), "the same tests as the comparison's groups");
    for id in ["0006", "0007"] {
        let runs: u32 = DEBIAN_GROUPS
            .iter()
            .flat_map(|g| g.iter())
            .filter_map(|p| match part_of(p) {
                (i, Some(n)) if i == id => Some(n),
                _ => None,
            })
            .sum();
        assert_eq!(runs, recommended_count(src, id), "{id}: its runs on Debian's kernel add up to kmod.sh's count");
    }
}

/// kmod.sh's tests `ids` on the line's Debian kernel as shipped, with its
/// own modules and the test modules built against its headers: printed
/// for the record (another config), every test ID checked to have run.
fn on_debians_kernel(name: &str, ids: &[&str]) {
    let dir = common::tmpdir(name).keep();
    let src = sources(&dir);
    check_debian_split(&src);
    let deb = common::debian_of_line();
    let deb_tree = ModTree::read(&deb.modules).unwrap();
    let headers = PathBuf::from(format!("/usr/src/linux-headers-{}", deb.release));
    assert!(
        headers.join("Makefile").is_file(),
        "{} missing: apt-get install linux-headers-{}",
        headers.display(),
        deb.release
    );
    let tests = test_modules(&dir.join("build"), &src, &headers);
    let r = run(&dir.join("boot"), &src, &deb.vmlinuz, &deb_tree, &deb.release, &tests, "", ids);
    report("debian", &r);
    check_ran("debian", &r, &src, ids);
}

#[test]
fn kmod_selftests_0001_to_0005_give_the_patched_kernel_stocks_results() {
    patched_gives_stocks_results("kmod-selftest-a", GROUPS[0]);
}

#[test]
fn kmod_selftest_0006_gives_the_patched_kernel_stocks_results() {
    patched_gives_stocks_results("kmod-selftest-b", GROUPS[1]);
}

#[test]
fn kmod_selftests_0007_0008_and_0010_to_0013_give_the_patched_kernel_stocks_results() {
    patched_gives_stocks_results("kmod-selftest-c", GROUPS[2]);
}

#[test]
fn kmod_selftest_0009_gives_the_patched_kernel_stocks_results() {
    patched_gives_stocks_results("kmod-selftest-d", GROUPS[3]);
}

#[test]
fn kmod_selftests_0001_to_0005_run_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-a", DEBIAN_GROUPS[0]);
}

#[test]
fn kmod_selftest_0006_runs_1_to_4_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-b1", DEBIAN_GROUPS[1]);
}

#[test]
fn kmod_selftest_0006_runs_5_to_7_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-b2", DEBIAN_GROUPS[2]);
}

#[test]
fn kmod_selftest_0006_runs_8_to_10_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-b3", DEBIAN_GROUPS[3]);
}

#[test]
fn kmod_selftest_0007_runs_1_to_3_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-c1", DEBIAN_GROUPS[4]);
}

#[test]
fn kmod_selftests_0007_runs_4_and_5_0008_and_0010_to_0013_run_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-c2", DEBIAN_GROUPS[5]);
}

#[test]
fn kmod_selftest_0009_runs_on_debians_kernel_for_the_record() {
    on_debians_kernel("kmod-selftest-debian-d", DEBIAN_GROUPS[6]);
}
