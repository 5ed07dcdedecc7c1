//! Small, exact edits of a relocatable ELF64 (a kernel module) in memory:
//! rewrite symbol table entries, fold symbols into relocations and drop
//! them, sort fixed-size records of a section, and append a section. Every other byte of the
//! file stays where it was.

use object::elf::{
    EM_AARCH64, EM_X86_64, SHN_ABS, SHN_UNDEF, SHT_DYNSYM, SHT_GROUP, SHT_PROGBITS, SHT_REL, SHT_RELA, SHT_SYMTAB,
    SHT_SYMTAB_SHNDX,
};
use object::read::elf::{FileHeader, SectionHeader};

use crate::elf::{ANALYSED_MACHINES, Elf, Header, LE, ReadError, Rela, Shdr, Symbol as Sym, Want, view, view_mut};
use crate::error::{Error, Kind};

const SYM_SIZE: usize = size_of::<Sym>();
const SHDR_SIZE: usize = size_of::<Shdr>();
const RELA_SIZE: usize = size_of::<Rela>();
/// Linux's flag for livepatch relocation sections (include/uapi/linux/elf.h).
const SHF_RELA_LIVEPATCH: u64 = 0x0010_0000;

/// x86-64 relocation types whose result depends on the symbol only through
/// its value S (S + A, S + A - P): exactly the ones the kernel's
/// apply_relocate_add handles (NONE, 64, PC32, PLT32, 32, 32S, PC64).
const FOLDABLE_X86_64: &[u32] = &[0, 1, 2, 4, 10, 11, 24];

/// Whether relocation type `ty` of `machine` can be folded: its result
/// depends on the symbol only through S (x86-64: [`FOLDABLE_X86_64`];
/// AArch64: [`crate::reloc::foldable`]). None: a machine folding does not
/// handle.
fn foldable(machine: object::elf::Machine, ty: u32) -> Option<bool> {
    match machine {
        EM_X86_64 => Some(FOLDABLE_X86_64.contains(&ty)),
        EM_AARCH64 => Some(crate::reloc::foldable(machine, ty)),
        _ => None,
    }
}

/// Parse a module being edited: x86-64 or AArch64 (the machines whose
/// relocations bootlink knows; which one fits the kernel is the caller's
/// check).
fn parse(d: &[u8]) -> Result<Elf<'_>, ReadError> {
    Elf::parse_for(d, Want::Relocatable, ANALYSED_MACHINES)
}

/// The new index of every symbol kept when those `gone` marks are removed
/// (u32::MAX for the removed ones).
fn renumbering(gone: &[bool]) -> Vec<u32> {
    let mut next = 0u32;
    gone.iter()
        .map(|&g| {
            if g {
                return u32::MAX;
            }
            next += 1;
            next - 1
        })
        .collect()
}

/// What `ElfEdit::fold_symbols` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldStats {
    /// Symbols removed from .symtab.
    pub symbols: usize,
    /// Relocations that now use symbol 0 with the address in the addend.
    pub relocations: usize,
    /// Relocations whose symbol index changed.
    pub renumbered: usize,
}

struct FoldPlan {
    /// File offset and size of every SHT_RELA section.
    rela: Vec<(usize, usize)>,
    /// File offset of .symtab's section header.
    symtab_header: usize,
    /// .symtab's sh_info: index of the first non-local symbol.
    first_global: usize,
}

/// A module's bytes being edited.
pub struct ElfEdit {
    pub data: Vec<u8>,
    symtab_off: usize,
    symtab_count: usize,
}

/// What an edit refuses: a module of a shape bootlink cannot rewrite in
/// place (its callers name the file).
fn unsupported(msg: impl Into<String>) -> Error {
    Error::new(Kind::Unsupported, msg)
}

impl ElfEdit {
    pub fn new(data: Vec<u8>) -> Result<ElfEdit, Error> {
        let (symtab_off, symtab_count) = {
            let elf = parse(&data)?;
            let (_, sh) = elf
                .sections
                .enumerate()
                .find(|(_, s)| s.sh_type(LE) == object::elf::SHT_SYMTAB)
                .ok_or_else(|| unsupported("module has no symbol table (.symtab)"))?;
            let (off, size) = sh.file_range(LE).ok_or_else(|| unsupported("symbol table has no file data"))?;
            let entsize = sh.sh_entsize(LE);
            if entsize != SYM_SIZE as u64 || size % SYM_SIZE as u64 != 0 || off.saturating_add(size) > data.len() as u64
            {
                return Err(Error::new(Kind::Format, "corrupt symbol table header"));
            }
            (off as usize, (size / SYM_SIZE as u64) as usize)
        };
        Ok(ElfEdit { data, symtab_off, symtab_count })
    }

    /// Make symbol `index` absolute with value `value` (SHN_UNDEF -> SHN_ABS).
    pub(crate) fn make_absolute(&mut self, index: usize, value: u64) {
        assert!(index < self.symtab_count, "symbol index out of range");
        let sym: &mut Sym = view_mut(&mut self.data, self.symtab_off + index * SYM_SIZE);
        sym.st_shndx.set(LE, SHN_ABS);
        sym.st_value.set(LE, value);
    }

