//! What a lab run records: the file `run.json` in a run directory, which
//! `bootlink chart` reads. All times are microseconds of guest time unless
//! a field says otherwise (`*_s` fields are host wall seconds).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Each workload's results, from its folder (`workload/<name>/record.rs`),
/// under the names run.json's readers use.
pub use crate::workload::ddlink::record::{DdlinkStart, DdlinkStarts, USER_MODES};
pub use crate::workload::imageread::record::ImageRead;
pub use crate::workload::modules::record::{LoaderResult, Storm};
pub use crate::workload::order::record::{OrderStart, OrderStarts};
pub use crate::workload::program::record::ProgramRun;
pub use crate::workload::start::Start;

/// 2: each workload's results in `workloads`, tagged by `"workload"`
/// (format 1 had `loader`, `storm`, `userspace` and `run_output` fields on
/// the repetition; [`crate::run::parse_run_json`] reads both).
pub const FORMAT_VERSION: u32 = 2;

/// The phases of loading one module, in the order the kernel runs them.
pub(crate) const PHASES: &[&str] = &[
    "read",       // copying the file into the kernel (finit_module: kernel_read_file)
    "decompress", // in-kernel decompression (CONFIG_MODULE_DECOMPRESS)
    "signature",  // module_sig_check
    "layout",     // layout_and_allocate: section layout, vmalloc
    "symbols",    // simplify_symbols: symbol resolution (resolve_symbol for each SHN_UNDEF)
    "relocation", // apply_relocations
    "finalize",   // post_relocation + module_finalize (alternatives, ftrace, ORC)
    "init",       // do_init_module: the module's init function and freeing init memory
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    pub name: String,
    /// Start, relative to boot.
    pub start_us: f64,
    pub duration_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModuleLoad {
    pub name: String,
    /// Start of load_module (or of the insmod when phases are unknown).
    pub start_us: f64,
    /// load_module + do_init_module as the kernel ran them.
    pub total_us: f64,
    /// Phases in kernel order; they never add up to more than total_us.
    pub phases: Vec<Phase>,
    /// resolve_symbol calls (symbol lookups) made for this module, if counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookups: Option<u64>,
    /// Size of the module file in bytes.
    #[serde(default)]
    pub size: u64,
    /// insmod's exit status (0 = loaded).
    #[serde(default)]
    pub status: i32,
    /// The finalize phase cut into its links (see [`FINALIZE_STEPS`]); they
    /// add up to the finalize phase exactly ("rest" takes what no landmark
    /// explains). Empty when not traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalize_steps: Vec<Phase>,
    /// The init phase cut into its links (see [`INIT_STEPS`]) the same way;
    /// empty when do_one_initcall was not traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_steps: Vec<Phase>,
    /// The batch loader's worker that loaded it (its lane in a parallel
    /// timeline); None for sequential loaders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
}

/// The links of the finalize phase, in the order load_module runs them.
pub(crate) const FINALIZE_STEPS: &[&str] = &[
    "kallsyms",             // add_kallsyms: the module's load-time symbol table
    "alternatives",         // module_finalize minus the ORC sort: alternatives, retpolines, returns, paravirt
    "ORC sort",             // unwind_module_init: heapsort of .orc_unwind_ip
    "memory protection",    // module_enable_ro .. module_enable_x
    "ftrace weak-fn check", // ftrace_module_enable: a kallsyms scan per __mcount_loc entry (notrace: a gap)
    "jump labels",          // jump_label_module_notify: the module's jump entries sorted and linked
    "trace event files",    // trace_events' module notifier: event directories and files (a gap)
    "static calls",         // static_call_module_notify: the module's static call sites
    "BTF",                  // btf_module_notify: the module's BTF parsed and checked against vmlinux's
    // trace.c's module notifier: print_fmt rescans per TRACE_DEFINE_ENUM (the untraced
    // gaps after the event files, wherever that notifier registered; bpf_event_notify too)
    "trace eval maps",
    "sysfs", // mod_sysfs_setup: the module's kobject, parameter and section attributes
    "rest",  // ftrace records, bug table, other notifiers, parameters
];

/// The links of the init phase (do_init_module): the module's init
/// function (do_one_initcall) less what its traced callees took, those
/// callees by what they do, and what do_init_module does after it.
pub(crate) const INIT_STEPS: &[&str] = &[
    "init function",           // do_one_initcall(mod->init), less the links below inside it
    "crypto registration",     // crypto_register_alg: with self-tests enabled, their wait too
    "slab caches",             // kmem_cache_create_usercopy (kmem_cache_create's body)
    "per-netns setup",         // register_pernet_subsys/_device: the init for every namespace
    "workqueues",              // alloc_workqueue (a rescuer thread for WQ_MEM_RECLAIM)
    "filesystem registration", // register_filesystem
    "async wait",              // async_synchronize_full after the init function
    "after init",              // LIVE notifiers, uevent, freeing init memory, the rest
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Initcall {
    pub name: String,
    pub start_us: f64,
    pub duration_us: f64,
    #[serde(default)]
    pub ret: i64,
    /// The module it belongs to, for module init functions ("" for built-in).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub module: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Repetition {
    pub index: usize,
    /// Host wall seconds from starting QEMU to its exit.
    pub boot_wall_s: f64,
    /// Guest time at which /init started (from printk timestamps).
    #[serde(default)]
    pub init_start_us: f64,
    /// Guest time spent loading the whole module set.
    #[serde(default)]
    pub modules_total_us: f64,
    pub initcalls: Vec<Initcall>,
    pub modules: Vec<ModuleLoad>,
    /// Console log, relative to the run directory.
    pub log: PathBuf,
    /// The boot failed or timed out: what is here is what was parsed.
    #[serde(default)]
    pub partial: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// This repetition was booted a second time: its first boot (realtime,
    /// several vCPUs) hung before /init printed a line, and this says how
    /// (the timeout and each vCPU's place). Its figures are the second
    /// boot's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booted_again: Option<String>,
    /// What each workload of the variant measured beyond the module loads,
    /// in the order /init ran them, each tagged by its workload
    /// (`"workload"` in run.json).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadResult>,
    /// The kernel's taint mask (`/proc/sys/kernel/tainted`) once the
    /// modules were loaded (see [`crate::run::taint`]; lab boots only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tainted: Option<u64>,
    /// The loaded modules that tainted the kernel and their letters
    /// (`/sys/module/NAME/taint`, e.g. "E" for an unsigned module).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub module_taints: BTreeMap<String, String>,
    /// Where the kernel's text was in this boot (`_text` in
    /// /proc/kallsyms, hexadecimal): the base KASLR chose, or the link-time
    /// one with nokaslr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_text: Option<String>,
    /// Where `_stext` was, when /proc/kallsyms had no `_text` (arm64
    /// without CONFIG_KALLSYMS_ALL, Debian's): `kernel_text` is then
    /// placed from it by where the image links the two (an arm64 Image's
    /// EFI header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stext: Option<String>,
    /// This boot's KASLR slide in bytes: `kernel_text` minus `_text`'s
    /// link-time address in the booted image (0: where it was linked, as
    /// with `nokaslr` or through the vmlinux's PVH entry). Absent when the
    /// boot's `_text` is not known or the image gives no link-time address
    /// (an x86-64 image without a build ID, an arm64 Image without its
    /// config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kaslr_slide: Option<u64>,
    /// Every process of the boot's user space from /init on (ftrace's
    /// sched_process_fork/exec/exit events, on the kernel log's clock), in
    /// the order they were forked: the whole user space on the kernel's
    /// timeline. Runs written before every boot recorded them kept those
    /// of `order:` starts in `userspace.processes`; [`crate::run::load`]
    /// moves them here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Process>,
    /// Guest time from machine reset to the boot's landmarks (deterministic
    /// lab boots only; see [`BootClock`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_clock: Option<BootClock>,
    /// The function the symbols phase was timed at in this traced boot
    /// ([`crate::run::ftrace::symbols_timed_at`]): `simplify_symbols`, one
    /// traced call per load, or `resolve_symbol` where the kernel inlined
    /// simplify_symbols: every lookup traced, each carrying the tracer's
    /// cost. Absent: not traced, no load reached its symbols, or a run
    /// from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols_timed_at: Option<String>,
    /// The LAVA job this boot was (`bootlink lava import`): its id, or the
    /// log's file name when the log does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

/// Guest time from machine reset, in microseconds: firmware, the boot
/// loader's setup, a bzImage's decompressor and the kernel, which the
/// kernel's printk times (on another base, started partway into the
/// kernel) cannot show. From the guest's cycle counter, which under
/// `-icount` is QEMU's virtual clock from reset (`bootclock/`, and the
/// lab kernels' patch "x86/boot: print the TSC at the decompressor's
/// entry, exit and start_kernel").
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct BootClock {
    /// To /init's first command.
    pub init_us: f64,
    /// To the decompressor's entry (the compressed image already moved)
    /// and to its end (the kernel decompressed, parsed, relocated): a
    /// bzImage boot of a lab kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decompressor_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decompressed_us: Option<f64>,
    /// To start_kernel() (a lab kernel, any boot path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_kernel_us: Option<f64>,
}

impl BootClock {
    /// The decompressor's own time, entry to end.
    pub fn decompress_us(&self) -> Option<f64> {
        Some(self.decompressed_us? - self.decompressor_us?)
    }
}

/// One process of the guest's user space: forked (or first seen at its
/// exec), executed, exited; guest microseconds since boot. `end_us` is None
/// for a process still running when the trace stopped (/init, the body's
/// shell).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Process {
    pub pid: u32,
    /// The forking process (0 when not seen).
    pub parent: u32,
    /// The file it executed (its name), else its command name.
    pub name: String,
    pub start_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_us: Option<f64>,
}

/// One workload's results in one boot, tagged by the workload
/// (`"workload"` in run.json). Adding a workload that reports results is a
/// variant here and its type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "workload", rename_all = "lowercase")]
pub enum WorkloadResult {
    /// Module loading with a loader other than sequential insmod (`loader:`).
    Loader(LoaderResult),
    /// A duplicate-request storm (`loader:storm`).
    Storm(Storm),
    /// A program started under DDLink's patched ld.so in each mode of
    /// [`USER_MODES`] (`ddlink:`).
    Ddlink(DdlinkStarts),
    /// Function reordering's cold starts from emulated flash (`order:`).
    Order(OrderStarts),
    /// A host program run once (`run:`).
    Program(ProgramRun),
    /// The booted image read back from the lab's emulated flash (`read:`).
    ImageRead(ImageRead),
}

impl WorkloadResult {
    /// The workload's name, as run.json tags it.
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadResult::Loader(_) => "loader",
            WorkloadResult::Storm(_) => "storm",
            WorkloadResult::Ddlink(_) => "ddlink",
            WorkloadResult::Order(_) => "order",
            WorkloadResult::Program(_) => "program",
            WorkloadResult::ImageRead(_) => "imageread",
        }
    }
}

