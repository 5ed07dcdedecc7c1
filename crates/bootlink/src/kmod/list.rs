//! Fixed module sets: list files, one path per line relative to
//! `lib/modules/<release>/`, and the named sets bootlink ships.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::rel_key;
use crate::error::{Error, Kind, Result};
use crate::module;

/// The module sets bootlink ships, by name: list files in `data/`.
pub const NAMED_SETS: &[(&str, &str)] = &[
    // 194 modules (fs, nls, crypto, net) of Debian 6.1.0-56-amd64, the set of ../shared/MEASURED.md.
    ("fs-nls-crypto-net-194", include_str!("../../../../data/modset-194.txt")),
    // The same and nfsv4 (the longest trace eval-map update) with its dependencies.
    ("fs-nls-crypto-net-194-nfsv4", include_str!("../../../../data/modset-194-nfsv4.txt")),
];

/// The text of a named set.
pub fn named_set(name: &str) -> Option<&'static str> {
    NAMED_SETS.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// The paths of a named set; an unknown name is an error listing the known ones.
pub fn named_set_paths(name: &str) -> Result<Vec<PathBuf>> {
    let text = named_set(name).ok_or_else(|| {
        let known: Vec<&str> = NAMED_SETS.iter().map(|(n, _)| *n).collect();
        Error::new(Kind::Usage, format!("no module set named {name:?} (known: {})", known.join(", ")))
    })?;
    parse_list(text).map_err(|e| Error::new(Kind::Usage, format!("module set {name}: {}", e.msg)).because(e))
}

/// Parse a list file's text: one module path per line, relative to
/// `lib/modules/<release>/`; blank lines and lines starting with `#` are
/// skipped. Absolute paths, `..`, names that are not module files and
/// duplicates are errors naming the line.
pub fn parse_list(text: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let p = PathBuf::from(line);
        if !p.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(Error::new(
                Kind::Usage,
                format!("line {n}: {line:?}: give a path relative to lib/modules/<release>/, without '..'"),
            ));
        }
        if !module::is_module_file(&p) {
            return Err(Error::new(
                Kind::Usage,
                format!("line {n}: {line:?} is not a module file (.ko, .ko.xz, .ko.zst, .ko.gz)"),
            ));
        }
        if let Some(first) = seen.insert(rel_key(&p), n) {
            return Err(Error::new(Kind::Usage, format!("line {n}: {line} is listed twice (first on line {first})")));
        }
        out.push(p);
    }
    Ok(out)
}

/// [`parse_list`] of a file.
pub fn read_list(path: &Path) -> Result<Vec<PathBuf>> {
    let text = crate::fsutil::read_input_text(path)?;
    parse_list(&text).map_err(|e| e.at(path))
}
