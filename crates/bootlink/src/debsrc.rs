//! Debian source packages, downloaded with apt through a private sources
//! list (the system's apt configuration and package lists are not touched).
//!
//! Under a caller's directory `<base>` (e.g. `<cache>/glibc`): `apt/` (the
//! private `sources.list`, package lists and apt's cache) and `dl/` (the
//! `.dsc` files and their tarballs, reused by every later build).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::{fsutil, hosttool, progress};

/// The `.dsc` file name of a version (the epoch is not part of file names).
pub(crate) fn dsc_name(package: &str, version: &str) -> String {
    let bare = version.split_once(':').map_or(version, |(_, v)| v);
    format!("{package}_{bare}.dsc")
}

/// The distribution's code name (`bookworm` on Debian 12), from /etc/os-release.
pub(crate) fn codename() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "bookworm".to_string())
}

/// The private sources list: source packages only, from the release, its
/// updates and its security archive (where a `+debNNuM` version lives).
pub(crate) fn sources_list(codename: &str) -> String {
    format!(
        "deb-src http://deb.debian.org/debian {codename} main\n\
         deb-src http://deb.debian.org/debian {codename}-updates main\n\
         deb-src http://deb.debian.org/debian-security {codename}-security main\n"
    )
}

/// The files a `.dsc` lists (`Checksums-Sha256`, else `Files`): name and size.
pub(crate) fn dsc_files(dsc: &str) -> Vec<(String, u64)> {
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

/// The SHA-256 a `.dsc` gives each file (`Checksums-Sha256`).
fn dsc_sha256(dsc: &str) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    let mut inside = false;
    for line in dsc.lines() {
        if !line.starts_with(' ') {
            inside = line.trim_end() == "Checksums-Sha256:";
            continue;
        }
        if let [sum, _, name] = line.split_whitespace().collect::<Vec<_>>()[..]
            && inside
        {
            out.insert(name.to_string(), sum.to_ascii_lowercase());
        }
    }
    out
}

/// Does `dl` hold the `.dsc` and every file it lists, at its size and
/// with the SHA-256 the `.dsc` gives (a download kept in the cache is
/// checked on every use: one cut short or damaged is fetched again)?
pub fn complete(dl: &Path, dsc: &Path) -> bool {
    damaged(dl, dsc).is_some_and(|d| d.is_empty())
}

/// The files the `.dsc` in `dl` lists that are missing or not as it says
/// (None when the `.dsc` itself does not read or lists nothing).
fn damaged(dl: &Path, dsc: &Path) -> Option<Vec<PathBuf>> {
    let text = String::from_utf8(crate::fsutil::read_input(dsc, 1 << 20).ok()?).ok()?;
    let files = dsc_files(&text);
    let sums = dsc_sha256(&text);
    if files.is_empty() || files.iter().any(|(name, _)| name.contains('/')) {
        return None;
    }
    let whole = |name: &str, size: u64| {
        let path = dl.join(name);
        std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == size)
            && sums.get(name).is_none_or(|want| {
                crate::fsutil::read_input(&path, crate::fsutil::MAX_BINARY)
                    .is_ok_and(|d| crate::cache::sha256_hex(&d) == *want)
            })
    };
    Some(files.iter().filter(|(name, size)| !whole(name, *size)).map(|(name, _)| dl.join(name)).collect())
}

/// apt-get/apt-cache with the private list under `<base>/apt`.
struct PrivateApt {
    apt: PathBuf,
    list: PathBuf,
}

impl PrivateApt {
    fn new(base: &Path) -> Result<PrivateApt> {
        let apt = base.join("apt");
        let list = apt.join("sources.list");
        for d in [apt.join("lists/partial"), apt.join("cache/archives/partial")] {
            std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        }
        let wanted = sources_list(&codename());
        if std::fs::read_to_string(&list).ok().as_deref() != Some(wanted.as_str()) {
            fsutil::write_atomic(&list, wanted.as_bytes())?;
        }
        Ok(PrivateApt { apt, list })
    }

    fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        c.arg("-o")
            .arg(format!("Dir::Etc::SourceList={}", self.list.display()))
            .args(["-o", "Dir::Etc::SourceParts=/dev/null", "-o"])
            .arg(format!("Dir::State::Lists={}", self.apt.join("lists").display()))
            .arg("-o")
            .arg(format!("Dir::Cache={}", self.apt.join("cache").display()))
            .env("LC_ALL", "C");
        c
    }

    fn update(&self) -> Result<()> {
        hosttool::run(
            self.command("apt-get").args(["update", "-qq"]),
            "updating the private list of Debian source packages",
            "apt",
        )
        .map(|_| ())
    }
}

