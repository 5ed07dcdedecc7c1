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
    /// Where an export may point.
    pub(crate) targets: Targets,
}

/// The link-time address ranges an export may point into: the kernel's
/// code and data. `what` names them in a refusal.
pub(crate) struct Targets {
    /// [start, end) each.
    pub(crate) ranges: Vec<(u64, u64)>,
    pub(crate) what: String,
}

impl Targets {
    /// The SHF_ALLOC sections of a vmlinux (code, data, BSS, and on x86-64
    /// the per-CPU section, linked at 0), each a range.
    pub(crate) fn of_vmlinux(elf: &Elf) -> Targets {
        let ranges = elf
            .sections
            .iter()
            .filter(|s| s.sh_flags(LE).contains(object::elf::SHF_ALLOC) && s.sh_size(LE) > 0)
            .filter_map(|s| Some((s.sh_addr(LE), s.sh_addr(LE).checked_add(s.sh_size(LE))?)))
            .collect();
        Targets { ranges, what: "the kernel's code and data (its allocated sections)".into() }
    }

    fn contains(&self, addr: u64) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..b).contains(&addr))
    }
}

/// The longest symbol name the kernel handles, NUL included
/// (include/linux/kallsyms.h, KSYM_NAME_LEN, 6.1 and 6.12).
const KSYM_NAME_LEN: usize = 512;

/// Whether `s` can be the name of an export: 1 to 511 printable ASCII
/// characters (C identifiers and '.', in every kernel's tables).
pub(crate) fn is_symbol_name(s: &[u8]) -> bool {
    (1..KSYM_NAME_LEN).contains(&s.len()) && s.iter().all(u8::is_ascii_graphic)
}

/// `s` in quotes, its bytes that are not printable ASCII as `\xNN`.
pub(crate) fn quoted(s: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in s.iter().take(80) {
        match b {
            b'"' | b'\\' => out.extend(['\\', b as char]),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if s.len() > 80 {
        out.push_str("...");
    }
    out.push('"');
    out
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

/// Pick the layout under which most sampled entries' names point into the
/// string section (and the tables hold whole entries): a damaged entry
/// among those sampled is then named by [`decode`], not taken for a sign
/// of another layout.
fn detect(tables: &[&Table], strings: &Strings) -> Option<EntryFormat> {
    [EntryFormat::Prel32, EntryFormat::Abs64, EntryFormat::Abs64NoNamespace].into_iter().find(|&fmt| {
        let (mut sampled, mut named) = (0, 0);
        for t in tables {
            if t.data.len() % fmt.size() != 0 {
                return false;
            }
            let n = t.data.len() / fmt.size();
            for i in (0..n).step_by((n / 16).max(1)) {
                sampled += 1;
                let name = field(t, fmt, i, 1).is_some_and(|a| strings.contains(a));
                // the namespace is NULL or a string; with no namespaces,
                // this field is the next entry's value, rarely a string.
                let namespace =
                    fmt != EntryFormat::Abs64 || field(t, fmt, i, 2).is_some_and(|a| a == 0 || strings.contains(a));
                named += (name && namespace) as usize;
            }
        }
        sampled > 0 && 2 * named > sampled
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
    let targets = Targets::of_vmlinux(elf);
    let out = decode(Tables { plain, gpl, crcs, crcs_gpl, strings, targets }, fmt)?;
    Ok((out, fmt))
}

/// Every export of `tables`, entries in layout `fmt`, in table order
/// (`__ksymtab`, then `__ksymtab_gpl`). A CRC table is used when it has one
/// CRC per entry. Every entry must name a symbol (printable, in
/// `__ksymtab_strings`), a namespace that is empty or printable, and a value
/// among `tables.targets`: one that does not refuses the whole image, in a
/// line naming the entry, and no export is dropped.
pub(crate) fn decode(tables: Tables, fmt: EntryFormat) -> std::result::Result<Vec<Export>, Error> {
    let Tables { plain, gpl, crcs, crcs_gpl, strings, targets } = tables;
    let mut out = Vec::new();
    for (tab, crcs, is_gpl) in [(plain, crcs, false), (gpl, crcs_gpl, true)] {
        let Some(tab) = tab else { continue };
        let n = tab.data.len() / fmt.size();
        let crcs = crcs.filter(|c| c.len() == 4 * n);
        let table = if is_gpl { "__ksymtab_gpl" } else { "__ksymtab" };
        out.reserve(n);
        for i in 0..n {
            let at = tab.addr.wrapping_add((i * fmt.size()) as u64);
            let entry = |name: Option<&[u8]>| match name {
                Some(n) => format!("{table} entry {i} ({}) at {at:#x}", String::from_utf8_lossy(n)),
                None => format!("{table} entry {i} at {at:#x}"),
            };
            let get = |k| field(&tab, fmt, i, k).ok_or_else(|| corrupt(format!("{}: cut short", entry(None))));
            let name_at = get(1)?;
            let name = strings.at(name_at).ok_or_else(|| {
                corrupt(format!("{}: its name at {name_at:#x} lies outside __ksymtab_strings", entry(None)))
            })?;
            if !is_symbol_name(name) {
                return Err(corrupt(format!(
                    "{}: its name {} is not a symbol name (1 to {} printable characters)",
                    entry(None),
                    quoted(name),
                    KSYM_NAME_LEN - 1
                )));
            }
            let addr = get(0)?;
            if !targets.contains(addr) {
                return Err(corrupt(format!(
                    "{}: the export's address {addr:#x} lies outside {}",
                    entry(Some(name)),
                    targets.what
                )));
            }
            // No namespace: a NULL pointer, or a PREL32 offset of 0 (exports
            // made in assembly, include/asm-generic/export.h).
            let none = match fmt {
                EntryFormat::Abs64NoNamespace => true,
                EntryFormat::Prel32 => elf::read_i32(tab.data, i * fmt.size() + 8) == Some(0),
                EntryFormat::Abs64 => get(2)? == 0,
            };
            let namespace = if none {
                None
            } else {
                let a = get(2)?;
                let ns = strings.at(a).ok_or_else(|| {
                    corrupt(format!("{}: its namespace at {a:#x} lies outside __ksymtab_strings", entry(Some(name))))
                })?;
                if !ns.iter().all(u8::is_ascii_graphic) || ns.len() >= KSYM_NAME_LEN {
                    return Err(corrupt(format!(
                        "{}: its namespace {} is not printable",
                        entry(Some(name)),
                        quoted(ns)
                    )));
                }
                Some(ns).filter(|s| !s.is_empty())
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
