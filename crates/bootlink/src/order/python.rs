//! The real program of the reordering (issue 13): CPython 3.11 from
//! Debian's source package (the newest the archives serve; Debian's
//! patches applied by `dpkg-source`), the interpreter alone (`make
//! python`: libpython linked in statically, as Debian's `python3.11` is),
//! built twice from one tree:
//!
//! - `plain/`: `-O2 -ffunction-sections`, linked with `-Wl,-q` (the
//!   relocations kept, so BOLT can move functions too);
//! - `traced/`: the same with `-finstrument-functions`, linked with
//!   `trace/`'s runtime (`LIBC=bl-trace.o`: Python's Makefile appends it to
//!   every link, the build's own helper programs write their traces to
//!   /dev/null).
//!
//! A third build, made on request ([`build_pgo`]), is GCC's own
//! profile-guided one: the same configuration built with
//! `-fprofile-generate`, started [`TRAINING_RUNS`] times as the case starts
//! it, and built again with `-fprofile-use` and GCC's hot/cold split on
//! (`-freorder-blocks-and-partition`, which the two builds above turn off
//! for BOLT): each function that ran is split into the blocks that ran
//! (`.text.hot.NAME`) and a cold part (`NAME.cold` in
//! `.text.unlikely.NAME`). No BOLT: the compiler's split, which a function
//! order can then place. Its price: with a profile of the start-up alone,
//! GCC compiles every block the start-up did not run for size, so a
//! program doing more than starting runs that code slower.
//! `-fprofile-partial-training` (what did not run compiled as without a
//! profile) would avoid that, but it also keeps the blocks that did not
//! run inside the functions that did, which undoes the split (measured
//! 2026-11-30 with the same ten start-ups: the ordered functions on 170
//! pages instead of 125, the start-up's footprint 542 pages instead of
//! 499).
//!
//! `root/` is the installed layout a start needs, `bin/` empty (the caller
//! puts the builds there) and `lib/python3.11/` with the landmark `os.py`,
//! the `encodings` package compiled to unchecked-hash `.pyc` files (valid
//! whatever a file system image does to mtimes) and an empty
//! `lib-dynload/`. Run from there, CPython 3.11 takes its core modules
//! (`site`, `os`, `codecs`, `io`...) from the frozen code in the binary
//! and reads `encodings` from disk: the start-up of an installed python3.11.
//!
//! Cached by content under `<cache>/order-python/<key>/` (the source
//! package, the flags, the runtime); the `.dsc` and tarballs under
//! `<cache>/order-python/dl/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Kind, Result};
use crate::{debsrc, fsutil, hosttool, progress};

pub(crate) const PACKAGE: &str = "python3.11";
/// `configure`'s options: a static interpreter without pip, -O2 without
/// debug information (the build takes a minute on two cores), every
/// function in a section of its own, relocations kept for BOLT, not
/// position-independent (as Debian builds python3.11: a PIE interpreter
/// has 850 KB of relative relocations, for the frozen modules' pointers,
/// that ld.so applies at every start, touching every data page).
/// `-fno-reorder-blocks-and-partition`: GCC's own hot/cold split (`.cold`
/// fragments) is what BOLT's README asks to turn off for GCC; with it,
/// BOLT 16 skips functions and its instrumented non-PIE python crashes.
/// Debian's own build adds PGO and LTO (GCC then splits hot and cold code
/// itself); they need the test suite run and an hour, so not here.
const CONFIGURE: &[&str] = &[
    "--without-ensurepip",
    "--disable-shared",
    "OPT=-DNDEBUG -fwrapv -O2",
    "CFLAGS=-ffunction-sections -fdata-sections -fno-reorder-blocks-and-partition -fno-pie",
    "LDFLAGS=-Wl,-q -no-pie",
];
/// The PGO build's CFLAGS: the plain build's, GCC's hot/cold split left on.
const PGO_CFLAGS: &str = "-ffunction-sections -fdata-sections -fno-pie";
/// How many start-ups the profile is made of: python randomizes its hash
/// seed at every start, so a block one start skips another may run.
pub const TRAINING_RUNS: usize = 10;
/// The environment of every python start (the profile's, the traces',
/// the checks'): nothing but these.
pub(crate) const ENV: [(&str, &str); 2] = [("PATH", "/usr/bin:/bin"), ("HOME", "/")];
/// A start of the interpreter at `program` as the profile, the traces and
/// the checks start it: [`ARGS`], nothing in its environment but [`ENV`],
/// no input.
pub(crate) fn start(program: &Path) -> Command {
    let mut c = Command::new(program);
    c.args(ARGS).env_clear().envs(ENV).stdin(std::process::Stdio::null());
    c
}

