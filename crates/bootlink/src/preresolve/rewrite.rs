//! Rewriting one module: read it, check it was built for this kernel, make
//! the symbols SHN_ABS or fold them into the relocations, re-sign, check the
//! result reads back as meant, recompress as the input was, write atomically.

use std::collections::{BTreeMap, HashMap};

use super::aarch64;
use super::checks::{Decision, decide};
use super::slide::{self, SlideTable};
use super::{Mode, ModuleResult, Options, SigAction, SlideBase, Status};
use crate::compress::Compression;
use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::kernel::{Export, KernelImage};
use crate::module::{self, PRERESOLVED_SECTION};
use crate::modwrite::{Job, copy_unchanged, sign_for, write_module};

pub(super) fn one(
    k: &KernelImage,
    exports: &HashMap<&str, &Export>,
    job: &Job,
    opts: &Options,
    slide: Option<&SlideBase>,
) -> Result<ModuleResult> {
    let path = &job.input;
    let (data, compression) = module::load_bytes(path)?;
    let m = module::parse_for(path, &data, compression, crate::elf::ANALYSED_MACHINES).map_err(|e| e.at(path))?;
    k.same_machine(&m, "not preresolved")?;
    crate::modwrite::check_vermagic(path, &m, k)?;
    let mut result = ModuleResult {
        name: m.name.clone(),
        display: job.display.clone(),
        input: path.clone(),
        output: job.output.clone(),
        status: Status::Unchanged,
        mode: None,
        undefined: m.undefined.len(),
        preresolved: 0,
        kept: BTreeMap::new(),
        module_symbols: 0,
        signature: if m.signature.is_some() { SigAction::Kept } else { SigAction::None },
        compression,
        kept_symbols: Vec::new(),
        symbols_trimmed: 0,
        relocations: BTreeMap::new(),
        symbols_folded: 0,
        slide: None,
    };
    if m.preresolved {
        // Its SHN_ABS symbols, or the folded ones listed in .preresolved,
        // must hold this kernel's addresses.
        let resolved_before = || m.absolute.iter().chain(&m.folded);
        for (name, value) in resolved_before() {
            if let Some(e) = exports.get(name.as_str())
                && e.addr != *value
            {
                return Err(Error::file(
                    Kind::WrongKernel,
                    path,
                    format!(
                        "already preresolved for a different kernel build: {name} is {value:#x} here but {:#x} in {}",
                        e.addr,
                        k.path.display()
                    ),
                ));
            }
        }
        if let Some(t) = &m.slide
            && slide.is_none_or(|b| b.build_id != t.build_id)
        {
            return Err(Error::file(
                Kind::WrongKernel,
                path,
                format!(
                    "already preresolved for the slide of another kernel build (build ID {}), not {}",
                    t.build_id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                    k.path.display()
                ),
            ));
        }
        result.slide = m.slide.as_ref().map(SlideTable::len);
        let resolved = resolved_before().filter(|(n, _)| exports.contains_key(n.as_str())).count();
        result.status = Status::AlreadyPreresolved;
        result.mode = Some(if m.folded.is_empty() { Mode::Abs } else { Mode::Folded });
        result.preresolved = resolved;
        result.undefined += resolved;
        // What is still undefined is counted as on the first run: left to
        // modules' exports, or kept for a reason.
        let Decision { kept, from_modules, .. } = decide(k, exports, &m);
        result.module_symbols = from_modules;
        for (_, r) in &kept {
            *result.kept.entry(*r).or_default() += 1;
        }
        result.kept_symbols = kept;
        refuse_lookups_on_sealed(k, path, &result)?;
        finish_unchanged(&data, &m, compression, job, opts, &mut result)?;
        return Ok(result);
    }
    let Decision { edits, kept, from_modules } = decide(k, exports, &m);
    result.module_symbols = from_modules;
    result.preresolved = edits.len();
    for (_, r) in &kept {
        *result.kept.entry(*r).or_default() += 1;
    }
    result.kept_symbols = kept;
    refuse_lookups_on_sealed(k, path, &result)?;
    if edits.is_empty() {
        finish_unchanged(&data, &m, compression, job, opts, &mut result)?;
        return Ok(result);
    }
    let elf_len = m.signature.as_ref().map_or(data.len(), |s| s.offset);
    let mut ed = ElfEdit::new(data[..elf_len].to_vec()).map_err(|e| e.at(path))?;
    let (mut abs_now, mut folded_now) = (edits.len(), 0);
    let mut slide_relocations = Vec::new();
    if opts.fold {
        let finalized =
            crate::elf::Elf::parse_for(&data[..elf_len], crate::elf::Want::Relocatable, crate::elf::ANALYSED_MACHINES)
                .is_ok_and(|e| e.section(crate::finalize::mcount::CHECKED_SECTION).is_some());
        if finalized {
            return Err(Error::file(
                Kind::Usage,
                path,
                "finalized already: folding would move the symbols .ftrace_checked names (preresolve, then finalize)",
            ));
        }
        let name_of: HashMap<usize, &str> =
            m.undefined_index.iter().copied().zip(m.undefined.iter().map(String::as_str)).collect();
        // AArch64: symbols that are branched to stay SHN_ABS (the module
        // PLTs are counted from them), and for the slide those with a use
        // whose check the slide could fail; the others fold.
        let (fold, keep) = if m.machine == crate::elf::machine_name(object::elf::EM_AARCH64) {
            let reach = match slide {
                Some(base) => aarch64::Reach::Slid(aarch64::Places::kaslr(base)),
                None => aarch64::Reach::Fixed(aarch64::Places::nokaslr(k)),
            };
            let split = aarch64::split(&ed.data, &edits, &name_of, reach).map_err(|e| e.at(path))?;
            result.relocations = split.classes;
            (split.fold, split.keep)
        } else {
            (edits.clone(), Vec::new())
        };
        // The relocations whose addend will hold a moving address (the
        // entries stay where they are through folding and trimming).
        if let Some(base) = slide {
            let mut moving = vec![false; m.undefined_index.iter().max().map_or(0, |i| i + 1)];
            for (idx, addr) in &fold {
                moving[*idx] = base.moves(*addr);
            }
            slide_relocations = ed.relocations_against(&moving).map_err(|e| e.at(path))?;
        }
        for (idx, addr) in &keep {
            ed.make_absolute(*idx, *addr);
        }
        ed.fold_symbols(&fold).map_err(|e| e.at(path))?;
        let pairs: Vec<(&str, u64)> = fold.iter().map(|(idx, addr)| (name_of[idx], *addr)).collect();
        ed.add_section(PRERESOLVED_SECTION, &module::folded_section(&pairs)).map_err(|e| e.at(path))?;
        result.mode = Some(if fold.is_empty() { Mode::Abs } else { Mode::Folded });
        (abs_now, folded_now) = (keep.len(), fold.len());
        result.symbols_folded = fold.len();
    } else {
        for (idx, addr) in &edits {
            ed.make_absolute(*idx, *addr);
        }
        ed.add_empty_section(PRERESOLVED_SECTION).map_err(|e| e.at(path))?;
        result.mode = Some(Mode::Abs);
    }
    if opts.trim {
        result.symbols_trimmed = trim(&mut ed).map_err(|e| e.at(path))?;
    }
    if let Some(base) = slide {
        // AArch64: written in the order arm64's loader puts the relocations
        // in before it reads the table (branches to PLTs first), the
        // table's entry numbers following them.
        if m.machine == crate::elf::machine_name(object::elf::EM_AARCH64) && !slide_relocations.is_empty() {
            for (sec, new_index) in aarch64::branches_first(&mut ed.data).map_err(|e| e.at(path))? {
                for r in slide_relocations.iter_mut().filter(|r| r.0 == sec) {
                    r.1 = new_index[r.1 as usize];
                }
            }
        }
        let table = slide_table(&ed, base, &edits, &name_of_edits(&m), slide_relocations).map_err(|e| e.at(path))?;
        result.slide = Some(table.len());
        slide::mark(&mut ed, &table).map_err(|e| e.at(path))?;
    }
    let bytes;
    (bytes, result.signature) = signed(ed.data, &m, job, opts)?;
    // Check what we wrote reads back as the module we meant.
    let check = module::parse_for(path, &bytes, Compression::None, crate::elf::ANALYSED_MACHINES).map_err(|e| {
        Error::file(Kind::Internal, path, format!("internal error: rewritten module does not parse: {e}")).because(e)
    })?;
    if !check.preresolved
        || check.undefined.len() != m.undefined.len() - edits.len()
        || check.absolute.len() != m.absolute.len() + abs_now
        || check.folded.len() != folded_now
        || check.slide.as_ref().map(SlideTable::len) != result.slide
        || check.kernel_vermagic() != m.vermagic()
    {
        return Err(Error::file(
            Kind::Internal,
            path,
            "internal error: rewritten module does not read back as preresolved",
        ));
    }
    if !opts.dry_run {
        write_module(job, compression, bytes, &opts.output)?;
    }
    result.status = Status::Preresolved;
    Ok(result)
}

