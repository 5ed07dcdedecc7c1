//! hooks/kernel-postinst.d/dkms-bootlink (and hooks/kernel-postrm.d/bootlink)
//! as a user meets them: the lab's kernel packaged by kbuild's own `make
//! bindeb-pkg`, installed with `dpkg -i` into a scratch Debian bookworm
//! root (mmdebstrap: minbase with initramfs-tools, kmod, busybox, zstd and
//! openssl), whose /etc/kernel/postinst.d holds the hook next to
//! initramfs-tools' own and whose /etc/default/bootlink names the build's
//! signing key. Nothing is staged: the package's postinst runs run-parts,
//! the hook runs bootlink apply on the installed image, initramfs-tools'
//! script runs the real mkinitramfs.
//!
//! Checked: run-parts runs the hook before initramfs-tools; every module
//! the package installed is in bootlink-applied.json with the bytes on
//! disk, each signed again; `dpkg --verify` names exactly the modules apply
//! changed; the initramfs holds the recorded bytes; the installed
//! vmlinuz with that initramfs boots in the lab under module.sig_enforce=1
//! and initramfs-tools' /init loads every listed module (and each
//! dependency) without a taint or an unsigned-module line;
//! `dpkg-reconfigure` (postinst configure again) says `nothing to do` and
//! changes no module byte; `dpkg --purge` removes everything, the record and
//! its directory too (the postrm.d hook: dpkg leaves a directory holding a
//! file no package owns).
//!
//! The package is built once per kernel build key and cached
//! (~/.cache/bootlink/bindeb/KEY); the root once per package list
//! (~/.cache/bootlink/debian-roots/). The kernel's object tree is a shared
//! cache: bindeb-pkg runs under an overlay mount of it in a private mount
//! namespace (holding the build's locks, as a kernel build of its line
//! does: `kbuild::lock`), so everything it writes (debian/, the .deb files
//! beside the tree, vmlinux linked again) lands in a scratch directory.
//! The overlay covers the whole kernel build directory (the .deb files go
//! beside the object tree), the other line's source and trees too: a build
//! of that line may write to them meanwhile (they have their own locks),
//! where nothing here reads through the overlay.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const TEST: &str = "apply_deb_package";
const RECORD: &str = "bootlink-applied.json";
/// What /etc/initramfs-tools/modules lists (MODULES=list).
const MODULES: &[&str] = &["vfat", "nls_cp437", "sctp", "crc32c_generic"];
/// The scratch root: Debian's minbase and what a machine running the hooks
/// has. openssl: apply signs modules with `openssl cms`; zstd:
/// initramfs-tools' default compression (a Recommends, which mmdebstrap
/// leaves out).
const SUITE: &str = "bookworm";
const ROOT_PACKAGES: &[&str] = &["initramfs-tools", "kmod", "busybox", "zstd", "openssl"];
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const SIG_MAGIC: &[u8] = b"~Module signature appended~\n";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn text(o: &std::process::Output) -> String {
    format!("{}{}", common::stdout(o), common::stderr(o))
}

/// Everything this test runs must be here; a missing piece is a counted skip.
fn can_run() -> bool {
    for (tool, pkg) in [
        ("dpkg-buildpackage", "dpkg-dev"),
        ("fakeroot", "fakeroot"),
        ("mmdebstrap", "mmdebstrap"),
        ("unmkinitramfs", "initramfs-tools"),
        ("flock", "util-linux"),
        ("qemu-system-x86_64", "qemu-system-x86"),
    ] {
        let found = std::env::split_paths(PATH).any(|d| d.join(tool).is_file());
        if !found {
            common::skip(TEST, &format!("{tool} not installed (apt-get install {pkg}; scripts/install-deps)"));
            return false;
        }
    }
    let ns = Command::new("unshare").args(["--mount", "--propagation", "private", "true"]).output();
    if !ns.is_ok_and(|o| o.status.success()) {
        common::skip(TEST, "no private mount namespace here (unshare --mount needs root): chroot and overlay need one");
        return false;
    }
    true
}

// ---------------------------------------------------------------- the package

