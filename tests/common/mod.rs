//! Shared by the integration tests: the real reference kernel (fetched and
//! cached once), the binary, temporary directories.
#![allow(dead_code)]

pub mod arm64;
pub mod ddlink;
pub mod independent;
pub mod initrd;
pub mod mutate;
pub mod slide;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use bootlink::fetch::{self, Fetched};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_bootlink")
}

/// The reference Debian kernel (linux-image-6.1.0-56-amd64 6.1.192-2), or
/// the newest 6.1 when that exact package can no longer be downloaded. The
/// tests say which one they got; a check of the reference's exact figures
/// asks [`reference`] first.
pub fn kernel() -> &'static Fetched {
    static K: OnceLock<Fetched> = OnceLock::new();
    K.get_or_init(|| {
        let f = fetch::fetch(&fetch::Request::Reference).expect("fetch the reference kernel");
        if !f.reference {
            eprintln!(
                "NOTE: testing {} {} instead of the reference package: its exact figures are skipped ({})",
                f.package,
                f.version,
                f.fallback.as_deref().unwrap_or("")
            );
        }
        f
    })
}

/// Whether `f` is the reference package, whose exact figures a test can
/// check; when it is not, the exact check is a counted skip named `test`
/// (never a looser check in its place).
pub fn reference(test: &str, f: &Fetched) -> bool {
    if !f.reference {
        skip(
            test,
            &format!(
                "exact figures are those of the reference package; {} {} was fetched instead ({})",
                f.package,
                f.version,
                f.fallback.as_deref().unwrap_or("the reference could not be downloaded")
            ),
        );
    }
    f.reference
}

pub fn module(rel: &str) -> PathBuf {
    kernel().modules.join("kernel").join(rel)
}

pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(bin());
    for a in args {
        c.arg(a);
    }
    c.env("BOOTLINK_QUIET", "1").output().expect("run bootlink")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh, empty directory unique to this test ([`tmpdir`]): removed when
/// the test passes, kept for a look when it fails (a panic is unwinding).
/// Derefs to its path.
#[derive(Debug)]
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl TestDir {
    /// Keep the directory beyond this scope (a helper that hands out paths
    /// inside it, or a directory shared by the tests of a binary): it is
    /// removed when the test binary exits, unless BOOTLINK_KEEP_TEST_DIRS
    /// is set (to look at a failed run's files).
    pub fn keep(self) -> PathBuf {
        let p = self.0.clone();
        std::mem::forget(self);
        if std::env::var_os("BOOTLINK_KEEP_TEST_DIRS").is_none() {
            remove_at_exit(p.clone());
        }
        p
    }
}

/// Directories removed when the process exits (statics are never dropped).
static AT_EXIT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

