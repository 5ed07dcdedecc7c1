//! The Buildroot and Yocto integrations (hooks/buildroot, a BR2_EXTERNAL
//! tree; hooks/yocto/meta-bootlink, a layer), their steps run the way each
//! tool runs them, on Debian's reference kernel laid out as each tool lays
//! out a kernel build, never on a real Buildroot or bitbake build:
//!
//! - Buildroot: GNU make reads external.mk with the variables Buildroot
//!   sets (HOST_DIR, LINUX_DIR, TARGET_DIR, BINARIES_DIR, LINUX_IMAGE_PATH,
//!   the BR2_ options) and runs TARGET_FINALIZE_HOOKS as Buildroot's
//!   Makefile does (`$(foreach hook,...,$($(hook))$(sep))`, with bash),
//!   linux.mk's LINUX_RUN_DEPMOD first; a module a kernel-module package
//!   installed (extra/) is in the target beside linux's.
//!   (Buildroot itself reading the tree, and its check-package linter,
//!   need Buildroot's source: tests/extended/buildroot_source.rs, extended tier.)
//! - Yocto: do_bootlink_apply's shell body, taken from the class, with the
//!   variables bitbake expands in it (B, D, nonarch_base_libdir,
//!   KERNEL_VERSION, ...) expanded, run as bitbake runs a shell task
//!   (`sh -e`, in its [dirs], bootlink-native's bindir on PATH).
//!
//! Each asserts the tree: the modules as apply's plan for that kernel says
//! (Debian's kernel randomizes its base and checks signatures: trim and
//! sign), the record, the kernel images where the tool takes them from,
//! depmod left to the tool, and a second run writing nothing. Then
//! Yocto's linter on the layer: oelint-adv (PyPI).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Every file below `dir` (symbolic links not followed): its path and SHA-256.
fn digests(dir: &Path) -> BTreeMap<PathBuf, String> {
    common::files_below(dir, |p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
        .into_values()
        .map(|p| {
            let h = common::sha256_hex(&p);
            (p, h)
        })
        .collect()
}

fn out(o: &Output) -> String {
    format!("status {:?}\nstdout:\n{}\nstderr:\n{}", o.status, common::stdout(o), common::stderr(o))
}

/// A kbuild object directory as a kernel build leaves it: vmlinux,
/// .config, System.map, arch/x86/boot/bzImage (Debian's image of the same
/// kernel) and, when `key` is given, kbuild's certs/signing_key.pem (the
/// private key and certificate in one file) named by CONFIG_MODULE_SIG_KEY.
fn kbuild_dir(dir: &Path, key: Option<(&Path, &Path)>) -> PathBuf {
    let k = common::kernel();
    std::fs::create_dir_all(dir.join("arch/x86/boot")).unwrap();
    std::fs::copy(&k.vmlinux, dir.join("vmlinux")).unwrap();
    std::fs::copy(&k.config, dir.join(".config")).unwrap();
    let from = k.vmlinuz.parent().unwrap();
    std::fs::copy(from.join(format!("System.map-{}", k.release)), dir.join("System.map")).unwrap();
    std::fs::copy(&k.vmlinuz, dir.join("arch/x86/boot/bzImage")).unwrap();
    if let Some((key, cert)) = key {
        // Debian signs its modules outside kbuild; a build that signs its
        // own names kbuild's default key in its .config.
        let mut config = std::fs::read_to_string(&k.config).unwrap();
        assert!(!config.contains("CONFIG_MODULE_SIG_KEY="), "Debian's config names a key");
        config += "CONFIG_MODULE_SIG_KEY=\"certs/signing_key.pem\"\n";
        std::fs::write(dir.join(".config"), config).unwrap();
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        let mut pem = std::fs::read(key).unwrap();
        pem.extend(std::fs::read(cert).unwrap());
        std::fs::write(dir.join("certs/signing_key.pem"), pem).unwrap();
    }
    dir.to_path_buf()
}

/// Debian's fat, nls and isofs modules installed into `rel`
/// (.../lib/modules/VERSION) as modules_install leaves them, depmod not run.
fn install_modules(rel: &Path) {
    common::install_modules(rel, &["kernel/fs/fat", "kernel/fs/nls", "kernel/fs/isofs"]);
}

/// What apply's plan does to Debian's modules with a key (trim, sign):
/// every module below `rel` recorded with its bytes, signed again, and
/// not the bytes Debian shipped.
fn applied_with_a_key(rel: &Path) -> BTreeMap<String, String> {
    let k = common::kernel();
    let rec = common::record_in(rel);
    let mut n = 0;
    for (p, d) in digests(rel) {
        let r = p.strip_prefix(rel).unwrap().to_string_lossy().into_owned();
        if !r.ends_with(".ko") {
            continue;
        }
        n += 1;
        assert_eq!(rec.get(&r), Some(&d), "{r}: not recorded as it is");
        let bytes = std::fs::read(&p).unwrap();
        assert!(bytes.ends_with(b"~Module signature appended~\n"), "{r} is not signed again");
        // extra/: where Buildroot's test put a package's module.
        let shipped = if r == "extra/isofs.ko" { "kernel/fs/isofs/isofs.ko" } else { r.as_str() };
        assert_ne!(bytes, std::fs::read(k.modules.join(shipped)).unwrap(), "{r} is as Debian shipped it");
    }
    assert_eq!(rec.len(), n, "the record lists other modules: {rec:?}");
    let isofs = rec.contains_key("kernel/fs/isofs/isofs.ko") || rec.contains_key("extra/isofs.ko");
    assert!(rec.contains_key("kernel/fs/fat/vfat.ko") && isofs, "{rec:?}");
    rec
}

// ---------------------------------------------------------------- Buildroot

/// A Buildroot output directory's parts for the kernel when target-finalize
/// starts: output/host/bin/bootlink and host/sbin/depmod (host-kmod's),
/// output/build/linux-VERSION (LINUX_DIR), output/target with linux's
/// modules and one a kernel-module package installed after them
/// (extra/isofs.ko, where kbuild's modules_install puts an external
/// module), the image in /boot (BR2_LINUX_KERNEL_INSTALL_TARGET) and in
/// output/images (linux's install-images).
struct Br {
    /// Where it all lives: removed when the test passes.
    _dir: common::TestDir,
    out: PathBuf,
    linux: PathBuf,
    target: PathBuf,
    images: PathBuf,
    rel: PathBuf,
    key: (PathBuf, PathBuf),
}

fn buildroot_output(name: &str) -> Br {
    let k = common::kernel();
    let dir = common::tmpdir(name);
    let out = dir.join("output");
    std::fs::create_dir_all(out.join("host/bin")).unwrap();
    std::fs::copy(common::bin(), out.join("host/bin/bootlink")).unwrap();
    std::fs::create_dir_all(out.join("host/sbin")).unwrap();
    std::os::unix::fs::symlink("/sbin/depmod", out.join("host/sbin/depmod")).unwrap();
    let linux = kbuild_dir(&out.join(format!("build/linux-{}", k.release)), None);
    let target = out.join("target");
    let rel = target.join("lib/modules").join(&k.release);
    install_modules(&rel);
    std::fs::create_dir_all(rel.join("extra")).unwrap();
    std::fs::rename(rel.join("kernel/fs/isofs/isofs.ko"), rel.join("extra/isofs.ko")).unwrap();
    std::fs::remove_dir(rel.join("kernel/fs/isofs")).unwrap();
    std::fs::create_dir_all(target.join("boot")).unwrap();
    std::fs::copy(linux.join("arch/x86/boot/bzImage"), target.join("boot/bzImage")).unwrap();
    let images = out.join("images");
    std::fs::create_dir_all(&images).unwrap();
    std::fs::copy(linux.join("arch/x86/boot/bzImage"), images.join("bzImage")).unwrap();
    let key = common::key_pair(&dir, "br");
    Br { _dir: dir, out, linux, target, images, rel, key }
}

/// A makefile that sets what Buildroot sets (the paths, the BR2_ options
/// of the br2-external tree, qstrip and sep as support/misc/utils.mk has
/// them, bash as the shell), adds linux.mk's LINUX_RUN_DEPMOD to
/// TARGET_FINALIZE_HOOKS (linux.mk is read before the br2-external trees),
/// includes the tree's external.mk, and runs TARGET_FINALIZE_HOOKS as
/// Buildroot's target-finalize does.
fn buildroot_make(br: &Br, options: &[(&str, &str)], target: &str) -> Output {
    let mut mk = String::new();
    mk += "SHELL := /bin/bash\n";
    mk += "qstrip = $(strip $(subst \",,$(1)))\n";
    mk += "define sep\n\n\nendef\n";
    mk += &format!("BR2_EXTERNAL_BOOTLINK_PATH = {}\n", repo("hooks/buildroot").display());
    mk += "BR2_LINUX_KERNEL = y\nBR2_LINUX_KERNEL_INSTALL_TARGET = y\n";
    for (k, v) in options {
        mk += &format!("{k} = {v}\n");
    }
    mk += &format!("HOST_DIR = {}\n", br.out.join("host").display());
    mk += &format!("TARGET_DIR = {}\n", br.target.display());
    mk += &format!("BINARIES_DIR = {}\n", br.images.display());
    mk += &format!("LINUX_DIR = {}\n", br.linux.display());
    mk += "LINUX_ARCH_PATH = $(LINUX_DIR)/arch/x86\n";
    mk += "LINUX_IMAGE_NAME = bzImage\n";
    mk += "LINUX_IMAGE_PATH = $(LINUX_ARCH_PATH)/boot/$(LINUX_IMAGE_NAME)\n";
    mk += "LINUX_TARGET_CONFIGURE = $(LINUX_DIR)/.stamp_configured\n";
    mk += "LINUX_DEPENDENCIES = host-kmod\n";
    mk += &format!("LINUX_VERSION_PROBED = {}\n", common::kernel().release);
    mk += "define LINUX_RUN_DEPMOD\n\t$(HOST_DIR)/sbin/depmod -a -b $(TARGET_DIR) $(LINUX_VERSION_PROBED)\nendef\n";
    mk += "TARGET_FINALIZE_HOOKS += LINUX_RUN_DEPMOD\n";
    mk += "include $(BR2_EXTERNAL_BOOTLINK_PATH)/external.mk\n";
    mk += "target-finalize:\n\t$(foreach hook,$(TARGET_FINALIZE_HOOKS),$($(hook))$(sep))\n";
    mk += "print-hooks:\n\t@echo 'hooks: $(TARGET_FINALIZE_HOOKS)'; echo 'deps: $(LINUX_DEPENDENCIES)'\n";
    let file = br.out.join("buildroot-hooks.mk");
    std::fs::write(&file, mk).unwrap();
    // A make of its own, as Buildroot's top-level make is: not a sub-make
    // of whatever runs the tests (`make test` would pass its MAKEFLAGS and
    // level on, and make would print "Entering directory").
    Command::new("make")
        .arg("-f")
        .arg(&file)
        .arg(target)
        .current_dir(&br.out)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .output()
        .unwrap()
}

#[test]
fn buildroot_hook_applies_every_target_module_at_target_finalize() {
    let br = buildroot_output("br-apply");
    let (k, c) = (br.key.0.display().to_string(), br.key.1.display().to_string());
    let opts = format!("\"--sign-key {k} --sign-cert {c}\"");
    let on = [("BR2_PACKAGE_HOST_BOOTLINK", "y"), ("BR2_PACKAGE_HOST_BOOTLINK_APPLY", "y")];
    let options = [on[0], on[1], ("BR2_PACKAGE_HOST_BOOTLINK_APPLY_OPTS", opts.as_str())];

    // The option off: no hook, no dependency.
    let o = buildroot_make(&br, &on[..1], "print-hooks");
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(common::stdout(&o), "hooks: LINUX_RUN_DEPMOD\ndeps: host-kmod\n", "{}", out(&o));
    let o = buildroot_make(&br, &options, "print-hooks");
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        common::stdout(&o),
        "hooks: LINUX_RUN_DEPMOD HOST_BOOTLINK_APPLY_TO_TARGET\ndeps: host-kmod host-bootlink\n"
    );

    let image = std::fs::read(br.linux.join("arch/x86/boot/bzImage")).unwrap();
    let o = buildroot_make(&br, &options, "target-finalize");
    assert!(o.status.success(), "{}", out(&o));
    let said = common::stdout(&o) + &common::stderr(&o);
    assert!(said.contains("steps    trim, sign"), "{said}");
    applied_with_a_key(&br.rel);
    // Buildroot's depmod ran first; apply ran it again, with Buildroot's
    // host depmod, after rewriting the modules: the package's module too.
    assert!(said.lines().any(|l| l.starts_with("depmod") && l.contains("run")), "{said}");
    let dep = std::fs::read_to_string(br.rel.join("modules.dep")).unwrap();
    assert!(dep.contains("kernel/fs/fat/vfat.ko: kernel/fs/fat/fat.ko") && dep.contains("extra/isofs.ko:"), "{dep}");
    // The image where Buildroot takes it from (Debian's kernel keeps no
    // hash list: the image is as built), in images/ and /boot.
    assert_eq!(std::fs::read(br.images.join("bzImage")).unwrap(), image);
    assert_eq!(std::fs::read(br.target.join("boot/bzImage")).unwrap(), image);
    assert!(!br.images.join("vmlinux").exists());

    // target-finalize again (a second `make`): nothing to do, nothing
    // written anywhere (depmod writes its files again, the same bytes).
    let before = digests(&br.out);
    let o = buildroot_make(&br, &options, "target-finalize");
    assert!(o.status.success(), "{}", out(&o));
    assert!(common::stdout(&o).contains("nothing to do"), "{}", out(&o));
    assert!(!common::stderr(&o).contains("bootlink: "), "an image copied again: {}", out(&o));
    assert_eq!(digests(&br.out), before, "a second run wrote something");
}

