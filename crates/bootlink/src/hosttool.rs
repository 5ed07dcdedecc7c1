//! Running host tools (apt-get, openssl, make, patch, qemu...): a missing
//! tool is reported with the Debian package that provides it, a failing one
//! with its last line of stderr.

use std::process::{Command, ExitStatus};

use crate::error::{Error, Kind, Result};

/// Why a host tool did not do its job. Every variant is a [`Kind::Tool`]
/// error once it becomes an [`Error`] (which keeps it as its source), so
/// callers can tell a tool that is not installed from one that failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolError {
    /// Not on the PATH: install `package`.
    #[error("{prog}: missing tool, needed for {what} (install the Debian package {package})")]
    Missing { prog: String, what: String, package: String, source: std::io::Error },
    /// Found but could not be started (permissions, a bad interpreter...).
    #[error("{prog}: cannot run it for {what}: {source}")]
    CannotRun { prog: String, what: String, source: std::io::Error },
    /// Ran and exited non-zero (or was killed); `stderr` is all it wrote.
    #[error("{what} failed ({prog} exited {status}): {}", last_line(.stderr))]
    Failed { prog: String, what: String, status: ExitStatus, stderr: String },
}

impl From<ToolError> for Error {
    fn from(e: ToolError) -> Error {
        Error::new(Kind::Tool, e.to_string()).because(e)
    }
}

/// The last line of stderr that says something (apt's "W:" warnings are
/// not the reason a command failed).
fn last_line(stderr: &str) -> &str {
    stderr.lines().map(str::trim).rfind(|l| !l.is_empty() && !l.starts_with("W:")).unwrap_or("")
}

/// Run a host tool to completion and return its stdout.
pub fn run(cmd: &mut Command, what: &str, package: &str) -> Result<String> {
    run_bytes(cmd, what, package).map(|out| String::from_utf8_lossy(&out).into_owned())
}

/// Run a host tool to completion and return its stdout's bytes.
pub fn run_bytes(cmd: &mut Command, what: &str, package: &str) -> Result<Vec<u8>> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().map_err(|e| spawn_error(&prog, what, package, e))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        return Err(ToolError::Failed { prog, what: what.to_string(), status: out.status, stderr }.into());
    }
    Ok(out.stdout)
}

/// The error for a tool that could not be started.
pub fn spawn_error(prog: &str, what: &str, package: &str, e: std::io::Error) -> Error {
    let (prog, what) = (prog.to_string(), what.to_string());
    match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::Missing { prog, what, package: package.to_string(), source: e },
        _ => ToolError::CannotRun { prog, what, source: e },
    }
    .into()
}

/// Is `prog` on the PATH?
pub fn exists(prog: &str) -> bool {
    find(prog).is_some()
}

/// Where `prog` is on the PATH (the first file of that name).
pub fn find(prog: &str) -> Option<std::path::PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|d| d.join(prog)).find(|p| p.is_file())
}

/// Make `cmd`'s process live no longer than the thread that starts it and
/// hold `lock` while it and its descendants run.
///
/// A build's make outlives a bootlink that is killed (SIGTERM from a test
/// harness, `kill`, a CI timeout: only a terminal's Ctrl-C reaches the
/// whole process group), and its compilers then go on writing into an
/// object tree the next build, which took the lock the dead bootlink
/// released, is writing into too. So the child gets SIGTERM when its
/// parent dies (GNU make passes SIGTERM on to its jobs and removes their
/// half-made targets), and the lock's open file is inherited (not closed
/// on exec): the lock is held until the last process that has it exits,
/// whoever started them.
pub(crate) fn tie_to_caller(cmd: &mut Command, lock: &std::fs::File) {
    stop_with_caller(cmd);
    hold_too(cmd, lock);
}

/// [`tie_to_caller`] holding every one of `locks` (a kernel build's: the
/// line's, the object tree's).
pub(crate) fn tie_to_caller_holding(cmd: &mut Command, locks: &[std::fs::File]) {
    stop_with_caller(cmd);
    for lock in locks {
        hold_too(cmd, lock);
    }
}

/// Make `cmd`'s process hold `lock` too (its open file inherited, not
/// closed on exec): for a build that holds more than one lock.
pub(crate) fn hold_too(cmd: &mut Command, lock: &std::fs::File) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = lock.as_raw_fd();
    // SAFETY: between fork and exec the closure calls only fcntl, which is
    // async-signal-safe, and touches no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Make `cmd`'s process get SIGTERM when the thread that starts it dies
