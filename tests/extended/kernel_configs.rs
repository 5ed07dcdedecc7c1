//! The kernel series in every combination of the configuration the module
//! hash manifest patch depends on: CONFIG_MODULE_SIG with and without
//! CONFIG_MODULE_SYMHASH, and without CONFIG_MODULE_SIG (which drops
//! kernel/module/signing.c and hashes.c), and with CONFIG_MODULE_SEALED
//! (kernel/module/sealed.c), and on 32-bit x86 (modules relocated with
//! REL, not RELA: kernel/module/slide.c left out, its stubs used). Each is
//! configured from the lab fragment (tinyconfig, the fragment, the change,
//! olddefconfig; the change checked in the resulting .config) and
//! kernel/module/ (with, on 32-bit x86, the other directories the series
//! touches) is compiled with -Werror in a source tree of its own with both
//! series applied. On 32-bit x86 Debian's own source warns (a size_t
//! printed with %ld in Debian's signing.c): there format warnings are not
//! errors, and each warning must be on a line Debian's unpatched source
//! has word for word.
//! Extended tier (`make test-extended`): compiled through bootlink's ccache,
//! so a run after the first compiles little (the configuration steps and
//! the host tools' links are most of each combination's time then).
//!
//! run-tests: alone (it compiles with a job per core: beside another
//! file's guests it waited for the cores, past five minutes of wall time
//! for under three of CPU; see docs/tests.md).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's source of the tested line (6.1, or BOOTLINK_TEST_LINE=6.12).
fn tarball() -> PathBuf {
    PathBuf::from(format!("/usr/src/linux-source-{}.tar.xz", common::line()))
}

struct Combination {
    name: &'static str,
    /// Lines appended to the lab fragment.
    change: &'static str,
    /// `CONFIG_X=y` lines the .config must hold, and options it must not set.
    set: &'static [&'static str],
    unset: &'static [&'static str],
    /// Objects of kernel/module/ that must be built, and must not.
    built: &'static [&'static str],
    not_built: &'static [&'static str],
    /// Other build targets than kernel/module/.
    also: &'static [&'static str],
    /// Format warnings are warnings, each checked against Debian's source.
    debian_warns: bool,
}

const COMBINATIONS: &[Combination] = &[
    Combination {
        name: "sig-symhash",
        change: "",
        set: &["CONFIG_MODULE_SIG", "CONFIG_MODULE_SYMHASH"],
        unset: &[],
        built: &["signing.o", "hashes.o", "symhash.o", "main.o", "slide.o"],
        not_built: &[],
        also: &[],
        debian_warns: false,
    },
    Combination {
        name: "sig-no-symhash",
        change: "# CONFIG_MODULE_SYMHASH is not set\n",
        set: &["CONFIG_MODULE_SIG"],
        unset: &["CONFIG_MODULE_SYMHASH"],
        built: &["signing.o", "hashes.o", "main.o"],
        not_built: &["symhash.o"],
        also: &[],
        debian_warns: false,
    },
    Combination {
        name: "no-sig",
        change: "# CONFIG_MODULE_SIG is not set\n# CONFIG_MODULE_SIG_ALL is not set\n",
        set: &["CONFIG_MODULE_SYMHASH"],
        unset: &["CONFIG_MODULE_SIG"],
        built: &["symhash.o", "main.o"],
        not_built: &["signing.o", "hashes.o"],
        also: &[],
        debian_warns: false,
    },
    Combination {
        name: "sealed",
        change: "CONFIG_MODULE_SEALED=y\n",
        set: &["CONFIG_MODULE_SEALED", "CONFIG_MODULE_SIG", "CONFIG_MODULE_SYMHASH"],
        unset: &[],
        built: &["sealed.o", "version.o", "main.o"],
        not_built: &[],
        also: &[],
        debian_warns: false,
    },
    Combination {
        name: "i386",
        change: "# CONFIG_64BIT is not set\n",
        set: &["CONFIG_MODULE_SIG", "CONFIG_MODULE_SYMHASH", "CONFIG_X86_32"],
        unset: &["CONFIG_64BIT"],
        built: &["signing.o", "hashes.o", "symhash.o", "main.o"],
        not_built: &["slide.o"],
        also: &["kernel/trace/", "fs/tracefs/", "lib/crypto/", "crypto/", "certs/", "arch/x86/kernel/module.o"],
        debian_warns: true,
    },
];