#[test]
fn buildroot_hook_copies_the_images_and_fails_the_build_when_apply_refuses_a_module() {
    let br = buildroot_output("br-refused");
    let options = [
        ("BR2_PACKAGE_HOST_BOOTLINK", "y"),
        ("BR2_PACKAGE_HOST_BOOTLINK_APPLY", "y"),
        ("BR2_PACKAGE_HOST_BOOTLINK_APPLY_OPTS", "\"--allow-unsigned\""),
    ];
    // A damaged module beside the good ones.
    let bad = br.rel.join("kernel/fs/nls/nls_bad.ko");
    let mut bytes = std::fs::read(br.rel.join("kernel/fs/nls/nls_cp437.ko")).unwrap();
    bytes.truncate(bytes.len() / 3);
    std::fs::write(&bad, &bytes).unwrap();
    let o = buildroot_make(&br, &options, "target-finalize");
    assert!(!o.status.success(), "make went on past a refused module: {}", out(&o));
    let err = common::stderr(&o);
    assert_eq!(err.lines().filter(|l| l.starts_with("bootlink: ") && l.contains("nls_bad.ko")).count(), 1, "{err}");
    assert_eq!(std::fs::read(&bad).unwrap(), bytes, "the refused module was written");
    // The rest applied (unsigned: --allow-unsigned), and the image copied.
    let rec = common::record_in(&br.rel);
    let vfat = std::fs::read(br.rel.join("kernel/fs/fat/vfat.ko")).unwrap();
    assert!(!vfat.ends_with(b"~Module signature appended~\n"));
    assert_eq!(rec["kernel/fs/fat/vfat.ko"], common::sha256_hex(&br.rel.join("kernel/fs/fat/vfat.ko")));
    assert!(!rec.contains_key("kernel/fs/nls/nls_bad.ko"));
    assert!(br.images.join("bzImage").is_file(), "{}", out(&o));
}

