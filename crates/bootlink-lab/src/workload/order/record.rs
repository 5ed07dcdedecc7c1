//! Reordering's results as run.json holds them: each cold start from
//! emulated flash, its faults and reads.

use serde::{Deserialize, Serialize};

use crate::workload::start::Start;

/// Function reordering's cold starts, unordered and reordered builds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OrderStarts {
    /// The reordering case's label: the program, its builds, the flash.
    pub command: String,
    /// Every start, in the order they ran.
    pub starts: Vec<OrderStart>,
}

/// One cold start from emulated flash: the start, the program's page
/// faults (the starting shell's cminflt/cmajflt), what the device served
/// during it (`/sys/block/DEV/stat`: requests, bytes) and its time to UI.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OrderStart {
    #[serde(flatten)]
    pub start: Start,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// Time to UI: from the start marker to the moment the program's first
    /// output line reached the shell reading it (its `bootlink: order ui
    /// MODE K` kernel log marker), guest microseconds; None when the
    /// program printed nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_us: Option<f64>,
}

/// The common part of a start, read through it.
impl std::ops::Deref for OrderStart {
    type Target = Start;
    fn deref(&self) -> &Start {
        &self.start
    }
}

impl std::ops::DerefMut for OrderStart {
    fn deref_mut(&mut self) -> &mut Start {
        &mut self.start
    }
}
