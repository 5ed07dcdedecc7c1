//! DDLink's test helpers: the patched glibc (`bootlink glibc build`,
//! cached), programs started under a loader with LD_DEBUG=ddlink, caches
//! written and verified through the CLI (File Read Mode and Relocation
//! Skip Mode). Shared by the Debian tier's DDLink tests and the extended
//! tier's seed case.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::TestCommand;

pub const DEBIAN_LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";

/// What the playground prints when every binding is the normal one.
pub const PLAYGROUND_OUTPUT: &str = "which=liba data=41 tls=6 ifunc=2 value=42 weak=0 uniq=101\n";

pub struct Glibc {
    pub prefix: PathBuf,
    pub ld_so: PathBuf,
}

/// The patched glibc, built once (cached by content across runs).
pub fn glibc() -> &'static Glibc {
    static G: OnceLock<Glibc> = OnceLock::new();
    G.get_or_init(|| {
        let out = TestCommand::new(&[&"glibc", &"build", &"--json"]).ok();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("glibc build --json");
        let get = |k: &str| PathBuf::from(v[k].as_str().unwrap_or_else(|| panic!("no {k} in {v}")));
        Glibc { prefix: get("prefix"), ld_so: get("ld_so") }
    })
}

/// The playground (tests/ddlink) built into `dir` with the patched ld.so as
/// the program's interpreter.
pub fn playground(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ddlink");
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&src)
        .arg(format!("OUT={}", dir.display()))
        .arg(format!("LOADER={}", glibc().ld_so.display()))
        .output()
        .expect("make");
    assert!(out.status.success(), "building the playground: {}", String::from_utf8_lossy(&out.stderr));
    dir.join("ddlink-play")
}

/// Run `program` with `loader` (explicitly), a clean LD_ environment plus
/// `env`, and LD_DEBUG=ddlink into a file: (stdout, the loader's ddlink lines).
pub fn start(loader: &Path, program: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    start_in(None, loader, program, args, env)
}