// ---------------------------------------------------------------- Yocto

const CLASS: &str = "hooks/yocto/meta-bootlink/classes/bootlink_apply.bbclass";

/// The body of the shell function `name() { ... }` in a class.
fn shell_function(text: &str, name: &str) -> String {
    let start = text.find(&format!("\n{name}() {{\n")).unwrap_or_else(|| panic!("no {name}() in the class"));
    let body = &text[start + name.len() + 6..];
    let end = body.find("\n}\n").expect("the function's closing brace");
    body[..end + 1].to_string()
}

/// `${NAME}` expanded from `vars` as bitbake expands a shell task's
/// variables before it runs it; `$name` (no braces) is the shell's. A
/// `${...}` the test does not give is a failure: the class uses a variable
/// the test does not know bitbake's value of.
fn bitbake_expand(body: &str, vars: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(i) = rest.find("${") {
        out += &rest[..i];
        let end = rest[i..].find('}').unwrap() + i;
        let name = &rest[i + 2..end];
        let v = vars.get(name).unwrap_or_else(|| panic!("the class uses ${{{name}}}, which the test does not set"));
        out += v;
        rest = &rest[end + 1..];
    }
    out + rest
}

/// A kernel recipe's work directory after do_install: ${B} the kbuild
/// object directory (with its signing key), ${D} the modules installed
/// into ${D}${nonarch_base_libdir}/modules/${KERNEL_VERSION} and the image
/// types, vmlinux, System.map and config in ${D}/boot, bootlink-native's
/// bootlink in the recipe's native sysroot.
struct Yocto {
    /// Where it all lives: removed when the test passes.
    _dir: common::TestDir,
    b: PathBuf,
    d: PathBuf,
    rel: PathBuf,
    native_bin: PathBuf,
    vars: BTreeMap<&'static str, String>,
}

