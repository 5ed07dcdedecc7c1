//! Reading one kernel module (`.ko`, `.ko.xz`, `.ko.zst`, `.ko.gz`): its
//! undefined symbols, its own exports, `.modinfo`, `__versions` and the
//! appended signature.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object::elf::{SHN_ABS, SHN_UNDEF, STB_LOCAL};
use object::read::elf::{SectionHeader, Sym};
use serde::Serialize;

use crate::compress::{self, Compression};
use crate::elf::{self, Elf, LE, ReadError, Want};
use crate::error::Result;
use crate::fsutil::{self, Bytes};

pub const SIG_MAGIC: &[u8] = b"~Module signature appended~\n";
/// struct module_signature: algo, hash, id_type, signer_len, key_id_len,
/// pad[3], sig_len (big-endian u32).
pub(crate) const SIG_INFO_LEN: usize = 12;
/// struct modversion_info on 64-bit: u64 crc + char name[56].
pub(crate) const MODVERSION_LEN: usize = 64;
/// The section the preresolver adds to mark a module. Empty when the
/// preresolved symbols stay in .symtab as SHN_ABS; with `--fold-symbols`
/// (the symbols are gone, their addresses folded into the relocations) it
/// lists them, one text line each: the address as 16 lowercase hex digits, a
/// space, the name, a newline ("ffffffff81234560 _printk\n").
pub const PRERESOLVED_SECTION: &str = ".preresolved";

/// The `.preresolved` text of folded symbols.
pub(crate) fn folded_section(pairs: &[(&str, u64)]) -> Vec<u8> {
    let mut s = String::new();
    for (name, addr) in pairs {
        s.push_str(&format!("{addr:016x} {name}\n"));
    }
    s.into_bytes()
}

