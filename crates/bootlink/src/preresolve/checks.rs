//! The preresolver's checks: the kernel refused before any module is
//! touched, and per symbol the load-time checks the kernel skips for SHN_ABS
//! symbols (license, namespace, CRC), done here instead.

use std::collections::HashMap;

use serde::Serialize;

use super::{Options, SlideBase};
use crate::error::{Error, Kind, Result};
use crate::kernel::{Export, Kaslr, KernelImage};
use crate::module::Module;

/// Licenses the kernel treats as GPL-compatible (include/linux/license.h).
pub const GPL_COMPATIBLE: &[&str] =
    &["GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL", "Dual MIT/GPL", "Dual MPL/GPL"];

pub fn license_is_gpl_compatible(license: &str) -> bool {
    GPL_COMPATIBLE.contains(&license)
}

/// Why a symbol that vmlinux exports was left for the kernel to resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A GPL-only export used by a module whose license is not GPL-compatible.
    GplOnly,
    /// An export in a namespace the module does not import.
    Namespace,
    /// The module's __versions CRC differs from the kernel's.
    CrcMismatch,
    /// The module has __versions but no entry for this symbol.
    NoVersionEntry,
    /// The module has no __versions at all while the kernel has CRCs.
    NoVersions,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::GplOnly => "GPL-only",
            Reason::Namespace => "namespace not imported",
            Reason::CrcMismatch => "CRC mismatch",
            Reason::NoVersionEntry => "no __versions entry",
            Reason::NoVersions => "no __versions",
        }
    }
}

/// Refuse what cannot be made safe before any module is touched, and say
/// where the addresses written will hold: at link time (a kernel that
/// does not move, or `--assume-nokaslr`), or moved by the slide (a kernel
/// that may randomize its base and names `preresolved-slide`: then the
/// build's [`SlideBase`]).
pub fn check_kernel<'k>(k: &'k KernelImage, opts: &Options) -> Result<Option<&'k SlideBase>> {
    let mut slide = None;
    if !opts.assume_nokaslr {
        let why = match &k.kaslr {
            Kaslr::No { .. } => None,
            Kaslr::Possible { source } => Some(format!("CONFIG_RANDOMIZE_BASE=y in {source}")),
            Kaslr::Unknown => Some("no kernel config was found, so KASLR cannot be ruled out (pass --config)".into()),
        };
        if why.is_some()
            && k.loader_features.has(super::SLIDE_FEATURE)
            && let Some(base) = &k.slide_base
        {
            slide = Some(base);
        } else if let Some(why) = why {
            return Err(Error::file(
                Kind::WrongKernel,
                &k.path,
                format!(
                    "refusing to preresolve: the kernel may randomize its base address at boot (KASLR: {why}). \
                     Preresolved modules hold link-time addresses and oops under KASLR. If the target boots with \
                     `nokaslr` on its command line (or through an entry that does not randomize, such as a PVH boot \
                     of vmlinux), pass --assume-nokaslr; a kernel with patch `preresolved-slide` (its image names \
                     the feature) takes modules preresolved for its slide"
                ),
            ));
        }
    }
    if k.vermagic.is_none() {
        return Err(Error::file(
            Kind::WrongKernel,
            &k.path,
            "the kernel's vermagic is unknown, so modules cannot be checked against it: give a vmlinux or vmlinuz",
        ));
    }
    Ok(slide)
}

/// What [`decide`] found for one module.
pub(super) struct Decision {
    /// (symbol index, address) to preresolve.
    pub edits: Vec<(usize, u64)>,
    /// vmlinux exports left for the loader, and why.
    pub kept: Vec<(String, Reason)>,
    /// Undefined symbols that only modules export.
    pub from_modules: usize,
}

/// Decide, for each undefined symbol, whether to preresolve it.
pub(super) fn decide(k: &KernelImage, exports: &HashMap<&str, &Export>, m: &Module) -> Decision {
    let gpl_ok = m.license().is_some_and(license_is_gpl_compatible);
    let imports = m.import_ns();
    let kernel_has_crcs = k.exports.iter().any(|e| e.crc.is_some());
    let versions: HashMap<&str, u32> = m.versions.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    let (mut edits, mut kept, mut from_modules) = (Vec::new(), Vec::new(), 0);
    for (name, &idx) in m.undefined.iter().zip(&m.undefined_index) {
        let Some(e) = exports.get(name.as_str()) else {
            from_modules += 1;
            continue;
        };
        let reason = if e.gpl && !gpl_ok {
            Some(Reason::GplOnly)
        } else if e.namespace.as_deref().is_some_and(|ns| !imports.contains(&ns)) {
            Some(Reason::Namespace)
        } else if let (true, Some(kcrc)) = (kernel_has_crcs, e.crc) {
            match versions.get(name.as_str()) {
                _ if m.versions.is_empty() => Some(Reason::NoVersions),
                None => Some(Reason::NoVersionEntry),
                Some(&c) if c != kcrc => Some(Reason::CrcMismatch),
                Some(_) => None,
            }
        } else {
            None
        };
        match reason {
            Some(r) => kept.push((name.clone(), r)),
            None => edits.push((idx, e.addr)),
        }
    }
    Decision { edits, kept, from_modules }
}
