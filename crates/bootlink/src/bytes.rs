//! Little- and big-endian fields of the byte formats bootlink reads and
//! writes that are not ELF records (the DDLink cache, the symbol hash
//! tables, the module hash list, compressors' headers): a reader per width
//! that names the offset once and checks it against the data, and a writer
//! that appends fields in order. ELF records have their typed views in
//! [`crate::elf`].

/// The `N` bytes at `at`, if they lie inside `d`.
fn field<const N: usize>(d: &[u8], at: usize) -> Option<[u8; N]> {
    d.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The little-endian `u16` at `at` (None: past the end of `d`).
pub(crate) fn le_u16(d: &[u8], at: usize) -> Option<u16> {
    field(d, at).map(u16::from_le_bytes)
}

/// The little-endian `u32` at `at` (None: past the end of `d`).
pub(crate) fn le_u32(d: &[u8], at: usize) -> Option<u32> {
    field(d, at).map(u32::from_le_bytes)
}

/// The little-endian `u64` at `at` (None: past the end of `d`).
pub(crate) fn le_u64(d: &[u8], at: usize) -> Option<u64> {
    field(d, at).map(u64::from_le_bytes)
}

/// The big-endian `u16` at `at` (None: past the end of `d`).
pub(crate) fn be_u16(d: &[u8], at: usize) -> Option<u16> {
    field(d, at).map(u16::from_be_bytes)
}

/// The big-endian `u32` at `at` (None: past the end of `d`).
pub(crate) fn be_u32(d: &[u8], at: usize) -> Option<u32> {
    field(d, at).map(u32::from_be_bytes)
}

/// Each whole little-endian `u32` of `d`, in order (a trailing part of a
/// word is left out).
pub(crate) fn le_u32s(d: &[u8]) -> impl Iterator<Item = u32> + '_ {
    d.chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
}

/// Each whole little-endian `u64` of `d`, in order (a trailing part of a
/// word is left out).
pub(crate) fn le_u64s(d: &[u8]) -> impl Iterator<Item = u64> + '_ {
    d.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
}

/// Write the little-endian `u32` `v` over the 4 bytes at `at` of `d`
/// (which must hold them).
#[cfg(test)]
pub(crate) fn set_le_u32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Write the little-endian `u64` `v` over the 8 bytes at `at` of `d`
/// (which must hold them).
pub(crate) fn set_le_u64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Fields appended in order, little-endian unless the method says `be`.
#[derive(Debug, Default)]
pub(crate) struct LeWriter {
    pub(crate) out: Vec<u8>,
}

impl LeWriter {
    pub(crate) fn with_capacity(n: usize) -> LeWriter {
        LeWriter { out: Vec::with_capacity(n) }
    }

    /// Where the next field goes.
    pub(crate) fn len(&self) -> usize {
        self.out.len()
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn be_u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// Zeros up to the next multiple of `to`.
    pub(crate) fn align(&mut self, to: usize) {
        while !self.out.len().is_multiple_of(to) {
            self.out.push(0);
        }
    }

    pub(crate) fn into_inner(self) -> Vec<u8> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_what_the_writer_wrote_and_stop_at_the_end() {
        let mut w = LeWriter::default();
        w.u8(1);
        w.align(2);
        w.u16(0x0302);
        w.u32(0x0706_0504);
        w.u64(0x0f0e_0d0c_0b0a_0908);
        w.be_u32(0x1011_1213);
        w.bytes(&[0x14]);
        w.align(4);
        assert_eq!(w.len(), 24);
        let d = w.into_inner();
        assert_eq!(
            (le_u16(&d, 2), le_u32(&d, 4), le_u64(&d, 8)),
            (Some(0x0302), Some(0x0706_0504), Some(0x0f0e_0d0c_0b0a_0908))
        );
        assert_eq!((be_u32(&d, 16), be_u16(&d, 16)), (Some(0x1011_1213), Some(0x1011)));
        assert_eq!((le_u32(&d, 21), le_u64(&d, 17), le_u16(&d, usize::MAX)), (None, None, None));
        assert_eq!(le_u32s(&d[..10]).collect::<Vec<_>>(), [0x0302_0001, 0x0706_0504]);
        assert_eq!(le_u64s(&d[..17]).count(), 2);
        let mut d = d;
        set_le_u64(&mut d, 8, 7);
        set_le_u32(&mut d, 4, 9);
        assert_eq!((le_u64(&d, 8), le_u32(&d, 4)), (Some(7), Some(9)));
    }
}
