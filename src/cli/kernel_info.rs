//! `bootlink kernel-info`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, inspect, kernel};

use super::print_json;

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
    if a.json {
        if a.exports {
            print_json(&k);
        } else {
            print_json(&inspect::KernelSummary::of(&k));
        }
    } else if a.exports {
        for e in &k.exports {
            println!(
                "{:016x}\t0x{:08x}\t{}\t{}\t{}",
                e.addr,
                e.crc.unwrap_or(0),
                if e.gpl { "EXPORT_SYMBOL_GPL" } else { "EXPORT_SYMBOL" },
                e.namespace.as_deref().unwrap_or(""),
                e.name
            );
        }
    } else {
        let s = inspect::KernelSummary::of(&k);
        println!("image     {}", s.path.display());
        println!("format    {}", s.source);
        println!("release   {}", s.release.as_deref().unwrap_or("unknown"));
        println!("vermagic  {}", s.vermagic.as_deref().unwrap_or("unknown"));
        println!("machine   {}", s.machine);
        println!("exports   {} ({} GPL-only)", s.exports, s.gpl_exports);
        println!("config    {}", k.config_source.as_deref().unwrap_or("none found"));
        println!("KASLR     {}", s.kaslr.describe());
        println!("loader    {}", s.loader_features.describe());
    }
    Ok(ExitCode::SUCCESS)
}
