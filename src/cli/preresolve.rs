//! `bootlink preresolve`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, kernel, preresolve};

use super::{Rewrite, Signing, print_batch};

#[derive(clap::Args)]
pub struct Args {
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
    /// symbols from .symtab, instead of leaving them as SHN_ABS (AArch64: a
    /// symbol CALL26/JUMP26 branch to stays SHN_ABS, for the module PLTs)
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
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let k = kernel::KernelImage::open(&a.kernel, a.config.as_deref())?;
    let opts = preresolve::Options {
        output: a.rewrite.output(),
        assume_nokaslr: a.assume_nokaslr,
        sign: a.signing.key(),
        fold: a.fold_symbols,
        trim: a.trim_symtab,
        dry_run: a.dry_run,
    };
    let report = preresolve::run(&k, &a.modules, &opts)?;
    Ok(print_batch(&report, &report.errors, report.modules.is_empty(), a.json))
}
