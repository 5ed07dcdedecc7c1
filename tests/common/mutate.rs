//! The byte mutations the fuzz loops share (tests/offline/hostile_decompress.rs
//! on compressed streams, tests/debian/fuzz_reader.rs on modules and text
//! inputs): each loop picks one of [`SHARED`] arms here or one of its own.

use bootlink::rng::Rng;

/// How many arms [`shared`] has.
pub const SHARED: usize = 4;

/// Mutate `d` (not empty) by arm `arm` (below [`SHARED`]): one bit
/// flipped; a run of up to 15 random bytes; cut at a random length; up to
/// 63 random bytes appended.
pub fn shared(rng: &mut Rng, d: &mut Vec<u8>, arm: usize) {
    match arm {
        0 => {
            let i = rng.below(d.len());
            d[i] ^= 1 << rng.below(8);
        }
        1 => {
            let i = rng.below(d.len());
            let n = rng.below(16).min(d.len() - i);
            d[i..i + n].iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        }
        2 => d.truncate(rng.below(d.len())),
        _ => d.extend((0..rng.below(64)).map(|_| rng.next_u64() as u8)),
    }
}
