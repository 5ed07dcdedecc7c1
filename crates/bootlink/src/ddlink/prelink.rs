//! Relocation Skip Mode's images: each library of a profiled program, and
//! the program itself when it is a position-independent executable, copied
//! with its relocations applied in the file, for a fixed load address and
//! for the recorded bindings, so that the patched loader maps it there and
//! skips its relocation (glibc/patches: DDLink skip mode).
//!
//! What cannot be known before run time is left to the loader, as a list
//! of relocation indices in the cache: IRELATIVE and bindings to IFUNC
//! symbols (the resolver picks by CPU), TLS relocations (module IDs and
//! static TLS offsets), bindings to the program and to ld.so (mapped by
//! the kernel at random addresses), undefined weak references and
//! bindings the record does not hold, and the program's copy relocations.
//! An object whose relocations an image cannot hold (text relocations,
//! DT_REL, a type bootlink does not apply) is not prelinked.
//!
//! Packed relative relocations (DT_RELR) add the load address to the word
//! in place, which is not idempotent. An image holds its RELR words
//! already relocated for its base and says so in its ELF header
//! ([`RELR_MARK`] and the base in `e_ident`'s padding): the patched loader
//! (glibc/patches 0009) then skips the RELR pass at that base and, at any
//! other address, adds only the difference, which gives exactly the
//! original file's relocation there. A loader without that patch refuses
//! the file ("nonzero padding in e_ident") instead of adding the base twice
//! (the kernel does not check the padding: a program image started
//! directly under such a loader is not protected; see docs/ddlink.md).
//!
//! An image is still an ordinary library (its relocations are RELA, so a
//! loader that relocates it anyway computes every value afresh), with one
//! exception that glibc already provides for: lazily bound PLT slots are
//! normally reset by adding the load address to the link-time value in the
//! file. Like prelink, bootlink stores the PLT stub base in GOT[1], which
//! glibc's x86-64 loader uses to reset the slots of a prelinked object
//! (elf_machine_lazy_rel); when the PLT is not laid out that way, the PLT
//! slots are left to the loader.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Sym};
use serde::Serialize;

use super::format::{FileIdentity, OBJ_LOADER, OBJ_MAIN, OBJ_PLACED, OBJ_PRELINKED, OBJ_RELR, Prelink};
use super::record::{Def, Record};
use crate::elf::{Dyn, Elf, Header, LE, Want, read_u64, records};
use crate::error::{Error, Kind, Result};

/// Why an object cannot be prelinked (it is left to the loader).
fn not_placeable(msg: impl Into<String>) -> Error {
    Error::new(Kind::Unsupported, msg)
}

/// prelink's x86-64 default first base, for a reproducible build
/// (`ddlink write --base`): far from the program and its heap (0x55...,
/// 0x56...) and from the top-down mmap area and stack (0x7f...). Without
/// `--base` the first base is [`random_base`]'s.
pub const DEFAULT_BASE: u64 = 0x30_0000_0000;
/// Where [`random_base`] puts the first image: above the first 64 GiB
/// (the program, its heap and 32-bit mappings) and low enough that the
/// images end below the kernel's mmap area (0x7f..) and their own limit.
pub const RANDOM_BASES: std::ops::Range<u64> = 0x10_0000_0000..0x4000_0000_0000;
/// The granule of [`random_base`] (2 MiB, the largest image alignment):
/// (64 TiB - 64 GiB) / 2 MiB, about 2^25 possible first bases.
pub const RANDOM_BASE_ALIGN: u64 = 0x20_0000;
const PAGE: u64 = 4096;
/// Address space left free after the program's image (its heap, when the
/// kernel maps the program and starts brk after it).
pub const PROGRAM_HEAP_GAP: u64 = 0x4000_0000;

// The x86-64 psABI's relocation types and the dynamic tags read here.
const R_NONE: u32 = 0;
const R_64: u32 = 1;
const R_COPY: u32 = 5;
const R_GLOB_DAT: u32 = 6;
const R_JUMP_SLOT: u32 = 7;
const R_RELATIVE: u32 = 8;
const R_DTPMOD64: u32 = 16;
const R_DTPOFF64: u32 = 17;
const R_TPOFF64: u32 = 18;
const R_SIZE64: u32 = 33;
const R_TLSDESC: u32 = 36;
const R_IRELATIVE: u32 = 37;
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_PLTGOT: i64 = 3;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_REL: i64 = 17;
const DT_PLTREL: i64 = 20;
const DT_TEXTREL: i64 = 22;
const DT_JMPREL: i64 = 23;
const DT_BIND_NOW: i64 = 24;
const DT_FLAGS: i64 = 30;
const DT_RELRSZ: i64 = 35;
const DT_RELR: i64 = 36;
const DT_RELRENT: i64 = 37;
const DT_FLAGS_1: i64 = 0x6fff_fffb;
const DF_TEXTREL: u64 = 4;
const DF_BIND_NOW: u64 = 8;
const DF_1_NOW: u64 = 1;