fn yocto_workdir(name: &str, libdir: &str) -> Yocto {
    let k = common::kernel();
    let dir = common::tmpdir(name);
    let key = common::key_pair(&dir, "yocto");
    let b = kbuild_dir(&dir.join("build"), Some((&key.0, &key.1)));
    let d = dir.join("image");
    let rel = d.join(libdir.trim_start_matches('/')).join("modules").join(&k.release);
    install_modules(&rel);
    let boot = d.join("boot");
    std::fs::create_dir_all(&boot).unwrap();
    std::fs::copy(b.join("arch/x86/boot/bzImage"), boot.join(format!("bzImage-{}", k.release))).unwrap();
    std::fs::copy(b.join("vmlinux"), boot.join(format!("vmlinux-{}", k.release))).unwrap();
    std::fs::copy(b.join("System.map"), boot.join(format!("System.map-{}", k.release))).unwrap();
    std::fs::copy(b.join(".config"), boot.join(format!("config-{}", k.release))).unwrap();
    let native_bin = dir.join("recipe-sysroot-native/usr/bin");
    std::fs::create_dir_all(&native_bin).unwrap();
    std::fs::copy(common::bin(), native_bin.join("bootlink")).unwrap();
    let vars = BTreeMap::from([
        ("B", b.display().to_string()),
        ("D", d.display().to_string()),
        ("nonarch_base_libdir", libdir.to_string()),
        ("KERNEL_VERSION", k.release.clone()),
        ("KERNEL_IMAGETYPES", "bzImage".to_string()),
        ("KERNEL_IMAGEDEST", "boot".to_string()),
        ("KERNEL_OUTPUT_DIR", "arch/x86/boot".to_string()),
        ("BOOTLINK_APPLY_OPTS", String::new()),
        ("INITRAMFS_IMAGE_BUNDLE", String::new()),
    ]);
    Yocto { _dir: dir, b, d, rel, native_bin, vars }
}

