//! Kernel logs as the kernel prints them: `dmesg` output or a serial
//! console capture, with printk times (`[    1.234567] ...`) and the lines
//! `initcall_debug` adds:
//!
//! ```text
//! [    0.412345] calling  pci_subsys_init+0x0/0x80 @ 1
//! [    0.415000] initcall pci_subsys_init+0x0/0x80 returned 0 after 2561 usecs
//! [    3.120000] calling  init_fat_fs+0x0/0x1000 [fat] @ 93
//! [    3.120400] initcall init_fat_fs+0x0/0x1000 [fat] returned 0 after 312 usecs
//! ```
//!
//! An initcall starts at its `calling` line's time and lasts exactly the
//! microseconds its `returned` line prints (older kernels print msecs).
//! Anything else is skipped: junk, CRLF line ends, lines without a
//! timestamp, `<6>` level prefixes, `dmesg -x` facility prefixes,
//! `[T123]` caller ids, lines cut short.

use std::collections::HashMap;
use std::path::Path;

use crate::run::results::{FORMAT_VERSION, Initcall, Repetition, Run, Variant};
use crate::workload::start::Start;
use bootlink::error::{Error, Kind, Result};

/// What one log holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// In the order their `returned` lines appear.
    pub initcalls: Vec<Initcall>,
    /// From `Linux version <release> ...`.
    pub kernel_release: String,
    /// From `Command line: ...`.
    pub cmdline: String,
    /// When the kernel started init (`Run /init as init process`).
    pub init_start_us: Option<f64>,
    pub lines: usize,
    /// Lines with a printk time.
    pub timestamped: usize,
    /// The last printk time seen.
    pub last_us: f64,
    /// `calling` lines that no `returned` line closed (a cut-off log, or
    /// an initcall that never returned).
    pub unfinished: usize,
    /// `returned` lines without a `calling` line (the ring buffer wrapped):
    /// still initcalls, started at their return time minus their duration.
    pub unopened: usize,
    /// Kernel boots: `Linux version` lines (one per boot; two when the
    /// machine rebooted within the log).
    pub boots: usize,
    /// The line number of the second `Linux version`, when there is one.
    pub second_boot_line: Option<usize>,
}

/// A printk time at the start of `line` (after an optional `<N>` level or
/// `dmesg -x` prefix), or anywhere in it when console output ran into the
/// line: microseconds and the offset just after the closing bracket.
pub fn timestamp(line: &[u8]) -> Option<(f64, usize)> {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'[', &line[from..]) {
        let at = from + i;
        if let Some(r) = bracketed_time(line, at + 1) {
            return Some(r);
        }
        from = at + 1;
    }
    None
}

/// A line's printk time (µs) and its message (see [`timestamp`]); None for
/// a line without a printk time.
pub(crate) fn timed_message(line: &[u8]) -> Option<(f64, &[u8])> {
    let (t, end) = timestamp(line)?;
    Some((t, message(line, Some(end))))
}

/// `  12.345678]` starting at `i`: (microseconds, offset after `]`).
fn bracketed_time(line: &[u8], mut i: usize) -> Option<(f64, usize)> {
    while i < line.len() && line[i] == b' ' {
        i += 1;
    }
    let int_start = i;
    let mut secs: u64 = 0;
    while i < line.len() && line[i].is_ascii_digit() {
        secs = secs.checked_mul(10)?.checked_add(u64::from(line[i] - b'0'))?;
        i += 1;
    }
    if i == int_start || i - int_start > 12 || line.get(i) != Some(&b'.') {
        return None;
    }
    i += 1;
    let frac_start = i;
    let mut nanos: u64 = 0;
    while i < line.len() && line[i].is_ascii_digit() {
        if i - frac_start < 9 {
            nanos = nanos * 10 + u64::from(line[i] - b'0');
        }
        i += 1;
    }
    let digits = i - frac_start;
    if digits == 0 || line.get(i) != Some(&b']') {
        return None;
    }
    for _ in digits.min(9)..9 {
        nanos *= 10;
    }
    // Whole microseconds are exact in f64; finer digits become a fraction.
    let us = secs as f64 * 1e6 + (nanos / 1000) as f64 + (nanos % 1000) as f64 / 1000.0;
    Some((us, i + 1))
}

