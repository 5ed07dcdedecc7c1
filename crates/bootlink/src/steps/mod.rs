//! Build-time steps: what is done to a kernel's module files and its image
//! before they boot, applied in the order a list gives them. The lab's
//! variants and `bootlink apply` run the same steps on a [`Tree`]: a
//! variant's modules in a scratch directory, or a build's installed tree.
//! Each step is one file here with its own `apply`; adding a step is a
//! variant of [`Step`], its file, and its line in [`Step::ALL`].
//!
//! Module steps come first (they rewrite the set's `.ko` files), then the
//! modules are made plain (compressed ones decompressed on the host, see
//! [`decompress`]), then the module files compressed as kbuild compresses
//! them ([`compress`]), then kernel-image steps (the manifest lists the
//! final modules by their decompressed digest), then guest-file steps (raw
//! bytes).
//! Kernel command-line additions may stand anywhere.

mod cmdline;
mod compress;
mod decompress;
mod finalize;
mod manifest;
mod preresolve;
mod raw;
mod sign;
mod symhash;
mod trim;
mod unsign;

use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};
use crate::kernel::KernelImage;

/// One step of a variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The same bytes without the appended signature.
    Unsign,
    /// `bootlink preresolve` against the booted kernel (signature removed).
    Preresolve,
    /// `bootlink preresolve --fold-symbols`: the addresses in the
    /// relocations, the resolved symbols removed from .symtab.
    Fold,
    /// `bootlink preresolve` for a kernel that may randomize its base and
    /// has patch `preresolved-slide`: link-time addresses with the
    /// `.preresolved_slide` table the loader moves them by.
    PreresolveSlide,
    /// The same with `--fold-symbols`.
    FoldSlide,
    /// `bootlink symhash`: export and undefined-symbol hash tables (the
    /// kernel needs kernel/6.1/patches; `module.symlookup=` picks the method).
    Symhash,
    /// `bootlink symhash --sort-versions`: tables and `__versions` sorted.
    SymhashSorted,
    /// `bootlink symhash --sort-versions --export-slots`: and each import's
    /// slot in vmlinux's export tables (patch `export-slots`).
    SymhashSlotted,
    /// `bootlink finalize`: ORC tables sorted and ftrace records checked at
    /// build time (the kernel needs kernel/6.1/patches to skip the work).
    Finalize,
    /// `bootlink finalize --no-mcount`: only the ORC tables sorted.
    FinalizeOrc,
    /// `bootlink finalize --no-orc`: only the ftrace records checked.
    FinalizeMcount,
    /// Unsigned, local data symbols no relocation uses removed (what
    /// `preresolve --trim-symtab` does, without preresolving): shorter
    /// kallsyms scans on a stock kernel.
    Trim,
    /// Boot a copy of the kernel (a vmlinux with patch `hash-manifest`)
    /// whose module hash manifest lists the variant's final modules.
    Manifest,
    /// The same list of BLAKE2b-256 digests, for a kernel with patch `hashes-blake2b`
    /// (CONFIG_MODULE_HASHES_BLAKE2B): the kernel hashes each module with
    /// BLAKE2b instead of SHA-256.
    ManifestBlake2b,
    /// The manifest of the module files as stored (a compressed file by
    /// its compressed bytes): what lab patch `hash-bytes-read`'s `module.hashes_of_read=1`
    /// looks up before it decompresses (lab only: a blacklisted hash is of
    /// plain bytes; user-space decompression hands the kernel plain bytes,
    /// which this list does not hold).
    ManifestRead,
    /// Each module signed with the tree's `sign_key` (after every other
    /// module step): `bootlink apply` for a kernel that checks signatures
    /// and has no module hash list. Not a lab variant's step.
    Sign,
    /// The module files compressed with kbuild's programs and options
    /// (before the manifest, which lists them by their decompressed
    /// digest): what the guest's loader reads and decompresses, in the
    /// kernel or user space.
    Compress(crate::compress::Compression),
    /// FILE's bytes, as they are, in the guest as module NAME's file (after
    /// the manifest): what the kernel does with a module the host-side
    /// tree reader would refuse (truncated) or know by another name.
    Raw { module: String, file: PathBuf },
    /// Appended to the kernel command line.
    Cmdline(String),
}

