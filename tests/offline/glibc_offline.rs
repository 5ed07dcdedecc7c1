//! Tier 1: `bootlink glibc build` without the network and without
//! building glibc. A bad series is refused before anything is fetched; the
//! rest runs the real pipeline (dpkg-source, the series, configure, make,
//! install, the done marker, the cache) on a tiny stand-in source package
//! put where the download would be (`<cache>/glibc/dl/`, named for the
//! installed libc6 version), whose `configure` and `Makefile` do in a
//! second what glibc's do in ten minutes. Each test has its own cache
//! (`Options::cache`, `BOOTLINK_CACHE`).
//! The real build is tests/debian/glibc_build.rs (tier 2).

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bootlink::error::Kind;
use bootlink::glibc::{self, Options, Report};

/// A stand-in for glibc's configure: writes a Makefile whose `lib` (the
/// libraries' pass, all bootlink makes) makes a "libc.so" and an
/// "elf/ld.so" holding the configure arguments and configparms it was
/// given. The tree's `mode` file (which a patch of a test's series
/// changes) makes configure or make fail; FAKE_GLIBC_SLEEP in the
/// environment makes make hang.
const CONFIGURE: &str = r#"#!/bin/sh
src=$(cd "$(dirname "$0")" && pwd)
mode=$(cat "$src/mode")
echo "checking the fake glibc's mode... $mode"
printf '%s\n' "$@" > configure-args
if [ "$mode" = fail-configure ]; then
    echo "configure: error: the fake glibc refuses to configure" >&2
    exit 1
fi
{
    printf 'lib:\n'
    printf '\techo half > libc.so.part\n'
    printf '\t@if [ -n "$$FAKE_GLIBC_SLEEP" ]; then echo "fake make: sleeping"; sleep 60; fi\n'
    printf '\t@if [ "%s" = fail-make ]; then echo "fake.c:1:1: error: the fake glibc does not compile" >&2; exit 1; fi\n' "$mode"
    printf '\tmkdir -p elf\n'
    printf '\t(echo ld.so; cat configure-args configparms) > elf/ld.so\n'
    printf '\techo "fake libc %s" > libc.so\n' "$mode"
} > Makefile
"#;

fn installed_version() -> String {
    String::from_utf8(common::sh("dpkg-query", &["-W", "-f=${Version}", "libc6"])).unwrap()
}

/// The stand-in source package's files (.dsc and tarballs), made once with
/// `dpkg-source -b` under the installed libc6's version; None (and a
/// skip) when this machine cannot run the pipeline.
fn fake_package() -> Option<&'static (PathBuf, Vec<PathBuf>)> {
    static P: OnceLock<Option<(PathBuf, Vec<PathBuf>)>> = OnceLock::new();
    P.get_or_init(|| {
        for tool in ["dpkg-source", "patch", "make", "gcc", "g++", "python3", "gawk", "bison"] {
            if Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().map_or(true, |o| !o.status.success())
            {
                common::skip("glibc_offline", &format!("{tool} is not installed (scripts/install-deps)"));
                return None;
            }
        }
        let version = installed_version();
        let upstream = version.split_once(':').map_or(version.as_str(), |(_, v)| v).rsplit_once('-').unwrap().0;
        let dir = common::tmpdir("glibc-fake-package").keep();
        let tree = dir.join(format!("glibc-{upstream}"));
        std::fs::create_dir_all(tree.join("debian/source")).unwrap();
        std::fs::write(tree.join("configure"), CONFIGURE).unwrap();
        common::sh("chmod", &["+x", tree.join("configure").to_str().unwrap()]);
        std::fs::write(tree.join("mode"), "ok\n").unwrap();
        let orig = dir.join(format!("glibc_{upstream}.orig.tar.xz"));
        let top = format!("glibc-{upstream}");
        common::sh("tar", &["-cJf", orig.to_str().unwrap(), "-C", dir.to_str().unwrap(), &top]);
        std::fs::write(tree.join("debian/source/format"), "3.0 (quilt)\n").unwrap();
        std::fs::write(
            tree.join("debian/changelog"),
            format!(
                "glibc ({version}) bookworm; urgency=medium\n\n  * A stand-in for bootlink's tests.\n\n -- bootlink <bootlink@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n"
            ),
        )
        .unwrap();
        std::fs::write(
            tree.join("debian/control"),
            "Source: glibc\nMaintainer: bootlink <bootlink@example.org>\n\nPackage: libc6\nArchitecture: any\nDescription: stand-in\n stand-in\n",
        )
        .unwrap();
        let o = Command::new("dpkg-source").arg("-b").arg(tree.file_name().unwrap()).current_dir(&dir).output().unwrap();
        assert!(o.status.success(), "dpkg-source -b: {}", common::stderr(&o));
        let bare = version.split_once(':').map_or(version.as_str(), |(_, v)| v);
        let dsc = dir.join(format!("glibc_{bare}.dsc"));
        let files = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.file_name().unwrap().to_string_lossy().starts_with("glibc_"))
            .collect();
        Some((dsc, files))
    })
    .as_ref()
}