/// The message of a line: after its printk time (and a `[T1]`/`[C0]`
/// caller id), else after a `<N>` level prefix, leading blanks removed.
fn message(line: &[u8], ts_end: Option<usize>) -> &[u8] {
    let mut m = match ts_end {
        Some(e) => &line[e..],
        None => {
            let mut m = line;
            if m.first() == Some(&b'<')
                && let Some(close) = m.iter().take(6).position(|&b| b == b'>')
                && m[1..close].iter().all(u8::is_ascii_digit)
            {
                m = &m[close + 1..];
            }
            m
        }
    };
    m = trim_start(m);
    if ts_end.is_some() && m.first() == Some(&b'[') {
        // CONFIG_PRINTK_CALLER: "[    T1] " or "[  C0] "
        if let Some(close) = m.iter().take(16).position(|&b| b == b']') {
            let inner = trim_start(&m[1..close]);
            if inner.len() > 1 && matches!(inner[0], b'T' | b'C') && inner[1..].iter().all(u8::is_ascii_digit) {
                m = trim_start(&m[close + 1..]);
            }
        }
    }
    m
}

fn trim_start(mut s: &[u8]) -> &[u8] {
    while let Some((&b' ' | &b'\t', rest)) = s.split_first() {
        s = rest;
    }
    s
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let Some((&(b' ' | b'\t' | b'\r'), rest)) = s.split_last() {
        s = rest;
    }
    s
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// `init_fat_fs+0x0/0x1000 [fat]` -> ("init_fat_fs", "fat"); a build id
/// after the module name (`[fat 1a2b...]`) is dropped.
pub fn split_function(spec: &str) -> (String, String) {
    let spec = spec.trim();
    let (func, module) = match spec.find(" [") {
        Some(i) if spec.ends_with(']') => {
            let inner = &spec[i + 2..spec.len() - 1];
            (&spec[..i], inner.split_whitespace().next().unwrap_or(""))
        }
        _ => (spec, ""),
    };
    let name = func.split('+').next().unwrap_or(func).trim();
    (name.to_string(), module.to_string())
}

/// `returned <ret> after <n> usecs` (or msecs): (ret, microseconds).
fn parse_return(rest: &[u8]) -> Option<(i64, f64)> {
    let text = std::str::from_utf8(rest).ok()?;
    let mut words = text.split_whitespace();
    let ret: i64 = words.next()?.parse().ok()?;
    if words.next()? != "after" {
        return None;
    }
    let n: u64 = words.next()?.parse().ok()?;
    let us = match words.next()? {
        "usecs" | "usec" | "us" => n as f64,
        "msecs" | "msec" | "ms" => n as f64 * 1000.0,
        _ => return None,
    };
    Some((ret, us))
}

/// An open `calling` line: its time, and the last time seen before it.
type Opened = (Option<f64>, Option<f64>);

/// Parse a whole log. Never fails: what cannot be read is skipped.
pub fn parse(text: &[u8]) -> Parsed {
    let mut p = Parsed::default();
    // An open `calling` line per function spec: (its time, the last time
    // seen before it), latest last.
    let mut open: HashMap<&[u8], Vec<Opened>> = HashMap::new();
    let mut last: Option<f64> = None;
    for (number, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = trim_end(raw);
        if line.is_empty() {
            continue;
        }
        p.lines += 1;
        let ts = timestamp(line);
        let msg = message(line, ts.map(|t| t.1));
        let t = ts.map(|t| t.0);
        if let Some(t) = t {
            p.timestamped += 1;
            p.last_us = t;
        }
        let prev = last;
        if t.is_some() {
            last = t;
        }
        if let Some(rest) = msg.strip_prefix(b"calling ") {
            let rest = trim_start(rest);
            let spec = match memchr::memmem::rfind(rest, b" @ ") {
                Some(i) => &rest[..i],
                None => rest,
            };
            let spec = trim_end(spec);
            if !spec.is_empty() {
                open.entry(spec).or_default().push((t, prev));
            }
        } else if let Some(rest) = msg.strip_prefix(b"initcall ") {
            let Some(r) = find(rest, b" returned ") else { continue };
            let spec = trim_end(trim_start(&rest[..r]));
            let Some((ret, dur)) = parse_return(&rest[r + b" returned ".len()..]) else { continue };
            let opened = open.get_mut(spec).and_then(|v| v.pop());
            let start = match opened {
                Some((Some(s), _)) => s,
                Some((None, before)) => t.map(|e| e - dur).or(before).unwrap_or(0.0),
                None => {
                    p.unopened += 1;
                    t.map(|e| e - dur).or(prev).unwrap_or(0.0)
                }
            };
            let (name, module) = split_function(&String::from_utf8_lossy(spec));
            p.initcalls.push(Initcall { name, start_us: start.max(0.0), duration_us: dur, ret, module });
        } else if let Some(rest) = msg.strip_prefix(b"Linux version ") {
            p.boots += 1;
            if p.boots == 2 {
                p.second_boot_line = Some(number + 1);
            }
            if p.kernel_release.is_empty() {
                let rel = rest.split(|&b| b == b' ').next().unwrap_or(b"");
                p.kernel_release = String::from_utf8_lossy(rel).into_owned();
            }
        } else if let Some(rest) = msg.strip_prefix(b"Command line: ") {
            if p.cmdline.is_empty() {
                p.cmdline = String::from_utf8_lossy(rest).trim().to_string();
            }
        } else if msg.starts_with(b"Run ") && msg.ends_with(b" as init process") && p.init_start_us.is_none() {
            p.init_start_us = t;
        }
    }
    p.unfinished = open.values().map(Vec::len).sum();
    p
}

/// A plain log given to the charts as a [`Run`] ([`run_from_log`]), when it
/// is one boot's kernel log: refused in one line naming it when it is
/// empty, has no line with a printk time (not a kernel log: random bytes,
/// another file), or holds more than one boot (a second `Linux version`:
/// the machine rebooted, and the initcalls of both boots would chart as
/// one boot's).
pub fn load_log(text: &[u8], path: &Path) -> Result<Run> {
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::file(Kind::Format, path, "the file is empty: neither a run.json nor a kernel log"));
    }
    let p = parse(text);
    if p.timestamped == 0 {
        return Err(Error::file(
            Kind::Format,
            path,
            format!(
                "neither a run.json nor a kernel log: none of its {} line(s) starts with a printk time (`[    1.234567]`)",
                p.lines
            ),
        ));
    }
    if p.boots > 1 {
        return Err(Error::file(
            Kind::Format,
            path,
            format!(
                "holds {} kernel boots (a second `Linux version` on line {}; the machine rebooted): chart one boot per log",
                p.boots,
                p.second_boot_line.unwrap_or(0)
            ),
        ));
    }
    Ok(run_of(p, path))
}

