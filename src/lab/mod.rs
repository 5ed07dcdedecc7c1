//! The lab: real kernels booted under QEMU (TCG) with an initramfs bootlink builds itself.
//!
//! The pieces, one job each:
//! - [`cpio`]: a writer (and a checking reader) for the "newc" archives the
//!   kernel unpacks as an initramfs;
//! - [`busybox`]: a static busybox from Debian's `busybox-static`, cached;
//! - [`initramfs`]: busybox, applet links, a generated `/init` that frames
//!   the caller's output with marker lines, and any extra files;
//! - [`qemu`]: boot a kernel under `qemu-system-x86_64 -accel tcg`, capture
//!   the serial console, time it, and tell a clean power-off from a panic;
//! - [`loaders`]: how each loader (insmod, the batch loader, kmod, a
//!   duplicate-request storm) runs in the guest; [`batchloader`] builds the
//!   batch loader from `loader/` and reads its report;
//! - [`order`]: function reordering on emulated slow flash: the seed's
//!   synthetic program, unordered and reordered, started cold from SquashFS.
//! - [`ddlink`]: a program started under DDLink's patched ld.so in each
//!   loader mode after the modules load, its starts on the kernel's timeline;
//! - [`procs`]: every process of a boot (fork, exec, exit) from /init on,
//!   in an ftrace instance of its own.

pub mod batchloader;
pub mod busybox;
pub mod cpio;
pub mod ddlink;
pub mod initramfs;
pub mod loaders;
pub mod order;
pub mod procs;
pub mod qemu;
pub mod scenario;
pub mod scenario_file;
pub mod setup;
pub mod step;
pub mod target;
pub mod userspace;
pub mod variant;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Kind, Result};

pub use initramfs::{Initramfs, framed};
pub use qemu::{Boot, BootStatus, QemuOptions};

/// A directory under `std::env::temp_dir()` with a unique name, removed
/// (with its contents) when dropped unless [`TempDir::keep`] is called.
/// The `tempfile` crate does the work; this keeps the lab's labels in the names.
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Create `<temp>/bootlink-<label>-<random>`.
    pub fn new(label: &str) -> Result<TempDir> {
        Self::new_in(&std::env::temp_dir(), &format!("bootlink-{label}"))
    }

    /// Create `<dir>/<label>-<random>` (same file system as `dir`, so its
    /// contents can be renamed into place there).
    pub fn new_in(dir: &Path, label: &str) -> Result<TempDir> {
        tempfile::Builder::new()
            .prefix(&format!("{label}-"))
            .tempdir_in(dir)
            .map(TempDir)
            .map_err(|e| Error::io(dir, e))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Keep the directory after all; returns its path.
    pub fn keep(self) -> PathBuf {
        self.0.keep()
    }
}

/// Run a host tool to completion and return its stdout. A missing tool is
/// reported with the Debian package that provides it.
pub(crate) fn run_tool(cmd: &mut Command, what: &str, package: &str) -> Result<String> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(
            Kind::Tool,
            format!("{prog}: missing tool, needed for {what} (install the Debian package {package})"),
        ),
        _ => Error::new(Kind::Tool, format!("{prog}: cannot run it for {what}: {e}")),
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().map(str::trim).rfind(|l| !l.is_empty() && !l.starts_with("W:")).unwrap_or("");
        return Err(Error::new(Kind::Tool, format!("{what} failed ({prog} exited {}): {last}", out.status)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dirs_are_unique_and_removed() {
        let a = TempDir::new("lab-test").unwrap();
        let b = TempDir::new("lab-test").unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        assert!(!pa.exists());
        let kept = b.keep();
        assert!(kept.is_dir());
        std::fs::remove_dir_all(&pb).unwrap();
    }

    #[test]
    fn missing_tool_names_the_package() {
        let err = run_tool(&mut Command::new("bootlink-no-such-tool"), "testing", "some-package").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("bootlink-no-such-tool") && text.contains("some-package"), "{text}");
        let err = run_tool(Command::new("sh").args(["-c", "echo oops >&2; exit 3"]), "testing", "dash").unwrap_err();
        assert!(err.to_string().contains("oops"), "{err}");
    }
}
