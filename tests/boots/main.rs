//! Tier 3: QEMU boots of Debian's kernel and the self-built one.
//!
//! One test binary for the tier (one link step instead of one per file);
//! each module is a former test file, and scripts/run-tests runs them one
//! module at a time, timing each test.

#[path = "../common/mod.rs"]
mod common;

mod apply_boot;
mod apply_deb_package;
mod batch_boot;
mod chart;
mod compress_modules;
mod ddlink_boot;
mod finalize_boot;
mod kernel_build;
mod kernel_build_lock;
mod lab_arm64;
mod lab_boot;
mod lab_run;
mod lava_boot;
mod loading_boot;
mod manifest_boot;
mod manifest_bzimage;
mod manifest_inputs;
mod order_boot;
mod preresolve_boot;
mod sealed_boot;
mod slide_boot;
mod survey_boot;
mod symhash_boot;
mod system_boot;
