//! `bootlink lab`: the arguments mapped onto the lab's request, the run,
//! and its checks printed. The lab's entry point is all this file knows of it.

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::Error;
use bootlink_lab::lab;

use super::{emit, exit};

#[derive(clap::Args)]
pub struct Args {
    /// Module names or aliases to load, with their dependencies (default: --set)
    names: Vec<String>,
    /// A named module set, a list file, or none (default: fs-nls-crypto-net-194)
    #[arg(long)]
    set: Option<String>,
    #[command(flatten)]
    boot: super::BootKernel,
    /// A preset (stock, folded, ...) or NAME=key:value,...; repeat to compare (default: stock and
    /// preresolved; --help for the grammar)
    #[arg(long = "variant", long_help = bootlink_lab::lab::variant::GRAMMAR)]
    variants: Vec<String>,
    /// The whole run from a TOML scenario file (docs/examples/); --variant adds to its variants
    #[arg(long, conflicts_with_all = ["names", "set", "kernel", "modules", "arch", "repetitions", "realtime", "smp",
        "no_trace", "measure_overhead", "timeout", "memory", "cmdline"])]
    scenario: Option<PathBuf>,
    /// Boots per variant, interleaved
    #[arg(short = 'n', long, default_value_t = 1)]
    repetitions: usize,
    /// Host time instead of the deterministic -icount clock
    #[arg(long)]
    realtime: bool,
    /// Virtual CPUs (more than 1 needs --realtime: QEMU's -icount runs one)
    #[arg(long, default_value_t = 1)]
    smp: u32,
    /// Do not ftrace the load phases (per-insmod times only)
    #[arg(long)]
    no_trace: bool,
    /// Boot once more without tracing and report what tracing costs
    #[arg(long)]
    measure_overhead: bool,
    /// Seconds before a boot is killed
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    #[arg(long, default_value_t = 1024)]
    memory: u32,
    /// Extra kernel command line
    #[arg(long, default_value = "")]
    cmdline: String,
    /// Boots run at once (default: one per host CPU; realtime runs boot one at a time, as they
    /// would time each other). Deterministic figures do not depend on it
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Run directory to write (default: ./lab-<time>)
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// Write the run as LAVA jobs into DIR instead of booting: per variant and repetition a
    /// job definition, the kernel and initramfs, bootlink-lava.json (docs/lava.md)
    #[arg(long, value_name = "DIR", conflicts_with_all = ["output", "measure_overhead"])]
    lava: Option<PathBuf>,
    /// The LAVA device type the jobs ask for: qemu, or a board's type
    #[arg(long, default_value = "qemu", requires = "lava")]
    lava_device_type: String,
    /// How that device type boots: qemu, u-boot or grub (default: qemu for the qemu type)
    #[arg(long, requires = "lava")]
    lava_boot: Option<String>,
    /// The URL LAVA downloads DIR's files from (default: file://DIR, a dispatcher on this machine)
    #[arg(long, requires = "lava")]
    lava_url: Option<String>,
    /// A device tree blob for a board's U-Boot
    #[arg(long, requires = "lava")]
    lava_dtb: Option<PathBuf>,
    /// The kernel's image type for U-Boot: image (default), zimage or uimage
    #[arg(long, requires = "lava")]
    lava_kernel_type: Option<String>,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let variants = a.variants.iter().map(|v| lab::variant::Variant::parse(v)).collect::<Result<Vec<_>, _>>()?;
    let req = match a.scenario {
        Some(file) => {
            lab::setup::Request { jobs: a.jobs, ..lab::scenario_file::load(&file, a.output)?.with_variants(variants) }
        }
        None => lab::setup::Request {
            target: lab::target::Target::of(a.boot.arch),
            kernel: a.boot.kernel,
            modules_dir: a.boot.modules,
            set: a.set,
            names: a.names,
            variants,
            repetitions: a.repetitions,
            realtime: a.realtime,
            smp: a.smp,
            no_trace: a.no_trace,
            measure_overhead: a.measure_overhead,
            timeout: std::time::Duration::from_secs(a.timeout),
            memory_mib: a.memory,
            out: a.output,
            extra_cmdline: a.cmdline,
            jobs: a.jobs,
        },
    };
    let lava = match &a.lava {
        Some(dir) => Some(bootlink_lab::lava::job::Options {
            dir: dir.clone(),
            device_type: a.lava_device_type.clone(),
            boot: bootlink_lab::lava::job::BootMethod::choose(a.lava_boot.as_deref(), &a.lava_device_type)?,
            url: a.lava_url.clone(),
            dtb: a.lava_dtb.clone(),
            kernel_type: a.lava_kernel_type.clone(),
        }),
        None => None,
    };
    match lab::setup::run(req, lava)? {
        lab::setup::Outcome::Jobs(report) => {
            emit(&report, a.json);
            Ok(ExitCode::SUCCESS)
        }
        lab::setup::Outcome::Booted(b) => {
            emit(&b.report(), a.json);
            Ok(exit(b.ok()))
        }
    }
}
