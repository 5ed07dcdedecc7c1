//! Thin, checked access to 64-bit little-endian ELF files through the
//! `object` crate's zero-copy types. The checks here turn foreign input into
//! one-line errors before any parser sees it.

use object::LittleEndian;
use object::elf::{self, FileHeader64, SectionHeader64, Sym64};
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym, SymbolTable};

pub type Endian = LittleEndian;
pub const LE: LittleEndian = LittleEndian;
pub type Header = FileHeader64<Endian>;
pub type Shdr = SectionHeader64<Endian>;
pub type Symbol = Sym64<Endian>;

/// The ELF file types bootlink reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A relocatable object (a kernel module).
    Relocatable,
    /// A linked executable (vmlinux).
    Executable,
    /// A user-space program or shared library (ET_DYN, or a non-PIE ET_EXEC).
    Dynamic,
}

/// Check the ELF identification and file type, with messages a person can act on.
pub fn check_ident(data: &[u8], want: Want) -> Result<(), String> {
    if data.len() < 4 || data[..4] != elf::ELFMAG {
        return Err("not an ELF file (no ELF magic)".into());
    }
    if data.len() < std::mem::size_of::<Header>() {
        return Err(format!("truncated ELF file: {} bytes, shorter than an ELF header", data.len()));
    }
    match elf::FileClass(data[4]) {
        elf::ELFCLASS64 => {}
        elf::ELFCLASS32 => {
            return Err(
                "32-bit ELF (ELFCLASS32) is not supported: bootlink reads 64-bit little-endian kernels and modules"
                    .into(),
            );
        }
        c => return Err(format!("invalid ELF class {}", c.0)),
    }
    match elf::DataEncoding(data[5]) {
        elf::ELFDATA2LSB => {}
        elf::ELFDATA2MSB => {
            return Err(
                "big-endian ELF is not supported: bootlink reads 64-bit little-endian kernels and modules".into()
            );
        }
        d => return Err(format!("invalid ELF data encoding {}", d.0)),
    }
    let hdr = Header::parse(data).map_err(|e| format!("bad ELF header: {e}"))?;
    let ty = hdr.e_type(LE);
    match (want, ty) {
        (Want::Relocatable, elf::ET_REL)
        | (Want::Executable, elf::ET_EXEC)
        | (Want::Dynamic, elf::ET_DYN | elf::ET_EXEC) => Ok(()),
        (Want::Relocatable, _) => Err(format!(
            "not a kernel module: ELF type is {} (a module is a relocatable object, ET_REL)",
            type_name(ty)
        )),
        (Want::Executable, _) => {
            Err(format!("not a kernel image: ELF type is {} (vmlinux is an executable, ET_EXEC)", type_name(ty)))
        }
        (Want::Dynamic, _) => {
            Err(format!("not a program or shared library: ELF type is {} (want ET_DYN or ET_EXEC)", type_name(ty)))
        }
    }
}

fn type_name(ty: elf::FileType) -> &'static str {
    match ty {
        elf::ET_NONE => "ET_NONE",
        elf::ET_REL => "ET_REL",
        elf::ET_EXEC => "ET_EXEC",
        elf::ET_DYN => "ET_DYN (a shared object or PIE)",
        elf::ET_CORE => "ET_CORE (a core dump)",
        _ => "unknown",
    }
}

/// A parsed ELF file: header, sections and (if present) the symbol table.
pub struct Elf<'d> {
    pub data: &'d [u8],
    pub header: &'d Header,
    pub sections: SectionTable<'d, Header>,
}

impl<'d> Elf<'d> {
    pub fn parse(data: &'d [u8], want: Want) -> Result<Elf<'d>, String> {
        check_ident(data, want)?;
        let header = Header::parse(data).map_err(|e| format!("bad ELF header: {e}"))?;
        let sections =
            header.sections(LE, data).map_err(|e| format!("truncated or corrupt ELF section headers: {e}"))?;
        Ok(Elf { data, header, sections })
    }

    pub fn machine(&self) -> elf::Machine {
        self.header.e_machine(LE)
    }

    pub fn section(&self, name: &str) -> Option<(usize, &'d Shdr)> {
        self.sections.section_by_name(LE, name.as_bytes()).map(|(i, s)| (i.0, s))
    }

    /// The file range of a section reserved at link time for a host tool
    /// to fill in place (None when absent); an error when it holds no file
    /// data or lies outside the file.
    pub fn reserved_range(&self, name: &str) -> Result<Option<(usize, usize)>, String> {
        let Some((_, sh)) = self.section(name) else { return Ok(None) };
        if sh.sh_type(LE) != elf::SHT_PROGBITS {
            return Err(format!("{name} holds no file data"));
        }
        let (off, size) = sh.file_range(LE).ok_or_else(|| format!("{name} has no file data"))?;
        let (off, size) = (off as usize, size as usize);
        if off.checked_add(size).is_none_or(|end| end > self.data.len()) {
            return Err(format!("truncated ELF: {name} lies outside the file"));
        }
        Ok(Some((off, size)))
    }

    pub fn section_name(&self, shdr: &Shdr) -> &'d [u8] {
        self.sections.section_name(LE, shdr).unwrap_or(b"")
    }

