//! `bootlink kernel-info`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, inspect, kernel};

use super::emit;

#[derive(clap::Args)]
pub struct Args {
    kernel: PathBuf,
    #[arg(long)]
    config: Option<PathBuf>,
    /// List every export (address, CRC, type, namespace, name)
    #[arg(long)]
    exports: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let k = kernel::KernelImage::open(&a.kernel, a.config.as_deref())?;
    if a.exports {
        emit(&k, a.json);
    } else {
        emit(&inspect::KernelSummary::of(&k), a.json);
    }
    Ok(ExitCode::SUCCESS)
}
