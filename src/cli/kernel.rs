//! `bootlink kernel build`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, kbuild};

use super::print_json;

#[derive(Subcommand)]
pub enum Cmd {
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
        /// Only print a build already in the cache; fail (building nothing) when it is not there
        #[arg(long)]
        cached_only: bool,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    let Cmd::Build { series, lab_series, no_lab_series, config, jobs, tree, cached_only, json } = cmd;
    let mut opts = kbuild::Options::defaults();
    opts.tree = tree;
    opts.cached_only = cached_only;
    opts.series = series.unwrap_or(opts.series);
    opts.lab_series = if no_lab_series { None } else { lab_series.or(opts.lab_series) };
    opts.config = config.unwrap_or(opts.config);
    opts.jobs = jobs.unwrap_or(opts.jobs);
    let report = kbuild::run(&opts)?;
    if json {
        print_json(&report);
    } else {
        print!("{}", report.render());
    }
    Ok(ExitCode::SUCCESS)
}
