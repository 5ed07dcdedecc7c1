//! Debian's glibc source for the installed libc6: downloaded with apt
//! through a private sources list (the system's apt configuration and
//! package lists are not touched), unpacked with `dpkg-source -x` (which
//! applies Debian's own patches), then bootlink's series on top.
//!
//! Under `<cache>/glibc/`: `apt/` (the private `sources.list`, package
//! lists and apt's cache), `dl/` (the `.dsc` and its tarballs, reused by
//! every later build of that version).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::series::Series;
use crate::{fsutil, hosttool, progress};

/// The source package, and the binary package whose installed version is built.
pub const PACKAGE: &str = "glibc";
pub const BINARY: &str = "libc6";

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

/// The `.dsc` file name of a version (the epoch is not part of file names).
pub fn dsc_name(version: &str) -> String {
    let bare = version.split_once(':').map_or(version, |(_, v)| v);
    format!("{PACKAGE}_{bare}.dsc")
}

/// The distribution's code name (`bookworm` on Debian 12), from /etc/os-release.
fn codename() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "bookworm".to_string())
}

/// The private sources list: source packages only, from the release, its
/// updates and its security archive (where a `+debNNuM` version lives).
pub fn sources_list(codename: &str) -> String {
    format!(
        "deb-src http://deb.debian.org/debian {codename} main\n\
         deb-src http://deb.debian.org/debian {codename}-updates main\n\
         deb-src http://deb.debian.org/debian-security {codename}-security main\n"
    )
}

