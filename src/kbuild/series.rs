//! A quilt-style patch series: a `series` file naming `*.patch` files of
//! its directory, one per line, applied in that order with `patch -p1`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The name as the series file gives it.
    pub name: String,
    pub path: PathBuf,
    pub text: Vec<u8>,
}

#[derive(Debug, Clone, Default)]
pub struct Series {
    pub dir: PathBuf,
    pub patches: Vec<Patch>,
}

impl Series {
    /// Read `dir/series` and every patch it names. `#` starts a comment;
    /// quilt's `-p1` option is accepted, other strip levels are refused.
    pub fn read(dir: &Path) -> Result<Series> {
        let file = dir.join("series");
        let text = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
        let mut patches: Vec<Patch> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let name = words.next().unwrap_or_default().to_string();
            for opt in words {
                if opt != "-p1" {
                    return Err(Error::file(
                        Kind::Format,
                        &file,
                        format!("line {}: option {opt:?}: only -p1 patches are supported", i + 1),
                    ));
                }
            }
            if name.contains("..") || name.starts_with('/') {
                return Err(Error::file(
                    Kind::Format,
                    &file,
                    format!("line {}: {name:?}: name a patch inside this directory", i + 1),
                ));
            }
            if patches.iter().any(|p| p.name == name) {
                return Err(Error::file(Kind::Format, &file, format!("line {}: {name} is listed twice", i + 1)));
            }
            let path = dir.join(&name);
            let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            if !text.windows(4).any(|w| w == b"\n+++" || w == b"\n---") {
                return Err(Error::file(Kind::Format, &path, "not a patch (no unified diff in it)"));
            }
            patches.push(Patch { name, path, text });
        }
        Ok(Series { dir: dir.to_path_buf(), patches })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in files {
            std::fs::write(d.path().join(n), t).unwrap();
        }
        d
    }

    const DIFF: &str = "Subject: x\n---\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";

    #[test]
    fn reads_patches_in_order_with_comments() {
        let d =
            dir_with(&[("series", "# ours\nb.patch -p1\n\na.patch # last\n"), ("a.patch", DIFF), ("b.patch", DIFF)]);
        let s = Series::read(d.path()).unwrap();
        let names: Vec<&str> = s.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["b.patch", "a.patch"]);
    }

    #[test]
    fn refuses_what_it_cannot_apply_exactly() {
        let cases: &[(&str, &str)] = &[
            ("a.patch -p0\n", "only -p1"),
            ("../x.patch\n", "inside this directory"),
            ("a.patch\na.patch\n", "listed twice"),
            ("missing.patch\n", "no such file"),
            ("notes.patch\n", "not a patch"),
        ];
        for (series, want) in cases {
            let d = dir_with(&[("series", series), ("a.patch", DIFF), ("notes.patch", "just text\n")]);
            let e = Series::read(d.path()).unwrap_err().to_string();
            assert!(e.contains(want), "{series:?}: {e}");
        }
        let e = Series::read(Path::new("/nonexistent-bootlink")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent-bootlink/series"), "{e}");
    }
}
