//! File helpers: mapped or owned bytes, atomic writes, the cache directory.

use std::fs::File;
use std::io::Write;
use std::ops::Deref;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};

/// The bootlink source tree this program was built from (the workspace
/// root): the kernel and glibc series, data/, loader/, trace/, docs/.
pub fn source_tree() -> &'static Path {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.parent().and_then(Path::parent).expect("the crate lies two levels below the workspace root")
}

/// File contents, either mapped read-only or decompressed into memory.
pub enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes::Owned(v)
    }
}

/// The most bytes [`read_input`] reads of a binary input (a vmlinux with
/// debug info, a kernel package, a record or cache): 4 GiB.
pub const MAX_BINARY: u64 = 4 << 30;

/// The most bytes [`read_input_text`] reads of a text input (a config, a
/// list, run.json, System.map, an order trace): 256 MiB.
pub(crate) const MAX_TEXT: u64 = 256 << 20;

/// What a path names when it is not a regular file, in the words of a
/// refusal (without saying what is not done with it).
fn what_it_is(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("is a directory, not a regular file")
    } else if t.is_fifo() {
        Some("is a FIFO (named pipe), not a regular file")
    } else if t.is_socket() {
        Some("is a socket, not a regular file")
    } else if t.is_char_device() || t.is_block_device() {
        Some("is a device, not a regular file")
    } else {
        Some("is not a regular file")
    }
}

/// What a path names, in the words of a refusal to read it.
pub(crate) fn not_regular(meta: &std::fs::Metadata) -> Option<String> {
    what_it_is(meta).map(|w| format!("{w}: not read"))
}

/// What a path names once its last symbolic link is followed: the path's
/// own metadata, or its one link's target's. bootlink follows one link
/// (`/vmlinuz -> boot/vmlinuz-...`, `libz.so.1 -> libz.so.1.2.13`), not a
/// link to a link: a chain or a loop is refused naming what the links
/// point to. Links among the directories above the last component (a
/// module tree's `build -> /usr/src/...`, merged /usr) are the file
/// system's layout and are not checked.
pub(crate) fn follow_once(path: &Path) -> Result<std::fs::Metadata> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_symlink() {
        return Ok(meta);
    }
    let target = std::fs::read_link(path).map_err(|e| Error::io(path, e))?;
    // A relative target is relative to the directory holding the link.
    let resolved = match path.parent() {
        Some(dir) if target.is_relative() => dir.join(&target),
        _ => target.clone(),
    };
    let t = std::fs::symlink_metadata(&resolved).map_err(|e| {
        let why = Error::io(&resolved, e).msg;
        Error::file(Kind::Io, path, format!("is a symbolic link to {}: {why}", target.display()))
    })?;
    if t.file_type().is_symlink() {
        let next = std::fs::read_link(&resolved).map(|n| format!(" (to {})", n.display())).unwrap_or_default();
        return Err(Error::file(
            Kind::Io,
            path,
            format!(
                "is a symbolic link to {}, itself a symbolic link{next}: bootlink follows one link, not a chain or a loop: not read",
                target.display()
            ),
        ));
    }
    Ok(t)
}

/// Open an input file for reading: every file bootlink reads that a user
/// names (modules, kernel images, configs, records, caches, traces,
/// run.json) goes through here. One symbolic link is followed, a chain or
/// a loop is refused ([`follow_once`]); anything but a regular file (a
/// FIFO, a device such as /dev/zero named `x.ko`, a socket, a directory) is
/// refused in one line without blocking: the path is checked before it is
/// opened, opened with O_NONBLOCK (a FIFO swapped in between cannot block
/// the open), and the open file is checked again (the same inode: a link
/// swapped in between is refused too).
pub(crate) fn open_input(path: &Path) -> Result<(File, std::fs::Metadata)> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let before = follow_once(path)?;
    if let Some(what) = not_regular(&before) {
        return Err(Error::file(Kind::Io, path, what));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if let Some(what) = not_regular(&meta) {
        return Err(Error::file(Kind::Io, path, what));
    }
    if (meta.dev(), meta.ino()) != (before.dev(), before.ino()) {
        return Err(Error::file(Kind::Io, path, "changed while it was being opened: not read"));
    }
    Ok((file, meta))
}

