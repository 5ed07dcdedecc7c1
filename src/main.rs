//! The `bootlink` command line: parse arguments, call the library, print.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use bootlink::{
    Error, chart, ddlink, fetch, finalize, fsutil, glibc, inspect, kbuild, kernel, lab, manifest, order, preresolve,
    sign, symhash,
};

#[derive(Parser)]
#[command(name = "bootlink", version, about = "Move load-time linking work to build time, and measure boot")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Report what load-time symbol resolution costs for modules against a kernel
    Inspect {
        /// vmlinux, bzImage/vmlinuz, compressed vmlinux, System.map (with
        /// Module.symvers beside it), or a build directory
        kernel: PathBuf,
        /// Module files (.ko, .ko.xz, .ko.zst, .ko.gz) or directories
        #[arg(required = true)]
        modules: Vec<PathBuf>,
        /// Kernel config (default: IKCONFIG, or config-<release>/.config beside the image)
        #[arg(long)]
        config: Option<PathBuf>,
        /// How many modules to list, most undefined symbols first
        #[arg(long, default_value_t = 20, conflicts_with = "all")]
        top: usize,
        /// List every module
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Do the loader's finalize work at build time: sort each module's ORC table and check its
    /// ftrace records (dropping those the kernel would disable), marked for a patched kernel
    Finalize {
        /// vmlinux, vmlinuz or build directory the modules will run with (refuses others)
        #[arg(long)]
        kernel: Option<PathBuf>,
        /// Module files or directories
        #[arg(required = true)]
        modules: Vec<PathBuf>,
        #[command(flatten)]
        rewrite: Rewrite,
        /// Leave the ORC unwind tables as they are
        #[arg(long)]
        no_orc: bool,
        /// Leave the ftrace records (__mcount_loc) as they are
        #[arg(long)]
        no_mcount: bool,
        /// Plan and check everything in memory, write nothing
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        signing: Signing,
        #[arg(long)]
        json: bool,
    },
    /// Precomputed symbol hash tables for the module loader (SysV, GNU + Bloom, perfect),
    /// for modules (added as .ksymhash/.undef.hash, re-signed) or vmlinux (--vmlinux, in place)
    #[command(group(clap::ArgGroup::new("target").required(true).args(["vmlinux", "kernel"])))]
    Symhash {
        /// Fill this vmlinux's reserved __ksymhash section in place (the kernel
        /// build's KSYMHASH hook)
        #[arg(long, conflicts_with_all = ["kernel", "modules", "output", "in_place", "sort_versions", "dry_run"])]
        vmlinux: Option<PathBuf>,
        /// vmlinux, vmlinuz or build directory the modules will run with
        #[arg(long, requires = "modules")]
        kernel: Option<PathBuf>,
        /// Module files or directories
        modules: Vec<PathBuf>,
        #[command(flatten)]
        rewrite: Rewrite,
        /// Also sort __versions by name, so the kernel binary-searches it
        #[arg(long)]
        sort_versions: bool,
        /// Build and check everything in memory, write nothing
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        signing: Signing,
        #[arg(long)]
        json: bool,
    },
    /// Resolve module symbols against vmlinux at build time (SHN_UNDEF -> SHN_ABS)
    #[command(group(clap::ArgGroup::new("out").required(true).args(["output", "in_place", "dry_run"])))]
    Preresolve {
        /// vmlinux or vmlinuz the modules will run with
        #[arg(long)]
        kernel: PathBuf,
        /// Kernel config (default: IKCONFIG, or config-<release>/.config beside the image)
        #[arg(long)]
        config: Option<PathBuf>,
        /// Module files or directories
        #[arg(required = true)]
        modules: Vec<PathBuf>,
        #[command(flatten)]
        rewrite: Rewrite,
        /// The target boots with `nokaslr` (or an entry that does not randomize):
        /// required when the kernel has CONFIG_RANDOMIZE_BASE=y or its config is unknown
        #[arg(long)]
        assume_nokaslr: bool,
        /// Re-signing of changed modules
        #[command(flatten)]
        signing: Signing,
        /// Fold the resolved addresses into the relocations and remove the
        /// symbols from .symtab, instead of leaving them as SHN_ABS (x86-64)
        #[arg(long)]
        fold_symbols: bool,
        /// Also remove local data symbols that no relocation uses, shortening the kernel's
        /// symbol-table scans (their names leave /proc/kallsyms)
        #[arg(long)]
        trim_symtab: bool,
        /// Do and check everything in memory, write nothing
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// Write the batch loader's plan (loader/, bl-modload): modules in dependency order, each with
    /// the modules that must be live before it starts
    Plan {
        /// Module names or aliases to load, with their dependencies
        names: Vec<String>,
        /// A named module set or a list file instead of names
        #[arg(long)]
        set: Option<String>,
        /// lib/modules/<release> of the kernel (default: Debian's 6.1, fetched)
        #[arg(long)]
        modules: Option<PathBuf>,
        /// Directory the paths in the plan start with (default: /lib/modules/<release>)
        #[arg(long)]
        prefix: Option<String>,
        /// modprobe.d-style file: `options NAME ARGS` (parameters) and `softdep NAME pre: ...` (extra
        /// dependencies), added to bootlink's known runtime dependencies (data/runtime-deps.conf)
        #[arg(long)]
        options: Option<PathBuf>,
        /// Write the plan here (atomically) instead of to standard output
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Boot a real kernel under QEMU (TCG) and measure module loading, phase by phase
    Lab {
        /// Module names or aliases to load, with their dependencies (default: --set)
        names: Vec<String>,
        /// A named module set, a list file, or none (default: fs-nls-crypto-net-194)
        #[arg(long)]
        set: Option<String>,
        /// Kernel to boot: vmlinux (PVH) or bzImage (default: Debian's 6.1, fetched)
        #[arg(long, requires = "modules")]
        kernel: Option<PathBuf>,
        /// lib/modules/<release> of that kernel
        #[arg(long)]
        modules: Option<PathBuf>,
        /// stock, unsigned, preresolved, folded, or NAME=kernel:default|debian|debian-SERIES|build|DIR,modules:TRANSFORM,
        /// loader:insmod|batch|batch-N|modprobe|modprobe-parallel|storm,cmdline:ARGS,run:/PATH ARGS,
        /// ddlink:synth|synth-SYMBOLS|/PATH ARGS (a program under DDLink's ld.so: normal, file-read, skip),
        /// order:synth|synth-4k|synth-64k|synth-128k[+...] (order synth's program unordered and reordered,
        /// cold from SquashFS on emulated flash, readahead 0 and default), flash:seed|nand|nor|MIBS-USEC
        /// (with order:; default seed: 1 MiB/s, 100 us per 4 KiB request),
        /// starts:N (per mode, default 3; 2 with order:), manifest:on (boot a copy of the kernel whose
        /// module hash manifest lists the variant's final modules), raw:NAME=FILE (FILE's bytes as module
        /// NAME's file in the guest, unread by the host); repeat to compare (default: stock and preresolved)
        #[arg(long = "variant")]
        variants: Vec<String>,
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
        /// Run directory to write (default: ./lab-<time>)
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Chart boots: timeline, module load phases, longest links, before/after
    Chart {
        /// Lab run directories, run.json files or kernel logs (dmesg)
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// The HTML report to write
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The timelines as one SVG
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Chrome trace-event JSON for ui.perfetto.dev
        #[arg(long)]
        perfetto: Option<PathBuf>,
        /// Print the before/after summary as JSON
        #[arg(long)]
        json: bool,
    },
    /// Show what bootlink reads from a kernel image: release, exports, KASLR
    KernelInfo {
        kernel: PathBuf,
        #[arg(long)]
        config: Option<PathBuf>,
        /// List every export (address, CRC, type, namespace, name)
        #[arg(long)]
        exports: bool,
        #[arg(long)]
        json: bool,
    },
    /// Write the uncompressed vmlinux held in a bzImage or compressed image
    ExtractVmlinux {
        image: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// DDLink: record a program's symbol bindings once, then let the patched ld.so take them
    /// from a cache (File Read Mode) or skip relocation with prelinked images (Skip Mode)
    Ddlink {
        #[command(subcommand)]
        cmd: DdlinkCmd,
    },
    /// Function reordering: a startup trace (trace/bl-trace) turned into a link order
    Order {
        #[command(subcommand)]
        cmd: OrderCmd,
    },
    /// The module hash manifest: the SHA-256 of a build's final modules in the kernel image
    /// (kernel/patches 0012), so the kernel trusts them without a signature check each
    Manifest {
        #[command(subcommand)]
        cmd: ManifestCmd,
    },
    /// Build Debian's kernel source with bootlink's patch series and lab config (cached)
    Kernel {
        #[command(subcommand)]
        cmd: KernelCmd,
    },
    /// Build Debian's glibc (the installed libc6's version) with bootlink's patch series (cached)
    Glibc {
        #[command(subcommand)]
        cmd: GlibcCmd,
    },
    /// Download a real Debian kernel package into the cache and print its paths
    FetchKernel {
        /// Kernel series (newest package of it), e.g. 6.1 or 6.12
        #[arg(long, conflicts_with = "package")]
        version: Option<String>,
        /// Exact package, e.g. linux-image-6.1.0-56-amd64[=6.1.192-2]
        #[arg(long)]
        package: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ManifestCmd {
    /// Write a copy of VMLINUX whose __modhashes section lists these modules (and its bzImage)
    Write {
        /// The kernel (a vmlinux built with kernel/patches 0012)
        #[arg(long)]
        vmlinux: PathBuf,
        /// Where to write the kernel with the manifest (may be VMLINUX itself)
        #[arg(long, short)]
        output: PathBuf,
        /// Also write the bzImage of the listed vmlinux here: arch/x86/boot's chain (payload,
        /// decompressor link, setup, tools/build) replayed from the kernel's object tree
        #[arg(long)]
        bzimage: Option<PathBuf>,
        /// The kernel's object tree (default: the `tree` of a `bootlink kernel build` output
        /// the vmlinux lies in, from its build.json)
        #[arg(long, requires = "bzimage")]
        tree: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        /// The final modules: files or directories (.ko, .ko.xz, .ko.zst, .ko.gz)
        #[arg(required = true)]
        modules: Vec<PathBuf>,
    },
    /// List the digests in a kernel's manifest (a vmlinux or a bzImage)
    Show {
        vmlinux: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// A startup trace and the binaries it is read against.
#[derive(clap::Args)]
struct TraceArgs {
    /// The trace bl-trace wrote
    #[arg(long)]
    trace: PathBuf,
    /// The binary that was traced (built with -finstrument-functions, not stripped)
    #[arg(long)]
    binary: PathBuf,
    /// The binary the order is for (same sources, without instrumentation), for the
    /// prediction and to check it has every function (default: --binary)
    #[arg(long)]
    layout: Option<PathBuf>,
    /// Which object of the trace is the binary ("-": the program itself)
    #[arg(long, default_value = "-")]
    object: String,
    /// Leave out the traced functions --layout lacks (GCC inlines functions in a build
    /// without -finstrument-functions that the instrumented build keeps) instead of
    /// refusing the trace
    #[arg(long, requires = "layout")]
    allow_missing: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum OrderCmd {
    /// Map a trace onto the traced binary's functions and write the order for GNU ld
    /// (order.ld), gold (order.gold) and lld (order.lld)
    Write {
        #[command(flatten)]
        t: TraceArgs,
        /// Directory for the order files
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Predict the pages and storage blocks startup touches before and after the order
    Report {
        #[command(flatten)]
        t: TraceArgs,
    },
    /// The seed's test end to end: generate and build a program of FUNCTIONS small functions
    /// of which STARTUP run at startup, trace it, order it, relink it with every installed
    /// linker, check its output, count blocks
    Synth {
        #[arg(long, default_value_t = 10_000)]
        functions: u32,
        #[arg(long, default_value_t = 1_000)]
        startup: u32,
        #[arg(long, default_value_t = 100)]
        files: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        json: bool,
    },
    /// Record a start-up trace without a rebuild: PROGRAM run once under QEMU's user-mode
    /// emulator (qemu-x86_64), its first translated blocks mapped to its functions
    Record {
        /// Where the trace goes (bl-trace's format: `order write --trace`)
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        json: bool,
        /// The program (not stripped) and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The real program end to end: build CPython 3.11 from Debian's source (plain and
    /// instrumented, cached), trace its start-up, order it, relink it with every installed
    /// linker, rewrite it with BOLT and its own profile, check every build's output
    Python {
        #[arg(long)]
        json: bool,
    },
}

/// A program run under the patched loader with a cache.
#[derive(clap::Args)]
struct CacheRun {
    /// The patched ld.so (default: `bootlink glibc build`'s, built if needed)
    #[arg(long)]
    loader: Option<PathBuf>,
    /// The cache from `bootlink ddlink write`
    #[arg(long)]
    cache: PathBuf,
    /// Run with the prelinked images under DIR in place (`ddlink write --prelink DIR`)
    #[arg(long, value_name = "DIR")]
    overlay: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<String>,
}

#[derive(Subcommand)]
enum DdlinkCmd {
    /// Run PROGRAM once under the patched ld.so with every binding made at startup, recording them
    Profile {
        /// The patched ld.so (default: `bootlink glibc build`'s, built if needed)
        #[arg(long)]
        loader: Option<PathBuf>,
        /// Where to write the record
        #[arg(long, short)]
        output: PathBuf,
        #[arg(long)]
        json: bool,
        /// The program and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<String>,
    },
    /// Turn a record into the cache the loader reads, after checking it against the files
    Write {
        /// The patched ld.so that recorded (default: `bootlink glibc build`'s)
        #[arg(long)]
        loader: Option<PathBuf>,
        /// The record from `bootlink ddlink profile`
        #[arg(long)]
        record: PathBuf,
        /// The program the record is of (the loader records the program
        /// without a name)
        #[arg(long)]
        program: PathBuf,
        /// Where to write the cache
        #[arg(long, short)]
        output: PathBuf,
        /// Relocation Skip Mode: also write the libraries' prelinked images
        /// under DIR (each at its own path below DIR; run with `--overlay DIR`
        /// or install them), and a cache that names them
        #[arg(long, value_name = "DIR")]
        prelink: Option<PathBuf>,
        /// Load address of the first prelinked image
        #[arg(long, value_parser = parse_address, default_value = "0x3000000000")]
        base: u64,
        /// For a root file system image: identify files by name, size, mtime
        /// (seconds) and build ID, not device and inode
        #[arg(long)]
        portable: bool,
        #[arg(long)]
        json: bool,
    },
    /// Run PROGRAM with the cache, look every cached binding up the normal way too, and compare
    Verify(CacheRun),
    /// Startup of PROGRAM under Debian's ld.so, the patched one without a cache, and with the
    /// cache: relocation time, lookups, task-clock, page faults, output identical
    Measure {
        /// The patched ld.so (default: `bootlink glibc build`'s, built if needed)
        #[arg(long)]
        loader: Option<PathBuf>,
        #[arg(long)]
        cache: PathBuf,
        /// Debian's loader, the baseline
        #[arg(long, default_value = "/lib64/ld-linux-x86-64.so.2")]
        stock: PathBuf,
        /// Runs per mode (statistics runs and perf stat -r)
        #[arg(long, default_value_t = 30)]
        runs: usize,
        /// Also write the result as JSON to this file (for charts and benches)
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Bind every symbol at startup (LD_BIND_NOW=1) in every mode
        #[arg(long)]
        bind_now: bool,
        /// Also measure Relocation Skip Mode: this cache (from `ddlink write
        /// --prelink`) with the images of `--overlay`
        #[arg(long, requires = "overlay")]
        skip_cache: Option<PathBuf>,
        /// The prelinked images (`ddlink write --prelink DIR`)
        #[arg(long, value_name = "DIR", requires = "skip_cache")]
        overlay: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<String>,
    },
    /// Generate and build the seed's case: a program with 12 libraries and ~200,000 symbols
    /// whose startup relocation is symbol lookups (cached by content)
    Synth {
        #[arg(long, default_value_t = 12)]
        libs: usize,
        #[arg(long, default_value_t = 200_000)]
        symbols: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Build into this directory (default: the cache)
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Which mode the loader uses for PROGRAM with the cache, and why; each object's state
    Status(CacheRun),
}

#[derive(Subcommand)]
enum KernelCmd {
    /// Unpack linux-source-6.1, apply the series, build vmlinux, bzImage and
    /// signed modules; print the paths (cached by source, config, series, key)
    Build {
        /// Directory with a quilt-style `series` file and its patches (default: kernel/patches)
        #[arg(long)]
        series: Option<PathBuf>,
        /// A second series applied after it (default: kernel/lab-patches, the lab-only patches)
        #[arg(long, conflicts_with = "no_lab_series")]
        lab_series: Option<PathBuf>,
        /// Apply no second series (the upstreamable one alone)
        #[arg(long)]
        no_lab_series: bool,
        /// Config fragment merged onto tinyconfig (default: kernel/configs/lab.config)
        #[arg(long)]
        config: Option<PathBuf>,
        /// make -j (default: the number of CPUs)
        #[arg(long)]
        jobs: Option<usize>,
        /// Also make sure the object tree holds this build (rebuilding it if another
        /// build used it since), to build external modules against it (printed as `tree`)
        #[arg(long)]
        tree: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum GlibcCmd {
    /// Fetch Debian's glibc source for the installed libc6, apply the series, build and
    /// install it into a prefix of its own; print the paths (cached by version, series, recipe)
    Build {
        /// Directory with a quilt-style `series` file and its patches (default: glibc/patches)
        #[arg(long)]
        series: Option<PathBuf>,
        /// make -j (default: the number of CPUs)
        #[arg(long)]
        jobs: Option<usize>,
        #[arg(long)]
        json: bool,
    },
}

/// Where rewritten modules go, shared by the commands that rewrite them.
#[derive(clap::Args, Debug)]
struct Rewrite {
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

    fn output(self) -> preresolve::Output {
        match self.output {
            Some(d) => preresolve::Output::Dir(d),
            None => preresolve::Output::InPlace,
        }
    }
}

/// Re-signing, shared by the commands that rewrite modules.
#[derive(clap::Args, Debug)]
struct Signing {
    /// Re-sign the modules with this private key (PEM)
    #[arg(long, requires = "sign_cert")]
    sign_key: Option<PathBuf>,
    /// ...and this X.509 certificate (PEM)
    #[arg(long, requires = "sign_key")]
    sign_cert: Option<PathBuf>,
    /// The signature's digest
    #[arg(long, value_enum, default_value_t = sign::Hash::Sha256)]
    sign_hash: sign::Hash,
}

impl Signing {
    fn key(self) -> Option<sign::SignKey> {
        let hash = self.sign_hash;
        self.sign_key.zip(self.sign_cert).map(|(key, cert)| sign::SignKey { key, cert, hash })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bootlink: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A batch transform's report: each failed module on stderr, then the
/// report (JSON, or the table when any module succeeded); exit 1 when any failed.
fn print_batch<R: serde::Serialize>(
    report: &R,
    errors: &[bootlink::tree::FileError],
    empty: bool,
    json: bool,
    render: impl FnOnce() -> String,
) -> ExitCode {
    for e in errors {
        eprintln!("bootlink: {}: {}", e.path.display(), e.error);
    }
    if json {
        print_json(report);
    } else if !empty {
        print!("{}", render());
    }
    if errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serializable"));
}

fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Inspect { kernel, modules, config, top, all, json } => {
            let report = inspect::run(&kernel, config.as_deref(), &modules)?;
            for e in &report.errors {
                eprintln!("bootlink: {}: {}", e.path.display(), e.error);
            }
            if report.modules.is_empty() {
                // nothing could be read: the errors above are the answer
            } else if json {
                print_json(&report);
            } else {
                print!("{}", report.render(if all { None } else { Some(top) }));
            }
            Ok(if report.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Cmd::Preresolve {
            kernel,
            config,
            modules,
            rewrite,
            assume_nokaslr,
            signing,
            fold_symbols,
            trim_symtab,
            dry_run,
            json,
        } => {
            let k = kernel::KernelImage::open(&kernel, config.as_deref())?;
            let opts = preresolve::Options {
                output: rewrite.output(),
                assume_nokaslr,
                sign: signing.key(),
                fold: fold_symbols,
                trim: trim_symtab,
                dry_run,
            };
            let report = preresolve::run(&k, &modules, &opts)?;
            Ok(print_batch(&report, &report.errors, report.modules.is_empty(), json, || report.render()))
        }
        Cmd::Symhash { vmlinux, kernel, modules, rewrite, sort_versions, dry_run, signing, json } => {
            if let Some(v) = vmlinux {
                let r = symhash::fill_vmlinux(&v)?;
                if json {
                    print_json(&r);
                } else {
                    println!(
                        "{}: {} + {} GPL exports, tables {} of {} reserved bytes",
                        v.display(),
                        r.exports,
                        r.gpl_exports,
                        r.table_bytes,
                        r.reserved_bytes
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            let kernel = kernel.expect("clap requires --kernel or --vmlinux");
            if !rewrite.chosen() && !dry_run {
                return Err(Error::new(bootlink::error::Kind::Usage, "give --output DIR, --in-place or --dry-run"));
            }
            let k = kernel::KernelImage::open(&kernel, None)?;
            let opts = symhash::Options { output: rewrite.output(), sign: signing.key(), sort_versions, dry_run };
            let report = symhash::run(&k, &modules, &opts)?;
            Ok(print_batch(&report, &report.errors, report.modules.is_empty(), json, || report.render()))
        }
        Cmd::Finalize { kernel, modules, rewrite, no_orc, no_mcount, dry_run, signing, json } => {
            if !rewrite.chosen() && !dry_run {
                return Err(Error::new(bootlink::error::Kind::Usage, "give --output DIR, --in-place or --dry-run"));
            }
            let k = kernel.map(|k| kernel::KernelImage::open(&k, None)).transpose()?;
            let opts = finalize::Options {
                output: rewrite.output(),
                sign: signing.key(),
                dry_run,
                orc: !no_orc,
                mcount: !no_mcount,
            };
            let report = finalize::run(k.as_ref(), &modules, &opts)?;
            Ok(print_batch(&report, &report.errors, report.modules.is_empty(), json, || report.render()))
        }
        Cmd::Lab {
            names,
            set,
            kernel,
            modules,
            variants,
            repetitions,
            realtime,
            smp,
            no_trace,
            measure_overhead,
            timeout,
            memory,
            cmdline,
            output,
            json,
        } => {
            let req = lab::setup::Request {
                kernel,
                modules_dir: modules,
                set,
                names,
                variants,
                repetitions,
                realtime,
                smp,
                no_trace,
                measure_overhead,
                timeout: std::time::Duration::from_secs(timeout),
                memory_mib: memory,
                out: output,
                extra_cmdline: cmdline,
            };
            let sc = lab::setup::scenario(&req)?;
            let run = lab::scenario::run(&sc)?;
            let checks = lab::setup::check(&run, sc.modules.len(), sc.trace);
            if json {
                print_json(&lab::setup::Report {
                    run_dir: &sc.out,
                    checks: &checks,
                    summary: bootlink::run::summary(std::slice::from_ref(&run)),
                    tracing_overhead_pct: run.tracing_overhead_pct,
                    partial: run.partial,
                    userspace: bootlink::run::userspace::tables(std::slice::from_ref(&run)),
                });
            } else {
                print!("{}", lab::setup::render(&sc, &run, &checks));
            }
            Ok(if run.partial || !checks.problems.is_empty() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        Cmd::Plan { names, set, modules, prefix, options, output, json } => {
            let dir = match modules {
                Some(d) => d,
                None => fetch::fetch(&fetch::Request::Reference)?.modules,
            };
            let tree = bootlink::kmod::ModTree::read(&dir)?;
            // The runtime dependencies bootlink knows, then the user's file.
            let mut conf = bootlink::kmod::ModprobeConf::runtime_deps();
            if let Some(f) = &options {
                let text = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
                conf = conf.merged(bootlink::kmod::ModprobeConf::parse(&text));
            }
            let w = bootlink::kmod::write_plan(&tree, &names, set.as_deref(), prefix.as_deref(), &conf)?;
            if let Some(o) = &output {
                fsutil::write_atomic(o, w.text.as_bytes())?;
            }
            if json {
                print_json(&w);
            } else if output.is_none() {
                print!("{}", w.text);
            } else {
                eprintln!(
                    "bootlink plan: {} modules from {} -> {}",
                    w.modules,
                    w.tree.display(),
                    output.as_ref().map(|o| o.display().to_string()).unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Chart { runs, output, svg, perfetto, json } => {
            let out = chart::Outputs { html: output, svg, perfetto, json };
            print!("{}", chart::command(&runs, &out)?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::KernelInfo { kernel, config, exports, json } => {
            let k = kernel::KernelImage::open(&kernel, config.as_deref())?;
            if json {
                if exports {
                    print_json(&k);
                } else {
                    print_json(&inspect::KernelSummary::of(&k));
                }
            } else if exports {
                for e in &k.exports {
                    println!(
                        "{:016x}\t0x{:08x}\t{}\t{}\t{}",
                        e.addr,
                        e.crc.unwrap_or(0),
                        if e.gpl { "EXPORT_SYMBOL_GPL" } else { "EXPORT_SYMBOL" },
                        e.namespace.as_deref().unwrap_or(""),
                        e.name
                    );
                }
            } else {
                let s = inspect::KernelSummary::of(&k);
                println!("image     {}", s.path.display());
                println!("format    {}", s.source);
                println!("release   {}", s.release.as_deref().unwrap_or("unknown"));
                println!("vermagic  {}", s.vermagic.as_deref().unwrap_or("unknown"));
                println!("machine   {}", s.machine);
                println!("exports   {} ({} GPL-only)", s.exports, s.gpl_exports);
                println!("config    {}", k.config_source.as_deref().unwrap_or("none found"));
                println!("KASLR     {}", s.kaslr.describe());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::ExtractVmlinux { image, output } => {
            let v = kernel::extract_vmlinux(&image)?;
            fsutil::write_atomic(&output, &v.data)?;
            eprintln!("{}: {} ({} bytes)", output.display(), v.source.describe(), v.data.len());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Kernel { cmd: KernelCmd::Build { series, lab_series, no_lab_series, config, jobs, tree, json } } => {
            let mut opts = kbuild::Options::defaults();
            opts.tree = tree;
            opts.series = series.unwrap_or(opts.series);
            opts.lab_series = if no_lab_series { None } else { lab_series.or(opts.lab_series) };
            opts.config = config.unwrap_or(opts.config);
            opts.jobs = jobs.unwrap_or(opts.jobs);
            let b = kbuild::build(&opts)?;
            if json {
                print_json(&b);
            } else {
                let how = if b.cached { "cached" } else { "built" };
                println!(
                    "kernel    {} ({how} in {:.1} s; {} {}, {} patch(es))",
                    b.release,
                    b.seconds,
                    b.source_package,
                    b.source_version,
                    b.patches.len()
                );
                println!("vmlinux   {}", b.vmlinux.display());
                println!("bzImage   {}", b.bzimage.display());
                println!("config    {}", b.config.display());
                println!("modules   {}", b.modules.display());
                println!("key       {} (certificate {})", b.signing_key.display(), b.signing_cert.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Ddlink { cmd } => run_ddlink(cmd),
        Cmd::Order { cmd } => run_order(cmd),
        Cmd::Manifest { cmd } => run_manifest(cmd),
        Cmd::Glibc { cmd: GlibcCmd::Build { series, jobs, json } } => {
            let mut opts = glibc::Options::defaults();
            opts.series = series.unwrap_or(opts.series);
            opts.jobs = jobs.unwrap_or(opts.jobs);
            let b = glibc::build(&opts)?;
            if json {
                print_json(&b);
            } else {
                println!("key             {}", b.key);
                println!("debian_version  {}", b.debian_version);
                println!("prefix          {}", b.prefix.display());
                println!("ld_so           {}", b.ld_so.display());
                println!("libdir          {}", b.libdir.display());
                println!("from_cache      {}", b.from_cache);
                println!(
                    "patches         {}",
                    if b.patches.is_empty() { "(none)".into() } else { b.patches.join(" ") }
                );
                println!("seconds         {:.1}", b.seconds);
                println!("build_seconds   {:.1}", b.build_seconds);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::FetchKernel { version, package, json } => {
            let req = match (version, package) {
                (_, Some(p)) => fetch::Request::Package(p),
                (Some(v), None) => fetch::Request::Series(v),
                (None, None) => fetch::Request::Reference,
            };
            let f = fetch::fetch(&req)?;
            if let Some(why) = &f.fallback {
                eprintln!("bootlink: note: {why}");
            }
            if json {
                print_json(&f);
            } else {
                println!("package   {} {}", f.package, f.version);
                println!("release   {}", f.release);
                println!("vmlinuz   {}", f.vmlinuz.display());
                println!("vmlinux   {}", f.vmlinux.display());
                println!("config    {}", f.config.display());
                println!("modules   {}", f.modules.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn parse_address(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    v.map_err(|e| format!("`{s}` is not an address: {e}"))
}

fn program_of(words: Vec<String>, overlay: Option<PathBuf>) -> ddlink::run::Program {
    let mut it = words.into_iter();
    let path = PathBuf::from(it.next().unwrap_or_default());
    ddlink::run::Program { path, args: it.collect(), overlay }
}

/// The given ld.so, or the one `bootlink glibc build` makes from this
/// checkout's series (a cache hit once built).
fn loader_or_default(loader: Option<PathBuf>) -> Result<PathBuf, Error> {
    match loader {
        Some(l) => Ok(l),
        None => Ok(glibc::build(&glibc::Options::defaults())?.ld_so),
    }
}

/// The trace mapped onto `binary`, and the order's functions in `layout`.
fn order_of(
    a: &TraceArgs,
) -> Result<(order::symbols::Mapped, order::symbols::Functions, order::report::Prediction), Error> {
    let t = order::trace::Trace::read(&a.trace)?;
    let traced = order::symbols::Functions::read(&a.binary)?;
    let mut mapped = order::symbols::map(&t, &a.trace, &traced, &a.object)?;
    let funcs = match &a.layout {
        Some(l) => order::symbols::Functions::read(l)?,
        None => traced,
    };
    if a.allow_missing {
        mapped.keep_present(&funcs);
    }
    let predicted = order::report::predict(&order::symbols::resolve(&mapped.order, &funcs)?);
    Ok((mapped, funcs, predicted))
}

/// The object tree of the `bootlink kernel build` output `vmlinux` lies in.
fn build_tree_of(vmlinux: &std::path::Path) -> Result<PathBuf, Error> {
    let json = vmlinux.parent().unwrap_or(std::path::Path::new(".")).join("build.json");
    let no_tree = || {
        Error::file(
            bootlink::error::Kind::Usage,
            vmlinux,
            "--bzimage needs the kernel's object tree: give --tree (`bootlink kernel build --json` prints it)",
        )
    };
    let text = std::fs::read(&json).map_err(|_| no_tree())?;
    let built: kbuild::Built =
        serde_json::from_slice(&text).map_err(|e| Error::file(bootlink::error::Kind::Format, &json, e.to_string()))?;
    if built.tree.as_os_str().is_empty() {
        return Err(no_tree());
    }
    Ok(built.tree)
}

fn run_manifest(cmd: ManifestCmd) -> Result<ExitCode, Error> {
    match cmd {
        ManifestCmd::Write { vmlinux, output, bzimage, tree, json, modules } => {
            // The tree is found before anything is written.
            let tree = match (&bzimage, tree) {
                (Some(_), Some(t)) => Some(t),
                (Some(_), None) => Some(build_tree_of(&vmlinux)?),
                (None, _) => None,
            };
            if let Some(t) = &tree {
                manifest::bzimage::check(t, &vmlinux)?;
            }
            let (m, listed) = manifest::of_modules(&modules)?;
            let report = manifest::fill(&vmlinux, &m, &output)?;
            let rebuilt = match (&bzimage, &tree) {
                (Some(b), Some(t)) => Some(manifest::bzimage::rebuild(t, &output, b)?),
                _ => None,
            };
            if json {
                print_json(&serde_json::json!({ "report": report, "bzimage": rebuilt, "modules": listed }));
            } else {
                println!(
                    "{}: {} modules listed ({} of {} reserved bytes)",
                    report.vmlinux.display(),
                    report.modules,
                    report.bytes,
                    report.reserved
                );
                if let Some(r) = &rebuilt {
                    println!(
                        "{}: its bzImage ({} bytes; payload {} -> {} bytes; {} steps replayed from {})",
                        r.bzimage.display(),
                        r.bytes,
                        r.payload_before,
                        r.payload_after,
                        r.steps.len(),
                        r.tree.display()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ManifestCmd::Show { vmlinux, json } => {
            let m = manifest::read(&vmlinux)?.unwrap_or_default();
            if json {
                print_json(&m);
            } else {
                for d in &m.digests {
                    println!("{}", d.iter().map(|b| format!("{b:02x}")).collect::<String>());
                }
                eprintln!("{}: {} modules listed", vmlinux.display(), m.digests.len());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_order(cmd: OrderCmd) -> Result<ExitCode, Error> {
    match cmd {
        OrderCmd::Write { t, output } => {
            let (mapped, funcs, predicted) = order_of(&t)?;
            let files = order::script::write_all(&output, &mapped.order, &funcs)?;
            if t.json {
                print_json(&serde_json::json!({ "files": files, "mapped": mapped, "predicted": predicted }));
            } else {
                println!(
                    "{} functions in first-call order ({} first calls in other objects, {} not in the layout) -> {}",
                    mapped.order.len(),
                    mapped.other_objects,
                    mapped.missing,
                    files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
                );
                print!("{}", predicted.render());
            }
            Ok(ExitCode::SUCCESS)
        }
        OrderCmd::Report { t } => {
            let (_, _, predicted) = order_of(&t)?;
            if t.json {
                print_json(&predicted);
            } else {
                print!("{}", predicted.render());
            }
            Ok(ExitCode::SUCCESS)
        }
        OrderCmd::Synth { functions, startup, files, seed, json } => {
            let spec = order::synth::SynthSpec { functions, startup, files, seed };
            let report = order::case::synth_case(&spec)?;
            if json {
                print_json(&report);
            } else {
                print!("{}", report.render());
            }
            let ok = report.relinked.iter().all(|r| r.output_identical);
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        OrderCmd::Record { output, json, command } => {
            let program = PathBuf::from(&command[0]);
            let (functions, blocks) = order::qemu::record(&program, &command[1..], None, &output)?;
            if json {
                print_json(&serde_json::json!({ "trace": output, "functions": functions, "blocks": blocks }));
            } else {
                println!(
                    "{}: {functions} functions in first-call order ({blocks} blocks translated) -> {}",
                    program.display(),
                    output.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        OrderCmd::Python { json } => {
            let report = order::case::python_case()?;
            if json {
                print_json(&report);
            } else {
                print!("{}", report.render());
            }
            let ok = report.outputs_identical();
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

fn run_ddlink(cmd: DdlinkCmd) -> Result<ExitCode, Error> {
    match cmd {
        DdlinkCmd::Profile { loader, output, json, program } => {
            let loader = loader_or_default(loader)?;
            let program = program_of(program, None);
            let (rec, _) = ddlink::run::profile(&loader, &program, &output)?;
            let summary = ddlink::record::Summary::of(&rec, &output);
            if json {
                print_json(&summary);
            } else {
                print!("{}", summary.render());
            }
            Ok(ExitCode::SUCCESS)
        }
        DdlinkCmd::Write { loader, record, program, output, prelink, base, portable, json } => {
            let loader = loader_or_default(loader)?;
            let rec = ddlink::record::Record::read(&record)?;
            let opts = ddlink::write::WriteOptions {
                prelink: prelink.map(|dir| ddlink::write::PrelinkTo { dir, base }),
                portable,
            };
            let (report, prelinked) = ddlink::write::write(&rec, &loader, &program, &output, &opts)?;
            if json {
                print_json(&serde_json::json!({ "cache": report, "prelink": prelinked }));
            } else {
                print!("{}", report.render(&output));
                if let Some(p) = prelinked {
                    print!("{}", p.render());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        DdlinkCmd::Verify(CacheRun { loader, cache, overlay, json, program }) => {
            let loader = loader_or_default(loader)?;
            let (report, _) = ddlink::run::verify(&loader, &cache, &program_of(program, overlay))?;
            if json {
                print_json(&report);
            } else {
                print!("{}", report.render());
            }
            Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        DdlinkCmd::Measure { loader, cache, stock, runs, output, bind_now, skip_cache, overlay, json, program } => {
            let loader = loader_or_default(loader)?;
            let mut modes = ddlink::measure::standard_modes(&stock, &loader, &cache);
            if let (Some(c), Some(dir)) = (&skip_cache, &overlay) {
                modes.push(ddlink::measure::skip_mode(&loader, c, dir));
            }
            if bind_now {
                for m in &mut modes {
                    m.env.push(("LD_BIND_NOW".into(), "1".into()));
                }
            }
            let result = ddlink::measure::measure(&program_of(program, None), &modes, runs.max(1))?;
            if let Some(out) = output {
                let text = serde_json::to_vec_pretty(&result).expect("serializable");
                fsutil::write_atomic(&out, &text)?;
            }
            if json {
                print_json(&result);
            } else {
                print!("{}", result.render());
            }
            Ok(if result.modes.iter().all(|m| m.output_identical) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        DdlinkCmd::Synth { libs, symbols, seed, out, json } => {
            let spec = ddlink::synth::SynthSpec { libs, symbols, seed };
            let case = ddlink::synth::build(&spec, out.as_deref())?;
            if json {
                print_json(&case);
            } else {
                println!(
                    "{}: {} libraries, {} symbols, ~{} lookups at startup{}",
                    case.program.display(),
                    case.libs.len(),
                    case.symbols,
                    case.expected_lookups,
                    if case.from_cache { " (cached)" } else { "" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        DdlinkCmd::Status(CacheRun { loader, cache, overlay, json, program }) => {
            let loader = loader_or_default(loader)?;
            let report = ddlink::run::status(&loader, &cache, &program_of(program, overlay))?;
            if json {
                print_json(&report);
            } else {
                print!("{}", report.render());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
