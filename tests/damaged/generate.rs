#![allow(dead_code)]
//! The damaged-input generator: from a real module or kernel image and a
//! seed, files damaged one way each, by class, marked `invalid` where the
//! damage must be refused (truncations and bit flips that may leave a valid
//! file are unmarked: they must only not panic or hang). The same seed
//! gives the same files on every machine. It reads the ELF by hand, not
//! through bootlink's reader, so the two do not share a blind spot.
//!
//! Each class has the reason its refusal must give ([`elf_reason`]; the
//! other generators have theirs): what the damage breaks, in the words of
//! the reader's one line, so that a file refused for something else (a
//! truncation reported as a bad section) fails the suite.

use bootlink::rng::Rng;

pub struct Damaged {
    pub name: String,
    pub class: &'static str,
    pub bytes: Vec<u8>,
    pub invalid: bool,
    /// What the refusal of a file marked invalid says: any one of these
    /// patterns ([`says`]).
    pub reason: &'static [&'static str],
}

/// Whether `line` says `pattern`: its parts, split at `*` (any text), in
/// order.
pub fn says(line: &str, pattern: &str) -> bool {
    let mut rest = line;
    for part in pattern.split('*') {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `line` gives the reason of damaged file `f` (any of its
/// patterns).
pub fn gives_reason(line: &str, f: &Damaged) -> bool {
    f.reason.iter().any(|p| says(line, p))
}

/// The reason a refusal of an ELF file (module, kernel image, program)
/// damaged by `class` gives, per class with why.
pub fn elf_reason(class: &str) -> &'static [&'static str] {
    match class {
        // e_machine names another machine: the line names the machine the
        // file was built for, or (a module against this kernel) says it is
        // a module for another one.
        "foreign-machine" => &["built for ", "a module for "],
        // EI_CLASS is ELFCLASS32.
        "elf-class-32" => &["32-bit ELF"],
        // EI_DATA is ELFDATA2MSB.
        "big-endian" => &["big-endian ELF"],
        // e_type is another type: the line names the type found.
        "wrong-elf-type" => &["ELF type is "],
        // Section 0 got a type or a size: the line names section 0.
        "section0-not-null" => &["section 0 "],
        // The last byte of the section name table is no longer a NUL.
        "shstrtab-no-nul" => &["section name table * does not end in a NUL"],
        // A section's sh_name points at or past the name table's end.
        "section-name-past-table" => &["past the *section name table"],
        // A section's offset or size runs past the file's end (the name
        // table's too, then named so).
        "section-outside-file" => &["lies outside the file"],
        // e_shnum, e_shoff or e_shentsize is wrong: the section header
        // table does not fit the file, or its entry size is not one.
        "huge-header-counts" => &["section header table", "section header entry size"],
        // e_shnum is 0.
        "no-section-headers" => &["no section headers"],
        // Cut before the end of its last section or header table: the
        // header table (or the ELF header) runs past the end of the file;
        // a cut at 0 leaves an empty file.
        "truncated" => &["truncated", "the file is empty"],
        // An entry's r_offset lies at or past the end of its target section.
        "relocation-outside-target" => &["relocation section * writes * outside "],
        // .gnu.linkonce.this_module's sh_size is below struct module's head.
        "this-module-too-small" => &["smaller than struct module"],
        // .gnu.linkonce.this_module lost SHF_ALLOC.
        "this-module-not-alloc" => &[".gnu.linkonce.this_module is not SHF_ALLOC"],
        // .gnu.linkonce.this_module is SHT_NOBITS.
        "this-module-nobits" => &[".gnu.linkonce.this_module holds no file data"],
        // .gnu.linkonce.this_module's offset puts half of it past the end.
        "this-module-past-end" => &["(.gnu.linkonce.this_module) lies outside the file"],
        // One section's offset moved onto another's bytes.
        "overlapping-sections" => &[" overlaps "],
        // An ORC table's offset lies past the end of the file.
        "orc-outside-file" => &["(.orc_unwind* lies outside the file"],
        // __mcount_loc's offset lies past the end of the file.
        "mcount-outside-file" => &["(__mcount_loc) lies outside the file"],
        // A relocation of .orc_unwind_ip points before or past its code
        // section (its addend moved).
        "orc-outside-text" => &["record of .orc_unwind_ip at * points to * outside "],
        // The same for a relocation of __mcount_loc.
        "mcount-outside-text" => &["record of __mcount_loc at * points to * outside "],
        // A __versions name fills its 56 bytes with no NUL.
        "versions-without-nul" => &["__versions section: the name of entry * has no terminating NUL"],
        // .symtab's sh_info past the first global: a global among the locals.
        "symtab-global-before-info" => &["global symbol * comes before sh_info"],
        // .symtab's sh_info before the last local: a local among the globals.
        "symtab-local-after-info" => &["local symbol * comes after sh_info"],
        // .symtab's size 0 or huge, entry size 0 or sh_info past its
        // symbols: the line names the symbol table.
        "symtab-huge-or-zero" => &["symbol table", "(.symtab) lies outside the file"],
        // A relocation section's entry size 0, size huge or target index
        // wrong, or an entry's symbol past .symtab: the line names the
        // relocation section.
        "relocations-huge-or-zero" => &["corrupt relocation section ", "(.rela* lies outside the file"],
        // A signature whose stated length exceeds the file.
        "signature-wild-length" => &["module signature"],
        // A function symbol's size runs past the address space or past its
        // segment's file data.
        "function-size-huge" | "function-past-its-segment" => &["function * runs past "],
        // Bit flips may leave a valid file: not marked, no reason.
        "bit-flips" => &[],
        _ => panic!("no reason for the ELF damage class {class}"),
    }
}

pub fn u16_at(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}
pub fn u32_at(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
pub fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}
pub fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub fn put64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

// Section header fields.
const NAME: usize = 0;
const TYPE: usize = 4;
const FLAGS: usize = 8;
const OFFSET: usize = 24;
const SIZE: usize = 32;
const INFO: usize = 44;
const ENTSIZE: usize = 56;
const SHT_SYMTAB: u32 = 2;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;

/// The section headers of an undamaged ELF64 file.
struct Sections {
    shoff: usize,
    count: usize,
    names: Vec<String>,
}

impl Sections {
    fn read(d: &[u8]) -> Sections {
        let shoff = u64_at(d, 0x28) as usize;
        let count = u16_at(d, 0x3c) as usize;
        let strndx = u16_at(d, 0x3e) as usize;
        let str_off = u64_at(d, shoff + strndx * 64 + OFFSET) as usize;
        let names = (0..count)
            .map(|i| {
                let at = str_off + u32_at(d, shoff + i * 64 + NAME) as usize;
                let end = d[at..].iter().position(|&b| b == 0).unwrap();
                String::from_utf8_lossy(&d[at..at + end]).into_owned()
            })
            .collect();
        Sections { shoff, count, names }
    }
    fn at(&self, i: usize, field: usize) -> usize {
        self.shoff + i * 64 + field
    }
    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
    fn get(&self, d: &[u8], i: usize, field: usize) -> u64 {
        match field {
            NAME | TYPE | INFO => u32_at(d, self.at(i, field)) as u64,
            _ => u64_at(d, self.at(i, field)),
        }
    }
    /// Sections holding file data, not empty.
    fn with_data(&self, d: &[u8]) -> Vec<usize> {
        (1..self.count).filter(|&i| self.get(d, i, TYPE) != SHT_NOBITS as u64 && self.get(d, i, SIZE) > 0).collect()
    }
    /// The end of the last section or of the header table.
    fn end(&self, d: &[u8]) -> u64 {
        let mut end = (self.shoff + self.count * 64) as u64;
        for i in self.with_data(d) {
            end = end.max(self.get(d, i, OFFSET) + self.get(d, i, SIZE));
        }
        end
    }
    /// The RELA sections that apply to section `target` (any when None).
    fn relas(&self, d: &[u8], target: Option<usize>) -> Vec<usize> {
        (1..self.count)
            .filter(|&i| self.get(d, i, TYPE) == SHT_RELA as u64 && self.get(d, i, SIZE) >= 24)
            .filter(|&i| target.is_none_or(|t| self.get(d, i, INFO) == t as u64))
            .collect()
    }
}

fn pick<T: Copy>(rng: &mut Rng, v: &[T]) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.below(v.len())])
}

