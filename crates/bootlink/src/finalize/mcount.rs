//! ftrace's weak-function check, at build time. When a module goes live,
//! 6.1 looks up every `__mcount_loc` record with kallsyms (a scan of every
//! symbol) and disables the records not within FTRACE_MCOUNT_MAX_OFFSET of
//! the symbol at or before them: code of weak functions that another
//! definition replaced. Here each record is decided from its section's
//! symbols; the invalid ones are dropped and `.ftrace_checked` names, for
//! each kept record, the symbol it starts, so the kernel (patch `ftrace-checked`)
//! verifies the answer in O(records) instead of searching for it.

use super::symbols::SectionSymbols;
use super::targets::{self, Target};
use super::unsupported;
use crate::elf::Elf;
use crate::error::Error;

pub const SECTION: &str = "__mcount_loc";
pub const CHECKED_SECTION: &str = ".ftrace_checked";
const MAGIC: u32 = 0x4b43_5446; // "FTCK"
const VERSION: u32 = 1;
const R_X86_64_64: u32 = 1;
/// x86-64's FTRACE_MCOUNT_MAX_OFFSET with IBT (ENDBR64 before the call):
/// a kernel without IBT (0) finds the marker wrong and checks at load.
pub(crate) const MAX_OFFSET: u64 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The records kept, in their order.
    pub keep: Vec<usize>,
    /// For each kept record, the index of the symbol it starts.
    pub syms: Vec<u32>,
    /// Records dropped: the kernel would disable them.
    pub dropped: usize,
}

/// Decide every record as the kernel would at load; None without
/// `__mcount_loc`. A record whose answer depends on the layout (no symbol
/// before it in its own section, within MAX_OFFSET of the section start)
/// refuses the whole module.
pub fn plan(elf: &Elf, syms: &SectionSymbols) -> std::result::Result<Option<Plan>, Error> {
    let Some(targets) = targets::of_records(elf, SECTION, 8, R_X86_64_64)? else { return Ok(None) };
    let mut p = Plan { keep: Vec::new(), syms: Vec::new(), dropped: 0 };
    for (i, &Target { section, offset }) in targets.iter().enumerate() {
        match syms.at_or_before(section, offset) {
            Some((at, sym)) if offset - at <= MAX_OFFSET => {
                p.keep.push(i);
                p.syms.push(sym);
            }
            // The closest symbol the kernel can find is this one or one
            // in an earlier section: farther than MAX_OFFSET either way.
            Some(_) => p.dropped += 1,
            None if offset > MAX_OFFSET => p.dropped += 1,
            None => {
                return Err(unsupported(format!(
                    "record {i} at offset {offset:#x} of section {section} has no symbol before it in its section"
                )));
            }
        }
    }
    Ok(Some(p))
}

/// `.ftrace_checked`: magic, version, count, then the symbol indices.
pub(crate) fn section_bytes(syms: &[u32]) -> Vec<u8> {
    let mut v = crate::bytes::LeWriter::with_capacity(12 + 4 * syms.len());
    for &w in [MAGIC, VERSION, syms.len() as u32].iter().chain(syms) {
        v.u32(w);
    }
    v.into_inner()
}

/// The symbol indices of a `.ftrace_checked` section.
pub fn parse_section(data: &[u8]) -> std::result::Result<Vec<u32>, Error> {
    let words: Vec<u32> = crate::bytes::le_u32s(data).collect();
    match words[..] {
        [MAGIC, VERSION, n, ref rest @ ..] if data.len().is_multiple_of(4) && rest.len() == n as usize => {
            Ok(rest.to_vec())
        }
        _ => Err(unsupported(format!("{CHECKED_SECTION} is malformed"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_section_reads_back_and_refuses_garbage() {
        let b = section_bytes(&[7, 9, 12]);
        assert_eq!(parse_section(&b).unwrap(), [7, 9, 12]);
        assert!(parse_section(&b[..b.len() - 4]).is_err());
        assert!(parse_section(&b[..b.len() - 1]).is_err());
        let mut bad = b.clone();
        bad[0] ^= 1;
        assert!(parse_section(&bad).is_err());
    }
}
