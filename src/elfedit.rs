//! Small, exact edits of a relocatable ELF64 (a kernel module) in memory:
//! rewrite symbol table entries, and append an empty marker section. Every
//! other byte of the file stays where it was.

use object::elf::{SHN_ABS, SHT_PROGBITS};
use object::read::elf::{FileHeader, SectionHeader};

use crate::elf::{Elf, Header, Shdr, Want, LE};

const SYM_SIZE: usize = 24;
const SHDR_SIZE: usize = 64;

/// A module's bytes being edited.
pub struct ElfEdit {
    pub data: Vec<u8>,
    symtab_off: usize,
    symtab_count: usize,
}

impl ElfEdit {
    pub fn new(data: Vec<u8>) -> Result<ElfEdit, String> {
        let (symtab_off, symtab_count) = {
            let elf = Elf::parse(&data, Want::Relocatable)?;
            let (_, sh) = elf
                .sections
                .enumerate()
                .find(|(_, s)| s.sh_type(LE) == object::elf::SHT_SYMTAB)
                .ok_or("module has no symbol table (.symtab)")?;
            let (off, size) = sh.file_range(LE).ok_or("symbol table has no file data")?;
            let entsize = sh.sh_entsize(LE);
            if entsize != SYM_SIZE as u64 || size % SYM_SIZE as u64 != 0 || off.saturating_add(size) > data.len() as u64 {
                return Err("corrupt symbol table header".into());
            }
            (off as usize, (size / SYM_SIZE as u64) as usize)
        };
        Ok(ElfEdit { data, symtab_off, symtab_count })
    }

    /// Make symbol `index` absolute with value `value` (SHN_UNDEF -> SHN_ABS).
    pub fn make_absolute(&mut self, index: usize, value: u64) {
        assert!(index < self.symtab_count, "symbol index out of range");
        let at = self.symtab_off + index * SYM_SIZE;
        self.data[at + 6..at + 8].copy_from_slice(&SHN_ABS.0.to_le_bytes());
        self.data[at + 8..at + 16].copy_from_slice(&value.to_le_bytes());
    }

    /// Append an empty section named `name` (not allocated: the loader does
    /// not copy it into memory). The section name table is extended with the
    /// new name and moved to the end of the section data, followed by the
    /// section header table with one more entry; the existing section
    /// indices do not change.
    pub fn add_empty_section(&mut self, name: &str) -> Result<(), String> {
        let (shoff, shnum, shstrndx, shstr_off, shstr_size) = {
            let elf = Elf::parse(&self.data, Want::Relocatable)?;
            let h: &Header = elf.header;
            let shoff = h.e_shoff(LE) as usize;
            let shnum = h.e_shnum(LE) as usize;
            let shstrndx = h.e_shstrndx(LE).0 as usize;
            let sh: &Shdr = elf.section_by_index(shstrndx).ok_or("no section name table")?;
            let (off, size) = sh.file_range(LE).ok_or("section name table has no data")?;
            (shoff, shnum, shstrndx, off as usize, size as usize)
        };
        if shnum == 0 || shnum + 1 >= object::elf::SHN_LORESERVE as usize {
            return Err("unsupported section count".into());
        }
        if shoff + shnum * SHDR_SIZE != self.data.len() {
            return Err("section headers are not at the end of the file; cannot append a section".into());
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
        while out.len() % 8 != 0 {
            out.push(0);
        }
        let new_shoff = out.len();
        // Update the name table's header.
        let s = shstrndx * SHDR_SIZE;
        headers[s + 24..s + 32].copy_from_slice(&(new_str_off as u64).to_le_bytes());
        headers[s + 32..s + 40].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
        // The new header: name, PROGBITS, no flags, no address, empty.
        let mut sh = [0u8; SHDR_SIZE];
        sh[0..4].copy_from_slice(&name_off.to_le_bytes());
        sh[4..8].copy_from_slice(&SHT_PROGBITS.0.to_le_bytes());
        sh[24..32].copy_from_slice(&(new_shoff as u64).to_le_bytes());
        sh[48..56].copy_from_slice(&1u64.to_le_bytes()); // sh_addralign
        headers.extend_from_slice(&sh);
        out.extend_from_slice(&headers);
        // e_shoff (0x28) and e_shnum (0x3c).
        out[0x28..0x30].copy_from_slice(&(new_shoff as u64).to_le_bytes());
        out[0x3c..0x3e].copy_from_slice(&((shnum + 1) as u16).to_le_bytes());
        self.data = out;
        Ok(())
    }
}
