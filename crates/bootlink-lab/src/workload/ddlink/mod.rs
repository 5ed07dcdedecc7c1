//! DDLink in the lab: a program started in the guest, after the modules
//! load, under the patched ld.so of `bootlink glibc build`, in each of
//! [`USER_MODES`]: normal loading (no cache), File Read Mode (the bindings
//! from a cache) and Relocation Skip Mode (prelinked images bind-mounted
//! over the libraries, relocation skipped), a few times each.
//!
//! On the host: the program (the synthetic case from `ddlink synth`, or any
//! host program) is profiled under the patched ld.so, and two portable
//! caches are written (`ddlink write --portable`: files identified by name,
//! size, mtime in seconds and build ID, since the initramfs gives them new
//! device and inode numbers), the second with the prelinked images. The
//! program, ld.so and every library it loads go into the initramfs at
//! their host paths (with their mtimes, see [`crate::lab::cpio`]), the
//! images and caches under [`DIR`].
//!
//! In the guest each start is `LD_DDLINK=CACHE LD_DEBUG=statistics,ddlink
//! LD.SO PROGRAM ARGS`, bracketed by kernel log markers (`bootlink: ddlink
//! start MODE K`, `bootlink: ddlink end MODE K STATUS`) whose printk times
//! put it on the kernel's timeline; ld.so's debug output goes to a file.
//! Afterwards /init prints, per start, the program's output and ld.so's
//! debug text between [`SECTION`] and [`END`]; [`parse`] reads them back.

pub mod chart;
pub mod record;
pub mod table;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::lab::Initramfs;
use crate::run::dmesg;
use crate::workload::ddlink::record::{DdlinkStart, DdlinkStarts, USER_MODES};
use bootlink::ddlink;
use bootlink::ddlink::measure::stat_value;
use bootlink::error::{Error, Kind, Result};

pub const SECTION: &str = "@@@ bootlink ddlink @@@";
pub const END: &str = "@@@ bootlink ddlink end @@@";
/// Where the caches and the prelinked images go in the guest.
pub const DIR: &str = "/bootlink-ddlink";
const FILE_READ_CACHE: &str = "/bootlink-ddlink/file-read.cache";
const SKIP_CACHE: &str = "/bootlink-ddlink/skip.cache";
const IMAGES: &str = "/bootlink-ddlink/images";
/// Scratch space in the guest: each start's output and ld.so's debug files.
const SCRATCH: &str = "/tmp/bootlink-ddlink";

/// The synthetic case as the lab starts it by default: 12 libraries, 50,000
/// symbols (a quarter of `ddlink synth`'s default: its files go into the
/// initramfs twice, as libraries and as prelinked images).
pub(crate) const DEFAULT_SYMBOLS: usize = 50_000;
/// Starts per mode per boot.
pub(crate) const DEFAULT_STARTS: usize = 3;

/// What to start in the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// `ddlink synth` with 12 libraries and this many symbols.
    Synth { symbols: usize },
    /// A host program (absolute path) and its arguments.
    Host { path: PathBuf, args: Vec<String> },
}

/// `ddlink:...` of a lab variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub program: Program,
    /// Starts per mode per boot.
    pub starts: usize,
}

impl Spec {
    /// `synth`, `synth-SYMBOLS` or `/PATH ARGS` (words split at spaces).
    pub fn parse(value: &str) -> Result<Spec> {
        let program = if value == "synth" {
            Program::Synth { symbols: DEFAULT_SYMBOLS }
        } else if let Some(n) = value.strip_prefix("synth-") {
            let symbols = n.parse().map_err(|e: std::num::ParseIntError| {
                Error::new(Kind::Usage, format!("ddlink:{value}: synth-N takes a number of symbols")).because(e)
            })?;
            Program::Synth { symbols }
        } else if value.starts_with('/') {
            let mut words = value.split_whitespace();
            let path = PathBuf::from(words.next().unwrap_or_default());
            Program::Host { path, args: words.map(str::to_string).collect() }
        } else {
            return Err(Error::new(
                Kind::Usage,
                format!("ddlink:{value}: give synth, synth-SYMBOLS or a program's absolute path and its arguments"),
            ));
        };
        Ok(Spec { program, starts: DEFAULT_STARTS })
    }
}

