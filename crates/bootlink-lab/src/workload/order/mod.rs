//! Function reordering in the lab: a program as linked (GNU ld, unordered)
//! and relinked by GNU ld with its startup order, started cold from a
//! SquashFS image on an emulated slow flash device inside the guest. The
//! program is the synthetic one (`order:synth`: `bootlink order
//! synth`, 10,000 small functions, 1,000 run at startup) or the real one
//! (`order:python`: `bootlink order python`, CPython 3.11 from Debian's
//! source in its installed layout, `python -c "print(42)"`), which also
//! starts the build ordered from a record under qemu-x86_64 (no rebuild)
//! and BOLT's rewrite of the same build (its own profile of the same
//! start-up). The programs go into the image as built
//! (`strip` breaks BOLT's output: it cannot place BOLT's new segment).
//!
//! The device is `null_blk` (memory_backed=1, irqmode=2): every request
//! completes on a guest hrtimer after `completion_nsec`, and `mbps` limits
//! its throughput with a guest timer too, so under `-icount` the delays
//! are guest time and the run stays deterministic (QEMU's own throttling
//! runs on host time). One device per SquashFS block size, each holding an
//! image with both programs.
//!
//! In the guest, before each start: the image is mounted afresh (no
//! SquashFS cache carried over), `read_ahead_kb` set (0, or the device's
//! default), the page cache dropped. Each start is bracketed by kernel log
//! markers (`bootlink: order start MODE K`, `... end MODE K`), so it sits on
//! the kernel's timeline; the shell that starts it prints its children's
//! fault counts (`/proc/$$/stat`: cminflt, cmajflt) and the device's
//! `/sys/block/DEV/stat` before and after (requests and sectors read).
//! A mode is `BUILD/BLOCKk/raN`, BUILD `unordered`, `reordered`, `qemu`,
//! `reordered+data` (the function order and the data order, issue 29),
//! `bolt` or `bolt+data` (BOLT on the link with the data order), `pgo`
//! (GCC's profile-guided build, its hot/cold split, linked as make links
//! it) or `pgo+data` (that build with the function order recorded from it
//! under QEMU and the data order: no BOLT).

pub mod chart;
pub mod record;
pub mod table;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::lab::Initramfs;
use crate::workload::order::record::{OrderStart, OrderStarts};
use bootlink::error::{Error, Kind, Result};

pub const SECTION: &str = "@@@ bootlink order @@@";
pub const END: &str = "@@@ bootlink order end @@@";
/// Where the images and modules go in the guest.
const DIR: &str = "/bootlink-order";
const SCRATCH: &str = "/tmp/bootlink-order";
const MNT: &str = "/mnt/bootlink-order";
/// SquashFS block sizes the lab knows (KiB).
pub(crate) const BLOCKS: [u32; 3] = [4, 64, 128];
/// Starts per mode per boot.
pub(crate) const DEFAULT_STARTS: usize = 2;
/// The program of an `order:` variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Synth,
    Python,
}

impl Program {
    fn name(self) -> &'static str {
        match self {
            Program::Synth => "synth",
            Program::Python => "python",
        }
    }
}

/// The emulated flash: throughput and per-request latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flash {
    /// MiB/s (null_blk's `mbps`), at least 1.
    pub mib_s: u32,
    /// Microseconds per request (null_blk's `completion_nsec` / 1000).
    pub latency_us: u32,
}

impl Flash {
    /// Slow flash behind a small CPU (the default): 657 -> 157 ms for
    /// 11 -> 2 blocks of 64 KiB is ~55 ms per block, ~1.2 MB/s from flash
    /// through SquashFS on a 500 MHz MIPS set-top box; null_blk's unit is
    /// 1 MiB/s. 100 us per request is a raw NAND page read (tR 25-50 us)
    /// plus the controller.
    pub(crate) const SLOW: Flash = Flash { mib_s: 1, latency_us: 100 };
    /// A faster raw NAND behind a DMA controller (ONFI SDR: ~20 MB/s raw;
    /// 8 MiB/s after ECC and the MTD stack), 50 us per page read.
    pub(crate) const NAND: Flash = Flash { mib_s: 8, latency_us: 50 };
    /// Parallel NOR read through a memory controller without burst mode
    /// (an embedded board with JFFS2/SquashFS on NOR): ~4 MiB/s, 5 us per request.
    pub(crate) const NOR: Flash = Flash { mib_s: 4, latency_us: 5 };

