//! BOLT, the post-link optimizer, as the modern anchor beside a link order
//! (issue 13 also names lld's `--bp-startup-sort`: it is in lld 20 for
//! ELF; Debian 12's newest lld is 19, which has it for Mach-O only).
//!
//! BOLT's own profile, no perf (no LBR in a VM): the binary instrumented
//! (`-instrument`), run once through the same start-up, then rewritten
//! with that profile: functions in hot-first order (`hfsort+`), blocks by
//! ext-TSP, and every function split so the blocks start-up never ran go
//! to a cold area (`-split-functions -split-all-cold`): a finer cut than a
//! function order, which keeps whole functions. Needs the binary linked
//! with its relocations (`-Wl,-q`) to move functions.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::hosttool;

/// The rewriting options, as printed in reports.
pub(crate) const OPTIONS: &[&str] =
    &["-reorder-functions=hfsort+", "-reorder-blocks=ext-tsp", "-split-functions", "-split-all-cold"];

/// `llvm-bolt` on the PATH, else the newest `llvm-bolt-NN` (Debian's
/// bolt-NN), through its symbolic links: BOLT finds its instrumentation
/// runtime beside its real path (`/usr/lib/llvm-NN/lib`).
pub fn find() -> Option<PathBuf> {
    on_path().map(|p| std::fs::canonicalize(&p).unwrap_or(p))
}

fn on_path() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    let mut best: Option<(u32, PathBuf)> = None;
    for d in std::env::split_paths(&paths) {
        let plain = d.join("llvm-bolt");
        if plain.is_file() {
            return Some(plain);
        }
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(v) = n.strip_prefix("llvm-bolt-").and_then(|v| v.parse::<u32>().ok())
                && best.as_ref().is_none_or(|(b, _)| v > *b)
            {
                best = Some((v, e.path()));
            }
        }
    }
    best.map(|(_, p)| p)
}

fn bolt(tool: &Path, args: &[&std::ffi::OsStr], what: &str) -> Result<()> {
    hosttool::run(Command::new(tool).args(args), what, "bolt-16").map(|_| ())
}

/// `input` instrumented into `out`; running `out` writes its profile to `profile`.
pub(crate) fn instrument(tool: &Path, input: &Path, profile: &Path, out: &Path) -> Result<()> {
    let file = format!("-instrumentation-file={}", profile.display());
    let tmp = out.with_extension("tmp-bolt");
    let r = bolt(
        tool,
        &[input.as_os_str(), "-instrument".as_ref(), file.as_ref(), "-o".as_ref(), tmp.as_os_str()],
        &format!("instrumenting {} with BOLT", input.display()),
    );
    finish(r, &tmp, out)
}

/// `input` rewritten with `profile` into `out`.
pub(crate) fn optimize(tool: &Path, input: &Path, profile: &Path, out: &Path) -> Result<()> {
    if !profile.is_file() {
        return Err(Error::file(Kind::Tool, profile, "no BOLT profile: the instrumented run wrote none"));
    }
    let data = format!("-data={}", profile.display());
    let tmp = out.with_extension("tmp-bolt");
    let mut args: Vec<&std::ffi::OsStr> = vec![input.as_os_str(), data.as_ref()];
    args.extend(OPTIONS.iter().map(|o| std::ffi::OsStr::new(*o)));
    args.extend(["-o".as_ref(), tmp.as_os_str()]);
    let r = bolt(tool, &args, &format!("optimizing {} with BOLT and its profile", input.display()));
    finish(r, &tmp, out)
}

fn finish(r: Result<()>, tmp: &Path, out: &Path) -> Result<()> {
    if r.is_err() {
        let _ = std::fs::remove_file(tmp);
        return r;
    }
    std::fs::rename(tmp, out).map_err(|e| Error::io(out, e))
}