extern "C" fn remove_kept_dirs() {
    if let Ok(dirs) = AT_EXIT.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn remove_at_exit(dir: PathBuf) {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function with no arguments to run at exit.
    REGISTER.call_once(|| unsafe {
        libc::atexit(remove_kept_dirs);
    });
    AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()).push(dir);
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TestDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Wait until the stderr of `child`, written to the file `stderr`, says
/// `want` (a command waiting for a lock says why), and return it: fails
/// when `child` ends first (`what` names it) or after 120 s.
pub fn wait_for_stderr(child: &mut std::process::Child, stderr: &Path, want: &str, what: &str) -> String {
    let t0 = std::time::Instant::now();
    loop {
        let err = std::fs::read_to_string(stderr).unwrap_or_default();
        if err.contains(want) {
            return err;
        }
        assert!(child.try_wait().unwrap().is_none(), "{what} finished before saying {want:?}: {err}");
        assert!(t0.elapsed().as_secs() < 120, "{what}: no {want:?} in 120 s: {err}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A fresh, empty directory unique to this test (see [`TestDir`]).
pub fn tmpdir(name: &str) -> TestDir {
    let d = std::env::temp_dir().join(format!("bootlink-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TestDir(d)
}

pub fn copy_to(src: &Path, dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(src, &p).unwrap();
    p
}

/// Run a system tool; panics with its stderr if it fails.
pub fn sh(cmd: &str, args: &[&str]) -> Vec<u8> {
    let o = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// Every `initcall ... returned R after N usecs` line, read independently
/// of the parser: (function as printed, N).
pub fn printed_durations(log: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for line in log.lines() {
        let Some(i) = line.find("] initcall ") else { continue };
        let rest = &line[i + "] initcall ".len()..];
        let Some((func, tail)) = rest.split_once(" returned ") else { continue };
        let words: Vec<&str> = tail.split_whitespace().collect();
        if words.len() == 4 && words[1] == "after" && words[3] == "usecs" {
            out.push((func.to_string(), words[2].parse().unwrap()));
        }
    }
    out
}

/// A test that cannot run here says why and is counted: the line goes to
/// stdout and to the file `$BOOTLINK_SKIP_LOG` (scripts/run-tests counts
/// those lines per tier). When `CI` is set a skip is a failure: CI installs
/// everything the tests need, so a missing prerequisite there is a bug.
/// Print `text` and keep it for the end of `make test`
/// (`$BOOTLINK_REPORT_LOG`): the matrices and tables a test measured.
pub fn report(test: &str, text: &str) {
    println!("{text}");
    if let Some(log) = std::env::var_os("BOOTLINK_REPORT_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = writeln!(f, "--- {test}\n{}", text.trim_end());
        }
    }
}

/// Each variant's kernel (its config) and KASLR state in the lab runs
/// `runs` (LABEL, run directory), read from their run.json by the line the
/// docs' boot tables print (scripts/doc_output.py boot-line): what a test
/// whose figures a docs region quotes reports beside them.
pub fn boot_line(runs: &[(&str, &Path)]) -> String {
    let mut c = Command::new("python3");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/doc_output.py")).arg("boot-line");
    for (label, dir) in runs {
        c.arg(format!("{label}={}", dir.join("run.json").display()));
    }
    let o = c.output().expect("python3 runs scripts/doc_output.py");
    assert!(o.status.success(), "scripts/doc_output.py boot-line: {}", String::from_utf8_lossy(&o.stderr));
    let line = String::from_utf8(o.stdout).unwrap();
    assert!(line.starts_with("Kernel and KASLR "), "{line}");
    line.trim_end().to_string()
}

/// Run bootlink with `args` and wait for it with wait4: its own CPU
/// seconds and peak resident memory (KiB), not those of the other tests'
/// children (getrusage's RUSAGE_CHILDREN counts every child of the
/// process, and the tests of a file run in parallel). Started through
/// [`launcher`], not by this process: a process's peak memory counts what
/// it was before its exec, and a child spawned here (vfork, or a fork's
/// copy of this process's pages) started with this test process's peak,
/// tens of MiB that hid the command's own (the larger input's run
/// measured as much as the smaller's).
pub fn measured(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (f64, i64) {
    let (cost, code) = measured_status(args);
    assert_eq!(code, 0, "bootlink {args:?}: exit {code}", args = args.iter().map(|a| a.as_ref()).collect::<Vec<_>>());
    cost
}

/// [`measured`] of a run that may fail: its cost and exit status (a
/// death by a signal fails the test).
pub fn measured_status(args: &[&dyn AsRef<std::ffi::OsStr>]) -> ((f64, i64), i32) {
    measured_status_env(args, &[])
}

/// [`measured`] with these variables set in the command's environment
/// (a cache of the test's own: `BOOTLINK_CACHE`).
pub fn measured_env(args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, &Path)]) -> (f64, i64) {
    let (cost, code) = measured_status_env(args, env);
    assert_eq!(code, 0, "bootlink {args:?}: exit {code}", args = args.iter().map(|a| a.as_ref()).collect::<Vec<_>>());
    cost
}

/// A small C program, built once by gcc: `launcher OUT PROGRAM ARGS...`
/// forks, execs PROGRAM and waits for it with wait4, and writes to OUT its
/// user and system CPU seconds, its peak resident memory (KiB) and its
/// wait status. Its own few pages are all the child starts with.
fn launcher() -> &'static Path {
    static L: OnceLock<PathBuf> = OnceLock::new();
    L.get_or_init(|| {
        let dir = tmpdir("measure-launcher").keep();
        let src = dir.join("launcher.c");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    pid_t pid = fork();
    if (pid < 0)
        return 3;
    if (pid == 0) {
        execv(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    struct rusage u;
    if (wait4(pid, &status, 0, &u) != pid)
        return 4;
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 5;
    fprintf(f, "%ld.%06ld %ld.%06ld %ld %d\n", (long)u.ru_utime.tv_sec, (long)u.ru_utime.tv_usec,
            (long)u.ru_stime.tv_sec, (long)u.ru_stime.tv_usec, u.ru_maxrss, status);
    return fclose(f) == 0 ? 0 : 6;
}
"#,
        )
        .unwrap();
        let exe = dir.join("launcher");
        let o = Command::new("gcc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("run gcc (the tests' cost launcher)");
        assert!(o.status.success(), "building the cost launcher: {}", String::from_utf8_lossy(&o.stderr));
        exe
    })
}

/// [`measured_status`] with these variables set in the command's environment.
pub fn measured_status_env(args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, &Path)]) -> ((f64, i64), i32) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = launcher().with_file_name(format!("cost-{n}"));
    let mut cmd = Command::new(launcher());
    cmd.arg(&out).arg(bin());
    for a in args {
        cmd.arg(a);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd
        .env("BOOTLINK_QUIET", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run bootlink through the cost launcher");
    let shown = || cmd.get_args().skip(1).collect::<Vec<_>>();
    assert!(status.success(), "the cost launcher of {:?}: {status}", shown());
    let text = std::fs::read_to_string(&out).expect("the cost launcher's report");
    let _ = std::fs::remove_file(&out);
    let f: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(f.len(), 4, "the cost launcher's report: {text:?}");
    let (user, sys): (f64, f64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
    let (maxrss, status): (i64, libc::c_int) = (f[2].parse().unwrap(), f[3].parse().unwrap());
    assert!(libc::WIFEXITED(status), "bootlink {:?}: status {status:#x}", shown());
    ((user + sys, maxrss), libc::WEXITSTATUS(status))
}

/// The process's own cost, measured once per test binary: bootlink's CPU
/// seconds and peak memory (KiB) for `bootlink --version` (the binary
/// loaded, its arguments parsed, no input read), the least of 7 runs
/// through the same [`launcher`] as every measured command. The scale
/// checks hold only what a command costs beyond this to the ratio: a
/// command whose input costs a few ms beside a start-up of about as much
/// would otherwise hide quadratic work in the start-up's share.
pub fn start_up() -> (f64, i64) {
    static S: OnceLock<(f64, i64)> = OnceLock::new();
    *S.get_or_init(|| {
        let runs: Vec<(f64, i64)> = (0..7).map(|_| measured(&[&"--version"])).collect();
        let cpu = runs.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        let mem = runs.iter().map(|r| r.1).min().unwrap();
        (cpu, mem)
    })
}

/// The least CPU time the input's part of a command's cost (its cost
/// beyond [`start_up`]) may take at the smaller size of a scale check:
/// 25 ms. Below it the ratio would be mostly noise: the start-up measured
/// here is about 2 ms and varies by a few tenths of a ms run to run (its
/// first run by 1 ms), and on a shared machine a run's CPU time moves by
/// a few ms with the caches and the scheduler; at 25 ms that noise is
/// under a tenth of the part measured. A check whose smaller size costs less in
/// one run sums runs ([`ScaleRuns`]); one that still costs less fails,
/// saying so: it never passes on a check it cannot make.
pub const SCALE_FLOOR_CPU_S: f64 = 0.025;

/// The least peak memory (KiB) the input's part (peak memory beyond
/// [`start_up`]'s) may take at the smaller size: 1 MiB. The allocator's
/// arenas and the pages of the binary touched vary by a few hundred KiB
/// run to run; every command measured here holds 2 MiB or more of its
/// input at its smaller size. A command below it fails like one below
/// [`SCALE_FLOOR_CPU_S`].
pub const SCALE_FLOOR_MEM_KIB: i64 = 1024;

/// The verdict of a scale check on costs already measured (CPU seconds,
/// peak KiB): `start` the process's own ([`start_up`]), `small` and
/// `large` a command's on an input and on one 8 times as large. The
/// input's part of each (its cost beyond `start`) is held to less than
/// `cpu_limit` times the smaller's CPU time and 16 times its memory, the
/// smaller's CPU part at least [`SCALE_FLOOR_CPU_S`]. With linear work
/// the ratio is 8; with work quadratic in the input it is 64; with a mix,
/// linear work L and quadratic work q at the smaller size, (8 L + 64 q) /
/// (L + q) reaches 16 once q is a sixth of L. The report line, or why not.
pub fn scale_verdict(
    what: &str,
    start: (f64, i64),
    small: (f64, i64),
    large: (f64, i64),
    cpu_limit: f64,
) -> Result<String, String> {
    let (a, b) = (small.0 - start.0, large.0 - start.0);
    let (ma, mb) = (small.1 - start.1, large.1 - start.1);
    let costs = format!(
        "{:.3} -> {:.3} s CPU, {} -> {} KiB peak; start-up {:.3} s, {} KiB",
        small.0, large.0, small.1, large.1, start.0, start.1
    );
    let ratio = cpu_verdict(what, a, b, cpu_limit, &costs)?;
    if ma < SCALE_FLOOR_MEM_KIB {
        return Err(format!(
            "{what}: the input's part of the peak memory at the smaller size is {ma} KiB ({costs}), below the \
             floor of {SCALE_FLOOR_MEM_KIB} KiB: grow the input"
        ));
    }
    let mem = mb as f64 / ma as f64;
    if mem >= 16.0 {
        return Err(format!(
            "{what}: {mem:.1} x the input's peak memory for 8 x the input ({costs}): more than linear"
        ));
    }
    Ok(format!(
        "{what}: 8 x the input: {ratio:.1} x the input's CPU time ({:.3} -> {:.3} s beyond a start-up of {:.3} s), \
         {mem:.1} x its peak memory ({} -> {} MiB beyond {} MiB)",
        a,
        b,
        start.0,
        ma >> 10,
        mb >> 10,
        start.1 >> 10
    ))
}

/// The most runs of a command [`ScaleRuns`] sums at one size.
pub const SCALE_MAX_RUNS: u32 = 64;

/// Repeated runs for the commands of a scale check whose input's part at
/// the smaller size is below [`SCALE_FLOOR_CPU_S`] in one run (a few ms
/// for the cheapest reads of a vmlinux, a DDLink cache or an order trace,
/// whose inputs could be made large enough only at minutes of generation
/// in tier 1): the first time command `i` is measured (the smaller size),
/// it is run until its input's parts summed are half again the floor (at
/// most [`SCALE_MAX_RUNS`] times); at the larger size it is run as many
/// times. Summing runs makes the measurement as precise
/// as one run of that CPU time (the start-up's and the scheduler's noise
/// shrink beside it); it does not make quadratic work a larger share of a
/// run, which at these sizes it already would be: a scan of the whole
/// input per item costs a nanosecond or more a pair, and fails the check
/// once the input has more items than the linear work's cost per item in
/// ns over 6 (tens of items here; these inputs hold thousands).
#[derive(Default)]
pub struct ScaleRuns(Vec<u32>);

impl ScaleRuns {
    /// The cost of command `i` at this size: the runs summed, as if one
    /// process had done their work: their CPU time less the start-up of
    /// all but one ([`linear_in_the_input`] takes that one off), the
    /// largest peak memory. `run` measures one run ([`measured`]) and
    /// prepares its outputs itself (a command that writes in place gets a
    /// fresh copy each time).
    pub fn cost(&mut self, i: usize, mut run: impl FnMut() -> (f64, i64)) -> (f64, i64) {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        let s = start_up().0;
        let (mut cpu, mut mem) = run();
        let mut k = 1;
        // At the smaller size: until the parts summed are half again the
        // floor; at the larger: as many runs.
        let more = |k: u32, cpu: f64, fixed: u32| {
            if fixed > 0 { k < fixed } else { k < SCALE_MAX_RUNS && cpu - s < 1.5 * SCALE_FLOOR_CPU_S }
        };
        while more(k, cpu, self.0[i]) {
            let c = run();
            cpu += c.0 - s;
            mem = mem.max(c.1);
            k += 1;
        }
        self.0[i] = k;
        (cpu, mem)
    }

    /// [`ScaleRuns::cost`] of command `i` at both sizes at once, their
    /// runs alternated (one on the smaller input, one on the larger, until
    /// the smaller's parts summed are half again the floor): a change in
    /// the machine's load then weighs on both sizes alike, where runs of
    /// the larger size after all of the smaller's may meet another load
    /// (one run of `order report` failed that way under a load of about
    /// 4.5 on 2 CPUs). For a test whose two inputs can be made first.
    pub fn interleaved(
        &mut self,
        i: usize,
        mut small: impl FnMut() -> (f64, i64),
        mut large: impl FnMut() -> (f64, i64),
    ) -> [(f64, i64); 2] {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        let s = start_up().0;
        let (mut a, mut b) = (small(), large());
        let mut k = 1;
        while k < SCALE_MAX_RUNS && a.0 - s < 1.5 * SCALE_FLOOR_CPU_S {
            let (x, y) = (small(), large());
            a = (a.0 + x.0 - s, a.1.max(x.1));
            b = (b.0 + y.0 - s, b.1.max(y.1));
            k += 1;
        }
        self.0[i] = k;
        [a, b]
    }

    /// `label` with how many runs command `i`'s costs sum, when more than one.
    pub fn label(&self, i: usize, label: &str) -> String {
        match self.0.get(i) {
            Some(&k) if k > 1 => format!("{label} ({k} runs at each size)"),
            _ => label.to_string(),
        }
    }
}

/// The CPU part of [`scale_verdict`]: the input's part `a` at the smaller
/// size at least the floor, `b / a` under `cpu_limit`; the ratio.
fn cpu_verdict(what: &str, a: f64, b: f64, cpu_limit: f64, costs: &str) -> Result<f64, String> {
    if a < SCALE_FLOOR_CPU_S {
        return Err(format!(
            "{what}: the input's part of the CPU time at the smaller size is {:.1} ms ({costs}), below the \
             floor of {:.0} ms where quadratic work would show: grow the input (or sum runs: common::ScaleRuns)",
            a * 1e3,
            SCALE_FLOOR_CPU_S * 1e3
        ));
    }
    let ratio = b / a;
    if ratio >= cpu_limit {
        return Err(format!(
            "{what}: {ratio:.1} x the input's CPU time for 8 x the input ({costs}): more than linear \
             (bound {cpu_limit} x)"
        ));
    }
    Ok(ratio)
}

/// The user CPU seconds this thread has used (getrusage RUSAGE_THREAD):
/// what a scale check of work done inside the test process measures (the
/// other tests of the file run in threads of their own beside it; wall
/// time counts them and the machine's load). Its system time is left
/// out: the searches that use it allocate a fresh buffer for each
/// candidate stream, and the kernel's time faulting those pages in
/// depends on the machine's memory pressure (one search of 16 MiB of
/// gzip streams took 0.15 s in one run and 0.8 s in another beside the
/// other engineers' builds), not on the work bootlink does.
pub fn thread_cpu() -> f64 {
    // SAFETY: getrusage fills the rusage it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    assert_eq!(r, 0, "getrusage(RUSAGE_THREAD)");
    u.ru_utime.tv_sec as f64 + u.ru_utime.tv_usec as f64 * 1e-6
}

/// Runs of work done in this thread on an input and on one 8 times as
/// large, alternated (as [`ScaleRuns::interleaved`]) until the smaller's
/// CPU seconds summed are half again [`SCALE_FLOOR_CPU_S`] (at most
/// [`SCALE_MAX_RUNS`] each): `small` and `large` each do one run and
/// return its CPU seconds ([`thread_cpu`]). The two sums and the runs.
pub fn thread_runs(mut small: impl FnMut() -> f64, mut large: impl FnMut() -> f64) -> (f64, f64, u32) {
    let (mut a, mut b, mut k) = (small(), large(), 1);
    while k < SCALE_MAX_RUNS && a < 1.5 * SCALE_FLOOR_CPU_S {
        a += small();
        b += large();
        k += 1;
    }
    (a, b, k)
}

/// The verdict of a scale check of work done in this thread (no process
/// started, so no start-up to take off): `small` and `large` its CPU
/// seconds ([`thread_cpu`]) on an input and on one 8 times as large,
/// held like a command's CPU time by [`scale_verdict`] (the smaller at
/// least [`SCALE_FLOOR_CPU_S`], the larger under 16 times it).
pub fn thread_scale_verdict(what: &str, small: f64, large: f64) -> Result<String, String> {
    let costs = format!("{small:.3} -> {large:.3} s of this thread's user CPU time");
    let ratio = cpu_verdict(what, small, large, 16.0, &costs)?;
    Ok(format!("{what}: 8 x the input: {ratio:.1} x the CPU time ({costs})"))
}

/// The cost of a command on an input and on one 8 times as large
/// (`measured`), held by [`scale_verdict`] beside the process's own
/// [`start_up`]: the input's part may take less than 16 times the CPU
/// time and peak memory at the larger size (twice linear, for a loaded
/// machine; quadratic work takes 64 times) and must take at least
/// [`SCALE_FLOOR_CPU_S`] at the smaller. The report line, or the test
/// fails.
pub fn linear_in_the_input(what: &str, small: (f64, i64), large: (f64, i64)) -> String {
    linear_within(what, small, large, 16.0)
}

/// [`linear_in_the_input`] with another bound on the CPU time's ratio, for
/// work whose tables outgrow the processor's caches at the larger size
/// (still well below the 64 times of quadratic work).
pub fn linear_within(what: &str, small: (f64, i64), large: (f64, i64), cpu_limit: f64) -> String {
    scale_verdict(what, start_up(), small, large, cpu_limit).unwrap_or_else(|e| panic!("{e}"))
}

/// Each command's cost at the input's size and at 8 times it (`costs[0]`
/// and `costs[1]`, one entry a command in `labels`' order), each held to
/// [`linear_in_the_input`]: the report's lines, one a command.
pub fn each_linear<L: AsRef<str>>(labels: impl IntoIterator<Item = L>, costs: &[Vec<(f64, i64)>]) -> String {
    assert_eq!(costs.len(), 2, "a cost at the input's size and at 8 times it");
    let labels: Vec<L> = labels.into_iter().collect();
    assert!(
        costs.iter().all(|c| c.len() == labels.len()),
        "one cost a command at each size: {} commands, {} and {} costs",
        labels.len(),
        costs[0].len(),
        costs[1].len()
    );
    let lines: Vec<String> =
        labels.iter().enumerate().map(|(k, l)| linear_in_the_input(l.as_ref(), costs[0][k], costs[1][k])).collect();
    lines.join("\n")
}

/// Can `bootlink system` build and boot its Debian image here (mmdebstrap,
/// mkfs.ext4, QEMU, root for mmdebstrap's chroot)? A counted skip naming
/// what is missing otherwise.
pub fn can_boot_system(test: &str) -> bool {
    for (tool, pkg) in
        [("mmdebstrap", "mmdebstrap"), ("mkfs.ext4", "e2fsprogs"), ("qemu-system-x86_64", "qemu-system-x86")]
    {
        if !bootlink::hosttool::exists(tool) {
            skip(test, &format!("{tool} not installed (apt-get install {pkg}; scripts/install-deps)"));
            return false;
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "building the image needs root (mmdebstrap's root mode, dpkg in a chroot)");
        return false;
    }
    true
}

pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIP: {test}: {reason}");
    println!("{line}");
    if let Some(log) = std::env::var_os("BOOTLINK_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = writeln!(f, "{line}");
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("{line} (a skip fails under CI)");
    }
}

/// A bootlink command whose failure report holds everything needed to see
/// why: the command line, its working directory, exit status, stdout,
/// stderr and the files of the directories it was pointed at.
pub struct TestCommand {
    cmd: Command,
    cwd: PathBuf,
    dirs: Vec<PathBuf>,
}

impl TestCommand {
    pub fn new(args: &[&dyn AsRef<std::ffi::OsStr>]) -> TestCommand {
        let mut cmd = Command::new(bin());
        for a in args {
            cmd.arg(a);
        }
        cmd.env("BOOTLINK_QUIET", "1");
        TestCommand { cmd, cwd: std::env::current_dir().unwrap(), dirs: Vec::new() }
    }

    /// Add an argument.
    pub fn arg(mut self, a: &dyn AsRef<std::ffi::OsStr>) -> TestCommand {
        self.cmd.arg(a);
        self
    }

    /// Set an environment variable for the command.
    pub fn env(mut self, key: &str, value: &str) -> TestCommand {
        self.cmd.env(key, value);
        self
    }

    /// Run in `dir`.
    pub fn current_dir(mut self, dir: &Path) -> TestCommand {
        self.cmd.current_dir(dir);
        self.cwd = dir.to_path_buf();
        self
    }

    /// List this directory's files in a failure report.
    pub fn show_dir(mut self, dir: &Path) -> TestCommand {
        self.dirs.push(dir.to_path_buf());
        self
    }

    fn report(&self, o: &Output, what: &str) -> String {
        let mut s = format!(
            "{what}\ncommand: {:?}\ncwd: {}\nstatus: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.cmd,
            self.cwd.display(),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        for d in &self.dirs {
            s.push_str(&format!("--- files under {}\n", d.display()));
            let mut stack = vec![d.clone()];
            while let Some(p) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&p) else { continue };
                for e in rd.flatten() {
                    let path = e.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else {
                        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                        s.push_str(&format!("{} ({len} bytes)\n", path.display()));
                    }
                }
            }
        }
        s
    }

    /// Run and return the output, whatever the exit status.
    pub fn cmd_output(mut self) -> Output {
        self.cmd.output().expect("run bootlink")
    }

    /// Run; panic with the full report unless it exits 0.
    pub fn ok(mut self) -> Output {
        let o = self.cmd.output().expect("run bootlink");
        if !o.status.success() {
            panic!("{}", self.report(&o, "bootlink failed"));
        }
        o
    }

    /// Run; panic with the full report unless it fails with `want` in stderr.
    pub fn fails_with(mut self, want: &str) -> String {
        let o = self.cmd.output().expect("run bootlink");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        if o.status.success() || !err.contains(want) {
            panic!("{}", self.report(&o, &format!("expected a failure saying {want:?}")));
        }
        err
    }
}

/// A kernel directory for the lab beside `dest`: every file of the build
/// directory `build` linked, its `lib/modules/<release>` copied (so tests
/// can change modules). Returns the directory and the modules tree.
pub fn kernel_copy(build: &Path, release: &str, dest: &Path) -> (PathBuf, PathBuf) {
    let kdir = dest.join("kernel");
    let mods = kdir.join("lib/modules").join(release);
    std::fs::create_dir_all(kdir.join("lib/modules")).unwrap();
    for e in std::fs::read_dir(build).unwrap().flatten() {
        if e.file_name() != "lib" {
            std::os::unix::fs::symlink(e.path(), kdir.join(e.file_name())).unwrap();
        }
    }
    sh("cp", &["-a", build.join("lib/modules").join(release).to_str().unwrap(), mods.to_str().unwrap()]);
    (kdir, mods)
}

/// `make -C tests/modules finalize` (bl_unwind, bl_weak) against the
/// kernel tree `kdir` (Debian's 6.1 headers when None), into `out`.
pub fn finalize_test_modules(kdir: Option<&Path>, out: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules");
    let mut args = vec!["-s".to_string(), "-C".into(), src.display().to_string(), "finalize".into()];
    if let Some(k) = kdir {
        args.push(format!("KDIR={}", k.display()));
    }
    args.push(format!("O={}", out.display()));
    sh("make", &args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// Each of `wants` is said exactly once in the kernel log, and nothing oopsed.
pub fn said_once(log: &str, wants: &[&str]) {
    for want in wants {
        assert_eq!(log.matches(want).count(), 1, "want once in dmesg: {want}\n{log}");
    }
    assert!(!log.contains("Oops") && !log.contains("BUG:"), "{log}");
}

/// The self-built lab kernel (`bootlink kernel build`), with its object
/// tree made current when `tree` (to build external modules against it).
pub struct SelfBuilt {
    pub dir: PathBuf,
    pub release: String,
    pub tree: PathBuf,
}

/// The kernel line the self-built kernel's tests run on: 6.1, or what
/// BOOTLINK_TEST_LINE names (`make test-extended` runs them again on 6.12).
pub fn line() -> &'static str {
    static L: OnceLock<String> = OnceLock::new();
    L.get_or_init(|| {
        let l = std::env::var("BOOTLINK_TEST_LINE").unwrap_or_else(|_| "6.1".into());
        assert!(l == "6.1" || l == "6.12", "BOOTLINK_TEST_LINE={l}: give 6.1 or 6.12");
        l
    })
}

/// The lab's name for that line's self-built kernel (`kernel:build`, `kernel:build-6.12`).
pub fn build_kernel() -> &'static str {
    if line() == "6.1" { "kernel:build" } else { "kernel:build-6.12" }
}

pub fn self_built(tree: bool) -> SelfBuilt {
    let line = line();
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"kernel", &"build", &"--lab", &"--line", &line, &"--json"];
    if tree {
        args.push(&"--tree");
    }
    let o = TestCommand::new(&args).ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    SelfBuilt {
        dir: v["dir"].as_str().unwrap().into(),
        release: v["release"].as_str().unwrap().into(),
        tree: v["tree"].as_str().unwrap_or_default().into(),
    }
}

/// The format the line's lab kernel decompresses modules in (its
/// `modules-FORMAT` flavour): xz on 6.1 (gzip or xz there), zstd on 6.12.
pub fn module_decompress_format() -> &'static str {
    if line() == "6.1" { "xz" } else { "zstd" }
}

/// `bootlink lab --no-trace --realtime -o out ARGS`: for correctness only
/// (host time is faster than -icount); its run.json.
pub fn lab_realtime(args: &[&dyn AsRef<std::ffi::OsStr>], out: &Path) -> bootlink_lab::run::results::Run {
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"lab", &"--no-trace", &"--realtime", &"-o", &out];
    all.extend_from_slice(args);
    let t0 = std::time::Instant::now();
    TestCommand::new(&all).show_dir(out).ok();
    println!("bootlink lab: {:.0} s wall", t0.elapsed().as_secs_f64());
    let run: bootlink_lab::run::results::Run =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    // A boot booted again after a hang before /init: where its vCPUs were.
    for v in &run.variants {
        for r in &v.repetitions {
            if let Some(why) = &r.booted_again {
                println!("{} #{}: booted again: {why}", v.name, r.index + 1);
            }
        }
    }
    run
}

/// `bootlink lab --set none` on the self-built kernel with one `--variant`,
/// into `dir` (traced unless the caller adds `--no-trace`).
pub fn lab_without_modules(variant: &str, dir: &Path) -> TestCommand {
    let k = self_built(false);
    let vmlinux = k.dir.join("vmlinux");
    let modules = k.dir.join("lib/modules").join(&k.release);
    TestCommand::new(&[
        &"lab",
        &"--set",
        &"none",
        &"--kernel",
        &vmlinux,
        &"--modules",
        &modules,
        &"--variant",
        &variant,
        &"-o",
        &dir,
    ])
}

/// One untraced, deterministic boot of the self-built kernel with no
/// modules (`--set none`) and one `--variant`, into a fresh run directory:
/// (run directory, bootlink's output, run.json).
pub fn boot_without_modules(label: &str, variant: &str) -> (PathBuf, Output, bootlink_lab::run::results::Run) {
    let dir = tmpdir(label).keep().join("run");
    let t0 = std::time::Instant::now();
    let out = lab_without_modules(variant, &dir).arg(&"--no-trace").cmd_output();
    println!("bootlink lab: {:.0} s wall", t0.elapsed().as_secs_f64());
    let run: bootlink_lab::run::results::Run = serde_json::from_slice(
        &std::fs::read(dir.join("run.json"))
            .unwrap_or_else(|e| panic!("no run.json ({e}); stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out))),
    )
    .expect("run.json parses");
    (dir, out, run)
}

/// A fresh RSA key and self-signed certificate (PEM) in `dir`.
pub fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (key, cert) = (dir.join(format!("{name}.key")), dir.join(format!("{name}.crt")));
    sh(
        "openssl",
        &[
            "req",
            "-new",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN=bootlink test {name}/"),
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ],
    );
    (key, cert)
}

/// `bootlink lab ARGS` whose run directory is `out`, read whether or not
/// the lab's checks passed (a refused module fails them by design): the
/// run and the command's output. Panics, quoting the output, without a
/// run.json.
pub fn lab_run_either_way(
    args: &[&dyn AsRef<std::ffi::OsStr>],
    out: &Path,
) -> (bootlink_lab::run::results::Run, Output) {
    let o = TestCommand::new(args).cmd_output();
    let bytes = std::fs::read(out.join("run.json"))
        .unwrap_or_else(|e| panic!("no run.json ({e}):\n{}\n{}", stdout(&o), stderr(&o)));
    (serde_json::from_slice(&bytes).unwrap(), o)
}

/// Every file below `dir` (walked recursively, links not followed) whose
/// path `keep` accepts, by its path below `dir`.
pub fn files_below(dir: &Path, keep: impl Fn(&Path) -> bool) -> std::collections::BTreeMap<String, PathBuf> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if keep(&p) {
                out.insert(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), p);
            }
        }
    }
    out
}

