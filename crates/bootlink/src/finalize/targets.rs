//! Where each record of a table of code addresses points: `__mcount_loc`
//! (absolute addresses) and `.orc_unwind_ip` (32-bit PC-relative) are, in a
//! module, one relocation per record against a symbol of a text section.

use object::elf::{SHN_LORESERVE, SHN_UNDEF, SHT_RELA};
use object::read::elf::{Rela, SectionHeader, Sym};

use super::unsupported;
use crate::elf::{Elf, LE};
use crate::error::Error;

/// A record's target: a section index and the offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub section: usize,
    pub offset: u64,
}

/// The targets of the `record`-byte records of section `name`, one
/// relocation of type `rtype` at the start of each; None when the module
/// has no such section. Anything else is refused with the reason.
pub(crate) fn of_records(
    elf: &Elf,
    name: &str,
    record: u64,
    rtype: u32,
) -> std::result::Result<Option<Vec<Target>>, Error> {
    let Some((index, sh)) = elf.section(name) else { return Ok(None) };
    let size = sh.sh_size(LE);
    if size % record != 0 {
        return Err(unsupported(format!("{name} is not a whole number of {record}-byte records")));
    }
    let count = (size / record) as usize;
    let relas: Vec<_> =
        elf.sections.iter().filter(|s| s.sh_type(LE) == SHT_RELA && s.sh_info(LE) as usize == index).collect();
    let [rela] = relas[..] else {
        return Err(unsupported(format!("{name} has {} relocation sections, not one", relas.len())));
    };
    let entries = rela
        .data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(LE, elf.data)
        .map_err(|_| unsupported(format!("the relocations of {name} lie outside the file")))?;
    let symtab = elf.symbols()?;
    let mut targets: Vec<Option<Target>> = vec![None; count];
    for r in entries {
        let (at, ty) = (r.r_offset(LE), r.r_type(LE, false).0);
        if ty != rtype {
            return Err(unsupported(format!("{name} has a relocation of type {ty} at {at:#x} (expected {rtype})")));
        }
        if at % record != 0 || at / record >= count as u64 {
            return Err(unsupported(format!("{name} has a relocation at {at:#x}, not at the start of a record")));
        }
        let sym = symtab
            .symbol(object::read::SymbolIndex(r.r_sym(LE, false) as usize))
            .map_err(|_| unsupported(format!("a relocation of {name} names a symbol past the symbol table")))?;
        let shndx = sym.st_shndx(LE);
        if shndx == SHN_UNDEF || shndx.0 >= SHN_LORESERVE {
            return Err(unsupported(format!(
                "a relocation of {name} at {at:#x} is against a symbol outside any section"
            )));
        }
        let offset = sym.st_value(LE).wrapping_add(r.r_addend(LE) as u64);
        if targets[(at / record) as usize].replace(Target { section: shndx.0 as usize, offset }).is_some() {
            return Err(unsupported(format!("{name} has two relocations at {at:#x}")));
        }
    }
    targets
        .into_iter()
        .enumerate()
        .map(|(i, t)| t.ok_or_else(|| unsupported(format!("record {i} of {name} has no relocation"))))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
