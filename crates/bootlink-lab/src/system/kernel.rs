//! The kernel a system installs, as the `.deb` dpkg installs: Debian's
//! reference linux-image as shipped, or that same package carrying
//! bootlink's series built with Debian's own config (`kernel build --config
//! debian`: Debian's release and vermagic, Debian's module ABI) in place of
//! Debian's image, and Debian's modules taken through `bootlink apply`
//! against it.
//!
//! The series' kernel trusts its build's key, not Debian's: a patched
//! package's modules are Debian's, signed again with the build's key (apply
//! `--only sign`: what a distribution shipping the series would do with
//! its own key), or taken through apply's plan (every fix: the hash list
//! in the image instead of signatures), or through some of its fixes
//! (`--only`). The package is Debian's own otherwise (its control files and
//! maintainer scripts: postinst runs depmod and /etc/kernel/postinst.d,
//! where initramfs-tools makes the initrd), its version marked
//! `+bootlink.<key>`. Made once per content, under
//! `<cache>/systems/packages/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use bootlink::apply;
use bootlink::error::{Error, Kind, Result};
use bootlink::fetch;
use bootlink::fsutil::{self, TempDir};
use bootlink::hosttool;
use bootlink::kbuild::{self, Line};
use bootlink::manifest::Hash;
use bootlink::steps::Step;

/// Which kernel the system installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kernel {
    /// Debian's reference linux-image, as shipped (Debian's signed modules).
    Debian,
    /// The series built with Debian's config; Debian's modules through
    /// `bootlink apply --only` these steps (`[Sign]`: signed again with
    /// the build's key, nothing else).
    Patched(Vec<Step>),
    /// The series built with Debian's config; Debian's modules through
    /// apply's whole plan with this hash in the module hash list, its boot
    /// parameters on the command line.
    Applied(Hash),
}

impl Kernel {
    /// The patched kernel with its modules signed again, nothing else.
    pub fn patched() -> Kernel {
        Kernel::Patched(vec![Step::Sign])
    }

    /// The name the record and tables give it: `debian`, `patched`,
    /// `patched+finalize+sign`, `applied`, `applied+blake2b`.
    pub fn name(&self) -> String {
        match self {
            Kernel::Debian => "debian".into(),
            Kernel::Patched(only) if only == &[Step::Sign] => "patched".into(),
            Kernel::Patched(only) => {
                let names: Vec<&str> = only.iter().map(Step::name).collect();
                format!("patched+{}", names.join("+"))
            }
            Kernel::Applied(Hash::Sha256) => "applied".into(),
            Kernel::Applied(Hash::Blake2b256) => "applied+blake2b".into(),
        }
    }

    /// The hash of the module hash list apply writes: the one named by
    /// `applied`, BLAKE2b-256 for `--only manifest-blake2b`, else SHA-256.
    fn list_hash(&self) -> Hash {
        match self {
            Kernel::Applied(h) => *h,
            Kernel::Patched(only) if only.contains(&Step::ManifestBlake2b) => Hash::Blake2b256,
            _ => Hash::Sha256,
        }
    }
}

/// A kernel package ready for dpkg.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Package {
    /// [`Kernel::name`].
    pub kernel: String,
    /// The kernel line (`6.1`, `6.12`); records made before there was a
    /// choice are 6.1's.
    #[serde(default = "default_line")]
    pub line: String,
    pub deb: PathBuf,
    pub package: String,
    pub version: String,
    pub release: String,
    /// Boot parameters apply's plan asks for (the user's boot loader
    /// configuration would hold them).
    #[serde(default)]
    pub cmdline: Vec<String>,
    /// The series build the image is (its cache key), none for Debian's.
    #[serde(default)]
    pub build_key: Option<String>,
    /// The steps apply took the modules through, in order.
    #[serde(default)]
    pub steps: Vec<String>,
    /// Modules apply refused (left as Debian signed them), one line each.
    #[serde(default)]
    pub refused: Vec<String>,
}

pub(crate) fn default_line() -> String {
    Line::default().name.to_string()
}

/// Bumped when the way a patched package is made changes.
const RECIPE_VERSION: u32 = 1;

