//! The manifest capability as a request: list the final modules' digests in
//! a copy of the kernel and, when asked, rebuild its bzImage.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Kind, Result};
use crate::manifest::bzimage::{self, Rebuilt};
use crate::manifest::{FillReport, Listed, fill_staged, of_modules_for, secureboot};
use crate::tree::FileError;

/// `bootlink manifest write`.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// The kernel (a vmlinux built with patch `hash-manifest`).
    pub vmlinux: PathBuf,
    /// Where the kernel with the manifest goes (may be `vmlinux`).
    pub output: PathBuf,
    /// Also write the bzImage of the written vmlinux here.
    pub bzimage: Option<PathBuf>,
    /// The kernel's object tree (default: from the build.json beside
    /// `vmlinux`); used only with `bzimage`.
    pub tree: Option<PathBuf>,
    /// The final modules: files or directories.
    pub modules: Vec<PathBuf>,
    /// Sign the written bzImage for Secure Boot with this key and
    /// certificate (sbsign, checked with sbverify); used only with `bzimage`.
    pub sign: Option<(PathBuf, PathBuf)>,
    /// arm64: also write the `Image` beside `vmlinux` (a `kernel build
    /// --arch arm64` directory), with the manifest, here.
    pub image: Option<PathBuf>,
    /// The hash the list holds (SHA-256 unless asked).
    pub hash: crate::manifest::Hash,
}

/// What [`write`] did (fields in the order `--json` has always printed).
#[derive(Debug, Serialize)]
pub struct WriteReport {
    pub bzimage: Option<Rebuilt>,
    /// arm64: the Image written with the manifest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<PathBuf>,
    /// The inputs refused as modules of this kernel (each not listed).
    pub errors: Vec<FileError>,
    pub modules: Vec<Listed>,
    /// Written only when at least one module was listed.
    pub report: Option<FillReport>,
    /// The certificate the bzImage was signed for Secure Boot with.
    pub secure_boot_cert: Option<PathBuf>,
}

/// Find the object tree and check it (and the signing key) before anything
/// is written, parse every input as a module of this kernel (the refused
/// ones are reported, not listed), list the rest, write the kernel, then its
/// bzImage, signed when a key was given. Nothing is written when no module
/// is left.
impl crate::report::Report for WriteReport {
    /// What was written, a line a file (nothing when no list was written:
    /// the errors say why).
    fn render(&self) -> String {
        let Some(r) = &self.report else { return String::new() };
        let mut s = format!(
            "{}: {} modules listed by their {} ({} of {} reserved bytes)\n",
            r.vmlinux.display(),
            r.modules,
            r.hash.name(),
            r.bytes,
            r.reserved
        );
        if let Some(i) = &self.image {
            s.push_str(&format!("{}: its Image, with the same list\n", i.display()));
        }
        if let Some(b) = &self.bzimage {
            s.push_str(&format!(
                "{}: its bzImage ({} bytes; payload {} -> {} bytes; {} steps replayed from {})\n",
                b.bzimage.display(),
                b.bytes,
                b.payload_before,
                b.payload_after,
                b.steps.len(),
                b.tree.display()
            ));
        }
        if let Some(cert) = &self.secure_boot_cert {
            s.push_str(&format!(
                "{}: signed for Secure Boot by sbsign, checked with sbverify --cert {}\n",
                self.bzimage.as_ref().map(|b| b.bzimage.display().to_string()).unwrap_or_default(),
                cert.display()
            ));
        }
        s
    }
}

pub fn write(req: &WriteRequest) -> Result<WriteReport> {
    // An arm64 vmlinux boots as the Image made from it: the kernel's
    // release, vermagic and machine are read from that Image.
    let arm64 = crate::elf::machine_of(&crate::fsutil::map_file(&req.vmlinux)?) == Some(object::elf::EM_AARCH64);
    let source_image = req.vmlinux.with_file_name("Image");
    match (arm64, &req.image, &req.bzimage) {
        (true, None, _) => {
            return Err(Error::file(
                Kind::Usage,
                &req.vmlinux,
                "an arm64 vmlinux: give --image OUT, the Image it boots as (a bzImage is x86-64's)",
            ));
        }
        (true, Some(_), Some(_)) => {
            return Err(Error::new(Kind::Usage, "--bzimage is an x86-64 kernel's; an arm64 one takes --image"));
        }
        (false, Some(_), _) => {
            return Err(Error::file(
                Kind::Usage,
                &req.vmlinux,
                "--image is an arm64 kernel's Image; x86-64 has --bzimage",
            ));
        }
        (true, Some(_), None) if !source_image.is_file() => {
            return Err(Error::file(
                Kind::Usage,
                &req.vmlinux,
                "no Image beside this vmlinux (give the vmlinux of a `kernel build --arch arm64` directory)",
            ));
        }
        _ => {}
    }
    check_outputs(req, arm64.then_some(source_image.as_path()))?;
    match (&req.bzimage, &req.tree) {
        // A bzImage made from a `bootlink kernel build` directory's object
        // tree: the tree is held (made to hold that build again where
        // another build of the line switched it) until the image is made.
        (Some(_), None) => {
            let built = crate::kbuild::cached_build_of(&req.vmlinux)?;
            crate::kbuild::with_tree_of(&built, |tree| write_checked(req, arm64, &source_image, Some(tree)))
        }
        (Some(_), Some(tree)) => write_checked(req, arm64, &source_image, Some(tree)),
        (None, _) => write_checked(req, arm64, &source_image, None),
    }
}

