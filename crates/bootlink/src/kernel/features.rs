//! The module loader's build-time features a kernel names in its image:
//! "Linux" ELF notes of type LINUX_ELFNOTE_MODULE_FEATURE (kernel/6.1/patches
//! 0012), one per feature, each placed next to the code it names, so a
//! note is in vmlinux exactly when that code is built in.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::elf::{Elf, ReadError};

/// The note type (after LINUX_ELFNOTE_BUILD_SALT 0x100, LTO_INFO 0x101).
pub(crate) const NOTE_TYPE: u32 = 0x102;
pub(crate) const OWNER: &[u8] = b"Linux";

/// What a kernel says of its module loader.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "known", content = "names")]
pub enum LoaderFeatures {
    /// Read from the notes of a vmlinux (empty: a kernel without the
    /// series, such as a distribution's stock one).
    Named(BTreeSet<String>),
    /// The exports came from System.map: no image, so nothing is known.
    #[default]
    Unknown,
}

/// The features by name, as the kernel spells them.
pub mod name {
    pub const SYMHASH: &str = "symhash";
    pub const SYMHASH_VMLINUX: &str = "symhash-vmlinux";
    pub const VERSIONS_SORTED: &str = "versions-sorted";
    /// `.undef.hash` may give each symbol's `__versions` index (patch `versions-indexed`).
    pub const VERSIONS_INDEXED: &str = "versions-indexed";
    /// `.undef.hash` may give each import's slot in vmlinux's export
    /// tables (patch `export-slots`).
    pub const EXPORT_SLOTS: &str = "export-slots";
    pub const SYMLOOKUP_DIRECT: &str = "symlookup-direct";
    pub const FTRACE_CHECK_SORTED: &str = "ftrace-check-sorted";
    pub const FTRACE_CHECKED: &str = "ftrace-checked";
    pub const ORC_SORTED: &str = "orc-sorted";
    pub const EVAL_ONE_PASS: &str = "eval-one-pass";
    pub const LOAD_STATS: &str = "load-stats";
    pub const DEDUP: &str = "dedup";
    pub const HASHES: &str = "hashes";
    /// The module hash list may hold BLAKE2b-256 digests (patch `hashes-blake2b`).
    pub const HASHES_BLAKE2B: &str = "hashes-blake2b";
    /// The kernel's exports closed to modules after boot (patch `exports-sealed`):
    /// every module must be linked against it at build time.
    pub const EXPORTS_SEALED: &str = "exports-sealed";
}

impl LoaderFeatures {
    /// The feature notes of a vmlinux. A descriptor that is not one
    /// NUL-terminated printable name is the image's error.
    pub(crate) fn of(elf: &Elf) -> Result<LoaderFeatures, ReadError> {
        let mut names = BTreeSet::new();
        let mut bad = None;
        elf.each_note(|owner, n_type, desc| {
            if owner != OWNER || n_type != NOTE_TYPE {
                return;
            }
            // The descriptor is padded to 4 bytes: the name ends at the
            // first NUL, and what follows it is padding.
            match desc.iter().position(|&b| b == 0) {
                Some(end) if end > 0 && desc[..end].iter().all(|b| b.is_ascii_graphic()) => {
                    names.insert(String::from_utf8_lossy(&desc[..end]).into_owned());
                }
                _ => bad = Some(desc.len()),
            }
        })?;
        if let Some(len) = bad {
            return Err(ReadError::Corrupt(format!(
                "module-loader feature note ({len} bytes) is not a NUL-terminated name"
            )));
        }
        Ok(LoaderFeatures::Named(names))
    }

    /// The feature notes of a raw image (an arm64 Image), which keeps
    /// vmlinux's `.notes` bytes but not its section headers: every
    /// "Linux" note of this type, found by its header (namesz 6, the type,
    /// the owner padded to 8 bytes).
    pub(crate) fn of_raw(image: &[u8]) -> Result<LoaderFeatures, ReadError> {
        let mut pattern = NOTE_TYPE.to_le_bytes().to_vec();
        pattern.extend_from_slice(OWNER);
        pattern.extend_from_slice(&[0, 0, 0]);
        let mut names = BTreeSet::new();
        for at in memchr::memmem::find_iter(image, &pattern) {
            // namesz and descsz come before the type.
            let Some(start) = at.checked_sub(8) else { continue };
            if crate::elf::read_u32(image, start) != Some(OWNER.len() as u32 + 1) {
                continue;
            }
            // A feature note whose descriptor does not fit (or is over
            // 64 KiB) is the image's error, as one that is not a name.
            let descsz = crate::elf::read_u32(image, start + 4).unwrap_or(0) as usize;
            let desc = super::note::RawNote::at(image, start).map_or(&[][..], |n| n.desc);
            match desc.iter().position(|&b| b == 0) {
                Some(end) if end > 0 && desc[..end].iter().all(|b| b.is_ascii_graphic()) => {
                    names.insert(String::from_utf8_lossy(&desc[..end]).into_owned());
                }
                _ => {
                    return Err(ReadError::Corrupt(format!(
                        "module-loader feature note ({descsz} bytes) is not a NUL-terminated name"
                    )));
                }
            }
        }
        Ok(LoaderFeatures::Named(names))
    }

