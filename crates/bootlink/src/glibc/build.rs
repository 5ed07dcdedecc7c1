//! Configuring, making and installing one glibc source tree: out of tree
//! in `<key>/build`, with ccache when it is installed, every command's
//! output in `<key>/build.log`, installed under a temporary root and the
//! prefix renamed into place only when the install is complete.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Kind, Result};
use crate::{hosttool, progress};

/// The build directory's `configparms`: the built ld.so searches its own
/// prefix's lib (slibdir) first, then Debian's multiarch directories, for
/// every library, without LD_LIBRARY_PATH.
pub(crate) const CONFIGPARMS: &str = "user-defined-trusted-dirs = /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu\n";

/// Stands for the per-key prefix in the arguments that go into the key
/// (the prefix is derived from the key).
pub(crate) const PREFIX_PLACEHOLDER: &str = "@PREFIX@";

/// `configure`'s arguments for Debian version `version` installed in `prefix`.
pub(crate) fn configure_args(prefix: &str, version: &str) -> Vec<String> {
    vec![
        format!("--prefix={prefix}"),
        "--disable-werror".into(),
        "--disable-crypt".into(),
        "--enable-stack-protector=strong".into(),
        "--enable-multi-arch".into(),
        "--without-selinux".into(),
        format!("--with-pkgversion=Debian GLIBC {version} + bootlink"),
    ]
}

/// Tools the build runs, and the Debian package of each. gawk and bison
/// are installed with apt-get when missing and running as root.
const TOOLS: &[(&str, &str)] =
    &[("make", "make"), ("gcc", "gcc"), ("g++", "g++"), ("python3", "python3"), ("gawk", "gawk"), ("bison", "bison")];
const INSTALLABLE: &[&str] = &["gawk", "bison"];

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Every build tool present, installing gawk and bison as root if needed.
pub(crate) fn ensure_tools() -> Result<()> {
    let missing: Vec<&str> = INSTALLABLE.iter().copied().filter(|t| !hosttool::exists(t)).collect();
    if !missing.is_empty() && is_root() {
        progress::status(&format!("installing {} with apt-get (needed to build glibc)", missing.join(" ")));
        hosttool::run(
            Command::new("apt-get")
                .args(["install", "-y", "-qq"])
                .args(&missing)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            &format!("installing {}", missing.join(" ")),
            "apt",
        )?;
    }
    for (tool, package) in TOOLS {
        if !hosttool::exists(tool) {
            return Err(Error::new(
                Kind::Tool,
                format!(
                    "{tool}: missing tool, needed for building glibc (install the Debian package {package}, or run scripts/install-deps)"
                ),
            ));
        }
    }
    Ok(())
}

/// What every configure and make call of one build shares.
pub(crate) struct Env<'a> {
    pub src: &'a Path,
    pub build: &'a Path,
    pub log: &'a Path,
    pub jobs: usize,
    /// ccache's directory; None builds without ccache.
    pub ccache_dir: Option<&'a Path>,
    /// Paths below it reach ccache relative to the working directory, so
    /// the same source file hits in another key's directory.
    pub ccache_base: &'a Path,
    /// The build's lock, held by configure and make too (a killed bootlink's
    /// make stops, and no other build starts while any of its jobs runs).
    pub lock: &'a std::fs::File,
}

impl Env<'_> {
    fn command(&self, prog: &Path) -> Command {
        let mut c = Command::new(prog);
        c.current_dir(self.build).env("LC_ALL", "C").env_remove("LD_LIBRARY_PATH").env_remove("LD_PRELOAD");
        hosttool::tie_to_caller(&mut c, self.lock);
        if let Some(dir) = self.ccache_dir {
            c.env("CC", "ccache gcc")
                .env("CXX", "ccache g++")
                .env("CCACHE_DIR", dir)
                .env("CCACHE_BASEDIR", self.ccache_base)
                // glibc compiles in its source subdirectories (one per key):
                // the working directory is not hashed, base_dir makes the
                // paths in the command lines relative to it.
                .env("CCACHE_NOHASHDIR", "1");
        } else {
            c.env("CC", "gcc").env("CXX", "g++");
        }
        c
    }

    /// `configure` in the build directory.
    pub fn configure(&self, args: &[String]) -> Result<()> {
        let mut c = self.command(&self.src.join("configure"));
        c.args(args);
        run_logged(c, "configure", self.log)
    }

    /// `make -jN TARGETS`.
    pub fn make(&self, what: &str, targets: &[String]) -> Result<()> {
        let mut c = self.command(Path::new("make"));
        c.arg(format!("-j{}", self.jobs.max(1))).args(targets);
        run_logged(c, what, self.log)
    }
}

