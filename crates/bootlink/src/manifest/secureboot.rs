//! Secure Boot signatures of the bzImage `manifest write --bzimage` writes.
//! A new manifest changes the kernel image, so any Authenticode signature
//! it had no longer matches: with a key the new image is signed with
//! Debian's `sbsign` (sbsigntool) and checked with `sbverify --cert`;
//! without one the caller says on stderr that the image is unsigned.

use std::path::Path;
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::hosttool;

/// Can `image` be signed for Secure Boot with `key` and `cert`: a PE
/// image (a bzImage with the EFI stub, CONFIG_EFI_STUB), key and
/// certificate regular files, sbsign installed. Checked before anything
/// is written.
pub(crate) fn check_signable(image: &Path, key: &Path, cert: &Path) -> Result<()> {
    for p in [key, cert] {
        crate::fsutil::open_input(p)?;
    }
    let mut head = vec![0u8; 4096];
    let (mut f, _) = crate::fsutil::open_input(image)?;
    let n = std::io::Read::read(&mut f, &mut head).map_err(|e| Error::io(image, e))?;
    head.truncate(n);
    let pe = crate::elf::read_u32(&head, 0x3c).map(|o| o as usize);
    let is_pe = head.starts_with(b"MZ") && pe.and_then(|o| head.get(o..o + 4)).is_some_and(|s| s == b"PE\0\0");
    if !is_pe {
        return Err(Error::file(
            Kind::Unsupported,
            image,
            "not a PE image (a kernel built without CONFIG_EFI_STUB): it cannot be signed for Secure Boot",
        ));
    }
    if !hosttool::exists("sbsign") || !hosttool::exists("sbverify") {
        return Err(Error::new(
            Kind::Tool,
            "sbsign: missing tool, needed to sign the bzImage for Secure Boot (install the Debian package sbsigntool)",
        ));
    }
    Ok(())
}

/// Sign the PE image `image` in place (atomically) with `key` and `cert`
/// (PEM), then check the signed image against `cert`.
pub fn sign(image: &Path, key: &Path, cert: &Path) -> Result<()> {
    check_signable(image, key, cert)?;
    let dir = image.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new().prefix(".bootlink-sbsign.").tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
    let what = format!("signing {} for Secure Boot", image.display());
    hosttool::run(
        Command::new("sbsign").arg("--key").arg(key).arg("--cert").arg(cert).arg("--output").arg(tmp.path()).arg(image),
        &what,
        "sbsigntool",
    )
    .map_err(|e| e.at(image))?;
    hosttool::run(
        Command::new("sbverify").arg("--cert").arg(cert).arg(tmp.path()),
        &format!("checking the signature of {}", image.display()),
        "sbsigntool",
    )
    .map_err(|e| {
        Error::file(Kind::Internal, image, format!("the signed image does not verify: {}", e.msg)).because(e)
    })?;
    let mode = std::fs::metadata(image).map(|m| m.permissions()).map_err(|e| Error::io(image, e))?;
    tmp.as_file().set_permissions(mode).map_err(|e| Error::io(image, e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(image, e))?;
    tmp.persist(image).map_err(|e| Error::io(image, e.error))?;
    Ok(())
}
