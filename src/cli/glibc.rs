//! `bootlink glibc build`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, glibc};

use super::print_json;

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
        println!("patches         {}", if b.patches.is_empty() { "(none)".into() } else { b.patches.join(" ") });
        println!("seconds         {:.1}", b.seconds);
        println!("build_seconds   {:.1}", b.build_seconds);
    }
    Ok(ExitCode::SUCCESS)
}