/// Where a step acts, in the order the stages run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Modules,
    /// The module files compressed (before the manifest and raw files).
    Compress,
    Image,
    Guest,
    /// No files: the command line.
    Any,
}

/// What the steps work on: one variant's (or one build's) modules and kernel.
pub struct Tree<'a> {
    /// The kernel the variant boots, opened (preresolve, symhash and
    /// finalize read its exports and sections).
    pub image: &'a KernelImage,
    /// The image that boots (the manifest step replaces it by a copy
    /// written to `kernel_copy`).
    pub kernel: PathBuf,
    /// Module name and file, in load order.
    pub modules: Vec<(String, PathBuf)>,
    /// Added to the kernel command line, in step order.
    pub cmdline: Vec<String>,
    /// `NAME=FILE` of a raw module, for run.json.
    pub raw_module: String,
    /// Scratch space for the steps.
    pub work: PathBuf,
    /// Where the manifest step writes the kernel with its list.
    pub kernel_copy: PathBuf,
    /// The key the sign step signs with.
    pub sign_key: Option<crate::sign::SignKey>,
}

impl Step {
    /// Every step without parameters, by its name.
    pub const ALL: [Step; 13] = [
        Step::Unsign,
        Step::Preresolve,
        Step::Fold,
        Step::PreresolveSlide,
        Step::FoldSlide,
        Step::Symhash,
        Step::SymhashSorted,
        Step::SymhashSlotted,
        Step::Finalize,
        Step::FinalizeOrc,
        Step::FinalizeMcount,
        Step::Trim,
        Step::Manifest,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Step::Unsign => "unsign",
            Step::Preresolve => "preresolve",
            Step::Fold => "fold",
            Step::PreresolveSlide => "preresolve-slide",
            Step::FoldSlide => "fold-slide",
            Step::Symhash => "symhash",
            Step::SymhashSorted => "symhash-sorted",
            Step::SymhashSlotted => "symhash-slotted",
            Step::Finalize => "finalize",
            Step::FinalizeOrc => "finalize-orc",
            Step::FinalizeMcount => "finalize-mcount",
            Step::Trim => "trim",
            Step::Manifest => "manifest",
            Step::ManifestBlake2b => "manifest-blake2b",
            Step::ManifestRead => "manifest-read",
            Step::Sign => "sign",
            Step::Compress(_) => "compress",
            Step::Raw { .. } => "raw",
            Step::Cmdline(_) => "cmdline",
        }
    }

    /// The hash of the module hash list this step writes of the final
    /// (decompressed) modules; None for any other step.
    pub fn list_hash(&self) -> Option<crate::manifest::Hash> {
        match self {
            Step::Manifest => Some(crate::manifest::Hash::Sha256),
            Step::ManifestBlake2b => Some(crate::manifest::Hash::Blake2b256),
            _ => None,
        }
    }

    /// A step without parameters by its name.
    pub fn parse(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn stage(&self) -> Stage {
        match self {
            Step::Manifest | Step::ManifestBlake2b | Step::ManifestRead => Stage::Image,
            Step::Compress(_) => Stage::Compress,
            Step::Raw { .. } => Stage::Guest,
            Step::Cmdline(_) => Stage::Any,
            _ => Stage::Modules,
        }
    }

    /// Do the step.
    pub fn apply(&self, t: &mut Tree, n: usize) -> Result<()> {
        let dir = t.work.join(format!("{n}-{}", self.name()));
        match self {
            Step::Unsign => unsign::apply(t, &dir),
            Step::Preresolve => preresolve::apply(t, &dir, false, false),
            Step::Fold => preresolve::apply(t, &dir, true, false),
            Step::PreresolveSlide => preresolve::apply(t, &dir, false, true),
            Step::FoldSlide => preresolve::apply(t, &dir, true, true),
            Step::Symhash => symhash::apply(t, &dir, false, false),
            Step::SymhashSorted => symhash::apply(t, &dir, true, false),
            Step::SymhashSlotted => symhash::apply(t, &dir, true, true),
            Step::Finalize => finalize::apply(t, &dir, true, true),
            Step::FinalizeOrc => finalize::apply(t, &dir, true, false),
            Step::FinalizeMcount => finalize::apply(t, &dir, false, true),
            Step::Trim => trim::apply(t, &dir),
            Step::Manifest | Step::ManifestBlake2b => {
                let hash = self.list_hash().ok_or_else(|| Error::new(Kind::Internal, "a list step without a hash"))?;
                manifest::apply(t, manifest::Listing::Decompressed(hash))
            }
            Step::ManifestRead => manifest::apply(t, manifest::Listing::Stored),
            Step::Sign => sign::apply(t, &dir),
            Step::Compress(kind) => compress::apply(t, &dir, *kind),
            Step::Raw { module, file } => raw::apply(t, module, file),
            Step::Cmdline(args) => cmdline::apply(t, args),
        }
    }

    /// Refuse a step the variant cannot do, before anything is built:
    /// `set` is the module set's names.
    pub fn check(&self, variant: &str, set: &[&str]) -> Result<()> {
        match self {
            Step::Raw { module, file } => raw::check(variant, module, file, set),
            _ => Ok(()),
        }
    }
}

