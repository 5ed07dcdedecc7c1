//! The module hash manifest (patch `hash-manifest`): the SHA-256 (or, for
//! a kernel with patch `hashes-blake2b`'s MODULE_HASHES_BLAKE2B, the BLAKE2b-256) of
//! every final module of a build, sorted, written into the `__modhashes` section
//! the kernel image reserves at link time, so the kernel accepts those
//! modules without a per-module signature check and nothing in the image
//! moves (preresolved addresses stay valid).
//!
//! Why a sorted list and not a Merkle root: the kernel must check one
//! module at a time with nothing but the module; a Merkle root would need a
//! proof carried by each module (a change to the module file and its
//! loader), while a sorted list costs 32 bytes a module (Debian's 4,023
//! modules: 126 KiB of the 256 KiB reserved) and a binary search of 12
//! steps. Layout (little-endian):
//!
//! ```text
//! magic "MODHASH1", count u32, hash u32 (0 SHA-256, 1 BLAKE2b-256), digest[count][32] strictly increasing
//! ```
//!
//! A kernel without patch `hashes-blake2b` finds a nonzero hash field out of range and
//! ignores the whole list, so a BLAKE2b-256 list is written only for a
//! kernel that names the feature `hashes-blake2b`.

pub mod bzimage;
pub mod request;
pub mod secureboot;

pub use request::{WriteReport, WriteRequest, write};

mod image;
pub use image::read_image;
pub(crate) use image::{fill_image, fill_image_staged, is_arm64_image};

use std::path::{Path, PathBuf};

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use serde::Serialize;
use sha2::Sha256;

use crate::elf::{Elf, Want};
use crate::error::{Error, Kind, Result};

pub const SECTION: &str = "__modhashes";
pub(crate) const MAGIC: &[u8; 8] = b"MODHASH1";
const HEADER: usize = 16;
/// The header's fields after the magic: the number of digests, the hash.
const COUNT_AT: usize = 8;
const HASH_AT: usize = 12;

pub(crate) type Sha = [u8; 32];

/// The hash a manifest's digests are of (its header's `hash` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hash {
    /// SHA-256: every kernel with the module hash list takes it
    #[default]
    Sha256,
    /// BLAKE2b-256 (RFC 7693): as strong, about half the instructions a byte
    /// on a CPU without SHA instructions; needs patch `hashes-blake2b`
    /// (CONFIG_MODULE_HASHES_BLAKE2B)
    #[serde(rename = "blake2b-256")]
    Blake2b256,
}

impl Hash {
    /// The header's `hash` field.
    fn id(self) -> u32 {
        match self {
            Hash::Sha256 => 0,
            Hash::Blake2b256 => 1,
        }
    }

    fn from_id(id: u32) -> Option<Hash> {
        [Hash::Sha256, Hash::Blake2b256].into_iter().find(|h| h.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Hash::Sha256 => "SHA-256",
            Hash::Blake2b256 => "BLAKE2b-256",
        }
    }

    /// The digest of `bytes`.
    pub fn digest(self, bytes: &[u8]) -> Sha {
        match self {
            Hash::Sha256 => Sha256::digest(bytes).into(),
            Hash::Blake2b256 => Blake2b::<U32>::digest(bytes).into(),
        }
    }

    /// The loader feature a kernel names when it takes lists of this hash.
    pub(crate) fn feature(self) -> &'static str {
        match self {
            Hash::Sha256 => crate::kernel::features::name::HASHES,
            Hash::Blake2b256 => crate::kernel::features::name::HASHES_BLAKE2B,
        }
    }
}

/// The digests, sorted, without repeats, and the hash they are of.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Manifest {
    pub hash: Hash,
    #[serde(serialize_with = "hex_list")]
    pub digests: Vec<Sha>,
}

