//! The DDLink synthetic case (tier 1: needs gcc and the system's glibc,
//! no kernel, no QEMU): a small spec built with the real gcc and ld, checked
//! in the files it makes (DT_NEEDED, RUNPATH, exported symbols), run with
//! the system loader, counted with LD_DEBUG=statistics, cached, and
//! byte-identical when built twice.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bootlink::ddlink::synth::{self, SynthCase, SynthSpec};
use bootlink::error::Kind;
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, Sym};

/// 3 libraries × 3,000 symbols: seconds to build, cached after.
const SMALL: SynthSpec = SynthSpec { libs: 3, symbols: 9_000, seed: 1 };

fn have_gcc(test: &str) -> bool {
    if bootlink::hosttool::exists("gcc") {
        return true;
    }
    common::skip(test, "gcc is not installed (apt-get install gcc)");
    false
}

/// What the dynamic section and .dynsym of a file say.
#[derive(Debug, Default)]
struct Dynamic {
    needed: Vec<String>,
    runpath: Option<String>,
    rpath: Option<String>,
    soname: Option<String>,
    gnu_hash: bool,
    sysv_hash: bool,
    build_id: bool,
    /// Defined global (or weak) symbols of .dynsym.
    exported: usize,
}

fn read_dynamic(path: &Path) -> Dynamic {
    let data = std::fs::read(path).unwrap();
    let data = data.as_slice();
    let header = elf::FileHeader64::<LE>::parse(data).unwrap();
    let sections = header.sections(LE, data).unwrap();
    let table = sections.dynamic_table(LE, data).unwrap();
    let mut d = Dynamic::default();
    for e in table.iter() {
        let s = || String::from_utf8(table.string(e).unwrap().to_vec()).unwrap();
        match e.tag {
            elf::DT_NEEDED => d.needed.push(s()),
            elf::DT_RUNPATH => d.runpath = Some(s()),
            elf::DT_RPATH => d.rpath = Some(s()),
            elf::DT_SONAME => d.soname = Some(s()),
            elf::DT_GNU_HASH => d.gnu_hash = true,
            elf::DT_HASH => d.sysv_hash = true,
            _ => {}
        }
    }
    d.build_id = sections.section_by_name(LE, b".note.gnu.build-id").is_some();
    let dynsym = sections.symbols(LE, data, elf::SHT_DYNSYM).unwrap();
    d.exported = dynsym
        .iter()
        .filter(|s| !s.is_undefined(LE) && (s.st_bind() == elf::STB_GLOBAL || s.st_bind() == elf::STB_WEAK))
        .count();
    d
}

/// Run the program from `/` (so only RUNPATH can find the libraries) with
/// no loader settings but `env`.
fn run(case: &SynthCase, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(&case.program);
    c.current_dir("/");
    for v in ["LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW", "LD_DEBUG", "LD_DEBUG_OUTPUT", "LD_AUDIT"] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}: {}\n{}", case.program.display(), o.status, common::stderr(&o));
    o
}

/// The first "number of relocations: N" of LD_DEBUG=statistics (startup).
fn lookups(stderr: &str) -> usize {
    let line = stderr.lines().find(|l| l.trim_end().contains(" number of relocations: ")).expect(stderr);
    line.rsplit(':').next().unwrap().trim().parse().unwrap()
}