/// The SHA-256 (hex) of a file.
pub fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).iter().map(|b| format!("{b:02x}")).collect()
}

/// [`files_below`], each file by its SHA-256.
pub fn digests_below(dir: &Path, keep: impl Fn(&Path) -> bool) -> std::collections::BTreeMap<String, String> {
    files_below(dir, keep).into_iter().map(|(r, p)| (r, sha256_hex(&p))).collect()
}

/// Is this the file of a kernel module (`.ko`, compressed or not)?
pub fn is_module(p: &Path) -> bool {
    p.to_string_lossy().contains(".ko")
}

/// bootlink's cache directory (`$BOOTLINK_CACHE`, else the XDG one).
pub fn cache() -> PathBuf {
    match std::env::var_os("BOOTLINK_CACHE") {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(d) => PathBuf::from(d).join("bootlink"),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".cache/bootlink"),
        },
    }
}

/// A Python with these PyPI packages: the cache's venv, made and filled
/// with pip when needed. Returns its python, or why there is none.
pub fn venv_with(packages: &[&str], probe: &str) -> Result<PathBuf, String> {
    let venv = cache().join("venv");
    let py = venv.join("bin/python");
    let ok = |py: &Path| Command::new(py).args(["-c", probe]).output().is_ok_and(|o| o.status.success());
    if ok(&py) {
        return Ok(py);
    }
    if !py.is_file() {
        let o =
            Command::new("python3").arg("-m").arg("venv").arg(&venv).output().map_err(|e| format!("python3: {e}"))?;
        if !o.status.success() {
            return Err(format!("python3 -m venv failed (apt-get install python3-venv): {}", stderr(&o).trim()));
        }
    }
    let o = Command::new(&py).args(["-m", "pip", "install", "-q"]).args(packages).output().unwrap();
    if !o.status.success() {
        return Err(format!("pip install {packages:?} failed: {}", stderr(&o).trim()));
    }
    if ok(&py) { Ok(py) } else { Err(format!("{packages:?} installed, yet `{probe}` fails")) }
}

