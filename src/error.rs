//! One error type for the whole library: every error has a kind (what sort
//! of thing went wrong, for callers and tests to match on), names the file
//! it is about (when there is one) and says what is wrong in one line.

use std::fmt;
use std::path::{Path, PathBuf};

/// What sort of thing went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Reading or writing a file failed (missing, permissions, disk full).
    Io,
    /// The input is not what it claims: truncated or corrupt ELF, corrupt
    /// compression, a malformed list, config, patch series or run.json.
    Format,
    /// Valid input bootlink does not handle (32-bit ELF, another machine,
    /// relocations it cannot fold).
    Unsupported,
    /// The module or image belongs to another kernel (vermagic, addresses),
    /// or the kernel makes the request unsafe (KASLR).
    WrongKernel,
    /// The request itself is wrong: unknown names, conflicting options.
    Usage,
    /// A host tool is missing or failed (apt, openssl, xz, make, patch).
    Tool,
    /// A guest boot failed (panic, hang, QEMU error).
    Boot,
    /// Building the kernel failed.
    Build,
    /// A record or cache no longer matches the files it describes (a library
    /// replaced after profiling, a record of another program).
    Stale,
    /// A bug in bootlink: a check of its own output failed, or a job panicked.
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: Kind,
    pub path: Option<PathBuf>,
    pub msg: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: Kind, msg: impl Into<String>) -> Error {
        Error { kind, path: None, msg: msg.into() }
    }

    pub fn file(kind: Kind, path: &Path, msg: impl Into<String>) -> Error {
        Error { kind, path: Some(path.to_path_buf()), msg: msg.into() }
    }

    pub fn io(path: &Path, err: std::io::Error) -> Error {
        let msg = match err.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => err.to_string(),
        };
        Error::file(Kind::Io, path, msg)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_with_the_file_and_a_kind() {
        let e = Error::file(Kind::Format, Path::new("/m/fat.ko"), "truncated");
        assert_eq!((e.kind, e.to_string()), (Kind::Format, "/m/fat.ko: truncated".to_string()));
        let e = Error::io(Path::new("/nope"), std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!((e.kind, e.to_string()), (Kind::Io, "/nope: no such file or directory".to_string()));
        assert_eq!(Error::new(Kind::Usage, "x").at(Path::new("p")).to_string(), "p: x");
    }
}
