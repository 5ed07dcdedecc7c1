//! The hooks of the tools that make initramfs images and install kernels
//! on Debian, each run the way its tool runs it, on Debian's own kernel
//! installed into a scratch root (/boot/vmlinuz-VERSION with config- and
//! System.map-, lib/modules/VERSION), never the host's:
//!
//! - hooks/initramfs-tools/bootlink under the real mkinitramfs (-d a scratch
//!   configuration directory; the scratch root's lib/modules and boot bound
//!   over the host's in a private mount namespace, as mkinitramfs reads
//!   /lib/modules/VERSION and /boot/config-VERSION only), the image
//!   unpacked with unmkinitramfs;
//! - hooks/dracut/99zz-bootlink under the real dracut (Debian's package,
//!   unpacked when it is not installed: it conflicts with initramfs-tools),
//!   with --kmoddir, from a scratch copy of its modules.d;
//! - hooks/kernel-postinst.d/dkms-bootlink under run-parts, with the
//!   arguments and DEB_MAINT_PARAMS a linux-image postinst passes.
//!
//! Each image holds exactly the bytes apply recorded for the applied
//! modules, and the record; a module installed after apply is named in one
//! line and copied as it is; BOOTLINK_STRICT=1 fails the image.

use crate::common;

use common::initrd::{self, can_mkinitramfs, dracut, unpack_cpio};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RECORD: &str = "bootlink-applied.json";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A kernel as its package installs it, under `dir/root`: the image, its
/// config and System.map in boot/, a few directories of its modules in
/// lib/modules/VERSION with the files depmod and mkinitramfs read.
struct Installed {
    dir: common::TestDir,
    root: PathBuf,
    boot: PathBuf,
    rel: PathBuf,
    release: String,
    image: PathBuf,
    key: (PathBuf, PathBuf),
}

fn installed(name: &str) -> Installed {
    let k = common::kernel();
    let dir = common::tmpdir(name);
    let root = dir.join("root");
    let boot = root.join("boot");
    std::fs::create_dir_all(&boot).unwrap();
    let from = k.vmlinuz.parent().unwrap();
    for f in ["vmlinuz", "config", "System.map"] {
        let n = format!("{f}-{}", k.release);
        std::fs::copy(from.join(&n), boot.join(&n)).unwrap();
    }
    let rel = root.join("lib/modules").join(&k.release);
    common::install_modules(&rel, &["kernel/fs/fat", "kernel/fs/nls", "kernel/fs/isofs"]);
    let key = common::key_pair(&dir, "k");
    let image = boot.join(format!("vmlinuz-{}", k.release));
    Installed { dir, root, boot, rel, release: k.release.clone(), image, key }
}

impl Installed {
    /// `bootlink apply --image` with the test key (or `extra` instead),
    /// with isofs held back: it is installed after apply, as a module
    /// installed since would be, and depmod run again.
    fn apply_but_isofs(&self, extra: &[&str]) {
        let isofs = self.rel.join("kernel/fs/isofs");
        let aside = self.dir.join("isofs.later");
        std::fs::rename(&isofs, &aside).unwrap();
        let (k, c) = (self.key.0.to_str().unwrap(), self.key.1.to_str().unwrap());
        let signing = ["--sign-key", k, "--sign-cert", c];
        let mut cmd = common::TestCommand::new(&[&"apply", &"--image", &self.image, &"--modules", &self.root]);
        for a in if extra.is_empty() { &signing[..] } else { extra } {
            cmd = cmd.arg(a);
        }
        cmd.ok();
        std::fs::rename(&aside, &isofs).unwrap();
        common::sh("depmod", &["-b", self.root.to_str().unwrap(), &self.release]);
    }

    /// apply's record: each module's path below lib/modules/VERSION and
    /// its SHA-256.
    fn record(&self) -> BTreeMap<String, String> {
        common::record_in(&self.rel)
    }
}

/// Every module file below `dir` (an unpacked image's lib/modules/VERSION),
/// by its path below it.
fn modules_below(dir: &Path) -> BTreeMap<String, PathBuf> {
    common::files_below(dir, common::is_module)
}

/// The image's lib/modules/VERSION, wherever the tool put it (usr-merged
/// or not).
fn release_dir(unpacked: &Path, release: &str) -> PathBuf {
    for c in ["usr/lib/modules", "lib/modules", "main/usr/lib/modules", "main/lib/modules"] {
        let d = unpacked.join(c).join(release);
        if d.join("kernel").is_dir() && !unpacked.join(c).is_symlink() {
            return d;
        }
    }
    panic!("no lib/modules/{release} in {}", unpacked.display());
}

