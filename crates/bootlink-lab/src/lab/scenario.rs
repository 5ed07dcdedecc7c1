//! A lab scenario: a module set loaded by a real kernel under QEMU, in one
//! or more variants (stock, unsigned, preresolved, folded), N repetitions each,
//! interleaved, with per-module load phases from ftrace. Writes a run
//! directory: run.json (see results.rs) and the raw console logs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::lab::bootclock;
use crate::lab::busybox;
use crate::lab::initramfs::Initramfs;
use crate::lab::procs;
use crate::lab::qemu::{self, BootStatus, QemuOptions};
use crate::run::dmesg;
use crate::run::ftrace as trace;
use crate::run::results::{FORMAT_VERSION, ModuleLoad, Repetition, Run, Variant};
use crate::workload::{self, Console, Context, Workload};
use bootlink::error::{Error, Kind, Result};
use bootlink::kernel::KernelImage;
use bootlink::progress;
use bootlink::steps::{self as step, Tree};

pub use crate::lab::variant::{Loader, VariantSpec};

/// A variant ready to boot: its kernel image and its module files (the
/// set's modules, found by name in that kernel's tree, in the set's order).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub spec: VariantSpec,
    /// The kernel the steps read, and the image QEMU boots unless `boot`
    /// names another (an uncompressed vmlinux boots through PVH).
    pub kernel: PathBuf,
    /// The image QEMU boots instead of `kernel`: a build's bzImage, whose
    /// vmlinux `kernel` is.
    pub boot: Option<PathBuf>,
    /// Module name and file, in load order.
    pub modules: Vec<(String, PathBuf)>,
    /// The module tree they come from (`lib/modules/<release>`) and each
    /// one's path in it, in the same order (for kmod's loaders).
    pub tree: PathBuf,
    pub rels: Vec<String>,
    /// The batch loader's plan for the set, with the paths /init uses.
    pub plan: String,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    /// What the run boots on (architecture, emulator, machine, CPU model,
    /// console); QEMU is started only through it.
    pub target: crate::lab::target::Target,
    /// The run's kernel (variants may boot others).
    pub kernel: PathBuf,
    /// The run's module set on the run's kernel: name and file, in load order.
    pub modules: Vec<(String, PathBuf)>,
    pub module_set: String,
    pub variants: Vec<Prepared>,
    pub repetitions: usize,
    /// -icount shift=0,sleep=off: guest time follows executed instructions.
    pub deterministic: bool,
    /// Virtual CPUs (1 when deterministic).
    pub cpus: u32,
    /// ftrace the load phases (off: only the whole-set and per-insmod times).
    pub trace: bool,
    /// Also boot once without tracing to measure what tracing costs.
    pub measure_overhead: bool,
    pub timeout: Duration,
    pub memory_mib: u32,
    pub out: PathBuf,
    pub extra_cmdline: String,
    /// Boots run at once (1 for realtime runs: they would time each other).
    pub jobs: usize,
}

/// Added for realtime runs with more than one vCPU: no soft-lockup or RCU
/// stall reports for vCPUs the overcommitted host did not schedule; and
/// `tsc=reliable`, so the sched_clock is marked stable before the other
/// vCPUs run. Without it the lab's 6.12 kernel died in 1 of 3 such boots
/// (2026-11-27): sched_clock_init_late() marked the clock stable, the
/// static branch in sched_clock_cpu() was patched (text_poke_bp) while
/// other vCPUs ran under QEMU's multi-threaded TCG, and one of them took
/// the patch's int3 after the patch had finished ("Oops: int3" at
/// sched_clock_cpu+0x9, no module loaded yet); with it, 0 of 8 (other text patches
/// during boot can still meet the hazard, more rarely: docs/loading.md).
pub const REALTIME_SMP_CMDLINE: &str = "nowatchdog rcupdate.rcu_cpu_stall_suppress=1 tsc=reliable";

/// Added for every realtime run: at boot the kernel checks that the
/// IO-APIC delivers the timer interrupt by waiting a number of TSC cycles
/// for a few ticks; in real time under TCG the TSC follows the host, and a
/// host busy elsewhere leaves the vCPU no time to take the ticks, so the
/// kernel panics ("IO-APIC + timer doesn't work!"). KVM guests skip the
/// check the same way. Deterministic runs (-icount) keep it: their TSC
/// counts guest instructions, and their figures stay as measured.
pub(crate) const REALTIME_CMDLINE: &str = "no_timer_check";

