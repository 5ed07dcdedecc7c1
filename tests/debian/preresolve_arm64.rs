//! `bootlink preresolve` on Debian's arm64 package (linux-image-6.1.0-56-arm64,
//! fetched as a foreign package): every module preresolved, folded and
//! trimmed, each result checked by a reading of its own here (the `object`
//! crate's ELF types, not bootlink's module reader):
//!
//! - addresses: every SHN_ABS symbol holds the address of the export of
//!   that name found in the Image by a search of its own (the 12-byte
//!   `__ksymtab` entry whose name offset points at the name), is a vmlinux
//!   export in Debian's Module.symvers, and the addresses are the targets
//!   of the Image's own R_AARCH64_RELATIVE relocations as often as exports
//!   are;
//! - folding: every relocation keeps its S + A, every CALL26/JUMP26 stays
//!   against its symbol, and the module PLT count, computed here the way
//!   arch/arm64/kernel/module-plts.c does, is unchanged;
//! - `--trim-symtab`: only unreferenced local data symbols go; the mapping
//!   symbols of code stay;
//! - a module of the other machine is refused in one line either way, and
//!   nothing is written for it.
//!
//! Without the package each test is a counted skip.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, Rela as _, SectionHeader, Sym as _};

use common::arm64::*;
use common::*;

const KIMAGE_VADDR: u64 = 0xffff_8000_0800_0000; // CONFIG_ARM64_VA_BITS=48
const CALL26: u32 = 283;
const SHN_UNDEF: u16 = elf::SHN_UNDEF.0;
const SHN_ABS: u16 = elf::SHN_ABS.0;
const SHF_EXECINSTR: u64 = elf::SHF_EXECINSTR.0;
const STT_FUNC: u8 = elf::STT_FUNC.0;
const JUMP26: u32 = 282;

type Header = elf::FileHeader64<LE>;

/// One symbol: name, st_info, st_shndx, st_value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Symbol {
    name: String,
    info: u8,
    shndx: u16,
    value: u64,
}

/// One relocation: offset, type, symbol index, addend.
type Rel = (u64, u32, usize, i64);

/// A relocation section: its name, target section index, and entries.
struct RelaSection {
    name: String,
    target: usize,
    entries: Vec<Rel>,
}

/// A module as read here.
struct Ko {
    /// Section names and flags, by index.
    sections: Vec<(String, u64)>,
    symbols: Vec<Symbol>,
    first_global: usize,
    relas: Vec<RelaSection>,
    /// `.preresolved`'s bytes, if any.
    preresolved: Option<Vec<u8>>,
}

fn read_ko(path: &Path) -> Ko {
    let (data, _) = bootlink::module::load_bytes(path).unwrap();
    let (len, _) = bootlink::module::split_signature(&data).unwrap();
    let data = &data[..len];
    let h = Header::parse(data).unwrap();
    assert_eq!(h.e_machine(LE), elf::EM_AARCH64, "{}", path.display());
    let sections = h.sections(LE, data).unwrap();
    let names: Vec<(String, u64)> = sections
        .iter()
        .map(|s| (String::from_utf8_lossy(sections.section_name(LE, s).unwrap()).into_owned(), s.sh_flags(LE).0))
        .collect();
    let symtab = sections.symbols(LE, data, elf::SHT_SYMTAB).unwrap();
    let symbols = symtab
        .iter()
        .map(|s| Symbol {
            name: String::from_utf8_lossy(symtab.symbol_name(LE, s).unwrap()).into_owned(),
            info: s.st_info().0,
            shndx: s.st_shndx(LE).0,
            value: s.st_value(LE),
        })
        .collect();
    let first_global = sections.iter().find(|s| s.sh_type(LE) == elf::SHT_SYMTAB).unwrap().sh_info(LE) as usize;
    let mut relas = Vec::new();
    let mut preresolved = None;
    for (i, s) in sections.iter().enumerate() {
        if names[i].0 == ".preresolved" {
            preresolved = Some(s.data(LE, data).unwrap().to_vec());
        }
        if s.sh_type(LE) != elf::SHT_RELA {
            continue;
        }
        let entries = s
            .data_as_array::<elf::Rela64<LE>, _>(LE, data)
            .unwrap()
            .iter()
            .map(|r| (r.r_offset(LE), r.r_type(LE, false).0, r.r_sym(LE, false) as usize, r.r_addend(LE)))
            .collect();
        relas.push(RelaSection { name: names[i].0.clone(), target: s.sh_info(LE) as usize, entries });
    }
    Ko { sections: names, symbols, first_global, relas, preresolved }
}

