//! Thin, checked access to 64-bit little-endian ELF files through the
//! `object` crate's zero-copy types. The checks here turn foreign input into
//! one-line errors before any parser sees it.

use object::LittleEndian;
use object::elf::{self, Dyn64, FileHeader64, Rel64, Rela64, SectionHeader64, Sym64};
use object::pod::Pod;
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym, SymbolTable};

use crate::error::{Error, Kind};

pub(crate) type Endian = LittleEndian;
pub const LE: LittleEndian = LittleEndian;
pub(crate) type Header = FileHeader64<Endian>;
pub(crate) type Shdr = SectionHeader64<Endian>;
pub type Symbol = Sym64<Endian>;
/// A relocation with addend (SHT_RELA, DT_RELA): r_offset, r_info, r_addend.
pub(crate) type Rela = Rela64<Endian>;
/// A relocation without addend (SHT_REL): r_offset, r_info; also the head
/// every [`Rela`] starts with.
pub(crate) type Rel = Rel64<Endian>;
/// An entry of the dynamic section: d_tag, d_val.
pub(crate) type Dyn = Dyn64<Endian>;

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

impl Want {
    /// The machines a command reads this kind of file for unless it is
    /// asked for others: x86-64 for modules and kernel images (what every
    /// command that rewrites them handles); any machine for programs and
    /// libraries (they are checked against each other; empty: any).
    pub(crate) fn default_machines(self) -> &'static [elf::Machine] {
        match self {
            Want::Relocatable | Want::Executable => &[elf::EM_X86_64],
            Want::Dynamic => &[],
        }
    }

    fn what(self) -> &'static str {
        match self {
            Want::Relocatable => "module",
            Want::Executable => "kernel image",
            Want::Dynamic => "program",
        }
    }
}

/// The machines whose modules and kernels the read-only commands
/// (`inspect`, `kernel-info`) analyse; the commands that rewrite read
/// x86-64 only ([`Want::default_machines`]).
pub const ANALYSED_MACHINES: &[elf::Machine] = &[elf::EM_X86_64, elf::EM_AARCH64];

