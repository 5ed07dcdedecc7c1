//! The Debian system's disk image: a bookworm root made by mmdebstrap
//! (minbase and [`PACKAGES`]), Debian's reference kernel package installed
//! into it with `dpkg -i` (its postinst runs initramfs-tools, which makes
//! the initrd with Debian's default `MODULES=most`), bootlink's few files
//! (the report service, two initramfs-tools scripts, fstab, hostname, a
//! fixed machine-id), root's password removed; then an ext4 file system
//! made from that directory with `mkfs.ext4 -d` into a raw image file (no
//! mount, no loop device). Cached by content under
//! `<cache>/systems/<suite>-<key>`.
//!
//! mmdebstrap runs in its root mode (chroot, with /proc, /sys and /dev
//! mounted for the hooks, in a mount namespace of its own), so building the
//! image needs root; making the
//! disk from the directory does not.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil::{self, TempDir};
use bootlink::hosttool;

use super::kernel::Package;

/// The Debian release the system is.
pub const SUITE: &str = "bookworm";

/// What mmdebstrap installs on top of minbase: the boot as a small server
/// has it (docs/system.md says why each is here).
pub const PACKAGES: &[&str] = &[
    "systemd",
    "systemd-sysv",
    "udev",
    "dbus",
    "kmod",
    "busybox",
    "initramfs-tools",
    "zstd",
    "linux-base",
    "e2fsprogs",
    "iproute2",
    "procps",
    "cron",
];

/// Bumped whenever the recipe below changes what the image holds in a way
/// its key does not see (the guest files and package list are in the key).
pub const RECIPE_VERSION: u32 = 1;

/// The root file system's UUID (the kernel's `root=UUID=`, fstab), fixed so
/// that two builds of the recipe boot the same command line.
pub const ROOT_UUID: &str = "6b0e7b4c-5c2a-4d2b-9d3e-b0071ab00001";

/// The host name the system is given.
pub const HOSTNAME: &str = "bootlink-system";

/// systemd's machine id, fixed: an image with none would be a first boot
/// every time (systemd-firstboot, presets applied), and a random one
/// would differ between builds.
const MACHINE_ID: &str = "b00711cb00711cb00711cb00711cb007";

/// Where mmdebstrap and the tools it runs are.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A file bootlink puts into the root: path, mode, contents.
struct GuestFile {
    path: &'static str,
    mode: u32,
    text: &'static str,
}

/// The report service's script and unit, and the initramfs-tools scripts
/// that record the initrd's stage (docs/system.md).
const GUEST_FILES: &[GuestFile] = &[
    GuestFile { path: "usr/local/sbin/bootlink-report", mode: 0o755, text: include_str!("guest/bootlink-report") },
    GuestFile {
        path: "etc/systemd/system/bootlink-report.service",
        mode: 0o644,
        text: include_str!("guest/bootlink-report.service"),
    },
    GuestFile {
        path: "etc/initramfs-tools/scripts/init-top/bootlink-stage",
        mode: 0o755,
        text: include_str!("guest/init-top"),
    },
    GuestFile {
        path: "etc/initramfs-tools/scripts/init-premount/bootlink-stage",
        mode: 0o755,
        text: include_str!("guest/init-premount"),
    },
    GuestFile {
        path: "etc/initramfs-tools/scripts/local-bottom/bootlink-stage",
        mode: 0o755,
        text: include_str!("guest/local-bottom"),
    },
    GuestFile {
        path: "etc/initramfs-tools/scripts/init-bottom/bootlink-stage",
        mode: 0o755,
        text: include_str!("guest/init-bottom"),
    },
];

/// The symlinks the image gets: the report service enabled, multi-user
/// (a server's target) the default.
const GUEST_LINKS: &[(&str, &str)] = &[
    ("etc/systemd/system/multi-user.target.wants/bootlink-report.service", "../bootlink-report.service"),
    ("etc/systemd/system/default.target", "/lib/systemd/system/multi-user.target"),
];

