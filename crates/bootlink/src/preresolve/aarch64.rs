//! `--fold-symbols` on AArch64: which preresolved symbols are folded, and
//! the range checks of the kernel's loader (arch/arm64/kernel/module.c,
//! `apply_relocate_add`, 6.1) done at build time for the relocations that
//! are.
//!
//! A symbol is folded only when none of its relocations is a CALL26 or
//! JUMP26. `module_frob_arch_sections` (arch/arm64/kernel/module-plts.c)
//! sizes the module's `.plt` from those relocations before relocating:
//! one entry per distinct (type, symbol, addend 0), so a folded branch
//! (symbol 0, the address in its addend) would count one entry per call
//! instead of one per callee, and `module_emit_plt_entry` reads the
//! symbol. A symbol that is branched to therefore stays, SHN_ABS with the
//! export's address as without `--fold-symbols`, and all its relocations
//! with it: folding the others would change no load-time work, since the
//! symbol stays in the table the kernel scans either way.
//!
//! Every other type the loader applies computes from S + A and the place
//! only, so folding keeps the value it writes. The loader refuses a module
//! when that value overflows the field (ABS32, PREL32, the checked MOVW
//! forms, ADRP, ...); those checks are made here for every folded
//! relocation, over every place a module can be given with `nokaslr`
//! ([`Places`]), and a module that would be refused is refused now, in one
//! line.

use std::collections::{BTreeMap, HashMap};

use object::elf::SHT_RELA;
use object::read::elf::{Rela as _, SectionHeader};
use serde::Serialize;

use crate::elf::{ANALYSED_MACHINES, Elf, LE, Want};
use crate::error::{Error, Kind, Result};
use crate::reloc::{self, Class};

const MACHINE: object::elf::Machine = object::elf::EM_AARCH64;

/// Relocations against the preresolved symbols of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Relocations {
    /// Now against symbol 0 with the address in the addend.
    pub folded: usize,
    /// Still against their symbol (SHN_ABS).
    pub kept: usize,
}

/// The preresolved symbols split into those folded and those kept SHN_ABS.
#[derive(Debug, Default)]
pub(super) struct Split {
    pub fold: Vec<(usize, u64)>,
    pub keep: Vec<(usize, u64)>,
    pub classes: BTreeMap<Class, Relocations>,
}

/// The addresses module code can have with `nokaslr` (inclusive), from
/// [`crate::kernel::arm64::module_places_nokaslr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Places {
    pub lo: u64,
    pub hi: u64,
}

impl Places {
    pub(crate) fn nokaslr(k: &crate::kernel::KernelImage) -> Places {
        let (lo, hi) = crate::kernel::arm64::module_places_nokaslr(k);
        Places { lo, hi }
    }

    /// Where module code can be under KASLR, in the kernel's link-time
    /// addresses (the kernel and its module region move together, by
    /// multiples of 2 MiB, so a PC-relative value is the same at every
    /// slide). 6.1 (arch/arm64/kernel/kaslr.c, module.c): the module
    /// region's base is randomized in [`_end` - 2 GiB, `_stext`) with
    /// RANDOMIZE_MODULE_REGION_FULL, in [`_etext` - 128 MiB, `_stext`)
    /// without it, allocations within 2 GiB above it. 6.12
    /// (arch/arm64/mm/init.c `module_init_limits`): a 128 MiB and a
    /// 2 GiB window, each randomized to contain the kernel. Both within
    /// [`_end` - 2 GiB, `_text` + 2 GiB).
    pub(crate) fn kaslr(base: &crate::kernel::slide::SlideBase) -> Places {
        Places { lo: base.link_end.wrapping_sub(2 << 30), hi: base.link_text.wrapping_add((2 << 30) - 1) }
    }
}

/// What a folded value must hold for: one placement of the kernel, or
/// every slide of a kernel that randomizes its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// `nokaslr` (or a kernel that does not move): the values are final,
    /// and a folded value the loader would refuse refuses the module.
    Fixed(Places),
    /// Preresolved for the slide: the loader adds the slide to every
    /// folded address, so only a relocation whose check passes at every
    /// slide folds (PC-relative ones within reach of every place, 64-bit
    /// data and the unchecked forms); a symbol with any other use stays
    /// SHN_ABS and the loader checks it at load, as without bootlink.
    Slid(Places),
}