fn preresolve(k: &bootlink::fetch::Fetched, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"preresolve", &"--json", &"--assume-nokaslr", &"--kernel", &k.vmlinuz, &"-o", &out];
    for e in extra {
        args.push(e);
    }
    args.push(&k.modules);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["errors"].as_array().unwrap().is_empty(), "{}", r["errors"]);
    r
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The address of each export named in `names`, found in the raw Image:
/// the name as a NUL-terminated string, or the tail of one (the linker
/// merges `__ksymtab_strings`, so "memcpy" may be the end of "__memcpy";
/// the first string follows the CRC table's bytes without a NUL),
/// then every 4-aligned 32-bit word that points at it relative to itself
/// (an entry's name offset, 4 bytes into a 12-byte `struct
/// kernel_symbol`), whose namespace offset 4 bytes later is 0 or points at
/// a string, and in a run of at least 16 such entries 12 bytes apart with
/// rising names (the tables are arrays sorted by name; stray words that
/// happen to point at names do not form such runs). The value offset 4
/// bytes before the name's gives the address, `KIMAGE_VADDR` + its offset
/// in the Image.
fn ksymtab_addresses(image: &[u8], names: &HashSet<&str>) -> HashMap<String, Vec<u64>> {
    let i32_at = |o: usize| i32::from_le_bytes(image[o..o + 4].try_into().unwrap()) as i64;
    let mut at: HashMap<usize, &str> = HashMap::new();
    let mut i = 0;
    while i < image.len() {
        let end = image[i..].iter().position(|&b| b == 0).map_or(image.len(), |p| i + p);
        // The identifier characters the string ends with (the first string
        // follows the CRC table's bytes, with no NUL before it).
        let ident = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.';
        let start = image[i..end].iter().rposition(|b| !ident(b)).map_or(i, |p| i + p + 1).max(end.saturating_sub(128));
        for tail in start..end {
            if let Some(name) = names.get(std::str::from_utf8(&image[tail..end]).unwrap()) {
                at.insert(tail, name);
            }
        }
        i = end + 1;
    }
    let string_at = |o: i64| {
        usize::try_from(o).ok().filter(|&o| o < image.len()).is_some_and(|o| {
            let end = image[o..].iter().take(64).position(|&b| b == 0);
            end.is_some_and(|e| image[o..o + e].iter().all(|b| b.is_ascii_graphic()))
        })
    };
    // Entries (their offset in the Image) and the name each names.
    let mut entries: HashMap<usize, &str> = HashMap::new();
    for o in (4..image.len() - 8).step_by(4) {
        let target = o as i64 + i32_at(o);
        let Some(name) = usize::try_from(target).ok().and_then(|t| at.get(&t)) else { continue };
        let ns = i32_at(o + 4);
        if ns == 0 || string_at((o + 4) as i64 + ns) {
            entries.insert(o - 4, name);
        }
    }
    // Runs of entries 12 bytes apart with rising names; only those of at
    // least 16 are taken.
    let mut offsets: Vec<usize> = entries.keys().copied().collect();
    offsets.sort();
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    let mut run: Vec<usize> = Vec::new();
    for (k, &e) in offsets.iter().enumerate() {
        run.push(e);
        let next = offsets.get(k + 1).filter(|&&n| n == e + 12 && entries[&n] > entries[&e]);
        if next.is_none() {
            if run.len() >= 16 {
                for &e in &run {
                    let value = e as i64 + i32_at(e);
                    out.entry(entries[&e].to_string()).or_default().push(KIMAGE_VADDR.wrapping_add(value as u64));
                }
            }
            run.clear();
        }
    }
    out
}