/// The package of `kernel` on `line`: Debian's from its cache (downloaded
/// when it is not there: the reference package on 6.1, the newest of the
/// line otherwise), a patched one from the cache or made now. The series'
/// build must be in the kernel cache (`bootlink kernel build --config
/// debian`, with `--line` on another line than 6.1): a system boot never
/// starts a kernel build.
pub fn package(kernel: &Kernel, line: Line) -> Result<Package> {
    let f = fetch::fetch(&line.debian_request())?;
    let deb = crate::lab::debs::download(&f.package, &f.version, fetch::Arch::Amd64)?;
    let only = match kernel {
        Kernel::Debian => {
            return Ok(Package {
                kernel: kernel.name(),
                line: line.name.to_string(),
                deb,
                package: f.package,
                version: f.version,
                release: f.release,
                cmdline: Vec::new(),
                build_key: None,
                steps: Vec::new(),
                refused: Vec::new(),
            });
        }
        Kernel::Patched(only) => Some(only.clone()),
        Kernel::Applied(_) => None,
    };
    let build = series_build(line)?;
    if build.release != f.release {
        return Err(Error::file(
            Kind::WrongKernel,
            &build.dir,
            format!("the series' Debian-config build is release {}, Debian's package {}", build.release, f.release),
        ));
    }
    let key = package_key(kernel, line, &build.key, &build.content_id()?, &f.version);
    let name = format!("{}-{key}", kernel.name());
    let packages = fsutil::cache_dir().join("systems/packages");
    let dir = packages.join(&name);
    let record = dir.join("package.json");
    // One package made once: a second boot asking for it while the first
    // makes it (system-compare --jobs) waits and then finds it made.
    // (What a making stopped half-way left, `make`'s work directories
    // `.NAME-KEY-*`, goes while the lock is held.)
    let _making = bootlink::cache::lock_for_making(&packages, &name, &format!(".{name}-"))?;
    // Used only as sealed (bootlink::cache): a damaged package is made again.
    if bootlink::cache::intact(&dir, "the patched kernel package")
        && let Ok(text) = fsutil::read_input(&record, 1 << 20)
        && let Ok(p) = serde_json::from_slice::<Package>(&text)
        && p.deb.is_file()
    {
        return Ok(p);
    }
    // apply remakes the bzImage from the build's object tree, which must
    // hold this build while it does: another build of the line (the lab's
    // kernel, with its lab series) may have switched the shared source
    // since, or switch it while apply runs (seen 2026-11-30: apply refused
    // a tree a lab build had just switched). The tree is made to hold this
    // one again where needed (what changed compiled again and vmlinux
    // relinked: minutes, not a kernel build), and the build lock is held
    // until the package is made.
    let mut opts = series_options(line)?;
    opts.cached_only = false;
    kbuild::with_tree_holding(&opts, &build.key, |b| make(kernel, only, b, &f, &deb, &key, &dir))
}

/// The kbuild options of `line`'s series built with Debian's config,
/// looked up in the cache only.
fn series_options(line: Line) -> Result<kbuild::Options> {
    let mut opts = kbuild::Options::for_line(line);
    opts.debian_config()?;
    opts.cached_only = true;
    Ok(opts)
}

/// The series of `line` built with Debian's config, from the kernel cache
/// only: refused, in one line naming the command that builds it, when
/// the cache does not hold it.
pub fn series_build(line: Line) -> Result<kbuild::Report> {
    kbuild::run(&series_options(line)?).map_err(|e| not_built(line, e))
}

/// The command that builds the series of `line` with Debian's config.
pub fn build_command(line: Line) -> String {
    let with_line = if line == Line::default() { String::new() } else { format!(" --line {line}") };
    format!("bootlink kernel build --config debian{with_line}")
}

/// A patched system kernel asked for whose build is not there (`e`).
fn not_built(line: Line, e: Error) -> Error {
    Error::new(
        Kind::Usage,
        format!(
            "the patched system kernel is the {line} series built with Debian's config: run `{}` first \
             (about an hour on 2 cores): {}",
            build_command(line),
            e.to_string().lines().next().unwrap_or_default()
        ),
    )
    .because(e)
}

/// The package's content key (16 hex digits): what it is made of, the
/// build's bytes (`content`, its vmlinux's build ID) with its key. The
/// line is named on a line other than 6.1.
fn package_key(kernel: &Kernel, line: Line, build_key: &str, content: &str, debian_version: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(format!(
        "recipe {RECIPE_VERSION}\nkernel {}\nbuild {build_key}\ndebian {debian_version}\n",
        kernel.name()
    ));
    if line != Line::default() {
        h.update(format!("line {line}\n"));
    }
    h.update(format!("content {content}\n"));
    fsutil::hex(&h.finalize()[..8])
}