/// One relocation entry of RELA section `r`: its file offset.
fn rela_entry(s: &Sections, d: &[u8], rng: &mut Rng, r: usize) -> usize {
    let n = s.get(d, r, SIZE) as usize / 24;
    s.get(d, r, OFFSET) as usize + 24 * rng.below(n)
}

/// Damage shared by modules and kernel images: the ELF header and the
/// section table. `Some(bytes)` when the class applies to this file.
fn damage_elf(class: &'static str, d: &mut Vec<u8>, s: &Sections, rng: &mut Rng) -> Option<bool> {
    let len = d.len() as u64;
    match class {
        "foreign-machine" => {
            // Another machine than the file's own: AArch64 for an x86-64
            // file, x86-64 for an AArch64 one, or one bootlink reads none of.
            let own = u16_at(d, 0x12);
            let others: Vec<u16> = [183u16, 62, 243, 3, 40, 8].into_iter().filter(|&m| m != own).collect();
            put16(d, 0x12, others[rng.below(others.len().min(5))]);
        }
        "elf-class-32" => d[4] = 1,
        "big-endian" => d[5] = 2,
        "wrong-elf-type" => {
            let now = u16_at(d, 0x10);
            put16(d, 0x10, pick(rng, &[0u16, 1, 2, 3, 4].iter().copied().filter(|&t| t != now).collect::<Vec<_>>())?);
        }
        "section0-not-null" => match rng.below(2) {
            0 => put32(d, s.at(0, TYPE), 1 + rng.below(8) as u32),
            _ => put64(d, s.at(0, SIZE), 1 + rng.below(4096) as u64),
        },
        "shstrtab-no-nul" => {
            let i = u16_at(d, 0x3e) as usize;
            let end = (s.get(d, i, OFFSET) + s.get(d, i, SIZE)) as usize;
            d[end - 1] = b'x';
        }
        "section-name-past-table" => {
            let i = u16_at(d, 0x3e) as usize;
            let size = s.get(d, i, SIZE) as u32;
            let v = [size, size + 1 + rng.below(1000) as u32, u32::MAX][rng.below(3)];
            put32(d, s.at(1 + rng.below(s.count - 1), NAME), v);
        }
        "section-outside-file" => {
            let i = pick(rng, &s.with_data(d))?;
            match rng.below(4) {
                0 => put64(d, s.at(i, OFFSET), len + rng.below(4096) as u64),
                1 => put64(d, s.at(i, SIZE), len + 1 + rng.below(1 << 20) as u64),
                2 => put64(d, s.at(i, OFFSET), u64::MAX - rng.below(16) as u64),
                _ => put64(d, s.at(i, SIZE), u64::MAX - rng.below(16) as u64),
            }
        }
        "huge-header-counts" => match rng.below(4) {
            0 => put16(d, 0x3c, 0xffff - rng.below(256) as u16),
            1 => put64(d, 0x28, u64::MAX - rng.below(4096) as u64),
            2 => put64(d, 0x28, len - 1 - rng.below(63) as u64),
            _ => put16(d, 0x3a, [0u16, 32, 40, 128][rng.below(4)]),
        },
        "no-section-headers" => put16(d, 0x3c, 0),
        "truncated" => {
            let cut = rng.below(d.len());
            let end = s.end(d);
            d.truncate(cut);
            return Some((cut as u64) < end);
        }
        "bit-flips" => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            return Some(false);
        }
        _ => return None,
    }
    Some(true)
}