/// The linux-image package `make bindeb-pkg` makes of the lab's build `k`:
/// from the cache, else built now. Returns the .deb.
fn linux_image_deb(k: &common::SelfBuilt, key: &str) -> PathBuf {
    // The object tree's source is shared with other builds (arm64's series
    // leaves patches out): the package is what make made of the tree with
    // the source as this build left it, so the cache names both.
    let source = std::fs::read_to_string(k.tree.join("bootlink-source")).expect("the build recorded its source");
    let dir = common::cache().join("bindeb").join(format!("{key}-{}", &source[..12]));
    let name = format!("linux-image-{rel}_{rel}-1_amd64.deb", rel = k.release);
    let deb = dir.join(&name);
    if deb.is_file() {
        println!("linux-image package: cached ({})", deb.display());
        return deb;
    }
    let t0 = Instant::now();
    let scratch = common::tmpdir("bindeb-pkg");
    let upper = bindeb_pkg(k, key, &scratch);
    let secs = t0.elapsed().as_secs_f64();
    // What bindeb-pkg wrote, as the overlay kept it: beside the object
    // tree (the packages, .buildinfo, .changes) and in it.
    let obj_name = k.tree.file_name().unwrap().to_string_lossy().into_owned();
    let beside: Vec<String> = names(&upper).into_iter().filter(|n| *n != obj_name).collect();
    let inside = names(&upper.join(&obj_name));
    common::report(
        "make bindeb-pkg of the lab's kernel",
        &format!(
            "make bindeb-pkg: {secs:.0} s; beside the object tree: {}; in it: {}",
            beside.join(" "),
            inside.join(" ")
        ),
    );
    assert!(beside.contains(&name), "no {name} among {beside:?}");
    assert!(inside.contains(&"debian".to_string()), "mkdebian wrote no debian/: {inside:?}");
    std::fs::create_dir_all(&dir).unwrap();
    let part = dir.join(format!("{name}.part"));
    std::fs::copy(upper.join(&name), &part).unwrap();
    std::fs::rename(&part, &deb).unwrap();
    std::fs::remove_dir_all(&scratch).unwrap();
    deb
}