/// A built (or cached) system image.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Image {
    /// The cache key: the recipe, the package list, the kernel package, the guest files.
    pub key: String,
    pub suite: String,
    pub packages: Vec<String>,
    pub kernel_package: String,
    pub kernel_version: String,
    pub release: String,
    /// The kernel line of the package (`6.1`, `6.12`); images made before
    /// there was a choice are 6.1's.
    #[serde(default = "super::kernel::default_line")]
    pub line: String,
    /// The raw ext4 image (the root file system, no partition table).
    pub disk: PathBuf,
    /// /boot/vmlinuz-RELEASE and /boot/initrd.img-RELEASE as the package's
    /// postinst left them in the root, copied out for QEMU's -kernel/-initrd.
    pub vmlinuz: PathBuf,
    pub initrd: PathBuf,
    pub root_uuid: String,
    /// The disk's size in bytes, and what its files take.
    pub disk_bytes: u64,
    pub root_bytes: u64,
    /// Seconds mmdebstrap (with dpkg and mkinitramfs) took, and mkfs.ext4.
    pub mmdebstrap_s: f64,
    pub mkfs_s: f64,
    /// True when this call found the image in the cache.
    #[serde(default)]
    pub cached: bool,
    /// Which kernel (`debian`, `patched`, `applied`...: see
    /// [`super::kernel::Kernel::name`]).
    #[serde(default)]
    pub kernel: String,
    /// Boot parameters the kernel's package asks for (apply's plan).
    #[serde(default)]
    pub cmdline: Vec<String>,
    /// The steps apply took the package's modules through.
    #[serde(default)]
    pub steps: Vec<String>,
}

/// The cache directory of all system images.
pub fn cache_root() -> PathBuf {
    fsutil::cache_dir().join("systems")
}

/// The image's content key (16 hex digits).
pub fn key(kernel_package: &str, kernel_version: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(format!("recipe {RECIPE_VERSION}\nsuite {SUITE}\npackages {}\n", PACKAGES.join(",")));
    h.update(format!("kernel {kernel_package}={kernel_version}\nuuid {ROOT_UUID}\nhost {HOSTNAME}\n"));
    h.update(format!("machine-id {MACHINE_ID}\n"));
    for f in GUEST_FILES {
        h.update(format!("{} {:o} {}\n", f.path, f.mode, f.text.len()));
        h.update(f.text.as_bytes());
    }
    for (l, t) in GUEST_LINKS {
        h.update(format!("{l} -> {t}\n"));
    }
    fsutil::hex(&h.finalize()[..8])
}

/// The system image with `p` installed: from the cache, else built now.
pub fn with_package(p: &Package) -> Result<Image> {
    let key = key(&p.package, &p.version);
    let dir = cache_root().join(format!("{SUITE}-{key}"));
    if let Some(img) = cached(&dir, p) {
        return Ok(img);
    }
    // One process at a time builds an image; under the lock, a build
    // stopped half-way (its work directory) is removed.
    let name = format!("{SUITE}-{key}");
    let _lock = bootlink::cache::lock_for_making(&cache_root(), &name, &format!(".{name}-"))?;
    if let Some(img) = cached(&dir, p) {
        return Ok(img);
    }
    build(&dir, &key, p)
}

/// The image in `dir` when it is whole (sealed: bootlink::cache; a damaged
/// one is built again), given `p`'s kernel and command line.
fn cached(dir: &Path, p: &Package) -> Option<Image> {
    if !bootlink::cache::intact(dir, "the system image") {
        return None;
    }
    let text = fsutil::read_input(&dir.join("image.json"), 1 << 20).ok()?;
    let mut img = serde_json::from_slice::<Image>(&text).ok()?;
    if !(img.disk.is_file() && img.vmlinuz.is_file() && img.initrd.is_file()) {
        return None;
    }
    img.cached = true;
    img.line = p.line.clone();
    img.kernel = p.kernel.clone();
    img.cmdline = p.cmdline.clone();
    img.steps = p.steps.clone();
    Some(img)
}