/// Damage only a module can have.
fn damage_module(class: &'static str, d: &mut Vec<u8>, s: &Sections, rng: &mut Rng) -> Option<bool> {
    let len = d.len() as u64;
    let section = |n: &str| s.find(n);
    match class {
        "relocation-outside-target" => {
            let r = pick(rng, &s.relas(d, None))?;
            let target = s.get(d, r, INFO) as usize;
            let size = s.get(d, target, SIZE);
            let e = rela_entry(s, d, rng, r);
            let v = [size, size + rng.below(4096) as u64, u64::MAX - rng.below(8) as u64][rng.below(3)];
            put64(d, e, v);
        }
        "this-module-too-small" => put64(d, s.at(section(".gnu.linkonce.this_module")?, SIZE), rng.below(80) as u64),
        "this-module-not-alloc" => {
            let at = s.at(section(".gnu.linkonce.this_module")?, FLAGS);
            let v = u64_at(d, at) & !2;
            put64(d, at, v);
        }
        "this-module-nobits" => put32(d, s.at(section(".gnu.linkonce.this_module")?, TYPE), SHT_NOBITS),
        "this-module-past-end" => {
            let i = section(".gnu.linkonce.this_module")?;
            let size = s.get(d, i, SIZE);
            put64(d, s.at(i, OFFSET), len - size / 2 - rng.below(size as usize / 4) as u64);
        }
        "overlapping-sections" => {
            let with = s.with_data(d);
            let (a, b) = (pick(rng, &with)?, pick(rng, &with)?);
            if a == b {
                return None;
            }
            let boff = s.get(d, b, OFFSET);
            put64(d, s.at(a, OFFSET), boff);
            let size = s.get(d, a, SIZE).min(len - boff);
            put64(d, s.at(a, SIZE), size);
        }
        "orc-outside-file" | "mcount-outside-file" => {
            let name =
                if class.starts_with("orc") { [".orc_unwind_ip", ".orc_unwind"][rng.below(2)] } else { "__mcount_loc" };
            let i = section(name)?;
            put64(d, s.at(i, OFFSET), len + rng.below(1 << 16) as u64);
        }
        "orc-outside-text" | "mcount-outside-text" => {
            let name = if class.starts_with("orc") { ".orc_unwind_ip" } else { "__mcount_loc" };
            let r = pick(rng, &s.relas(d, Some(section(name)?)))?;
            let e = rela_entry(s, d, rng, r);
            let addend = u64_at(d, e + 16) as i64;
            let v = [addend + 0x10_0000 + rng.below(4096) as i64, -1 - rng.below(4096) as i64, i64::MAX][rng.below(3)];
            put64(d, e + 16, v as u64);
        }
        "versions-without-nul" => {
            let i = section("__versions")?;
            let n = s.get(d, i, SIZE) as usize / 64;
            let at = s.get(d, i, OFFSET) as usize + 64 * rng.below(n) + 8;
            d[at..at + 56].fill(b'A' + rng.below(26) as u8);
        }
        "symtab-global-before-info" | "symtab-local-after-info" => {
            let i = (1..s.count).find(|&i| s.get(d, i, TYPE) == SHT_SYMTAB as u64)?;
            let (n, info) = (s.get(d, i, SIZE) / 24, s.get(d, i, INFO));
            let v = if class == "symtab-global-before-info" {
                info + 1 + rng.below((n - info) as usize) as u64
            } else if info > 2 {
                1 + rng.below(info as usize - 2) as u64
            } else {
                return None;
            };
            put32(d, s.at(i, INFO), v as u32);
        }
        "symtab-huge-or-zero" => {
            let i = (1..s.count).find(|&i| s.get(d, i, TYPE) == SHT_SYMTAB as u64)?;
            match rng.below(4) {
                0 => put64(d, s.at(i, SIZE), 0),
                1 => put64(d, s.at(i, ENTSIZE), 0),
                2 => put64(d, s.at(i, SIZE), u64::MAX / 24 * 24),
                _ => put32(d, s.at(i, INFO), u32::MAX - rng.below(16) as u32),
            }
        }
        "relocations-huge-or-zero" => {
            let r = pick(rng, &s.relas(d, None))?;
            match rng.below(4) {
                0 => put64(d, s.at(r, ENTSIZE), 0),
                1 => put64(d, s.at(r, SIZE), u64::MAX - rng.below(24) as u64),
                2 => put32(d, s.at(r, INFO), [0u32, s.count as u32, u32::MAX][rng.below(3)]),
                _ => {
                    // the symbol index of one entry past the symbol table
                    let e = rela_entry(s, d, rng, r);
                    let ty = u32_at(d, e + 8);
                    put64(d, e + 8, ((u32::MAX - rng.below(1000) as u32) as u64) << 32 | ty as u64);
                }
            }
        }
        "signature-wild-length" => {
            let mut info = vec![0u8, 0, 2, rng.below(256) as u8, rng.below(256) as u8, 0, 0, 0];
            info.extend_from_slice(&((len as u32).saturating_add(1 + rng.below(1 << 30) as u32)).to_be_bytes());
            d.extend_from_slice(&info);
            d.extend_from_slice(b"~Module signature appended~\n");
        }
        _ => return None,
    }
    Some(true)
}

