//! What a kernel module must satisfy before any command reads or rewrites
//! it, beyond the ELF layout [`crate::elf::check_layout`] checks: the
//! struct module section, the symbol table's split into locals and globals,
//! every relocation inside its symbol table and its target section,
//! `__versions` names, and the code tables the loader writes through
//! (`__mcount_loc`, the ORC unwind tables) pointing into code. Each
//! refusal is one line saying what is wrong, so a damaged module is
//! refused as bad input rather than rewritten out of bounds.

use object::elf::{SHF_ALLOC, SHF_EXECINSTR, SHN_LORESERVE, SHT_NOBITS, SHT_PROGBITS, SHT_REL, SHT_RELA, STB_LOCAL};
use object::read::elf::{SectionHeader, Sym, SymbolTable};

use crate::elf::{Elf, Header, LE, ReadError, Rel, Rela, records};

pub(crate) const THIS_MODULE: &str = ".gnu.linkonce.this_module";
/// struct module's first fields: state (4, padded to 8), list (16), name
/// (MODULE_NAME_LEN, 56). A section smaller than that cannot be a struct
/// module of any configuration (6.1 x86-64's is 896 bytes in Debian's).
pub(crate) const THIS_MODULE_MIN: u64 = 80;
/// Cache lines are 64 bytes where bootlink reads modules (x86-64's
/// X86_L1_CACHE_SHIFT is 6 or 7, arm64's L1_CACHE_SHIFT 6), and struct
/// module is `____cacheline_aligned` (include/linux/module.h, 6.1 and
/// 6.12): its size is a multiple of this on every kernel.
pub(crate) const STRUCT_MODULE_ALIGN: u64 = 64;
/// struct modversion_info on 64-bit: u64 crc + char name[56].
const MODVERSION_LEN: usize = 64;
/// sizeof(struct orc_entry).
const ORC_ENTRY: u64 = 6;

/// Every check of this file, in the order a reader would trip over them.
pub fn check(elf: &Elf, symtab: &SymbolTable<'_, Header>) -> Result<(), ReadError> {
    check_this_module(elf)?;
    check_symbol_order(elf, symtab)?;
    check_relocations(elf, symtab.len())?;
    check_versions(elf)?;
    check_code_table(elf, symtab, "__mcount_loc", 8, false)?;
    check_code_table(elf, symtab, ".orc_unwind_ip", 4, true)?;
    check_orc_entries(elf)
}

/// The kernel's loader finds struct module in `.gnu.linkonce.this_module`
/// among the SHF_ALLOC sections and copies it from the file.
fn check_this_module(elf: &Elf) -> Result<(), ReadError> {
    let (_, sh) = elf.section(THIS_MODULE).ok_or(ReadError::NotModule("no .gnu.linkonce.this_module section"))?;
    if sh.sh_type(LE) == SHT_NOBITS {
        return Err(ReadError::Corrupt(format!("corrupt module: {THIS_MODULE} holds no file data (SHT_NOBITS)")));
    }
    if !sh.sh_flags(LE).contains(SHF_ALLOC) {
        return Err(ReadError::Corrupt(format!(
            "corrupt module: {THIS_MODULE} is not SHF_ALLOC, so the kernel finds no module in it"
        )));
    }
    let size = sh.sh_size(LE);
    if size < THIS_MODULE_MIN {
        return Err(ReadError::Corrupt(format!(
            "corrupt module: {THIS_MODULE} is {size} bytes, smaller than struct module's first {THIS_MODULE_MIN} (state, list, name)"
        )));
    }
    if !size.is_multiple_of(STRUCT_MODULE_ALIGN) {
        return Err(ReadError::Corrupt(format!(
            "corrupt module: {THIS_MODULE} is {size} bytes, not a multiple of {STRUCT_MODULE_ALIGN}: struct module is \
             cache-line aligned, so no kernel's is that size"
        )));
    }
    Ok(())
}