/// Read a whole input file (see [`open_input`]), refusing one larger than
/// `limit` bytes (before reading it, and again if it grows while read).
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let (file, meta) = open_input(path)?;
    let too_big = || {
        Error::file(
            Kind::Format,
            path,
            format!("larger than {} MiB, the most bootlink reads of such a file", limit >> 20),
        )
    };
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut data).map_err(|e| Error::io(path, e))?;
    if data.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(data)
}

/// Read a text input file (at most [`MAX_TEXT`] bytes), refusing one that is
/// not UTF-8.
pub fn read_input_text(path: &Path) -> Result<String> {
    String::from_utf8(read_input(path, MAX_TEXT)?)
        .map_err(|_| Error::file(Kind::Format, path, "not a text file (not UTF-8)"))
}

/// Map an input file read-only (see [`open_input`]; small and empty files
/// are read instead).
pub fn map_file(path: &Path) -> Result<Bytes> {
    use std::io::Read;
    let (file, meta) = open_input(path)?;
    if meta.len() < 64 * 1024 {
        let mut data = Vec::with_capacity(meta.len() as usize);
        file.take(64 * 1024).read_to_end(&mut data).map_err(|e| Error::io(path, e))?;
        return Ok(Bytes::Owned(data));
    }
    // SAFETY: the map is read-only; bootlink never writes files it has
    // mapped (outputs go to a temporary file that is renamed into place).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Bytes::Mapped(map))
}

/// Copy the directory `src` into `dest` (created): directories and regular
/// files, permissions kept; anything else is an error naming it.
pub fn copy_tree(src: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| Error::io(dest, e))?;
    for e in std::fs::read_dir(src).map_err(|e| Error::io(src, e))? {
        let e = e.map_err(|e| Error::io(src, e))?;
        let (from, to) = (e.path(), dest.join(e.file_name()));
        let t = e.file_type().map_err(|e| Error::io(&from, e))?;
        if t.is_dir() {
            copy_tree(&from, &to)?;
        } else if t.is_file() {
            std::fs::copy(&from, &to).map_err(|e| Error::io(&from, e))?;
        } else {
            return Err(Error::file(Kind::Unsupported, &from, "not a regular file or directory: not copied"));
        }
    }
    Ok(())
}

/// A file's identity: its device and inode number, whatever name reaches
/// it (`x.ko`, `./x.ko`, a symbolic link to it, a hard link to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `path` names, one symbolic link followed
    /// as inputs are read ([`follow_once`]); None when nothing is there (a
    /// file still to be written, a dangling link) or the path is a chain
    /// or a loop of links (refused when read: never the same input as the
    /// file at its end).
    pub fn of(path: &Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        follow_once(path).ok().map(|m| FileId { dev: m.dev(), ino: m.ino() })
    }
}

/// `paths` with each file kept once, under the first name given for it:
/// one file named twice by any spelling (`x.ko` and `./x.ko`, a symbolic
/// link, a hard link: one device and inode) is one input. A path naming
/// nothing is kept once per spelling (reading it is its own error).
pub fn unique_files(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut ids = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    paths
        .into_iter()
        .filter(|p| match FileId::of(p) {
            Some(id) => ids.insert(id),
            None => names.insert(p.clone()),
        })
        .collect()
}

/// Whether `name`, read from a file (a variant's name in a record or a
/// jobs manifest), can be one component of a path bootlink writes: not
/// empty, letters, digits, '-', '_', '.' and '+' only, not `.` or `..`
/// (so never a `/`, a way up or out of the directory it is joined to).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b))
}