/// Where Debian's own glibc keeps its character-set converters: the
/// prefix's `lib/gconv` points there (the same version's modules).
pub(crate) const DEBIAN_GCONV: &str = "/usr/lib/x86_64-linux-gnu/gconv";

/// Configure, make the libraries' pass (`make lib`: the loader and libc,
/// linked against each other) and install the two into `prefix/lib`: the
/// whole prefix appears at once (a rename) or not at all.
///
/// The rest of glibc (libm, libpthread, the NSS modules, iconv's modules,
/// the programs: `make`'s `others` pass, about half of the build) is not
/// made: the loader finds those libraries in Debian's own glibc of the
/// same version, after its own prefix ([`CONFIGPARMS`]'s trusted
/// directories), and iconv's modules through `lib/gconv`. The series
/// changes the loader alone; libc is built because the loader and libc of
/// one build share private interfaces (`_rtld_global`'s layout).
pub(crate) fn build_and_install(env: &Env, configure: &[String], prefix: &Path) -> Result<()> {
    env.configure(configure)?;
    env.make("make lib", &["lib".into()])?;
    let keydir = prefix.parent().expect("the prefix is inside the key directory");
    let root = tempfile::Builder::new().prefix(".install-").tempdir_in(keydir).map_err(|e| Error::io(keydir, e))?;
    let lib = root.path().join("lib");
    std::fs::create_dir_all(&lib).map_err(|e| Error::io(&lib, e))?;
    for (built, name) in [(env.build.join("elf/ld.so"), super::LD_SO), (env.build.join("libc.so"), "libc.so.6")] {
        if !built.is_file() {
            return Err(Error::file(
                Kind::Build,
                env.log,
                format!("make lib finished without making {}", built.display()),
            ));
        }
        std::fs::copy(&built, lib.join(name)).map_err(|e| Error::io(&built, e))?;
    }
    let gconv = lib.join("gconv");
    std::os::unix::fs::symlink(DEBIAN_GCONV, &gconv).map_err(|e| Error::io(&gconv, e))?;
    if prefix.exists() {
        std::fs::remove_dir_all(prefix).map_err(|e| Error::io(prefix, e))?;
    }
    std::fs::rename(root.path(), prefix).map_err(|e| Error::io(prefix, e))?;
    // The directory is the prefix now: nothing left to remove.
    let _ = root.keep();
    Ok(())
}

/// Run `cmd`, its stdout and stderr appended to `log`; on a terminal one
/// line shows the step, its time and the directory make is in. A failure
/// is a Build error naming the log and quoting its last lines.
fn run_logged(mut cmd: Command, what: &str, log: &Path) -> Result<()> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let mut logf = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| Error::io(log, e))?;
    let line: Vec<String> =
        std::iter::once(prog.clone()).chain(cmd.get_args().map(|a| a.to_string_lossy().into_owned())).collect();
    writeln!(logf, "$ {}", line.join(" ")).map_err(|e| Error::io(log, e))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| hosttool::spawn_error(&prog, &format!("building glibc ({what})"), "build-essential", e))?;
    let t0 = std::time::Instant::now();
    let ticker = Arc::new(progress::Ticker::new(&format!("glibc {what}")));
    let logf = Arc::new(Mutex::new(logf));
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let copy = |from: Box<dyn std::io::Read + Send>| {
        let (logf, tail, ticker) = (logf.clone(), tail.clone(), ticker.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(from).split(b'\n').map_while(|l| l.ok()) {
                let line = String::from_utf8_lossy(&line).into_owned();
                if let Ok(mut f) = logf.lock() {
                    let _ = writeln!(f, "{line}");
                }
                if let Some(d) = doing(&line) {
                    ticker.set(d);
                }
                if let Ok(mut t) = tail.lock() {
                    t.push_back(line);
                    if t.len() > TAIL {
                        t.pop_front();
                    }
                }
            }
        })
    };
    let threads =
        [copy(Box::new(child.stdout.take().expect("piped"))), copy(Box::new(child.stderr.take().expect("piped")))];
    let status = child.wait();
    for t in threads {
        let _ = t.join();
    }
    drop(ticker);
    let status = status.map_err(|e| Error::file(Kind::Build, log, format!("{what}: {e}")).because(e))?;
    if let Ok(mut f) = logf.lock() {
        let _ = writeln!(f, "# {what}: {status} after {:.0} s", t0.elapsed().as_secs_f64());
    }
    if status.success() {
        return Ok(());
    }
    let tail: Vec<String> = tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
    Err(Error::file(
        Kind::Build,
        log,
        format!("glibc {what} failed ({prog}: {status}); the log ends: {}", last_lines(&tail).join(" | ")),
    ))
}