/// `.symtab`'s sh_info is one past the last local symbol: every symbol
/// before it must be local and every one from it on global or weak (the
/// symbol-table editors keep or drop symbols by that split).
fn check_symbol_order(elf: &Elf, symtab: &SymbolTable<'_, Header>) -> Result<(), ReadError> {
    let sh = elf
        .section_by_index(symtab.section().0)
        .ok_or_else(|| ReadError::Corrupt("corrupt module: the symbol table is not a section".into()))?;
    if sh.sh_entsize(LE) != 24 {
        return Err(ReadError::Corrupt(format!("corrupt symbol table: entry size {}, not 24", sh.sh_entsize(LE))));
    }
    let first_global = sh.sh_info(LE) as usize;
    let n = symtab.len();
    if first_global == 0 || first_global > n {
        return Err(ReadError::Corrupt(format!(
            "corrupt symbol table: sh_info {first_global} (the first global symbol) is not within its {n} symbols"
        )));
    }
    for (i, sym) in symtab.iter().enumerate().skip(1) {
        let local = sym.st_bind() == STB_LOCAL;
        if local == (i < first_global) {
            continue;
        }
        let name = crate::elf::sym_name(symtab, sym).map(crate::elf::printable).unwrap_or_default();
        return Err(ReadError::Corrupt(if local {
            format!(
                "corrupt symbol table: local symbol {name} (#{i}) comes after sh_info {first_global}, among the globals"
            )
        } else {
            format!(
                "corrupt symbol table: global symbol {name} (#{i}) comes before sh_info {first_global}, among the locals"
            )
        }));
    }
    Ok(())
}

/// Every relocation section lies inside the file (checked by the layout),
/// holds whole entries, applies to a section of the file, and each entry
/// names a symbol of the symbol table and writes inside its target section.
pub(crate) fn check_relocations(elf: &Elf, nsyms: usize) -> Result<(), ReadError> {
    let machine = elf.machine();
    for (idx, sh) in elf.sections.iter().enumerate() {
        let ty = sh.sh_type(LE);
        if ty != SHT_RELA && ty != SHT_REL {
            continue;
        }
        let name = crate::elf::printable(elf.section_name(sh));
        let entsize = if ty == SHT_RELA { 24 } else { 16 };
        let data = elf.section_data(sh).map_err(|_| {
            ReadError::OutsideFile(format!(
                "corrupt relocation section {name} (#{idx}): its offset and size lie outside the file"
            ))
        })?;
        if sh.sh_entsize(LE) != entsize as u64 || data.len() % entsize != 0 {
            return Err(ReadError::Corrupt(format!(
                "corrupt relocation section {name} (#{idx}): entry size {} and size {} (want whole {entsize}-byte entries)",
                sh.sh_entsize(LE),
                data.len()
            )));
        }
        let target = sh.sh_info(LE) as usize;
        let tsh = elf.section_by_index(target).filter(|_| target != 0).ok_or_else(|| {
            ReadError::Corrupt(format!(
                "corrupt relocation section {name} (#{idx}): it applies to section {target}, not a section of the file"
            ))
        })?;
        let tsize = tsh.sh_size(LE);
        let tname = crate::elf::printable(elf.section_name(tsh));
        // A RELA entry starts with a REL entry's fields: the REL view of
        // each entry's head reads both kinds.
        for (j, e) in data.chunks_exact(entsize).enumerate() {
            let r: &Rel = crate::elf::view(e, 0);
            let offset = r.r_offset.get(LE);
            let sym = r.r_sym(LE) as usize;
            if sym >= nsyms {
                return Err(ReadError::Corrupt(format!(
                    "corrupt relocation section {name} (#{idx}): entry {j} names symbol {sym}, past the {nsyms} symbols of .symtab"
                )));
            }
            let width = crate::reloc::width(machine, r.r_type(LE).0);
            if offset.checked_add(width).is_none_or(|end| end > tsize) {
                return Err(ReadError::Corrupt(format!(
                    "corrupt relocation section {name} (#{idx}): entry {j} writes {width} bytes at {offset:#x}, outside {tname} ({tsize:#x} bytes)"
                )));
            }
        }
    }
    Ok(())
}

/// `__versions`: whole 64-byte entries, each name NUL-terminated within
/// its 56 bytes (the kernel compares them with strcmp).
fn check_versions(elf: &Elf) -> Result<(), ReadError> {
    let Some(v) = elf.named_section_data("__versions")? else { return Ok(()) };
    if v.len() % MODVERSION_LEN != 0 {
        return Err(ReadError::Corrupt(format!(
            "corrupt __versions section: {} bytes is not a multiple of {MODVERSION_LEN}",
            v.len()
        )));
    }
    for (i, entry) in v.chunks_exact(MODVERSION_LEN).enumerate() {
        if !entry[8..].contains(&0) {
            return Err(ReadError::Corrupt(format!(
                "corrupt __versions section: the name of entry {i} has no terminating NUL"
            )));
        }
    }
    Ok(())
}

