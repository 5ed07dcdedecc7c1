//! The hash functions the tables use, identical in the kernel patch.

/// Dan Bernstein's string hash (h = h * 33 + c from 5381), the "simple
/// hash" and glibc's DT_GNU_HASH function.
pub fn djb(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

/// MurmurHash3's 32-bit finalizer: spreads a hash for the perfect table.
pub(crate) fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 13;
    x = x.wrapping_mul(0xc2b2_ae35);
    x ^ (x >> 16)
}

/// The tables' checksum: each 32-bit word xored into a rotating sum.
pub fn checksum(data: &[u8]) -> u32 {
    crate::bytes::le_u32s(data).fold(0u32, |c, w| c.rotate_left(5) ^ w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn djb_matches_known_values() {
        // glibc's dl_new_hash test vectors (elf/tst-dl-hash.c)
        assert_eq!(djb(b""), 0x0000_1505);
        assert_eq!(djb(b"printf"), 0x156b_2bb8);
        assert_eq!(djb(b"exit"), 0x7c96_7e3f);
        assert_eq!(djb(b"syscall"), 0xbac2_12a0);
    }
}
