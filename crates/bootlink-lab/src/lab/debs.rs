//! Debian packages the lab puts into a guest: the version apt would
//! install (`apt-cache policy`), the .deb fetched once with `apt-get
//! download` into `<cache>/debs`, unpacked with `dpkg-deb -x`. Another
//! architecture's package (`kmod:arm64`) needs that architecture known to
//! dpkg (`dpkg --add-architecture arm64 && apt-get update`).

use std::path::{Path, PathBuf};
use std::process::Command;

use bootlink::error::{Error, Kind, Result};
use bootlink::fetch::Arch;
use bootlink::fsutil;
use bootlink::hosttool::run as run_tool;
use bootlink::progress;

/// The package of `arch` as apt names it (`kmod`, `kmod:arm64`).
pub(crate) fn spec(package: &str, arch: Arch) -> String {
    match arch {
        Arch::Amd64 => package.to_string(),
        a => format!("{package}:{}", a.debian()),
    }
}

/// The version apt would download, if apt knows the package.
pub(crate) fn candidate(package: &str, arch: Arch) -> Result<Option<String>> {
    let spec = spec(package, arch);
    let out = run_tool(bootlink::hosttool::apt_cache().args(["policy", &spec]), &format!("finding {spec}"), "apt")?;
    Ok(out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && v != "(none)"))
}

/// [`candidate`], running `apt-get update` once when apt knows nothing of
/// the package (package lists missing on a fresh machine).
pub(crate) fn candidate_or_update(package: &str, arch: Arch) -> Result<String> {
    match candidate(package, arch)? {
        Some(v) => Ok(v),
        None => candidate_after_update(package, arch),
    }
}

/// `apt-get update`, then [`candidate`]: apt knowing no such package then
/// is an error (with the hint a foreign architecture needs).
pub(crate) fn candidate_after_update(package: &str, arch: Arch) -> Result<String> {
    progress::status("apt-get update (package lists are missing)");
    run_tool(Command::new("apt-get").args(["update", "-qq"]), "apt-get update", "apt")?;
    candidate(package, arch)?.ok_or_else(|| {
        let hint = match arch {
            Arch::Amd64 => String::new(),
            a => format!(" (dpkg --add-architecture {} && apt-get update)", a.debian()),
        };
        Error::new(Kind::Tool, format!("apt knows no package {}{hint}", spec(package, arch)))
    })
}

/// A version as a directory name: "1:1.35.0-4+deb12u1+b1" -> "1_1.35.0-4+deb12u1+b1".
pub(crate) fn version_dir(version: &str) -> String {
    version.chars().map(|c| if c.is_ascii_alphanumeric() || ".+~-".contains(c) { c } else { '_' }).collect()
}

/// The .deb of `package` `version` for `arch` in `debs`, if there.
pub(crate) fn find_deb(debs: &Path, package: &str, version: &str, arch: Arch) -> Option<PathBuf> {
    // apt writes an epoch's ':' as %3a in file names; Architecture: all
    // packages end in _all.deb.
    let prefix = format!("{package}_{}_", version.replace(':', "%3a"));
    let suffixes = [format!("_{}.deb", arch.debian()), "_all.deb".to_string()];
    std::fs::read_dir(debs).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        p.file_name()
            .map(|n| n.to_string_lossy())
            .is_some_and(|n| n.starts_with(&prefix) && suffixes.iter().any(|s| n.ends_with(s.as_str())))
    })
}

/// The .deb of `package` `version` for `arch`, downloaded into
/// `<cache>/debs` unless already there.
pub(crate) fn download(package: &str, version: &str, arch: Arch) -> Result<PathBuf> {
    let debs = fsutil::cache_dir().join("debs");
    if let Some(d) = find_deb(&debs, package, version, arch) {
        return Ok(d);
    }
    std::fs::create_dir_all(&debs).map_err(|e| Error::io(&debs, e))?;
    let spec = format!("{}={version}", spec(package, arch));
    progress::status(&format!("downloading {spec}"));
    run_tool(
        Command::new("apt-get").current_dir(&debs).args(["download", "-qq", &spec]),
        &format!("downloading {spec}"),
        "apt",
    )?;
    find_deb(&debs, package, version, arch)
        .ok_or_else(|| Error::file(Kind::Tool, &debs, format!("apt-get download left no .deb for {spec}")))
}

/// `use_deb` on the .deb of `package` `version` for `arch`, downloaded
/// unless the cache has it. A kept .deb that `use_deb` fails on (dpkg-deb
/// cannot read it: cut short, damaged) is the cache's fault, not the
/// package's: it is removed and downloaded again, once.
pub(crate) fn with_deb<T>(package: &str, version: &str, arch: Arch, use_deb: impl Fn(&Path) -> Result<T>) -> Result<T> {
    let debs = fsutil::cache_dir().join("debs");
    if let Some(kept) = find_deb(&debs, package, version, arch) {
        match use_deb(&kept) {
            Ok(v) => return Ok(v),
            Err(e) => {
                progress::status(&format!(
                    "bootlink: {} in the cache could not be used ({}): downloaded again",
                    kept.display(),
                    e.msg
                ));
                let _ = std::fs::remove_file(&kept);
            }
        }
    }
    use_deb(&download(package, version, arch)?)
}

/// Unpack `deb` into the directory `into` (made if missing).
pub(crate) fn unpack(deb: &Path, into: &Path) -> Result<()> {
    run_tool(Command::new("dpkg-deb").arg("-x").arg(deb).arg(into), &format!("unpacking {}", deb.display()), "dpkg")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootlink::fsutil::TempDir;

    #[test]
    fn versions_become_plain_directory_names() {
        assert_eq!(version_dir("1:1.35.0-4+deb12u1+b1"), "1_1.35.0-4+deb12u1+b1");
        assert_eq!(version_dir("1.36.1-9~bpo"), "1.36.1-9~bpo");
        assert_eq!(version_dir("a/b"), "a_b");
    }

    #[test]
    fn debs_are_found_with_escaped_epochs_and_their_architecture() {
        let tmp = TempDir::new("debs-test").unwrap();
        for n in [
            "busybox-static_1%3a1.35.0-4_amd64.deb",
            "busybox_1%3a1.35.0-4_amd64.deb",
            "busybox-static_1%3a1.35.0-4_arm64.deb",
            "tzdata_2024a-0_all.deb",
        ] {
            std::fs::write(tmp.path().join(n), b"").unwrap();
        }
        let d = find_deb(tmp.path(), "busybox-static", "1:1.35.0-4", Arch::Amd64).unwrap();
        assert!(d.ends_with("busybox-static_1%3a1.35.0-4_amd64.deb"));
        let d = find_deb(tmp.path(), "busybox-static", "1:1.35.0-4", Arch::Arm64).unwrap();
        assert!(d.ends_with("busybox-static_1%3a1.35.0-4_arm64.deb"));
        assert!(find_deb(tmp.path(), "busybox-static", "1:1.36", Arch::Amd64).is_none());
        assert!(find_deb(tmp.path(), "tzdata", "2024a-0", Arch::Arm64).is_some());
        assert_eq!(spec("kmod", Arch::Arm64), "kmod:arm64");
        assert_eq!(spec("kmod", Arch::Amd64), "kmod");
    }
}