/// The checks both initramfs hooks must pass: every applied module in the
/// image is byte for byte what the record holds, the record is there, and
/// the module installed after apply is in the image as installed.
fn image_holds_the_applied_modules(t: &Installed, unpacked: &Path) {
    let rec = t.record();
    let dir = release_dir(unpacked, &t.release);
    let got = modules_below(&dir);
    let mut checked = 0;
    for (rel, path) in &got {
        match rec.get(rel) {
            Some(want) => {
                assert_eq!(&common::sha256_hex(path), want, "{rel} in the image is not what apply wrote");
                checked += 1;
            }
            None => assert_eq!(
                std::fs::read(path).unwrap(),
                std::fs::read(t.rel.join(rel)).unwrap(),
                "{rel}: not applied, so copied as installed"
            ),
        }
    }
    for want in ["kernel/fs/fat/vfat.ko", "kernel/fs/fat/fat.ko", "kernel/fs/nls/nls_cp437.ko"] {
        assert!(got.contains_key(want) && rec.contains_key(want), "{want} not in the image or the record: {got:?}");
    }
    assert!(got.contains_key("kernel/fs/isofs/isofs.ko"), "{got:?}");
    assert!(!rec.contains_key("kernel/fs/isofs/isofs.ko"));
    assert!(checked >= 3);
    assert_eq!(
        std::fs::read(dir.join(RECORD)).unwrap(),
        std::fs::read(t.rel.join(RECORD)).unwrap(),
        "the record copied into the image"
    );
}

/// The lines of `err` that contain `word`.
fn lines_with<'a>(err: &'a str, word: &str) -> Vec<&'a str> {
    err.lines().filter(|l| l.contains(word)).collect()
}

fn out(o: &Output) -> String {
    format!("status {:?}\nstdout:\n{}\nstderr:\n{}", o.status, common::stdout(o), common::stderr(o))
}

// ---------------------------------------------------------------- initramfs-tools

fn mkinitramfs(t: &Installed, conf: &Path, image: &Path, env: &[(&str, &str)]) -> Output {
    initrd::mkinitramfs(&t.root, conf, image, &t.release, &t.dir, env)
}

fn itools_conf(t: &Installed, modules: &[&str]) -> PathBuf {
    let conf = t.dir.join("conf");
    initrd::itools_conf(&conf, modules);
    conf
}

