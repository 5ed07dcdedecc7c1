//! What `bootlink apply` is given, found: the kernel build (a kbuild output
//! directory, or the directory `bootlink kernel build` leaves in its cache),
//! or an installed kernel's image (`/boot/vmlinuz-<release>`, only read),
//! and the installed module tree (`INSTALL_MOD_PATH`, or its
//! `lib/modules/<release>`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};
use crate::sign::{Hash, SignKey};

/// The pieces of a kernel build that apply reads or writes.
#[derive(Debug, Clone)]
pub(crate) struct Build {
    pub vmlinux: PathBuf,
    /// The bzImage to write again after the manifest, and the object tree
    /// whose recorded commands make it (see `manifest::bzimage`).
    pub bzimage: Option<(PathBuf, PathBuf)>,
    pub system_map: Option<PathBuf>,
    /// The `bootlink kernel build` output it is (its build.json): its
    /// object tree, shared with the line's other builds, is held while the
    /// bzImage is made ([`crate::kbuild::with_tree_of`]).
    pub cached: Option<crate::kbuild::Report>,
    /// An installed image (`/boot/vmlinuz-<release>`), not a build: no
    /// step may rewrite it (the module hash list goes into a vmlinux, and
    /// a bzImage is made again from its build's object tree).
    pub installed: bool,
}

impl Build {
    pub(crate) fn find(dir: &Path) -> Result<Build> {
        let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
        // Absolute from here on: kbuild's DEPMOD hook gives ".".
        let dir = &std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(Error::file(
                Kind::Usage,
                dir,
                "not a directory: give the kernel's build (object) directory, or an installed image with --image",
            ));
        }
        let vmlinux = dir.join("vmlinux");
        if !vmlinux.is_file() {
            return Err(Error::file(
                Kind::Usage,
                dir,
                "no vmlinux here: give the kernel's build (object) directory, where `make` left vmlinux",
            ));
        }
        // A kbuild object tree holds its bzImage and the commands that made
        // it; bootlink's cached build names its tree in build.json.
        let in_tree = dir.join("arch/x86/boot/bzImage");
        let mut cached = None;
        let bzimage = if in_tree.is_file() {
            Some((in_tree, dir.to_path_buf()))
        } else if dir.join("bzImage").is_file() && dir.join("build.json").is_file() {
            let built = crate::kbuild::cached_build_of(&vmlinux)?;
            let tree = built.tree.clone();
            cached = Some(built);
            Some((dir.join("bzImage"), tree))
        } else {
            None
        };
        let map = dir.join("System.map");
        Ok(Build { vmlinux, bzimage, system_map: map.is_file().then_some(map), cached, installed: false })
    }

    /// An installed kernel, as a distribution's package leaves it in /boot:
    /// `vmlinuz-<release>` (a bzImage, read through its compressed vmlinux),
    /// with `config-<release>` and `System.map-<release>` beside it. The
    /// image is only read.
    pub(crate) fn installed(image: &Path) -> Result<Build> {
        let meta = std::fs::metadata(image).map_err(|e| Error::io(image, e))?;
        if !meta.is_file() {
            return Err(Error::file(
                Kind::Usage,
                image,
                "not a file: give the installed image (/boot/vmlinuz-<release>), or a build directory with --build",
            ));
        }
        Ok(Build { vmlinux: image.to_path_buf(), bzimage: None, system_map: None, cached: None, installed: true })
    }

    /// `System.map-<release>` beside an installed image, as Debian's /boot
    /// has it.
    pub(crate) fn find_installed_map(&mut self, release: &str) {
        let dir = self.vmlinux.parent().unwrap_or(Path::new("."));
        let map = dir.join(format!("System.map-{release}"));
        self.system_map = map.is_file().then_some(map);
    }

    /// The build's module signing key: CONFIG_MODULE_SIG_KEY (a PEM holding
    /// the key and its certificate, relative to the build directory unless
    /// absolute), else the key `bootlink kernel build` keeps beside its
    /// output. None when the kernel does not sign modules or the key is
    /// not a file here (a PKCS#11 URI, a key kept elsewhere).
    pub(crate) fn signing_key(dir: &Path, config: Option<&crate::kernel::KernelConfig>) -> Option<SignKey> {
        let hash = match config.and_then(|c| c.get("CONFIG_MODULE_SIG_HASH")) {
            Some("sha384") => Hash::Sha384,
            Some("sha512") => Hash::Sha512,
            _ => Hash::Sha256,
        };
        let named = config.and_then(|c| c.get("CONFIG_MODULE_SIG_KEY")).filter(|k| !k.contains(':'));
        if let Some(k) = named {
            let p = if Path::new(k).is_absolute() { PathBuf::from(k) } else { dir.join(k) };
            if p.is_file() {
                return Some(SignKey { key: p.clone(), cert: p, hash });
            }
        }
        let (pem, crt) = (dir.join("module-signing.pem"), dir.join("module-signing.crt"));
        (pem.is_file() && crt.is_file()).then_some(SignKey { key: pem, cert: crt, hash })
    }
}

/// The installed modules of `release`: `root/lib/modules/<release>` when
/// `given` is an INSTALL_MOD_PATH root, else `given` itself when it is that
/// directory. Returns (the release directory, the root depmod's `-b` takes
/// when the layout has one).
pub(crate) fn module_tree(given: &Path, release: &str) -> Result<(PathBuf, Option<PathBuf>)> {
    let under = given.join("lib/modules").join(release);
    if under.is_dir() {
        return Ok((under, Some(given.to_path_buf())));
    }
    let meta = std::fs::metadata(given).map_err(|e| Error::io(given, e))?;
    if !meta.is_dir() {
        return Err(Error::file(Kind::Usage, given, "not a directory: give INSTALL_MOD_PATH or lib/modules/<release>"));
    }
    if given.file_name().is_some_and(|n| n == release) {
        let root = given.parent().and_then(Path::parent).and_then(Path::parent);
        let layout = given.parent().is_some_and(|p| p.ends_with("lib/modules"));
        return Ok((given.to_path_buf(), root.filter(|_| layout).map(Path::to_path_buf)));
    }
    Err(Error::file(
        Kind::Usage,
        given,
        format!("no lib/modules/{release} here, and not that directory: the modules of another kernel?"),
    ))
}