/// Debian's modules of the directories `subs` (below kernel/), installed
/// into `rel` (.../lib/modules/VERSION) as modules_install leaves them,
/// with the index files depmod and mkinitramfs read; depmod not run.
pub fn install_modules(rel: &Path, subs: &[&str]) {
    let k = kernel();
    for sub in subs {
        let to = rel.join(sub);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        sh("cp", &["-a", k.modules.join(sub).to_str().unwrap(), to.to_str().unwrap()]);
    }
    for f in ["modules.order", "modules.builtin", "modules.builtin.modinfo"] {
        if k.modules.join(f).is_file() {
            std::fs::copy(k.modules.join(f), rel.join(f)).unwrap();
        }
    }
}

/// `bootlink apply`'s record in a release directory (lib/modules/VERSION):
/// each module's path below it and the SHA-256 apply wrote it with.
pub fn record_in(dir: &Path) -> std::collections::BTreeMap<String, String> {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("bootlink-applied.json")).unwrap()).unwrap();
    v["modules"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect()
}

/// Debian's kernel of the tested line as a lab `kernel:` value.
pub fn debian_kernel() -> &'static str {
    if line() == "6.1" { "kernel:debian" } else { "kernel:debian-6.12" }
}

/// Debian's kernel of the tested line, fetched (the reference package on 6.1).
pub fn debian_of_line() -> &'static Fetched {
    static K: OnceLock<Fetched> = OnceLock::new();
    if line() == "6.1" {
        return kernel();
    }
    K.get_or_init(|| fetch::fetch(&fetch::Request::Series(line().into())).expect("fetch Debian's kernel of the line"))
}