pub const ELF_CLASSES: &[&str] = &[
    "foreign-machine",
    "elf-class-32",
    "big-endian",
    "wrong-elf-type",
    "section0-not-null",
    "shstrtab-no-nul",
    "section-name-past-table",
    "section-outside-file",
    "huge-header-counts",
    "no-section-headers",
    "truncated",
    "bit-flips",
];

pub const MODULE_CLASSES: &[&str] = &[
    "relocation-outside-target",
    "this-module-too-small",
    "this-module-not-alloc",
    "this-module-nobits",
    "this-module-past-end",
    "overlapping-sections",
    "orc-outside-file",
    "orc-outside-text",
    "mcount-outside-file",
    "mcount-outside-text",
    "versions-without-nul",
    "symtab-global-before-info",
    "symtab-local-after-info",
    "symtab-huge-or-zero",
    "relocations-huge-or-zero",
    "signature-wild-length",
];

/// `per_class` damaged copies of module `base` (named `stem`) for every
/// class that applies to it.
pub fn modules(stem: &str, base: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let s = Sections::read(base);
    let mut out = Vec::new();
    for &class in ELF_CLASSES.iter().chain(MODULE_CLASSES) {
        for k in 0..per_class {
            let mut d = base.to_vec();
            let invalid = match damage_elf(class, &mut d, &s, rng) {
                Some(v) => Some(v),
                None => damage_module(class, &mut d, &s, rng),
            };
            if let Some(invalid) = invalid {
                let name = format!("{class}-{k}-{stem}.ko");
                out.push(Damaged { name, class, bytes: d, invalid, reason: elf_reason(class) });
            }
        }
    }
    out
}