/// The module transforms of `--variant NAME=modules:PRESET` (and the bare
/// `--variant PRESET`): named step lists.
pub const PRESETS: &[(&str, &[Step])] = &[
    ("stock", &[]),
    ("unsigned", &[Step::Unsign]),
    ("preresolved", &[Step::Preresolve]),
    ("folded", &[Step::Fold]),
    // For a KASLR kernel with patch `preresolved-slide` (boot it with kaslr:on).
    ("preresolved-slide", &[Step::PreresolveSlide]),
    ("folded-slide", &[Step::FoldSlide]),
    ("symhash", &[Step::Symhash]),
    ("symhash-sorted", &[Step::SymhashSorted]),
    ("symhash-slotted", &[Step::SymhashSlotted]),
    ("preresolved-symhash", &[Step::Preresolve, Step::SymhashSorted]),
    // Unsigned first: a module finalize leaves alone keeps its signature.
    ("finalized", &[Step::Unsign, Step::Finalize]),
    ("finalized-orc", &[Step::Unsign, Step::FinalizeOrc]),
    ("finalized-mcount", &[Step::Unsign, Step::FinalizeMcount]),
    // Unsigned after folding: preresolve copies a module it leaves alone as it is.
    ("folded-finalized", &[Step::Fold, Step::Unsign, Step::Finalize]),
    ("trimmed", &[Step::Trim]),
];

pub fn preset(name: &str) -> Option<&'static [Step]> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

pub fn preset_names() -> String {
    PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// How the steps leave the module files the guest reads: the compress
/// step's format, else plain.
pub fn compression(steps: &[Step]) -> crate::compress::Compression {
    steps
        .iter()
        .find_map(|s| match s {
            Step::Compress(kind) => Some(*kind),
            _ => None,
        })
        .unwrap_or(crate::compress::Compression::None)
}

/// How the modules were made, for run.json's `transform`: the preset the
/// module steps are, else the steps joined with '+'.
pub fn label(steps: &[Step]) -> String {
    let modules: Vec<Step> = steps.iter().filter(|s| s.stage() == Stage::Modules).cloned().collect();
    match PRESETS.iter().find(|(_, s)| *s == modules.as_slice()) {
        Some((n, _)) => n.to_string(),
        None => modules.iter().map(|s| s.name()).collect::<Vec<_>>().join("+"),
    }
}

/// Refuse steps out of stage order (a manifest must list the final modules,
/// raw bytes replace a module after it), and a step given twice.
pub fn check_order(variant: &str, steps: &[Step]) -> Result<()> {
    let mut last = Stage::Modules;
    let mut last_name = "";
    for s in steps.iter().filter(|s| s.stage() != Stage::Any) {
        if s.stage() < last {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "variant {variant}: step {} after {last_name}: module steps come first, then compress, then manifest, then raw",
                    s.name()
                ),
            ));
        }
        (last, last_name) = (s.stage(), s.name());
    }
    for (i, s) in steps.iter().enumerate() {
        if matches!(s.stage(), Stage::Image | Stage::Compress | Stage::Guest)
            && steps[..i].iter().any(|o| o.name() == s.name())
        {
            return Err(Error::new(Kind::Usage, format!("variant {variant}: step {} given twice", s.name())));
        }
    }
    Ok(())
}

