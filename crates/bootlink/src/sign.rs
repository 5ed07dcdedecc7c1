//! Module signatures in the kernel's format: the module's bytes, then a
//! detached PKCS#7 (CMS) signature in DER with no signed attributes and no
//! certificates, then `struct module_signature` (id_type PKEY_ID_PKCS7 = 2,
//! sig_len big-endian), then the magic string. The CMS is made by the
//! `openssl` command, as the kernel's own scripts/sign-file does with libcrypto.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};
use crate::module::SIG_MAGIC;

pub const PKEY_ID_PKCS7: u8 = 2;

#[derive(Debug, Clone)]
pub struct SignKey {
    pub key: PathBuf,
    pub cert: PathBuf,
    pub hash: Hash,
}

/// The digest of a module signature (the kernel accepts these for modules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    /// The name openssl's `-md` takes.
    pub fn name(self) -> &'static str {
        match self {
            Hash::Sha256 => "sha256",
            Hash::Sha384 => "sha384",
            Hash::Sha512 => "sha512",
        }
    }
}

impl SignKey {
    /// The key's and the certificate's files: inputs no output may be.
    pub(crate) fn files(&self) -> [&std::path::Path; 2] {
        [&self.key, &self.cert]
    }

    pub fn check(&self) -> Result<()> {
        for p in [&self.key, &self.cert] {
            std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
        }
        Ok(())
    }
}

/// The trailer that follows the PKCS#7 blob.
pub fn trailer(sig_len: usize) -> Vec<u8> {
    let mut t = crate::bytes::LeWriter::default();
    t.bytes(&[0u8, 0, PKEY_ID_PKCS7, 0, 0, 0, 0, 0]);
    t.be_u32(sig_len as u32);
    t.bytes(SIG_MAGIC);
    t.into_inner()
}

/// Sign `elf` (a module without signature) and return module + signature.
/// `scratch` is a directory for the temporary files openssl needs.
pub fn sign(elf: &[u8], key: &SignKey, scratch: &Path, tag: &str) -> Result<Vec<u8>> {
    let temp = |suffix: &str| {
        tempfile::Builder::new()
            .prefix(&format!(".bootlink-sign-{tag}-"))
            .suffix(suffix)
            .tempfile_in(scratch)
            .map_err(|e| Error::io(scratch, e))
    };
    // Both are removed when dropped, whatever happens below.
    let (input, output) = (temp(".in")?, temp(".p7s")?);
    std::fs::write(input.path(), elf).map_err(|e| Error::io(input.path(), e))?;
    let res = Command::new("openssl")
        .args([
            "cms",
            "-sign",
            "-binary",
            "-noattr",
            "-nocerts",
            "-nosmimecap",
            "-outform",
            "DER",
            "-md",
            key.hash.name(),
        ])
        .arg("-signer")
        .arg(&key.cert)
        .arg("-inkey")
        .arg(&key.key)
        .arg("-in")
        .arg(input.path())
        .arg("-out")
        .arg(output.path())
        .output();
    let out = res.map_err(|e| {
        (match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::new(Kind::Tool, "openssl: missing tool, needed to sign modules (apt-get install openssl)")
            }
            _ => Error::new(Kind::Tool, format!("openssl: {e}")),
        })
        .because(e)
    })?;
    let sig = std::fs::read(output.path());
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("").trim();
        return Err(Error::file(Kind::Tool, &key.key, format!("signing failed (openssl cms): {first}")));
    }
    let sig = sig.map_err(|e| Error::io(output.path(), e))?;
    let mut m = Vec::with_capacity(elf.len() + sig.len() + 40);
    m.extend_from_slice(elf);
    m.extend_from_slice(&sig);
    m.extend_from_slice(&trailer(sig.len()));
    Ok(m)
}
