//! The kernel build cache's locks: one per kernel line and one per object
//! tree, so that a build of one line never waits for another line's.
//!
//! What each guards, in the order they are taken:
//! - `<kbuild>/.lock`, taken *shared* by every build: the lock bootlink
//!   took exclusively for every line before there was one per line. An
//!   older bootlink (another checkout sharing the cache) still takes it
//!   exclusively, so its builds and these still exclude each other.
//! - `<kbuild>/locks/line-<line>` (exclusive): the line's unpacked source
//!   (`src/linux-source-<line>`) and the series applied to it, and the
//!   cached builds of that line (their keys hold the line's source
//!   version).
//! - `<kbuild>/locks/<object tree>` (exclusive): one object tree
//!   (`obj-<hash>`, named by its config alone, so two lines built from
//!   one config share it). Pruning an object tree takes its lock too, so
//!   a build of one line never removes a tree a build of another is in.
//!
//! The lock files are never removed (a lock file removed while another
//! process waits on it would let two processes hold "the" lock).
//! Everything else under `<kbuild>` is per line or per tree; the signing
//! key, shared by all lines, has its own lock (`<cache>/keys/.lock`,
//! [`super::key`]), and ccache locks its own files.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::Line;
use crate::error::{Error, Result};
use crate::progress;

/// The lock every build takes shared (older bootlinks: exclusively).
pub fn all_lines_path(kbuild: &Path) -> PathBuf {
    kbuild.join(".lock")
}

/// The lock of `line`'s source tree and builds.
pub fn line_path(kbuild: &Path, line: Line) -> PathBuf {
    kbuild.join("locks").join(format!("line-{}", line.name))
}

/// The lock of the object tree `obj` (a directory in `<kbuild>`).
pub fn tree_path(obj: &Path) -> PathBuf {
    let kbuild = obj.parent().unwrap_or(Path::new("."));
    kbuild.join("locks").join(obj.file_name().unwrap_or_default())
}

fn open(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(|e| Error::io(path, e))
}

/// The locks a kernel build holds, in the order taken (released together
/// when dropped).
pub struct Held {
    files: Vec<File>,
    /// The object tree whose lock is held, if one is.
    tree: Option<PathBuf>,
    /// The line lock's path, in [`HELD_HERE`] while held.
    line: PathBuf,
}

