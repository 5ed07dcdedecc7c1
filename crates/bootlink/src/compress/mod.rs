//! Compression formats found in kernel images and module trees: XZ, zstd and
//! gzip (modules and kernels), and lzma, bzip2, lz4 and lzo (kernel
//! payloads), recognised by their magic bytes (not by file name). Every
//! stream is decoded by [`decode`], bounded by a [`Meter`]
//! (docs/hostile-input.md).

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Kind};

pub(crate) mod lz4;
mod lzo1x;
pub(crate) mod lzop;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Xz,
    Zstd,
    Gzip,
}

pub(crate) const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];
pub(crate) const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
pub(crate) const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];
/// lzma's "alone" header as `lzma -9` (and the kernel's build) writes it:
/// properties lc=3 lp=0 pb=2, then a dictionary size whose low bytes are 0.
pub(crate) const LZMA_ALONE_MAGIC: &[u8] = &[0x5d, 0x00, 0x00];
/// "BZh": a bzip2 stream (a block size digit follows).
pub(crate) const BZIP2_MAGIC: &[u8] = b"BZh";

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

    /// A module file's compression by its name (`x.ko.xz`: Xz), as
    /// kbuild and kmod name them; None for a plain `.ko` or anything else.
    pub fn of_module_name(path: &std::path::Path) -> Compression {
        let name = path.to_string_lossy();
        [Compression::Xz, Compression::Zstd, Compression::Gzip]
            .into_iter()
            .find(|c| name.strip_suffix(c.suffix()).is_some_and(|base| base.ends_with(".ko")))
            .unwrap_or(Compression::None)
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

/// The compressor of a kernel payload (a bzImage's compressed vmlinux),
/// named by its magic bytes as the kernel's build flavours name it: the
/// three bootlink decompresses ([`Compression`]), gzip of stored blocks
/// (`stored`: the x86 kernel's nearest to uncompressed) and the four others
/// the x86 boot decompressor knows (lz4's legacy frame, lzop, bzip2, lzma's
/// "alone" header with the kernel's -9 properties); None for anything else.
pub fn kernel_payload_name(payload: &[u8]) -> Option<&'static str> {
    let lz4_legacy = lz4::MAGIC.to_le_bytes();
    match Compression::detect(payload) {
        Compression::None => {}
        // gzip without optional fields whose first deflate block is stored
        // (BTYPE 00): the `none` flavour's framing, nothing compressed
        Compression::Gzip if payload.get(3) == Some(&0) && payload.get(10).is_some_and(|b| b & 0b110 == 0) => {
            return Some("stored");
        }
        known => return Some(known.name()),
    }
    if payload.starts_with(&lz4_legacy) {
        Some("lz4")
    } else if payload.starts_with(lzop::MAGIC) {
        Some("lzo")
    } else if payload.starts_with(BZIP2_MAGIC) && payload.get(3).is_some_and(|b| (b'1'..=b'9').contains(b)) {
        Some("bzip2")
    } else if payload.starts_with(LZMA_ALONE_MAGIC) {
        Some("lzma")
    } else {
        None
    }
}

/// How many times its compressed size a stream may grow to: more than any
/// module or kernel payload does (they shrink 3-10 times).
pub(crate) const MAX_RATIO: usize = 64;
/// The least output a stream may always grow to, whatever its size.
pub(crate) const MIN_OUTPUT: usize = 64 << 20;
/// The most output any one stream may decompress to.
pub const MAX_OUTPUT: usize = 1 << 30;

/// The most bytes `input_len` compressed bytes may decompress to: 64 times
/// the input, at least 64 MiB, never more than 1 GiB. A stream that would
/// grow past it (a decompression bomb) is refused, not decompressed.
pub fn output_limit(input_len: usize) -> usize {
    input_len.saturating_mul(MAX_RATIO).clamp(MIN_OUTPUT, MAX_OUTPUT)
}