/// Read what `folded_section` wrote.
pub(crate) fn parse_folded_section(data: &[u8]) -> std::result::Result<Vec<(String, u64)>, ReadError> {
    let text = std::str::from_utf8(data)
        .map_err(|_| ReadError::Corrupt(format!("corrupt {PRERESOLVED_SECTION} section: not text")))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(ReadError::Corrupt(format!("corrupt {PRERESOLVED_SECTION} section: no newline at its end")));
    }
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let bad = || {
                ReadError::Corrupt(format!(
                    "corrupt {PRERESOLVED_SECTION} section, line {}: {line:?} is not \"address name\"",
                    i + 1
                ))
            };
            let (addr, name) = line.split_once(' ').ok_or_else(bad)?;
            if addr.len() != 16 || name.is_empty() || name.contains(' ') {
                return Err(bad());
            }
            Ok((name.to_string(), u64::from_str_radix(addr, 16).map_err(|_| bad())?))
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signature {
    /// Offset of the signature data (= the length of the ELF part).
    pub offset: usize,
    pub sig_len: usize,
    pub id_type: u8,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleExport {
    pub name: String,
    pub gpl: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crc: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Module {
    pub path: PathBuf,
    /// The module name as the kernel knows it (from .modinfo, else the file name).
    pub name: String,
    pub compression: Compression,
    pub machine: &'static str,
    pub undefined: Vec<String>,
    /// Symbol table index of each entry of `undefined`.
    #[serde(skip)]
    pub undefined_index: Vec<usize>,
    /// Global symbols with SHN_ABS and their values (what a preresolver leaves).
    #[serde(skip)]
    pub absolute: Vec<(String, u64)>,
    /// Symbols a preresolver folded into the relocations and removed, with
    /// their addresses (from the `.preresolved` section).
    #[serde(skip)]
    pub folded: Vec<(String, u64)>,
    pub exports: Vec<ModuleExport>,
    pub modinfo: Vec<(String, String)>,
    /// Symbol name and CRC from `__versions`.
    pub versions: Vec<(String, u32)>,
    pub signature: Option<Signature>,
    pub preresolved: bool,
    /// Its `.preresolved_slide` table: preresolved at link-time addresses
    /// for a kernel that moves them by its slide (patch `preresolved-slide`).
    #[serde(skip)]
    pub slide: Option<crate::kernel::slide::SlideTable>,
    /// The size of its `.gnu.linkonce.this_module`: the struct module of
    /// the kernel it was built for.
    #[serde(skip)]
    pub struct_module_size: u64,
}

impl Module {
    pub fn modinfo(&self, key: &str) -> Option<&str> {
        self.modinfo.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub(crate) fn modinfo_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.modinfo.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn license(&self) -> Option<&str> {
        self.modinfo("license")
    }

    pub fn vermagic(&self) -> Option<&str> {
        self.modinfo("vermagic")
    }

    /// The vermagic of the kernel the module is for: with a
    /// `.preresolved_slide` table, its vermagic without the marker the
    /// preresolver appended (a kernel without the patch refuses that).
    pub fn kernel_vermagic(&self) -> Option<&str> {
        let v = self.vermagic()?;
        Some(if self.slide.is_some() { crate::kernel::slide::unmarked_vermagic(v).unwrap_or(v) } else { v })
    }

    pub fn depends(&self) -> Vec<&str> {
        self.modinfo("depends").map(|d| d.split(',').filter(|s| !s.is_empty()).collect()).unwrap_or_default()
    }

    pub fn import_ns(&self) -> Vec<&str> {
        self.modinfo_all("import_ns").collect()
    }
}

/// The module name the kernel derives from a file name: the base name up to
/// the first '.', with '-' turned into '_'.
pub fn name_from_path(path: &Path) -> String {
    let base = path.file_name().map(|s| s.to_string_lossy()).unwrap_or_default();
    base.split('.').next().unwrap_or("").replace('-', "_")
}

pub fn is_module_file(path: &Path) -> bool {
    let n = path.file_name().map(|s| s.to_string_lossy()).unwrap_or_default();
    n.ends_with(".ko") || n.ends_with(".ko.xz") || n.ends_with(".ko.zst") || n.ends_with(".ko.gz")
}

/// Read a module file: decompress if needed, and return the raw bytes
/// (ELF + signature, as the kernel would receive them).
pub fn load_bytes(path: &Path) -> Result<(Bytes, Compression)> {
    let data = fsutil::map_file(path)?;
    let kind = Compression::detect(&data);
    if kind == Compression::None {
        return Ok((data, kind));
    }
    let raw = compress::decompress(&data, kind, data.len() * 4).map_err(|e| e.at(path))?;
    Ok((raw.into(), kind))
}

/// Split off an appended signature: the ELF part's length and the signature.
pub fn split_signature(data: &[u8]) -> std::result::Result<(usize, Option<Signature>), ReadError> {
    if !data.ends_with(SIG_MAGIC) {
        return Ok((data.len(), None));
    }
    let info_end = data.len() - SIG_MAGIC.len();
    let info = info_end
        .checked_sub(SIG_INFO_LEN)
        .map(|s| &data[s..info_end])
        .ok_or_else(|| ReadError::OutsideFile("truncated module signature".into()))?;
    // The kernel's struct module_signature: algo, hash, id_type,
    // signer_len, key_id_len, 3 pad bytes, then sig_len (big-endian).
    let (id_type, signer_len, key_id_len) = (info[2], info[3], info[4]);
    let sig_len = crate::bytes::be_u32(info, 8).expect("a whole signature info") as usize;
    let extra = signer_len as usize + key_id_len as usize;
    let offset = (info_end - SIG_INFO_LEN)
        .checked_sub(sig_len.saturating_add(extra))
        .ok_or_else(|| ReadError::OutsideFile("corrupt module signature: its length exceeds the file".into()))?;
    Ok((offset, Some(Signature { offset, sig_len, id_type })))
}

/// Read a module for the commands that rewrite modules (x86-64 only).
pub fn read(path: &Path) -> Result<Module> {
    let (data, compression) = load_bytes(path)?;
    parse(path, &data, compression).map_err(|e| e.at(path))
}

/// Read a module for the read-only commands: any machine bootlink analyses
/// ([`elf::ANALYSED_MACHINES`]: x86-64, AArch64). Whether it fits the
/// kernel it is paired with is the caller's check
/// ([`crate::kernel::KernelImage::same_machine`]).
pub fn read_analysed(path: &Path) -> Result<Module> {
    let (data, compression) = load_bytes(path)?;
    parse_for(path, &data, compression, elf::ANALYSED_MACHINES).map_err(|e| e.at(path))
}

/// A symbol's section index must name a section of the file, or be one of
/// the reserved indexes the kernel's loader handles (SHN_UNDEF, SHN_ABS,
/// SHN_LIVEPATCH): anything else would make simplify_symbols read a section
/// header past the table.
fn check_shndx(shndx: u16, i: usize, name: &[u8], sections: usize) -> std::result::Result<(), ReadError> {
    const SHN_LIVEPATCH: u16 = 0xff20;
    let ok = match shndx {
        s if s == SHN_UNDEF.0 || s == SHN_ABS.0 || s == SHN_LIVEPATCH => true,
        s if s >= object::elf::SHN_LORESERVE => false,
        s => (s as usize) < sections,
    };
    if ok {
        return Ok(());
    }
    let name = elf::printable(name);
    Err(ReadError::Corrupt(if shndx >= object::elf::SHN_LORESERVE {
        format!(
            "corrupt symbol table: symbol {name} (#{i}) has the reserved section index {shndx:#x}, which the kernel cannot load"
        )
    } else {
        format!("corrupt symbol table: symbol {name} (#{i}) has section index {shndx}, past the {sections} sections")
    }))
}

/// Read a module for the default machine (x86-64): every check of
/// [`crate::elf::check_layout`] and [`crate::modcheck`] first.
pub fn parse(path: &Path, data: &[u8], compression: Compression) -> std::result::Result<Module, ReadError> {
    parse_for(path, data, compression, Want::Relocatable.default_machines())
}

/// Read a module built for one of `machines` (empty: any machine).
pub(crate) fn parse_for(
    path: &Path,
    data: &[u8],
    compression: Compression,
    machines: &'static [object::elf::Machine],
) -> std::result::Result<Module, ReadError> {
    let (elf_len, signature) = split_signature(data)?;
    let elf = Elf::parse_for(&data[..elf_len], Want::Relocatable, machines)?;
    let modinfo_raw = elf.named_section_data(".modinfo")?.ok_or(ReadError::NotModule("no .modinfo section"))?;
    let struct_module_size = match elf.section(crate::modcheck::THIS_MODULE) {
        Some((_, sh)) => sh.sh_size(LE),
        None => return Err(ReadError::NotModule("no .gnu.linkonce.this_module section")),
    };
    let modinfo: Vec<(String, String)> = modinfo_raw
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let s = std::str::from_utf8(kv).ok()?;
            let (k, v) = s.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect();

    let symtab = elf.symbols()?;
    if symtab.is_empty() {
        // A .symtab of size 0 is there and empty: not the same fault as none.
        return Err(ReadError::Corrupt(match symtab.section().0 {
            0 => "module has no symbol table (.symtab)".into(),
            i => format!("corrupt symbol table: .symtab (section {i}) holds no symbols (size 0)"),
        }));
    }
    let mut undefined = Vec::new();
    let mut undefined_index = Vec::new();
    let mut absolute = Vec::new();
    let mut export_syms = Vec::new();
    let mut crc_syms = HashMap::new();
    let mut ns_syms = HashMap::new();
    for (i, sym) in symtab.iter().enumerate() {
        if i == 0 {
            continue;
        }
        let name = elf::sym_name(&symtab, sym)?;
        if name.is_empty() {
            continue;
        }
        let shndx = sym.st_shndx(LE);
        check_shndx(shndx.0, i, name, elf.sections.len())?;
        if shndx == SHN_UNDEF {
            undefined.push(String::from_utf8_lossy(name).into_owned());
            undefined_index.push(i);
        } else if shndx == SHN_ABS && sym.st_bind() != STB_LOCAL {
            absolute.push((String::from_utf8_lossy(name).into_owned(), sym.st_value(LE)));
        } else if let Some(n) = name.strip_prefix(b"__ksymtab_") {
            export_syms.push((n, shndx.0 as usize));
        } else if let Some(n) = name.strip_prefix(b"__crc_") {
            crc_syms.insert(n, (shndx.0 as usize, sym.st_value(LE)));
        } else if let Some(n) = name.strip_prefix(b"__kstrtabns_") {
            ns_syms.insert(n, (shndx.0 as usize, sym.st_value(LE)));
        }
    }

    crate::modcheck::check(&elf, &symtab)?;

    let mut exports = Vec::with_capacity(export_syms.len());
    for (name, shndx) in export_syms {
        let Some(sh) = elf.section_by_index(shndx) else { continue };
        let sec = elf.section_name(sh);
        if sec != b"__ksymtab" && sec != b"__ksymtab_gpl" {
            continue;
        }
        let crc = crc_syms.get(name).and_then(|&(idx, off)| {
            let d = elf.section_data(elf.section_by_index(idx)?).ok()?;
            elf::read_u32(d, off as usize)
        });
        let namespace = ns_syms.get(name).and_then(|&(idx, off)| {
            let d = elf.section_data(elf.section_by_index(idx)?).ok()?;
            elf::cstr(d, off as usize).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned())
        });
        exports.push(ModuleExport {
            name: String::from_utf8_lossy(name).into_owned(),
            gpl: sec == b"__ksymtab_gpl",
            namespace,
            crc,
        });
    }

    let mut versions = Vec::new();
    if let Some(v) = elf.named_section_data("__versions")? {
        if v.len() % MODVERSION_LEN != 0 {
            return Err(ReadError::Corrupt(format!(
                "corrupt __versions section: {} bytes is not a multiple of {MODVERSION_LEN}",
                v.len()
            )));
        }
        for entry in v.chunks_exact(MODVERSION_LEN) {
            let crc = crate::bytes::le_u64(entry, 0).expect("a whole entry") as u32;
            let name = elf::cstr(&entry[8..], 0).unwrap_or(&entry[8..]);
            versions.push((String::from_utf8_lossy(name).into_owned(), crc));
        }
    }

    let (preresolved, folded) = match elf.named_section_data(PRERESOLVED_SECTION)? {
        Some(d) => (true, parse_folded_section(d)?),
        None => (false, Vec::new()),
    };

    let slide = match elf.named_section_data(crate::kernel::slide::SECTION)? {
        Some(d) => Some(crate::kernel::slide::SlideTable::parse(d)?),
        None => None,
    };

    let name =
        modinfo.iter().find(|(k, _)| k == "name").map(|(_, v)| v.clone()).unwrap_or_else(|| name_from_path(path));
    Ok(Module {
        path: path.to_path_buf(),
        name,
        compression,
        machine: elf::machine_name(elf.machine()),
        undefined,
        undefined_index,
        absolute,
        folded,
        exports,
        modinfo,
        versions,
        signature,
        preresolved,
        slide,
        struct_module_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_follow_the_kernel_rule() {
        assert_eq!(name_from_path(Path::new("/x/nls_koi8-ru.ko.xz")), "nls_koi8_ru");
        assert_eq!(name_from_path(Path::new("ext4.ko")), "ext4");
        assert!(is_module_file(Path::new("a.ko.zst")));
        assert!(!is_module_file(Path::new("a.o")));
    }

    #[test]
    fn folded_section_round_trips_and_rejects_garbage() {
        let text = folded_section(&[("_printk", 0xffff_ffff_8123_4560), ("kfree", 1)]);
        assert_eq!(text, b"ffffffff81234560 _printk\n0000000000000001 kfree\n");
        assert_eq!(
            parse_folded_section(&text).unwrap(),
            vec![("_printk".to_string(), 0xffff_ffff_8123_4560), ("kfree".to_string(), 1)]
        );
        assert!(parse_folded_section(b"").unwrap().is_empty());
        assert!(parse_folded_section(b"ffffffff81234560 _printk").unwrap_err().to_string().contains("no newline"));
        assert!(parse_folded_section(b"81234560 _printk\n").unwrap_err().to_string().contains("line 1"));
        assert!(parse_folded_section(b"ffffffff8123456g _printk\n").is_err());
    }

    #[test]
    fn signature_trailer_is_split_and_bounds_checked() {
        let mut m = b"ELFDATA".to_vec();
        let sig = [9u8; 5];
        m.extend_from_slice(&sig);
        m.extend_from_slice(&[0, 0, 2, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&(sig.len() as u32).to_be_bytes());
        m.extend_from_slice(SIG_MAGIC);
        let (len, s) = split_signature(&m).unwrap();
        assert_eq!(len, 7);
        assert_eq!(s.unwrap().sig_len, 5);
        let mut bad = m.clone();
        let n = bad.len();
        bad[n - SIG_MAGIC.len() - 1] = 200; // sig_len larger than the file
        assert!(split_signature(&bad).unwrap_err().to_string().contains("corrupt module signature"));
        assert_eq!(split_signature(b"plain").unwrap(), (5, None));
    }
}
