#![allow(dead_code)]
//! The damaged-input generator for x86 boot images (bzImage/vmlinuz): from
//! a real one and a seed, images damaged one way each, by class: the boot
//! header (Documentation/arch/x86/boot.rst: `setup_sects` at 0x1f1, "HdrS"
//! at 0x202, `payload_offset` and `payload_length` at 0x248 and 0x24c,
//! the payload at (setup_sects + 1) * 512 + payload_offset) and the
//! compressed payload. Read by hand, not through bootlink's reader.

use bootlink::rng::Rng;

use super::generate::{Damaged, put32};

/// Where the payload lies in the image: (start, length).
pub fn payload(d: &[u8]) -> (usize, usize) {
    assert_eq!(&d[0x202..0x206], b"HdrS", "not an x86 boot image");
    let sects = match d[0x1f1] {
        0 => 4,
        n => n as usize,
    };
    let off = u32::from_le_bytes(d[0x248..0x24c].try_into().unwrap()) as usize;
    let len = u32::from_le_bytes(d[0x24c..0x250].try_into().unwrap()) as usize;
    ((sects + 1) * 512 + off, len)
}

/// `base` with its payload replaced by `new` (the header's length with it).
fn with_payload(base: &[u8], new: &[u8]) -> Vec<u8> {
    let (start, len) = payload(base);
    let mut d = base[..start].to_vec();
    d.extend_from_slice(new);
    d.extend_from_slice(&base[start + len..]);
    put32(&mut d, 0x24c, new.len() as u32);
    d
}
fn xz(data: &[u8]) -> Vec<u8> {
    bootlink::compress::compress(data, bootlink::compress::Compression::Xz).unwrap()
}

/// The reason a refusal of a boot image damaged by `class` gives, per
/// class with why.
pub fn reason(class: &str) -> &'static [&'static str] {
    match class {
        // Bit flips may leave a bootable image: not marked, no reason.
        "bit-flips" => &[],
        // Cut before the payload's end: the boot header places the payload
        // past the end of the file, or the file ends inside the header.
        "truncated" => &["truncated"],
        // "HdrS" no longer at 0x202 after a boot sector.
        "wrong-magic" => &["without the \"HdrS\" boot header"],
        // setup_sects moved: the payload is looked for where it is not,
        // past the end of the file or on bytes that are no compressed
        // stream.
        "setup-sects-wrong" => &["places the payload at ", "no compression the kernel knows"],
        // payload_offset or payload_length past the end of the file.
        "payload-outside-file" => &["places the payload at * past the end of the file"],
        // payload_length shorter than the stream: the xz stream ends early.
        "payload-cut-short" => &["corrupt xz data: truncated"],
        // The payload's first bytes (its compression magic) replaced.
        "payload-not-compressed" => &["no compression the kernel knows"],
        // Bits flipped inside the compressed stream: its checks fail.
        "payload-corrupt" => &["corrupt xz data"],
        // A valid xz stream of random bytes.
        "payload-not-elf" => &["does not decompress to an ELF vmlinux"],
        // 80 MiB of zeros in a few KiB.
        "bomb-payload" => &["decompression bomb"],
        // An AArch64 vmlinux (raw or xz) as the payload.
        "foreign-elf-payload" => &["built for aarch64"],
        // The payload's size trailer (its last 4 bytes, the uncompressed
        // size the boot decompressor makes room for) 1 to 4096 bytes short
        // of what the stream holds.
        "payload-trailer-short" => &["bytes its size trailer states"],
        // A payload in one of the four formats only kernel payloads use
        // (lzma, bzip2, lz4's legacy frame, lzop, by each format's own
        // tool), cut inside its stream, the size trailer after the cut.
        "payload-other-format-cut" => &["corrupt * data"],
        _ => panic!("no reason for the boot image damage class {class}"),
    }
}

pub const CLASSES: &[&str] = &[
    "bit-flips",
    "truncated",
    "wrong-magic",
    "setup-sects-wrong",
    "payload-outside-file",
    "payload-cut-short",
    "payload-not-compressed",
    "payload-corrupt",
    "payload-not-elf",
    "bomb-payload",
    "foreign-elf-payload",
    "payload-trailer-short",
    "payload-other-format-cut",
];

