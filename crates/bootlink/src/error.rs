//! One error type for the whole library: every error has a kind (what sort
//! of thing went wrong, for callers and tests to match on), names the file
//! it is about (when there is one), says what is wrong in one line, and
//! keeps the error that caused it (an `io::Error`, a JSON error, ...) as its
//! [`std::error::Error::source`]. Layers whose callers tell failures apart
//! have their own enums ([`crate::elf::ReadError`],
//! [`crate::hosttool::ToolError`]) that convert into this type with `From`,
//! choosing the kind and staying reachable as the source.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// The lower-level error behind an [`Error`], shared so that errors stay
/// cheap to clone.
pub(crate) type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: Kind,
    pub path: Option<PathBuf>,
    /// What is wrong, one line (the cause's text is already in it when it
    /// says more than the cause itself; `Display` never prints `source`).
    pub msg: String,
    /// The error this one was made from, if any.
    pub source: Option<Cause>,
}

/// Two errors are equal when they say the same thing about the same file;
/// their causes are not compared.
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        (self.kind, &self.path, &self.msg) == (other.kind, &other.path, &other.msg)
    }
}

impl Eq for Error {}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: Kind, msg: impl Into<String>) -> Error {
        Error { kind, path: None, msg: msg.into(), source: None }
    }

    pub fn file(kind: Kind, path: &Path, msg: impl Into<String>) -> Error {
        Error { kind, path: Some(path.to_path_buf()), msg: msg.into(), source: None }
    }

    pub fn io(path: &Path, err: std::io::Error) -> Error {
        let msg = match err.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            std::io::ErrorKind::StorageFull => "no space left on device".to_string(),
            std::io::ErrorKind::QuotaExceeded => "disk quota exceeded".to_string(),
            _ => err.to_string(),
        };
        Error::file(Kind::Io, path, msg).because(err)
    }

    /// Whether this error was made from an I/O error "not found" (a
    /// directory still to be made, for one).
    pub(crate) fn is_not_found(&self) -> bool {
        self.source
            .as_deref()
            .and_then(|c| c.downcast_ref::<std::io::Error>())
            .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    }

    /// Keep `cause` as this error's source (replacing any earlier one).
    pub fn because(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.source = Some(Arc::new(cause));
        self
    }

    /// The same failure as a caller describes it: about `path`, with the
    /// message `msg` makes from this one's (to quote it), keeping this
    /// error's kind (chosen where the failure happened) and this error as
    /// the source.
    pub fn context(self, path: &Path, msg: impl FnOnce(&str) -> String) -> Error {
        let text = msg(&self.msg);
        Error { kind: self.kind, path: Some(path.to_path_buf()), msg: text, source: Some(Arc::new(self)) }
    }

    /// The error for bytes that should be JSON and are not; keeps the
    /// parser's error as the source.
    pub fn json(path: &Path, err: serde_json::Error) -> Error {
        Error::file(Kind::Format, path, err.to_string()).because(err)
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

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

    #[test]
    fn the_cause_is_kept_as_the_source() {
        use std::error::Error as _;
        let e = Error::io(Path::new("/nope"), std::io::Error::other("disk on fire"));
        let src = e.source().expect("io keeps its io::Error");
        assert_eq!(src.to_string(), "disk on fire");
        assert!(src.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(e.to_string(), "/nope: disk on fire", "Display stays one line");
        let clone = e.clone();
        assert!(clone.source().is_some());
        assert_eq!(clone, Error::file(Kind::Io, Path::new("/nope"), "disk on fire"));
        assert!(Error::new(Kind::Usage, "x").source().is_none());
        let bad = serde_json::from_slice::<u32>(b"{").unwrap_err();
        let e = Error::json(Path::new("run.json"), bad);
        assert_eq!(e.kind, Kind::Format);
        assert!(e.source().unwrap().downcast_ref::<serde_json::Error>().is_some());
        let inner = Error::new(Kind::Tool, "patch: missing tool");
        let outer = inner.context(Path::new("p.patch"), |why| format!("does not apply: {why}"));
        assert_eq!(outer.to_string(), "p.patch: does not apply: patch: missing tool");
        assert_eq!(outer.kind, Kind::Tool, "the kind chosen where it failed is kept");
        assert!(outer.source().unwrap().downcast_ref::<Error>().is_some());
    }
}