/// The name of each symbol index of `m`'s undefined symbols.
fn name_of_edits(m: &module::Module) -> HashMap<usize, &str> {
    m.undefined_index.iter().copied().zip(m.undefined.iter().map(String::as_str)).collect()
}

/// The `.preresolved_slide` table of the edited module: the SHN_ABS
/// symbols this run made whose address moves with the kernel (found by
/// name: trimming renumbers them), and the folded relocations found before
/// folding.
fn slide_table(
    ed: &ElfEdit,
    base: &SlideBase,
    edits: &[(usize, u64)],
    names: &HashMap<usize, &str>,
    relocations: Vec<(u32, u32)>,
) -> Result<SlideTable> {
    use object::read::elf::Sym;
    let moving: HashMap<&str, u64> =
        edits.iter().filter(|(_, a)| base.moves(*a)).map(|(i, a)| (names[i], *a)).collect();
    let elf = crate::elf::Elf::parse_for(&ed.data, crate::elf::Want::Relocatable, crate::elf::ANALYSED_MACHINES)?;
    let symtab = elf.symbols()?;
    let mut symbols = Vec::new();
    for (i, sym) in symtab.iter().enumerate() {
        if sym.st_shndx(crate::elf::LE) != object::elf::SHN_ABS {
            continue;
        }
        let name = String::from_utf8_lossy(crate::elf::sym_name(&symtab, sym)?);
        if moving.get(name.as_ref()) == Some(&sym.st_value(crate::elf::LE)) {
            symbols.push(i as u32);
        }
    }
    Ok(SlideTable::new(base, symbols, relocations))
}

