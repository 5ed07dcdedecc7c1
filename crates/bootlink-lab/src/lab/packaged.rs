//! Programs for a guest of another architecture than the host's: Debian's
//! own packages of that architecture (`kmod:arm64` and the libraries it
//! links), unpacked once into `<cache>/userspace/<arch>/<key>/`, and a
//! program's closure read from its ELF files (PT_INTERP, then DT_NEEDED,
//! library by library), since the host's `ldd` cannot run a foreign
//! program. A library no package holds is an error naming it, never a
//! guest that fails later.

use std::path::{Path, PathBuf};

use object::read::elf::{Dyn as _, FileHeader as _, ProgramHeader as _};

use crate::lab::Initramfs;
use crate::lab::debs;
use bootlink::error::{Error, Kind, Result};
use bootlink::fetch::Arch;
use bootlink::fsutil;
use bootlink::fsutil::TempDir;

type Header = object::elf::FileHeader64<object::Endianness>;

/// kmod and what it links, as Debian's packages name them.
pub(crate) const KMOD_PACKAGES: &[&str] = &["kmod", "libkmod2", "liblzma5", "libzstd1", "libssl3", "libc6"];

/// The directory where `packages` of `arch` are unpacked together, fetched
/// and unpacked on first use; named by the packages and their versions.
pub(crate) fn root(packages: &[&str], arch: Arch) -> Result<PathBuf> {
    let mut versions = Vec::new();
    for p in packages {
        versions.push((*p, debs::candidate_or_update(p, arch)?));
    }
    let key: String = versions.iter().map(|(p, v)| format!("{p}={v}\n")).collect();
    let base = fsutil::cache_dir().join("userspace").join(arch.debian());
    let dir = base.join(&fsutil::hex(&<sha2::Sha256 as sha2::Digest>::digest(key.as_bytes()))[..16]);
    // Used only as sealed (bootlink::cache): a damaged one is unpacked again.
    if bootlink::cache::intact(&dir, "the unpacked packages") {
        return Ok(dir);
    }
    std::fs::create_dir_all(&base).map_err(|e| Error::io(&base, e))?;
    let tmp = TempDir::new_in(&base, ".unpacking")?;
    let out = tmp.path().join("root");
    for (p, v) in &versions {
        // (A kept .deb that does not unpack is downloaded again and
        // unpacked over what it left: the same version's files.)
        debs::with_deb(p, v, arch, |deb| debs::unpack(deb, &out))?;
    }
    fsutil::write_atomic(&out.join(".packages"), key.as_bytes())?;
    bootlink::cache::seal_tree(&out, |_| Some(bootlink::cache::Check::Content))?;
    bootlink::cache::install(&out, &dir)?;
    Ok(dir)
}

/// Follow `guest` (an absolute path as the guest sees it) through symlinks
/// inside `root`, as the guest's kernel would: the host file holding it.
fn resolve(root: &Path, guest: &str) -> Option<PathBuf> {
    let mut path = PathBuf::from(guest.trim_start_matches('/'));
    for _ in 0..40 {
        // Resolve each component in turn, so links in directories count too.
        let mut at = PathBuf::new();
        let mut relinked = None;
        for c in path.components() {
            at.push(c);
            let host = root.join(&at);
            let meta = std::fs::symlink_metadata(&host).ok()?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&host).ok()?;
                let rest = path.strip_prefix(&at).ok()?.to_path_buf();
                let base = if target.is_absolute() {
                    PathBuf::from(target.to_string_lossy().trim_start_matches('/'))
                } else {
                    at.parent().unwrap_or(Path::new("")).join(target)
                };
                relinked = Some(normalize(&base.join(rest)));
                break;
            }
        }
        match relinked {
            Some(p) => path = p,
            None => return Some(root.join(path)).filter(|p| p.is_file()),
        }
    }
    None
}