/// The link-time addresses the Image's R_AARCH64_RELATIVE entries (24
/// bytes, r_info 1027) store, for relocated places inside the Image.
fn relative_targets(image: &[u8]) -> HashSet<u64> {
    let u64_at = |o: usize| u64::from_le_bytes(image[o..o + 8].try_into().unwrap());
    let size = u64_at(16);
    let mut out = HashSet::new();
    for o in (8..image.len() - 16).step_by(8) {
        if u64_at(o) == 1027 && (KIMAGE_VADDR..KIMAGE_VADDR + size).contains(&u64_at(o - 8)) {
            out.insert(u64_at(o + 8));
        }
    }
    out
}

#[test]
fn preresolving_every_arm64_module_gives_the_images_export_addresses() {
    let test = "preresolving_every_arm64_module_gives_the_images_export_addresses";
    let Some(k) = arm64(test) else { return };
    let Some(symvers_path) = symvers(test, k) else { return };
    let config = std::fs::read_to_string(&k.config).unwrap();
    assert!(config.lines().any(|l| l == "CONFIG_ARM64_VA_BITS=48"), "KIMAGE_VADDR here is VA_BITS 48's");
    let sv = read_symvers(&symvers_path);
    let out = tmpdir("arm64-abs");
    let r = preresolve(k, &out, &[]);

    let image = std::fs::read(&k.vmlinuz).unwrap();
    let names: HashSet<&str> = sv.vmlinux.keys().map(String::as_str).collect();
    let found = ksymtab_addresses(&image, &names);
    let relative = relative_targets(&image);
    let (mut abs, mut expected, mut modules, mut changed) = (0u64, 0u64, 0u64, 0u64);
    let mut values = HashSet::new();
    let mut problems = Vec::new();
    for input in common::independent::modules_below(&k.modules) {
        let rel = input.strip_prefix(&k.modules).unwrap();
        let (before, after) = (read_ko(&input), read_ko(&out.join(rel)));
        modules += 1;
        assert_eq!(before.symbols.len(), after.symbols.len(), "{}", rel.display());
        let mut here = 0;
        for (b, a) in before.symbols.iter().zip(&after.symbols) {
            let export = sv.vmlinux.get(&b.name);
            if b.shndx == SHN_UNDEF && export.is_some() {
                expected += 1;
            }
            if a == b {
                continue;
            }
            // The only change: an undefined vmlinux export made absolute.
            if !(b.shndx == SHN_UNDEF && a.shndx == SHN_ABS && a.name == b.name && a.info == b.info) {
                problems.push(format!("{}: {b:?} became {a:?}", rel.display()));
                continue;
            }
            abs += 1;
            here += 1;
            values.insert(a.value);
            match found.get(&a.name).map(Vec::as_slice) {
                _ if export.is_none() => problems.push(format!("{}: {} is no vmlinux export", rel.display(), a.name)),
                Some([addr]) if *addr == a.value => {}
                other => {
                    problems.push(format!("{}: {} is {:#x}, the Image says {other:x?}", rel.display(), a.name, a.value))
                }
            }
        }
        changed += (here > 0) as u64;
    }
    assert!(problems.is_empty(), "{} problems, first: {:?}", problems.len(), &problems[..problems.len().min(5)]);
    let t = &r["totals"];
    assert_eq!((n(&t["modules"]), n(&t["preresolved"]), n(&t["preresolved_modules"])), (modules, abs, changed));
    // Nothing was kept for a check (license, namespace, CRC): every
    // undefined vmlinux export by Module.symvers was preresolved.
    assert!(t["kept"].as_object().unwrap().is_empty(), "{}", t["kept"]);
    assert_eq!(abs, expected);
    let hit = values.iter().filter(|v| relative.contains(v)).count();
    let off = values.iter().filter(|v| relative.contains(&(*v + 4))).count();
    println!(
        "{modules} modules, {changed} preresolved: {abs} SHN_ABS symbols, all at the Image's __ksymtab address; \
         {hit} of {} distinct addresses are R_AARCH64_RELATIVE targets ({off} at +4)",
        values.len()
    );
    assert!(hit * 100 > values.len() * 80 && off * 100 < values.len(), "{hit} {off} of {}", values.len());
    if reference(test, k) {
        assert_eq!((modules, changed, abs), (3_685, 3_476, 124_610));
    }
}

/// Where a relocation's S + A comes from: an absolute address (symbol 0
/// or SHN_ABS), a section of the module, or a symbol left to the loader.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Abs(u64),
    Section(u16, u64),
    Undefined(String, i64),
}