/// The directory entry that writing a path replaces: its directory's
/// canonical path joined with its name (None when the directory is not
/// there, or the path ends in `..`). Directories are canonicalized once
/// each (a batch writes thousands of files into a few).
#[derive(Default)]
struct Entries(std::collections::HashMap<PathBuf, Option<PathBuf>>);

impl Entries {
    fn of(&mut self, path: &Path) -> Option<PathBuf> {
        let name = path.file_name()?;
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let canonical = self.0.entry(dir.to_path_buf()).or_insert_with(|| std::fs::canonicalize(dir).ok());
        Some(canonical.as_ref()?.join(name))
    }
}

/// Refuse to write `path` where it names something other than a regular
/// file, its links followed: a device (`-o /dev/null`, which a rename would
/// replace with a regular file), a FIFO, a socket, a directory. Nothing
/// there yet (or a dangling link, which the write replaces) is a new file.
pub fn check_output(path: &Path) -> Result<()> {
    if path.file_name().is_none() {
        return Err(Error::file(Kind::Usage, path, "names a directory, not a file: not written"));
    }
    match std::fs::metadata(path) {
        Ok(meta) => match what_it_is(&meta) {
            Some(what) => Err(Error::file(Kind::Usage, path, format!("{what}: not written"))),
            None => Ok(()),
        },
        Err(_) => Ok(()),
    }
}

/// Refuse an output directory (`order write -o DIR`, a lab run's, a
/// survey's, a system record's) that names something other than a
/// directory, its links followed: a regular file (an input given as `-o`
/// by mistake, which `create_dir_all` used to report as "File exists"), a
/// device, a FIFO, a socket. Nothing there yet is a new directory.
pub fn check_output_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::metadata(dir) else { return Ok(()) };
    let t = meta.file_type();
    let what = if t.is_dir() {
        return Ok(());
    } else if t.is_file() {
        "is a regular file"
    } else if t.is_fifo() {
        "is a FIFO (named pipe)"
    } else if t.is_socket() {
        "is a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "is a device"
    } else {
        "is not a directory"
    };
    Err(Error::file(Kind::Usage, dir, format!("{what}, not a directory: nothing written into it")))
}

/// Check the files a command writes into the directory `dir` (`names`
/// below it) against its inputs, before any work: `dir` a directory or
/// nothing yet ([`check_output_dir`]), each file's place checked as
/// [`check_outputs`] checks a file's (never an input, a device, a FIFO, a
/// directory).
pub fn check_outputs_in(dir: &Path, names: &[&str], inputs: &[&Path]) -> Result<()> {
    check_output_dir(dir)?;
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let planned: Vec<Planned> = paths.iter().map(|p| Planned::new(p)).collect();
    check_outputs(inputs, &planned)
}

/// One file a command writes, for [`check_outputs`]: where, and the input
/// it is asked to replace when it is written in place (`manifest write
/// -o VMLINUX`), if any.
#[derive(Debug, Clone, Copy)]
pub struct Planned<'a> {
    pub path: &'a Path,
    pub replaces: Option<&'a Path>,
}

impl<'a> Planned<'a> {
    /// A file that replaces no input.
    pub fn new(path: &'a Path) -> Planned<'a> {
        Planned { path, replaces: None }
    }

    /// A file that may be the input `input` itself (written in place).
    pub fn in_place_of(path: &'a Path, input: &'a Path) -> Planned<'a> {
        Planned { path, replaces: Some(input) }
    }
}