/// A table of code addresses the kernel writes through or into
/// (`__mcount_loc`: ftrace patches each call site; `.orc_unwind_ip`: the
/// unwinder's addresses): file data in whole records, each relocation
/// against a symbol of a code section, landing inside it (`end_ok`: or
/// just past its end, where ORC puts a section's terminator).
fn check_code_table(
    elf: &Elf,
    symtab: &SymbolTable<'_, Header>,
    name: &str,
    record: u64,
    end_ok: bool,
) -> Result<(), ReadError> {
    let Some((index, sh)) = elf.section(name) else { return Ok(()) };
    if sh.sh_type(LE) != SHT_PROGBITS {
        return Err(ReadError::Corrupt(format!(
            "corrupt module: {name} holds no file data (type {})",
            sh.sh_type(LE).0
        )));
    }
    if sh.sh_size(LE) % record != 0 {
        return Err(ReadError::Corrupt(format!(
            "corrupt module: {name} is not a whole number of {record}-byte records"
        )));
    }
    for rsh in elf.sections.iter() {
        if rsh.sh_type(LE) != SHT_RELA || rsh.sh_info(LE) as usize != index {
            continue;
        }
        let data = elf.section_data(rsh)?;
        for e in records::<Rela>(data) {
            let (at, sym, addend) = (e.r_offset.get(LE), e.r_sym(LE, false) as usize, e.r_addend.get(LE));
            let s = symtab.symbol(object::read::SymbolIndex(sym)).map_err(|_| {
                ReadError::Corrupt(format!("corrupt module: a record of {name} names a symbol past the symbol table"))
            })?;
            let shndx = s.st_shndx(LE).0;
            let target = (shndx != 0 && shndx < SHN_LORESERVE).then(|| elf.section_by_index(shndx as usize)).flatten();
            let Some(target) = target else {
                return Err(ReadError::Corrupt(format!(
                    "corrupt module: the record of {name} at {at:#x} points outside any section"
                )));
            };
            let tname = crate::elf::printable(elf.section_name(target));
            if !target.sh_flags(LE).contains(SHF_EXECINSTR) {
                return Err(ReadError::Corrupt(format!(
                    "corrupt module: the record of {name} at {at:#x} points into {tname} (section {shndx}), which is not code"
                )));
            }
            let size = target.sh_size(LE);
            let offset = s.st_value(LE) as i128 + addend as i128;
            let inside = offset >= 0 && (offset < size as i128 || (end_ok && offset == size as i128));
            if !inside {
                let to = if offset < 0 { format!("-{:#x}", -offset) } else { format!("{offset:#x}") };
                return Err(ReadError::Corrupt(format!(
                    "corrupt module: the record of {name} at {at:#x} points to {to}, outside {tname} ({size:#x} bytes)"
                )));
            }
        }
    }
    Ok(())
}

