//! The module signing key of bootlink's kernel builds: generated once with
//! openssl (RSA-4096, SHA-256, like Debian's), kept in the cache. The build
//! embeds its certificate in the kernel's built-in keyring and signs the
//! modules with it; `bootlink preresolve --sign-key/--sign-cert` re-signs
//! rewritten modules with the same key.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::{fsutil, hosttool};

const GENKEY: &str = "[ req ]
default_bits = 4096
distinguished_name = req_distinguished_name
prompt = no
string_mask = utf8only
x509_extensions = myexts

[ req_distinguished_name ]
O = bootlink
CN = bootlink lab kernel module signing key

[ myexts ]
basicConstraints=critical,CA:FALSE
keyUsage=digitalSignature
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
";

#[derive(Debug, Clone)]
pub(crate) struct SigningKey {
    /// Private key and certificate, PEM (what CONFIG_MODULE_SIG_KEY takes).
    pub pem: PathBuf,
    /// The certificate alone, PEM.
    pub cert: PathBuf,
}

/// The key in `dir` (`module-signing.pem`, `module-signing.crt`), made if
/// absent. Written atomically: a killed run leaves no half key. Made under
/// a lock: two builds starting at once on an empty cache (two tests of a
/// cold run) would otherwise each make a key, build keys that differ by
/// their certificate, and one of them relink the kernel in the object tree
/// the other had just finished in (seen as "no vmlinux here" in a cold
/// `make test`), or leave one's certificate beside the other's key.
///
/// Sealed ([`crate::cache`]) and checked on every use. A key without a
/// seal (made by an older bootlink) is kept when openssl reads both files
/// and the certificate is the key's own, and sealed then: every kernel
/// build in the cache is keyed by its certificate. A damaged key is made
/// again (and the builds with it).
pub(crate) fn ensure(dir: &Path) -> Result<SigningKey> {
    let key = SigningKey { pem: dir.join("module-signing.pem"), cert: dir.join("module-signing.crt") };
    if crate::cache::check(dir).is_ok() {
        return Ok(key);
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let lock_path = dir.join(".lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    // Made by another process while this one waited.
    if crate::cache::check(dir).is_ok() {
        return Ok(key);
    }
    let files = [
        (PathBuf::from("module-signing.pem"), crate::cache::Check::Content),
        (PathBuf::from("module-signing.crt"), crate::cache::Check::Content),
    ];
    if !dir.join(crate::cache::SEAL).exists() && own_certificate(&key) {
        crate::cache::seal(dir, &files)?;
        return Ok(key);
    }
    crate::cache::intact(dir, "the module signing key");
    let tmp = tempfile::Builder::new().prefix(".key-").tempdir_in(dir).map_err(|e| Error::io(dir, e))?;
    let cnf = tmp.path().join("x509.genkey");
    std::fs::write(&cnf, GENKEY).map_err(|e| Error::io(&cnf, e))?;
    let pem = tmp.path().join("key.pem");
    hosttool::run(
        Command::new("openssl")
            .args(["req", "-new", "-nodes", "-utf8", "-sha256", "-days", "36500", "-batch", "-x509", "-outform", "PEM"])
            .arg("-config")
            .arg(&cnf)
            .arg("-out")
            .arg(&pem)
            .arg("-keyout")
            .arg(&pem),
        "generating the module signing key",
        "openssl",
    )?;
    let cert = hosttool::run(
        Command::new("openssl").args(["x509", "-outform", "PEM", "-in"]).arg(&pem),
        "extracting the signing certificate",
        "openssl",
    )?;
    let data = std::fs::read(&pem).map_err(|e| Error::io(&pem, e))?;
    fsutil::write_atomic(&key.cert, cert.as_bytes())?;
    fsutil::write_atomic(&key.pem, &data)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key.pem, std::fs::Permissions::from_mode(0o600)).map_err(|e| Error::io(&key.pem, e))?;
    crate::cache::seal(dir, &files)?;
    Ok(key)
}

/// Whether openssl reads the key and the certificate as regular files,
/// and the certificate's public key is the key's.
fn own_certificate(key: &SigningKey) -> bool {
    let regular = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    if !regular(&key.pem) || !regular(&key.cert) {
        return false;
    }
    let public = |args: &[&str], file: &Path| {
        let o = Command::new("openssl").args(args).arg(file).output().ok()?;
        (o.status.success() && !o.stdout.is_empty()).then_some(o.stdout)
    };
    let from_key = public(&["pkey", "-pubout", "-in"], &key.pem);
    let from_cert = public(&["x509", "-noout", "-pubkey", "-in"], &key.cert);
    from_key.is_some() && from_key == from_cert
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds starting at once on an empty cache get one key: the same
    /// certificate for all, and the certificate is the key's own.
    #[test]
    fn builds_starting_at_once_make_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let made: Vec<(Vec<u8>, Vec<u8>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let k = ensure(&keys).unwrap();
                        (std::fs::read(&k.cert).unwrap(), std::fs::read(&k.pem).unwrap())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(made.windows(2).all(|w| w[0] == w[1]), "every caller saw the same key and certificate");
        let k = ensure(&keys).unwrap();
        let from_key = hosttool::run(
            Command::new("openssl").args(["x509", "-outform", "PEM", "-in"]).arg(&k.pem),
            "extracting the certificate",
            "openssl",
        )
        .unwrap();
        assert_eq!(from_key.as_bytes(), &made[0].0[..], "the certificate is the key's own");
        let generated = std::fs::read_dir(&keys)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name() != ".lock" && e.file_name() != crate::cache::SEAL)
            .count();
        assert_eq!(generated, 2, "the key and the certificate, no temporary left");
        assert_eq!(crate::cache::check(&keys), Ok(()), "sealed");
    }

    /// A damaged key is made again; a key an older bootlink made (no seal)
    /// is kept when it is whole, and sealed.
    #[test]
    fn a_damaged_key_is_made_again_and_an_old_whole_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let k = ensure(&keys).unwrap();
        let cert = std::fs::read(&k.cert).unwrap();
        // Made by an older bootlink: no seal, kept.
        std::fs::remove_file(keys.join(crate::cache::SEAL)).unwrap();
        ensure(&keys).unwrap();
        assert_eq!(std::fs::read(&k.cert).unwrap(), cert, "a whole key without a seal is kept");
        assert_eq!(crate::cache::check(&keys), Ok(()), "and sealed");
        // The key cut short: made again, another certificate.
        let pem = std::fs::read(&k.pem).unwrap();
        std::fs::write(&k.pem, &pem[..pem.len() / 2]).unwrap();
        ensure(&keys).unwrap();
        assert_ne!(std::fs::read(&k.cert).unwrap(), cert, "a damaged key is made again");
        assert_eq!(crate::cache::check(&keys), Ok(()));
        // Damaged and unsealed: not kept either.
        let cert = std::fs::read(&k.cert).unwrap();
        std::fs::remove_file(keys.join(crate::cache::SEAL)).unwrap();
        std::fs::write(&k.cert, b"-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap();
        ensure(&keys).unwrap();
        assert_ne!(std::fs::read(&k.cert).unwrap(), cert);
        assert_eq!(crate::cache::check(&keys), Ok(()));
    }
}
