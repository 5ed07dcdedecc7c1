//! Preresolving that survives KASLR (patch `preresolved-slide`), the format
//! the kernel reads: a preresolved module keeps link-time vmlinux
//! addresses, and a side table,
//! `.preresolved_slide`, lists every value that holds one (SHN_ABS symbols
//! by index, folded relocations by section and entry) with the build ID of
//! the vmlinux they are from and `_text`'s link-time address. The patched
//! loader checks the build ID and adds the slide (where `_text` is now minus
//! where it was linked) to each listed value before relocating; the
//! module's vermagic ends with [`VERMAGIC_TOKEN`] so that a kernel without
//! the patch refuses it in its vermagic check.
//!
//! Only addresses inside the kernel image move with it: x86-64's per-CPU
//! exports (zero-based) and absolute ones do not, so they are preresolved
//! as they are and not listed.
//!
//! The table (native little-endian, as the kernel's `struct slide_header`,
//! kernel/module/slide.c): version u32 (2), build ID length u32, `_text`'s
//! link-time address u64, number of symbols u32, number of relocation
//! sections u32, reserved u32 (0), the build ID in 20 bytes (zero-padded),
//! then one u32 symbol index per symbol and, per relocation section in
//! increasing order, its index u32, a count of words u32 and that many u32
//! words of a bitmap: bit b of word w stands for entry 32 * w + b.
//!
//! Version 1 listed each relocation as a (section, entry) pair: 8 bytes per
//! folded relocation, which made Debian's ext4.ko about 3 % larger, and the
//! signature check hashes the whole file (docs/system.md). A bitmap costs
//! an eighth of a byte per entry up to the last one marked.

use serde::Serialize;

use super::note::RawNote;
use crate::bytes::{LeWriter, le_u32, le_u64};
use crate::elf::ReadError;

/// The side table's section name.
pub const SECTION: &str = ".preresolved_slide";
/// Appended to the module's vermagic (which ends with a space).
pub const VERMAGIC_TOKEN: &str = "preresolved-slide ";
/// The loader feature the patched kernel names (patch `preresolved-slide`).
pub const FEATURE: &str = "preresolved-slide";

const VERSION: u32 = 2;
const ID_MAX: usize = 20;
const HEADER: usize = 48;

/// What a kernel build gives the table: its identity and the range of
/// addresses that move with the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlideBase {
    /// vmlinux's GNU build ID (NT_GNU_BUILD_ID).
    #[serde(serialize_with = "hex")]
    pub build_id: Vec<u8>,
    /// `_text`'s link-time address: the start of the lowest PT_LOAD segment.
    pub link_text: u64,
    /// The end of the image's highest PT_LOAD segment.
    pub link_end: u64,
}

fn hex<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

impl SlideBase {
    /// Does `addr` move with the kernel?
    pub fn moves(&self, addr: u64) -> bool {
        (self.link_text..self.link_end).contains(&addr)
    }
}

/// The GNU build ID of the kernel in an image read as raw bytes (an arm64
/// `Image`, which has no ELF headers: the linked vmlinux's loadable bytes,
/// `.notes` among them). An Image holds other build IDs too (each vDSO
/// embedded in it has its own notes), so the kernel's is the
/// `NT_GNU_BUILD_ID` note (owner "GNU", 1 to 20 bytes, 4-byte aligned as
/// the linker lays notes out) whose run of notes, read on from it, reaches
/// the module loader's feature notes (patch `feature-notes`; a kernel that
/// takes modules preresolved for its slide names that feature there).
/// None when no build ID does, or several different ones do.
pub fn build_id_of_raw(image: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let mut pattern = NT_GNU_BUILD_ID.to_le_bytes().to_vec();
    pattern.extend_from_slice(b"GNU\0");
    let mut found: Option<&[u8]> = None;
    for at in memchr::memmem::find_iter(image, &pattern) {
        let Some(start) = at.checked_sub(8).filter(|s| s % 4 == 0) else { continue };
        let Some(note) = RawNote::at(image, start) else { continue };
        if !(1..=ID_MAX).contains(&note.desc.len()) || !reaches_feature_notes(image, start) {
            continue;
        }
        match found {
            Some(f) if f != note.desc => return None,
            _ => found = Some(note.desc),
        }
    }
    found.map(<[u8]>::to_vec)
}

/// Whether the run of notes from `at` holds a module-loader feature note
/// within its first 64 notes.
fn reaches_feature_notes(image: &[u8], mut at: usize) -> bool {
    for _ in 0..64 {
        let Some(n) = RawNote::at(image, at) else { return false };
        if n.ty == super::features::NOTE_TYPE && n.name.strip_suffix(b"\0") == Some(super::features::OWNER) {
            return true;
        }
        at = n.next;
    }
    false
}

