//! ELF notes read from raw bytes, where no section header says where they
//! are (an arm64 Image, which keeps the vmlinux's notes without its ELF
//! headers): a note found by a pattern is read from its three words.

use crate::bytes::le_u32;

/// One note: its owner with the NUL, type, descriptor, and where the next
/// one starts (each part padded to 4 bytes, as ELFNOTE32() lays them out).
pub(crate) struct RawNote<'a> {
    pub(crate) name: &'a [u8],
    pub(crate) ty: u32,
    pub(crate) desc: &'a [u8],
    pub(crate) next: usize,
}

impl<'a> RawNote<'a> {
    /// The note at `at`, when its sizes are a note's (an owner of 1 to 64
    /// bytes, a descriptor of at most 64 KiB) and it fits in `image`.
    pub(crate) fn at(image: &'a [u8], at: usize) -> Option<RawNote<'a>> {
        let (namesz, descsz, ty) = (le_u32(image, at)?, le_u32(image, at + 4)?, le_u32(image, at + 8)?);
        if namesz == 0 || namesz > 64 || descsz > 1 << 16 {
            return None;
        }
        let name_at = at + 12;
        let desc_at = name_at + (namesz as usize).next_multiple_of(4);
        let desc = image.get(desc_at..desc_at + descsz as usize)?;
        Some(RawNote {
            name: image.get(name_at..name_at + namesz as usize)?,
            ty,
            desc,
            next: desc_at + desc.len().next_multiple_of(4),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], ty: u32, desc: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [name.len() as u32, desc.len() as u32, ty] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(name);
        b.resize(b.len().next_multiple_of(4), 0);
        b.extend_from_slice(desc);
        b.resize(b.len().next_multiple_of(4), 0);
        b
    }

    /// Two notes in a row are read one after the other; sizes that are not
    /// a note's, or a note cut short, read as none.
    #[test]
    fn notes_are_read_in_a_run_and_bad_sizes_are_none() {
        let mut image = note(b"GNU\0", 3, &[0xab; 20]);
        image.extend(note(b"Linux\0", 0x100, b"feature\0"));
        let first = RawNote::at(&image, 0).unwrap();
        assert_eq!((first.name, first.ty, first.desc), (&b"GNU\0"[..], 3, &[0xab; 20][..]));
        let second = RawNote::at(&image, first.next).unwrap();
        assert_eq!((second.name, second.ty, second.desc), (&b"Linux\0"[..], 0x100, &b"feature\0"[..]));
        assert_eq!(second.next, image.len());
        assert!(RawNote::at(&image[..image.len() - 4], first.next).is_none(), "cut short");
        assert!(RawNote::at(&note(b"", 1, b""), 0).is_none(), "no owner");
        assert!(RawNote::at(&note(&[b'a'; 65], 1, b""), 0).is_none(), "an owner over 64 bytes");
        assert!(RawNote::at(&note(b"X\0", 1, &vec![0; (1 << 16) + 4]), 0).is_none(), "a descriptor over 64 KiB");
    }
}