/// The 194-set as a lab run on `trees` (the run's kernels' module trees)
/// must have loaded it, checked against the run's set label: on trees
/// that all have every module of the set, exactly the set and a plain
/// label; else the label's count is the run's, every module of the set the run lacks
/// is named in the label's "without" list and is not a module of some
/// tree (or needs one that is not), and every module the run adds is named
/// in its "with" list and is a dependency of a set module in some tree.
/// Returns the run's module names (first variant), checked equal in every
/// variant.
pub fn check_194_set_run(run: &bootlink_lab::run::results::Run, trees: &[&bootlink::kmod::ModTree]) -> Vec<String> {
    use std::collections::BTreeSet;
    let norm = bootlink::kmod::normalize;
    let set: Vec<String> = bootlink::kmod::named_set_paths("fs-nls-crypto-net-194")
        .unwrap()
        .iter()
        .map(|p| norm(p.file_name().unwrap().to_string_lossy().split(".ko").next().unwrap()))
        .collect();
    let names = |v: &bootlink_lab::run::results::Variant| -> BTreeSet<String> {
        v.repetitions[0].modules.iter().map(|m| m.name.clone()).collect()
    };
    let first = names(&run.variants[0]);
    for v in &run.variants {
        assert_eq!(v.repetitions[0].modules.len(), first.len(), "{}: one module set in every column", v.name);
        assert_eq!(names(v), first, "{}: the same modules by name in every column", v.name);
    }
    let everywhere = |n: &str| trees.iter().all(|t| t.module(n).is_some());
    if set.iter().all(|n| everywhere(n)) {
        assert_eq!(first.len(), 194, "{}", run.module_set);
        assert_eq!(run.module_set, "fs-nls-crypto-net-194");
        return first.into_iter().collect();
    }
    let label = &run.module_set;
    let count: usize = label
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no module count in the set's label {label:?}"));
    assert_eq!(count, first.len(), "{label}");
    let listed = |key: &str| -> Vec<String> {
        label
            .split(key)
            .nth(1)
            .and_then(|s| s.split(" (").next())
            .map(|s| s.split(", ").map(String::from).collect())
            .unwrap_or_default()
    };
    let (without, with) = (listed("without "), listed("with "));
    for n in set.iter().filter(|n| !first.contains(*n)) {
        assert!(without.contains(n), "{n}: in the set, not in the run, not said in {label:?}");
        let needs_missing = trees
            .iter()
            .any(|t| t.resolve(&[n.as_str()]).map(|p| p.names().iter().any(|d| !everywhere(d))).unwrap_or(true));
        assert!(!everywhere(n) || needs_missing, "{n}: left out though every kernel has it and its needs");
    }
    for n in first.iter().filter(|n| !set.contains(*n)) {
        assert!(with.contains(n), "{n}: in the run, not in the set, not said in {label:?}");
        let needed = trees
            .iter()
            .any(|t| set.iter().any(|s| t.resolve(&[s.as_str()]).is_ok_and(|p| p.names().iter().any(|d| d == n))));
        assert!(needed, "{n}: added but no set module needs it");
    }
    first.into_iter().collect()
}