/// Check a command's outputs against its inputs, before any work: each
/// output a regular file or nothing yet ([`check_output`]); no two outputs
/// one file; no output the same file as an input, compared by device and
/// inode (so through `./`, symbolic links and hard links) and, for a file
/// still to be written, by its directory entry; except the one input an
/// output is asked to replace. Refused in one line naming the output and
/// the file it would have destroyed. Linear in the files named (a batch
/// checks thousands).
pub fn check_outputs(inputs: &[&Path], outputs: &[Planned]) -> Result<()> {
    use std::collections::HashMap;
    let mut entries = Entries::default();
    // What names a file: its identity when it is there, and its entry.
    let mut keys = |p: &Path| [FileId::of(p).map(Ok), entries.of(p).map(Err)].into_iter().flatten();
    let mut read: HashMap<std::result::Result<FileId, PathBuf>, &Path> = HashMap::new();
    for &input in inputs {
        for k in keys(input) {
            read.entry(k).or_insert(input);
        }
    }
    let mut written: HashMap<std::result::Result<FileId, PathBuf>, &Path> = HashMap::new();
    for out in outputs {
        check_output(out.path)?;
        let replaced: Vec<_> = out.replaces.map(|r| keys(r).collect()).unwrap_or_default();
        for k in keys(out.path).collect::<Vec<_>>() {
            if let Some(other) = written.get(&k) {
                return Err(Error::file(
                    Kind::Usage,
                    out.path,
                    format!(
                        "named as two outputs (also as {}): one would destroy the other: nothing written",
                        other.display()
                    ),
                ));
            }
            if let Some(input) = read.get(&k)
                && !replaced.contains(&k)
            {
                let named = if *input == out.path { String::new() } else { format!(" {}", input.display()) };
                return Err(Error::file(
                    Kind::Usage,
                    out.path,
                    format!(
                        "is the input{named} (the same file): writing it would destroy that input: nothing written"
                    ),
                ));
            }
            written.insert(k, out.path);
        }
    }
    Ok(())
}

/// The error of writing `path` that failed with `e`: a full file system,
/// a quota or a file size limit said plainly (the caller has removed what
/// it began).
fn write_error(path: &Path, e: std::io::Error) -> Error {
    use std::io::ErrorKind as E;
    let why = match e.kind() {
        E::StorageFull => "no space left on device",
        E::QuotaExceeded => "disk quota exceeded",
        E::FileTooLarge => "file too large (the file system's or the process's file size limit, EFBIG)",
        _ => return Error::io(path, e),
    };
    Error::file(Kind::Io, path, format!("{why}: not written, nothing left behind")).because(e)
}

/// Write `data` to `path` atomically: a temporary file in the same
/// directory, synced, then renamed over the target. On any error the
/// temporary file is removed and the target is untouched. A target that is
/// not a regular file (a device, a FIFO, a directory) is refused
/// ([`check_output`]).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_impl(path, data, true)
}

/// Like [`write_atomic`] without the fsync: for new files in an output
/// directory, where a crash loses only output that can be made again.
pub(crate) fn write_atomic_nosync(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_impl(path, data, false)
}

/// Like [`write_atomic_nosync`], cheaper for a file that does not exist
/// yet (a rewrite of a whole module tree into a new directory): the bytes
/// go to an unnamed file (O_TMPFILE) that is given its name when complete,
/// so a reader or a crash never sees part of it, and no temporary name is
/// made and renamed. Where the file exists, or the file system has no
/// O_TMPFILE, this is [`write_atomic_nosync`].
pub(crate) fn write_new_nosync(path: &Path, data: &[u8]) -> Result<()> {
    match write_unnamed(path, data) {
        Ok(()) => Ok(()),
        Err(e) if fallback_to_named(&e) => write_atomic_impl(path, data, false),
        Err(e) => Err(write_error(path, e)),
    }
}

/// Errors after which [`write_new_nosync`] writes through a named temporary
/// instead: the name exists, or O_TMPFILE or /proc/self/fd is unavailable.
fn fallback_to_named(e: &std::io::Error) -> bool {
    match e.raw_os_error() {
        Some(libc::EEXIST | libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::EXDEV) => true,
        // A missing directory is the caller's to make; a missing /proc is ours.
        Some(libc::ENOENT) => !Path::new("/proc/self/fd").is_dir(),
        _ => false,
    }
}

