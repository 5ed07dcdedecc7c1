//! Reading a kernel image: vmlinux, a compressed bzImage/vmlinuz (XZ, zstd,
//! gzip, lzma, bzip2, lz4 or lzo payload), a bare compressed vmlinux, an arm64 Image (Debian's arm64
//! vmlinuz, Image.gz), or `System.map` + `Module.symvers` as a fallback
//! when no image is at hand.

pub mod abi;
pub mod arm64;
mod btf;
pub mod config;
pub mod features;
pub mod imagecache;
pub mod ksymtab;
mod note;
pub mod slide;
pub mod sysmap;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::compress::{self, Compression};
use crate::elf::{self, Elf, Want};
use crate::error::{Error, Kind, Result};
use crate::fsutil;
pub use config::{Kaslr, KernelConfig};
pub use features::LoaderFeatures;
pub use ksymtab::{EntryFormat, Export};

/// Where the exports were read from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Vmlinux,
    /// An x86 boot image whose payload is the compressed vmlinux.
    BzImage {
        /// As [`crate::compress::kernel_payload_name`] names it.
        compression: String,
    },
    /// A compressed vmlinux, or an image with one embedded.
    Compressed {
        compression: Compression,
        offset: usize,
    },
    /// An image with a vmlinux embedded in a format only kernel payloads
    /// use (lzma, bzip2, lz4, lzo), as [`crate::compress::kernel_payload_name`]
    /// names it.
    Payload {
        compression: String,
        offset: usize,
    },
    SystemMap {
        symvers: PathBuf,
    },
    /// An arm64 Image (raw, or compressed as Image.gz): no ELF inside.
    Arm64Image {
        compression: Compression,
    },
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::Vmlinux => "vmlinux".into(),
            Source::BzImage { compression } => format!("bzImage, {compression} payload"),
            Source::Compressed { compression, offset } => {
                format!("{}-compressed vmlinux at offset {offset}", compression.name())
            }
            Source::Payload { compression, offset } => format!("{compression}-compressed vmlinux at offset {offset}"),
            Source::SystemMap { symvers } => format!("System.map + {}", symvers.display()),
            Source::Arm64Image { compression: Compression::None } => "arm64 Image".into(),
            Source::Arm64Image { compression } => format!("arm64 Image, {}-compressed", compression.name()),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelImage {
    pub path: PathBuf,
    pub source: Source,
    pub release: Option<String>,
    /// The kernel's own vermagic string, which modules must match.
    pub vermagic: Option<String>,
    pub machine: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ksymtab_format: Option<EntryFormat>,
    pub exports: Vec<Export>,
    pub config_source: Option<String>,
    pub kaslr: Kaslr,
    /// The module loader's build-time features the image names
    /// (patch `feature-notes`).
    pub loader_features: LoaderFeatures,
    /// What a module preresolved for the slide records of this build
    /// (patch `preresolved-slide`): its build ID and the addresses that move
    /// with it. Known for an x86-64 vmlinux (or bzImage) with a build ID, and
    /// for an arm64 Image with one whose config names its address space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slide_base: Option<slide::SlideBase>,
    /// Where the kernel is linked, `_text` to `_end` (a vmlinux's loaded
    /// segments, an arm64 Image's base and `image_size`), when known.
    #[serde(skip)]
    pub image_range: Option<(u64, u64)>,
    /// `_stext`'s link-time address, when the image places it apart from
    /// its symbols (an arm64 Image's EFI header, with a config that names
    /// the address space): what a boot whose kallsyms lacks `_text` is
    /// measured against.
    #[serde(skip)]
    pub link_stext: Option<u64>,
    /// `sizeof(struct module)` as the image's own BTF (`.BTF` of a vmlinux
    /// or bzImage) gives it: None when it has none. A module's
    /// `.gnu.linkonce.this_module` is of this size ([`KernelImage::accepts`]).
    #[serde(skip)]
    pub struct_module_size: Option<u64>,
    #[serde(skip)]
    pub config: Option<KernelConfig>,
}