/// How the loader computes from S + A (`do_reloc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Abs,
    Prel,
    Page,
}

/// The overflow check the loader makes for one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// No check (64-bit data, the `_NC` forms, the low 12 bits, G3).
    None,
    /// `reloc_data`: ABS in [0, 2^bits), PREL in [-2^(bits-1), 2^(bits-1)).
    Data(Op, u32),
    /// `reloc_insn_movw`: 16 bits from `lsb`; `signed` for the MOVN/MOVZ forms.
    Movw(Op, u32, bool),
    /// `reloc_insn_imm`: `len` signed bits from `lsb`.
    Imm(Op, u32, u32),
}

fn check_of(ty: u32) -> Check {
    use Check::*;
    match ty {
        258 => Data(Op::Abs, 32),
        259 => Data(Op::Abs, 16),
        261 => Data(Op::Prel, 32),
        262 => Data(Op::Prel, 16),
        263 => Movw(Op::Abs, 0, false),
        265 => Movw(Op::Abs, 16, false),
        267 => Movw(Op::Abs, 32, false),
        270 => Movw(Op::Abs, 0, true),
        271 => Movw(Op::Abs, 16, true),
        272 => Movw(Op::Abs, 32, true),
        273 => Imm(Op::Prel, 2, 19),
        274 => Imm(Op::Prel, 0, 21),
        275 => Imm(Op::Page, 12, 21),
        279 => Imm(Op::Prel, 2, 14),
        280 => Imm(Op::Prel, 2, 19),
        288 => Movw(Op::Prel, 0, true),
        290 => Movw(Op::Prel, 16, true),
        292 => Movw(Op::Prel, 32, true),
        _ => None,
    }
}

fn do_reloc(op: Op, place: u64, val: u64) -> i64 {
    match op {
        Op::Abs => val as i64,
        Op::Prel => val.wrapping_sub(place) as i64,
        Op::Page => (val & !0xfff).wrapping_sub(place & !0xfff) as i64,
    }
}

/// Whether the loader's check passes for `check` at `place`.
fn fits(check: Check, place: u64, val: u64) -> bool {
    match check {
        Check::None => true,
        Check::Data(op, bits) => {
            let s = do_reloc(op, place, val);
            match op {
                Op::Abs => s >= 0 && s < (1i64 << bits),
                _ => s >= -(1i64 << (bits - 1)) && s < (1i64 << (bits - 1)),
            }
        }
        Check::Movw(op, lsb, signed) => {
            let s = do_reloc(op, place, val);
            let mut imm = (s >> lsb) as u64;
            if signed && s < 0 {
                imm = !imm;
            }
            imm <= 0xffff
        }
        Check::Imm(op, lsb, len) => {
            let s = do_reloc(op, place, val) >> lsb;
            let mask = ((1u64 << (lsb + len)) - 1) >> lsb;
            let upper = (s & !((mask >> 1) as i64)) >> (len - 1);
            (upper as u64).wrapping_add(1) < 2
        }
    }
}

/// Whether the loader accepts relocation type `ty` with S + A = `val` at
/// every place in `places`. The value the loader checks moves with the
/// place in one direction, and what it accepts is an interval of it, so
/// the two ends decide.
pub(crate) fn fits_everywhere(ty: u32, val: u64, places: Places) -> bool {
    let c = check_of(ty);
    fits(c, places.lo, val) && fits(c, places.hi, val)
}

/// Whether the loader's check of type `ty` passes for S + A = `val` at
/// every slide: PC-relative checks do not change with it (the value and
/// the place move together) and pass everywhere in `places`; an absolute
/// value with a range check changes with the slide.
fn fits_every_slide(ty: u32, val: u64, places: Places) -> bool {
    let absolute_checked = match check_of(ty) {
        Check::None => false,
        Check::Data(op, _) | Check::Movw(op, ..) | Check::Imm(op, ..) => op == Op::Abs,
    };
    !absolute_checked && fits_everywhere(ty, val, places)
}

/// One relocation against a preresolved symbol.
struct Use {
    sym: usize,
    ty: u32,
    section: usize,
    offset: u64,
    addend: i64,
}

