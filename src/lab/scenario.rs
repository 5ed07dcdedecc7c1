//! A lab scenario: a module set loaded by a real kernel under QEMU, in one
//! or more variants (stock, unsigned, preresolved, folded), N repetitions each,
//! interleaved, with per-module load phases from ftrace. Writes a run
//! directory: run.json (see results.rs) and the raw console logs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::finalize;
use crate::fsutil;
use crate::kernel::KernelImage;
use crate::lab::busybox;
use crate::lab::initramfs::Initramfs;
use crate::lab::qemu::{self, BootStatus, QemuOptions};
use crate::module;
use crate::preresolve;
use crate::progress;
use crate::run::dmesg;
use crate::run::ftrace as trace;
use crate::run::results::{FORMAT_VERSION, ModuleLoad, Repetition, Run, Variant};
use crate::symhash;

use crate::lab::ddlink;
use crate::lab::loaders;
use crate::lab::order;
use crate::lab::procs;
pub use crate::lab::variant::{Loader, Transform, VariantSpec};

/// A variant ready to boot: its kernel image and its module files (the
/// set's modules, found by name in that kernel's tree, in the set's order).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub spec: VariantSpec,
    /// The image QEMU boots (an uncompressed vmlinux boots through PVH).
    pub kernel: PathBuf,
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
}

/// Added for realtime runs with more than one vCPU: no soft-lockup or RCU
/// stall reports for vCPUs the overcommitted host did not schedule.
pub const REALTIME_SMP_CMDLINE: &str = "nowatchdog rcupdate.rcu_cpu_stall_suppress=1";

pub const BASE_CMDLINE: &str = "console=ttyS0 nokaslr panic=-1 oops=panic quiet initcall_debug log_buf_len=8M";

const TRACE_SECTION: &str = "@@@ bootlink trace @@@";
const DMESG_SECTION: &str = "@@@ bootlink dmesg @@@";
const RUN_SECTION: &str = "@@@ bootlink run @@@";
const RUN_END: &str = "@@@ bootlink run end @@@";

/// The init body (tracefs is mounted by /init's prologue, which also starts
/// recording the processes when `procs`, [`procs::start`]): set up ftrace
/// on the landmark functions, load the modules with the variant's loader
/// (markers in the trace and the kernel log), start the DDLink program
/// (`ddlink`: its script) and the `run` program, then print the processes,
/// the trace and the kernel log.
fn body(trace: bool, procs: bool, run: Option<&str>, ddlink: Option<&str>, loader: Loader) -> String {
    let mut s = format!("T={}\n", procs::TRACEFS);
    if trace {
        s.push_str("echo 32768 > $T/buffer_size_kb\n");
        for f in trace::traced() {
            s.push_str(&format!("echo {f} >> $T/set_ftrace_filter || echo 'bootlink: cannot trace {f}'\n"));
        }
        s.push_str("echo function_graph > $T/current_tracer\necho funcgraph-abstime > $T/trace_options\necho funcgraph-proc > $T/trace_options\necho 1 > $T/tracing_on\n");
    }
    s.push_str(&loaders::script(loader, trace, trace::MARKER));
    s.push_str("echo 0 > $T/tracing_on 2>/dev/null\necho \"TAINTED $(cat /proc/sys/kernel/tainted)\"\n");
    // Which loaded modules tainted it, with their letters.
    s.push_str(
        "for f in /sys/module/*/taint; do t=$(cat $f 2>/dev/null); n=${f%/taint}; [ -n \"$t\" ] && echo \"MODTAINT ${n#/sys/module/} $t\"; done\n",
    );
    if let Some(script) = ddlink {
        s.push_str(script);
    }
    if let Some(cmd) = run {
        s.push_str(&format!("echo '{RUN_SECTION}'\n{cmd} 2>&1\necho \"RUN-EXIT $?\"\necho '{RUN_END}'\n"));
    }
    if procs {
        s.push_str(&procs::stop_and_print());
    }
    if trace {
        s.push_str(&format!("echo '{TRACE_SECTION}'\ncat $T/trace\n"));
    }
    s.push_str(&format!("echo '{DMESG_SECTION}'\ndmesg\n"));
    s
}

