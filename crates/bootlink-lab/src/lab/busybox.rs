//! A static busybox for the lab's initramfs: Debian's `busybox-static`,
//! downloaded with `apt-get download` into `<cache>/debs` and unpacked once
//! into `<cache>/busybox/<version>/busybox` (the host's amd64), or, for
//! another architecture's guest, `busybox-static:<arch>` (a foreign
//! package: dpkg must know the architecture) into
//! `<cache>/busybox/<arch>/<version>/busybox`.

use std::path::{Path, PathBuf};

use crate::lab::debs;
use bootlink::error::{Error, Kind, Result};
use bootlink::fetch::Arch;
use bootlink::fsutil;
use bootlink::fsutil::TempDir;

pub(crate) const PACKAGE: &str = "busybox-static";

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
        .map(|e| e.path())
        .filter(|d| bootlink::cache::check(d).is_ok())
        .map(|d| d.join("busybox"))
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
    let version = match debs::candidate(PACKAGE, arch) {
        Ok(Some(v)) => v,
        Err(e) => return cached(arch).ok_or(e),
        // Offline or no package lists: a cached busybox will do.
        Ok(None) => match cached(arch) {
            Some(p) => return Ok(p),
            None => debs::candidate_after_update(PACKAGE, arch)?,
        },
    };
    let root = cache_root(arch);
    let dest_dir = root.join(debs::version_dir(&version));
    let dest = dest_dir.join("busybox");
    // Used only as sealed (bootlink::cache): a damaged one is unpacked again.
    if bootlink::cache::intact(&dest_dir, "busybox") {
        return Ok(dest);
    }
    std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    let tmp = TempDir::new_in(&root, &format!(".{}", debs::version_dir(&version)))?;
    debs::with_deb(PACKAGE, &version, arch, |deb| {
        let _ = std::fs::remove_dir_all(tmp.path().join("x"));
        let _ = std::fs::remove_dir_all(tmp.path().join("out"));
        unpack(deb, tmp.path(), arch)
    })?;
    let out = tmp.path().join("out");
    bootlink::cache::seal(&out, &[(PathBuf::from("busybox"), bootlink::cache::Check::Content)])?;
    bootlink::cache::install(&out, &dest_dir)?;
    Ok(dest)
}

/// Unpack the .deb into `tmp/x` and leave `tmp/out/busybox`, checked to be
/// an ELF executable of `arch`.
fn unpack(deb: &Path, tmp: &Path, arch: Arch) -> Result<()> {
    let x = tmp.join("x");
    debs::unpack(deb, &x)?;
    let bin = x.join("bin/busybox");
    let head = std::fs::read(&bin).map_err(|_| Error::file(Kind::Tool, deb, "package holds no bin/busybox"))?;
    if let Some(why) = bootlink::elf::wrong_machine(&head, arch.machine()) {
        return Err(Error::file(Kind::Tool, deb, format!("bin/busybox in the package: {why}")));
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
    fn a_deb_without_busybox_is_refused_with_its_name() {
        let tmp = TempDir::new("busybox-test").unwrap();
        let deb = tmp.path().join("not-a.deb");
        std::fs::write(&deb, b"not a deb").unwrap();
        let err = unpack(&deb, tmp.path(), Arch::Amd64).unwrap_err();
        assert!(err.to_string().contains("not-a.deb") || err.to_string().contains("dpkg-deb"), "{err}");
    }
}
