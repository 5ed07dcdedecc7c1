//! Reading an arm64 kernel `Image`: arch/arm64/boot/Image, Debian's arm64
//! `vmlinuz` (the same raw Image behind an EFI stub's PE/COFF header), or
//! `Image.gz`.
//!
//! An Image is the linked vmlinux's loadable bytes (`objcopy -O binary`),
//! from `_text` on: no ELF header, no section headers, no symbol table.
//! Its 64-byte boot header (Documentation/arm64/booting.rst) holds the
//! magic "ARM\x64" at 0x38, the text offset, the image size and flags.
//! The export tables are found by their shape ([`find_tables`]), and a
//! byte at offset `o` of the Image is linked at `KIMAGE_VADDR + o`
//! (arch/arm64/kernel/vmlinux.lds.S: `. = KIMAGE_VADDR;` before `_text`).

use std::io::Read;
use std::path::Path;

use super::ksymtab::{self, EntryFormat, Strings, Table, Tables};
use super::{Kaslr, KernelConfig, KernelImage, LoaderFeatures, Source, corrupt};
use crate::compress::{self, Compression};
use crate::elf;
use crate::error::{Error, Kind, Result};

const MAGIC_OFFSET: usize = 0x38;
const MAGIC: &[u8; 4] = b"ARM\x64";
const HEADER_LEN: usize = 64;
/// Bit 0 of the header's flags: the kernel is big-endian.
const FLAG_BE: u64 = 1;

/// The arm64 boot header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Where the Image wants to be loaded past a 2 MiB boundary (0 since 5.8).
    pub(crate) text_offset: u64,
    /// Bytes the kernel occupies once loaded, BSS included (0: unknown, before 3.17).
    pub(crate) image_size: u64,
    pub(crate) flags: u64,
}

/// The boot header of an arm64 Image, None when `data` is not one.
pub fn header(data: &[u8]) -> Option<Header> {
    if data.get(MAGIC_OFFSET..MAGIC_OFFSET + 4)? != MAGIC {
        return None;
    }
    Some(Header {
        text_offset: elf::read_u64(data, 8)?,
        image_size: elf::read_u64(data, 16)?,
        flags: elf::read_u64(data, 24)?,
    })
}

/// Whether `data` is a gzip stream whose first bytes are an arm64 Image
/// (Image.gz): only the header is decompressed to tell.
pub fn is_gzip_image(data: &[u8]) -> bool {
    if Compression::detect(data) != Compression::Gzip {
        return false;
    }
    let mut head = [0u8; HEADER_LEN];
    flate2::read::GzDecoder::new(data).read_exact(&mut head).is_ok() && header(&head).is_some()
}

/// `KIMAGE_VADDR`, where `_text` is linked: the end of the 128 MiB module
/// region, which starts at the bottom of the kernel's half of the smallest
/// address space the kernel supports (arch/arm64/include/asm/memory.h,
/// 6.1: `MODULES_VADDR = _PAGE_END(VA_BITS_MIN)`, `VA_BITS_MIN` = 48 when
/// `VA_BITS` is 52). `va_bits` is CONFIG_ARM64_VA_BITS.
pub(crate) fn kimage_vaddr(va_bits: u32) -> u64 {
    let min = va_bits.min(48);
    (1u64 << (min - 1)).wrapping_neg().wrapping_add(128 << 20)
}

/// `KIMAGE_VADDR` of an arm64 kernel, from its config's address space.
pub(crate) fn kimage_vaddr_of(k: &KernelImage) -> u64 {
    kimage_vaddr(va_bits(k.config.as_ref()))
}

/// The address space the config sets (CONFIG_ARM64_VA_BITS), 48 without
/// one (the default of arm64's defconfig and of Debian).
fn va_bits(cfg: Option<&KernelConfig>) -> u32 {
    cfg.and_then(|c| c.get("CONFIG_ARM64_VA_BITS"))
        .and_then(|v| v.parse().ok())
        .filter(|v| (36..=52).contains(v))
        .unwrap_or(48)
}