/// Each workload's result in a repetition, by its type.
macro_rules! workload_accessors {
    ($($get:ident, $get_mut:ident, $variant:ident, $ty:ty;)*) => {
        impl Repetition {
            $(
                pub fn $get(&self) -> Option<&$ty> {
                    self.workloads.iter().find_map(|w| match w {
                        WorkloadResult::$variant(x) => Some(x),
                        _ => None,
                    })
                }
                /// The result, added (empty) if the boot recorded none.
                pub fn $get_mut(&mut self) -> &mut $ty {
                    let i = match self.workloads.iter().position(|w| matches!(w, WorkloadResult::$variant(_))) {
                        Some(i) => i,
                        None => {
                            self.workloads.push(WorkloadResult::$variant(Default::default()));
                            self.workloads.len() - 1
                        }
                    };
                    match &mut self.workloads[i] {
                        WorkloadResult::$variant(x) => x,
                        _ => unreachable!("found above"),
                    }
                }
            )*
        }
    };
}

workload_accessors! {
    loader, loader_mut, Loader, LoaderResult;
    storm, storm_mut, Storm, Storm;
    ddlink, ddlink_mut, Ddlink, DdlinkStarts;
    order, order_mut, Order, OrderStarts;
    program, program_mut, Program, ProgramRun;
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Variant {
    /// "stock", "unsigned", "preresolved", ... or the name a composed
    /// variant was given (`--variant NAME=kernel:...,modules:...`).
    pub name: String,
    pub repetitions: Vec<Repetition>,
    /// The image this variant booted (empty in runs older than variants
    /// with their own kernels: then it is the run's `kernel`).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub kernel: PathBuf,
    /// The kernel `kernel` was made from when the lab made the variant an
    /// image of its own (its module hash list written into a copy of the
    /// vmlinux, a bzImage linked around it): what says its build and
    /// config. Empty when the variant booted the kernel as it is.
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub made_from: PathBuf,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_release: String,
    /// How the modules were made: stock, unsigned, preresolved, folded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub transform: String,
    /// The whole kernel command line this variant booted with.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cmdline: String,
    /// `NAME=FILE`: module NAME's file in the guest held FILE's bytes as
    /// they are, not a module of the tree (the lab's `raw:` key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub raw_module: String,
    /// The image QEMU booted, as a boot loader reads it from storage
    /// (lab runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<BootImage>,
    /// The module files the guest's loader read (lab runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_files: Option<ModuleFiles>,
}

/// The set's module files as the guest holds them: what a loader reads
/// from storage before the kernel (or user space) decompresses them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ModuleFiles {
    /// `none`, `xz`, `zstd` or `gzip` (the variant's compress: step).
    pub compression: String,
    pub files: u64,
    /// The files' sizes, summed.
    pub file_bytes: u64,
    /// 4 KiB requests to read them one file after the other (each file
    /// rounded up to whole requests): the flash model's unit.
    pub requests_4k: u64,
}

