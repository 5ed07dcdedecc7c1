//! Compression formats found in kernel images and module trees: XZ, zstd and
//! gzip, recognised by their magic bytes (not by file name).

use std::io::Read;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Xz,
    Zstd,
    Gzip,
}

pub const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];
pub const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
pub const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

impl Compression {
    pub fn detect(data: &[u8]) -> Compression {
        if data.starts_with(XZ_MAGIC) {
            Compression::Xz
        } else if data.starts_with(ZSTD_MAGIC) {
            Compression::Zstd
        } else if data.starts_with(GZIP_MAGIC) {
            Compression::Gzip
        } else {
            Compression::None
        }
    }

    /// The file name suffix the kernel's build uses for this compression.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Xz => ".xz",
            Compression::Zstd => ".zst",
            Compression::Gzip => ".gz",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }
}

/// Decompress the first stream (XZ stream, zstd frame, gzip member) at the
/// start of `data`. Anything after it is ignored, as the kernel's own
/// decompressors do (a bzImage appends the uncompressed size after the
/// stream). `size_hint` pre-sizes the output buffer.
pub fn decompress(data: &[u8], kind: Compression, size_hint: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(size_hint.min(1 << 30));
    let res = match kind {
        Compression::None => {
            out.extend_from_slice(data);
            Ok(0)
        }
        Compression::Xz => {
            return xz_first_stream(data, out);
        }
        Compression::Zstd => {
            let mut dec =
                zstd::stream::read::Decoder::with_buffer(data).map_err(|e| format!("zstd: {e}"))?.single_frame();
            dec.read_to_end(&mut out)
        }
        Compression::Gzip => flate2::bufread::GzDecoder::new(data).read_to_end(&mut out),
    };
    match res {
        Ok(_) if out.is_empty() && kind != Compression::None => {
            Err(format!("corrupt {} data: it decompresses to nothing", kind.name()))
        }
        Ok(_) => Ok(out),
        Err(e) => Err(format!("corrupt {} data: {}", kind.name(), e)),
    }
}

/// liblzma's stream API, stopped at the end of the first stream so that
/// trailing bytes are never fed to a finished decoder.
fn xz_first_stream(data: &[u8], mut out: Vec<u8>) -> Result<Vec<u8>, String> {
    use xz2::stream::{Action, Status, Stream};
    let mut stream = Stream::new_stream_decoder(u64::MAX, 0).map_err(|e| format!("xz: {e}"))?;
    loop {
        if out.capacity() - out.len() < 64 * 1024 {
            out.reserve(out.capacity().max(1 << 20));
        }
        let consumed = stream.total_in() as usize;
        let input = &data[consumed.min(data.len())..];
        let action = if input.is_empty() { Action::Finish } else { Action::Run };
        let before = (stream.total_in(), stream.total_out());
        match stream.process_vec(input, &mut out, action) {
            Ok(Status::StreamEnd) => return Ok(out),
            Ok(_) if input.is_empty() && before == (stream.total_in(), stream.total_out()) => {
                return Err("corrupt xz data: truncated stream".into());
            }
            Ok(_) => {}
            Err(e) => return Err(format!("corrupt xz data: {e}")),
        }
    }
}

/// Compress `data` the way the kernel's `make modules_install` does for
/// modules (XZ with CRC32 check, zstd, gzip -9).
pub fn compress(data: &[u8], kind: Compression) -> Result<Vec<u8>, String> {
    use std::io::Write;
    match kind {
        Compression::None => Ok(data.to_vec()),
        Compression::Xz => {
            let stream =
                xz2::stream::Stream::new_easy_encoder(6, xz2::stream::Check::Crc32).map_err(|e| format!("xz: {e}"))?;
            let mut enc = xz2::write::XzEncoder::new_stream(Vec::new(), stream);
            enc.write_all(data).map_err(|e| e.to_string())?;
            enc.finish().map_err(|e| e.to_string())
        }
        Compression::Zstd => zstd::stream::encode_all(data, 19).map_err(|e| e.to_string()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            enc.write_all(data).map_err(|e| e.to_string())?;
            enc.finish().map_err(|e| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_format_and_ignore_trailing_bytes() {
        let text: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        for kind in [Compression::Xz, Compression::Zstd, Compression::Gzip] {
            let mut packed = compress(&text, kind).unwrap();
            assert_eq!(Compression::detect(&packed), kind);
            packed.extend_from_slice(&[1, 2, 3, 4]); // like a bzImage's size trailer
            assert_eq!(decompress(&packed, kind, 0).unwrap(), text, "{kind:?}");
        }
    }

    #[test]
    fn corrupt_data_is_an_error_not_a_panic() {
        let text = vec![7u8; 100_000];
        for kind in [Compression::Xz, Compression::Zstd, Compression::Gzip] {
            let mut packed = compress(&text, kind).unwrap();
            let mid = packed.len() / 2;
            for b in &mut packed[mid..mid + 8] {
                *b ^= 0x5a;
            }
            let err = decompress(&packed, kind, 0).unwrap_err();
            assert!(err.starts_with("corrupt "), "{kind:?}: {err}");
            let short = &compress(&text, kind).unwrap()[..10];
            assert!(decompress(short, kind, 0).is_err(), "{kind:?} truncated");
        }
    }
}
