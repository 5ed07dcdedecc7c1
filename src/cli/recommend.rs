//! `bootlink recommend`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::Error;
use bootlink_lab::recommend;

use super::emit;

#[derive(clap::Args)]
pub struct Args {
    /// A lab run that booted the candidate images (e.g. kernel:build+lz4, kernel:build+xz,
    /// kernel:build,image:vmlinux), deterministic; variants that store the module set differently
    /// (compress:xz, decompress:kernel...) are the module candidates
    run: PathBuf,
    /// The storage the image is read from: slow (1 MiB/s, 100 us per 4 KiB request), nand (8 MiB/s,
    /// 50 us), nor (4 MiB/s, 5 us) or MIBS-USEC (e.g. 25-50, 0.5-100)
    #[arg(long, value_parser = recommend::Storage::parse)]
    storage: recommend::Storage,
    /// Also draw the chart (reset to /init against throughput, one line per image) as SVG
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also draw the module set's chart (its files read and loaded against throughput, one line
    /// per way of storing them) as SVG
    #[arg(long)]
    modules_svg: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let o = recommend::Options { run: a.run, storage: a.storage, svg: a.svg, modules_svg: a.modules_svg };
    emit(&recommend::run(&o)?, a.json);
    Ok(ExitCode::SUCCESS)
}
