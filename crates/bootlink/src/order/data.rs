//! Data ordering (issue 29): the data objects a start-up touches, in the
//! order it first touches them, placed together by the linker beside the
//! function order.
//!
//! - The objects: every sized `STT_OBJECT` of `.symtab` that lies in an
//!   allocated section with file bytes (`.rodata`, `.data`, `.data.rel.ro`,
//!   `.PyRuntime`...; `.bss` has none, so it costs no read and is left out),
//!   named like functions (a static one with its `STT_FILE`).
//! - The record: the program run once under Valgrind's `lackey` tool
//!   (`--trace-mem=yes`, Debian's valgrind), which prints every load and
//!   store of the process in the order they happen. The first access to
//!   each object orders it. The load bias of a position-independent
//!   program is found from the instruction stream (the addresses where its
//!   entry point and `main` ran). Accesses that no sized object covers
//!   (merged string literals, the GOT, the dynamic section) are counted
//!   by page: no order can move them.
//! - The order: for GNU ld a `-T` fragment per output section
//!   (`.rodata.bootlink_order` inserted before `.rodata`, `.data.bootlink_order`
//!   before `.data`, `.data.rel.ro.bootlink_order` before `.data.rel.ro`)
//!   naming each object's input section; gold gets the section names, lld
//!   the symbol names. All need `-fdata-sections` (a section per object,
//!   `.data.NAME`); an object of another section (one named section for a
//!   whole variable, as CPython's `.PyRuntime`) cannot move.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym};
use serde::Serialize;

use super::symbols::FunctionId;
use crate::elf::{Elf, LE, Want, sym_name};
use crate::error::{Error, Kind, Result};

/// Output sections whose objects the linker scripts can move, and the
/// input section prefixes GCC's `-fdata-sections` gives their objects.
const MOVABLE: [(&str, &[&str]); 3] = [
    (".rodata", &[".rodata."]),
    (".data", &[".data.", ".data.rel.", ".data.rel.local."]),
    (".data.rel.ro", &[".data.rel.ro.", ".data.rel.ro.local."]),
];

/// A data object with file bytes.
#[derive(Debug, Clone)]
pub struct DataObject {
    pub id: FunctionId,
    pub addr: u64,
    pub size: u64,
    pub file_off: u64,
    /// The output section it lies in.
    pub section: String,
}

/// The data objects of one binary.
pub struct DataObjects {
    pub path: PathBuf,
    /// Sorted by address.
    pub list: Vec<DataObject>,
    by_id: HashMap<FunctionId, usize>,
    /// Names given to more than one static object.
    pub duplicated: HashSet<String>,
    /// The allocated sections with file bytes: (name, address, size, file offset).
    pub sections: Vec<(String, u64, u64, u64)>,
    /// Executable (not position-independent): loaded at its link addresses.
    pub fixed: bool,
    pub entry: u64,
    /// `main`'s link address, when the symbol table has it.
    pub main: Option<u64>,
    /// The PT_LOAD segments' file data: (address, file size, file offset).
    pub loads: Vec<(u64, u64, u64)>,
}

