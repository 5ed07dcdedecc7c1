//! Finding and reading many modules at once, in parallel.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::module::{self, Module};
use crate::progress::Progress;

/// Expand files and directories into the module files they hold, sorted.
/// Directories are walked recursively; symlinked directories (such as
/// `build` and `source` in lib/modules/<release>) are not followed.
pub fn find_modules(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| Error::io(input, e))?;
        if meta.is_dir() {
            let before = out.len();
            walk(input, &mut out)?;
            if out.len() == before {
                return Err(Error::file(input, "no kernel modules (.ko, .ko.xz, .ko.zst, .ko.gz) in this directory"));
            }
        } else {
            out.push(input.clone());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let ty = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if ty.is_dir() {
            walk(&path, out)?;
        } else if (ty.is_file() || ty.is_symlink()) && module::is_module_file(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Read modules in parallel. Each result is kept: one bad module does not
/// stop the others.
pub fn read_all(paths: &[PathBuf]) -> Vec<Result<Module>> {
    let progress = Progress::new("reading modules", paths.len());
    paths
        .par_iter()
        .map(|p| {
            let r = module::read(p);
            progress.inc();
            r
        })
        .collect()
}

/// One file of a batch that could not be processed, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileError {
    pub path: PathBuf,
    pub error: String,
}