/// What the profile, the checks and the lab run: python's start-up and one
/// line out (no quote, dollar, backslash or backquote: the lab's shell
/// script double-quotes each argument).
pub const ARGS: [&str; 2] = ["-c", "print(42)"];
/// Under `root/`: where the interpreter's library goes.
pub(crate) const LIB: &str = "lib/python3.11";

#[derive(Debug, Clone, Serialize)]
pub struct PythonBuild {
    /// The Debian source version built.
    pub version: String,
    pub dir: PathBuf,
    /// `make python`'s link of the plain build: gcc's arguments, run in `plain/`.
    pub link: Vec<String>,
    /// The plain interpreter as the Makefile linked it (GNU ld, no order).
    pub plain: PathBuf,
    /// The instrumented one (writes a trace with BL_TRACE_FILE).
    pub traced: PathBuf,
    /// The installed layout without binaries (see the module doc).
    pub root: PathBuf,
    pub from_cache: bool,
}

/// The source (downloaded once), both builds and the layout, cached.
pub fn build() -> Result<PythonBuild> {
    crate::buildlog::timed(|| "CPython, plain and instrumented".to_string(), build_both)
}

fn build_both() -> Result<PythonBuild> {
    let runtime = crate::cbuild::build("trace", "bl-trace.o", "building the trace runtime (trace/)")?;
    let base = fsutil::cache_dir().join("order-python");
    let (version, dsc) = debsrc::download_newest(&base, PACKAGE)?;
    let mut h = Sha256::new();
    h.update(std::fs::read(&dsc).map_err(|e| Error::io(&dsc, e))?);
    h.update(std::fs::read(&runtime).map_err(|e| Error::io(&runtime, e))?);
    h.update(CONFIGURE.join("\0").as_bytes());
    let key: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let dir = base.join(&key);
    let done = dir.join("done");
    let result = |from_cache| -> Result<PythonBuild> {
        let link = read_link(&dir)?;
        Ok(PythonBuild {
            version: version.clone(),
            dir: dir.clone(),
            link,
            plain: dir.join("plain/python"),
            traced: dir.join("traced/python"),
            root: dir.join("root"),
            from_cache,
        })
    };
    // Used only as sealed (crate::cache); a damaged build is made again.
    let Some(_lock) = lock_unless_sealed(&dir, "the CPython builds")? else {
        return result(true);
    };
    // Whatever a killed run or damage left is rebuilt from the start.
    let _ = std::fs::remove_file(dir.join(crate::cache::SEAL));
    let _ = std::fs::remove_file(&done);
    for sub in ["src", "plain", "traced", "root", "link.json"] {
        let d = dir.join(sub);
        match std::fs::symlink_metadata(&d) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&d).map_err(|e| Error::io(&d, e))?,
            Ok(_) => std::fs::remove_file(&d).map_err(|e| Error::io(&d, e))?,
            Err(_) => {}
        }
    }
    let src = dir.join("src");
    progress::status(&format!("unpacking {} (Debian's patches applied by dpkg-source)", dsc.display()));
    hosttool::run(
        Command::new("dpkg-source").args(["-x", "--no-check"]).arg(&dsc).arg(&src).env("LC_ALL", "C"),
        &format!("unpacking {}", dsc.display()),
        "dpkg-dev",
    )
    .map_err(|e| e.at(&dsc))?;
    if !src.join("configure").is_file() || !src.join("Programs/python.c").is_file() {
        return Err(Error::file(Kind::Format, &dsc, "unpacks to a tree without configure and Programs/python.c"));
    }
    let (plain, traced) = (dir.join("plain"), dir.join("traced"));
    // Both configured at once (configure runs one process at a time).
    let configured: Vec<Result<()>> = std::thread::scope(|s| {
        let jobs: Vec<_> = [&plain, &traced].map(|d| s.spawn(|| configure(&src, d))).into_iter().collect();
        jobs.into_iter().map(|j| j.join().unwrap_or_else(|_| Err(Error::new(Kind::Internal, "configure")))).collect()
    });
    for r in configured {
        r?;
    }
    progress::status(&format!("building python {version} with -ffunction-sections (make python)"));
    let log = make(&plain, &[])?;
    let link = link_line(&log).ok_or_else(|| {
        Error::file(Kind::Build, &plain.join("Makefile"), "make python printed no `gcc ... -o python ...` link line")
    })?;
    progress::status(&format!("building python {version} with -finstrument-functions and bl-trace"));
    let libc = format!("LIBC={}", runtime.display());
    make(&traced, &["EXTRA_CFLAGS=-finstrument-functions", &libc])?;
    layout(&src, &plain.join("python"), &dir.join("root"))?;
    fsutil::write_atomic(&dir.join("link.json"), &serde_json::to_vec(&link).unwrap_or_default())?;
    // The programs, their link and the layout by content; the build trees
    // (thousands of objects, linked again in a new order) by size and time;
    // the source (read only while building) and the reordering's own
    // work (`order/`) not at all.
    crate::cache::seal_tree(&dir, |rel| {
        let top = rel.iter().next().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        match top.as_str() {
            "src" | "order" | "done" => None,
            "plain" | "traced" if rel.iter().count() == 2 && rel.ends_with("python") => {
                Some(crate::cache::Check::Content)
            }
            "plain" | "traced" => Some(crate::cache::Check::Stat),
            _ => Some(crate::cache::Check::Content),
        }
    })?;
    result(false)
}

