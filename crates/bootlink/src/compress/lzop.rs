//! lzop's file format, as the kernel's build writes a bzImage's payload
//! (`lzop -9`, then the uncompressed size as le32): a 9-byte magic, a
//! header (big-endian; its layout depends on the writer's version: from
//! 0x0940 on it names the version needed, the level and a high mtime word),
//! then blocks, each the big-endian uncompressed and compressed lengths,
//! the checksums the header's flags ask for, and the data: stored when the
//! lengths are equal, else LZO1X (decoded by [`super::lzo1x`], bootlink's own decoder).
//! A zero uncompressed length ends the stream. Like the kernel's
//! decompressor, blocks may decompress to at most 256 KiB, which bounds
//! every block's output before it is decoded.

use super::Meter;
use crate::error::{Error, Kind};

pub(crate) const MAGIC: &[u8] = &[0x89, b'L', b'Z', b'O', 0x00, 0x0d, 0x0a, 0x1a, 0x0a];
/// The largest block the kernel's lzo decompressor takes (lzop's default).
const BLOCK_MAX: usize = 256 << 10;

const ADLER32_D: u32 = 0x0001;
const ADLER32_C: u32 = 0x0002;
const EXTRA_FIELD: u32 = 0x0040;
const CRC32_D: u32 = 0x0100;
const CRC32_C: u32 = 0x0200;
const FILTER: u32 = 0x0800;

fn corrupt(why: impl std::fmt::Display) -> Error {
    Error::new(Kind::Format, format!("corrupt lzo data: {why}"))
}

/// A cursor over the stream that reports truncation as corruption.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let b =
            self.data.get(self.at..).and_then(|d| d.get(..n)).ok_or_else(|| corrupt(format!("truncated {what}")))?;
        self.at += n;
        Ok(b)
    }

    fn u8(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.bytes(1, what)?[0])
    }

    fn be16(&mut self, what: &str) -> Result<u16, Error> {
        Ok(crate::bytes::be_u16(self.bytes(2, what)?, 0).expect("2 bytes"))
    }

    fn be32(&mut self, what: &str) -> Result<u32, Error> {
        Ok(crate::bytes::be_u32(self.bytes(4, what)?, 0).expect("4 bytes"))
    }
}

