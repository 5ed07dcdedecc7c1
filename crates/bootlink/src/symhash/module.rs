//! Adding tables to one module: read it, check it was built for this
//! kernel, collect its export tables and undefined symbols exactly as the
//! loader counts them, optionally sort `__versions` (and give each
//! undefined symbol its entry's index), append `.ksymhash` and
//! `.undef.hash`, re-sign, check the result, write atomically.

use object::elf::{SHF_ALLOC, SHN_UNDEF};
use object::read::elf::Sym;

use super::tables::{self, Tables, VERSIONS_SORTED};
use super::{EXPORTS_SECTION, ModuleResult, Options, UNDEF_SECTION};
use crate::elf::{self, Elf, LE, Want};
use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::kernel::KernelImage;
use crate::module;
use crate::modwrite::{Job, sign_for, write_module};

/// Export tables that are not what the module's symbols say.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

/// `struct modversion_info` on 64-bit: an unsigned long CRC, then the name.
const MODVERSION_SIZE: usize = 64;

/// What the tables are built from, read from a module's ELF part.
pub(super) struct Names {
    /// Export names of `__ksymtab` and `__ksymtab_gpl`, in table order.
    pub exports: [Vec<String>; 2],
    /// Every SHN_UNDEF symbol after index 0, in .symtab order (the kernel's
    /// count, empty names included).
    pub undefined: Vec<String>,
}

/// Each export has a symbol `__ksymtab_NAME` at its entry: its value over
/// the entry size is the index.
pub(super) fn names(elf: &Elf) -> std::result::Result<Names, Error> {
    let symtab = elf.symbols()?;
    let mut slots: [Vec<Option<String>>; 2] = [Vec::new(), Vec::new()];
    let mut sizes = [0usize; 2];
    let mut indices = [0usize; 2];
    for (t, sec) in ["__ksymtab", "__ksymtab_gpl"].iter().enumerate() {
        if let Some((i, sh)) = elf.section(sec) {
            indices[t] = i;
            sizes[t] = object::read::elf::SectionHeader::sh_size(sh, LE) as usize;
        }
    }
    let mut entries = Vec::new();
    let mut undefined = Vec::new();
    for (i, sym) in symtab.iter().enumerate().skip(1) {
        let name = elf::sym_name(&symtab, sym)?;
        let shndx = sym.st_shndx(LE);
        if shndx == SHN_UNDEF {
            undefined.push(String::from_utf8_lossy(name).into_owned());
            continue;
        }
        if let Some(n) = name.strip_prefix(b"__ksymtab_") {
            for (t, &index) in indices.iter().enumerate() {
                if index != 0 && shndx.0 as usize == index {
                    entries.push((t, sym.st_value(LE) as usize, String::from_utf8_lossy(n).into_owned(), i));
                }
            }
        }
    }
    for t in 0..2 {
        let count = entries.iter().filter(|e| e.0 == t).count();
        if count == 0 {
            if sizes[t] != 0 {
                return Err(corrupt(format!("export table {t} has {} bytes but no __ksymtab_ symbols", sizes[t])));
            }
            continue;
        }
        if sizes[t] % count != 0 {
            return Err(corrupt(format!("export table {t}: {} bytes do not hold {count} equal entries", sizes[t])));
        }
        slots[t] = vec![None; count];
    }
    for (t, value, name, _) in entries {
        let size = sizes[t] / slots[t].len();
        let slot = slots[t]
            .get_mut(value / size)
            .filter(|_| value % size == 0)
            .ok_or_else(|| corrupt(format!("__ksymtab_{name} does not point at an entry of its export table")))?;
        if slot.replace(name.clone()).is_some() {
            return Err(corrupt(format!("two symbols name export table entry {}", value / size)));
        }
    }
    let mut exports: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for t in 0..2 {
        for (i, s) in std::mem::take(&mut slots[t]).into_iter().enumerate() {
            exports[t].push(s.ok_or_else(|| corrupt(format!("export table entry {i} has no __ksymtab_ symbol")))?);
        }
    }
    Ok(Names { exports, undefined })
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The name of a `__versions` record: the bytes up to the first NUL.
fn version_name(rec: &[u8]) -> Vec<u8> {
    let name = &rec[8..];
    name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())].to_vec()
}