fn configure(src: &Path, dir: &Path) -> Result<()> {
    configure_with(src, dir, CONFIGURE)
}

fn configure_with(src: &Path, dir: &Path, args: &[&str]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    hosttool::run(
        Command::new(src.join("configure")).args(args).current_dir(dir).env("LC_ALL", "C"),
        &format!("configuring python in {}", dir.display()),
        "build-essential",
    )
    .map(|_| ())
}

fn make(dir: &Path, vars: &[&str]) -> Result<String> {
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    hosttool::run(
        Command::new("make")
            .arg(format!("-j{jobs}"))
            .arg("python")
            .args(vars)
            .current_dir(dir)
            .env("LC_ALL", "C")
            .env("BL_TRACE_FILE", "/dev/null"),
        &format!("make python in {}", dir.display()),
        "build-essential",
    )
}

/// `dir/link.json`: make's link of the interpreter, gcc's arguments.
fn read_link(dir: &Path) -> Result<Vec<String>> {
    let link_file = dir.join("link.json");
    let text = std::fs::read(&link_file).map_err(|e| Error::io(&link_file, e))?;
    serde_json::from_slice(&text)
        .map_err(|e| Error::file(Kind::Format, &link_file, format!("not a list of arguments: {e}")).because(e))
}

/// None when `dir` holds a sealed build (`what`, for the line saying a
/// damaged one is made again); else `dir`'s lock, held while it is made.
fn lock_unless_sealed(dir: &Path, what: &str) -> Result<Option<std::fs::File>> {
    if crate::cache::check(dir).is_ok() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let lock = super::synth::lock(dir)?;
    Ok((!crate::cache::intact(dir, what)).then_some(lock))
}

