//! The lab on real boards and many machines: its runs as LAVA jobs, and
//! the jobs' logs read back into run.json (docs/lava.md).
//!
//! - [`job`]: `bootlink lab --lava DIR`: each variant built as the lab
//!   builds it, each repetition a LAVA job definition for a device type
//!   (qemu, or a board with U-Boot or GRUB), with its artifacts;
//! - [`import`]: `bootlink lava import`: finished jobs' logs through the
//!   lab's own console parser into a run directory `bootlink chart` reads;
//! - [`log`]: LAVA's job log format (one YAML record a line);
//! - [`uimage`]: U-Boot's legacy header around a board's initramfs.

pub mod import;
pub mod job;
pub mod log;
pub(crate) mod uimage;