/// do_bootlink_apply as bitbake runs a shell task: its body expanded, in a
/// script with `set -e` and bitbake's logging functions, in the task's
/// [dirs] (${B}), with the native sysroot's bindir first on PATH.
fn run_task(y: &Yocto) -> Output {
    let class = std::fs::read_to_string(repo(CLASS)).unwrap();
    assert!(class.contains("\ndo_bootlink_apply[dirs] = \"${B}\"\n"), "the task runs elsewhere than ${{B}}");
    let body = bitbake_expand(&shell_function(&class, "do_bootlink_apply"), &y.vars);
    let script = format!(
        "#!/bin/sh\nset -e\nbbnote() {{ echo \"NOTE: $*\"; }}\nbbwarn() {{ echo \"WARNING: $*\"; }}\n\
         do_bootlink_apply() {{\n{body}}}\ncd '{}'\ndo_bootlink_apply\n",
        y.b.display()
    );
    let path = y.b.parent().unwrap().join("run.do_bootlink_apply");
    std::fs::write(&path, script).unwrap();
    // The task as bitbake runs it passes shellcheck (scripts/install-deps
    // installs it, as for the hooks). Bitbake has put the values in before
    // the shell runs, so a test of a constant (SC2050) and a loop over one
    // image type (SC2043) are what an expanded task looks like.
    let sc =
        Command::new("shellcheck").args(["-s", "sh", "-e", "SC2043,SC2050"]).arg(&path).output().expect("shellcheck");
    assert!(sc.status.success(), "shellcheck on do_bootlink_apply: {}", out(&sc));
    let paths = format!("{}:{}", y.native_bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("sh").arg(&path).env("PATH", paths).output().unwrap()
}

#[test]
fn yocto_class_runs_after_do_install_before_packaging_and_deploying() {
    let class = std::fs::read_to_string(repo(CLASS)).unwrap();
    let lines: Vec<&str> = class.lines().collect();
    let addtask: Vec<&&str> = lines.iter().filter(|l| l.starts_with("addtask ")).collect();
    assert_eq!(addtask.len(), 1, "{addtask:?}");
    let words: Vec<&str> = addtask[0].split_whitespace().collect();
    let (after, before) =
        (words.iter().position(|w| *w == "after").unwrap(), words.iter().position(|w| *w == "before").unwrap());
    assert_eq!(words[1], "bootlink_apply");
    assert_eq!(&words[after + 1..before], ["do_install"]);
    // do_package strips and packages ${D}; do_deploy tars the modules from
    // ${D} and copies the image from ${B}; do_bundle_initramfs links vmlinux
    // again; do_populate_sysroot stages from ${D}.
    for t in ["do_package", "do_deploy", "do_bundle_initramfs", "do_populate_sysroot"] {
        assert!(words[before + 1..].contains(&t), "not before {t}: {}", addtask[0]);
    }
    assert!(lines.contains(&"DEPENDS:append = \" bootlink-native\""), "bootlink-native not in DEPENDS");
    // Unsigned modules would be stripped by do_package: off.
    assert!(lines.contains(&"INHIBIT_PACKAGE_STRIP = \"1\"") && lines.contains(&"INHIBIT_PACKAGE_DEBUG_SPLIT = \"1\""));
    let recipe =
        std::fs::read_to_string(repo("hooks/yocto/meta-bootlink/recipes-devtools/bootlink/bootlink_git.bb")).unwrap();
    assert!(recipe.lines().any(|l| l == "BBCLASSEXTEND = \"native\""), "no bootlink-native");
    assert!(recipe.lines().any(|l| l == "inherit cargo cargo-update-recipe-crates"));
}

/// Bitbake's own parser (the `bb` library, which PyPI's bitbake-setup
/// carries) on a kernel recipe that sets the variables the test gives and
/// inherits the class: the task's body as bitbake expands it, its flags,
/// DEPENDS. `bb.siggen` imports hashserv (bitbake's hash server client,
/// not in that package) for builds that use one: a stand-in module.
const BB_PARSE: &str = r#"
import json, sys, types
hs = types.ModuleType("hashserv"); hs.__path__ = []
sys.modules["hashserv"] = hs
sys.modules["hashserv.client"] = types.ModuleType("hashserv.client")
import bb, bb.data, bb.parse, bb.siggen
layer, recipe = sys.argv[1], sys.argv[2]
d = bb.data.init()
d.setVar("BBPATH", layer)
d.setVar("__bbclasstype", "recipe")
bb.parse.siggen = bb.siggen.init(d)
r = bb.parse.handle(recipe, d)[""]
task = "do_bootlink_apply"
print(json.dumps({
    "body": r.getVar(task),
    "tasks": r.getVar("__BBTASKS"),
    "after": r.getVarFlag(task, "deps"),
    "dirs": r.getVarFlag(task, "dirs"),
    "before": {t: r.getVarFlag(t, "deps") for t in ["do_package", "do_populate_sysroot", "do_bundle_initramfs", "do_deploy"]},
    "depends": r.getVar("DEPENDS"),
    "strip": [r.getVar("INHIBIT_PACKAGE_STRIP"), r.getVar("INHIBIT_PACKAGE_DEBUG_SPLIT")],
}))
"#;

#[test]
fn yocto_task_is_what_bitbakes_parser_makes_of_the_class() {
    let test = "yocto_bitbake_parse";
    let py = match common::venv_with(&["bitbake-setup"], "import bb.data_smart") {
        Ok(p) => p,
        Err(why) => return common::skip(test, &why),
    };
    let y = yocto_workdir("yocto-bbparse", "/lib");
    let dir = y.b.parent().unwrap();
    let mut recipe = String::from("DEPENDS = \"bc-native\"\n");
    for (k, v) in &y.vars {
        recipe += &format!("{k} = \"{v}\"\n");
    }
    recipe += "inherit bootlink_apply\n";
    std::fs::write(dir.join("linux-test_6.1.bb"), recipe).unwrap();
    std::fs::write(dir.join("bbparse.py"), BB_PARSE).unwrap();
    let o = Command::new(&py)
        .arg(dir.join("bbparse.py"))
        .arg(repo("hooks/yocto/meta-bootlink"))
        .arg(dir.join("linux-test_6.1.bb"))
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(&o)));
    // The body the other tests run is bitbake's, byte for byte.
    let class = std::fs::read_to_string(repo(CLASS)).unwrap();
    let ours = bitbake_expand(&shell_function(&class, "do_bootlink_apply"), &y.vars);
    assert_eq!(v["body"].as_str().unwrap(), ours, "the test's expansion is not bitbake's");
    assert_eq!(v["tasks"], serde_json::json!(["do_bootlink_apply"]));
    assert_eq!(v["after"], serde_json::json!(["do_install"]));
    assert_eq!(v["dirs"].as_str().unwrap(), y.b.to_str().unwrap());
    for (t, deps) in v["before"].as_object().unwrap() {
        assert_eq!(deps, &serde_json::json!(["do_bootlink_apply"]), "{t} does not wait for the task");
    }
    assert_eq!(v["depends"], "bc-native bootlink-native");
    assert_eq!(v["strip"], serde_json::json!(["1", "1"]));
}