/// An exclusive lock on `<base>/.download.lock`, held until dropped.
fn lock(base: &Path, package: &str) -> Result<std::fs::File> {
    std::fs::create_dir_all(base).map_err(|e| Error::io(base, e))?;
    let lock_path = base.join(".download.lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    if lock.try_lock().is_err() {
        progress::status(&format!("waiting for another download of the {package} source"));
        lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    }
    Ok(lock)
}

/// The `.dsc` of `package` `version` in `<base>/dl/`, downloading it and
/// its tarballs with apt when any is missing (files already there are reused).
pub fn download(base: &Path, package: &str, version: &str) -> Result<PathBuf> {
    let dl = base.join("dl");
    let dsc = dl.join(dsc_name(package, version));
    if complete(&dl, &dsc) {
        return Ok(dsc);
    }
    let _lock = lock(base, package)?;
    if complete(&dl, &dsc) {
        return Ok(dsc);
    }
    std::fs::create_dir_all(&dl).map_err(|e| Error::io(&dl, e))?;
    // Files kept from an earlier download that are not as the .dsc says
    // (cut short, damaged) are fetched again, not reused.
    for f in damaged(&dl, &dsc).unwrap_or_default() {
        let _ = std::fs::remove_file(f);
    }
    let apt = PrivateApt::new(base)?;
    progress::status(&format!("fetching the {package} {version} source package with apt-get (private sources list)"));
    apt.update()?;
    fetch(&apt, &dl, package, version)?;
    if !complete(&dl, &dsc) {
        return Err(Error::file(
            Kind::Tool,
            &dsc,
            "apt-get source finished but the .dsc or a file it lists is missing or of the wrong size",
        ));
    }
    Ok(dsc)
}

fn fetch(apt: &PrivateApt, dl: &Path, package: &str, version: &str) -> Result<()> {
    let mut source = apt.command("apt-get");
    source.current_dir(dl).args(["source", "--download-only", "-qq"]).arg(format!("{package}={version}"));
    hosttool::run(&mut source, &format!("downloading the {package} {version} source package"), "apt")
        .map(|_| ())
        .map_err(|e| {
            Error::new(
                e.kind,
                format!("{} (is {version} still in the {} archives? {})", e.msg, codename(), apt.list.display()),
            )
            .because(e)
        })
}

/// The versions `apt-cache showsrc` lists, newest first.
pub(crate) fn versions_in(showsrc: &str) -> Vec<String> {
    let mut v: Vec<String> =
        showsrc.lines().filter_map(|l| l.strip_prefix("Version: ")).map(|v| v.trim().to_string()).collect();
    v.sort_by(|a, b| deb_version_cmp(b, a));
    v.dedup();
    v
}

/// Debian's version order (epoch, then upstream and revision compared by
/// dpkg's rules: `~` before everything, letters before other characters,
/// digit runs as numbers).
pub(crate) fn deb_version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(v: &str) -> (u64, &str, &str) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, r)) if e.chars().all(|c| c.is_ascii_digit()) => (e.parse().unwrap_or(0), r),
            _ => (0, v),
        };
        match rest.rsplit_once('-') {
            Some((u, r)) => (epoch, u, r),
            None => (epoch, rest, ""),
        }
    }
    fn order(c: Option<char>) -> i32 {
        match c {
            None => 0,
            Some('~') => -1,
            Some(c) if c.is_ascii_alphabetic() => c as i32,
            Some(c) => c as i32 + 256,
        }
    }
    fn part(mut a: &str, mut b: &str) -> std::cmp::Ordering {
        while !a.is_empty() || !b.is_empty() {
            let na = a.find(|c: char| c.is_ascii_digit()).unwrap_or(a.len());
            let nb = b.find(|c: char| c.is_ascii_digit()).unwrap_or(b.len());
            let (sa, sb) = (&a[..na], &b[..nb]);
            let (mut ca, mut cb) = (sa.chars(), sb.chars());
            loop {
                let (x, y) = (ca.next(), cb.next());
                if x.is_none() && y.is_none() {
                    break;
                }
                let o = order(x).cmp(&order(y));
                if o.is_ne() {
                    return o;
                }
            }
            a = &a[na..];
            b = &b[nb..];
            let da = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
            let db = b.find(|c: char| !c.is_ascii_digit()).unwrap_or(b.len());
            let (x, y) = (a[..da].parse::<u128>().unwrap_or(0), b[..db].parse::<u128>().unwrap_or(0));
            if x != y {
                return x.cmp(&y);
            }
            a = &a[da..];
            b = &b[db..];
        }
        std::cmp::Ordering::Equal
    }
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb).then_with(|| part(ua, ub)).then_with(|| part(ra, rb))
}

