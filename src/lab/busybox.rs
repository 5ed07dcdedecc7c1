//! A static busybox for the lab's initramfs: Debian's `busybox-static`,
//! downloaded with `apt-get download` into `<cache>/debs` and unpacked once
//! into `<cache>/busybox/<version>/busybox` (the host's amd64), or, for
//! another architecture's guest, `busybox-static:<arch>` (a foreign
//! package: dpkg must know the architecture) into
//! `<cache>/busybox/<arch>/<version>/busybox`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::fetch::Arch;
use crate::fsutil;
use crate::fsutil::TempDir;
use crate::hosttool::run as run_tool;
use crate::progress;

pub(crate) const PACKAGE: &str = "busybox-static";

/// The package of `arch` as apt names it (`busybox-static:arm64`).
fn package(arch: Arch) -> String {
    match arch {
        Arch::Amd64 => PACKAGE.to_string(),
        a => format!("{PACKAGE}:{}", a.debian()),
    }
}

/// The version apt would download, if apt knows the package.
fn candidate(arch: Arch) -> Result<Option<String>> {
    let out = run_tool(Command::new("apt-cache").args(["policy", &package(arch)]), "finding busybox-static", "apt")?;
    Ok(out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && v != "(none)"))
}

/// A version as a directory name: "1:1.35.0-4+deb12u1+b1" -> "1_1.35.0-4+deb12u1+b1".
pub(crate) fn version_dir(version: &str) -> String {
    version.chars().map(|c| if c.is_ascii_alphanumeric() || ".+~-".contains(c) { c } else { '_' }).collect()
}

/// `<cache>/busybox`, and `<cache>/busybox/<arch>` for another architecture.
pub(crate) fn cache_root(arch: Arch) -> PathBuf {
    let root = fsutil::cache_dir().join("busybox");
    match arch {
        Arch::Amd64 => root,
        a => root.join(a.debian()),
    }
}

/// The newest busybox of `arch` already in the cache, whatever its version.
pub fn cached(arch: Arch) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache_root(arch))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path().join("busybox"))
        .filter(|p| p.is_file())
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop()
}

/// The path of the host's static busybox, fetched and unpacked on first use.
pub fn busybox() -> Result<PathBuf> {
    busybox_for(Arch::Amd64)
}

/// The path of a static busybox for `arch`, fetched and unpacked on first use.
pub fn busybox_for(arch: Arch) -> Result<PathBuf> {
    let version = match candidate(arch) {
        Ok(Some(v)) => v,
        Err(e) => return cached(arch).ok_or(e),
        Ok(None) => {
            // Offline or no package lists: a cached busybox will do.
            if let Some(p) = cached(arch) {
                return Ok(p);
            }
            progress::status("apt-get update (package lists are missing)");
            run_tool(Command::new("apt-get").args(["update", "-qq"]), "apt-get update", "apt")?;
            candidate(arch)?.ok_or_else(|| {
                let hint = match arch {
                    Arch::Amd64 => String::new(),
                    a => format!(" (dpkg --add-architecture {} && apt-get update)", a.debian()),
                };
                Error::new(Kind::Tool, format!("apt knows no package {}{hint}", package(arch)))
            })?
        }
    };
    let root = cache_root(arch);
    let dest_dir = root.join(version_dir(&version));
    let dest = dest_dir.join("busybox");
    if dest.is_file() {
        return Ok(dest);
    }
    let deb = download(&version, arch)?;
    std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    let tmp = TempDir::new_in(&root, &format!(".{}", version_dir(&version)))?;
    unpack(&deb, tmp.path(), arch)?;
    match std::fs::rename(tmp.path().join("out"), &dest_dir) {
        Ok(()) => Ok(dest),
        // Another process unpacked it first.
        Err(_) if dest.is_file() => Ok(dest),
        Err(e) => Err(Error::io(&dest_dir, e)),
    }
}