/// Why bytes are not the ELF file (or the kernel module) a command wants to
/// read: the reading layer's errors (`elf`, `modcheck`, `module`). Each
/// displays as the one line the CLI prints after the file's name; callers
/// and tests can match on the variant, and [`Error`] keeps it as its source
/// with the [`Kind`] from [`ReadError::kind`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("not an ELF file (no ELF magic)")]
    NotElf,
    /// Nothing to read: no magic, and nothing cut short either.
    #[error("not an ELF file (the file is empty)")]
    Empty,
    /// The ELF magic, or its first bytes, and then the file ends.
    #[error("truncated ELF file: {len} bytes, shorter than an ELF header")]
    ShorterThanHeader { len: usize },
    #[error("32-bit ELF (ELFCLASS32) is not supported: bootlink reads 64-bit little-endian kernels and modules")]
    Class32,
    #[error("big-endian ELF is not supported: bootlink reads 64-bit little-endian kernels and modules")]
    BigEndian,
    #[error("invalid ELF class {0}")]
    InvalidClass(u8),
    #[error("invalid ELF data encoding {0}")]
    InvalidEncoding(u8),
    /// The header could not be parsed by `object` (the cause is kept).
    #[error("bad ELF header: {0}")]
    Header(#[source] object::read::Error),
    /// An ELF file of another type (a shared object where a module is wanted).
    #[error("{}", wrong_type(*.want, *.found))]
    WrongType { want: Want, found: elf::FileType },
    /// Built for another machine than the ones asked for.
    #[error(
        "{what} built for {} (e_machine {}), not {}: bootlink reads {} {what}s here",
        machine_named(*.found), .found.0, machine_names(.expected, " or "), machine_names(.expected, " and "), what = .want.what()
    )]
    WrongMachine { want: Want, found: elf::Machine, expected: &'static [elf::Machine] },
    /// A table `object` could not read (`what` names it; the cause is kept).
    #[error("{what}: {source}")]
    Table { what: &'static str, source: object::read::Error },
    /// The section header table `object` could not read, said in the
    /// file's own numbers ([`section_table_error`]; `object`'s error kept).
    #[error("{msg}")]
    SectionTable { msg: String, source: object::read::Error },
    /// A section (or a table inside one) lies outside the file: truncated.
    #[error("{0}")]
    OutsideFile(String),
    /// A valid ELF relocatable object that is not a kernel module.
    #[error("not a kernel module: {0}")]
    NotModule(&'static str),
    /// Any other inconsistency, said in one line.
    #[error("{0}")]
    Corrupt(String),
}

impl ReadError {
    /// What sort of failure this is: a foreign class, byte order or
    /// machine is valid input bootlink does not handle; the rest is input
    /// that is not what it claims.
    pub fn kind(&self) -> Kind {
        match self {
            ReadError::Class32 | ReadError::BigEndian | ReadError::WrongMachine { .. } => Kind::Unsupported,
            _ => Kind::Format,
        }
    }

    /// This error about the file `path`.
    pub fn at(self, path: &std::path::Path) -> Error {
        Error::from(self).at(path)
    }
}

impl From<ReadError> for Error {
    fn from(e: ReadError) -> Error {
        Error::new(e.kind(), e.to_string()).because(e)
    }
}

fn corrupt(msg: impl Into<String>) -> ReadError {
    ReadError::Corrupt(msg.into())
}

fn wrong_type(want: Want, ty: elf::FileType) -> String {
    match want {
        Want::Relocatable => {
            format!("not a kernel module: ELF type is {} (a module is a relocatable object, ET_REL)", type_name(ty))
        }
        Want::Executable => {
            format!(
                "not a kernel image: ELF type is {} (vmlinux is an executable, ET_EXEC; a relocatable arm64 one \
                 ET_DYN)",
                type_name(ty)
            )
        }
        Want::Dynamic => {
            format!("not a program or shared library: ELF type is {} (want ET_DYN or ET_EXEC)", type_name(ty))
        }
    }
}

/// Check the ELF identification and file type, with messages a person can act on.
pub(crate) fn check_ident(data: &[u8], want: Want) -> Result<(), ReadError> {
    if data.is_empty() {
        return Err(ReadError::Empty);
    }
    // A file cut inside the magic is a truncated ELF file, not another format.
    if data.len() < 4 && elf::ELFMAG.starts_with(data) {
        return Err(ReadError::ShorterThanHeader { len: data.len() });
    }
    if data.len() < 4 || data[..4] != elf::ELFMAG {
        return Err(ReadError::NotElf);
    }
    if data.len() < std::mem::size_of::<Header>() {
        return Err(ReadError::ShorterThanHeader { len: data.len() });
    }
    match elf::FileClass(data[4]) {
        elf::ELFCLASS64 => {}
        elf::ELFCLASS32 => return Err(ReadError::Class32),
        c => return Err(ReadError::InvalidClass(c.0)),
    }
    match elf::DataEncoding(data[5]) {
        elf::ELFDATA2LSB => {}
        elf::ELFDATA2MSB => return Err(ReadError::BigEndian),
        d => return Err(ReadError::InvalidEncoding(d.0)),
    }
    let hdr = Header::parse(data).map_err(ReadError::Header)?;
    let ty = hdr.e_type(LE);
    match (want, ty) {
        (Want::Relocatable, elf::ET_REL)
        | (Want::Executable, elf::ET_EXEC)
        | (Want::Dynamic, elf::ET_DYN | elf::ET_EXEC) => Ok(()),
        // A relocatable arm64 kernel (CONFIG_RELOCATABLE, which its KASLR
        // needs) is linked as a PIE and relocates itself at boot.
        (Want::Executable, elf::ET_DYN) if hdr.e_machine(LE) == elf::EM_AARCH64 => Ok(()),
        _ => Err(ReadError::WrongType { want, found: ty }),
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
    /// Parse and check a file of kind `want` for its default machines
    /// ([`Want::default_machines`]).
    pub fn parse(data: &'d [u8], want: Want) -> Result<Elf<'d>, ReadError> {
        Elf::parse_for(data, want, want.default_machines())
    }

    /// Parse and check a file of kind `want` built for one of `machines`
    /// (empty: any). Every section header is checked against the file
    /// before any reader uses it ([`crate::elf::check_layout`]).
    pub fn parse_for(data: &'d [u8], want: Want, machines: &'static [elf::Machine]) -> Result<Elf<'d>, ReadError> {
        check_ident(data, want)?;
        let header = Header::parse(data).map_err(ReadError::Header)?;
        let found = header.e_machine(LE);
        if !machines.is_empty() && !machines.contains(&found) {
            return Err(ReadError::WrongMachine { want, found, expected: machines });
        }
        let sections = header.sections(LE, data).map_err(|source| section_table_error(header, data, source))?;
        let elf = Elf { data, header, sections };
        check_layout(&elf, want)?;
        Ok(elf)
    }

    pub fn machine(&self) -> elf::Machine {
        self.header.e_machine(LE)
    }

    /// Why a section a reader needs cannot be there, when the file has no
    /// section headers at all (a module refuses that in its layout check; a
    /// program or kernel image is valid without them but has no tables to
    /// read): None when it has them.
    pub(crate) fn no_section_headers(&self) -> Option<String> {
        if !self.sections.is_empty() {
            return None;
        }
        Some(match self.header.e_shoff(LE) {
            0 => "no section headers (e_shnum 0, e_shoff 0: stripped of them)".to_string(),
            off => format!("no section headers (e_shnum 0, yet e_shoff {off:#x}: a damaged ELF header)"),
        })
    }

    /// The bytes of the file a loader reads: the file sizes of its
    /// PT_LOAD segments, added.
    pub fn loadable_bytes(&self) -> Result<u64, ReadError> {
        let phdrs = self
            .header
            .program_headers(LE, self.data)
            .map_err(|source| ReadError::Table { what: "truncated or corrupt ELF program headers", source })?;
        Ok(phdrs.iter().filter(|p| p.p_type.get(LE) == elf::PT_LOAD).map(|p| p.p_filesz.get(LE)).sum())
    }

    /// The virtual range a kernel image occupies once loaded: from the
    /// lowest to the end of the highest PT_LOAD segment placed above
    /// address 0 (x86-64's zero-based per-CPU segment is left out: it does
    /// not move with the kernel). None: no such segment.
    pub fn image_range(&self) -> Result<Option<(u64, u64)>, ReadError> {
        let phdrs = self
            .header
            .program_headers(LE, self.data)
            .map_err(|source| ReadError::Table { what: "truncated or corrupt ELF program headers", source })?;
        Ok(phdrs
            .iter()
            .filter(|p| p.p_type.get(LE) == elf::PT_LOAD && p.p_vaddr.get(LE) != 0)
            .map(|p| (p.p_vaddr.get(LE), p.p_vaddr.get(LE).saturating_add(p.p_memsz.get(LE))))
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d))))
    }

    pub fn section(&self, name: &str) -> Option<(usize, &'d Shdr)> {
        self.sections.section_by_name(LE, name.as_bytes()).map(|(i, s)| (i.0, s))
    }

    /// The file range of a section reserved at link time for a host tool
    /// to fill in place (None when absent); an error when it holds no file
    /// data, lies outside the file, or shares bytes with anything else: in
    /// the file, another section's data, the ELF header, the program
    /// headers or the section header table; in memory (when it is loaded),
    /// another loaded section. Filling such a section would overwrite
    /// what it overlaps (a kernel's code, say) where the image is written,
    /// or where the Image made from it is.
    pub(crate) fn reserved_range(&self, name: &str) -> Result<Option<(usize, usize)>, ReadError> {
        let Some((index, sh)) = self.section(name) else { return Ok(None) };
        if sh.sh_type(LE) != elf::SHT_PROGBITS {
            return Err(corrupt(format!("{name} holds no file data")));
        }
        let (off, size) = sh.file_range(LE).ok_or_else(|| corrupt(format!("{name} has no file data")))?;
        let (off, size) = (off as usize, size as usize);
        if off.checked_add(size).is_none_or(|end| end > self.data.len()) {
            return Err(ReadError::OutsideFile(format!("truncated ELF: {name} lies outside the file")));
        }
        self.alone(index, sh, name)?;
        Ok(Some((off, size)))
    }

    /// Refuse section `index` (`name`) if its bytes in the file or its
    /// addresses overlap anything else's (see [`Elf::reserved_range`]).
    fn alone(&self, index: usize, sh: &Shdr, name: &str) -> Result<(), ReadError> {
        let (off, size) = (sh.sh_offset(LE), sh.sh_size(LE));
        if size == 0 {
            return Ok(());
        }
        let overlaps = |a: u64, len: u64, b: u64, blen: u64| {
            len > 0 && blen > 0 && a < b.saturating_add(blen) && b < a.saturating_add(len)
        };
        let refuse = |what: String, how: &str| {
            Err(corrupt(format!(
                "corrupt ELF: {name} overlaps {what} {how}: filling it would overwrite that (offset {off:#x}, \
                 address {:#x}, size {size:#x})",
                sh.sh_addr(LE)
            )))
        };
        let h = self.header;
        let shdrs = (h.e_shoff(LE), (self.sections.len() * std::mem::size_of::<Shdr>()) as u64);
        let phdrs = (h.e_phoff(LE), u64::from(h.e_phnum(LE)) * u64::from(h.e_phentsize(LE)));
        for (what, (at, len)) in [
            ("the ELF header", (0, std::mem::size_of::<Header>() as u64)),
            ("the program headers", phdrs),
            ("the section header table", shdrs),
        ] {
            if overlaps(off, size, at, len) {
                return refuse(what.to_string(), "in the file");
            }
        }
        let loaded = |s: &Shdr| s.sh_flags(LE).contains(elf::SHF_ALLOC);
        for (i, other) in self.sections.iter().enumerate() {
            if i == index || i == 0 {
                continue;
            }
            let what = || format!("section {i} ({})", printable(self.section_name(other)));
            let ty = other.sh_type(LE);
            if ty != elf::SHT_NOBITS
                && ty != elf::SHT_NULL
                && overlaps(off, size, other.sh_offset(LE), other.sh_size(LE))
            {
                return refuse(what(), "in the file");
            }
            if loaded(sh) && loaded(other) && overlaps(sh.sh_addr(LE), size, other.sh_addr(LE), other.sh_size(LE)) {
                return refuse(what(), "in memory");
            }
        }
        Ok(())
    }

    pub fn section_name(&self, shdr: &Shdr) -> &'d [u8] {
        self.sections.section_name(LE, shdr).unwrap_or(b"")
    }

    pub fn section_by_index(&self, index: usize) -> Option<&'d Shdr> {
        self.sections.section(object::SectionIndex(index)).ok()
    }

    /// The bytes of a section; empty for SHT_NOBITS. Errors if the section
    /// points outside the file.
    pub fn section_data(&self, shdr: &Shdr) -> Result<&'d [u8], ReadError> {
        shdr.data(LE, self.data).map_err(|_| {
            ReadError::OutsideFile(format!(
                "truncated or corrupt ELF: section {} lies outside the file",
                printable(self.section_name(shdr))
            ))
        })
    }

    pub fn named_section_data(&self, name: &str) -> Result<Option<&'d [u8]>, ReadError> {
        match self.section(name) {
            Some((_, s)) => self.section_data(s).map(Some),
            None => Ok(None),
        }
    }

    /// The dynamic symbol table (.dynsym), as the dynamic loader indexes it.
    pub(crate) fn dynamic_symbols(&self) -> Result<SymbolTable<'d, Header>, ReadError> {
        self.sections
            .symbols(LE, self.data, elf::SHT_DYNSYM)
            .map_err(|source| ReadError::Table { what: "truncated or corrupt ELF dynamic symbol table", source })
    }

    /// The GNU build ID (NT_GNU_BUILD_ID in an SHT_NOTE section), if any.
    pub fn build_id(&self) -> Result<Option<&'d [u8]>, ReadError> {
        let mut id = None;
        self.each_note(|name, n_type, desc| {
            if id.is_none() && name == elf::ELF_NOTE_GNU && n_type == elf::NT_GNU_BUILD_ID.0 {
                id = Some(desc);
            }
        })?;
        Ok(id)
    }

    /// Every note of every SHT_NOTE section, in file order: its name (the
    /// owner, without the NUL), type and descriptor. A note that does not
    /// fit its section is the file's error.
    pub(crate) fn each_note(&self, mut f: impl FnMut(&'d [u8], u32, &'d [u8])) -> Result<(), ReadError> {
        for shdr in self.sections.iter() {
            if shdr.sh_type(LE) != elf::SHT_NOTE {
                continue;
            }
            let notes = shdr
                .notes(LE, self.data)
                .map_err(|source| ReadError::Table { what: "corrupt ELF note section", source })?;
            let Some(mut notes) = notes else { continue };
            while let Some(note) =
                notes.next().map_err(|source| ReadError::Table { what: "corrupt ELF note", source })?
            {
                f(note.name(), note.n_type(LE).0, note.desc());
            }
        }
        Ok(())
    }

    pub fn symbols(&self) -> Result<SymbolTable<'d, Header>, ReadError> {
        self.sections
            .symbols(LE, self.data, elf::SHT_SYMTAB)
            .map_err(|source| ReadError::Table { what: "truncated or corrupt ELF symbol table", source })
    }
}

