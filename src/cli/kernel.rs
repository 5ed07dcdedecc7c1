//! `bootlink kernel build`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, kbuild};

use super::emit;

#[derive(Subcommand)]
pub enum Cmd {
    /// Unpack Debian's linux-source of a kernel line, apply its series, build vmlinux,
    /// bzImage and signed modules; print the paths (cached by source, config, series, key)
    Build {
        /// The kernel line: 6.1 (linux-source-6.1) or 6.12 (linux-source-6.12); its
        /// series, lab series and config are kernel/<line>/
        #[arg(long, default_value = "6.1", value_parser = parse_line)]
        line: kbuild::Line,
        /// The architecture: amd64 (the host's), or arm64, cross-built with
        /// aarch64-linux-gnu-gcc from kernel/<line>/configs/lab-arm64.config; the
        /// series' patches marked `arch:x86` are left out, and the image is `Image`
        #[arg(long, value_enum, default_value = "amd64")]
        arch: super::values::Arch,
        /// Directory with a quilt-style `series` file and its patches (default: kernel/<line>/patches)
        #[arg(long)]
        series: Option<PathBuf>,
        /// Apply the lab-only series too (kernel/<line>/lab-patches: the lab's boot landmarks
        /// and self-checks; not for a kernel you ship), as the lab's own builds do
        #[arg(long)]
        lab: bool,
        /// With --lab: this directory's series instead of kernel/<line>/lab-patches
        #[arg(long, requires = "lab")]
        lab_series: Option<PathBuf>,
        /// Build from a whole config instead of the lab's: `debian` (the line's Debian
        /// kernel's config and release; the image alone, for Debian's own modules) or a
        /// config FILE of your own; the series' options (kernel/<line>/configs/series.config)
        /// are merged on top, nothing else (debug information and BTF stay as the config has them)
        #[arg(long, value_name = "debian|FILE")]
        config: Option<String>,
        /// The fragment merged onto the base config (default: kernel/<line>/configs/lab.config
        /// on tinyconfig, kernel/<line>/configs/series.config on a whole config)
        #[arg(long)]
        fragment: Option<PathBuf>,
        /// A build flavour merged over the fragment, repeatable: a file
        /// kernel/<line>/configs/flavours/<NAME>.config (sealed, trim, a kernel compressor)
        #[arg(long = "flavour", value_name = "NAME")]
        flavours: Vec<String>,
        /// Build vmlinux and bzImage only, no modules (the default with --config debian)
        #[arg(long)]
        image_only: bool,
        /// The kernel release to build as (KERNELRELEASE; with --config debian, Debian's)
        #[arg(long)]
        release: Option<String>,
        /// make -j (default: the number of CPUs)
        #[arg(long)]
        jobs: Option<usize>,
        /// Also make sure the object tree holds this build (rebuilding it if another
        /// build used it since), to build external modules against it (printed as `tree`);
        /// answered under the line's lock (waits for a build of the same line)
        #[arg(long)]
        tree: bool,
        /// Only print a build already in the cache; fail (building nothing) when it is not there
        #[arg(long)]
        cached_only: bool,
        #[arg(long)]
        json: bool,
    },
    /// Does a kernel keep another's module ABI? Compare two Module.symvers (a patched
    /// build's and the distribution's): every vmlinux export with the same CRC, none missing
    Abi {
        /// The kernel checked: a build's Module.symvers
        ours: PathBuf,
        /// The ABI to keep: the distribution's Module.symvers (e.g. in linux-headers-<release>)
        theirs: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Abi { ours, theirs, json } => abi(ours, theirs, json),
        Cmd::Build {
            line,
            arch,
            series,
            lab,
            lab_series,
            config,
            fragment,
            flavours,
            image_only,
            release,
            jobs,
            tree,
            cached_only,
            json,
        } => {
            let mut opts = kbuild::Options::for_line_arch(line, arch.into());
            opts.tree = tree;
            opts.cached_only = cached_only;
            opts.series = series.unwrap_or(opts.series);
            if lab {
                opts = opts.with_lab_series();
                opts.lab_series = lab_series.or(opts.lab_series);
            }
            opts.jobs = jobs.unwrap_or(opts.jobs);
            opts.flavours = flavours;
            build(opts, config.as_deref(), fragment, image_only, release, json)
        }
    }
}

fn abi(ours: PathBuf, theirs: PathBuf, json: bool) -> Result<ExitCode, Error> {
    let report = bootlink::kernel::abi::run(&bootlink::kernel::abi::Options { ours, theirs })?;
    emit(&report, json);
    Ok(if report.kept() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `kernel build`: the config base (`debian`, a file, or the lab's), then
/// the options that override it.
fn build(
    mut opts: kbuild::Options,
    config: Option<&str>,
    fragment: Option<PathBuf>,
    image_only: bool,
    release: Option<String>,
    json: bool,
) -> Result<ExitCode, Error> {
    if config.is_some() && !opts.arch.is_amd64() {
        return Err(Error::new(
            bootlink::error::Kind::Usage,
            "--config with --arch arm64: not supported yet (the arm64 build is the lab's, from lab-arm64.config)",
        ));
    }
    match config {
        None => {}
        Some("debian") => opts.debian_config()?,
        Some(file) => opts.whole_config(PathBuf::from(file)),
    }
    if image_only {
        opts.modules = false;
    }
    opts.release = release.or(opts.release);
    opts.config = fragment.unwrap_or(opts.config);
    let report = kbuild::run(&opts)?;
    emit(&report, json);
    Ok(ExitCode::SUCCESS)
}

pub(super) fn parse_line(s: &str) -> Result<kbuild::Line, String> {
    kbuild::Line::parse(s).map_err(|e| e.to_string())
}