    /// Fold symbols into the relocations that use them, then drop them.
    ///
    /// `values` names symbols (by index) and the addresses they resolve to.
    /// Every SHT_RELA entry that refers to one of them is rewritten to refer
    /// to symbol 0 (STN_UNDEF, value 0) with the address added to its addend,
    /// so S + A, the only thing the loader computes from the symbol, is
    /// unchanged. The symbols are then removed from .symtab, the remaining
    /// ones move down, and every relocation is renumbered to match.
    ///
    /// Nothing is changed unless the whole edit can be done exactly: modules
    /// with anything else that holds symbol indices (SHT_REL, SHT_GROUP,
    /// SHT_SYMTAB_SHNDX, livepatch relocations, a second symbol table, any
    /// other section linked to .symtab), relocation types whose result
    /// depends on more than the symbol's value (on AArch64 also CALL26 and
    /// JUMP26, which the module PLTs are counted from), or a machine other
    /// than x86-64 and AArch64 are refused with the reason.
    pub fn fold_symbols(&mut self, values: &[(usize, u64)]) -> Result<FoldStats, Error> {
        let plan = self.plan_fold(values, "--fold-symbols", "fold symbols")?;
        // By symbol index: one lookup per relocation, no hashing.
        let mut folded: Vec<Option<u64>> = vec![None; self.symtab_count];
        for &(sym, v) in values {
            folded[sym] = Some(v);
        }
        let gone: Vec<bool> = folded.iter().map(Option::is_some).collect();
        let renumber = renumbering(&gone);
        let mut stats = FoldStats { symbols: values.len(), ..FoldStats::default() };
        for &(off, size) in &plan.rela {
            for e in (off..off + size).step_by(RELA_SIZE) {
                let rela: &mut Rela = view_mut(&mut self.data, e);
                let (sym, ty) = (rela.r_sym(LE, false) as usize, rela.r_type(LE, false));
                let (new_sym, add) = match folded.get(sym).copied().flatten() {
                    Some(v) => {
                        stats.relocations += 1;
                        (0u64, v)
                    }
                    None => {
                        if renumber[sym] as usize != sym {
                            stats.renumbered += 1;
                        }
                        (renumber[sym] as u64, 0)
                    }
                };
                let addend = rela.r_addend.get(LE).wrapping_add(add as i64);
                rela.set_r_info(LE, false, new_sym as u32, ty);
                rela.r_addend.set(LE, addend);
            }
        }
        self.compact_symtab(&plan, &gone);
        // sh_info (one past the last local) stays right: only globals went.
        assert!(
            renumber[..plan.first_global].iter().enumerate().all(|(i, &n)| n as usize == i),
            "a local symbol was removed or moved"
        );
        Ok(stats)
    }

    /// Remove the local symbols `droppable` marks (by index; never symbol 0
    /// nor a global) that no relocation refers to; the symbols after them
    /// move down, every relocation is renumbered and .symtab's sh_info (one
    /// past the last local) shrinks to match. Refused, changing nothing,
    /// where `fold_symbols` is. Returns how many were removed.
    pub(crate) fn trim_local_symbols(&mut self, droppable: &[bool]) -> Result<usize, Error> {
        let plan = self.plan_fold(&[], "--trim-symtab", "trim symbols")?;
        let mut used = vec![false; self.symtab_count];
        for &(off, size) in &plan.rela {
            for e in (off..off + size).step_by(RELA_SIZE) {
                used[view::<Rela>(&self.data, e).r_sym(LE, false) as usize] = true;
            }
        }
        let gone: Vec<bool> = (0..self.symtab_count)
            .map(|i| i != 0 && i < plan.first_global && !used[i] && droppable.get(i).copied().unwrap_or(false))
            .collect();
        let removed = gone.iter().filter(|&&g| g).count();
        if removed == 0 {
            return Ok(0);
        }
        let renumber = renumbering(&gone);
        for &(off, size) in &plan.rela {
            for e in (off..off + size).step_by(RELA_SIZE) {
                let rela: &mut Rela = view_mut(&mut self.data, e);
                let (sym, ty) = (rela.r_sym(LE, false) as usize, rela.r_type(LE, false));
                rela.set_r_info(LE, false, renumber[sym], ty);
            }
        }
        self.compact_symtab(&plan, &gone);
        let symtab: &mut Shdr = view_mut(&mut self.data, plan.symtab_header);
        symtab.sh_info.set(LE, (plan.first_global - removed) as u32);
        Ok(removed)
    }

    /// Remove the symbols `gone` marks from .symtab in place: the others
    /// move down in order, the freed tail is zeroed, sh_size shrinks.
    fn compact_symtab(&mut self, plan: &FoldPlan, gone: &[bool]) {
        let mut w = 0;
        for (i, &g) in gone.iter().enumerate() {
            if g {
                continue;
            }
            if w != i {
                let src = self.symtab_off + i * SYM_SIZE;
                self.data.copy_within(src..src + SYM_SIZE, self.symtab_off + w * SYM_SIZE);
            }
            w += 1;
        }
        let end = self.symtab_off + self.symtab_count * SYM_SIZE;
        self.data[self.symtab_off + w * SYM_SIZE..end].fill(0);
        let symtab: &mut Shdr = view_mut(&mut self.data, plan.symtab_header);
        symtab.sh_size.set(LE, (w * SYM_SIZE) as u64);
        self.symtab_count = w;
    }

