//! A module's ORC unwind table, sorted at build time. 6.1 heapsorts every
//! module's `.orc_unwind_ip` (with `.orc_unwind`) at load; vmlinux's is
//! sorted when it is linked. A module's init and core text are allocated
//! separately, so the build sorts the entries for core text, then those for
//! init text (within each, sections are laid out in index order), and marks
//! the module with `.orc_unwind_sorted`; the kernel (patch `orc-sort-skip` of
//! kernel/6.1 and kernel/6.12) checks the order in O(n), and puts the two
//! runs in order if init landed below core.
//!
//! The only thing the order depends on besides addresses is which entries
//! orc_sort_cmp() puts first at one address, and that rule follows the
//! entry layout, which changed in 6.4: before it, an entry with sp_reg
//! ORC_REG_UNDEFINED and `end` clear; from it, an entry of type
//! ORC_TYPE_UNDEFINED. A 6.4+ module says which layout it has in
//! `.orc_header` (the SHA-1 of orc_types.h's ORC_REG_*/ORC_TYPE_* defines
//! and struct orc_entry, scripts/orc_hash.sh); one without it has the old
//! layout, one with a hash not known here is left unsorted.

use object::elf::{SHF_ALLOC, SHF_EXECINSTR};
use object::read::elf::SectionHeader;

use super::targets;
use super::unsupported;
use crate::elf::{Elf, LE};
use crate::error::Error;

pub(crate) const IP_SECTION: &str = ".orc_unwind_ip";
pub(crate) const ORC_SECTION: &str = ".orc_unwind";
pub const SORTED_SECTION: &str = ".orc_unwind_sorted";
pub(crate) const HEADER_SECTION: &str = ".orc_header";
/// sizeof(struct orc_entry): sp_offset, bp_offset, then sp_reg:4 bp_reg:4
/// and (before 6.4) type:2 end:1, (from 6.4) type:3 signal:1.
pub(crate) const ENTRY: usize = 6;
const R_X86_64_PC32: u32 = 2;

/// The `.orc_header` (ORC_HASH) of the 6.4+ entry layout, as 6.12's
/// orc_types.h hashes (Debian's linux-source-6.12 and its kernels).
const HASH_TYPED: [u8; 20] = [
    0xfe, 0x5d, 0x32, 0xbf, 0x58, 0x1b, 0xd6, 0x3b, 0x2c, 0xa9, 0xa5, 0xc6, 0x5b, 0xa5, 0xa6, 0x25, 0xea, 0xb3, 0xfe,
    0x24,
];

/// How a module's ORC entries are laid out, so which ones orc_sort_cmp()
/// treats as the "weak" section terminators it puts first at one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Before 6.4 (6.1): sp_reg ORC_REG_UNDEFINED and `end` clear.
    SpRegUndefined,
    /// 6.4 and later (6.12): type ORC_TYPE_UNDEFINED (an END_OF_STACK
    /// entry, also with sp_reg undefined, is a real entry).
    TypeUndefined,
}

impl Layout {
    /// The layout a module's `.orc_header` names; an unknown hash is refused.
    pub(crate) fn of(elf: &Elf) -> std::result::Result<Layout, Error> {
        match elf.named_section_data(HEADER_SECTION)? {
            None => Ok(Layout::SpRegUndefined),
            Some(h) if h == HASH_TYPED => Ok(Layout::TypeUndefined),
            Some(h) => Err(unsupported(format!(
                "{HEADER_SECTION} {} names an ORC entry layout bootlink does not know",
                crate::fsutil::hex(h)
            ))),
        }
    }

    /// A "weak" terminator: orc_sort_cmp() puts it before a real entry at
    /// the same address.
    fn is_terminator(self, e: &[u8]) -> bool {
        match self {
            Layout::SpRegUndefined => e[4] & 0x0f == 0 && (e[5] >> 2) & 1 == 0,
            Layout::TypeUndefined => e[5] & 0x07 == 0,
        }
    }
}