#[test]
fn yocto_task_applies_the_modules_in_d_with_the_builds_key() {
    for (name, libdir) in [("yocto-apply", "/lib"), ("yocto-apply-usrmerge", "/usr/lib")] {
        let y = yocto_workdir(name, libdir);
        let release = &common::kernel().release;
        let image = std::fs::read(y.b.join("arch/x86/boot/bzImage")).unwrap();
        let o = run_task(&y);
        assert!(o.status.success(), "{libdir}: {}", out(&o));
        let said = common::stdout(&o);
        assert!(said.contains("steps    trim, sign"), "{said}");
        // Signed with kbuild's own key (certs/signing_key.pem, which the
        // kernel's keyring holds), no option given.
        applied_with_a_key(&y.rel);
        assert!(!y.rel.join("modules.dep").exists(), "depmod is Yocto's (depmodwrapper)");
        // The images in ${D}/boot are ${B}'s, where do_deploy reads them.
        let boot = y.d.join("boot");
        assert_eq!(std::fs::read(boot.join(format!("bzImage-{release}"))).unwrap(), image);
        assert_eq!(
            std::fs::read(boot.join(format!("vmlinux-{release}"))).unwrap(),
            std::fs::read(y.b.join("vmlinux")).unwrap()
        );
        // The task run again (its stamp removed): nothing to do, nothing written.
        let before = (digests(&y.d), digests(&y.b));
        let o = run_task(&y);
        assert!(o.status.success(), "{}", out(&o));
        assert!(common::stdout(&o).contains("nothing to do"), "{}", out(&o));
        assert_eq!((digests(&y.d), digests(&y.b)), before, "a second run wrote something");
    }
}