/// Byte ranges of the Image that hold the export tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) plain: std::ops::Range<usize>,
    pub(crate) gpl: std::ops::Range<usize>,
    /// Where `__ksymtab_strings` starts: the lowest string an entry names.
    pub(crate) strings: usize,
}

/// The name an entry at `o` names, if it is an export's: a string of the
/// characters of C identifiers (and '.'), 1 to 255 bytes.
fn entry_name(image: &[u8], o: usize) -> Option<(usize, &[u8])> {
    let at = prel32(image, o + 4)?;
    let s = short_cstr(image, at)?;
    (!s.is_empty() && s.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')).then_some((at, s))
}

/// The namespace an entry at `o` names: a string of printable bytes
/// (empty without a namespace), or none at all (Some(None): an offset of
/// 0, which exports made in assembly have, include/asm-generic/export.h).
fn entry_namespace(image: &[u8], o: usize) -> Option<Option<usize>> {
    if elf::read_i32(image, o + 8)? == 0 {
        return Some(None);
    }
    let at = prel32(image, o + 8)?;
    let s = short_cstr(image, at)?;
    s.iter().all(|b| b.is_ascii_graphic()).then_some(Some(at))
}

/// The string at `at` if it ends within 256 bytes (a name's limit): the
/// scan of a whole Image looks only that far for its end.
fn short_cstr(image: &[u8], at: usize) -> Option<&[u8]> {
    elf::cstr(&image[..image.len().min(at.saturating_add(256))], at)
}

/// Where the 32-bit offset at `o` (relative to itself) points in the image.
fn prel32(image: &[u8], o: usize) -> Option<usize> {
    let rel = elf::read_i32(image, o)? as i64;
    let at = (o as i64).checked_add(rel)?;
    usize::try_from(at).ok().filter(|&a| a < image.len())
}

/// Find `__ksymtab` and `__ksymtab_gpl` in a raw image by their shape: the
/// kernel's linker script puts them side by side, each sorted by name
/// (`KEEP(*(SORT(___ksymtab+*)))`), in 12-byte PREL32 entries (value,
/// name, namespace; CONFIG_HAVE_ARCH_PREL32_RELOCATIONS, which arm64 has).
/// The longest run of entries that each name an export-like string and a
/// namespace is the two tables; the one place where the names stop rising
/// is where `__ksymtab_gpl` begins.
pub(crate) fn find_tables(image: &[u8]) -> std::result::Result<Found, Error> {
    const ENTRY: usize = 12;
    // Runs shorter than MIN entries are refused below, so probing every
    // STRIDE-th entry of a phase (STRIDE < MIN) meets every run that could
    // be chosen; each hit is then grown entry by entry both ways.
    const MIN: usize = 16;
    const STRIDE: usize = 8;
    let ok = |o: usize| entry_name(image, o).is_some() && entry_namespace(image, o).is_some();
    let mut best = 0..0;
    for phase in [0, 4, 8] {
        let mut o = phase;
        while o + ENTRY <= image.len() {
            if !ok(o) {
                o += STRIDE * ENTRY;
                continue;
            }
            let mut start = o;
            while start >= ENTRY && ok(start - ENTRY) {
                start -= ENTRY;
            }
            let mut end = o;
            while end + ENTRY <= image.len() && ok(end) {
                end += ENTRY;
            }
            if end - start > best.len() {
                best = start..end;
            }
            o = end + STRIDE * ENTRY;
        }
    }
    let none = || corrupt("arm64 Image: no export table (__ksymtab) found: not a kernel, or one that exports nothing");
    if best.len() < MIN * ENTRY {
        return Err(none());
    }
    let names: Vec<&[u8]> = best.clone().step_by(ENTRY).map(|o| entry_name(image, o).expect("in the run").1).collect();
    let falls: Vec<usize> = (1..names.len()).filter(|&i| names[i] <= names[i - 1]).collect();
    let split = match falls[..] {
        [i] => best.start + i * ENTRY,
        [] => {
            return Err(corrupt(
                "arm64 Image: one sorted export table found where __ksymtab and __ksymtab_gpl should be two",
            ));
        }
        _ => {
            return Err(corrupt(format!(
                "arm64 Image: the export tables at {:#x}..{:#x} are not two sorted tables ({} falls in the names)",
                best.start,
                best.end,
                falls.len()
            )));
        }
    };
    let strings = best
        .clone()
        .step_by(ENTRY)
        .flat_map(|o| [entry_name(image, o).map(|(a, _)| a), entry_namespace(image, o).flatten()])
        .flatten()
        .min()
        .ok_or_else(none)?;
    if strings < best.end {
        return Err(corrupt(format!(
            "arm64 Image: export names at {strings:#x}, before the end of the export tables at {:#x}",
            best.end
        )));
    }
    Ok(Found { plain: best.start..split, gpl: split..best.end, strings })
}

/// Read an Image (or Image.gz) for `inspect` and `kernel-info`.
pub(crate) fn open(path: &Path, data: &[u8], config: Option<&Path>) -> Result<KernelImage> {
    let compression = Compression::detect(data);
    let raw;
    let image: &[u8] = match compression {
        Compression::None => data,
        kind => {
            raw = compress::decompress(data, kind, data.len() * 4).map_err(|e| e.at(path))?;
            &raw
        }
    };
    let h = header(image).ok_or_else(|| corrupt("not an arm64 Image: no \"ARM\\x64\" magic at 0x38").at(path))?;
    if h.flags & FLAG_BE != 0 {
        return Err(Error::file(
            Kind::Unsupported,
            path,
            "big-endian arm64 Image: bootlink reads little-endian kernels and modules",
        ));
    }
    let found = find_tables(image).map_err(|e| e.at(path))?;
    let release = super::find_release(image);
    let vermagic = release.as_deref().and_then(|r| super::find_vermagic(image, r));
    let (cfg, cfg_source) = match config {
        Some(c) => super::load_config_file(c).map(|k| (Some(k), Some(c.display().to_string())))?,
        None => match super::config::find_ikconfig(image) {
            Some(text) => (Some(KernelConfig::parse(&text)), Some("IKCONFIG (embedded)".to_string())),
            None => super::beside_config(path, release.as_deref())?,
        },
    };
    let base = kimage_vaddr(va_bits(cfg.as_ref())).wrapping_add(h.text_offset);
    let table = |r: &std::ops::Range<usize>| Table { addr: base + r.start as u64, data: &image[r.clone()] };
    // With modversions, one 32-bit CRC per entry precedes the strings:
    // `__kcrctab`, then `__kcrctab_gpl` (include/asm-generic/vmlinux.lds.h).
    let n = (found.plain.len() + found.gpl.len()) / EntryFormat::Prel32.size();
    let modversions = vermagic.as_deref().is_some_and(|v| v.split(' ').any(|w| w == "modversions"));
    let crc_start = found.strings.checked_sub(4 * n).filter(|&s| modversions && s >= found.gpl.end);
    let (crcs, crcs_gpl) = match crc_start {
        Some(s) => {
            let mid = s + 4 * (found.plain.len() / EntryFormat::Prel32.size());
            (Some(&image[s..mid]), Some(&image[mid..found.strings]))
        }
        None => (None, None),
    };
    let tables = Tables {
        plain: Some(table(&found.plain)),
        gpl: Some(table(&found.gpl)),
        crcs,
        crcs_gpl,
        strings: Strings { addr: base + found.strings as u64, data: &image[found.strings..] },
    };
    let exports = ksymtab::decode(tables, EntryFormat::Prel32).map_err(|e| e.at(path))?;
    let kaslr = Kaslr::from_config(cfg.as_ref(), cfg_source.as_deref().unwrap_or(""));
    Ok(KernelImage {
        path: path.to_path_buf(),
        source: Source::Arm64Image { compression },
        release,
        vermagic,
        machine: elf::machine_name(object::elf::EM_AARCH64),
        ksymtab_format: Some(EntryFormat::Prel32),
        exports,
        config_source: cfg_source,
        kaslr,
        loader_features: LoaderFeatures::of_raw(image).map_err(|e| e.at(path))?,
        slide_base: None,
        config: cfg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kimage_vaddr_follows_the_address_space() {
        assert_eq!(kimage_vaddr(48), 0xffff_8000_0800_0000);
        assert_eq!(kimage_vaddr(52), 0xffff_8000_0800_0000);
        assert_eq!(kimage_vaddr(39), 0xffff_ffc0_0800_0000);
        assert_eq!(kimage_vaddr(42), 0xffff_fe00_0800_0000);
    }

    /// A synthetic Image: a header, `pad` bytes, two sorted PREL32 tables
    /// of the names given, CRCs, strings. Returns it with the tables'
    /// start, the CRCs' start, the strings' start and each name's place.
    fn synthetic(pad: usize, plain: &[&str], gpl: &[&str]) -> (Vec<u8>, usize, usize, usize, Vec<usize>) {
        let mut img = vec![0u8; 0x200 + pad];
        img[MAGIC_OFFSET..][..MAGIC.len()].copy_from_slice(MAGIC);
        let tab = img.len();
        let n = plain.len() + gpl.len();
        let crcs = tab + 12 * n;
        let strings = crcs + 4 * n;
        let mut text = vec![0u8]; // the empty namespace
        let mut at = Vec::new();
        for s in plain.iter().chain(gpl) {
            at.push(strings + text.len());
            text.extend_from_slice(s.as_bytes());
            text.push(0);
        }
        img.resize(strings + text.len(), 0);
        // Each entry: value, name and namespace, each relative to its own field.
        let mut w = crate::bytes::LeWriter::default();
        let prel32 = |to: usize, field: usize| (to as i64 - field as i64) as i32 as u32;
        for (i, &a) in at.iter().enumerate() {
            let o = tab + 12 * i;
            w.u32(prel32(0x40, o));
            w.u32(prel32(a, o + 4));
            w.u32(prel32(strings, o + 8));
        }
        debug_assert_eq!(tab + w.len(), crcs);
        (0..n as u32).for_each(|i| w.u32(i));
        img[tab..strings].copy_from_slice(&w.into_inner());
        img[strings..].copy_from_slice(&text);
        (img, tab, crcs, strings, at)
    }

    #[test]
    fn tables_are_found_by_their_shape() {
        let plain = ["alpha", "beta", "gamma", "kfree", "kmalloc", "memcpy", "memset", "printk", "strcmp"];
        let gpl = ["__a", "b_gpl", "c_gpl", "d_gpl", "e_gpl", "f_gpl", "g_gpl", "h_gpl"];
        let (img, tab, crcs, strings, at) = synthetic(0, &plain, &gpl);
        let found = find_tables(&img).unwrap();
        assert_eq!(found, Found { plain: tab..tab + 12 * 9, gpl: tab + 12 * 9..crcs, strings });
        // Unsorted: refused, not guessed.
        let mut bad = img.clone();
        bad[at[2]] = b'z'; // "gamma" -> "zamma": a second fall in the names
        assert!(find_tables(&bad).unwrap_err().msg.contains("not two sorted tables"));
        assert!(find_tables(&img[..0x200]).is_err());
    }

    /// The scan probes every 8th entry: the shortest tables it accepts (16
    /// entries) are found wherever they start, and 15 are refused.
    #[test]
    fn the_shortest_tables_are_found_at_any_offset() {
        let plain = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let gpl = ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"];
        for pad in (0..=12 * 9).step_by(4) {
            let (img, tab, crcs, strings, _) = synthetic(pad, &plain, &gpl);
            assert_eq!(
                find_tables(&img).unwrap(),
                Found { plain: tab..tab + 12 * 8, gpl: tab + 12 * 8..crcs, strings },
                "tables after {pad} bytes of padding"
            );
            let (img, ..) = synthetic(pad, &plain, &gpl[..7]);
            assert!(find_tables(&img).unwrap_err().msg.contains("no export table"), "15 entries after {pad} bytes");
        }
    }
}