/// A cache holding the stand-in package where the download would put it.
fn cache_with_fake(name: &str) -> Option<common::TestDir> {
    let (_, files) = fake_package()?;
    let cache = common::tmpdir(name);
    let dl = cache.join("glibc/dl");
    std::fs::create_dir_all(&dl).unwrap();
    for f in files {
        std::fs::copy(f, dl.join(f.file_name().unwrap())).unwrap();
    }
    Some(cache)
}

/// A series directory with these patches (name, text), in this order.
fn series(dir: &Path, patches: &[(&str, &str)]) -> PathBuf {
    let s = dir.join("patches");
    std::fs::create_dir_all(&s).unwrap();
    let mut list = String::from("# test series\n");
    for (n, t) in patches {
        std::fs::write(s.join(n), t).unwrap();
        list.push_str(n);
        list.push('\n');
    }
    std::fs::write(s.join("series"), list).unwrap();
    s
}

fn mode_patch(mode: &str) -> String {
    format!("Set the fake glibc's mode.\n---\n--- a/mode\n+++ b/mode\n@@ -1 +1 @@\n-ok\n+{mode}\n")
}

fn opts(series: &Path, cache: &Path) -> Options {
    Options { series: series.to_path_buf(), jobs: 1, cache: cache.to_path_buf() }
}

/// Key directories under `<cache>/glibc/` holding a done marker or a
/// prefix: what could look complete.
fn complete_looking(cache: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(cache.join("glibc")) else { return Vec::new() };
    rd.flatten().map(|e| e.path()).filter(|p| p.join("done.json").exists() || p.join("prefix").exists()).collect()
}

#[test]
fn a_malformed_series_is_refused_before_anything_is_fetched() {
    let t = common::tmpdir("glibc-malformed");
    let cache = t.join("cache");
    let s = series(&t, &[("a.patch", &mode_patch("x"))]);
    std::fs::write(s.join("series"), "a.patch -p0\n").unwrap();
    let e = glibc::run(&opts(&s, &cache)).unwrap_err();
    assert_eq!(e.kind, Kind::Format, "{e}");
    assert_eq!(e.path.as_deref(), Some(s.join("series").as_path()), "{e}");
    assert!(e.to_string().contains("line 1") && e.to_string().contains("-p1"), "{e}");
    assert!(!cache.exists(), "nothing fetched or made for a bad series");
    // The same through the binary.
    let err = common::TestCommand::new(&[&"glibc", &"build", &"--series", &s])
        .fails_with(&format!("{}: line 1", s.join("series").display()));
    assert!(err.starts_with("bootlink: "), "{err}");
}

#[test]
fn a_missing_patch_file_is_named() {
    let t = common::tmpdir("glibc-missing");
    let cache = t.join("cache");
    let s = series(&t, &[]);
    std::fs::write(s.join("series"), "# ours\n0001-not-there.patch\n").unwrap();
    let e = glibc::run(&opts(&s, &cache)).unwrap_err();
    assert_eq!(e.kind, Kind::Io, "{e}");
    assert_eq!(e.path.as_deref(), Some(s.join("0001-not-there.patch").as_path()), "{e}");
    assert!(e.to_string().contains("no such file"), "{e}");
    assert!(!cache.exists());
}

#[test]
fn a_patch_that_does_not_apply_is_refused_with_patchs_reasons() {
    let Some(cache) = cache_with_fake("glibc-noapply") else { return };
    let t = common::tmpdir("glibc-noapply-series");
    let bad = "--- a/mode\n+++ b/mode\n@@ -1 +1 @@\n-nothing like this\n+x\n";
    let s = series(&t, &[("0001-good.patch", &mode_patch("still-ok")), ("0002-bad.patch", bad)]);
    let e = glibc::run(&opts(&s, &cache)).unwrap_err();
    assert_eq!(e.kind, Kind::Build, "{e}");
    assert_eq!(e.path.as_deref(), Some(s.join("0002-bad.patch").as_path()), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("does not apply to Debian's glibc") && msg.contains("FAILED"), "{msg}");
    assert!(complete_looking(&cache).is_empty(), "{:?}", complete_looking(&cache));
    // No half-patched tree is left to be taken for a prepared one.
    for d in std::fs::read_dir(cache.join("glibc")).unwrap().flatten() {
        assert!(!d.path().join("src").exists(), "{}", d.path().display());
    }
}

