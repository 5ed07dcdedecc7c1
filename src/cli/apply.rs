//! `bootlink apply`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::{Error, apply};

use super::{Signing, print_batch};

#[derive(clap::Args)]
pub struct Args {
    /// The kernel's build (object) directory: vmlinux, .config, System.map, arch/x86/boot/bzImage
    #[arg(long, value_name = "DIR", required_unless_present = "image", conflicts_with = "image")]
    build: Option<PathBuf>,
    /// An installed kernel instead of its build: /boot/vmlinuz-<release> (config- and System.map-<release>
    /// beside it); only read: steps that rewrite the image (the module hash list) are left out
    #[arg(long, value_name = "FILE")]
    image: Option<PathBuf>,
    /// The installed modules: INSTALL_MOD_PATH, or its lib/modules/<release>
    #[arg(long, value_name = "DIR")]
    modules: PathBuf,
    /// Write vmlinux and bzImage (with the module hash list) here, not over the build's own
    #[arg(long, value_name = "DIR")]
    kernel_out: Option<PathBuf>,
    /// The kernel boots with `nokaslr`: fold symbols although it could randomize its base
    #[arg(long)]
    assume_nokaslr: bool,
    /// With neither a signing key nor a module hash list: leave rewritten modules unsigned (refused
    /// under module.sig_enforce=1 or Secure Boot, a tainted kernel otherwise)
    #[arg(long)]
    allow_unsigned: bool,
    /// Leave depmod to the caller (kbuild's DEPMOD hook runs it)
    #[arg(long)]
    no_depmod: bool,
    /// Print the plan and what would change; write nothing
    #[arg(long)]
    dry_run: bool,
    /// The hash of the module hash list: blake2b where the kernel names hashes-blake2b (patch `hashes-blake2b`)
    /// and the CPU has no SHA instructions (then about half the cost); SHA-256 otherwise
    #[arg(long, value_enum, default_value_t = super::values::ListHash::Sha256)]
    manifest_hash: super::values::ListHash,
    /// Only these of the plan's fixes, comma-separated (e.g. `finalize`, `manifest`, `sign`: each fix's
    /// gain alone); `unsign` and the modules signed again come with them as needed
    #[arg(long, value_name = "STEP,...")]
    only: Option<String>,
    #[command(flatten)]
    signing: Signing,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let kernel = match (a.build, a.image) {
        (Some(dir), _) => apply::Kernel::Build(dir),
        (None, Some(image)) => apply::Kernel::Image(image),
        (None, None) => unreachable!("clap requires --build or --image"),
    };
    let opts = apply::Options {
        kernel,
        modules: a.modules,
        kernel_out: a.kernel_out,
        assume_nokaslr: a.assume_nokaslr,
        sign_key: a.signing.key(),
        allow_unsigned: a.allow_unsigned,
        depmod: !a.no_depmod,
        dry_run: a.dry_run,
        manifest_hash: a.manifest_hash.into(),
        only: a
            .only
            .map(|l| apply::parse_only(&l))
            .transpose()
            .map_err(|e| Error::new(bootlink::error::Kind::Usage, format!("--only {e}")))?,
    };
    let report = apply::run(&opts)?;
    Ok(print_batch(&report, &report.errors, false, a.json))
}
