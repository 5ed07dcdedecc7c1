//! One error type for the whole library: every error names the file it is
//! about (when there is one) and says what is wrong in one line.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub path: Option<PathBuf>,
    pub msg: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error { path: None, msg: msg.into() }
    }

    pub fn file(path: &Path, msg: impl Into<String>) -> Error {
        Error { path: Some(path.to_path_buf()), msg: msg.into() }
    }

    pub fn io(path: &Path, err: std::io::Error) -> Error {
        let msg = match err.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => err.to_string(),
        };
        Error::file(path, msg)
    }

    /// Attach a path to an error that does not have one yet.
    pub fn at(mut self, path: &Path) -> Error {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}: {}", p.display(), self.msg),
            None => f.write_str(&self.msg),
        }
    }
}

impl std::error::Error for Error {}