#[test]
fn a_failing_configure_or_make_names_the_log_and_quotes_it() {
    let Some(cache) = cache_with_fake("glibc-fail") else { return };
    for (mode, quoted) in
        [("fail-configure", "configure: error: the fake glibc refuses"), ("fail-make", "fake.c:1:1: error:")]
    {
        let t = common::tmpdir(&format!("glibc-{mode}"));
        let s = series(&t, &[("0001-mode.patch", &mode_patch(mode))]);
        let e = glibc::run(&opts(&s, &cache)).unwrap_err();
        assert_eq!(e.kind, Kind::Build, "{e}");
        let log = e.path.clone().unwrap();
        assert_eq!(log.file_name().unwrap(), "build.log", "{e}");
        assert!(e.msg.contains(quoted), "{mode}: {e}");
        assert!(std::fs::read_to_string(&log).unwrap().contains(quoted), "the log holds it");
        assert!(complete_looking(&cache).is_empty(), "{mode}: {:?}", complete_looking(&cache));
    }
}

#[test]
fn a_build_installs_its_prefix_then_is_a_cache_hit() {
    let Some(cache) = cache_with_fake("glibc-ok") else { return };
    let t = common::tmpdir("glibc-ok-series");
    let empty = series(&t, &[]);
    let b: Report = glibc::run(&opts(&empty, &cache)).unwrap();
    assert!(!b.from_cache);
    assert_eq!(b.debian_version, installed_version());
    let keydir = cache.join("glibc").join(&b.key);
    assert_eq!(b.prefix, keydir.join("prefix"));
    assert_eq!(b.libdir, b.prefix.join("lib"));
    assert_eq!(b.ld_so, b.prefix.join("lib/ld-linux-x86-64.so.2"));
    assert!(b.ld_so.is_file() && b.libdir.join("libc.so.6").is_file());
    assert!(keydir.join("done.json").is_file() && keydir.join("build.log").is_file());
    // The loader and libc alone, and Debian's iconv modules.
    let mut files: Vec<String> =
        std::fs::read_dir(&b.libdir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["gconv", "ld-linux-x86-64.so.2", "libc.so.6"]);
    assert_eq!(std::fs::read_link(b.libdir.join("gconv")).unwrap(), Path::new("/usr/lib/x86_64-linux-gnu/gconv"));
    // The configure arguments and configparms the build got (the fake
    // loader holds them).
    let loader = std::fs::read_to_string(&b.ld_so).unwrap();
    let mut loader = loader.lines();
    assert_eq!(loader.next(), Some("ld.so"));
    let want_args = [
        format!("--prefix={}", b.prefix.display()),
        "--disable-werror".into(),
        "--disable-crypt".into(),
        "--enable-stack-protector=strong".into(),
        "--enable-multi-arch".into(),
        "--without-selinux".into(),
        format!("--with-pkgversion=Debian GLIBC {} + bootlink", b.debian_version),
    ];
    let got: Vec<&str> = loader.collect();
    assert_eq!(got[..want_args.len()], want_args);
    assert_eq!(got[want_args.len()..], ["user-defined-trusted-dirs = /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu"]);
    // The build and source trees are gone, no temporaries are left; the
    // seal the next call checks the build against is there.
    let mut left: Vec<String> =
        std::fs::read_dir(&keydir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, [".bootlink-seal.json", ".lock", "build.log", "done.json", "prefix"]);
    assert_eq!(bootlink::cache::check(&keydir), Ok(()));

    // Again: from the cache, at once, through the library and the binary.
    let again = glibc::run(&opts(&empty, &cache)).unwrap();
    assert!(again.from_cache && again.key == b.key && again.seconds < 2.0, "{again:?}");
    assert!(b.build_seconds > 0.0 && again.build_seconds == b.build_seconds, "{again:?}");
    let log = std::fs::read_to_string(keydir.join("build.log")).unwrap();
    for step in ["configure", "make lib"] {
        assert!(log.contains(&format!("# {step}: exit status: 0 after ")), "{step}'s time in the log:\n{log}");
    }
    let o = Command::new(common::bin())
        .args(["glibc", "build", "--json", "--series"])
        .arg(&empty)
        .env("BOOTLINK_CACHE", &cache)
        .env("BOOTLINK_QUIET", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["from_cache"], true);
    assert_eq!(j["key"], b.key.as_str());
    assert_eq!(j["ld_so"], b.ld_so.to_str().unwrap());
    let text = Command::new(common::bin())
        .args(["glibc", "build", "--series"])
        .arg(&empty)
        .env("BOOTLINK_CACHE", &cache)
        .env("BOOTLINK_QUIET", "1")
        .output()
        .unwrap();
    let text = common::stdout(&text);
    for field in ["key", "debian_version", "prefix", "ld_so", "libdir", "from_cache"] {
        assert!(text.lines().any(|l| l.starts_with(&format!("{field} "))), "{field} in\n{text}");
    }

    // A patch makes another key, with its own prefix; a reworded patch does not.
    let patched = series(&t.join("p"), &[("0001-mode.patch", &mode_patch("patched"))]);
    let p = glibc::run(&opts(&patched, &cache)).unwrap();
    assert_ne!(p.key, b.key);
    assert_eq!(p.patches, ["0001-mode.patch"]);
    assert_eq!(std::fs::read_to_string(p.libdir.join("libc.so.6")).unwrap(), "fake libc patched\n");
    let reworded = series(&t.join("r"), &[("0001-renamed.patch", &format!("Reworded.\n\n{}", mode_patch("patched")))]);
    let r = glibc::run(&opts(&reworded, &cache)).unwrap();
    assert!(r.from_cache && r.key == p.key, "{r:?}");

    // A prefix whose done marker is gone is not taken for a build.
    std::fs::remove_file(keydir.join("done.json")).unwrap();
    let rebuilt = glibc::run(&opts(&empty, &cache)).unwrap();
    assert!(!rebuilt.from_cache && rebuilt.key == b.key);
}

