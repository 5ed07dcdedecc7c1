//! Module loading's results as run.json holds them: what a loader other
//! than sequential insmod reported, and a duplicate-request storm (the
//! loads themselves are the repetition's `modules`).

use serde::{Deserialize, Serialize};

/// What a loader other than sequential insmod reported for one boot.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LoaderResult {
    /// "batch", "modprobe", "modprobe-parallel".
    pub kind: String,
    /// Parallel workers (1 for sequential loaders).
    pub workers: u32,
    /// The loader's exit status.
    pub exit: i32,
    /// Guest microseconds from the loader's start to its exit.
    pub wall_us: f64,
    /// finit_module calls the loader made (the batch loader's own count).
    #[serde(default)]
    pub load_calls: u64,
    /// Modules it loaded more than once (must be empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<String>,
    /// The loader's own per-module results (name, result), for modules
    /// that did not end `loaded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_loaded: Vec<(String, String)>,
    /// Compressed modules loaded after the kernel decompressed them
    /// (finit_module with MODULE_INIT_COMPRESSED_FILE), and after user
    /// space did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decompressed_by_kernel: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decompressed_by_user: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A storm: `workers` processes ask for every module of the set at once,
/// as per-CPU udev workers do; what the kernel did with the requests.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Storm {
    pub workers: u32,
    /// finit_module requests made (workers x modules).
    pub requests: u64,
    /// Their results: exit status of each insmod (0, or the errno name
    /// busybox prints) and how many.
    pub results: Vec<(String, u64)>,
    /// kernel_read_file() calls and bytes (a kretprobe): module files read.
    pub kernel_reads: u64,
    pub bytes_read: u64,
    /// Bytes read beyond one read of each module of the set.
    pub duplicate_read_bytes: u64,
    /// load_module() entries (a kprobe), where the kernel lets it be probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_module_calls: Option<u64>,
    /// /proc/meminfo VmallocUsed before the storm and its peak during it (KiB).
    pub vmalloc_before_kb: u64,
    pub vmalloc_peak_kb: u64,
    /// Guest microseconds from the first request to the last answer.
    pub quiescence_us: f64,
    /// /sys/kernel/debug/modules/stats, where the kernel has it (name, value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_stats: Vec<(String, i64)>,
}
