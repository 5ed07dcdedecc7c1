//! bootlink: move load-time linking work to build time, and measure boot.
//!
//! The library follows the capabilities; the `bootlink` binary is a thin CLI
//! over it.

pub mod apply;
pub mod cbuild;
pub mod chart;
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
pub mod lab;
pub mod lava;
pub mod manifest;
pub mod modcheck;
pub mod module;
pub mod modwrite;
pub mod order;
pub mod panic;
pub mod preresolve;
pub mod progress;
pub mod recommend;
pub mod reloc;
pub mod rng;
pub mod run;
pub mod series;
pub mod sign;
pub mod steps;
pub mod symhash;
pub mod table;
pub mod tree;

pub use error::{Error, Result};