    /// How long the device takes for one request of [`REQUEST`] bytes.
    pub(crate) fn request_ns(self) -> u64 {
        u64::from(self.latency_us) * 1000 + REQUEST * 1_000_000_000 / (u64::from(self.mib_s) << 20)
    }

    /// `slow`, `nand`, `nor` or `MIBS-USEC` (e.g. `2-100`).
    pub fn parse(value: &str) -> Result<Flash> {
        match value {
            "slow" => return Ok(Flash::SLOW),
            "nand" => return Ok(Flash::NAND),
            "nor" => return Ok(Flash::NOR),
            _ => {}
        }
        let bad = || {
            Error::new(
                Kind::Usage,
                format!("flash:{value}: give slow, nand, nor or MIBS-USEC (MiB/s 1..10000, latency 0..100000 us)"),
            )
        };
        let (a, b) = value.split_once('-').ok_or_else(bad)?;
        let mib_s: u32 = a.parse().ok().filter(|n| (1..=10_000).contains(n)).ok_or_else(bad)?;
        let latency_us: u32 = b.parse().ok().filter(|n| *n <= 100_000).ok_or_else(bad)?;
        Ok(Flash { mib_s, latency_us })
    }
}

/// The device serves requests of at most this many bytes, one at a time
/// (null_blk's `mbps` throttle stalled the guest under -icount; a queue of
/// depth 1 with 4 KiB requests that each take latency + 4 KiB / throughput
/// is the same model on one guest timer, and is how raw flash reads: a page
/// at a time).
pub const REQUEST: u64 = 4096;

/// `order:...` of a lab variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub program: Program,
    /// SquashFS block sizes (KiB), each a device and an image.
    pub blocks: Vec<u32>,
    pub flash: Flash,
    pub starts: usize,
}

impl Spec {
    /// `PROGRAM` (every block size of [`BLOCKS`]) or `PROGRAM-BLOCKk[+BLOCKk...]`,
    /// PROGRAM `synth` or `python`.
    pub fn parse(value: &str) -> Result<Spec> {
        let (name, list) = value.split_once('-').map_or((value, None), |(n, l)| (n, Some(l)));
        let program = match name {
            "synth" => Program::Synth,
            "python" => Program::Python,
            _ => {
                return Err(Error::new(
                    Kind::Usage,
                    format!(
                        "order:{value}: give synth or python, or PROGRAM-BLOCK (4k, 64k, 128k; several joined by +)"
                    ),
                ));
            }
        };
        let blocks = match list {
            None => BLOCKS.to_vec(),
            Some(list) => {
                let mut blocks = Vec::new();
                for b in list.split('+') {
                    let n = b.strip_suffix('k').and_then(|n| n.parse::<u32>().ok()).filter(|n| BLOCKS.contains(n));
                    let Some(n) = n else {
                        let msg = format!("order:{value}: block size {b:?}: use 4k, 64k or 128k");
                        return Err(Error::new(Kind::Usage, msg));
                    };
                    if !blocks.contains(&n) {
                        blocks.push(n);
                    }
                }
                blocks
            }
        };
        Ok(Spec { program, blocks, flash: Flash::SLOW, starts: DEFAULT_STARTS })
    }
}

/// The emulated flash device's modules, in load order (null_blk needs configfs).
pub(crate) const FLASH_MODULES: [(&str, &str); 2] =
    [("configfs", "kernel/fs/configfs/configfs.ko"), ("null_blk", "kernel/drivers/block/null_blk/null_blk.ko")];

/// The kernel modules the guest needs, in load order.
const MODULES: [(&str, &str); 3] = [FLASH_MODULES[0], FLASH_MODULES[1], ("squashfs", "kernel/fs/squashfs/squashfs.ko")];

/// Before anything is built or booted: the tools on the host and the
/// modules in the variant's tree (uncompressed; a built-in one is fine when
/// `modules.builtin` names it).
pub fn check(tree: &Path) -> Result<Vec<(String, PathBuf)>> {
    if !bootlink::hosttool::exists("mksquashfs") {
        return Err(Error::new(Kind::Usage, "order: mksquashfs not found (apt-get install squashfs-tools)"));
    }
    guest_modules(tree, &MODULES, "order")
}