/// A sealed kernel (its image names `exports-sealed`, patch `exports-sealed`) looks
/// nothing up in its own exports after boot: a module that would still
/// need it to is refused here, at build time, naming the symbol and why
/// it was not preresolved.
fn refuse_lookups_on_sealed(k: &KernelImage, path: &std::path::Path, result: &ModuleResult) -> Result<()> {
    use crate::kernel::features::name::EXPORTS_SEALED;
    match result.kept_symbols.first() {
        Some((sym, reason)) if k.loader_features.has(EXPORTS_SEALED) => Err(Error::file(
            Kind::WrongKernel,
            path,
            format!(
                "the kernel is sealed (exports-sealed) and {sym} ({}) cannot be preresolved against it{}: \
                 the kernel would refuse the module",
                reason.label(),
                match result.kept_symbols.len() {
                    1 => String::new(),
                    n => format!(", nor {} other symbol(s)", n - 1),
                }
            ),
        )),
        _ => Ok(()),
    }
}

/// A module with nothing to preresolve: copied as it is, or with
/// `--trim-symtab` trimmed (and then re-signed or unsigned) when that
/// removes anything.
fn finish_unchanged(
    data: &[u8],
    m: &module::Module,
    compression: Compression,
    job: &Job,
    opts: &Options,
    result: &mut ModuleResult,
) -> Result<()> {
    let path = &job.input;
    if !opts.trim {
        return if opts.dry_run { Ok(()) } else { copy_unchanged(path, &job.output, &opts.output) };
    }
    let elf_len = m.signature.as_ref().map_or(data.len(), |s| s.offset);
    let mut ed = ElfEdit::new(data[..elf_len].to_vec()).map_err(|e| e.at(path))?;
    result.symbols_trimmed = trim(&mut ed).map_err(|e| e.at(path))?;
    if result.symbols_trimmed == 0 {
        return if opts.dry_run { Ok(()) } else { copy_unchanged(path, &job.output, &opts.output) };
    }
    let bytes;
    (bytes, result.signature) = signed(ed.data, m, job, opts)?;
    if opts.dry_run {
        return Ok(());
    }
    write_module(job, compression, bytes, &opts.output)
}

/// A rewritten module's bytes re-signed with `--sign-key`, or left
/// unsigned (its old signature no longer matches), and what was done.
fn signed(bytes: Vec<u8>, m: &module::Module, job: &Job, opts: &Options) -> Result<(Vec<u8>, SigAction)> {
    Ok(match (&opts.sign, m.signature.is_some()) {
        (Some(key), _) => (sign_for(job, key, &m.name, &bytes)?, SigAction::Resigned),
        (None, true) => (bytes, SigAction::Removed),
        (None, false) => (bytes, SigAction::None),
    })
}

/// Names the tools read exports and CRCs by (depmod, bootlink): kept.
const KEEP_PREFIXES: &[&[u8]] = &[b"__ksymtab_", b"__kstrtab", b"__crc_"];

/// `--trim-symtab`: remove the local symbols of data (any section that is
/// not code) that no relocation refers to. Every symbol in code stays, so
/// what kallsyms finds for a code address (stack traces, ftrace's check of
/// its records) does not change; the kernel's scans of the symbol table
/// get shorter. Lost: those names in /proc/kallsyms, and lookups of them
/// by name (a livepatch naming such data).
pub fn trim(ed: &mut ElfEdit) -> Result<usize> {
    use object::elf::{SHF_EXECINSTR, SHN_LORESERVE, STT_FUNC};
    use object::read::elf::{SectionHeader, Sym};
    let droppable: Vec<bool> = {
        let elf = crate::elf::Elf::parse_for(&ed.data, crate::elf::Want::Relocatable, crate::elf::ANALYSED_MACHINES)?;
        let symtab = elf.symbols()?;
        let mut v = Vec::with_capacity(symtab.len());
        for sym in symtab.iter() {
            let name = crate::elf::sym_name(&symtab, sym)?;
            let shndx = sym.st_shndx(crate::elf::LE).0;
            let data_section = shndx != 0
                && shndx < SHN_LORESERVE
                && elf
                    .section_by_index(shndx as usize)
                    .is_some_and(|s| s.sh_flags(crate::elf::LE).0 & SHF_EXECINSTR.0 == 0);
            v.push(data_section && sym.st_type() != STT_FUNC && !KEEP_PREFIXES.iter().any(|p| name.starts_with(p)));
        }
        v
    };
    ed.trim_local_symbols(&droppable)
}
