//! Reading the image back: its result as run.json holds it.

use serde::{Deserialize, Serialize};

/// The booted kernel image read from the lab's emulated flash (null_blk,
/// one 4 KiB request at a time, readahead off), against the flash model
/// `bootlink recommend` computes read times with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ImageRead {
    /// The device: MiB/s and microseconds per 4 KiB request.
    pub mib_s: u32,
    pub latency_us: u32,
    /// The image's bytes, and the 4 KiB requests the device counted.
    pub bytes: u64,
    pub requests: Option<u64>,
    /// Between the guest's kernel log marks around the read.
    pub measured_us: Option<f64>,
    /// The model: `ceil(bytes / 4096) x (latency + 4 KiB / throughput)`.
    pub model_us: f64,
}
