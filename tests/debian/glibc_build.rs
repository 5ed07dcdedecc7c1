//! Tier 2: `bootlink glibc build` on the real thing: Debian's glibc source
//! for the installed libc6 (fetched with apt through bootlink's private
//! sources list, cached), the repository's series (glibc/patches), built
//! and installed into its own prefix. The build is cached by content under
//! `~/.cache/bootlink/glibc/<key>/`, so only the first run on a machine
//! (or a changed series, version or recipe) pays for it: minutes on 2
//! cores, well under a second warm.
//!
//! What it checks: the installed ld.so is ours (its version names
//! "+ bootlink"), runs programs, and finds its own libc.so.6 in the prefix
//! (the loader and libc are all the build makes) and every other library,
//! glibc's libm among them, in Debian's multiarch directories, with no
//! LD_LIBRARY_PATH (the configparms' trusted directories); a second call
//! is a cache hit. The offline checks (bad series, failing steps, killed
//! builds) are in tests/offline/glibc_offline.rs (tier 1).

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

use bootlink::glibc::Report;

fn build_json() -> Report {
    let o = common::TestCommand::new(&[&"glibc", &"build", &"--json"]).ok();
    serde_json::from_slice(&o.stdout).expect("glibc build --json")
}

/// The build, made (or found) once for every test here.
fn built() -> &'static Report {
    static B: OnceLock<Report> = OnceLock::new();
    B.get_or_init(|| {
        let b = build_json();
        println!(
            "glibc {} key {} ({} in {:.1} s)",
            b.debian_version,
            b.key,
            if b.from_cache { "from the cache" } else { "built" },
            b.seconds
        );
        b
    })
}

/// Run the built ld.so with these arguments, without LD_LIBRARY_PATH or
/// LD_PRELOAD in its environment.
fn ld_so(args: &[&str], env: &[(&str, &str)]) -> Output {
    let b = built();
    let mut c = Command::new(&b.ld_so);
    c.args(args).env_remove("LD_LIBRARY_PATH").env_remove("LD_PRELOAD").envs(env.iter().copied());
    let o = c.output().unwrap_or_else(|e| panic!("{}: {e}", b.ld_so.display()));
    assert!(
        o.status.success(),
        "{} {args:?} {env:?}: {}\n{}{}",
        b.ld_so.display(),
        o.status,
        common::stdout(&o),
        common::stderr(&o)
    );
    o
}

/// `name => path` from ld.so's list of a program's libraries.
fn resolved<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.lines().find_map(|l| {
        let (n, rest) = l.trim().split_once(" => ")?;
        (n == name).then(|| rest.split_whitespace().next().unwrap_or(""))
    })
}

#[test]
fn the_prefix_holds_our_ld_so_and_libc() {
    let b = built();
    assert_eq!(b.libdir, b.prefix.join("lib"));
    assert_eq!(b.ld_so, b.libdir.join("ld-linux-x86-64.so.2"));
    let key_dir = b.prefix.parent().unwrap();
    assert_eq!(key_dir.file_name().unwrap().to_string_lossy(), b.key);
    assert!(key_dir.join("done.json").is_file() && key_dir.join("build.log").is_file());
    assert!(!key_dir.join("build").exists(), "the build directory is removed once installed");
    // The loader and libc (glibc's libraries pass); the rest is Debian's.
    assert!(b.libdir.join("libc.so.6").is_file(), "libc.so.6 in {}", b.libdir.display());
    for lib in ["libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"] {
        assert!(!b.libdir.join(lib).exists(), "{lib} in {}: only the loader and libc are built", b.libdir.display());
    }
    assert_eq!(std::fs::read_link(b.libdir.join("gconv")).unwrap(), Path::new("/usr/lib/x86_64-linux-gnu/gconv"));
    let version = common::stdout(&ld_so(&["--version"], &[]));
    let want = format!("(Debian GLIBC {} + bootlink)", b.debian_version);
    assert!(version.contains(&want), "ld.so --version: {version}");
    // libc.so.6 runs as a program too (through our ld.so, its PT_INTERP).
    let o = Command::new(b.libdir.join("libc.so.6")).env_remove("LD_LIBRARY_PATH").output().unwrap();
    assert!(common::stdout(&o).contains(&want), "{}", common::stdout(&o));
}

#[test]
fn ld_so_runs_programs_with_its_own_libc_and_debians_other_libraries() {
    let b = built();
    assert_eq!(common::stdout(&ld_so(&["/bin/echo", "hello"], &[])), "hello\n");
    let libc = b.libdir.join("libc.so.6");
    for list in [
        common::stdout(&ld_so(&["--list", "/bin/true"], &[])),
        common::stdout(&ld_so(&["/bin/true"], &[("LD_TRACE_LOADED_OBJECTS", "1")])),
    ] {
        assert_eq!(resolved(&list, "libc.so.6"), Some(libc.to_str().unwrap()), "{list}");
    }
    // A library glibc does not provide comes from Debian's multiarch
    // directory (the trusted directories in configparms); libc from ours.
    let ls = ["/usr/bin/ls", "/bin/ls"].into_iter().find(|p| Path::new(p).is_file()).unwrap();
    let list = common::stdout(&ld_so(&["--list", ls], &[]));
    assert_eq!(resolved(&list, "libc.so.6"), Some(libc.to_str().unwrap()), "{list}");
    let debians = |p: &str| p.starts_with("/lib/x86_64-linux-gnu/") || p.starts_with("/usr/lib/x86_64-linux-gnu/");
    let selinux = resolved(&list, "libselinux.so.1").expect("ls links libselinux on Debian");
    assert!(debians(selinux), "{list}");
    // glibc's own other libraries too: Debian's build of the same version.
    let awk = ["/usr/bin/mawk", "/usr/bin/gawk"].into_iter().find(|p| Path::new(p).is_file()).unwrap();
    let list = common::stdout(&ld_so(&["--list", awk], &[]));
    assert_eq!(resolved(&list, "libc.so.6"), Some(libc.to_str().unwrap()), "{list}");
    assert!(resolved(&list, "libm.so.6").is_some_and(debians), "{list}");
    // And they run together: awk's arithmetic is libm's.
    assert_eq!(common::stdout(&ld_so(&[awk, "BEGIN { print sqrt(2) * sqrt(2) }"], &[])), "2\n");
    let o = ld_so(&[ls, "-d", b.libdir.to_str().unwrap()], &[]);
    assert_eq!(common::stdout(&o).trim(), b.libdir.to_str().unwrap());
}

#[test]
fn a_second_call_is_a_cache_hit() {
    let first = built();
    let t0 = std::time::Instant::now();
    let again = build_json();
    let wall = t0.elapsed().as_secs_f64();
    println!("cache hit: {wall:.2} s wall ({:.3} s in bootlink)", again.seconds);
    assert!(again.from_cache, "{again:?}");
    assert_eq!((again.key.as_str(), &again.prefix), (first.key.as_str(), &first.prefix));
    assert!(wall < 5.0, "a cache hit took {wall:.1} s");
}
