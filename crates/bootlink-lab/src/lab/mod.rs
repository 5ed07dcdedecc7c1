//! The lab: real kernels booted under QEMU (TCG) with an initramfs bootlink builds itself.
//!
//! The pieces, one job each:
//! - [`cpio`]: a writer (and a checking reader) for the "newc" archives the
//!   kernel unpacks as an initramfs;
//! - [`busybox`]: a static busybox from Debian's `busybox-static`, cached;
//! - [`initramfs`]: busybox, applet links, a generated `/init` that frames
//!   the caller's output with marker lines, and any extra files;
//! - [`arch`]: the guest's architecture (x86-64, arm64);
//! - [`target`]: what a run boots on: the emulator, machine, pinned CPU
//!   model, console and kernel images of an architecture;
//! - [`qemu`]: boot a kernel under QEMU (TCG) on a target, capture the
//!   serial console, time it, and tell a clean power-off from a panic;
//! - [`procs`]: every process of a boot (fork, exec, exit) from /init on,
//!   in an ftrace instance of its own;
//! - [`userspace`]: a host program and its libraries copied into the guest;
//! - [`distro`]: the series built with a distribution's config, its
//!   modules signed with the build's key (`kernel:distro`);
//! - above the workloads (`workload/`, one folder each): [`variant`],
//!   [`scenario_file`], [`setup`], [`scenario`], [`survey`]: variants
//!   parsed, prepared and booted.

pub mod arch;
pub mod bootclock;
pub mod busybox;
pub mod cpio;
pub(crate) mod debs;
pub mod distro;
pub mod hang;
pub mod initramfs;
pub(crate) mod packaged;
pub mod procs;
pub mod qemu;
pub mod scenario;
pub mod scenario_file;
pub mod setup;
pub mod survey;
pub mod target;
pub mod userspace;
pub mod variant;

pub use initramfs::{Initramfs, framed};
pub use qemu::{Boot, BootStatus, QemuOptions};

/// Kept here so the lab's files that name `crate::lab::TempDir` keep
/// working; the type lives in the ground layer.
pub use bootlink::fsutil::TempDir;

/// The host-tool runner, under the lab's old name.
pub(crate) use bootlink::hosttool::run as run_tool;
