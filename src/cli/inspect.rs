//! `bootlink inspect`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, inspect};

use super::{emit, exit};

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let report = inspect::run(&a.kernel, a.config.as_deref(), &a.modules)?;
    for e in &report.errors {
        eprintln!("bootlink: {}: {}", e.path.display(), e.error);
    }
    if report.modules.is_empty() {
        // nothing could be read: the errors above are the answer
    } else {
        emit(&inspect::Listed { report: &report, top: if a.all { None } else { Some(a.top) } }, a.json);
    }
    Ok(exit(report.errors.is_empty()))
}
