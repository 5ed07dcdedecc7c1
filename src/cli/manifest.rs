//! `bootlink manifest write|show`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, manifest};

use super::{emit, exit_for};

#[derive(Subcommand)]
pub enum Cmd {
    /// Write a copy of VMLINUX whose __modhashes section lists these modules (and its bzImage)
    Write {
        /// The kernel (a vmlinux built with patch `hash-manifest`; on arm64, that of a
        /// `kernel build --arch arm64` directory, whose Image lies beside it)
        #[arg(long)]
        vmlinux: PathBuf,
        /// Where to write the kernel with the manifest (may be VMLINUX itself)
        #[arg(long, short)]
        output: PathBuf,
        /// Also write the bzImage of the listed vmlinux here: arch/x86/boot's chain (payload,
        /// decompressor link, setup, tools/build) replayed from the kernel's object tree
        #[arg(long)]
        bzimage: Option<PathBuf>,
        /// The kernel's object tree (default: the `tree` of a `bootlink kernel build` output
        /// the vmlinux lies in, from its build.json)
        #[arg(long, requires = "bzimage")]
        tree: Option<PathBuf>,
        /// arm64: also write the Image beside VMLINUX, with the manifest, here (what the board
        /// or QEMU boots)
        #[arg(long, conflicts_with = "bzimage")]
        image: Option<PathBuf>,
        /// Sign the bzImage for Secure Boot with this private key (PEM), by sbsign
        #[arg(long, requires_all = ["bzimage", "sign_cert"])]
        sign_key: Option<PathBuf>,
        /// ...and this X.509 certificate (PEM); the signed image is checked with sbverify
        #[arg(long, requires = "sign_key")]
        sign_cert: Option<PathBuf>,
        /// The hash the list holds: blake2b needs a kernel with patch `hashes-blake2b`
        /// (CONFIG_MODULE_HASHES_BLAKE2B; refused otherwise)
        #[arg(long, value_enum, default_value_t = super::values::ListHash::Sha256)]
        hash: super::values::ListHash,
        #[arg(long)]
        json: bool,
        /// The final modules: files or directories (.ko, .ko.xz, .ko.zst, .ko.gz)
        #[arg(required = true)]
        modules: Vec<PathBuf>,
    },
    /// List the digests in a kernel's manifest (a vmlinux or a bzImage)
    Show {
        vmlinux: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Write { vmlinux, output, bzimage, tree, image, sign_key, sign_cert, hash, json, modules } => {
            let sign = sign_key.zip(sign_cert);
            let w = manifest::write(&manifest::WriteRequest {
                vmlinux,
                output,
                bzimage,
                tree,
                modules,
                sign,
                image,
                hash: hash.into(),
            })?;
            for e in &w.errors {
                eprintln!("bootlink: {}: {}", e.path.display(), e.error);
            }
            if let (Some(b), None) = (&w.bzimage, &w.secure_boot_cert) {
                eprintln!(
                    "bootlink: {}: not signed for Secure Boot (a signature the kernel had no longer matches \
                     its new manifest): give --sign-key and --sign-cert to sign it with sbsign",
                    b.bzimage.display()
                );
            }
            emit(&w, json);
            if !w.errors.is_empty() {
                return Ok(exit_for(&w.errors.iter().map(|e| e.kind).collect::<Vec<_>>()));
            }
        }
        Cmd::Show { vmlinux, json } => {
            let m = manifest::read(&vmlinux)?.unwrap_or_default();
            emit(&m, json);
            if !json {
                eprintln!("{}: {} modules listed by their {}", vmlinux.display(), m.digests.len(), m.hash.name());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