impl DataObjects {
    pub fn read(path: &Path) -> Result<DataObjects> {
        let data = crate::fsutil::map_file(path)?;
        let parsed = Elf::parse(&data, Want::Dynamic).map_err(|m| m.at(path))?;
        let syms = parsed.symbols().map_err(|m| m.at(path))?;
        if syms.is_empty() {
            return Err(super::symbols::no_symbol_table(&parsed, path));
        }
        let mut sections = Vec::new();
        let mut by_index: HashMap<usize, usize> = HashMap::new();
        for (i, sh) in parsed.sections.iter().enumerate() {
            let alloc = sh.sh_flags(LE).contains(elf::SHF_ALLOC);
            let exec = sh.sh_flags(LE).contains(elf::SHF_EXECINSTR);
            let tls = sh.sh_flags(LE).contains(elf::SHF_TLS);
            if alloc && !exec && !tls && sh.sh_type(LE) == elf::SHT_PROGBITS {
                let name = String::from_utf8_lossy(parsed.section_name(sh)).into_owned();
                by_index.insert(i, sections.len());
                sections.push((name, sh.sh_addr(LE), sh.sh_size(LE), sh.sh_offset(LE)));
            }
        }
        let mut list = Vec::new();
        let mut file: Option<String> = None;
        let mut seen_local: HashMap<String, usize> = HashMap::new();
        let mut main = None;
        for s in syms.iter() {
            let name = sym_name(&syms, s).map_err(|m| m.at(path))?;
            let name = String::from_utf8_lossy(name).into_owned();
            match s.st_type() {
                elf::STT_FILE => {
                    file = Some(name);
                    continue;
                }
                elf::STT_FUNC if name == "main" && s.st_bind() != elf::STB_LOCAL => main = Some(s.st_value(LE)),
                _ => {}
            }
            if s.st_type() != elf::STT_OBJECT || s.st_size(LE) == 0 {
                continue;
            }
            let Some(&k) = by_index.get(&usize::from(s.st_shndx(LE).0)) else { continue };
            let (ref sec, sa, ss, so) = sections[k];
            let (addr, size) = (s.st_value(LE), s.st_size(LE));
            let inside = addr >= sa && addr.checked_add(size).zip(sa.checked_add(ss)).is_some_and(|(e, se)| e <= se);
            if !inside {
                return Err(Error::file(
                    Kind::Format,
                    path,
                    format!(
                        "object `{name}` ({size} bytes at {addr:#x}) runs past its section {sec}: a damaged symbol table"
                    ),
                ));
            }
            let hidden = s.st_visibility() == elf::STV_HIDDEN;
            let local = s.st_bind() == elf::STB_LOCAL && !hidden && file.as_deref().is_some_and(|f| !f.is_empty());
            if local {
                *seen_local.entry(name.clone()).or_default() += 1;
            }
            let id = FunctionId { name, file: if local { file.clone() } else { None } };
            list.push(DataObject { id, addr, size, file_off: so + (addr - sa), section: sec.clone() });
        }
        list.sort_by_key(|o| (o.addr, o.id.file.is_some()));
        // Aliases (two names at one address) are one object: the first kept.
        list.dedup_by_key(|o| o.addr);
        let mut by_id = HashMap::new();
        for (i, o) in list.iter().enumerate() {
            by_id.entry(o.id.clone()).or_insert(i);
        }
        let duplicated = seen_local.into_iter().filter(|(_, n)| *n > 1).map(|(k, _)| k).collect();
        let fixed = parsed.header.e_type(LE) == elf::ET_EXEC;
        let entry = parsed.header.e_entry(LE);
        let phdrs = parsed
            .header
            .program_headers(LE, &*data)
            .map_err(|e| Error::file(Kind::Format, path, format!("bad program headers: {e}")).because(e))?;
        let loads = phdrs
            .iter()
            .filter(|p| p.p_type(LE) == elf::PT_LOAD)
            .map(|p| (p.p_vaddr(LE), p.p_filesz(LE), p.p_offset(LE)))
            .collect();
        Ok(DataObjects { path: path.to_path_buf(), list, by_id, duplicated, sections, fixed, entry, main, loads })
    }

    /// The object holding link-time address `addr`.
    pub fn containing(&self, addr: u64) -> Option<&DataObject> {
        let i = self.list.partition_point(|o| o.addr <= addr);
        let o = self.list.get(i.checked_sub(1)?)?;
        (addr < o.addr + o.size).then_some(o)
    }

    pub fn get(&self, id: &FunctionId) -> Option<&DataObject> {
        self.by_id.get(id).map(|&i| &self.list[i])
    }

    /// The file page (4 KiB) holding link-time address `addr`, when a
    /// segment's file data holds it.
    fn file_page(&self, addr: u64) -> Option<u64> {
        self.loads.iter().find(|(v, sz, _)| addr >= *v && addr - v < *sz).map(|(v, _, o)| (o + (addr - v)) / 4096)
    }

    /// The file offset of link-time address `addr` when a data section with file bytes holds it.
    fn file_off(&self, addr: u64) -> Option<u64> {
        self.sections.iter().find(|(_, a, s, _)| addr >= *a && addr - a < *s).map(|(_, a, _, o)| o + (addr - a))
    }
}