/// A list's text: its digests in hex, one a line, in the list's order.
impl crate::report::Report for Manifest {
    fn render(&self) -> String {
        self.digests.iter().map(|d| d.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n").collect()
    }
}

fn hex_list<S: serde::Serializer>(d: &[Sha], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(d.iter().map(|x| x.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// A manifest section the kernel would ignore as invalid.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

impl Manifest {
    pub fn new(hash: Hash, mut digests: Vec<Sha>) -> Manifest {
        digests.sort_unstable();
        digests.dedup();
        Manifest { hash, digests }
    }

    pub fn contains(&self, d: &Sha) -> bool {
        self.digests.binary_search(d).is_ok()
    }

    /// The section's contents.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = crate::bytes::LeWriter::with_capacity(HEADER + 32 * self.digests.len());
        out.bytes(MAGIC);
        out.u32(self.digests.len() as u32);
        out.u32(self.hash.id());
        debug_assert_eq!(out.len(), HEADER);
        for d in &self.digests {
            out.bytes(d);
        }
        out.into_inner()
    }

    /// Read a section as the kernel does: None for an empty (all-zero) one;
    /// an error for what the kernel would ignore as invalid.
    pub fn decode(area: &[u8]) -> std::result::Result<Option<Manifest>, Error> {
        if area.len() < HEADER {
            return Err(corrupt("section too small"));
        }
        if &area[..8] != MAGIC {
            return if area.iter().all(|&b| b == 0) { Ok(None) } else { Err(corrupt("bad magic")) };
        }
        let n = crate::bytes::le_u32(area, COUNT_AT).expect("a whole header") as usize;
        let id = crate::bytes::le_u32(area, HASH_AT).expect("a whole header");
        let hash = Hash::from_id(id).ok_or_else(|| corrupt(format!("hash {id}: not one bootlink knows")))?;
        if n > (area.len() - HEADER) / 32 {
            return Err(corrupt("count out of range"));
        }
        let digests: Vec<Sha> =
            area[HEADER..HEADER + 32 * n].chunks_exact(32).map(|c| c.try_into().expect("32 bytes")).collect();
        if digests.windows(2).any(|w| w[0] >= w[1]) {
            return Err(corrupt("digests not strictly increasing"));
        }
        Ok(Some(Manifest { hash, digests }))
    }
}

/// The digest of a module as the kernel receives it (decompressed).
pub(crate) fn digest_of(hash: Hash, path: &Path) -> Result<Sha> {
    let (bytes, _) = crate::module::load_bytes(path)?;
    Ok(hash.digest(&bytes))
}

/// The manifest of these module files as stored: a compressed file's
/// digest is of its compressed bytes, what a kernel that hashes the bytes
/// it read before decompressing them looks up (the lab's
/// `module.hashes_of_read=1`). Never for a product: a blacklisted module's
/// hash is of its plain bytes.
pub(crate) fn of_stored_files(files: &[PathBuf]) -> Result<Manifest> {
    let mut digests = Vec::with_capacity(files.len());
    for f in files {
        crate::module::read(f)?; // a module, whatever its compression
        digests.push(Hash::Sha256.digest(&crate::fsutil::map_file(f)?));
    }
    Ok(Manifest::new(Hash::Sha256, digests))
}

#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub path: PathBuf,
    /// The module's digest by the manifest's hash, in hex.
    pub digest: String,
}

/// The manifest of these modules (files or directories of modules).
pub(crate) fn of_modules(hash: Hash, inputs: &[PathBuf]) -> Result<(Manifest, Vec<Listed>)> {
    let files = crate::tree::find_modules(inputs)?;
    let mut listed = Vec::with_capacity(files.len());
    let mut digests = Vec::with_capacity(files.len());
    for f in files {
        let d = digest_of(hash, &f)?;
        listed.push(Listed { path: f, digest: crate::fsutil::hex(&d) });
        digests.push(d);
    }
    Ok((Manifest::new(hash, digests), listed))
}

/// The manifest of these modules (files or directories of modules) for
/// kernel `k`: each file is read as a module first (decompressed within
/// bounds, its ELF checked by the module reader) and must be for `k`'s
/// machine and vermagic, or it is refused (one error each, not listed);
/// only then is it hashed. The rest are listed.
pub fn of_modules_for(
    k: &crate::kernel::KernelImage,
    hash: Hash,
    inputs: &[PathBuf],
) -> Result<(Manifest, Vec<Listed>, Vec<crate::tree::FileError>)> {
    use rayon::prelude::*;
    let files = crate::tree::find_modules(inputs)?;
    let results: Vec<Result<(PathBuf, Sha)>> = files
        .par_iter()
        .map(|f| crate::tree::isolated(f, || checked_digest(k, hash, f).map(|d| (f.clone(), d))))
        .collect();
    let (mut listed, mut digests, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    for r in results {
        match r {
            Ok((path, d)) => {
                listed.push(Listed { path, digest: crate::fsutil::hex(&d) });
                digests.push(d);
            }
            Err(e) => errors.push(crate::tree::FileError::from(e)),
        }
    }
    Ok((Manifest::new(hash, digests), listed, errors))
}

/// Refuse a list of `hash` for a kernel that would ignore it: one that does
/// not name the feature (a kernel without patch `hashes-blake2b` ignores a BLAKE2b-256
/// list whole, and then trusts none of the modules).
pub(crate) fn check_takes(k: &crate::kernel::KernelImage, hash: Hash, path: &Path) -> Result<()> {
    if hash == Hash::Sha256 || k.loader_features.has(hash.feature()) {
        return Ok(());
    }
    Err(Error::file(
        Kind::WrongKernel,
        path,
        format!(
            "the kernel does not name the loader feature \"{}\": it would ignore a {} list (build it with \
             patch `hashes-blake2b` and CONFIG_MODULE_HASHES_BLAKE2B=y, or list SHA-256)",
            hash.feature(),
            hash.name()
        ),
    ))
}

/// The digest of a module that parses as a module of `k` (machine, vermagic).
fn checked_digest(k: &crate::kernel::KernelImage, hash: Hash, path: &Path) -> Result<Sha> {
    let (bytes, compression) = crate::module::load_bytes(path)?;
    let m =
        crate::module::parse_for(path, &bytes, compression, crate::elf::ANALYSED_MACHINES).map_err(|e| e.at(path))?;
    k.accepts(&m, "not listed")?;
    Ok(hash.digest(&bytes))
}

/// Where `__modhashes` lies in a vmlinux image of one of `machines`: (file
/// offset, size).
fn section_range(data: &[u8], path: &Path, machines: &'static [object::elf::Machine]) -> Result<(usize, usize)> {
    let elf = Elf::parse_for(data, Want::Executable, machines).map_err(|e| e.at(path))?;
    elf.reserved_range(SECTION).map_err(|e| e.at(path))?.ok_or_else(|| {
        Error::file(
            Kind::WrongKernel,
            path,
            format!("no {SECTION} section: a kernel built without bootlink's module hashes (kernel/6.1/patches: \"module: accept unsigned modules whose SHA-256 the kernel image lists\")"),
        )
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct FillReport {
    pub vmlinux: PathBuf,
    pub hash: Hash,
    pub modules: usize,
    pub bytes: usize,
    pub reserved: usize,
}

/// Write `vmlinux` with `manifest` in its reserved section to `out`
/// (atomically; `out` may be `vmlinux` itself).
pub fn fill(vmlinux: &Path, manifest: &Manifest, out: &Path) -> Result<FillReport> {
    let mut staged = crate::fsutil::Staged::new();
    let (report, _) = fill_staged(vmlinux, manifest, out, &mut staged)?;
    staged.commit()?;
    Ok(report)
}

/// [`fill`] into `staged` (put in place with the command's other
/// outputs): the report, and where the staged kernel lies until then.
pub(crate) fn fill_staged(
    vmlinux: &Path,
    manifest: &Manifest,
    out: &Path,
    staged: &mut crate::fsutil::Staged,
) -> Result<(FillReport, PathBuf)> {
    let data = crate::fsutil::read_input(vmlinux, crate::fsutil::MAX_BINARY)?;
    let (off, size) = section_range(&data, vmlinux, crate::elf::ANALYSED_MACHINES)?;
    put_and_stage(data, off, size, manifest, vmlinux, out, staged)
}

/// [`put`], then the image for `out` into `staged`: the report and the
/// staged file's path.
pub(crate) fn put_and_stage(
    mut data: Vec<u8>,
    off: usize,
    size: usize,
    manifest: &Manifest,
    path: &Path,
    out: &Path,
    staged: &mut crate::fsutil::Staged,
) -> Result<(FillReport, PathBuf)> {
    let bytes = put(&mut data, off, size, manifest, path)?;
    let at = staged.write(out, &data)?;
    let report = FillReport {
        vmlinux: out.to_path_buf(),
        hash: manifest.hash,
        modules: manifest.digests.len(),
        bytes,
        reserved: size,
    };
    Ok((report, at))
}

/// Put `manifest` into the reserved `data[off..off + size]` of the kernel
/// `path` (zeroed first) and check it reads back; the bytes it takes.
pub(crate) fn put(data: &mut [u8], off: usize, size: usize, manifest: &Manifest, path: &Path) -> Result<usize> {
    let blob = manifest.encode();
    if blob.len() > size {
        return Err(Error::file(
            Kind::Unsupported,
            path,
            format!("{} modules need {} bytes, {SECTION} reserves {size}", manifest.digests.len(), blob.len()),
        ));
    }
    let region = &mut data[off..off + size];
    region.fill(0);
    region[..blob.len()].copy_from_slice(&blob);
    match Manifest::decode(region) {
        Ok(Some(m)) if m == *manifest => Ok(blob.len()),
        other => Err(Error::file(Kind::Internal, path, format!("internal error: written manifest reads {other:?}"))),
    }
}

/// The manifest in a kernel image (None: empty): a vmlinux, or a bzImage
/// (its payload decompressed: the stripped vmlinux keeps the section).
pub fn read(vmlinux: &Path) -> Result<Option<Manifest>> {
    let mut data = crate::fsutil::map_file(vmlinux)?;
    let mut machines = crate::elf::ANALYSED_MACHINES;
    if !data.starts_with(&object::elf::ELFMAG) {
        let found = crate::kernel::find_vmlinux(data).map_err(|e| e.at(vmlinux))?;
        // An x86 boot image boots an x86-64 kernel: another machine's
        // vmlinux in one is a damaged image, not a kernel to read.
        if matches!(found.source, crate::kernel::Source::BzImage { .. }) {
            machines = &[object::elf::EM_X86_64];
        }
        data = found.data;
    }
    let (off, size) = section_range(&data, vmlinux, machines)?;
    decoded(&data[off..off + size], vmlinux)
}

/// The manifest in the reserved bytes `area` of the kernel `path`; a
/// malformed one is an error naming the file.
fn decoded(area: &[u8], path: &Path) -> Result<Option<Manifest>> {
    Manifest::decode(area).map_err(|e| e.context(path, |m| format!("{SECTION}: {m} (the kernel ignores it)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_and_what_the_kernel_refuses() {
        let m = Manifest::new(Hash::Sha256, vec![[3; 32], [1; 32], [2; 32], [1; 32]]);
        assert_eq!(m.digests.len(), 3);
        let mut area = m.encode();
        area.resize(4096, 0);
        assert_eq!(Manifest::decode(&area).unwrap(), Some(m.clone()));
        assert_eq!(Manifest::decode(&[0; 64]).unwrap(), None);
        let mut dup = area.clone();
        dup[HEADER + 32..HEADER + 64].copy_from_slice(&[1; 32]);
        assert!(Manifest::decode(&dup).unwrap_err().msg.contains("strictly"));
        let mut big = area.clone();
        crate::bytes::set_le_u32(&mut big, COUNT_AT, 1000);
        assert!(Manifest::decode(&big).unwrap_err().msg.contains("count"));
        let mut unknown = area.clone();
        crate::bytes::set_le_u32(&mut unknown, HASH_AT, 2);
        assert!(Manifest::decode(&unknown).unwrap_err().msg.contains("hash 2"));
        let mut magic = area;
        magic[0] = b'X';
        assert!(Manifest::decode(&magic).unwrap_err().msg.contains("magic"));
    }

    #[test]
    fn a_blake2b_list_says_so_in_its_header_and_reads_back() {
        let m = Manifest::new(Hash::Blake2b256, vec![[9; 32], [4; 32]]);
        let mut area = m.encode();
        assert_eq!(crate::bytes::le_u32(&area, HASH_AT), Some(1));
        area.resize(4096, 0);
        assert_eq!(Manifest::decode(&area).unwrap(), Some(m));
    }

    #[test]
    fn digests_are_the_standard_ones() {
        // RFC 7693 appendix A's input; FIPS 180-2's for SHA-256.
        let hex = |d: Sha| crate::fsutil::hex(&d);
        assert_eq!(
            hex(Hash::Blake2b256.digest(b"abc")),
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
        );
        assert_eq!(
            hex(Hash::Sha256.digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