/// GCC's profile-guided build of the interpreter ([`build_pgo`]).
#[derive(Debug, Clone, Serialize)]
pub struct PgoBuild {
    pub dir: PathBuf,
    /// The build tree (its objects, linked again in an order).
    pub tree: PathBuf,
    /// `make python`'s link in `tree`: gcc's arguments after `gcc`.
    pub link: Vec<String>,
    /// The interpreter as the Makefile linked it (GNU ld, no order).
    pub python: PathBuf,
    /// The start-ups the profile holds.
    pub training_runs: usize,
    pub from_cache: bool,
}

/// The profile-guided build of `base`'s source (see the module doc),
/// cached beside it by content (`<base>-pgo/`).
pub fn build_pgo(base: &PythonBuild) -> Result<PgoBuild> {
    crate::buildlog::timed(|| "CPython, profile-guided (GCC)".to_string(), || pgo_both(base))
}

fn pgo_configure(profile: &Path, generate: bool) -> Vec<String> {
    let p = profile.display();
    let (cflags, ldflags) = if generate {
        (
            format!("{PGO_CFLAGS} -fprofile-generate={p} -fprofile-update=single"),
            format!("-Wl,-q -no-pie -fprofile-generate={p}"),
        )
    } else {
        (format!("{PGO_CFLAGS} -fprofile-use={p} -Wno-missing-profile"), "-Wl,-q -no-pie".to_string())
    };
    let mut args: Vec<String> = CONFIGURE
        .iter()
        .filter(|a| !a.starts_with("CFLAGS=") && !a.starts_with("LDFLAGS="))
        .map(|a| a.to_string())
        .collect();
    args.push(format!("CFLAGS={cflags}"));
    args.push(format!("LDFLAGS={ldflags}"));
    args
}

fn pgo_both(base: &PythonBuild) -> Result<PgoBuild> {
    let name = base.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(pgo_configure(Path::new("P"), true).join("\0").as_bytes());
    h.update(pgo_configure(Path::new("P"), false).join("\0").as_bytes());
    h.update(ARGS.join("\0").as_bytes());
    h.update(TRAINING_RUNS.to_le_bytes());
    let key: String = h.finalize().iter().take(4).map(|b| format!("{b:02x}")).collect();
    let dir = base.dir.with_file_name(format!("{name}-pgo-{key}"));
    let (tree, profile) = (dir.join("tree"), dir.join("profile"));
    let result = |from_cache| -> Result<PgoBuild> {
        let link = read_link(&dir)?;
        Ok(PgoBuild {
            dir: dir.clone(),
            tree: tree.clone(),
            link,
            python: tree.join("python"),
            training_runs: TRAINING_RUNS,
            from_cache,
        })
    };
    let Some(_lock) = lock_unless_sealed(&dir, "the profile-guided CPython build")? else {
        return result(true);
    };
    let _ = std::fs::remove_file(dir.join(crate::cache::SEAL));
    if tree.exists() {
        std::fs::remove_dir_all(&tree).map_err(|e| Error::io(&tree, e))?;
    }
    let src = base.dir.join("src");
    let gen_args = pgo_configure(&profile, true);
    configure_with(&src, &tree, &gen_args.iter().map(String::as_str).collect::<Vec<_>>())?;
    progress::status(&format!("building python {} with -fprofile-generate (make python)", base.version));
    make(&tree, &[])?;
    // The build's own tools ran instrumented code (freezing modules), and
    // a stopped run may have left counts: only the start-ups below make
    // the profile.
    if profile.exists() {
        std::fs::remove_dir_all(&profile).map_err(|e| Error::io(&profile, e))?;
    }
    // The layout's library (not the builds other runs put in its bin/).
    let train = fsutil::TempDir::new("pgo-train")?;
    let root = train.path().join("root");
    std::fs::create_dir_all(root.join("bin")).map_err(|e| Error::io(&root, e))?;
    fsutil::copy_tree(&base.root.join("lib"), &root.join("lib"))?;
    let program = root.join("bin/python-pgo-train");
    std::fs::copy(tree.join("python"), &program).map_err(|e| Error::io(&tree.join("python"), e))?;
    progress::status(&format!("training: {TRAINING_RUNS} start-ups of `python {}`", ARGS.join(" ")));
    for _ in 0..TRAINING_RUNS {
        let o = start(&program)
            .output()
            .map_err(|e| Error::file(Kind::Tool, &program, format!("cannot run it: {e}")).because(e))?;
        if !o.status.success() {
            return Err(Error::file(Kind::Build, &program, format!("the instrumented build exited {}", o.status)));
        }
    }
    hosttool::run(
        Command::new("make").arg("clean").current_dir(&tree).env("LC_ALL", "C"),
        &format!("make clean in {}", tree.display()),
        "build-essential",
    )?;
    let use_args = pgo_configure(&profile, false);
    configure_with(&src, &tree, &use_args.iter().map(String::as_str).collect::<Vec<_>>())?;
    progress::status(&format!("building python {} with -fprofile-use (make python)", base.version));
    let log = make(&tree, &[])?;
    let link = link_line(&log).ok_or_else(|| {
        Error::file(Kind::Build, &tree.join("Makefile"), "make python printed no `gcc ... -o python ...` link line")
    })?;
    fsutil::write_atomic(&dir.join("link.json"), &serde_json::to_vec(&link).unwrap_or_default())?;
    crate::cache::seal_tree(&dir, |rel| {
        let top = rel.iter().next().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        match top.as_str() {
            "tree" if rel.iter().count() == 2 && rel.ends_with("python") => Some(crate::cache::Check::Content),
            "tree" | "profile" => Some(crate::cache::Check::Stat),
            _ => Some(crate::cache::Check::Content),
        }
    })?;
    result(false)
}

