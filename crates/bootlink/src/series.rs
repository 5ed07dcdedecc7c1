//! A quilt-style patch series: a `series` file naming `*.patch` files of
//! its directory, one per line, applied in that order with `patch -p1`.
//! Both source builds read it: the kernel's (`kbuild`) and glibc's (`glibc`).
//!
//! A line may end with an architecture mark, `arch:x86` (or several,
//! `arch:x86,arm64`): the patch applies only when building for those
//! architectures (the kernel's `arch/` directory names), and
//! [`Series::for_arch`] leaves it out for the others. A line without one
//! applies everywhere.

use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The name as the series file gives it.
    pub name: String,
    pub path: PathBuf,
    pub text: Vec<u8>,
    /// The architectures it is for (`arch:x86` in the series file), kernel
    /// `arch/` names; empty: every architecture.
    pub arches: Vec<String>,
}

/// The architecture names a series file's `arch:` mark may give (the
/// kernel's `arch/` directories bootlink builds for).
pub const ARCHES: &[&str] = &["x86", "arm64"];

impl Patch {
    /// Does it apply when building for `arch` (a kernel `arch/` name)?
    pub fn applies_to(&self, arch: &str) -> bool {
        self.arches.is_empty() || self.arches.iter().any(|a| a == arch)
    }
}