/// Of `wanted` (name, path in the tree), the module files the guest loads:
/// each a file of `tree`, or built in as `modules.builtin` says; `what`
/// names the workload in the refusal.
pub(crate) fn guest_modules(tree: &Path, wanted: &[(&str, &str)], what: &str) -> Result<Vec<(String, PathBuf)>> {
    let builtin = std::fs::read_to_string(tree.join("modules.builtin")).unwrap_or_default();
    let mut out = Vec::new();
    for (name, rel) in wanted {
        let p = tree.join(rel);
        if p.is_file() {
            out.push((name.to_string(), p));
        } else if !builtin.lines().any(|l| l == *rel) {
            return Err(Error::file(
                Kind::Usage,
                &p,
                format!("{what}: the kernel has no {name} module (uncompressed) and does not build it in"),
            ));
        }
    }
    Ok(out)
}

/// The line that loads null_blk as the emulated flash: `devices` devices
/// of 1 GiB in memory, 4 KiB blocks, each request completing after the
/// flash's request time on a guest timer, one at a time.
pub(crate) fn null_blk_params(devices: usize, flash: Flash) -> String {
    format!(
        " nr_devices={devices} gb=1 bs=4096 memory_backed=1 irqmode=2 completion_nsec={} hw_queue_depth=1 submit_queues=1",
        flash.request_ns(),
    )
}

/// What the guest needs, made on the host.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// (name, binary on the host) of each build, in the order they are
    /// started; the first is the unordered one. In the image: `bin/NAME`.
    pub builds: Vec<(String, PathBuf)>,
    /// The arguments of every start (no shell quoting needed: see [`script`]).
    pub args: Vec<String>,
    /// The unordered program's ld.so and libraries (the others' are the same).
    pub files: Vec<PathBuf>,
    /// (block size KiB, SquashFS image with every build).
    pub images: Vec<(u32, PathBuf)>,
    /// (name, file) of the modules /init loads.
    pub modules: Vec<(String, PathBuf)>,
    pub flash: Flash,
    pub starts: usize,
    /// What each build printed on the host.
    pub output: String,
    pub program: Program,
}

/// Build (cached) the variant's program and its relinks, check that every
/// build prints the same, and make one SquashFS image per block size with
/// the builds under `bin/` (and python's library beside it).
pub(crate) fn prepare(spec: &Spec, tree: &Path, work: &Path) -> Result<Prepared> {
    let modules = check(tree)?;
    let root = work.join("root");
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    }
    let (builds, args, output) = match spec.program {
        Program::Synth => {
            let report = bootlink::order::case::synth_case(&Default::default())?;
            let relinked = gnu_relink(&report.relinked)?.to_path_buf();
            let unordered = report.case.program.clone();
            let output = String::from_utf8_lossy(
                &Command::new(&unordered).output().map_err(|e| Error::io(&unordered, e))?.stdout,
            )
            .trim_end()
            .to_string();
            std::fs::create_dir_all(root.join("bin")).map_err(|e| Error::io(&root, e))?;
            let mut builds = vec![("unordered".to_string(), unordered), ("reordered".to_string(), relinked)];
            if let Some(d) = &report.data {
                builds.push(("reordered+data".to_string(), data_relink(d)?.to_path_buf()));
            }
            (builds, Vec::new(), output)
        }
        Program::Python => {
            let report = bootlink::order::case::python_case()?;
            let mut builds = vec![
                ("unordered".to_string(), report.build.plain.clone()),
                ("reordered".to_string(), gnu_relink(&report.relinked)?.to_path_buf()),
            ];
            if let Some(q) = &report.qemu {
                let p = same_output(
                    &q.relinked.program,
                    q.relinked.output_identical,
                    "the build ordered from QEMU's record",
                )?;
                builds.push(("qemu".to_string(), p.to_path_buf()));
            }
            if let Some(d) = &report.data {
                builds.push(("reordered+data".to_string(), data_relink(d)?.to_path_buf()));
            }
            if let Some(b) = &report.bolt {
                builds.push((
                    "bolt".to_string(),
                    same_output(&b.program, b.output_identical, "BOLT's rewrite")?.to_path_buf(),
                ));
            }
            if let Some(b) = &report.bolt_data {
                let p = same_output(&b.program, b.output_identical, "BOLT's rewrite of the link with the data order")?;
                builds.push(("bolt+data".to_string(), p.to_path_buf()));
            }
            if let Some(p) = &report.pgo {
                builds.push(("pgo".to_string(), p.build.python.clone()));
                let r = &p.relinked;
                let what = "GCC's profile-guided build with the function and data order";
                builds.push(("pgo+data".to_string(), same_output(&r.program, r.output_identical, what)?.to_path_buf()));
            }
            bootlink::fsutil::copy_tree(&report.build.root, &root)?;
            let args: Vec<String> = bootlink::order::python::ARGS.iter().map(|a| a.to_string()).collect();
            (builds, args, report.output.clone())
        }
    };
    for (name, src) in &builds {
        let to = root.join("bin").join(name);
        let _ = std::fs::remove_file(&to);
        std::fs::copy(src, &to).map_err(|e| Error::io(src, e))?;
    }
    let files: Vec<PathBuf> = crate::lab::userspace::closure(&builds[0].1)?.into_iter().skip(1).collect();
    let mut images = Vec::new();
    for &b in &spec.blocks {
        let img = work.join(format!("order-{b}k.sqfs"));
        let _ = std::fs::remove_file(&img);
        let mut cmd = Command::new("mksquashfs");
        cmd.arg(&root).arg(&img).args(["-b", &(b * 1024).to_string()]);
        cmd.args(["-noappend", "-all-root", "-quiet", "-no-progress", "-mkfs-time", "0", "-all-time", "0"]);
        bootlink::hosttool::run(&mut cmd, "making the SquashFS image", "squashfs-tools")?;
        images.push((b, img));
    }
    Ok(Prepared {
        builds,
        args,
        files,
        images,
        modules,
        flash: spec.flash,
        starts: spec.starts,
        output,
        program: spec.program,
    })
}