/// What a kernel image file is, from its bytes: the one detect step every
/// command that takes a kernel image goes through (`KernelImage::open`,
/// `extract-vmlinux`, the lab's boot-image reader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// An ELF file (a vmlinux, or an ELF of another kind the caller refuses).
    Elf,
    /// A System.map (exports come from it and Module.symvers beside it).
    SystemMap,
    /// An arm64 Image, raw (Debian's arm64 vmlinuz is one).
    Arm64Image,
    /// An arm64 Image compressed with gzip (Image.gz).
    Arm64ImageGz,
    /// An x86 boot image with the "HdrS" boot header.
    BzImage,
    /// Anything else: a compressed vmlinux, another boot wrapper, or not a
    /// kernel at all (the reader searches for an embedded vmlinux).
    Other,
}

impl ImageKind {
    pub fn detect(data: &[u8]) -> ImageKind {
        if data.starts_with(&object::elf::ELFMAG) {
            ImageKind::Elf
        } else if sysmap::looks_like_system_map(data) {
            ImageKind::SystemMap
        } else if arm64::header(data).is_some() {
            ImageKind::Arm64Image
        } else if arm64::is_gzip_image(data) {
            ImageKind::Arm64ImageGz
        } else if data.get(BZIMAGE_MAGIC_OFFSET..BZIMAGE_MAGIC_OFFSET + 4) == Some(b"HdrS") {
            ImageKind::BzImage
        } else {
            ImageKind::Other
        }
    }

    pub fn is_arm64(self) -> bool {
        matches!(self, ImageKind::Arm64Image | ImageKind::Arm64ImageGz)
    }
}

/// A decompressed (or mapped) vmlinux and how it was found.
pub struct Vmlinux {
    pub data: fsutil::Bytes,
    pub source: Source,
}

/// A kernel image or table that is not what it claims to be.
pub(crate) fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

const BZIMAGE_MAGIC_OFFSET: usize = 0x202;

/// Locate the vmlinux ELF inside `data` (which may itself be it).
pub fn find_vmlinux(data: fsutil::Bytes) -> std::result::Result<Vmlinux, Error> {
    let kind = ImageKind::detect(&data);
    if kind == ImageKind::Elf {
        return Ok(Vmlinux { data, source: Source::Vmlinux });
    }
    check_image_size(&data)?;
    if let Some(v) = bzimage_payload(&data)? {
        return Ok(v);
    }
    if kind.is_arm64() {
        return Err(Error::new(
            Kind::Unsupported,
            "an arm64 Image holds no ELF vmlinux (it is the kernel's raw binary); bootlink reads its exports from the Image itself",
        ));
    }
    // An x86 boot sector (boot_flag 0xAA55) without the "HdrS" boot header
    // is a damaged bzImage, not another wrapper to search for a stream: the
    // boot loader would not start it.
    if data.get(0x1fe..0x200) == Some(&[0x55, 0xaa]) {
        if data.len() < BZIMAGE_MAGIC_OFFSET + 4 {
            return Err(corrupt(format!(
                "truncated bzImage: {} bytes, an x86 boot sector that ends before its \"HdrS\" boot header",
                data.len()
            )));
        }
        return Err(corrupt("damaged bzImage: an x86 boot sector without the \"HdrS\" boot header"));
    }
    let kind = Compression::detect(&data);
    if kind != Compression::None {
        let out = compress::decompress(&data, kind, data.len() * 5)?;
        if !out.starts_with(&object::elf::ELFMAG) {
            return Err(corrupt(format!("{}-compressed data does not hold an ELF vmlinux", kind.name())));
        }
        return Ok(Vmlinux { data: out.into(), source: Source::Compressed { compression: kind, offset: 0 } });
    }
    // Other boot wrappers (EFI zboot, ...): search for an embedded stream.
    embedded_vmlinux(&data)
}

/// The largest kernel image file bootlink reads that is not an ELF
/// vmlinux (a bzImage, an arm64 Image or Image.gz, a compressed vmlinux or
/// another wrapper): 1 GiB, the most it unpacks of any stream; real ones
/// are tens of MiB. A larger one is refused before anything is read or
/// hashed of it; an ELF vmlinux is mapped, never copied, whatever its size.
pub const MAX_IMAGE: usize = compress::MAX_OUTPUT;

/// Refuse an image file larger than [`MAX_IMAGE`] that is not an ELF vmlinux.
pub(crate) fn check_image_size(data: &[u8]) -> std::result::Result<(), Error> {
    if data.len() > MAX_IMAGE && !data.starts_with(&object::elf::ELFMAG) {
        return Err(corrupt(format!(
            "{} MiB, larger than the {} MiB bootlink reads of a kernel image that is not an ELF vmlinux \
             (a bzImage, Image or compressed vmlinux is tens of MiB): not read",
            data.len() >> 20,
            MAX_IMAGE >> 20
        )));
    }
    Ok(())
}

