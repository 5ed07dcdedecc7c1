//! The bootlink lab: targets, module sets, variants and QEMU boots (`lab`),
//! guest workloads, one folder each (`workload`), the run records read from a boot (`run`), charts
//! (`chart`), recommendations from measured runs (`recommend`) and LAVA jobs
//! (`lava`), and a real Debian system booted to multi-user.target and measured
//! (`system`). It sits above the product crate (`bootlink`) and runs the same
//! build-time steps `bootlink apply` does.

pub mod chart;
pub mod lab;
pub mod lava;
pub mod recommend;
pub mod run;
pub mod system;
pub mod workload;