/// GNU ld's relink (the unordered build is GNU ld's too), which must print
/// what the unordered one prints.
fn gnu_relink(relinked: &[bootlink::order::case::Relinked]) -> Result<&Path> {
    let r = relinked
        .iter()
        .find(|r| r.linker == "ld.bfd")
        .ok_or_else(|| Error::new(Kind::Unsupported, "order: GNU ld's relink of the program is missing"))?;
    same_output(&r.program, r.output_identical, "the relinked program")
}

/// GNU ld's link with the function and the data order, which must print
/// what the unordered build prints.
fn data_relink(d: &bootlink::order::case::DataOrder) -> Result<&Path> {
    let r = d
        .relinked
        .iter()
        .find(|r| r.relinked.linker == "ld.bfd")
        .ok_or_else(|| Error::new(Kind::Unsupported, "order: GNU ld's link with the data order is missing"))?;
    same_output(&r.relinked.program, r.relinked.output_identical, "the link with the data order")
}

/// `program` when it printed what the unordered build prints (`identical`).
fn same_output<'a>(program: &'a Path, identical: bool, what: &str) -> Result<&'a Path> {
    if !identical {
        return Err(Error::file(Kind::Internal, program, format!("order: {what} prints something else")));
    }
    Ok(program)
}

/// Put the libraries, the images and the modules into the initramfs.
pub(crate) fn add_to(ir: &mut Initramfs, p: &Prepared) {
    for f in &p.files {
        ir.copy_file(&f.to_string_lossy(), f);
    }
    for (b, img) in &p.images {
        ir.copy_file(&format!("{DIR}/order-{b}k.sqfs"), img);
    }
    for (name, f) in &p.modules {
        ir.copy_file(&format!("{DIR}/{name}.ko"), f);
    }
}

/// The mode of one start.
pub fn mode(build: &str, block_kib: u32, ra_kib: u32) -> String {
    format!("{build}/{block_kib}k/ra{ra_kib}")
}

/// Time to UI: each start's program writes its output (stdout and stderr)
/// into a FIFO read by this function, which writes a kernel log marker
/// (`bootlink: order ui MODE K`) when the first line arrives and passes the
/// output on. The reader is a child of the script's shell, not of the shell
/// that starts the program, whose cminflt/cmajflt count the program's
/// faults: its own faults are not counted. Builtins only (read, echo,
/// printf, test), so nothing is forked or executed while the program runs;
/// the end marker waits for it, so the UI mark lies between the start's
/// markers. Arguments: mode, round.
const UI_READER: &str = "ord_ui() {
  l=
  if IFS= read -r l || [ -n \"$l\" ]; then
    echo \"bootlink: order ui $1 $2\" > /dev/kmsg
    printf '%s\\n' \"$l\"
    while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done
  fi
}
";