#[test]
fn yocto_task_says_so_without_modules() {
    let y = yocto_workdir("yocto-nomodules", "/lib");
    std::fs::remove_dir_all(y.d.join("lib")).unwrap();
    let before = (digests(&y.d), digests(&y.b));
    let o = run_task(&y);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        common::stdout(&o).trim(),
        format!("NOTE: bootlink: no modules installed for {}", common::kernel().release)
    );
    assert_eq!((digests(&y.d), digests(&y.b)), before);
}

#[test]
fn yocto_crates_inc_lists_every_crate_of_cargo_lock() {
    // cargo-update-recipe-crates' list: every registry crate of Cargo.lock
    // with its checksum, so that the fetcher can fetch them all.
    let lock: toml::Value = toml::from_str(&std::fs::read_to_string(repo("Cargo.lock")).unwrap()).unwrap();
    let mut want = Vec::new();
    for p in lock["package"].as_array().unwrap() {
        if p.get("source").and_then(|s| s.as_str()).is_some_and(|s| s.starts_with("registry+")) {
            let (n, v) = (p["name"].as_str().unwrap(), p["version"].as_str().unwrap());
            want.push((
                format!("crate://crates.io/{n}/{v}"),
                format!("SRC_URI[{n}-{v}.sha256sum] = \"{}\"", p["checksum"].as_str().unwrap()),
            ));
        }
    }
    let inc = std::fs::read_to_string(repo("hooks/yocto/meta-bootlink/recipes-devtools/bootlink/bootlink-crates.inc"))
        .unwrap();
    let mut uris: Vec<String> = inc
        .lines()
        .filter_map(|l| l.trim().strip_suffix(" \\"))
        .filter(|l| l.starts_with("crate://"))
        .map(String::from)
        .collect();
    let mut sums: Vec<String> = inc.lines().filter(|l| l.starts_with("SRC_URI[")).map(String::from).collect();
    // In any order, as bitbake reads them.
    uris.sort();
    sums.sort();
    let (mut want_uris, mut want_sums): (Vec<String>, Vec<String>) = want.into_iter().unzip();
    want_uris.sort();
    want_sums.sort();
    assert_eq!(uris, want_uris, "crate list != Cargo.lock: run `bitbake -c update_crates bootlink`");
    assert_eq!(sums, want_sums, "checksums != Cargo.lock");
    assert!(uris.len() > 50);
}