impl Spec {
    /// What can be checked before anything is built or booted: the synthetic
    /// case's spec, the host program's path.
    pub fn check(&self) -> Result<()> {
        match &self.program {
            Program::Synth { symbols } => ddlink::synth::SynthSpec { symbols: *symbols, ..Default::default() }.check(),
            Program::Host { path, .. } if !path.is_file() => {
                Err(Error::file(Kind::Usage, path, "ddlink: no such program on the host"))
            }
            Program::Host { .. } => Ok(()),
        }
    }
}

/// What the guest needs, made on the host.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub loader: PathBuf,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The program, ld.so and every library the patched ld.so loads for
    /// it (host paths, the same in the guest).
    pub files: Vec<PathBuf>,
    pub file_read_cache: PathBuf,
    pub skip_cache: PathBuf,
    /// (prelinked image on the host, the library it stands in for).
    pub images: Vec<(PathBuf, PathBuf)>,
    pub starts: usize,
}

/// Build (or find) the program, profile it under the patched ld.so and
/// write both caches and the images into `work`.
pub(crate) fn prepare(spec: &Spec, work: &Path) -> Result<Prepared> {
    if spec.starts == 0 {
        return Err(Error::new(Kind::Usage, "ddlink: starts must be at least 1"));
    }
    spec.check()?;
    let loader = bootlink::glibc::run(&bootlink::glibc::Options::defaults())?.ld_so;
    let (program, args) = match &spec.program {
        Program::Synth { symbols } => {
            let s = ddlink::synth::SynthSpec { symbols: *symbols, ..Default::default() };
            (ddlink::synth::build(&s, None)?.program, Vec::new())
        }
        Program::Host { path, args } => (path.clone(), args.clone()),
    };
    let files = closure(&loader, &program)?;
    std::fs::create_dir_all(work).map_err(|e| Error::io(work, e))?;
    let run = ddlink::run::Program::new(&program, args.clone());
    let record = work.join("record");
    let (rec, _) = ddlink::run::profile(&loader, &run, &record)?;
    let file_read_cache = work.join("file-read.cache");
    let opts = ddlink::write::WriteOptions { prelink: None, portable: true };
    ddlink::write::write(&rec, &loader, &program, &file_read_cache, &opts)?;
    let skip_cache = work.join("skip.cache");
    let dir = work.join("images");
    let prelink = ddlink::write::PrelinkTo { dir: dir.clone(), base: ddlink::prelink::random_base()? };
    let opts = ddlink::write::WriteOptions { prelink: Some(prelink), portable: true };
    ddlink::write::write(&rec, &loader, &program, &skip_cache, &opts)?;
    let images = ddlink::run::overlay_files(&dir)
        .into_iter()
        .map(|i| {
            let original = Path::new("/").join(i.strip_prefix(&dir).expect("under the images' directory"));
            (i, original)
        })
        .collect();
    Ok(Prepared { loader, program, args, files, file_read_cache, skip_cache, images, starts: spec.starts })
}

/// The program, the patched ld.so and the libraries it loads for it
/// (`ld.so --list`, with no `LD_*` variable inherited).
fn closure(loader: &Path, program: &Path) -> Result<Vec<PathBuf>> {
    let mut cmd = Command::new(loader);
    cmd.arg("--list").arg(program);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("LD_") {
            cmd.env_remove(k);
        }
    }
    let out = bootlink::hosttool::run(&mut cmd, "listing the program's libraries under the patched ld.so", "libc-bin")
        .map_err(|e| e.at(program))?;
    let mut files = vec![program.to_path_buf(), loader.to_path_buf()];
    for f in crate::lab::userspace::listed_files(&out) {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    Ok(files)
}

/// Put the files, the caches and the images into the initramfs.
pub(crate) fn add_to(ir: &mut Initramfs, p: &Prepared) {
    for f in &p.files {
        ir.copy_file_timed(&f.to_string_lossy(), f);
    }
    ir.copy_file_timed(FILE_READ_CACHE, &p.file_read_cache);
    ir.copy_file_timed(SKIP_CACHE, &p.skip_cache);
    for (image, original) in &p.images {
        ir.copy_file_timed(&format!("{IMAGES}{}", original.display()), image);
    }
}