/// The part of /init that loads the modules, fills one device per block
/// size, then starts both builds cold in every (block size, readahead)
/// cell, `starts` rounds, and prints the section [`parse`] reads.
pub fn script(p: &Prepared) -> String {
    // Inside sh -c '...': each argument double-quoted (prepare's arguments
    // have no quote, backslash, dollar or backquote).
    let args: String = p.args.iter().map(|a| format!(" \"{a}\"")).collect();
    // The processes are recorded by every lab boot (crate::lab::procs).
    let mut s = format!("mkdir -p {SCRATCH} {MNT}\nmknod {SCRATCH}/ui p\n");
    s.push_str(UI_READER);
    for (name, _) in &p.modules {
        let params = if name == "null_blk" { null_blk_params(p.images.len(), p.flash) } else { String::new() };
        s.push_str(&format!("insmod {DIR}/{name}.ko{params} || echo 'bootlink: order cannot load {name}'\n"));
    }
    for (i, (b, _)) in p.images.iter().enumerate() {
        s.push_str(&format!("echo {} > /sys/block/nullb{i}/queue/max_sectors_kb\n", REQUEST / 1024));
        s.push_str(&format!("dd if={DIR}/order-{b}k.sqfs of=/dev/nullb{i} bs=65536 conv=fsync 2>/dev/null\n"));
    }
    s.push_str("ORD_RA=$(cat /sys/block/nullb0/queue/read_ahead_kb)\n");
    // device, mode, round, build
    s.push_str(&format!(
        "ord_start() {{\n  mount -t squashfs -o ro /dev/$1 {MNT} || echo \"bootlink: order cannot mount $1\"\n  \
         echo 3 > /proc/sys/vm/drop_caches\n  read s0 < /sys/block/$1/stat\n  \
         ord_ui $2 $3 < {SCRATCH}/ui > {SCRATCH}/out &\n  \
         echo \"bootlink: order start $2 $3\" > /dev/kmsg\n  \
         sh -c 'env -i HOME=/ PATH=/bin:/sbin {MNT}/bin/'$4'{args} > {SCRATCH}/ui 2>&1 < /dev/null; echo \"exit $?\"; read l < /proc/$$/stat; echo \"stat $l\"' > {SCRATCH}/res 2>&1\n  \
         wait $!\n  \
         echo \"bootlink: order end $2 $3\" > /dev/kmsg\n  read s1 < /sys/block/$1/stat\n  umount {MNT}\n  \
         echo \"@@ start $2 $3\" >> {SCRATCH}/all\n  echo \"dev0 $s0\" >> {SCRATCH}/all\n  echo \"dev1 $s1\" >> {SCRATCH}/all\n  \
         cat {SCRATCH}/res {SCRATCH}/out >> {SCRATCH}/all\n}}\n"
    ));
    s.push_str(&format!(": > {SCRATCH}/all\nfor k in $(seq 0 {}); do\n", p.starts - 1));
    for (i, (b, _)) in p.images.iter().enumerate() {
        s.push_str(&format!(
            "  for ra in 0 $ORD_RA; do\n    echo $ra > /sys/block/nullb{i}/queue/read_ahead_kb\n    \
             for build in {}; do ord_start nullb{i} $build/{b}k/ra$ra $k $build; done\n  done\n",
            p.builds.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" ")
        ));
    }
    s.push_str(&format!("done\necho '{SECTION}'\ncat {SCRATCH}/all\necho '{END}'\n"));
    s
}

/// The command an [`OrderStarts`] records.
pub fn label(p: &Prepared) -> String {
    let builds: Vec<String> = p.builds.iter().map(|(n, f)| format!("{n} {}", f.display())).collect();
    let args = if p.args.is_empty() { String::new() } else { format!(" {}", p.args.join(" ")) };
    format!(
        "{}{args}: {} from SquashFS on null_blk ({} MiB/s, {} us/request)",
        p.program.name(),
        builds.join(" vs "),
        p.flash.mib_s,
        p.flash.latency_us
    )
}

