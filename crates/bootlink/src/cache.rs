//! bootlink's own cache ([`crate::fsutil::cache_dir`]), never trusted.
//!
//! What bootlink keeps there (decompressed kernel images, builds of the
//! repository's C, synthetic test programs, unpacked kernel packages,
//! kernel and glibc builds) is read back only when it is whole: each entry
//! is sealed when complete, its files listed with their size and SHA-256
//! (or, for trees of thousands of files read as inputs anyway, their size
//! and modification time) in a seal written last, and every read checks
//! the files against it. A damaged entry (a file cut short, changed,
//! removed, replaced by a directory, a FIFO or a link; its seal damaged or
//! missing, as an unfinished or older entry's is) is not an error: it is
//! made again, and said so on a terminal. A cache entry is never a reason
//! to refuse a good input, nor blamed for one.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Kind, Result};
use crate::fsutil;

/// An entry's seal, inside it.
pub const SEAL: &str = ".bootlink-seal.json";

const SEAL_FORMAT: u32 = 1;

/// The most a seal may hold (a kernel package's lists its ~4,000 files
/// in under 1 MiB).
const MAX_SEAL: u64 = 64 << 20;

/// How a file of an entry is checked on every read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Size and SHA-256 of the contents: any change is found.
    Content,
    /// Size and modification time: a file cut, rewritten or replaced is
    /// found, not a change that keeps both. For large trees whose files
    /// bootlink reads as inputs (and checks as such) anyway.
    Stat,
}

#[derive(Debug, Serialize, Deserialize)]
struct Seal {
    format: u32,
    files: Vec<Sealed>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    /// Relative to the entry, `/`-separated.
    path: String,
    #[serde(flatten)]
    what: What,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum What {
    Content { size: u64, sha256: String },
    Stat { size: u64, mtime_s: i64, mtime_ns: i64 },
    Link { target: String },
}

/// SHA-256 of `data`, hex.
pub fn sha256_hex(data: &[u8]) -> String {
    fsutil::hex(&Sha256::digest(data))
}

/// SHA-256 of the regular file at `path` (read in pieces), hex, with its size.
fn file_sha256(path: &Path) -> Result<(u64, String)> {
    let (mut f, _) = fsutil::open_input(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((size, fsutil::hex(&h.finalize())))
}

fn rel_string(rel: &Path) -> String {
    rel.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// What `path` is now, checked as `check` (a symbolic link is a link,
/// whatever it points to).
fn describe(path: &Path, check: Check) -> Result<What> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map_err(|e| Error::io(path, e))?;
        return Ok(What::Link { target: target.to_string_lossy().into_owned() });
    }
    if !meta.is_file() {
        return Err(Error::file(Kind::Format, path, "not a regular file"));
    }
    Ok(match check {
        Check::Content => {
            let (size, sha256) = file_sha256(path)?;
            What::Content { size, sha256 }
        }
        Check::Stat => What::Stat { size: meta.len(), mtime_s: meta.mtime(), mtime_ns: meta.mtime_nsec() },
    })
}

/// Seal the entry `dir` with these files (relative paths) checked as
/// given; written last, atomically. Call it when everything else of the
/// entry is in place.
pub fn seal(dir: &Path, files: &[(PathBuf, Check)]) -> Result<()> {
    let mut sealed = Vec::with_capacity(files.len());
    for (rel, check) in files {
        sealed.push(Sealed { path: rel_string(rel), what: describe(&dir.join(rel), *check)? });
    }
    let json = serde_json::to_vec(&Seal { format: SEAL_FORMAT, files: sealed }).expect("serializable");
    // (Whatever damage left in the seal's place goes.)
    let path = dir.join(SEAL);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
    }
    fsutil::write_atomic(&path, &json)
}

