//! Tier 2: the real Debian kernel (fetched and cached), test modules built against its headers, the glibc and CPython builds.
//!
//! One test binary for the tier (one link step instead of one per file);
//! each module is a former test file, and scripts/run-tests runs them one
//! module at a time, timing each test.

#[path = "../common/mod.rs"]
mod common;

mod apply;
mod apply_buildroot_yocto;
mod apply_hooks;
mod bad_input;
mod batch_input;
mod damaged_real;
mod ddlink;
mod fetch_together;
mod finalize;
mod fuzz_reader;
mod glibc_build;
mod hostile_images;
mod image_cache;
mod inspect_arm64;
mod inspect_real;
mod lava;
mod manifest_signing;
mod outputs_arm64;
mod preresolve;
mod preresolve_arm64;
mod symhash;