    pub fn has(&self, feature: &str) -> bool {
        matches!(self, LoaderFeatures::Named(n) if n.contains(feature))
    }

    /// "none" (stock), "unknown", or the names joined by ", ".
    pub fn describe(&self) -> String {
        match self {
            LoaderFeatures::Named(n) if n.is_empty() => "none (no feature notes: a kernel without the series)".into(),
            LoaderFeatures::Named(n) => n.iter().cloned().collect::<Vec<_>>().join(", "),
            LoaderFeatures::Unknown => "unknown (no kernel image read)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::Want;

    /// A static executable whose notes are laid out as the kernel's
    /// ELFNOTE32() lays them out (name "Linux", 4-byte aligned descriptor),
    /// built by gcc: one feature note per name, plus a note of another
    /// owner and another type that must not count.
    fn executable(features: &[&str], extra: &str) -> Vec<u8> {
        let dir = std::env::temp_dir().join(format!("bootlink-features-{}-{}", std::process::id(), features.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = String::from(
            "#define NOTE(owner, type, name, tag) \\\n\
             static const struct { unsigned int n[3]; char o[sizeof(owner)] __attribute__((aligned(4))); \\\n\
             char d[sizeof(name)] __attribute__((aligned(4))); } tag __attribute__((used, \\\n\
             section(\".note.\" owner), aligned(4))) = { { sizeof(owner), sizeof(name), type }, owner, name };\n",
        );
        for (i, f) in features.iter().enumerate() {
            c += &format!("NOTE(\"Linux\", 0x102, \"{f}\", n{i})\n");
        }
        c += "NOTE(\"Linux\", 0x100, \"salt\", salt)\nNOTE(\"Other\", 0x102, \"not-ours\", other)\n";
        c += extra;
        c += "void _start(void) { for (;;); }\n";
        std::fs::write(dir.join("k.c"), c).unwrap();
        let out = std::process::Command::new("gcc")
            .args(["-nostdlib", "-static", "-O1", "-o", "k", "k.c"])
            .current_dir(&dir)
            .output()
            .expect("gcc runs");
        assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
        let bytes = std::fs::read(dir.join("k")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        bytes
    }

    #[test]
    fn feature_notes_are_read_by_owner_and_type() {
        let data = executable(&["orc-sorted", "hashes", "symhash"], "");
        let elf = Elf::parse(&data, Want::Executable).unwrap();
        let f = LoaderFeatures::of(&elf).unwrap();
        assert_eq!(f.describe(), "hashes, orc-sorted, symhash");
        assert!(f.has(name::HASHES) && !f.has(name::DEDUP));

        let stock = executable(&[], "");
        let f = LoaderFeatures::of(&Elf::parse(&stock, Want::Executable).unwrap()).unwrap();
        assert_eq!(f, LoaderFeatures::Named(BTreeSet::new()));
        assert!(f.describe().starts_with("none"));
    }

    #[test]
    fn a_feature_note_without_its_nul_is_refused() {
        // Four bytes of descriptor, no NUL: the name does not end.
        let bad = "static const struct { unsigned int n[3]; char o[8]; char d[4]; } bad \
                   __attribute__((used, section(\".note.Linux\"), aligned(4))) = \
                   { { 6, 4, 0x102 }, \"Linux\", { 'a', 'b', 'c', 'd' } };\n";
        let data = executable(&["dedup"], bad);
        let e = LoaderFeatures::of(&Elf::parse(&data, Want::Executable).unwrap()).unwrap_err();
        assert!(e.to_string().contains("not a NUL-terminated name"), "{e}");
    }
}
