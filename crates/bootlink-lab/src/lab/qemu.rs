//! Boot a kernel under QEMU (`-accel tcg -machine M -cpu MODEL`, with `,enforce` on x86-64; the
//! emulator, machine and CPU model from a [`Target`]), with the serial
//! console captured to a file, under a timeout.
//!
//! On x86-64 an uncompressed vmlinux given to `-kernel` boots through its
//! PVH entry point: no decompressor, and no KASLR (the kernel runs at its
//! link-time addresses). A bzImage boots too, the slow way.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab::hang;
pub use crate::lab::target::Target;
use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;
use bootlink::fsutil::TempDir;

/// In a deterministic boot, the seed of QEMU's guest random numbers
/// (`-seed`: RDRAND's values, which the kernel mixes into its random pool
/// and so into ASLR, hash seeds and slab freelists): without it two boots
/// of one kernel differ by some microseconds from the first `insmod` on.
pub(crate) const GUEST_RANDOM_SEED: u32 = 1;

/// In a deterministic boot, the guest's real-time clock: a fixed date on
/// the virtual clock (`-rtc`), not the host's time, which the kernel reads
/// at boot and mixes into its random pool.
pub(crate) const GUEST_RTC: &str = "base=2030-01-01T00:00:00,clock=vm";

/// How many console lines a failed boot's error quotes.
pub(crate) const EXCERPT_LINES: usize = 40;

/// What the kernel prints when it powers off (`reboot: Power down`).
pub(crate) const POWER_DOWN: &str = "reboot: Power down";

/// Console text that means the kernel failed, whatever happened next.
pub(crate) const FAULT_PATTERNS: &[&str] = &[
    "Kernel panic - not syncing",
    "Oops: ",
    "BUG: ",
    "kernel BUG at ",
    "general protection fault",
    "invalid opcode: ",
    "Unable to handle kernel",
];

#[derive(Debug, Clone)]
pub struct QemuOptions {
    /// The emulator, the machine, the CPU model.
    pub target: Target,
    /// vmlinux (PVH entry) or bzImage.
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    /// The kernel command line (`-append`).
    pub cmdline: String,
    pub memory_mib: u32,
    pub cpus: u32,
    /// QEMU is killed when this runs out.
    pub timeout: Duration,
    /// QEMU is killed sooner when its console is still empty this long
    /// after it started (a guest that hangs before printing anything, as a
    /// realtime guest with several vCPUs can: the lab's scenario sets it).
    pub silence_limit: Option<Duration>,
    /// `-icount shift=0,sleep=off`: one instruction per virtual nanosecond,
    /// guest time independent of the host (slower, but repeatable); with
    /// [`GUEST_RANDOM_SEED`] and [`GUEST_RTC`], two boots of one kernel and
    /// initramfs print the same console log, byte for byte.
    pub deterministic: bool,
    /// Appended to QEMU's arguments as they are.
    pub extra_args: Vec<OsString>,
    /// Keep the console log here (written atomically when QEMU is done);
    /// by default it lives in a temporary directory that is removed.
    pub log: Option<PathBuf>,
}

impl QemuOptions {
    /// [`QemuOptions::on`] the x86-64 target.
    pub fn new(kernel: impl Into<PathBuf>) -> QemuOptions {
        QemuOptions::on(&Target::x86_64(), kernel)
    }

    /// Boot `kernel` on `target`. Defaults: 1 GiB, 1 CPU, 60 s timeout, not
    /// deterministic, command line `console=` the target's console.
    pub fn on(target: &Target, kernel: impl Into<PathBuf>) -> QemuOptions {
        QemuOptions {
            target: target.clone(),
            kernel: kernel.into(),
            initrd: None,
            cmdline: format!("console={}", target.console),
            memory_mib: 1024,
            cpus: 1,
            timeout: Duration::from_secs(60),
            silence_limit: None,
            deterministic: false,
            extra_args: Vec::new(),
            log: None,
        }
    }

