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
    /// The kernel package the system installs: Debian's reference linux-image as shipped (debian);
    /// that package with bootlink's series built with Debian's config (`kernel build --config
    /// debian`) and Debian's modules signed again with the build's key (patched), or taken through
    /// `bootlink apply`'s whole plan (applied)
    #[arg(long, value_parser = ["debian", "patched", "applied"], default_value = "debian")]
    kernel: String,
    /// The kernel line: 6.1 (Debian's reference linux-image-6.1.0-56-amd64; the series of
    /// kernel/6.1) or 6.12 (Debian's newest linux-image-6.12.*-amd64 apt knows; the series of
    /// kernel/6.12, built with `kernel build --config debian --line 6.12`)
    #[arg(long, default_value = "6.1", value_parser = super::kernel::parse_line)]
    line: bootlink::kbuild::Line,
    /// With --kernel patched: Debian's modules through only these of apply's fixes
    /// (`apply --only`), e.g. finalize, symhash-slotted, manifest
    #[arg(long, value_name = "STEP,...")]
    only: Option<String>,
    /// With --kernel applied: the hash of the module hash list (blake2b: patch `hashes-blake2b`,
    /// about half SHA-256's cost on the lab's CPU, which has no SHA instructions)
    #[arg(long, value_enum, default_value_t = super::values::ListHash::Sha256)]
    manifest_hash: super::values::ListHash,
    /// Host time instead of the instruction-counted clock (-icount), with --smp virtual CPUs
    #[arg(long)]
    realtime: bool,
    /// Virtual CPUs of a realtime boot (the instruction-counted clock runs one)
    #[arg(long, requires = "realtime", default_value_t = 2)]
    smp: u32,
    /// Boot parameters to add to the kernel command line, space-separated
    /// (e.g. `cryptomgr.notests=1`: no crypto self-tests at registration)
    #[arg(long, value_name = "ARGS")]
    cmdline: Option<String>,
    /// Boot without tracing the module loads: the stages as they are, no load timed
    #[arg(long)]
    no_trace: bool,
    /// Trace the module loads without the scheduler's context switches: the loads' wall phases
    /// only, no time on the CPU (what tracing the switches costs)
    #[arg(long, conflicts_with = "no_trace")]
    no_switches: bool,
    /// Seconds before the boot is killed
    #[arg(long, default_value_t = 1200)]
    timeout: u64,
    /// Boot nothing: read the console.log in the -o directory again into its system.json (a record
    /// made by an older bootlink, which read less of the console)
    #[arg(long)]
    reread: bool,
    /// The record's directory: system.json and console.log
    #[arg(short, long)]
    output: PathBuf,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    if a.reread {
        let r = system::reread(&a.output)?;
        emit(&r, a.json);
        return Ok(exit(r.ok()));
    }
    let clock = if a.realtime { system::Clock::Realtime { cpus: a.smp } } else { system::Clock::Deterministic };
    if a.kernel != "applied" && a.manifest_hash != super::values::ListHash::Sha256 {
        return Err(Error::new(
            bootlink::error::Kind::Usage,
            format!(
                "--manifest-hash is for --kernel applied (with patched: --only manifest-blake2b), not {}",
                a.kernel
            ),
        ));
    }
    let kernel = match (a.kernel.as_str(), a.only) {
        ("debian", None) => system::Kernel::Debian,
        ("applied", None) => system::Kernel::Applied(a.manifest_hash.into()),
        ("patched", None) => system::Kernel::patched(),
        ("patched", Some(list)) => system::Kernel::Patched(
            bootlink::apply::parse_only(&list)
                .map_err(|e| Error::new(bootlink::error::Kind::Usage, format!("--only {e}")))?,
        ),
        (k, Some(_)) => {
            return Err(Error::new(bootlink::error::Kind::Usage, format!("--only is for --kernel patched, not {k}")));
        }
        (k, None) => unreachable!("clap allows no kernel {k}"),
    };
    let r = system::run(&system::Request {
        kernel,
        line: a.line,
        clock,
        trace: !a.no_trace,
        switches: !a.no_switches,
        cmdline: a.cmdline.as_deref().unwrap_or_default().split_whitespace().map(str::to_string).collect(),
        timeout: Duration::from_secs(a.timeout),
        out: a.output,
    })?;
    emit(&r, a.json);
    Ok(exit(r.ok()))
}
