//! The lab's initramfs: a static busybox with applet links, a generated
//! `/init`, and whatever files the caller adds (modules under
//! /lib/modules/..., test data).
//!
//! The generated `/init` mounts proc, sysfs and devtmpfs, runs the caller's
//! body (`/etc/bootlink/body.sh`, in its own shell so `exit` in it is
//! harmless), frames what the body prints between marker lines on the
//! console, records its exit status, and powers off:
//!
//! ```text
//! === BOOTLINK BEGIN <tag> ===
//! ...body output...
//! === BOOTLINK END <tag> ===
//! === BOOTLINK STATUS <tag> <exit status> ===
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::lab::cpio::{CpioWriter, normalize_name};
use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;

/// Applets linked into /bin: what a boot test script needs.
pub(crate) const DEFAULT_APPLETS: &[&str] = &[
    "[",
    "awk",
    "basename",
    "cat",
    "chmod",
    "cp",
    "cut",
    "date",
    "dd",
    "dirname",
    "dmesg",
    "echo",
    "env",
    "expr",
    "false",
    "find",
    "grep",
    "halt",
    "head",
    "hexdump",
    "insmod",
    "kill",
    "ln",
    "ls",
    "lsmod",
    "mkdir",
    "mknod",
    "modprobe",
    "mount",
    "mv",
    "od",
    "poweroff",
    "printf",
    "ps",
    "readlink",
    "reboot",
    "rm",
    "rmdir",
    "rmmod",
    "sed",
    "seq",
    "sh",
    "sha256sum",
    "sleep",
    "sort",
    "stat",
    "sync",
    "tail",
    "tee",
    "test",
    "tr",
    "true",
    "umount",
    "uname",
    "uniq",
    "wc",
    "xargs",
];

/// The marker tag used when the caller sets none.
pub(crate) const DEFAULT_TAG: &str = "run";

/// Where the caller's body script lives in the initramfs.
pub(crate) const BODY_PATH: &str = "etc/bootlink/body.sh";

pub(crate) fn begin_marker(tag: &str) -> String {
    format!("=== BOOTLINK BEGIN {tag} ===")
}

pub(crate) fn end_marker(tag: &str) -> String {
    format!("=== BOOTLINK END {tag} ===")
}

fn status_prefix(tag: &str) -> String {
    format!("=== BOOTLINK STATUS {tag} ")
}