/// `e_ident[EI_PAD]` of an image whose DT_RELR words are relocated for its
/// base; `e_ident[10..16]` hold the base divided by the page size (little
/// endian). glibc without patch 0009 refuses a library with nonzero
/// padding.
pub const RELR_MARK: u8 = b'D';

/// One relocation of .rela.dyn or .rela.plt.
#[derive(Debug, Clone, Copy)]
struct Rela {
    offset: u64,
    rtype: u32,
    sym: u32,
    addend: i64,
}

#[derive(Debug, Clone, Copy)]
struct DynSym {
    value: u64,
    shndx: elf::SymbolSection,
    bind: elf::SymbolBind,
    stype: elf::SymbolType,
    visibility: elf::SymbolVisibility,
}

#[derive(Debug, Clone, Copy)]
struct Load {
    vaddr: u64,
    offset: u64,
    filesz: u64,
}

/// A library as the prelinker needs it.
struct Image {
    loads: Vec<Load>,
    /// Lowest mapped address (page-aligned) and end of the highest segment.
    start: u64,
    end: u64,
    align: u64,
    /// .rela.dyn's relocations, then .rela.plt's (the cache's index space).
    relocs: Vec<Rela>,
    /// The addresses DT_RELR relocates (each word gets the load address
    /// added).
    relr: Vec<u64>,
    /// A position-independent executable (the program), not a library.
    executable: bool,
    pltgot: Option<u64>,
    bind_now: bool,
    syms: Vec<DynSym>,
    /// Why the file cannot hold its relocations (it is then only placed
    /// at a base, and relocated as usual).
    unsuitable: Option<String>,
}

impl Image {
    /// The file offset of `len` bytes at `vaddr`, if the file holds them.
    fn file_off(&self, vaddr: u64, len: u64) -> Option<usize> {
        self.loads
            .iter()
            .find(|l| vaddr >= l.vaddr && vaddr + len <= l.vaddr + l.filesz)
            .map(|l| (l.offset + (vaddr - l.vaddr)) as usize)
    }