/// A booted kernel image: what a boot loader reads, and what decompresses it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BootImage {
    /// `bzImage`, `vmlinux` (booted uncompressed through PVH) or `Image` (arm64).
    pub kind: String,
    /// The compressor of a bzImage's kernel (`xz`, `lz4`, ...), `none` for
    /// an uncompressed kernel.
    pub compression: String,
    /// The file's size.
    pub file_bytes: u64,
    /// What a boot loader reads: the whole file, or a vmlinux's loadable
    /// segments (its symbols and debug information stay on the host).
    pub read_bytes: u64,
}

fn is_empty_path(p: &std::path::Path) -> bool {
    p.as_os_str().is_empty()
}

impl Variant {
    /// A variant with this name and no repetitions yet.
    pub fn named(name: &str) -> Variant {
        Variant {
            name: name.to_string(),
            repetitions: Vec::new(),
            kernel: PathBuf::new(),
            made_from: PathBuf::new(),
            kernel_release: String::new(),
            transform: String::new(),
            cmdline: String::new(),
            raw_module: String::new(),
            image: None,
            module_files: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Run {
    pub format: u32,
    /// Where it came from: "lab" for a QEMU run, "dmesg" for a parsed log.
    pub source: String,
    pub kernel_release: String,
    pub kernel: PathBuf,
    pub cmdline: String,
    #[serde(default)]
    pub qemu_version: String,
    #[serde(default)]
    pub qemu_command: Vec<String>,
    /// The guest CPU: QEMU's `-cpu` model and feature changes (without
    /// `,enforce`); empty in runs written before it was pinned (`max`).
    #[serde(default)]
    pub cpu_model: String,
    /// QEMU's `-machine` (`pc` on x86-64); empty in runs written before the
    /// lab named it (QEMU's default machine, which was `pc`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine: String,
    /// The guest's architecture (`x86-64`); empty in runs written before
    /// the lab recorded it (all of them x86-64).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arch: String,
    /// "deterministic" (-icount shift=0,sleep=off) or "realtime".
    pub timing: String,
    pub module_set: String,
    pub variants: Vec<Variant>,
    #[serde(default)]
    pub partial: bool,
    /// Cost of the in-guest tracing, measured by the lab (percent of the
    /// module set's load time), if measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing_overhead_pct: Option<f64>,
    /// The LAVA device type the boots ran on (`source` "lava", `bootlink
    /// lava import`); empty for the lab's own boots.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device_type: String,
}