fn run(c: &mut Command, what: &str, log: &Path) {
    let o = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    std::fs::write(log, &text).unwrap();
    assert!(o.status.success(), "{what} failed ({}):\n{}", log.display(), tail(&text, 60));
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The whole source, unpacked, with kernel/<line>/patches then kernel/<line>/lab-patches applied.
fn patched_tree(root: &Path) -> PathBuf {
    let (line, checkout) =
        (bootlink::kbuild::Line::parse(common::line()).unwrap(), Path::new(env!("CARGO_MANIFEST_DIR")));
    let series = bootlink::series::Series::read_stacked(&line.series(checkout), &[&line.lab_series(checkout)])
        .expect("both series read");
    run(Command::new("tar").arg("-xf").arg(tarball()).arg("-C").arg(root), "unpacking", &root.join("tar.log"));
    let tree = root.join(format!("linux-source-{}", common::line()));
    for p in &series.patches {
        let mut c = Command::new("patch");
        c.current_dir(&tree).args(["-p1", "-s", "-f", "-N", "-i"]).arg(&p.path);
        run(&mut c, &format!("applying {}", p.name), &root.join("patch.log"));
    }
    println!("{} patches applied", series.patches.len());
    tree
}

/// Each `file:line:col: warning:` of a build log is on a line that
/// Debian's unpatched source of that file has word for word (read from the
/// tarball); the number of warnings. A file named relative to the build's
/// directory `obj` (ccache's CCACHE_BASEDIR rewrites the compiler's
/// paths so) is found from there.
fn warnings_on_debian_lines(tree: &Path, obj: &Path, log: &str) -> usize {
    let tree = std::fs::canonicalize(tree).unwrap();
    let mut n = 0;
    // Each file read from the tarball once (a whole xz decompression).
    let mut debian_files: std::collections::HashMap<PathBuf, String> = std::collections::HashMap::new();
    for l in log.lines().filter(|l| l.contains(": warning: ")) {
        let mut parts = l.splitn(3, ':');
        let (file, line) = (parts.next().unwrap(), parts.next().unwrap());
        let line: usize = line.parse().unwrap_or_else(|_| panic!("a warning without a line: {l}"));
        let named = std::fs::canonicalize(obj.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let rel = named.strip_prefix(&tree).unwrap_or_else(|_| panic!("a warning outside the tree: {l}")).to_path_buf();
        let patched = std::fs::read_to_string(tree.join(&rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
        let text = patched.lines().nth(line - 1).unwrap_or_else(|| panic!("{l}: no such line"));
        let debian = debian_files.entry(rel.clone()).or_insert_with(|| {
            let o = Command::new("tar")
                .arg("-xOf")
                .arg(tarball())
                .arg(format!("linux-source-{}/{}", common::line(), rel.display()))
                .output()
                .unwrap();
            assert!(o.status.success(), "{} is not in Debian's source: {l}", rel.display());
            String::from_utf8_lossy(&o.stdout).into_owned()
        });
        assert!(debian.lines().any(|d| d == text), "a warning on a line the series wrote, not Debian: {l}");
        n += 1;
    }
    n
}

#[test]
fn kernel_module_builds_in_every_combination_of_module_sig_and_symhash() {
    if !tarball().is_file() {
        let (t, l) = (tarball(), common::line());
        common::skip("kernel_configs", &format!("{} missing (apt-get install linux-source-{l})", t.display()));
        return;
    }
    let root = common::tmpdir("kernel-configs");
    let tree = patched_tree(&root);
    let fragment = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("kernel/{}/configs/lab.config", common::line())),
    )
    .unwrap();
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).to_string();
    let ccache = bootlink::hosttool::exists("ccache").then(|| bootlink::fsutil::cache_dir().join("ccache"));
    for c in COMBINATIONS {
        let t0 = std::time::Instant::now();
        let obj = root.join(format!("obj-{}", c.name));
        std::fs::create_dir_all(&obj).unwrap();
        let make = |args: &[&str], what: &str| {
            let mut m = Command::new("make");
            m.arg("-C").arg(&tree).arg(format!("O={}", obj.display())).args(args);
            // Through bootlink's ccache, as its kernel builds are (paths
            // below `root` hashed as relative, so a later run hits): a
            // compile that fails is never cached, and a hit replays the
            // compiler's warnings, so -Werror and the warnings read below
            // check the same.
            if let Some(dir) = &ccache {
                m.args(["CC=ccache gcc", "HOSTCC=ccache gcc"]).env("CCACHE_DIR", dir).env("CCACHE_BASEDIR", &root);
            }
            run(&mut m, &format!("{}: {what}", c.name), &obj.join(format!("bootlink-{what}.log")));
        };
        make(&["tinyconfig"], "tinyconfig");
        let dot = obj.join(".config");
        let mut config = std::fs::read_to_string(&dot).unwrap();
        config.push_str(&fragment);
        config.push_str(c.change);
        std::fs::write(&dot, config).unwrap();
        make(&["olddefconfig"], "olddefconfig");
        let result = std::fs::read_to_string(&dot).unwrap();
        for o in c.set {
            assert!(result.lines().any(|l| l == format!("{o}=y")), "{}: {o}=y not in .config", c.name);
        }
        for o in c.unset {
            assert!(result.lines().any(|l| l == format!("# {o} is not set")), "{}: {o} is set", c.name);
        }
        let kcflags = if c.debian_warns { "KCFLAGS=-Werror -Wno-error=format" } else { "KCFLAGS=-Werror" };
        let mut targets = vec!["kernel/module/"];
        targets.extend(c.also);
        make(&[&["-j", &jobs, kcflags], targets.as_slice()].concat(), "build");
        if c.debian_warns {
            let log = std::fs::read_to_string(obj.join("bootlink-build.log")).unwrap();
            let warned = warnings_on_debian_lines(&tree, &obj, &log);
            println!("{}: {warned} warning(s), each on a line of Debian's own source", c.name);
        }
        let dir = obj.join("kernel/module");
        for o in c.built {
            assert!(dir.join(o).is_file(), "{}: kernel/module/{o} was not built", c.name);
        }
        for o in c.not_built {
            assert!(!dir.join(o).exists(), "{}: kernel/module/{o} was built", c.name);
        }
        println!("{}: kernel/module/ built with -Werror in {:.0} s", c.name, t0.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&root);
}