/// What a start-up touched of a binary's data.
#[derive(Debug, Clone, Serialize)]
pub struct Touched {
    /// The objects in first-touch order.
    pub order: Vec<FunctionId>,
    /// Their bytes.
    pub bytes: u64,
    /// Loads and stores into the data sections with file bytes (once the
    /// load bias is known: a PIE's accesses before its entry point ran are
    /// ordered but not counted).
    pub accesses: u64,
    /// 4 KiB pages of the file those accesses fall on.
    pub pages: usize,
    /// Of them, pages touched where no sized object lies (string literals,
    /// the GOT, `.dynamic`...): no order moves those bytes.
    pub pages_outside_objects: usize,
    /// Touched objects per output section: (section, objects, bytes, movable).
    pub sections: Vec<(String, usize, u64, bool)>,
    /// The start-up's whole footprint in the file: every 4 KiB page any
    /// access fell on (code, data, the headers ld.so reads).
    pub file_pages: usize,
    /// (block size, storage blocks those pages span in this binary).
    pub spans: Vec<(u64, usize)>,
    /// (block size, the fewest blocks those pages can span: all of them
    /// side by side from the start of the file).
    pub floor: Vec<(u64, usize)>,
    /// The Valgrind record this came from.
    pub record: PathBuf,
}

/// What [`record`] keeps of lackey's stream: the first access to each
/// 8-byte granule of the data sections, in order, as link-time addresses;
/// how many accesses fell in them; the file pages any access touched.
struct Stream {
    first: Vec<u64>,
    accesses_in: u64,
    /// Every 4 KiB page of the file an access (code or data) fell on.
    pages: Vec<u64>,
}

/// One line of lackey's `--trace-mem` output: (instruction?, address).
fn lackey_line(line: &[u8]) -> Option<(bool, u64)> {
    let (instr, rest) = match line {
        [b'I', b' ', b' ', rest @ ..] => (true, rest),
        [b' ', b'L' | b'S' | b'M', b' ', rest @ ..] => (false, rest),
        _ => return None,
    };
    let comma = rest.iter().position(|&b| b == b',')?;
    let hex = std::str::from_utf8(&rest[..comma]).ok()?;
    Some((instr, u64::from_str_radix(hex, 16).ok()?))
}