/// `a/b/../c` -> `a/c`, never above the root.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// What a dynamic ELF file asks of the loader: its interpreter (PT_INTERP)
/// and the libraries it needs (DT_NEEDED), checked to be for `arch`.
fn needs(file: &Path, arch: Arch) -> Result<(Option<String>, Vec<String>)> {
    let data = fsutil::read_input(file, fsutil::MAX_BINARY)?;
    let bad = |what: &str| Error::file(Kind::Format, file, what.to_string());
    if let Some(why) = bootlink::elf::wrong_machine(&data, arch.machine()) {
        return Err(bad(&why));
    }
    let header = Header::parse(&*data).map_err(|_| bad("corrupt ELF header"))?;
    let endian = header.endian().map_err(|_| bad("corrupt ELF header"))?;
    let mut interp = None;
    for ph in header.program_headers(endian, &*data).map_err(|_| bad("corrupt program headers"))? {
        if ph.p_type(endian) == object::elf::PT_INTERP {
            let raw = ph.data(endian, &*data).map_err(|_| bad("PT_INTERP lies outside the file"))?;
            interp = Some(String::from_utf8_lossy(raw.split(|&b| b == 0).next().unwrap_or_default()).into_owned());
        }
    }
    let sections = header.sections(endian, &*data).map_err(|_| bad("corrupt section headers"))?;
    let mut needed = Vec::new();
    if let Some((entries, link)) = sections.dynamic(endian, &*data).map_err(|_| bad("corrupt .dynamic"))? {
        let strings = sections.strings(endian, &*data, link).map_err(|_| bad("corrupt .dynstr"))?;
        for d in entries {
            if d.tag(endian) == object::elf::DT_NEEDED {
                let name = d.string(endian, strings).map_err(|_| bad("a DT_NEEDED name lies outside .dynstr"))?;
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok((interp, needed))
}

/// The files `program` (a guest path inside `root`) needs to run in the
/// guest: (guest path, host file) for itself, its interpreter at the path
/// PT_INTERP names, and each library in the guest's multiarch directory.
pub(crate) fn closure(root: &Path, program: &str, arch: Arch) -> Result<Vec<(String, PathBuf)>> {
    let host = resolve(root, program)
        .ok_or_else(|| Error::file(Kind::Tool, root, format!("{program}: not in the unpacked packages")))?;
    let mut files = vec![(program.to_string(), host.clone())];
    let (interp, mut queue) = needs(&host, arch)?;
    let interp =
        interp.ok_or_else(|| Error::file(Kind::Tool, &host, "no PT_INTERP: not a dynamically linked program"))?;
    let at = resolve(root, &interp).ok_or_else(|| {
        Error::file(Kind::Tool, root, format!("{program}: its interpreter {interp} is in no package"))
    })?;
    files.push((interp, at));
    let multiarch = arch.multiarch();
    let dirs = [format!("lib/{multiarch}"), format!("usr/lib/{multiarch}"), "lib".into(), "usr/lib".into()];
    let mut seen: Vec<String> = Vec::new();
    while let Some(name) = queue.pop() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let found = dirs.iter().find_map(|d| resolve(root, &format!("/{d}/{name}"))).ok_or_else(|| {
            Error::file(Kind::Tool, root, format!("{program} needs {name}, which none of the packages holds"))
        })?;
        let (_, more) = needs(&found, arch)?;
        queue.extend(more);
        files.push((format!("/lib/{multiarch}/{name}"), found));
    }
    Ok(files)
}

/// Put `program` from the packages of `arch` into the initramfs at
/// `dest`, with its interpreter and libraries.
pub(crate) fn add(ir: &mut Initramfs, packages: &[&str], arch: Arch, program: &str, dest: &str) -> Result<()> {
    let root = root(packages, arch)?;
    let found = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| format!("{d}/{program}"))
        .find(|p| resolve(&root, p).is_some())
        .ok_or_else(|| {
            Error::file(Kind::Tool, &root, format!("{program}: no such program in {}", packages.join(", ")))
        })?;
    for (i, (guest, host)) in closure(&root, &found, arch)?.into_iter().enumerate() {
        ir.copy_file_timed(if i == 0 { dest } else { &guest }, host);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library of another architecture, or a file that is no ELF at all,
    /// is refused naming the file and why.
    #[test]
    fn a_foreign_or_broken_file_is_refused_with_its_name() {
        let e = needs(Path::new("/bin/true"), Arch::Arm64).unwrap_err().to_string();
        assert!(e.contains("/bin/true") && e.contains("an ELF file for x86_64 (e_machine 62), not aarch64"), "{e}");
        let t = TempDir::new("packaged-test").unwrap();
        let text = t.path().join("libfake.so.1");
        std::fs::write(&text, b"INPUT(libc.so.6)\n").unwrap();
        let e = needs(&text, Arch::Arm64).unwrap_err().to_string();
        assert!(e.contains("libfake.so.1") && e.contains("not an ELF file"), "{e}");
        assert_eq!(
            needs(Path::new("/bin/true"), Arch::Amd64).unwrap().0.as_deref(),
            Some("/lib64/ld-linux-x86-64.so.2")
        );
    }

    #[test]
    fn links_resolve_inside_the_root() {
        let t = TempDir::new("packaged-test").unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("lib/aarch64-linux-gnu")).unwrap();
        std::fs::create_dir_all(r.join("usr")).unwrap();
        std::fs::write(r.join("lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"), b"x").unwrap();
        std::os::unix::fs::symlink("aarch64-linux-gnu/ld-linux-aarch64.so.1", r.join("lib/ld-linux-aarch64.so.1"))
            .unwrap();
        // An absolute link is the guest's root, not the host's.
        std::os::unix::fs::symlink("/lib", r.join("usr/lib")).unwrap();
        std::os::unix::fs::symlink("/lib/aarch64-linux-gnu/../ld-linux-aarch64.so.1", r.join("abs")).unwrap();
        let want = r.join("lib/aarch64-linux-gnu/ld-linux-aarch64.so.1");
        assert_eq!(resolve(r, "/lib/ld-linux-aarch64.so.1"), Some(want.clone()));
        assert_eq!(resolve(r, "/usr/lib/ld-linux-aarch64.so.1"), Some(want.clone()));
        assert_eq!(resolve(r, "/abs"), Some(want));
        assert_eq!(resolve(r, "/lib/missing.so"), None);
        std::os::unix::fs::symlink("loop", r.join("loop")).unwrap();
        assert_eq!(resolve(r, "/loop"), None);
    }
}