/// A word for the guest's shell, single-quoted.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `LD.SO PROGRAM ARGS`, quoted for the shell.
fn command(p: &Prepared) -> String {
    let mut words = vec![quote(&p.loader.to_string_lossy()), quote(&p.program.to_string_lossy())];
    words.extend(p.args.iter().map(|a| quote(a)));
    words.join(" ")
}

/// The part of /init that starts the program: `starts` rounds of the three
/// modes (interleaved, so that the modes share whatever drifts during the
/// boot), then the section with every start's output and debug text.
pub fn script(p: &Prepared) -> String {
    let mut s = format!("mkdir -p {SCRATCH}\n");
    s.push_str("ddl_bind() {\n");
    for (_, original) in &p.images {
        let o = original.to_string_lossy();
        s.push_str(&format!(
            "  mount -o bind {} {} || echo \"bootlink: ddlink cannot bind {o}\"\n",
            quote(&format!("{IMAGES}{o}")),
            quote(&o)
        ));
    }
    s.push_str("  :\n}\nddl_unbind() {\n");
    for (_, original) in &p.images {
        s.push_str(&format!("  umount {}\n", quote(&original.to_string_lossy())));
    }
    s.push_str("  :\n}\n");
    // mode, round, cache
    s.push_str(&format!(
        "ddl_start() {{\n  echo \"bootlink: ddlink start $1 $2\" > /dev/kmsg\n  \
         LD_DDLINK=$3 LD_DEBUG=statistics,ddlink LD_DEBUG_OUTPUT={SCRATCH}/debug.$1.$2 {} > {SCRATCH}/out.$1.$2 2>&1 < /dev/null\n  \
         echo \"bootlink: ddlink end $1 $2 $?\" > /dev/kmsg\n}}\n",
        command(p)
    ));
    s.push_str(&format!(
        "for k in $(seq 0 {}); do\n  ddl_start normal $k /nonexistent\n  ddl_start file-read $k {FILE_READ_CACHE}\n  \
         ddl_bind\n  ddl_start skip $k {SKIP_CACHE}\n  ddl_unbind\ndone\n",
        p.starts - 1
    ));
    s.push_str(&format!(
        "echo '{SECTION}'\nfor k in $(seq 0 {}); do\n  for m in {}; do\n    echo \"@@ start $m $k\"\n    \
         cat {SCRATCH}/out.$m.$k\n    echo '@@ debug'\n    cat {SCRATCH}/debug.$m.$k.* 2>/dev/null\n  done\ndone\necho '{END}'\n",
        p.starts - 1,
        USER_MODES.join(" ")
    ));
    s
}

/// The command line a [`DdlinkStarts`] records.
pub fn label(p: &Prepared) -> String {
    let mut words = vec![p.loader.display().to_string(), p.program.display().to_string()];
    words.extend(p.args.iter().cloned());
    words.join(" ")
}

/// A number after `key` on a line of ld.so's statistics ("...: 123 cycles").
/// The guest's TSC rate from the kernel log: the last of "tsc: Detected
/// N MHz processor" and "tsc: Refined TSC clocksource calibration: N MHz".
pub fn tsc_mhz(dmesg_text: &str) -> Option<f64> {
    let mut mhz = None;
    for line in dmesg_text.lines() {
        let Some((_, text)) = dmesg::timed_message(line.as_bytes()) else { continue };
        let text = String::from_utf8_lossy(text);
        let rest = text
            .strip_prefix("tsc: Detected ")
            .or_else(|| text.strip_prefix("tsc: Refined TSC clocksource calibration: "));
        if let Some(v) = rest.and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<f64>().ok()) {
            mhz = Some(v);
        }
    }
    mhz
}