/// Seal every file and symbolic link under `dir` (not following links)
/// for which `how` gives a check; `how` sees paths relative to `dir`.
/// The seal itself and lock files (`.lock`) are left out.
pub fn seal_tree(dir: &Path, how: impl Fn(&Path) -> Option<Check>) -> Result<()> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&here)
            .map_err(|e| Error::io(&here, e))?
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::io(&here, e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let r = rel.join(e.file_name());
            let t = e.file_type().map_err(|err| Error::io(&e.path(), err))?;
            if t.is_dir() {
                stack.push(r);
            } else if r.as_os_str() != SEAL
                && e.file_name() != ".lock"
                && let Some(check) = how(&r)
            {
                files.push((r, check));
            }
        }
    }
    seal(dir, &files)
}

/// Whether the entry `dir` is whole: its seal there, readable, and every
/// file it lists as it says. Err says what is wrong (the file and how).
pub fn check(dir: &Path) -> std::result::Result<(), String> {
    let seal_path = dir.join(SEAL);
    if std::fs::symlink_metadata(&seal_path).is_err() {
        return Err("no seal (not finished, or made by an older bootlink)".into());
    }
    let data = fsutil::read_input(&seal_path, MAX_SEAL).map_err(|e| format!("its seal: {}", e.msg))?;
    let seal: Seal = serde_json::from_slice(&data).map_err(|e| format!("its seal does not read: {e}"))?;
    if seal.format != SEAL_FORMAT {
        return Err(format!("its seal is of format {}, not {SEAL_FORMAT}", seal.format));
    }
    for f in &seal.files {
        if f.path.is_empty() || f.path.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(format!("its seal names {:?}, not a path inside it", f.path));
        }
        let path = dir.join(&f.path);
        let check = match f.what {
            What::Content { .. } => Check::Content,
            _ => Check::Stat,
        };
        let now = describe(&path, check).map_err(|e| format!("{}: {}", f.path, e.msg))?;
        if now != f.what {
            return Err(format!("{}: {}", f.path, difference(&f.what, &now)));
        }
    }
    Ok(())
}

/// How a file differs from its seal, in words.
fn difference(was: &What, now: &What) -> String {
    match (was, now) {
        (What::Content { size: a, .. }, What::Content { size: b, .. })
        | (What::Stat { size: a, .. }, What::Stat { size: b, .. })
            if a != b =>
        {
            format!("{b} bytes, sealed at {a}")
        }
        (What::Content { .. }, What::Content { .. }) => "its contents changed (SHA-256)".into(),
        (What::Stat { .. }, What::Stat { .. }) => "modified since it was sealed".into(),
        (What::Link { target: a }, What::Link { target: b }) => format!("a link to {b}, sealed as a link to {a}"),
        (What::Link { .. }, _) => "no longer a symbolic link".into(),
        (_, What::Link { target }) => format!("now a symbolic link (to {target})"),
        _ => "changed".into(),
    }
}

/// [`check`], and on a terminal a line when an entry that exists is
/// damaged (`what` names the entry for the user): the caller makes it
/// again.
pub fn intact(dir: &Path, what: &str) -> bool {
    match check(dir) {
        Ok(()) => true,
        Err(why) => {
            if dir.exists() {
                crate::progress::status(&format!(
                    "bootlink: {what} in the cache ({}) is damaged or unfinished ({why}): made again",
                    dir.display()
                ));
            }
            false
        }
    }
}

/// Wait for (saying so) and hold `parent/.NAME.lock` while making the entry NAME, so
/// that one process at a time makes it (two that found it missing or
/// damaged would each remove the other's; the one that waited finds it
/// made, and should look again). Holding the lock, what a making stopped
/// half-way left (directories in `parent` whose names begin with
/// `work_prefix`: a killed bootlink removes nothing) is removed. The lock
/// is held until the returned file is dropped.
pub fn lock_for_making(parent: &Path, name: &str, work_prefix: &str) -> Result<std::fs::File> {
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let lock_path = parent.join(format!(".{name}.lock"));
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    if lock.try_lock().is_err() {
        crate::progress::status(&format!("waiting for another process making {name} in {}", parent.display()));
        lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    }
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(work_prefix) && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    Ok(lock)
}