/// Apply `steps` in order, the modules made plain when the module steps
/// are done.
pub fn apply_all(steps: &[Step], t: &mut Tree) -> Result<()> {
    let mut plain = false;
    for (n, s) in steps.iter().enumerate() {
        if !plain && matches!(s.stage(), Stage::Image | Stage::Compress | Stage::Guest) {
            decompress::apply(t)?;
            plain = true;
        }
        s.apply(t, n)?;
    }
    if !plain {
        decompress::apply(t)?;
    }
    Ok(())
}

/// Each module without its appended signature, rewritten by `edit` (None:
/// kept as it is), written as `dir/<name>.ko`; the variant's modules become
/// those files.
fn rewrite_unsigned(
    t: &mut Tree,
    dir: &Path,
    mut edit: impl FnMut(&Path, &[u8]) -> Result<Option<Vec<u8>>>,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for (name, path) in &t.modules {
        let (data, _) = crate::module::load_bytes(path)?;
        let (len, _) = crate::module::split_signature(&data).map_err(|e| e.at(path))?;
        let dest = dir.join(format!("{name}.ko"));
        match edit(path, &data[..len])? {
            Some(b) => crate::fsutil::write_atomic_nosync(&dest, &b)?,
            None => crate::fsutil::write_atomic_nosync(&dest, &data[..len])?,
        }
        files.push((name.clone(), dest));
    }
    t.modules = files;
    Ok(())
}

/// The variant's modules by the file names a tool wrote into `dir`.
fn in_dir(modules: &[(String, PathBuf)], dir: &Path) -> Vec<(String, PathBuf)> {
    modules.iter().map(|(name, p)| (name.clone(), dir.join(p.file_name().unwrap_or_default()))).collect()
}

/// The files of the variant's modules, as a tool's inputs.
fn inputs(t: &Tree) -> Vec<PathBuf> {
    t.modules.iter().map(|(_, p)| p.clone()).collect()
}

/// The first error of a batch tool's report, as the step's error.
fn first_error(tool: &str, errors: &[crate::tree::FileError]) -> Result<()> {
    match errors.first() {
        Some(e) => Err(Error::file(e.kind, &e.path, format!("{tool}: {}", e.error)).because(e.clone())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_name_their_steps_and_labels_name_presets() {
        assert_eq!(preset("folded-finalized").unwrap(), [Step::Fold, Step::Unsign, Step::Finalize]);
        for (name, steps) in PRESETS {
            let mut with = steps.to_vec();
            with.push(Step::Manifest);
            with.push(Step::Cmdline("quiet".into()));
            assert_eq!(label(&with), *name);
        }
        assert_eq!(label(&[Step::Trim, Step::Fold]), "trim+fold");
        for s in Step::ALL {
            assert_eq!(Step::parse(s.name()), Some(s));
        }
    }

    #[test]
    fn steps_keep_their_stage_order() {
        let raw = Step::Raw { module: "m".into(), file: "/f".into() };
        let xz = Step::Compress(crate::compress::Compression::Xz);
        assert!(
            check_order("v", &[Step::Fold, xz.clone(), Step::Manifest, raw.clone(), Step::Cmdline("x".into())]).is_ok()
        );
        let e = check_order("v", &[Step::Manifest, xz.clone()]).unwrap_err().to_string();
        assert!(e.contains("step compress after manifest"), "{e}");
        let e = check_order("v", &[raw.clone(), xz.clone()]).unwrap_err().to_string();
        assert!(e.contains("step compress after raw"), "{e}");
        let e = check_order("v", &[Step::Manifest, Step::Fold]).unwrap_err().to_string();
        assert!(e.contains("step fold after manifest"), "{e}");
        let e = check_order("v", &[raw.clone(), Step::Manifest]).unwrap_err().to_string();
        assert!(e.contains("step manifest after raw"), "{e}");
        let e = check_order("v", &[Step::Manifest, Step::Manifest]).unwrap_err().to_string();
        assert!(e.contains("given twice"), "{e}");
    }
}
