//! Debian's glibc source for the installed libc6: downloaded with apt
//! through a private sources list (the system's apt configuration and
//! package lists are not touched), unpacked with `dpkg-source -x` (which
//! applies Debian's own patches), then bootlink's series on top.
//!
//! Under `<cache>/glibc/`: `apt/` and `dl/` ([`debsrc`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::series::Series;
use crate::{debsrc, fsutil, hosttool, progress};

/// The source package, and the binary package whose installed version is built.
pub(crate) const PACKAGE: &str = "glibc";
pub(crate) const BINARY: &str = "libc6";

/// Written into an unpacked tree once the whole series is applied.
const COMPLETE_MARK: &str = ".bootlink-source";

/// The version of libc6 installed on this machine, e.g. `2.36-9+deb12u14`.
pub fn installed_version() -> Result<String> {
    let out = hosttool::run(
        Command::new("dpkg-query").args(["-W", "-f=${Version}", BINARY]),
        "finding the installed libc6 version",
        "dpkg",
    )?;
    let v = out.trim();
    if v.is_empty() || v.contains(char::is_whitespace) {
        return Err(Error::new(Kind::Tool, format!("dpkg-query gave no version for {BINARY}: {out:?}")));
    }
    Ok(v.to_string())
}

/// The `.dsc` file name of a version.
pub(crate) fn dsc_name(version: &str) -> String {
    debsrc::dsc_name(PACKAGE, version)
}

/// The `.dsc` of `version` in `<glibc>/dl/` (see [`debsrc::download`]).
pub fn download(glibc: &Path, version: &str) -> Result<PathBuf> {
    debsrc::download(glibc, PACKAGE, version)
}

/// The source tree for one build: `<key>/src`, made once (Debian's source
/// unpacked, then `series` applied, in a temporary directory renamed into
/// place when all of it is done; a killed run leaves only the temporary).
pub(crate) fn prepare(keydir: &Path, dsc: &Path, series: &Series, version: &str) -> Result<PathBuf> {
    let src = keydir.join("src");
    if src.join(COMPLETE_MARK).is_file() {
        return Ok(src);
    }
    if src.exists() {
        std::fs::remove_dir_all(&src).map_err(|e| Error::io(&src, e))?;
    }
    let tmp = tempfile::Builder::new().prefix(".src-").tempdir_in(keydir).map_err(|e| Error::io(keydir, e))?;
    let tree = tmp.path().join(PACKAGE);
    progress::status(&format!("unpacking {} (Debian's patches applied by dpkg-source)", dsc.display()));
    hosttool::run(
        Command::new("dpkg-source").args(["-x", "--no-check"]).arg(dsc).arg(&tree).env("LC_ALL", "C"),
        &format!("unpacking {}", dsc.display()),
        "dpkg-dev",
    )
    .map_err(|e| e.at(dsc))?;
    if !tree.join("configure").is_file() {
        return Err(Error::file(Kind::Format, dsc, "unpacks to a tree without a configure script: not glibc"));
    }
    for p in &series.patches {
        apply(&tree, &p.path).map_err(|e| {
            e.context(&p.path, |why| {
                format!("does not apply to Debian's {PACKAGE} {version} (with Debian's patches): {why}")
            })
        })?;
    }
    if !series.patches.is_empty() {
        progress::status(&format!("patch series {}: {} applied", series.dir.display(), series.patches.len()));
    }
    fsutil::write_atomic(&tree.join(COMPLETE_MARK), version.as_bytes())?;
    std::fs::rename(&tree, &src).map_err(|e| Error::io(&src, e))?;
    Ok(src)
}

/// `patch -p1` in `tree`: first a dry run, so a patch that does not apply
/// changes nothing; the reasons `patch` gives otherwise.
fn apply(tree: &Path, file: &Path) -> Result<()> {
    for dry_run in [true, false] {
        let mut c = Command::new("patch");
        c.current_dir(tree).args(["-p1", "-N", "-s", "-f", "--no-backup-if-mismatch", "-r", "-", "-i"]).arg(file);
        if dry_run {
            c.arg("--dry-run");
        }
        let out = c
            .env("LC_ALL", "C")
            .output()
            .map_err(|e| hosttool::spawn_error("patch", "applying the glibc patch series", "patch", e))?;
        if !out.status.success() {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).take(4).collect();
            let why = if lines.is_empty() { format!("patch exited {}", out.status) } else { lines.join("; ") };
            return Err(Error::new(Kind::Build, why));
        }
    }
    Ok(())
}
