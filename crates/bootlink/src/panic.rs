//! Internal errors (panics: bugs in bootlink, not bad input) in one line.
//!
//! [`install`] (the first thing `main` does) replaces Rust's panic message
//! and backtrace with
//!
//! ```text
//! bootlink: internal error: <message> (while processing FILE) — please report this
//! ```
//!
//! naming the input being processed when one is (see [`processing`] and
//! [`catching`]), and exits with [`EXIT_INTERNAL`], which no refusal of
//! bad input uses (those exit 1). The backtrace is printed only when
//! RUST_BACKTRACE is set. A panic inside [`catching`] (one file of a batch)
//! prints nothing: it becomes that file's error, and the batch goes on.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};

/// The exit status of an internal error (EX_SOFTWARE of sysexits.h).
pub const EXIT_INTERNAL: u8 = 70;

thread_local! {
    static CURRENT: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Install the one-line panic report for this process.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let what = message(info.payload());
        let what = match info.location() {
            Some(l) => format!("{what} (at {}:{})", l.file(), l.line()),
            None => what,
        };
        let backtrace = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
        if CATCHING.with(Cell::get) {
            CAUGHT.with(|c| *c.borrow_mut() = Some(what));
            if backtrace {
                eprintln!("{}", std::backtrace::Backtrace::force_capture());
            }
            return;
        }
        eprintln!("{}", report_line(&what, CURRENT.with(|c| c.borrow().clone()).as_deref()));
        if backtrace {
            eprintln!("{}", std::backtrace::Backtrace::force_capture());
        }
        std::process::exit(EXIT_INTERNAL.into());
    }));
}

/// The line an uncaught internal error prints.
pub(crate) fn report_line(what: &str, file: Option<&Path>) -> String {
    match file {
        Some(f) => format!("bootlink: internal error: {what} (while processing {}) — please report this", f.display()),
        None => format!("bootlink: internal error: {what} — please report this"),
    }
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// While the returned guard lives, this thread is processing `path`: an
/// internal error names it.
pub fn processing(path: &Path) -> Processing {
    let before = CURRENT.with(|c| c.replace(Some(path.to_path_buf())));
    Processing { before }
}

pub struct Processing {
    before: Option<PathBuf>,
}

impl Drop for Processing {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.before.take());
    }
}

/// A panic caught in one file's job: its message, with where it happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Caught(pub String);

/// Run one file's job, processing `path`: a panic in it is returned as its
/// message (with where it happened), silently; the caller reports it as
/// that file's error and goes on with the rest of its batch.
pub(crate) fn catching<T>(path: &Path, job: impl FnOnce() -> T) -> Result<T, Caught> {
    let _current = processing(path);
    let was = CATCHING.with(|c| c.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    CATCHING.with(|c| c.set(was));
    r.map_err(|payload| Caught(CAUGHT.with(|c| c.borrow_mut().take()).unwrap_or_else(|| message(&*payload))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_is_its_message_and_the_current_file_is_restored() {
        let outer = processing(Path::new("/m/outer.ko"));
        let r: Result<(), Caught> = catching(Path::new("/m/bad.ko"), || panic!("index out of bounds"));
        assert!(r.unwrap_err().0.contains("index out of bounds"));
        assert_eq!(CURRENT.with(|c| c.borrow().clone()), Some(PathBuf::from("/m/outer.ko")));
        drop(outer);
        assert_eq!(CURRENT.with(|c| c.borrow().clone()), None);
        assert_eq!(catching(Path::new("x"), || 7), Ok(7));
        assert_eq!(
            report_line("boom", Some(Path::new("/m/x.ko"))),
            "bootlink: internal error: boom (while processing /m/x.ko) — please report this"
        );
    }
}