    /// Parse `data` (the program's file when `executable`); Err(why) when
    /// it cannot even be placed at a base.
    fn parse(data: &[u8], executable: bool) -> std::result::Result<Image, Error> {
        let parsed = Elf::parse(data, Want::Dynamic)?;
        let hdr: &Header = parsed.header;
        if hdr.e_type(LE) != elf::ET_DYN {
            return Err(not_placeable(if executable {
                "not a position-independent executable (its addresses are fixed at link time)"
            } else {
                "not a shared object (ET_DYN)"
            }));
        }
        if hdr.e_ident().padding[..] != [0u8; 7][..] {
            return Err(not_placeable("nonzero padding in e_ident (an image already?)"));
        }
        if hdr.e_machine(LE) != elf::EM_X86_64 {
            return Err(not_placeable("not x86-64"));
        }
        let phdrs = hdr
            .program_headers(LE, data)
            .map_err(|e| Error::new(Kind::Format, format!("bad program headers: {e}")).because(e))?;
        let mut loads = Vec::new();
        let mut dynamic = None;
        let (mut start, mut end, mut align) = (u64::MAX, 0u64, PAGE);
        for ph in phdrs {
            match ph.p_type(LE) {
                elf::PT_LOAD => {
                    let (vaddr, memsz) = (ph.p_vaddr(LE), ph.p_memsz(LE));
                    loads.push(Load { vaddr, offset: ph.p_offset(LE), filesz: ph.p_filesz(LE) });
                    start = start.min(vaddr & !(PAGE - 1));
                    end = end.max(vaddr + memsz);
                    align = align.max(ph.p_align(LE));
                }
                elf::PT_DYNAMIC => dynamic = Some((ph.p_offset(LE) as usize, ph.p_filesz(LE) as usize)),
                _ => {}
            }
        }
        if loads.is_empty() {
            return Err(not_placeable("no PT_LOAD segment"));
        }
        let (doff, dsize) = dynamic.ok_or_else(|| not_placeable("no PT_DYNAMIC segment"))?;
        let dyn_bytes =
            data.get(doff..doff + dsize).ok_or_else(|| not_placeable("PT_DYNAMIC lies outside the file"))?;
        let mut tags: HashMap<i64, u64> = HashMap::new();
        for e in records::<Dyn>(dyn_bytes) {
            let tag = e.d_tag.get(LE).0;
            if tag == DT_NULL {
                break;
            }
            tags.insert(tag, e.d_val.get(LE));
        }
        let tag = |t: i64| tags.get(&t).copied();
        let textrel = tag(DT_TEXTREL).is_some() || tag(DT_FLAGS).is_some_and(|f| f & DF_TEXTREL != 0);
        let unsuitable = if textrel {
            Some("text relocations (DT_TEXTREL)")
        } else if tag(DT_REL).is_some() {
            Some("REL relocations (DT_REL)")
        } else if tag(DT_RELR).is_some() && tag(DT_RELRENT).is_some_and(|e| e != 8) {
            Some("DT_RELR entries that are not 8 bytes")
        } else if tag(DT_JMPREL).is_some() && tag(DT_PLTREL) != Some(DT_RELA as u64) {
            Some("PLT relocations that are not RELA")
        } else {
            None
        };
        let mut image = Image {
            loads,
            start,
            end,
            align,
            relocs: Vec::new(),
            relr: Vec::new(),
            executable,
            pltgot: tag(DT_PLTGOT),
            bind_now: tag(DT_BIND_NOW).is_some()
                || tag(DT_FLAGS).is_some_and(|f| f & DF_BIND_NOW != 0)
                || tag(DT_FLAGS_1).is_some_and(|f| f & DF_1_NOW != 0),
            syms: Vec::new(),
            unsuitable: unsuitable.map(str::to_string),
        };
        for (addr, size) in [(tag(DT_RELA), tag(DT_RELASZ)), (tag(DT_JMPREL), tag(DT_PLTRELSZ))] {
            let (Some(addr), Some(size)) = (addr, size) else { continue };
            if image.unsuitable.is_some() {
                break;
            }
            let off = image.file_off(addr, size).ok_or_else(|| not_placeable("relocations outside the file"))?;
            for r in records::<crate::elf::Rela>(&data[off..off + size as usize]) {
                image.relocs.push(Rela {
                    offset: r.r_offset.get(LE),
                    rtype: r.r_type(LE, false).0,
                    sym: r.r_sym(LE, false),
                    addend: r.r_addend.get(LE),
                });
            }
        }
        if let (Some(addr), Some(size), None) = (tag(DT_RELR), tag(DT_RELRSZ), image.unsuitable.as_ref()) {
            let off = image.file_off(addr, size).ok_or_else(|| not_placeable("DT_RELR outside the file"))?;
            image.relr = relr_addresses(&data[off..off + size as usize]);
            if let Some(&a) = image.relr.iter().find(|&&a| image.file_off(a, 8).is_none()) {
                image.unsuitable = Some(format!("a DT_RELR word at {a:#x} is not in the file"));
            }
        }
        image.syms = dyn_syms(&parsed)?;
        for r in &image.relocs {
            match r.rtype {
                R_COPY if image.executable => {}
                R_NONE | R_64 | R_GLOB_DAT | R_JUMP_SLOT | R_RELATIVE | R_IRELATIVE | R_DTPMOD64 | R_DTPOFF64
                | R_TPOFF64 | R_TLSDESC | R_SIZE64 => {}
                t => {
                    image.unsuitable = Some(format!("relocation type {t}, which bootlink does not apply"));
                    break;
                }
            }
            if r.sym as usize >= image.syms.len().max(1) {
                return Err(not_placeable(format!("a relocation names symbol {}, beyond .dynsym", r.sym)));
            }
        }
        Ok(image)
    }
}

/// The dynamic symbols of a program that is not position-independent
/// (ET_EXEC: its symbols' values are their addresses), or None.
fn fixed_symbols(data: &[u8]) -> Option<Vec<DynSym>> {
    let parsed = Elf::parse(data, Want::Dynamic).ok()?;
    if parsed.header.e_type(LE) != elf::ET_EXEC || parsed.header.e_machine(LE) != elf::EM_X86_64 {
        return None;
    }
    dyn_syms(&parsed).ok()
}

