//! The `bootlink` command line: one file per subcommand, each an argument
//! struct mapped onto the library's request, a call, and the printing.
//! Nothing here decides anything the library could.

mod apply;
#[cfg(feature = "lab")]
mod chart;
mod ddlink;
mod extract_vmlinux;
mod fetch_kernel;
mod finalize;
mod glibc;
mod help_reference;
mod inspect;
mod kernel;
mod kernel_info;
#[cfg(feature = "lab")]
mod lab;
#[cfg(feature = "lab")]
mod lava;
mod manifest;
mod order;
mod plan;
mod preresolve;
#[cfg(feature = "lab")]
mod recommend;
#[cfg(feature = "lab")]
mod survey;
mod symhash;
#[cfg(feature = "lab")]
mod system;
mod values;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use bootlink::report::Report;
use bootlink::{Error, preresolve as pre, sign};

#[derive(Parser)]
#[command(name = "bootlink", version, about = "Move load-time linking work to build time, and measure boot")]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// The commands in the order of a user's work: read and plan; the build-time
// steps and apply; the builds; measuring (the lab); user-space start-up. Each
// doc comment's first line is the short help `bootlink --help` lists.
#[derive(Subcommand)]
enum Cmd {
    /// Report what load-time symbol resolution costs for modules against a kernel
    Inspect(inspect::Args),
    /// Show what bootlink reads from a kernel image: release, exports, KASLR
    KernelInfo(kernel_info::Args),
    /// Write the uncompressed vmlinux held in a bzImage or compressed image
    ExtractVmlinux(extract_vmlinux::Args),
    /// Download a real Debian kernel package into the cache and print its paths
    FetchKernel(fetch_kernel::Args),
    /// Write the batch loader's plan: modules in dependency order
    ///
    /// The plan is for loader/'s bl-modload: each module with the modules that must be live
    /// before it starts.
    Plan(plan::Args),
    /// Resolve module symbols against vmlinux at build time (SHN_UNDEF -> SHN_ABS)
    #[command(group(clap::ArgGroup::new("out").required(true).args(["output", "in_place", "dry_run"])))]
    Preresolve(preresolve::Args),
    /// Add precomputed symbol hash tables to modules or vmlinux
    ///
    /// SysV, GNU + Bloom or perfect tables for the module loader: for modules (added as
    /// .ksymhash/.undef.hash, re-signed) or vmlinux (--vmlinux, in place).
    #[command(group(clap::ArgGroup::new("target").required(true).args(["vmlinux", "kernel"])))]
    Symhash(symhash::Args),
    /// Do the loader's finalize work at build time (ORC sort, ftrace checks)
    ///
    /// Sorts each module's ORC table and checks its ftrace records (dropping those the kernel
    /// would disable), marked for a patched kernel.
    Finalize(finalize::Args),
    /// The module hash list: a build's final modules, trusted by their hash
    ///
    /// The SHA-256 (or BLAKE2b-256) of a build's final modules in the kernel image, so the
    /// kernel trusts them without a signature check each.
    Manifest {
        #[command(subcommand)]
        cmd: manifest::Cmd,
    },
    /// Take a kernel build and its modules through every step the kernel supports
    ///
    /// The steps are read from the kernel image's features and run in the lab's order; then
    /// the module hash list or signatures, the bzImage, depmod. Idempotent; --dry-run shows
    /// the plan.
    Apply(apply::Args),
    /// Build Debian's kernel source with bootlink's patch series (cached)
    Kernel {
        #[command(subcommand)]
        cmd: kernel::Cmd,
    },
    /// Build Debian's glibc with bootlink's patch series (cached)
    Glibc {
        #[command(subcommand)]
        cmd: glibc::Cmd,
    },
    /// Boot a real kernel under QEMU (TCG) and measure module loading, phase by phase
    #[cfg(feature = "lab")]
    Lab(lab::Args),
    /// Find which modules of a kernel's tree load under QEMU
    ///
    /// All of them (or a set) in dependency order, in batches of boots, on one variant; a
    /// boot that dies is cut at the module it died on. Writes the loadable modules as a list
    /// file and why the others did not load.
    #[cfg(feature = "lab")]
    Survey(survey::Args),
    /// Boot a real Debian system (systemd, udev) and measure module loading's share of its boot
    ///
    /// Debian bookworm on a virtual disk, its kernel installed as a package (initramfs-tools'
    /// initrd), booted under QEMU on a q35 PC; systemd-analyze's figures, the modules loaded in
    /// the initrd and after switch_root, each load traced. Writes system.json and console.log.
    #[cfg(feature = "lab")]
    System(system::Args),
    /// Chart boots: timeline, module load phases, longest links, before/after
    #[cfg(feature = "lab")]
    Chart(chart::Args),
    /// Recommend the kernel image (compressor) that reaches /init first from a storage
    ///
    /// The lab run's boots timed from reset plus the image's read time on the lab's flash
    /// model, and the throughputs at which the best image changes.
    #[cfg(feature = "lab")]
    Recommend(recommend::Args),
    /// Read finished LAVA jobs (written by `lab --lava DIR`) back into a run directory
    #[cfg(feature = "lab")]
    Lava {
        #[command(subcommand)]
        cmd: lava::Cmd,
    },
    /// DDLink: record a program's symbol bindings once, then let ld.so reuse them
    ///
    /// The patched ld.so takes them from a cache (File Read Mode) or skips relocation with
    /// prelinked images (Skip Mode).
    Ddlink {
        #[command(subcommand)]
        cmd: ddlink::Cmd,
    },
    /// Function reordering: a startup trace (trace/bl-trace) turned into a link order
    Order {
        #[command(subcommand)]
        cmd: order::Cmd,
    },
    /// Print the command-line reference (docs/cli.md) as Markdown
    #[command(hide = true)]
    HelpReference,
}