/// Search `data` for an embedded compressed vmlinux, as for a boot wrapper
/// other than a bzImage (EFI zboot, ...): every stream of the seven formats
/// the kernel's build writes (by its magic: xz, zstd and gzip first, then
/// lzma, bzip2, lz4's legacy frame and lzop, each format in file order),
/// each decoded only while its output is an ELF header's beginning. A
/// candidate of the formats whose magic is short or common is taken only
/// with a header the kernel's build could have written
/// ([`plausible_stream`]). All the candidates together may read and write
/// at most [`compress::search_budget`] bytes, so that the search costs
/// time linear in the file's size whatever it holds (many streams, each a
/// bomb, once made it quadratic).
fn embedded_vmlinux(data: &[u8]) -> std::result::Result<Vmlinux, Error> {
    use compress::Codec;
    let budget = compress::search_budget(data.len());
    let mut left = budget;
    let mut tried = 0usize;
    let lz4 = compress::lz4::MAGIC.to_le_bytes();
    for (magic, codec) in [
        (compress::XZ_MAGIC, Codec::Xz),
        (compress::ZSTD_MAGIC, Codec::Zstd),
        (compress::GZIP_MAGIC, Codec::Gzip),
        (compress::LZMA_ALONE_MAGIC, Codec::Lzma),
        (compress::BZIP2_MAGIC, Codec::Bzip2),
        (&lz4[..], Codec::Lz4),
        (compress::lzop::MAGIC, Codec::Lzo),
    ] {
        for offset in memchr::memmem::find_iter(data, magic) {
            let rest = &data[offset..];
            if !plausible_stream(codec, rest) {
                continue;
            }
            let budget_bound = compress::output_limit(rest.len()) >= left;
            let mut meter = compress::Meter::new(compress::output_limit(rest.len()).min(left));
            meter.elf_only = true;
            let found = compress::decode(codec, &rest[..rest.len().min(left)], 0, &mut meter);
            tried += 1;
            left = left.saturating_sub(meter.read.saturating_add(meter.written));
            // Stopped at what is left of the budget (a decoder that writes
            // whole blocks stops short of it): the budget is spent.
            if budget_bound && matches!(&found, Err(e) if compress::PastLimit::of(e)) {
                left = 0;
            }
            // An lz4 stream has no end mark: one that ended at a word of
            // whatever follows it is taken only when what it holds is a
            // whole ELF file (not cut short by a damaged block).
            if let Ok(out) = found
                && out.starts_with(&object::elf::ELFMAG)
                && (codec != Codec::Lz4 || Elf::parse(&out, Want::Executable).is_ok())
            {
                let source = match codec {
                    Codec::Xz => Source::Compressed { compression: Compression::Xz, offset },
                    Codec::Zstd => Source::Compressed { compression: Compression::Zstd, offset },
                    Codec::Gzip => Source::Compressed { compression: Compression::Gzip, offset },
                    other => Source::Payload { compression: other.name().into(), offset },
                };
                return Ok(Vmlinux { data: out.into(), source });
            }
            if left == 0 {
                return Err(corrupt(format!(
                    "not a kernel image: no vmlinux in the first {tried} compressed streams embedded in it, \
                     which take more than the {} MiB bootlink reads and unpacks searching a file of this size \
                     (64 times its size unpacked, 4 times read): refused as a decompression bomb",
                    budget >> 20
                )));
            }
        }
    }
    Err(corrupt("not a kernel image: no ELF header, bzImage header or compressed vmlinux found"))
}