/// A `.preresolved_slide` table, as written or read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlideTable {
    pub build_id: Vec<u8>,
    pub link_text: u64,
    /// Symbol table indices of SHN_ABS symbols holding link-time addresses.
    pub symbols: Vec<u32>,
    /// (SHT_RELA section index, entry index) of folded relocations whose
    /// addend holds a link-time address, in increasing order.
    pub relocations: Vec<(u32, u32)>,
}

impl SlideTable {
    pub fn new(base: &SlideBase, symbols: Vec<u32>, mut relocations: Vec<(u32, u32)>) -> SlideTable {
        relocations.sort_unstable();
        relocations.dedup();
        SlideTable { build_id: base.build_id.clone(), link_text: base.link_text, symbols, relocations }
    }

    /// The relocations as the table holds them: per section, the words of
    /// its bitmap (up to the last word with a bit set).
    /// Sections come out in increasing order whatever order the list is
    /// in, and an entry listed twice sets its bit once.
    fn bitmaps(&self) -> Vec<(u32, Vec<u32>)> {
        let mut out: std::collections::BTreeMap<u32, Vec<u32>> = std::collections::BTreeMap::new();
        for &(sec, ent) in &self.relocations {
            let words = out.entry(sec).or_default();
            let w = (ent / 32) as usize;
            if words.len() <= w {
                words.resize(w + 1, 0);
            }
            words[w] |= 1 << (ent % 32);
        }
        out.into_iter().collect()
    }

    /// The values the kernel moves.
    pub fn len(&self) -> usize {
        self.symbols.len() + self.relocations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let bitmaps = self.bitmaps();
        let words: usize = bitmaps.iter().map(|(_, b)| 2 + b.len()).sum();
        let mut w = LeWriter::with_capacity(HEADER + 4 * self.symbols.len() + 4 * words);
        let mut id = [0u8; ID_MAX];
        id[..self.build_id.len()].copy_from_slice(&self.build_id);
        w.u32(VERSION);
        w.u32(self.build_id.len() as u32);
        w.u64(self.link_text);
        w.u32(self.symbols.len() as u32);
        w.u32(bitmaps.len() as u32);
        w.u32(0);
        w.bytes(&id);
        for s in &self.symbols {
            w.u32(*s);
        }
        for (sec, bits) in &bitmaps {
            w.u32(*sec);
            w.u32(bits.len() as u32);
            for b in bits {
                w.u32(*b);
            }
        }
        w.into_inner()
    }

    /// Read a table back, checking it as the kernel does (version, sizes).
    pub fn parse(d: &[u8]) -> Result<SlideTable, ReadError> {
        let bad = |what: &str| ReadError::Corrupt(format!("corrupt {SECTION} section: {what}"));
        let field = |at: usize| le_u32(d, at).ok_or_else(|| bad("shorter than its header"));
        if field(0)? != VERSION {
            return Err(bad("unknown version"));
        }
        let id_len = field(4)? as usize;
        let link_text = le_u64(d, 8).ok_or_else(|| bad("shorter than its header"))?;
        let (nsyms, nsects) = (field(16)? as usize, field(20)? as usize);
        if id_len == 0 || id_len > ID_MAX || field(24)? != 0 {
            return Err(bad("bad build ID length or reserved field"));
        }
        let size = || bad("its size does not match its counts");
        let word = |at: usize| le_u32(d, at).ok_or_else(size);
        let symbols =
            (0..nsyms).map(|i| HEADER.checked_add(4 * i).ok_or_else(size).and_then(word)).collect::<Result<_, _>>()?;
        let mut at = HEADER + 4 * nsyms;
        let mut relocations = Vec::new();
        let mut prev = 0;
        for _ in 0..nsects {
            let (sec, nwords) = (word(at)?, word(at + 4)? as usize);
            if sec <= prev {
                return Err(bad("its relocation sections are not in increasing order"));
            }
            prev = sec;
            at += 8;
            if d.len().saturating_sub(at) / 4 < nwords {
                return Err(size());
            }
            for w in 0..nwords {
                let mut bits = word(at + 4 * w)?;
                while bits != 0 {
                    relocations.push((sec, 32 * w as u32 + bits.trailing_zeros()));
                    bits &= bits - 1;
                }
            }
            at += 4 * nwords;
        }
        if at != d.len() {
            return Err(size());
        }
        Ok(SlideTable { build_id: d[28..28 + id_len].to_vec(), link_text, symbols, relocations })
    }
}

