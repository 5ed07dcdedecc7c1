//! bootlink: move load-time linking work to build time.
//!
//! What users ship: reading kernels and modules, the module transforms, the
//! build-time steps and `apply`, the manifest, and the kernel and glibc
//! builds. The lab (`bootlink-lab`: targets, boots, run records, charts,
//! LAVA) is a crate above this one; the `bootlink` binary is a thin CLI over
//! both. This crate depends on no command-line parser and on nothing of the
//! lab's.

pub mod apply;
pub mod buildlog;
pub(crate) mod bytes;
pub mod cache;
pub mod cbuild;
pub mod compress;
pub mod ddlink;
pub mod debsrc;
pub mod elf;
pub mod elfedit;
pub mod error;
pub mod fetch;
pub mod finalize;
pub mod fsutil;
pub mod glibc;
pub mod hosttool;
pub mod inspect;
pub mod kbuild;
pub mod kernel;
pub mod kmod;
pub mod manifest;
pub mod modcheck;
pub mod module;
pub mod modwrite;
pub mod order;
pub mod panic;
pub mod preresolve;
pub mod progress;
pub mod reloc;
pub mod report;
pub mod rng;
pub mod series;
pub mod sign;
pub mod steps;
pub mod symhash;
pub mod table;
pub mod tree;

pub use error::{Error, Result};
