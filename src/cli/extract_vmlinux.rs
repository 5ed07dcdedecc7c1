//! `bootlink extract-vmlinux`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, kernel};

use super::emit;

#[derive(clap::Args)]
pub struct Args {
    image: PathBuf,
    #[arg(short, long)]
    output: PathBuf,
    /// Print what was written as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    emit(&kernel::extract_vmlinux_to(&a.image, &a.output)?, a.json);
    Ok(ExitCode::SUCCESS)
}
