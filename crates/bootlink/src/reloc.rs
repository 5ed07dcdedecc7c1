//! The relocation types of the machines bootlink reads, as the kernel's
//! module loaders apply them: each type's name, how many bytes it writes
//! at its offset, and what sort of link it is.
//!
//! AArch64: the types `apply_relocate_add` in arch/arm64/kernel/module.c
//! (Linux 6.1) handles; any other type makes that loader refuse the module.
//! Every AArch64 instruction relocation writes one 4-byte instruction.

use object::elf;
use serde::Serialize;

/// What sort of link a relocation makes (what a rewrite of it must keep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// No-op (R_AARCH64_NONE, R_X86_64_NONE).
    None,
    /// The symbol's address, or part of it, in data (ABS64/32/16).
    Absolute,
    /// The distance from the place to the symbol, in data (PREL64/32/16).
    PcRelative,
    /// A branch instruction's ±128 MiB offset (CALL26, JUMP26): the loader
    /// sends it through a module PLT when the target is out of range.
    Branch,
    /// A short conditional branch or test (CONDBR19 ±1 MiB, TSTBR14 ±32 KiB).
    ShortBranch,
    /// The 4 KiB page of the symbol relative to the place's (ADRP:
    /// ADR_PREL_PG_HI21, ±4 GiB), or an ADR/LDR literal (ADR_PREL_LO21,
    /// LD_PREL_LO19, ±1 MiB).
    Page,
    /// The low 12 bits of the address in an ADD or a load/store
    /// (ADD_ABS_LO12_NC, LDSTn_ABS_LO12_NC), paired with an ADRP.
    PageOffset,
    /// 16 bits of the address, absolute or PC-relative, in a MOVZ/MOVK
    /// (MOVW_UABS_Gn, MOVW_SABS_Gn, MOVW_PREL_Gn).
    MoveWide,
    /// A type the loader does not apply.
    Unknown,
}

impl Class {
    /// How a report names the class (AArch64's types in it).
    pub fn label(self) -> &'static str {
        match self {
            Class::None => "none",
            Class::Absolute => "absolute (ABS64/32/16)",
            Class::PcRelative => "PC-relative (PREL64/32/16)",
            Class::Branch => "branch (CALL26/JUMP26)",
            Class::ShortBranch => "short branch (TSTBR14/CONDBR19)",
            Class::Page => "page (ADRP, ADR, LDR literal)",
            Class::PageOffset => "page offset (ADD/LDST lo12)",
            Class::MoveWide => "move wide (MOVW)",
            Class::Unknown => "not applied by the loader",
        }
    }
}

