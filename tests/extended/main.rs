//! The extended tier (`make test-extended`): kernel configs, a blacklist build, Buildroot, Debian-config builds, the arm64 cross build,
//! CPython's reordering (its own build, which no other test needs), and
//! boots that measure links rather than check paths `make test` covers
//! (the init links, the bzImage compressors) or need the host alone (a
//! U-Boot board through TFTP).
//!
//! One test binary for the tier (one link step instead of one per file);
//! each module is a former test file, and scripts/run-tests runs them one
//! module at a time, timing each test.

#[path = "../common/mod.rs"]
mod common;

mod buildroot_source;
mod compress_boot;
mod compress_hash_read;
mod ddlink_seed;
mod init_boot;
mod kernel_build_arm64;
mod kernel_build_stopped;
mod kernel_configs;
mod kernel_debian_config;
mod kmod_selftest;
mod lab_debian_612;
mod lab_distro;
mod lava_uboot;
mod manifest_blacklist;
mod order_python;
mod order_python_boot;
mod system_kernels;