/// Adler-32 as lzop checks a block (RFC 1950's checksum).
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes keep the sums below 2^32 between reductions
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// Decompress an lzop stream within `meter` (checked after each block);
/// what follows its end marker (the kernel build's 4-byte size) is left
/// alone.
pub(crate) fn decompress(data: &[u8], meter: &mut Meter) -> Result<Vec<u8>, Error> {
    if !data.starts_with(MAGIC) {
        return Err(corrupt("no lzop magic"));
    }
    let mut r = Reader { data, at: MAGIC.len() };
    let version = r.be16("header")?;
    r.bytes(2, "header")?; // the library's version
    if version >= 0x0940 {
        r.bytes(2, "header")?; // the version needed to extract
    }
    let method = r.u8("header")?;
    if !(1..=3).contains(&method) {
        return Err(corrupt(format!("method {method}, not one of LZO1X's (1-3)")));
    }
    if version >= 0x0940 {
        r.u8("header")?; // the level
    }
    let flags = r.be32("header")?;
    if flags & EXTRA_FIELD != 0 {
        return Err(corrupt("an extra header field (the kernel's decompressor takes none)"));
    }
    if flags & FILTER != 0 {
        r.bytes(4, "header")?;
    }
    r.bytes(if version >= 0x0940 { 12 } else { 8 }, "header")?; // mode, mtime
    let name = r.u8("header")?;
    r.bytes(usize::from(name) + 4, "header")?; // the name, the header's checksum
    let mut out = Vec::new();
    loop {
        let u_len = r.be32("block header")? as usize;
        if u_len == 0 {
            break;
        }
        if u_len > BLOCK_MAX {
            return Err(corrupt(format!("a block of {u_len} bytes (at most {BLOCK_MAX})")));
        }
        let c_len = r.be32("block header")? as usize;
        if c_len == 0 || c_len > u_len {
            return Err(corrupt(format!("a block of {c_len} bytes that decompresses to {u_len}")));
        }
        let d_adler = if flags & ADLER32_D != 0 { Some(r.be32("block header")?) } else { None };
        if flags & CRC32_D != 0 {
            r.be32("block header")?;
        }
        if c_len < u_len {
            for f in [ADLER32_C, CRC32_C] {
                if flags & f != 0 {
                    r.be32("block header")?;
                }
            }
        }
        if out.len() + u_len > meter.limit {
            return Err(super::too_large_named("lzo", meter.limit));
        }
        let block = r.bytes(c_len, "block")?;
        let start = out.len();
        if c_len == u_len {
            out.extend_from_slice(block);
        } else {
            let decoded = super::lzo1x::decompress_block(block, &mut out, u_len);
            meter.account(r.at, &out, "lzo")?;
            decoded.map_err(|e| corrupt(format!("block at byte {}: {e}", r.at - c_len)))?;
        }
        meter.account(r.at, &out, "lzo")?;
        if let Some(sum) = d_adler
            && adler32(&out[start..]) != sum
        {
            return Err(corrupt(format!("block at byte {}: checksum mismatch", r.at - c_len)));
        }
    }
    if out.is_empty() {
        return Err(corrupt("it decompresses to nothing"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lzop(data: &[u8], level: &str) -> Vec<u8> {
        let mut child = std::process::Command::new("lzop")
            .arg(level)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("lzop (Debian package lzop)");
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(data).unwrap();
        }
        child.wait_with_output().unwrap().stdout
    }

    /// An lzop file (format version 0x1030, no checksums) of these blocks:
    /// (the size each states it decompresses to, its LZO1X data).
    fn lzop_file(blocks: &[(u32, &[u8])]) -> Vec<u8> {
        let mut f = MAGIC.to_vec();
        f.extend_from_slice(&0x1030u16.to_be_bytes()); // the writer's version
        f.extend_from_slice(&0x2080u16.to_be_bytes()); // the library's
        f.extend_from_slice(&0x0940u16.to_be_bytes()); // needed to extract
        f.extend_from_slice(&[1, 9]); // LZO1X-1, level 9
        f.extend_from_slice(&0u32.to_be_bytes()); // flags: no checksums
        f.extend_from_slice(&[0; 12]); // mode, mtime
        f.push(0); // no name
        f.extend_from_slice(&[0; 4]); // the header's checksum
        for (u_len, data) in blocks {
            f.extend_from_slice(&u_len.to_be_bytes());
            f.extend_from_slice(&(data.len() as u32).to_be_bytes());
            f.extend_from_slice(data);
        }
        f.extend_from_slice(&0u32.to_be_bytes());
        f
    }

    /// Issue 47's finding: a block whose match reaches before the start
    /// of the output (one literal, then 3 bytes from 4 back) panicked
    /// inside the LZO crate; it is a one-line error naming the block.
    #[test]
    fn a_back_reference_before_the_output_is_refused_not_a_panic() {
        let hostile: &[u8] = &[18, b'a', 0b0100_1100, 0, 0x11, 0, 0];
        let file = lzop_file(&[(64, hostile)]);
        let r = std::panic::catch_unwind(|| decompress(&file, &mut Meter::new(64 << 20)));
        let e = r.expect("no panic").unwrap_err().to_string();
        assert!(e.starts_with("corrupt lzo data: block at byte ") && e.contains("before its start"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        // four literals and a 32-byte match 4 back read
        let fine: &[u8] = &[21, b'a', b'b', b'c', b'd', 32 | 30, 3 << 2, 0, 0x11, 0, 0];
        assert_eq!(decompress(&lzop_file(&[(36, fine)]), &mut Meter::new(64 << 20)).unwrap(), b"abcd".repeat(9));
    }

    #[test]
    fn what_lzop_writes_is_read_back_and_damage_is_refused() {
        // several blocks, compressible and not
        let mut text: Vec<u8> = (0..300_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut x = 1u32;
        text.extend((0..70_000).map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 24) as u8
        }));
        // LZO1X-1 (lzop's default level) and LZO1X-999 (-9, as the kernel's
        // build writes) use the instructions differently
        assert_eq!(decompress(&lzop(&text, "-1"), &mut Meter::new(64 << 20)).unwrap(), text);
        let mut packed = lzop(&text, "-9");
        assert_eq!(decompress(&packed, &mut Meter::new(64 << 20)).unwrap(), text);
        // the kernel build's size trailer after the end marker is ignored
        packed.extend_from_slice(&(text.len() as u32).to_le_bytes());
        assert_eq!(decompress(&packed, &mut Meter::new(64 << 20)).unwrap(), text);
        assert!(
            decompress(&packed, &mut Meter::new(256 << 10)).unwrap_err().to_string().contains("decompression bomb")
        );
        for cut in [5, 20, 60, packed.len() / 2] {
            let e = decompress(&packed[..cut], &mut Meter::new(64 << 20)).unwrap_err().to_string();
            assert!(e.contains("corrupt lzo data"), "{cut}: {e}");
        }
        // a flipped byte in the first block's data: its checksum or its decoding fails
        let mut bad = packed.clone();
        bad[120] ^= 0x55;
        assert!(decompress(&bad, &mut Meter::new(64 << 20)).unwrap_err().to_string().contains("corrupt lzo data"));
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }
}
