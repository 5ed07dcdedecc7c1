//! The distribution's kernel in the lab (`kernel:distro`,
//! `kernel:distro-6.12`): bootlink's series built with Debian's own config
//! of the line (`bootlink kernel build --config debian`: SLUB, KASLR,
//! Debian's release and module ABI), loading Debian's own modules as
//! Debian ships them, signed again with the build's key (apply `--only
//! sign`: what a distribution shipping the series does with its own key),
//! so that every module the kernel loads is checked.
//!
//! The lab boots its bzImage (the decompressor randomizes the base: KASLR
//! on unless a variant says `kaslr:off`); a variant's module hash list is
//! written into the build's vmlinux and its bzImage linked again from the
//! build's object tree ([`bootlink::manifest::bzimage`]). Made once per
//! content, under `<cache>/lab/distro-<key>/`: `vmlinux` and `bzImage`
//! (links to the build's), `lib/modules/<release>/` and `kernel.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use bootlink::apply;
use bootlink::error::{Error, Kind, Result};
use bootlink::fetch;
use bootlink::fsutil::{self, TempDir};
use bootlink::kbuild::{self, Line};
use bootlink::steps::Step;

/// Bumped when the way the directory is made changes.
const RECIPE_VERSION: u32 = 1;

/// The distribution-config kernel of a line, ready for the lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DistroKernel {
    /// The build's vmlinux (the steps read its exports; the manifest step
    /// writes its list into a copy).
    pub vmlinux: PathBuf,
    /// The build's bzImage, beside `vmlinux`: what QEMU boots.
    pub bzimage: PathBuf,
    /// `lib/modules/<release>`: Debian's modules signed with the build's key.
    pub modules: PathBuf,
    /// The object tree the build was made in: a bzImage is linked again
    /// from it around a vmlinux that holds a module hash list (while the
    /// tree still holds this build: [`bootlink::manifest::bzimage::check`]).
    pub tree: PathBuf,
    pub release: String,
    /// The series build (its cache key) and Debian's package it pairs with.
    pub build_key: String,
    pub debian_package: String,
    pub debian_version: String,
}

/// The series built with Debian's config of `line` (built now when the
/// kernel cache does not hold it: about an hour on 2 cores), and Debian's
/// modules of the same release signed with its key.
pub fn kernel(line: Line, arch: fetch::Arch) -> Result<DistroKernel> {
    if !arch.is_amd64() {
        return Err(Error::new(
            Kind::Unsupported,
            format!("kernel:distro: the distribution-config kernel is built for amd64 only, not {}", arch.debian()),
        ));
    }
    let mut opts = kbuild::Options::for_line(line);
    opts.debian_config()?;
    let build = kbuild::run(&opts)?;
    let request =
        if line == Line::default() { fetch::Request::Reference } else { fetch::Request::Series(line.name.to_string()) };
    let debian = fetch::fetch_for(&request, arch)?;
    if build.release != debian.release {
        return Err(Error::file(
            Kind::WrongKernel,
            &build.dir,
            format!(
                "the series' Debian-config build is release {}, Debian's package {} {}",
                build.release, debian.package, debian.release
            ),
        ));
    }
    let dir = fsutil::cache_dir()
        .join("lab")
        .join(format!("distro-{}", key(&build.key, &build.content_id()?, &debian.version)));
    // Used only while whole (bootlink::cache: sealed when made, checked
    // on every use); a damaged one is made again.
    let record = dir.join("kernel.json");
    if bootlink::cache::intact(&dir, "the distribution kernel's directory")
        && let Ok(text) = fsutil::read_input(&record, 1 << 20)
        && let Ok(k) = serde_json::from_slice::<DistroKernel>(&text)
        && k.vmlinux.is_file()
        && k.bzimage.is_file()
        && k.modules.is_dir()
    {
        return Ok(k);
    }
    // apply reads the build's object tree (a build directory with a
    // bzImage names it), which another build of the line (the lab's
    // kernel, with its lab series) may have switched since: made to hold
    // this build again, and kept so, while the directory is made.
    kbuild::with_tree_holding(&opts, &build.key, |b| make(b, &debian, &dir))
}

impl DistroKernel {
    /// The kernel line of its release ("6.1.0-56-amd64": 6.1).
    pub fn line(&self) -> Result<Line> {
        Line::ALL.iter().copied().find(|l| self.release.starts_with(&format!("{}.", l.name))).ok_or_else(|| {
            Error::new(Kind::Internal, format!("kernel:distro: release {} is of no kernel line", self.release))
        })
    }

    /// Run `f` with the build's object tree holding this kernel's build
    /// (made to hold it again where another build of the line switched
    /// it; the line's build locks held until `f` returns).
    pub fn with_tree<T>(&self, f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
        let mut opts = kbuild::Options::for_line(self.line()?);
        opts.debian_config()?;
        kbuild::with_tree_holding(&opts, &self.build_key, |b| f(&b.tree))
    }
}