/// The packaged image names the loader features the build's bzImage
/// names (bindeb-pkg relinks vmlinux in the object tree: a source patched
/// by another build since would change what it names).
fn package_names_the_builds_features(k: &common::SelfBuilt, deb: &Path) {
    let loader = |image: &Path| {
        let o = Command::new(common::bin()).arg("kernel-info").arg(image).output().unwrap();
        assert!(o.status.success(), "kernel-info {}: {}", image.display(), text(&o));
        let out = common::stdout(&o);
        out.lines().find(|l| l.starts_with("loader ")).unwrap_or_else(|| panic!("no loader line:\n{out}")).to_string()
    };
    let x = common::tmpdir("deb-contents");
    common::sh("dpkg-deb", &["-x", deb.to_str().unwrap(), x.to_str().unwrap()]);
    let packaged = loader(&x.join("boot").join(format!("vmlinuz-{}", k.release)));
    assert_eq!(packaged, loader(&k.dir.join("bzImage")), "{}", deb.display());
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Run `make bindeb-pkg` in the object tree with the build's own settings
/// (bootlink's make environment: the build stamps, ccache as CC when the
/// build used it, the KSYMHASH hook), the kernel build directory (the
/// tree's parent, with the source) under an overlay whose upper layer is
/// `scratch/upper`, in a private mount namespace, holding the build's
/// locks (the one every build shares, the line's, the object tree's).
/// Returns the upper layer: exactly what bindeb-pkg wrote.
fn bindeb_pkg(k: &common::SelfBuilt, key: &str, scratch: &Path) -> PathBuf {
    let kbuild = k.tree.parent().unwrap().to_path_buf();
    let src = std::fs::read_link(k.tree.join("source")).expect("the object tree links its source");
    assert!(src.starts_with(&kbuild), "the source {} is not below {}", src.display(), kbuild.display());
    let watched = ["vmlinux", "arch/x86/boot/bzImage", "System.map", ".version", "Module.symvers"];
    let mut before: Vec<String> = watched.iter().map(|f| digest_or_none(&k.tree.join(f))).collect();
    let (upper, work) = (scratch.join("upper"), scratch.join("work"));
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let log = scratch.join("bindeb-pkg.log");
    // The tree must still hold this build once the locks are ours.
    let script = r#"set -e
kbuild=$1 upper=$2 work=$3 src=$4 obj=$5 key=$6; shift 6
[ "$(cat "$obj/bootlink-key")" = "$key" ] || { echo "the object tree holds another build now" >&2; exit 3; }
applied=$(ls -1 "$src/.bootlink-applied" | sha256sum | cut -d' ' -f1)
[ "$(cat "$obj/bootlink-source")" = "$applied" ] || { echo "the source holds another build's series now" >&2; exit 3; }
mount -t overlay overlay -o "lowerdir=$kbuild,upperdir=$upper,workdir=$work" "$kbuild"
cd "$src"
exec make O="$obj" "$@" bindeb-pkg"#;
    let line = bootlink::kbuild::Line::parse(common::line()).unwrap();
    let line_lock = bootlink::kbuild::lock::line_path(&kbuild, line);
    std::fs::create_dir_all(line_lock.parent().unwrap()).unwrap();
    let mut c = Command::new("flock");
    c.arg("--shared").arg(bootlink::kbuild::lock::all_lines_path(&kbuild));
    c.arg("flock").arg(&line_lock);
    c.arg("flock").arg(bootlink::kbuild::lock::tree_path(&k.tree));
    c.args(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]);
    c.arg(&kbuild).arg(&upper).arg(&work).arg(&src).arg(&k.tree).arg(key);
    c.arg("-j2").arg(format!("KDEB_PKGVERSION={}-1", k.release)).arg(format!("KDEB_CHANGELOG_DIST={SUITE}"));
    let ccache = std::env::split_paths(PATH).any(|d| d.join("ccache").is_file());
    if ccache {
        c.arg("CC=ccache gcc").env("CCACHE_DIR", common::cache().join("ccache")).env("CCACHE_BASEDIR", &kbuild);
    }
    c.env("KSYMHASH", format!("{} symhash --vmlinux", common::bin()))
        .env("KBUILD_BUILD_TIMESTAMP", "2026-01-01 00:00:00 UTC")
        .env("KBUILD_BUILD_USER", "bootlink")
        .env("KBUILD_BUILD_HOST", "bootlink")
        .env("LC_ALL", "C")
        .env("PATH", PATH);
    // Another test may have switched the shared tree to another build
    // (a flavour) between our `kernel build --tree` and the lock: make it
    // hold ours again, as a user would, and retry (the script exits 3
    // before it writes anything then).
    let mut o = c.output().unwrap();
    for _ in 0..3 {
        if o.status.code() != Some(3) {
            break;
        }
        println!("bindeb-pkg: {}; `kernel build --tree` again", text(&o).trim());
        let again = common::self_built(true);
        assert_eq!(again.tree, k.tree, "the same build's tree");
        before = watched.iter().map(|f| digest_or_none(&k.tree.join(f))).collect();
        o = c.output().unwrap();
    }
    std::fs::write(&log, text(&o)).unwrap();
    if !o.status.success() {
        let all = text(&o);
        let tail: Vec<&str> = all.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
        panic!("make bindeb-pkg failed ({}):\n{}", log.display(), tail.join("\n"));
    }
    let after: Vec<String> = watched.iter().map(|f| digest_or_none(&k.tree.join(f))).collect();
    assert_eq!(before, after, "bindeb-pkg changed the shared object tree ({watched:?})");
    upper
}

fn digest_or_none(p: &Path) -> String {
    if p.is_file() { common::sha256_hex(p) } else { "none".into() }
}

// ---------------------------------------------------------------- the root