/// Run `cmd` (the program and its arguments, environment and directory
/// set) under `valgrind --tool=lackey --trace-mem=yes` and read its
/// accesses to `objs`'s data sections, in order.
fn run_lackey(cmd: Command, clean_env: bool, program: &Path, objs: &DataObjects) -> Result<Stream> {
    let prog = cmd.get_program().to_os_string();
    let args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_os_string()).collect();
    let mut vg = Command::new("valgrind");
    vg.args(["--tool=lackey", "--trace-mem=yes", "--log-fd=2"]).arg(&prog).args(&args);
    if clean_env {
        vg.env_clear();
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => vg.env(k, v),
            None => vg.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        vg.current_dir(d);
    }
    vg.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let what = format!("recording {}'s data accesses under valgrind", program.display());
    let mut child = vg.spawn().map_err(|e| crate::hosttool::spawn_error("valgrind", &what, "valgrind", e))?;
    let stderr = child.stderr.take().ok_or_else(|| Error::new(Kind::Internal, "valgrind's stderr"))?;
    // The data's link-time range; the bias is known only once the entry
    // point has run, so every distinct granule touched is kept in order.
    let lo = objs.sections.iter().map(|s| s.1).min().unwrap_or(0);
    let hi = objs.sections.iter().map(|s| s.1 + s.2).max().unwrap_or(0);
    let (entry, main) = (objs.entry, objs.main.unwrap_or(objs.entry));
    let mut entry_at: HashSet<u64> = HashSet::new();
    let mut bias: Option<u64> = objs.fixed.then_some(0);
    let mut seen: HashSet<u64> = HashSet::new();
    let mut order: Vec<u64> = Vec::new();
    let mut accesses_in = 0u64;
    let mut pages_at: HashSet<u64> = HashSet::new();
    let mut tail = Vec::new();
    let mut reader = std::io::BufReader::with_capacity(1 << 20, stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| Error::io(program, e))?;
        if n == 0 {
            break;
        }
        let Some((instr, a)) = lackey_line(&line) else {
            if !line.starts_with(b"==") && tail.len() < 4096 {
                tail.extend_from_slice(&line);
            }
            continue;
        };
        pages_at.insert(a >> 12);
        if instr {
            if bias.is_none() {
                // The entry point and main run at the same bias (both page offsets kept).
                if a >= entry && (a - entry) % 4096 == 0 {
                    entry_at.insert(a - entry);
                }
                if a >= main && (a - main) % 4096 == 0 && entry_at.contains(&(a - main)) {
                    bias = Some(a - main);
                }
            }
            continue;
        }
        if let Some(b) = bias {
            let l = a.wrapping_sub(b);
            if l < lo || l >= hi {
                continue;
            }
            accesses_in += 1;
        }
        if seen.insert(a >> 3) {
            order.push(a);
        }
    }
    let status = child.wait().map_err(|e| Error::io(program, e))?;
    if !status.success() {
        let msg = String::from_utf8_lossy(&tail);
        let last = msg.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(Error::file(Kind::Tool, program, format!("exited {status} under valgrind: {last}")));
    }
    let Some(b) = bias else {
        return Err(Error::file(
            Kind::Tool,
            program,
            "valgrind's record never ran this program's entry point and main: not the program that was read",
        ));
    };
    let first = order.into_iter().map(|a| a.wrapping_sub(b)).filter(|l| *l >= lo && *l < hi).collect();
    // The bias is page-aligned: a page of the process is a page of the file.
    let mut pages: Vec<u64> = pages_at
        .into_iter()
        .filter_map(|p| objs.file_page((p << 12).wrapping_sub(b)))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    pages.sort_unstable();
    Ok(Stream { first, accesses_in, pages })
}

/// The record file: `bootlink data-touch 1 KEY`, then the first-touched
/// link-time addresses in order, `page N` for each file page touched,
/// then `end ACCESSES`.
const MAGIC: &str = "bootlink data-touch 2";

fn read_record(path: &Path, key: &str) -> Option<Stream> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()? != format!("{MAGIC} {key}") {
        return None;
    }
    let (mut first, mut pages) = (Vec::new(), Vec::new());
    for l in lines {
        if let Some(n) = l.strip_prefix("end ") {
            return Some(Stream { first, accesses_in: n.parse().ok()?, pages });
        }
        if let Some(p) = l.strip_prefix("page ") {
            pages.push(p.parse().ok()?);
            continue;
        }
        first.push(u64::from_str_radix(l.strip_prefix("0x")?, 16).ok()?);
    }
    None
}

/// Record (or read back, when `out` holds a record of the same program,
/// arguments and environment) the data `cmd` touches, then map it onto
/// `objs` (the objects of the program `cmd` runs). `clean_env`: the
/// program gets only the variables `cmd` sets (as the cases start it),
/// else this process's environment with them.
pub fn record(cmd: Command, clean_env: bool, program: &Path, objs: &DataObjects, out: &Path) -> Result<Touched> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(std::fs::read(program).map_err(|e| Error::io(program, e))?);
    for a in cmd.get_args() {
        h.update(a.as_encoded_bytes());
        h.update([0]);
    }
    for (k, v) in cmd.get_envs() {
        h.update(k.as_encoded_bytes());
        h.update(v.map(|v| v.as_encoded_bytes()).unwrap_or_default());
        h.update([0]);
    }
    if !clean_env {
        // The rest of the environment is this process's: not the same start.
        for (k, v) in std::env::vars_os() {
            h.update(k.as_encoded_bytes());
            h.update(v.as_encoded_bytes());
            h.update([1]);
        }
    }
    let key: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let stream = match read_record(out, &key) {
        Some(s) => s,
        None => {
            crate::progress::status(&format!("recording {}'s first data touches under valgrind", program.display()));
            let s = run_lackey(cmd, clean_env, program, objs)?;
            let mut text = format!("{MAGIC} {key}\n");
            for a in &s.first {
                text += &format!("{a:#x}\n");
            }
            for p in &s.pages {
                text += &format!("page {p}\n");
            }
            text += &format!("end {}\n", s.accesses_in);
            crate::fsutil::write_atomic(out, text.as_bytes())?;
            s
        }
    };
    Ok(touched(&stream, objs, out))
}