    /// Check everything `fold_symbols` relies on; returns where the
    /// relocation tables and the symbol table's header are.
    fn plan_fold(&self, values: &[(usize, u64)], option: &str, verb: &str) -> Result<FoldPlan, Error> {
        let d = &self.data;
        let elf = parse(d)?;
        let machine = elf.header.e_machine(LE);
        if foldable(machine, 0).is_none() {
            return Err(unsupported(format!(
                "{option} supports x86-64 and AArch64 modules only (e_machine {machine}); preresolve this module without it"
            )));
        }
        let shoff = elf.header.e_shoff(LE) as usize;
        let symtab = elf
            .sections
            .enumerate()
            .find(|(_, sh)| sh.sh_type(LE) == SHT_SYMTAB && sh.sh_offset(LE) as usize == self.symtab_off)
            .map(|(k, _)| k.0)
            .ok_or_else(|| unsupported("the symbol table is not where it was read"))?;
        let first_global = elf
            .sections
            .section(object::read::SectionIndex(symtab))
            .map_err(|e| unsupported(e.to_string()).because(e))?
            .sh_info(LE) as usize;
        let mut seen = vec![false; self.symtab_count];
        for &(i, _) in values {
            if i == 0 || i >= self.symtab_count {
                return Err(unsupported(format!("symbol index {i} out of range")));
            }
            if i < first_global {
                return Err(unsupported(format!(
                    "symbol {i} is local (sh_info {first_global}): only global symbols can be folded"
                )));
            }
            if std::mem::replace(&mut seen[i], true) {
                return Err(unsupported(format!("symbol {i} given twice")));
            }
            let sym: &Sym = view(d, self.symtab_off + i * SYM_SIZE);
            if sym.st_shndx.get(LE) != SHN_UNDEF {
                return Err(unsupported(format!("symbol {i} is not undefined")));
            }
        }
        let mut rela = Vec::new();
        for (k, sh) in elf.sections.enumerate().skip(1) {
            let k = k.0;
            let (ty, flags, link) = (sh.sh_type(LE), sh.sh_flags(LE), sh.sh_link(LE) as usize);
            let refuse = |why: &str| {
                let name = elf.sections.section_name(LE, sh).map(|n| String::from_utf8_lossy(n).into_owned());
                Err(unsupported(format!("cannot {verb}: section {} {why}", name.unwrap_or_else(|_| format!("#{k}")))))
            };
            match ty {
                SHT_REL => return refuse("is SHT_REL (relocations without addends cannot take the address)"),
                SHT_GROUP => return refuse("is SHT_GROUP (its signature is a symbol index)"),
                SHT_SYMTAB_SHNDX => return refuse("is SHT_SYMTAB_SHNDX (indexed like .symtab)"),
                SHT_DYNSYM => return refuse("is a second symbol table"),
                SHT_SYMTAB if k != symtab => return refuse("is a second symbol table"),
                SHT_RELA => {
                    if link != symtab {
                        return refuse(&format!("is SHT_RELA linked to section {link}, not to the symbol table"));
                    }
                    if flags.0 & SHF_RELA_LIVEPATCH != 0 {
                        return refuse("holds livepatch relocations (resolved by symbol by the livepatch core)");
                    }
                    let (off, size) = (sh.sh_offset(LE) as usize, sh.sh_size(LE) as usize);
                    if sh.sh_entsize(LE) != RELA_SIZE as u64
                        || size % RELA_SIZE != 0
                        || off.checked_add(size).is_none_or(|e| e > d.len())
                    {
                        return refuse("has a corrupt header");
                    }
                    for e in (off..off + size).step_by(RELA_SIZE) {
                        let r: &Rela = view(d, e);
                        let (sym, rtype) = (r.r_sym(LE, false) as usize, r.r_type(LE, false).0);
                        if sym >= self.symtab_count {
                            return refuse(&format!("refers to symbol {sym}, past the symbol table"));
                        }
                        if seen[sym] && foldable(machine, rtype) != Some(true) {
                            return refuse(&format!(
                                "has relocation type {rtype} against a preresolved symbol: only S + A types can be folded"
                            ));
                        }
                    }
                    rela.push((off, size));
                }
                _ if link == symtab && k != symtab => {
                    return refuse(&format!("(type {}) is linked to the symbol table", ty.0));
                }
                _ => {}
            }
        }
        Ok(FoldPlan { rela, symtab_header: shoff + symtab * SHDR_SIZE, first_global })
    }