/// Why `object` could not read the section header table of `data` (its
/// error, `source`, says only "offset/size/alignment" or "shstrtab size"),
/// in the file's own numbers: an entry size that is not a section
/// header's, a table that ends past the end of the file (a truncated file,
/// or a corrupt e_shoff or e_shnum: the two look alike from inside the
/// file) or lies beyond any offset, or a section name table outside the
/// file.
fn section_table_error(header: &Header, data: &[u8], source: object::read::Error) -> ReadError {
    let len = data.len() as u64;
    let shoff = header.e_shoff(LE);
    let entsize = header.e_shentsize(LE) as u64;
    let want = std::mem::size_of::<Shdr>() as u64;
    let e = |msg: String| ReadError::SectionTable { msg, source };
    if entsize != want {
        return e(format!("corrupt ELF: section header entry size (e_shentsize) {entsize}, not {want}"));
    }
    // e_shnum, or with 0 there (more sections than it holds) section 0's
    // sh_size, when section 0 lies in the file.
    let shnum = match header.e_shnum(LE) {
        0 => crate::bytes::le_u64(data, shoff.saturating_add(32).try_into().unwrap_or(usize::MAX)).unwrap_or(1),
        n => n as u64,
    };
    let entries = if shnum == 1 { "1 entry".to_string() } else { format!("{shnum} entries") };
    let table = format!("the section header table ({entries} of {want} bytes at offset {shoff:#x})");
    match shnum.checked_mul(want).and_then(|size| shoff.checked_add(size)) {
        None => return e(format!("corrupt ELF: {table} lies beyond any file offset")),
        Some(end) if end > len => {
            return e(format!(
                "truncated or corrupt ELF: {table} ends at {end:#x}, past the end of the file ({len:#x} bytes)"
            ));
        }
        Some(_) => {}
    }
    // (SHN_XINDEX: the index is section 0's sh_link.)
    let strndx = match header.e_shstrndx(LE) {
        elf::SHN_XINDEX => crate::bytes::le_u32(data, (shoff + 40) as usize).unwrap_or(0) as u64,
        i => i.0 as u64,
    };
    let name_table = (strndx < shnum)
        .then(|| crate::bytes::le_u64(data, (shoff + strndx * want + 24) as usize))
        .flatten()
        .zip(crate::bytes::le_u64(data, (shoff + strndx * want + 32) as usize));
    match name_table {
        None => e(format!("corrupt ELF: the section name table index {strndx} is past the {shnum} sections")),
        Some((off, size)) if off.checked_add(size).is_none_or(|end| end > len) => e(format!(
            "truncated or corrupt ELF: the section name table (section {strndx}) lies outside the file (offset {off:#x}, size {size:#x}, file {len:#x} bytes)"
        )),
        Some(_) => ReadError::Table { what: "corrupt ELF section headers", source },
    }
}