fn touched(s: &Stream, objs: &DataObjects, record: &Path) -> Touched {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let mut pages = HashSet::new();
    let mut outside = HashSet::new();
    let mut bytes = 0;
    let mut per: Vec<(String, usize, u64, bool)> = Vec::new();
    for &a in &s.first {
        let Some(off) = objs.file_off(a) else { continue };
        pages.insert(off / 4096);
        match objs.containing(a) {
            Some(o) => {
                if seen.insert(o.addr) {
                    order.push(o.id.clone());
                    bytes += o.size;
                    match per.iter_mut().find(|p| p.0 == o.section) {
                        Some(p) => {
                            p.1 += 1;
                            p.2 += o.size;
                        }
                        None => per.push((o.section.clone(), 1, o.size, movable(&o.section))),
                    }
                }
            }
            None => {
                outside.insert(off / 4096);
            }
        }
    }
    let spans = super::report::BLOCKS
        .iter()
        .map(|&b| (b, super::report::touched(s.pages.iter().map(|p| (p * 4096, 4096)), b)))
        .collect();
    let floor =
        super::report::BLOCKS.iter().map(|&b| (b, (s.pages.len() as u64 * 4096).div_ceil(b) as usize)).collect();
    Touched {
        order,
        bytes,
        accesses: s.accesses_in,
        pages: pages.len(),
        pages_outside_objects: outside.len(),
        sections: per,
        file_pages: s.pages.len(),
        spans,
        floor,
        record: record.to_path_buf(),
    }
}

/// An output section the data order can move objects within, or the one
/// [`gnu_ld`] makes for them in front of it.
fn movable(section: &str) -> bool {
    let base = section.strip_suffix(".bootlink_order").unwrap_or(section);
    MOVABLE.iter().any(|(s, _)| *s == base)
}

/// The input sections GCC gives object `name` of output section `section`.
fn input_sections(section: &str, name: &str) -> Vec<String> {
    MOVABLE
        .iter()
        .find(|(s, _)| *s == section)
        .map(|(_, prefixes)| prefixes.iter().map(|p| format!("{p}{name}")).collect())
        .unwrap_or_default()
}

/// The touched objects that can move, with their output section, in order.
fn placed<'o>(order: &[FunctionId], objs: &'o DataObjects) -> Vec<&'o DataObject> {
    order.iter().filter_map(|id| objs.get(id)).filter(|o| movable(&o.section)).collect()
}

/// What [`record_command`] wrote.
#[derive(Debug, Serialize)]
pub struct DataReport {
    pub touched: Touched,
    /// order.ld, order.gold and order.lld.
    pub files: Vec<PathBuf>,
    /// The program run (the text names it).
    #[serde(skip)]
    pub program: PathBuf,
}