/// One AArch64 relocation type: number, name, class.
struct Aarch64(u32, &'static str, Class);

const AARCH64: &[Aarch64] = &[
    Aarch64(256, "R_AARCH64_NONE", Class::None),
    Aarch64(257, "R_AARCH64_ABS64", Class::Absolute),
    Aarch64(258, "R_AARCH64_ABS32", Class::Absolute),
    Aarch64(259, "R_AARCH64_ABS16", Class::Absolute),
    Aarch64(260, "R_AARCH64_PREL64", Class::PcRelative),
    Aarch64(261, "R_AARCH64_PREL32", Class::PcRelative),
    Aarch64(262, "R_AARCH64_PREL16", Class::PcRelative),
    Aarch64(263, "R_AARCH64_MOVW_UABS_G0", Class::MoveWide),
    Aarch64(264, "R_AARCH64_MOVW_UABS_G0_NC", Class::MoveWide),
    Aarch64(265, "R_AARCH64_MOVW_UABS_G1", Class::MoveWide),
    Aarch64(266, "R_AARCH64_MOVW_UABS_G1_NC", Class::MoveWide),
    Aarch64(267, "R_AARCH64_MOVW_UABS_G2", Class::MoveWide),
    Aarch64(268, "R_AARCH64_MOVW_UABS_G2_NC", Class::MoveWide),
    Aarch64(269, "R_AARCH64_MOVW_UABS_G3", Class::MoveWide),
    Aarch64(270, "R_AARCH64_MOVW_SABS_G0", Class::MoveWide),
    Aarch64(271, "R_AARCH64_MOVW_SABS_G1", Class::MoveWide),
    Aarch64(272, "R_AARCH64_MOVW_SABS_G2", Class::MoveWide),
    Aarch64(273, "R_AARCH64_LD_PREL_LO19", Class::Page),
    Aarch64(274, "R_AARCH64_ADR_PREL_LO21", Class::Page),
    Aarch64(275, "R_AARCH64_ADR_PREL_PG_HI21", Class::Page),
    Aarch64(276, "R_AARCH64_ADR_PREL_PG_HI21_NC", Class::Page),
    Aarch64(277, "R_AARCH64_ADD_ABS_LO12_NC", Class::PageOffset),
    Aarch64(278, "R_AARCH64_LDST8_ABS_LO12_NC", Class::PageOffset),
    Aarch64(279, "R_AARCH64_TSTBR14", Class::ShortBranch),
    Aarch64(280, "R_AARCH64_CONDBR19", Class::ShortBranch),
    Aarch64(282, "R_AARCH64_JUMP26", Class::Branch),
    Aarch64(283, "R_AARCH64_CALL26", Class::Branch),
    Aarch64(284, "R_AARCH64_LDST16_ABS_LO12_NC", Class::PageOffset),
    Aarch64(285, "R_AARCH64_LDST32_ABS_LO12_NC", Class::PageOffset),
    Aarch64(286, "R_AARCH64_LDST64_ABS_LO12_NC", Class::PageOffset),
    Aarch64(287, "R_AARCH64_MOVW_PREL_G0", Class::MoveWide),
    Aarch64(288, "R_AARCH64_MOVW_PREL_G0_NC", Class::MoveWide),
    Aarch64(289, "R_AARCH64_MOVW_PREL_G1", Class::MoveWide),
    Aarch64(290, "R_AARCH64_MOVW_PREL_G1_NC", Class::MoveWide),
    Aarch64(291, "R_AARCH64_MOVW_PREL_G2", Class::MoveWide),
    Aarch64(292, "R_AARCH64_MOVW_PREL_G2_NC", Class::MoveWide),
    Aarch64(293, "R_AARCH64_MOVW_PREL_G3", Class::MoveWide),
    Aarch64(299, "R_AARCH64_LDST128_ABS_LO12_NC", Class::PageOffset),
];

fn aarch64(ty: u32) -> Option<&'static Aarch64> {
    AARCH64.iter().find(|r| r.0 == ty)
}

/// The name of relocation type `ty` of `machine` (None: a type bootlink
/// does not name).
pub fn name(machine: elf::Machine, ty: u32) -> Option<&'static str> {
    match machine {
        elf::EM_AARCH64 => aarch64(ty).map(|r| r.1),
        _ => None,
    }
}

/// The class of relocation type `ty` of `machine` (AArch64 only: other
/// machines' types are [`Class::Unknown`]).
pub fn class(machine: elf::Machine, ty: u32) -> Class {
    match machine {
        elf::EM_AARCH64 => aarch64(ty).map_or(Class::Unknown, |r| r.2),
        _ => Class::Unknown,
    }
}

/// Whether a relocation of type `ty` can be folded (its symbol replaced
/// by symbol 0 and the symbol's address added to the addend) without
/// changing what the kernel's loader does with it. AArch64: every type
/// `apply_relocate_add` applies computes from S + A and the place alone,
/// except CALL26/JUMP26 ([`Class::Branch`]): `module_frob_arch_sections`
/// counts the module PLT entries from those relocations' symbols, one per
/// distinct callee, and `module_emit_plt_entry` reads the symbol. Other
/// machines: false (x86-64's rule is the folding code's own).
pub(crate) fn foldable(machine: elf::Machine, ty: u32) -> bool {
    machine == elf::EM_AARCH64 && !matches!(class(machine, ty), Class::Branch | Class::Unknown)
}

/// How many bytes relocation type `ty` of `machine` writes at its offset
/// (1 for a type or machine bootlink does not know: at least its first byte
/// must be in place).
pub(crate) fn width(machine: elf::Machine, ty: u32) -> u64 {
    match machine {
        elf::EM_X86_64 => x86_64_width(ty),
        elf::EM_AARCH64 => match ty {
            256 => 0,
            257 | 260 => 8,
            259 | 262 => 2,
            _ if aarch64(ty).is_some() => 4,
            _ => 1,
        },
        _ => 1,
    }
}

