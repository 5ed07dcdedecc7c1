//! `bootlink symhash`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::error::Kind;
use bootlink::{Error, kernel, symhash};

use super::{Rewrite, Signing, emit, print_batch};

#[derive(clap::Args)]
pub struct Args {
    /// Fill this vmlinux's reserved __ksymhash section in place (the kernel
    /// build's KSYMHASH hook)
    #[arg(long, conflicts_with_all = ["kernel", "modules", "output", "in_place", "sort_versions", "export_slots", "dry_run"])]
    vmlinux: Option<PathBuf>,
    /// vmlinux, vmlinuz or build directory the modules will run with
    #[arg(long, requires = "modules")]
    kernel: Option<PathBuf>,
    /// Module files or directories
    modules: Vec<PathBuf>,
    #[command(flatten)]
    rewrite: Rewrite,
    /// Also sort __versions by name and give each undefined symbol its
    /// entry's index in .undef.hash: a kernel with patch `versions-indexed`
    /// checks that one entry, one with only `versions-sorted` binary-searches
    #[arg(long)]
    sort_versions: bool,
    /// Also give each undefined symbol the slot of vmlinux's export of its
    /// name (from --kernel's image): a kernel with the export-slots patch
    /// compares that one export's name before any search (works with a
    /// randomized base, unlike preresolve)
    #[arg(long)]
    export_slots: bool,
    /// Build and check everything in memory, write nothing
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    signing: Signing,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    if let Some(v) = a.vmlinux {
        let r = symhash::fill_vmlinux(&v)?;
        emit(&r, a.json);
        return Ok(ExitCode::SUCCESS);
    }
    let kernel = a.kernel.expect("clap requires --kernel or --vmlinux");
    if !a.rewrite.chosen() && !a.dry_run {
        return Err(Error::new(Kind::Usage, "give --output DIR, --in-place or --dry-run"));
    }
    let k = kernel::KernelImage::open(&kernel, None)?;
    let opts = symhash::Options {
        output: a.rewrite.output(),
        sign: a.signing.key(),
        sort_versions: a.sort_versions,
        export_slots: a.export_slots,
        dry_run: a.dry_run,
    };
    let report = symhash::run(&k, &a.modules, &opts)?;
    Ok(print_batch(&report, &report.errors, report.modules.is_empty(), a.json))
}