const LAYER_FILES: [&str; 4] = [
    "conf/layer.conf",
    "classes/bootlink_apply.bbclass",
    "recipes-devtools/bootlink/bootlink_git.bb",
    "recipes-devtools/bootlink/bootlink-crates.inc",
];

fn oelint(py: &Path, dir: &Path) -> Output {
    // Run from the layer: oelint-adv reads the layer's .oelint.cfg there.
    Command::new(py).args(["-m", "oelint_adv", "--quiet"]).args(LAYER_FILES).current_dir(dir).output().unwrap()
}

#[test]
fn yocto_layer_passes_oelint_adv() {
    let test = "yocto_oelint_adv";
    let py = match common::venv_with(&["oelint-adv"], "import oelint_adv") {
        Ok(p) => p,
        Err(why) => return common::skip(test, &why),
    };
    let layer = repo("hooks/yocto/meta-bootlink");
    let o = oelint(&py, &layer);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(common::stdout(&o) + &common::stderr(&o), "", "oelint-adv said something");

    // The class with tabs and a task without its doc: oelint-adv says so.
    let bad = common::tmpdir("yocto-oelint-bad");
    common::sh("cp", &["-a", &format!("{}/.", layer.display()), bad.to_str().unwrap()]);
    let class = bad.join("classes/bootlink_apply.bbclass");
    let text = std::fs::read_to_string(&class).unwrap().replace("\n    modules=", "\n\tmodules=");
    let text: String =
        text.lines().filter(|l| !l.starts_with("do_bootlink_apply[doc]")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&class, text).unwrap();
    let o = oelint(&py, &bad);
    let said = common::stdout(&o) + &common::stderr(&o);
    assert!(!o.status.success(), "{said}");
    assert!(said.contains("bootlink_apply.bbclass") && said.contains("oelint.tabs.notabs"), "{said}");
    assert!(said.contains("oelint.task.docstrings"), "{said}");
}