/// Split `edits` (symbol index, address) of an AArch64 module: symbols
/// with a CALL26/JUMP26 (or a type the loader does not apply) are kept,
/// the others folded, each folded relocation checked against the loader's
/// range over the places of `reach` (for [`Reach::Slid`], a symbol with a
/// use that would not pass at every slide is kept instead). `names` names
/// the symbols for the refusal.
pub(super) fn split(data: &[u8], edits: &[(usize, u64)], names: &HashMap<usize, &str>, reach: Reach) -> Result<Split> {
    let elf = Elf::parse_for(data, Want::Relocatable, ANALYSED_MACHINES)?;
    // By symbol index (a module's symbols are few; no hashing per relocation).
    let mut values: Vec<Option<u64>> = vec![None; edits.iter().map(|&(i, _)| i + 1).max().unwrap_or(0)];
    for &(sym, addr) in edits {
        values[sym] = Some(addr);
    }
    let mut uses = Vec::new();
    for sh in elf.sections.iter().filter(|s| s.sh_type(LE) == SHT_RELA) {
        let relas = sh
            .data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(LE, data)
            .map_err(|_| Error::new(Kind::Format, "corrupt relocation section"))?;
        for r in relas {
            let sym = r.r_sym(LE, false) as usize;
            if values.get(sym).is_some_and(Option::is_some) {
                let (offset, addend) = (r.r_offset(LE), r.r_addend(LE));
                uses.push(Use { sym, ty: r.r_type(LE, false).0, section: sh.sh_info(LE) as usize, offset, addend });
            }
        }
    }
    let value = |u: &Use| values[u.sym].expect("a use of an edited symbol").wrapping_add(u.addend as u64);
    let mut stays = vec![false; values.len()];
    for u in &uses {
        let slid_out = matches!(reach, Reach::Slid(p) if !fits_every_slide(u.ty, value(u), p));
        if !reloc::foldable(MACHINE, u.ty) || slid_out {
            stays[u.sym] = true;
        }
    }
    let places = match reach {
        Reach::Fixed(p) | Reach::Slid(p) => p,
    };
    let mut out = Split::default();
    for u in &uses {
        let count = out.classes.entry(reloc::class(MACHINE, u.ty)).or_default();
        if stays[u.sym] {
            count.kept += 1;
            continue;
        }
        count.folded += 1;
        let val = value(u);
        if !fits_everywhere(u.ty, val, places) {
            let section = elf.section_by_index(u.section).map(|s| elf.section_name(s)).unwrap_or(b"?");
            return Err(Error::new(
                Kind::Unsupported,
                format!(
                    "cannot fold: {} at {}+{:#x} against {} (S + A = {val:#x}) is out of the range the kernel's loader \
                     accepts for a module placed with nokaslr (it would refuse the module)",
                    reloc::name(MACHINE, u.ty).unwrap_or("?"),
                    String::from_utf8_lossy(section),
                    u.offset,
                    names.get(&u.sym).copied().unwrap_or("?"),
                ),
            ));
        }
    }
    for &(sym, addr) in edits {
        if stays[sym] {
            out.keep.push((sym, addr));
        } else {
            out.fold.push((sym, addr));
        }
    }
    Ok(out)
}