/// `.modinfo` with the vermagic entry's value followed by
/// [`VERMAGIC_TOKEN`]; None when it has no vermagic entry.
pub fn marked_modinfo(modinfo: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(modinfo.len() + VERMAGIC_TOKEN.len());
    let mut found = false;
    for entry in modinfo.split_inclusive(|&b| b == 0) {
        if !found && entry.starts_with(b"vermagic=") && entry.ends_with(&[0]) {
            out.extend_from_slice(&entry[..entry.len() - 1]);
            out.extend_from_slice(VERMAGIC_TOKEN.as_bytes());
            out.push(0);
            found = true;
        } else {
            out.extend_from_slice(entry);
        }
    }
    found.then_some(out)
}

/// The kernel's vermagic a marked module was made for: `vermagic` without
/// its trailing [`VERMAGIC_TOKEN`].
pub fn unmarked_vermagic(vermagic: &str) -> Option<&str> {
    vermagic.strip_suffix(VERMAGIC_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> SlideBase {
        SlideBase { build_id: (1..=20).collect(), link_text: 0xffff_ffff_8100_0000, link_end: 0xffff_ffff_8300_0000 }
    }

    #[test]
    fn table_round_trips_in_the_kernels_layout() {
        // given out of order, written per section in increasing order
        let t = SlideTable::new(&base(), vec![5, 9], vec![(12, 1), (3, 0), (3, 40), (3, 7)]);
        let b = t.to_bytes();
        // header, two symbols, section 3's two words, section 12's one
        assert_eq!(b.len(), 48 + 2 * 4 + (8 + 2 * 4) + (8 + 4));
        // version, id length, _text, counts, reserved, then the id at 28
        assert_eq!(&b[..8], &[2, 0, 0, 0, 20, 0, 0, 0]);
        assert_eq!(le_u64(&b, 8), Some(0xffff_ffff_8100_0000));
        assert_eq!((le_u32(&b, 16), le_u32(&b, 20), le_u32(&b, 24)), (Some(2), Some(2), Some(0)));
        assert_eq!(&b[28..48], &base().build_id[..]);
        assert_eq!((le_u32(&b, 48), le_u32(&b, 52)), (Some(5), Some(9)));
        // section 3: entries 0 and 7 in word 0, 40 = 32 + 8 in word 1
        assert_eq!((le_u32(&b, 56), le_u32(&b, 60)), (Some(3), Some(2)));
        assert_eq!((le_u32(&b, 64), le_u32(&b, 68)), (Some(0x81), Some(1 << 8)));
        assert_eq!((le_u32(&b, 72), le_u32(&b, 76), le_u32(&b, 80)), (Some(12), Some(1), Some(2)));
        assert_eq!(SlideTable::parse(&b).unwrap(), t);
        assert_eq!(t.relocations, vec![(3, 0), (3, 7), (3, 40), (12, 1)]);
        assert_eq!(t.len(), 6);
    }

    #[test]
    fn a_bitmap_is_an_eighth_of_a_byte_per_entry() {
        // 8,000 of 18,000 entries of one section: a list of pairs took
        // 8 bytes each, the bitmap takes a bit per entry up to the last
        let relas: Vec<(u32, u32)> = (0..18_000).filter(|e| e % 9 < 4).map(|e| (7, e)).collect();
        let n = relas.len();
        let b = SlideTable::new(&base(), vec![], relas).to_bytes();
        assert_eq!(n, 8_000);
        assert_eq!(b.len(), 48 + 8 + 4 * 17_997usize.div_ceil(32));
        assert_eq!(SlideTable::parse(&b).unwrap().len(), 8_000);
    }

    #[test]
    fn damaged_tables_are_refused() {
        let b = SlideTable::new(&base(), vec![5], vec![(3, 1)]).to_bytes();
        for (cut, why) in [(10, "header"), (50, "size"), (60, "size")] {
            let e = SlideTable::parse(&b[..cut]).unwrap_err().to_string();
            assert!(e.contains(SECTION) && e.contains(why), "{e}");
        }
        let mut v = b.clone();
        v.extend_from_slice(&[0; 4]);
        assert!(SlideTable::parse(&v).unwrap_err().to_string().contains("size"));
        // a count of words past the end, however large
        for words in [2u32, u32::MAX] {
            let mut v = b.clone();
            v[56..60].copy_from_slice(&words.to_le_bytes());
            assert!(SlideTable::parse(&v).unwrap_err().to_string().contains("size"));
        }
        let mut v = b.clone();
        v[0] = 1;
        assert!(SlideTable::parse(&v).unwrap_err().to_string().contains("version"));
        let mut v = b.clone();
        v[4] = 21;
        assert!(SlideTable::parse(&v).unwrap_err().to_string().contains("build ID"));
        // one section twice, or section 0: the kernel would move values twice
        let two = SlideTable::new(&base(), vec![], vec![(3, 1), (4, 1)]).to_bytes();
        let mut v = two.clone();
        v[60..64].copy_from_slice(&3u32.to_le_bytes());
        assert!(SlideTable::parse(&v).unwrap_err().to_string().contains("increasing"));
        let mut v = two;
        v[48..52].copy_from_slice(&0u32.to_le_bytes());
        assert!(SlideTable::parse(&v).unwrap_err().to_string().contains("increasing"));
    }

    #[test]
    fn only_the_images_addresses_move() {
        let b = base();
        assert!(b.moves(0xffff_ffff_8100_0000) && b.moves(0xffff_ffff_82ff_ffff));
        // x86-64's per-CPU exports are zero-based; the end is exclusive
        assert!(!b.moves(0x1_f000) && !b.moves(0xffff_ffff_8300_0000));
    }

    /// A note as the linker lays it out: namesz, descsz, type, the owner
    /// with its NUL, the descriptor, each padded to 4 bytes.
    fn note(owner: &[u8], ty: u32, desc: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        for w in [owner.len() as u32 + 1, desc.len() as u32, ty] {
            n.extend_from_slice(&w.to_le_bytes());
        }
        n.extend_from_slice(owner);
        n.push(0);
        n.resize(n.len().next_multiple_of(4), 0);
        n.extend_from_slice(desc);
        n.resize(n.len().next_multiple_of(4), 0);
        n
    }

    /// A kernel's `.notes`: its build ID, a Linux note, a feature note.
    fn kernel_notes(id: &[u8]) -> Vec<u8> {
        let mut n = note(b"GNU", 3, id);
        n.extend(note(b"Linux", 0x101, &[0; 4]));
        n.extend(note(b"Linux", crate::kernel::features::NOTE_TYPE, b"preresolved-slide\0"));
        n
    }

    #[test]
    fn a_raw_images_build_id_is_the_one_beside_its_feature_notes() {
        let id: Vec<u8> = (1..=20).collect();
        // A vDSO's notes first (its own build ID, no feature notes), then
        // the kernel's.
        let mut image = vec![0u8; 64];
        image.extend(note(b"GNU", 3, &[0x55; 20]));
        image.extend(note(b"Linux", 0, &[1, 2, 3, 4]));
        image.extend([0xaa; 16]);
        image.extend(kernel_notes(&id));
        image.extend([0xaa; 12]);
        assert_eq!(build_id_of_raw(&image), Some(id.clone()));
        // The kernel's notes twice (the same ID) still name one build.
        let mut twice = image.clone();
        twice.extend(kernel_notes(&id));
        assert_eq!(build_id_of_raw(&twice), Some(id.clone()));
        // Two different IDs beside feature notes: which one is the kernel's
        // is not known.
        let mut two = image.clone();
        two.extend(kernel_notes(&[9; 20]));
        assert_eq!(build_id_of_raw(&two), None);
        // No feature notes after it (a kernel without the series), not
        // 4-byte aligned, a descriptor over 20 bytes, cut short, absent.
        assert_eq!(build_id_of_raw(&note(b"GNU", 3, &id)), None);
        let mut odd = vec![0u8; 65];
        odd.extend(kernel_notes(&id));
        assert_eq!(build_id_of_raw(&odd), None);
        assert_eq!(build_id_of_raw(&kernel_notes(&[7; 32])), None);
        // Cut inside the build ID (12 bytes of sizes, "GNU\0", 20 bytes),
        // or inside the feature note's name.
        let whole = kernel_notes(&id);
        assert_eq!(build_id_of_raw(&whole[..30]), None);
        let feature_at = whole.len() - note(b"Linux", 0x102, b"preresolved-slide\0").len();
        assert_eq!(build_id_of_raw(&whole[..feature_at + 14]), None);
        assert_eq!(build_id_of_raw(&[0u8; 256]), None);
    }

    #[test]
    fn vermagic_gets_the_token_and_loses_it() {
        let mi = b"license=GPL\0vermagic=6.1.192 SMP preempt mod_unload modversions \0name=fat\0";
        let out = marked_modinfo(mi).unwrap();
        assert_eq!(
            out,
            b"license=GPL\0vermagic=6.1.192 SMP preempt mod_unload modversions preresolved-slide \0name=fat\0"
        );
        assert_eq!(
            unmarked_vermagic("6.1.192 SMP preempt mod_unload modversions preresolved-slide "),
            Some("6.1.192 SMP preempt mod_unload modversions ")
        );
        assert_eq!(marked_modinfo(b"license=GPL\0"), None);
    }
}