/// The `.dynsym` entries as the prelinker needs them.
fn dyn_syms(parsed: &Elf) -> std::result::Result<Vec<DynSym>, Error> {
    let syms = parsed.dynamic_symbols()?;
    Ok(syms
        .iter()
        .map(|s| DynSym {
            value: s.st_value(LE),
            shndx: s.st_shndx(LE),
            bind: s.st_bind(),
            stype: s.st_type(),
            visibility: s.st_visibility(),
        })
        .collect())
}

/// The addresses a DT_RELR table relocates: an even word is an address
/// (the next word follows it), an odd one a bitmap of the 63 words after
/// the last address (bit i: the word i - 1 further on).
fn relr_addresses(table: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next = 0u64;
    for w in crate::bytes::le_u64s(table) {
        if w & 1 == 0 {
            out.push(w);
            next = w.wrapping_add(8);
        } else {
            for i in 1..64 {
                if w >> i & 1 != 0 {
                    out.push(next.wrapping_add((i - 1) * 8));
                }
            }
            next = next.wrapping_add(63 * 8);
        }
    }
    out
}

/// What `write_images` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PrelinkReport {
    pub dir: PathBuf,
    /// The load address of the first image.
    pub base: u64,
    /// Libraries written as prelinked images.
    pub images: usize,
    pub bytes: u64,
    /// Relocations applied in the images (RELA entries and DT_RELR words).
    pub applied: usize,
    /// Of those, DT_RELR words (relocated in place for the image's base).
    pub relr_words: usize,
    /// The program (a position-independent executable) was written as an
    /// image too.
    pub program_image: bool,
    /// Relocations left to the loader, and why, by reason.
    pub runtime: usize,
    pub runtime_reasons: Vec<(String, usize)>,
    /// Objects placed at a base but relocated as usual, and why.
    pub placed: Vec<(String, String)>,
    /// Libraries neither prelinked nor placed, and why.
    pub not_prelinked: Vec<(String, String)>,
    /// Libraries whose lazy PLT slots could not be made resettable (their
    /// PLT slots are left to the loader).
    pub plt_left: usize,
}

/// One library's image (or placement): where it goes and what it holds.
pub(crate) struct Planned {
    pub index: usize,
    pub base: u64,
    pub runtime: Vec<u32>,
    patches: Vec<(usize, u64)>,
    /// Only placed: no image.
    placed: bool,
    /// The image's DT_RELR words are relocated for its base.
    relr: bool,
}

/// Why a relocation is left to the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Left {
    Irelative,
    Ifunc,
    Tls,
    Program,
    Loader,
    NotPrelinked,
    Unbound,
    Bss,
    Plt,
    Size,
    Copy,
}

impl Left {
    fn name(self) -> &'static str {
        match self {
            Left::Irelative => "IRELATIVE",
            Left::Ifunc => "binding to an IFUNC",
            Left::Tls => "TLS",
            Left::Program => "binding to the program",
            Left::Loader => "binding to ld.so",
            Left::NotPrelinked => "binding to an object not prelinked",
            Left::Unbound => "no recorded binding (or undefined weak)",
            Left::Bss => "target not in the file",
            Left::Plt => "lazy PLT slot (PLT not resettable)",
            Left::Size => "symbol size",
            Left::Copy => "copy relocation",
        }
    }
}