/// The record of the directory whose `vmlinux` this is, if it is one.
pub fn beside(vmlinux: &Path) -> Option<DistroKernel> {
    let text = std::fs::read(vmlinux.with_file_name("kernel.json")).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The directory's content key (16 hex digits): the build's key and bytes
/// (`content`, its vmlinux's build ID) and Debian's version.
fn key(build_key: &str, content: &str, debian_version: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(format!("recipe {RECIPE_VERSION}\nbuild {build_key}\ncontent {content}\ndebian {debian_version}\n"));
    fsutil::hex(&h.finalize()[..8])
}

/// The build's images linked in, Debian's modules copied and signed again
/// with the build's key, the record written; renamed into place whole.
fn make(build: &kbuild::Report, debian: &fetch::Fetched, dir: &Path) -> Result<DistroKernel> {
    let parent = dir.parent().expect("below the cache");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let name = dir.file_name().expect("a name").to_string_lossy().into_owned();
    let work = TempDir::new_in(parent, &format!(".{name}"))?;
    let root = work.path();
    for (from, to) in [(&build.vmlinux, "vmlinux"), (&build.bzimage, "bzImage")] {
        let to = root.join(to);
        if std::fs::hard_link(from, &to).is_err() {
            std::fs::copy(from, &to).map_err(|e| Error::io(from, e))?;
        }
    }
    let rel = PathBuf::from("lib/modules").join(&debian.release);
    bootlink::progress::status(&format!("copying Debian's modules of {}", debian.release));
    fsutil::copy_tree(&debian.modules, &root.join(&rel))?;
    bootlink::progress::status("signing Debian's modules with the series build's key");
    let report = apply::run(&apply::Options {
        kernel: apply::Kernel::Build(build.dir.clone()),
        modules: root.to_path_buf(),
        kernel_out: None,
        assume_nokaslr: false,
        sign_key: None,
        allow_unsigned: false,
        depmod: false,
        dry_run: false,
        manifest_hash: bootlink::manifest::Hash::Sha256,
        only: Some(vec![Step::Sign]),
    })?;
    if report.applied == 0 {
        return Err(Error::file(Kind::Tool, root, "bootlink apply signed no module"));
    }
    if let Some(e) = report.errors.first() {
        return Err(Error::file(Kind::Tool, root, format!("bootlink apply refused a module: {e}")));
    }
    let k = DistroKernel {
        vmlinux: dir.join("vmlinux"),
        bzimage: dir.join("bzImage"),
        modules: dir.join(&rel),
        tree: build.tree.clone(),
        release: debian.release.clone(),
        build_key: build.key.clone(),
        debian_package: debian.package.clone(),
        debian_version: debian.version.clone(),
    };
    let json = serde_json::to_string_pretty(&k).expect("serializable");
    fsutil::write_atomic(&root.join("kernel.json"), json.as_bytes())?;
    // The record and the images by content (a Debian config's vmlinux with
    // its debug info by size and time), the module tree by size and time.
    let root = root.to_path_buf();
    bootlink::cache::seal_tree(&root, |rel| {
        let big = std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.len() > 64 << 20);
        Some(if rel.starts_with("lib") || big { bootlink::cache::Check::Stat } else { bootlink::cache::Check::Content })
    })?;
    bootlink::cache::install(&work.keep(), dir)?;
    prune(parent, dir);
    Ok(k)
}

/// How many of these directories the cache keeps (each holds a copy of a
/// distribution's module tree: about 500 MB for Debian's 6.1).
const KEEP: usize = 2;

/// The oldest `distro-*` directories beside `current` removed, [`KEEP`] left.
fn prune(parent: &Path, current: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else { return };
    let mut others: Vec<(std::time::SystemTime, PathBuf)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != current && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("distro-")))
        .filter_map(|p| Some((std::fs::metadata(p.join("kernel.json")).and_then(|m| m.modified()).ok()?, p)))
        .collect();
    others.sort_by_key(|x| std::cmp::Reverse(x.0));
    for (_, p) in others.into_iter().skip(KEEP - 1) {
        let _ = std::fs::remove_dir_all(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_the_build_and_the_package() {
        assert_ne!(key("a", "c", "1"), key("b", "c", "1"));
        assert_ne!(key("a", "c", "1"), key("a", "c", "2"));
        assert_ne!(key("a", "c", "1"), key("a", "c2", "1"));
        assert_eq!(key("a", "c", "1").len(), 16);
    }

    #[test]
    fn another_architecture_is_refused_before_anything_is_built() {
        let e = kernel(Line::default(), fetch::Arch::Arm64).unwrap_err();
        assert_eq!(e.kind, Kind::Unsupported);
        assert!(e.to_string().contains("built for amd64 only, not arm64"), "{e}");
    }
}
