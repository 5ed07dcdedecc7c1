//! What apply wrote, kept beside the modules (`bootlink-applied.json` in
//! lib/modules/<release>), so a second run knows a module it already
//! rewrote from one installed since (or installed again by `make
//! modules_install`) and changes nothing it need not. depmod ignores the
//! file; it goes with the tree when the tree is copied.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Kind, Result};

pub(crate) const FILE: &str = "bootlink-applied.json";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Record {
    pub format: u32,
    /// The steps that made the files, by name.
    pub steps: Vec<String>,
    /// Each module file apply wrote or found already written, by its path
    /// below the release directory: the SHA-256 of the file as it is.
    pub modules: BTreeMap<String, String>,
    /// The SHA-256 of the vmlinux apply wrote the list into, if it did.
    pub vmlinux: Option<String>,
}

pub(crate) fn sha256_file(path: &Path) -> Result<String> {
    let data = crate::fsutil::map_file(path)?;
    Ok(crate::fsutil::hex(&Sha256::digest(&data[..])))
}

impl Record {
    /// The record in `dir`, or an empty one when there is none. A record
    /// that does not parse is refused: a tree half-known is not guessed at.
    pub(crate) fn load(dir: &Path) -> Result<Record> {
        let p = dir.join(FILE);
        if !p.exists() {
            return Ok(Record { format: 1, ..Record::default() });
        }
        let text = crate::fsutil::read_input_text(&p)?;
        let r: Record = serde_json::from_str(&text)
            .map_err(|e| Error::file(Kind::Format, &p, format!("not a record of bootlink apply: {e}")))?;
        if r.format != 1 {
            return Err(Error::file(Kind::Format, &p, format!("record format {} (this bootlink writes 1)", r.format)));
        }
        Ok(r)
    }

    /// Was the file at `rel` (below the release directory), whose content
    /// hashes to `sha`, written by apply?
    pub(crate) fn wrote(&self, rel: &str, sha: &str) -> bool {
        self.modules.get(rel).is_some_and(|s| s == sha)
    }

    /// Write the record for `dir` into `staged` (put in place with the
    /// files it lists); returns where it goes.
    pub(crate) fn stage(&self, dir: &Path, staged: &mut crate::fsutil::Staged) -> Result<PathBuf> {
        let p = dir.join(FILE);
        let text = serde_json::to_vec_pretty(self).expect("serializable");
        staged.write(&p, &text)?;
        Ok(p)
    }
}