/// A Debian root (mmdebstrap, minbase and ROOT_PACKAGES) as a tarball in
/// the cache, keyed by the suite and the package list.
fn root_tarball() -> PathBuf {
    use sha2::Digest;
    let spec = format!("{SUITE} minbase {}", ROOT_PACKAGES.join(","));
    let key: String = sha2::Sha256::digest(spec.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect();
    let dir = common::cache().join("debian-roots");
    let tar = dir.join(format!("{SUITE}-{key}.tar"));
    if tar.is_file() {
        println!("root: cached ({})", tar.display());
        return tar;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let part = dir.join(format!("{SUITE}-{key}.part.tar"));
    let t0 = Instant::now();
    let mut c = Command::new("mmdebstrap");
    c.arg("--variant=minbase").arg(format!("--include={}", ROOT_PACKAGES.join(","))).arg(SUITE).arg(&part);
    // The host's own mirror when it has one in deb822 form.
    let sources = Path::new("/etc/apt/sources.list.d/debian.sources");
    if sources.is_file() {
        c.arg(sources);
    }
    let o = c.env("PATH", PATH).output().unwrap();
    assert!(o.status.success(), "mmdebstrap failed:\n{}", text(&o));
    std::fs::rename(&part, &tar).unwrap();
    common::report(TEST, &format!("mmdebstrap {spec}: {:.0} s", t0.elapsed().as_secs_f64()));
    tar
}

/// Run `args` in `root` as root, in a private mount namespace with /proc
/// and /sys mounted in it, with a clean environment; stdout and stderr
/// together, in the order they were written.
fn in_root(root: &Path, args: &[&str]) -> (bool, String) {
    let script = r#"r=$1; shift
mount -t proc proc "$r/proc" && mount -t sysfs sysfs "$r/sys" &&
exec chroot "$r" /usr/bin/env -i PATH="$P" HOME=/root LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@" 2>&1"#;
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(root)
        .args(args)
        .env("P", PATH)
        .output()
        .unwrap();
    (o.status.success(), text(&o))
}

fn in_root_ok(root: &Path, args: &[&str]) -> String {
    let (ok, out) = in_root(root, args);
    assert!(ok, "chroot {} {args:?} failed:\n{out}", root.display());
    out
}

/// The root as the user has set it up before installing the kernel: the
/// bootlink binary on PATH, both hooks, /etc/default/bootlink naming the
/// build's key, initramfs-tools listing MODULES (MODULES=list), the boot
/// probe, the package in /tmp.
fn set_up_root(root: &Path, k: &common::SelfBuilt, deb: &Path) {
    let install = |from: &Path, to: &str, mode: &str| {
        let to = root.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap();
        common::sh("chmod", &[mode, to.to_str().unwrap()]);
    };
    install(Path::new(common::bin()), "usr/local/bin/bootlink", "755");
    install(&repo("hooks/kernel-postinst.d/dkms-bootlink"), "etc/kernel/postinst.d/dkms-bootlink", "755");
    install(&repo("hooks/kernel-postrm.d/bootlink"), "etc/kernel/postrm.d/bootlink", "755");
    install(&k.dir.join("module-signing.pem"), "etc/bootlink/module-signing.pem", "600");
    install(&k.dir.join("module-signing.crt"), "etc/bootlink/module-signing.crt", "644");
    std::fs::write(
        root.join("etc/default/bootlink"),
        "BOOTLINK_SIGN_KEY=/etc/bootlink/module-signing.pem\nBOOTLINK_SIGN_CERT=/etc/bootlink/module-signing.crt\n",
    )
    .unwrap();
    let conf = root.join("etc/initramfs-tools");
    let ic = std::fs::read_to_string(conf.join("initramfs.conf")).unwrap();
    assert_eq!(ic.lines().filter(|l| *l == "MODULES=most").count(), 1, "initramfs.conf:\n{ic}");
    std::fs::write(conf.join("initramfs.conf"), ic.replace("MODULES=most", "MODULES=list")).unwrap();
    let mut listed = std::fs::read_to_string(conf.join("modules")).unwrap();
    for m in MODULES {
        listed += &format!("{m}\n");
    }
    std::fs::write(conf.join("modules"), listed).unwrap();
    common::initrd::itools_probe(&conf);
    std::fs::copy(deb, root.join("tmp").join(deb.file_name().unwrap())).unwrap();
}

// ---------------------------------------------------------------- checks

/// The initramfs's lib/modules/RELEASE (usr-merged or not), unpacked.
fn initrd_modules(img: &Path, to: &Path, release: &str) -> BTreeMap<String, String> {
    let _ = std::fs::remove_dir_all(to);
    common::sh("unmkinitramfs", &[img.to_str().unwrap(), to.to_str().unwrap()]);
    for c in ["usr/lib/modules", "lib/modules", "main/usr/lib/modules", "main/lib/modules"] {
        let d = to.join(c).join(release);
        if d.join("kernel").is_dir() && !to.join(c).is_symlink() {
            return common::digests_below(&d, common::is_module);
        }
    }
    panic!("no lib/modules/{release} in {}", img.display());
}

/// Every module the initramfs holds is the recorded bytes, and each listed
/// module is there.
fn initrd_holds_the_record(img: &Path, to: &Path, release: &str, rec: &BTreeMap<String, String>) {
    let got = initrd_modules(img, to, release);
    for (rel, sha) in &got {
        assert_eq!(rec.get(rel), Some(sha), "{rel} in {} is not the recorded bytes", img.display());
    }
    let stems: BTreeSet<String> = got.keys().map(|r| module_name(r)).collect();
    for m in MODULES {
        assert!(stems.contains(*m), "{m} not in {}: {stems:?}", img.display());
    }
}

/// A module's name as /proc/modules prints it, from its path.
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap();
    file.split(".ko").next().unwrap().replace('-', "_")
}

/// MODULES and everything they depend on, by modules.dep.
fn with_dependencies(rel: &Path) -> BTreeSet<String> {
    let dep = std::fs::read_to_string(rel.join("modules.dep")).unwrap();
    let deps: BTreeMap<String, Vec<String>> = dep
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(m, d)| (module_name(m), d.split_whitespace().map(module_name).collect()))
        .collect();
    let mut want = BTreeSet::new();
    let mut todo: Vec<String> = MODULES.iter().map(|m| m.to_string()).collect();
    while let Some(m) = todo.pop() {
        if want.insert(m.clone()) {
            todo.extend(deps.get(&m).unwrap_or_else(|| panic!("{m} not in modules.dep")).iter().cloned());
        }
    }
    want
}