/// Parse the command line, run the command, report an error in one line.
pub fn main() -> ExitCode {
    bootlink::panic::install();
    // Rust ignores SIGPIPE, so printing into a closed pipe (`| head`) would
    // be an internal error; like any Unix filter, end quietly instead.
    // SAFETY: setting a signal's disposition to its default, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A file size limit (`ulimit -f`) would kill the process mid-write with
    // SIGXFSZ, leaving its temporary file; ignored, the write fails with
    // EFBIG and is reported in one line, the temporary removed.
    // SAFETY: as above.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bootlink: {e}");
            exit_for(&[e.kind])
        }
    }
}

/// 1 for bad input or a failed step; [`bootlink::panic::EXIT_INTERNAL`]
/// when any of the errors is a bug in bootlink.
fn exit_for(kinds: &[bootlink::error::Kind]) -> ExitCode {
    if kinds.contains(&bootlink::error::Kind::Internal) {
        ExitCode::from(bootlink::panic::EXIT_INTERNAL)
    } else {
        ExitCode::FAILURE
    }
}

fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Inspect(a) => inspect::run(a),
        Cmd::KernelInfo(a) => kernel_info::run(a),
        Cmd::ExtractVmlinux(a) => extract_vmlinux::run(a),
        Cmd::FetchKernel(a) => fetch_kernel::run(a),
        Cmd::Plan(a) => plan::run(a),
        Cmd::Preresolve(a) => preresolve::run(a),
        Cmd::Symhash(a) => symhash::run(a),
        Cmd::Finalize(a) => finalize::run(a),
        Cmd::Manifest { cmd } => manifest::run(cmd),
        Cmd::Apply(a) => apply::run(a),
        Cmd::Kernel { cmd } => kernel::run(cmd),
        Cmd::Glibc { cmd } => glibc::run(cmd),
        #[cfg(feature = "lab")]
        Cmd::Lab(a) => lab::run(a),
        #[cfg(feature = "lab")]
        Cmd::Survey(a) => survey::run(a),
        #[cfg(feature = "lab")]
        Cmd::System(a) => system::run(a),
        #[cfg(feature = "lab")]
        Cmd::Chart(a) => chart::run(a),
        #[cfg(feature = "lab")]
        Cmd::Recommend(a) => recommend::run(a),
        #[cfg(feature = "lab")]
        Cmd::Lava { cmd } => lava::run(cmd),
        Cmd::Ddlink { cmd } => ddlink::run(cmd),
        Cmd::Order { cmd } => order::run(cmd),
        Cmd::HelpReference => {
            print!("{}", help_reference::markdown(&<Cli as clap::CommandFactory>::command()));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The kernel a QEMU command boots and its modules (`lab`, `survey`).
#[cfg(feature = "lab")]
#[derive(clap::Args)]
pub struct BootKernel {
    /// Kernel to boot: vmlinux (PVH) or bzImage; on arm64 Image or Debian's vmlinuz (default:
    /// Debian's 6.1 of the architecture, fetched)
    #[arg(long, requires = "modules")]
    kernel: Option<PathBuf>,
    /// lib/modules/<release> of that kernel
    #[arg(long)]
    modules: Option<PathBuf>,
    /// The guest's architecture: x86-64 (qemu-system-x86_64, pc, Haswell) or arm64
    /// (qemu-system-aarch64, virt, Cortex-A72)
    #[arg(long, default_value = "x86-64", value_parser = parse_arch)]
    arch: bootlink_lab::lab::target::Arch,
}

#[cfg(feature = "lab")]
fn parse_arch(s: &str) -> Result<bootlink_lab::lab::target::Arch, String> {
    use bootlink_lab::lab::target::Arch;
    Arch::parse(s).ok_or_else(|| {
        let known: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        format!("not one of {}", known.join(", "))
    })
}

/// Where rewritten modules go, shared by the commands that rewrite them.
#[derive(clap::Args, Debug)]
pub struct Rewrite {
    /// Write the modules here, mirroring the input tree
    #[arg(short, long, conflicts_with = "in_place")]
    output: Option<PathBuf>,
    /// Replace the input modules (atomically)
    #[arg(long)]
    in_place: bool,
}

impl Rewrite {
    fn chosen(&self) -> bool {
        self.output.is_some() || self.in_place
    }

    fn output(self) -> pre::Output {
        match self.output {
            Some(d) => pre::Output::Dir(d),
            None => pre::Output::InPlace,
        }
    }
}

/// Re-signing, shared by the commands that rewrite modules.
#[derive(clap::Args, Debug)]
pub struct Signing {
    /// Re-sign the modules with this private key (PEM)
    #[arg(long, requires = "sign_cert")]
    sign_key: Option<PathBuf>,
    /// ...and this X.509 certificate (PEM)
    #[arg(long, requires = "sign_key")]
    sign_cert: Option<PathBuf>,
    /// The signature's digest
    #[arg(long, value_enum, default_value_t = values::SignHash::Sha256)]
    sign_hash: values::SignHash,
}

impl Signing {
    fn key(self) -> Option<sign::SignKey> {
        let hash = self.sign_hash.into();
        self.sign_key.zip(self.sign_cert).map(|(key, cert)| sign::SignKey { key, cert, hash })
    }
}

/// A batch transform's report: each failed module on stderr, then the
/// report (JSON, or the table when any module succeeded); exit 1 when any failed.
fn print_batch(report: &impl Report, errors: &[bootlink::tree::FileError], empty: bool, json: bool) -> ExitCode {
    for e in errors {
        eprintln!("bootlink: {}: {}", e.path.display(), e.error);
    }
    if json || !empty {
        emit(report, json);
    }
    if errors.is_empty() { ExitCode::SUCCESS } else { exit_for(&errors.iter().map(|e| e.kind).collect::<Vec<_>>()) }
}

/// Print a command's result: its JSON with `--json`, else its text. Every
/// command's output goes through here.
fn emit(report: &impl Report, json: bool) {
    if json {
        print_json(report);
    } else {
        print!("{}", report.render());
    }
}

fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serializable"));
}

/// Success, or exit 1 (a check failed; the output says which).
fn exit(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