/// `per_class` damaged copies of the boot image `base` for every class.
/// `foreign` is a small ELF kernel image of another machine (the payload
/// of the class of that name, raw and xz-compressed).
pub fn images(base: &[u8], foreign: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let (start, len) = payload(base);
    let flen = base.len();
    // One bomb for all: 80 MiB of zeros, xz-compressed to a few KiB, more
    // than the 64 MiB bootlink unpacks of such a small stream.
    let bomb = xz(&vec![0u8; 80 << 20]);
    // `foreign` in each format only kernel payloads use, by its own tool.
    let other_formats: Vec<Vec<u8>> = [
        ("lzma", &["-9", "-c"][..]),
        ("bzip2", &["-9", "-c"][..]),
        ("lz4", &["-l", "-9", "-c"][..]),
        ("lzop", &["-9", "-c"][..]),
    ]
    .iter()
    .map(|(tool, args)| crate::common::through_tool(tool, args, foreign))
    .collect();
    let mut out = Vec::new();
    for &class in CLASSES {
        for k in 0..per_class {
            let mut d = base.to_vec();
            let mut invalid = true;
            match class {
                "bit-flips" => {
                    for _ in 0..1 + rng.below(8) {
                        // In the header most of the time: the payload's own
                        // damage has its classes.
                        let i = if rng.below(4) > 0 { rng.below(start) } else { rng.below(flen) };
                        d[i] ^= 1 << rng.below(8);
                    }
                    invalid = false;
                }
                "truncated" => d.truncate(rng.below(start + len)),
                "wrong-magic" => d[0x202 + rng.below(4)] ^= 1 << rng.below(8),
                "setup-sects-wrong" => {
                    let now = d[0x1f1];
                    let v = loop {
                        let v =
                            [now.wrapping_add(1 + rng.below(8) as u8), now.wrapping_sub(1 + rng.below(8) as u8), 0xff]
                                [rng.below(3)];
                        if v != now && !(v == 0 && now == 4) {
                            break v;
                        }
                    };
                    d[0x1f1] = v;
                }
                "payload-outside-file" => match rng.below(4) {
                    0 => put32(&mut d, 0x248, (flen + rng.below(1 << 20)) as u32),
                    1 => put32(&mut d, 0x24c, (flen - start + 1 + rng.below(1 << 20)) as u32),
                    2 => put32(&mut d, 0x248, u32::MAX - rng.below(4096) as u32),
                    _ => put32(&mut d, 0x24c, u32::MAX - rng.below(4096) as u32),
                },
                "payload-cut-short" => put32(&mut d, 0x24c, (len / 2 + rng.below(len / 4)) as u32),
                "payload-not-compressed" => {
                    for b in &mut d[start..start + 6] {
                        *b = rng.below(256) as u8;
                    }
                }
                "payload-corrupt" => {
                    // Inside the stream's first block, past its headers.
                    for _ in 0..4 {
                        let i = start + 64 + rng.below(len / 2);
                        d[i] ^= 1 << rng.below(8);
                    }
                }
                "payload-not-elf" => {
                    let junk: Vec<u8> = (0..4096 + rng.below(1 << 16)).map(|_| rng.below(256) as u8).collect();
                    d = with_payload(base, &xz(&junk));
                }
                "bomb-payload" => d = with_payload(base, &bomb),
                "foreign-elf-payload" => {
                    d = if k % 2 == 0 { with_payload(base, &xz(foreign)) } else { with_payload(base, foreign) };
                }
                "payload-trailer-short" => {
                    let at = start + len - 4;
                    let stated = u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
                    put32(&mut d, at, stated - 1 - rng.below(4096) as u32);
                }
                "payload-other-format-cut" => {
                    let stream = &other_formats[(k + rng.below(4)) % 4];
                    let cut = 16 + rng.below(stream.len() - 24);
                    let mut p = stream[..cut].to_vec();
                    p.extend_from_slice(&(foreign.len() as u32).to_le_bytes());
                    d = with_payload(base, &p);
                }
                _ => unreachable!("{class}"),
            }
            out.push(Damaged { name: format!("vmlinuz-{class}-{k}"), class, bytes: d, invalid, reason: reason(class) });
        }
    }
    out
}