/// Per start: (output, exit, minor, major, read requests, read bytes).
#[derive(Default)]
struct Printed {
    mode: String,
    index: usize,
    dev0: Vec<u64>,
    dev1: Vec<u64>,
    exit: i32,
    stat: Vec<String>,
    output: String,
}

/// The starts of one boot, or None when /init printed no section.
pub fn parse(main: &str, dmesg_text: &str) -> Option<OrderStarts> {
    let (_, rest) = main.split_once(SECTION)?;
    let text = rest.split_once(END).map(|(a, _)| a).unwrap_or(rest);
    let mut printed: Vec<Printed> = Vec::new();
    let nums = |s: &str| s.split_whitespace().filter_map(|w| w.parse().ok()).collect::<Vec<u64>>();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("@@ start ") {
            let mut w = rest.split_whitespace();
            if let (Some(m), Some(Ok(k))) = (w.next(), w.next().map(str::parse)) {
                printed.push(Printed { mode: m.to_string(), index: k, exit: -1, ..Default::default() });
                continue;
            }
        }
        let Some(cur) = printed.last_mut() else { continue };
        if let Some(r) = line.strip_prefix("dev0 ") {
            cur.dev0 = nums(r);
        } else if let Some(r) = line.strip_prefix("dev1 ") {
            cur.dev1 = nums(r);
        } else if let Some(r) = line.strip_prefix("exit ").filter(|_| cur.stat.is_empty()) {
            cur.exit = r.trim().parse().unwrap_or(-1);
        } else if let Some(r) = line.strip_prefix("stat ").filter(|_| cur.stat.is_empty()) {
            cur.stat = r.split_whitespace().map(str::to_string).collect();
        } else {
            cur.output.push_str(line);
            cur.output.push('\n');
        }
    }
    let mut starts: Vec<OrderStart> = crate::run::dmesg::marked_starts(dmesg_text, "bootlink: order ")
        .into_iter()
        .map(|(start, ui_us)| OrderStart { start, ui_us, ..Default::default() })
        .collect();
    for s in &mut starts {
        let Some(p) = printed.iter().find(|p| p.mode == s.mode && p.index == s.index) else { continue };
        s.exit = p.exit;
        s.output = p.output.trim_end_matches('\n').to_string();
        // /proc/PID/stat: field 11 cminflt, 13 cmajflt (1-based; comm has no space here).
        let field = |n: usize| p.stat.get(n - 1).and_then(|v| v.parse::<u64>().ok());
        s.minor_faults = field(11);
        s.major_faults = field(13);
        // /sys/block/DEV/stat: read I/Os, read merges, sectors read, ...
        if p.dev0.len() >= 3 && p.dev1.len() >= 3 {
            s.read_requests = Some(p.dev1[0].saturating_sub(p.dev0[0]));
            s.read_bytes = Some(p.dev1[2].saturating_sub(p.dev0[2]) * 512);
        }
    }
    Some(OrderStarts { command: String::new(), starts })
}

/// What a boot's starts must show, from run.json alone: each start exited
/// 0 with the faults and device reads counted, every start printed what the
/// first printed, every mode started as often as the most-started one.
pub(crate) fn problems_alone(u: &OrderStarts) -> Vec<String> {
    let mut out = Vec::new();
    let mut modes: Vec<&str> = Vec::new();
    for s in &u.starts {
        if !modes.contains(&s.mode.as_str()) {
            modes.push(&s.mode);
        }
    }
    let count = |m: &str| u.starts.iter().filter(|s| s.mode == m && s.duration_us > 0.0).count();
    let most = modes.iter().map(|m| count(m)).max().unwrap_or(0);
    for m in &modes {
        if count(m) != most {
            out.push(format!("order {m}: {} of {most} starts measured", count(m)));
        }
    }
    for s in &u.starts {
        if s.exit != 0 {
            out.push(format!("order {} #{}: the program exited {}", s.mode, s.index + 1, s.exit));
        }
        if s.major_faults.is_none() || s.read_bytes.is_none() {
            out.push(format!("order {} #{}: no fault or device counts", s.mode, s.index + 1));
        }
        if !s.output.is_empty() && s.ui_us.is_none() {
            out.push(format!("order {} #{}: printed output but no UI mark", s.mode, s.index + 1));
        }
    }
    if let Some(first) = u.starts.first()
        && let Some(d) = u.starts.iter().find(|s| s.output != first.output)
    {
        out.push(format!("order {} #{}: output differs from {} #{}", d.mode, d.index + 1, first.mode, first.index + 1));
    }
    out
}

