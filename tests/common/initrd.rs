//! Initramfs images made by the tools distributions use (initramfs-tools'
//! mkinitramfs, dracut), and a boot of one in the lab that reports which
//! modules its own init loaded.
//!
//! The probe is a script the image's init runs after it has loaded the
//! modules it was asked to and before it looks for a root file system: it
//! prints /proc/modules between the lab's markers and powers off, so a boot
//! ends cleanly without a root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use bootlink_lab::lab::{Boot, QemuOptions};

/// The marker tag the probe frames /proc/modules with.
pub const PROBE_TAG: &str = "initrd-probe";

/// The probe's shell code: /proc/modules framed, then a forced power-off
/// by `poweroff` (busybox's applet, or `busybox poweroff`).
pub fn probe_body(poweroff: &str) -> String {
    format!(
        "echo '=== BOOTLINK BEGIN {PROBE_TAG} ==='\ncat /proc/modules\necho '=== BOOTLINK END {PROBE_TAG} ==='\n\
         {poweroff} -f\n"
    )
}

/// Put the probe into an initramfs-tools configuration directory as
/// scripts/init-premount/bootlink-probe: initramfs-tools' /init runs it
/// after loading /conf/modules ("Loading essential drivers").
pub fn itools_probe(conf: &Path) {
    let dir = conf.join("scripts/init-premount");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "#!/bin/sh\nPREREQ=\"\"\ncase \"$1\" in prereqs) echo \"$PREREQ\"; exit 0 ;; esac\n{}",
        probe_body("poweroff")
    );
    let path = dir.join("bootlink-probe");
    std::fs::write(&path, script).unwrap();
    super::sh("chmod", &["755", path.to_str().unwrap()]);
}

/// Boot `kernel` with `initrd` on the lab's x86-64 target (realtime: a
/// correctness check, not a measurement), the console kept in `log`.
pub fn boot(kernel: &Path, initrd: &Path, cmdline: &str, log: &Path) -> Boot {
    let mut o = QemuOptions::new(kernel);
    o.initrd = Some(initrd.to_path_buf());
    o.cmdline = format!("{} {cmdline}", o.cmdline);
    o.timeout = Duration::from_secs(240);
    o.log = Some(log.to_path_buf());
    let b = bootlink_lab::lab::qemu::run(&o).unwrap();
    if let Err(e) = b.check() {
        panic!("{e}");
    }
    b
}

/// The modules the probe saw loaded, by name, with their state
/// (`Live`), from /proc/modules' lines.
pub fn loaded(b: &Boot) -> BTreeMap<String, String> {
    let text = b.framed(PROBE_TAG).unwrap_or_else(|| panic!("the probe did not run:\n{}", b.excerpt(40)));
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 5).then(|| (f[0].to_string(), f[4].to_string()))
        })
        .collect()
}

// ---------------------------------------------------------------- initramfs-tools

/// Can mkinitramfs run here for a scratch root? Skips (counted) if not.
pub fn can_mkinitramfs(test: &str) -> bool {
    if !Path::new("/usr/sbin/mkinitramfs").is_file() || !Path::new("/usr/bin/unmkinitramfs").is_file() {
        super::skip(test, "mkinitramfs/unmkinitramfs not installed (apt-get install initramfs-tools)");
        return false;
    }
    let ns = Command::new("unshare").args(["--mount", "--propagation", "private", "true"]).output();
    if !ns.is_ok_and(|o| o.status.success()) {
        super::skip(
            test,
            "no private mount namespace here (unshare --mount needs root): mkinitramfs reads only /lib/modules",
        );
        return false;
    }
    true
}