/// Every lab boot's command line, after `console=` the target's console.
pub(crate) const BASE_CMDLINE: &str = "nokaslr panic=-1 oops=panic quiet initcall_debug log_buf_len=8M";

const TRACE_SECTION: &str = "@@@ bootlink trace @@@";
const DMESG_SECTION: &str = "@@@ bootlink dmesg @@@";

/// The init body: each workload's part in order (module loading first:
/// ftrace on the landmarks, the loader, the taint; then what starts
/// programs), then the processes, the trace and the kernel log.
fn body(workloads: &[Box<dyn Workload>], traced: bool, procs: bool) -> String {
    let mut s: String = workloads.iter().map(|w| w.script(traced)).collect();
    if procs {
        s.push_str(&procs::stop_and_print());
    }
    if traced {
        s.push_str(&format!("echo '{TRACE_SECTION}'\ncat $T/trace\n"));
    }
    s.push_str(&format!("echo '{DMESG_SECTION}'\ndmesg\n"));
    s
}

/// The load phases are traced: asked for, and every workload lets them.
fn traced(trace: bool, workloads: &[Box<dyn Workload>]) -> bool {
    trace && !workloads.iter().any(|w| w.untraceable())
}

/// What a variant's workloads see of it on the host.
fn context<'a>(
    v: &'a Prepared,
    rels: &'a [(String, PathBuf)],
    files: &'a [(String, PathBuf)],
    work: &'a Path,
    arch: crate::lab::arch::Arch,
    image: &'a Path,
    config: Option<&'a bootlink::kernel::KernelConfig>,
) -> Context<'a> {
    let compression = step::compression(&v.spec.steps);
    Context { variant: &v.spec.name, tree: &v.tree, rels, files, compression, plan: &v.plan, work, arch, image, config }
}

/// The variant's initramfs: busybox, each workload's files, /init.
fn initramfs(workloads: &[Box<dyn Workload>], cx: &Context, traced: bool, tag: &str, dest: &Path) -> Result<()> {
    let mut ir = Initramfs::new(busybox::busybox_for(cx.arch.debian())?);
    ir.tag(tag);
    for w in workloads {
        w.add_files(&mut ir, cx)?;
    }
    // The boot clock first: nothing of the boot's own work before it.
    ir.copy_file(bootclock::GUEST_PATH, bootclock::binary_for(cx.arch)?);
    let procs = procs::recorded(traced, workloads.iter().any(|w| w.starts_programs()));
    let prologue = if procs { procs::start() } else { format!("mount -t tracefs none {}\n", procs::TRACEFS) };
    ir.prologue(&format!("/{}\n{prologue}", bootclock::GUEST_PATH));
    ir.body(&body(workloads, traced, procs));
    ir.write(dest)
}

/// Whether a variant's loads are traced (asked for, and its workloads let them).
pub(crate) fn traced_loads(sc: &Scenario, b: &Built) -> bool {
    traced(sc.trace, &b.workloads)
}

/// Parse one boot's framed output into a repetition: what every boot
/// prints (the kernel log, the loads, the taint), then each workload's part.
/// What the host knows of a variant's module files, for reading its boots.
#[derive(Debug, Default)]
pub(crate) struct HostFacts {
    /// Each module's file size (as stored: compressed if it is).
    pub sizes: Vec<(String, u64)>,
    /// Each module's undefined symbols: the lookups its load makes (a file
    /// the host cannot read as a module has none listed).
    pub lookups: Vec<(String, u64)>,
}

impl HostFacts {
    fn of(files: &[(String, PathBuf)]) -> HostFacts {
        HostFacts {
            sizes: files.iter().map(|(n, p)| (n.clone(), std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))).collect(),
            lookups: files
                .iter()
                .filter_map(|(n, p)| {
                    bootlink::module::read_analysed(p).ok().map(|m| (n.clone(), m.undefined.len() as u64))
                })
                .collect(),
        }
    }
}

/// `_text`'s link-time address in a kernel image ([`KernelImage::link_text`]:
/// an x86-64 vmlinux or bzImage with a build ID, an arm64 Image whose config
/// names its address space): what a boot's `_text` is measured against to
/// tell its KASLR slide.
pub(crate) fn link_text(image: &Path) -> Result<u64> {
    KernelImage::open(image, None)?.link_text().ok_or_else(|| {
        Error::file(
            Kind::Unsupported,
            image,
            "no link-time text address read from this image (x86-64 with a build ID, or arm64 with its config)",
        )
    })
}

/// Where a booted image's text is linked: `_text` and, when the image
/// places it apart from its symbols, `_stext` (an arm64 Image's EFI header).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Linked {
    text: Option<u64>,
    stext: Option<u64>,
}