/// Make the module files of a variant; `k` is the image it boots (the
/// preresolver resolves against its exports).
fn variant_files(v: &Prepared, k: &KernelImage, work: &Path) -> Result<Vec<(String, PathBuf)>> {
    let files = match v.spec.transform {
        Transform::Stock => v.modules.clone(),
        Transform::Unsigned => unsigned(&v.modules, &work.join("unsigned"))?,
        Transform::Preresolved | Transform::Folded => {
            let inputs: Vec<PathBuf> = v.modules.iter().map(|(_, p)| p.clone()).collect();
            let dir = work.join(v.spec.transform.name());
            preresolved(k, &inputs, &dir, v.spec.transform == Transform::Folded)?;
            in_dir(&v.modules, &dir)
        }
        Transform::Symhash | Transform::SymhashSorted => {
            let inputs: Vec<PathBuf> = v.modules.iter().map(|(_, p)| p.clone()).collect();
            let dir = work.join(v.spec.transform.name());
            hashed(k, &inputs, &dir, v.spec.transform == Transform::SymhashSorted)?;
            in_dir(&v.modules, &dir)
        }
        Transform::PreresolvedSymhash => {
            let inputs: Vec<PathBuf> = v.modules.iter().map(|(_, p)| p.clone()).collect();
            let first = work.join("preresolved-for-symhash");
            preresolved(k, &inputs, &first, false)?;
            let dir = work.join(v.spec.transform.name());
            let files: Vec<PathBuf> = in_dir(&v.modules, &first).into_iter().map(|(_, p)| p).collect();
            hashed(k, &files, &dir, true)?;
            in_dir(&v.modules, &dir)
        }
        Transform::Finalized | Transform::FinalizedOrc | Transform::FinalizedMcount => {
            // Unsigned first: a module finalize leaves alone keeps its signature.
            let first = unsigned(&v.modules, &work.join("unsigned-for-finalize"))?;
            let inputs: Vec<PathBuf> = first.iter().map(|(_, p)| p.clone()).collect();
            let dir = work.join(v.spec.transform.name());
            let t = v.spec.transform;
            finalized(k, &inputs, &dir, t != Transform::FinalizedMcount, t != Transform::FinalizedOrc)?;
            in_dir(&first, &dir)
        }
        Transform::Trimmed => {
            let dir = work.join("trimmed");
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let mut files = Vec::new();
            for (name, path) in &v.modules {
                let (data, _) = module::load_bytes(path)?;
                let (len, _) = module::split_signature(&data).map_err(|e| Error::file(Kind::Format, path, e))?;
                let mut ed = ElfEdit::new(data[..len].to_vec()).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
                preresolve::trim(&mut ed).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
                let dest = dir.join(format!("{name}.ko"));
                fsutil::write_atomic_nosync(&dest, &ed.data)?;
                files.push((name.clone(), dest));
            }
            files
        }
        Transform::FoldedFinalized => {
            let inputs: Vec<PathBuf> = v.modules.iter().map(|(_, p)| p.clone()).collect();
            let first = work.join("folded-for-finalize");
            preresolved(k, &inputs, &first, true)?;
            // Unsigned: preresolve copies a module it leaves alone as it is.
            let folded = unsigned(&in_dir(&v.modules, &first), &work.join("folded-unsigned"))?;
            let dir = work.join(v.spec.transform.name());
            let files: Vec<PathBuf> = folded.iter().map(|(_, p)| p.clone()).collect();
            finalized(k, &files, &dir, true, true)?;
            in_dir(&folded, &dir)
        }
    };
    plain(files, &work.join("plain"))
}

/// The modules without their signatures, as `dir/<name>.ko`.
fn unsigned(modules: &[(String, PathBuf)], dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for (name, path) in modules {
        let (data, _) = module::load_bytes(path)?;
        let (len, _) = module::split_signature(&data).map_err(|e| Error::file(Kind::Format, path, e))?;
        let dest = dir.join(format!("{name}.ko"));
        fsutil::write_atomic_nosync(&dest, &data[..len])?;
        files.push((name.clone(), dest));
    }
    Ok(files)
}

/// The variant's modules by the file names a transform wrote into `dir`.
fn in_dir(modules: &[(String, PathBuf)], dir: &Path) -> Vec<(String, PathBuf)> {
    modules.iter().map(|(name, p)| (name.clone(), dir.join(p.file_name().unwrap_or_default()))).collect()
}