/// The most work (input bytes read plus output bytes written, over every
/// candidate stream together) a search for an embedded stream in `len`
/// bytes may do: [`output_limit`] of them plus 4 times their size.
pub(crate) fn search_budget(len: usize) -> usize {
    output_limit(len).saturating_add(len.saturating_mul(4))
}

pub(crate) fn too_large_named(name: &str, limit: usize) -> Error {
    Error::new(
        Kind::Format,
        format!(
            "{name} data decompresses to more than {} MiB (the most bootlink unpacks of this input, {MAX_RATIO} times its size): refused as a decompression bomb",
            limit >> 20
        ),
    )
    .because(PastLimit { limit })
}

/// The cause of a decoding stopped at its [`Meter`]'s limit (whatever
/// set it: the 64-times bound, a bzImage's size trailer), so a caller
/// that set a tighter limit can say which it was.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PastLimit {
    pub(crate) limit: usize,
}

impl std::fmt::Display for PastLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "more than {} bytes of output", self.limit)
    }
}

impl std::error::Error for PastLimit {}

impl PastLimit {
    /// Whether `e` is a decoding stopped at its limit.
    pub(crate) fn of(e: &Error) -> bool {
        e.source.as_ref().is_some_and(|c| c.downcast_ref::<PastLimit>().is_some())
    }
}

/// Every format bootlink decodes: the module formats ([`Compression`])
/// and the other kernel payloads', by their [`kernel_payload_name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Xz,
    Zstd,
    Gzip,
    Lzma,
    Bzip2,
    Lz4,
    Lzo,
}

impl Codec {
    pub(crate) const ALL: [Codec; 7] =
        [Codec::Xz, Codec::Zstd, Codec::Gzip, Codec::Lzma, Codec::Bzip2, Codec::Lz4, Codec::Lzo];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Codec::Xz => "xz",
            Codec::Zstd => "zstd",
            Codec::Gzip => "gzip",
            Codec::Lzma => "lzma",
            Codec::Bzip2 => "bzip2",
            Codec::Lz4 => "lz4",
            Codec::Lzo => "lzo",
        }
    }

    fn of(kind: Compression) -> Option<Codec> {
        match kind {
            Compression::None => None,
            Compression::Xz => Some(Codec::Xz),
            Compression::Zstd => Some(Codec::Zstd),
            Compression::Gzip => Some(Codec::Gzip),
        }
    }

    /// The decoder of a payload [`kernel_payload_name`] names (`stored`
    /// is gzip).
    pub(crate) fn of_payload(name: &str) -> Option<Codec> {
        match name {
            "stored" => Some(Codec::Gzip),
            _ => Codec::ALL.into_iter().find(|c| c.name() == name),
        }
    }
}

/// What one decoding may spend and what it spent: the most output it may
/// write, whether it is to stop as soon as its output begins with anything
/// but an ELF header (a search for an embedded vmlinux), and the input it
/// read and the output it wrote, also when it failed. Every decoder checks
/// it at least once per 256 KiB of output (an lz4 block: 8 MiB).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meter {
    pub(crate) limit: usize,
    pub(crate) elf_only: bool,
    pub(crate) read: usize,
    pub(crate) written: usize,
}

impl Meter {
    pub(crate) fn new(limit: usize) -> Meter {
        Meter { limit, elf_only: false, read: 0, written: 0 }
    }

    /// A decoding of `name` data that has read `read` bytes and written
    /// `out`: an error past the limit, or at output that is no ELF file
    /// when only one is wanted.
    fn account(&mut self, read: usize, out: &[u8], name: &str) -> Result<(), Error> {
        self.read = read;
        self.written = out.len();
        if out.len() > self.limit {
            return Err(too_large_named(name, self.limit));
        }
        if self.elf_only && !out.starts_with(&object::elf::ELFMAG[..out.len().min(4)]) {
            return Err(Error::new(Kind::Format, format!("{name} data that does not begin with an ELF header")));
        }
        Ok(())
    }
}

