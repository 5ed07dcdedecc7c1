//! Decoding the kernel's export tables (`__ksymtab`, `__ksymtab_gpl`,
//! `__kcrctab*`, `__ksymtab_strings`) from a linked vmlinux.
//!
//! Two entry layouts exist. With CONFIG_HAVE_ARCH_PREL32_RELOCATIONS
//! (x86_64, arm64, ... since 4.19) an entry is three 32-bit offsets, each
//! relative to its own field: value, name, namespace (12 bytes). Otherwise an
//! entry holds absolute pointers: value, name and (since 5.4) namespace.

use serde::Serialize;

use super::corrupt;
use crate::elf::{self, Elf, LE, Shdr};
use crate::error::Error;
use object::read::elf::SectionHeader;

#[derive(Debug, Clone, Serialize)]
pub struct Export {
    pub name: String,
    /// Link-time address of the exported object (before any KASLR slide).
    pub addr: u64,
    pub gpl: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crc: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryFormat {
    /// Three PREL32 offsets (value, name, namespace), 12 bytes.
    Prel32,
    /// Absolute 64-bit pointers (value, name, namespace), 24 bytes.
    Abs64,
    /// Absolute 64-bit pointers (value, name), 16 bytes, before namespaces (< 5.4).
    Abs64NoNamespace,
}

impl EntryFormat {
    pub(crate) fn size(self) -> usize {
        match self {
            EntryFormat::Prel32 => 12,
            EntryFormat::Abs64 => 24,
            EntryFormat::Abs64NoNamespace => 16,
        }
    }
}

/// `__ksymtab_strings`: its link-time address and bytes.
pub(crate) struct Strings<'d> {
    pub(crate) addr: u64,
    pub(crate) data: &'d [u8],
}

impl<'d> Strings<'d> {
    fn at(&self, addr: u64) -> Option<&'d [u8]> {
        let off = addr.checked_sub(self.addr)?;
        elf::cstr(self.data, usize::try_from(off).ok()?)
    }
    fn contains(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.addr) < self.data.len() as u64
    }
}

/// An export table (`__ksymtab`, `__ksymtab_gpl`): its link-time address
/// and bytes.
pub(crate) struct Table<'d> {
    pub(crate) addr: u64,
    pub(crate) data: &'d [u8],
}

/// Where a kernel's export tables are, however they were found (section
/// headers of a vmlinux, or a search of a raw image): the two tables, their
/// modversions CRCs (`__kcrctab`, `__kcrctab_gpl`) and the strings.
pub(crate) struct Tables<'d> {
    pub(crate) plain: Option<Table<'d>>,
    pub(crate) gpl: Option<Table<'d>>,
    pub(crate) crcs: Option<&'d [u8]>,
    pub(crate) crcs_gpl: Option<&'d [u8]>,
    pub(crate) strings: Strings<'d>,
}

pub(crate) fn field(t: &Table, fmt: EntryFormat, i: usize, k: usize) -> Option<u64> {
    let base = i.checked_mul(fmt.size())?;
    match fmt {
        EntryFormat::Prel32 => {
            let off = base.checked_add(4 * k)?;
            let rel = elf::read_i32(t.data, off)? as i64;
            Some((t.addr as i64).wrapping_add(off as i64).wrapping_add(rel) as u64)
        }
        EntryFormat::Abs64 | EntryFormat::Abs64NoNamespace => elf::read_u64(t.data, base.checked_add(8 * k)?),
    }
}

/// Pick the layout under which every sampled entry's name points into the
/// string section.
fn detect(tables: &[&Table], strings: &Strings) -> Option<EntryFormat> {
    [EntryFormat::Prel32, EntryFormat::Abs64, EntryFormat::Abs64NoNamespace].into_iter().find(|&fmt| {
        let mut sampled = 0;
        for t in tables {
            if t.data.len() % fmt.size() != 0 {
                return false;
            }
            let n = t.data.len() / fmt.size();
            for i in (0..n).step_by((n / 16).max(1)) {
                sampled += 1;
                match field(t, fmt, i, 1) {
                    Some(a) if strings.contains(a) => {}
                    _ => return false,
                }
                if fmt == EntryFormat::Abs64 {
                    // the namespace is NULL or a string; with no namespaces,
                    // this field is the next entry's value, rarely a string.
                    match field(t, fmt, i, 2) {
                        Some(0) => {}
                        Some(a) if strings.contains(a) => {}
                        _ => return false,
                    }
                }
            }
        }
        sampled > 0
    })
}