/// A storm's requests that neither loaded nor met the module already
/// there (EEXIST): the storm tests expect none.
pub fn storm_failures(s: &bootlink_lab::run::results::Storm) -> u64 {
    s.results.iter().filter(|(k, _)| k != "loaded" && k != "File exists").map(|(_, c)| c).sum()
}

/// `bootlink lab` on an arm64 guest with four vCPUs on host time, one
/// boot a variant: what a storm needs (concurrent requests).
pub const ARM64_STORM_LAB: &[&str] = &["lab", "--arch", "arm64", "--realtime", "--smp", "4", "-n", "1"];

/// A run's variant by name (the test fails naming it when the run has none).
/// A `lab` run of `modules` with one variant, `spec`, that must fail
/// loudly (the lab stops at a variant that did not load the set):
/// stdout and stderr together, and the run it left.
pub fn failing_lab(label: &str, modules: &[&str], spec: &str) -> (String, bootlink_lab::run::results::Run) {
    let dir = tmpdir(label).keep().join("run");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"lab", &"--no-trace", &"-n", &"1"];
    for m in modules {
        args.push(m);
    }
    args.extend([&"--variant" as &dyn AsRef<std::ffi::OsStr>, &spec, &"-o", &dir]);
    let (run, o) = lab_run_either_way(&args, &dir);
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!o.status.success(), "{out}");
    (out, run)
}

