//! LZO1X block decoding, as lzop's blocks and the kernel's lzo payloads
//! hold it: bootlink's own decoder, written from the format's description
//! in the kernel's Documentation/staging/lzo.rst, in place of the
//! `lzokay-native` crate, which indexed out of bounds (a panic) on a
//! back-reference before the start of the output.
//!
//! Every read of the input and every copy into the output is checked
//! before it is made: a block that reads past its end, refers back before
//! its own start, or would grow past the size its header states is an
//! error, never a panic nor a write past the stated size. The output
//! grows by at most the stated size, which the caller bounds (lzop: 256 KiB
//! a block), so decoding costs time and memory linear in that size.
//!
//! The instructions, after an optional first byte above 17 (a literal
//! run of byte - 17), by the instruction byte `t` and the state (the
//! number of literals the last instruction copied, 4 after a run):
//! - `0000LLLL`, state 0: a literal run of 3 + L bytes (L = 0: 18 +
//!   255 per zero byte that follows + the next byte);
//! - `0000DDSS`, state 1-3: a 2-byte match, distance 1 + D + 4 * next byte;
//! - `0000DDSS`, state 4: a 3-byte match, distance 2049 + D + 4 * next byte;
//! - `01LDDDSS`, `1LLDDDSS`: a match of 1 + (t >> 5) bytes, distance 1 +
//!   D + 8 * next byte;
//! - `001LLLLL`: a match of 2 + L bytes (L = 0: 33 + 255 per zero byte +
//!   the next), distance 1 + (le16 >> 2);
//! - `0001HLLL`: a match of 2 + L bytes (L = 0: 9 + 255 per zero byte +
//!   the next), distance 16384 + 16384 * H + (le16 >> 2); distance 16384
//!   with L = 1 ends the block.
//!
//! After a match, its low two bits (SS, or the le16's) are the number of
//! literals (0-3) copied before the next instruction.

/// Why a block does not decode, in words for the one-line refusal.
pub(crate) type Fault = String;

struct Block<'a> {
    src: &'a [u8],
    at: usize,
    out: &'a mut Vec<u8>,
    /// Where this block's output starts in `out`: nothing before it may be
    /// referred to.
    start: usize,
    /// Where it must end: the size the container states.
    end: usize,
}

impl Block<'_> {
    fn byte(&mut self) -> Result<usize, Fault> {
        let b = *self
            .src
            .get(self.at)
            .ok_or_else(|| format!("an instruction runs past the block's {} bytes", self.src.len()))?;
        self.at += 1;
        Ok(usize::from(b))
    }

    fn le16(&mut self) -> Result<usize, Fault> {
        let lo = self.byte()?;
        Ok(lo | (self.byte()? << 8))
    }

    /// A length continued in zero bytes (255 each) up to a non-zero byte.
    fn long_length(&mut self, base: usize) -> Result<usize, Fault> {
        let mut zeros = 0usize;
        loop {
            match self.byte()? {
                0 => zeros += 1,
                b => return Ok(base + zeros * 255 + b),
            }
        }
    }

    fn room(&self, n: usize) -> Result<(), Fault> {
        if n > self.end - self.out.len() {
            return Err(format!("it decompresses to more than the {} bytes its header states", self.end - self.start));
        }
        Ok(())
    }

    fn literals(&mut self, n: usize) -> Result<(), Fault> {
        self.room(n)?;
        let lit = self
            .src
            .get(self.at..)
            .and_then(|s| s.get(..n))
            .ok_or_else(|| format!("{n} literal bytes run past the block's {} bytes", self.src.len()))?;
        self.out.extend_from_slice(lit);
        self.at += n;
        Ok(())
    }

    fn back_reference(&mut self, distance: usize, len: usize) -> Result<(), Fault> {
        let written = self.out.len() - self.start;
        if distance > written {
            return Err(format!(
                "a back-reference {distance} bytes back after {written} of the block's output bytes: before its start"
            ));
        }
        self.room(len)?;
        let from = self.out.len() - distance;
        if distance >= len {
            self.out.extend_from_within(from..from + len);
        } else {
            // The copy overlaps what it writes: a repeating pattern.
            for k in 0..len {
                let b = self.out[from + k];
                self.out.push(b);
            }
        }
        Ok(())
    }
}

