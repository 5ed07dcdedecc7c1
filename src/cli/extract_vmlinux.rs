//! `bootlink extract-vmlinux`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, fsutil, kernel};

#[derive(clap::Args)]
pub struct Args {
    image: PathBuf,
    #[arg(short, long)]
    output: PathBuf,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    fsutil::check_outputs(&[&a.image], &[fsutil::Planned::new(&a.output)])?;
    let v = kernel::extract_vmlinux(&a.image)?;
    fsutil::write_atomic(&a.output, &v.data)?;
    eprintln!("{}: {} ({} bytes)", a.output.display(), v.source.describe(), v.data.len());
    Ok(ExitCode::SUCCESS)
}