/// Decompress the first stream (XZ stream, zstd frame, gzip member) at the
/// start of `data`, at most [`output_limit`] bytes of it. Anything after it
/// is ignored, as the kernel's own decompressors do (a bzImage appends the
/// uncompressed size after the stream). `size_hint` pre-sizes the output
/// buffer (within the limit).
pub fn decompress(data: &[u8], kind: Compression, size_hint: usize) -> Result<Vec<u8>, Error> {
    match Codec::of(kind) {
        None => Ok(data.to_vec()),
        Some(codec) => decode(codec, data, size_hint, &mut Meter::new(output_limit(data.len()))),
    }
}

/// A kernel payload bootlink reads beyond the module formats of
/// [`Compression`], named as [`kernel_payload_name`] names it: lz4's legacy
/// frame, lzma's "alone" format, bzip2 and lzop's format, at most
/// [`output_limit`] bytes.
pub fn decompress_kernel_payload(data: &[u8], name: &str) -> Result<Vec<u8>, Error> {
    match Codec::of_payload(name) {
        Some(codec) => decode(codec, data, 0, &mut Meter::new(output_limit(data.len()))),
        None => Err(Error::new(
            Kind::Unsupported,
            format!(
                "a {name} payload: bootlink reads xz, zstd, gzip, lz4, lzma, bzip2 and lzo kernels (give the vmlinux)"
            ),
        )),
    }
}

/// The first `codec` stream at the start of `data`, within `meter`: every
/// format's one decoding step. None of the decoders panics on hostile
/// input: gzip's (miniz_oxide), bzip2's (libbz2-rs-sys) and the lz4 and
/// LZO ones (bootlink's own) are bounds-checked Rust, xz/lzma's (liblzma)
/// and zstd's (libzstd) the reference C libraries, which check their
/// input; the fuzz tests (tests/offline/fuzz_decompress.rs) hold them to it.
pub(crate) fn decode(codec: Codec, data: &[u8], size_hint: usize, meter: &mut Meter) -> Result<Vec<u8>, Error> {
    let out = Vec::with_capacity(size_hint.min(meter.limit).min(1 << 30));
    let taken = std::cell::Cell::new(0);
    let input = Counted { rest: data, taken: &taken };
    match codec {
        Codec::Xz => {
            let stream = liblzma::stream::Stream::new_stream_decoder(u64::MAX, 0)
                .map_err(|e| Error::new(Kind::Internal, format!("xz: {e}")).because(e))?;
            lzma_first_stream(data, out, stream, "xz", meter)
        }
        Codec::Lzma => {
            let stream = liblzma::stream::Stream::new_lzma_decoder(u64::MAX)
                .map_err(|e| Error::new(Kind::Internal, format!("lzma: {e}")).because(e))?;
            lzma_first_stream(data, out, stream, "lzma", meter)
        }
        Codec::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(input)
                .map_err(|e| Error::new(Kind::Format, format!("zstd: {e}")).because(e))?
                .single_frame();
            pump(dec, &taken, out, "zstd", meter)
        }
        Codec::Gzip => pump(flate2::bufread::GzDecoder::new(input), &taken, out, "gzip", meter),
        // one stream: the build's size trailer follows it
        Codec::Bzip2 => pump(bzip2::bufread::BzDecoder::new(input), &taken, out, "bzip2", meter),
        Codec::Lz4 => lz4::decompress_legacy(data, meter),
        Codec::Lzo => lzop::decompress(data, meter),
    }
}

/// The input of a streaming decoder, counting what it takes.
struct Counted<'a> {
    rest: &'a [u8],
    taken: &'a std::cell::Cell<usize>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.rest.len().min(buf.len());
        buf[..n].copy_from_slice(&self.rest[..n]);
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl std::io::BufRead for Counted<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(self.rest)
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.rest.len());
        self.rest = &self.rest[n..];
        self.taken.set(self.taken.get() + n);
    }
}