fn build(dir: &Path, key: &str, f: &Package) -> Result<Image> {
    let deb = &f.deb;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::new(
            Kind::Usage,
            "building the system image needs root: mmdebstrap's root mode (chroot) installs the kernel package with dpkg",
        ));
    }
    for (tool, package) in [("mmdebstrap", "mmdebstrap"), ("mkfs.ext4", "e2fsprogs")] {
        if !hosttool::exists(tool) {
            return Err(Error::new(
                Kind::Tool,
                format!(
                    "{tool}: missing tool, needed to build the system image (install the Debian package {package})"
                ),
            ));
        }
    }
    let parent = cache_root();
    let work = TempDir::new_in(&parent, &format!(".{SUITE}-{key}"))?;
    let stage = work.path().join("stage");
    write_stage(&stage, deb)?;
    let root = work.path().join("root");

    bootlink::progress::status(&format!("mmdebstrap {SUITE} with {} (a few minutes)", f.package));
    let t0 = Instant::now();
    // In a mount namespace of its own: the /proc, /sys and /dev mmdebstrap
    // mounts in the root vanish with it, also when it is stopped half-way
    // (they stayed mounted on the host, under the work directory, when a
    // killed bootlink left mmdebstrap to be stopped by hand); and stopped
    // with bootlink (SIGTERM: mmdebstrap cleans up and exits).
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "mmdebstrap"]);
    hosttool::stop_with_caller(&mut c);
    c.arg("--variant=minbase")
        .arg("--mode=root")
        .arg(format!("--include={}", PACKAGES.join(",")))
        .arg(format!("--customize-hook=sync-in {} /", stage.display()))
        .arg("--customize-hook=chroot \"$1\" dpkg -i /tmp/linux-image.deb")
        .arg("--customize-hook=rm -f \"$1\"/tmp/linux-image.deb")
        .arg("--customize-hook=chroot \"$1\" passwd -d root")
        .arg(SUITE)
        .arg(&root);
    // The host's own mirror when it has one in deb822 form.
    let sources = Path::new("/etc/apt/sources.list.d/debian.sources");
    if sources.is_file() {
        c.arg(sources);
    }
    c.env("PATH", PATH);
    hosttool::run(&mut c, &format!("mmdebstrap {SUITE} (the system image)"), "mmdebstrap")?;
    let mmdebstrap_s = t0.elapsed().as_secs_f64();

    let boot = root.join("boot");
    let (vmlinuz_in, initrd_in) =
        (boot.join(format!("vmlinuz-{}", f.release)), boot.join(format!("initrd.img-{}", f.release)));
    if !initrd_in.is_file() {
        return Err(Error::file(Kind::Tool, &initrd_in, "the kernel package's postinst made no initrd"));
    }
    let out = work.path().join("out");
    std::fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    let (vmlinuz, initrd, disk) = (out.join("vmlinuz"), out.join("initrd.img"), out.join("disk.img"));
    for (from, to) in [(&vmlinuz_in, &vmlinuz), (&initrd_in, &initrd)] {
        std::fs::copy(from, to).map_err(|e| Error::io(from, e))?;
    }

    // The disk: what the files take, a third more and 256 MiB for the
    // journal and what the boot writes, in MiB.
    let root_bytes: u64 = hosttool::run(Command::new("du").arg("-sb").arg(&root), "du of the root", "coreutils")?
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::file(Kind::Tool, &root, "du printed no size"))?;
    let mib = (root_bytes + root_bytes / 3) / (1 << 20) + 256;
    let t1 = Instant::now();
    hosttool::run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-L", "bootlink-root", "-U", ROOT_UUID, "-d"])
            .arg(&root)
            .arg(&disk)
            .arg(format!("{mib}M"))
            .env("PATH", PATH),
        "mkfs.ext4 -d (the system image's disk)",
        "e2fsprogs",
    )?;
    let mkfs_s = t1.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&root).map_err(|e| Error::io(&root, e))?;

    let final_ = |p: &Path| dir.join(p.file_name().expect("a file"));
    let img = Image {
        key: key.to_string(),
        suite: SUITE.to_string(),
        packages: PACKAGES.iter().map(|p| p.to_string()).collect(),
        kernel_package: f.package.clone(),
        kernel_version: f.version.clone(),
        release: f.release.clone(),
        line: f.line.clone(),
        disk: final_(&disk),
        vmlinuz: final_(&vmlinuz),
        initrd: final_(&initrd),
        root_uuid: ROOT_UUID.to_string(),
        disk_bytes: mib << 20,
        root_bytes,
        mmdebstrap_s,
        mkfs_s,
        cached: false,
        kernel: f.kernel.clone(),
        cmdline: f.cmdline.clone(),
        steps: f.steps.clone(),
    };
    let json = serde_json::to_string_pretty(&img).expect("serializable");
    fsutil::write_atomic(&out.join("image.json"), json.as_bytes())?;
    // Sealed: the disk (booted with snapshot=on, never written) by size and
    // time, the rest by content. The whole directory appears at once; an
    // older one of the same key (incomplete, damaged) is replaced.
    bootlink::cache::seal_tree(&out, |rel| {
        Some(if rel == Path::new("disk.img") { bootlink::cache::Check::Stat } else { bootlink::cache::Check::Content })
    })?;
    bootlink::cache::install(&out, dir)?;
    Ok(img)
}

