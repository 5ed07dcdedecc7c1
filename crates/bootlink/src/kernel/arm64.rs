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

use super::ksymtab::{self, EntryFormat, Strings, Table, Tables, Targets};
use super::{Kaslr, KernelConfig, KernelImage, LoaderFeatures, Source, corrupt};
use crate::compress::{self, Compression};
use crate::elf;
use crate::error::{Error, Kind, Result};

const MAGIC_OFFSET: usize = 0x38;
const MAGIC: &[u8; 4] = b"ARM\x64";
const HEADER_LEN: usize = 64;
/// Bit 0 of the header's flags: the kernel is big-endian.
const FLAG_BE: u64 = 1;
/// The flags the format defines (Documentation/arm64/booting.rst): bit 0
/// endianness, bits 1-2 page size, bit 3 physical placement; bits 4-63
/// are reserved, 0.
const FLAGS_DEFINED: u64 = 0xf;
/// `_end` is aligned to SEGMENT_ALIGN, 64 KiB (arch/arm64/kernel/vmlinux.lds.S
/// and asm/memory.h, 6.1 and 6.12), so `image_size` (`_end - _text`) is a
/// multiple of it.
const SEGMENT_ALIGN: u64 = 64 << 10;
/// The export entries are 32-bit offsets (PREL32), so everything an export
/// names lies within 2 GiB of its entry: an image at least that large
/// could not have been linked.
const IMAGE_SIZE_MAX: u64 = 2 << 30;

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

/// The (major, minor) version a release string starts with ("6.1.0-56-arm64": (6, 1)).
fn version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Check the boot header against what the format allows for this kernel,
/// before any value of it is used: the flags' reserved bits clear;
/// `text_offset` 0 in a kernel since 5.8 (arch/arm64/kernel/head.S writes
/// `.quad 0` there in 6.1 and 6.12, since TEXT_OFFSET was removed in 5.8)
/// or of an unknown release, and in an older one a multiple of 4 KiB below
/// 2 MiB (its Makefile's TEXT_OFFSET); `image_size` (`_end - _text`) not 0,
/// a multiple of 64 KiB (of 4 KiB before 5.8), under 2 GiB, past the export
/// strings (they are loaded bytes), and equal to the EFI stub's PE
/// `SizeOfImage` (`_end - _head`, arch/arm64/kernel/efi-header.S) when the
/// Image has one. `strings_end` is where the export strings end.
fn check_header(h: &Header, image: &[u8], release: Option<&str>, strings_end: usize) -> Result<()> {
    let bad = |what: String| Err(corrupt(format!("damaged arm64 Image header: {what}")));
    if h.flags & !FLAGS_DEFINED != 0 {
        return bad(format!("flags {:#x} set reserved bits (only bits 0-3 are defined)", h.flags));
    }
    let old = release.and_then(version).is_some_and(|v| v < (5, 8));
    if !old && h.text_offset != 0 {
        return bad(format!(
            "text_offset {:#x}, where a kernel since 5.8 has 0 ({})",
            h.text_offset,
            release.map_or("release unknown".to_string(), |r| format!("release {r}"))
        ));
    }
    if old && (!h.text_offset.is_multiple_of(4096) || h.text_offset >= 2 << 20) {
        return bad(format!("text_offset {:#x}, not a multiple of 4 KiB below 2 MiB", h.text_offset));
    }
    let align = if old { 4096 } else { SEGMENT_ALIGN };
    if h.image_size == 0 || !h.image_size.is_multiple_of(align) || h.image_size >= IMAGE_SIZE_MAX {
        return bad(format!(
            "image_size {:#x}, not a nonzero multiple of {} KiB below 2 GiB",
            h.image_size,
            align >> 10
        ));
    }
    if h.image_size < strings_end as u64 {
        return bad(format!(
            "image_size {:#x} ends before the export names it holds (up to {strings_end:#x})",
            h.image_size
        ));
    }
    if let Some(pe) = pe_size_of_image(image)
        && pe != h.image_size
    {
        return bad(format!("image_size {:#x}, but the EFI stub's PE header says {pe:#x} (SizeOfImage)", h.image_size));
    }
    Ok(())
}

