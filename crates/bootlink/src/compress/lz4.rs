//! LZ4's legacy frame, as the kernel's build writes a bzImage's payload
//! (`lz4 -l -9`, then the uncompressed size as le32): a magic, then blocks,
//! each a le32 compressed length and an LZ4 block decompressing on its own
//! (no references into earlier blocks) to at most 8 MiB. Written from the
//! LZ4 block format description: a token (literal length, match length - 4),
//! longer lengths continued in bytes of 255, the literals, a le16 offset
//! back into the block's output, the match copied byte by byte (it may
//! overlap what it writes).

use super::Meter;
use crate::error::{Error, Kind};

pub(crate) const MAGIC: u32 = 0x184c_2102;
/// What one legacy block decompresses to at most.
const BLOCK_MAX: usize = 8 << 20;
/// The most bytes a compressed block of [`BLOCK_MAX`] takes
/// (LZ4_COMPRESSBOUND, lz4.h).
pub(crate) const BLOCK_BOUND: usize = BLOCK_MAX + BLOCK_MAX / 255 + 16;

fn corrupt(why: impl std::fmt::Display) -> Error {
    Error::new(Kind::Format, format!("corrupt lz4 data: {why}"))
}

/// Decompress a legacy-frame stream within `meter` (checked after each
/// block); what follows the last block (the kernel build's 4-byte size) is
/// left alone. The frame has no end mark: in a search for an embedded
/// vmlinux ([`Meter::elf_only`]), where other data may follow the stream,
/// it ends before the first word that does not begin a whole block that
/// decodes (a length of 0 or past the format's bound, a block past the
/// end, a block that is no LZ4 block), once one block has been decoded;
/// the searcher then takes the output only when it is a whole ELF file.
/// Elsewhere (a bzImage's payload, which ends with its size trailer) such a
/// word is corrupt data.
pub(crate) fn decompress_legacy(data: &[u8], meter: &mut Meter) -> Result<Vec<u8>, Error> {
    let word = |at: usize| crate::bytes::le_u32(data, at);
    if word(0) != Some(MAGIC) {
        return Err(corrupt("no legacy frame magic"));
    }
    let mut out = Vec::new();
    let mut at = 4;
    while let Some(len) = word(at) {
        if len == MAGIC {
            // another stream concatenated
            at += 4;
            continue;
        }
        let len = len as usize;
        let ends_here = meter.elf_only && !out.is_empty();
        let block =
            data.get(at + 4..).and_then(|d| d.get(..len)).filter(|_| !ends_here || (1..=BLOCK_BOUND).contains(&len));
        let Some(block) = block else {
            // a word that no block follows: the build's size trailer, or
            // in a search what follows the stream
            if data.len() - at == 4 || ends_here {
                break;
            }
            return Err(corrupt(format!("a block of {len} bytes at {at} runs past the end ({} bytes)", data.len())));
        };
        let before = out.len();
        let r = block_into(block, &mut out, meter.limit);
        meter.account(at + 4 + len, &out, "lz4")?;
        if r.is_err() && ends_here && !r.as_ref().is_err_and(super::PastLimit::of) {
            out.truncate(before);
            break;
        }
        r?;
        at += 4 + len;
    }
    if out.is_empty() {
        return Err(corrupt("no blocks"));
    }
    Ok(out)
}

/// One LZ4 block appended to `out`, which may not grow past `limit` (nor the
/// block past [`BLOCK_MAX`]).
fn block_into(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Error> {
    let start = out.len();
    let cap = limit.min(start + BLOCK_MAX);
    let mut i = 0;
    let too_large = || {
        if cap == limit {
            super::too_large_named("lz4", limit)
        } else {
            corrupt(format!("a block decompresses to more than {} MiB", BLOCK_MAX >> 20))
        }
    };
    let length = |i: &mut usize, mut n: usize| -> Result<usize, Error> {
        if n == 15 {
            loop {
                let b = *block.get(*i).ok_or_else(|| corrupt("a length runs past the block"))?;
                *i += 1;
                n += b as usize;
                if b != 255 {
                    break;
                }
            }
        }
        Ok(n)
    };
    loop {
        let token = *block.get(i).ok_or_else(|| corrupt("a block ends without its last literals"))?;
        i += 1;
        let lit = length(&mut i, (token >> 4) as usize)?;
        let literals = block.get(i..i + lit).ok_or_else(|| corrupt("literals run past the block"))?;
        if out.len() + lit > cap {
            return Err(too_large());
        }
        out.extend_from_slice(literals);
        i += lit;
        if i == block.len() {
            return Ok(());
        }
        let off = crate::bytes::le_u16(block, i).ok_or_else(|| corrupt("a match offset runs past the block"))? as usize;
        i += 2;
        if off == 0 || off > out.len() - start {
            return Err(corrupt(format!("a match {off} bytes back, before the block's start")));
        }
        let len = length(&mut i, (token & 15) as usize)? + 4;
        if out.len() + len > cap {
            return Err(too_large());
        }
        let from = out.len() - off;
        for k in 0..len {
            let b = out[from + k];
            out.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lz4_tool(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut child = std::process::Command::new("lz4")
            .args(["-l", "-9", "-c"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("lz4 (apt-get install lz4)");
        let mut stdin = child.stdin.take().unwrap();
        let input = data.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
        let out = child.wait_with_output().unwrap().stdout;
        writer.join().unwrap();
        out
    }

    #[test]
    fn the_lz4_tools_legacy_frames_read_back() {
        // text-like data over two 8 MiB blocks, and a short one
        let big: Vec<u8> = (0..9_000_000u32).map(|i| (i % 97) as u8 ^ ((i / 4096) as u8)).collect();
        for data in [&big[..], b"hello hello hello hello, lz4"] {
            let mut packed = lz4_tool(data);
            assert_eq!(decompress_legacy(&packed, &mut Meter::new(1 << 30)).unwrap(), data);
            // with the kernel build's size trailer after it
            packed.extend_from_slice(&(data.len() as u32).to_le_bytes());
            assert_eq!(decompress_legacy(&packed, &mut Meter::new(1 << 30)).unwrap(), data);
        }
    }

    #[test]
    fn damaged_and_huge_frames_are_refused() {
        let data: Vec<u8> = b"abcabcabcabcabcabcabcabcabcabcabcabcabc".repeat(1000);
        let packed = lz4_tool(&data);
        assert!(decompress_legacy(&packed[..packed.len() - 7], &mut Meter::new(1 << 30)).is_err());
        assert!(decompress_legacy(&packed[1..], &mut Meter::new(1 << 30)).unwrap_err().to_string().contains("magic"));
        assert!(decompress_legacy(&packed, &mut Meter::new(1000)).unwrap_err().to_string().contains("refused"));
        // a match reaching before the block's start
        let mut bad = MAGIC.to_le_bytes().to_vec();
        bad.extend_from_slice(&4u32.to_le_bytes());
        bad.extend_from_slice(&[0x10, b'a', 9, 0]);
        assert!(
            decompress_legacy(&bad, &mut Meter::new(1 << 30))
                .unwrap_err()
                .to_string()
                .contains("before the block's start")
        );
        // every truncation fails or stops cleanly, never panics
        for n in 0..packed.len() {
            let _ = decompress_legacy(&packed[..n], &mut Meter::new(1 << 30));
        }
    }
}
