//! Writing a module preresolved for the slide: the marks of
//! [`crate::kernel::slide`] (the table and the vermagic token) put into an
//! edited module.

use crate::elf::{ANALYSED_MACHINES, Elf, Want};
use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind};
pub use crate::kernel::slide::{
    FEATURE, SECTION, SlideBase, SlideTable, VERMAGIC_TOKEN, marked_modinfo, unmarked_vermagic,
};

/// Mark an edited module for the slide: its vermagic followed by
/// [`VERMAGIC_TOKEN`] (so that a kernel without the patch refuses it) and
/// `table` appended as [`SECTION`].
pub(crate) fn mark(ed: &mut ElfEdit, table: &SlideTable) -> Result<(), Error> {
    let modinfo = {
        let elf = Elf::parse_for(&ed.data, Want::Relocatable, ANALYSED_MACHINES)?;
        elf.named_section_data(".modinfo")?.map(<[u8]>::to_vec)
    };
    let marked = modinfo
        .as_deref()
        .and_then(marked_modinfo)
        .ok_or_else(|| Error::new(Kind::Unsupported, "no vermagic in .modinfo to mark as preresolved for the slide"))?;
    ed.set_section_contents(".modinfo", &marked)?;
    ed.add_section(SECTION, &table.to_bytes())
}

/// [`mark`] on a module's bytes (ELF, without a signature): what the
/// preresolver does after preresolving, for tests that need a marked
/// module a kernel should refuse.
pub fn mark_module(elf: Vec<u8>, table: &SlideTable) -> Result<Vec<u8>, Error> {
    let mut ed = ElfEdit::new(elf)?;
    mark(&mut ed, table)?;
    Ok(ed.data)
}