fn write_unnamed(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::{AsRawFd, FromRawFd};
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let cdir = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path; the descriptor is owned by `file`.
    let fd = unsafe { libc::open(cdir.as_ptr(), libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(data)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    let link = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    // SAFETY: valid NUL-terminated paths.
    let r =
        unsafe { libc::linkat(libc::AT_FDCWD, link.as_ptr(), libc::AT_FDCWD, cpath.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `data` in a temporary file beside `path`, whole (synced when `sync`),
/// with the mode of the file it will replace (0644 for a new file); the
/// temporary is removed when dropped.
fn stage(path: &Path, data: &[u8], sync: bool) -> Result<tempfile::NamedTempFile> {
    check_output(path)?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| Error::file(Kind::Io, path, "not a file path"))?;
    // `.<name>.bootlink-tmp.<pid>.<random>`: the pid lets a later run tell a
    // killed run's leftovers from a live one's; the temporary is removed
    // when dropped on any error below.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}{TMP_MARK}{}.", name.to_string_lossy(), std::process::id()))
        .rand_bytes(6)
        .tempfile_in(dir)
        .map_err(|e| write_error(path, e))?;
    tmp.write_all(data).map_err(|e| write_error(path, e))?;
    // The temporary is created 0600; give the result the mode of the file it
    // replaces (an in-place rewrite must not change who can read a module or
    // run a vmlinux), or 0644 for a new file.
    let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(path, e))?;
    if sync {
        tmp.as_file().sync_all().map_err(|e| write_error(path, e))?;
    }
    Ok(tmp)
}

fn write_atomic_impl(path: &Path, data: &[u8], sync: bool) -> Result<()> {
    let tmp = stage(path, data, sync)?;
    // Checked again just before the rename: what is there may have changed
    // while the bytes were written.
    check_output(path)?;
    tmp.persist(path).map_err(|e| write_error(path, e.error))?;
    Ok(())
}

/// Files written whole beside where they go, then put in place together
/// by [`Staged::commit`]: a command with several outputs (`manifest
/// write`'s kernel, Image and bzImage; `chart`'s HTML, SVG and trace)
/// leaves none of them when any fails (a full file system, a step that
/// fails after the first file). Dropped uncommitted, every temporary is
/// removed.
#[derive(Default)]
pub struct Staged {
    files: Vec<(tempfile::TempPath, PathBuf)>,
}

impl Staged {
    pub fn new() -> Staged {
        Staged::default()
    }

    /// Write `data` for `path` into a temporary beside it (synced, with the
    /// mode of the file it replaces); returns the temporary's path, to read
    /// it back or hand it to a tool before the commit.
    pub fn write(&mut self, path: &Path, data: &[u8]) -> Result<PathBuf> {
        let tmp = stage(path, data, true)?.into_temp_path();
        let at = tmp.to_path_buf();
        self.files.push((tmp, path.to_path_buf()));
        Ok(at)
    }

    /// Remove what was staged for `path` (to stage it again, smaller).
    pub fn discard(&mut self, path: &Path) {
        self.files.retain(|(_, p)| p != path);
    }

    /// Rename every staged file over its target, in the order written
    /// (each target checked again first, all before the first rename).
    pub fn commit(self) -> Result<()> {
        for (_, path) in &self.files {
            check_output(path)?;
        }
        for (tmp, path) in self.files {
            tmp.persist(&path).map_err(|e| write_error(&path, e.error))?;
        }
        Ok(())
    }
}

/// The marker in the names of [`write_atomic`]'s temporary files:
/// `.<name>.bootlink-tmp.<pid>.<random>`.
const TMP_MARK: &str = ".bootlink-tmp.";

/// Remove the temporary files a killed bootlink left in `dir`: those named
/// `.<name>.bootlink-tmp.<pid>[.<random>]` whose process is gone (no /proc/<pid>).
/// A live run's files are left alone. Returns how many were removed.
pub(crate) fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Some(pid) = name
            .strip_prefix('.')
            .and_then(|n| n.rsplit_once(TMP_MARK))
            .map(|(_, rest)| rest.split_once('.').map_or(rest, |(pid, _)| pid))
        else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if pid != std::process::id()
            && !Path::new("/proc").join(pid.to_string()).exists()
            && e.file_type().is_ok_and(|t| t.is_file())
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// bootlink's cache: $BOOTLINK_CACHE, else $XDG_CACHE_HOME/bootlink, else
/// ~/.cache/bootlink.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BOOTLINK_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("bootlink");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".cache").join("bootlink")
}

/// A directory under `std::env::temp_dir()` with a unique name, removed
/// (with its contents) when dropped unless [`TempDir::keep`] is called.
/// The `tempfile` crate does the work; this keeps the callers' labels in the names.
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Create `<temp>/bootlink-<label>-<random>`.
    pub fn new(label: &str) -> Result<TempDir> {
        Self::new_in(&std::env::temp_dir(), &format!("bootlink-{label}"))
    }

    /// Create `<dir>/<label>-<random>` (same file system as `dir`, so its
    /// contents can be renamed into place there).
    pub fn new_in(dir: &Path, label: &str) -> Result<TempDir> {
        tempfile::Builder::new()
            .prefix(&format!("{label}-"))
            .tempdir_in(dir)
            .map(TempDir)
            .map_err(|e| Error::io(dir, e))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Keep the directory after all; returns its path.
    pub fn keep(self) -> PathBuf {
        self.0.keep()
    }
}

/// Bytes (a digest, a build ID) as lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number field of a text input (a DDLink record, an order trace), in
/// `radix` (10 or 16), or why `tok` is not one, for the refusal naming
/// its line: too large for 64 bits, or not a number at all.
pub(crate) fn text_number(tok: &str, radix: u32) -> std::result::Result<u64, String> {
    u64::from_str_radix(tok, radix).map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => format!("`{tok}` does not fit 64 bits"),
        _ if radix == 16 => format!("`{tok}` is not a hexadecimal number"),
        _ => format!("`{tok}` is not a decimal number"),
    })
}