impl Linked {
    fn of(image: &Path) -> Linked {
        match KernelImage::open(image, None) {
            Ok(k) => Linked { text: k.link_text(), stext: k.link_stext },
            Err(_) => Linked::default(),
        }
    }

    /// A boot's `_text` (hexadecimal) and its slide, from the `_text` its
    /// kallsyms showed or, when it had none (arm64 without
    /// CONFIG_KALLSYMS_ALL: `_text` heads the Image, before `_stext`), its
    /// `_stext` moved back by where the image links the two.
    fn place(&self, text: Option<&str>, stext: Option<&str>) -> (Option<String>, Option<u64>) {
        let hex = |a: Option<&str>| a.and_then(|a| u64::from_str_radix(a, 16).ok()).filter(|&a| a != 0);
        if let Some(at) = hex(text) {
            return (text.map(str::to_string), self.text.and_then(|base| at.checked_sub(base)));
        }
        let slide = hex(stext).zip(self.stext).and_then(|(at, base)| at.checked_sub(base));
        let text = slide.zip(self.text).map(|(s, base)| format!("{:x}", base.wrapping_add(s)));
        (text, slide.filter(|_| self.text.is_some()))
    }
}

/// How many kernels booted in one boot's framed output: the `Linux
/// version` lines of the kernel log /init printed, and its kernel log
/// sections (more than one: the machine rebooted into /init again, and
/// the output holds two boots).
pub(crate) fn kernel_boots(out: &str) -> usize {
    let sections = out.matches(DMESG_SECTION).count();
    let dmesg = out.split_once(DMESG_SECTION).map_or("", |(_, d)| d);
    sections.max(dmesg::parse(dmesg.as_bytes()).boots)
}

pub(crate) fn parse_boot(out: &str, traced: bool, files: &HostFacts, workloads: &[Box<dyn Workload>]) -> Repetition {
    let sizes = &files.sizes;
    let (main, rest) = out.split_once(TRACE_SECTION).map(|(a, b)| (a, Some(b))).unwrap_or((out, None));
    let (trace_text, dmesg) = match rest {
        Some(r) => r.split_once(DMESG_SECTION).unwrap_or((r, "")),
        None => ("", main.split_once(DMESG_SECTION).map(|(_, d)| d).unwrap_or("")),
    };
    let mut rep = Repetition::default();
    for line in main.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("TAINTED"), Some(mask), None) => rep.tainted = mask.parse().ok(),
            (Some("KTEXT"), Some(addr), Some(_)) if u64::from_str_radix(addr, 16).is_ok() => match w.next() {
                Some("_stext") => rep.kernel_stext = Some(addr.to_string()),
                _ => rep.kernel_text = Some(addr.to_string()),
            },
            (Some("MODTAINT"), Some(name), Some(letters)) => {
                rep.module_taints.insert(name.to_string(), letters.to_string());
            }
            _ => {}
        }
    }
    let (mut begin, mut end) = (None, None);
    let mut starts = std::collections::HashMap::new();
    let mut kmsg_loads = Vec::new();
    for line in dmesg.lines() {
        let Some((t, text)) = dmesg::timed_message(line.as_bytes()) else { continue };
        let Ok(text) = std::str::from_utf8(text) else { continue };
        if let Some(m) = text.strip_prefix("bootlink: ") {
            if m == "modules begin" {
                begin = Some(t);
            } else if m == "modules end" {
                end = Some(t);
            } else if let Some(name) = m.strip_prefix("insmod ") {
                starts.insert(name.to_string(), t);
            } else if let Some(done) = m.strip_prefix("insmod-done ") {
                let mut f = done.split_whitespace();
                if let (Some(name), Some(rc)) = (f.next(), f.next()) {
                    let worker = match (f.next(), f.next()) {
                        (Some("worker"), Some(w)) => w.parse().ok(),
                        _ => None,
                    };
                    let t0 = starts.get(name).copied().unwrap_or(t);
                    kmsg_loads.push(ModuleLoad {
                        name: name.to_string(),
                        start_us: t0,
                        total_us: t - t0,
                        phases: Vec::new(),
                        lookups: None,
                        size: 0,
                        status: rc.parse().unwrap_or(-1),
                        finalize_steps: Vec::new(),
                        init_steps: Vec::new(),
                        worker,
                    });
                }
            }
        }
    }
    let log = dmesg::parse(dmesg.as_bytes());
    rep.boot_clock = bootclock::parse(dmesg);
    rep.initcalls = log.initcalls;
    rep.init_start_us = log.init_start_us.unwrap_or(0.0);
    rep.processes = procs::with_init(procs::parse(main), rep.init_start_us);
    if let (Some(b), Some(e)) = (begin, end) {
        rep.modules_total_us = e - b;
    }
    rep.modules = if traced {
        rep.symbols_timed_at = trace::symbols_timed_at(trace_text).map(String::from);
        let mut traced = trace::parse(trace_text);
        // By name, the first load of a name (one look-up per module).
        let mut by_name: std::collections::HashMap<&str, &ModuleLoad> = std::collections::HashMap::new();
        for k in &kmsg_loads {
            by_name.entry(k.name.as_str()).or_insert(k);
        }
        for m in &mut traced {
            if let Some(k) = by_name.get(m.name.as_str()) {
                m.status = k.status;
                m.worker = k.worker;
            }
        }
        traced
    } else {
        kmsg_loads
    };
    let first_of = |list: &[(String, u64)]| {
        let mut m: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
        for (n, v) in list {
            m.entry(n.clone()).or_insert(*v);
        }
        m
    };
    let (size_of, lookups_of) = (first_of(sizes), first_of(&files.lookups));
    for m in &mut rep.modules {
        if let Some(s) = size_of.get(&m.name) {
            m.size = *s;
        }
        // Counted on the host where the trace did not count them: the
        // kernel looks up each undefined symbol once in a load that
        // succeeds (one that fails may stop before its lookups).
        if m.lookups.is_none()
            && m.status == 0
            && let Some(n) = lookups_of.get(&m.name)
        {
            m.lookups = Some(*n);
        }
    }
    let console = Console { main, dmesg, sizes };
    for w in workloads {
        w.parse(&console, &mut rep);
    }
    rep
}