/// The files a `.dsc` lists (`Checksums-Sha256`, else `Files`): name and size.
pub fn dsc_files(dsc: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for section in ["Checksums-Sha256:", "Files:"] {
        let mut inside = false;
        for line in dsc.lines() {
            if !line.starts_with(' ') {
                inside = line.trim_end() == section;
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            if inside
                && words.len() == 3
                && let Ok(size) = words[1].parse()
            {
                out.push((words[2].to_string(), size));
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

/// Does `dl` hold the `.dsc` and every file it lists, at its size?
fn complete(dl: &Path, dsc: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dsc) else { return false };
    let files = dsc_files(&text);
    !files.is_empty()
        && files.iter().all(|(name, size)| {
            !name.contains('/') && std::fs::metadata(dl.join(name)).is_ok_and(|m| m.is_file() && m.len() == *size)
        })
}

/// The `.dsc` of `version` in `<glibc>/dl/`, downloading it and its
/// tarballs with apt when any is missing (files already there are reused).
pub fn download(glibc: &Path, version: &str) -> Result<PathBuf> {
    let dl = glibc.join("dl");
    let dsc = dl.join(dsc_name(version));
    if complete(&dl, &dsc) {
        return Ok(dsc);
    }
    std::fs::create_dir_all(&dl).map_err(|e| Error::io(&dl, e))?;
    let lock_path = glibc.join(".download.lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    if lock.try_lock().is_err() {
        progress::status("waiting for another download of the glibc source");
        lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    }
    if complete(&dl, &dsc) {
        return Ok(dsc);
    }
    let apt = glibc.join("apt");
    let list = apt.join("sources.list");
    for d in [apt.join("lists/partial"), apt.join("cache/archives/partial")] {
        std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    }
    let wanted = sources_list(&codename());
    if std::fs::read_to_string(&list).ok().as_deref() != Some(wanted.as_str()) {
        fsutil::write_atomic(&list, wanted.as_bytes())?;
    }
    let private = |c: &mut Command| {
        c.arg("-o")
            .arg(format!("Dir::Etc::SourceList={}", list.display()))
            .args(["-o", "Dir::Etc::SourceParts=/dev/null", "-o"])
            .arg(format!("Dir::State::Lists={}", apt.join("lists").display()))
            .arg("-o")
            .arg(format!("Dir::Cache={}", apt.join("cache").display()))
            .env("LC_ALL", "C");
    };
    progress::status(&format!("fetching the {PACKAGE} {version} source package with apt-get (private sources list)"));
    let mut update = Command::new("apt-get");
    private(&mut update);
    hosttool::run(update.args(["update", "-qq"]), "updating the private list of Debian source packages", "apt")?;
    let mut source = Command::new("apt-get");
    private(&mut source);
    source.current_dir(&dl).args(["source", "--download-only", "-qq"]).arg(format!("{PACKAGE}={version}"));
    hosttool::run(&mut source, &format!("downloading the {PACKAGE} {version} source package"), "apt").map_err(|e| {
        Error::new(
            e.kind,
            format!("{} (is {version} still in the {} archives? {}/sources.list)", e.msg, codename(), apt.display()),
        )
    })?;
    if !complete(&dl, &dsc) {
        return Err(Error::file(
            Kind::Tool,
            &dsc,
            "apt-get source finished but the .dsc or a file it lists is missing or of the wrong size",
        ));
    }
    Ok(dsc)
}

/// The source tree for one build: `<key>/src`, made once (Debian's source
/// unpacked, then `series` applied, in a temporary directory renamed into
/// place when all of it is done; a killed run leaves only the temporary).
pub fn prepare(keydir: &Path, dsc: &Path, series: &Series, version: &str) -> Result<PathBuf> {
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
        apply(&tree, &p.path).map_err(|why| {
            Error::file(
                Kind::Build,
                &p.path,
                format!("does not apply to Debian's {PACKAGE} {version} (with Debian's patches): {why}"),
            )
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
fn apply(tree: &Path, file: &Path) -> std::result::Result<(), String> {
    for dry_run in [true, false] {
        let mut c = Command::new("patch");
        c.current_dir(tree).args(["-p1", "-N", "-s", "-f", "--no-backup-if-mismatch", "-r", "-", "-i"]).arg(file);
        if dry_run {
            c.arg("--dry-run");
        }
        let out = c
            .env("LC_ALL", "C")
            .output()
            .map_err(|e| hosttool::spawn_error("patch", "applying the glibc patch series", "patch", e).to_string())?;
        if !out.status.success() {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).take(4).collect();
            return Err(if lines.is_empty() { format!("patch exited {}", out.status) } else { lines.join("; ") });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsc_lists_its_files() {
        let dsc = "-----BEGIN PGP SIGNED MESSAGE-----\n\nFormat: 3.0 (quilt)\nSource: glibc\n\
                   Checksums-Sha1:\n 1111 19363988 glibc_2.36.orig.tar.xz\n\
                   Checksums-Sha256:\n aaaa 19363988 glibc_2.36.orig.tar.xz\n bbbb 918488 glibc_2.36-9+deb12u14.debian.tar.xz\n\
                   Files:\n cccc 19363988 glibc_2.36.orig.tar.xz\n\n-----BEGIN PGP SIGNATURE-----\n";
        assert_eq!(
            dsc_files(dsc),
            [("glibc_2.36.orig.tar.xz".to_string(), 19363988), ("glibc_2.36-9+deb12u14.debian.tar.xz".into(), 918488)]
        );
        assert_eq!(dsc_files("Files:\n cccc 12 a.tar.xz\n"), [("a.tar.xz".to_string(), 12)]);
        assert!(dsc_files("nothing\n").is_empty());
        assert_eq!(dsc_name("2.36-9+deb12u14"), "glibc_2.36-9+deb12u14.dsc");
        assert_eq!(dsc_name("1:2.0-1"), "glibc_2.0-1.dsc");
    }

    #[test]
    fn sources_are_source_only_and_include_security() {
        let l = sources_list("bookworm");
        assert!(l.lines().all(|l| l.starts_with("deb-src ")), "{l}");
        assert!(l.contains("http://deb.debian.org/debian bookworm main"));
        assert!(l.contains("http://deb.debian.org/debian bookworm-updates main"));
        assert!(l.contains("http://deb.debian.org/debian-security bookworm-security main"));
    }
}
