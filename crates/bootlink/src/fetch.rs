//! `bootlink fetch-kernel`: a real Debian kernel package, downloaded with
//! apt (no install into /boot), unpacked into the cache, with its vmlinux
//! extracted for booting under QEMU.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::kernel;
use crate::progress;

/// The kernel whose figures the project's tests and notes quote.
pub(crate) const REFERENCE_PACKAGE: &str = "linux-image-6.1.0-56-amd64";
pub(crate) const REFERENCE_VERSION: &str = "6.1.192-2";
pub(crate) const DEFAULT_SERIES: &str = "6.1";

/// The Debian architecture of a kernel package. A foreign one (arm64 on an
/// amd64 host) is downloaded, never installed: dpkg must know it
/// (`dpkg --add-architecture arm64`, then `apt-get update`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    #[default]
    Amd64,
    Arm64,
}

impl Arch {
    pub fn is_amd64(&self) -> bool {
        *self == Arch::Amd64
    }

    /// The ELF machine of its programs and modules.
    pub fn machine(self) -> object::elf::Machine {
        match self {
            Arch::Amd64 => object::elf::EM_X86_64,
            Arch::Arm64 => object::elf::EM_AARCH64,
        }
    }

    /// Debian's name, the suffix of its kernel packages and .deb files.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The kernel's name for it: its `arch/` directory and `ARCH=` for make
    /// (`x86`, `arm64`), as a series file's `arch:` marks name it.
    pub fn kernel(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86",
            Arch::Arm64 => "arm64",
        }
    }

    /// Debian's multiarch name, the directory of its libraries
    /// (`/lib/aarch64-linux-gnu`).
    pub fn multiarch(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64-linux-gnu",
            Arch::Arm64 => "aarch64-linux-gnu",
        }
    }

    /// The cross toolchain's prefix (`CROSS_COMPILE=`) on this x86-64 host:
    /// none for amd64, `aarch64-linux-gnu-` (Debian's gcc-aarch64-linux-gnu)
    /// for arm64.
    pub fn cross_compile(self) -> &'static str {
        match self {
            Arch::Amd64 => "",
            Arch::Arm64 => "aarch64-linux-gnu-",
        }
    }

    /// The boot image kbuild makes (below the object tree) and the name
    /// bootlink's build directory gives it.
    pub fn boot_image(self) -> (&'static str, &'static str) {
        match self {
            Arch::Amd64 => ("arch/x86/boot/bzImage", "bzImage"),
            Arch::Arm64 => ("arch/arm64/boot/Image", "Image"),
        }
    }

    /// The reference package of this architecture: the same kernel
    /// version as linux-image-6.1.0-56-amd64.
    fn reference_package(self) -> String {
        REFERENCE_PACKAGE.replace("-amd64", &format!("-{}", self.debian()))
    }
}