/// [`problems_alone`], and: every (block size, readahead, build) measured
/// `starts` times, the output the host printed.
pub fn problems(u: &OrderStarts, p: &Prepared) -> Vec<String> {
    let mut out = problems_alone(u);
    let measured = u.starts.iter().filter(|s| s.duration_us > 0.0).count();
    let want = p.images.len() * 2 * p.builds.len() * p.starts;
    if measured != want {
        out.push(format!("order: {measured} of {want} starts measured"));
    }
    if let Some(s) = u.starts.iter().find(|s| s.exit == 0 && s.output != p.output) {
        out.push(format!(
            "order {} #{}: printed {:?}, not {:?} as on the host",
            s.mode,
            s.index + 1,
            s.output,
            p.output
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = "TAINTED 0
@@@ bootlink order @@@
@@ start unordered/64k/ra0 0
dev0 10 0 200 5 0 0 0 0 0 5 5 0 0 0 0 0 0
dev1 21 0 2000 9 0 0 0 0 0 9 9 0 0 0 0 0 0
exit 0
stat 75 (sh) S 1 1 0 0 -1 4194560 52 120 0 14 0 0 0 0 20 0 1 0 100 1 1 1
checksum 42
@@ start reordered/64k/ra0 0
dev0 21 0 2000
dev1 24 0 2400
exit 0
stat 76 (sh) S 1 1 0 0 -1 4194560 52 90 0 3 0 0 0 0 20 0 1 0 100 1 1 1
checksum 42
@@@ bootlink order end @@@
";
    const DMESG: &str = "[    2.000000] bootlink: order start unordered/64k/ra0 0
[    2.290000] bootlink: order ui unordered/64k/ra0 0
[    2.300000] bootlink: order end unordered/64k/ra0 0
[    2.310000] bootlink: order ui unordered/64k/ra0 0
[    2.400000] bootlink: order start reordered/64k/ra0 0
[    2.450000] bootlink: order end reordered/64k/ra0 0
";

    #[test]
    fn starts_come_from_the_markers_and_the_section() {
        let u = parse(MAIN, DMESG).unwrap();
        let s = &u.starts[0];
        assert_eq!(
            (s.mode.as_str(), s.start_us, s.duration_us, s.exit),
            ("unordered/64k/ra0", 2_000_000.0, 300_000.0, 0)
        );
        assert_eq!((s.minor_faults, s.major_faults), (Some(120), Some(14)));
        assert_eq!((s.read_requests, s.read_bytes), (Some(11), Some(1800 * 512)));
        assert_eq!(s.output, "checksum 42");
        // Time to UI from the start marker; a stray marker after the end is not it.
        assert_eq!(s.ui_us, Some(290_000.0));
        let r = &u.starts[1];
        assert_eq!((r.major_faults, r.read_requests, r.read_bytes), (Some(3), Some(3), Some(400 * 512)));
        assert_eq!(r.ui_us, None);
        let p = Prepared {
            builds: vec![("unordered".into(), "/u".into()), ("reordered".into(), "/r".into())],
            args: vec!["-c".into(), "print(42)".into()],
            program: Program::Python,
            files: Vec::new(),
            images: vec![(64, "/i".into())],
            modules: Vec::new(),
            flash: Flash::SLOW,
            starts: 1,
            output: "checksum 42".into(),
        };
        let pr = problems(&u, &p);
        assert_eq!(pr, ["order reordered/64k/ra0 #1: printed output but no UI mark", "order: 2 of 4 starts measured"]);
        assert!(parse("nothing", DMESG).is_none());
    }

    #[test]
    fn specs() {
        assert_eq!(Spec::parse("synth").unwrap().blocks, [4, 64, 128]);
        assert_eq!(Spec::parse("synth-64k+4k").unwrap().blocks, [64, 4]);
        assert!(Spec::parse("synth-32k").unwrap_err().to_string().contains("block size \"32k\": use 4k, 64k or 128k"));
        assert!(Spec::parse("/bin/ls").unwrap_err().to_string().contains("give synth or python"));
        let py = Spec::parse("python-4k").unwrap();
        assert_eq!((py.program, py.blocks), (Program::Python, vec![4]));
        assert_eq!(Spec::parse("python").unwrap().blocks, [4, 64, 128]);
        assert_eq!(Flash::parse("nand").unwrap(), Flash::NAND);
        assert_eq!(Flash::parse("2-300").unwrap(), Flash { mib_s: 2, latency_us: 300 });
        assert!(Flash::parse("0-1").unwrap_err().to_string().contains("MIBS-USEC"));
        assert!(Flash::parse("fast").is_err());
    }

    #[test]
    fn the_script_drops_the_cache_and_sets_readahead() {
        let p = Prepared {
            builds: vec![("unordered".into(), "/u".into()), ("reordered".into(), "/r".into())],
            args: vec!["-c".into(), "print(42)".into()],
            program: Program::Python,
            files: Vec::new(),
            images: vec![(4, "/a".into()), (64, "/b".into())],
            modules: vec![("configfs".into(), "/c".into()), ("null_blk".into(), "/n".into())],
            flash: Flash::SLOW,
            starts: 2,
            output: String::new(),
        };
        let s = script(&p);
        for want in [
            "insmod /bootlink-order/null_blk.ko nr_devices=2 gb=1 bs=4096 memory_backed=1 irqmode=2 completion_nsec=4006250 hw_queue_depth=1 submit_queues=1",
            "echo 4 > /sys/block/nullb1/queue/max_sectors_kb",
            "dd if=/bootlink-order/order-64k.sqfs of=/dev/nullb1",
            "echo 3 > /proc/sys/vm/drop_caches",
            "echo $ra > /sys/block/nullb1/queue/read_ahead_kb",
            "ord_start nullb0 $build/4k/ra$ra $k $build",
            "for k in $(seq 0 1)",
            "for build in unordered reordered; do",
            "env -i HOME=/ PATH=/bin:/sbin /mnt/bootlink-order/bin/'$4' \"-c\" \"print(42)\" > /tmp/bootlink-order/ui 2>&1 < /dev/null;",
            "mknod /tmp/bootlink-order/ui p",
            "echo \"bootlink: order ui $1 $2\" > /dev/kmsg",
            "ord_ui $2 $3 < /tmp/bootlink-order/ui > /tmp/bootlink-order/out &",
        ] {
            assert!(s.contains(want), "{want} not in\n{s}");
        }
        // The reader starts before the start marker, the end marker waits for it.
        let at = |w: &str| s.find(w).unwrap_or_else(|| panic!("{w} not in\n{s}"));
        assert!(at("ord_ui $2 $3 <") < at("order start $2") && at("order start $2") < at("sh -c 'env -i"));
        assert!(at("sh -c 'env -i") < at("wait $!") && at("wait $!") < at("order end $2"));
        // Every lab boot records the processes (crate::lab::procs): not here again.
        assert!(!s.contains("sched_process") && !s.contains("instances/"), "{s}");
    }

    /// The reader under the host's sh, its marker written to a file.
    fn read_through(input: &str) -> (String, String) {
        let tmp = crate::lab::TempDir::new("order-ui").unwrap();
        let kmsg = tmp.path().join("kmsg");
        std::fs::write(&kmsg, "").unwrap();
        let script =
            format!("{}ord_ui unordered/4k/ra0 1", UI_READER.replace("/dev/kmsg", &kmsg.display().to_string()));
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        (String::from_utf8(out.stdout).unwrap(), std::fs::read_to_string(&kmsg).unwrap())
    }

    #[test]
    fn the_ui_reader_marks_the_first_line_and_passes_the_output_on() {
        let mark = "bootlink: order ui unordered/4k/ra0 1\n";
        assert_eq!(read_through("checksum 42\n"), ("checksum 42\n".into(), mark.into()));
        // Every line, leading blanks and backslashes kept, the last one without its newline too.
        assert_eq!(read_through("  a\\b\n-n\nlast"), ("  a\\b\n-n\nlast\n".into(), mark.into()));
        // An empty first line is output too.
        assert_eq!(read_through("\nx\n"), ("\nx\n".into(), mark.into()));
        // Nothing printed, no mark.
        assert_eq!(read_through(""), (String::new(), String::new()));
    }
}
