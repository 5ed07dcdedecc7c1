//! Secure Boot signing of a kernel image (`manifest write --bzimage
//! --sign-key KEY --sign-cert CERT`): Debian's sbsign on a real EFI-stub
//! bzImage (Debian's vmlinuz), checked with sbverify against the
//! certificate, with a key made here by openssl. The self-built lab kernel
//! has no EFI stub: tests/boots/manifest_inputs.rs shows it refused before
//! anything is written.

use crate::common;

use std::path::Path;
use std::process::Command;

use bootlink::manifest::secureboot;
use common::*;

fn verifies(image: &Path, cert: &Path) -> bool {
    Command::new("sbverify").arg("--cert").arg(cert).arg(image).output().unwrap().status.success()
}

#[test]
fn a_kernel_image_is_signed_and_verifies_against_its_certificate_only() {
    if !bootlink::hosttool::exists("sbsign") {
        return skip("manifest_signing", "sbsign is not installed (scripts/install-deps installs sbsigntool)");
    }
    let dir = tmpdir("sbsign");
    let (key, cert) = key_pair(&dir, "ours");
    let (_, other) = key_pair(&dir, "other");
    let image = copy_to(&kernel().vmlinuz, &dir, "bzImage");
    assert!(!verifies(&image, &cert), "not signed with our key before");
    secureboot::sign(&image, &key, &cert).unwrap();
    assert!(verifies(&image, &cert), "signed with our key");
    assert!(!verifies(&image, &other), "and not with another certificate");
    // The kernel inside is unchanged: the signature is appended to the PE image.
    let inside = bootlink::kernel::extract_vmlinux(&image).unwrap();
    let before = bootlink::kernel::extract_vmlinux(&kernel().vmlinuz).unwrap();
    assert!(inside.data[..] == before.data[..]);
    // Not a PE image: refused in one line, the file untouched.
    let plain = dir.join("vmlinux");
    std::fs::write(&plain, &before.data[..4096]).unwrap();
    let e = secureboot::sign(&plain, &key, &cert).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: not a PE image (a kernel built without CONFIG_EFI_STUB): it cannot be signed for Secure Boot",
            plain.display()
        )
    );
    assert_eq!(std::fs::read(&plain).unwrap(), &before.data[..4096]);
    // A FIFO as the key is refused without blocking.
    let fifo = dir.join("key.pem");
    sh("mkfifo", &[fifo.to_str().unwrap()]);
    let e = secureboot::sign(&image, &fifo, &cert).unwrap_err().to_string();
    assert!(e.contains("is a FIFO"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