/// The loader's report in a variant's first repetition.
pub fn loader_of(v: &bootlink_lab::run::results::Variant) -> &bootlink_lab::run::results::LoaderResult {
    v.repetitions[0]
        .workloads
        .iter()
        .find_map(|w| match w {
            bootlink_lab::run::results::WorkloadResult::Loader(l) => Some(l),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{}: no loader result", v.name))
}

pub fn variant<'a>(run: &'a bootlink_lab::run::results::Run, name: &str) -> &'a bootlink_lab::run::results::Variant {
    run.variants.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no variant {name}"))
}

/// `bootlink lab HEAD... --variant V... -o DIR` into a fresh run directory
/// named after `label`, which must succeed: the directory and its run.json.
pub fn lab_variants<V: AsRef<str>>(
    label: &str,
    head: &[&str],
    variants: &[V],
) -> (PathBuf, bootlink_lab::run::results::Run) {
    let dir = tmpdir(label).keep().join("run");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"lab"];
    for h in head {
        args.push(h);
    }
    let variants: Vec<&str> = variants.iter().map(|v| v.as_ref()).collect();
    for v in &variants {
        args.push(&"--variant");
        args.push(v);
    }
    args.push(&"-o");
    args.push(&dir);
    let t0 = std::time::Instant::now();
    TestCommand::new(&args).show_dir(&dir).ok();
    println!("bootlink lab: {:.0} s wall", t0.elapsed().as_secs_f64());
    let run = serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    (dir, run)
}

