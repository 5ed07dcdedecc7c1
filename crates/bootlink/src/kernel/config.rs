//! Kernel configuration: a `.config`/`config-<release>` file, or the copy the
//! kernel embeds with CONFIG_IKCONFIG (between `IKCFG_ST` and `IKCFG_ED`,
//! gzip-compressed).

use std::collections::HashMap;

use serde::Serialize;

use crate::compress::{self, Compression};

#[derive(Debug, Clone, Default)]
pub struct KernelConfig {
    values: HashMap<String, String>,
}

impl KernelConfig {
    pub fn parse(text: &str) -> KernelConfig {
        let mut values = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("# ") {
                if let Some(name) = rest.strip_suffix(" is not set") {
                    values.insert(name.to_string(), "n".to_string());
                }
            } else if let Some((k, v)) = line.split_once('=')
                && k.starts_with("CONFIG_")
            {
                values.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
        KernelConfig { values }
    }

    /// Does this text look like a kernel config at all?
    pub(crate) fn looks_like_config(text: &str) -> bool {
        text.lines().take(200).any(|l| l.starts_with("CONFIG_") || l.starts_with("# CONFIG_"))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub(crate) fn is_enabled(&self, key: &str) -> bool {
        matches!(self.get(key), Some("y") | Some("m"))
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Find the configuration a kernel embeds with CONFIG_IKCONFIG.
pub(crate) fn find_ikconfig(vmlinux: &[u8]) -> Option<String> {
    let start = memchr::memmem::find(vmlinux, b"IKCFG_ST")? + 8;
    let rest = &vmlinux[start..];
    let end = memchr::memmem::find(rest, b"IKCFG_ED")?;
    let gz = &rest[..end];
    if Compression::detect(gz) != Compression::Gzip {
        return None;
    }
    let raw = compress::decompress(gz, Compression::Gzip, 256 << 10).ok()?;
    String::from_utf8(raw).ok()
}

/// Whether the kernel may randomize its base address at boot (KASLR).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Kaslr {
    /// CONFIG_RANDOMIZE_BASE=y: addresses differ at every boot unless the
    /// kernel is booted with `nokaslr` or through an entry that does not
    /// randomize.
    Possible { source: String },
    /// The config says the kernel cannot randomize its base.
    No { source: String },
    /// No configuration was found.
    Unknown,
}

impl Kaslr {
    pub(crate) fn from_config(cfg: Option<&KernelConfig>, source: &str) -> Kaslr {
        match cfg {
            None => Kaslr::Unknown,
            Some(c) if c.is_enabled("CONFIG_RANDOMIZE_BASE") => Kaslr::Possible { source: source.to_string() },
            Some(_) => Kaslr::No { source: source.to_string() },
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Kaslr::Possible { source } => format!("possible (CONFIG_RANDOMIZE_BASE=y in {source})"),
            Kaslr::No { source } => format!("no (CONFIG_RANDOMIZE_BASE not set in {source})"),
            Kaslr::Unknown => "unknown (no kernel config found; pass --config)".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_set_unset_and_quoted_values() {
        let c = KernelConfig::parse("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"sha256\"\nCONFIG_D=m\n");
        assert!(c.is_enabled("CONFIG_A"));
        assert!(!c.is_enabled("CONFIG_B"));
        assert_eq!(c.get("CONFIG_B"), Some("n"));
        assert_eq!(c.get("CONFIG_C"), Some("sha256"));
        assert!(c.is_enabled("CONFIG_D"));
        assert_eq!(c.get("CONFIG_E"), None);
    }

    #[test]
    fn finds_an_embedded_ikconfig() {
        let cfg = "CONFIG_RANDOMIZE_BASE=y\nCONFIG_IKCONFIG=y\n";
        let mut image = vec![0u8; 1000];
        image.extend_from_slice(b"IKCFG_ST");
        image.extend(compress::compress(cfg.as_bytes(), Compression::Gzip).unwrap());
        image.extend_from_slice(b"IKCFG_ED");
        image.extend(vec![0u8; 100]);
        assert_eq!(find_ikconfig(&image).as_deref(), Some(cfg));
        let k = Kaslr::from_config(Some(&KernelConfig::parse(cfg)), "IKCONFIG");
        assert!(matches!(k, Kaslr::Possible { .. }));
        assert_eq!(find_ikconfig(&image[..1004]), None);
    }
}