/// Tags go into marker lines and shell code: letters, digits, '.', '_', '-'.
pub(crate) fn check_tag(tag: &str) -> Result<()> {
    if tag.is_empty() || tag.len() > 64 || !tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        return Err(Error::new(
            Kind::Usage,
            format!("marker tag {tag:?}: use 1 to 64 letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(())
}

/// The console lines between `BEGIN <tag>` and `END <tag>` (markers
/// excluded, "\r\n" read as "\n"), or None if either marker is missing.
/// A marker is recognised at the end of a line, so a kernel message that
/// lands in front of it on the same line does not hide it.
pub fn framed(log: &str, tag: &str) -> Option<String> {
    let (begin, end) = (begin_marker(tag), end_marker(tag));
    let mut lines = log.lines();
    lines.by_ref().find(|l| l.trim_end().ends_with(&begin))?;
    let mut out = String::new();
    for line in lines {
        if line.trim_end().ends_with(&end) {
            return Some(out);
        }
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    None
}

/// The body's exit status, from the STATUS line /init prints after END.
pub fn body_status(log: &str, tag: &str) -> Option<i32> {
    let prefix = status_prefix(tag);
    log.lines().find_map(|l| {
        let at = l.find(&prefix)?;
        l[at + prefix.len()..].trim_end().strip_suffix(" ===")?.trim().parse().ok()
    })
}

#[derive(Debug, Clone)]
enum Node {
    Dir(u32),
    File {
        mode: u32,
        data: Data,
    },
    Symlink(String),
    CharDevice {
        mode: u32,
        major: u32,
        minor: u32,
    },
    /// A host directory copied recursively (expanded when the archive is built).
    Tree(PathBuf),
}

#[derive(Debug, Clone)]
enum Data {
    Bytes(Vec<u8>),
    /// Read when the archive is built; in the archive with [`FIXED_MTIME`].
    Host(PathBuf),
    /// The same, with the host file's mtime: what a DDLink cache
    /// identifies the file by.
    HostTimed(PathBuf),
}

/// The mtime of host files in the archive unless a workload needs theirs:
/// the guest's own clock base (2030-01-01, `qemu::GUEST_RTC`). Files
/// bootlink rewrites are new on the host every run, and their host times
/// in the archive made the kernel's instruction stream differ a little
/// from run to run, enough to move a timer interrupt's work from one
/// module's load to another's (libcrc32c 868 or 1,168 µs).
const FIXED_MTIME: u32 = 1_893_456_000;

/// Builds an initramfs. Adding never fails; every problem (a bad path, a
/// missing host file) is reported by [`Initramfs::archive`] / [`Initramfs::write`].
#[derive(Debug, Clone)]
pub struct Initramfs {
    busybox: PathBuf,
    applets: Vec<String>,
    tag: String,
    prologue: String,
    body: String,
    extra: Vec<(String, Node)>,
}

impl Initramfs {
    /// An initramfs around the static busybox at `busybox` (see
    /// [`crate::lab::busybox::busybox`]), with [`DEFAULT_APPLETS`], the
    /// default tag and an empty body.
    pub fn new(busybox: impl Into<PathBuf>) -> Initramfs {
        Initramfs {
            busybox: busybox.into(),
            applets: DEFAULT_APPLETS.iter().map(|s| s.to_string()).collect(),
            tag: DEFAULT_TAG.to_string(),
            prologue: String::new(),
            body: String::new(),
            extra: Vec::new(),
        }
    }

    /// The tag of the marker lines around the body's output.
    pub fn tag(&mut self, tag: &str) -> &mut Self {
        self.tag = tag.to_string();
        self
    }

    pub fn tag_name(&self) -> &str {
        &self.tag
    }

    /// The shell script /init runs between the markers (busybox sh, with
    /// /proc, /sys and /dev mounted, PATH=/bin:/sbin, cwd /).
    pub fn body(&mut self, script: &str) -> &mut Self {
        self.body = script.to_string();
        self
    }

    /// Lines /init itself (PID 1) runs after mounting the kernel file
    /// systems and printing the begin marker, before the body: what must
    /// see the body's whole life (e.g. starting to trace its processes).
    pub(crate) fn prologue(&mut self, script: &str) -> &mut Self {
        self.prologue = script.to_string();
        self
    }

    /// Link one more busybox applet into /bin.
    pub fn applet(&mut self, name: &str) -> &mut Self {
        if !self.applets.iter().any(|a| a == name) {
            self.applets.push(name.to_string());
        }
        self
    }

    /// A file with the given contents. Parent directories are created.
    /// Entries added later win over earlier ones and over the generated ones.
    pub fn file(&mut self, dest: &str, mode: u32, data: impl Into<Vec<u8>>) -> &mut Self {
        self.extra.push((dest.to_string(), Node::File { mode, data: Data::Bytes(data.into()) }));
        self
    }

    /// A host file, with its permission bits, read when the archive is built.
    pub fn copy_file(&mut self, dest: &str, src: impl Into<PathBuf>) -> &mut Self {
        let src = src.into();
        self.extra.push((dest.to_string(), Node::File { mode: u32::MAX, data: Data::Host(src) }));
        self
    }

    /// A host file as [`Initramfs::copy_file`], keeping its host mtime (a
    /// DDLink cache identifies files by it).
    pub fn copy_file_timed(&mut self, dest: &str, src: impl Into<PathBuf>) -> &mut Self {
        let src = src.into();
        self.extra.push((dest.to_string(), Node::File { mode: u32::MAX, data: Data::HostTimed(src) }));
        self
    }

    /// A host directory tree (files, directories, symlinks) at `dest`,
    /// e.g. `copy_tree("/lib/modules/6.1.0-56-amd64", modules_dir)`.
    pub fn copy_tree(&mut self, dest: &str, src: impl Into<PathBuf>) -> &mut Self {
        self.extra.push((dest.to_string(), Node::Tree(src.into())));
        self
    }

    pub fn dir(&mut self, dest: &str, mode: u32) -> &mut Self {
        self.extra.push((dest.to_string(), Node::Dir(mode)));
        self
    }

    pub fn symlink(&mut self, dest: &str, target: &str) -> &mut Self {
        self.extra.push((dest.to_string(), Node::Symlink(target.to_string())));
        self
    }

    pub fn char_device(&mut self, dest: &str, mode: u32, major: u32, minor: u32) -> &mut Self {
        self.extra.push((dest.to_string(), Node::CharDevice { mode, major, minor }));
        self
    }

    /// The generated /init.
    pub(crate) fn init_script(&self) -> String {
        let (begin, end, status) = (begin_marker(&self.tag), end_marker(&self.tag), status_prefix(&self.tag));
        let mut prologue = self.prologue.clone();
        if !prologue.is_empty() && !prologue.ends_with('\n') {
            prologue.push('\n');
        }
        format!(
            "#!/bin/sh\n\
             # /init generated by bootlink: mount the kernel file systems, run the\n\
             # body, frame its output with marker lines, power off.\n\
             export PATH=/bin:/sbin\n\
             export HOME=/root\n\
             mount -t proc proc /proc\n\
             mount -t sysfs sysfs /sys\n\
             mount -t devtmpfs devtmpfs /dev\n\
             cd /\n\
             echo '{begin}'\n\
             {prologue}\
             /bin/sh /{BODY_PATH}\n\
             rc=$?\n\
             echo '{end}'\n\
             echo \"{status}$rc ===\"\n\
             poweroff -f\n\
             # poweroff returned: say so, and let the kernel panic on init's exit.\n\
             echo 'bootlink: poweroff -f failed'\n"
        )
    }

    fn nodes(&self) -> Result<BTreeMap<String, Node>> {
        check_tag(&self.tag)?;
        let mut nodes = BTreeMap::new();
        for (d, mode) in [
            ("bin", 0o755),
            ("sbin", 0o755),
            ("dev", 0o755),
            ("etc", 0o755),
            ("lib", 0o755),
            ("proc", 0o555),
            ("sys", 0o555),
            ("root", 0o700),
            ("run", 0o755),
            ("tmp", 0o1777),
        ] {
            nodes.insert(d.to_string(), Node::Dir(mode));
        }
        // The kernel opens /dev/console for init before anything is mounted.
        nodes.insert("dev/console".into(), Node::CharDevice { mode: 0o600, major: 5, minor: 1 });
        nodes.insert("dev/null".into(), Node::CharDevice { mode: 0o666, major: 1, minor: 3 });
        nodes.insert("bin/busybox".into(), Node::File { mode: 0o755, data: Data::Host(self.busybox.clone()) });
        for a in &self.applets {
            if a.is_empty() || a.contains('/') || a == "busybox" {
                return Err(Error::new(Kind::Usage, format!("busybox applet name {a:?} is not a plain name")));
            }
            nodes.insert(format!("bin/{a}"), Node::Symlink("busybox".into()));
        }
        nodes.insert("init".into(), Node::File { mode: 0o755, data: Data::Bytes(self.init_script().into_bytes()) });
        nodes.insert(BODY_PATH.into(), Node::File { mode: 0o644, data: Data::Bytes(self.body.clone().into_bytes()) });
        for (dest, node) in &self.extra {
            let name = normalize_name(dest)?;
            match node {
                Node::Tree(src) => add_tree(&mut nodes, &name, src)?,
                _ => {
                    nodes.insert(name, node.clone());
                }
            }
        }
        // Every parent must be a directory, and is created if missing.
        let names: Vec<String> = nodes.keys().cloned().collect();
        for name in names {
            let mut p = name.as_str();
            while let Some((parent, _)) = p.rsplit_once('/') {
                match nodes.get(parent) {
                    None => {
                        nodes.insert(parent.to_string(), Node::Dir(0o755));
                    }
                    Some(Node::Dir(_)) => {}
                    Some(_) => {
                        return Err(Error::new(
                            Kind::Usage,
                            format!("initramfs entry /{name}: its parent /{parent} is not a directory"),
                        ));
                    }
                }
                p = parent;
            }
        }
        Ok(nodes)
    }

    /// The archive's bytes. Entries are in path order, so every directory
    /// comes before what it holds (the kernel creates nothing implicitly).
    pub(crate) fn archive(&self) -> Result<Vec<u8>> {
        let nodes = self.nodes()?;
        let mut w = CpioWriter::new();
        for (name, node) in &nodes {
            match node {
                Node::Dir(mode) => w.dir(name, *mode)?,
                Node::Symlink(target) => w.symlink(name, target)?,
                Node::CharDevice { mode, major, minor } => w.char_device(name, *mode, *major, *minor)?,
                Node::File { mode, data: Data::Bytes(b) } => w.file(name, *mode, b)?,
                Node::File { mode, data: Data::Host(src) | Data::HostTimed(src) } => {
                    let bytes = bootlink::fsutil::read_input(src, bootlink::fsutil::MAX_BINARY)?;
                    let (host_mode, host_mtime) = host_meta(src)?;
                    let mode = if *mode == u32::MAX { host_mode } else { *mode };
                    let timed = matches!(node, Node::File { data: Data::HostTimed(_), .. });
                    let mtime = if timed { host_mtime } else { FIXED_MTIME };
                    w.file_at(name, mode, &bytes, mtime).map_err(|e| e.at(src))?
                }
                Node::Tree(_) => unreachable!("trees are expanded in nodes()"),
            }
        }
        Ok(w.finish())
    }

    /// Build the archive and write it atomically to `out` (an uncompressed
    /// cpio, which the kernel and QEMU's -initrd take as is).
    pub fn write(&self, out: &Path) -> Result<()> {
        let data = self.archive()?;
        fsutil::write_atomic(out, &data)
    }
}

/// A host file's permission bits and modification time (seconds, clamped
/// to what newc's 32-bit field holds).
fn host_meta(path: &Path) -> Result<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok((m.mode() & 0o7777, m.mtime().clamp(0, u32::MAX as i64) as u32))
}

fn add_tree(nodes: &mut BTreeMap<String, Node>, dest: &str, src: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| Error::io(src, e))?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(src).map_err(|e| Error::io(src, e))?;
        let target =
            target.to_str().ok_or_else(|| Error::file(Kind::Unsupported, src, "symlink target is not UTF-8"))?;
        nodes.insert(dest.to_string(), Node::Symlink(target.to_string()));
    } else if ft.is_dir() {
        use std::os::unix::fs::PermissionsExt;
        nodes.insert(dest.to_string(), Node::Dir(meta.permissions().mode() & 0o7777));
        for entry in std::fs::read_dir(src).map_err(|e| Error::io(src, e))? {
            let entry = entry.map_err(|e| Error::io(src, e))?;
            let name = entry.file_name();
            let name =
                name.to_str().ok_or_else(|| Error::file(Kind::Unsupported, &entry.path(), "file name is not UTF-8"))?;
            add_tree(nodes, &format!("{dest}/{name}"), &entry.path())?;
        }
    } else if ft.is_file() {
        nodes.insert(dest.to_string(), Node::File { mode: u32::MAX, data: Data::Host(src.to_path_buf()) });
    } else {
        return Err(Error::file(
            Kind::Unsupported,
            src,
            "neither a file, a directory nor a symlink: not copied into the initramfs",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::TempDir;
    use crate::lab::cpio::{self, Kind};

    fn fake_busybox(dir: &Path) -> PathBuf {
        let p = dir.join("busybox");
        std::fs::write(&p, b"\x7fELF fake busybox").unwrap();
        p
    }

    #[test]
    fn timed_files_keep_their_host_mtime() {
        use std::os::unix::fs::MetadataExt;
        let tmp = bootlink::fsutil::TempDir::new("initramfs-timed").unwrap();
        let (bb, lib) = (tmp.path().join("busybox"), tmp.path().join("libx.so"));
        std::fs::write(&bb, b"bb").unwrap();
        std::fs::write(&lib, b"lib").unwrap();
        let mut ir = Initramfs::new(&bb);
        ir.copy_file_timed("/lib/libx.so", &lib).copy_file("/lib/liby.so", &lib);
        let entries = crate::lab::cpio::read(&ir.archive().unwrap()).unwrap();
        let mtime = |n: &str| entries.iter().find(|e| e.name == n).unwrap().mtime;
        assert_eq!(mtime("lib/libx.so") as i64, std::fs::metadata(&lib).unwrap().mtime());
        assert_eq!(mtime("lib/liby.so"), FIXED_MTIME);
    }

    #[test]
    fn layout_init_and_parents_first() {
        let tmp = TempDir::new("initramfs-test").unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("kernel/fs")).unwrap();
        std::fs::write(tree.join("kernel/fs/a.ko"), b"module").unwrap();
        std::fs::write(tree.join("modules.dep"), b"kernel/fs/a.ko:\n").unwrap();
        std::os::unix::fs::symlink("kernel", tree.join("k")).unwrap();
        let mut i = Initramfs::new(fake_busybox(tmp.path()));
        i.tag("kallsyms")
            .body("cat /proc/version\n")
            .applet("nproc")
            .file("/data/deep/x.txt", 0o600, "x")
            .copy_tree("/lib/modules/6.1.0-test", &tree);
        let out = tmp.path().join("initrd.cpio");
        i.write(&out).unwrap();
        let entries = cpio::read_file(&out).unwrap();
        let by_name = |n: &str| entries.iter().find(|e| e.name == n).unwrap_or_else(|| panic!("no {n}"));

        assert_eq!(by_name("bin/busybox").data, b"\x7fELF fake busybox");
        assert_eq!(by_name("bin/busybox").perm(), 0o755);
        for a in ["sh", "mount", "insmod", "cat", "grep", "poweroff", "mkdir", "echo", "sleep", "nproc"] {
            assert_eq!(by_name(&format!("bin/{a}")).link_target(), Some("busybox"), "{a}");
        }
        let console = by_name("dev/console");
        assert_eq!((console.kind(), console.rdev_major, console.rdev_minor), (Kind::CharDevice, 5, 1));
        let init = String::from_utf8(by_name("init").data.clone()).unwrap();
        assert_eq!(by_name("init").perm(), 0o755);
        assert!(init.starts_with("#!/bin/sh\n"));
        for want in [
            "mount -t proc proc /proc",
            "mount -t sysfs sysfs /sys",
            "mount -t devtmpfs devtmpfs /dev",
            "=== BOOTLINK BEGIN kallsyms ===",
            "=== BOOTLINK END kallsyms ===",
            "poweroff -f",
        ] {
            assert!(init.contains(want), "{want} missing from\n{init}");
        }
        assert_eq!(by_name(BODY_PATH).data, b"cat /proc/version\n");
        assert_eq!(by_name("data/deep/x.txt").perm(), 0o600);
        assert_eq!(by_name("data/deep").kind(), Kind::Dir);
        assert_eq!(by_name("lib/modules/6.1.0-test/kernel/fs/a.ko").data, b"module");
        // Host files carry the fixed time, whatever their host mtime (a
        // rewritten module is new every run); generated ones have 0.
        assert_eq!(by_name("lib/modules/6.1.0-test/kernel/fs/a.ko").mtime, FIXED_MTIME);
        assert_eq!(by_name("bin/busybox").mtime, FIXED_MTIME);
        assert_eq!(by_name("init").mtime, 0);
        assert_eq!(by_name("lib/modules/6.1.0-test/k").link_target(), Some("kernel"));
        assert_eq!(by_name("tmp").perm(), 0o1777);

        // Every entry's parent directory comes before it; names are unique.
        let mut seen = std::collections::HashMap::new();
        for e in &entries {
            if let Some((parent, _)) = e.name.rsplit_once('/') {
                assert_eq!(seen.get(parent), Some(&Kind::Dir), "{} before its parent", e.name);
            }
            assert!(seen.insert(e.name.as_str(), e.kind()).is_none(), "{} twice", e.name);
        }
    }

    #[test]
    fn generated_init_runs_under_the_host_shell() {
        // The /init logic, minus mounts and poweroff, on the host's sh.
        let tmp = TempDir::new("initramfs-test").unwrap();
        let mut i = Initramfs::new("/bin/busybox");
        // The prologue runs in /init's own shell (the body's parent), inside
        // the frame, before the body.
        i.tag("t1").prologue("echo \"zero $$\"");
        let script = i
            .init_script()
            .replace("mount -t", "true")
            .replace("poweroff -f", "exit 0")
            .replace(&format!("/{BODY_PATH}"), &tmp.path().join("body.sh").display().to_string());
        std::fs::write(tmp.path().join("body.sh"), "echo \"one $PPID\"\necho two\nexit 7\n").unwrap();
        let out = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let body = framed(&text, "t1").unwrap();
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 3, "{body}");
        let (zero, one) = (lines[0].strip_prefix("zero ").unwrap(), lines[1].strip_prefix("one ").unwrap());
        assert_eq!((zero, lines[2]), (one, "two"), "{body}");
        assert_eq!(body_status(&text, "t1"), Some(7));
    }

    #[test]
    fn frames_are_found_in_a_noisy_console() {
        let log = "[    0.1] booting\r\n=== BOOTLINK BEGIN a ===\r\nx 1\r\n[    2.0] random: crng init done=== BOOTLINK END b ===\r\ny\r\n\
                   [ 3.1] msg === BOOTLINK END a ===\r\n=== BOOTLINK STATUS a 0 ===\r\nreboot: Power down\r\n";
        assert_eq!(
            framed(log, "a").as_deref(),
            Some("x 1\n[    2.0] random: crng init done=== BOOTLINK END b ===\ny\n")
        );
        assert_eq!(body_status(log, "a"), Some(0));
        assert_eq!(framed(log, "b"), None);
        assert_eq!(framed("=== BOOTLINK BEGIN a ===\nno end\n", "a"), None);
        assert_eq!(framed("=== BOOTLINK BEGIN a ===\n=== BOOTLINK END a ===\n", "a").as_deref(), Some(""));
        assert_eq!(body_status(log, "b"), None);
    }

    #[test]
    fn problems_surface_when_building() {
        let tmp = TempDir::new("initramfs-test").unwrap();
        let bb = fake_busybox(tmp.path());
        let mut i = Initramfs::new(&bb);
        i.tag("bad tag");
        assert!(i.archive().unwrap_err().to_string().contains("tag"));
        let mut i = Initramfs::new(&bb);
        i.file("a/../b", 0o644, "x");
        assert!(i.archive().is_err());
        let mut i = Initramfs::new(&bb);
        i.file("f", 0o644, "x").file("f/g", 0o644, "y");
        assert!(i.archive().unwrap_err().to_string().contains("not a directory"));
        let mut i = Initramfs::new(tmp.path().join("missing-busybox"));
        assert!(i.body("true").archive().unwrap_err().to_string().contains("missing-busybox"));
        let mut i = Initramfs::new(&bb);
        i.copy_tree("/lib/modules/x", tmp.path().join("nope"));
        assert!(i.archive().unwrap_err().to_string().contains("nope"));
    }
}