fn preresolved(k: &KernelImage, inputs: &[PathBuf], dir: &Path, fold: bool) -> Result<()> {
    // The lab boots through PVH with `nokaslr`: the base is not randomized.
    let opts = preresolve::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        assume_nokaslr: true,
        sign: None,
        fold,
        trim: false,
        dry_run: false,
    };
    let report = preresolve::run(k, inputs, &opts)?;
    match report.errors.first() {
        Some(e) => Err(Error::file(Kind::Format, &e.path, format!("preresolve: {}", e.error))),
        None => Ok(()),
    }
}

fn hashed(k: &KernelImage, inputs: &[PathBuf], dir: &Path, sort_versions: bool) -> Result<()> {
    let opts = symhash::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        sign: None,
        sort_versions,
        dry_run: false,
    };
    let report = symhash::run(k, inputs, &opts)?;
    match report.errors.first() {
        Some(e) => Err(Error::file(Kind::Format, &e.path, format!("symhash: {}", e.error))),
        None => Ok(()),
    }
}

fn finalized(k: &KernelImage, inputs: &[PathBuf], dir: &Path, orc: bool, mcount: bool) -> Result<()> {
    let opts = finalize::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        sign: None,
        dry_run: false,
        orc,
        mcount,
    };
    let report = finalize::run(Some(k), inputs, &opts)?;
    match report.errors.first() {
        Some(e) => Err(Error::file(Kind::Format, &e.path, format!("finalize: {}", e.error))),
        None => Ok(()),
    }
}

/// Compressed modules (`.ko.xz` & co.) decompressed on the host, the rest as
/// they are. busybox's insmod would decompress them in user space, at TCG
/// speed and outside any phase the lab traces, and would do so differently
/// for variants that are written uncompressed (unsigned): every variant gets
/// the same plain bytes, so what is compared is the kernel's work.
fn plain(files: Vec<(String, PathBuf)>, dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    files
        .into_iter()
        .map(|(name, path)| {
            let (data, compression) = module::load_bytes(&path)?;
            if compression == crate::compress::Compression::None {
                return Ok((name, path));
            }
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            let dest = dir.join(format!("{name}.ko"));
            fsutil::write_atomic_nosync(&dest, &data)?;
            Ok((name, dest))
        })
        .collect()
}

fn initramfs(
    v: &Prepared,
    files: &[(String, PathBuf)],
    ddl: Option<&ddlink::Prepared>,
    ord: Option<&order::Prepared>,
    trace: bool,
    dest: &Path,
    work: &Path,
) -> Result<()> {
    let mut ir = Initramfs::new(busybox::busybox()?);
    let mut list = String::new();
    for (name, path) in files {
        let f = format!("/lib/modules/{name}.ko");
        ir.copy_file(&f, path);
        list.push_str(&format!("{name} {f}\n"));
    }
    ir.file(loaders::LIST, 0o644, list.into_bytes());
    let release = v.tree.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let rels: Vec<(String, PathBuf)> = v.rels.iter().cloned().zip(files.iter().map(|(_, p)| p.clone())).collect();
    let extras = loaders::Extras { plan: &v.plan, release: &release, tree: &v.tree, rels: &rels };
    loaders::add_to(&mut ir, v.spec.loader, &extras, work)?;
    let run = v.spec.run.as_deref();
    if let Some(cmd) = run {
        let program = cmd.split_whitespace().next().unwrap_or_default();
        crate::lab::userspace::add(&mut ir, Path::new(program))?;
    }
    if let Some(d) = ddl {
        ddlink::add_to(&mut ir, d);
    }
    if let Some(o) = ord {
        order::add_to(&mut ir, o);
    }
    let script = match (ddl, ord) {
        (Some(d), _) => Some(ddlink::script(d)),
        (None, Some(o)) => Some(order::script(o)),
        (None, None) => None,
    };
    let traced = trace && loaders::traceable(v.spec.loader);
    let procs = procs::recorded(traced, run.is_some() || script.is_some());
    ir.prologue(&if procs { procs::start() } else { format!("mount -t tracefs none {}\n", procs::TRACEFS) });
    ir.body(&body(traced, procs, run, script.as_deref(), v.spec.loader));
    ir.write(dest)
}

