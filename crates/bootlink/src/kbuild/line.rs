//! Kernel lines: the Debian source packages bootlink's series is kept for,
//! each with its own series, lab-only series and config fragment under
//! `kernel/<line>/` (`patches/`, `lab-patches/`, `configs/lab.config`).
//! The same patch names where the change is the same; what a line's own
//! upstream already provides is dropped or smaller there (each cover
//! letter says what and why).

use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};

/// One kernel line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Line {
    /// As users name it: `6.1`, `6.12`.
    pub name: &'static str,
    /// The Debian package with its source (`linux-source-<name>`).
    pub package: &'static str,
    /// Where that package puts the source tarball.
    pub tarball: &'static str,
}

impl Line {
    /// Debian 12's kernel, the lab's first line.
    pub const V6_1: Line =
        Line { name: "6.1", package: "linux-source-6.1", tarball: "/usr/src/linux-source-6.1.tar.xz" };
    /// The LTS Debian 12 ships as its newer kernel (bookworm-backports and
    /// -security) and Debian 13 as its default.
    pub const V6_12: Line =
        Line { name: "6.12", package: "linux-source-6.12", tarball: "/usr/src/linux-source-6.12.tar.xz" };
    /// Every line, the default first.
    pub const ALL: &[Line] = &[Line::V6_1, Line::V6_12];

    /// The line a user names (`6.1`, `6.12`, also `linux-6.12`).
    pub fn parse(s: &str) -> Result<Line> {
        let name = s.strip_prefix("linux-").unwrap_or(s);
        Line::ALL.iter().copied().find(|l| l.name == name).ok_or_else(|| {
            let known: Vec<&str> = Line::ALL.iter().map(|l| l.name).collect();
            Error::new(Kind::Usage, format!("kernel line {s:?}: bootlink keeps a series for {}", known.join(", ")))
        })
    }

    /// `kernel/<line>` below a checkout.
    pub fn dir(self, checkout: &Path) -> PathBuf {
        checkout.join("kernel").join(self.name)
    }

    /// The upstreamable series.
    pub fn series(self, checkout: &Path) -> PathBuf {
        self.dir(checkout).join("patches")
    }

    /// The lab-only series, applied after it.
    pub fn lab_series(self, checkout: &Path) -> PathBuf {
        self.dir(checkout).join("lab-patches")
    }

    /// The lab's config fragment, merged onto tinyconfig.
    pub fn lab_config(self, checkout: &Path) -> PathBuf {
        self.dir(checkout).join("configs").join("lab.config")
    }

    /// The lab's config fragment for `arch`: `configs/lab.config` on x86,
    /// `configs/lab-<arch>.config` (its twin) on another architecture.
    pub fn lab_config_for(self, checkout: &Path, arch: crate::fetch::Arch) -> PathBuf {
        match arch {
            crate::fetch::Arch::Amd64 => self.lab_config(checkout),
            other => self.dir(checkout).join("configs").join(format!("lab-{}.config", other.kernel())),
        }
    }

    /// A build flavour's fragment (`configs/flavours/<name>.config`),
    /// merged over the lab's: `sealed`, `trim`, a kernel compressor.
    pub fn flavour_config(self, checkout: &Path, name: &str) -> PathBuf {
        self.dir(checkout).join("configs").join("flavours").join(format!("{name}.config"))
    }

    /// The flavours this line has, by name, sorted.
    pub fn flavours(self, checkout: &Path) -> Vec<String> {
        let dir = self.dir(checkout).join("configs").join("flavours");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().strip_suffix(".config").map(str::to_string))
            .collect();
        names.sort();
        names
    }

    /// The series' own options, merged onto a whole config.
    pub fn series_config(self, checkout: &Path) -> PathBuf {
        self.dir(checkout).join("configs").join("series.config")
    }

    /// Debian's kernel package of the line: the reference package on the
    /// default line (6.1: the one the project's figures quote), the newest
    /// `linux-image-<line>.*` apt knows on another.
    pub fn debian_request(self) -> crate::fetch::Request {
        if self == Line::default() {
            crate::fetch::Request::Reference
        } else {
            crate::fetch::Request::Series(self.name.to_string())
        }
    }
}

impl Default for Line {
    fn default() -> Line {
        Line::V6_1
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_by_name_and_their_directories() {
        assert_eq!(Line::parse("6.12").unwrap(), Line::V6_12);
        assert_eq!(Line::parse("linux-6.1").unwrap(), Line::V6_1);
        let e = Line::parse("5.10").unwrap_err().to_string();
        assert!(e.contains("6.1, 6.12"), "{e}");
        let co = Path::new("/co");
        assert_eq!(Line::V6_12.series(co), Path::new("/co/kernel/6.12/patches"));
        assert_eq!(Line::V6_1.lab_config(co), Path::new("/co/kernel/6.1/configs/lab.config"));
        let arm = Line::V6_1.lab_config_for(co, crate::fetch::Arch::Arm64);
        assert_eq!(arm, Path::new("/co/kernel/6.1/configs/lab-arm64.config"));
        assert_eq!(Line::V6_1.lab_config_for(co, crate::fetch::Arch::Amd64), Line::V6_1.lab_config(co));
        assert!(matches!(Line::V6_1.debian_request(), crate::fetch::Request::Reference));
        assert!(matches!(Line::V6_12.debian_request(), crate::fetch::Request::Series(s) if s == "6.12"));
        for l in Line::ALL {
            assert_eq!(l.package, format!("linux-source-{}", l.name));
            assert_eq!(l.tarball, format!("/usr/src/{}.tar.xz", l.package));
        }
    }

    #[test]
    fn the_checkout_holds_a_series_for_the_default_line() {
        let co = crate::fsutil::source_tree();
        let l = Line::default();
        assert!(l.series(co).join("series").is_file() && l.lab_series(co).join("series").is_file());
        assert!(l.lab_config(co).is_file() && l.series_config(co).is_file());
    }
}
