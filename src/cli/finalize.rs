//! `bootlink finalize`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::error::Kind;
use bootlink::{Error, finalize, kernel};

use super::{Rewrite, Signing, print_batch};

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    if !a.rewrite.chosen() && !a.dry_run {
        return Err(Error::new(Kind::Usage, "give --output DIR, --in-place or --dry-run"));
    }
    let k = a.kernel.map(|k| kernel::KernelImage::open(&k, None)).transpose()?;
    let opts = finalize::Options {
        output: a.rewrite.output(),
        sign: a.signing.key(),
        dry_run: a.dry_run,
        orc: !a.no_orc,
        mcount: !a.no_mcount,
    };
    let report = finalize::run(k.as_ref(), &a.modules, &opts)?;
    Ok(print_batch(&report, &report.errors, report.modules.is_empty(), a.json))
}