/// A [`Run`] from a plain log: source "dmesg", one variant named after the
/// file, one repetition holding its initcalls (no module loads: a plain
/// log has no load phases; module init functions are initcalls with their
/// module set). Whatever the text holds (see [`load_log`] for the checks).
pub fn run_from_log(text: &[u8], path: &Path) -> Run {
    run_of(parse(text), path)
}

fn run_of(p: Parsed, path: &Path) -> Run {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dmesg".into());
    let rep = Repetition {
        index: 0,
        boot_wall_s: 0.0,
        init_start_us: p.init_start_us.unwrap_or(0.0),
        modules_total_us: 0.0,
        initcalls: p.initcalls,
        modules: Vec::new(),
        log: path.to_path_buf(),
        partial: false,
        failure: None,
        booted_again: None,
        workloads: Vec::new(),
        tainted: None,
        module_taints: Default::default(),
        kernel_text: None,
        kernel_stext: None,
        kaslr_slide: None,
        processes: Vec::new(),
        boot_clock: None,
        symbols_timed_at: None,
        job: None,
    };
    Run {
        format: FORMAT_VERSION,
        source: "dmesg".into(),
        kernel_release: p.kernel_release,
        kernel: Default::default(),
        cmdline: p.cmdline,
        qemu_version: String::new(),
        cpu_model: String::new(),
        machine: String::new(),
        arch: String::new(),
        qemu_command: Vec::new(),
        timing: "realtime".into(),
        module_set: String::new(),
        variants: vec![Variant { repetitions: vec![rep], ..Variant::named(&name) }],
        partial: false,
        tracing_overhead_pct: None,
        device_type: String::new(),
    }
}

