//! Config fragments (`CONFIG_X=y`, `# CONFIG_X is not set`) and checking
//! that a generated `.config` honours every line of one: Kconfig silently
//! drops a value whose dependencies are not met.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::error::{Error, Kind, Result};
use crate::series::Series;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fragment {
    /// Symbol (with its CONFIG_ prefix) and value ("n" for "is not set"), in order.
    pub values: Vec<(String, String)>,
}

fn parse_line(line: &str) -> Option<Option<(String, String)>> {
    let line = line.trim();
    if let Some(sym) = line.strip_prefix("# ").and_then(|l| l.strip_suffix(" is not set")) {
        return sym.starts_with("CONFIG_").then(|| Some((sym.to_string(), "n".to_string())));
    }
    if line.is_empty() || line.starts_with('#') {
        return Some(None);
    }
    let (k, v) = line.split_once('=')?;
    (k.starts_with("CONFIG_") && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !v.is_empty())
        .then(|| Some((k.to_string(), v.to_string())))
}

impl Fragment {
    pub fn parse(text: &str, path: &Path) -> Result<Fragment> {
        let mut values: Vec<(String, String)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match parse_line(line) {
                Some(None) => {}
                Some(Some((k, v))) => {
                    if let Some(prev) = values.iter().find(|(pk, _)| *pk == k) {
                        if prev.1 != v {
                            return Err(Error::file(
                                Kind::Format,
                                path,
                                format!("line {}: {k} set twice ({} and {v})", i + 1, prev.1),
                            ));
                        }
                        continue;
                    }
                    values.push((k, v));
                }
                None => {
                    return Err(Error::file(
                        Kind::Format,
                        path,
                        format!("line {}: not a config line: {:?}", i + 1, line.trim()),
                    ));
                }
            }
        }
        Ok(Fragment { values })
    }

    /// This fragment with `top`'s lines over it: a symbol `top` sets takes
    /// its value (a flavour's choice of compressor replaces the lab's).
    pub fn overlaid(&self, top: &Fragment) -> Fragment {
        let mut values = self.values.clone();
        for (k, v) in &top.values {
            match values.iter_mut().find(|(pk, _)| pk == k) {
                Some(slot) => slot.1 = v.clone(),
                None => values.push((k.clone(), v.clone())),
            }
        }
        Fragment { values }
    }

    pub fn read(path: &Path) -> Result<Fragment> {
        let text = crate::fsutil::read_input_text(path)?;
        Fragment::parse(&text, path)
    }

    /// The lines of the fragment that `dotconfig` (a full `.config`) does
    /// not honour, as "CONFIG_X: wanted m, got n".
    pub(crate) fn unmet(&self, dotconfig: &str) -> Vec<String> {
        let have: HashMap<&str, &str> = dotconfig
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .filter(|(k, _)| k.starts_with("CONFIG_"))
            .collect();
        self.values
            .iter()
            .filter_map(|(k, want)| {
                let got = have.get(k.as_str()).copied().unwrap_or("n");
                (got != want).then(|| format!("{k}: wanted {want}, got {got}"))
            })
            .collect()
    }
}

/// The Kconfig symbols a series' patches add (`+config X` or
/// `+menuconfig X` starting a line of a file named `Kconfig*`), with the
/// CONFIG_ prefix.
pub(crate) fn defined_by(series: &Series) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for p in &series.patches {
        let mut in_kconfig = false;
        for line in String::from_utf8_lossy(&p.text).lines() {
            if let Some(file) = line.strip_prefix("+++ ") {
                let name = file.trim_end().rsplit('/').next().unwrap_or_default();
                in_kconfig = name.starts_with("Kconfig");
                continue;
            }
            if !in_kconfig {
                continue;
            }
            // An entry starts its line; help text is indented.
            let entry = line.strip_prefix("+config ").or_else(|| line.strip_prefix("+menuconfig "));
            if let Some(sym) = entry.and_then(|e| e.split_whitespace().next())
                && sym.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                found.insert(format!("CONFIG_{sym}"));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_a_series_adds_are_those_of_added_kconfig_entries() {
        let text = b"--- a/kernel/module/Kconfig\n+++ b/kernel/module/Kconfig\n@@ -1,3 +1,9 @@\n config MODULES\n+config MODULE_SYMHASH\n+\tbool \"x\"\n+menuconfig  MODULE_SEALED\n-config MODULE_OLD\n+\thelp\n+\t  config NOT_THIS_ONE is help text\n--- a/kernel/module/main.c\n+++ b/kernel/module/main.c\n+config FROM_C\n";
        let series = Series {
            dir: "s".into(),
            patches: vec![crate::series::Patch {
                name: "0001.patch".into(),
                path: "s/0001.patch".into(),
                text: text.to_vec(),
                arches: vec![],
            }],
        };
        let got: Vec<String> = defined_by(&series).into_iter().collect();
        assert_eq!(got, ["CONFIG_MODULE_SEALED", "CONFIG_MODULE_SYMHASH"]);
    }

    #[test]
    fn parses_values_and_not_set_lines() {
        let f = Fragment::parse("# comment\nCONFIG_A=y\n# CONFIG_B is not set\n\nCONFIG_C=\"x y\"\n", Path::new("f"))
            .unwrap();
        assert_eq!(
            f.values,
            [("CONFIG_A".into(), "y".into()), ("CONFIG_B".into(), "n".into()), ("CONFIG_C".into(), "\"x y\"".into())]
        );
    }

    #[test]
    fn refuses_junk_and_contradictions() {
        let e = Fragment::parse("CONFIG_A=y\nA=y\n", Path::new("lab.config")).unwrap_err().to_string();
        assert!(e.starts_with("lab.config: line 2: not a config line"), "{e}");
        let e = Fragment::parse("CONFIG_A=y\nCONFIG_A=m\n", Path::new("f")).unwrap_err().to_string();
        assert!(e.contains("set twice (y and m)"), "{e}");
    }

    #[test]
    fn unmet_lines_are_named() {
        let f = Fragment::parse("CONFIG_A=m\n# CONFIG_B is not set\nCONFIG_C=y\n", Path::new("f")).unwrap();
        let got = f.unmet("CONFIG_A=m\nCONFIG_B=y\n# CONFIG_C is not set\n");
        assert_eq!(got, ["CONFIG_B: wanted n, got y", "CONFIG_C: wanted y, got n"]);
    }
}
