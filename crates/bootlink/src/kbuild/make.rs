//! Running kbuild: `make O=OBJ` in the source tree with ccache when there
//! is one, the output in a log file, the current step on a terminal.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Kind, Result};
use crate::hosttool;

/// What every make call gets: reproducible build stamps, ccache's
/// directory and base (so a tree at another path still hits the cache).
pub(crate) struct Env<'a> {
    pub tree: &'a Path,
    pub obj: &'a Path,
    pub ccache_dir: &'a Path,
    /// The common parent of tree and obj: ccache rewrites paths below it as relative.
    pub base: &'a Path,
    pub jobs: usize,
    /// The architecture built for: `ARCH=` and `CROSS_COMPILE=` when it is
    /// not the host's (x86-64).
    pub arch: crate::fetch::Arch,
    /// The command link-vmlinux.sh runs on vmlinux to fill its symbol hash
    /// tables (KSYMHASH, patch `symhash-vmlinux`, vmlinux's tables).
    pub symhash_hook: Option<String>,
    /// `NAME=VALUE` arguments to every make call: a build flavour's
    /// (`# bootlink-make:` lines; the `none` flavour's KGZIP), and
    /// PAHOLE_FLAGS where [`serial_pahole_flags`] gives them.
    pub make_vars: Vec<String>,
    /// The kernel build's locks (the line's, the object tree's:
    /// [`super::lock`]), held by make and its jobs too (see
    /// [`hosttool::tie_to_caller`]).
    pub locks: &'a [std::fs::File],
}

/// `bootlink symhash --vmlinux`, as a command line for KSYMHASH: this
/// binary, or the `bootlink` beside a test binary's directory.
pub(crate) fn symhash_hook() -> Result<String> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::new(Kind::Internal, format!("cannot find bootlink's own binary: {e}")).because(e))?;
    let bin = if exe.file_stem().is_some_and(|s| s == "bootlink") {
        exe
    } else {
        let beside = exe.parent().and_then(Path::parent).map(|d| d.join("bootlink")).filter(|p| p.is_file());
        beside.ok_or_else(|| {
            Error::new(
                Kind::Tool,
                format!("{}: no bootlink binary beside it to fill vmlinux's symbol hash tables", exe.display()),
            )
        })?
    };
    let s = bin.display().to_string();
    if s.contains(char::is_whitespace) {
        return Err(Error::file(
            Kind::Unsupported,
            &bin,
            "the kernel build runs bootlink by a path without spaces; this one has one",
        ));
    }
    Ok(format!("{s} symhash --vmlinux"))
}

/// The BTF encoder's flags without `-j`, where the source's
/// `scripts/pahole-flags.sh` (6.1) asks for it: pahole before 1.27 encodes
/// BTF in another order on each parallel run, so every link of a
/// BTF-enabled kernel (Debian's config) gave another `.BTF` section size
/// and moved every section after it. A build made again in a shared
/// object tree then differed from its own cached copy (the lab's
/// `kernel:distro` hash list check refused the tree's vmlinux). 6.12's
/// `scripts/Makefile.btf` already leaves `-j` out when
/// KBUILD_BUILD_TIMESTAMP is set, as it is here. None when the source has
/// no such script or it asks for no `-j`. Asked once a build, given to
/// every make of it as `PAHOLE_FLAGS=` among [`Env::make_vars`].
pub(crate) fn serial_pahole_flags(tree: &Path) -> Option<String> {
    let script = tree.join("scripts/pahole-flags.sh");
    if !script.is_file() {
        return None;
    }
    let out = Command::new("sh").arg(&script).env("PAHOLE", "pahole").output().ok()?;
    let flags = String::from_utf8_lossy(&out.stdout).into_owned();
    let words: Vec<&str> = flags.split_whitespace().collect();
    words.contains(&"-j").then(|| words.iter().filter(|w| **w != "-j").copied().collect::<Vec<_>>().join(" "))
}

