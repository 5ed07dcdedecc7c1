//! `bootlink system`: a real Debian system (systemd, udev, initramfs-tools)
//! booted under QEMU to multi-user.target; its record printed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bootlink::Error;
use bootlink_lab::system;

use super::{emit, exit};

#[derive(clap::Args)]
pub struct Args {
    /// The kernel the system installs as a package: Debian's reference linux-image (the only
    /// one so far)
    #[arg(long, value_parser = ["debian"], default_value = "debian")]
    kernel: String,
    /// Host time instead of the instruction-counted clock (-icount), with --smp virtual CPUs
    #[arg(long)]
    realtime: bool,
    /// Virtual CPUs of a realtime boot (the instruction-counted clock runs one)
    #[arg(long, requires = "realtime", default_value_t = 2)]
    smp: u32,
    /// Boot without tracing the module loads: the stages as they are, no load timed
    #[arg(long)]
    no_trace: bool,
    /// Seconds before the boot is killed
    #[arg(long, default_value_t = 1200)]
    timeout: u64,
    /// The record's directory: system.json and console.log
    #[arg(short, long)]
    output: PathBuf,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let clock = if a.realtime { system::Clock::Realtime { cpus: a.smp } } else { system::Clock::Deterministic };
    let r = system::run(&system::Request {
        clock,
        trace: !a.no_trace,
        timeout: Duration::from_secs(a.timeout),
        out: a.output,
    })?;
    emit(&r, a.json);
    Ok(exit(r.ok()))
}