/// What the kernel's `elf_validity_check` refuses before it touches a
/// section, and what bootlink's readers and editors rely on: section 0 is
/// SHT_NULL; the section name table ends in a NUL and every name lies in
/// it; every section that holds file data lies inside the file (offset plus
/// size checked against overflow); and in a module (which bootlink edits in
/// place) no two of them, the ELF header or the section header table
/// overlap.
pub(crate) fn check_layout(elf: &Elf, want: Want) -> Result<(), ReadError> {
    let len = elf.data.len() as u64;
    let shnum = elf.sections.len();
    if shnum == 0 {
        return match want {
            Want::Relocatable => Err(corrupt("corrupt ELF: no section headers (a module needs its sections)")),
            _ => Ok(()),
        };
    }
    let shentsize = elf.header.e_shentsize(LE);
    if shentsize as usize != std::mem::size_of::<Shdr>() {
        return Err(corrupt(format!(
            "corrupt ELF: section header entry size (e_shentsize) {shentsize}, not {}",
            std::mem::size_of::<Shdr>()
        )));
    }
    let zero = elf.sections.iter().next().ok_or_else(|| corrupt("corrupt ELF: no section 0"))?;
    if zero.sh_type(LE) != elf::SHT_NULL {
        return Err(corrupt(format!("corrupt ELF: section 0 is of type {}, not SHT_NULL", zero.sh_type(LE).0)));
    }
    // (With more than 0xff00 sections, section 0's sh_size holds the count;
    // the kernel refuses such modules.)
    let extended = elf.header.e_shnum(LE) == 0 && want != Want::Relocatable;
    if !extended && (zero.sh_size(LE) != 0 || zero.sh_addr(LE) != 0) {
        return Err(corrupt("corrupt ELF: section 0 has a size or an address (it must be empty)"));
    }
    let strndx =
        elf.header.shstrndx(LE, elf.data).map_err(|source| ReadError::Table { what: "corrupt ELF", source })? as usize;
    let names = match strndx {
        0 => &[][..],
        i => {
            let sh = elf.sections.section(object::SectionIndex(i)).map_err(|_| {
                corrupt(format!("corrupt ELF: the section name table index {i} is past the {shnum} sections"))
            })?;
            sh.data(LE, elf.data).map_err(|_| {
                let (off, size) = (sh.sh_offset(LE), sh.sh_size(LE));
                ReadError::OutsideFile(format!(
                    "truncated or corrupt ELF: the section name table (section {i}) lies outside the file (offset {off:#x}, size {size:#x}, file {len:#x} bytes)"
                ))
            })?
        }
    };
    // Checked after the sections' places: a section moved onto the name
    // table's bytes is named as the overlap it is, not as the missing NUL
    // it leaves there.
    let unterminated = !names.is_empty() && names.last() != Some(&0);
    // (start, end, section index; 0 for the ELF header, shnum for the
    // section header table): named only when two overlap.
    let mut ranges: Vec<(u64, u64, usize)> = Vec::new();
    let section_name = |i: usize| {
        let n = elf.sections.section(object::SectionIndex(i)).ok().and_then(|sh| cstr(names, sh.sh_name(LE) as usize));
        match n {
            Some(n) if !n.is_empty() => format!("{i} ({})", printable(n)),
            _ => format!("{i}"),
        }
    };
    for (i, sh) in elf.sections.iter().enumerate().skip(1) {
        let name_off = sh.sh_name(LE) as usize;
        if name_off >= names.len().max(1) {
            return Err(corrupt(format!(
                "corrupt ELF: the name of section {i} lies at {name_off}, past the {}-byte section name table",
                names.len()
            )));
        }
        let ty = sh.sh_type(LE);
        if ty == elf::SHT_NULL || ty == elf::SHT_NOBITS {
            continue;
        }
        let (off, size) = (sh.sh_offset(LE), sh.sh_size(LE));
        if off.checked_add(size).is_none_or(|end| end > len) {
            return Err(ReadError::OutsideFile(format!(
                "truncated or corrupt ELF: section {} lies outside the file (offset {off:#x}, size {size:#x}, file {len:#x} bytes)",
                section_name(i)
            )));
        }
        if want == Want::Relocatable && size > 0 {
            ranges.push((off, off + size, i));
        }
    }
    if want == Want::Relocatable {
        let shoff = elf.header.e_shoff(LE);
        ranges.push((0, std::mem::size_of::<Header>() as u64, 0));
        ranges.push((shoff, shoff + (shnum * std::mem::size_of::<Shdr>()) as u64, shnum));
        ranges.sort();
        let part = |i: usize| match i {
            0 => "the ELF header".to_string(),
            i if i == shnum => "the section header table".to_string(),
            i => format!("section {}", section_name(i)),
        };
        for w in ranges.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(corrupt(format!("corrupt ELF: {} overlaps {} in the file", part(w[1].2), part(w[0].2))));
            }
        }
    }
    if unterminated {
        return Err(corrupt(format!("corrupt ELF: the section name table (section {strndx}) does not end in a NUL")));
    }
    Ok(())
}