/// `start`, with the prelinked images under `overlay` bind-mounted over the
/// originals (as `bootlink ddlink ... --overlay` runs).
pub fn start_in(
    overlay: Option<&Path>,
    loader: &Path,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (String, String) {
    let dbg = tempfile::tempdir().unwrap();
    let p = bootlink::ddlink::run::Program {
        path: program.to_path_buf(),
        args: args.iter().map(|a| a.to_string()).collect(),
        overlay: overlay.map(Path::to_path_buf),
    };
    let out_file = dbg.path().join("d");
    let mut e: Vec<(&str, std::ffi::OsString)> =
        vec![("LD_DEBUG", "ddlink".into()), ("LD_DEBUG_OUTPUT", out_file.into_os_string())];
    e.extend(env.iter().map(|(k, v)| (*k, std::ffi::OsString::from(v))));
    let out = bootlink::ddlink::run::command(loader, &p, &e).output().expect("start the program");
    assert!(out.status.success(), "{} failed: {}", program.display(), String::from_utf8_lossy(&out.stderr));
    let mut lines = String::new();
    for e in std::fs::read_dir(dbg.path()).unwrap().flatten() {
        lines += &std::fs::read_to_string(e.path()).unwrap();
    }
    (String::from_utf8_lossy(&out.stdout).into_owned(), lines)
}

/// profile + write + verify through the CLI; returns the cache path.
pub fn cache_for(dir: &Path, program: &Path, args: &[&str]) -> PathBuf {
    cache_for_env(dir, program, args, &[])
}

/// `bootlink ddlink write` of `rec` (a record of `prog`) to `out`.
pub fn write_cmd(rec: &Path, prog: &Path, out: &Path) -> TestCommand {
    let ld = &glibc().ld_so;
    TestCommand::new(&[&"ddlink", &"write", &"--loader", ld, &"--record", &rec, &"--program", &prog, &"-o", &out])
}

/// `bootlink ddlink SUB --json` with `cache` and the images under `images` in place.
pub fn overlay_cmd(sub: &str, cache: &Path, images: &Path) -> TestCommand {
    let ld = &glibc().ld_so;
    TestCommand::new(&[&"ddlink", &sub, &"--json", &"--loader", ld, &"--cache", &cache, &"--overlay", &images])
}

/// Relocation Skip Mode through the CLI: profile, `write --prelink`, and
/// `verify --overlay` (every binding and every relocated word of the images
/// compared with a normal relocation: 0 differences). (cache, images).
pub fn skip_for(dir: &Path, program: &Path, args: &[&str], env: &[(&str, &str)]) -> (PathBuf, PathBuf) {
    let ld = &glibc().ld_so;
    let name = program.file_name().unwrap().to_string_lossy().into_owned();
    let rec = dir.join(format!("{name}.skip-record"));
    let cache = dir.join(format!("{name}.skip-cache"));
    let images = dir.join(format!("{name}.images"));
    let with_args = |mut c: TestCommand| {
        c = c.arg(&program);
        for a in args {
            c = c.arg(a);
        }
        for (k, v) in env {
            c = c.env(k, v);
        }
        c
    };
    with_args(TestCommand::new(&[&"ddlink", &"profile", &"--loader", ld, &"-o", &rec])).ok();
    let out = TestCommand::new(&[
        &"ddlink",
        &"write",
        &"--json",
        &"--loader",
        ld,
        &"--record",
        &rec,
        &"--program",
        &program,
        &"-o",
        &cache,
        &"--prelink",
        &images,
    ])
    .ok();
    let w: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(w["prelink"]["images"].as_u64().unwrap() > 0, "nothing prelinked: {w}");
    let out = with_args(overlay_cmd("verify", &cache, &images)).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mismatched"], 0, "verify found binding differences: {v}");
    assert_eq!(v["words_mismatched"], 0, "an image differs from a normal relocation: {v}");
    assert_eq!(v["images"], w["prelink"]["images"], "not every image was compared: {v}");
    assert!(v["words_checked"].as_u64().unwrap() > 0, "verify compared no relocated word: {v}");
    (cache, images)
}

pub fn skip_mode(lines: &str) -> bool {
    lines.contains("ddlink: skip mode")
}

/// The same, with the program's own environment (e.g. Qt's platform).
pub fn cache_for_env(dir: &Path, program: &Path, args: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let with_env = |mut c: TestCommand| {
        for (k, v) in env {
            c = c.env(k, v);
        }
        c
    };
    let ld = &glibc().ld_so;
    let rec = dir.join(format!("{}.record", program.file_name().unwrap().to_string_lossy()));
    let cache = rec.with_extension("cache");
    let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"ddlink", &"profile", &"--loader", ld, &"-o", &rec, &program];
    for x in args {
        a.push(x);
    }
    // Profiled with the environment it runs with (Qt's platform decides
    // which plug-in it opens: another dlopen group).
    with_env(TestCommand::new(&a)).ok();
    TestCommand::new(&[&"ddlink", &"write", &"--loader", ld, &"--record", &rec, &"--program", &program, &"-o", &cache])
        .ok();
    let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"ddlink", &"verify", &"--json", &"--loader", ld, &"--cache", &cache, &program];
    for x in args {
        a.push(x);
    }
    let out = with_env(TestCommand::new(&a)).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mismatched"], 0, "verify found differences: {v}");
    assert!(v["checked"].as_u64().unwrap() > 0, "verify checked nothing: {v}");
    cache
}

pub fn file_read(lines: &str) -> bool {
    lines.contains("ddlink: file-read mode")
}

pub fn normal_because<'a>(lines: &'a str, why: &str) -> &'a str {
    let line = lines
        .lines()
        .find(|l| l.contains("normal loading"))
        .unwrap_or_else(|| panic!("no fallback for `{why}`: {lines}"));
    assert!(line.contains(why), "fallback for another reason than `{why}`: {line}");
    line
}

/// The synthetic case's size `make test` builds (tier 3's DDLink boot
/// uses the same: one build of it per cache).
pub const SHARED_SYMBOLS: u32 = 50_000;

/// `ddlink synth --symbols N` (12 libraries, cached by content): every
/// binding and every relocated word verified, the same output under
/// Debian's ld.so, the patched one, File Read Mode and Skip Mode.
pub fn identical_in_every_mode(dir: &Path, symbols: u32) {
    let out = TestCommand::new(&[&"ddlink", &"synth", &"--symbols", &symbols.to_string(), &"--json"]).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let prog = PathBuf::from(v["program"].as_str().unwrap());
    let cache = cache_for(dir, &prog, &[]);
    let (skip_cache, images) = skip_for(dir, &prog, &[], &[]);
    let ld = &glibc().ld_so;
    let (stock, _) = start(Path::new(DEBIAN_LD_SO), &prog, &[], &[]);
    let (plain, _) = start(ld, &prog, &[], &[("LD_DDLINK", "/nonexistent")]);
    let (fast, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", cache.to_str().unwrap())]);
    assert!(file_read(&dbg), "{dbg}");
    let (skipped, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", skip_cache.to_str().unwrap())]);
    assert!(skip_mode(&dbg), "{dbg}");
    assert!(!stock.is_empty());
    assert_eq!(plain, stock, "patched loader");
    assert_eq!(fast, stock, "file-read");
    assert_eq!(skipped, stock, "skip");
}
