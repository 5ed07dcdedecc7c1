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
pub(crate) fn ensure(dir: &Path) -> Result<SigningKey> {
    let key = SigningKey { pem: dir.join("module-signing.pem"), cert: dir.join("module-signing.crt") };
    if key.pem.is_file() && key.cert.is_file() {
        return Ok(key);
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let lock_path = dir.join(".lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    // Made by another process while this one waited: the certificate is
    // written before the key, so both are there once the key is.
    if key.pem.is_file() && key.cert.is_file() {
        return Ok(key);
    }
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
    Ok(key)
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
        let generated = std::fs::read_dir(&keys).unwrap().flatten().filter(|e| e.file_name() != ".lock").count();
        assert_eq!(generated, 2, "the key and the certificate, no temporary left");
    }
}