#[derive(Debug, Clone)]
pub enum Request {
    /// The reference package, or the newest 6.1 if it can no longer be had.
    Reference,
    /// The newest package of a series ("6.1", "6.12").
    Series(String),
    /// An exact package name (optionally "name=version").
    Package(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fetched {
    pub package: String,
    pub version: String,
    pub release: String,
    /// The package's architecture (said only when not amd64, the default).
    #[serde(default, skip_serializing_if = "Arch::is_amd64")]
    pub arch: Arch,
    pub dir: PathBuf,
    pub vmlinuz: PathBuf,
    /// amd64: the ELF vmlinux extracted from the bzImage. arm64: the raw
    /// `Image` (no ELF vmlinux exists inside it): the vmlinuz itself when
    /// it is uncompressed, as Debian ships it, else `boot/Image`.
    pub vmlinux: PathBuf,
    pub config: PathBuf,
    pub modules: PathBuf,
    /// True when these are the reference package and version.
    pub reference: bool,
    /// Why another package than the one asked for was taken, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl crate::report::Report for Fetched {
    fn render(&self) -> String {
        let mut s = format!("package   {} {}\nrelease   {}\n", self.package, self.version, self.release);
        if self.arch != Arch::Amd64 {
            s.push_str(&format!("arch      {}\n", self.arch.debian()));
        }
        s.push_str(&format!(
            "vmlinuz   {}\nvmlinux   {}\nconfig    {}\nmodules   {}\n",
            self.vmlinuz.display(),
            self.vmlinux.display(),
            self.config.display(),
            self.modules.display()
        ));
        s
    }
}

/// Run apt-get, apt-cache or dpkg-deb through the one host-tool runner,
/// naming the Debian package that provides it.
fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let package = if cmd.get_program() == "dpkg-deb" { "dpkg" } else { "apt" };
    crate::hosttool::run(cmd, what, package)
}

/// The candidate version apt would download for a package, if any.
fn candidate(package: &str) -> Option<String> {
    let out = crate::hosttool::apt_cache().args(["policy", package]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.lines().find_map(|l| l.trim().strip_prefix("Candidate:"))?.trim().to_string();
    (v != "(none)" && !v.is_empty()).then_some(v)
}

fn has_version(package: &str, version: &str) -> bool {
    crate::hosttool::apt_cache()
        .args(["show", &format!("{package}={version}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn apt_update() -> Result<()> {
    progress::status("apt-get update (package lists are missing)");
    run(Command::new("apt-get").args(["update", "-qq"]), "apt-get update").map(|_| ())
}

/// Numbers in a package name, for ordering ABIs: 6.1.0-56 < 6.1.0-100.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).filter_map(|s| s.parse().ok()).collect()
}

/// The newest generic image package of a series for `arch`.
fn newest_in_series(series: &str, arch: Arch) -> Result<String> {
    let list = |_: ()| {
        run(crate::hosttool::apt_cache().args(["pkgnames", &format!("linux-image-{series}")]), "apt-cache pkgnames")
    };
    let mut names = list(())?;
    if names.trim().is_empty() {
        apt_update()?;
        names = list(())?;
    }
    newest_of(&names, series, arch).ok_or_else(|| {
        Error::new(
            Kind::Usage,
            format!(
                "no linux-image-{series}*-{} package is known to apt (try another --version){}",
                arch.debian(),
                foreign_hint(arch)
            ),
        )
    })
}

/// The newest generic image package of `series` for `arch` among apt's
/// package names (one a line): a release's own package
/// (`linux-image-6.12.117+deb12-amd64`), not the metapackage that depends
/// on it (`linux-image-6.12-amd64`: no modules of its own), nor a cloud,
/// realtime, debug or unsigned flavour.
fn newest_of(names: &str, series: &str, arch: Arch) -> Option<String> {
    let prefix = format!("linux-image-{series}");
    let suffix = format!("-{}", arch.debian());
    let mut found: Vec<&str> = names
        .lines()
        .map(str::trim)
        .filter(|n| {
            n.strip_prefix(&prefix).and_then(|rest| rest.strip_suffix(&suffix)).is_some_and(|release| {
                release.starts_with(['.', '-', '+']) && release.chars().any(|c| c.is_ascii_digit())
            }) && !["cloud", "-rt-", "dbg", "unsigned"].iter().any(|x| n.contains(x))
        })
        .collect();
    found.sort_by_key(|n| version_key(n));
    found.last().map(|s| s.to_string())
}

pub(crate) fn release_of(package: &str) -> String {
    package.trim_start_matches("linux-image-").trim_end_matches("-unsigned").to_string()
}

/// What to do when apt knows no package of a foreign architecture.
fn foreign_hint(arch: Arch) -> String {
    if arch == Arch::Amd64 {
        return String::new();
    }
    let known = Command::new("dpkg")
        .arg("--print-foreign-architectures")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().any(|a| a == arch.debian()))
        .unwrap_or(false);
    if known {
        String::new()
    } else {
        format!("; dpkg does not know {0}: run dpkg --add-architecture {0} && apt-get update", arch.debian())
    }
}

/// Fetch an amd64 kernel package.
pub fn fetch(req: &Request) -> Result<Fetched> {
    fetch_for(req, Arch::Amd64)
}

/// Fetch a kernel package of `arch` (its reference package, the newest of
/// a series, or one named), cached like the amd64 ones under
/// `<cache>/kernels/<release>`.
pub fn fetch_for(req: &Request, arch: Arch) -> Result<Fetched> {
    crate::buildlog::timed(|| format!("kernel package {req:?} {}", arch.debian()), || fetch_uncounted(req, arch))
}

/// The package unpacked under `<cache>/kernels/<release>`, when it is
/// `version` (any version if None) of `arch`.
/// The unpacked tree is used only while it matches its seal
/// ([`crate::cache`]): a damaged one is unpacked again.
fn cached(package: &str, version: Option<&str>, arch: Arch) -> Option<Fetched> {
    let dir = fsutil::cache_dir().join("kernels").join(release_of(package));
    if !crate::cache::intact(&dir, &format!("the kernel package {package}")) {
        return None;
    }
    let text = fsutil::read_input(&dir.join("bootlink-fetched.json"), 1 << 20).ok()?;
    let f = serde_json::from_slice::<Fetched>(&text).ok()?;
    (version.is_none_or(|v| v == f.version) && f.arch == arch && f.vmlinux.is_file()).then_some(f)
}

/// How an unpacked package's files are checked on every use: what bootlink
/// wrote or reads whole (the images, the config, its own record) by
/// content; the module tree (thousands of files, each read as an input and
/// checked as one anyway) by size and modification time.
fn package_check(rel: &Path) -> Option<crate::cache::Check> {
    Some(if rel.starts_with("lib") || rel.starts_with("usr") {
        crate::cache::Check::Stat
    } else {
        crate::cache::Check::Content
    })
}

fn fetch_uncounted(req: &Request, arch: Arch) -> Result<Fetched> {
    let mut fallback = None;
    let reference = arch.reference_package();
    // The reference package's exact version, once unpacked, is what every
    // later request gets, without asking apt (two apt-cache calls: seconds
    // each, and every lab run and test asks).
    if matches!(req, Request::Reference)
        && let Some(f) = cached(&reference, Some(REFERENCE_VERSION), arch)
    {
        return Ok(f);
    }
    let (package, want_version) = match req {
        Request::Package(p) => match p.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (p.clone(), None),
        },
        Request::Series(s) => (newest_in_series(s, arch)?, None),
        Request::Reference => {
            if candidate(&reference).is_none() {
                let _ = apt_update();
            }
            if has_version(&reference, REFERENCE_VERSION) {
                (reference.clone(), Some(REFERENCE_VERSION.to_string()))
            } else {
                let newest = newest_in_series(DEFAULT_SERIES, arch)?;
                fallback = Some(format!(
                    "{reference} {REFERENCE_VERSION} cannot be downloaded here any more; took {newest}, the newest {DEFAULT_SERIES} kernel"
                ));
                (newest, None)
            }
        }
    };
    let release = release_of(&package);
    let cache = fsutil::cache_dir();
    let dir = cache.join("kernels").join(&release);
    if let Some(mut f) = cached(&package, want_version.as_deref(), arch) {
        f.fallback = fallback;
        return Ok(f);
    }
    // One process at a time unpacks a release: two that found it missing
    // or damaged (tests in parallel lanes, an old entry without a seal)
    // each removed the other's and one rename failed ("Directory not
    // empty"). Under the lock, an unpacking stopped half-way is removed.
    let kernels = cache.join("kernels");
    let _lock = crate::cache::lock_for_making(&kernels, &release, &format!(".{release}.tmp."))?;
    if let Some(mut f) = cached(&package, want_version.as_deref(), arch) {
        f.fallback = fallback;
        return Ok(f);
    }

    if candidate(&package).is_none() {
        apt_update()?;
    }
    let version = match &want_version {
        Some(v) => v.clone(),
        None => candidate(&package)
            .ok_or_else(|| Error::new(Kind::Usage, format!("apt knows no package {package}{}", foreign_hint(arch))))?,
    };
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| Error::io(&debs, e))?;
    let download = || -> Result<PathBuf> {
        progress::status(&format!("downloading {package} {version}"));
        run(
            Command::new("apt-get").current_dir(&debs).args(["download", "-qq", &format!("{package}={version}")]),
            &format!("downloading {package}={version}"),
        )?;
        find_deb(&debs, &package, &version, arch)
            .ok_or_else(|| Error::file(Kind::Tool, &debs, format!("apt-get download left no .deb for {package}")))
    };
    let tmp = kernels.join(format!(".{release}.tmp.{}", std::process::id()));
    let which = Unpacked { package: &package, version: &version, release: &release, arch };
    let unpack_from = |deb: &Path| {
        progress::status(&format!("unpacking {}", deb.display()));
        let _ = std::fs::remove_dir_all(&tmp);
        unpack(deb, &tmp, which, &dir)
    };
    // A .deb kept in the cache is downloaded again when it does not unpack
    // (cut short, damaged): the cache's fault, not the package's.
    let result = match find_deb(&debs, &package, &version, arch) {
        Some(deb) => match unpack_from(&deb) {
            Err(e) if matches!(e.kind, Kind::Tool | Kind::Format) => {
                progress::status(&format!(
                    "bootlink: {} in the cache does not unpack ({}): downloaded again",
                    deb.display(),
                    e.msg
                ));
                let _ = std::fs::remove_file(&deb);
                unpack_from(&download()?)
            }
            r => r,
        },
        None => unpack_from(&download()?),
    };
    match result {
        Ok(mut f) => {
            let _ = std::fs::remove_dir_all(&dir);
            if let Err(e) = std::fs::rename(&tmp, &dir) {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(Error::io(&dir, e));
            }
            f.fallback = fallback;
            Ok(f)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

fn find_deb(debs: &Path, package: &str, version: &str, arch: Arch) -> Option<PathBuf> {
    // apt-get escapes ':' in versions as %3a in file names.
    let file = format!("{package}_{}_{}.deb", version.replace(':', "%3a"), arch.debian());
    let p = debs.join(file);
    p.is_file().then_some(p)
}

/// Which package a .deb is.
#[derive(Clone, Copy)]
struct Unpacked<'a> {
    package: &'a str,
    version: &'a str,
    release: &'a str,
    arch: Arch,
}

/// Unpack into `tmp`, but record paths as they will be under `dir`.
fn unpack(deb: &Path, tmp: &Path, which: Unpacked, dir: &Path) -> Result<Fetched> {
    let Unpacked { package, version, release, arch } = which;
    std::fs::create_dir_all(tmp).map_err(|e| Error::io(tmp, e))?;
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(tmp), &format!("unpacking {}", deb.display()))?;
    let rel_dirs: Vec<String> = std::fs::read_dir(tmp.join("lib/modules"))
        .map_err(|e| Error::file(Kind::Format, deb, format!("package has no lib/modules: {e}")).because(e))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    let release = if rel_dirs.iter().any(|r| r == release) {
        release.to_string()
    } else {
        rel_dirs.first().cloned().ok_or_else(|| Error::file(Kind::Format, deb, "package has an empty lib/modules"))?
    };
    let vmlinuz = tmp.join(format!("boot/vmlinuz-{release}"));
    let vmlinux = match arch {
        Arch::Amd64 => {
            let v = kernel::extract_vmlinux(&vmlinuz)?;
            fsutil::write_atomic(&tmp.join("boot/vmlinux"), &v.data)?;
            dir.join("boot/vmlinux")
        }
        Arch::Arm64 => match kernel::arm64_image(&vmlinuz)? {
            None => dir.join(format!("boot/vmlinuz-{release}")),
            Some(image) => {
                fsutil::write_atomic(&tmp.join("boot/Image"), &image)?;
                dir.join("boot/Image")
            }
        },
    };
    let f = Fetched {
        package: package.to_string(),
        version: version.to_string(),
        release: release.clone(),
        arch,
        dir: dir.to_path_buf(),
        vmlinuz: dir.join(format!("boot/vmlinuz-{release}")),
        vmlinux,
        config: dir.join(format!("boot/config-{release}")),
        modules: dir.join(format!("lib/modules/{release}")),
        reference: package == arch.reference_package() && version == REFERENCE_VERSION,
        fallback: None,
    };
    let json = serde_json::to_string_pretty(&f).expect("serializable");
    fsutil::write_atomic(&tmp.join("bootlink-fetched.json"), json.as_bytes())?;
    crate::cache::seal_tree(tmp, package_check)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_numbers_order_packages() {
        let mut v = ["linux-image-6.1.0-100-amd64", "linux-image-6.1.0-56-amd64", "linux-image-6.1.0-9-amd64"];
        v.sort_by_key(|n| version_key(n));
        assert_eq!(v.last().unwrap(), &"linux-image-6.1.0-100-amd64");
        assert_eq!(release_of("linux-image-6.12.117+deb12-amd64-unsigned"), "6.12.117+deb12-amd64");
        assert_eq!(Arch::Arm64.reference_package(), "linux-image-6.1.0-56-arm64");
        assert_eq!(Arch::Amd64.reference_package(), REFERENCE_PACKAGE);
    }

    #[test]
    fn the_newest_of_a_line_is_a_releases_own_package() {
        // As `apt-cache pkgnames linux-image-6.12` lists them on bookworm
        // (a part), in apt's order.
        let names = "linux-image-6.12-amd64\nlinux-image-6.12.9+deb12-amd64\nlinux-image-6.12-rt-amd64\n\
                     linux-image-6.12.38+deb12-amd64\nlinux-image-6.12.38+deb12-amd64-unsigned\n\
                     linux-image-6.12.38+deb12-cloud-amd64\nlinux-image-6.12.38+deb12-rt-amd64\n\
                     linux-image-6.12-amd64-dbg\nlinux-image-6.12-amd64-signed-template\n\
                     linux-image-6.12.38+deb12-arm64\n";
        // 6.12.38: the metapackage's numbers (6, 12, 64) would sort above
        // it; it is not a release's package.
        assert_eq!(newest_of(names, "6.12", Arch::Amd64).as_deref(), Some("linux-image-6.12.38+deb12-amd64"));
        let more = format!("{names}linux-image-6.12.117+deb12-amd64\n");
        assert_eq!(newest_of(&more, "6.12", Arch::Amd64).as_deref(), Some("linux-image-6.12.117+deb12-amd64"));
        assert_eq!(newest_of(names, "6.12", Arch::Arm64).as_deref(), Some("linux-image-6.12.38+deb12-arm64"));
        // The 6.1 line does not take 6.12's packages, and takes its ABIs in order.
        let one = "linux-image-6.1.0-9-amd64\nlinux-image-6.1.0-56-amd64\nlinux-image-6.12.38+deb12-amd64\n";
        assert_eq!(newest_of(one, "6.1", Arch::Amd64).as_deref(), Some("linux-image-6.1.0-56-amd64"));
        assert_eq!(newest_of("linux-image-6.12-amd64\n", "6.12", Arch::Amd64), None);
    }
}