pub(super) fn one(k: &KernelImage, job: &Job, opts: &Options) -> Result<ModuleResult> {
    let path = &job.input;
    let (data, compression) = module::load_bytes(path)?;
    // The tables are over names: the same on every machine bootlink
    // analyses, for a module of the kernel's own machine.
    let m = module::parse_for(path, &data, compression, elf::ANALYSED_MACHINES).map_err(|e| e.at(path))?;
    k.same_machine(&m, "no tables added")?;
    crate::modwrite::check_vermagic(path, &m, k)?;
    let elf_len = m.signature.as_ref().map_or(data.len(), |s| s.offset);
    let elf_part = &data[..elf_len];
    let elf = Elf::parse_for(elf_part, Want::Relocatable, elf::ANALYSED_MACHINES).map_err(|e| e.at(path))?;
    for s in [EXPORTS_SECTION, UNDEF_SECTION] {
        if elf.section(s).is_some() {
            return Err(Error::file(Kind::Usage, path, format!("already has symbol hash tables ({s})")));
        }
    }
    let n = names(&elf).map_err(|e| e.at(path))?;
    let exports = [strs(&n.exports[0]), strs(&n.exports[1])];
    let blob = tables::build([&exports[0], &exports[1]])
        .map_err(|e| Error::file(Kind::Internal, path, e.to_string()).because(e))?;

    let mut ed = ElfEdit::new(elf_part.to_vec()).map_err(|e| e.at(path))?;
    let mut versions_sorted = 0;
    let mut flags = 0;
    let mut index = None;
    if opts.sort_versions
        && let Some(names) = ed.sort_records("__versions", MODVERSION_SIZE, version_name).map_err(|e| e.at(path))?
    {
        versions_sorted = names.len();
        flags |= VERSIONS_SORTED;
        // each import's record, by the sorted names the sort returned
        index = (versions_sorted > 0).then(|| tables::version_index(&strs(&n.undefined), &names));
    }
    let versions_indexed = index.as_ref().map_or(0, |v| v.iter().filter(|&&i| i != tables::NONE).count());
    let slots = match opts.export_slots {
        // The slots are where the image's tables put each name: a kernel
        // known by its System.map has no order to give.
        true if k.ksymtab_format.is_none() => {
            return Err(Error::file(
                Kind::Usage,
                path,
                "export slots need the kernel's image (its export tables' order), not a System.map",
            ));
        }
        true => Some(tables::export_slots(&strs(&n.undefined), &k.exports)),
        false => None,
    };
    let slotted = slots.as_ref().map_or(0, |v| v.iter().filter(|&&i| i != tables::NONE).count());
    let undef = tables::undef(&strs(&n.undefined), flags, index.as_deref(), slots.as_deref());
    ed.add_section_with(EXPORTS_SECTION, &blob, SHF_ALLOC, 8).map_err(|e| e.at(path))?;
    ed.add_section_with(UNDEF_SECTION, &undef, Default::default(), 4).map_err(|e| e.at(path))?;
    let mut bytes = ed.data;

    // Check what we wrote reads back: same names, tables that find them.
    {
        let check = Elf::parse_for(&bytes, Want::Relocatable, elf::ANALYSED_MACHINES).map_err(|e| {
            Error::file(Kind::Internal, path, format!("internal error: written module: {e}")).because(e)
        })?;
        let again = names(&check).map_err(|e| Error::file(Kind::Internal, path, e.to_string()).because(e))?;
        let data = check
            .named_section_data(EXPORTS_SECTION)
            .ok()
            .flatten()
            .ok_or_else(|| Error::file(Kind::Internal, path, "internal error: tables missing after writing"))?;
        let t = Tables::parse(data).map_err(|e| Error::file(Kind::Internal, path, e.to_string()).because(e))?;
        if again.exports != n.exports || again.undefined != n.undefined {
            return Err(Error::file(Kind::Internal, path, "internal error: names changed while writing tables"));
        }
        t.verify([&exports[0], &exports[1]])
            .map_err(|e| Error::file(Kind::Internal, path, e.to_string()).because(e))?;
    }
    if let Some(key) = &opts.sign {
        bytes = sign_for(job, key, &m.name, &bytes)?;
    }
    let resigned = opts.sign.is_some();
    if !opts.dry_run {
        write_module(job, compression, bytes, &opts.output)?;
    }
    Ok(ModuleResult {
        name: m.name.clone(),
        display: job.display.clone(),
        output: job.output.clone(),
        exports: n.exports[0].len(),
        gpl_exports: n.exports[1].len(),
        undefined: n.undefined.len(),
        table_bytes: blob.len() + undef.len(),
        versions_sorted,
        versions_indexed,
        slotted,
        resigned,
    })
}