/// A test's name as its binary's harness knows it (what `--exact` takes):
/// the caller's `module_path!()` less the crate's name (each tier's test
/// binary is a crate, its test files modules), then the function.
pub fn test_name(module_path: &str, function: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{function}"),
        None => function.to_string(),
    }
}

/// A tmpfs mounted for one test (as root), unmounted when dropped: a
/// real file system that fills up, for what a full disk does to a write.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mount a tmpfs of `bytes` (rounded up to pages) at `at` (made).
    pub fn mount(at: &Path, bytes: u64) -> Result<Tmpfs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("mounting a tmpfs needs root".into());
        }
        std::fs::create_dir_all(at).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0755"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !o.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
        }
        Ok(Tmpfs(at.to_path_buf()))
    }

    /// The bytes its files take (whole pages).
    pub fn used(&self) -> u64 {
        let c = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path and a zeroed struct to fill.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0, "statvfs {}", self.0.display());
        (s.f_blocks - s.f_bfree) * s.f_frsize
    }

    /// Shrink (or grow) it to `bytes`, its files kept: what is there plus
    /// a chosen room.
    pub fn resize(&self, bytes: u64) {
        sh("mount", &["-o", &format!("remount,size={bytes}"), self.0.to_str().unwrap()]);
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `data` through a compressor's own tool (`tool ARGS`, stdin to stdout),
/// as the kernel's build runs it.
pub fn through_tool(tool: &str, args: &[&str], data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new(tool)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool} (scripts/install-deps installs it): {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{tool} {args:?}");
    out.stdout
}
