//! A program's functions from its symbol table, and a trace's addresses
//! mapped to them. A static function is named with the source file its
//! `STT_FILE` symbol gives, so two static functions of the same name in two
//! files stay two functions.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Sym};
use serde::Serialize;

use super::trace::Trace;
use crate::elf::{Elf, LE, Want, sym_name};
use crate::error::{Error, Kind, Result};

/// A function: its name, the source file for a static one, where it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FunctionId {
    pub name: String,
    /// The `STT_FILE` name for a static (STB_LOCAL) function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl std::fmt::Display for FunctionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{file}:{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Function {
    pub id: FunctionId,
    pub addr: u64,
    pub size: u64,
    /// Offset of its first byte in the file (what the page cache reads).
    pub file_off: u64,
}

/// The functions of one binary, by address and by identity.
pub struct Functions {
    pub path: PathBuf,
    pub list: Vec<Function>,
    by_addr: HashMap<u64, usize>,
    by_id: HashMap<FunctionId, usize>,
    /// Link-time address range of the functions.
    pub lo: u64,
    pub hi: u64,
    /// Names given to more than one static function.
    pub duplicated: HashSet<String>,
    /// Every function's name.
    names: HashSet<String>,
}

/// The refusal of a program with no symbol table: one that has no section
/// headers at all is damaged or stripped of them, not only linked with -s.
pub(crate) fn no_symbol_table(parsed: &Elf, path: &Path) -> Error {
    match parsed.no_section_headers() {
        Some(why) => Error::file(Kind::Format, path, format!("{why}, so no symbol table (.symtab)")),
        None => Error::file(
            Kind::Unsupported,
            path,
            "no symbol table (.symtab): link the program without stripping it (no -s)",
        ),
    }
}

impl Functions {
    /// Read `path`'s function symbols (`.symtab`).
    pub fn read(path: &Path) -> Result<Functions> {
        let data = crate::fsutil::map_file(path)?;
        let parsed = Elf::parse(&data, Want::Dynamic).map_err(|m| m.at(path))?;
        let syms = parsed.symbols().map_err(|m| m.at(path))?;
        if syms.is_empty() {
            return Err(super::symbols::no_symbol_table(&parsed, path));
        }
        let phdrs = parsed
            .header
            .program_headers(LE, &*data)
            .map_err(|e| Error::file(Kind::Format, path, format!("bad program headers: {e}")).because(e))?;
        let loads: Vec<(u64, u64, u64)> = phdrs
            .iter()
            .filter(|p| p.p_type(LE) == elf::PT_LOAD)
            .map(|p| (p.p_vaddr(LE), p.p_filesz(LE), p.p_offset(LE)))
            .collect();
        let mut list = Vec::new();
        let mut file: Option<String> = None;
        let mut seen_local: HashMap<String, usize> = HashMap::new();
        for s in syms.iter() {
            let name = sym_name(&syms, s).map_err(|m| m.at(path))?;
            let name = String::from_utf8_lossy(name).into_owned();
            if s.st_type() == elf::STT_FILE {
                file = Some(name);
                continue;
            }
            if s.st_type() != elf::STT_FUNC || s.st_shndx(LE) == elf::SHN_UNDEF || s.st_size(LE) == 0 {
                continue;
            }
            // A global of hidden visibility becomes local in the output:
            // GNU ld lists it after an STT_FILE with an empty name (and
            // makes it STV_DEFAULT), gold keeps STV_HIDDEN. Either is still
            // one function of that name, not a static of some file.
            let hidden = s.st_visibility() == elf::STV_HIDDEN;
            let local = s.st_bind() == elf::STB_LOCAL && !hidden && file.as_deref().is_some_and(|f| !f.is_empty());
            let (addr, size) = (s.st_value(LE), s.st_size(LE));
            // The segment whose file data holds the function's first byte
            // (end computed without wrapping: the headers are the file's).
            let Some(&(v, filesz, off)) =
                loads.iter().find(|(v, sz, _)| addr >= *v && v.checked_add(*sz).is_none_or(|end| addr < end))
            else {
                continue;
            };
            // Its last byte must be there too: the prediction walks every
            // block of it.
            let inside = addr.checked_add(size).zip(v.checked_add(filesz)).is_some_and(|(end, seg)| end <= seg);
            let file_off = off.checked_add(addr - v);
            let Some(file_off) = file_off.filter(|_| inside) else {
                return Err(Error::file(
                    Kind::Format,
                    path,
                    format!(
                        "function `{name}` ({size} bytes at {addr:#x}) runs past its segment's file data: a damaged symbol table"
                    ),
                ));
            };
            if local {
                *seen_local.entry(name.clone()).or_default() += 1;
            }
            let id = FunctionId { name, file: if local { file.clone() } else { None } };
            list.push(Function { id, addr, size, file_off });
        }
        if list.is_empty() {
            return Err(Error::file(Kind::Unsupported, path, "no function symbols with a size in .symtab"));
        }
        let duplicated = seen_local.into_iter().filter(|(_, n)| *n > 1).map(|(k, _)| k).collect();
        Ok(Functions::index(path, list, duplicated))
    }

    /// The set of `list`, indexed; `duplicated`: the names of more than one
    /// static function.
    pub(crate) fn index(path: &Path, mut list: Vec<Function>, duplicated: HashSet<String>) -> Functions {
        list.sort_by_key(|f| (f.addr, f.id.file.is_some()));
        let mut by_addr = HashMap::new();
        let mut by_id = HashMap::new();
        for (i, f) in list.iter().enumerate() {
            by_addr.entry(f.addr).or_insert(i);
            by_id.entry(f.id.clone()).or_insert(i);
        }
        let lo = list.iter().map(|f| f.addr).min().unwrap_or(0);
        let hi = list.iter().map(|f| f.addr + f.size).max().unwrap_or(0);
        let names = list.iter().map(|f| f.id.name.clone()).collect();
        Functions { path: path.to_path_buf(), list, by_addr, by_id, lo, hi, duplicated, names }
    }

