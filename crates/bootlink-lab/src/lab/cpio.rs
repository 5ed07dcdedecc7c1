//! cpio "newc" (SVR4, no CRC) archives, the format the kernel unpacks as an
//! initramfs: a writer, and a reader that checks every header field so tests
//! (and `bootlink lab`) can look inside what was built.
//!
//! Each entry is a 110-byte ASCII header ("070701" then thirteen 8-digit
//! hex fields), the NUL-terminated name padded to a multiple of 4 bytes
//! (counted from the start of the header), then the data padded the same
//! way. The archive ends with an entry named `TRAILER!!!`.

use std::path::Path;

use bootlink::error::{self, Error, Result};
use bootlink::fsutil;

pub(crate) const MAGIC: &[u8; 6] = b"070701";
pub(crate) const TRAILER: &str = "TRAILER!!!";
pub(crate) const HEADER_LEN: usize = 110;

pub(crate) const S_IFMT: u32 = 0o170_000;
pub(crate) const S_IFDIR: u32 = 0o040_000;
pub(crate) const S_IFREG: u32 = 0o100_000;
pub(crate) const S_IFLNK: u32 = 0o120_000;
pub(crate) const S_IFCHR: u32 = 0o020_000;

/// Builds a newc archive in memory. Owner is root, times are `mtime`
/// (0 unless set) or the one given with [`CpioWriter::file_at`], inode
/// numbers count up from 1: the same calls give the same bytes.
#[derive(Debug, Default)]
pub struct CpioWriter {
    out: Vec<u8>,
    next_ino: u32,
    mtime: u32,
    entries: usize,
}

/// Check and normalise an entry name: relative, '/'-separated, no empty,
/// "." or ".." components. A leading "/" or "./" is dropped.
pub(crate) fn normalize_name(name: &str) -> Result<String> {
    let trimmed = name.trim_start_matches('/');
    let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
    let bad = |why: &str| Error::new(error::Kind::Format, format!("cpio entry {name:?}: {why}"));
    if trimmed.is_empty() {
        return Err(bad("empty name"));
    }
    if trimmed.contains('\0') {
        return Err(bad("name contains a NUL byte"));
    }
    if trimmed == TRAILER {
        return Err(bad("name is the end-of-archive marker"));
    }
    for comp in trimmed.split('/') {
        match comp {
            "" => return Err(bad("empty path component")),
            "." | ".." => return Err(bad("'.' or '..' path component")),
            _ => {}
        }
    }
    Ok(trimmed.to_string())
}

impl CpioWriter {
    pub fn new() -> CpioWriter {
        CpioWriter { out: Vec::new(), next_ino: 1, mtime: 0, entries: 0 }
    }

    /// The modification time recorded in every following entry.
    pub fn set_mtime(&mut self, mtime: u32) {
        self.mtime = mtime;
    }

    /// Entries written so far (not counting the trailer).
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn dir(&mut self, name: &str, perm: u32) -> Result<()> {
        let name = normalize_name(name)?;
        self.entry(&name, S_IFDIR | (perm & 0o7777), 2, (0, 0), b"")
    }

    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> Result<()> {
        let name = normalize_name(name)?;
        self.entry(&name, S_IFREG | (perm & 0o7777), 1, (0, 0), data)
    }

    /// A file with its own modification time (seconds since the epoch),
    /// e.g. a host file's: the kernel keeps it when it unpacks the archive
    /// (`CONFIG_INITRAMFS_PRESERVE_MTIME`, on since 5.19), and what
    /// identifies a file by its mtime (DDLink's portable caches) needs it.
    pub(crate) fn file_at(&mut self, name: &str, perm: u32, data: &[u8], mtime: u32) -> Result<()> {
        let saved = std::mem::replace(&mut self.mtime, mtime);
        let r = self.file(name, perm, data);
        self.mtime = saved;
        r
    }

    pub fn symlink(&mut self, name: &str, target: &str) -> Result<()> {
        let name = normalize_name(name)?;
        if target.is_empty() || target.contains('\0') {
            return Err(Error::new(error::Kind::Format, format!("cpio entry {name:?}: bad symlink target {target:?}")));
        }
        self.entry(&name, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes())
    }