fn target(ko: &Ko, r: &Rel) -> Target {
    let s = &ko.symbols[r.2];
    match (r.2, s.shndx) {
        (0, _) => Target::Abs(r.3 as u64),
        (_, SHN_ABS) => Target::Abs(s.value.wrapping_add(r.3 as u64)),
        (_, SHN_UNDEF) => Target::Undefined(s.name.clone(), r.3),
        (_, shndx) => Target::Section(shndx, s.value.wrapping_add(r.3 as u64)),
    }
}

/// The module PLT entries `module_frob_arch_sections` reserves (core,
/// init), computed as arch/arm64/kernel/module-plts.c does with
/// CONFIG_RANDOMIZE_BASE: per relocation section of an executable
/// section, each CALL26/JUMP26 whose symbol is not defined in that
/// section, a repeat of the same (type, symbol, addend 0) once; with the
/// erratum 843419 workaround, also each ADRP at an offset that section
/// alignment cannot keep off the last 8 bytes of a page, plus one slot in
/// 341 (4 KiB of 12-byte entries) of slack.
fn plt_counts(ko: &Ko, erratum_843419: bool) -> (u64, u64) {
    let (mut core, mut init) = (0, 0);
    for rs in &ko.relas {
        let (name, flags) = &ko.sections[rs.target];
        if flags & SHF_EXECINSTR == 0 {
            continue;
        }
        let mut branches: Vec<(u32, usize, i64)> = rs
            .entries
            .iter()
            .filter(|r| (r.1 == CALL26 || r.1 == JUMP26) && ko.symbols[r.2].shndx as usize != rs.target)
            .map(|r| (r.1, r.2, r.3))
            .collect();
        branches.sort();
        let mut count = (0..branches.len())
            .filter(|&i| branches[i].2 != 0 || i == 0 || branches[i] != branches[i - 1])
            .count() as u64;
        if erratum_843419 {
            let adrp = |r: &&Rel| r.1 == 275 || r.1 == 276;
            count +=
                rs.entries.iter().filter(adrp).filter(|r| 2u64 << (!(r.0 | 7)).trailing_zeros() > 4096).count() as u64;
            count += count.div_ceil(4096 / 12);
        }
        if name.starts_with(".init") {
            init += count;
        } else {
            core += count;
        }
    }
    (core, init)
}

/// The class a report names an AArch64 relocation type by.
fn class(ty: u32) -> &'static str {
    match ty {
        257..=259 => "absolute",
        260..=262 => "pc_relative",
        263..=272 | 287..=293 => "move_wide",
        273..=276 => "page",
        277 | 278 | 284..=286 | 299 => "page_offset",
        279 | 280 => "short_branch",
        JUMP26 | CALL26 => "branch",
        256 => "none",
        _ => "unknown",
    }
}