/// Whether `rest`, which begins with `codec`'s magic, begins a stream the
/// kernel's build could have written, for the formats whose magic alone is
/// short or common in other data: lzma's "alone" header (properties 0x5d,
/// then 00 00 as the first bytes of the dictionary size, which is at most
/// 1 GiB, and an uncompressed size unknown, all ones, as `lzma -9` writes
/// from a pipe, or within [`compress::MAX_OUTPUT`]); bzip2's "BZh", a
/// block size digit and the first block's (or the end's) 48-bit magic;
/// lz4's legacy magic and a first block within the format's bound. xz,
/// zstd, gzip and lzop are taken by their magic.
fn plausible_stream(codec: compress::Codec, rest: &[u8]) -> bool {
    use compress::Codec;
    match codec {
        Codec::Lzma => {
            let (Some(dict), Some(size)) = (elf::read_u32(rest, 1), rest.get(5..13)) else { return false };
            let size = u64::from_le_bytes(size.try_into().expect("8 bytes"));
            dict as usize <= compress::MAX_OUTPUT && (size == u64::MAX || size as usize <= compress::MAX_OUTPUT)
        }
        Codec::Bzip2 => {
            const BLOCK: &[u8] = &[0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
            const END: &[u8] = &[0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
            rest.get(3).is_some_and(|b| (b'1'..=b'9').contains(b))
                && rest.get(4..10).is_some_and(|m| m == BLOCK || m == END)
        }
        Codec::Lz4 => elf::read_u32(rest, 4).is_some_and(|n| n > 0 && n as usize <= compress::lz4::BLOCK_BOUND),
        Codec::Xz | Codec::Zstd | Codec::Gzip | Codec::Lzo => true,
    }
}

/// A bzImage's compressed kernel, as it lies in the file (no
/// decompression): None when `data` has no bzImage header.
pub fn bzimage_payload_bytes(data: &[u8]) -> std::result::Result<Option<&[u8]>, Error> {
    if data.get(BZIMAGE_MAGIC_OFFSET..BZIMAGE_MAGIC_OFFSET + 4) != Some(b"HdrS") {
        return Ok(None);
    }
    let setup_sects = match data.get(0x1f1) {
        Some(0) => 4,
        Some(&n) => n as usize,
        None => return Ok(None),
    };
    let (Some(off), Some(len)) = (elf::read_u32(data, 0x248), elf::read_u32(data, 0x24c)) else {
        return Err(corrupt(format!("truncated bzImage: {} bytes, it ends inside its boot header", data.len())));
    };
    let start = (setup_sects + 1) * 512 + off as usize;
    let end = start.saturating_add(len as usize);
    // The file cut short and a damaged header (setup_sects, the payload's
    // offset or length) look alike from here: both are said.
    let payload = data.get(start..end).ok_or_else(|| {
        corrupt(format!(
            "truncated or corrupt bzImage: its boot header places the payload at {start:#x}..{end:#x} \
             (setup_sects {setup_sects}, payload_offset {off:#x}, payload_length {len:#x}), past the end of \
             the file ({:#x} bytes)",
            data.len()
        ))
    })?;
    Ok(Some(payload))
}

fn bzimage_payload(data: &[u8]) -> std::result::Result<Option<Vmlinux>, Error> {
    let Some(payload) = bzimage_payload_bytes(data)? else { return Ok(None) };
    let kind = Compression::detect(payload);
    if kind == Compression::None && payload.starts_with(&object::elf::ELFMAG) {
        return Ok(Some(Vmlinux {
            data: payload.to_vec().into(),
            source: Source::BzImage { compression: "none".into() },
        }));
    }
    let name = compress::kernel_payload_name(payload).ok_or_else(|| {
        Error::new(Kind::Unsupported, "bzImage payload is in no compression the kernel knows (nor an ELF vmlinux)")
    })?;
    let codec = compress::Codec::of_payload(name).ok_or_else(|| {
        Error::new(
            Kind::Unsupported,
            format!("a {name} bzImage payload: bootlink reads the seven formats of the kernel's build"),
        )
    })?;
    // The build appends the uncompressed size (le32; gzip's own ISIZE)
    // after the stream: the boot decompressor makes that much room for
    // the kernel (arch/x86/boot/compressed/mkpiggy.c), so no more is
    // decoded.
    let stated = elf::read_u32(payload, payload.len().saturating_sub(4)).unwrap_or(0) as usize;
    let limit = compress::output_limit(payload.len());
    let mut meter = compress::Meter::new(limit.min(stated));
    let out = compress::decode(codec, payload, stated, &mut meter).map_err(|e| {
        if stated < limit && compress::PastLimit::of(&e) {
            corrupt(format!(
                "bzImage payload: its {name} stream decompresses to more than the {stated} bytes its size \
                 trailer states (the room the boot decompressor makes for the kernel)"
            ))
        } else {
            e
        }
    })?;
    if !out.starts_with(&object::elf::ELFMAG) {
        return Err(corrupt("bzImage payload does not decompress to an ELF vmlinux"));
    }
    Ok(Some(Vmlinux { data: out.into(), source: Source::BzImage { compression: name.into() } }))
}

/// An arm64 kernel image's raw `Image`: None when the file is one already
/// (as Debian's arm64 vmlinuz is), the decompressed bytes of an Image.gz,
/// and an error for anything else.
pub fn arm64_image(path: &Path) -> Result<Option<Vec<u8>>> {
    let data = fsutil::map_file(path)?;
    check_image_size(&data).map_err(|e| e.at(path))?;
    let kind = ImageKind::detect(&data);
    if kind == ImageKind::Arm64Image {
        return Ok(None);
    }
    if kind == ImageKind::Arm64ImageGz {
        return compress::decompress(&data, Compression::Gzip, data.len() * 4).map(Some).map_err(|e| e.at(path));
    }
    Err(corrupt("not an arm64 Image: no \"ARM\\x64\" magic at 0x38, and not a gzip-compressed one").at(path))
}

/// Extract the uncompressed vmlinux from any supported image.
pub fn extract_vmlinux(path: &Path) -> Result<Vmlinux> {
    let data = fsutil::map_file(path)?;
    let v = find_vmlinux(data).map_err(|e| e.at(path))?;
    // The whole ELF check, machine included: an image of another machine
    // (or a damaged one) is not extracted as if it were a vmlinux. Its
    // export tables, when it has them, must read as every other command
    // reads them: a damaged kernel is not passed on as a good one.
    let elf = Elf::parse(&v.data, Want::Executable).map_err(|e| e.at(path))?;
    // An ELF header and whatever follows it (a stream of zeros after
    // "\x7fELF") is no kernel: every vmlinux has loadable segments, the
    // bytes the boot code places. Such a stream was written out, exit 0.
    if elf.loadable_bytes().map_err(|e| e.at(path))? == 0 {
        return Err(corrupt(format!(
            "the ELF file it holds ({} bytes) has no loadable segment (no PT_LOAD with file data): not a kernel, not extracted",
            v.data.len()
        ))
        .at(path));
    }
    if elf.section("__ksymtab_strings").is_some() {
        ksymtab::read_exports(&elf).map_err(|e| e.at(path))?;
    }
    Ok(v)
}

/// What `bootlink extract-vmlinux` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Extracted {
    pub output: PathBuf,
    /// Where in the image the vmlinux was ([`Source::describe`]).
    pub source: String,
    pub bytes: usize,
}

impl crate::report::Report for Extracted {
    fn render(&self) -> String {
        format!("{}: {} ({} bytes)\n", self.output.display(), self.source, self.bytes)
    }
}

/// `bootlink extract-vmlinux`: the image's vmlinux ([`extract_vmlinux`])
/// written atomically to `output`, which is checked before anything is
/// read (not the image, not a device).
pub fn extract_vmlinux_to(image: &Path, output: &Path) -> Result<Extracted> {
    fsutil::check_outputs(&[image], &[fsutil::Planned::new(output)])?;
    let v = extract_vmlinux(image)?;
    fsutil::write_atomic(output, &v.data)?;
    Ok(Extracted { output: output.to_path_buf(), source: v.source.describe(), bytes: v.data.len() })
}

impl KernelImage {
    /// Read a kernel image. `config` overrides where the configuration comes
    /// from; otherwise an embedded IKCONFIG, then `config-<release>` or
    /// `.config` beside the image, are used.
    pub fn open(path: &Path, config: Option<&Path>) -> Result<KernelImage> {
        let meta = fsutil::follow_once(path)?;
        if meta.is_dir() {
            return Self::open_dir(path, config);
        }
        let data = fsutil::map_file(path)?;
        let kind = ImageKind::detect(&data);
        if kind == ImageKind::SystemMap {
            let symvers = path.with_file_name("Module.symvers");
            return sysmap::open(path, &symvers, config);
        }
        check_image_size(&data).map_err(|e| e.at(path))?;
        if kind.is_arm64() {
            return arm64::open(path, &data, config);
        }
        let v = if kind == ImageKind::Elf {
            Vmlinux { data, source: Source::Vmlinux }
        } else {
            imagecache::vmlinux(data).map_err(|e| e.at(path))?
        };
        Self::from_vmlinux(path, &v.data, v.source, config)
    }

    fn open_dir(dir: &Path, config: Option<&Path>) -> Result<KernelImage> {
        let vmlinux = dir.join("vmlinux");
        if vmlinux.is_file() {
            return Self::open(&vmlinux, config);
        }
        let map = dir.join("System.map");
        if map.is_file() {
            return sysmap::open(&map, &dir.join("Module.symvers"), config);
        }
        Err(Error::file(Kind::Usage, dir, "directory holds neither vmlinux nor System.map + Module.symvers"))
    }

    pub fn from_vmlinux(path: &Path, data: &[u8], source: Source, config: Option<&Path>) -> Result<KernelImage> {
        let elf = Elf::parse(data, Want::Executable).map_err(|e| e.at(path))?;
        let (exports, fmt) = ksymtab::read_exports(&elf).map_err(|e| e.at(path))?;
        let rodata = match elf.section(".rodata") {
            Some((_, s)) => elf.section_data(s).map_err(|e| e.at(path))?,
            None => data,
        };
        let release = find_release(rodata);
        let vermagic = release.as_deref().and_then(|r| find_vermagic(rodata, r));
        let (cfg, cfg_source) = match config {
            Some(c) => load_config_file(c).map(|k| (Some(k), Some(c.display().to_string())))?,
            None => match config::find_ikconfig(data) {
                Some(text) => (Some(KernelConfig::parse(&text)), Some("IKCONFIG (embedded)".to_string())),
                None => beside_config(path, release.as_deref())?,
            },
        };
        let kaslr = Kaslr::from_config(cfg.as_ref(), cfg_source.as_deref().unwrap_or(""));
        let loader_features = LoaderFeatures::of(&elf).map_err(|e| e.at(path))?;
        let image_range = elf.image_range().map_err(|e| e.at(path))?;
        let slide_base = match (elf.machine(), elf.build_id().map_err(|e| e.at(path))?) {
            (object::elf::EM_X86_64, Some(id)) if (1..=20).contains(&id.len()) => {
                image_range.map(|(link_text, link_end)| slide::SlideBase { build_id: id.to_vec(), link_text, link_end })
            }
            _ => None,
        };
        let struct_module_size = match elf.named_section_data(".BTF").map_err(|e| e.at(path))? {
            Some(b) => btf::struct_size(b, "module").map_err(|e| e.at(path))?,
            None => None,
        };
        Ok(KernelImage {
            path: path.to_path_buf(),
            source,
            release,
            vermagic,
            machine: elf::machine_name(elf.machine()),
            ksymtab_format: Some(fmt),
            exports,
            config_source: cfg_source,
            kaslr,
            loader_features,
            slide_base,
            image_range,
            link_stext: None,
            struct_module_size,
            config: cfg,
        })
    }

    /// Refuse module `m` if it is for another machine or was built for
    /// another kernel (vermagic, the size of struct module), as this
    /// kernel's loader would; `then` says what the caller does with a
    /// refused module ("not listed").
    pub fn accepts(&self, m: &crate::module::Module, then: &str) -> Result<()> {
        self.same_machine(m, then)?;
        let kv = self.vermagic.as_deref().unwrap_or_default();
        match m.kernel_vermagic() {
            Some(v) if v == kv => self.same_struct_module(m, then),
            Some(v) => Err(Error::file(
                Kind::WrongKernel,
                &m.path,
                format!(
                    "built for another kernel: vermagic \"{}\", the kernel's is \"{}\": {then}",
                    v.trim(),
                    kv.trim()
                ),
            )),
            None => Err(Error::file(Kind::WrongKernel, &m.path, format!("module has no vermagic: {then}"))),
        }
    }

    /// Refuse module `m` if its `.gnu.linkonce.this_module` is not the size
    /// of this kernel's struct module (when its BTF says that size): 6.12's
    /// loader refuses such a module ("section size must match the kernel's
    /// built struct module size"), 6.1's takes the section as a struct
    /// module all the same and reads past it. `then` as for [`Self::accepts`].
    pub fn same_struct_module(&self, m: &crate::module::Module, then: &str) -> Result<()> {
        match self.struct_module_size {
            Some(want) if want != m.struct_module_size => Err(Error::file(
                Kind::WrongKernel,
                &m.path,
                format!(
                    "built for another kernel: its {} is {} bytes, the kernel's struct module {want} (its BTF){}",
                    crate::modcheck::THIS_MODULE,
                    m.struct_module_size,
                    if then.is_empty() { String::new() } else { format!(": {then}") }
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Refuse module `m` if it is for another machine than this kernel, in
    /// one line naming the module and both machines.
    pub fn same_machine(&self, m: &crate::module::Module, then: &str) -> Result<()> {
        if m.machine != self.machine {
            return Err(Error::file(
                Kind::WrongKernel,
                &m.path,
                format!("a module for {}, the kernel is {}: {then}", m.machine, self.machine),
            ));
        }
        Ok(())
    }

    /// Refuse this kernel for a command that rewrites modules or kernels
    /// and handles x86-64 only so far, in one line naming the image.
    pub fn rewritable_by(&self, command: &str) -> Result<()> {
        if self.machine == elf::machine_name(object::elf::EM_AARCH64) {
            return Err(Error::file(Kind::Unsupported, &self.path, format!("AArch64: not supported yet by {command}")));
        }
        Ok(())
    }

    /// `_text`'s link-time address, what a boot's `_text` is measured
    /// against to tell its KASLR slide: the slide base's when the image has
    /// one; else, for an arm64 Image whose config names its address space
    /// (a kernel without patch `preresolved-slide`, e.g. a distribution's),
    /// the Image's first byte as its header places it.
    pub fn link_text(&self) -> Option<u64> {
        if let Some(b) = &self.slide_base {
            return Some(b.link_text);
        }
        match self.source {
            Source::Arm64Image { .. } if arm64::names_address_space(self.config.as_ref()) => {
                self.image_range.map(|(text, _)| text)
            }
            _ => None,
        }
    }

    pub fn gpl_exports(&self) -> usize {
        self.exports.iter().filter(|e| e.gpl).count()
    }

    pub fn export_map(&self) -> HashMap<&str, &Export> {
        self.exports.iter().map(|e| (e.name.as_str(), e)).collect()
    }
}

pub(crate) fn load_config_file(path: &Path) -> Result<KernelConfig> {
    let raw = fsutil::read_input(path, fsutil::MAX_TEXT)?;
    let text = String::from_utf8_lossy(&raw);
    if raw.contains(&0) || !KernelConfig::looks_like_config(&text) {
        return Err(Error::file(Kind::Format, path, "not a kernel config (no CONFIG_ lines)"));
    }
    Ok(KernelConfig::parse(&text))
}

/// `config-<release>` beside the image (as Debian's /boot has it), or a
/// `.config` beside a vmlinux in a build tree.
pub(crate) fn beside_config(path: &Path, release: Option<&str>) -> Result<(Option<KernelConfig>, Option<String>)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut candidates = Vec::new();
    if let Some(r) = release {
        candidates.push(dir.join(format!("config-{r}")));
    }
    candidates.push(dir.join(".config"));
    for c in candidates {
        if c.is_file() {
            return Ok((Some(load_config_file(&c)?), Some(c.display().to_string())));
        }
    }
    Ok((None, None))
}

/// The release from the `linux_banner` string ("Linux version 6.1.0-56-amd64 (...").
pub(crate) fn find_release(rodata: &[u8]) -> Option<String> {
    for pos in memchr::memmem::find_iter(rodata, b"Linux version ") {
        let rest = &rodata[pos + 14..];
        let end = rest.iter().position(|&b| b == b' ' || b == 0)?;
        let rel = &rest[..end];
        if !rel.is_empty() && rel[0].is_ascii_digit() && rel.iter().all(|b| b.is_ascii_graphic()) {
            return Some(String::from_utf8_lossy(rel).into_owned());
        }
    }
    None
}

/// The kernel's vermagic: "<release> SMP preempt mod_unload modversions ".
pub(crate) fn find_vermagic(rodata: &[u8], release: &str) -> Option<String> {
    let mut needle = release.as_bytes().to_vec();
    needle.push(b' ');
    for pos in memchr::memmem::find_iter(rodata, &needle) {
        if pos > 0 && rodata[pos - 1] != 0 {
            continue;
        }
        let s = elf::cstr(rodata, pos)?;
        if memchr::memmem::find(s, b"mod_unload").is_some() && s.len() < 256 {
            return Some(String::from_utf8_lossy(s).into_owned());
        }
    }
    None
}

/// What a report says of the kernel it read.
#[derive(Debug, Clone, Serialize)]
pub struct KernelSummary {
    pub path: PathBuf,
    pub source: String,
    pub release: Option<String>,
    pub vermagic: Option<String>,
    pub machine: &'static str,
    pub exports: usize,
    pub gpl_exports: usize,
    pub kaslr: Kaslr,
    pub loader_features: LoaderFeatures,
    /// Where the configuration was read from, if anywhere.
    pub config_source: Option<String>,
}

impl crate::report::Report for KernelSummary {
    fn render(&self) -> String {
        format!(
            "image     {}\nformat    {}\nrelease   {}\nvermagic  {}\nmachine   {}\nexports   {} ({} GPL-only)\n\
             config    {}\nKASLR     {}\nloader    {}\n",
            self.path.display(),
            self.source,
            self.release.as_deref().unwrap_or("unknown"),
            self.vermagic.as_deref().unwrap_or("unknown"),
            self.machine,
            self.exports,
            self.gpl_exports,
            self.config_source.as_deref().unwrap_or("none found"),
            self.kaslr.describe(),
            self.loader_features.describe()
        )
    }
}

/// A kernel image's text is its export list, one line an export (address,
/// CRC, kind, namespace, name), as `kernel-info --exports` prints it.
impl crate::report::Report for KernelImage {
    fn render(&self) -> String {
        let mut s = String::new();
        for e in &self.exports {
            s.push_str(&format!(
                "{:016x}\t0x{:08x}\t{}\t{}\t{}\n",
                e.addr,
                e.crc.unwrap_or(0),
                if e.gpl { "EXPORT_SYMBOL_GPL" } else { "EXPORT_SYMBOL" },
                e.namespace.as_deref().unwrap_or(""),
                e.name
            ));
        }
        s
    }
}

impl KernelSummary {
    pub fn of(k: &KernelImage) -> KernelSummary {
        KernelSummary {
            path: k.path.clone(),
            source: k.source.describe(),
            release: k.release.clone(),
            vermagic: k.vermagic.clone(),
            machine: k.machine,
            exports: k.exports.len(),
            gpl_exports: k.gpl_exports(),
            kaslr: k.kaslr.clone(),
            loader_features: k.loader_features.clone(),
            config_source: k.config_source.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An xz-compressed vmlinux after a bare x86 boot sector is a bzImage
    /// whose boot header is damaged: refused, not found by the search for
    /// an embedded stream that other wrappers need.
    #[test]
    fn a_boot_sector_without_its_boot_header_is_refused() {
        let vmlinux = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/vmlinux")).unwrap();
        let mut image = vec![0u8; 1024];
        image.extend(compress::compress(&vmlinux, Compression::Xz).unwrap());
        assert!(matches!(find_vmlinux(image.clone().into()), Ok(Vmlinux { source: Source::Compressed { .. }, .. })));
        image[0x1fe..0x200].copy_from_slice(&[0x55, 0xaa]);
        let err = find_vmlinux(image.clone().into()).err().expect("refused");
        assert!(err.msg.contains("HdrS"), "{err}");
        // Cut before the boot header: truncated, not a header damaged.
        let err = find_vmlinux(image[..0x204].to_vec().into()).err().expect("refused");
        assert!(err.msg.starts_with("truncated bzImage: 516 bytes,"), "{err}");
    }

    /// A boot header that places the payload past the end of the file: the
    /// file is cut short or the header damaged, and the line says both and
    /// the header's fields.
    #[test]
    fn a_payload_past_the_end_names_the_header_fields() {
        let mut image = vec![0u8; 0x1000];
        image[0x1f1] = 3;
        image[0x202..0x206].copy_from_slice(b"HdrS");
        image[0x248..0x24c].copy_from_slice(&0x100u32.to_le_bytes());
        image[0x24c..0x250].copy_from_slice(&0x2000u32.to_le_bytes());
        let err = bzimage_payload_bytes(&image).expect_err("refused");
        assert_eq!(
            err.msg,
            "truncated or corrupt bzImage: its boot header places the payload at 0x900..0x2900 (setup_sects 3, \
             payload_offset 0x100, payload_length 0x2000), past the end of the file (0x1000 bytes)"
        );
        let err = bzimage_payload_bytes(&image[..0x220]).expect_err("refused");
        assert_eq!(err.msg, "truncated bzImage: 544 bytes, it ends inside its boot header");
    }
}