    /// A character device node (e.g. /dev/console, 5:1), which an
    /// unprivileged build could not create with mknod.
    pub fn char_device(&mut self, name: &str, perm: u32, major: u32, minor: u32) -> Result<()> {
        let name = normalize_name(name)?;
        self.entry(&name, S_IFCHR | (perm & 0o7777), 1, (major, minor), b"")
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) -> Result<()> {
        let size = u32::try_from(data.len()).map_err(|_| {
            Error::new(
                error::Kind::Format,
                format!("cpio entry {name:?}: {} bytes is over the format's 4 GiB limit", data.len()),
            )
        })?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.entries += 1;
        self.raw_entry(name, ino, mode, nlink, rdev, size, data);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn raw_entry(&mut self, name: &str, ino: u32, mode: u32, nlink: u32, rdev: (u32, u32), size: u32, data: &[u8]) {
        let mtime = if name == TRAILER { 0 } else { self.mtime };
        let fields = [ino, mode, 0, 0, nlink, mtime, size, 0, 0, rdev.0, rdev.1, name.len() as u32 + 1, 0];
        self.out.extend_from_slice(MAGIC);
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        let n = (4 - self.out.len() % 4) % 4;
        self.out.extend(std::iter::repeat_n(0u8, n));
    }

    /// Append the trailer and return the archive.
    pub fn finish(mut self) -> Vec<u8> {
        self.raw_entry(TRAILER, 0, 0, 1, (0, 0), 0, b"");
        self.out
    }

    /// Append the trailer and write the archive atomically.
    pub fn write_to(self, path: &Path) -> Result<()> {
        fsutil::write_atomic(path, &self.finish())
    }
}

/// The kind of a cpio entry, from its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    CharDevice,
    Other,
}

/// One entry read back from an archive, every header field kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpioEntry {
    pub name: String,
    pub ino: u32,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub mtime: u32,
    pub dev_major: u32,
    pub dev_minor: u32,
    pub rdev_major: u32,
    pub rdev_minor: u32,
    pub data: Vec<u8>,
}

impl CpioEntry {
    pub fn kind(&self) -> Kind {
        match self.mode & S_IFMT {
            S_IFDIR => Kind::Dir,
            S_IFREG => Kind::File,
            S_IFLNK => Kind::Symlink,
            S_IFCHR => Kind::CharDevice,
            _ => Kind::Other,
        }
    }

    /// Permission bits (with setuid/setgid/sticky).
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }

    /// The target of a symlink entry.
    pub fn link_target(&self) -> Option<&str> {
        (self.kind() == Kind::Symlink).then(|| std::str::from_utf8(&self.data).ok()).flatten()
    }
}

/// Bytes that are not a newc archive.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(error::Kind::Format, msg)
}

fn hex_field(data: &[u8], at: usize) -> std::result::Result<u32, Error> {
    let raw = data.get(at..at + 8).ok_or_else(|| corrupt(format!("truncated header at offset {at}")))?;
    let text = std::str::from_utf8(raw).map_err(|_| corrupt(format!("non-ASCII header field at offset {at}")))?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(corrupt(format!("header field {text:?} at offset {at} is not 8 hex digits")));
    }
    u32::from_str_radix(text, 16).map_err(|_| corrupt(format!("bad header field {text:?} at offset {at}")))
}

fn check_padding(data: &[u8], from: usize, to: usize) -> std::result::Result<(), Error> {
    let pad =
        data.get(from..to).ok_or_else(|| corrupt(format!("truncated archive: padding at offset {from} is missing")))?;
    if pad.iter().any(|&b| b != 0) {
        return Err(corrupt(format!("non-zero padding at offset {from}")));
    }
    Ok(())
}