/// A name read from a file (a section's, a symbol's), for a one-line
/// message: lossy UTF-8, control characters escaped (the name table of a
/// damaged file can hold a newline).
pub(crate) fn printable(name: &[u8]) -> String {
    let mut s = String::with_capacity(name.len());
    for c in String::from_utf8_lossy(name).chars() {
        if c.is_control() {
            s.extend(c.escape_default());
        } else {
            s.push(c);
        }
    }
    s
}

pub fn sym_name<'d>(symtab: &SymbolTable<'d, Header>, sym: &Symbol) -> Result<&'d [u8], ReadError> {
    sym.name(LE, symtab.strings())
        .map_err(|_| corrupt("corrupt ELF symbol table: a symbol name lies outside the string table"))
}

/// A NUL-terminated string at `offset` in `data`.
pub(crate) fn cstr(data: &[u8], offset: usize) -> Option<&[u8]> {
    let rest = data.get(offset..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

pub(crate) fn read_u32(data: &[u8], offset: usize) -> Option<u32> {
    crate::bytes::le_u32(data, offset)
}

pub(crate) fn read_i32(data: &[u8], offset: usize) -> Option<i32> {
    read_u32(data, offset).map(|v| v as i32)
}

pub(crate) fn read_u64(data: &[u8], offset: usize) -> Option<u64> {
    crate::bytes::le_u64(data, offset)
}

/// A typed view of the ELF record (a [`Symbol`], [`Rela`], [`Shdr`],
/// [`Header`]...) at `at` in `d`, for data whose layout was checked: the
/// record lies inside `d` (panics otherwise; `object`'s field types are
/// byte arrays, so any offset is aligned). Each field is then read by its
/// name (`sym.st_value.get(LE)`).
pub(crate) fn view<T: Pod>(d: &[u8], at: usize) -> &T {
    object::pod::from_bytes::<T>(&d[at..]).expect("a whole record inside the file").0
}

/// [`view`], to write the record's fields by name (`sym.st_value.set(LE, v)`).
pub(crate) fn view_mut<T: Pod>(d: &mut [u8], at: usize) -> &mut T {
    object::pod::from_bytes_mut::<T>(&mut d[at..]).expect("a whole record inside the file").0
}

/// The whole records of type `T` that `d` holds, in order (a trailing part
/// of a record is left out).
pub(crate) fn records<T: Pod>(d: &[u8]) -> &[T] {
    object::pod::slice_from_bytes(d, d.len() / size_of::<T>()).expect("whole records fit").0
}

/// The names of `machines`, joined by `sep` (" or ", " and ").
fn machine_names(machines: &[elf::Machine], sep: &str) -> String {
    machines.iter().map(|&m| machine_name(m)).collect::<Vec<_>>().join(sep)
}

/// The machine a file's ELF header names (`e_machine`, little-endian),
/// from its first bytes alone: for a quick check of a file bootlink does
/// not otherwise parse (a product of a build, a foreign package's program).
/// None: no ELF header.
pub(crate) fn machine_of(head: &[u8]) -> Option<elf::Machine> {
    match head.get(..20) {
        Some(h) if h.starts_with(&elf::ELFMAG) => {
            crate::bytes::le_u16(h, std::mem::offset_of!(Header, e_machine)).map(elf::Machine)
        }
        _ => None,
    }
}

/// Why a file whose first bytes are `head` is not a program (or object) of
/// the machine `want`, if it is not: one reason, for the checks of files
/// bootlink does not otherwise parse (a build's product, a package's
/// program or library).
pub fn wrong_machine(head: &[u8], want: elf::Machine) -> Option<String> {
    match machine_of(head) {
        Some(m) if m == want => None,
        Some(m) => {
            Some(format!("an ELF file for {} (e_machine {}), not {}", machine_named(m), m.0, machine_name(want)))
        }
        None => Some("not an ELF file".into()),
    }
}

/// A machine in a sentence: its name, or for a machine bootlink has no
/// name for, "an unknown machine" (its number is said beside it).
fn machine_named(m: elf::Machine) -> &'static str {
    match machine_name(m) {
        "other" => "an unknown machine",
        name => name,
    }
}

pub(crate) fn machine_name(m: elf::Machine) -> &'static str {
    match m {
        elf::EM_X86_64 => "x86_64",
        elf::EM_AARCH64 => "aarch64",
        elf::EM_386 => "i386",
        elf::EM_ARM => "arm",
        elf::EM_MIPS => "mips",
        elf::EM_RISCV => "riscv64",
        elf::EM_PPC64 => "ppc64",
        elf::EM_S390 => "s390x",
        elf::EM_LOONGARCH => "loongarch64",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_is_read_from_the_elf_header_only() {
        let mut h = vec![0u8; 20];
        assert_eq!(machine_of(&h), None);
        h[..4].copy_from_slice(&elf::ELFMAG);
        h[18..20].copy_from_slice(&elf::EM_AARCH64.0.to_le_bytes());
        assert_eq!(machine_of(&h), Some(elf::EM_AARCH64));
        assert_eq!(machine_of(&h[..19]), None);
        assert_eq!(wrong_machine(&h, elf::EM_AARCH64), None);
        assert_eq!(
            wrong_machine(&h, elf::EM_X86_64).as_deref(),
            Some("an ELF file for aarch64 (e_machine 183), not x86_64")
        );
        assert_eq!(wrong_machine(&h[..19], elf::EM_X86_64).as_deref(), Some("not an ELF file"));
    }
}