/// The files mmdebstrap's `sync-in` copies into the root (over what the
/// packages installed): bootlink's guest files, links, fstab, hostname,
/// machine-id, and the kernel package in /tmp. Directories get the modes
/// the root has for them (sync-in copies those too).
fn write_stage(stage: &Path, deb: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let set_mode = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(p, e))
    };
    let write = |rel: &str, mode: u32, text: &[u8]| -> Result<()> {
        let p = stage.join(rel);
        let parent = p.parent().expect("below the stage");
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        std::fs::write(&p, text).map_err(|e| Error::io(&p, e))?;
        set_mode(&p, mode)
    };
    for f in GUEST_FILES {
        write(f.path, f.mode, f.text.as_bytes())?;
    }
    write("etc/fstab", 0o644, format!("UUID={ROOT_UUID} / ext4 errors=remount-ro 0 1\n").as_bytes())?;
    write("etc/hostname", 0o644, format!("{HOSTNAME}\n").as_bytes())?;
    write("etc/hosts", 0o644, format!("127.0.0.1\tlocalhost\n127.0.1.1\t{HOSTNAME}\n").as_bytes())?;
    write("etc/machine-id", 0o444, format!("{MACHINE_ID}\n").as_bytes())?;
    for (link, to) in GUEST_LINKS {
        let p = stage.join(link);
        let parent = p.parent().expect("below the stage");
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        std::os::unix::fs::symlink(to, &p).map_err(|e| Error::io(&p, e))?;
    }
    let tmp = stage.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    std::fs::copy(deb, tmp.join("linux-image.deb")).map_err(|e| Error::io(deb, e))?;
    set_mode(&tmp, 0o1777)?;
    // Every other directory as Debian has it: 0755.
    let mut dirs = vec![stage.to_path_buf()];
    while let Some(d) = dirs.pop() {
        if d != tmp {
            set_mode(&d, 0o755)?;
        }
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let e = e.map_err(|e| Error::io(&d, e))?;
            if e.file_type().map_err(|x| Error::io(&e.path(), x))?.is_dir() {
                dirs.push(e.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_kernel_and_the_recipe() {
        let a = key("linux-image-6.1.0-56-amd64", "6.1.192-2");
        assert_eq!(a.len(), 16);
        assert_eq!(a, key("linux-image-6.1.0-56-amd64", "6.1.192-2"));
        assert_ne!(a, key("linux-image-6.1.0-56-amd64", "6.1.192-3"));
        // Each line's Debian package makes its own image.
        assert_ne!(a, key("linux-image-6.12.117+deb12-amd64", "6.12.117-1~deb12u1"));
    }

    #[test]
    fn the_stage_holds_the_guest_files() {
        let t = TempDir::new("system-stage").unwrap();
        let deb = t.path().join("k.deb");
        std::fs::write(&deb, b"!<arch>\n").unwrap();
        let stage = t.path().join("stage");
        write_stage(&stage, &deb).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| std::fs::metadata(stage.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("tmp"), 0o1777);
        assert_eq!(mode("etc"), 0o755);
        assert_eq!(mode("usr/local/sbin/bootlink-report"), 0o755);
        let fstab = std::fs::read_to_string(stage.join("etc/fstab")).unwrap();
        assert!(fstab.starts_with(&format!("UUID={ROOT_UUID} / ext4")), "{fstab}");
        let link = stage.join("etc/systemd/system/multi-user.target.wants/bootlink-report.service");
        assert_eq!(std::fs::read_link(link).unwrap(), Path::new("../bootlink-report.service"));
        assert!(stage.join("tmp/linux-image.deb").is_file());
    }
}
