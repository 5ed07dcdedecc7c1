//! DDLink's results as run.json holds them: each start of the program
//! under the patched ld.so, with ld.so's own figures.

use serde::{Deserialize, Serialize};

use crate::workload::start::Start;

/// The DDLink loader modes the lab starts a program in, in order: the
/// patched ld.so without a cache, File Read Mode (the bindings from a
/// cache), Relocation Skip Mode (prelinked images, relocation skipped).
pub const USER_MODES: &[&str] = &["normal", "file-read", "skip"];

/// A program started under DDLink's patched ld.so in each mode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DdlinkStarts {
    /// What was started: `LD.SO PROGRAM ARGS`, host paths (the guest holds
    /// the files at the same paths).
    pub command: String,
    /// The guest's TSC rate (MHz, from the kernel log) the loader's cycle
    /// counts are converted with; None when the log did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_mhz: Option<f64>,
    /// Every start, in the order they ran.
    pub starts: Vec<DdlinkStart>,
}

/// One start under DDLink's ld.so: the start, and ld.so's own figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DdlinkStart {
    #[serde(flatten)]
    pub start: Start,
    /// ld.so's own figures (`LD_DEBUG=statistics`, converted with the
    /// guest's TSC rate and glibc 2.36's missing factor 10): its whole
    /// startup, loading the objects, and relocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_objects_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relocation_us: Option<f64>,
    /// Symbol lookups the loader made ("final number of relocations").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookups: Option<u64>,
    /// The loader's DDLink decision lines (`LD_DEBUG=ddlink`), joined with "; ".
    #[serde(default)]
    pub decision: String,
}

/// The common part of a DDLink or reordering start, read through it.
impl std::ops::Deref for DdlinkStart {
    type Target = Start;
    fn deref(&self) -> &Start {
        &self.start
    }
}

impl std::ops::DerefMut for DdlinkStart {
    fn deref_mut(&mut self) -> &mut Start {
        &mut self.start
    }
}
