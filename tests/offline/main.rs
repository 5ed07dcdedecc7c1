//! Tier 1: offline, unit tests' neighbours and checked-in fixtures: no kernel package, no QEMU.
//!
//! One test binary for the tier (one link step instead of one per file);
//! each module is a former test file, and scripts/run-tests runs them one
//! module at a time, timing each test.

#[path = "../common/mod.rs"]
mod common;

mod cli_reference;
mod damaged;
mod ddlink_offline;
mod ddlink_synth;
mod docs_check;
mod finalize_split;
mod glibc_offline;
mod hostile_decompress;
mod input_scale;
mod lab_inputs;
mod layering;
mod offline;
mod order;
mod outputs;
