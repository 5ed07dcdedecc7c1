//! The time from machine reset to /init: `bootclock/`'s `bl-bootclock`,
//! /init's first command in every lab boot, reads the guest's cycle
//! counter (under `-icount`, QEMU's virtual clock from machine reset) and
//! writes it to the kernel log. The kernel's own clock (printk times)
//! starts partway into the kernel and on another base, so this is the one
//! figure that holds firmware, the boot loader's setup and a bzImage's
//! decompressor: what a kernel's compressor trades against the bytes read
//! from storage (`bootlink recommend`).

use std::path::{Path, PathBuf};

use crate::lab::arch::Arch;
use crate::run::results::{BootClock, BootImage};
use bootlink::error::{Error, Kind, Result};

/// Where the program lies in the initramfs, and the line /init runs.
pub(crate) const GUEST_PATH: &str = "bin/bl-bootclock";

/// The static `bl-bootclock` for a guest of `arch`, built on first use for
/// each version of its sources.
pub fn binary_for(arch: Arch) -> Result<PathBuf> {
    match arch {
        Arch::X86_64 => bootlink::cbuild::build("bootclock", "bl-bootclock", "building the boot clock (bootclock/)"),
        Arch::Arm64 => bootlink::cbuild::build_cross(
            "bootclock",
            "bl-bootclock",
            "building the boot clock (bootclock/) for arm64",
            arch.debian().cross_compile(),
            arch.debian().machine(),
        ),
    }
}

/// A boot's times from reset, from its kernel log: `bootlink: boot clock
/// counter=N hz=F` (bl-bootclock at /init) and, from a lab kernel, `bootlink:
/// boot counter decompressor=A decompressed=B start_kernel=C` (the same
/// counter; zero for a landmark the boot did not pass). None without the
/// first line.
pub fn parse(dmesg: &str) -> Option<BootClock> {
    let mut init: Option<(u64, u64)> = None;
    let mut marks: Option<[u64; 3]> = None;
    for line in dmesg.lines() {
        let Some((_, text)) = crate::run::dmesg::timed_message(line.as_bytes()) else { continue };
        let Ok(text) = std::str::from_utf8(text) else { continue };
        if let Some(rest) = text.strip_prefix("bootlink: boot clock counter=") {
            init = init.or_else(|| {
                let (counter, hz) = rest.trim_end().split_once(" hz=")?;
                Some((counter.parse().ok()?, hz.parse().ok().filter(|h| *h != 0)?))
            });
        } else if let Some(rest) = text.strip_prefix("bootlink: boot counter ") {
            marks = marks.or_else(|| {
                let mut m = [0u64; 3];
                let mut fields = rest.split_whitespace();
                for (i, key) in ["decompressor=", "decompressed=", "start_kernel="].iter().enumerate() {
                    m[i] = fields.next()?.strip_prefix(key)?.parse().ok()?;
                }
                Some(m)
            });
        }
    }
    let (counter, hz) = init?;
    let us = |c: u64| (c != 0).then(|| c as f64 * 1e6 / hz as f64);
    let m = marks.unwrap_or_default();
    Some(BootClock {
        init_us: counter as f64 * 1e6 / hz as f64,
        decompressor_us: us(m[0]),
        decompressed_us: us(m[1]),
        start_kernel_us: us(m[2]),
    })
}