impl Patch {
    /// The part of the patch that changes the tree: from its first
    /// `diff ` line (or, for a plain diff, its first `--- ` line followed
    /// by `+++ `) up to a mail signature (`-- `). A patch whose message
    /// alone changed has the same diff, so it is neither re-applied nor
    /// rebuilt.
    pub(crate) fn diff(&self) -> &[u8] {
        let t = &self.text[..];
        let mut starts = Vec::new();
        let mut at = 0;
        while at < t.len() {
            starts.push(at);
            at = t[at..].iter().position(|&b| b == b'\n').map_or(t.len(), |n| at + n + 1);
        }
        let line = |i: usize| &t[starts[i]..starts.get(i + 1).copied().unwrap_or(t.len())];
        let first = (0..starts.len()).find(|&i| line(i).starts_with(b"diff ")).or_else(|| {
            (0..starts.len())
                .find(|&i| line(i).starts_with(b"--- ") && i + 1 < starts.len() && line(i + 1).starts_with(b"+++ "))
        });
        let Some(first) = first else { return t };
        let end = (first..starts.len()).find(|&i| line(i) == b"-- \n").map_or(t.len(), |i| starts[i]);
        &t[starts[first]..end]
    }
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
            let mut arches: Vec<String> = Vec::new();
            for opt in words {
                if let Some(list) = opt.strip_prefix("arch:") {
                    for a in list.split(',') {
                        if !ARCHES.contains(&a) {
                            return Err(Error::file(
                                Kind::Format,
                                &file,
                                format!("line {}: arch:{list}: {a:?} is none of {}", i + 1, ARCHES.join(", ")),
                            ));
                        }
                        if !arches.iter().any(|x| x == a) {
                            arches.push(a.to_string());
                        }
                    }
                    continue;
                }
                if opt != "-p1" {
                    return Err(Error::file(
                        Kind::Format,
                        &file,
                        format!("line {}: option {opt:?}: only -p1 and arch:NAME are supported", i + 1),
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
            patches.push(Patch { name, path, text, arches });
        }
        Ok(Series { dir: dir.to_path_buf(), patches })
    }

    /// The patches that apply when building for `arch` (a kernel `arch/`
    /// name), and the names of those its marks leave out.
    pub fn for_arch(mut self, arch: &str) -> (Series, Vec<String>) {
        let (keep, skipped): (Vec<Patch>, Vec<Patch>) = self.patches.into_iter().partition(|p| p.applies_to(arch));
        self.patches = keep;
        (self, skipped.into_iter().map(|p| p.name).collect())
    }
}

impl Series {
    /// `first`'s patches, then those of each directory in `then` (a series
    /// applied on top, such as the kernel's lab-only one), as one series.
    /// A later series' patches are named `DIR/NAME` (DIR its directory's
    /// name), so two series may use the same file names.
    pub fn read_stacked(first: &Path, then: &[&Path]) -> Result<Series> {
        let mut all = Series::read(first)?;
        let mut seen = vec![std::fs::canonicalize(first).map_err(|e| Error::io(first, e))?];
        for dir in then {
            let real = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
            if seen.contains(&real) {
                return Err(Error::file(Kind::Format, dir, "this series is already applied: it would apply twice"));
            }
            seen.push(real);
            let prefix = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            for mut p in Series::read(dir)?.patches {
                p.name = format!("{prefix}/{}", p.name);
                if all.patches.iter().any(|q| q.name == p.name) {
                    return Err(Error::file(Kind::Format, dir, format!("{} is in two series", p.name)));
                }
                all.patches.push(p);
            }
        }
        Ok(all)
    }
}

/// A cache key built from named, length-prefixed fields (so no two field
/// lists hash alike), shown as the first 20 hex digits of their SHA-256.
pub(crate) struct KeyHash(sha2::Sha256);

impl KeyHash {
    pub fn new() -> KeyHash {
        use sha2::Digest;
        KeyHash(sha2::Sha256::new())
    }

    pub fn field(&mut self, name: &str, data: &[u8]) {
        use sha2::Digest;
        self.0.update(name.as_bytes());
        self.0.update((data.len() as u64).to_le_bytes());
        self.0.update(data);
    }

    pub fn finish(self) -> String {
        use sha2::Digest;
        self.0.finalize().iter().take(10).map(|b| format!("{b:02x}")).collect()
    }
}

impl Default for KeyHash {
    fn default() -> Self {
        KeyHash::new()
    }
}

/// A series of `patches` (name, text) written into `dir` and read back (tests).
#[cfg(test)]
pub(crate) fn write_for_test(dir: &Path, patches: &[(&str, &str)]) -> Series {
    let mut list = String::from("# test\n");
    for (n, t) in patches {
        std::fs::write(dir.join(n), t).unwrap();
        list.push_str(n);
        list.push('\n');
    }
    std::fs::write(dir.join("series"), list).unwrap();
    Series::read(dir).unwrap()
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
    fn the_diff_leaves_out_message_and_signature() {
        let mail = "From 1 Mon\nSubject: [PATCH] x\n\nwhy, measured: 3 ms\n---\n f | 2 +-\n\n\
                    diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n\n";
        let p = |text: &str| Patch {
            name: "p".into(),
            path: "p".into(),
            text: text.as_bytes().to_vec(),
            arches: Vec::new(),
        };
        let want = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(p(mail).diff(), want.as_bytes());
        let reworded = mail.replace("3 ms", "2.5 ms, remeasured");
        assert_eq!(p(&reworded).diff(), p(mail).diff());
        // A plain diff after a message whose text has a "---" line.
        assert_eq!(p(DIFF).diff(), "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n".as_bytes());
        assert_eq!(p("no diff\n").diff(), b"no diff\n");
    }

    #[test]
    fn a_second_series_applies_after_the_first_under_its_directory_name() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("patches"), t.path().join("lab-patches"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        write_for_test(&a, &[("0001-x.patch", DIFF), ("0002-y.patch", DIFF)]);
        write_for_test(&b, &[("0001-x.patch", DIFF)]);
        let s = Series::read_stacked(&a, &[&b]).unwrap();
        let names: Vec<&str> = s.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["0001-x.patch", "0002-y.patch", "lab-patches/0001-x.patch"]);
        assert_eq!(s.patches[2].path, b.join("0001-x.patch"));
        // The same directory twice would apply its patches twice: refused.
        let e = Series::read_stacked(&b, &[&b]).unwrap_err().to_string();
        assert!(e.contains("lab-patches: this series is already applied"), "{e}");
    }

    #[test]
    fn an_arch_mark_leaves_the_patch_out_for_other_architectures() {
        let d = dir_with(&[
            ("series", "a.patch\nb.patch arch:x86 # ORC\nc.patch -p1 arch:x86,arm64\nd.patch arch:arm64\n"),
            ("a.patch", DIFF),
            ("b.patch", DIFF),
            ("c.patch", DIFF),
            ("d.patch", DIFF),
        ]);
        let s = Series::read(d.path()).unwrap();
        assert_eq!(s.patches[1].arches, ["x86"]);
        assert_eq!(s.patches[2].arches, ["x86", "arm64"]);
        assert!(s.patches[0].applies_to("arm64") && !s.patches[1].applies_to("arm64"));
        let names = |s: &Series| s.patches.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        let (x86, skipped) = s.clone().for_arch("x86");
        assert_eq!(
            (names(&x86), skipped),
            (vec!["a.patch".into(), "b.patch".into(), "c.patch".into()], vec!["d.patch".to_string()])
        );
        let (arm, skipped) = s.for_arch("arm64");
        assert_eq!(
            (names(&arm), skipped),
            (vec!["a.patch".into(), "c.patch".into(), "d.patch".into()], vec!["b.patch".to_string()])
        );
    }

    #[test]
    fn the_checkout_marks_the_x86_only_kernel_patches() {
        for line in ["6.1", "6.12"] {
            let dir = crate::fsutil::source_tree().join("kernel").join(line).join("patches");
            let s = Series::read(&dir).unwrap();
            let x86: Vec<&str> = s.patches.iter().filter(|p| !p.applies_to("arm64")).map(|p| p.name.as_str()).collect();
            assert!(x86.len() == 2 && x86.iter().all(|n| n.contains("-x86-unwind-orc-")), "{line}: {x86:?}");
            // Every patch left for arm64 touches no arch/x86 file.
            for p in s.patches.iter().filter(|p| p.applies_to("arm64")) {
                let text = String::from_utf8_lossy(&p.text);
                assert!(
                    !text.contains("\n+++ b/arch/x86/"),
                    "{line}: {} touches arch/x86 but applies on arm64",
                    p.name
                );
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_apply_exactly() {
        let cases: &[(&str, &str)] = &[
            ("a.patch -p0\n", "only -p1"),
            ("a.patch x86\n", "only -p1 and arch:NAME"),
            ("a.patch arch:sparc\n", "\"sparc\" is none of x86, arm64"),
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
