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
    /// "sha256", "sha384" or "sha512".
    pub hash: String,
}

impl SignKey {
    pub fn check(&self) -> Result<()> {
        for p in [&self.key, &self.cert] {
            std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
        }
        if !["sha256", "sha384", "sha512"].contains(&self.hash.as_str()) {
            return Err(Error::new(Kind::Usage, format!("--sign-hash {}: use sha256, sha384 or sha512", self.hash)));
        }
        Ok(())
    }
}

/// The trailer that follows the PKCS#7 blob.
pub fn trailer(sig_len: usize) -> Vec<u8> {
    let mut t = vec![0u8, 0, PKEY_ID_PKCS7, 0, 0, 0, 0, 0];
    t.extend_from_slice(&(sig_len as u32).to_be_bytes());
    t.extend_from_slice(SIG_MAGIC);
    t
}

/// Sign `elf` (a module without signature) and return module + signature.
/// `scratch` is a directory for the temporary files openssl needs.
pub fn sign(elf: &[u8], key: &SignKey, scratch: &Path, tag: &str) -> Result<Vec<u8>> {
    let input = scratch.join(format!(".bootlink-sign-{tag}-{}.in", std::process::id()));
    let output = input.with_extension("p7s");
    std::fs::write(&input, elf).map_err(|e| Error::io(&input, e))?;
    let res = Command::new("openssl")
        .args(["cms", "-sign", "-binary", "-noattr", "-nocerts", "-nosmimecap", "-outform", "DER", "-md", &key.hash])
        .arg("-signer")
        .arg(&key.cert)
        .arg("-inkey")
        .arg(&key.key)
        .arg("-in")
        .arg(&input)
        .arg("-out")
        .arg(&output)
        .output();
    let _ = std::fs::remove_file(&input);
    let out = res.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::new(Kind::Tool, "openssl: missing tool, needed to sign modules (apt-get install openssl)")
        }
        _ => Error::new(Kind::Tool, format!("openssl: {e}")),
    })?;
    let sig = std::fs::read(&output);
    let _ = std::fs::remove_file(&output);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("").trim();
        return Err(Error::file(Kind::Tool, &key.key, format!("signing failed (openssl cms): {first}")));
    }
    let sig = sig.map_err(|e| Error::io(&output, e))?;
    let mut m = Vec::with_capacity(elf.len() + sig.len() + 40);
    m.extend_from_slice(elf);
    m.extend_from_slice(&sig);
    m.extend_from_slice(&trailer(sig.len()));
    Ok(m)
}
