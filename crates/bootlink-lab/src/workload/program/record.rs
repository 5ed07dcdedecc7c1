//! A host program's run: its result as run.json holds it.

use serde::{Deserialize, Serialize};

/// A host program run once in the guest after the modules load (`run:`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ProgramRun {
    /// The program's path and arguments (empty in runs written before
    /// results were tagged by workload).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// What it printed, then `RUN-EXIT <status>`.
    pub output: String,
}
