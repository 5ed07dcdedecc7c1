//! What the kernel's `find_kallsyms_symbol` chooses among for a module
//! being loaded, seen at build time: the named, defined symbols of each
//! section, by offset. The ftrace check asks it for the symbol at or before
//! an offset of a section; it also says whether anything outside a section
//! could land inside one at load (which would make a build-time answer
//! unsafe).

use object::elf::{SHN_ABS, SHN_COMMON, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX};
use object::read::elf::{SectionHeader, Sym};

use super::unsupported;
use crate::elf::{self, Elf, LE};
use crate::error::Error;

/// x86-64's MODULES_VADDR without KASLR (the lowest it can be): kernel
/// image addresses (what preresolving makes SHN_ABS) are all below it.
const MODULE_AREA: u64 = 0xffff_ffff_a000_0000;

/// The kernel skips ARM mapping symbols (`$a`, `$d`, `$t`, `$x`, alone or
/// followed by '.') wherever modules are built; so do we.
fn is_mapping_symbol(name: &[u8]) -> bool {
    name.len() >= 2 && name[0] == b'$' && b"axtd".contains(&name[1]) && (name.len() == 2 || name[2] == b'.')
}

pub struct SectionSymbols {
    /// Per section index: (offset, symbol index) of its named symbols,
    /// sorted by offset, then index.
    by_section: Vec<Vec<(u64, u32)>>,
}

impl SectionSymbols {
    /// Read the module's symbols. Refused (with the reason) when a symbol
    /// could land where the build cannot see it: a value past its
    /// section's end, SHN_COMMON or SHN_XINDEX, or an absolute value in the
    /// module area.
    pub fn read(elf: &Elf) -> std::result::Result<SectionSymbols, Error> {
        let symtab = elf.symbols()?;
        let nsec = elf.sections.len();
        let mut by_section = vec![Vec::new(); nsec];
        for (i, sym) in symtab.iter().enumerate().skip(1) {
            let name = elf::sym_name(&symtab, sym)?;
            let shndx = sym.st_shndx(LE);
            let value = sym.st_value(LE);
            if shndx == SHN_UNDEF || name.is_empty() || is_mapping_symbol(name) {
                continue;
            }
            let show = || String::from_utf8_lossy(name).into_owned();
            match shndx {
                SHN_ABS if value >= MODULE_AREA => {
                    return Err(unsupported(format!(
                        "absolute symbol {} = {value:#x} lies in the module area",
                        show()
                    )));
                }
                SHN_ABS => continue,
                SHN_COMMON | SHN_XINDEX => {
                    return Err(unsupported(format!("symbol {} has section index {:#x}", show(), shndx.0)));
                }
                s if s.0 >= SHN_LORESERVE => {
                    return Err(unsupported(format!("symbol {} has section index {:#x}", show(), s.0)));
                }
                _ => {}
            }
            let sec = shndx.0 as usize;
            let size = elf
                .section_by_index(sec)
                .map(|s| s.sh_size(LE))
                .ok_or_else(|| unsupported(format!("symbol {} is in section {sec}, past the section table", show())))?;
            if value > size {
                return Err(unsupported(format!(
                    "symbol {} = {value:#x} lies past the end of its section ({size:#x})",
                    show()
                )));
            }
            by_section[sec].push((value, i as u32));
        }
        for v in &mut by_section {
            v.sort_unstable();
        }
        Ok(SectionSymbols { by_section })
    }

    /// The closest symbol at or before `offset` in section `sec`: (its
    /// offset, its index); the lowest index among symbols at one offset.
    pub(crate) fn at_or_before(&self, sec: usize, offset: u64) -> Option<(u64, u32)> {
        let v = self.by_section.get(sec)?;
        let n = v.partition_point(|&(o, _)| o <= offset);
        let (best, _) = *v.get(n.checked_sub(1)?)?;
        let first = v.partition_point(|&(o, _)| o < best);
        Some(v[first])
    }
}