    /// Sort the `record`-byte records of section `name` by `key` (stable).
    /// Refused when a relocation section applies to it (a record's meaning
    /// would move away from its relocation). Returns each record's key in
    /// the new order, or None when there is no such section.
    pub(crate) fn sort_records(
        &mut self,
        name: &str,
        record: usize,
        key: impl Fn(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<Vec<u8>>>, Error> {
        let (off, size) = {
            let elf = parse(&self.data)?;
            let Some((index, sh)) = elf.section(name) else { return Ok(None) };
            for s in elf.sections.iter() {
                let t = s.sh_type(LE);
                if (t == SHT_RELA || t == SHT_REL) && s.sh_info(LE) as usize == index {
                    return Err(unsupported(format!(
                        "section {name} has relocations; its records cannot be reordered"
                    )));
                }
            }
            if sh.sh_type(LE) != SHT_PROGBITS {
                return Err(unsupported(format!("section {name} holds no data")));
            }
            let (off, size) = sh.file_range(LE).ok_or_else(|| unsupported(format!("section {name} has no data")))?;
            (off as usize, size as usize)
        };
        if size % record != 0 || off + size > self.data.len() {
            return Err(unsupported(format!("section {name} is not a whole number of {record}-byte records")));
        }
        let bytes = &mut self.data[off..off + size];
        let mut recs: Vec<(Vec<u8>, Vec<u8>)> = bytes.chunks(record).map(|r| (key(r), r.to_vec())).collect();
        recs.sort_by(|a, b| a.0.cmp(&b.0));
        for (dst, (_, src)) in bytes.chunks_mut(record).zip(&recs) {
            dst.copy_from_slice(src);
        }
        Ok(Some(recs.into_iter().map(|(k, _)| k).collect()))
    }

    /// Rearrange the `record`-byte records of section `name`: new record k
    /// is old record `order[k]`; records not in `order` are dropped (the
    /// section shrinks; its file bytes after the new end are zeroed). The
    /// SHT_RELA entries that apply to a kept record move with it (their
    /// r_offset follows the record; they are written in r_offset order),
    /// those of dropped records are removed. Refused for SHT_REL, for more
    /// than one relocation section, or an `order` naming a record twice or
    /// out of range. Returns the number of relocations kept.
    pub(crate) fn rearrange_records(&mut self, name: &str, record: usize, order: &[usize]) -> Result<usize, Error> {
        let (off, size, header, rela) = {
            let elf = parse(&self.data)?;
            let (index, sh) = elf.section(name).ok_or_else(|| unsupported(format!("no section {name}")))?;
            let shoff = elf.header.e_shoff(LE) as usize;
            let mut rela = None;
            for (k, s) in elf.sections.enumerate() {
                let t = s.sh_type(LE);
                if t == SHT_REL && s.sh_info(LE) as usize == index {
                    return Err(unsupported(format!("section {name} has SHT_REL relocations")));
                }
                if t == SHT_RELA && s.sh_info(LE) as usize == index {
                    if rela.is_some() {
                        return Err(unsupported(format!("section {name} has two relocation sections")));
                    }
                    let (o, z) = (s.sh_offset(LE) as usize, s.sh_size(LE) as usize);
                    if s.sh_entsize(LE) != RELA_SIZE as u64
                        || z % RELA_SIZE != 0
                        || o.checked_add(z).is_none_or(|e| e > self.data.len())
                    {
                        return Err(unsupported(format!("the relocations of {name} have a corrupt header")));
                    }
                    rela = Some((o, z, shoff + k.0 * SHDR_SIZE));
                }
            }
            if sh.sh_type(LE) != SHT_PROGBITS {
                return Err(unsupported(format!("section {name} holds no data")));
            }
            let (o, z) = sh.file_range(LE).ok_or_else(|| unsupported(format!("section {name} has no data")))?;
            (o as usize, z as usize, shoff + index * SHDR_SIZE, rela)
        };
        if record == 0 || size % record != 0 || off + size > self.data.len() {
            return Err(unsupported(format!("section {name} is not a whole number of {record}-byte records")));
        }
        let count = size / record;
        let mut new_index = vec![usize::MAX; count];
        for (k, &old) in order.iter().enumerate() {
            if old >= count || new_index[old] != usize::MAX {
                return Err(unsupported(format!("record {old} of {name} is out of range or placed twice")));
            }
            new_index[old] = k;
        }
        if let Some((roff, rsize, _)) = rela {
            for e in (roff..roff + rsize).step_by(RELA_SIZE) {
                let at = view::<Rela>(&self.data, e).r_offset.get(LE);
                if at >= size as u64 {
                    return Err(unsupported(format!("a relocation of {name} lies outside it (offset {at})")));
                }
            }
        }
        let old_bytes = self.data[off..off + size].to_vec();
        for (k, &old) in order.iter().enumerate() {
            self.data[off + k * record..off + (k + 1) * record]
                .copy_from_slice(&old_bytes[old * record..(old + 1) * record]);
        }
        self.data[off + order.len() * record..off + size].fill(0);
        let sh: &mut Shdr = view_mut(&mut self.data, header);
        sh.sh_size.set(LE, (order.len() * record) as u64);
        let Some((roff, rsize, rheader)) = rela else { return Ok(0) };
        let mut kept: Vec<(u64, Vec<u8>)> = Vec::new();
        for e in (roff..roff + rsize).step_by(RELA_SIZE) {
            let r: &Rela = view(&self.data, e);
            let at = r.r_offset.get(LE);
            let old = (at / record as u64) as usize;
            if new_index[old] == usize::MAX {
                continue;
            }
            let moved = (new_index[old] * record) as u64 + at % record as u64;
            let mut bytes = self.data[e..e + RELA_SIZE].to_vec();
            view_mut::<Rela>(&mut bytes, 0).r_offset.set(LE, moved);
            kept.push((moved, bytes));
        }
        kept.sort_by_key(|(at, _)| *at);
        for (i, (_, bytes)) in kept.iter().enumerate() {
            self.data[roff + i * RELA_SIZE..roff + (i + 1) * RELA_SIZE].copy_from_slice(bytes);
        }
        self.data[roff + kept.len() * RELA_SIZE..roff + rsize].fill(0);
        let rh: &mut Shdr = view_mut(&mut self.data, rheader);
        rh.sh_size.set(LE, (kept.len() * RELA_SIZE) as u64);
        Ok(kept.len())
    }

    /// Where each entry of an SHT_RELA section refers to one of the
    /// symbols `symbols` marks (by index): (section index, entry index),
    /// in file order. Folding and trimming keep every entry where it is,
    /// so the places hold after them.
    pub(crate) fn relocations_against(&self, symbols: &[bool]) -> Result<Vec<(u32, u32)>, Error> {
        let elf = parse(&self.data)?;
        let mut out = Vec::new();
        for (k, sh) in elf.sections.enumerate() {
            if sh.sh_type(LE) != SHT_RELA {
                continue;
            }
            let (off, size) = sh.file_range(LE).ok_or_else(|| unsupported("a relocation section has no data"))?;
            let (off, size) = (off as usize, size as usize);
            if off.checked_add(size).is_none_or(|e| e > self.data.len()) {
                return Err(Error::new(Kind::Format, "corrupt relocation section header"));
            }
            for (j, e) in (off..off + size - size % RELA_SIZE).step_by(RELA_SIZE).enumerate() {
                let r: &Rela = view(&self.data, e);
                if symbols.get(r.r_sym(LE, false) as usize).copied().unwrap_or(false) {
                    out.push((k.0 as u32, j as u32));
                }
            }
        }
        Ok(out)
    }

    /// Give section `name` new contents: in place when they fit (the rest
    /// zeroed), else after the section data, before the section headers
    /// (which must be at the end of the file), its header pointed at them
    /// and its old bytes left unreferenced. No other section moves.
    pub(crate) fn set_section_contents(&mut self, name: &str, contents: &[u8]) -> Result<(), Error> {
        let (index, off, size, shoff, shnum) = {
            let elf = parse(&self.data)?;
            let (i, sh) = elf.section(name).ok_or_else(|| unsupported(format!("module has no {name} section")))?;
            let (off, size) = sh.file_range(LE).ok_or_else(|| unsupported(format!("{name} has no file data")))?;
            (i, off as usize, size as usize, elf.header.e_shoff(LE) as usize, elf.header.e_shnum(LE) as usize)
        };
        let header_at = if contents.len() <= size {
            self.data[off..off + contents.len()].copy_from_slice(contents);
            self.data[off + contents.len()..off + size].fill(0);
            shoff + index * SHDR_SIZE
        } else {
            if shoff + shnum * SHDR_SIZE != self.data.len() {
                return Err(unsupported("section headers are not at the end of the file; cannot move a section"));
            }
            let headers = self.data.split_off(shoff);
            while !self.data.len().is_multiple_of(8) {
                self.data.push(0);
            }
            let new_off = self.data.len();
            self.data.extend_from_slice(contents);
            while !self.data.len().is_multiple_of(8) {
                self.data.push(0);
            }
            let new_shoff = self.data.len();
            self.data.extend_from_slice(&headers);
            let h: &mut Header = view_mut(&mut self.data, 0);
            h.e_shoff.set(LE, new_shoff as u64);
            let sh: &mut Shdr = view_mut(&mut self.data, new_shoff + index * SHDR_SIZE);
            sh.sh_offset.set(LE, new_off as u64);
            new_shoff + index * SHDR_SIZE
        };
        let sh: &mut Shdr = view_mut(&mut self.data, header_at);
        sh.sh_size.set(LE, contents.len() as u64);
        Ok(())
    }

    /// Append an empty section named `name`; see `add_section`.
    pub fn add_empty_section(&mut self, name: &str) -> Result<(), Error> {
        self.add_section(name, &[])
    }

    /// Append a section named `name` holding `contents` (PROGBITS, not
    /// allocated: the loader does not copy it into the module's memory). The
    /// section name table is extended with the new name and moved to the end
    /// of the section data, followed by the contents and then the section
    /// header table with one more entry; the existing section indices do not
    /// change.
    pub fn add_section(&mut self, name: &str, contents: &[u8]) -> Result<(), Error> {
        self.add_section_with(name, contents, object::elf::SectionFlags::default(), 1)
    }

    /// Append a PROGBITS section as `add_section` does, with these flags
    /// (e.g. SHF_ALLOC: the kernel copies it into the module's memory) and
    /// alignment (at most 8).
    pub(crate) fn add_section_with(
        &mut self,
        name: &str,
        contents: &[u8],
        flags: object::elf::SectionFlags,
        align: u64,
    ) -> Result<(), Error> {
        if !(1..=8).contains(&align) || !align.is_power_of_two() {
            return Err(unsupported(format!("unsupported section alignment {align}")));
        }
        let (shoff, shnum, shstrndx, shstr_off, shstr_size) = {
            let elf = parse(&self.data)?;
            let h: &Header = elf.header;
            let shoff = h.e_shoff(LE) as usize;
            let shnum = h.e_shnum(LE) as usize;
            let shstrndx = h.e_shstrndx(LE).0 as usize;
            let sh: &Shdr = elf.section_by_index(shstrndx).ok_or_else(|| unsupported("no section name table"))?;
            let (off, size) = sh.file_range(LE).ok_or_else(|| unsupported("section name table has no data"))?;
            (shoff, shnum, shstrndx, off as usize, size as usize)
        };
        if shnum == 0 || shnum + 1 >= object::elf::SHN_LORESERVE as usize {
            return Err(unsupported("unsupported section count"));
        }
        if shoff + shnum * SHDR_SIZE != self.data.len() {
            return Err(unsupported("section headers are not at the end of the file; cannot append a section"));
        }
        let mut strtab = self.data[shstr_off..shstr_off + shstr_size].to_vec();
        let name_off = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);

        let mut headers = self.data[shoff..].to_vec();
        let mut out = self.data[..shoff].to_vec();
        // The name table goes where the section headers were (its old bytes
        // stay, unreferenced, only if it was not the last thing before them).
        let new_str_off = if shstr_off + shstr_size == shoff { shstr_off } else { shoff };
        out.truncate(new_str_off);
        out.extend_from_slice(&strtab);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let contents_off = out.len();
        out.extend_from_slice(contents);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let new_shoff = out.len();
        // Update the name table's header.
        let names: &mut Shdr = view_mut(&mut headers, shstrndx * SHDR_SIZE);
        names.sh_offset.set(LE, new_str_off as u64);
        names.sh_size.set(LE, strtab.len() as u64);
        // The new header: name, PROGBITS, no flags, no address.
        let at = headers.len();
        headers.resize(at + SHDR_SIZE, 0);
        let sh: &mut Shdr = view_mut(&mut headers, at);
        sh.sh_name.set(LE, name_off);
        sh.sh_type.set(LE, SHT_PROGBITS);
        sh.sh_offset.set(LE, contents_off as u64);
        sh.sh_size.set(LE, contents.len() as u64);
        sh.sh_flags.set(LE, flags);
        sh.sh_addralign.set(LE, align);
        out.extend_from_slice(&headers);
        let h: &mut Header = view_mut(&mut out, 0);
        h.e_shoff.set(LE, new_shoff as u64);
        h.e_shnum.set(LE, (shnum + 1) as u16);
        self.data = out;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::elf::{Elf, LE, Want, sym_name};
    use object::read::elf::{Rela as _, SectionHeader};

    const R_X86_64_64: u32 = object::elf::R_X86_64_64.0;
    const R_X86_64_PC32: u32 = object::elf::R_X86_64_PC32.0;
    const R_X86_64_PLT32: u32 = object::elf::R_X86_64_PLT32.0;
    const R_X86_64_32S: u32 = object::elf::R_X86_64_32S.0;
    const R_X86_64_GOTPCREL: u32 = object::elf::R_X86_64_GOTPCREL.0;

    /// One relocation: offset, type, symbol index, addend.
    pub(crate) type R = (u64, u32, u32, i64);

    /// A small x86-64 ET_REL: .text, .rela.text, .symtab (null, a local
    /// section symbol, global `f` defined in .text, undefined `a`, `b`,
    /// `c`), .strtab, .shstrtab.
    fn tiny_elf(relocs: &[R], rela_type: u32) -> Vec<u8> {
        use object::elf::{FileHeader64, Rela64, SectionHeader64, Sym64};
        use object::elf::{SectionFlags, SectionType, SymbolInfo, SymbolOther, SymbolSection};
        use object::pod::bytes_of;
        use object::{I64, U16, U32, U64};
        let strtab = b"\0f\0a\0b\0c\0";
        let shstrtab = b"\0.text\0.rela.text\0.symtab\0.strtab\0.shstrtab\0";
        // name, info (bind << 4 | type), shndx, value
        let syms: [(u32, u8, u16, u64); 6] =
            [(0, 0, 0, 0), (0, 3, 1, 0), (1, 0x12, 1, 4), (3, 0x10, 0, 0), (5, 0x10, 0, 0), (7, 0x10, 0, 0)];
        let mut d = vec![0u8; size_of::<Header>()];
        let text_off = d.len();
        d.extend_from_slice(&[0x90; 48]);
        let rela_off = d.len();
        for &(off, ty, sym, addend) in relocs {
            let mut r = Rela64 { r_offset: U64::new(LE, off), r_info: U64::new(LE, 0), r_addend: I64::new(LE, addend) };
            r.set_r_info(LE, false, sym, object::elf::RelocationType(ty));
            d.extend_from_slice(bytes_of(&r));
        }
        let sym_off = d.len();
        for (name, info, shndx, value) in syms {
            let s = Sym64 {
                st_name: U32::new(LE, name),
                st_info: SymbolInfo(info),
                st_other: SymbolOther(0),
                st_shndx: U16::new(LE, SymbolSection(shndx)),
                st_value: U64::new(LE, value),
                st_size: U64::new(LE, 0),
            };
            d.extend_from_slice(bytes_of(&s));
        }
        let str_off = d.len();
        d.extend_from_slice(strtab);
        let shstr_off = d.len();
        d.extend_from_slice(shstrtab);
        while !d.len().is_multiple_of(8) {
            d.push(0);
        }
        let shoff = d.len();
        // name, type, flags, offset, size, link, info, align, entsize
        type Fields = (u32, u32, u64, usize, usize, u32, u32, u64, u64);
        let headers: [Fields; 6] = [
            (0, 0, 0, 0, 0, 0, 0, 0, 0),
            (1, 1, 6, text_off, 48, 0, 0, 16, 0),
            (7, rela_type, 0x40, rela_off, relocs.len() * RELA_SIZE, 3, 1, 8, RELA_SIZE as u64),
            (18, 2, 0, sym_off, syms.len() * SYM_SIZE, 4, 2, 8, SYM_SIZE as u64),
            (26, 3, 0, str_off, strtab.len(), 0, 0, 1, 0),
            (34, 3, 0, shstr_off, shstrtab.len(), 0, 0, 1, 0),
        ];
        for (name, ty, flags, off, size, link, info, align, entsize) in headers {
            let sh = SectionHeader64 {
                sh_name: U32::new(LE, name),
                sh_type: U32::new(LE, SectionType(ty)),
                sh_flags: U64::new(LE, SectionFlags(flags)),
                sh_addr: U64::new(LE, 0),
                sh_offset: U64::new(LE, off as u64),
                sh_size: U64::new(LE, size as u64),
                sh_link: U32::new(LE, link),
                sh_info: U32::new(LE, info),
                sh_addralign: U64::new(LE, align),
                sh_entsize: U64::new(LE, entsize),
            };
            d.extend_from_slice(bytes_of(&sh));
        }
        let h: &mut FileHeader64<_> = view_mut(&mut d, 0);
        h.e_ident.magic = object::elf::ELFMAG;
        h.e_ident.class = object::elf::ELFCLASS64;
        h.e_ident.data = object::elf::ELFDATA2LSB;
        h.e_ident.version = object::elf::EV_CURRENT;
        h.e_type.set(LE, object::elf::ET_REL);
        h.e_machine.set(LE, EM_X86_64);
        h.e_version.set(LE, 1);
        h.e_shoff.set(LE, shoff as u64);
        h.e_ehsize.set(LE, size_of::<Header>() as u16);
        h.e_shentsize.set(LE, SHDR_SIZE as u16);
        h.e_shnum.set(LE, headers.len() as u16);
        h.e_shstrndx.set(LE, SymbolSection(5));
        d
    }

    /// The same module built for AArch64 (its relocations AArch64's).
    pub(crate) fn tiny_aarch64(relocs: &[R]) -> Vec<u8> {
        let mut d = tiny_elf(relocs, SHT_RELA.0);
        view_mut::<Header>(&mut d, 0).e_machine.set(LE, EM_AARCH64);
        d
    }

    /// Read back, through the `object` crate: symbol names and the
    /// relocations of .rela.text.
    fn read_back(d: &[u8]) -> (Vec<String>, u32, Vec<R>) {
        let elf = parse(d).unwrap();
        let syms = elf.symbols().unwrap();
        let names = syms.iter().map(|s| String::from_utf8(sym_name(&syms, s).unwrap().to_vec()).unwrap()).collect();
        let (_, symtab) = elf.section(".symtab").unwrap();
        let (_, rela) = elf.section(".rela.text").unwrap();
        let relocs = rela
            .data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(LE, d)
            .unwrap()
            .iter()
            .map(|r| (r.r_offset(LE), r.r_type(LE, false).0, r.r_sym(LE, false), r.r_addend(LE)))
            .collect();
        (names, symtab.sh_info(LE), relocs)
    }

    const RELOCS: &[R] = &[
        (0, R_X86_64_PC32, 3, -4),   // a
        (8, R_X86_64_64, 4, 0),      // b
        (16, R_X86_64_PLT32, 5, -4), // c
        (24, R_X86_64_64, 1, 8),     // .text section symbol
        (32, R_X86_64_32S, 2, 0),    // f
        (40, R_X86_64_64, 5, 16),    // c again
        (44, R_X86_64_PC32, 4, -4),  // b again
    ];

    /// The slide's places: found before folding, they name the same
    /// entries after it (folding keeps every entry where it is).
    #[test]
    fn relocations_against_symbols_keep_their_places_through_folding() {
        let mut ed = ElfEdit::new(tiny_elf(RELOCS, SHT_RELA.0)).unwrap();
        let mut marks = vec![false; 6];
        (marks[3], marks[5]) = (true, true);
        let places = ed.relocations_against(&marks).unwrap();
        let rela = parse(&ed.data).unwrap().section(".rela.text").unwrap().0 as u32;
        assert_eq!(places, [(rela, 0), (rela, 2), (rela, 5)]);
        ed.fold_symbols(&[(3, 0xffff_ffff_8100_1000), (5, 0x3000)]).unwrap();
        let (_, _, relocs) = read_back(&ed.data);
        let folded: Vec<u32> = (0..relocs.len() as u32).filter(|&i| relocs[i as usize].2 == 0).collect();
        assert_eq!(folded, [0, 2, 5]);
    }

    /// A section given longer contents moves after the others (their bytes
    /// stay); shorter ones stay in place, the rest zeroed.
    #[test]
    fn a_section_that_grows_moves_and_the_others_stay() {
        let mut ed = ElfEdit::new(tiny_elf(RELOCS, SHT_RELA.0)).unwrap();
        let before = read_back(&ed.data);
        let (text_off, text) = {
            let elf = parse(&ed.data).unwrap();
            let (_, sh) = elf.section(".text").unwrap();
            (sh.sh_offset(LE), elf.section_data(sh).unwrap().len())
        };
        let longer = vec![0xaa; text + 100];
        ed.set_section_contents(".text", &longer).unwrap();
        {
            let elf = parse(&ed.data).unwrap();
            let (_, sh) = elf.section(".text").unwrap();
            assert!(sh.sh_offset(LE) > text_off);
            assert_eq!(elf.section_data(sh).unwrap(), &longer[..]);
        }
        assert_eq!(read_back(&ed.data), before);
        ed.set_section_contents(".text", &[1, 2]).unwrap();
        let elf = parse(&ed.data).unwrap();
        let (_, sh) = elf.section(".text").unwrap();
        assert_eq!(elf.section_data(sh).unwrap(), &[1, 2]);
        assert!(ed.set_section_contents(".nothing", &[]).unwrap_err().msg.contains("no .nothing"));
    }

    #[test]
    fn folding_moves_addresses_into_addends_and_renumbers_the_rest() {
        let mut ed = ElfEdit::new(tiny_elf(RELOCS, SHT_RELA.0)).unwrap();
        let stats = ed.fold_symbols(&[(3, 0xffff_ffff_8100_1000), (5, 0x3000)]).unwrap();
        assert_eq!(stats, FoldStats { symbols: 2, relocations: 3, renumbered: 2 });
        let (names, first_global, relocs) = read_back(&ed.data);
        // a and c are gone; b moved from 4 to 3; locals and f stay put.
        assert_eq!(names, ["", "", "f", "b"]);
        assert_eq!(first_global, 2);
        assert_eq!(
            relocs,
            [
                (0, R_X86_64_PC32, 0, 0xffff_ffff_8100_1000u64.wrapping_sub(4) as i64),
                (8, R_X86_64_64, 3, 0),
                (16, R_X86_64_PLT32, 0, 0x2ffc),
                (24, R_X86_64_64, 1, 8),
                (32, R_X86_64_32S, 2, 0),
                (40, R_X86_64_64, 0, 0x3010),
                (44, R_X86_64_PC32, 3, -4),
            ]
        );
        // The freed tail of .symtab is zero, and a marker section can follow.
        let sym_end = 64 + 48 + RELOCS.len() * 24 + 4 * 24;
        assert!(ed.data[sym_end..sym_end + 48].iter().all(|&b| b == 0));
        ed.add_section(".preresolved", b"0000000000003000 c\n").unwrap();
        let elf = Elf::parse(&ed.data, Want::Relocatable).unwrap();
        assert_eq!(elf.named_section_data(".preresolved").unwrap().unwrap(), b"0000000000003000 c\n");
        assert_eq!(read_back(&ed.data).2, relocs, "adding the section moved nothing");
    }

    /// AArch64: every type the loader computes from S + A folds; CALL26
    /// and JUMP26 do not (the module PLTs are counted from their symbols).
    #[test]
    fn aarch64_folds_all_but_branches() {
        let (adrp, add, call26, jump26, abs64) = (275, 277, 283, 282, 257);
        let relocs: &[R] = &[(0, adrp, 3, 0), (4, add, 3, 0), (8, call26, 4, 0), (16, abs64, 5, 8)];
        let d = tiny_aarch64(relocs);
        let a = 0xffff_8000_0812_3000u64;
        let mut ed = ElfEdit::new(d.clone()).unwrap();
        let stats = ed.fold_symbols(&[(3, a), (5, 0x40)]).unwrap();
        assert_eq!(stats, FoldStats { symbols: 2, relocations: 3, renumbered: 1 });
        let (names, _, back) = read_back(&ed.data);
        assert_eq!(names, ["", "", "f", "b"]);
        assert_eq!(back, [(0, adrp, 0, a as i64), (4, add, 0, a as i64), (8, call26, 3, 0), (16, abs64, 0, 0x48)]);
        for branch in [call26, jump26] {
            let d = tiny_aarch64(&[(8, branch, 4, 0)]);
            let mut ed = ElfEdit::new(d.clone()).unwrap();
            let e = ed.fold_symbols(&[(4, a)]).unwrap_err();
            assert!(e.msg.contains(&format!("relocation type {branch} against a preresolved symbol")), "{e}");
            assert!(ed.data == d, "refused but changed");
        }
    }

    #[test]
    fn rearranged_records_take_their_relocations_along() {
        let mut ed = ElfEdit::new(tiny_elf(RELOCS, SHT_RELA.0)).unwrap();
        let text = |d: &[u8]| {
            let elf = Elf::parse(d, Want::Relocatable).unwrap();
            elf.named_section_data(".text").unwrap().unwrap().to_vec()
        };
        // Mark each 8-byte record of .text with its number to follow it.
        let (_, sh) = Elf::parse(&ed.data, Want::Relocatable).unwrap().section(".text").unwrap();
        let off = sh.sh_offset(LE) as usize;
        for r in 0..6 {
            ed.data[off + r * 8] = r as u8;
        }
        // Record 5 first, then 1 and 4; 0, 2 and 3 are dropped.
        assert_eq!(ed.rearrange_records(".text", 8, &[5, 1, 4]).unwrap(), 4);
        let t = text(&ed.data);
        assert_eq!((t.len(), t[0], t[8], t[16]), (24, 5, 1, 4));
        assert!(ed.data[off + 24..off + 48].iter().all(|&b| b == 0), "the dropped tail is zeroed");
        assert_eq!(
            read_back(&ed.data).2,
            [(0, R_X86_64_64, 5, 16), (4, R_X86_64_PC32, 4, -4), (8, R_X86_64_64, 4, 0), (16, R_X86_64_32S, 2, 0)]
        );
        let before = ed.data.clone();
        for (order, why) in [(&[0, 0][..], "placed twice"), (&[3][..], "out of range")] {
            assert!(ed.rearrange_records(".text", 8, order).unwrap_err().msg.contains(why));
            assert!(ed.data == before, "refused but changed");
        }
        assert!(ed.rearrange_records(".text", 7, &[]).unwrap_err().msg.contains("whole number"));
        let mut rel = ElfEdit::new(tiny_elf(RELOCS, SHT_REL.0)).unwrap();
        assert!(rel.rearrange_records(".text", 8, &[0]).unwrap_err().msg.contains("SHT_REL"));
    }

    #[test]
    fn folding_refuses_what_it_cannot_remap_and_changes_nothing() {
        let refused = |d: Vec<u8>, values: &[(usize, u64)], why: &str| {
            let mut ed = ElfEdit::new(d.clone()).unwrap();
            let e = ed.fold_symbols(values).unwrap_err();
            assert!(e.msg.contains(why), "{e}");
            assert!(ed.data == d, "refused but changed");
        };
        // Relocations without addends.
        refused(tiny_elf(&RELOCS[..1], SHT_REL.0), &[(3, 1)], "section .rela.text is SHT_REL");
        // A relocation type that uses more than the symbol's value.
        let mut got = RELOCS.to_vec();
        got[2].1 = R_X86_64_GOTPCREL;
        refused(tiny_elf(&got, SHT_RELA.0), &[(5, 1)], "relocation type 9 against a preresolved symbol");
        // ...which is fine when that symbol is not folded.
        assert!(ElfEdit::new(tiny_elf(&got, SHT_RELA.0)).unwrap().fold_symbols(&[(3, 1)]).is_ok());
        // Local or defined symbols, and indices past the table.
        refused(tiny_elf(RELOCS, SHT_RELA.0), &[(1, 1)], "is local");
        refused(tiny_elf(RELOCS, SHT_RELA.0), &[(2, 1)], "not undefined");
        refused(tiny_elf(RELOCS, SHT_RELA.0), &[(6, 1)], "out of range");
        // A relocation pointing past the symbol table.
        let mut past = RELOCS.to_vec();
        past[0].2 = 9;
        refused(tiny_elf(&past, SHT_RELA.0), &[(4, 1)], "refers to symbol 9");
        // A group section whose signature is a symbol index.
        let mut grouped = tiny_elf(RELOCS, SHT_RELA.0);
        let shoff = view::<Header>(&grouped, 0).e_shoff(LE) as usize;
        view_mut::<Shdr>(&mut grouped, shoff + SHDR_SIZE).sh_type.set(LE, SHT_GROUP);
        refused(grouped, &[(3, 1)], "section .text is SHT_GROUP");
        // Another machine (EM_RISCV = 243) is refused when read.
        let mut riscv = tiny_elf(RELOCS, SHT_RELA.0);
        view_mut::<Header>(&mut riscv, 0).e_machine.set(LE, object::elf::Machine(243));
        let e = ElfEdit::new(riscv).err().unwrap();
        assert!(e.msg.contains("(e_machine 243), not x86_64 or aarch64"), "{e}");
        assert_eq!(e.kind, crate::error::Kind::Unsupported, "another machine is valid input bootlink does not handle");
        // Livepatch relocations (.rela.text is section 2).
        let mut klp = tiny_elf(RELOCS, SHT_RELA.0);
        let at = view::<Header>(&klp, 0).e_shoff(LE) as usize + 2 * SHDR_SIZE;
        view_mut::<Shdr>(&mut klp, at).sh_flags.set(LE, object::elf::SectionFlags(SHF_RELA_LIVEPATCH));
        refused(klp, &[(3, 1)], "section .rela.text holds livepatch relocations");
    }
}
