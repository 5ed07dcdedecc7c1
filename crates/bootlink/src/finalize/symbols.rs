//! What the kernel's `find_kallsyms_symbol` chooses among for a module
//! being loaded, seen at build time: the named, defined symbols of each
//! section, by offset. The ftrace check asks it for the symbol at or before
//! an offset of a section; it also says whether anything outside a section
//! could land inside one at load (which would make a build-time answer
//! unsafe).

use object::elf::{SHN_ABS, SHN_COMMON, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX};
use object::read::elf::{SectionHeader, Sym};

use super::unsupported;
use crate::elf::{self, Elf, LE};
use crate::error::Error;

/// x86-64's MODULES_VADDR without KASLR (the lowest it can be): kernel
/// image addresses (what preresolving makes SHN_ABS) are all below it.
const MODULE_AREA: u64 = 0xffff_ffff_a000_0000;

/// Which symbols `find_kallsyms_symbol()` skips as "mapping symbols": the
/// rule changed between the kernel lines bootlink keeps a series for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MappingRule {
    /// 6.1's `is_arm_mapping_symbol()` (kernel/module/kallsyms.c): `.L...`,
    /// or `$` then one of `a x t d`, then the end or `.`.
    V6_1,
    /// 6.12's `is_mapping_symbol()` (include/linux/module_symbol.h):
    /// `.L...`, `L0...` and every `$...`.
    V6_12,
    /// Another or an unknown kernel: a symbol whose treatment differs
    /// between kernel versions (`$...`, `.L...`, `L0...`) refuses the module.
    Unknown,
}

impl MappingRule {
    /// The rule of the kernel a module was built for, from its vermagic
    /// ("6.12.117+ SMP ...", "6.1.0-56-amd64 SMP ...").
    pub(crate) fn for_vermagic(vermagic: Option<&str>) -> MappingRule {
        let Some(release) = vermagic.and_then(|v| v.split_whitespace().next()) else { return MappingRule::Unknown };
        let mut parts = release.split('.');
        let mut number = || -> Option<u32> {
            let p = parts.next()?;
            let digits = &p[..p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len())];
            digits.parse().ok()
        };
        match (number(), number()) {
            (Some(6), Some(1)) => MappingRule::V6_1,
            (Some(6), Some(12)) => MappingRule::V6_12,
            _ => MappingRule::Unknown,
        }
    }

    /// Whether the kernel skips symbol `name`; an error when the build
    /// cannot tell.
    fn skips(self, name: &[u8]) -> std::result::Result<bool, Error> {
        let local_label = name.starts_with(b".L");
        match self {
            MappingRule::V6_1 => {
                // strchr("axtd", '\0') matches the terminator: for "$" alone
                // the kernel then reads the byte after the name.
                if name == b"$" {
                    return Err(unsupported(
                        "a symbol named \"$\": whether kallsyms skips it depends on the byte after it",
                    ));
                }
                Ok(local_label
                    || (name.len() >= 2
                        && name[0] == b'$'
                        && b"axtd".contains(&name[1])
                        && (name.len() == 2 || name[2] == b'.')))
            }
            MappingRule::V6_12 => Ok(local_label || name.starts_with(b"L0") || name.starts_with(b"$")),
            MappingRule::Unknown if local_label || name.starts_with(b"L0") || name.starts_with(b"$") => {
                Err(unsupported(format!(
                    "symbol {}: whether kallsyms skips it depends on the kernel version, and the module's vermagic names none bootlink knows",
                    String::from_utf8_lossy(name)
                )))
            }
            MappingRule::Unknown => Ok(false),
        }
    }
}

pub struct SectionSymbols {
    /// Per section index: (offset, symbol index) of its named symbols,
    /// sorted by offset, then index.
    by_section: Vec<Vec<(u64, u32)>>,
}

