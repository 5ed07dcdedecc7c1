//! A module's ORC unwind table, sorted at build time. 6.1 heapsorts every
//! module's `.orc_unwind_ip` (with `.orc_unwind`) at load; vmlinux's is
//! sorted when it is linked. A module's init and core text are allocated
//! separately, so the build sorts the entries for core text, then those for
//! init text (within each, sections are laid out in index order), and marks
//! the module with `.orc_unwind_sorted`; the kernel (kernel/6.1/patches 0007) checks the
//! order in O(n), and puts the two runs in order if init landed below core.

use object::elf::{SHF_ALLOC, SHF_EXECINSTR};
use object::read::elf::SectionHeader;

use super::targets;
use super::unsupported;
use crate::elf::{Elf, LE};
use crate::error::Error;

pub(crate) const IP_SECTION: &str = ".orc_unwind_ip";
pub(crate) const ORC_SECTION: &str = ".orc_unwind";
pub const SORTED_SECTION: &str = ".orc_unwind_sorted";
/// sizeof(struct orc_entry): sp_offset, bp_offset, then sp_reg:4 bp_reg:4
/// and type:2 end:1.
pub(crate) const ENTRY: usize = 6;
const R_X86_64_PC32: u32 = 2;

/// A "weak" terminator (ORC_REG_UNDEFINED and not end): orc_sort_cmp()
/// puts it before a real entry at the same address.
fn is_terminator(e: &[u8]) -> bool {
    e[4] & 0x0f == 0 && (e[5] >> 2) & 1 == 0
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
        let terminator = is_terminator(&orc[k * ENTRY..(k + 1) * ENTRY]);
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

    #[test]
    fn terminators_are_undefined_sp_without_end() {
        assert!(is_terminator(&[0, 0, 0, 0, 0x50, 0]));
        assert!(!is_terminator(&[0, 0, 0, 0, 0x54, 0]));
        assert!(!is_terminator(&[0, 0, 0, 0, 0x50, 0x04]));
    }
}
