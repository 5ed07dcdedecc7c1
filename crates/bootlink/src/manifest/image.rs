//! The manifest in an arm64 `Image`: arch/arm64/boot/Image is `objcopy -O
//! binary` of vmlinux, the loadable bytes from `_text` on (head.S puts
//! `_text` at the Image's first byte). The reserved section is found in
//! the vmlinux the Image was made from, at `sh_addr - _text` in the Image;
//! that the two are the same build is checked on the section's own bytes
//! and on the head of `.rodata` before anything is written.

use std::path::Path;

use object::read::elf::{SectionHeader, Sym};

use super::{FillReport, Manifest, SECTION};
use crate::elf::{Elf, LE, Want};
use crate::error::{Error, Kind, Result};

/// The arm64 boot header's magic, at 0x38 of an Image.
const ARM64_MAGIC: &[u8; 4] = b"ARM\x64";

/// Whether `data` starts like an arm64 Image (its boot header's magic).
pub(crate) fn is_arm64_image(data: &[u8]) -> bool {
    data.get(0x38..0x3c) == Some(&ARM64_MAGIC[..])
}

/// How many bytes of `.rodata`'s head must be the same in both files.
const ANCHOR: usize = 4096;

/// Where a vmlinux section lies in the Image: (offset in the Image,
/// offset in vmlinux, size).
fn place(elf: &Elf, text: u64, name: &str, vmlinux: &Path) -> Result<Option<(usize, usize, usize)>> {
    let Some((_, sh)) = elf.section(name) else { return Ok(None) };
    let Some((off, size)) = elf.reserved_range(name).map_err(|e| e.at(vmlinux))? else { return Ok(None) };
    let addr = sh.sh_addr(LE);
    let at = addr.checked_sub(text).ok_or_else(|| {
        Error::file(Kind::Format, vmlinux, format!("{name} at {addr:#x} lies below _text ({text:#x})"))
    })?;
    Ok(Some((at as usize, off, size)))
}

/// Where the reserved section lies in `data` (the bytes of `image`, an
/// arm64 Image made from `vmlinux`): (offset, size), after checking that
/// the two are the same build.
fn locate(image: &Path, data: &[u8], vmlinux: &Path) -> Result<(usize, usize)> {
    let elf_data = crate::fsutil::read_input(vmlinux, crate::fsutil::MAX_BINARY)?;
    let elf = Elf::parse_for(&elf_data, Want::Executable, &[object::elf::EM_AARCH64]).map_err(|e| e.at(vmlinux))?;
    let symbols = elf.symbols().map_err(|e| e.at(vmlinux))?;
    let text = symbols
        .iter()
        .find(|s| symbols.symbol_name(LE, s).ok() == Some(&b"_text"[..]))
        .map(|s| s.st_value(LE))
        .ok_or_else(|| Error::file(Kind::Format, vmlinux, "no _text symbol: not an arm64 kernel's vmlinux"))?;
    if !is_arm64_image(data) {
        return Err(Error::file(Kind::Format, image, "not an arm64 Image (no ARM\\x64 magic at 0x38)"));
    }
    let (at, off, size) = place(&elf, text, SECTION, vmlinux)?.ok_or_else(|| {
        Error::file(
            Kind::WrongKernel,
            vmlinux,
            format!("no {SECTION} section: a kernel built without bootlink's module hashes"),
        )
    })?;
    // The same build: the head of .rodata agrees, and the reserved bytes
    // are the vmlinux's or hold a manifest already.
    let same = |at: usize, off: usize, len: usize| {
        at.checked_add(len).is_some_and(|end| end <= data.len()) && data[at..at + len] == elf_data[off..off + len]
    };
    let rodata = place(&elf, text, ".rodata", vmlinux)?;
    let anchored = rodata.is_some_and(|(a, o, s)| same(a, o, s.min(ANCHOR)));
    let inside = at.checked_add(size).is_some_and(|end| end <= data.len());
    let reserved = inside && (same(at, off, size) || Manifest::decode(&data[at..at + size]).is_ok_and(|m| m.is_some()));
    if !anchored || !reserved {
        return Err(Error::file(
            Kind::WrongKernel,
            image,
            format!("not the Image of {} (its {SECTION} or .rodata differ)", vmlinux.display()),
        ));
    }
    Ok((at, size))
}

/// Write `image` (an arm64 Image made from `vmlinux`) with `manifest` in
/// its reserved section to `out`, atomically.
pub(crate) fn fill_image(image: &Path, vmlinux: &Path, manifest: &Manifest, out: &Path) -> Result<FillReport> {
    let mut staged = crate::fsutil::Staged::new();
    let report = fill_image_staged(image, vmlinux, manifest, out, &mut staged)?;
    staged.commit()?;
    Ok(report)
}

/// [`fill_image`] into `staged`, put in place with the command's other
/// outputs.
pub(crate) fn fill_image_staged(
    image: &Path,
    vmlinux: &Path,
    manifest: &Manifest,
    out: &Path,
    staged: &mut crate::fsutil::Staged,
) -> Result<FillReport> {
    let data = crate::fsutil::read_input(image, crate::fsutil::MAX_BINARY)?;
    let (at, size) = locate(image, &data, vmlinux)?;
    Ok(super::put_and_stage(data, at, size, manifest, vmlinux, out, staged)?.0)
}

/// The manifest in an arm64 Image (None: empty), placed by its vmlinux.
pub fn read_image(image: &Path, vmlinux: &Path) -> Result<Option<Manifest>> {
    let data = crate::fsutil::read_input(image, crate::fsutil::MAX_BINARY)?;
    let (at, size) = locate(image, &data, vmlinux)?;
    super::decoded(&data[at..at + size], image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_told_by_its_boot_header() {
        let mut d = vec![0u8; 64];
        assert!(!is_arm64_image(&d));
        d[0x38..0x3c].copy_from_slice(ARM64_MAGIC);
        assert!(is_arm64_image(&d));
        assert!(!is_arm64_image(&d[..0x3a]));
    }
}