impl SectionSymbols {
    /// Read the module's symbols, skipping what `rule` says the kernel
    /// skips. Refused (with the reason) when a symbol could land where the
    /// build cannot see it: a value past its section's end, SHN_COMMON or
    /// SHN_XINDEX, or an absolute value in the module area.
    pub(crate) fn read(elf: &Elf, rule: MappingRule) -> std::result::Result<SectionSymbols, Error> {
        let symtab = elf.symbols()?;
        let nsec = elf.sections.len();
        let mut by_section = vec![Vec::new(); nsec];
        for (i, sym) in symtab.iter().enumerate().skip(1) {
            let name = elf::sym_name(&symtab, sym)?;
            let shndx = sym.st_shndx(LE);
            let value = sym.st_value(LE);
            if shndx == SHN_UNDEF || name.is_empty() || rule.skips(name)? {
                continue;
            }
            let show = || String::from_utf8_lossy(name).into_owned();
            match shndx {
                SHN_ABS if value >= MODULE_AREA => {
                    return Err(unsupported(format!(
                        "absolute symbol {} = {value:#x} lies in the module area",
                        show()
                    )));
                }
                SHN_ABS => continue,
                SHN_COMMON | SHN_XINDEX => {
                    return Err(unsupported(format!("symbol {} has section index {:#x}", show(), shndx.0)));
                }
                s if s.0 >= SHN_LORESERVE => {
                    return Err(unsupported(format!("symbol {} has section index {:#x}", show(), s.0)));
                }
                _ => {}
            }
            let sec = shndx.0 as usize;
            let size = elf
                .section_by_index(sec)
                .map(|s| s.sh_size(LE))
                .ok_or_else(|| unsupported(format!("symbol {} is in section {sec}, past the section table", show())))?;
            if value > size {
                return Err(unsupported(format!(
                    "symbol {} = {value:#x} lies past the end of its section ({size:#x})",
                    show()
                )));
            }
            by_section[sec].push((value, i as u32));
        }
        for v in &mut by_section {
            v.sort_unstable();
        }
        Ok(SectionSymbols { by_section })
    }

    /// The closest symbol at or before `offset` in section `sec`: (its
    /// offset, its index); the lowest index among symbols at one offset.
    pub(crate) fn at_or_before(&self, sec: usize, offset: u64) -> Option<(u64, u32)> {
        let v = self.by_section.get(sec)?;
        let n = v.partition_point(|&(o, _)| o <= offset);
        let (best, _) = *v.get(n.checked_sub(1)?)?;
        let first = v.partition_point(|&(o, _)| o < best);
        Some(v[first])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_follows_the_vermagic() {
        let r = |v: &str| MappingRule::for_vermagic(Some(v));
        assert_eq!(r("6.1.0-56-amd64 SMP preempt mod_unload modversions "), MappingRule::V6_1);
        assert_eq!(r("6.1.192 SMP mod_unload modversions "), MappingRule::V6_1);
        assert_eq!(r("6.12.117+ SMP mod_unload modversions "), MappingRule::V6_12);
        assert_eq!(r("6.12.117+deb12-amd64 SMP preempt mod_unload modversions "), MappingRule::V6_12);
        assert_eq!(r("6.10.1 SMP mod_unload "), MappingRule::Unknown);
        assert_eq!(r("5.10.0-30-amd64 SMP mod_unload "), MappingRule::Unknown);
        assert_eq!(MappingRule::for_vermagic(None), MappingRule::Unknown);
    }

    #[test]
    fn each_line_skips_what_its_kallsyms_skips() {
        use MappingRule::*;
        let skips = |r: MappingRule, n: &str| r.skips(n.as_bytes()).unwrap();
        for r in [V6_1, V6_12] {
            for n in ["$x", "$d.1", "$a", "$t", ".Ltmp0", ".L"] {
                assert!(skips(r, n), "{r:?} {n}");
            }
            for n in ["foo", "__pfx_foo", "L1", "x$"] {
                assert!(!skips(r, n), "{r:?} {n}");
            }
        }
        // 6.12 skips every '$' name and LoongArch's "L0" labels; 6.1 does not.
        for n in ["$foo", "$xx", "$b", "L0foo", "L0"] {
            assert!(skips(V6_12, n) && !skips(V6_1, n), "{n}");
        }
        assert!(V6_1.skips(b"$").is_err());
        assert!(skips(V6_12, "$"));
        // An unknown kernel: names either rule could skip refuse the module.
        assert!(!skips(Unknown, "foo"));
        for n in ["$x", "$foo", ".Lx", "L0x"] {
            assert!(Unknown.skips(n.as_bytes()).is_err(), "{n}");
        }
    }
}
