//! `bootlink kernel build`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, kbuild};

use super::print_json;

#[derive(Subcommand)]
pub enum Cmd {
    /// Unpack Debian's linux-source of a kernel line, apply its series, build vmlinux,
    /// bzImage and signed modules; print the paths (cached by source, config, series, key)
    Build {
        /// The kernel line: 6.1 (linux-source-6.1) or 6.12 (linux-source-6.12); its
        /// series, lab series and config are kernel/<line>/
        #[arg(long, default_value = "6.1", value_parser = parse_line)]
        line: kbuild::Line,
        /// Directory with a quilt-style `series` file and its patches (default: kernel/<line>/patches)
        #[arg(long)]
        series: Option<PathBuf>,
        /// A second series applied after it (default: kernel/<line>/lab-patches, the lab-only patches)
        #[arg(long, conflicts_with = "no_lab_series")]
        lab_series: Option<PathBuf>,
        /// Apply no second series (the upstreamable one alone)
        #[arg(long)]
        no_lab_series: bool,
        /// Config fragment merged onto tinyconfig (default: kernel/<line>/configs/lab.config)
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
    let Cmd::Build { line, series, lab_series, no_lab_series, config, jobs, tree, cached_only, json } = cmd;
    let mut opts = kbuild::Options::for_line(line);
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

fn parse_line(s: &str) -> Result<kbuild::Line, String> {
    kbuild::Line::parse(s).map_err(|e| e.to_string())
}