/// The starts a guest script brackets with kernel log markers, `PREFIX
/// start MODE K` and `PREFIX end MODE K [STATUS]`: each one's mode, index,
/// printk time and duration, and its exit status when the end marker gives
/// one (else -1); with it, a `PREFIX ui MODE K` marker in between as its
/// time to UI (the first one, from the start marker).
pub(crate) fn marked_starts(dmesg_text: &str, prefix: &str) -> Vec<(Start, Option<f64>)> {
    let mut starts: Vec<(Start, Option<f64>)> = Vec::new();
    for line in dmesg_text.lines() {
        let Some((t, msg)) = timed_message(line.as_bytes()) else { continue };
        let msg = String::from_utf8_lossy(msg);
        let Some(m) = msg.strip_prefix(prefix) else { continue };
        let w: Vec<&str> = m.split_whitespace().collect();
        match w[..] {
            ["start", mode, k] => starts.push((
                Start {
                    mode: mode.to_string(),
                    index: k.parse().unwrap_or(0),
                    start_us: t,
                    exit: -1,
                    ..Default::default()
                },
                None,
            )),
            ["ui", mode, k] => {
                let k: usize = k.parse().unwrap_or(0);
                if let Some((s, ui)) = starts.iter_mut().rev().find(|(s, _)| s.mode == mode && s.index == k)
                    && s.duration_us == 0.0
                    && ui.is_none()
                {
                    *ui = Some(t - s.start_us);
                }
            }
            ["end", mode, k, ref rest @ ..] if rest.len() <= 1 => {
                let k: usize = k.parse().unwrap_or(0);
                if let Some((s, _)) = starts.iter_mut().rev().find(|(s, _)| s.mode == mode && s.index == k) {
                    s.duration_us = t - s.start_us;
                    s.exit = rest.first().and_then(|rc| rc.parse().ok()).unwrap_or(-1);
                }
            }
            _ => {}
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(timestamp(b"[    1.234567] x"), Some((1_234_567.0, 14)));
        assert_eq!(timestamp(b"<6>[    0.000000] Linux"), Some((0.0, 17)));
        assert_eq!(timestamp(b"kern  :info  : [   12.5] y").map(|t| t.0), Some(12_500_000.0));
        assert_eq!(timestamp(b"[12.000000001]").map(|t| t.0), Some(12_000_000.001));
        assert_eq!(timestamp(b"[ext4] [ 2.000001] z").map(|t| t.0), Some(2_000_001.0));
        for bad in [&b"[    1.23"[..], b"[ .5]", b"[1.]", b"[abc]", b"no time", b"[", b"[99999999999999.1]"] {
            assert_eq!(timestamp(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn functions() {
        assert_eq!(split_function("init_fat_fs+0x0/0x1000 [fat]"), ("init_fat_fs".into(), "fat".into()));
        assert_eq!(split_function("foo+0x0/0x20"), ("foo".into(), String::new()));
        assert_eq!(split_function("bar [m 0123abcd]"), ("bar".into(), "m".into()));
        assert_eq!(split_function("0xffffffff81000000"), ("0xffffffff81000000".into(), String::new()));
    }

    #[test]
    fn initcalls_pair_and_keep_the_printed_duration() {
        let log = b"[    0.100000] calling  a+0x0/0x10 @ 1\r\n\
                   [    0.100900] initcall a+0x0/0x10 returned 0 after 876 usecs\r\n\
                   junk \x00\xff line\n\
                   <7>[    0.200000] [    T1] calling  b+0x0/0x10 @ 1\n\
                   calling  c+0x0/0x10 [mod] @ 55\n\
                   [    0.300000] initcall c+0x0/0x10 [mod] returned -19 after 5 msecs\n\
                   [    0.310000] initcall b+0x0/0x10 returned 0 after 110000 usecs\n\
                   [    0.400000] initcall d+0x0/0x10 returned 0 after 20 usecs\n\
                   [    0.500000] calling  e+0x0/0x10 @ 1\n\
                   [    0.600000] initcall e+0x0/0x10 returned 0 aft";
        let p = parse(log);
        let got: Vec<(&str, &str, f64, f64, i64)> = p
            .initcalls
            .iter()
            .map(|i| (i.name.as_str(), i.module.as_str(), i.start_us, i.duration_us, i.ret))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", "", 100_000.0, 876.0, 0),
                ("c", "mod", 295_000.0, 5000.0, -19),
                ("b", "", 200_000.0, 110_000.0, 0),
                ("d", "", 399_980.0, 20.0, 0),
            ]
        );
        assert_eq!((p.unfinished, p.unopened, p.lines, p.timestamped), (1, 1, 10, 8));
        assert_eq!(p.last_us, 600_000.0);
    }

    /// What is not one boot's kernel log is refused in one line naming the
    /// file: empty, random bytes, text without a printk time, two boots.
    #[test]
    fn only_one_boots_kernel_log_is_a_run() {
        let path = Path::new("/x/board.log");
        let err = |text: &[u8]| load_log(text, path).unwrap_err().to_string();
        assert_eq!(err(b""), "/x/board.log: the file is empty: neither a run.json nor a kernel log");
        assert_eq!(err(b" \n\n"), "/x/board.log: the file is empty: neither a run.json nor a kernel log");
        let junk: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert!(err(&junk).contains("neither a run.json nor a kernel log: none of its "), "{}", err(&junk));
        assert!(
            err(b"a shopping list\nmilk\n")
                .ends_with("none of its 2 line(s) starts with a printk time (`[    1.234567]`)")
        );
        let boot = "[    0.000000] Linux version 6.1.0-56-amd64 (gcc)\n\
                    [    0.100000] calling  a+0x0/0x10 @ 1\n\
                    [    0.100900] initcall a+0x0/0x10 returned 0 after 876 usecs\n";
        let one = load_log(boot.as_bytes(), path).unwrap();
        assert_eq!(one.variants[0].repetitions[0].initcalls.len(), 1);
        let twice = format!("{boot}[    9.000000] reboot: Restarting system\n{boot}");
        assert_eq!(
            err(twice.as_bytes()),
            "/x/board.log: holds 2 kernel boots (a second `Linux version` on line 5; the machine rebooted): chart one boot per log"
        );
    }

    #[test]
    fn release_cmdline_and_init() {
        let log = b"[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) (gcc)\n\
                    [    0.000000] Command line: console=ttyS0 initcall_debug\n\
                    [    2.500000] Run /init as init process\n";
        let p = parse(log);
        assert_eq!(p.kernel_release, "6.1.0-56-amd64");
        assert_eq!(p.cmdline, "console=ttyS0 initcall_debug");
        assert_eq!(p.init_start_us, Some(2_500_000.0));
        let r = run_from_log(log, Path::new("/x/board.dmesg"));
        assert_eq!(r.source, "dmesg");
        assert_eq!(r.variants[0].name, "board.dmesg");
        assert_eq!(r.variants[0].repetitions.len(), 1);
    }
}