/// The newest version of `package` whose source can be had: one already in
/// `<base>/dl/` (no network), else the archives' versions newest first
/// (an index may list a version whose files are gone from the mirror).
pub(crate) fn download_newest(base: &Path, package: &str) -> Result<(String, PathBuf)> {
    let dl = base.join("dl");
    let prefix = format!("{package}_");
    let mut have: Vec<String> = std::fs::read_dir(&dl)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let v = n.strip_prefix(&prefix)?.strip_suffix(".dsc")?.to_string();
            complete(&dl, &e.path()).then_some(v)
        })
        .collect();
    have.sort_by(|a, b| deb_version_cmp(b, a));
    if let Some(v) = have.into_iter().next() {
        let dsc = dl.join(dsc_name(package, &v));
        return Ok((v, dsc));
    }
    let _lock = lock(base, package)?;
    std::fs::create_dir_all(&dl).map_err(|e| Error::io(&dl, e))?;
    let apt = PrivateApt::new(base)?;
    progress::status(&format!("finding the newest {package} source package with apt (private sources list)"));
    apt.update()?;
    let out = hosttool::run(
        apt.command("apt-cache").args(["showsrc", package]),
        &format!("listing the {package} source packages"),
        "apt",
    )?;
    let versions = versions_in(&out);
    if versions.is_empty() {
        return Err(Error::new(
            Kind::Tool,
            format!("no {package} source package in the {} archives ({})", codename(), apt.list.display()),
        ));
    }
    let mut why = Vec::new();
    for v in &versions {
        progress::status(&format!("fetching the {package} {v} source package with apt-get"));
        match fetch(&apt, &dl, package, v) {
            Ok(()) => {
                let dsc = dl.join(dsc_name(package, v));
                if complete(&dl, &dsc) {
                    return Ok((v.clone(), dsc));
                }
                why.push(format!("{v}: files missing after apt-get source"));
            }
            Err(e) => why.push(format!("{v}: {}", e.msg)),
        }
    }
    Err(Error::new(Kind::Tool, format!("no {package} source package could be downloaded: {}", why.join("; "))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

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
        assert_eq!(dsc_name("glibc", "2.36-9+deb12u14"), "glibc_2.36-9+deb12u14.dsc");
        assert_eq!(dsc_name("glibc", "1:2.0-1"), "glibc_2.0-1.dsc");
    }

    #[test]
    fn sources_are_source_only_and_include_security() {
        let l = sources_list("bookworm");
        assert!(l.lines().all(|l| l.starts_with("deb-src ")), "{l}");
        assert!(l.contains("http://deb.debian.org/debian bookworm main"));
        assert!(l.contains("http://deb.debian.org/debian bookworm-updates main"));
        assert!(l.contains("http://deb.debian.org/debian-security bookworm-security main"));
    }

    #[test]
    fn versions_in_dpkg_order() {
        assert_eq!(deb_version_cmp("3.11.2-6+deb12u9", "3.11.2-6+deb12u10"), Less);
        assert_eq!(deb_version_cmp("3.11.2-6", "3.11.2-6+deb12u1"), Less);
        assert_eq!(deb_version_cmp("1.0~rc1-1", "1.0-1"), Less);
        assert_eq!(deb_version_cmp("1:0.1-1", "9.9-1"), Greater);
        assert_eq!(deb_version_cmp("2.36-9", "2.36-9"), Equal);
        let showsrc = "Package: python3.11\nVersion: 3.11.2-6+deb12u8\nFiles:\n x\n\nPackage: python3.11\nVersion: 3.11.2-6+deb12u10\n";
        assert_eq!(versions_in(showsrc), ["3.11.2-6+deb12u10", "3.11.2-6+deb12u8"]);
    }
}