/// [`write`] once its arguments are checked, the bzImage (if asked for)
/// made in the object tree `tree`.
fn write_checked(
    req: &WriteRequest,
    arm64: bool,
    source_image: &std::path::Path,
    tree: Option<&std::path::Path>,
) -> Result<WriteReport> {
    if let Some(t) = &tree {
        bzimage::check(t, &req.vmlinux)?;
        if let Some((key, cert)) = &req.sign {
            // The tree's own bzImage tells whether the new one can be signed.
            secureboot::check_signable(&t.join("arch/x86/boot/bzImage"), key, cert)?;
        }
    }
    let k = crate::kernel::KernelImage::open(if arm64 { source_image } else { &req.vmlinux }, None)?;
    crate::manifest::check_takes(&k, req.hash, &req.vmlinux)?;
    let (m, modules, errors) = of_modules_for(&k, req.hash, &req.modules)?;
    if modules.is_empty() {
        return Ok(WriteReport { bzimage: None, image: None, errors, modules, report: None, secure_boot_cert: None });
    }
    // Every output is written whole beside where it goes, and all are put
    // in place together at the end: a failure (a full file system, a step
    // of the bzImage) leaves none of them.
    let mut staged = crate::fsutil::Staged::new();
    let image = match &req.image {
        Some(out) => {
            crate::manifest::fill_image_staged(source_image, &req.vmlinux, &m, out, &mut staged)?;
            Some(out.clone())
        }
        None => None,
    };
    let (report, listed) = fill_staged(&req.vmlinux, &m, &req.output, &mut staged)?;
    let bzimage = match (&req.bzimage, &tree) {
        (Some(b), Some(t)) => {
            let (rebuilt, bytes) = bzimage::rebuild_bytes(t, &listed, b)?;
            Some((rebuilt, staged.write(b, &bytes)?))
        }
        _ => None,
    };
    let mut secure_boot_cert = None;
    if let (Some((r, at)), Some((key, cert))) = (&bzimage, &req.sign) {
        // Signed where it is staged; its errors name where it goes.
        secureboot::sign(at, key, cert).map_err(|mut e| {
            if e.path.as_deref() == Some(at.as_path()) {
                e.path = Some(r.bzimage.clone());
            }
            e
        })?;
        secure_boot_cert = Some(cert.clone());
    }
    staged.commit()?;
    let bzimage = bzimage.map(|(r, _)| r);
    Ok(WriteReport { bzimage, image, errors, modules, report: Some(report), secure_boot_cert })
}

/// The outputs of `req` against its inputs, before any work
/// ([`crate::fsutil::check_outputs`]): `-o` may be the vmlinux and
/// `--image` the Image beside it (`arm64_image`), each written in place;
/// no output may be a module listed, the signing key or certificate, or
/// another output.
fn check_outputs(req: &WriteRequest, arm64_image: Option<&std::path::Path>) -> Result<()> {
    use crate::fsutil::Planned;
    let modules = crate::tree::find_modules(&req.modules)?;
    let mut inputs: Vec<&std::path::Path> = vec![&req.vmlinux];
    inputs.extend(arm64_image);
    inputs.extend(modules.iter().map(PathBuf::as_path));
    if let Some((key, cert)) = &req.sign {
        inputs.extend([key.as_path(), cert.as_path()]);
    }
    let mut outputs = vec![Planned::in_place_of(&req.output, &req.vmlinux)];
    if let (Some(out), Some(image)) = (&req.image, arm64_image) {
        outputs.push(Planned::in_place_of(out, image));
    } else if let Some(out) = &req.image {
        outputs.push(Planned::new(out));
    }
    outputs.extend(req.bzimage.as_deref().map(Planned::new));
    crate::fsutil::check_outputs(&inputs, &outputs)
}
