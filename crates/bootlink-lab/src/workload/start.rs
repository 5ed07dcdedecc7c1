//! The start of a program in the guest, whichever workload started it
//! (DDLink's and reordering's starts carry one each).

use serde::{Deserialize, Serialize};

/// One start of a program in the guest, whichever workload started it:
/// what the kernel log's markers and the shell say.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Start {
    /// The start's series: one of `USER_MODES` for DDLink, `BLOCK/RA/BUILD`
    /// for reordering.
    pub mode: String,
    /// The how-manieth start in this mode (from 0).
    pub index: usize,
    /// Guest time (since boot) of the kernel log marker written just
    /// before the shell starts the program, and from it to the marker
    /// written once the program exited (fork, exec, ld.so, the program).
    pub start_us: f64,
    pub duration_us: f64,
    /// The program's exit status.
    pub exit: i32,
    /// What the program printed (stdout and stderr).
    #[serde(default)]
    pub output: String,
}