#[test]
fn the_small_case_is_real_runs_and_is_cached() {
    if !have_gcc("the_small_case_is_real_runs_and_is_cached") {
        return;
    }
    let t0 = std::time::Instant::now();
    let case = synth::build(&SMALL, None).unwrap();
    println!("build: {:.2} s (from cache: {}) in {}", t0.elapsed().as_secs_f64(), case.from_cache, case.dir.display());

    // The libraries: a DAG down to the base library, found through RUNPATH
    // $ORIGIN, GNU hash, a build-id, and the spec's symbols between them.
    assert_eq!(case.libs.len(), SMALL.libs);
    let mut exported = 0;
    for (k, lib) in case.libs.iter().enumerate() {
        let name = format!("libsynth{k:02}.so");
        assert_eq!(lib.file_name().unwrap().to_str(), Some(name.as_str()));
        let d = read_dynamic(lib);
        let mut want = case.needed[k].clone();
        want.push("libc.so.6".into());
        assert_eq!(d.needed, want, "{name}");
        if k == 0 {
            assert!(case.needed[0].is_empty());
        } else {
            for dep in [k - 1, 0] {
                assert!(case.needed[k].contains(&format!("libsynth{dep:02}.so")), "{name}: {:?}", case.needed[k]);
            }
            let below = |n: &String| n.strip_prefix("libsynth").and_then(|n| n[..2].parse::<usize>().ok());
            assert!(case.needed[k].iter().all(|n| below(n).is_some_and(|j| j < k)), "{:?}", case.needed[k]);
        }
        assert_eq!(d.runpath.as_deref(), Some("$ORIGIN"), "{name}");
        assert_eq!(d.rpath, None, "{name}");
        assert_eq!(d.soname.as_deref(), Some(name.as_str()));
        assert!(d.gnu_hash && !d.sysv_hash && d.build_id, "{name}: {d:?}");
        println!("{name}: {} exported, needs {:?}", d.exported, d.needed);
        exported += d.exported;
    }
    assert_eq!(exported, SMALL.symbols);
    assert_eq!(case.symbols, SMALL.symbols);
    let main = read_dynamic(&case.program);
    let mut want: Vec<String> = (0..SMALL.libs).rev().map(|k| format!("libsynth{k:02}.so")).collect();
    want.push("libc.so.6".into());
    assert_eq!(main.needed, want);
    assert_eq!(main.runpath.as_deref(), Some("$ORIGIN"));
    assert_eq!(main.exported, 0, "the program exports nothing");

    // It runs with the system loader and prints the same two lines each
    // time: those the generator predicted.
    let (a, b) = (run(&case, &[]), run(&case, &[]));
    let out = common::stdout(&a);
    print!("{out}");
    assert_eq!(out, common::stdout(&b));
    assert_eq!(out, case.expected_output);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("checksum ") && lines[0].len() == "checksum ".len() + 16, "{out}");
    assert!(lines[1].starts_with("libraries 3 symbols 9000 vtables "), "{out}");
    assert!(lines[1].ends_with(" calls 131072"), "{out}");

    // Bound now, every lookup happens at startup: as many as the model
    // counts (exact on Debian 12's glibc; another glibc's own lookups
    // differ a little). Lazily, the PLT's wait for their first call.
    let now = run(&case, &[("LD_BIND_NOW", "1"), ("LD_DEBUG", "statistics")]);
    assert_eq!(common::stdout(&now), out);
    let n = lookups(&common::stderr(&now));
    let lazy = lookups(&common::stderr(&run(&case, &[("LD_DEBUG", "statistics")])));
    println!("lookups: {n} bound now (expected {}), {lazy} lazily", case.expected_lookups);
    assert!(n.abs_diff(case.expected_lookups) <= 60, "{n} lookups, expected {}", case.expected_lookups);
    assert!(n > SMALL.symbols / 2, "{n}");
    assert!(lazy < n - SMALL.symbols / 20, "lazy {lazy}, now {n}");

    // A second build is a cache hit, with the same answer.
    let again = synth::build(&SMALL, None).unwrap();
    assert!(again.from_cache);
    assert_eq!(again, SynthCase { from_cache: true, ..case });
}