fn table<'d>(elf: &Elf<'d>, name: &str) -> std::result::Result<Option<Table<'d>>, Error> {
    match elf.section(name) {
        None => Ok(None),
        Some((_, s)) => Ok(Some(Table { addr: s.sh_addr(LE), data: elf.section_data(s)? })),
    }
}

/// Read every export of a linked vmlinux, with its GPL flag, namespace and
/// modversions CRC.
pub fn read_exports(elf: &Elf) -> std::result::Result<(Vec<Export>, EntryFormat), Error> {
    if let Some(why) = elf.no_section_headers() {
        return Err(corrupt(format!("{why}, so no __ksymtab_strings: bootlink reads the exports from those sections")));
    }
    let strings_sh: &Shdr = elf
        .section("__ksymtab_strings")
        .ok_or_else(|| {
            corrupt(
                "no __ksymtab_strings section: the kernel exports no symbols (or its section headers were stripped)",
            )
        })?
        .1;
    let strings = Strings { addr: strings_sh.sh_addr(LE), data: elf.section_data(strings_sh)? };
    let plain = table(elf, "__ksymtab")?;
    let gpl = table(elf, "__ksymtab_gpl")?;
    let present: Vec<&Table> = [plain.as_ref(), gpl.as_ref()].into_iter().flatten().collect();
    if present.is_empty() {
        return Err(corrupt("no __ksymtab or __ksymtab_gpl section"));
    }
    let fmt = detect(&present, &strings)
        .ok_or_else(|| corrupt("__ksymtab entries are in no known layout (PREL32 or absolute pointers)"))?;
    let crcs = elf.named_section_data("__kcrctab")?;
    let crcs_gpl = elf.named_section_data("__kcrctab_gpl")?;
    let out = decode(Tables { plain, gpl, crcs, crcs_gpl, strings }, fmt)?;
    Ok((out, fmt))
}

/// Every export of `tables`, entries in layout `fmt`, in table order
/// (`__ksymtab`, then `__ksymtab_gpl`). A CRC table is used when it has one
/// CRC per entry.
pub(crate) fn decode(tables: Tables, fmt: EntryFormat) -> std::result::Result<Vec<Export>, Error> {
    let Tables { plain, gpl, crcs, crcs_gpl, strings } = tables;
    let mut out = Vec::new();
    for (tab, crcs, is_gpl) in [(plain, crcs, false), (gpl, crcs_gpl, true)] {
        let Some(tab) = tab else { continue };
        let n = tab.data.len() / fmt.size();
        let crcs = crcs.filter(|c| c.len() == 4 * n);
        out.reserve(n);
        for i in 0..n {
            let bad = || {
                corrupt(format!(
                    "corrupt export table entry {i} in {}",
                    if is_gpl { "__ksymtab_gpl" } else { "__ksymtab" }
                ))
            };
            let addr = field(&tab, fmt, i, 0).ok_or_else(bad)?;
            let name = strings.at(field(&tab, fmt, i, 1).ok_or_else(bad)?).ok_or_else(bad)?;
            let namespace = match fmt {
                EntryFormat::Abs64NoNamespace => None,
                _ => match field(&tab, fmt, i, 2) {
                    Some(0) | None => None,
                    Some(a) => strings.at(a).filter(|s| !s.is_empty()),
                },
            };
            out.push(Export {
                name: String::from_utf8_lossy(name).into_owned(),
                addr,
                gpl: is_gpl,
                namespace: namespace.map(|n| String::from_utf8_lossy(n).into_owned()),
                crc: crcs.and_then(|c| elf::read_u32(c, 4 * i)),
            });
        }
    }
    Ok(out)
}