/// `.orc_unwind` holds one 6-byte entry per address of `.orc_unwind_ip`.
fn check_orc_entries(elf: &Elf) -> Result<(), ReadError> {
    let (ip, orc) = (elf.section(".orc_unwind_ip"), elf.section(".orc_unwind"));
    let (ip_size, orc_sh) = match (ip, orc) {
        (None, None) => return Ok(()),
        (Some((_, ip)), Some((_, orc))) => (ip.sh_size(LE), orc),
        (Some(_), None) => return Err(ReadError::Corrupt("corrupt module: .orc_unwind_ip without .orc_unwind".into())),
        (None, Some(_)) => return Err(ReadError::Corrupt("corrupt module: .orc_unwind without .orc_unwind_ip".into())),
    };
    if orc_sh.sh_type(LE) != SHT_PROGBITS {
        return Err(ReadError::Corrupt("corrupt module: .orc_unwind holds no file data".into()));
    }
    let orc_size = orc_sh.sh_size(LE);
    if orc_size != ip_size / 4 * ORC_ENTRY {
        return Err(ReadError::Corrupt(format!(
            "corrupt module: .orc_unwind has {orc_size} bytes for the {} addresses of .orc_unwind_ip (want {ORC_ENTRY} each)",
            ip_size / 4
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use object::read::elf::{FileHeader, SectionHeader};

    use object::elf::{ET_EXEC, SHF_ALLOC, SHT_NOBITS, SHT_PROGBITS, SectionFlags};

    use super::{MODVERSION_LEN, THIS_MODULE};
    use crate::compress::Compression;
    use crate::elf::{Elf, Header, LE, ReadError, Rela, Shdr, Symbol, Want, view_mut};
    use crate::error::Kind;

    /// A real module (tests/fixtures: kbuild against Debian's headers).
    const PLAIN: &[u8] = include_bytes!("../../../tests/fixtures/modules/bl_plain.ko");

    /// Section `name`: its index, the file offset of its header, its file
    /// offset and size.
    fn header(name: &str) -> (usize, usize, usize, usize) {
        let elf = Elf::parse(PLAIN, Want::Relocatable).unwrap();
        let (i, sh) = elf.section(name).unwrap();
        let shoff = elf.header.e_shoff(LE) as usize;
        (i, shoff + i * size_of::<Shdr>(), sh.sh_offset(LE) as usize, sh.sh_size(LE) as usize)
    }

    fn refused(what: &str, patch: impl Fn(&mut Vec<u8>), want: &str) -> ReadError {
        let mut d = PLAIN.to_vec();
        patch(&mut d);
        let e = crate::module::parse(Path::new("bl_plain.ko"), &d, Compression::None).err();
        let e = e.unwrap_or_else(|| panic!("{what}: accepted"));
        let text = e.to_string();
        assert!(text.contains(want), "{what}: {text}");
        assert!(!text.contains('\n'), "{what}: more than one line: {text}");
        e
    }

    /// The section header at file offset `at`, to change a field by name.
    fn shdr(d: &mut [u8], at: usize) -> &mut Shdr {
        view_mut(d, at)
    }

    /// The relocation at file offset `at`.
    fn rela(d: &mut [u8], at: usize) -> &mut Rela {
        view_mut(d, at)
    }

    fn elf_header(d: &mut [u8]) -> &mut Header {
        view_mut(d, 0)
    }

    #[test]
    fn every_class_of_damage_is_refused_with_its_reason() {
        assert!(crate::module::parse(Path::new("bl_plain.ko"), PLAIN, Compression::None).is_ok());
        let (_, this, _, _) = header(THIS_MODULE);
        refused("this_module small", |d| shdr(d, this).sh_size.set(LE, 16), "is 16 bytes, smaller than");
        refused("this_module odd", |d| shdr(d, this).sh_size.set(LE, 895), "is 895 bytes, not a multiple of 64");
        let not_alloc = |d: &mut Vec<u8>| {
            let sh = shdr(d, this);
            sh.sh_flags.set(LE, SectionFlags(sh.sh_flags.get(LE).0 & !SHF_ALLOC.0));
        };
        refused("this_module not alloc", not_alloc, "is not SHF_ALLOC");
        refused("this_module nobits", |d| shdr(d, this).sh_type.set(LE, SHT_NOBITS), "holds no file data (SHT_NOBITS)");
        let len = PLAIN.len() as u64;
        let e = refused("this_module past end", |d| shdr(d, this).sh_offset.set(LE, len - 8), "lies outside the file");
        assert!(matches!(e, ReadError::OutsideFile(_)), "{e:?}");
        let (_, _, mcount, _) = header(".rela__mcount_loc");
        refused("r_offset", |d| rela(d, mcount).r_offset.set(LE, 0x10), "writes 8 bytes at 0x10, outside __mcount_loc");
        refused("r_offset wraps", |d| rela(d, mcount).r_offset.set(LE, u64::MAX), "outside __mcount_loc");
        refused("mcount target", |d| rela(d, mcount).r_addend.set(LE, 0x10_0000), "__mcount_loc at 0x0 points to");
        let (_, orc_ip, _, _) = header(".orc_unwind_ip");
        refused("orc outside file", |d| shdr(d, orc_ip).sh_offset.set(LE, len), "lies outside the file");
        let (_, _, orc_rela, _) = header(".rela.orc_unwind_ip");
        refused("orc target", |d| rela(d, orc_rela).r_addend.set(LE, -8), ".orc_unwind_ip at");
        let (_, _, versions, _) = header("__versions");
        // An entry: an 8-byte CRC, then the name in the rest.
        refused(
            "versions",
            |d| d[versions + 8..versions + MODVERSION_LEN].fill(b'A'),
            "entry 0 has no terminating NUL",
        );
        let (_, symtab, _, sym_size) = header(".symtab");
        let info = Elf::parse(PLAIN, Want::Relocatable).unwrap().section(".symtab").unwrap().1.sh_info(LE);
        let n = (sym_size / size_of::<Symbol>()) as u32;
        refused("global before sh_info", |d| shdr(d, symtab).sh_info.set(LE, n), "comes before sh_info");
        refused("local after sh_info", |d| shdr(d, symtab).sh_info.set(LE, info - 1), "comes after sh_info");
        let e = refused(
            "aarch64",
            |d| elf_header(d).e_machine.set(LE, object::elf::EM_AARCH64),
            "module built for aarch64 (e_machine 183), not x86_64",
        );
        assert!(matches!(e, ReadError::WrongMachine { found: object::elf::EM_AARCH64, .. }), "{e:?}");
        assert_eq!(e.kind(), Kind::Unsupported);
        let e = refused("ELFCLASS32", |d| elf_header(d).e_ident.class = object::elf::ELFCLASS32, "32-bit ELF");
        assert!(matches!(e, ReadError::Class32) && e.kind() == Kind::Unsupported, "{e:?}");
        let e =
            refused("ET_EXEC", |d| elf_header(d).e_type.set(LE, ET_EXEC), "not a kernel module: ELF type is ET_EXEC");
        assert!(matches!(e, ReadError::WrongType { want: Want::Relocatable, .. }) && e.kind() == Kind::Format);
        let shoff = Elf::parse(PLAIN, Want::Relocatable).unwrap().header.e_shoff(LE) as usize;
        refused("section 0", |d| shdr(d, shoff).sh_type.set(LE, SHT_PROGBITS), "section 0 is of type 1, not SHT_NULL");
        let (_, _, shstr_off, shstr_size) = header(".shstrtab");
        refused("shstrtab NUL", |d| d[shstr_off + shstr_size - 1] = b'x', "does not end in a NUL");
        refused("name offset", |d| shdr(d, shoff + size_of::<Shdr>()).sh_name.set(LE, shstr_size as u32), "past the");
        let (_, text, text_off, _) = header(".text.unlikely");
        let (_, modinfo, _, _) = header(".modinfo");
        refused("overlap", |d| shdr(d, modinfo).sh_offset.set(LE, text_off as u64), "overlaps section");
        refused("size wraps", |d| shdr(d, text).sh_size.set(LE, u64::MAX), "lies outside the file");
    }

    /// A file cut short, and the ELF header fields that place the section
    /// header table, are said in the file's own numbers (not `object`'s
    /// "offset/size/alignment"); names from a damaged name table stay on
    /// one line; the machine is named.
    #[test]
    fn truncation_and_the_section_header_table_are_said_as_such() {
        let len = PLAIN.len();
        let shoff = Elf::parse(PLAIN, Want::Relocatable).unwrap().header.e_shoff(LE);
        let shnum = Elf::parse(PLAIN, Want::Relocatable).unwrap().sections.len();
        let e = refused("cut", |d| d.truncate(len - 100), "truncated or corrupt ELF: the section header table (");
        let want =
            format!("ends at {:#x}, past the end of the file ({:#x} bytes)", shoff as usize + 64 * shnum, len - 100);
        assert!(e.to_string().contains(&want), "{e}");
        assert!(std::error::Error::source(&e).is_some(), "object's error is kept as the cause");
        refused("cut in the magic", |d| d.truncate(2), "truncated ELF file: 2 bytes, shorter than an ELF header");
        refused("empty", |d| d.clear(), "not an ELF file (the file is empty)");
        refused("e_shnum", |d| elf_header(d).e_shnum.set(LE, 0xffff), "(65535 entries of 64 bytes at offset");
        refused("e_shoff", |d| elf_header(d).e_shoff.set(LE, u64::MAX - 8), "lies beyond any file offset");
        refused("e_shentsize", |d| elf_header(d).e_shentsize.set(LE, 32), "section header entry size (e_shentsize) 32");
        let (strndx, shstr, _, _) = header(".shstrtab");
        let e =
            refused("name table", |d| shdr(d, shstr).sh_offset.set(LE, len as u64), "the section name table (section");
        assert!(e.to_string().contains(&format!("(section {strndx}) lies outside the file")), "{e}");
        refused("empty .symtab", |d| shdr(d, header(".symtab").1).sh_size.set(LE, 0), "holds no symbols (size 0)");
        // A newline in a section name: the overlap naming it stays one line.
        let (_, _, this_off, _) = header(THIS_MODULE);
        let (_, modinfo, _, _) = header(".modinfo");
        let (_, _, shstr_off, _) = header(".shstrtab");
        let newline = |d: &mut Vec<u8>| {
            let at = shstr_off + shdr(d, modinfo).sh_name.get(LE) as usize;
            d[at + 1] = b'\n';
            shdr(d, modinfo).sh_offset.set(LE, this_off as u64);
        };
        let e = refused("newline in a name", newline, "(.\\nodinfo)");
        assert!(e.to_string().contains(" overlaps section "), "{e}");
        refused(
            "mips",
            |d| elf_header(d).e_machine.set(LE, object::elf::EM_MIPS),
            "module built for mips (e_machine 8)",
        );
        let unknown = |d: &mut Vec<u8>| elf_header(d).e_machine.set(LE, object::elf::Machine(999));
        refused("unknown machine", unknown, "module built for an unknown machine (e_machine 999)");
    }
}
