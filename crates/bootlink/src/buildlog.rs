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