/// The starts of one boot: the section /init printed (`main`, the framed
/// console output) and the markers in the kernel log. None when the boot
/// printed no section.
pub fn parse(main: &str, dmesg_text: &str) -> Option<DdlinkStarts> {
    let (_, rest) = main.split_once(SECTION)?;
    let text = rest.split_once(END).map(|(a, _)| a).unwrap_or(rest);
    let mhz = tsc_mhz(dmesg_text);
    // Printed parts per (mode, round): output and debug text.
    let mut printed: Vec<(String, usize, String, String)> = Vec::new();
    let mut in_debug = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("@@ start ") {
            let mut w = rest.split_whitespace();
            if let (Some(m), Some(Ok(k))) = (w.next(), w.next().map(str::parse)) {
                printed.push((m.to_string(), k, String::new(), String::new()));
                in_debug = false;
                continue;
            }
        }
        let Some(cur) = printed.last_mut() else { continue };
        if line == "@@ debug" {
            in_debug = true;
        } else if in_debug {
            cur.3.push_str(line);
            cur.3.push('\n');
        } else {
            cur.2.push_str(line);
            cur.2.push('\n');
        }
    }
    let mut starts: Vec<DdlinkStart> = crate::run::dmesg::marked_starts(dmesg_text, "bootlink: ddlink ")
        .into_iter()
        .map(|(start, _)| DdlinkStart { start, ..Default::default() })
        .collect();
    // ld.so prints cycles (rdtsc) with the last digit dropped (glibc 2.36).
    let us = |cycles: Option<u64>| Some(cycles? as f64 * 10.0 / mhz?);
    for s in &mut starts {
        let Some((_, _, out, debug)) = printed.iter().find(|p| p.0 == s.mode && p.1 == s.index) else { continue };
        s.output = out.trim_end_matches('\n').to_string();
        s.loader_us = us(stat_value(debug, "total startup time in dynamic loader:"));
        s.relocation_us = us(stat_value(debug, "time needed for relocation:"));
        s.load_objects_us = us(stat_value(debug, "time needed to load objects:"));
        s.lookups = stat_value(debug, "final number of relocations:");
        s.decision = ddlink::run::ddlink_lines(debug).map(str::trim).collect::<Vec<_>>().join("; ");
    }
    Some(DdlinkStarts { command: String::new(), tsc_mhz: mhz, starts })
}