#[test]
fn a_bindeb_pkg_kernel_installed_with_dpkg_is_applied_before_its_initramfs_and_boots() {
    if !can_run() {
        return;
    }
    let t_all = Instant::now();
    let k = common::self_built(true);
    let built: serde_json::Value = serde_json::from_slice(&std::fs::read(k.dir.join("build.json")).unwrap()).unwrap();
    let key = built["key"].as_str().unwrap();
    let rel_name = k.release.as_str();

    let t0 = Instant::now();
    let deb = linux_image_deb(&k, key);
    let t_deb = t0.elapsed().as_secs_f64();
    package_names_the_builds_features(&k, &deb);
    let t0 = Instant::now();
    let tar = root_tarball();
    let dir = common::tmpdir("deb-package");
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    common::sh("tar", &["-xf", tar.to_str().unwrap(), "-C", root.to_str().unwrap()]);
    let t_root = t0.elapsed().as_secs_f64();
    set_up_root(&root, &k, &deb);
    let pkg = format!("linux-image-{rel_name}");
    let rel = root.join("lib/modules").join(rel_name);
    let boot = root.join("boot");

    // run-parts' own order: the hook before initramfs-tools' script.
    let order = in_root_ok(&root, &["run-parts", "--test", "/etc/kernel/postinst.d"]);
    assert_eq!(
        order.lines().collect::<Vec<_>>(),
        ["/etc/kernel/postinst.d/dkms-bootlink", "/etc/kernel/postinst.d/initramfs-tools"]
    );

    // Installed as a user installs it.
    let t0 = Instant::now();
    let deb_in_root = format!("/tmp/{}", deb.file_name().unwrap().to_string_lossy());
    let installed = in_root_ok(&root, &["dpkg", "-i", &deb_in_root]);
    let t_install = t0.elapsed().as_secs_f64();
    common::report("dpkg -i of the bindeb-pkg package", &installed);
    let at =
        |what: &str| installed.find(what).unwrap_or_else(|| panic!("no {what:?} in dpkg -i's output:\n{installed}"));
    let applying = at(&format!("bootlink: applying to /lib/modules/{rel_name}\n"));
    let generating = at(&format!("update-initramfs: Generating /boot/initrd.img-{rel_name}"));
    assert!(at(&format!("Setting up {pkg} ")) < applying && applying < generating, "{installed}");
    let steps = installed.lines().find(|l| l.starts_with("steps ")).unwrap();
    // the lab config randomizes the base: folded for the slide
    assert_eq!(steps.split_whitespace().collect::<Vec<_>>(), ["steps", "fold-slide,", "unsign,", "finalize,", "sign"]);
    assert!(!installed.contains("W: bootlink") && !installed.contains("E: bootlink"), "{installed}");

    // Every module the package installed went through apply and is in the
    // record with the bytes on disk, signed again.
    let listed = common::stdout(&Command::new("dpkg-deb").arg("-c").arg(&deb).output().unwrap());
    let prefix = format!("./lib/modules/{rel_name}/");
    let packaged: BTreeSet<String> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter_map(|p| p.strip_prefix(&prefix))
        .filter(|p| common::is_module(Path::new(p)))
        .map(str::to_string)
        .collect();
    let rec = common::record_in(&rel);
    let on_disk = common::digests_below(&rel, common::is_module);
    assert_eq!(on_disk, rec, "the modules on disk are not the record");
    assert_eq!(rec.keys().cloned().collect::<BTreeSet<_>>(), packaged, "the record is not the package's modules");
    for m in rec.keys() {
        assert!(std::fs::read(rel.join(m)).unwrap().ends_with(SIG_MAGIC), "{m} is not signed");
    }
    assert!(installed.contains(&format!("took {} through the steps", rec.len())), "{installed}");
    // dpkg --verify names the files apply rewrote: exactly the modules
    // whose bytes differ from the package's.
    let unpacked = dir.join("package");
    common::sh("dpkg-deb", &["-x", deb.to_str().unwrap(), unpacked.to_str().unwrap()]);
    let from_pkg = common::digests_below(&unpacked.join("lib/modules").join(rel_name), common::is_module);
    let changed: BTreeSet<String> =
        rec.iter().filter(|(m, sha)| from_pkg[*m] != **sha).map(|(m, _)| m.clone()).collect();
    let (_, verify) = in_root(&root, &["dpkg", "--verify", &pkg]);
    let verified: BTreeSet<String> = verify
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter_map(|p| p.strip_prefix(&prefix[1..]))
        .filter(|p| common::is_module(Path::new(p)))
        .map(str::to_string)
        .collect();
    assert_eq!(verified, changed, "dpkg --verify:\n{verify}");
    let others: Vec<&str> = verify.lines().filter(|l| !l.contains(".ko")).collect();
    common::report(
        TEST,
        &format!(
            "dpkg --verify {pkg}: {} of {} modules changed by apply; other files: {others:?}",
            changed.len(),
            rec.len()
        ),
    );

    // The initramfs initramfs-tools made: the recorded bytes.
    let initrd = boot.join(format!("initrd.img-{rel_name}"));
    let vmlinuz = boot.join(format!("vmlinuz-{rel_name}"));
    initrd_holds_the_record(&initrd, &dir.join("initrd"), rel_name, &rec);

    // Booted: initramfs-tools' /init loads the listed modules (and their
    // dependencies), each through its new signature.
    let t0 = Instant::now();
    let log = dir.join("console.log");
    let b = common::initrd::boot(&vmlinuz, &initrd, "module.sig_enforce=1", &log);
    let t_boot = t0.elapsed().as_secs_f64();
    let loaded = common::initrd::loaded(&b);
    for m in with_dependencies(&rel) {
        assert_eq!(loaded.get(&m).map(String::as_str), Some("Live"), "{m} not loaded: {loaded:?}");
    }
    assert!(!b.log.contains("tainting kernel"), "a module tainted the kernel ({})", log.display());
    assert!(!b.log.contains("Loading of unsigned module"), "an unsigned module ({})", log.display());
    assert!(b.log.contains("module.sig_enforce=1"), "the command line is not the one asked for");

    // Configured again: nothing to do, no module byte changed, the image
    // made again still the recorded bytes.
    let again = in_root_ok(&root, &["dpkg-reconfigure", &pkg]);
    assert!(again.contains("nothing to do"), "{again}");
    assert_eq!(common::digests_below(&rel, common::is_module), rec, "dpkg-reconfigure changed a module");
    initrd_holds_the_record(&initrd, &dir.join("initrd2"), rel_name, &rec);

    // Purged: nothing of the kernel left, the record and its directory
    // neither.
    let purged = in_root_ok(&root, &["dpkg", "--purge", &pkg]);
    common::report("dpkg --purge of the package", &purged);
    assert!(!purged.contains("W: bootlink") && !purged.contains("E: bootlink"), "{purged}");
    assert!(purged.contains(&format!("bootlink: removed /lib/modules/{rel_name}/{RECORD}")), "{purged}");
    assert!(!root.join("lib/modules").join(rel_name).exists(), "lib/modules/{rel_name} left behind:\n{purged}");
    // dpkg removes the directories its files leave after the postrm: the
    // hook has taken the record away by then, so dpkg has no warning.
    assert!(!purged.contains("not empty so not removed"), "{purged}");
    let left: Vec<String> = names(&boot).into_iter().filter(|n| n.contains(rel_name)).collect();
    assert!(left.is_empty(), "left in /boot: {left:?}");

    common::report(
        TEST,
        &format!(
            "package {t_deb:.0} s, root {t_root:.0} s, dpkg -i {t_install:.0} s, boot {t_boot:.0} s, all {:.0} s",
            t_all.elapsed().as_secs_f64()
        ),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