/// Plan the images for the program and the libraries of `rec`: `datas[i]`
/// is object i's file (None for ld.so). Bases are assigned in load order
/// from `base` (the program first).
fn plan(
    rec: &Record,
    program: &Path,
    datas: &[Option<crate::fsutil::Bytes>],
    base: u64,
    report: &mut PrelinkReport,
) -> Result<Vec<Planned>> {
    // An object's file in a message (the program's name in a record is empty).
    let file_name = |i: usize| match rec.objects[i].flags & OBJ_MAIN {
        0 => rec.objects[i].name.clone(),
        _ => program.display().to_string(),
    };
    let mut images: Vec<Option<Image>> = Vec::with_capacity(datas.len());
    for (i, (o, d)) in rec.objects.iter().zip(datas).enumerate() {
        images.push(match d {
            None => None,
            Some(d) => match Image::parse(d, o.flags & OBJ_MAIN != 0) {
                Ok(img) => Some(img),
                Err(why) => {
                    report.not_prelinked.push((file_name(i), why.msg));
                    None
                }
            },
        });
    }
    // The program is imaged or left alone, never only placed.
    let main = rec.objects.iter().position(|o| o.flags & OBJ_MAIN != 0);
    if let Some(m) = main
        && let Some(why) = images[m].as_ref().and_then(|i| i.unsuitable.clone())
    {
        report.not_prelinked.push((file_name(m), why));
        images[m] = None;
    }
    // A program that is not position-independent (ET_EXEC) is always at
    // its link-time addresses: the images' bindings to it are written too.
    let fixed_program: Option<(usize, Vec<DynSym>)> =
        main.and_then(|m| datas[m].as_ref().and_then(|d| fixed_symbols(d)).map(|syms| (m, syms)));
    let mut bases: Vec<Option<u64>> = vec![None; images.len()];
    let mut next = base;
    for (i, img) in images.iter().enumerate() {
        if let Some(img) = img {
            let at = (next + img.start).next_multiple_of(img.align) - img.start;
            bases[i] = Some(at);
            next = (at + img.end).next_multiple_of(PAGE);
            if img.executable {
                // Room for the heap, which the kernel starts after a program
                // it maps (brk), before the first library.
                next += PROGRAM_HEAP_GAP;
            }
        }
    }
    if next > 0x7000_0000_0000 {
        return Err(Error::new(
            Kind::Unsupported,
            format!("the images do not fit below 0x700000000000 from {base:#x}"),
        ));
    }
    let binds: HashMap<(u32, u32, u8), Def> =
        rec.binds.iter().map(|b| ((b.refobj, b.symidx, b.tclass), b.def)).collect();
    let mut reasons: HashMap<Left, usize> = HashMap::new();
    let mut planned = Vec::new();
    for (x, img) in images.iter().enumerate() {
        let (Some(img), Some(bx)) = (img, bases[x]) else { continue };
        if let Some(why) = &img.unsuitable {
            report.placed.push((rec.objects[x].name.clone(), why.clone()));
            let runtime = Vec::new();
            planned.push(Planned { index: x, base: bx, runtime, patches: Vec::new(), placed: true, relr: false });
            continue;
        }
        let data = datas[x].as_ref().expect("images have data");
        let mut patches = Vec::new();
        let (mut early, mut late) = (Vec::new(), Vec::new());
        // The value a symbol binding gets, or why it must wait.
        let symbol = |r: &Rela, tclass: u8| -> std::result::Result<u64, Left> {
            let own = img.syms[r.sym as usize];
            let (d, dsym) = if own.bind == elf::STB_LOCAL
                || own.visibility == elf::STV_HIDDEN
                || own.visibility == elf::STV_INTERNAL
            {
                (x, own)
            } else {
                match binds.get(&(x as u32, r.sym, tclass)) {
                    Some(Def::Sym { obj, sym }) => {
                        let d = *obj as usize;
                        let flags = rec.objects[d].flags;
                        // A library's binding to the program waits (the
                        // program may be mapped elsewhere), unless the
                        // program's addresses are fixed; the program's own
                        // is at its own base.
                        if flags & OBJ_MAIN != 0 && d != x {
                            let Some((_, psyms)) = fixed_program.as_ref().filter(|(m, _)| *m == d) else {
                                return Err(Left::Program);
                            };
                            let Some(s) = psyms.get(*sym as usize) else { return Err(Left::Unbound) };
                            if s.stype == elf::STT_GNU_IFUNC && s.shndx != elf::SHN_UNDEF {
                                return Err(Left::Ifunc);
                            }
                            if s.stype == elf::STT_TLS || s.shndx == elf::SHN_UNDEF {
                                return Err(if s.stype == elf::STT_TLS { Left::Tls } else { Left::Unbound });
                            }
                            return Ok(s.value);
                        }
                        if flags & OBJ_LOADER != 0 {
                            return Err(Left::Loader);
                        }
                        let Some(dimg) = images[d].as_ref() else { return Err(Left::NotPrelinked) };
                        let Some(s) = dimg.syms.get(*sym as usize) else { return Err(Left::Unbound) };
                        (d, *s)
                    }
                    _ => return Err(Left::Unbound),
                }
            };
            if dsym.stype == elf::STT_GNU_IFUNC && dsym.shndx != elf::SHN_UNDEF {
                return Err(Left::Ifunc);
            }
            if dsym.stype == elf::STT_TLS {
                return Err(Left::Tls);
            }
            let Some(bd) = bases[d] else { return Err(Left::NotPrelinked) };
            Ok(if dsym.shndx == elf::SHN_ABS { dsym.value } else { bd.wrapping_add(dsym.value) })
        };
        for (i, r) in img.relocs.iter().enumerate() {
            let value = match r.rtype {
                R_NONE => continue,
                R_RELATIVE => Ok(bx.wrapping_add_signed(r.addend)),
                R_IRELATIVE => Err(Left::Irelative),
                R_GLOB_DAT => symbol(r, 0),
                R_JUMP_SLOT => symbol(r, 1),
                R_64 => symbol(r, 0).map(|s| s.wrapping_add_signed(r.addend)),
                R_SIZE64 => Err(Left::Size),
                R_COPY => Err(Left::Copy),
                _ => Err(Left::Tls),
            };
            let value = value.and_then(|v| img.file_off(r.offset, 8).map(|off| (off, v)).ok_or(Left::Bss));
            match value {
                Ok(p) => patches.push(p),
                Err(why) => {
                    *reasons.entry(why).or_default() += 1;
                    if why == Left::Irelative { late.push(i as u32) } else { early.push(i as u32) }
                }
            }
        }
        // Lazy PLT slots: make them resettable through GOT[1], or leave them.
        let slots: Vec<usize> =
            img.relocs.iter().enumerate().filter(|(_, r)| r.rtype == R_JUMP_SLOT).map(|(i, _)| i).collect();
        if !img.bind_now && !slots.is_empty() {
            match plt_base(img, data, &slots) {
                Some((got1_off, value)) => patches.push((got1_off, value)),
                None => {
                    report.plt_left += 1;
                    let offs: std::collections::HashSet<usize> =
                        slots.iter().filter_map(|&i| img.file_off(img.relocs[i].offset, 8)).collect();
                    let before = patches.len();
                    patches.retain(|(off, _)| !offs.contains(off));
                    let moved = before - patches.len();
                    *reasons.entry(Left::Plt).or_default() += moved;
                    early.extend(slots.iter().map(|&i| i as u32));
                    early.sort_unstable();
                    early.dedup();
                }
            }
        }
        // DT_RELR: each word relocated in place for the base; the ELF
        // header says for which (the loader adds only a difference
        // elsewhere, and an unpatched one refuses the file).
        for &a in &img.relr {
            let off = img.file_off(a, 8).expect("checked by parse");
            patches.push((off, read_u64(data, off).expect("inside the file").wrapping_add(bx)));
        }
        report.relr_words += img.relr.len();
        let relr = !img.relr.is_empty();
        if relr {
            let ident8 = u64::from(data[8]) | u64::from(RELR_MARK) << 8 | (bx / PAGE) << 16;
            patches.push((8, ident8));
        }
        report.applied += patches.len() - usize::from(relr);
        if img.executable {
            report.program_image = true;
        }
        early.extend(late);
        report.runtime += early.len();
        planned.push(Planned { index: x, base: bx, runtime: early, patches, placed: false, relr });
    }
    let mut reasons: Vec<(String, usize)> = reasons.into_iter().map(|(k, v)| (k.name().to_string(), v)).collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    report.runtime_reasons = reasons;
    Ok(planned)
}