/// The bzImage of `filled` (a copy of `vmlinux` holding a module hash
/// list), beside it, linked from the object tree `vmlinux`'s build was
/// made in.
fn rebuilt_bzimage(variant: &str, vmlinux: &Path, filled: &Path, bzimage: &Path) -> Result<PathBuf> {
    let Some(k) = crate::lab::distro::beside(vmlinux) else {
        return Err(Error::file(
            Kind::Usage,
            bzimage,
            format!("variant {variant}: a hash list goes into a bzImage of kernel:distro only (give image:vmlinux)"),
        ));
    };
    let out = filled.with_file_name(format!("{variant}-bzImage"));
    bootlink::progress::status(&format!("variant {variant}: linking its bzImage around the listed vmlinux"));
    k.with_tree(|tree| bootlink::manifest::bzimage::rebuild(tree, filled, &out)).map_err(|e| {
        Error::new(e.kind, format!("variant {variant}: the bzImage with the hash list: {}", e.msg)).because(e)
    })?;
    Ok(out)
}

fn qemu_version(qemu: &Path) -> String {
    std::process::Command::new(qemu)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default()
}

/// A variant built and ready to boot: its record in run.json, its final
/// module files, its initramfs and the workloads that parse its boots.
pub(crate) struct Built {
    pub meta: Variant,
    /// The set's final module files (name, file), in load order.
    pub files: Vec<(String, PathBuf)>,
    pub initramfs: PathBuf,
    /// What the host knows of its module files (sizes, lookups), for the parse.
    pub facts: HostFacts,
    pub workloads: Vec<Box<dyn Workload>>,
    /// The kernel's configuration, when bootlink found it.
    pub config: Option<bootlink::kernel::KernelConfig>,
}

