//! `bootlink plan`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, kmod};

use super::emit;

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let req = kmod::PlanRequest {
        names: a.names,
        set: a.set,
        modules: a.modules,
        prefix: a.prefix,
        options: a.options,
        output: a.output,
    };
    emit(&kmod::plan(&req)?, a.json);
    Ok(ExitCode::SUCCESS)
}