/// What a boot's starts must show: every mode `starts` times, each exited
/// 0, File Read Mode and Skip Mode taken by the loader (its decision line),
/// the same output in every start. One line per problem.
pub fn problems(u: &DdlinkStarts, starts: usize) -> Vec<String> {
    let mut out = Vec::new();
    for mode in USER_MODES {
        let n = u.starts.iter().filter(|s| s.mode == *mode).count();
        if n != starts {
            out.push(format!("ddlink {mode}: {n} of {starts} starts measured"));
        }
    }
    let want = |mode: &str| match mode {
        "file-read" => Some("file-read mode"),
        "skip" => Some("skip mode"),
        _ => None,
    };
    for s in &u.starts {
        if s.exit != 0 {
            out.push(format!("ddlink {} #{}: the program exited {}", s.mode, s.index + 1, s.exit));
        }
        if let Some(w) = want(&s.mode)
            && !s.decision.split("; ").any(|d| d.starts_with(w))
        {
            let why = if s.decision.is_empty() { "no DDLink decision printed" } else { &s.decision };
            out.push(format!("ddlink {} #{}: the loader did not use the cache: {why}", s.mode, s.index + 1));
        }
        if s.relocation_us.is_none() {
            out.push(format!("ddlink {} #{}: no relocation time from ld.so's statistics", s.mode, s.index + 1));
        }
    }
    if let Some(first) = u.starts.first()
        && let Some(d) = u.starts.iter().find(|s| s.output != first.output)
    {
        out.push(format!(
            "ddlink {} #{}: output differs from {} #{}",
            d.mode,
            d.index + 1,
            first.mode,
            first.index + 1
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = "TAINTED 0
@@@ bootlink ddlink @@@
@@ start normal 0
checksum 1
@@ debug
     71:\tddlink: normal loading: /nonexistent: no cache
     71:\t
     71:\truntime linker statistics:
     71:\t  total startup time in dynamic loader: 2595478 cycles
     71:\t            time needed for relocation: 2376977 cycles (91.5%)
     71:\t                 number of relocations: 37913
     71:\t           time needed to load objects: 179393 cycles (6.9%)
     71:\t           final number of relocations: 40740
@@ start file-read 0
checksum 1
@@ debug
     72:\tddlink: file-read mode: 15 objects, 51198 bindings from /bootlink-ddlink/file-read.cache
     72:\t            time needed for relocation: 482194 cycles (66.4%)
     72:\t           final number of relocations: 48
@@ start skip 0
checksum 2
@@ debug
@@@ bootlink ddlink end @@@
";
    const DMESG: &str = "[    0.000000] tsc: Detected 999.993 MHz processor
[    0.000000] tsc: Refined TSC clocksource calibration: 1000.000 MHz
[    1.000000] bootlink: ddlink start normal 0
[    1.040000] bootlink: ddlink end normal 0 0
[    1.050000] bootlink: ddlink start file-read 0
[    1.060000] bootlink: ddlink end file-read 0 0
[    1.070000] bootlink: ddlink start skip 0
[    1.075000] bootlink: ddlink end skip 0 1
";

    #[test]
    fn starts_come_from_the_markers_and_the_section() {
        let u = parse(MAIN, DMESG).unwrap();
        assert_eq!(u.tsc_mhz, Some(1000.0));
        let got: Vec<(&str, usize, f64, f64, i32)> =
            u.starts.iter().map(|s| (s.mode.as_str(), s.index, s.start_us, s.duration_us, s.exit)).collect();
        assert_eq!(
            got,
            [
                ("normal", 0, 1_000_000.0, 40_000.0, 0),
                ("file-read", 0, 1_050_000.0, 10_000.0, 0),
                ("skip", 0, 1_070_000.0, 5_000.0, 1)
            ]
        );
        let n = &u.starts[0];
        // 2,376,977 cycles printed, 10x that at 1000 MHz.
        assert_eq!(n.relocation_us, Some(23_769.77));
        assert_eq!(n.loader_us, Some(25_954.78));
        assert_eq!(n.load_objects_us, Some(1_793.93));
        assert_eq!(n.lookups, Some(40_740));
        assert_eq!(n.decision, "normal loading: /nonexistent: no cache");
        assert_eq!(n.output, "checksum 1");
        assert!(u.starts[1].decision.starts_with("file-read mode: 15 objects"));
        assert_eq!(u.starts[1].lookups, Some(48));
        let p = problems(&u, 1);
        assert!(p.iter().any(|p| p.contains("skip #1: the program exited 1")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("skip #1: the loader did not use the cache: no DDLink")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("skip #1: output differs from normal #1")), "{p:?}");
        assert!(!p.iter().any(|p| p.contains("file-read")), "{p:?}");
        assert!(problems(&u, 2).iter().any(|p| p == "ddlink normal: 1 of 2 starts measured"));
        assert!(parse("no section", DMESG).is_none());
    }

    #[test]
    fn specs() {
        assert_eq!(Spec::parse("synth").unwrap().program, Program::Synth { symbols: DEFAULT_SYMBOLS });
        assert_eq!(Spec::parse("synth-9000").unwrap().program, Program::Synth { symbols: 9000 });
        assert_eq!(
            Spec::parse("/usr/bin/llc-14 --version").unwrap().program,
            Program::Host { path: "/usr/bin/llc-14".into(), args: vec!["--version".into()] }
        );
        assert!(Spec::parse("synth-x").unwrap_err().to_string().contains("number of symbols"));
        assert!(Spec::parse("llc").unwrap_err().to_string().contains("absolute path"));
    }

    #[test]
    fn the_script_brackets_every_start() {
        let p = Prepared {
            loader: "/p/ld.so".into(),
            program: "/c/synth-main".into(),
            args: vec!["it's".into()],
            files: Vec::new(),
            file_read_cache: "/w/fr".into(),
            skip_cache: "/w/sk".into(),
            images: vec![("/w/images/c/lib0.so".into(), "/c/lib0.so".into())],
            starts: 2,
        };
        let s = script(&p);
        for want in [
            "mount -o bind '/bootlink-ddlink/images/c/lib0.so' '/c/lib0.so'",
            "umount '/c/lib0.so'",
            "'/p/ld.so' '/c/synth-main' 'it'\\''s'",
            "for k in $(seq 0 1)",
            "ddl_start file-read $k /bootlink-ddlink/file-read.cache",
            "echo \"bootlink: ddlink end $1 $2 $?\" > /dev/kmsg",
        ] {
            assert!(s.contains(want), "{want} not in\n{s}");
        }
    }
}