/// Apply every variant's steps, prepare its workloads and write its
/// initramfs into `work` (framed with `tag(i)` for the i-th variant): what
/// a boot needs, and the run's record without repetitions. The lab boots
/// it; `bootlink lab --lava` writes it out as LAVA jobs.
pub(crate) fn build(sc: &Scenario, work: &Path, tag: &dyn Fn(usize) -> String) -> Result<(Run, Vec<Built>)> {
    // Realtime guests with several vCPUs share the host's cores: a vCPU the
    // host does not run for a while looks like a lockup to the guest.
    let smp_quiet = if !sc.deterministic && sc.cpus > 1 { REALTIME_SMP_CMDLINE } else { "" };
    let realtime = if sc.deterministic { "" } else { REALTIME_CMDLINE };
    let base_cmdline =
        format!("console={} {BASE_CMDLINE} {realtime} {smp_quiet} {}", sc.target.console, sc.extra_cmdline)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    // Each kernel image is opened once, however many variants boot it.
    let mut images_open: Vec<(PathBuf, KernelImage)> = Vec::new();
    let mut variants: Vec<(Variant, Vec<(String, PathBuf)>)> = Vec::new();
    for (i, v) in sc.variants.iter().enumerate() {
        if !images_open.iter().any(|(p, _)| *p == v.kernel) {
            images_open.push((v.kernel.clone(), KernelImage::open(&v.kernel, None)?));
        }
        let k = &images_open.iter().find(|(p, _)| *p == v.kernel).expect("opened").1;
        let mut tree = Tree {
            image: k,
            kernel: v.kernel.clone(),
            modules: v.modules.clone(),
            cmdline: Vec::new(),
            raw_module: String::new(),
            work: work.join(format!("v{i}")),
            // <variant>-vmlinux, or -Image for an arm64 kernel booted from its Image
            kernel_copy: sc.out.join("kernels").join(format!(
                "{}-{}",
                v.spec.name,
                if v.kernel.file_name().is_some_and(|n| n == "Image") { "Image" } else { "vmlinux" }
            )),
            sign_key: None,
        };
        step::apply_all(&v.spec.steps, &mut tree)?;
        let mut meta = Variant::named(&v.spec.name);
        meta.kernel = match &v.boot {
            // The manifest step wrote its list into a copy of the vmlinux:
            // the bzImage is linked again around it (a distribution-config
            // build's object tree replays kbuild's chain).
            Some(bz) if tree.kernel != v.kernel => rebuilt_bzimage(&v.spec.name, &v.kernel, &tree.kernel, bz)?,
            Some(bz) => bz.clone(),
            None => tree.kernel,
        };
        if meta.kernel != v.kernel && v.boot.as_ref() != Some(&meta.kernel) {
            meta.made_from = v.kernel.clone();
        }
        // what a boot loader reads of it: a record, not a condition of the run
        meta.image = bootclock::describe(&meta.kernel).ok();
        meta.raw_module = tree.raw_module;
        meta.module_files = Some(module_files(step::compression(&v.spec.steps), &tree.modules)?);
        meta.kernel_release = k.release.clone().unwrap_or_default();
        meta.transform = v.spec.transform();
        // kaslr:on boots without the lab's nokaslr.
        let base: Vec<&str> = base_cmdline.split(' ').filter(|w| !(v.spec.kaslr && *w == "nokaslr")).collect();
        meta.cmdline = format!("{} {}", base.join(" "), tree.cmdline.join(" ")).trim().to_string();
        variants.push((meta, tree.modules));
    }
    let first = &variants[0].0;
    let run = Run {
        format: FORMAT_VERSION,
        source: "lab".into(),
        kernel_release: first.kernel_release.clone(),
        kernel: first.kernel.clone(),
        cmdline: first.cmdline.clone(),
        qemu_version: qemu_version(&sc.target.qemu),
        qemu_command: Vec::new(),
        cpu_model: sc.target.cpu_model.clone(),
        machine: sc.target.machine.clone(),
        arch: sc.target.arch.name().into(),
        timing: match (sc.deterministic, sc.cpus) {
            (true, _) => "deterministic".into(),
            (false, 1) => "realtime".into(),
            (false, n) => format!("realtime, {n} CPUs"),
        },
        module_set: sc.module_set.clone(),
        variants: variants.iter().map(|(v, _)| v.clone()).collect(),
        partial: false,
        tracing_overhead_pct: None,
        device_type: String::new(),
    };
    // Each variant's workloads, prepared on the host once (DDLink's
    // program profiled and its caches written, the reordering case and its
    // SquashFS images), then one initramfs per variant.
    let mut built = Vec::new();
    for (i, (meta, files)) in variants.into_iter().enumerate() {
        let v = &sc.variants[i];
        let dir = work.join(format!("v{i}"));
        let rels: Vec<(String, PathBuf)> = v.rels.iter().cloned().zip(files.iter().map(|(_, p)| p.clone())).collect();
        let config = images_open.iter().find(|(p, _)| *p == v.kernel).and_then(|(_, k)| k.config.clone());
        let cx = context(v, &rels, &files, &dir, sc.target.arch, &meta.kernel, config.as_ref());
        let mut ws = workload::build(v.spec.loader, &v.spec.workloads);
        for w in &mut ws {
            w.prepare(&cx)?;
        }
        let img = work.join(format!("v{i}.cpio"));
        initramfs(&ws, &cx, traced(sc.trace, &ws), &tag(i), &img)?;
        let facts = HostFacts::of(&files);
        built.push(Built { meta, files, initramfs: img, facts, workloads: ws, config });
    }
    Ok((run, built))
}