/// The output a search's candidate stream is first decoded to, to judge
/// by its first bytes whether it holds an ELF file ([`Meter::elf_only`]).
const ELF_PROBE: usize = 64;

/// All a streaming decoder gives, into `out`, within `meter`: more than
/// its limit is a bomb, nothing or a decoder error is corrupt `name` data.
fn pump(
    mut dec: impl Read,
    taken: &std::cell::Cell<usize>,
    mut out: Vec<u8>,
    name: &str,
    meter: &mut Meter,
) -> Result<Vec<u8>, Error> {
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        // a search's candidate is judged by its first bytes, not 256 KiB
        let step = if meter.elf_only && out.len() < ELF_PROBE { ELF_PROBE - out.len() } else { chunk.len() };
        match dec.read(&mut chunk[..step]) {
            Ok(0) => break,
            Ok(n) => {
                // past the limit by at most one chunk before it is refused
                out.extend_from_slice(&chunk[..n.min(chunk.len())]);
                meter.account(taken.get(), &out, name)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                meter.account(taken.get(), &out, name)?;
                return Err(Error::new(Kind::Format, format!("corrupt {name} data: {e}")).because(e));
            }
        }
    }
    meter.account(taken.get(), &out, name)?;
    if out.is_empty() {
        return Err(Error::new(Kind::Format, format!("corrupt {name} data: it decompresses to nothing")));
    }
    Ok(out)
}

/// liblzma's stream API, stopped at the end of the first stream so that
/// trailing bytes are never fed to a finished decoder; 256 KiB of output a
/// step, each step accounted in `meter`.
fn lzma_first_stream(
    data: &[u8],
    mut out: Vec<u8>,
    mut stream: liblzma::stream::Stream,
    name: &str,
    meter: &mut Meter,
) -> Result<Vec<u8>, Error> {
    use liblzma::stream::{Action, Status};
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        let input = data.get(stream.total_in() as usize..).unwrap_or_default();
        let action = if input.is_empty() { Action::Finish } else { Action::Run };
        let before = (stream.total_in(), stream.total_out());
        let step = if meter.elf_only && out.len() < ELF_PROBE { ELF_PROBE - out.len() } else { chunk.len() };
        let status = stream.process(input, &mut chunk[..step], action);
        let wrote = (stream.total_out() - before.1) as usize;
        out.extend_from_slice(&chunk[..wrote.min(chunk.len())]);
        meter.account(stream.total_in() as usize, &out, name)?;
        match status {
            Ok(Status::StreamEnd) if out.is_empty() => {
                return Err(Error::new(Kind::Format, format!("corrupt {name} data: it decompresses to nothing")));
            }
            Ok(Status::StreamEnd) => return Ok(out),
            Ok(_) if input.is_empty() && before == (stream.total_in(), stream.total_out()) => {
                return Err(Error::new(Kind::Format, format!("corrupt {name} data: truncated stream")));
            }
            Ok(_) => {}
            Err(e) => return Err(Error::new(Kind::Format, format!("corrupt {name} data: {e}")).because(e)),
        }
    }
}

/// How a file was compressed, as far as its headers tell: what a rewrite
/// keeps, so that the kernel needs no more memory to decompress it than
/// before (the dictionary or window) and checks it the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Params {
    None,
    /// The stream's check (0 none, 1 CRC32, 4 CRC64, 10 SHA-256) and the
    /// LZMA2 dictionary size of its first block.
    Xz {
        check: u8,
        dict: u32,
    },
    /// The frame's content checksum flag and window log (None: single
    /// segment, the window is the content).
    Zstd {
        checksum: bool,
        window_log: Option<u32>,
    },
    /// The deflate level the header's XFL hints at (9 best, 1 fastest, else 6).
    Gzip {
        level: u32,
    },
}

