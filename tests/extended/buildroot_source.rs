//! Buildroot itself on bootlink's BR2_EXTERNAL tree (hooks/buildroot):
//! Buildroot's linter, utils/check-package, passes on the tree's files and
//! flags faults put into a copy; Buildroot's kconfig and make read the
//! tree (printvars, linux-show-depends: the apply step a target-finalize
//! hook after linux.mk's depmod, host-bootlink built with linux). Nothing is
//! built. Buildroot is neither a Debian nor a PyPI package, so its source
//! tree comes from `$BOOTLINK_BUILDROOT` or ~/.cache/bootlink/buildroot:
//! the extended tier (`make test-extended`), where a missing tree is a
//! counted skip. tests/debian/apply_buildroot_yocto.rs (tier 2) runs the tree's
//! step itself with Buildroot's variables.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn out(o: &Output) -> String {
    format!("status {:?}\nstdout:\n{}\nstderr:\n{}", o.status, common::stdout(o), common::stderr(o))
}

/// Buildroot's utils/ (check-package and its checkpackagelib), from a
/// Buildroot source tree: `$BOOTLINK_BUILDROOT`, else the cache's
/// buildroot/ (a copy of the source's utils/). Buildroot is not a Debian
/// or PyPI package: without either the check is a counted skip.
fn buildroot_utils() -> Option<PathBuf> {
    let dirs = [std::env::var_os("BOOTLINK_BUILDROOT").map(PathBuf::from), Some(common::cache().join("buildroot"))];
    dirs.into_iter()
        .flatten()
        .find(|d| d.join("utils/check-package").is_file() && d.join("utils/checkpackagelib").is_dir())
}

const BR_FILES: [&str; 6] = [
    "external.desc",
    "external.mk",
    "Config.in",
    "package/bootlink/Config.in.host",
    "package/bootlink/bootlink.mk",
    "bootlink-apply.sh",
];

fn check_package(py: &Path, utils: &Path, dir: &Path) -> Output {
    Command::new(py).arg(utils.join("utils/check-package")).arg("-b").args(BR_FILES).current_dir(dir).output().unwrap()
}

#[test]
fn buildroot_files_pass_buildroots_check_package() {
    let test = "buildroot_check_package";
    let Some(utils) = buildroot_utils() else {
        return common::skip(
            test,
            "no Buildroot source here (utils/check-package): set BOOTLINK_BUILDROOT to a Buildroot tree, or copy its \
             utils/ into ~/.cache/bootlink/buildroot",
        );
    };
    // check-package imports python-magic and flake8 (its Python checks).
    let py = match common::venv_with(&["python-magic", "flake8"], "import magic, flake8") {
        Ok(p) => p,
        Err(why) => return common::skip(test, &why),
    };
    let tree = repo("hooks/buildroot");
    let o = check_package(&py, &utils, &tree);
    assert!(o.status.success(), "{}", out(&o));
    let said = common::stdout(&o) + &common::stderr(&o);
    assert!(said.contains(" lines processed") && said.contains("0 warnings generated"), "{said}");

    // The same files with two faults check-package knows: it did read them.
    let bad = common::tmpdir("br-check-bad");
    common::sh("cp", &["-a", &format!("{}/.", tree.display()), bad.to_str().unwrap()]);
    let host = bad.join("package/bootlink/Config.in.host");
    std::fs::write(&host, std::fs::read_to_string(&host).unwrap().replacen("\tbool", "    bool", 1)).unwrap();
    let mk = bad.join("package/bootlink/bootlink.mk");
    let text = std::fs::read_to_string(&mk)
        .unwrap()
        .replace("HOST_BOOTLINK_POST_RSYNC_HOOKS", "HOST_BOOTLNK_POST_RSYNC_HOOKS");
    std::fs::write(&mk, text).unwrap();
    let o = check_package(&py, &utils, &bad);
    let said = common::stdout(&o) + &common::stderr(&o);
    assert!(said.contains("package/bootlink/Config.in.host:2: should be indented with one tab"), "{said}");
    assert!(said.contains("HOST_BOOTLNK_POST_RSYNC_HOOKS"), "{said}");
    assert!(said.contains("2 warnings generated"), "{said}");
}

/// `make O=out ARGS` in a Buildroot source tree, with this br2-external tree.
fn buildroot(src: &Path, out_dir: &Path, args: &[&str]) -> Output {
    Command::new("make")
        .arg("-C")
        .arg(src)
        .arg(format!("O={}", out_dir.display()))
        .arg(format!("BR2_EXTERNAL={}", repo("hooks/buildroot").display()))
        .args(args)
        // Buildroot's own top-level make, not a sub-make of `make test-extended`.
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .output()
        .unwrap()
}