/// GOT[1]'s offset in the file and the value that lets glibc reset every
/// lazy PLT slot of a prelinked object (stub = GOT[1] + l_addr +
/// 2 * (slot - &GOT[3])), if the PLT is laid out for it and GOT[1] is free.
fn plt_base(img: &Image, data: &[u8], slots: &[usize]) -> Option<(usize, u64)> {
    let pltgot = img.pltgot?;
    let got1 = img.file_off(pltgot + 8, 8)?;
    if read_u64(data, got1)? != 0 {
        return None;
    }
    let mut value = None;
    for &i in slots {
        let r = img.relocs[i];
        let stub = read_u64(data, img.file_off(r.offset, 8)?)?;
        let v = stub.wrapping_sub(2u64.wrapping_mul(r.offset.wrapping_sub(pltgot + 24)));
        if *value.get_or_insert(v) != v {
            return None;
        }
    }
    Some((got1, value?))
}

/// The path of the image of the file at `path` under `dir`.
pub fn image_path(dir: &Path, path: &str) -> PathBuf {
    dir.join(path.trim_start_matches('/'))
}

/// How the cache describes an object of the program after prelinking.
pub(crate) struct Placement {
    /// The image's identity (None: placed only, the original file).
    pub image: Option<FileIdentity>,
    /// `OBJ_PRELINKED` or `OBJ_PLACED`.
    pub flag: u32,
    pub prelink: Prelink,
}