impl Env<'_> {
    pub fn ccache(&self) -> bool {
        hosttool::exists("ccache")
    }

    fn command(&self, targets: &[&str]) -> Command {
        let mut c = Command::new("make");
        hosttool::tie_to_caller_holding(&mut c, self.locks);
        c.current_dir(self.tree).arg(format!("O={}", self.obj.display())).arg(format!("-j{}", self.jobs.max(1)));
        let cross = self.arch.cross_compile();
        if !cross.is_empty() {
            c.arg(format!("ARCH={}", self.arch.kernel())).arg(format!("CROSS_COMPILE={cross}"));
        }
        if self.ccache() {
            c.arg(format!("CC=ccache {cross}gcc")).env("CCACHE_DIR", self.ccache_dir).env("CCACHE_BASEDIR", self.base);
        }
        c.args(&self.make_vars);
        if let Some(hook) = &self.symhash_hook {
            c.env("KSYMHASH", hook);
        }
        // A build made again under one key is the same kernel: no time, no
        // user or host, and no link counter (kbuild's `.version`, the "#N"
        // of the banner, went up with every relink of a shared object tree;
        // "#9" and "#10" differ in length, which moves what follows the
        // banner in .rodata and with it the lab's instruction-counted times).
        c.args(targets)
            .env("KBUILD_BUILD_VERSION", "1")
            .env("KBUILD_BUILD_TIMESTAMP", "2026-01-01 00:00:00 UTC")
            .env("KBUILD_BUILD_USER", "bootlink")
            .env("KBUILD_BUILD_HOST", "bootlink")
            .env("LC_ALL", "C");
        c
    }

    /// Run make for `targets` (plus `extra` variables), appending its
    /// output to `log`. On a terminal the latest step shows on one line.
    pub fn run(&self, targets: &[&str], extra: &[String], log: &Path, what: &str) -> Result<()> {
        let mut cmd = self.command(targets);
        cmd.args(extra);
        let mut logf =
            std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| Error::io(log, e))?;
        let _ = writeln!(logf, "$ make {}", targets.join(" "));
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| hosttool::spawn_error("make", what, "make", e))?;
        let stderr = child.stderr.take().expect("piped");
        let err_log = logf.try_clone().map_err(|e| Error::io(log, e))?;
        let err_thread = std::thread::spawn(move || copy_lines(stderr, err_log, None));
        let show = std::io::stderr().is_terminal() && std::env::var_os("BOOTLINK_QUIET").is_none();
        copy_lines(child.stdout.take().expect("piped"), logf, show.then_some(what));
        let tail = err_thread.join().unwrap_or_default();
        let status = child.wait().map_err(|e| Error::new(Kind::Build, format!("make: {e}")).because(e))?;
        if show {
            eprint!("\r\x1b[K");
        }
        if !status.success() {
            let last: Vec<&str> = tail.iter().map(String::as_str).filter(|l| l.contains("rror")).take(3).collect();
            let last = if last.is_empty() {
                tail.iter().rev().take(3).rev().cloned().collect()
            } else {
                last.iter().map(|s| s.to_string()).collect::<Vec<_>>()
            };
            return Err(Error::file(
                Kind::Build,
                log,
                format!("{what} failed (make {} exited {status}): {}", targets.join(" "), last.join(" | ")),
            ));
        }
        Ok(())
    }
}

/// Copy lines to the log; with `status`, show the latest on the terminal
/// (at most ten times a second). Returns the last lines seen.
fn copy_lines(from: impl std::io::Read, mut log: std::fs::File, status: Option<&str>) -> Vec<String> {
    let mut tail = std::collections::VecDeque::new();
    let mut shown = Instant::now() - Duration::from_secs(1);
    for line in BufReader::new(from).lines().map_while(|l| l.ok()) {
        let _ = writeln!(log, "{line}");
        if let Some(what) = status
            && shown.elapsed() >= Duration::from_millis(100)
        {
            let cut: String = line.trim().chars().take(70).collect();
            eprint!("\r\x1b[K{what}: {cut}");
            let _ = std::io::stderr().flush();
            shown = Instant::now();
        }
        tail.push_back(line);
        if tail.len() > 40 {
            tail.pop_front();
        }
    }
    tail.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paholes_parallel_flag_is_left_out_where_the_source_asks_for_it() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(serial_pahole_flags(d.path()), None, "no script (6.12)");
        std::fs::create_dir_all(d.path().join("scripts")).unwrap();
        let script = d.path().join("scripts/pahole-flags.sh");
        std::fs::write(&script, "#!/bin/sh\necho --btf_gen_floats -j --lang_exclude=rust\n").unwrap();
        assert_eq!(serial_pahole_flags(d.path()).as_deref(), Some("--btf_gen_floats --lang_exclude=rust"));
        std::fs::write(&script, "#!/bin/sh\necho --btf_gen_floats\n").unwrap();
        assert_eq!(serial_pahole_flags(d.path()), None, "no -j asked for: make's own flags stand");
    }
}