/// Parse one boot's framed output into a repetition.
pub fn parse_boot(out: &str, traced: bool, sizes: &[(String, u64)]) -> Repetition {
    let (main, rest) = out.split_once(TRACE_SECTION).map(|(a, b)| (a, Some(b))).unwrap_or((out, None));
    let (trace_text, dmesg) = match rest {
        Some(r) => r.split_once(DMESG_SECTION).unwrap_or((r, "")),
        None => ("", main.split_once(DMESG_SECTION).map(|(_, d)| d).unwrap_or("")),
    };
    let mut rep = Repetition::default();
    if let Some(text) = section(main, loaders::LOADER_SECTION, loaders::LOADER_END) {
        rep.loader = Some(crate::lab::batchloader::result(text));
    }
    if let Some(text) = section(main, loaders::STORM_SECTION, loaders::STORM_END) {
        rep.storm = Some(loaders::parse_storm(text, sizes));
    }
    if let Some((_, r)) = main.split_once(RUN_SECTION)
        && let Some((text, _)) = r.split_once(RUN_END)
    {
        rep.run_output = Some(text.trim_matches(['\r', '\n']).replace("\r\n", "\n"));
    }
    rep.userspace = ddlink::parse(main, dmesg).or_else(|| order::parse(main, dmesg));
    for line in main.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("TAINTED"), Some(mask), None) => rep.tainted = mask.parse().ok(),
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
                        worker,
                    });
                }
            }
        }
    }
    let log = dmesg::parse(dmesg.as_bytes());
    rep.initcalls = log.initcalls;
    rep.init_start_us = log.init_start_us.unwrap_or(0.0);
    rep.processes = procs::with_init(procs::parse(main), rep.init_start_us);
    if let (Some(b), Some(e)) = (begin, end) {
        rep.modules_total_us = e - b;
    }
    if let Some(s) = &mut rep.storm {
        s.quiescence_us = rep.modules_total_us;
    }
    rep.modules = if traced {
        let mut traced = trace::parse(trace_text);
        for m in &mut traced {
            if let Some(k) = kmsg_loads.iter().find(|k| k.name == m.name) {
                m.status = k.status;
                m.worker = k.worker;
            }
        }
        traced
    } else {
        kmsg_loads
    };
    for m in &mut rep.modules {
        if let Some((_, s)) = sizes.iter().find(|(n, _)| *n == m.name) {
            m.size = *s;
        }
    }
    rep
}

fn section<'a>(text: &'a str, begin: &str, end: &str) -> Option<&'a str> {
    let (_, r) = text.split_once(begin)?;
    Some(r.split_once(end).map(|(a, _)| a).unwrap_or(r))
}

fn qemu_version() -> String {
    std::process::Command::new(qemu::QEMU)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default()
}

/// Run the scenario; the run directory is written as it goes, so a failed
/// boot leaves what was measured, marked partial.
/// A copy of `kernel` (a vmlinux) whose module hash manifest lists
/// `files` (the variant's final modules), kept in the run directory.
fn with_manifest(kernel: &Path, variant: &str, files: &[(String, PathBuf)], out: &Path) -> Result<PathBuf> {
    let paths: Vec<PathBuf> = files.iter().map(|(_, p)| p.clone()).collect();
    let (manifest, _) = crate::manifest::of_modules(&paths)?;
    let dir = out.join("kernels");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let copy = dir.join(format!("{variant}-vmlinux"));
    crate::manifest::fill(kernel, &manifest, &copy)?;
    Ok(copy)
}