/// (PR_SET_PDEATHSIG, kept across exec): a tool that would go on without
/// bootlink (mmdebstrap making a system image, make) stops with it.
pub fn stop_with_caller(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec the closure calls only prctl and
    // getppid, which are async-signal-safe, and touches no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the prctl: nothing would signal us.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tool error behind an Error (its source).
    fn tool_error(e: &Error) -> &ToolError {
        use std::error::Error as _;
        e.source().and_then(|s| s.downcast_ref::<ToolError>()).expect("a ToolError as the source")
    }

    #[test]
    fn missing_tool_names_the_package() {
        let err = run(&mut Command::new("bootlink-no-such-tool"), "testing", "some-package").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("bootlink-no-such-tool") && text.contains("some-package"), "{text}");
        assert_eq!(err.kind, Kind::Tool);
        match tool_error(&err) {
            ToolError::Missing { package, source, .. } => {
                assert_eq!((package.as_str(), source.kind()), ("some-package", std::io::ErrorKind::NotFound));
            }
            other => panic!("not Missing: {other:?}"),
        }
    }

    #[test]
    fn a_failing_tool_is_told_from_a_missing_one() {
        let err = run(Command::new("sh").args(["-c", "echo oops >&2; echo W: noise >&2; exit 3"]), "testing", "dash")
            .unwrap_err();
        assert_eq!(err.kind, Kind::Tool);
        assert!(err.to_string().ends_with(": oops"), "the last line that says something: {err}");
        match tool_error(&err) {
            ToolError::Failed { status, stderr, .. } => {
                assert_eq!(status.code(), Some(3));
                assert!(stderr.contains("W: noise"), "all of stderr is kept: {stderr}");
            }
            other => panic!("not Failed: {other:?}"),
        }
    }

    /// Is process `pid` gone (or a zombie no one waits for)?
    fn gone(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
            .unwrap_or(true)
    }

    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let t0 = std::time::Instant::now();
        while !cond() {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "still not true after 10 s: {what}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A child started with stop_with_caller (QEMU, mmdebstrap) gets
    /// SIGTERM when the thread that started it goes away without waiting.
    #[test]
    fn a_child_stops_with_its_caller() {
        let child = std::thread::spawn(|| {
            let mut c = Command::new("sleep");
            c.arg("60");
            stop_with_caller(&mut c);
            // Never waited for on purpose (the thread goes away as a killed
            // bootlink would).
            #[allow(clippy::zombie_processes)]
            let child = c.spawn().unwrap();
            child.id()
        })
        .join()
        .unwrap();
        wait_until("the child is gone", || gone(child));
    }

    /// A tied child holds the lock while it (and what it starts) runs, and
    /// is stopped when the thread that started it goes away without waiting
    /// for it, as a killed bootlink would.
    #[test]
    fn a_tied_child_holds_the_lock_and_dies_with_its_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".lock");
        let lock = std::fs::File::create(&path).unwrap();
        lock.lock().unwrap();
        let pidfile = dir.path().join("grandchild");
        let (lock2, pidfile2) = (lock.try_clone().unwrap(), pidfile.clone());
        // A shell that starts a grandchild (make's compiler) and waits.
        let child = std::thread::spawn(move || {
            let mut c = Command::new("sh");
            c.args(["-c", "sleep 60 & echo $! > \"$0\"; wait", pidfile2.to_str().unwrap()]);
            tie_to_caller(&mut c, &lock2);
            // Never waited for on purpose: the thread goes away as a killed
            // bootlink would, and PR_SET_PDEATHSIG is what is tested.
            #[allow(clippy::zombie_processes)]
            let child = c.spawn().unwrap();
            let id = child.id();
            while !pidfile2.is_file() || std::fs::read_to_string(&pidfile2).unwrap().trim().is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            // Returning drops the Child without waiting: the thread exits.
            id
        })
        .join()
        .unwrap();
        let grandchild: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        drop(lock);
        // The shell died with its caller; the lock is still held by the
        // grandchild, which inherited it.
        wait_until("the tied shell died with its caller", || gone(child));
        let other = std::fs::File::create(&path).unwrap();
        assert!(!gone(grandchild), "the grandchild runs on");
        assert!(other.try_lock().is_err(), "the lock is held while a process that inherited it runs");
        unsafe { libc::kill(grandchild as libc::pid_t, libc::SIGKILL) };
        wait_until("the grandchild is gone", || gone(grandchild));
        wait_until("the lock is free once the last holder exits", || other.try_lock().is_ok());
    }
}

/// `apt-cache` with its binary caches kept in bootlink's cache directory
/// (`<cache>/apt/`). Debian's container images turn those caches off
/// (`Dir::Cache::pkgcache ""`), and then every call parses all package
/// lists again: about a second of CPU, where a kept cache answers in a
/// tenth. apt rebuilds a kept cache when the lists change and writes it
/// to a temporary file renamed into place, so processes may share it.
/// Without a cache directory (it cannot be made) apt's own setting stays.
pub fn apt_cache() -> Command {
    let mut cmd = Command::new("apt-cache");
    let dir = crate::fsutil::cache_dir().join("apt");
    if std::fs::create_dir_all(&dir).is_ok() {
        cmd.arg("-o").arg(format!("Dir::Cache::pkgcache={}", dir.join("pkgcache.bin").display()));
        cmd.arg("-o").arg(format!("Dir::Cache::srcpkgcache={}", dir.join("srcpkgcache.bin").display()));
    }
    cmd
}

#[cfg(test)]
mod apt_tests {
    /// The kept caches sit in bootlink's cache directory, and apt answers
    /// through them as without them.
    #[test]
    fn apt_cache_keeps_its_binary_caches_in_bootlinks_cache() {
        let cmd = super::apt_cache();
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let dir = crate::fsutil::cache_dir().join("apt");
        assert_eq!(
            args,
            [
                "-o".to_string(),
                format!("Dir::Cache::pkgcache={}/pkgcache.bin", dir.display()),
                "-o".to_string(),
                format!("Dir::Cache::srcpkgcache={}/srcpkgcache.bin", dir.display()),
            ]
        );
        let kept = super::apt_cache().args(["policy", "dpkg"]).output().unwrap();
        let plain = std::process::Command::new("apt-cache").args(["policy", "dpkg"]).output().unwrap();
        assert!(kept.status.success(), "{}", String::from_utf8_lossy(&kept.stderr));
        assert_eq!(String::from_utf8_lossy(&kept.stdout), String::from_utf8_lossy(&plain.stdout));
    }
}