fn x86_64_width(ty: u32) -> u64 {
    match ty {
        0 | 35 => 0,
        12 | 13 => 2,
        14 | 15 => 1,
        2..=4 | 9..=11 | 19..=23 | 26 | 32 | 34 | 41 | 42 => 4,
        36 => 16,
        1 | 5..=8 | 16..=18 | 24 | 25 | 27..=31 | 33 | 37 | 38 => 8,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers are the ELF for the Arm 64-bit Architecture's, which the
    /// `object` crate also carries: the table and it agree.
    #[test]
    fn aarch64_numbers_agree_with_the_object_crate() {
        for (ty, n) in [
            (elf::R_AARCH64_ABS64.0, "R_AARCH64_ABS64"),
            (elf::R_AARCH64_PREL32.0, "R_AARCH64_PREL32"),
            (elf::R_AARCH64_CALL26.0, "R_AARCH64_CALL26"),
            (elf::R_AARCH64_JUMP26.0, "R_AARCH64_JUMP26"),
            (elf::R_AARCH64_ADR_PREL_PG_HI21.0, "R_AARCH64_ADR_PREL_PG_HI21"),
            (elf::R_AARCH64_ADD_ABS_LO12_NC.0, "R_AARCH64_ADD_ABS_LO12_NC"),
            (elf::R_AARCH64_LDST128_ABS_LO12_NC.0, "R_AARCH64_LDST128_ABS_LO12_NC"),
            (elf::R_AARCH64_MOVW_PREL_G3.0, "R_AARCH64_MOVW_PREL_G3"),
            (elf::R_AARCH64_MOVW_SABS_G2.0, "R_AARCH64_MOVW_SABS_G2"),
        ] {
            assert_eq!(name(elf::EM_AARCH64, ty), Some(n));
        }
        assert_eq!(class(elf::EM_AARCH64, elf::R_AARCH64_CALL26.0), Class::Branch);
        assert_eq!(class(elf::EM_AARCH64, elf::R_AARCH64_LDST64_ABS_LO12_NC.0), Class::PageOffset);
        assert_eq!(class(elf::EM_AARCH64, elf::R_AARCH64_TLSDESC_CALL.0), Class::Unknown);
        assert_eq!(class(elf::EM_X86_64, elf::R_X86_64_64.0), Class::Unknown);
        assert_eq!(name(elf::EM_X86_64, elf::R_X86_64_64.0), None);
    }

    #[test]
    fn branches_and_unknown_types_do_not_fold() {
        for ty in [elf::R_AARCH64_ABS64, elf::R_AARCH64_PREL32, elf::R_AARCH64_ADR_PREL_PG_HI21] {
            assert!(foldable(elf::EM_AARCH64, ty.0));
        }
        assert!(foldable(elf::EM_AARCH64, elf::R_AARCH64_LDST64_ABS_LO12_NC.0));
        assert!(foldable(elf::EM_AARCH64, elf::R_AARCH64_MOVW_UABS_G3.0));
        assert!(!foldable(elf::EM_AARCH64, elf::R_AARCH64_CALL26.0));
        assert!(!foldable(elf::EM_AARCH64, elf::R_AARCH64_JUMP26.0));
        assert!(!foldable(elf::EM_AARCH64, elf::R_AARCH64_TLSDESC_CALL.0));
        assert!(!foldable(elf::EM_X86_64, elf::R_X86_64_64.0));
    }

    #[test]
    fn widths() {
        assert_eq!(width(elf::EM_AARCH64, elf::R_AARCH64_ABS64.0), 8);
        assert_eq!(width(elf::EM_AARCH64, elf::R_AARCH64_PREL32.0), 4);
        assert_eq!(width(elf::EM_AARCH64, elf::R_AARCH64_ABS16.0), 2);
        assert_eq!(width(elf::EM_AARCH64, elf::R_AARCH64_CALL26.0), 4);
        // The kernel's R_AARCH64_NONE is 256 (arch/arm64/include/asm/elf.h), the ABI's 0.
        assert_eq!(width(elf::EM_AARCH64, 256), 0);
        assert_eq!(width(elf::EM_AARCH64, elf::R_AARCH64_TLSDESC_CALL.0), 1);
        assert_eq!(width(elf::EM_X86_64, elf::R_X86_64_64.0), 8);
        assert_eq!(width(elf::EM_X86_64, elf::R_X86_64_PLT32.0), 4);
        assert_eq!(width(elf::EM_RISCV, 1), 1);
    }
}