/// A first base for one image build, chosen with the operating system's
/// randomness from [`RANDOM_BASES`] in steps of [`RANDOM_BASE_ALIGN`]
/// (prelink chose per machine). Skip Mode maps the images at fixed
/// addresses, so every process that uses them shares these addresses:
/// a random base per build keeps them from being the same on every
/// machine (docs/ddlink-security.md, the ASLR trade-off).
pub fn random_base() -> Result<u64> {
    use std::io::Read;
    let path = Path::new("/dev/urandom");
    let mut b = [0u8; 8];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut b)).map_err(|e| Error::io(path, e))?;
    Ok(base_from(u64::from_le_bytes(b)))
}

/// The base a random number picks: uniform over the granules of the range.
fn base_from(r: u64) -> u64 {
    let slots = (RANDOM_BASES.end - RANDOM_BASES.start) / RANDOM_BASE_ALIGN;
    RANDOM_BASES.start + (r % slots) * RANDOM_BASE_ALIGN
}

/// Write the prelinked images of `rec`'s program (at `program`) and
/// libraries under `dir` (each at its own absolute path below it,
/// atomically, with the original's mode) and return, per object index,
/// how the cache must describe it.
pub(crate) fn write_images(
    rec: &Record,
    program: &Path,
    dir: &Path,
    base: u64,
) -> Result<(HashMap<usize, Placement>, PrelinkReport)> {
    if !base.is_multiple_of(PAGE) || base == 0 {
        return Err(Error::new(Kind::Usage, format!("base {base:#x} is not a nonzero multiple of the page size")));
    }
    // The program's image goes at its real path (the overlay mounts it
    // there, and verify finds it by the same rule).
    let program = &std::fs::canonicalize(program).map_err(|e| Error::io(program, e))?;
    let mut datas = Vec::with_capacity(rec.objects.len());
    for o in &rec.objects {
        datas.push(if o.flags & OBJ_LOADER != 0 {
            None
        } else if o.flags & OBJ_MAIN != 0 {
            Some(crate::fsutil::map_file(program)?)
        } else {
            // The file the name leads to (the image goes at the name).
            let file = super::objects::file_of(o.flags, &o.name, Path::new(""), program);
            Some(crate::fsutil::map_file(&file)?)
        });
    }
    let mut report = PrelinkReport { dir: dir.to_path_buf(), base, ..Default::default() };
    let planned = plan(rec, program, &datas, base, &mut report)?;
    let mut out = HashMap::new();
    for p in planned {
        let name = match rec.objects[p.index].flags & OBJ_MAIN {
            0 => rec.objects[p.index].name.clone(),
            _ => program.to_string_lossy().into_owned(),
        };
        let name = &name;
        if p.placed {
            let prelink = Prelink { base: p.base, runtime: p.runtime };
            out.insert(p.index, Placement { image: None, flag: OBJ_PLACED, prelink });
            continue;
        }
        let src = Path::new(name);
        let mut bytes = datas[p.index].as_ref().expect("planned objects have data").to_vec();
        for &(off, v) in &p.patches {
            crate::bytes::set_le_u64(&mut bytes, off, v);
        }
        let dest = image_path(dir, name);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        crate::fsutil::write_atomic(&dest, &bytes)?;
        let mode = std::fs::metadata(src).map_err(|e| Error::io(src, e))?.permissions();
        std::fs::set_permissions(&dest, mode).map_err(|e| Error::io(&dest, e))?;
        let meta = std::fs::metadata(&dest).map_err(|e| Error::io(&dest, e))?;
        report.images += 1;
        report.bytes += meta.len();
        let prelink = Prelink { base: p.base, runtime: p.runtime };
        let flag = if p.relr { OBJ_PRELINKED | OBJ_RELR } else { OBJ_PRELINKED };
        out.insert(p.index, Placement { image: Some(FileIdentity::of(&meta)), flag, prelink });
    }
    Ok((out, report))
}

impl PrelinkReport {}

impl crate::report::Report for PrelinkReport {
    fn render(&self) -> String {
        let mut s = format!(
            "prelinked {} {} into {} ({} bytes, from {:#x}): {} relocations applied in the images ({} DT_RELR words), {} left to the loader\n",
            self.images,
            if self.program_image { "objects (the program and its libraries)" } else { "libraries" },
            self.dir.display(),
            self.bytes,
            self.base,
            self.applied,
            self.relr_words,
            self.runtime
        );
        for (why, n) in &self.runtime_reasons {
            s += &format!("  left to the loader: {n} ({why})\n");
        }
        for (name, why) in &self.placed {
            s += &format!("  placed at a base, relocated as usual: {name}: {why}\n");
        }
        for (name, why) in &self.not_prelinked {
            s += &format!("  not prelinked: {name}: {why}\n");
        }
        s
    }
}