/// arm64's loader moves the branches that may need a PLT (CALL26 and
/// JUMP26 to a symbol outside the section they patch) to the front of
/// every relocation section that applies to code, by swapping entries
/// (`partition_branch_plt_relas`, arch/arm64/kernel/module-plts.c: 6.12
/// always, 6.1 with CONFIG_RANDOMIZE_BASE), before it reads a module's
/// `.preresolved_slide` table, whose bitmaps number the entries: a folded
/// relocation would then be looked for at another entry's place. Written
/// in that order here (each group in its file order), the kernel's pass
/// swaps nothing: it steps over the branches, then finds none behind.
/// Returns, for each section whose entries moved, its index and each old
/// entry's new index.
pub(super) fn branches_first(data: &mut [u8]) -> Result<Vec<(u32, Vec<u32>)>> {
    const RELA: usize = std::mem::size_of::<object::elf::Rela64<object::LittleEndian>>();
    let mut plans = Vec::new();
    {
        let bytes: &[u8] = data;
        let elf = Elf::parse_for(bytes, Want::Relocatable, ANALYSED_MACHINES)?;
        let symtab = elf.symbols()?;
        for (k, sh) in elf.sections.enumerate() {
            if sh.sh_type(LE) != SHT_RELA {
                continue;
            }
            let target = sh.sh_info(LE) as usize;
            let code =
                elf.section_by_index(target).is_some_and(|t| t.sh_flags(LE).contains(object::elf::SHF_EXECINSTR));
            if !code {
                continue;
            }
            let relas = sh
                .data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(LE, bytes)
                .map_err(|_| Error::new(Kind::Format, "corrupt relocation section"))?;
            let needs_plt = |r: &object::elf::Rela64<object::LittleEndian>| {
                let branch =
                    matches!(r.r_type(LE, false), object::elf::R_AARCH64_CALL26 | object::elf::R_AARCH64_JUMP26);
                let shndx = symtab
                    .symbol(object::SymbolIndex(r.r_sym(LE, false) as usize))
                    .map(|s| object::read::elf::Sym::st_shndx(s, LE));
                branch && !shndx.is_ok_and(|x| x.0 as usize == target)
            };
            let (first, rest): (Vec<usize>, Vec<usize>) = (0..relas.len()).partition(|&i| needs_plt(&relas[i]));
            let order: Vec<usize> = first.into_iter().chain(rest).collect();
            if order.iter().enumerate().any(|(new, &old)| new != old) {
                let (off, _) =
                    sh.file_range(LE).ok_or_else(|| Error::new(Kind::Format, "a relocation section has no data"))?;
                plans.push((k.0 as u32, off as usize, order));
            }
        }
    }
    let mut moved = Vec::new();
    for (sec, off, order) in plans {
        let old = data[off..off + order.len() * RELA].to_vec();
        let mut new_index = vec![0u32; order.len()];
        for (new, &o) in order.iter().enumerate() {
            data[off + new * RELA..off + (new + 1) * RELA].copy_from_slice(&old[o * RELA..(o + 1) * RELA]);
            new_index[o] = new as u32;
        }
        moved.push((sec, new_index));
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIMAGE: u64 = 0xffff_8000_0800_0000;

    /// A 6.1 kernel's: [KIMAGE_VADDR - 128 MiB, KIMAGE_VADDR + 2 GiB).
    fn places() -> Places {
        Places { lo: KIMAGE - (128 << 20), hi: KIMAGE + (2 << 30) - 1 }
    }

    #[test]
    fn data_relocations_follow_reloc_data() {
        let kernel = KIMAGE + 0x1234_5678;
        // 64-bit data: never checked.
        assert!(fits_everywhere(257, kernel, places()));
        assert!(fits_everywhere(260, kernel, places()));
        // ABS32/ABS16 of a kernel address: the loader says -ERANGE.
        assert!(!fits_everywhere(258, kernel, places()));
        assert!(!fits_everywhere(259, kernel, places()));
        assert!(fits_everywhere(258, 0xffff_ffff, places()));
        assert!(!fits_everywhere(258, 0x1_0000_0000, places()));
        // PREL32 to the kernel reaches from every module place, even the
        // far end of the 2 GiB fallback window.
        assert!(fits_everywhere(261, KIMAGE, places()));
        assert!(fits_everywhere(261, kernel, places()));
        // ...but not to something 4 GiB away; PREL16 reaches 32 KiB only.
        assert!(!fits_everywhere(261, KIMAGE + (4 << 30), places()));
        assert!(!fits_everywhere(262, kernel, places()));
    }

    #[test]
    fn instruction_relocations_follow_reloc_insn() {
        let kernel = KIMAGE + 0x0123_4560;
        // ADRP: ±4 GiB of pages; the lo12 forms are never checked.
        assert!(fits_everywhere(275, kernel, places()));
        assert!(!fits_everywhere(275, KIMAGE.wrapping_sub(8 << 30), places()));
        for lo12 in [277, 278, 284, 285, 286, 299] {
            assert!(fits_everywhere(lo12, kernel, places()));
        }
        // LDR literal, ADR, TBZ, B.cond: far too short to reach the kernel
        // from everywhere a module can be.
        for short in [273, 274, 279, 280] {
            assert!(!fits_everywhere(short, kernel, places()), "{short}");
        }
        // MOVZ/MOVK of an absolute address: G0..G2 overflow, the _NC forms
        // and G3 do not check; the signed G2 of a kernel address fits
        // (its upper bits are all ones: MOVN of 0x7fff).
        assert!(!fits_everywhere(263, kernel, places()));
        assert!(!fits_everywhere(265, kernel, places()));
        assert!(!fits_everywhere(267, kernel, places()));
        assert!(fits_everywhere(264, kernel, places()));
        assert!(fits_everywhere(269, kernel, places()));
        assert!(fits_everywhere(272, kernel, places()));
        assert!(!fits_everywhere(271, kernel, places()));
        assert!(fits_everywhere(263, 0xffff, places()));
        assert!(!fits_everywhere(263, 0x1_0000, places()));
        // MOVW_PREL_G1 (signed, bits 16..31) reaches ±2 GiB; G0 only ±64 KiB.
        assert!(fits_everywhere(290, kernel, places()));
        assert!(!fits_everywhere(288, kernel, places()));
    }

    /// A symbol branched to stays with all its relocations; the others
    /// fold, each counted by class; a folded value the loader would refuse
    /// refuses the module.
    #[test]
    fn branched_symbols_stay_and_the_rest_fold() {
        use crate::elfedit::tests::tiny_aarch64;
        let (adrp, add, call26, abs64, abs32) = (275, 277, 283, 257, 258);
        let names: HashMap<usize, &str> = [(3, "a"), (4, "b"), (5, "c")].into();
        let (a, b, c) = (KIMAGE + 0x10_0000, KIMAGE + 0x20_0000, KIMAGE + 0x30_0000);
        let d =
            tiny_aarch64(&[(0, adrp, 3, 0), (4, add, 3, 0), (8, call26, 4, 0), (12, abs64, 4, 0), (16, abs64, 5, 8)]);
        let s = split(&d, &[(3, a), (4, b), (5, c)], &names, Reach::Fixed(places())).unwrap();
        assert_eq!(s.fold, [(3, a), (5, c)]);
        assert_eq!(s.keep, [(4, b)]);
        let r = |folded, kept| Relocations { folded, kept };
        assert_eq!(
            s.classes,
            BTreeMap::from([
                (Class::Absolute, r(1, 1)),
                (Class::Branch, r(0, 1)),
                (Class::Page, r(1, 0)),
                (Class::PageOffset, r(1, 0)),
            ])
        );
        // A symbol that is not preresolved is not counted.
        assert_eq!(
            split(&d, &[(5, c)], &names, Reach::Fixed(places())).unwrap().classes,
            BTreeMap::from([(Class::Absolute, r(1, 0))])
        );
        // ABS32 of a kernel address: the loader would refuse the module.
        let d = tiny_aarch64(&[(0, adrp, 3, 0), (24, abs32, 3, 4)]);
        let e = split(&d, &[(3, a)], &names, Reach::Fixed(places())).unwrap_err();
        assert!(e.msg.contains("R_AARCH64_ABS32 at .text+0x18 against a"), "{e}");
        // ...unless that symbol stays for a branch (nothing folded: the
        // loader decides as without bootlink).
        let d = tiny_aarch64(&[(8, call26, 3, 0), (24, abs32, 3, 4)]);
        assert_eq!(split(&d, &[(3, a)], &names, Reach::Fixed(places())).unwrap().keep, [(3, a)]);
    }

    /// For the slide: what passes at every slide folds (ADRP and the lo12
    /// forms, 64-bit data, PREL32 within 2 GiB of every place); a symbol
    /// with an absolute range check (ABS32, MOVW_UABS) or a PC-relative use
    /// out of reach stays SHN_ABS for the loader, where with `nokaslr` the
    /// module was refused.
    #[test]
    fn for_the_slide_what_the_slide_could_break_stays() {
        use crate::elfedit::tests::tiny_aarch64;
        use crate::kernel::slide::SlideBase;
        let (adrp, add, abs64, abs32, prel32, movw_uabs_g0) = (275, 277, 257, 258, 261, 263);
        let base = SlideBase { build_id: vec![1; 20], link_text: KIMAGE, link_end: KIMAGE + (40 << 20) };
        let slid = Reach::Slid(Places::kaslr(&base));
        // [_end - 2 GiB, _text + 2 GiB): below the kernel as far as 6.12's
        // window reaches, above it as far as 6.1's fallback does.
        assert_eq!(Places::kaslr(&base), Places { lo: KIMAGE + (40 << 20) - (2 << 30), hi: KIMAGE + (2 << 30) - 1 });
        let names: HashMap<usize, &str> = [(3, "a"), (4, "b"), (5, "c"), (6, "d")].into();
        let (a, b, c) = (KIMAGE + 0x10_0000, KIMAGE + 0x20_0000, KIMAGE + 0x30_0000);
        let far = KIMAGE + (3 << 30);
        let d = tiny_aarch64(&[
            (0, adrp, 3, 0),
            (4, add, 3, 0),
            (8, abs64, 4, 0),
            (12, prel32, 4, 0),
            (16, movw_uabs_g0, 5, 0),
            (20, abs64, 5, 0),
            (24, prel32, 6, 0),
        ]);
        let edits = [(3, a), (4, b), (5, c), (6, far)];
        let s = split(&d, &edits, &names, slid).unwrap();
        assert_eq!(s.fold, [(3, a), (4, b)]);
        assert_eq!(s.keep, [(5, c), (6, far)]);
        // With nokaslr the same module is refused: MOVW_UABS_G0 of a kernel
        // address overflows, and the loader would say so at load.
        let e = split(&d, &edits, &names, Reach::Fixed(places())).unwrap_err();
        assert!(e.msg.contains("R_AARCH64_MOVW_UABS_G0 at .text+0x10 against c"), "{e}");
        // ABS32 of a kernel address: refused with nokaslr, kept for the slide.
        let d = tiny_aarch64(&[(0, adrp, 3, 0), (24, abs32, 3, 4)]);
        assert!(split(&d, &[(3, a)], &names, Reach::Fixed(places())).is_err());
        let s = split(&d, &[(3, a)], &names, slid).unwrap();
        assert_eq!((s.fold.len(), s.keep.as_slice()), (0, [(3, a)].as_slice()));
    }

    /// The branches to PLTs first, each group in file order, as arm64's
    /// loader orders them; the kernel's own pass over the result (its
    /// algorithm, written out here) then swaps nothing.
    #[test]
    fn branches_to_plts_go_first_as_the_loader_puts_them() {
        use crate::elfedit::tests::tiny_aarch64;
        let (adrp, call26, abs64, jump26) = (275, 283, 257, 282);
        let mut d =
            tiny_aarch64(&[(0, adrp, 3, 0), (4, call26, 4, 0), (8, abs64, 5, 0), (12, jump26, 4, 0), (16, adrp, 5, 0)]);
        let moved = branches_first(&mut d).unwrap();
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].1, [2, 0, 3, 1, 4]);
        let read = |d: &[u8]| -> Vec<(u64, u32)> {
            let elf = Elf::parse_for(d, Want::Relocatable, ANALYSED_MACHINES).unwrap();
            let sh = elf.sections.iter().find(|s| s.sh_type(LE) == SHT_RELA).unwrap();
            let relas = sh.data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(LE, d).unwrap();
            relas.iter().map(|r| (r.r_offset(LE), r.r_type(LE, false).0)).collect()
        };
        let after = read(&d);
        assert_eq!(after, [(4, call26), (12, jump26), (0, adrp), (8, abs64), (16, adrp)]);
        // partition_branch_plt_relas on what was written: no swap.
        let needs = |i: usize| matches!(after[i].1, 282 | 283);
        let (mut i, mut j, mut swaps) = (0, after.len() - 1, 0);
        while i < j {
            if needs(i) {
                i += 1;
            } else if needs(j) {
                swaps += 1;
                break;
            } else {
                j -= 1;
            }
        }
        assert_eq!((i, swaps), (2, 0));
        // Already in that order: nothing moves.
        assert!(branches_first(&mut d).unwrap().is_empty());
    }

    #[test]
    fn places_span_the_module_region_and_its_fallback() {
        let p = places();
        assert_eq!(p.lo, 0xffff_8000_0000_0000);
        assert_eq!(p.hi, 0xffff_8000_87ff_ffff);
    }
}