fn align4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Read every entry of a newc archive (the trailer is checked, not
/// returned). Anything after the trailer must be zero padding.
pub fn read(data: &[u8]) -> Result<Vec<CpioEntry>> {
    read_inner(data).map_err(|e| Error::new(error::Kind::Format, format!("cpio archive: {}", e.msg)).because(e))
}

/// [`read`] a file.
pub fn read_file(path: &Path) -> Result<Vec<CpioEntry>> {
    let data = bootlink::fsutil::read_input(path, bootlink::fsutil::MAX_BINARY)?;
    read_inner(&data).map_err(|e| e.context(path, |why| format!("cpio archive: {why}")))
}

fn read_inner(data: &[u8]) -> std::result::Result<Vec<CpioEntry>, Error> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let magic = data
            .get(pos..pos + 6)
            .ok_or_else(|| corrupt(format!("truncated archive: no trailer (ends at offset {pos})")))?;
        if magic != MAGIC {
            return Err(corrupt(format!(
                "bad magic {:?} at offset {pos} (want \"070701\", newc)",
                String::from_utf8_lossy(magic)
            )));
        }
        let mut f = [0u32; 13];
        for (i, v) in f.iter_mut().enumerate() {
            *v = hex_field(data, pos + 6 + 8 * i)?;
        }
        let [ino, mode, uid, gid, nlink, mtime, size, dev_major, dev_minor, rdev_major, rdev_minor, namesize, check] =
            f;
        if check != 0 {
            return Err(corrupt(format!("check field {check:#x} at offset {pos} is not 0 (newc has no checksum)")));
        }
        let name_start = pos + HEADER_LEN;
        let namesize = namesize as usize;
        if namesize == 0 {
            return Err(corrupt(format!("entry at offset {pos} has an empty name")));
        }
        let name_raw = data
            .get(name_start..name_start + namesize)
            .ok_or_else(|| corrupt(format!("truncated archive: name of entry at offset {pos}")))?;
        if name_raw[namesize - 1] != 0 || name_raw[..namesize - 1].contains(&0) {
            return Err(corrupt(format!("name of entry at offset {pos} is not NUL-terminated at its recorded size")));
        }
        let name = std::str::from_utf8(&name_raw[..namesize - 1])
            .map_err(|_| corrupt(format!("name of entry at offset {pos} is not UTF-8")))?
            .to_string();
        let data_start = align4(name_start + namesize);
        check_padding(data, name_start + namesize, data_start)?;
        let data_end = data_start + size as usize;
        let body = data.get(data_start..data_end).ok_or_else(|| {
            corrupt(format!(
                "truncated archive: {name:?} claims {size} bytes at offset {data_start}, archive has {}",
                data.len()
            ))
        })?;
        let next = align4(data_end);
        if name == TRAILER {
            check_padding(data, data_end, next.min(data.len()))?;
            check_padding(data, next.min(data.len()), data.len())
                .map_err(|e| corrupt(format!("data after the trailer ({})", e.msg)).because(e))?;
            return Ok(out);
        }
        check_padding(data, data_end, next)?;
        out.push(CpioEntry {
            name,
            ino,
            mode,
            uid,
            gid,
            nlink,
            mtime,
            dev_major,
            dev_minor,
            rdev_major,
            rdev_minor,
            data: body.to_vec(),
        });
        pos = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::TempDir;
    use std::process::{Command, Stdio};

    fn sample() -> Vec<u8> {
        let mut w = CpioWriter::new();
        w.dir("/bin", 0o755).unwrap();
        w.file("bin/hello.sh", 0o755, b"#!/bin/sh\necho hi\n").unwrap();
        w.dir("etc", 0o700).unwrap();
        w.file("etc/a", 0o644, b"").unwrap();
        w.file("etc/abc", 0o600, b"abc").unwrap();
        w.file("etc/four", 0o644, b"1234").unwrap();
        w.symlink("bin/sh", "hello.sh").unwrap();
        w.symlink("etc/up", "../bin").unwrap();
        assert_eq!(w.len(), 8);
        w.finish()
    }

    #[test]
    fn header_fields_names_padding_and_trailer() {
        let a = sample();
        // The first header, byte for byte.
        let first = std::str::from_utf8(&a[..HEADER_LEN]).unwrap();
        assert_eq!(
            first,
            "070701\
             00000001\
             000041ed\
             00000000\
             00000000\
             00000002\
             00000000\
             00000000\
             00000000\
             00000000\
             00000000\
             00000000\
             00000004\
             00000000"
        );
        assert_eq!(&a[HEADER_LEN..HEADER_LEN + 4], b"bin\0");
        // 110 + 4 = 114 -> padded to 116; a directory has no data.
        assert_eq!(&a[114..116], b"\0\0");
        assert_eq!(&a[116..122], MAGIC);
        assert_eq!(a.len() % 4, 0);

        let e = read(&a).unwrap();
        let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["bin", "bin/hello.sh", "etc", "etc/a", "etc/abc", "etc/four", "bin/sh", "etc/up"]);
        assert_eq!((e[0].kind(), e[0].perm(), e[0].nlink), (Kind::Dir, 0o755, 2));
        assert_eq!((e[1].kind(), e[1].perm(), e[1].data.as_slice()), (Kind::File, 0o755, &b"#!/bin/sh\necho hi\n"[..]));
        assert_eq!((e[2].perm(), e[4].perm(), e[4].data.as_slice()), (0o700, 0o600, &b"abc"[..]));
        assert_eq!(e[6].link_target(), Some("hello.sh"));
        assert_eq!(e[6].mode, S_IFLNK | 0o777);
        assert_eq!(e[7].link_target(), Some("../bin"));
        let inos: Vec<u32> = e.iter().map(|e| e.ino).collect();
        assert_eq!(inos, (1..=8).collect::<Vec<_>>());
        assert!(e.iter().all(|e| e.uid == 0 && e.gid == 0 && e.mtime == 0 && e.dev_major == 0));

        // The trailer: last entry, name TRAILER!!!, nlink 1, size 0.
        let t = memchr::memmem::rfind(&a, MAGIC).unwrap();
        let th = std::str::from_utf8(&a[t..t + HEADER_LEN]).unwrap();
        assert_eq!(&th[6 + 8 * 4..6 + 8 * 5], "00000001");
        assert_eq!(&th[6 + 8 * 11..6 + 8 * 12], "0000000b");
        assert_eq!(&a[t + HEADER_LEN..t + HEADER_LEN + 11], b"TRAILER!!!\0");
    }

    #[test]
    fn every_padding_length_round_trips() {
        // Name lengths 1..=8 and data lengths 0..=8 cover every padding case.
        let mut w = CpioWriter::new();
        let mut want = Vec::new();
        for n in 1..=8usize {
            for d in 0..=8usize {
                let name = format!("{}{}", "n".repeat(n), d);
                let data: Vec<u8> = (0..d as u8).map(|b| b + 1).collect();
                w.file(&name, 0o644, &data).unwrap();
                want.push((name, data));
            }
        }
        let e = read(&w.finish()).unwrap();
        let got: Vec<(String, Vec<u8>)> = e.into_iter().map(|e| (e.name, e.data)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn device_nodes_and_mtime() {
        let mut w = CpioWriter::new();
        w.set_mtime(1_700_000_000);
        w.char_device("dev/console", 0o600, 5, 1).unwrap();
        let e = read(&w.finish()).unwrap();
        assert_eq!(e[0].kind(), Kind::CharDevice);
        assert_eq!((e[0].rdev_major, e[0].rdev_minor, e[0].perm(), e[0].mtime), (5, 1, 0o600, 1_700_000_000));
    }

    #[test]
    fn a_file_keeps_its_own_mtime() {
        let mut w = CpioWriter::new();
        w.file_at("a", 0o644, b"x", 1_234_567_890).unwrap();
        w.file("b", 0o644, b"y").unwrap();
        let e = read(&w.finish()).unwrap();
        assert_eq!((e[0].mtime, e[1].mtime), (1_234_567_890, 0));
    }

    #[test]
    fn bad_names_and_bad_archives_are_refused() {
        let mut w = CpioWriter::new();
        for bad in ["", "/", "a//b", "a/../b", "./.", "TRAILER!!!", "a\0b"] {
            assert!(w.file(bad, 0o644, b"").is_err(), "{bad:?} accepted");
        }
        assert!(w.symlink("l", "").is_err());
        assert_eq!(normalize_name("/./x/y").unwrap(), "x/y");

        let good = sample();
        assert!(read(&good[..good.len() - 4]).unwrap_err().to_string().contains("truncated"));
        let mut bad_magic = good.clone();
        bad_magic[5] = b'2';
        assert!(read(&bad_magic).unwrap_err().to_string().contains("magic"));
        let mut bad_pad = good.clone();
        bad_pad[115] = 1;
        assert!(read(&bad_pad).unwrap_err().to_string().contains("padding"));
        let mut bad_hex = good.clone();
        bad_hex[10] = b'g';
        assert!(read(&bad_hex).unwrap_err().to_string().contains("hex"));
        let mut junk = good.clone();
        junk.extend_from_slice(b"junk");
        assert!(read(&junk).unwrap_err().to_string().contains("after the trailer"));
        let mut zeros = good;
        zeros.extend_from_slice(&[0; 512]);
        assert_eq!(read(&zeros).unwrap().len(), 8);
    }

    #[test]
    fn written_atomically_and_readable_by_system_cpio() {
        let tmp = TempDir::new("cpio-test").unwrap();
        let path = tmp.path().join("t.cpio");
        let mut w = CpioWriter::new();
        w.dir("d", 0o755).unwrap();
        w.file("d/f", 0o640, b"contents\n").unwrap();
        w.file("d/x", 0o755, b"odd").unwrap();
        w.symlink("d/l", "f").unwrap();
        w.write_to(&path).unwrap();
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["t.cpio"]);
        assert_eq!(read_file(&path).unwrap().len(), 4);

        // Cross-check with GNU cpio when it is installed.
        let listed = Command::new("cpio").args(["-it", "--quiet", "-F"]).arg(&path).stderr(Stdio::piped()).output();
        let Ok(listed) = listed else {
            eprintln!("cpio is not on PATH: skipped the cross-check with the system cpio");
            return;
        };
        assert!(listed.status.success(), "cpio -it: {}", String::from_utf8_lossy(&listed.stderr));
        assert_eq!(String::from_utf8_lossy(&listed.stdout), "d\nd/f\nd/x\nd/l\n");
        let out = tmp.path().join("x");
        std::fs::create_dir(&out).unwrap();
        let ex = Command::new("cpio")
            .current_dir(&out)
            .args(["-id", "--quiet", "--no-absolute-filenames", "-F"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(ex.status.success(), "cpio -id: {}", String::from_utf8_lossy(&ex.stderr));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::read(out.join("d/f")).unwrap(), b"contents\n");
        assert_eq!(std::fs::metadata(out.join("d/f")).unwrap().permissions().mode() & 0o7777, 0o640);
        assert_eq!(std::fs::metadata(out.join("d/x")).unwrap().permissions().mode() & 0o7777, 0o755);
        assert_eq!(std::fs::read_link(out.join("d/l")).unwrap(), Path::new("f"));
    }
}