/// `per_class` damaged copies of the kernel image `base` for every class
/// of ELF damage.
pub fn kernels(base: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let s = Sections::read(base);
    let mut out = Vec::new();
    for &class in ELF_CLASSES {
        for k in 0..per_class {
            let mut d = base.to_vec();
            if let Some(invalid) = damage_elf(class, &mut d, &s, rng) {
                let name = format!("vmlinux-{class}-{k}");
                out.push(Damaged { name, class, bytes: d, invalid, reason: elf_reason(class) });
            }
        }
    }
    out
}

pub const PROGRAM_CLASSES: &[&str] = &["function-size-huge", "function-past-its-segment"];

/// Damage only a program's function symbols can have (the order reader):
/// a function whose size runs past the end of the address space or past
/// its segment's file data.
fn damage_program(class: &'static str, d: &mut [u8], s: &Sections, rng: &mut Rng) -> Option<bool> {
    let i = (1..s.count).find(|&i| s.get(d, i, TYPE) == SHT_SYMTAB as u64)?;
    let (off, n) = (s.get(d, i, OFFSET) as usize, s.get(d, i, SIZE) as usize / 24);
    // Defined functions with a size.
    let funcs: Vec<usize> = (0..n)
        .map(|k| off + 24 * k)
        .filter(|&e| d[e + 4] & 0xf == 2 && u16_at(d, e + 6) != 0 && u64_at(d, e + 16) > 0)
        .collect();
    let e = pick(rng, &funcs)?;
    let v = match class {
        "function-size-huge" => [u64::MAX - rng.below(4096) as u64, 1 << (40 + rng.below(20))][rng.below(2)],
        "function-past-its-segment" => d.len() as u64 + (1 << 20) + rng.below(1 << 20) as u64,
        _ => return None,
    };
    put64(d, e + 16, v);
    Some(true)
}

/// `per_class` damaged copies of the program `base` (named `stem`): the ELF
/// damage a program reader must refuse (any machine and ET_DYN or ET_EXEC
/// are valid for one: a foreign machine and a change between the two are
/// left out) and the damage of its function symbols.
pub fn programs(stem: &str, base: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let s = Sections::read(base);
    let mut out = Vec::new();
    for &class in ELF_CLASSES.iter().filter(|&&c| c != "foreign-machine").chain(PROGRAM_CLASSES) {
        for k in 0..per_class {
            let mut d = base.to_vec();
            let invalid = match class {
                "wrong-elf-type" => {
                    put16(&mut d, 0x10, [0u16, 1, 4][rng.below(3)]);
                    Some(true)
                }
                c if PROGRAM_CLASSES.contains(&c) => damage_program(class, &mut d, &s, rng),
                _ => damage_elf(class, &mut d, &s, rng),
            };
            if let Some(invalid) = invalid {
                let name = format!("{class}-{k}-{stem}");
                out.push(Damaged { name, class, bytes: d, invalid, reason: elf_reason(class) });
            }
        }
    }
    out
}