    /// QEMU's arguments, with the console going to `log`.
    pub fn args(&self, log: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |s: &str| a.push(OsString::from(s));
        push("-accel");
        push("tcg");
        push("-machine");
        push(&self.target.machine);
        push("-cpu");
        push(&self.target.cpu_arg());
        push("-m");
        push(&format!("{}M", self.memory_mib));
        push("-smp");
        push(&self.cpus.to_string());
        // No default NIC, VGA, floppy or CD-ROM; no monitor, no window.
        push("-nodefaults");
        push("-display");
        push("none");
        push("-monitor");
        push("none");
        push("-no-reboot");
        if self.deterministic {
            push("-icount");
            push("shift=0,sleep=off");
            push("-seed");
            push(&GUEST_RANDOM_SEED.to_string());
            push("-rtc");
            push(GUEST_RTC);
        }
        push("-append");
        push(&self.cmdline);
        let mut serial = OsString::from("file:");
        serial.push(log.as_os_str());
        a.push("-serial".into());
        a.push(serial);
        a.push("-kernel".into());
        a.push(self.kernel.clone().into_os_string());
        if let Some(i) = &self.initrd {
            a.push("-initrd".into());
            a.push(i.clone().into_os_string());
        }
        a.extend(self.extra_args.iter().cloned());
        a
    }
}

/// How a boot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootStatus {
    /// QEMU exited by itself after the kernel's "Power down", no fault seen.
    PoweredOff,
    /// A panic, Oops or BUG was printed (see [`Boot::faults`]).
    Faulted,
    /// QEMU was killed at the timeout.
    TimedOut,
    /// QEMU exited by itself without the kernel powering off: a reset or
    /// triple fault (-no-reboot turns those into an exit).
    Reset,
    /// QEMU itself failed (bad arguments, unreadable kernel, ...).
    QemuFailed(Option<i32>),
}

impl BootStatus {
    pub fn describe(&self) -> String {
        match self {
            BootStatus::PoweredOff => "powered off".into(),
            BootStatus::Faulted => "kernel fault".into(),
            BootStatus::TimedOut => "timed out".into(),
            BootStatus::Reset => "reset without powering off".into(),
            BootStatus::QemuFailed(Some(c)) => format!("qemu exited with status {c}"),
            BootStatus::QemuFailed(None) => "qemu was killed by a signal".into(),
        }
    }
}

/// One boot's outcome.
#[derive(Debug, Clone)]
pub struct Boot {
    pub status: BootStatus,
    /// The serial console, with "\r\n" turned into "\n".
    pub log: String,
    /// Where the log was kept, if [`QemuOptions::log`] asked for it.
    pub log_path: Option<PathBuf>,
    /// From starting QEMU until it exited or was killed.
    pub wall: Duration,
    /// Console lines that match [`FAULT_PATTERNS`].
    pub faults: Vec<String>,
    /// What QEMU printed on stderr.
    pub qemu_stderr: String,
    /// Where each vCPU was when the boot timed out (asked of QEMU before
    /// it was killed; empty for other endings or when QEMU did not answer).
    pub stuck: Vec<hang::VcpuAt>,
    /// The command, for running it by hand.
    pub command: String,
    pub timeout: Duration,
    /// Set when QEMU was killed at [`QemuOptions::silence_limit`], its
    /// console still empty, before the timeout.
    pub silent_for: Option<Duration>,
    pub kernel: PathBuf,
}

impl Boot {
    pub fn powered_off(&self) -> bool {
        self.status == BootStatus::PoweredOff
    }

    /// The text /init framed between its `<tag>` markers.
    pub fn framed(&self, tag: &str) -> Option<String> {
        crate::lab::initramfs::framed(&self.log, tag)
    }

    /// The last `n` lines of the console.
    pub fn excerpt(&self, n: usize) -> String {
        excerpt(&self.log, n)
    }

    /// What went wrong, in one line (empty for a clean power-off): the
    /// first fault, QEMU's last word, or for a timeout whether the console
    /// stayed empty and where each vCPU was.
    pub fn why(&self) -> String {
        match &self.status {
            BootStatus::PoweredOff => String::new(),
            BootStatus::Faulted => self.faults[0].trim().to_string(),
            BootStatus::TimedOut => {
                let mut why = match self.silent_for {
                    Some(d) => format!("timed out: no console output within {d:?}, qemu killed"),
                    None => format!("timed out: no power-off within {:?}, qemu killed", self.timeout),
                };
                if self.log.trim().is_empty() {
                    why.push_str("; the console stayed empty (the kernel never reached /init's first line)");
                }
                if !self.stuck.is_empty() {
                    let at: Vec<String> = self.stuck.iter().map(|v| v.to_string()).collect();
                    why.push_str(&format!("; vCPUs at the timeout: {}", at.join(", ")));
                }
                why
            }
            BootStatus::Reset => "the guest reset without powering off".to_string(),
            BootStatus::QemuFailed(_) => {
                let last = self.qemu_stderr.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
                format!("{}: {last}", self.status.describe())
            }
        }
    }