/// The interpreter's link in make's output: gcc's arguments after `gcc`.
pub(crate) fn link_line(log: &str) -> Option<Vec<String>> {
    log.lines().find_map(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        let at = words.windows(2).position(|w| w == ["-o", "python"])?;
        (words.first() == Some(&"gcc") && at > 0).then(|| words[1..].iter().map(|w| w.to_string()).collect())
    })
}

/// `root/lib/python3.11`: os.py, encodings compiled by `python` (the plain
/// build, run from its build tree), lib-dynload.
fn layout(src: &Path, python: &Path, root: &Path) -> Result<()> {
    let lib = root.join(LIB);
    for d in [root.join("bin"), lib.join("encodings"), lib.join("lib-dynload")] {
        std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    }
    let from = src.join("Lib");
    std::fs::copy(from.join("os.py"), lib.join("os.py")).map_err(|e| Error::io(&from.join("os.py"), e))?;
    let enc = from.join("encodings");
    for e in std::fs::read_dir(&enc).map_err(|e| Error::io(&enc, e))? {
        let p = e.map_err(|e| Error::io(&enc, e))?.path();
        if p.extension().is_some_and(|x| x == "py") {
            let to = lib.join("encodings").join(p.file_name().unwrap_or_default());
            std::fs::copy(&p, &to).map_err(|e| Error::io(&p, e))?;
        }
    }
    // compileall needs _struct, an extension `make python` does not build.
    let code = "import os, py_compile, sys\n\
                for f in sorted(os.listdir(sys.argv[1])):\n\
                \x20   if f.endswith('.py'):\n\
                \x20       py_compile.compile(os.path.join(sys.argv[1], f), doraise=True, \
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n";
    hosttool::run(
        Command::new(python).arg("-c").arg(code).arg(lib.join("encodings")),
        "compiling the encodings package",
        "python3",
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_interpreter_link() {
        let log = "gcc -c -o Parser/token.o Parser/token.c\nar rcs libpython3.11.a a.o\n\
                   gcc -Wl,-q    -Xlinker -export-dynamic -o python Programs/python.o a.o -ldl -lm \n";
        assert_eq!(
            link_line(log).unwrap(),
            ["-Wl,-q", "-Xlinker", "-export-dynamic", "-o", "python", "Programs/python.o", "a.o", "-ldl", "-lm"]
        );
        assert!(link_line("gcc -o python3-config x\n").is_none());
    }
}