/// Decode one LZO1X block `src` onto the end of `out`, which must grow by
/// exactly `size` bytes; back-references reach no further back than the
/// block's own output. On an error `out` may hold part of the block.
pub(crate) fn decompress_block(src: &[u8], out: &mut Vec<u8>, size: usize) -> Result<(), Fault> {
    let start = out.len();
    out.reserve(size);
    let mut b = Block { src, at: 0, out, start, end: start + size };
    // the number of literals the last instruction copied; 4 after a run
    let mut state = 0;
    if let Some(&first) = src.first()
        && first > 17
    {
        b.at = 1;
        let n = usize::from(first) - 17;
        b.literals(n)?;
        state = n.min(4);
    }
    loop {
        let t = b.byte()?;
        let (distance, len, next) = if t < 16 {
            match state {
                0 => {
                    let n = if t == 0 { b.long_length(15)? } else { t } + 3;
                    b.literals(n)?;
                    state = 4;
                    continue;
                }
                1..=3 => (1 + (t >> 2) + (b.byte()? << 2), 2, t & 3),
                _ => (2049 + (t >> 2) + (b.byte()? << 2), 3, t & 3),
            }
        } else if t >= 64 {
            (1 + ((t >> 2) & 7) + (b.byte()? << 3), (t >> 5) + 1, t & 3)
        } else if t >= 32 {
            let len = match t & 31 {
                0 => b.long_length(31)?,
                l => l,
            } + 2;
            let d = b.le16()?;
            (1 + (d >> 2), len, d & 3)
        } else {
            let len = match t & 7 {
                0 => b.long_length(7)?,
                l => l,
            } + 2;
            let d = b.le16()?;
            let far = ((t & 8) << 11) + (d >> 2);
            if far == 0 {
                // the end marker
                if len != 3 {
                    return Err(format!("an end marker of length {len}, not 3"));
                }
                if b.at != src.len() {
                    return Err(format!("the block ends at byte {} of its {}", b.at, src.len()));
                }
                if b.out.len() != b.end {
                    return Err(format!("it decompresses to {} bytes, not {size}", b.out.len() - start));
                }
                return Ok(());
            }
            (far + 16384, len, d & 3)
        };
        b.back_reference(distance, len)?;
        b.literals(next)?;
        state = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(src: &[u8], size: usize) -> Result<Vec<u8>, Fault> {
        let mut out = b"before".to_vec();
        decompress_block(src, &mut out, size)?;
        Ok(out[6..].to_vec())
    }

    /// Hand-made blocks of each instruction, read as the format says.
    #[test]
    fn each_instruction_decodes() {
        // a first-byte run of 4 literals, a 3-byte match 4 back (01LDDDSS:
        // t = 0b0100_1100: len 3, D 3, next byte 0), the end marker
        assert_eq!(decode(&[21, b'a', b'b', b'c', b'd', 0b0100_1100, 0, 0x11, 0, 0], 7).unwrap(), b"abcdabc");
        // 2 literals (first byte 19, state 2), a 2-byte match 2 back
        // (0000DDSS, state 2: D 1 -> distance 2), end
        assert_eq!(decode(&[19, b'x', b'y', 0b0000_0100, 0, 0x11, 0, 0], 4).unwrap(), b"xyxy");
        // a long literal run (0, two zero bytes, 1: 3 + 15 + 510 + 1),
        // then a 001LLLLL match of 6 bytes 1 back (an overlapping run)
        let mut src = vec![0, 0, 0, 1];
        src.extend(std::iter::repeat_n(b'q', 529));
        src.extend_from_slice(&[32 | 4, 0, 0, 0x11, 0, 0]);
        let out = decode(&src, 535).unwrap();
        assert_eq!(out.len(), 535);
        assert!(out.iter().all(|&b| b == b'q'));
    }

    /// The finding of issue 47: a match before the start of the output is
    /// an error naming it, as are a read past the block, a block longer
    /// than stated, and one that stops short; every truncation of a valid
    /// block fails without a panic.
    #[test]
    fn hostile_blocks_are_refused() {
        // one literal, then a 3-byte match 4 back
        let e = decode(&[18, b'a', 0b0100_1100, 0, 0x11, 0, 0], 4).unwrap_err();
        assert!(e.contains("before its start"), "{e}");
        // a 16 KiB-away match after 4 literals
        let e = decode(&[21, 1, 2, 3, 4, 0b0001_0001, 4, 0, 0x11, 0, 0], 7).unwrap_err();
        assert!(e.contains("before its start"), "{e}");
        let e = decode(&[25, b'a'], 8).unwrap_err();
        assert!(e.contains("past the block"), "{e}");
        let e = decode(&[21, b'a', b'b', b'c', b'd', 0x11, 0, 0], 3).unwrap_err();
        assert!(e.contains("more than the 3 bytes"), "{e}");
        let e = decode(&[21, b'a', b'b', b'c', b'd', 0x11, 0, 0], 5).unwrap_err();
        assert!(e.contains("not 5"), "{e}");
        let good = [21, b'a', b'b', b'c', b'd', 0b0100_1100, 0, 0x11, 0, 0];
        for n in 0..good.len() {
            assert!(decode(&good[..n], 7).is_err(), "{n}");
        }
    }
}