pub fn run(sc: &Scenario) -> Result<Run> {
    std::fs::create_dir_all(sc.out.join("logs")).map_err(|e| Error::io(&sc.out, e))?;
    let work = crate::lab::TempDir::new("lab")?;
    // Realtime guests with several vCPUs share the host's cores: a vCPU the
    // host does not run for a while looks like a lockup to the guest.
    let smp_quiet = if !sc.deterministic && sc.cpus > 1 { REALTIME_SMP_CMDLINE } else { "" };
    let base_cmdline =
        format!("{BASE_CMDLINE} {smp_quiet} {}", sc.extra_cmdline).split_whitespace().collect::<Vec<_>>().join(" ");
    // Each kernel image is opened once, however many variants boot it.
    let mut images_open: Vec<(PathBuf, KernelImage)> = Vec::new();
    let mut variants: Vec<(Variant, Vec<(String, PathBuf)>)> = Vec::new();
    for (i, v) in sc.variants.iter().enumerate() {
        if !images_open.iter().any(|(p, _)| *p == v.kernel) {
            images_open.push((v.kernel.clone(), KernelImage::open(&v.kernel, None)?));
        }
        let k = &images_open.iter().find(|(p, _)| *p == v.kernel).expect("opened").1;
        let dir = work.path().join(format!("v{i}"));
        let files = variant_files(v, k, &dir)?;
        let mut meta = Variant::named(&v.spec.name);
        meta.kernel = v.kernel.clone();
        if v.spec.manifest {
            meta.kernel = with_manifest(&v.kernel, &v.spec.name, &files, &sc.out)?;
        }
        // Raw bytes go in after the manifest: it lists the genuine module.
        let files = match &v.spec.raw {
            Some((name, raw)) => {
                meta.raw_module = format!("{name}={}", raw.display());
                files.into_iter().map(|(n, p)| if n == *name { (n, raw.clone()) } else { (n, p) }).collect()
            }
            None => files,
        };
        meta.kernel_release = k.release.clone().unwrap_or_default();
        meta.transform = v.spec.transform.name().into();
        meta.cmdline = format!("{base_cmdline} {}", v.spec.cmdline).trim().to_string();
        variants.push((meta, files));
    }
    let first = &variants[0].0;
    let mut run = Run {
        format: FORMAT_VERSION,
        source: "lab".into(),
        kernel_release: first.kernel_release.clone(),
        kernel: first.kernel.clone(),
        cmdline: first.cmdline.clone(),
        qemu_version: qemu_version(),
        qemu_command: Vec::new(),
        cpu_model: qemu::CPU_MODEL.into(),
        timing: match (sc.deterministic, sc.cpus) {
            (true, _) => "deterministic".into(),
            (false, 1) => "realtime".into(),
            (false, n) => format!("realtime, {n} CPUs"),
        },
        module_set: sc.module_set.clone(),
        variants: variants.iter().map(|(v, _)| v.clone()).collect(),
        partial: false,
        tracing_overhead_pct: None,
    };
    // DDLink's program, profiled and its caches written once per variant.
    let mut ddl = Vec::new();
    for (i, v) in sc.variants.iter().enumerate() {
        let d = match &v.spec.ddlink {
            Some(spec) => {
                progress::status(&format!("{}: profiling the DDLink program, writing its caches", v.spec.name));
                Some(ddlink::prepare(spec, &work.path().join(format!("v{i}-ddlink")))?)
            }
            None => None,
        };
        ddl.push(d);
    }
    // Function reordering's program and its SquashFS images, once per variant.
    let mut ord = Vec::new();
    for (i, v) in sc.variants.iter().enumerate() {
        let o = match &v.spec.order {
            Some(spec) => {
                progress::status(&format!("{}: the reordering case and its SquashFS images", v.spec.name));
                Some(order::prepare(spec, &v.tree, &work.path().join(format!("v{i}-order")))?)
            }
            None => None,
        };
        ord.push(o);
    }
    // One initramfs per variant (and one untraced, for the overhead).
    let mut images = Vec::new();
    for (i, (_, files)) in variants.iter().enumerate() {
        let img = work.path().join(format!("v{i}.cpio"));
        let root = work.path().join(format!("v{i}-root"));
        initramfs(&sc.variants[i], files, ddl[i].as_ref(), ord[i].as_ref(), sc.trace, &img, &root)?;
        let sizes = files
            .iter()
            .map(|(n, p)| (n.clone(), std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)))
            .collect::<Vec<_>>();
        images.push((img, sizes));
    }
    let total = sc.repetitions * variants.len() + sc.measure_overhead as usize;
    let mut n = 0;
    let boot = |v: &Variant, img: &Path, log: &Path| -> Result<qemu::Boot> {
        let mut o = QemuOptions::new(&v.kernel);
        o.initrd = Some(img.to_path_buf());
        o.cmdline = v.cmdline.clone();
        o.timeout = sc.timeout;
        o.memory_mib = sc.memory_mib;
        o.deterministic = sc.deterministic;
        o.cpus = sc.cpus;
        o.log = Some(log.to_path_buf());
        qemu::run(&o)
    };
    for rep in 0..sc.repetitions {
        for (vi, (v, files)) in variants.iter().enumerate() {
            n += 1;
            progress::status(&format!("boot {n}/{total}: {} repetition {}", v.name, rep + 1));
            let rel = PathBuf::from(format!("logs/{}-{}.log", v.name, rep));
            let b = boot(v, &images[vi].0, &sc.out.join(&rel))?;
            run.qemu_command = b.command.split_whitespace().map(str::to_string).collect();
            let framed = b.framed(crate::lab::initramfs::DEFAULT_TAG).unwrap_or_default();
            let traced = sc.trace && loaders::traceable(sc.variants[vi].spec.loader);
            let mut r = parse_boot(&framed, traced, &images[vi].1);
            r.index = rep;
            // A DDLink variant whose guest printed nothing gets an empty
            // record: its checks then say that no start was measured.
            let ddl_problems = match (&ddl[vi], &ord[vi]) {
                (Some(d), _) => {
                    let u = r.userspace.get_or_insert_with(Default::default);
                    u.command = ddlink::label(d);
                    ddlink::problems(u, d.starts)
                }
                (None, Some(o)) => {
                    let u = r.userspace.get_or_insert_with(Default::default);
                    u.command = order::label(o);
                    u.kind = crate::run::results::ORDER_KIND.into();
                    order::problems(u, o)
                }
                (None, None) => Vec::new(),
            };
            r.boot_wall_s = b.wall.as_secs_f64();
            r.log = rel;
            let failed = b.status != BootStatus::PoweredOff || !b.faults.is_empty();
            let not_loaded: Vec<&str> = r.modules.iter().filter(|m| m.status != 0).map(|m| m.name.as_str()).collect();
            // A storm's requests are counted, not its modules' loads.
            let measured = if r.storm.is_some() { files.len() } else { r.modules.len() };
            if failed || measured != files.len() {
                r.partial = true;
                let why = if failed {
                    format!("{}: {}", b.status.describe(), b.faults.first().cloned().unwrap_or_default())
                } else {
                    format!("{} of {} modules measured", r.modules.len(), files.len())
                };
                r.failure = Some(format!("{why}\n{}", b.excerpt(40)));
            } else if !not_loaded.is_empty() {
                r.failure = Some(format!("insmod failed for: {}", not_loaded.join(", ")));
            } else if !ddl_problems.is_empty() {
                r.failure = Some(ddl_problems.join("; "));
            }
            let stop = r.partial;
            run.variants[vi].repetitions.push(r);
            if stop {
                run.partial = true;
                crate::run::save(&run, &sc.out)?;
                return Ok(run);
            }
            crate::run::save(&run, &sc.out)?;
        }
    }
    if sc.measure_overhead && sc.trace {
        // The first variant again, untraced: what does the tracing cost?
        n += 1;
        progress::status(&format!("boot {n}/{total}: {} without tracing (overhead)", variants[0].0.name));
        let img = work.path().join("untraced.cpio");
        initramfs(
            &sc.variants[0],
            &variants[0].1,
            ddl[0].as_ref(),
            ord[0].as_ref(),
            false,
            &img,
            &work.path().join("untraced-root"),
        )?;
        let rel = sc.out.join(format!("logs/{}-untraced.log", variants[0].0.name));
        let b = boot(&variants[0].0, &img, &rel)?;
        let framed = b.framed(crate::lab::initramfs::DEFAULT_TAG).unwrap_or_default();
        let untraced = parse_boot(&framed, false, &images[0].1).modules_total_us;
        let traced: Vec<f64> = run.variants[0].repetitions.iter().map(|r| r.modules_total_us).collect();
        let traced = traced.iter().sum::<f64>() / traced.len().max(1) as f64;
        if untraced > 0.0 {
            run.tracing_overhead_pct = Some((traced - untraced) / untraced * 100.0);
        }
    }
    crate::run::save(&run, &sc.out)?;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The framed output of an untraced boot, shaped as the guest prints it.
    const UNTRACED: &str = "INSMOD crc16 0
INSMOD bad 1
TAINTED 8192
MODTAINT crc16 E
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
        let r = parse_boot(UNTRACED, false, &[("crc16".into(), 1234)]);
        assert_eq!(r.init_start_us, 1_500_000.0);
        assert_eq!(r.modules_total_us, 5_000.0);
        assert_eq!(r.initcalls.len(), 1);
        assert_eq!((r.initcalls[0].name.as_str(), r.initcalls[0].duration_us), ("pci_subsys_init", 2561.0));
        let got: Vec<(&str, f64, f64, i32, u64)> =
            r.modules.iter().map(|m| (m.name.as_str(), m.start_us, m.total_us, m.status, m.size)).collect();
        assert_eq!(got, [("crc16", 2_000_100.0, 4_000.0, 0, 1234), ("bad", 2_004_200.0, 200.0, 1, 0)]);
        assert_eq!(r.tainted, Some(8192));
        assert_eq!(r.module_taints.into_iter().collect::<Vec<_>>(), [("crc16".to_string(), "E".to_string())]);
    }
}