/// mkinitramfs -d CONF -o IMAGE RELEASE, with `root`'s lib/modules and
/// boot bound over the host's in a private mount namespace (mkinitramfs
/// reads /lib/modules/RELEASE and /boot/config-RELEASE only; the host's
/// directories are never written, and no one else sees the binding).
pub fn mkinitramfs(root: &Path, conf: &Path, image: &Path, release: &str, tmp: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"]);
    c.arg(r#"mount --bind "$1" /lib/modules && mount --bind "$2" /boot && exec mkinitramfs -d "$3" -o "$4" "$5""#);
    c.arg("sh").arg(root.join("lib/modules")).arg(root.join("boot")).arg(conf).arg(image).arg(release);
    c.env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    c.env("TMPDIR", tmp);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A configuration directory as /etc/initramfs-tools is, at `conf`: the
/// host's initramfs.conf with only the listed `modules` (gzip), and
/// bootlink's hook.
pub fn itools_conf(conf: &Path, modules: &[&str]) {
    for d in ["hooks", "scripts", "conf.d"] {
        std::fs::create_dir_all(conf.join(d)).unwrap();
    }
    let mut ic = std::fs::read_to_string("/etc/initramfs-tools/initramfs.conf").unwrap_or_default();
    ic += "\nMODULES=list\nCOMPRESS=gzip\n";
    std::fs::write(conf.join("initramfs.conf"), ic).unwrap();
    std::fs::write(conf.join("modules"), modules.iter().map(|m| format!("{m}\n")).collect::<String>()).unwrap();
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/initramfs-tools/bootlink");
    std::fs::copy(hook, conf.join("hooks/bootlink")).unwrap();
}

// ---------------------------------------------------------------- dracut

/// dracut's own files: the installed package's, else Debian's packages
/// unpacked once into the cache (dracut conflicts with initramfs-tools, so
/// both cannot be installed). Returns (the dracut script, its base
/// directory), or why there is none.
pub fn dracut() -> Result<(PathBuf, PathBuf), String> {
    static D: std::sync::OnceLock<Result<(PathBuf, PathBuf), String>> = std::sync::OnceLock::new();
    D.get_or_init(find_dracut).clone()
}

fn find_dracut() -> Result<(PathBuf, PathBuf), String> {
    let (bin, base) = (PathBuf::from("/usr/bin/dracut"), PathBuf::from("/usr/lib/dracut"));
    if bin.is_file() && base.join("dracut-install").is_file() {
        return Ok((bin, base));
    }
    let root = super::cache().join("dracut");
    let (bin, base) = (root.join("usr/bin/dracut"), root.join("usr/lib/dracut"));
    if bin.is_file() && base.join("dracut-install").is_file() {
        return Ok((bin, base));
    }
    let dl = super::tmpdir("dracut-debs").keep();
    let got = Command::new("apt-get").args(["download", "dracut", "dracut-core"]).current_dir(&dl).output();
    match got {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(format!("apt-get download dracut dracut-core failed: {}", super::stderr(&o).trim())),
        Err(e) => return Err(format!("apt-get: {e}")),
    }
    let part = super::cache().join("dracut.part");
    let _ = std::fs::remove_dir_all(&part);
    for e in std::fs::read_dir(&dl).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "deb") {
            super::sh("dpkg", &["-x", e.path().to_str().unwrap(), part.to_str().unwrap()]);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&part, &root).unwrap();
    let _ = std::fs::remove_dir_all(&dl);
    if bin.is_file() && base.join("dracut-install").is_file() {
        Ok((bin, base))
    } else {
        Err(format!("no dracut in the unpacked packages ({})", root.display()))
    }
}

/// A copy of dracut's base directory at `to` with bootlink's module added
/// (the host's modules.d is never written).
pub fn dracut_base(base: &Path, to: &Path) {
    super::sh("cp", &["-a", base.to_str().unwrap(), to.to_str().unwrap()]);
    let m = to.join("modules.d/99zz-bootlink");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/dracut/99zz-bootlink");
    super::sh("cp", &["-r", src.to_str().unwrap(), m.to_str().unwrap()]);
}

/// Add the probe to a dracut base directory as the dracut module
/// "bootlink-probe" (asked for by name only): a `cmdline` hook numbered 99,
/// run by dracut's /init after 90kernel-modules' hook 01 loaded the drivers
/// of `rd.driver.pre` (what --force-drivers writes into the image), and
/// before /init asks for a root; busybox for the power-off.
pub fn dracut_probe(base: &Path) {
    let dir = base.join("modules.d/99bootlink-probe");
    std::fs::create_dir_all(&dir).unwrap();
    let setup = "#!/bin/bash\ncheck() {\n    return 255\n}\ndepends() {\n    return 0\n}\ninstall() {\n    \
                 inst_multiple busybox\n    inst_hook cmdline 99 \"$moddir/probe.sh\"\n}\n";
    std::fs::write(dir.join("module-setup.sh"), setup).unwrap();
    std::fs::write(dir.join("probe.sh"), format!("#!/bin/sh\n{}", probe_body("busybox poweroff"))).unwrap();
}

/// dracut (`bin`, run by bash with `base` as its dracutbasedir) for
/// `release` with the modules of `kmoddir`: only the dracut `modules`
/// named, no configuration but `extra` arguments, no host-only
/// selection, no compression (the image is one cpio), written to `img`.
#[allow(clippy::too_many_arguments)]
pub fn dracut_command(
    bin: &Path,
    base: &Path,
    release: &str,
    kmoddir: &Path,
    tmp: &Path,
    modules: &str,
    extra: &[&str],
    img: &Path,
) -> Command {
    let empty = tmp.join("dracut.conf.d");
    std::fs::create_dir_all(&empty).unwrap();
    let mut c = Command::new("bash");
    c.arg(bin).args(["--kver", release]).arg("--kmoddir").arg(kmoddir);
    c.args(["--conf", "/dev/null"]).arg("--confdir").arg(&empty);
    c.args(["--modules", modules, "--no-hostonly"]).args(extra);
    c.args(["--no-compress", "--no-early-microcode", "--force"]).arg(img);
    c.env("dracutbasedir", base).env("TMPDIR", tmp);
    c
}

/// Unpack an uncompressed cpio image into `to`.
pub fn unpack_cpio(img: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let o = Command::new("cpio")
        .args(["-id", "--quiet", "--no-absolute-filenames"])
        .current_dir(to)
        .stdin(std::fs::File::open(img).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "cpio: {}", super::stderr(&o));
}