    /// Whether some function (static or not) has this name.
    pub fn has_name(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    pub fn at(&self, addr: u64) -> Option<&Function> {
        self.by_addr.get(&addr).map(|&i| &self.list[i])
    }

    pub fn get(&self, id: &FunctionId) -> Option<&Function> {
        self.by_id.get(id).map(|&i| &self.list[i])
    }
}

/// A trace mapped onto a binary: its functions in first-call order.
#[derive(Debug, Clone, Serialize)]
pub struct Mapped {
    pub order: Vec<FunctionId>,
    /// First calls into other objects (libraries) of the traced process.
    pub other_objects: usize,
    /// Traced functions left out because the layout binary lacks them.
    pub missing: usize,
    pub total_calls: u64,
}

/// Map `trace`'s first calls in `object` ("-": the program) onto `funcs`
/// (the binary that was traced). An address inside the binary's functions
/// that starts none of them means the trace is of another build.
pub fn map(trace: &Trace, trace_path: &Path, funcs: &Functions, object: &str) -> Result<Mapped> {
    let Some(bias) = trace.bias_of(object) else {
        return Err(Error::file(Kind::Usage, trace_path, format!("the trace lists no object `{object}`")));
    };
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut other = 0;
    for &(addr, line) in &trace.calls {
        let a = addr.wrapping_sub(bias);
        if addr < bias || a < funcs.lo || a >= funcs.hi {
            other += 1;
            continue;
        }
        let Some(f) = funcs.at(a) else {
            return Err(Error::file(
                Kind::Stale,
                trace_path,
                format!(
                    "line {line}: {addr:#x} (link-time {a:#x}) starts no function of {}: a trace of another build",
                    funcs.path.display()
                ),
            ));
        };
        if seen.insert(f.id.clone()) {
            order.push(f.id.clone());
        }
    }
    if order.is_empty() {
        return Err(Error::file(
            Kind::Stale,
            trace_path,
            format!("no traced call lies in {}'s functions: a trace of another program", funcs.path.display()),
        ));
    }
    Ok(Mapped { order, other_objects: other, missing: 0, total_calls: trace.total_calls })
}

/// The object file a static symbol came from: its STT_FILE name with the
/// extension `.o` ("dir/a.c" → "a.o"), as linker scripts match it.
pub(crate) fn object_of(file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    let stem = base.rsplit_once('.').map_or(base, |(s, _)| s);
    format!("{stem}.o")
}

/// GNU ld's file pattern for `id`'s input sections: its object file when
/// its name is given to more than one static (`duplicated`), else any.
pub(crate) fn file_pattern(id: &FunctionId, duplicated: &HashSet<String>) -> String {
    match &id.file {
        Some(f) if duplicated.contains(&id.name) => format!("*{}", object_of(f)),
        _ => "*".to_string(),
    }
}

/// A function's name without GCC's clone suffixes (`.constprop.N`,
/// `.isra.N`, `.part.N`, `.cold`): `f.part.0.isra.0` -> `f`.
pub(crate) fn base_name(name: &str) -> &str {
    let mut cut = name.len();
    for suffix in [".constprop.", ".isra.", ".part.", ".cold"] {
        if let Some(i) = name.find(suffix) {
            cut = cut.min(i);
        }
    }
    &name[..cut]
}

impl Mapped {
    /// Keep the functions `funcs` has (a build of the same sources without
    /// instrumentation, where GCC may have inlined some functions away or
    /// cloned them under another suffix): a traced function it lacks under
    /// its own name stands for its clones of the same file there (`f` for
    /// `f.constprop.0`); the others are left out and counted in `missing`.
    pub(crate) fn keep_present(&mut self, funcs: &Functions) {
        let mut clones: HashMap<(&str, Option<&str>), Vec<&FunctionId>> = HashMap::new();
        for f in &funcs.list {
            let base = base_name(&f.id.name);
            if base.len() < f.id.name.len() && !f.id.name.ends_with(".cold") {
                clones.entry((base, f.id.file.as_deref())).or_default().push(&f.id);
            }
        }
        let mut seen = HashSet::new();
        let mut have = Vec::new();
        for id in &self.order {
            let found: Vec<&FunctionId> = match funcs.get(id) {
                Some(f) => vec![&f.id],
                None => clones.get(&(base_name(&id.name), id.file.as_deref())).cloned().unwrap_or_default(),
            };
            if found.is_empty() {
                self.missing += 1;
            }
            for f in found {
                if seen.insert(f.clone()) {
                    have.push(f.clone());
                }
            }
        }
        self.order = have;
    }
}

/// `order`'s functions in `funcs` (another build of the same sources, e.g.
/// the uninstrumented one); a function it lacks is an error naming it.
pub fn resolve<'f>(order: &[FunctionId], funcs: &'f Functions) -> Result<Vec<&'f Function>> {
    order
        .iter()
        .map(|id| {
            funcs.get(id).ok_or_else(|| {
                Error::file(
                    Kind::Stale,
                    &funcs.path,
                    format!("has no function `{id}`, which the trace calls: a binary of other sources"),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_suffixes_come_off() {
        assert_eq!(base_name("pyinit_core.constprop.0"), "pyinit_core");
        assert_eq!(base_name("descr_check.part.0.isra.0"), "descr_check");
        assert_eq!(base_name("f.cold"), "f");
        assert_eq!(base_name("main"), "main");
    }
}