fn find_deb(debs: &Path, version: &str, arch: Arch) -> Option<PathBuf> {
    // apt writes an epoch's ':' as %3a in file names.
    let prefix = format!("{PACKAGE}_{}_", version.replace(':', "%3a"));
    let suffix = format!("_{}.deb", arch.debian());
    std::fs::read_dir(debs).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        p.file_name().map(|n| n.to_string_lossy()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(&suffix))
    })
}

fn download(version: &str, arch: Arch) -> Result<PathBuf> {
    let debs = fsutil::cache_dir().join("debs");
    if let Some(d) = find_deb(&debs, version, arch) {
        return Ok(d);
    }
    std::fs::create_dir_all(&debs).map_err(|e| Error::io(&debs, e))?;
    let spec = format!("{}={version}", package(arch));
    progress::status(&format!("downloading {spec}"));
    run_tool(
        Command::new("apt-get").current_dir(&debs).args(["download", "-qq", &spec]),
        &format!("downloading {spec}"),
        "apt",
    )?;
    find_deb(&debs, version, arch)
        .ok_or_else(|| Error::file(Kind::Tool, &debs, format!("apt-get download left no .deb for {spec}")))
}

/// Unpack the .deb into `tmp/x` and leave `tmp/out/busybox`, checked to be
/// an ELF executable of `arch`.
fn unpack(deb: &Path, tmp: &Path, arch: Arch) -> Result<()> {
    let x = tmp.join("x");
    run_tool(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&x), &format!("unpacking {}", deb.display()), "dpkg")?;
    let bin = x.join("bin/busybox");
    let head = std::fs::read(&bin).map_err(|_| Error::file(Kind::Tool, deb, "package holds no bin/busybox"))?;
    let Some(machine) = crate::elf::machine_of(&head) else {
        return Err(Error::file(Kind::Tool, deb, "bin/busybox in the package is not an ELF executable"));
    };
    if machine != arch.machine() {
        return Err(Error::file(
            Kind::Tool,
            deb,
            format!("bin/busybox is for e_machine {}, not {}", machine.0, arch.debian()),
        ));
    }
    let out = tmp.join("out");
    std::fs::create_dir(&out).map_err(|e| Error::io(&out, e))?;
    let dest = out.join("busybox");
    std::fs::rename(&bin, &dest).map_err(|e| Error::io(&dest, e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).map_err(|e| Error::io(&dest, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_become_plain_directory_names() {
        assert_eq!(version_dir("1:1.35.0-4+deb12u1+b1"), "1_1.35.0-4+deb12u1+b1");
        assert_eq!(version_dir("1.36.1-9~bpo"), "1.36.1-9~bpo");
        assert_eq!(version_dir("a/b"), "a_b");
    }

    #[test]
    fn debs_are_found_with_escaped_epochs() {
        let tmp = TempDir::new("busybox-test").unwrap();
        std::fs::write(tmp.path().join("busybox-static_1%3a1.35.0-4_amd64.deb"), b"").unwrap();
        std::fs::write(tmp.path().join("busybox_1%3a1.35.0-4_amd64.deb"), b"").unwrap();
        std::fs::write(tmp.path().join("busybox-static_1%3a1.35.0-4_arm64.deb"), b"").unwrap();
        let d = find_deb(tmp.path(), "1:1.35.0-4", Arch::Amd64).unwrap();
        assert!(d.ends_with("busybox-static_1%3a1.35.0-4_amd64.deb"));
        let d = find_deb(tmp.path(), "1:1.35.0-4", Arch::Arm64).unwrap();
        assert!(d.ends_with("busybox-static_1%3a1.35.0-4_arm64.deb"));
        assert!(find_deb(tmp.path(), "1:1.36", Arch::Amd64).is_none());
    }

    #[test]
    fn a_deb_without_busybox_is_refused_with_its_name() {
        let tmp = TempDir::new("busybox-test").unwrap();
        let deb = tmp.path().join("not-a.deb");
        std::fs::write(&deb, b"not a deb").unwrap();
        let err = unpack(&deb, tmp.path(), Arch::Amd64).unwrap_err();
        assert!(err.to_string().contains("not-a.deb") || err.to_string().contains("dpkg-deb"), "{err}");
    }
}