/// Lines kept from a step's output for its error.
const TAIL: usize = 60;

/// What a line of configure or make output says the step is doing: the
/// directory make entered, or configure's current check.
fn doing(line: &str) -> Option<&str> {
    if let Some(i) = line.find("Entering directory '") {
        let dir = line[i + "Entering directory '".len()..].trim_end_matches('\'');
        return Some(dir.rsplit('/').next().unwrap_or(dir));
    }
    line.starts_with("checking ").then_some(line)
}

/// The lines of a failed step's output worth quoting: the first error
/// lines (a compiler's `error:`, configure's `configure: error:`) and the
/// last two lines, at most six, in order.
pub(crate) fn last_lines(tail: &[String]) -> Vec<String> {
    let lines: Vec<&String> = tail.iter().filter(|l| !l.trim().is_empty()).collect();
    let is_error = |l: &str| {
        let l = l.to_ascii_lowercase();
        l.contains("error:") || l.contains("error ") || l.contains("*** ")
    };
    let mut picked: Vec<usize> = (0..lines.len()).filter(|&i| is_error(lines[i])).take(4).collect();
    picked.extend(lines.len().saturating_sub(2)..lines.len());
    picked.sort();
    picked.dedup();
    let start = picked.len().saturating_sub(6);
    picked[start..].iter().map(|&i| lines[i].trim().chars().take(300).collect()).collect()
}

/// Remove a directory tree if it is there.
pub(crate) fn remove_tree(dir: &Path) -> Result<()> {
    // (A file or a link in the directory's place goes too.)
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return std::fs::remove_file(dir).map_err(|e| Error::io(dir, e));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// A fresh, empty build directory with the `configparms` file.
pub(crate) fn fresh_build_dir(build: &Path) -> Result<PathBuf> {
    remove_tree(build)?;
    std::fs::create_dir_all(build).map_err(|e| Error::io(build, e))?;
    let parms = build.join("configparms");
    std::fs::write(&parms, CONFIGPARMS).map_err(|e| Error::io(&parms, e))?;
    Ok(build.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quoted_lines_are_the_errors_and_the_end() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let tail = t(&[
            "gcc -c a.c",
            "a.c:3:1: error: expected ';'",
            "make[2]: *** [../o-iterator.mk:9: a.o] Error 1",
            "make[2]: Leaving directory 'x'",
            "make[1]: *** [Makefile:484: elf/subdir_lib] Error 2",
            "make: *** [Makefile:9: all] Error 2",
        ]);
        let got = last_lines(&tail);
        assert_eq!(got[0], "a.c:3:1: error: expected ';'");
        assert_eq!(got.last().unwrap(), "make: *** [Makefile:9: all] Error 2");
        assert!(got.len() <= 6);
        assert_eq!(
            last_lines(&t(&["checking x... yes", "configure: error: no gawk"])),
            ["checking x... yes", "configure: error: no gawk"]
        );
        assert!(last_lines(&[]).is_empty());
    }

    #[test]
    fn configure_arguments_name_the_debian_version() {
        let a = configure_args("/p", "2.36-9+deb12u14");
        assert_eq!(a[0], "--prefix=/p");
        assert!(a.contains(&"--with-pkgversion=Debian GLIBC 2.36-9+deb12u14 + bootlink".to_string()));
        assert_eq!(doing("make[2]: Entering directory '/c/src/elf'"), Some("elf"));
        assert_eq!(doing("checking for gawk... gawk"), Some("checking for gawk... gawk"));
        assert_eq!(doing("gcc -c x.c"), None);
    }
}