/// [`text_number`] for a field of `bits` bits: a larger value is refused
/// naming the field (`what`).
pub(crate) fn text_field<T: TryFrom<u64>>(tok: &str, what: &str) -> std::result::Result<T, String> {
    let v = text_number(tok, 10).map_err(|why| format!("{what} {why}"))?;
    T::try_from(v).map_err(|_| format!("{what} {v} does not fit {} bits", 8 * std::mem::size_of::<T>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("bootlink-fsutil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.bin");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let err = write_atomic(&dir.join("missing/sub/x"), b"x").unwrap_err();
        assert!(err.to_string().contains("missing/sub/x"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn atomic_write_keeps_the_replaced_files_mode() {
        let t = tempfile::tempdir().unwrap();
        let new = t.path().join("new");
        write_atomic(&new, b"x").unwrap();
        assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o7777, 0o644);
        let exe = t.path().join("vmlinux");
        std::fs::write(&exe, b"old").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_atomic(&exe, b"new").unwrap();
        assert_eq!(std::fs::metadata(&exe).unwrap().permissions().mode() & 0o7777, 0o755);
    }

    /// A new file appears whole (an unnamed file linked when written) with
    /// mode 0644; an existing one is replaced keeping its mode; a missing
    /// directory is "not found" (the caller makes it), nothing left behind.
    #[test]
    fn new_files_appear_whole_and_existing_ones_are_replaced() {
        let t = tempfile::tempdir().unwrap();
        let new = t.path().join("a.ko");
        write_new_nosync(&new, b"module").unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"module");
        assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o7777, 0o644);
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_new_nosync(&new, b"again").unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"again");
        assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o7777, 0o600);
        let err = write_new_nosync(&t.path().join("missing/b.ko"), b"x").unwrap_err();
        assert!(err.is_not_found(), "{err}");
        let names: Vec<_> = std::fs::read_dir(t.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["a.ko"]);
    }

    #[test]
    fn only_regular_files_are_read_and_nothing_blocks() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo.ko");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let zero = t.path().join("zero.ko");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let (a, b) = (t.path().join("a.ko"), t.path().join("b.ko"));
        std::os::unix::fs::symlink("b.ko", &a).unwrap();
        std::os::unix::fs::symlink("a.ko", &b).unwrap();
        let good = t.path().join("good.ko");
        std::fs::write(&good, b"0123456789").unwrap();
        let link = t.path().join("link.ko");
        std::os::unix::fs::symlink("good.ko", &link).unwrap();
        let chain = t.path().join("chain.ko");
        std::os::unix::fs::symlink("link.ko", &chain).unwrap();
        let dangling = t.path().join("dangling.ko");
        std::os::unix::fs::symlink("gone.ko", &dangling).unwrap();
        // One link by its absolute path, through a linked directory.
        let linked_dir = t.path().join("linked-dir");
        std::os::unix::fs::symlink(t.path(), &linked_dir).unwrap();
        let abs = t.path().join("abs.ko");
        std::os::unix::fs::symlink(linked_dir.join("good.ko"), &abs).unwrap();
        for (p, want) in [
            (&fifo, "is a FIFO (named pipe), not a regular file"),
            (&zero, "is a device, not a regular file"),
            (&a, "is a symbolic link to b.ko, itself a symbolic link (to a.ko): bootlink follows one link"),
            (&chain, "is a symbolic link to link.ko, itself a symbolic link (to good.ko)"),
            (&dangling, "is a symbolic link to gone.ko: no such file or directory"),
            (&t.path().to_path_buf(), "is a directory"),
        ] {
            let e = read_input(p, MAX_BINARY).unwrap_err();
            assert!(e.to_string().starts_with(&format!("{}: {want}", p.display())), "{e}");
            assert!(map_file(p).is_err());
        }
        assert_eq!(read_input(&link, 10).unwrap(), b"0123456789");
        assert_eq!(read_input(&abs, 10).unwrap(), b"0123456789");
        assert_eq!(read_input(&linked_dir.join("link.ko"), 10).unwrap(), b"0123456789");
        assert_eq!(&map_file(&link).unwrap()[..], b"0123456789");
        let e = read_input(&good, 9).unwrap_err();
        assert!(e.msg.starts_with("larger than 0 MiB"), "{e}");
    }

    /// An output that is an input (its name, `./` it, a symbolic or hard
    /// link), two outputs that are one file (even before either exists),
    /// an output that is a link to a device: refused naming the output; the
    /// input an output may replace, a new file and a dangling link are not.
    #[test]
    fn outputs_are_checked_against_inputs_and_each_other() {
        let t = tempfile::tempdir().unwrap();
        let input = t.path().join("in.ko");
        std::fs::write(&input, b"module").unwrap();
        let (sym, hard) = (t.path().join("sym.ko"), t.path().join("hard.ko"));
        std::os::unix::fs::symlink("in.ko", &sym).unwrap();
        std::fs::hard_link(&input, &hard).unwrap();
        let dot = t.path().join(".").join("in.ko");
        for out in [&input, &dot, &sym, &hard] {
            let e = check_outputs(&[&input], &[Planned::new(out)]).unwrap_err();
            assert_eq!(e.path.as_deref(), Some(out.as_path()));
            assert!(e.msg.starts_with("is the input") && e.msg.contains("nothing written"), "{e}");
            check_outputs(&[&input], &[Planned::in_place_of(out, &input)]).unwrap();
        }
        let new = t.path().join("new.ko");
        check_outputs(&[&input], &[Planned::new(&new)]).unwrap();
        let new_dot = t.path().join(".").join("new.ko");
        let twice = [Planned::new(&new), Planned::new(&new_dot)];
        let e = check_outputs(&[&input], &twice).unwrap_err();
        assert!(e.msg.starts_with("named as two outputs (also as"), "{e}");
        let null = t.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        let e = check_outputs(&[], &[Planned::new(&null)]).unwrap_err();
        assert_eq!(e.msg, "is a device, not a regular file: not written");
        let dangling = t.path().join("dangling");
        std::os::unix::fs::symlink("gone", &dangling).unwrap();
        check_outputs(&[&input], &[Planned::new(&dangling)]).unwrap();
        assert!(check_output(Path::new("..")).unwrap_err().msg.contains("not a file"));
    }

    /// Staged files appear together on commit, with the modes of the files
    /// they replace; dropped uncommitted, nothing of them is left.
    #[test]
    fn staged_files_appear_together_or_not_at_all() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::write(&b, b"old").unwrap();
        std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut s = Staged::new();
        let at = s.write(&a, b"one").unwrap();
        assert_eq!(std::fs::read(&at).unwrap(), b"one");
        s.write(&b, b"two").unwrap();
        assert!(!a.exists() && std::fs::read(&b).unwrap() == b"old");
        drop(s);
        let names = |d: &Path| {
            let mut n: Vec<String> =
                std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            n.sort();
            n
        };
        assert_eq!(names(t.path()), ["b"]);
        let mut s = Staged::new();
        s.write(&a, b"one").unwrap();
        s.write(&b, b"two").unwrap();
        s.commit().unwrap();
        assert_eq!((std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap()), (b"one".to_vec(), b"two".to_vec()));
        assert_eq!(std::fs::metadata(&b).unwrap().permissions().mode() & 0o7777, 0o755);
        assert_eq!(names(t.path()), ["a", "b"]);
    }

    #[test]
    fn one_file_named_twice_is_kept_once_under_its_first_name() {
        let t = tempfile::tempdir().unwrap();
        let x = t.path().join("x.ko");
        std::fs::write(&x, b"m").unwrap();
        std::os::unix::fs::symlink("x.ko", t.path().join("s.ko")).unwrap();
        std::fs::hard_link(&x, t.path().join("h.ko")).unwrap();
        // A chain of links is refused when read, never the file at its end.
        let chain = t.path().join("chain.ko");
        std::os::unix::fs::symlink("s.ko", &chain).unwrap();
        let missing = t.path().join("missing.ko");
        let given = vec![
            chain.clone(),
            t.path().join("s.ko"),
            x.clone(),
            t.path().join(".").join("x.ko"),
            t.path().join("h.ko"),
            missing.clone(),
            missing.clone(),
        ];
        assert_eq!(unique_files(given), [chain, t.path().join("s.ko"), missing]);
    }

    #[test]
    fn plain_names_stay_in_their_directory() {
        for ok in ["stock", "all-fixes", "v1.2+x", "a_b", ".hidden", "..."] {
            assert!(is_plain_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "../../x", "a/b", "/abs", "a b", "x\0"] {
            assert!(!is_plain_name(bad), "{bad}");
        }
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let t = tempfile::tempdir().unwrap();
        // No process has pid 4194304 (above Linux's pid_max limit).
        let dead = [".m.ko.bootlink-tmp.4194304", ".m.ko.bootlink-tmp.4194304.Ab3xYz"];
        let live = format!(".m.ko.bootlink-tmp.{}.Qw7rTy", std::process::id());
        for n in dead.iter().copied().chain([live.as_str(), "m.ko", ".m.ko.bootlink-tmp.notapid"]) {
            std::fs::write(t.path().join(n), b"x").unwrap();
        }
        assert_eq!(remove_stale_temps(t.path()), 2);
        let mut left: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut want = vec![".m.ko.bootlink-tmp.notapid".to_string(), live, "m.ko".into()];
        left.sort();
        want.sort();
        assert_eq!(left, want);
    }

    #[test]
    fn temp_dirs_are_unique_and_removed() {
        let a = TempDir::new("fsutil-test").unwrap();
        let b = TempDir::new("fsutil-test").unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        assert!(!pa.exists());
        let kept = b.keep();
        assert!(kept.is_dir());
        std::fs::remove_dir_all(&pb).unwrap();
    }
}