thread_local! {
    /// The line locks this thread holds: a second take of one on the same
    /// thread would wait for itself (flock locks belong to an open file),
    /// while another thread's take must wait like another process's.
    static HELD_HERE: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether this thread holds `line`'s lock (a caller inside a build's
/// [`super::with_tree`] that must not take it again).
pub fn held_here(kbuild: &Path, line: Line) -> bool {
    let path = line_path(kbuild, line);
    HELD_HERE.with(|h| h.borrow().contains(&path))
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD_HERE.with(|h| {
            let mut held = h.borrow_mut();
            if let Some(i) = held.iter().position(|p| *p == self.line) {
                held.swap_remove(i);
            }
        });
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Shared,
    Exclusive,
}

/// The lock file at `path`, locked in `mode`: at once when it is free,
/// else after saying why it waits (`why`).
fn take(path: &Path, mode: Mode, why: impl FnOnce() -> String) -> Result<File> {
    let f = open(path)?;
    let free = match mode {
        Mode::Shared => f.try_lock_shared().is_ok(),
        Mode::Exclusive => f.try_lock().is_ok(),
    };
    if !free {
        progress::waiting(&why());
        match mode {
            Mode::Shared => f.lock_shared(),
            Mode::Exclusive => f.lock(),
        }
        .map_err(|e| Error::io(path, e))?;
    }
    Ok(f)
}

impl Held {
    /// The locks of `line`: every build's shared lock and the line's own,
    /// waited for (saying which) when another build holds them.
    pub fn line(kbuild: &Path, line: Line) -> Result<Held> {
        let all_path = all_lines_path(kbuild);
        let all = take(&all_path, Mode::Shared, || {
            format!(
                "waiting for a kernel build of an older bootlink to finish (it locks every line: {})",
                all_path.display()
            )
        })?;
        let line_path = line_path(kbuild, line);
        let own = take(&line_path, Mode::Exclusive, || {
            format!("waiting for another kernel build of line {line} to finish (it holds {})", line_path.display())
        })?;
        HELD_HERE.with(|h| h.borrow_mut().push(line_path.clone()));
        Ok(Held { files: vec![all, own], tree: None, line: line_path })
    }

    /// Also the lock of the object tree `obj` (once; another tree's is an
    /// internal error: a build works in one).
    pub fn tree(&mut self, obj: &Path) -> Result<()> {
        match &self.tree {
            Some(held) if held == obj => return Ok(()),
            Some(held) => {
                return Err(Error::new(
                    crate::error::Kind::Internal,
                    format!("holding the lock of object tree {} and asked for {}'s", held.display(), obj.display()),
                ));
            }
            None => {}
        }
        let lock = take(&tree_path(obj), Mode::Exclusive, || {
            format!(
                "waiting for another kernel build in object tree {} (another line built from the same config)",
                obj.display()
            )
        })?;
        self.files.push(lock);
        self.tree = Some(obj.to_path_buf());
        Ok(())
    }

    /// The lock files, for the processes the build starts to hold too
    /// ([`crate::hosttool::tie_to_caller`]).
    pub(crate) fn files(&self) -> &[File] {
        &self.files
    }
}

/// Whether no build is in the object tree `obj`: its lock, taken without
/// waiting (held until the returned file is dropped), for pruning it.
pub(crate) fn tree_if_free(obj: &Path) -> Option<File> {
    let lock = open(&tree_path(obj)).ok()?;
    lock.try_lock().ok()?;
    Some(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines lock apart: holding 6.12's leaves 6.1's free; holding 6.1's
    /// keeps a second taker of 6.1's out; every holder shares the lock an
    /// older bootlink takes exclusively, and keeps it from taking it.
    #[test]
    fn one_lock_per_line_and_the_old_lock_shared() {
        let dir = tempfile::tempdir().unwrap();
        let kbuild = dir.path();
        let v612 = Held::line(kbuild, Line::parse("6.12").unwrap()).unwrap();
        let v61 = Held::line(kbuild, Line::V6_1).unwrap();
        let again = File::open(line_path(kbuild, Line::V6_1)).unwrap();
        assert!(again.try_lock().is_err(), "6.1's lock is held");
        let old = File::open(all_lines_path(kbuild)).unwrap();
        assert!(old.try_lock().is_err(), "an older bootlink's exclusive lock waits for both");
        assert!(held_here(kbuild, Line::V6_1) && held_here(kbuild, Line::parse("6.12").unwrap()));
        let elsewhere = std::thread::spawn({
            let kbuild = kbuild.to_path_buf();
            move || held_here(&kbuild, Line::V6_1)
        });
        assert!(!elsewhere.join().unwrap(), "another thread must wait like another process");
        drop(v61);
        assert!(!held_here(kbuild, Line::V6_1), "given up with its holder");
        again.try_lock().expect("6.1's lock is free once its holder is gone");
        assert!(old.try_lock().is_err(), "6.12's build still holds the shared lock");
        drop(v612);
        old.try_lock().expect("free once no build holds it");
    }

    /// A tree's lock keeps the tree from being pruned, and is the tree's
    /// own: another tree's is free.
    #[test]
    fn a_tree_in_use_is_not_free() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("obj-aaaa"), dir.path().join("obj-bbbb"));
        let mut held = Held::line(dir.path(), Line::V6_1).unwrap();
        held.tree(&a).unwrap();
        held.tree(&a).unwrap();
        assert!(held.tree(&b).is_err(), "one tree per build");
        assert!(tree_if_free(&a).is_none());
        assert!(tree_if_free(&b).is_some());
        drop(held);
        assert!(tree_if_free(&a).is_some());
    }
}