#[test]
fn a_bad_spec_is_a_usage_error() {
    let e = synth::build(&SynthSpec { libs: 0, ..SMALL }, None).unwrap_err();
    assert_eq!(e.kind, Kind::Usage, "{e}");
    assert!(e.to_string().contains("1 to 99 libraries"), "{e}");
    let e = synth::build(&SynthSpec { libs: 3, symbols: 10, seed: 0 }, None).unwrap_err();
    assert_eq!(e.kind, Kind::Usage, "{e}");
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn an_out_dir_build_is_byte_identical_and_replaces_only_cases() {
    if !have_gcc("an_out_dir_build_is_byte_identical_and_replaces_only_cases") {
        return;
    }
    let spec = SynthSpec { libs: 2, symbols: 800, seed: 3 };
    let t = common::tmpdir("ddlink-synth");
    let a = synth::build(&spec, Some(&t.join("a"))).unwrap();
    let b = synth::build(&spec, Some(&t.join("b"))).unwrap();
    assert!(!a.from_cache && !b.from_cache);
    assert_eq!(a.key, b.key);
    let names = |d: &Path| files(d).iter().map(|p| p.file_name().unwrap().to_owned()).collect::<Vec<_>>();
    // (and the seal bootlink checks the case against before it uses it)
    assert_eq!(names(&a.dir), [".bootlink-seal.json", "libsynth00.so", "libsynth01.so", "synth-main", "synth.json"]);
    assert_eq!(names(&a.dir), names(&b.dir));
    for f in files(&a.dir) {
        let g = b.dir.join(f.file_name().unwrap());
        assert!(std::fs::read(&f).unwrap() == std::fs::read(&g).unwrap(), "{} and {} differ", f.display(), g.display());
    }

    // In place again: a cache hit. Another spec replaces the case.
    assert!(synth::build(&spec, Some(&a.dir)).unwrap().from_cache);
    let other = synth::build(&SynthSpec { seed: 4, ..spec }, Some(&a.dir)).unwrap();
    assert!(!other.from_cache);
    assert_ne!(other.key, a.key);
    assert_ne!(std::fs::read(&other.program).unwrap(), std::fs::read(&b.program).unwrap());

    // A directory that holds something else is refused and left alone.
    let foreign = t.join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), b"mine").unwrap();
    let e = synth::build(&spec, Some(&foreign)).unwrap_err();
    assert_eq!(e.kind, Kind::Usage, "{e}");
    assert_eq!(std::fs::read(foreign.join("notes.txt")).unwrap(), b"mine");

    // No stage directories are left beside the cases.
    assert_eq!(names(&t), ["a", "b", "foreign"]);
    std::fs::remove_dir_all(&t).unwrap();
}

#[test]
fn a_killed_build_leaves_nothing_that_looks_complete() {
    use std::os::unix::process::CommandExt;
    if !have_gcc("a_killed_build_leaves_nothing_that_looks_complete") {
        return;
    }
    let t = common::tmpdir("ddlink-synth-kill");
    let out = t.join("case");
    // `bootlink ddlink synth` builds the case; it is killed mid-build.
    let mut child = Command::new(common::bin())
        .args(["ddlink", "synth", "--libs", "2", "--symbols", "4000", "--seed", "5", "--out"])
        .arg(&out)
        .env("BOOTLINK_QUIET", "1")
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it (gcc included: its process group) once it compiles.
    let compiling = || {
        files(&t).iter().any(|stage| {
            std::fs::read_dir(stage.join("work"))
                .is_ok_and(|rd| rd.flatten().any(|e| e.path().extension().is_some_and(|x| x == "c")))
        })
    };
    let t0 = std::time::Instant::now();
    while !compiling() {
        assert!(t0.elapsed().as_secs() < 60, "the child never started compiling");
        assert!(child.try_wait().unwrap().is_none(), "the child ended before it was killed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    common::sh("kill", &["-KILL", "--", &format!("-{}", child.id())]);
    child.wait().unwrap();

    // Only its stage is left, under a name no reader takes for a case.
    assert!(!out.exists());
    let left = files(&t);
    assert_eq!(left.len(), 1, "{left:?}");
    let name = left[0].file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with(&format!(".ddlink-synth-stage.{}.", child.id())), "{name}");

    // The next build clears it and makes the case.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let case = synth::build(&SynthSpec { libs: 2, symbols: 4_000, seed: 5 }, Some(&out)).unwrap();
    assert!(!case.from_cache);
    assert_eq!(files(&t), std::slice::from_ref(&out));
    std::fs::remove_dir_all(&t).unwrap();
}