impl Params {
    /// What the kernel's own build writes: `xz --check=crc32
    /// --lzma2=dict=1MiB`, `zstd` with a checksum, `gzip -9`.
    pub(crate) fn kernel_default(kind: Compression) -> Params {
        match kind {
            Compression::None => Params::None,
            Compression::Xz => Params::Xz { check: 1, dict: 1 << 20 },
            Compression::Zstd => Params::Zstd { checksum: true, window_log: None },
            Compression::Gzip => Params::Gzip { level: 9 },
        }
    }

    /// Read the parameters from the start of a compressed file (its first
    /// few dozen bytes); what the headers do not say is the kernel's default.
    pub fn detect(head: &[u8], kind: Compression) -> Params {
        let default = Params::kernel_default(kind);
        match kind {
            Compression::Xz => {
                // Stream header: magic (6), flags (2: 0, check), CRC32 (4); then
                // the first block header: size, flags, [sizes], filter flags.
                let Some(&check) = head.get(7) else { return default };
                let dict = xz_first_block_dict(head.get(12..).unwrap_or_default()).unwrap_or(1 << 20);
                Params::Xz { check: check & 0x0f, dict }
            }
            Compression::Zstd => {
                let Some(&fhd) = head.get(4) else { return default };
                let single_segment = fhd & 0x20 != 0;
                let window_log = match (single_segment, head.get(5)) {
                    (false, Some(&wd)) => Some(10 + (wd >> 3) as u32 + ((wd & 7) != 0) as u32),
                    _ => None,
                };
                Params::Zstd { checksum: fhd & 0x04 != 0, window_log }
            }
            Compression::Gzip => match head.get(8) {
                Some(2) => Params::Gzip { level: 9 },
                Some(4) => Params::Gzip { level: 1 },
                Some(_) => Params::Gzip { level: 6 },
                None => default,
            },
            Compression::None => Params::None,
        }
    }
}