/// What a boot loader reads of the image QEMU boots, and its compressor.
pub fn describe(image: &Path) -> Result<BootImage> {
    let data = bootlink::fsutil::map_file(image)?;
    let file_bytes = data.len() as u64;
    match bootlink::kernel::ImageKind::detect(&data) {
        bootlink::kernel::ImageKind::Elf => {
            let elf = bootlink::elf::Elf::parse(&data, bootlink::elf::Want::Executable).map_err(|e| e.at(image))?;
            let read_bytes = elf.loadable_bytes().map_err(|e| e.at(image))?;
            return Ok(BootImage { kind: "vmlinux".into(), compression: "none".into(), file_bytes, read_bytes });
        }
        bootlink::kernel::ImageKind::Arm64Image => {
            return Ok(BootImage {
                kind: "Image".into(),
                compression: "none".into(),
                file_bytes,
                read_bytes: file_bytes,
            });
        }
        bootlink::kernel::ImageKind::Arm64ImageGz => {
            return Ok(BootImage {
                kind: "Image".into(),
                compression: "gzip".into(),
                file_bytes,
                read_bytes: file_bytes,
            });
        }
        _ => {}
    }
    let payload = bootlink::kernel::bzimage_payload_bytes(&data)
        .map_err(|e| e.at(image))?
        .ok_or_else(|| Error::file(Kind::Format, image, "not a vmlinux, bzImage or arm64 Image"))?;
    let compression = bootlink::compress::kernel_payload_name(payload).ok_or_else(|| {
        Error::file(Kind::Format, image, "a bzImage whose kernel is in no compression the kernel knows")
    })?;
    Ok(BootImage { kind: "bzImage".into(), compression: compression.into(), file_bytes, read_bytes: file_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_from_reset() {
        let log = "[    0.000000] Linux version 6.1.192\n\
                   [    0.000000] bootlink: boot counter decompressor=44000000 decompressed=244000000 start_kernel=250000000\n\
                   [    0.512000] Run /init as init process\n\
                   [    0.516000] bootlink: boot clock counter=2710000000 hz=1000000000\n";
        let c = parse(log).unwrap();
        assert_eq!(c.init_us, 2_710_000.0);
        assert_eq!(
            (c.decompressor_us, c.decompressed_us, c.start_kernel_us),
            (Some(44_000.0), Some(244_000.0), Some(250_000.0))
        );
        assert_eq!(c.decompress_us(), Some(200_000.0));
        // a PVH boot: no decompressor
        let pvh = "[    0.000000] bootlink: boot counter decompressor=0 decompressed=0 start_kernel=9000000\n\
                   [    0.600000] bootlink: boot clock counter=400000000 hz=1000000000\n";
        let c = parse(pvh).unwrap();
        assert_eq!((c.decompressor_us, c.decompress_us(), c.start_kernel_us), (None, None, Some(9_000.0)));
        // arm64's counter at 62.5 MHz, a kernel without the counters line
        let c = parse("[    1.000000] bootlink: boot clock counter=75000000 hz=62500000\n").unwrap();
        assert_eq!((c.init_us, c.start_kernel_us), (1_200_000.0, None));
        for bad in [
            "[    1.000000] bootlink: boot clock counter=x hz=1\n",
            "[    1.000000] bootlink: boot clock counter=1 hz=0\n",
            "bootlink: boot clock counter=1 hz=1\n",
            "[    1.000000] Run /init as init process\n",
            "[    0.000000] bootlink: boot counter decompressor=1 decompressed=2 start_kernel=3\n",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        // a damaged counters line is no landmark, the clock at /init stays
        let c = parse(
            "[    0.000000] bootlink: boot counter decompressor=1 start_kernel=3\n\
                       [    1.000000] bootlink: boot clock counter=5 hz=1000000000\n",
        )
        .unwrap();
        assert_eq!((c.decompressor_us, c.start_kernel_us), (None, None));
    }

    #[test]
    fn images_say_what_a_loader_reads() {
        let t = tempfile::tempdir().unwrap();
        let notakernel = t.path().join("junk");
        std::fs::write(&notakernel, vec![0u8; 4096]).unwrap();
        let e = describe(&notakernel).unwrap_err().to_string();
        assert!(e.contains("junk") && e.contains("not a vmlinux"), "{e}");
        // a bzImage header whose payload is lz4's legacy frame
        let mut bz = vec![0u8; 8192];
        bz[0x1f1] = 4;
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        bz[0x248..0x24c].copy_from_slice(&16u32.to_le_bytes());
        bz[0x24c..0x250].copy_from_slice(&64u32.to_le_bytes());
        let at = 5 * 512 + 16;
        bz[at..at + 4].copy_from_slice(&[0x02, 0x21, 0x4c, 0x18]);
        let p = t.path().join("bzImage");
        std::fs::write(&p, &bz).unwrap();
        let d = describe(&p).unwrap();
        assert_eq!(
            (d.kind.as_str(), d.compression.as_str(), d.file_bytes, d.read_bytes),
            ("bzImage", "lz4", 8192, 8192)
        );
        bz[at..at + 4].copy_from_slice(b"none");
        std::fs::write(&p, &bz).unwrap();
        assert!(describe(&p).unwrap_err().to_string().contains("no compression the kernel knows"));
    }
}