/// Debian's package unpacked, the series' image, config and System.map in
/// its /boot, its modules through apply, packed again.
fn make(
    kernel: &Kernel,
    only: Option<Vec<Step>>,
    build: &kbuild::Report,
    f: &fetch::Fetched,
    deb: &Path,
    key: &str,
    dir: &Path,
) -> Result<Package> {
    let parent = dir.parent().expect("below the cache");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let work = TempDir::new_in(parent, &format!(".{}-{key}", kernel.name()))?;
    let pkg = work.path().join("pkg");
    bootlink::progress::status(&format!("unpacking {} {}", f.package, f.version));
    hosttool::run(
        Command::new("dpkg-deb").arg("-R").arg(deb).arg(&pkg),
        "dpkg-deb -R (Debian's kernel package)",
        "dpkg",
    )?;
    let rel = &f.release;
    let boot = pkg.join("boot");
    for (from, name) in [(&build.bzimage, "vmlinuz"), (&build.config, "config"), (&build.system_map, "System.map")] {
        let to = boot.join(format!("{name}-{rel}"));
        if !to.is_file() {
            return Err(Error::file(Kind::Format, deb, format!("no boot/{name}-{rel} in Debian's package")));
        }
        std::fs::copy(from, &to).map_err(|e| Error::io(from, e))?;
    }

    bootlink::progress::status(&format!("bootlink apply on Debian's modules ({})", kernel.name()));
    let kernel_out = work.path().join("kernel");
    let report = apply::run(&apply::Options {
        kernel: apply::Kernel::Build(build.dir.clone()),
        modules: pkg.clone(),
        kernel_out: Some(kernel_out.clone()),
        assume_nokaslr: false,
        sign_key: None,
        allow_unsigned: false,
        depmod: false,
        dry_run: false,
        manifest_hash: kernel.list_hash(),
        only,
    })?;
    if report.applied == 0 {
        return Err(Error::file(Kind::Tool, &pkg, "bootlink apply took no module through its steps"));
    }
    if report.plan.steps.iter().any(|s| s.list_hash().is_some()) {
        let made = kernel_out.join("bzImage");
        if !made.is_file() {
            return Err(Error::file(
                Kind::Tool,
                &kernel_out,
                format!("apply wrote the module hash list but made no bzImage ({})", report.notes.join("; ")),
            ));
        }
        let to = boot.join(format!("vmlinuz-{rel}"));
        std::fs::copy(&made, &to).map_err(|e| Error::io(&made, e))?;
    }
    // apply's record stays in the package: it says what was done, and a
    // second apply (the hook) finds the modules done.
    let version = format!("{}+bootlink.{}", f.version, &key[..8]);
    control_version(&pkg.join("DEBIAN/control"), &version, &kernel.name())?;
    md5sums(&pkg)?;
    let out = work.path().join("out");
    std::fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    let out_deb = out.join(format!("{}_{}_amd64.deb", f.package, version.replace(':', "%3a")));
    bootlink::progress::status(&format!("dpkg-deb -b {}", out_deb.display()));
    hosttool::run(
        Command::new("dpkg-deb").args(["--root-owner-group", "-Zgzip", "-z1", "-b"]).arg(&pkg).arg(&out_deb),
        "dpkg-deb -b (the patched kernel package)",
        "dpkg",
    )?;
    let final_deb = dir.join(out_deb.file_name().expect("a file"));
    let p = Package {
        kernel: kernel.name(),
        line: build.line.clone(),
        deb: final_deb,
        package: f.package.clone(),
        version,
        release: rel.clone(),
        cmdline: report.plan.cmdline.clone(),
        build_key: Some(build.key.clone()),
        steps: report.plan.steps.iter().map(|s| s.name().to_string()).collect(),
        refused: report.errors.iter().map(|e| e.to_string()).collect(),
    };
    let json = serde_json::to_string_pretty(&p).expect("serializable");
    fsutil::write_atomic(&out.join("package.json"), json.as_bytes())?;
    bootlink::cache::seal_tree(&out, |_| Some(bootlink::cache::Check::Content))?;
    bootlink::cache::install(&out, dir)?;
    Ok(p)
}