    /// Ok for a clean power-off; otherwise an error naming the kernel (or
    /// the kept log) that says what went wrong and quotes the console's end.
    pub fn check(&self) -> Result<()> {
        if self.status == BootStatus::PoweredOff {
            return Ok(());
        }
        let at = self.log_path.as_deref().unwrap_or(&self.kernel);
        Err(Error::file(
            Kind::Boot,
            at,
            format!(
                "boot failed: {}\n--- last {EXCERPT_LINES} console lines ---\n{}",
                self.why(),
                self.excerpt(EXCERPT_LINES)
            ),
        ))
    }
}

/// The last `n` lines of `log`.
pub fn excerpt(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let mut out = lines[lines.len().saturating_sub(n)..].join("\n");
    out.push('\n');
    out
}

/// Console lines showing a panic, an Oops or a BUG.
pub(crate) fn find_faults(log: &str) -> Vec<String> {
    log.lines().filter(|l| FAULT_PATTERNS.iter().any(|p| l.contains(p))).map(|l| l.trim_end().to_string()).collect()
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Boot once and report how it went. Errors only when QEMU cannot be
/// started; a failed boot is a [`Boot`] whose [`Boot::check`] fails.
pub fn run(opts: &QemuOptions) -> Result<Boot> {
    for p in std::iter::once(&opts.kernel).chain(opts.initrd.as_ref()) {
        let meta = std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
        if !meta.is_file() {
            return Err(Error::file(Kind::Usage, p, "not a regular file"));
        }
    }
    let work = TempDir::new("qemu")?;
    let log_file = work.path().join("console.log");
    let err_file = work.path().join("qemu.stderr");
    let args = opts.args(&log_file);
    let qemu = &opts.target.qemu;
    let command = std::iter::once(qemu.as_os_str())
        .chain(args.iter().map(|a| a.as_os_str()))
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let stderr = File::create(&err_file).map_err(|e| Error::io(&err_file, e))?;
    let prog = qemu.display().to_string();
    // A socket to ask a hung guest where its vCPUs are (not in `command`:
    // it lives in this temporary directory).
    let qmp = work.path().join("qmp");
    let mut args = args;
    let asked = qmp.as_os_str().len() <= hang::SOCKET_PATH_MAX;
    if asked {
        args.extend(hang::qmp_args(&qmp));
    }

    let start = Instant::now();
    // QEMU stops with bootlink (a boot left running would go on using a
    // core, and writing into the run's directory, after a test harness or
    // a CI timeout killed the bootlink that started it).
    let mut cmd = Command::new(qemu);
    bootlink::hosttool::stop_with_caller(&mut cmd);
    let mut child = cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).spawn().map_err(|e| {
        (match e.kind() {
            std::io::ErrorKind::NotFound => Error::new(
                Kind::Tool,
                format!(
                    "{prog}: missing tool, needed to boot kernels (install the Debian package {})",
                    opts.target.qemu_package
                ),
            ),
            _ => Error::new(Kind::Tool, format!("{prog}: cannot start it: {e}")),
        })
        .because(e)
    })?;
    let mut registers = None;
    let mut silent_for = None;
    // Whether the console is still empty past the silence limit (looked at
    // once a second).
    let mut next_look = Instant::now();
    let mut silent_too_long = || match opts.silence_limit {
        Some(limit) if start.elapsed() >= limit && Instant::now() >= next_look => {
            next_look = Instant::now() + Duration::from_secs(1);
            let empty = std::fs::metadata(&log_file).map(|m| m.len() == 0).unwrap_or(true);
            if empty {
                silent_for = Some(limit);
            }
            empty
        }
        _ => false,
    };
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= opts.timeout || silent_too_long() => {
                if asked {
                    registers = hang::ask_registers(&qmp);
                }
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::new(Kind::Boot, format!("{prog}: waiting for it failed: {e}")));
            }
        }
    };
    let wall = start.elapsed();

    let raw = match std::fs::read(&log_file) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(&log_file, e)),
    };
    let log = String::from_utf8_lossy(&raw).replace("\r\n", "\n");
    let qemu_stderr = std::fs::read_to_string(&err_file).unwrap_or_default();
    if let Some(keep) = &opts.log {
        fsutil::write_atomic(keep, log.as_bytes())?;
    }
    let faults = find_faults(&log);
    let mut stuck = registers.as_deref().map(hang::parse_registers).unwrap_or_default();
    if !stuck.is_empty()
        && hang::at_link_addresses(&opts.kernel, &opts.cmdline)
        && let Some(map) = hang::system_map_beside(&opts.kernel)
        && let Ok(text) = std::fs::read_to_string(&map)
    {
        hang::symbolize(&mut stuck, &text);
    }
    let status = match exit {
        _ if !faults.is_empty() => BootStatus::Faulted,
        None => BootStatus::TimedOut,
        Some(s) if s.success() && log.contains(POWER_DOWN) => BootStatus::PoweredOff,
        Some(s) if s.success() => BootStatus::Reset,
        Some(s) => BootStatus::QemuFailed(s.code()),
    };
    Ok(Boot {
        status,
        log,
        log_path: opts.log.clone(),
        wall,
        faults,
        qemu_stderr,
        stuck,
        command,
        timeout: opts.timeout,
        silent_for,
        kernel: opts.kernel.clone(),
    })
}