/// How an image compares with the file it was made from, word by word,
/// outside what the loader's check mode compares (the RELA relocations'
/// targets, which only a normal relocation at run time can judge).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImageCheck {
    /// DT_RELR words compared: each must be the original's plus the base.
    pub relr_words: u64,
    /// Other words compared: each must be the original's (the ELF header's
    /// mark aside).
    pub other_words: u64,
    /// One line per difference: file offset, image's value, expected.
    pub differences: Vec<String>,
}

/// Compare `image` with `original` for a load at `base`: every DT_RELR
/// word must hold the original's value plus `base` (what relocating the
/// original at `base` writes there), the ELF header must carry the mark
/// for `base` exactly when there are DT_RELR words, and every other 8-byte
/// word that no RELA relocation targets (nor GOT[1], the PLT stub base)
/// must be unchanged. Err when `original` is not an object bootlink can
/// image.
pub fn check_image(original: &[u8], image: &[u8], base: u64) -> Result<ImageCheck> {
    // Parsed as the program would be (copy relocations allowed): the
    // RELA targets are only skipped here, not judged.
    let img = Image::parse(original, true)?;
    let mut out = ImageCheck::default();
    if original.len() != image.len() {
        out.differences.push(format!("the image has {} bytes, the original {}", image.len(), original.len()));
        return Ok(out);
    }
    let mut skip: std::collections::HashSet<usize> =
        img.relocs.iter().filter_map(|r| img.file_off(r.offset, 8)).collect();
    if let Some(got1) = img.pltgot.and_then(|p| img.file_off(p + 8, 8)) {
        skip.insert(got1);
    }
    let mut relr = std::collections::HashSet::new();
    for &a in &img.relr {
        let Some(off) = img.file_off(a, 8) else { continue };
        relr.insert(off);
        let (was, now) = (read_u64(original, off).unwrap_or(0), read_u64(image, off).unwrap_or(0));
        out.relr_words += 1;
        if now != was.wrapping_add(base) {
            out.differences.push(format!(
                "DT_RELR word at file offset {off:#x}: {now:#x} in the image, {:#x} expected",
                was.wrapping_add(base)
            ));
        }
    }
    let mark = if img.relr.is_empty() {
        read_u64(original, 8).unwrap_or(0)
    } else {
        u64::from(original[8]) | u64::from(RELR_MARK) << 8 | (base / PAGE) << 16
    };
    if read_u64(image, 8) != Some(mark) {
        out.differences.push(format!(
            "ELF header bytes 8..16: {:#x} in the image, {mark:#x} expected (the DT_RELR mark)",
            read_u64(image, 8).unwrap_or(0)
        ));
    }
    let mut off = 0;
    while off + 8 <= original.len() {
        if off != 8 && !skip.contains(&off) && !relr.contains(&off) {
            out.other_words += 1;
            if original[off..off + 8] != image[off..off + 8] {
                out.differences.push(format!(
                    "file offset {off:#x}: changed ({:#x} -> {:#x}), not a relocation target",
                    read_u64(original, off).unwrap_or(0),
                    read_u64(image, off).unwrap_or(0)
                ));
            }
        }
        off += 8;
    }
    if original[off..] != image[off..] {
        out.differences.push(format!("the last {} bytes differ", original.len() - off));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bases_are_aligned_inside_the_range_and_differ() {
        for r in [0, 1, u64::MAX, 0x1234_5678_9abc_def0] {
            let b = base_from(r);
            assert!(RANDOM_BASES.contains(&b) && b.is_multiple_of(RANDOM_BASE_ALIGN), "{b:#x}");
        }
        assert_eq!(base_from(0), RANDOM_BASES.start);
        let slots = (RANDOM_BASES.end - RANDOM_BASES.start) / RANDOM_BASE_ALIGN;
        assert_eq!(base_from(slots - 1), RANDOM_BASES.end - RANDOM_BASE_ALIGN);
        assert!(slots > 1 << 24, "about 25 bits of choice: {slots}");
        let drawn: std::collections::HashSet<u64> = (0..8).map(|_| random_base().unwrap()).collect();
        assert!(drawn.len() > 1, "eight draws from the OS gave one base: {drawn:?}");
    }
}