/// The control file's `Version:` set to `version`, and its description
/// saying what the package now holds.
fn control_version(control: &Path, version: &str, kernel: &str) -> Result<()> {
    let text = std::fs::read_to_string(control).map_err(|e| Error::io(control, e))?;
    let mut out = String::new();
    let mut seen = false;
    for line in text.lines() {
        if line.starts_with("Version:") {
            out.push_str(&format!("Version: {version}\n"));
            seen = true;
        } else if let Some(rest) = line.strip_prefix("Description:") {
            out.push_str(&format!("Description:{rest} (bootlink: {kernel})\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !seen {
        return Err(Error::file(Kind::Format, control, "no Version: field"));
    }
    std::fs::write(control, out).map_err(|e| Error::io(control, e))
}

/// DEBIAN/md5sums made again for the files as they now are (dpkg
/// --verify reads it).
fn md5sums(pkg: &Path) -> Result<()> {
    let list = hosttool::run(
        Command::new("sh")
            .arg("-c")
            .arg("find . -path ./DEBIAN -prune -o -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0r md5sum --")
            .current_dir(pkg),
        "md5sum of the package's files",
        "coreutils",
    )?;
    let file = pkg.join("DEBIAN/md5sums");
    std::fs::write(&file, list).map_err(|e| Error::io(&file, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_what_was_done() {
        assert_eq!(Kernel::Debian.name(), "debian");
        assert_eq!(Kernel::patched().name(), "patched");
        assert_eq!(Kernel::Patched(vec![Step::Finalize]).name(), "patched+finalize");
        assert_eq!(Kernel::Applied(Hash::Sha256).name(), "applied");
        assert_eq!(Kernel::Applied(Hash::Blake2b256).name(), "applied+blake2b");
        assert_eq!(Kernel::Applied(Hash::Blake2b256).list_hash(), Hash::Blake2b256);
        assert_eq!(Kernel::Patched(vec![Step::ManifestBlake2b]).list_hash(), Hash::Blake2b256);
        assert_eq!(Kernel::patched().list_hash(), Hash::Sha256);
        let key = |k: &Kernel, build: &str| package_key(k, Line::V6_1, build, "c", "v");
        assert_ne!(key(&Kernel::patched(), "k"), key(&Kernel::Applied(Hash::Sha256), "k"));
        assert_ne!(key(&Kernel::Applied(Hash::Sha256), "k"), key(&Kernel::Applied(Hash::Sha256), "k2"));
        assert_ne!(key(&Kernel::Applied(Hash::Sha256), "k"), key(&Kernel::Applied(Hash::Blake2b256), "k"));
        // The same build key with other bytes is another package.
        assert_ne!(
            package_key(&Kernel::patched(), Line::V6_1, "k", "c", "v"),
            package_key(&Kernel::patched(), Line::V6_1, "k", "c2", "v")
        );
    }

    #[test]
    fn each_line_has_its_own_packages() {
        // 6.1's key is the SHA-256 of
        // "recipe 1\nkernel patched\nbuild k\ndebian v\ncontent c\n".
        assert_eq!(package_key(&Kernel::patched(), Line::V6_1, "k", "c", "v"), "5db9ce44282ce090");
        // The same inputs on 6.12 (they never are: its build and Debian's
        // version differ too) make another package.
        assert_ne!(
            package_key(&Kernel::patched(), Line::V6_12, "k", "c", "v"),
            package_key(&Kernel::patched(), Line::V6_1, "k", "c", "v")
        );
        assert_eq!(default_line(), "6.1");
        let old: Package = serde_json::from_str(
            r#"{"kernel":"patched","deb":"/c/p.deb","package":"linux-image-6.1.0-56-amd64",
                "version":"6.1.192-2+bootlink.1","release":"6.1.0-56-amd64"}"#,
        )
        .unwrap();
        assert_eq!(old.line, "6.1", "a package record from before the choice is 6.1's");
    }

    #[test]
    fn a_missing_build_is_refused_in_one_line_naming_its_command() {
        assert_eq!(build_command(Line::V6_1), "bootlink kernel build --config debian");
        assert_eq!(build_command(Line::V6_12), "bootlink kernel build --config debian --line 6.12");
        let cause = Error::new(Kind::Build, "this kernel build is not in the cache (/c/build-x)\nmore");
        let e = not_built(Line::V6_12, cause).to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("run `bootlink kernel build --config debian --line 6.12` first"), "{e}");
        assert!(e.contains("the 6.12 series") && e.contains("not in the cache (/c/build-x)"), "{e}");
    }

    #[test]
    fn the_control_file_gets_the_new_version() {
        let t = TempDir::new("control").unwrap();
        let c = t.path().join("control");
        std::fs::write(&c, "Package: linux-image-x\nVersion: 6.1.192-2\nDescription: Linux 6.1\n more\n").unwrap();
        control_version(&c, "6.1.192-2+bootlink.abcd", "applied").unwrap();
        let s = std::fs::read_to_string(&c).unwrap();
        assert_eq!(
            s,
            "Package: linux-image-x\nVersion: 6.1.192-2+bootlink.abcd\nDescription: Linux 6.1 (bootlink: applied)\n more\n"
        );
        std::fs::write(&c, "Package: x\n").unwrap();
        assert!(control_version(&c, "1", "applied").unwrap_err().to_string().contains("no Version"));
    }
}