/// The EFI stub's PE header in an Image: the offset at 0x3c (the boot
/// header's res5) leads to "PE\0\0", a COFF header (20 bytes: the section
/// count at 2, the optional header's size at 16), a PE32+ optional header
/// (magic 0x20b), then the section table (40 bytes an entry).
struct PeHeader<'a> {
    image: &'a [u8],
    at: usize,
}

impl<'a> PeHeader<'a> {
    fn of(image: &'a [u8]) -> Option<PeHeader<'a>> {
        let at = elf::read_u32(image, 0x3c)? as usize;
        if at < HEADER_LEN || image.get(at..at.checked_add(4)?)? != b"PE\0\0" {
            return None;
        }
        Some(PeHeader { image, at })
    }

    fn optional(&self) -> Option<usize> {
        let opt = self.at + 24;
        (crate::bytes::le_u16(self.image, opt)? == 0x20b).then_some(opt)
    }

    /// `SizeOfImage`, at 56 in the optional header.
    fn size_of_image(&self) -> Option<u64> {
        elf::read_u32(self.image, self.optional()? + 56).map(u64::from)
    }

    /// The VirtualAddress (from the Image's first byte) of the section
    /// named `name`.
    fn section_address(&self, name: &[u8]) -> Option<u64> {
        let count = crate::bytes::le_u16(self.image, self.at + 6)? as usize;
        let table = self.optional()? + crate::bytes::le_u16(self.image, self.at + 20)? as usize;
        (0..count).find_map(|i| {
            let entry = self.image.get(table + 40 * i..table + 40 * (i + 1))?;
            let len = entry[..8].iter().position(|&b| b == 0).unwrap_or(8);
            (&entry[..len] == name).then(|| elf::read_u32(entry, 12).map(u64::from))?
        })
    }
}

/// The PE `SizeOfImage` of an Image with the EFI stub's header.
fn pe_size_of_image(image: &[u8]) -> Option<u64> {
    PeHeader::of(image)?.size_of_image()
}

/// Where `_stext` is from the Image's first byte (`_text`): the EFI stub's
/// `.text` section starts there (arch/arm64/kernel/efi-header.S: its
/// VirtualAddress is the end of the head, aligned as vmlinux.lds.S aligns
/// `_stext`). None for an Image without the stub (CONFIG_EFI off).
pub(crate) fn stext_offset(image: &[u8]) -> Option<u64> {
    PeHeader::of(image)?.section_address(b".text")
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

/// The release from which arm64's module region is 2 GiB below the
/// kernel (`MODULES_VSIZE` = `SZ_2G`, v6.5's "arm64: module: rework
/// module VA range selection"; 6.1 has `SZ_128M`, 6.12 `SZ_2G`).
const MODULES_2G_FROM: (u32, u32) = (6, 5);

/// `MODULES_VSIZE` of a kernel of `release` (arch/arm64/include/asm/memory.h):
/// 128 MiB before v6.5, 2 GiB from it and for a kernel of unknown release
/// (as [`check_header`] takes such a kernel for a new one).
pub(crate) fn modules_vsize(release: Option<&str>) -> u64 {
    let old = release.and_then(version).is_some_and(|v| v < MODULES_2G_FROM);
    if old { 128 << 20 } else { 2 << 30 }
}

/// Whether the config names the address space (CONFIG_ARM64_VA_BITS),
/// which places `KIMAGE_VADDR`: without it no link-time address of the
/// Image is given (not a slide base, not `_text` or `_stext`).
pub(crate) fn names_address_space(cfg: Option<&KernelConfig>) -> bool {
    cfg.is_some_and(|c| c.get("CONFIG_ARM64_VA_BITS").is_some())
}

/// `KIMAGE_VADDR`, where `_text` is linked: `MODULES_END`, the end of the
/// module region, which starts at the bottom of the kernel's half of the
/// smallest address space the kernel supports (arch/arm64/include/asm/memory.h:
/// `MODULES_VADDR = _PAGE_END(VA_BITS_MIN)`, `VA_BITS_MIN` = 48 when
/// `VA_BITS` is 52; `MODULES_VSIZE` is [`modules_vsize`]). `va_bits` is
/// CONFIG_ARM64_VA_BITS.
pub(crate) fn kimage_vaddr(va_bits: u32, release: Option<&str>) -> u64 {
    let min = va_bits.min(48);
    (1u64 << (min - 1)).wrapping_neg().wrapping_add(modules_vsize(release))
}

/// `KIMAGE_VADDR` of an arm64 kernel, from its config's address space and
/// its release.
pub(crate) fn kimage_vaddr_of(k: &KernelImage) -> u64 {
    kimage_vaddr(va_bits(k.config.as_ref()), k.release.as_deref())
}

/// The addresses module code of kernel `k` can have when its base is not
/// randomized (`nokaslr`), inclusive.
///
/// Before v6.5 (arch/arm64/kernel/kaslr.c, module.c): `module_alloc_base =
/// _etext - MODULES_VSIZE` (128 MiB), allocations in the 128 MiB above it,
/// or once that is full in the 2 GiB above it: with the kernel's text under
/// 128 MiB, [`KIMAGE_VADDR` - 128 MiB, `KIMAGE_VADDR` + 2 GiB).
///
/// From v6.5 (arch/arm64/mm/init.c `module_init_limits`, 6.12): the 128 MiB
/// below `_end`, or once that is full the 2 GiB below it: [`_end` - 2 GiB,
/// `_end`). `_end` is the vmlinux's end or the Image's `_text +
/// image_size`; without either, a kernel under 2 GiB ends below
/// `KIMAGE_VADDR` + 2 GiB, and the range taken is the union over every
/// such end, [`KIMAGE_VADDR` - 2 GiB, `KIMAGE_VADDR` + 2 GiB).
pub(crate) fn module_places_nokaslr(k: &KernelImage) -> (u64, u64) {
    let kimage = kimage_vaddr_of(k);
    if modules_vsize(k.release.as_deref()) < 2 << 30 {
        return (kimage.wrapping_sub(128 << 20), kimage.wrapping_add((2 << 30) - 1));
    }
    match k.image_range {
        Some((_, end)) => (end.wrapping_sub(2 << 30), end.wrapping_sub(1)),
        None => (kimage.wrapping_sub(2 << 30), kimage.wrapping_add((2 << 30) - 1)),
    }
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

impl Found {
    /// Where the export strings end: past the last string an entry names.
    fn strings_end(&self, image: &[u8]) -> usize {
        (self.plain.start..self.gpl.end)
            .step_by(12)
            .flat_map(|o| [entry_name(image, o).map(|(a, _)| a), entry_namespace(image, o).flatten()])
            .flatten()
            .map(|a| a + short_cstr(image, a).map_or(0, |s| s.len()) + 1)
            .max()
            .unwrap_or(self.strings)
    }
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
    check_neighbours(image, &best)?;
    check_every_name_named(image, &best)?;
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

/// The span of the strings that the entries at `entries` name (their
/// names and namespaces), from the lowest one's start to the highest one's
/// end, grown both ways over the bytes of strings next to it (the other
/// exports' names lie there too, also one with a damaged byte).
fn strings_span(image: &[u8], entries: impl Iterator<Item = usize>) -> std::ops::Range<usize> {
    let (mut lo, mut hi) = (usize::MAX, 0);
    for o in entries {
        for at in [entry_name(image, o).map(|(a, _)| a), entry_namespace(image, o).flatten()].into_iter().flatten() {
            lo = lo.min(at);
            hi = hi.max(at + short_cstr(image, at).map_or(0, |s| s.len()) + 1);
        }
    }
    if lo >= hi {
        return 0..0;
    }
    // A byte of a name or its NUL (not a run of NULs: padding, a reserved
    // section); one other byte is passed over when the next 16 are such
    // bytes (a damaged name among the others).
    let in_names = |b: u8| b == 0 || b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
    let names_go_on = |w: Option<&[u8]>| w.is_some_and(|w| w.iter().all(|&b| in_names(b)) && w.contains(&0));
    let zeros = |w: Option<&[u8]>| w.is_some_and(|w| w.iter().all(|&b| b == 0));
    while hi < image.len()
        && !zeros(image.get(hi..hi + 2))
        && (in_names(image[hi]) || names_go_on(image.get(hi + 1..hi + 17)))
    {
        hi += 1;
    }
    while lo > 0
        && !zeros(image.get(lo.saturating_sub(2)..lo))
        && (in_names(image[lo - 1]) || lo >= 17 && names_go_on(image.get(lo - 17..lo - 1)))
    {
        lo -= 1;
    }
    lo..hi
}

/// Refuse the tables when an entry of them lies just before or after `run`
/// (the entries found by their shape) and was not taken. It is one when
/// entries of export shape go on within a few places beyond it (the tables
/// went on past a damaged entry), or when its name and namespace point
/// among the strings the run names and its value into the Image (a name
/// or namespace with bytes no export's has, at either end of the tables).
/// Not found so: a damaged name offset in one of the first two or last
/// two entries, where too few entries lie beyond it to tell (found by
/// [`check_every_name_named`]: its name is left unnamed).
/// Taking the run as the tables would drop that entry and every export
/// past it without a word.
fn check_neighbours(image: &[u8], run: &std::ops::Range<usize>) -> std::result::Result<(), Error> {
    const ENTRY: usize = 12;
    /// How many places beyond the run are looked at: a run of damaged
    /// entries shorter than that is found.
    const REACH: usize = 8;
    let ok =
        |o: usize| o + ENTRY <= image.len() && entry_name(image, o).is_some() && entry_namespace(image, o).is_some();
    let n = run.len() / ENTRY;
    for side in ["before", "after"] {
        // The j-th entry beyond the run on this side (1: next to it).
        let at = |j: usize| match side {
            "before" => run.start.checked_sub(j * ENTRY),
            _ => Some(run.end + (j - 1) * ENTRY),
        };
        let Some(o) = at(1).filter(|&o| o + ENTRY <= image.len()) else { continue };
        let mut span = strings_span(image, run.clone().step_by(ENTRY));
        // Export entries again within reach: the tables go on. Two in a
        // row naming strings among the run's, or four of export shape
        // wherever their names lie (other data seldom has that shape four
        // times in a row; the names of the other table may lie beyond the
        // run's).
        let named = |p: usize| entry_name(image, p).is_some_and(|(a, _)| span.contains(&a));
        let beyond = (2..=REACH).find(|&j| {
            let shaped = |k: usize| at(k).is_some_and(ok);
            (shaped(j) && shaped(j + 1) && at(j).is_some_and(named) && at(j + 1).is_some_and(named))
                || (j..j + 4).all(shaped)
        });
        if let Some(j) = beyond {
            let more = (j..).map_while(|k| at(k).filter(|&p| ok(p))).take(n.max(1));
            let s = strings_span(image, more);
            span = span.start.min(s.start)..span.end.max(s.end);
        }
        let among = |f: usize| prel32(image, f).is_some_and(|a| span.contains(&a));
        let entry_like =
            prel32(image, o).is_some() && among(o + 4) && (elf::read_i32(image, o + 8) == Some(0) || among(o + 8));
        if beyond.is_none() && !entry_like {
            continue;
        }
        let what = match (prel32(image, o + 4), entry_name(image, o)) {
            (_, Some((_, name))) => match prel32(image, o + 8).and_then(|a| short_cstr(image, a)) {
                Some(ns) => {
                    format!(
                        "the namespace {} of {} is not printable",
                        ksymtab::quoted(ns),
                        String::from_utf8_lossy(name)
                    )
                }
                None => format!(
                    "the namespace offset of {} points to no string in the Image",
                    String::from_utf8_lossy(name)
                ),
            },
            (None, None) => "its name offset points outside the Image".to_string(),
            (Some(a), None) if !span.contains(&a) => format!("its name offset points to {a:#x}, among no export names"),
            (Some(a), None) => match short_cstr(image, a) {
                Some(bad) => format!("its name {} is not a symbol name", ksymtab::quoted(bad)),
                None => format!("its name at {a:#x} has no end within 256 bytes"),
            },
        };
        return Err(corrupt(format!(
            "arm64 Image: the export entry at {o:#x}, {side} the {n} entries at {:#x}..{:#x}: {what}",
            run.start, run.end
        )));
    }
    Ok(())
}

/// Refuse the tables when a string among their names is named by none of
/// their entries: `__ksymtab_strings` holds one name (and namespace) per
/// export and nothing else, so an unnamed one is the name of an entry the
/// run left out. What [`check_neighbours`] cannot tell: a damaged name
/// offset in one of the first two or last two entries, where too few
/// entries lie beyond it; a run of 8 or more damaged entries (whose
/// names, as no entry names a string twice, are left unnamed too). Only
/// whole strings between NULs are counted (the span's first string only
/// when a NUL precedes it), empty ones not.
fn check_every_name_named(image: &[u8], run: &std::ops::Range<usize>) -> std::result::Result<(), Error> {
    const ENTRY: usize = 12;
    let mut named = std::collections::HashSet::new();
    // Each export's name is its own string (a symbol exported twice does
    // not link): two entries naming one are a damaged entry, which may
    // name the string of an entry the run left out. With this, a run of
    // entries cut off (however many, wherever) always leaves a string
    // unnamed: as many strings as entries, none named twice.
    let mut by_name = std::collections::HashMap::new();
    for o in run.clone().step_by(ENTRY) {
        if let Some((a, name)) = entry_name(image, o)
            && let Some(first) = by_name.insert(a, o)
        {
            return Err(corrupt(format!(
                "arm64 Image: the export entries at {first:#x} and {o:#x} both name {} at {a:#x}: one of them is damaged",
                ksymtab::quoted(name)
            )));
        }
        named.extend(entry_name(image, o).map(|(a, _)| a));
        named.extend(entry_namespace(image, o).flatten());
    }
    let span = strings_span(image, run.clone().step_by(ENTRY));
    let mut at = span.start;
    // A partial string at the span's start (no NUL before it) is not one.
    if at > 0 && image[at - 1] != 0 {
        at += image[at..span.end].iter().position(|&b| b == 0).map_or(span.end - at, |n| n + 1);
    }
    while at < span.end {
        let Some(len) = image[at..span.end].iter().position(|&b| b == 0) else { break };
        if len > 0 && !named.contains(&at) {
            let n = run.len() / ENTRY;
            let edge = [run.start.checked_sub(ENTRY), Some(run.end)]
                .into_iter()
                .flatten()
                .filter(|&o| o + ENTRY <= image.len())
                .map(|o| format!("{o:#x}"))
                .collect::<Vec<_>>()
                .join(" or ");
            return Err(corrupt(format!(
                "arm64 Image: the export name {} at {at:#x} is named by none of the {n} entries at {:#x}..{:#x}: \
                 the entry that names it (at {edge}, next to them) is damaged",
                ksymtab::quoted(&image[at..at + len]),
                run.start,
                run.end
            )));
        }
        at += len + 1;
    }
    Ok(())
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
    let strings_end = found.strings_end(image);
    check_header(&h, image, release.as_deref(), strings_end).map_err(|e| e.at(path))?;
    let (cfg, cfg_source) = match config {
        Some(c) => super::load_config_file(c).map(|k| (Some(k), Some(c.display().to_string())))?,
        None => match super::config::find_ikconfig(image) {
            Some(text) => (Some(KernelConfig::parse(&text)), Some("IKCONFIG (embedded)".to_string())),
            None => super::beside_config(path, release.as_deref())?,
        },
    };
    let base = kimage_vaddr(va_bits(cfg.as_ref()), release.as_deref()).wrapping_add(h.text_offset);
    let table = |r: &std::ops::Range<usize>| Table { addr: base + r.start as u64, data: &image[r.clone()] };
    // With modversions, one 32-bit CRC per entry precedes the strings:
    // `__kcrctab`, then `__kcrctab_gpl` (include/asm-generic/vmlinux.lds.h;
    // bootlink's patches put `__ksymhash` and `__modhashes` between the
    // tables and the CRCs).
    let n = (found.plain.len() + found.gpl.len()) / EntryFormat::Prel32.size();
    let modversions = vermagic.as_deref().is_some_and(|v| v.split(' ').any(|w| w == "modversions"));
    if modversions && found.strings - found.gpl.end < 4 * n {
        return Err(corrupt(format!(
            "arm64 Image: a kernel with modversions, but between its {n} export entries (ending at {:#x}) and their \
             names (at {:#x}) there is no room for their CRCs",
            found.gpl.end, found.strings
        ))
        .at(path));
    }
    let (crcs, crcs_gpl) = if modversions {
        let start = found.strings - 4 * n;
        let mid = start + 4 * (found.plain.len() / EntryFormat::Prel32.size());
        (Some(&image[start..mid]), Some(&image[mid..found.strings]))
    } else {
        (None, None)
    };
    let tables = Tables {
        plain: Some(table(&found.plain)),
        gpl: Some(table(&found.gpl)),
        crcs,
        crcs_gpl,
        strings: Strings { addr: base + found.strings as u64, data: &image[found.strings..] },
        // The kernel from the end of the boot header to `_end`.
        targets: Targets {
            ranges: vec![(base + HEADER_LEN as u64, base + h.image_size)],
            what: format!(
                "the kernel image (past its {HEADER_LEN}-byte boot header, up to the header's image_size, {:#x})",
                h.image_size
            ),
        },
    };
    let exports = ksymtab::decode(tables, EntryFormat::Prel32).map_err(|e| e.at(path))?;
    // The Image keeps the vmlinux's `.BTF` (CONFIG_DEBUG_INFO_BTF): the
    // size of struct module, as x86 reads it from the vmlinux's section.
    let struct_module_size = match super::btf::find_in_image(image) {
        Some(b) => super::btf::struct_size(b, "module").map_err(|e| e.at(path))?,
        None => None,
    };
    let kaslr = Kaslr::from_config(cfg.as_ref(), cfg_source.as_deref().unwrap_or(""));
    let image_range = (base, base.wrapping_add(h.image_size));
    // What a module preresolved for the slide is made against (patch
    // `preresolved-slide`): the build ID of the Image's notes and `_text`'s
    // link-time address, the Image's first byte. That address depends on
    // the address space, so only a config that names it gives one.
    let slide_base = names_address_space(cfg.as_ref())
        .then(|| super::slide::build_id_of_raw(image))
        .flatten()
        .map(|build_id| super::slide::SlideBase { build_id, link_text: image_range.0, link_end: image_range.1 });
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
        slide_base,
        image_range: Some(image_range),
        link_stext: names_address_space(cfg.as_ref())
            .then(|| stext_offset(image).map(|o| image_range.0.wrapping_add(o)))
            .flatten(),
        struct_module_size,
        config: cfg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(release: &str, image_range: Option<(u64, u64)>) -> KernelImage {
        KernelImage {
            path: "Image".into(),
            source: Source::Vmlinux,
            release: Some(release.into()),
            vermagic: None,
            machine: "aarch64",
            ksymtab_format: None,
            exports: Vec::new(),
            config_source: None,
            kaslr: Kaslr::Unknown,
            loader_features: LoaderFeatures::Unknown,
            slide_base: None,
            image_range,
            link_stext: None,
            struct_module_size: None,
            config: None,
        }
    }

    /// A distribution's arm64 Image (no slide base: no patch
    /// `preresolved-slide`) still says where its text is linked, what the
    /// lab measures a boot's slide against, when its config names the
    /// address space; without a config it says nothing.
    #[test]
    fn an_images_link_text_needs_its_address_space() {
        let mut k = kernel("6.1.0-56-arm64", Some((0xffff_8000_0800_0000, 0xffff_8000_0a00_0000)));
        k.source = Source::Arm64Image { compression: crate::compress::Compression::Gzip };
        assert_eq!(k.link_text(), None, "no config");
        k.config = Some(KernelConfig::parse("CONFIG_ARM64_VA_BITS=48\nCONFIG_RANDOMIZE_BASE=y\n"));
        assert_eq!(k.link_text(), Some(0xffff_8000_0800_0000));
        k.source = Source::Vmlinux;
        assert_eq!(k.link_text(), None, "an x86-64 image tells it by its slide base only");
    }

    /// Where a module can be with `nokaslr`: 6.1's kaslr.c region around
    /// KIMAGE_VADDR; from 6.5 the 2 GiB below `_end` (6.12's init.c).
    #[test]
    fn module_places_follow_the_release() {
        let k61 = 0xffff_8000_0800_0000u64;
        assert_eq!(module_places_nokaslr(&kernel("6.1.0-40-arm64", None)), (k61 - (128 << 20), k61 + (2 << 30) - 1));
        let k612 = 0xffff_8000_8000_0000u64;
        let end = k612 + (40 << 20);
        assert_eq!(
            module_places_nokaslr(&kernel("6.12.57+deb13-arm64", Some((k612, end)))),
            (end - (2 << 30), end - 1)
        );
        assert_eq!(
            module_places_nokaslr(&kernel("6.12.57+deb13-arm64", None)),
            (k612 - (2 << 30), k612 + (2 << 30) - 1),
            "without _end: every end a kernel under 2 GiB can have"
        );
    }

    #[test]
    fn kimage_vaddr_follows_the_address_space() {
        let six_one = Some("6.1.0-40-arm64");
        assert_eq!(kimage_vaddr(48, six_one), 0xffff_8000_0800_0000);
        assert_eq!(kimage_vaddr(52, six_one), 0xffff_8000_0800_0000);
        assert_eq!(kimage_vaddr(39, six_one), 0xffff_ffc0_0800_0000);
        assert_eq!(kimage_vaddr(42, six_one), 0xffff_fe00_0800_0000);
        // From 6.5 the module region below the kernel is 2 GiB.
        assert_eq!(kimage_vaddr(48, Some("6.12.57+deb13-arm64")), 0xffff_8000_8000_0000);
        assert_eq!(kimage_vaddr(39, Some("6.5.0")), 0xffff_ffc0_8000_0000);
        assert_eq!(kimage_vaddr(48, Some("6.4.16")), 0xffff_8000_0800_0000);
        assert_eq!(kimage_vaddr(48, None), 0xffff_8000_8000_0000, "an unknown release is taken for a new one");
    }

    /// Tables of exports `b<k>` (plain) and `a<k>` (GPL) for each k:
    /// each table sorted, the GPL one starting below where the other ends.
    fn numbered_tables(ks: std::ops::Range<u32>) -> (Vec<u8>, usize) {
        let plain: Vec<String> = ks.clone().map(|k| format!("b{k}")).collect();
        let gpl: Vec<String> = ks.map(|k| format!("a{k}")).collect();
        let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
        let gpl: Vec<&str> = gpl.iter().map(String::as_str).collect();
        let (img, tab, ..) = synthetic(0, &plain, &gpl);
        (img, tab)
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
        // CRCs are hashes: spread over all 32 bits, as a real kernel's.
        (0..n as u32).for_each(|i| w.u32((i + 1).wrapping_mul(0x9e37_79b9)));
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

    /// A header as a 6.1 Image has it, then each field damaged.
    #[test]
    fn the_header_is_checked_against_what_the_format_allows() {
        let img = vec![0u8; 0x1000];
        let good = Header { text_offset: 0, image_size: 0x2010000, flags: 0xa };
        let check = |h: Header, release: Option<&str>| check_header(&h, &img, release, 0x800);
        assert_eq!(check(good, Some("6.1.0-56-arm64")), Ok(()));
        let err = |h: Header, release| check(h, release).unwrap_err().msg;
        let to = Header { text_offset: 0x80000, ..good };
        assert_eq!(
            err(to, Some("6.1.0-56-arm64")),
            "damaged arm64 Image header: text_offset 0x80000, where a kernel since 5.8 has 0 (release 6.1.0-56-arm64)"
        );
        assert!(err(to, None).ends_with("(release unknown)"));
        // Before 5.8: TEXT_OFFSET, a multiple of 4 KiB below 2 MiB, and _end page-aligned.
        assert_eq!(check(Header { image_size: 0x1234000, ..to }, Some("5.4.0-1-arm64")), Ok(()));
        assert!(err(Header { text_offset: 0x80010, ..to }, Some("5.4.0")).contains("not a multiple of 4 KiB"));
        assert!(err(Header { flags: 0x1a, ..good }, None).contains("flags 0x1a set reserved bits"));
        for size in [0, 0x2010000 + 0x1000, 2 << 30] {
            assert!(
                err(Header { image_size: size, ..good }, None).contains("not a nonzero multiple of 64 KiB"),
                "{size}"
            );
        }
        let small = Header { image_size: 0x10000, ..good };
        let e = check_header(&small, &img, None, 0x10001).unwrap_err();
        assert!(e.msg.contains("image_size 0x10000 ends before the export names it holds (up to 0x10001)"), "{e}");
        check_header(&small, &img, None, 0x10000).unwrap();
        // With the EFI stub's PE header, its SizeOfImage must agree.
        let mut pe = img.clone();
        pe[0x3c..0x40].copy_from_slice(&0x40u32.to_le_bytes());
        pe[0x40..0x44].copy_from_slice(b"PE\0\0");
        pe[0x58..0x5a].copy_from_slice(&0x20bu16.to_le_bytes());
        pe[0x58 + 56..0x58 + 60].copy_from_slice(&0x2010000u32.to_le_bytes());
        check_header(&good, &pe, None, 0x800).unwrap();
        let e = check_header(&Header { image_size: 0x2000000, ..good }, &pe, None, 0x800).unwrap_err();
        assert!(
            e.msg.ends_with("image_size 0x2000000, but the EFI stub's PE header says 0x2010000 (SizeOfImage)"),
            "{e}"
        );
    }

    /// An entry of the tables with a damaged name (its bytes, or its
    /// offset) refuses them, naming the entry, wherever it lies: the run
    /// found by shape stops there, and the exports past it would be lost.
    #[test]
    fn a_damaged_entry_refuses_the_tables_instead_of_cutting_them() {
        let (img, tab) = numbered_tables(10..30);
        assert!(find_tables(&img).is_ok());
        for i in [0, 2, 3, 19, 20, 36, 37, 39] {
            let o = tab + 12 * i;
            let name_at = prel32(&img, o + 4).unwrap();
            let mut bad = img.clone();
            bad[name_at + 1] = 0x01;
            let e = find_tables(&bad).unwrap_err();
            assert!(e.msg.starts_with(&format!("arm64 Image: the export entry at {o:#x}, ")), "{i}: {e}");
            assert!(e.msg.ends_with("is not a symbol name"), "{i}: {e}");
            if !(2..=37).contains(&i) {
                continue; // the first and last two: too few entries beyond them
            }
            let mut wild = img.clone();
            wild[o + 4..o + 8].copy_from_slice(&(-(o as i32) - 100).to_le_bytes());
            let e = find_tables(&wild).unwrap_err();
            assert!(e.msg.contains(&format!("the export entry at {o:#x}, ")), "{i}: {e}");
            assert!(e.msg.ends_with("its name offset points outside the Image"), "{i}: {e}");
        }
    }

    /// A run of damaged entries of any length, at either end of the tables
    /// or between them, beyond the places check_neighbours looks at: the
    /// names of the entries cut off are named by no entry taken, and an
    /// entry taken that names another's string (so that it would leave no
    /// name unnamed) names a string twice. Each refuses the tables.
    #[test]
    fn a_run_of_damaged_entries_of_any_length_refuses_the_tables() {
        let (img, tab) = numbered_tables(100..160);
        assert!(find_tables(&img).is_ok());
        for n in [1, 2, 7, 8, 9, 20, 40] {
            for first in [0, 30 - n / 2, 60, 120 - n] {
                let mut bad = img.clone();
                bad[tab + 12 * first..tab + 12 * (first + n)].fill(0);
                let e = find_tables(&bad).expect_err(&format!("{n} entries zeroed from {first}"));
                assert!(e.msg.starts_with("arm64 Image: "), "{n} from {first}: {e}");
            }
        }
        // The last GPL entry names the last plain entry's string: both
        // tables still sorted, one string named twice.
        let (o, other) = (tab + 12 * 119, tab + 12 * 59);
        let name = prel32(&img, other + 4).unwrap();
        let mut twice = img.clone();
        twice[o + 4..o + 8].copy_from_slice(&((name as i64 - (o as i64 + 4)) as i32).to_le_bytes());
        let e = find_tables(&twice).unwrap_err();
        assert_eq!(
            e.msg,
            format!(
                "arm64 Image: the export entries at {other:#x} and {o:#x} both name \"b159\" at {name:#x}: one of them \
                 is damaged"
            )
        );
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