/// Read a multibyte integer of the xz format.
fn xz_varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for k in 0..9 {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= ((byte & 0x7f) as u64) << (7 * k);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The LZMA2 dictionary size in an xz block header.
fn xz_first_block_dict(b: &[u8]) -> Option<u32> {
    let size = (*b.first()? as usize + 1) * 4;
    let flags = *b.get(1)?;
    let filters = (flags & 3) as usize + 1;
    let mut i = 2;
    if flags & 0x40 != 0 {
        xz_varint(b, &mut i)?;
    }
    if flags & 0x80 != 0 {
        xz_varint(b, &mut i)?;
    }
    for _ in 0..filters {
        let id = xz_varint(b, &mut i)?;
        let props = xz_varint(b, &mut i)? as usize;
        if i + props > size {
            return None;
        }
        if id == 0x21 && props == 1 {
            let bits = b[i] & 0x3f;
            return Some(if bits >= 40 { u32::MAX } else { (2 | (bits as u32 & 1)) << (bits / 2 + 11) });
        }
        i += props;
    }
    None
}

/// Compress `data` the way the kernel's `make modules_install` does for
/// modules (XZ with a CRC32 check and a 1 MiB dictionary, zstd, gzip -9).
pub fn compress(data: &[u8], kind: Compression) -> Result<Vec<u8>, Error> {
    compress_with(data, Params::kernel_default(kind))
}

/// An encoder that failed writing into memory: out of memory or a bug.
fn encoder(e: std::io::Error) -> Error {
    Error::new(Kind::Internal, e.to_string()).because(e)
}

/// Compress `data` with these parameters.
pub(crate) fn compress_with(data: &[u8], params: Params) -> Result<Vec<u8>, Error> {
    use std::io::Write;
    match params {
        Params::None => Ok(data.to_vec()),
        Params::Xz { check, dict } => {
            use liblzma::stream::{Check, Filters, LzmaOptions, Stream};
            let check = match check {
                0 => Check::None,
                1 => Check::Crc32,
                4 => Check::Crc64,
                10 => Check::Sha256,
                c => return Err(Error::new(Kind::Unsupported, format!("xz: unsupported check type {c}"))),
            };
            let mut opts =
                LzmaOptions::new_preset(6).map_err(|e| Error::new(Kind::Internal, format!("xz: {e}")).because(e))?;
            opts.dict_size(dict.clamp(4096, 1 << 30));
            let mut filters = Filters::new();
            filters.lzma2(&opts);
            let stream = Stream::new_stream_encoder(&filters, check)
                .map_err(|e| Error::new(Kind::Internal, format!("xz: {e}")).because(e))?;
            let mut enc = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
            enc.write_all(data).map_err(encoder)?;
            enc.finish().map_err(encoder)
        }
        Params::Zstd { checksum, window_log } => {
            let mut enc = zstd::stream::Encoder::new(Vec::new(), 19).map_err(encoder)?;
            enc.include_checksum(checksum).map_err(encoder)?;
            if let Some(w) = window_log {
                enc.window_log(w).map_err(encoder)?;
            }
            enc.write_all(data).map_err(encoder)?;
            enc.finish().map_err(encoder)
        }
        Params::Gzip { level } => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            enc.write_all(data).map_err(encoder)?;
            enc.finish().map_err(encoder)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each compressor's own tool output is named as the kernel's flavours name it.
    #[test]
    fn kernel_payloads_are_named_by_their_magic() {
        let text: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let by_tool = |tool: &str, args: &[&str]| {
            let mut child = std::process::Command::new(tool)
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{tool}: {e}"));
            use std::io::Write;
            child.stdin.take().unwrap().write_all(&text).unwrap();
            child.wait_with_output().unwrap().stdout
        };
        for (tool, args, name) in [
            ("gzip", &["-n", "-9"][..], "gzip"),
            ("xz", &["--check=crc32"][..], "xz"),
            ("zstd", &["-q", "-19"][..], "zstd"),
            ("bzip2", &["-9"][..], "bzip2"),
            ("lzma", &["-9"][..], "lzma"),
            ("lz4", &["-l", "-9"][..], "lz4"),
            ("lzop", &["-9"][..], "lzo"),
        ] {
            let packed = by_tool(tool, args);
            assert_eq!(kernel_payload_name(&packed), Some(name), "{tool}");
            // the payloads beyond the module formats read back, the
            // build's size trailer after them ignored
            if ["bzip2", "lzma", "lz4", "lzo"].contains(&name) {
                let mut framed = packed.clone();
                framed.extend_from_slice(&(text.len() as u32).to_le_bytes());
                assert_eq!(decompress_kernel_payload(&framed, name).unwrap(), text, "{tool}");
                let e = decompress_kernel_payload(&packed[..packed.len() / 2], name).unwrap_err().to_string();
                assert!(e.contains("corrupt"), "{tool}: {e}");
            }
        }
        // gzip of stored blocks, as kernel/tools/gzip-stored writes it
        let stored =
            by_tool(concat!(env!("CARGO_MANIFEST_DIR"), "/../../kernel/tools/gzip-stored"), &["-n", "-f", "-9"]);
        assert_eq!(kernel_payload_name(&stored), Some("stored"));
        assert_eq!(kernel_payload_name(b"\x7fELF"), None);
        assert_eq!(kernel_payload_name(b""), None);
    }

    /// What the xz tool writes is read back: check and dictionary, and a
    /// rewrite with them reads as the same parameters.
    #[test]
    fn xz_parameters_are_detected_and_kept() {
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for (args, check, dict) in [
            (&["--check=crc32", "--lzma2=dict=1MiB"][..], 1u8, 1u32 << 20),
            (&["--check=crc64", "-6"][..], 4, 8 << 20),
            (&["--check=sha256", "--lzma2=dict=3MiB"][..], 10, 3 << 20),
        ] {
            let mut child = std::process::Command::new("xz")
                .args(args)
                .arg("-c")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("xz (Debian package xz-utils)");
            {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(&text).unwrap();
            }
            let packed = child.wait_with_output().unwrap().stdout;
            let p = Params::detect(&packed[..64], Compression::Xz);
            assert_eq!(p, Params::Xz { check, dict }, "{args:?}");
            let again = compress_with(&text, p).unwrap();
            assert_eq!(Params::detect(&again[..64], Compression::Xz), p);
            assert_eq!(decompress(&again, Compression::Xz, 0).unwrap(), text);
        }
    }

    #[test]
    fn zstd_and_gzip_parameters_survive_a_rewrite() {
        let text = b"bootlink ".repeat(10_000);
        for p in [
            Params::Zstd { checksum: true, window_log: Some(20) },
            Params::Zstd { checksum: false, window_log: Some(17) },
            Params::Gzip { level: 9 },
            Params::Gzip { level: 1 },
        ] {
            let packed = compress_with(&text, p).unwrap();
            let kind = Compression::detect(&packed);
            let got = Params::detect(&packed, kind);
            match (p, got) {
                (Params::Zstd { checksum: a, .. }, Params::Zstd { checksum: b, window_log }) => {
                    assert_eq!(a, b);
                    assert!(window_log.is_none() || window_log <= Some(20), "{window_log:?}");
                }
                _ => assert_eq!(p, got),
            }
            assert_eq!(decompress(&packed, kind, 0).unwrap(), text);
        }
    }

    #[test]
    fn module_files_are_named_by_their_compression() {
        use std::path::Path;
        for (name, want) in [
            ("kernel/fs/x.ko.xz", Compression::Xz),
            ("x.ko.zst", Compression::Zstd),
            ("x.ko.gz", Compression::Gzip),
            ("x.ko", Compression::None),
            ("notes.xz", Compression::None),
            ("x.ko.bz2", Compression::None),
        ] {
            assert_eq!(Compression::of_module_name(Path::new(name)), want, "{name}");
        }
    }

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

    /// zstd and gzip streams of 256 and 128 MiB of zeros (a few hundred KiB)
    /// are refused at the limit, with one clear line; an xz stream of
    /// gigabytes is tests/debian/batch_input.rs's.
    #[test]
    fn decompression_bombs_are_refused_at_the_limit() {
        assert_eq!(output_limit(1000), MIN_OUTPUT);
        assert_eq!(output_limit(10 << 20), 640 << 20);
        assert_eq!(output_limit(usize::MAX), MAX_OUTPUT);
        let zeros = vec![0u8; 16 << 20];
        for kind in [Compression::Zstd, Compression::Gzip] {
            // One stream (only the first is read): the same 16 MiB of zeros
            // written through one encoder again and again.
            let packed = {
                use std::io::Write;
                match kind {
                    Compression::Zstd => {
                        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
                        for _ in 0..16 {
                            enc.write_all(&zeros).unwrap();
                        }
                        enc.finish().unwrap()
                    }
                    _ => {
                        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                        for _ in 0..8 {
                            enc.write_all(&zeros).unwrap();
                        }
                        enc.finish().unwrap()
                    }
                }
            };
            let err = decompress(&packed, kind, 0).unwrap_err().to_string();
            assert!(err.contains("refused as a decompression bomb"), "{kind:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let small = compress(&zeros[..1 << 20], Compression::Xz).unwrap();
        assert_eq!(decompress(&small, Compression::Xz, 0).unwrap().len(), 1 << 20, "under the floor: read");
        let empty = compress(b"", Compression::Xz).unwrap();
        assert!(decompress(&empty, Compression::Xz, 0).unwrap_err().msg.contains("decompresses to nothing"));
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
            assert!(err.msg.starts_with("corrupt ") && err.kind == crate::error::Kind::Format, "{kind:?}: {err}");
            let short = &compress(&text, kind).unwrap()[..10];
            assert!(decompress(short, kind, 0).is_err(), "{kind:?} truncated");
        }
    }
}
