//! Which builds a run waited for. When `BOOTLINK_BUILD_LOG` names a file
//! (scripts/run-tests sets it), each build entry point (the kernel, glibc,
//! CPython, the repository's C, the synthetic cases, a kernel package's
//! download) appends one line to it when its call returns: how long the call
//! took, and what it built or found in the cache. A test's time then says
//! how much of it was a build.

use std::io::Write;
use std::time::Instant;

use crate::error::Result;

/// The variable naming the log.
pub const ENV: &str = "BOOTLINK_BUILD_LOG";

/// Run the build `f`, and log `what` it was and how long it took (also when
/// it failed: a failed build is waited for too).
pub fn timed<T>(what: impl FnOnce() -> String, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let Some(path) = std::env::var_os(ENV) else { return f() };
    let t0 = Instant::now();
    let out = f();
    let line = format!(
        "{:.1}\t{}\t{}\n",
        t0.elapsed().as_secs_f64(),
        if out.is_ok() { "ok" } else { "failed" },
        what().replace(['\t', '\n'], " ")
    );
    // One write of one short line with O_APPEND: lines from processes
    // building at once do not interleave. A log that cannot be written
    // loses the line, never the build.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(line.as_bytes());
    }
    out
}

/// The variable naming a directory where a test run keeps the builds that
/// failed in it (scripts/run-tests sets it; users do not). A kernel or
/// glibc build that failed once in a run fails at once for every later
/// caller of that run, naming the first failure, instead of taking half an
/// hour to fail again in each test that needs it.
pub const FAILED_ENV: &str = "BOOTLINK_FAILED_BUILDS";

fn failure_marker(what: &str, key: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os(FAILED_ENV)?;
    let name: String =
        format!("{what}-{key}").chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    Some(std::path::Path::new(&dir).join(name))
}

/// Refuse a build (`what`, content `key`) that already failed in this run.
pub fn failed_earlier(what: &str, key: &str) -> Result<()> {
    let Some(marker) = failure_marker(what, key) else { return Ok(()) };
    match std::fs::read_to_string(&marker) {
        Ok(first) => Err(crate::error::Error::new(
            crate::error::Kind::Build,
            format!("the {what} build {key} already failed in this run ({}): {first}", marker.display()),
        )),
        Err(_) => Ok(()),
    }
}

/// Pass `out` through, remembering a failure of the build (`what`, `key`)
/// for the rest of the run.
pub fn remember<T>(what: &str, key: &str, out: Result<T>) -> Result<T> {
    if let (Err(e), Some(marker)) = (&out, failure_marker(what, key)) {
        let _ = std::fs::create_dir_all(marker.parent().unwrap_or(std::path::Path::new(".")));
        let _ = crate::fsutil::write_atomic(&marker, e.to_string().as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the variable set, a failure is remembered under its key and
    /// refuses that key (and only it) at once; a success leaves nothing.
    #[test]
    fn a_failed_build_fails_at_once_for_the_rest_of_the_run() {
        let dir = crate::fsutil::TempDir::new("buildlog-failed").unwrap();
        // SAFETY: this test alone sets the variable; nothing else in the
        // crate's tests reads it.
        unsafe { std::env::set_var(FAILED_ENV, dir.path()) };
        assert!(failed_earlier("kernel", "k1").is_ok());
        let ok: Result<u32> = remember("kernel", "k0", Ok(1));
        assert_eq!(ok.unwrap(), 1);
        let err: Result<u32> =
            remember("kernel", "k1", Err(crate::error::Error::new(crate::error::Kind::Build, "make failed: oops")));
        assert!(err.is_err());
        let again = failed_earlier("kernel", "k1").unwrap_err().to_string();
        assert!(
            again.contains("the kernel build k1 already failed in this run") && again.contains("make failed: oops"),
            "{again}"
        );
        assert!(failed_earlier("kernel", "k0").is_ok() && failed_earlier("glibc", "k1").is_ok());
        unsafe { std::env::remove_var(FAILED_ENV) };
    }
}