#[test]
fn folding_keeps_every_branch_its_symbol_and_the_plt_counts() {
    let test = "folding_keeps_every_branch_its_symbol_and_the_plt_counts";
    let Some(k) = arm64(test) else { return };
    let dir = tmpdir("arm64-fold");
    let (abs_dir, fold_dir) = (dir.join("abs"), dir.join("fold"));
    preresolve(k, &abs_dir, &[]);
    let r = preresolve(k, &fold_dir, &["--fold-symbols"]);

    let mut classes: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let (mut plts, mut plts_erratum, mut relocations, mut symbols_folded, mut folded_modules) = (0, 0, 0, 0, 0);
    let mut problems = Vec::new();
    let mut outputs = Vec::new();
    for input in common::independent::modules_below(&k.modules) {
        let rel = input.strip_prefix(&k.modules).unwrap();
        let (orig, abs, fold) = (read_ko(&input), read_ko(&abs_dir.join(rel)), read_ko(&fold_dir.join(rel)));
        outputs.push(fold_dir.join(rel));
        let name = rel.display();
        // The PLT reservation, with and without the erratum workaround.
        for erratum in [false, true] {
            let want = plt_counts(&orig, erratum);
            if plt_counts(&fold, erratum) != want || plt_counts(&abs, erratum) != want {
                problems.push(format!("{name}: PLT count {want:?} became {:?}", plt_counts(&fold, erratum)));
            }
            if erratum { plts_erratum += want.0 + want.1 } else { plts += want.0 + want.1 }
        }
        // Every relocation in its place with its S + A; branches against a symbol.
        assert_eq!(abs.relas.len(), fold.relas.len(), "{name}");
        for (ra, rf) in abs.relas.iter().zip(&fold.relas) {
            assert_eq!((&ra.name, ra.entries.len()), (&rf.name, rf.entries.len()), "{name}");
            for (a, f) in ra.entries.iter().zip(&rf.entries) {
                relocations += 1;
                let (ta, tf) = (target(&abs, a), target(&fold, f));
                if (a.0, a.1, &ta) != (f.0, f.1, &tf) {
                    problems.push(format!("{name}: {} {a:?} {ta:?} became {f:?} {tf:?}", ra.name));
                }
                if (f.1 == CALL26 || f.1 == JUMP26) && (f.2 == 0 || fold.symbols[f.2].name != abs.symbols[a.2].name) {
                    problems.push(format!("{name}: a branch lost its symbol: {f:?}"));
                }
                let preresolved = abs.symbols[a.2].shndx == SHN_ABS && orig.symbols[a.2].shndx == SHN_UNDEF;
                if preresolved {
                    let c = classes.entry(class(a.1)).or_default();
                    if f.2 == 0 { c.0 += 1 } else { c.1 += 1 }
                }
            }
        }
        // .preresolved lists exactly the symbols gone from the table.
        let listed: HashSet<String> = String::from_utf8(fold.preresolved.clone().unwrap_or_default())
            .unwrap()
            .lines()
            .map(|l| l.split_once(' ').unwrap().1.to_string())
            .collect();
        let left: HashSet<&str> = fold.symbols.iter().map(|s| s.name.as_str()).collect();
        let gone: HashSet<String> =
            abs.symbols.iter().filter(|s| !left.contains(s.name.as_str())).map(|s| s.name.clone()).collect();
        if listed != gone {
            problems.push(format!("{name}: {} listed, {} gone", listed.len(), gone.len()));
        }
        symbols_folded += listed.len() as u64;
        folded_modules += (!listed.is_empty()) as u64;
    }
    assert!(problems.is_empty(), "{} problems, first: {:?}", problems.len(), &problems[..problems.len().min(5)]);
    // The report's figures are the ones counted here.
    let t = &r["totals"];
    assert_eq!((n(&t["symbols_folded"]), n(&t["folded_modules"])), (symbols_folded, folded_modules));
    let reported: BTreeMap<&str, (u64, u64)> = t["relocations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(c, v)| (c.as_str(), (n(&v["folded"]), n(&v["kept"]))))
        .collect();
    assert_eq!(reported, classes);
    assert_eq!(classes.get("branch").map(|c| c.0), Some(0), "no branch is folded");
    println!(
        "{relocations} relocations kept their S + A; {symbols_folded} symbols folded in {folded_modules} modules; \
         PLT entries reserved: {plts} ({plts_erratum} with the erratum 843419 workaround), unchanged"
    );
    for (c, (f, kept)) in &classes {
        println!("  {c}: {f} folded, {kept} kept");
    }
    // binutils reads every folded module without a warning.
    for chunk in outputs.chunks(400) {
        let mut args = vec!["-W", "-r", "-s"];
        args.extend(chunk.iter().map(|p| p.to_str().unwrap()));
        let o = std::process::Command::new("readelf").args(&args).output().unwrap();
        assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // A second run recognises every module and the kernel it was made for.
    let again = run(&[
        &"preresolve",
        &"--json",
        &"--dry-run",
        &"--assume-nokaslr",
        &"--fold-symbols",
        &"--kernel",
        &k.vmlinuz,
        &fold_dir,
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let a: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let ta = &a["totals"];
    assert_eq!((n(&ta["already"]), n(&ta["preresolved"])), (n(&t["preresolved_modules"]), 0));
    assert_eq!(n(&ta["already_symbols"]), n(&t["preresolved"]));
    if reference(test, k) {
        assert_eq!(folded_modules, 2_520);
        assert_eq!(classes["branch"], (0, 602_995));
    }
}

/// A mapping symbol (`$x`, `$d`, with an optional `.N`), which AArch64
/// objects carry to tell code from data.
fn is_mapping(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2 && b[0] == b'$' && b"xd".contains(&b[1]) && (b.len() == 2 || b[2] == b'.')
}

#[test]
fn trim_symtab_drops_only_unreferenced_local_data_symbols_on_arm64() {
    let test = "trim_symtab_drops_only_unreferenced_local_data_symbols_on_arm64";
    let Some(k) = arm64(test) else { return };
    let out = tmpdir("arm64-trim");
    let r = preresolve(k, &out, &["--trim-symtab"]);
    let (mut removed, mut code_mapping, mut data_mapping_dropped, mut data_mapping) = (0u64, 0u64, 0u64, 0u64);
    let mut problems = Vec::new();
    for input in common::independent::modules_below(&k.modules) {
        let rel = input.strip_prefix(&k.modules).unwrap();
        let (orig, trimmed) = (read_ko(&input), read_ko(&out.join(rel)));
        let used: HashSet<usize> = orig.relas.iter().flat_map(|r| r.entries.iter().map(|e| e.2)).collect();
        // What is left, by identity (the preresolved symbols compared as undefined).
        let key = |s: &Symbol| {
            let shndx = if s.shndx == SHN_ABS { SHN_UNDEF } else { s.shndx };
            (s.name.clone(), s.info, shndx, if shndx == SHN_UNDEF { 0 } else { s.value })
        };
        let mut left: HashMap<_, usize> = HashMap::new();
        for s in &trimmed.symbols {
            *left.entry(key(s)).or_default() += 1;
        }
        for (i, s) in orig.symbols.iter().enumerate() {
            let code = s.shndx != 0
                && (s.shndx as usize) < orig.sections.len()
                && orig.sections[s.shndx as usize].1 & SHF_EXECINSTR != 0;
            match left.get_mut(&key(s)) {
                Some(c) if *c > 0 => {
                    *c -= 1;
                    code_mapping += (is_mapping(&s.name) && code) as u64;
                    data_mapping += (is_mapping(&s.name) && !code) as u64;
                }
                _ => {
                    removed += 1;
                    data_mapping_dropped += is_mapping(&s.name) as u64;
                    let droppable = i != 0
                        && i < orig.first_global
                        && !used.contains(&i)
                        && !code
                        && s.shndx != SHN_UNDEF
                        && s.info & 0xf != STT_FUNC
                        && !["__ksymtab_", "__kstrtab", "__crc_"].iter().any(|p| s.name.starts_with(p));
                    if !droppable {
                        problems.push(format!("{}: removed {s:?}", rel.display()));
                    }
                }
            }
        }
        // Only locals went: .symtab's sh_info moved down by as many.
        let fewer = orig.symbols.len() - trimmed.symbols.len();
        assert_eq!(trimmed.first_global + fewer, orig.first_global, "{}", rel.display());
    }
    assert!(problems.is_empty(), "{} problems, first: {:?}", problems.len(), &problems[..problems.len().min(5)]);
    let reported: u64 = r["modules"].as_array().unwrap().iter().map(|m| n(&m["symbols_trimmed"])).sum();
    assert_eq!(reported, removed);
    println!(
        "{removed} local data symbols removed ({data_mapping_dropped} of them $d mapping symbols of data sections, \
         {data_mapping} left in data sections); {code_mapping} mapping symbols of code sections kept"
    );
    assert!(removed > 0 && code_mapping > 0, "the package has both");
}

/// An arm64 module given with the x86 kernel, and an x86 module with the
/// arm64 kernel: refused in one line naming the file and both machines,
/// nothing written for it, the rest of the batch done, exit 1.
#[test]
fn a_module_of_the_other_machine_is_refused_either_way() {
    let test = "a_module_of_the_other_machine_is_refused_either_way";
    let Some(a) = arm64(test) else { return };
    let x = kernel();
    let fat_arm = a.modules.join("kernel/fs/fat/fat.ko");
    let fat_x86 = x.modules.join("kernel/fs/fat/fat.ko");
    for (k, good, other, want) in [
        (&a.vmlinuz, &fat_arm, &fat_x86, "a module for x86_64, the kernel is aarch64: not preresolved"),
        (&x.vmlinuz, &fat_x86, &fat_arm, "a module for aarch64, the kernel is x86_64: not preresolved"),
    ] {
        for fold in [false, true] {
            let dir = tmpdir("arm64-foreign");
            let (g, o) = (copy_to(good, &dir, "good.ko"), copy_to(other, &dir, "other.ko"));
            let out = dir.join("out");
            let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
                vec![&"preresolve", &"--assume-nokaslr", &"--kernel", k, &"-o", &out, &g, &o];
            if fold {
                args.push(&"--fold-symbols");
            }
            let res = run(&args);
            assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
            assert_eq!(stderr(&res), format!("bootlink: {}: {want}\n", o.display()));
            assert!(out.join("good.ko").is_file(), "the rest of the batch is done");
            let written: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(written, ["good.ko"], "nothing else written");
        }
    }
}

/// `bootlink apply` on an arm64 tree (Debian's fs/fat and fs/nls modules
/// with the tree's modules.order): the plan is fold and trim (Debian's
/// kernel names no loader features), every module comes out folded or
/// SHN_ABS and AArch64, a second run takes none, and an x86 module among
/// them is refused in one line and left as it is.
#[test]
fn apply_takes_an_arm64_tree_through_fold_and_trim() {
    let test = "apply_takes_an_arm64_tree_through_fold_and_trim";
    let Some(k) = arm64(test) else { return };
    let dir = tmpdir("arm64-apply");
    let mods = dir.join("lib/modules").join(&k.release);
    for sub in ["kernel/fs/fat", "kernel/fs/nls"] {
        std::fs::create_dir_all(mods.join(sub)).unwrap();
        for e in std::fs::read_dir(k.modules.join(sub)).unwrap() {
            let p = e.unwrap().path();
            copy_to(&p, &mods.join(sub), p.file_name().unwrap().to_str().unwrap());
        }
    }
    std::fs::copy(k.modules.join("modules.order"), mods.join("modules.order")).unwrap();
    let x86 = copy_to(&kernel().modules.join("kernel/fs/fat/vfat.ko"), &mods.join("kernel/fs/fat"), "x86_vfat.ko");
    let x86_before = std::fs::read(&x86).unwrap();
    let apply =
        || run(&[&"apply", &"--image", &k.vmlinuz, &"--modules", &mods, &"--assume-nokaslr", &"--allow-unsigned"]);
    let o = apply();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "the x86 module fails the run: {err}");
    assert_eq!(
        err,
        format!("bootlink: {}: a module for x86_64, the kernel is aarch64: left as it is\n", x86.display())
    );
    assert!(
        stdout(&o).lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["steps", "fold,", "trim"]),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read(&x86).unwrap(), x86_before);
    let written: Vec<PathBuf> = common::independent::modules_below(&mods).into_iter().filter(|p| *p != x86).collect();
    assert!(written.len() > 40, "{} modules", written.len());
    for p in &written {
        // read_ko checks the machine; a folded or SHN_ABS module has .preresolved.
        assert!(read_ko(p).preresolved.is_some(), "{} not preresolved", p.display());
    }
    let again = apply();
    assert!(stdout(&again).contains("took 0 through the steps"), "{}", stdout(&again));
}

/// Debian's arm64 kernel randomizes its base (CONFIG_RANDOMIZE_BASE=y):
/// without --assume-nokaslr it is refused in one line before any module
/// is read, and nothing is written.
#[test]
fn the_arm64_kernel_with_kaslr_is_refused_without_assume_nokaslr() {
    let test = "the_arm64_kernel_with_kaslr_is_refused_without_assume_nokaslr";
    let Some(k) = arm64(test) else { return };
    let dir = tmpdir("arm64-kaslr");
    let out = dir.join("out");
    for fold in [false, true] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"preresolve", &"--kernel", &k.vmlinuz, &"-o", &out];
        if fold {
            args.push(&"--fold-symbols");
        }
        args.push(&k.modules);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.starts_with(&format!("bootlink: {}: refusing to preresolve", k.vmlinuz.display()))
                && e.contains("CONFIG_RANDOMIZE_BASE=y")
                && e.contains("--assume-nokaslr"),
            "{e}"
        );
        assert!(!out.exists(), "nothing written");
    }
}
