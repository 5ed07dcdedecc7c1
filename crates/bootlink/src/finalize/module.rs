//! Finalizing one module: read it, plan each step from the unchanged
//! file, edit, check the result plans to nothing more, re-sign, write.

use super::symbols::{MappingRule, SectionSymbols};
use super::{ModuleResult, Options, mcount, orc, unsupported};
use crate::elf::{Elf, Want};
use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::kernel::KernelImage;
use crate::module;
use crate::modwrite::{Job, sign_for, write_module};

pub(super) fn one(k: Option<&KernelImage>, job: &Job, opts: &Options) -> Result<ModuleResult> {
    let path = &job.input;
    let (data, compression) = module::load_bytes(path)?;
    let m = module::parse(path, &data, compression).map_err(|e| e.at(path))?;
    if let Some(k) = k {
        crate::modwrite::check_vermagic(path, &m, k)?;
    }
    let elf_len = m.signature.as_ref().map_or(data.len(), |s| s.offset);
    let elf_part = &data[..elf_len];
    let elf = Elf::parse(elf_part, Want::Relocatable).map_err(|e| e.at(path))?;
    for s in [orc::SORTED_SECTION, mcount::CHECKED_SECTION] {
        if elf.section(s).is_some() {
            return Err(Error::file(Kind::Usage, path, format!("already finalized ({s})")));
        }
    }
    let mut r = ModuleResult {
        name: m.name.clone(),
        display: job.display.clone(),
        output: job.output.clone(),
        orc_entries: 0,
        orc_sorted: false,
        mcount_records: 0,
        mcount_dropped: 0,
        mcount_checked: false,
        skipped: Vec::new(),
        resigned: false,
    };
    let orc_order = match opts.orc.then(|| orc::plan(&elf)) {
        Some(Ok(o)) => o,
        Some(Err(why)) => {
            r.skipped.push(format!("ORC table not sorted: {why}"));
            None
        }
        None => None,
    };
    // Which symbols kallsyms skips depends on the kernel the module is for.
    let rule = MappingRule::for_vermagic(m.vermagic());
    let mcount_plan = match opts.mcount.then(|| SectionSymbols::read(&elf, rule).and_then(|s| mcount::plan(&elf, &s))) {
        Some(Ok(p)) => p,
        Some(Err(why)) => {
            r.skipped.push(format!("ftrace records not checked: {why}"));
            None
        }
        None => None,
    };

    if orc_order.is_none() && mcount_plan.is_none() {
        // Nothing to do: the module as it is, signature and all.
        if !opts.dry_run {
            crate::modwrite::copy_unchanged(path, &job.output, &opts.output)?;
        }
        return Ok(r);
    }
    let unsupported = |e: Error| e.at(path);
    let mut ed = ElfEdit::new(elf_part.to_vec()).map_err(unsupported)?;
    if let Some(order) = &orc_order {
        ed.rearrange_records(orc::IP_SECTION, 4, order).map_err(unsupported)?;
        ed.rearrange_records(orc::ORC_SECTION, orc::ENTRY, order).map_err(unsupported)?;
        ed.add_empty_section(orc::SORTED_SECTION).map_err(unsupported)?;
        r.orc_entries = order.len();
        r.orc_sorted = true;
    }
    if let Some(p) = &mcount_plan {
        ed.rearrange_records(mcount::SECTION, 8, &p.keep).map_err(unsupported)?;
        ed.add_section_with(mcount::CHECKED_SECTION, &mcount::section_bytes(&p.syms), Default::default(), 4)
            .map_err(unsupported)?;
        r.mcount_records = p.keep.len() + p.dropped;
        r.mcount_dropped = p.dropped;
        r.mcount_checked = true;
    }
    let mut bytes = ed.data;
    check_written(&bytes, rule, &orc_order, &mcount_plan).map_err(|e| {
        Error::file(Kind::Internal, path, format!("internal error: the finalized module does not check: {}", e.msg))
            .because(e)
    })?;

    if let Some(key) = &opts.sign {
        bytes = sign_for(job, key, &m.name, &bytes)?;
        r.resigned = true;
    }
    if !opts.dry_run {
        write_module(job, compression, bytes, &opts.output)?;
    }
    Ok(r)
}

/// Plan the written module again: its ORC table must be in order already,
/// and every ftrace record kept, each naming the symbol written for it.
fn check_written(
    bytes: &[u8],
    rule: MappingRule,
    orc_order: &Option<Vec<usize>>,
    mcount_plan: &Option<mcount::Plan>,
) -> std::result::Result<(), Error> {
    let elf = Elf::parse(bytes, Want::Relocatable)?;
    if let Some(order) = orc_order {
        let again = orc::plan(&elf)?.ok_or_else(|| unsupported("the ORC table is gone"))?;
        if again != (0..order.len()).collect::<Vec<_>>() {
            return Err(unsupported("the ORC table is not in order"));
        }
    }
    if let Some(p) = mcount_plan {
        let syms = SectionSymbols::read(&elf, rule)?;
        let again = mcount::plan(&elf, &syms)?.ok_or_else(|| unsupported("__mcount_loc is gone"))?;
        let written = mcount::parse_section(elf.named_section_data(mcount::CHECKED_SECTION)?.unwrap_or_default())?;
        if again.dropped != 0 || again.keep != (0..p.keep.len()).collect::<Vec<_>>() || written != p.syms {
            return Err(unsupported("the ftrace records or their symbols differ from the plan"));
        }
        if again.syms != written {
            return Err(unsupported(format!("{} names other symbols than the records start", mcount::CHECKED_SECTION)));
        }
    }
    Ok(())
}