    pub fn section_by_index(&self, index: usize) -> Option<&'d Shdr> {
        self.sections.section(object::SectionIndex(index)).ok()
    }

    /// The bytes of a section; empty for SHT_NOBITS. Errors if the section
    /// points outside the file.
    pub fn section_data(&self, shdr: &Shdr) -> Result<&'d [u8], String> {
        shdr.data(LE, self.data).map_err(|_| {
            format!(
                "truncated or corrupt ELF: section {} lies outside the file",
                String::from_utf8_lossy(self.section_name(shdr))
            )
        })
    }

    pub fn named_section_data(&self, name: &str) -> Result<Option<&'d [u8]>, String> {
        match self.section(name) {
            Some((_, s)) => self.section_data(s).map(Some),
            None => Ok(None),
        }
    }

    /// The dynamic symbol table (.dynsym), as the dynamic loader indexes it.
    pub fn dynamic_symbols(&self) -> Result<SymbolTable<'d, Header>, String> {
        self.sections
            .symbols(LE, self.data, elf::SHT_DYNSYM)
            .map_err(|e| format!("truncated or corrupt ELF dynamic symbol table: {e}"))
    }

    /// The GNU build ID (NT_GNU_BUILD_ID in an SHT_NOTE section), if any.
    pub fn build_id(&self) -> Result<Option<&'d [u8]>, String> {
        for shdr in self.sections.iter() {
            if shdr.sh_type(LE) != elf::SHT_NOTE {
                continue;
            }
            let notes = shdr.notes(LE, self.data).map_err(|e| format!("corrupt ELF note section: {e}"))?;
            let Some(mut notes) = notes else { continue };
            while let Some(note) = notes.next().map_err(|e| format!("corrupt ELF note: {e}"))? {
                if note.name() == elf::ELF_NOTE_GNU && note.n_type(LE) == elf::NT_GNU_BUILD_ID {
                    return Ok(Some(note.desc()));
                }
            }
        }
        Ok(None)
    }

    pub fn symbols(&self) -> Result<SymbolTable<'d, Header>, String> {
        self.sections
            .symbols(LE, self.data, elf::SHT_SYMTAB)
            .map_err(|e| format!("truncated or corrupt ELF symbol table: {e}"))
    }
}

pub fn sym_name<'d>(symtab: &SymbolTable<'d, Header>, sym: &Symbol) -> Result<&'d [u8], String> {
    sym.name(LE, symtab.strings())
        .map_err(|_| "corrupt ELF symbol table: a symbol name lies outside the string table".to_string())
}

/// A NUL-terminated string at `offset` in `data`.
pub fn cstr(data: &[u8], offset: usize) -> Option<&[u8]> {
    let rest = data.get(offset..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

pub fn read_u32(data: &[u8], offset: usize) -> Option<u32> {
    data.get(offset..offset.checked_add(4)?).map(|b| u32::from_le_bytes(b.try_into().unwrap()))
}

pub fn read_i32(data: &[u8], offset: usize) -> Option<i32> {
    read_u32(data, offset).map(|v| v as i32)
}

pub fn read_u64(data: &[u8], offset: usize) -> Option<u64> {
    data.get(offset..offset.checked_add(8)?).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
}

pub fn machine_name(m: elf::Machine) -> &'static str {
    match m {
        elf::EM_X86_64 => "x86_64",
        elf::EM_AARCH64 => "aarch64",
        elf::EM_RISCV => "riscv64",
        elf::EM_PPC64 => "ppc64",
        elf::EM_S390 => "s390x",
        elf::EM_LOONGARCH => "loongarch64",
        _ => "other",
    }
}
