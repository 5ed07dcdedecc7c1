//! `bootlink survey`: the arguments mapped onto the survey's options, the
//! run, and its report printed.

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::Error;
use bootlink_lab::lab;

use super::emit;

#[derive(clap::Args)]
pub struct Args {
    /// Module names or aliases to survey, with their dependencies (default: every module of the tree)
    names: Vec<String>,
    /// A named module set or a list file to survey instead of every module
    #[arg(long)]
    set: Option<String>,
    #[command(flatten)]
    boot: super::BootKernel,
    /// The variant every boot runs, as `bootlink lab --variant` takes it (default: stock)
    #[arg(long, default_value = "stock")]
    variant: String,
    /// Modules tried per boot (their dependencies come on top)
    #[arg(long, default_value_t = 400)]
    batch: usize,
    /// Seconds before a boot is killed
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    #[arg(long, default_value_t = 2048)]
    memory: u32,
    /// Extra kernel command line
    #[arg(long, default_value = "")]
    cmdline: String,
    /// The survey's directory: survey.json, loadable.list, a lab run per boot
    #[arg(short, long)]
    output: PathBuf,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let opts = lab::survey::Options {
        target: lab::target::Target::of(a.boot.arch),
        kernel: a.boot.kernel,
        modules_dir: a.boot.modules,
        set: a.set,
        names: a.names,
        variant: lab::variant::Variant::parse(&a.variant)?,
        batch: a.batch,
        timeout: std::time::Duration::from_secs(a.timeout),
        memory_mib: a.memory,
        extra_cmdline: a.cmdline,
        out: a.output,
    };
    let r = lab::survey::run(&opts)?;
    emit(&r, a.json);
    Ok(ExitCode::SUCCESS)
}
