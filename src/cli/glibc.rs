//! `bootlink glibc build`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, glibc};

use super::emit;

#[derive(Subcommand)]
pub enum Cmd {
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

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    let Cmd::Build { series, jobs, json } = cmd;
    let mut opts = glibc::Options::defaults();
    opts.series = series.unwrap_or(opts.series);
    opts.jobs = jobs.unwrap_or(opts.jobs);
    let report = glibc::run(&opts)?;
    emit(&report, json);
    Ok(ExitCode::SUCCESS)
}