/// Put the sealed entry `stage` (made beside it) in the place of `dir`:
/// when `dir` is whole already (another process made it meanwhile),
/// `stage` is dropped; else whatever is at `dir` is moved aside and
/// removed, and `stage` renamed into place.
/// On an error `stage` is removed too.
pub fn install(stage: &Path, dir: &Path) -> Result<()> {
    let r = install_or_keep(stage, dir);
    if std::fs::symlink_metadata(stage).is_ok() {
        let _ = std::fs::remove_dir_all(stage);
    }
    r
}

fn install_or_keep(stage: &Path, dir: &Path) -> Result<()> {
    if check(dir).is_ok() {
        return Ok(());
    }
    if std::fs::symlink_metadata(dir).is_ok() {
        let parent = dir.parent().unwrap_or(Path::new("."));
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let aside = tempfile::Builder::new()
            .prefix(&format!(".{name}.damaged-"))
            .tempdir_in(parent)
            .map_err(|e| Error::io(parent, e))?;
        let old = aside.path().join("old");
        std::fs::rename(dir, &old).map_err(|e| Error::io(dir, e))?;
        // `aside` (and the old entry in it) is removed when dropped.
    }
    match std::fs::rename(stage, dir) {
        Ok(()) => Ok(()),
        // Another process put its own in place first.
        Err(_) if check(dir).is_ok() => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("lib/sub")).unwrap();
        std::fs::write(d.path().join("product"), vec![7u8; 100_000]).unwrap();
        std::fs::write(d.path().join("lib/sub/a.ko"), b"module a").unwrap();
        std::fs::write(d.path().join(".lock"), b"").unwrap();
        std::os::unix::fs::symlink("/usr/src/linux", d.path().join("lib/build")).unwrap();
        seal_tree(d.path(), |rel| Some(if rel.starts_with("lib") { Check::Stat } else { Check::Content })).unwrap();
        d
    }

    /// The lock is held while the file lives; a stopped making's work
    /// directories go, the entry itself and other entries' work stay.
    #[test]
    fn making_an_entry_locks_it_and_clears_its_stopped_work() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("systems");
        std::fs::create_dir_all(p.join(".img-1-abc/root")).unwrap();
        std::fs::create_dir_all(p.join(".img-2-def")).unwrap();
        std::fs::create_dir_all(p.join("img-1")).unwrap();
        let lock = lock_for_making(&p, "img-1", ".img-1-").unwrap();
        let mut left: Vec<String> =
            std::fs::read_dir(&p).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, [".img-1.lock", ".img-2-def", "img-1"]);
        let again = std::fs::File::open(p.join(".img-1.lock")).unwrap();
        assert!(again.try_lock().is_err(), "held while the first lives");
        drop(lock);
        assert!(again.try_lock().is_ok(), "free once it is dropped");
    }

    /// Every way an entry's files or its seal can be damaged is found and
    /// named; the untouched entry is whole.
    #[test]
    fn damage_to_an_entry_is_found_and_named() {
        let d = entry();
        assert_eq!(check(d.path()), Ok(()));
        // The lock file is not part of the entry.
        std::fs::write(d.path().join(".lock"), b"held").unwrap();
        assert_eq!(check(d.path()), Ok(()));
        type Damage = (&'static str, fn(&Path), &'static str);
        let damages: &[Damage] = &[
            (
                "truncated",
                |p| std::fs::write(p.join("product"), vec![7u8; 99_999]).unwrap(),
                "product: 99999 bytes, sealed at 100000",
            ),
            (
                "a bit flipped",
                |p| {
                    let mut d = std::fs::read(p.join("product")).unwrap();
                    d[5000] ^= 4;
                    std::fs::write(p.join("product"), d).unwrap();
                },
                "product: its contents changed (SHA-256)",
            ),
            ("removed", |p| std::fs::remove_file(p.join("product")).unwrap(), "product: "),
            (
                "a directory",
                |p| {
                    std::fs::remove_file(p.join("product")).unwrap();
                    std::fs::create_dir(p.join("product")).unwrap();
                },
                "product: not a regular file",
            ),
            (
                "a FIFO",
                |p| {
                    std::fs::remove_file(p.join("product")).unwrap();
                    let c = std::ffi::CString::new(p.join("product").into_os_string().into_encoded_bytes()).unwrap();
                    // SAFETY: a valid C string.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                },
                "product: not a regular file",
            ),
            (
                "a link to /dev/zero",
                |p| {
                    std::fs::remove_file(p.join("product")).unwrap();
                    std::os::unix::fs::symlink("/dev/zero", p.join("product")).unwrap();
                },
                "product: now a symbolic link (to /dev/zero)",
            ),
            (
                "a tree file rewritten",
                |p| {
                    std::fs::write(p.join("lib/sub/a.ko"), b"module b").unwrap();
                    let t = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
                    std::fs::File::options().write(true).open(p.join("lib/sub/a.ko")).unwrap().set_modified(t).unwrap();
                },
                "lib/sub/a.ko: modified since it was sealed",
            ),
            (
                "a link moved",
                |p| {
                    std::fs::remove_file(p.join("lib/build")).unwrap();
                    std::os::unix::fs::symlink("/elsewhere", p.join("lib/build")).unwrap();
                },
                "lib/build: a link to /elsewhere, sealed as a link to /usr/src/linux",
            ),
            ("the seal removed", |p| std::fs::remove_file(p.join(SEAL)).unwrap(), "no seal"),
            ("the seal empty", |p| std::fs::write(p.join(SEAL), b"").unwrap(), "its seal does not read"),
            (
                "the seal random bytes",
                |p| std::fs::write(p.join(SEAL), [0x93u8, 0x11, 0xfe, 0x00, 0x42].repeat(100)).unwrap(),
                "its seal does not read",
            ),
            (
                "the seal cut",
                |p| {
                    let s = std::fs::read(p.join(SEAL)).unwrap();
                    std::fs::write(p.join(SEAL), &s[..s.len() / 2]).unwrap();
                },
                "its seal does not read",
            ),
            (
                "the seal a FIFO",
                |p| {
                    std::fs::remove_file(p.join(SEAL)).unwrap();
                    let c = std::ffi::CString::new(p.join(SEAL).into_os_string().into_encoded_bytes()).unwrap();
                    // SAFETY: a valid C string.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                },
                "its seal: is a FIFO",
            ),
            (
                "the seal naming a path outside",
                |p| {
                    let s = std::fs::read_to_string(p.join(SEAL)).unwrap();
                    std::fs::write(p.join(SEAL), s.replace("\"product\"", "\"../product\"")).unwrap();
                },
                "its seal names \"../product\", not a path inside it",
            ),
        ];
        for (what, damage, said) in damages {
            let d = entry();
            damage(d.path());
            let why = check(d.path()).expect_err(what);
            assert!(why.starts_with(said), "{what}: {why:?} does not start with {said:?}");
            assert!(!why.contains('\n'), "{what}: {why:?}");
        }
    }

    /// A stage goes into place over a damaged entry; over a whole one (made
    /// by another process meanwhile) it is dropped.
    #[test]
    fn install_replaces_a_damaged_entry_only() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("entry");
        let make = |name: &str, body: &[u8]| {
            let p = parent.path().join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("f"), body).unwrap();
            seal(&p, &[("f".into(), Check::Content)]).unwrap();
            p
        };
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("f"), b"half").unwrap();
        install(&make("stage1", b"one"), &dir).unwrap();
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"one");
        install(&make("stage2", b"two"), &dir).unwrap();
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"one", "a whole entry stays");
        let left: Vec<_> = std::fs::read_dir(parent.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["entry"], "stages and damaged entries are gone");
    }
}