impl crate::report::Report for DataReport {
    fn render(&self) -> String {
        format!(
            "{}: {} data objects in first-touch order ({} bytes; {} of {} touched pages outside any object) -> {}\n",
            self.program.display(),
            self.touched.order.len(),
            self.touched.bytes,
            self.touched.pages_outside_objects,
            self.touched.pages,
            self.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    }
}

/// `bootlink order data`: `command` (a program and its arguments) run once
/// under valgrind; the record and the data order for each linker into `output`.
pub fn record_command(command: &[String], output: &Path) -> Result<DataReport> {
    let program = PathBuf::from(command.first().map(String::as_str).unwrap_or_default());
    let names = [&["data.touch"][..], &super::FILES[..]].concat();
    crate::fsutil::check_outputs_in(output, &names, &[&program])?;
    let objs = DataObjects::read(&program)?;
    std::fs::create_dir_all(output).map_err(|e| Error::io(output, e))?;
    let mut cmd = Command::new(&program);
    cmd.args(command.get(1..).unwrap_or_default());
    let touched = record(cmd, false, &program, &objs, &output.join("data.touch"))?;
    let ld = gnu_ld(&touched.order, &objs) + &gnu_ld_literals(&[], &HashSet::new(), &touched.order, &objs);
    let texts = [ld, gold(&touched.order, &objs), lld(&touched.order, &objs)];
    let written = super::write_together(output, texts)?;
    Ok(DataReport { touched, files: written, program })
}

/// GNU ld: one `SECTIONS { NAME.bootlink_order : {...} } INSERT BEFORE NAME;` per output section.
pub(crate) fn gnu_ld(order: &[FunctionId], objs: &DataObjects) -> String {
    let objects = placed(order, objs);
    let mut s = String::from("/* bootlink order: the data objects startup touches, in first-touch order. */\n");
    for (section, _) in MOVABLE {
        let here: Vec<&&DataObject> = objects.iter().filter(|o| o.section == section).collect();
        if here.is_empty() {
            continue;
        }
        s += &format!("SECTIONS\n{{\n  {section}.bootlink_order :\n  {{\n");
        for o in here {
            let file = super::symbols::file_pattern(&o.id, &objs.duplicated);
            s += &format!("    {file}({})\n", input_sections(section, &o.id.name).join(" "));
        }
        s += &format!("  }}\n}}\nINSERT BEFORE {section};\n");
    }
    s
}

/// GNU ld: the read-only data that has no symbol of its own, placed with
/// the start-up's: `.rodata.bootlink_literals`, inserted before `.rodata`
/// (so after `.rodata.bootlink_order`).
///
/// - each start-up function's own (`functions`, in order; `duplicated`
///   names matched by their object file): with `-ffunction-sections` GCC
///   names a function's jump tables `.rodata.NAME`, its string literals
///   `.rodata.NAME.str1.1` (`.str1.8`, `.str4.4`...) and its constants
///   `.rodata.NAME.cst*`; the part GCC split off cold (`NAME.cold`) shares
///   its parent's and is skipped;
/// - the string literals and constants of each file whose static data the
///   start-up touched (`touched`, in first-touch order): those only data
///   refers to (method and member tables' names, keyword lists) GCC puts in
///   the file's plain `.rodata.str1.*` and `.rodata.cst*`, with no name
///   to tell them apart; a file is known by its `STT_FILE` only for its
///   static objects, so a file with no touched static object keeps its
///   literals where they were.
///
/// Merged strings are merged within an output section: a literal the rest
/// of the program shares is then kept in both places (a few bytes).
pub(crate) fn gnu_ld_literals(
    functions: &[FunctionId],
    duplicated: &HashSet<String>,
    touched: &[FunctionId],
    objs: &DataObjects,
) -> String {
    // GCC's names for the literal sections below `prefix`: strings of 1,
    // 2 and 4-byte characters, fixed-size constants.
    let literals = |prefix: &str| format!("{prefix}str1.* {prefix}str2.* {prefix}str4.* {prefix}cst*");
    let mut lines = Vec::new();
    let mut seen = HashSet::new();
    for id in functions.iter().filter(|id| !id.name.ends_with(".cold")) {
        if seen.insert(id) {
            let n = &id.name;
            let file = super::symbols::file_pattern(id, duplicated);
            lines.push(format!("    {file}(.rodata.{n} {})", literals(&format!(".rodata.{n}."))));
        }
    }
    let mut files = HashSet::new();
    for f in touched.iter().filter_map(|id| objs.get(id)).filter_map(|o| o.id.file.as_deref()) {
        let object = super::symbols::object_of(f);
        if files.insert(object.clone()) {
            lines.push(format!("    *{object}({})", literals(".rodata.")));
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "/* bootlink order: the start-up's literals (strings, constants, jump tables), by function, then by file. */\n\
         SECTIONS\n{{\n  .rodata.bootlink_literals :\n  {{\n{}\n  }}\n}}\nINSERT BEFORE .rodata;\n",
        lines.join("\n")
    )
}

/// GNU ld: the code start-up does not run (every `.text.*` section the
/// function order leaves) and the unwind tables (`.eh_frame_hdr`,
/// `.eh_frame`: read only when unwinding) moved after `.bss`, each on a
/// page of its own, so the start-up's code, read-only data and writable
/// data follow each other in the file. The plain `.text` of the C
/// runtime's objects (`_start`) stays with the ordered code.
pub(crate) fn gnu_ld_rest_last() -> String {
    "/* bootlink order: what start-up does not run or read, after the data. */\n\
     SECTIONS\n{\n  .text.bootlink_rest ALIGN(CONSTANT (MAXPAGESIZE)) :\n  {\n    \
     *(.text.unlikely .text.*_unlikely .text.unlikely.*) *(.text.exit .text.exit.*)\n    \
     *(.text.startup .text.startup.*) *(.text.hot .text.hot.*) *(.text.*)\n  }\n}\nINSERT AFTER .bss;\n\
     SECTIONS\n{\n  .eh_frame_hdr ALIGN(CONSTANT (MAXPAGESIZE)) : { *(.eh_frame_hdr) }\n  \
     .eh_frame : { KEEP (*(.eh_frame)) }\n}\nINSERT AFTER .text.bootlink_rest;\n"
        .to_string()
}

/// gold: the input section names, for `--section-ordering-file`.
pub(crate) fn gold(order: &[FunctionId], objs: &DataObjects) -> String {
    placed(order, objs).iter().flat_map(|o| input_sections(&o.section, &o.id.name)).map(|s| s + "\n").collect()
}

/// lld: the symbol names, for `--symbol-ordering-file`.
pub(crate) fn lld(order: &[FunctionId], objs: &DataObjects) -> String {
    let mut seen = HashSet::new();
    placed(order, objs).iter().filter(|o| seen.insert(o.id.name.as_str())).map(|o| format!("{}\n", o.id.name)).collect()
}

/// Where `order`'s objects lie in `objs` (a binary linked with or without
/// the order): the 4 KiB pages and storage blocks they occupy, and how
/// many of them follow each other in the order they were touched (every
/// object directly after the one touched before it in its section).
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    pub objects: usize,
    pub bytes: u64,
    /// (block size, blocks) for each size of [`super::report::BLOCKS`].
    pub blocks: Vec<(u64, usize)>,
    /// Movable objects that lie right after their predecessor in the order
    /// (same output section, at most 64 bytes of alignment between them).
    pub in_order: usize,
    pub movable: usize,
}

pub fn placement(order: &[FunctionId], objs: &DataObjects) -> Placement {
    let found: Vec<&DataObject> = order.iter().filter_map(|id| objs.get(id)).collect();
    let blocks = super::report::BLOCKS
        .iter()
        .map(|&b| (b, super::report::touched(found.iter().map(|o| (o.file_off, o.size)), b)))
        .collect();
    let mov = placed(order, objs);
    let mut in_order = 0;
    for w in mov.windows(2) {
        if w[0].section == w[1].section
            && w[1].addr >= w[0].addr + w[0].size
            && w[1].addr - (w[0].addr + w[0].size) <= 64
        {
            in_order += 1;
        }
    }
    Placement { objects: found.len(), bytes: found.iter().map(|o| o.size).sum(), blocks, in_order, movable: mov.len() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lackey_lines() {
        assert_eq!(lackey_line(b"I  04016d0,3\n"), Some((true, 0x4016d0)));
        assert_eq!(lackey_line(b" L 1ffefff8a8,8\n"), Some((false, 0x1ffefff8a8)));
        assert_eq!(lackey_line(b" M 0071fb00,4\n"), Some((false, 0x71fb00)));
        assert_eq!(lackey_line(b"==123== Lackey"), None);
        assert_eq!(lackey_line(b" X 12,4"), None);
    }

    fn objects(list: Vec<DataObject>, duplicated: &[&str]) -> DataObjects {
        let by_id = list.iter().enumerate().map(|(i, o)| (o.id.clone(), i)).collect();
        DataObjects {
            path: "prog".into(),
            list,
            by_id,
            duplicated: duplicated.iter().map(|d| d.to_string()).collect(),
            sections: Vec::new(),
            fixed: true,
            entry: 0,
            main: None,
            loads: Vec::new(),
        }
    }

    #[test]
    fn each_linker_gets_the_touched_objects_that_move() {
        let o = |name: &str, file: Option<&str>, addr: u64, section: &str| DataObject {
            id: FunctionId { name: name.into(), file: file.map(Into::into) },
            addr,
            size: 16,
            file_off: addr,
            section: section.into(),
        };
        let objs = objects(
            vec![
                o("tab", Some("a.c"), 0x100, ".data"),
                o("tab", Some("b.c"), 0x200, ".data"),
                o("names", None, 0x300, ".rodata"),
                o("_PyRuntime", None, 0x400, ".PyRuntime"),
            ],
            &["tab"],
        );
        let order: Vec<FunctionId> = [3, 1, 2, 0].iter().map(|&i: &usize| objs.list[i].id.clone()).collect();
        let ld = gnu_ld(&order, &objs);
        // One fragment per output section, .rodata's first (MOVABLE's order),
        // a duplicated static matched by its object file; .PyRuntime left out.
        let (ro, data) = (ld.find(".rodata.bootlink_order").unwrap(), ld.find(".data.bootlink_order").unwrap());
        assert!(ro < data, "{ld}");
        assert!(ld.contains("*b.o(.data.tab .data.rel.tab .data.rel.local.tab)\n    *a.o(.data.tab"), "{ld}");
        assert!(ld.contains("INSERT BEFORE .rodata;") && ld.contains("INSERT BEFORE .data;"), "{ld}");
        assert!(!ld.contains("PyRuntime") && !ld.contains(".data.rel.ro"), "{ld}");
        assert_eq!(gold(&order, &objs).lines().next(), Some(".data.tab"));
        assert_eq!(lld(&order, &objs), "tab\nnames\n");
        let p = placement(&order, &objs);
        assert_eq!((p.objects, p.movable, p.blocks[0]), (4, 3, (4096, 1)));
    }

    #[test]
    fn the_start_ups_literals_follow_its_functions_then_its_files() {
        let o = |name: &str, file: Option<&str>, addr: u64| DataObject {
            id: FunctionId { name: name.into(), file: file.map(Into::into) },
            addr,
            size: 16,
            file_off: addr,
            section: ".data".into(),
        };
        let objs = objects(vec![o("methods", Some("Modules/posixmodule.c"), 0x100), o("global", None, 0x200)], &[]);
        let f = |n: &str, file: Option<&str>| FunctionId { name: n.into(), file: file.map(Into::into) };
        let functions = [f("main", None), f("init", Some("b.c")), f("main", None), f("init.cold", None)];
        let dups: HashSet<String> = ["init".to_string()].into();
        let touched = [objs.list[1].id.clone(), objs.list[0].id.clone()];
        let ld = gnu_ld_literals(&functions, &dups, &touched, &objs);
        let lines: Vec<&str> = ld.lines().map(str::trim).filter(|l| l.starts_with('*')).collect();
        assert_eq!(
            lines,
            [
                "*(.rodata.main .rodata.main.str1.* .rodata.main.str2.* .rodata.main.str4.* .rodata.main.cst*)",
                "*b.o(.rodata.init .rodata.init.str1.* .rodata.init.str2.* .rodata.init.str4.* .rodata.init.cst*)",
                // Only a static object names its file; a global one cannot.
                "*posixmodule.o(.rodata.str1.* .rodata.str2.* .rodata.str4.* .rodata.cst*)",
            ],
            "{ld}"
        );
        assert!(ld.contains(".rodata.bootlink_literals :") && ld.ends_with("INSERT BEFORE .rodata;\n"), "{ld}");
        assert_eq!(gnu_ld_literals(&[], &dups, &[objs.list[1].id.clone()], &objs), "");
    }

    #[test]
    fn input_sections_follow_gcc() {
        assert_eq!(input_sections(".rodata", "tab.0"), [".rodata.tab.0"]);
        assert_eq!(input_sections(".data", "x"), [".data.x", ".data.rel.x", ".data.rel.local.x"]);
        assert!(input_sections(".PyRuntime", "_PyRuntime").is_empty());
    }
}