/// How long a realtime boot with several vCPUs may keep its console
/// empty before it counts as hung (such a boot reaches /init's first line
/// in seconds; one that hung there stayed empty for its whole timeout).
pub(crate) const SILENCE_LIMIT: Duration = Duration::from_secs(120);

/// Whether the scenario's boots can hang before /init for the host's sake
/// (realtime, more than one vCPU: multi-threaded TCG), so that a silent
/// boot is cut at [`SILENCE_LIMIT`] and booted again.
fn may_hang_before_init(sc: &Scenario) -> bool {
    !sc.deterministic && sc.cpus > 1
}

/// Whether a boot is one that [`run`] boots again: one of a scenario that
/// [`may_hang_before_init`], timed out with nothing at all on the console.
/// A deterministic boot repeats exactly, and a boot that printed anything
/// (or faulted) failed in what it measured: those stand.
pub(crate) fn hung_before_init(sc: &Scenario, b: &qemu::Boot) -> bool {
    may_hang_before_init(sc) && b.status == BootStatus::TimedOut && b.log.trim().is_empty()
}

/// Run the scenario; the run directory is written as it goes, so a failed
/// boot leaves what was measured, marked partial.
pub fn run(sc: &Scenario) -> Result<Run> {
    std::fs::create_dir_all(sc.out.join("logs")).map_err(|e| Error::io(&sc.out, e))?;
    let work = crate::lab::TempDir::new("lab")?;
    let (mut run, built) = build(sc, work.path(), &|_| crate::lab::initramfs::DEFAULT_TAG.to_string())?;
    let total = sc.repetitions * built.len() + sc.measure_overhead as usize;
    let boot = |v: &Variant, img: &Path, log: &Path| -> Result<qemu::Boot> {
        let mut o = QemuOptions::on(&sc.target, &v.kernel);
        o.initrd = Some(img.to_path_buf());
        o.cmdline = v.cmdline.clone();
        o.timeout = sc.timeout;
        o.memory_mib = sc.memory_mib;
        o.deterministic = sc.deterministic;
        o.cpus = sc.cpus;
        o.log = Some(log.to_path_buf());
        if may_hang_before_init(sc) {
            o.silence_limit = Some(SILENCE_LIMIT.min(sc.timeout));
        }
        qemu::run(&o)
    };
    // Every boot of the run, in the order the record keeps them
    // (repetitions interleaved); up to sc.jobs of them at once. Each boot is
    // measured on its own (deterministic: guest time is instructions), and
    // the record takes them in this order, saved as it grows, ending at
    // the first boot that failed: what it holds does not depend on jobs.
    let slots: Vec<(usize, usize)> =
        (0..sc.repetitions).flat_map(|rep| (0..built.len()).map(move |vi| (rep, vi))).collect();
    // `_text`'s link-time address in each booted image, read once per
    // image, the first time a boot of it says where its text was.
    let link_texts = std::sync::Mutex::new(std::collections::HashMap::<PathBuf, Linked>::new());
    let place = |image: &Path, r: &mut Repetition| {
        let mut known = link_texts.lock().unwrap_or_else(|e| e.into_inner());
        let linked = *known.entry(image.to_path_buf()).or_insert_with(|| Linked::of(image));
        (r.kernel_text, r.kaslr_slide) = linked.place(r.kernel_text.as_deref(), r.kernel_stext.as_deref());
    };
    let measure = |rep: usize, vi: usize| -> Result<(Repetition, String)> {
        let (v, files) = (&built[vi].meta, &built[vi].files);
        let rel = PathBuf::from(format!("logs/{}-{}.log", v.name, rep));
        let mut b = boot(v, &built[vi].initramfs, &sc.out.join(&rel))?;
        // A realtime guest with several vCPUs on an overcommitted host can
        // hang before /init prints a line (multi-threaded TCG; nothing of
        // the variant has run yet): booted again once, and said so.
        let mut booted_again = None;
        if hung_before_init(sc, &b) {
            progress::status(&format!("{} #{}: hung before /init; booting it again", v.name, rep + 1));
            booted_again = Some(b.why());
            b = boot(v, &built[vi].initramfs, &sc.out.join(&rel))?;
        }
        let framed = b.framed(crate::lab::initramfs::DEFAULT_TAG).unwrap_or_default();
        let ws = &built[vi].workloads;
        let mut r = parse_boot(&framed, traced(sc.trace, ws), &built[vi].facts, ws);
        r.index = rep;
        // A copy the lab made (a hash list written in) is linked where the
        // image it was made from is; only that one has its config beside it.
        place(if v.made_from.as_os_str().is_empty() { &v.kernel } else { &v.made_from }, &mut r);
        if !sc.deterministic {
            // the counter is the host's, not a clock from reset
            r.boot_clock = None;
        }
        let workload_problems: Vec<String> = ws.iter().flat_map(|w| w.problems(&mut r)).collect();
        r.boot_wall_s = b.wall.as_secs_f64();
        r.booted_again = booted_again;
        r.log = rel;
        let failed = b.status != BootStatus::PoweredOff || !b.faults.is_empty();
        let not_loaded: Vec<&str> = r.modules.iter().filter(|m| m.status != 0).map(|m| m.name.as_str()).collect();
        // A storm's requests are counted, not its modules' loads.
        let measured = if r.storm().is_some() { files.len() } else { r.modules.len() };
        if failed || measured != files.len() {
            r.partial = true;
            let why = if failed {
                match b.status {
                    BootStatus::Faulted => format!("{}: {}", b.status.describe(), b.why()),
                    _ => b.why(),
                }
            } else {
                format!("{} of {} modules measured", r.modules.len(), files.len())
            };
            r.failure = Some(format!("{why}\n{}", b.excerpt(40)));
        } else if !not_loaded.is_empty() {
            r.failure = Some(format!("insmod failed for: {}", not_loaded.join(", ")));
        } else if !workload_problems.is_empty() {
            r.failure = Some(workload_problems.join("; "));
        }
        Ok((r, b.command))
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<(Repetition, String)>)>();
    let outcome: Result<bool> = std::thread::scope(|scope| {
        for _ in 0..sc.jobs.clamp(1, slots.len().max(1)) {
            let tx = tx.clone();
            let (next, stop, slots, measure, built) = (&next, &stop, &slots, &measure, &built);
            scope.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(rep, vi)) = slots.get(i) else { break };
                    progress::status(&format!(
                        "boot {}/{total}: {} repetition {}",
                        i + 1,
                        built[vi].meta.name,
                        rep + 1
                    ));
                    if tx.send((i, measure(rep, vi))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Take the boots in their order as they finish.
        let mut waiting = std::collections::BTreeMap::new();
        let mut taken = 0;
        for (i, got) in rx {
            waiting.insert(i, got);
            while let Some(got) = waiting.remove(&taken) {
                let (rep, vi) = slots[taken];
                taken += 1;
                let (r, command) = match got {
                    Ok(x) => x,
                    Err(e) => {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Err(e);
                    }
                };
                debug_assert_eq!(r.index, rep);
                run.qemu_command = command.split_whitespace().map(str::to_string).collect();
                let partial = r.partial;
                run.variants[vi].repetitions.push(r);
                if partial {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    run.partial = true;
                    crate::run::save(&run, &sc.out)?;
                    return Ok(true);
                }
                crate::run::save(&run, &sc.out)?;
            }
        }
        Ok(false)
    });
    if outcome? {
        return Ok(run);
    }
    let mut n = slots.len();
    if sc.measure_overhead && sc.trace {
        // The first variant again, untraced: what does the tracing cost?
        n += 1;
        let first = &built[0];
        progress::status(&format!("boot {n}/{total}: {} without tracing (overhead)", first.meta.name));
        let img = work.path().join("untraced.cpio");
        let v = &sc.variants[0];
        let files = &first.files;
        let dir = work.path().join("untraced-root");
        let rels: Vec<(String, PathBuf)> = v.rels.iter().cloned().zip(files.iter().map(|(_, p)| p.clone())).collect();
        let cx = context(v, &rels, files, &dir, sc.target.arch, &first.meta.kernel, first.config.as_ref());
        let tag = crate::lab::initramfs::DEFAULT_TAG;
        initramfs(&first.workloads, &cx, false, tag, &img)?;
        let rel = sc.out.join(format!("logs/{}-untraced.log", first.meta.name));
        let b = boot(&first.meta, &img, &rel)?;
        let framed = b.framed(tag).unwrap_or_default();
        let untraced = parse_boot(&framed, false, &first.facts, &first.workloads).modules_total_us;
        let traced: Vec<f64> = run.variants[0].repetitions.iter().map(|r| r.modules_total_us).collect();
        let traced = traced.iter().sum::<f64>() / traced.len().max(1) as f64;
        if untraced > 0.0 {
            run.tracing_overhead_pct = Some((traced - untraced) / untraced * 100.0);
        }
    }
    crate::run::save(&run, &sc.out)?;
    Ok(run)
}

/// What the guest's loader reads: the variant's final module files.
fn module_files(
    compression: bootlink::compress::Compression,
    files: &[(String, PathBuf)],
) -> Result<crate::run::results::ModuleFiles> {
    let mut m = crate::run::results::ModuleFiles { compression: compression.name().into(), ..Default::default() };
    for (_, p) in files {
        let len = std::fs::metadata(p).map_err(|e| Error::io(p, e))?.len();
        m.files += 1;
        m.file_bytes += len;
        m.requests_4k += len.div_ceil(4096);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The framed output of an untraced boot, shaped as the guest prints it.
    const UNTRACED: &str = "INSMOD crc16 0
INSMOD bad 1
TAINTED 8192
MODTAINT crc16 E
KTEXT ffffffffa5a00000 T _text
@@@ bootlink dmesg @@@
[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org)
[    0.100000] calling  pci_subsys_init+0x0/0x80 @ 1
[    0.102561] initcall pci_subsys_init+0x0/0x80 returned 0 after 2561 usecs
[    1.500000] Run /init as init process
[    2.000000] bootlink: modules begin
[    2.000100] bootlink: insmod crc16
[    2.004100] bootlink: insmod-done crc16 0
[    2.004200] bootlink: insmod bad
[    2.004300] bad: Unknown symbol nothing (err -2)
[    2.004400] bootlink: insmod-done bad 1
[    2.005000] bootlink: modules end
";

    #[test]
    fn an_untraced_boot_parses_into_insmod_times() {
        let facts = HostFacts { sizes: vec![("crc16".into(), 1234)], lookups: vec![("crc16".into(), 7)] };
        let r = parse_boot(UNTRACED, false, &facts, &workload::build(Loader::Insmod, &[]));
        assert_eq!(r.init_start_us, 1_500_000.0);
        assert_eq!(r.modules_total_us, 5_000.0);
        assert_eq!(r.initcalls.len(), 1);
        assert_eq!((r.initcalls[0].name.as_str(), r.initcalls[0].duration_us), ("pci_subsys_init", 2561.0));
        let got: Vec<(&str, f64, f64, i32, u64)> =
            r.modules.iter().map(|m| (m.name.as_str(), m.start_us, m.total_us, m.status, m.size)).collect();
        assert_eq!(got, [("crc16", 2_000_100.0, 4_000.0, 0, 1234), ("bad", 2_004_200.0, 200.0, 1, 0)]);
        // Lookups from the host's count, for the load that succeeded only.
        let lookups: Vec<Option<u64>> = r.modules.iter().map(|m| m.lookups).collect();
        assert_eq!(lookups, [Some(7), None]);
        assert_eq!(r.tainted, Some(8192));
        assert_eq!(r.kernel_text.as_deref(), Some("ffffffffa5a00000"));
        assert_eq!(r.module_taints.into_iter().collect::<Vec<_>>(), [("crc16".to_string(), "E".to_string())]);
    }

    /// A kallsyms without `_text` (Debian's arm64): the boot's `_stext`,
    /// and `_text` placed from it by where the image links the two.
    #[test]
    fn text_is_placed_from_stext_where_kallsyms_has_no_text() {
        let out = UNTRACED.replace("KTEXT ffffffffa5a00000 T _text", "KTEXT ffffb84a2a610000 T _stext");
        let r = parse_boot(&out, false, &HostFacts::default(), &[]);
        assert_eq!((r.kernel_text.as_deref(), r.kernel_stext.as_deref()), (None, Some("ffffb84a2a610000")));
        // Debian's 6.1 arm64 Image: linked at ffff800008000000, its EFI
        // header's .text at 0x10000.
        let linked = Linked { text: Some(0xffff_8000_0800_0000), stext: Some(0xffff_8000_0801_0000) };
        let (text, slide) = linked.place(None, r.kernel_stext.as_deref());
        assert_eq!(
            (text.as_deref(), slide),
            (Some("ffffb84a2a600000"), Some(0xffff_b84a_2a60_0000 - 0xffff_8000_0800_0000))
        );
        // a kallsyms with `_text` is read as it is
        let (text, slide) = linked.place(Some("ffff800008000000"), Some("ffff800008010000"));
        assert_eq!((text.as_deref(), slide), (Some("ffff800008000000"), Some(0)));
        // an image that does not place `_stext`: not known
        let (text, slide) = Linked { stext: None, ..linked }.place(None, r.kernel_stext.as_deref());
        assert_eq!((text, slide), (None, None));
    }
}