#[test]
fn initramfs_tools_hook_puts_the_applied_modules_and_the_record_in_the_image() {
    let test = "initramfs_tools_hook";
    if !can_mkinitramfs(test) {
        return;
    }
    let t = installed("hooks-itools");
    t.apply_but_isofs(&[]);
    let conf = itools_conf(&t, &["vfat", "nls_cp437", "isofs"]);
    let img = t.dir.join("initrd.img");
    let o = mkinitramfs(&t, &conf, &img, &[]);
    assert!(o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    let warned = lines_with(&err, "bootlink");
    assert_eq!(warned.len(), 1, "one line, for isofs only:\n{err}");
    assert!(
        warned[0].starts_with("W: bootlink: kernel/fs/isofs/isofs.ko: not in bootlink-applied.json"),
        "{}",
        warned[0]
    );
    let unpacked = t.dir.join("unpacked");
    common::sh("unmkinitramfs", &[img.to_str().unwrap(), unpacked.to_str().unwrap()]);
    image_holds_the_applied_modules(&t, &unpacked);

    // BOOTLINK_STRICT=1: the module installed since fails the image.
    let o = mkinitramfs(&t, &conf, &t.dir.join("strict.img"), &[("BOOTLINK_STRICT", "1")]);
    assert!(!o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    let failed = lines_with(&err, "E: bootlink: 1 of ");
    assert!(failed.len() == 1 && failed[0].ends_with("(BOOTLINK_STRICT=1)"), "{err}");

    // A tree apply never saw: one line, the image still made.
    std::fs::rename(t.rel.join(RECORD), t.dir.join("record.aside")).unwrap();
    let o = mkinitramfs(&t, &conf, &t.dir.join("never.img"), &[]);
    assert!(o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    let warned = lines_with(&err, "bootlink");
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("has no bootlink-applied.json"), "{err}");
}

#[test]
fn initramfs_tools_hook_checks_compressed_modules_before_mkinitramfs_decompresses_them() {
    let test = "initramfs_tools_hook_xz";
    if !can_mkinitramfs(test) {
        return;
    }
    if Command::new("xz").arg("--version").output().is_err() {
        return common::skip(test, "no xz (apt-get install xz-utils): mkinitramfs would keep .ko.xz as they are");
    }
    // Modules installed compressed (CONFIG_MODULE_COMPRESS_XZ): apply
    // writes them back compressed, the record holds the .ko.xz files'
    // digests; mkinitramfs decompresses after the hooks.
    let t = installed("hooks-itools-xz");
    for rel in modules_below(&t.rel).keys() {
        common::sh("xz", &["--check=crc32", "--lzma2=dict=1MiB", t.rel.join(rel).to_str().unwrap()]);
    }
    common::sh("depmod", &["-b", t.root.to_str().unwrap(), &t.release]);
    t.apply_but_isofs(&[]);
    let rec = t.record();
    assert!(rec.contains_key("kernel/fs/fat/vfat.ko.xz"), "{rec:?}");
    let conf = itools_conf(&t, &["vfat", "nls_cp437"]);
    let img = t.dir.join("initrd.img");
    let o = mkinitramfs(&t, &conf, &img, &[("BOOTLINK_STRICT", "1")]);
    assert!(o.status.success(), "every copied .ko.xz as recorded, so strict passes: {}", out(&o));
    assert!(lines_with(&common::stderr(&o), "bootlink").is_empty(), "{}", out(&o));
    let unpacked = t.dir.join("unpacked");
    common::sh("unmkinitramfs", &[img.to_str().unwrap(), unpacked.to_str().unwrap()]);
    let dir = release_dir(&unpacked, &t.release);
    let got = modules_below(&dir);
    // Decompressed in the image: the bytes of the applied .ko.xz, which is
    // what the kernel receives and the hash list holds.
    for m in ["kernel/fs/fat/vfat.ko", "kernel/fs/fat/fat.ko", "kernel/fs/nls/nls_cp437.ko"] {
        let xz = t.rel.join(format!("{m}.xz"));
        assert_eq!(common::sha256_hex(&xz), rec[&format!("{m}.xz")], "{m}.xz is as apply wrote it");
        let plain = common::sh("xz", &["-dc", xz.to_str().unwrap()]);
        assert_eq!(std::fs::read(&got[m]).unwrap(), plain, "{m} in the image is not the applied module");
    }
    assert!(dir.join(RECORD).is_file());
}

// ---------------------------------------------------------------- dracut

/// A copy of dracut's base directory with the hook's module added.
fn dracut_base(t: &Installed, base: &Path) -> PathBuf {
    let mine = t.dir.join("dracut");
    initrd::dracut_base(base, &mine);
    mine
}

/// dracut for the scratch kernel: the given dracut modules only, the test
/// modules added as drivers, no compression (the image is one cpio).
fn run_dracut(t: &Installed, bin: &Path, base: &Path, mods: &str, img: &Path, env: &[(&str, &str)]) -> Output {
    dracut_cmd(t, bin, base, mods, img, env, Some("vfat nls_cp437 isofs")).output().unwrap()
}

fn dracut_cmd(
    t: &Installed,
    bin: &Path,
    base: &Path,
    mods: &str,
    img: &Path,
    env: &[(&str, &str)],
    drivers: Option<&str>,
) -> Command {
    let add: Vec<&str> = drivers.map(|d| vec!["--add-drivers", d]).unwrap_or_default();
    let mut c = initrd::dracut_command(bin, base, &t.release, &t.rel, &t.dir, mods, &add, img);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

#[test]
fn dracut_module_puts_the_applied_modules_and_the_record_in_the_image() {
    let test = "dracut_module";
    let (bin, base) = match dracut() {
        Ok(d) => d,
        Err(why) => return common::skip(test, &why),
    };
    let t = installed("hooks-dracut");
    t.apply_but_isofs(&[]);
    let mine = dracut_base(&t, &base);
    let img = t.dir.join("initrd.img");
    let o = run_dracut(&t, &bin, &mine, "bash zz-bootlink", &img, &[]);
    assert!(o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    let warned = lines_with(&err, "not in bootlink-applied.json");
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("bootlink: kernel/fs/isofs/isofs.ko: not in"), "{err}");
    assert!(lines_with(&err, "bootlink: ").iter().all(|l| !l.contains("not the bytes")), "{err}");
    let unpacked = t.dir.join("unpacked");
    unpack_cpio(&img, &unpacked);
    image_holds_the_applied_modules(&t, &unpacked);

    let o = run_dracut(&t, &bin, &mine, "bash zz-bootlink", &t.dir.join("strict.img"), &[("BOOTLINK_STRICT", "1")]);
    assert!(!o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    let failed = lines_with(&err, "bootlink: 1 of ");
    assert!(failed.len() == 1 && failed[0].ends_with("(BOOTLINK_STRICT=1)"), "{}", out(&o));

    // No drivers asked for, dracut run from a shell whose stdin holds
    // something: the module installs nothing of its own (dracut's instmods
    // reads a list from stdin when given no names).
    let bare = t.dir.join("bare.img");
    let mut c = dracut_cmd(&t, &bin, &mine, "bash zz-bootlink", &bare, &[], None);
    c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"isofs\n").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", out(&o));
    unpack_cpio(&bare, &t.dir.join("bare"));
    let isofs = t.dir.join("bare/usr/lib/modules").join(&t.release).join("kernel/fs/isofs/isofs.ko");
    assert!(!isofs.exists() && !t.dir.join("bare/lib/modules").join(&t.release).join("kernel/fs/isofs").exists());
}

#[test]
fn dracut_module_keeps_unsigned_applied_modules_unstripped() {
    let test = "dracut_module_unsigned";
    let (bin, base) = match dracut() {
        Ok(d) => d,
        Err(why) => return common::skip(test, &why),
    };
    // Unsigned, as modules listed in a kernel's hash list are: dracut
    // strips unsigned modules by default, after the module loop.
    let t = installed("hooks-dracut-unsigned");
    t.apply_but_isofs(&["--allow-unsigned"]);
    let rec = t.record();
    let vfat = "kernel/fs/fat/vfat.ko";
    assert!(!std::fs::read(t.rel.join(vfat)).unwrap().ends_with(b"~Module signature appended~\n"));
    let mine = dracut_base(&t, &base);

    // Without the module, dracut's strip changes the applied bytes: what
    // the hook must prevent.
    let plain = t.dir.join("plain.img");
    let o = run_dracut(&t, &bin, &mine, "bash", &plain, &[]);
    assert!(o.status.success(), "{}", out(&o));
    unpack_cpio(&plain, &t.dir.join("plain"));
    let stripped = release_dir(&t.dir.join("plain"), &t.release).join(vfat);
    assert_ne!(&common::sha256_hex(&stripped), &rec[vfat], "dracut left an unsigned module unstripped by itself");

    let img = t.dir.join("initrd.img");
    let o = run_dracut(&t, &bin, &mine, "bash zz-bootlink", &img, &[]);
    assert!(o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    assert_eq!(lines_with(&err, "not stripping this initramfs").len(), 1, "{err}");
    let unpacked = t.dir.join("unpacked");
    unpack_cpio(&img, &unpacked);
    image_holds_the_applied_modules(&t, &unpacked);
}

// ---------------------------------------------------------------- /etc/kernel/postinst.d

const POSTINST: &str = "dkms-bootlink";

#[test]
fn postinst_hook_sorts_after_dkms_and_before_the_initramfs_makers() {
    let dir = common::tmpdir("hooks-order");
    for n in ["dkms", "dracut", "initramfs-tools", "unattended-upgrades", "zz-update-grub", POSTINST] {
        std::fs::copy("/bin/true", dir.join(n)).unwrap();
    }
    let listed = String::from_utf8(common::sh("run-parts", &["--list", dir.to_str().unwrap()])).unwrap();
    let names: Vec<&str> = listed.lines().map(|l| l.rsplit('/').next().unwrap()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{n} not run: {names:?}"));
    assert!(at("dkms") < at(POSTINST), "{names:?}");
    assert!(at(POSTINST) < at("dracut") && at(POSTINST) < at("initramfs-tools"), "{names:?}");
}

/// run-parts --report --exit-on-error --arg=VERSION --arg=IMAGE DIR, as a
/// linux-image package's postinst runs /etc/kernel/postinst.d.
fn run_parts(t: &Installed, dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("run-parts");
    c.args(["--report", "--exit-on-error"]);
    c.arg(format!("--arg={}", t.release)).arg(format!("--arg={}", t.image.display())).arg(dir);
    c.env("BOOTLINK", common::bin()).env("BOOTLINK_ROOT", &t.root).env("BOOTLINK_DEFAULTS", "/nonexistent");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn tree_digests(dir: &Path) -> BTreeMap<String, String> {
    common::digests_below(dir, common::is_module).into_iter().chain([(RECORD.into(), sha_or_none(dir))]).collect()
}

fn sha_or_none(dir: &Path) -> String {
    let p = dir.join(RECORD);
    if p.is_file() { common::sha256_hex(&p) } else { "none".into() }
}

#[test]
fn postinst_hook_applies_an_installed_kernel_before_the_initramfs_is_made() {
    let t = installed("hooks-postinst");
    // The hook, and in place of initramfs-tools' own script (which would
    // make /boot/initrd.img) one that notes the modules it would copy.
    let parts = t.dir.join("postinst.d");
    std::fs::create_dir_all(&parts).unwrap();
    std::fs::copy(repo("hooks/kernel-postinst.d").join(POSTINST), parts.join(POSTINST)).unwrap();
    let seen = t.dir.join("seen");
    let stand_in = format!(
        "#!/bin/sh\ncd \"$BOOTLINK_ROOT/lib/modules/$1\" && find . -name '*.ko' -type f | sort | xargs sha256sum > '{}'\n",
        seen.display()
    );
    std::fs::write(parts.join("initramfs-tools"), stand_in).unwrap();
    common::sh("chmod", &["755", parts.join("initramfs-tools").to_str().unwrap()]);
    let before = tree_digests(&t.rel);
    let (k, c) = (t.key.0.to_str().unwrap(), t.key.1.to_str().unwrap());
    let keyed = [("BOOTLINK_SIGN_KEY", k), ("BOOTLINK_SIGN_CERT", c)];

    // Not at configure (abort-upgrade): nothing.
    let o = run_parts(&t, &parts, &[("DEB_MAINT_PARAMS", "abort-upgrade 6.1.0-55-amd64"), keyed[0], keyed[1]]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(tree_digests(&t.rel), before, "written outside configure");

    // No key: signed modules of a kernel that checks signatures are left
    // alone, and apply says why; the package's configuration goes on.
    let o = run_parts(&t, &parts, &[("DEB_MAINT_PARAMS", "configure")]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(common::stderr(&o).contains("left out every step"), "{}", out(&o));
    assert_eq!(tree_digests(&t.rel), before, "written without a key");

    // With the key: trimmed and signed again, the image only read, and the
    // initramfs maker (run after) finds every module as apply recorded it.
    let image = std::fs::read(&t.image).unwrap();
    let o = run_parts(&t, &parts, &[("DEB_MAINT_PARAMS", "configure"), keyed[0], keyed[1]]);
    assert!(o.status.success(), "{}", out(&o));
    let err = common::stderr(&o);
    assert!(err.contains("steps    trim, sign"), "{err}");
    assert!(err.contains("is an installed image: read, never written"), "{err}");
    assert_eq!(std::fs::read(&t.image).unwrap(), image, "the installed image was written");
    let rec = t.record();
    assert_eq!(rec.len(), modules_below(&t.rel).len(), "every module recorded: {rec:?}");
    let vfat = std::fs::read(t.rel.join("kernel/fs/fat/vfat.ko")).unwrap();
    assert!(vfat.ends_with(b"~Module signature appended~\n"));
    assert_ne!(vfat, std::fs::read(common::kernel().modules.join("kernel/fs/fat/vfat.ko")).unwrap());
    let noted: BTreeMap<String, String> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|l| {
            let (d, p) = l.split_once("  ").unwrap();
            (p.trim_start_matches("./").to_string(), d.to_string())
        })
        .collect();
    assert_eq!(noted, rec, "the initramfs maker ran before apply, or saw other bytes");
    assert!(t.rel.join("modules.dep").is_file(), "depmod ran");

    // Run again (dpkg-reconfigure): nothing to do, nothing written.
    let first = tree_digests(&t.rel);
    let o = run_parts(&t, &parts, &[("DEB_MAINT_PARAMS", "configure"), keyed[0], keyed[1]]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(common::stderr(&o).contains("nothing to do"), "{}", out(&o));
    assert_eq!(tree_digests(&t.rel), first);

    // No version (a broken caller): refused as initramfs-tools' script does.
    let o = Command::new(parts.join(POSTINST)).env("BOOTLINK_DEFAULTS", "/nonexistent").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
}

#[test]
fn apply_image_is_read_only_and_exclusive_with_build() {
    let t = installed("hooks-image-args");
    let out_dir = t.dir.join("out");
    let err =
        common::TestCommand::new(&[&"apply", &"--image", &t.image, &"--modules", &t.root, &"--kernel-out", &out_dir])
            .fails_with("--kernel-out with --image");
    assert!(err.contains("never written"), "{err}");
    assert!(!out_dir.exists());
    let o = common::TestCommand::new(&[&"apply", &"--image", &t.image, &"--build", &t.boot, &"--modules", &t.root])
        .cmd_output();
    assert_eq!(o.status.code(), Some(2), "clap refuses both: {}", out(&o));
    assert!(common::stderr(&o).contains("cannot be used with"), "{}", out(&o));
    // A directory given as the image: said so, in one line.
    common::TestCommand::new(&[&"apply", &"--image", &t.boot, &"--modules", &t.root]).fails_with("not a file");
}

/// run-parts as a linux-image package's postrm runs /etc/kernel/postrm.d,
/// on a scratch root.
fn run_postrm(parts: &Path, root: &Path, release: &str, params: &str) -> Output {
    let mut c = Command::new("run-parts");
    c.args(["--report", "--exit-on-error"]);
    c.arg(format!("--arg={release}")).arg(format!("--arg=/boot/vmlinuz-{release}")).arg(parts);
    c.env("BOOTLINK_ROOT", root).env("BOOTLINK_DEFAULTS", "/nonexistent").env("DEB_MAINT_PARAMS", params);
    c.output().unwrap()
}

#[test]
fn postrm_hook_removes_the_record_once_the_modules_are_gone() {
    let dir = common::tmpdir("hooks-postrm");
    let parts = dir.join("postrm.d");
    std::fs::create_dir_all(&parts).unwrap();
    std::fs::copy(repo("hooks/kernel-postrm.d/bootlink"), parts.join("bootlink")).unwrap();
    let root = dir.join("root");
    let release = "6.1.192";
    let rel = root.join("lib/modules").join(release);
    let module = rel.join("kernel/fs/fat/vfat.ko");
    std::fs::create_dir_all(module.parent().unwrap()).unwrap();
    std::fs::write(rel.join(RECORD), "{}").unwrap();
    std::fs::write(&module, "a module").unwrap();
    // run-parts --report names the script before its first line.
    let said = |line: String| format!("{}:\n{line}\n", parts.join("bootlink").display());

    // An upgrade (the old package's postrm, the new modules in place): nothing.
    std::fs::remove_file(&module).unwrap();
    let o = run_postrm(&parts, &root, release, &format!("upgrade {release}-1"));
    assert!(o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(), "{}", out(&o));
    assert!(rel.join(RECORD).is_file());

    // Removed, but a module something else installed is still there: kept.
    std::fs::write(&module, "a module").unwrap();
    let o = run_postrm(&parts, &root, release, "remove");
    assert!(o.status.success(), "{}", out(&o));
    let want = said(format!(
        "bootlink: {} still holds modules ({}): {} kept",
        rel.display(),
        module.display(),
        rel.join(RECORD).display()
    ));
    assert_eq!(common::stderr(&o), want);
    assert!(rel.join(RECORD).is_file());

    // Another file left (Debian's own packages remove modules.dep only at
    // purge): the record goes, the directory stays.
    std::fs::remove_dir_all(rel.join("kernel")).unwrap();
    std::fs::write(rel.join("modules.dep"), "").unwrap();
    let o = run_postrm(&parts, &root, release, "remove");
    assert_eq!(common::stderr(&o), said(format!("bootlink: removed {}", rel.join(RECORD).display())));
    assert!(!rel.join(RECORD).exists() && rel.join("modules.dep").is_file());

    // Nothing else left: the record and the directory go; purge after it
    // finds nothing to do.
    std::fs::write(rel.join(RECORD), "{}").unwrap();
    std::fs::remove_file(rel.join("modules.dep")).unwrap();
    let o = run_postrm(&parts, &root, release, "remove");
    assert!(o.status.success(), "{}", out(&o));
    let want = said(format!("bootlink: removed {} and {}", rel.join(RECORD).display(), rel.display()));
    assert_eq!(common::stderr(&o), want);
    assert!(!rel.exists());
    let o = run_postrm(&parts, &root, release, "purge");
    assert!(o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(), "{}", out(&o));

    // No version (a broken caller): refused as the postinst.d hook does.
    let o = Command::new(parts.join("bootlink")).env("BOOTLINK_DEFAULTS", "/nonexistent").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
}