/// [`run`], then [`Boot::check`]: a failed boot is an error.
pub fn boot(opts: &QemuOptions) -> Result<Boot> {
    let b = run(opts)?;
    b.check()?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for QEMU: a shell script that finds the `-serial file:`
    /// argument, writes `console` there and runs `then`.
    fn fake_qemu(dir: &Path, console: &str, then: &str) -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = dir.join(format!("fake-qemu-{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in file:*) log=\"${{a#file:}}\";; esac; done\n\
             printf '%s' '{console}' > \"$log\"\n{then}\n"
        );
        std::fs::write(&p, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn opts(dir: &Path, qemu: PathBuf) -> QemuOptions {
        let kernel = dir.join("vmlinux");
        std::fs::write(&kernel, b"\x7fELF").unwrap();
        let target = Target { qemu, ..Target::x86_64() };
        QemuOptions { timeout: Duration::from_secs(20), ..QemuOptions::on(&target, kernel) }
    }

    #[test]
    fn arguments() {
        let mut o = QemuOptions::new("/k/vmlinux");
        o.initrd = Some("/k/initrd".into());
        o.cmdline = "console=ttyS0 quiet".into();
        o.extra_args = vec!["-s".into()];
        let a: Vec<String> = o.args(Path::new("/t/log")).iter().map(|s| s.to_string_lossy().into_owned()).collect();
        let text = a.join(" ");
        assert!(
            text.starts_with(&format!(
                "-accel tcg -machine pc -cpu {},enforce -m 1024M -smp 1 -nodefaults -display none -monitor none -no-reboot",
                crate::lab::target::X86_64_CPU_MODEL
            )),
            "{text}"
        );
        assert!(text.contains("-serial file:/t/log -kernel /k/vmlinux -initrd /k/initrd"), "{text}");
        assert!(a.windows(2).any(|w| w[0] == "-append" && w[1] == "console=ttyS0 quiet"));
        assert!(!text.contains("-icount") && !text.contains("-seed") && !text.contains("-rtc"));
        assert_eq!(a.last().unwrap(), "-s");
        o.deterministic = true;
        let a: Vec<String> = o.args(Path::new("/t/log")).iter().map(|s| s.to_string_lossy().into_owned()).collect();
        let text = a.join(" ");
        assert!(text.contains("-icount shift=0,sleep=off -seed 1 -rtc base=2030-01-01T00:00:00,clock=vm"), "{text}");
    }

    #[test]
    fn missing_qemu_names_the_package() {
        let tmp = TempDir::new("qemu-test").unwrap();
        let o = opts(tmp.path(), tmp.path().join("no-such-qemu-system-x86_64"));
        let err = run(&o).unwrap_err().to_string();
        assert!(err.contains("no-such-qemu-system-x86_64") && err.contains("qemu-system-x86"), "{err}");
        let mut o = QemuOptions::new(tmp.path().join("no-kernel"));
        o.target.qemu = "true".into();
        assert!(run(&o).unwrap_err().to_string().contains("no-kernel"));
    }

    #[test]
    fn clean_power_off() {
        let tmp = TempDir::new("qemu-test").unwrap();
        let q = fake_qemu(
            tmp.path(),
            "Linux version 6.1\r\n=== BOOTLINK BEGIN t ===\r\nhello\r\n=== BOOTLINK END t ===\r\nreboot: Power down\r\n",
            "exit 0",
        );
        let mut o = opts(tmp.path(), q);
        let keep = tmp.path().join("kept.log");
        o.log = Some(keep.clone());
        let b = run(&o).unwrap();
        assert_eq!(b.status, BootStatus::PoweredOff, "{}", b.log);
        b.check().unwrap();
        assert_eq!(b.framed("t").as_deref(), Some("hello\n"));
        assert!(!b.log.contains('\r'));
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), b.log);
        assert!(b.command.contains("-serial file:"), "{}", b.command);
    }

    #[test]
    fn panics_are_failed_boots_with_an_excerpt() {
        let tmp = TempDir::new("qemu-test").unwrap();
        let mut console = String::new();
        for i in 0..100 {
            console.push_str(&format!("line {i}\n"));
        }
        console.push_str("[    1.5] Kernel panic - not syncing: VFS: Unable to mount root fs\n");
        let q = fake_qemu(tmp.path(), &console, "exit 0");
        let b = run(&opts(tmp.path(), q)).unwrap();
        assert_eq!(b.status, BootStatus::Faulted);
        let err = b.check().unwrap_err().to_string();
        assert!(err.contains("Kernel panic - not syncing: VFS"), "{err}");
        assert!(err.contains("line 99") && err.contains("line 61") && !err.contains("line 60\n"), "{err}");
        assert!(err.contains("vmlinux"), "{err}");

        assert_eq!(find_faults("BUG: kernel NULL pointer dereference, address: 0\nok\nOops: 0002 [#1] SMP\n").len(), 2);
        assert!(find_faults("ffffffff81000000 T oops_begin\nffffffff81000010 t bug_handler\n").is_empty());
    }

    #[test]
    fn resets_and_qemu_errors() {
        let tmp = TempDir::new("qemu-test").unwrap();
        let q = fake_qemu(tmp.path(), "Linux version\n", "exit 0");
        let b = run(&opts(tmp.path(), q)).unwrap();
        assert_eq!(b.status, BootStatus::Reset);
        let q = fake_qemu(tmp.path(), "", "echo 'qemu: could not load kernel' >&2; exit 1");
        let b = run(&opts(tmp.path(), q)).unwrap();
        assert_eq!(b.status, BootStatus::QemuFailed(Some(1)));
        assert!(b.check().unwrap_err().to_string().contains("could not load kernel"));
    }

    #[test]
    fn killed_at_the_timeout() {
        let tmp = TempDir::new("qemu-test").unwrap();
        let q = fake_qemu(tmp.path(), "booting\n", "exec sleep 30");
        let mut o = opts(tmp.path(), q);
        o.timeout = Duration::from_millis(300);
        let b = run(&o).unwrap();
        assert_eq!(b.status, BootStatus::TimedOut);
        assert!(b.wall >= Duration::from_millis(300) && b.wall < Duration::from_secs(10), "{:?}", b.wall);
        assert!(b.check().unwrap_err().to_string().contains("booting"));
    }

    #[test]
    fn a_silent_guest_is_killed_at_the_silence_limit_and_a_talking_one_is_not() {
        let tmp = TempDir::new("qemu-test").unwrap();
        let silent = fake_qemu(tmp.path(), "", "exec sleep 30");
        let mut o = opts(tmp.path(), silent);
        o.timeout = Duration::from_secs(20);
        o.silence_limit = Some(Duration::from_millis(300));
        let b = run(&o).unwrap();
        assert_eq!((&b.status, b.silent_for), (&BootStatus::TimedOut, Some(Duration::from_millis(300))));
        assert!(b.wall < Duration::from_secs(10), "killed at the silence limit, not the timeout: {:?}", b.wall);
        assert!(
            b.why().starts_with("timed out: no console output within 300ms, qemu killed; the console stayed empty")
        );

        let talking = fake_qemu(tmp.path(), "booting\n", "exec sleep 30");
        let mut o = opts(tmp.path(), talking);
        o.timeout = Duration::from_millis(1500);
        o.silence_limit = Some(Duration::from_millis(300));
        let b = run(&o).unwrap();
        assert_eq!((&b.status, b.silent_for), (&BootStatus::TimedOut, None));
        assert!(b.wall >= Duration::from_millis(1500), "the console spoke: the timeout applies: {:?}", b.wall);
        assert!(b.why().starts_with("timed out: no power-off within 1.5s"), "{}", b.why());
    }
}