/// `make printvars` in a configured Buildroot output: NAME -> value.
fn printvars(src: &Path, out_dir: &Path, vars: &[&str]) -> BTreeMap<String, String> {
    let o = buildroot(src, out_dir, &["-s", "printvars", &format!("VARS={}", vars.join(" "))]);
    assert!(o.status.success(), "{}", out(&o));
    common::stdout(&o)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

#[test]
fn buildroot_reads_the_tree_and_runs_the_step_in_target_finalize() {
    let test = "buildroot_reads_the_tree";
    let Some(src) = buildroot_utils().filter(|d| d.join("Makefile").is_file() && d.join("linux/linux.mk").is_file())
    else {
        return common::skip(
            test,
            "no Buildroot source tree here: set BOOTLINK_BUILDROOT to a Buildroot checkout, or unpack one into \
             ~/.cache/bootlink/buildroot",
        );
    };
    // Buildroot's own kconfig and make read the tree: a defconfig for an
    // x86-64 kernel, then the tree's options (nothing is built).
    let dir = common::tmpdir("br-real");
    let o = buildroot(&src, &dir, &["qemu_x86_64_defconfig"]);
    assert!(o.status.success(), "{}", out(&o));
    let vars = ["TARGET_FINALIZE_HOOKS", "LINUX_TARGET_FINALIZE_HOOKS", "HOST_BOOTLINK_SITE_METHOD"];
    let off = printvars(&src, &dir, &vars);
    assert!(!off["TARGET_FINALIZE_HOOKS"].contains("BOOTLINK"), "{off:?}");
    let mut config = std::fs::read_to_string(dir.join(".config")).unwrap();
    config += "BR2_PACKAGE_HOST_BOOTLINK=y\nBR2_PACKAGE_HOST_BOOTLINK_APPLY=y\n";
    config += "BR2_PACKAGE_HOST_BOOTLINK_APPLY_OPTS=\"--assume-nokaslr\"\n";
    std::fs::write(dir.join(".config"), config).unwrap();
    let o = buildroot(&src, &dir, &["olddefconfig"]);
    assert!(o.status.success(), "{}", out(&o));
    let config = std::fs::read_to_string(dir.join(".config")).unwrap();
    for want in [
        "BR2_EXTERNAL_NAMES=\"BOOTLINK\"",
        "BR2_PACKAGE_HOST_BOOTLINK=y",
        "BR2_PACKAGE_HOST_BOOTLINK_APPLY=y",
        "BR2_PACKAGE_HOST_BOOTLINK_APPLY_OPTS=\"--assume-nokaslr\"",
    ] {
        assert!(config.lines().any(|l| l == want), "kconfig dropped {want} (its dependencies unmet?)");
    }
    let on = printvars(&src, &dir, &[&vars[..], &["LINUX_IMAGE_PATH", "HOST_BOOTLINK_OVERRIDE_SRCDIR"]].concat());
    // target-finalize runs after every package's install; its hooks in
    // order: linux.mk's depmod, then the step (which runs depmod again).
    assert_eq!(on["LINUX_TARGET_FINALIZE_HOOKS"], "LINUX_RUN_DEPMOD", "{on:?}");
    let hooks: Vec<&str> = on["TARGET_FINALIZE_HOOKS"].split(' ').collect();
    let at = |h: &str| hooks.iter().position(|x| *x == h).unwrap_or_else(|| panic!("no {h} in {hooks:?}"));
    assert!(at("LINUX_RUN_DEPMOD") < at("HOST_BOOTLINK_APPLY_TO_TARGET"), "{hooks:?}");
    assert_eq!(on["HOST_BOOTLINK_SITE_METHOD"], "local");
    assert!(on["LINUX_IMAGE_PATH"].ends_with("/arch/x86/boot/bzImage"), "{on:?}");
    assert_eq!(
        std::fs::canonicalize(&on["HOST_BOOTLINK_OVERRIDE_SRCDIR"]).unwrap(),
        std::fs::canonicalize(repo(".")).unwrap()
    );
    let o = buildroot(&src, &dir, &["-s", "linux-show-depends"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(common::stdout(&o).split_whitespace().any(|w| w == "host-bootlink"), "{}", out(&o));
}