/// The new order of the entries (new k = old `order[k]`); None without
/// ORC tables. Refused when two entries share an address other than as a
/// terminator before a real entry (the kernel's sort has no one answer
/// for them), or an entry points outside executable code.
pub fn plan(elf: &Elf) -> std::result::Result<Option<Vec<usize>>, Error> {
    let Some(targets) = targets::of_records(elf, IP_SECTION, 4, R_X86_64_PC32)? else { return Ok(None) };
    let orc = elf
        .named_section_data(ORC_SECTION)?
        .ok_or_else(|| unsupported(format!("{IP_SECTION} without {ORC_SECTION}")))?;
    if orc.len() != targets.len() * ENTRY {
        return Err(unsupported(format!(
            "{ORC_SECTION} has {} bytes for {} entries of {IP_SECTION}",
            orc.len(),
            targets.len()
        )));
    }
    let layout = Layout::of(elf)?;
    let mut keys = Vec::with_capacity(targets.len());
    for (k, t) in targets.iter().enumerate() {
        let sh =
            elf.section_by_index(t.section).ok_or_else(|| unsupported("an ORC entry points past the section table"))?;
        let want = (SHF_ALLOC | SHF_EXECINSTR).0;
        if sh.sh_flags(LE).0 & want != want {
            return Err(unsupported(format!("ORC entry {k} points into a section that is not code ({})", t.section)));
        }
        // The kernel's module_init_layout_section() with MODULE_UNLOAD.
        let init = elf.section_name(sh).starts_with(b".init");
        let terminator = layout.is_terminator(&orc[k * ENTRY..(k + 1) * ENTRY]);
        keys.push((init, t.section, t.offset, !terminator));
    }
    let mut order: Vec<usize> = (0..targets.len()).collect();
    order.sort_by_key(|&k| keys[k]);
    for w in order.windows(2) {
        let (a, b) = (keys[w[0]], keys[w[1]]);
        // At one address only a terminator (real = false) before a real entry.
        let terminator_first = !a.3 && b.3;
        if (a.0, a.1, a.2) == (b.0, b.1, b.2) && !terminator_first {
            return Err(unsupported(format!(
                "ORC entries {} and {} are both at offset {:#x} of section {}",
                w[0], w[1], a.2, a.1
            )));
        }
    }
    Ok(Some(order))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::Want;
    use crate::elfedit::ElfEdit;

    /// A fixture module (6.1, no `.orc_header`), with one added when asked.
    fn fixture_with_header(header: Option<&[u8]>) -> Vec<u8> {
        let p = crate::fsutil::source_tree().join("tests/fixtures/modules/bl_plain.ko");
        let data = std::fs::read(p).unwrap();
        let Some(h) = header else { return data };
        let mut ed = ElfEdit::new(data).unwrap();
        ed.add_section_with(HEADER_SECTION, h, Default::default(), 4).unwrap();
        ed.data
    }

    #[test]
    fn the_layout_is_the_one_orc_header_names() {
        let old = fixture_with_header(None);
        let elf = Elf::parse(&old, Want::Relocatable).unwrap();
        assert_eq!(Layout::of(&elf).unwrap(), Layout::SpRegUndefined);
        assert!(plan(&elf).unwrap().is_some());

        let typed = fixture_with_header(Some(&HASH_TYPED));
        let elf = Elf::parse(&typed, Want::Relocatable).unwrap();
        assert_eq!(Layout::of(&elf).unwrap(), Layout::TypeUndefined);

        let mut other = HASH_TYPED;
        other[0] ^= 1;
        let unknown = fixture_with_header(Some(&other));
        let elf = Elf::parse(&unknown, Want::Relocatable).unwrap();
        let e = plan(&elf).unwrap_err().to_string();
        assert!(e.contains("ORC entry layout bootlink does not know"), "{e}");
    }

    #[test]
    fn terminators_before_6_4_are_undefined_sp_without_end() {
        let l = Layout::SpRegUndefined;
        assert!(l.is_terminator(&[0, 0, 0, 0, 0x50, 0]));
        assert!(!l.is_terminator(&[0, 0, 0, 0, 0x54, 0]));
        assert!(!l.is_terminator(&[0, 0, 0, 0, 0x50, 0x04]));
        // 6.1's ORC_TYPE_CALL is 0: a call entry with sp undefined is one.
        assert!(l.is_terminator(&[0, 0, 0, 0, 0x00, 0x00]));
    }

    #[test]
    fn terminators_from_6_4_are_type_undefined() {
        let l = Layout::TypeUndefined;
        // ORC_TYPE_UNDEFINED (0), whatever the registers.
        assert!(l.is_terminator(&[0, 0, 0, 0, 0x00, 0x00]));
        // END_OF_STACK (1) has sp_reg undefined too, but is a real entry;
        // the 6.1 rule would call it a terminator.
        assert!(!l.is_terminator(&[0, 0, 0, 0, 0x00, 0x01]));
        assert!(Layout::SpRegUndefined.is_terminator(&[0, 0, 0, 0, 0x00, 0x01]));
        // CALL (2) with sp = SP+8; REGS_PARTIAL (4) sets the bit 6.1's `end` used.
        assert!(!l.is_terminator(&[8, 0, 0, 0, 0x05, 0x02]));
        assert!(!l.is_terminator(&[8, 0, 0, 0, 0x05, 0x04]));
        // the signal bit does not make a terminator real
        assert!(l.is_terminator(&[0, 0, 0, 0, 0x00, 0x08]));
    }
}