#[test]
fn a_killed_build_leaves_nothing_that_looks_complete() {
    let Some(cache) = cache_with_fake("glibc-killed") else { return };
    let t = common::tmpdir("glibc-killed-series");
    let s = series(&t, &[]);
    let mut child = Command::new(common::bin())
        .args(["glibc", "build", "--series"])
        .arg(&s)
        .env("BOOTLINK_CACHE", &cache)
        .env("BOOTLINK_QUIET", "1")
        .env("FAKE_GLIBC_SLEEP", "1")
        .process_group(0)
        .spawn()
        .unwrap();
    // Wait until make is in the middle of its work, then kill the whole
    // process group (bootlink, make, the shell), as a session's end would.
    let t0 = Instant::now();
    let log = loop {
        let found = std::fs::read_dir(cache.join("glibc"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("build.log"))
            .find(|l| std::fs::read_to_string(l).is_ok_and(|t| t.contains("fake make: sleeping")));
        if let Some(l) = found {
            break l;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "make never started");
        std::thread::sleep(Duration::from_millis(100));
    };
    common::sh("kill", &["-KILL", "--", &format!("-{}", child.id())]);
    let _ = child.wait();
    assert!(complete_looking(&cache).is_empty(), "{:?}", complete_looking(&cache));
    let keydir = log.parent().unwrap();
    assert!(keydir.join("build/libc.so.part").exists(), "the killed make's half-made file is there");
    // The next call starts the key over and finishes.
    let b = glibc::run(&opts(&s, &cache)).unwrap();
    assert!(!b.from_cache && keydir == cache.join("glibc").join(&b.key).as_path());
    assert!(!keydir.join("build").exists());
}

/// The repository's series is one a maintainer can take: every patch in
/// the `series` file is `[PATCH n/m]` with n its position and m their
/// number, has a From line and the author's Signed-off-by, and the cover
/// letter (0000-cover-letter.patch, not applied) is `[PATCH 0/m]` and
/// lists each patch's subject.
#[test]
fn the_series_is_numbered_signed_and_has_a_cover_letter() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("glibc/patches");
    let series = bootlink::series::Series::read(&dir).unwrap();
    let m = series.patches.len();
    assert!(m > 0, "an empty series");
    let cover = std::fs::read_to_string(dir.join("0000-cover-letter.patch")).unwrap();
    assert!(cover.contains(&format!("Subject: [PATCH 0/{m}] ")), "cover letter is not [PATCH 0/{m}]");
    let unfold = |text: &str| text.replace("\n ", " ");
    for (i, p) in series.patches.iter().enumerate() {
        let text = unfold(&std::fs::read_to_string(&p.path).unwrap());
        let from = text.lines().find_map(|l| l.strip_prefix("From: ")).unwrap_or_else(|| panic!("{}: no From", p.name));
        let prefix = format!("[PATCH {}/{m}] ", i + 1);
        let subject = text
            .lines()
            .find_map(|l| l.strip_prefix("Subject: "))
            .and_then(|s| s.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{}: the subject does not start with {prefix}", p.name));
        assert!(text.contains(&format!("\nSigned-off-by: {from}\n")), "{}: no Signed-off-by of {from}", p.name);
        // The cover letter's shortlog wraps long subjects: compare words.
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words(&cover).contains(&words(subject)), "{}: not in the cover letter: {subject}", p.name);
    }
}
