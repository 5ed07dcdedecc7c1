//! Finding and reading many modules at once, in parallel.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{Error, Kind, Result};
use crate::module::{self, Module};
use crate::progress::Progress;

/// Expand files and directories into the module files they hold, sorted.
/// Directories are walked recursively; symlinked directories (such as
/// `build` and `source` in lib/modules/<release>) are not followed. A
/// symbolic link named like a module is read as the files given are: one
/// link followed, a chain or a loop refused (`fsutil::follow_once`). One
/// file named twice by any spelling (`x.ko` and `./x.ko`, a symbolic or
/// hard link, a directory and a file in it) is one module, under the
/// first name given.
pub fn find_modules(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        // Anything but a directory (or one link to one) is a file of the
        // batch: a missing file, a FIFO, a chain of links or a loop is that
        // file's error when it is read, and the rest of the batch goes on.
        if crate::fsutil::follow_once(input).is_ok_and(|m| m.is_dir()) {
            let mut found = Vec::new();
            walk(input, &mut found)?;
            // Sorted before links are told apart, so the name kept of a
            // file linked twice in a directory does not depend on the
            // order the directory lists them in.
            found.sort();
            if found.is_empty() {
                return Err(Error::file(
                    Kind::Usage,
                    input,
                    "no kernel modules (.ko, .ko.xz, .ko.zst, .ko.gz) in this directory",
                ));
            }
            out.extend(found);
        } else {
            out.push(input.clone());
        }
    }
    let mut out = crate::fsutil::unique_files(out);
    out.sort();
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
        } else if module::is_module_file(&path) {
            // Not only regular files: a FIFO or device named `x.ko` is
            // refused in one line when read, not skipped unseen.
            out.push(path);
        }
    }
    Ok(())
}

/// Read modules in parallel with `read` ([`module::read`], x86-64 only, for
/// what rewrites them; [`module::read_analysed`] for what only reads them).
/// Each result is kept: one bad module does not stop the others.
pub(crate) fn read_all_with(paths: &[PathBuf], read: fn(&Path) -> Result<Module>) -> Vec<Result<Module>> {
    let progress = Progress::new("reading modules", paths.len());
    paths
        .par_iter()
        .map(|p| {
            let r = isolated(p, || read(p));
            progress.inc();
            r
        })
        .collect()
}

/// Run one file's job so that a panic in it (a bug bootlink has not found
/// yet) becomes that file's error, and the rest of a batch goes on.
pub fn isolated<T>(path: &Path, job: impl FnOnce() -> Result<T>) -> Result<T> {
    crate::panic::catching(path, job).unwrap_or_else(|what| {
        Err(Error::file(Kind::Internal, path, format!("internal error: {what} — please report this")).because(what))
    })
}

/// One file of a batch that could not be processed, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileError {
    pub kind: Kind,
    pub path: PathBuf,
    pub error: String,
    /// The error itself, its causes kept (not part of a JSON report).
    #[serde(skip)]
    pub cause: Option<Error>,
}

impl From<Error> for FileError {
    fn from(e: Error) -> FileError {
        FileError { kind: e.kind, path: e.path.clone().unwrap_or_default(), error: e.msg.clone(), cause: Some(e) }
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_job_is_its_files_error() {
        let r: Result<()> = isolated(Path::new("/m/bad.ko"), || panic!("index out of bounds"));
        let e = r.unwrap_err();
        assert_eq!(e.kind, Kind::Internal);
        assert_eq!(e.path.as_deref(), Some(Path::new("/m/bad.ko")));
        assert!(e.msg.contains("index out of bounds"), "{e}");
        assert_eq!(isolated(Path::new("x"), || Ok(7)).unwrap(), 7);
    }

    #[test]
    fn unreadable_and_truncated_modules_have_kinds() {
        let t = tempfile::tempdir().unwrap();
        let r = read_all_with(&[t.path().join("missing.ko")], module::read);
        assert_eq!(r[0].as_ref().unwrap_err().kind, Kind::Io);
        let short = t.path().join("short.ko");
        std::fs::write(&short, b"\x7fELF\x02\x01\x01").unwrap();
        let r = read_all_with(&[short], module::read);
        assert_eq!(r[0].as_ref().unwrap_err().kind, Kind::Format, "{:?}", r[0]);
    }
}
