//! U-Boot's legacy image header (`mkimage -T ramdisk -C none`) around an
//! initramfs, for the jobs of a board booted by U-Boot.
//!
//! LAVA's u-boot boot method passes the ramdisk's load address to
//! `booti`/`bootm` without a size (`booti KERNEL RAMDISK DTB`) when the
//! device type's deploy parameters say `add_header: u-boot`, as LAVA's
//! base-uboot.jinja2 does for every U-Boot device type; U-Boot then reads
//! the ramdisk's size from this header, checks its CRCs and hands the
//! kernel the data behind it, byte for byte. A raw cpio there is refused
//! ("Wrong Ramdisk Image Format"). LAVA adds the header itself only when it
//! unpacks the ramdisk to install modules or its overlay, which the jobs
//! do not ask for (the lab's initramfs is booted as the lab built it).
//!
//! The header is what `mkimage -A ARCH -O linux -T ramdisk -C none` writes
//! with SOURCE_DATE_EPOCH=0: 64 big-endian bytes, no name, time 0, so the
//! same initramfs gives the same file.

use crate::lab::arch::Arch;
use bootlink::error::{Error, Kind, Result};

/// The header's length; the data follows it.
pub(crate) const HEADER_LEN: usize = 64;

const MAGIC: u32 = 0x2705_1956;
const OS_LINUX: u8 = 5;
const TYPE_RAMDISK: u8 = 3;
const COMP_NONE: u8 = 0;

/// U-Boot's `IH_ARCH_*` of the lab's architectures.
fn arch_code(arch: Arch) -> u8 {
    match arch {
        Arch::Arm64 => 22,
        Arch::X86_64 => 24,
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

/// `data` (an initramfs) behind a legacy ramdisk header for `arch`.
pub(crate) fn ramdisk(data: &[u8], arch: Arch) -> Result<Vec<u8>> {
    let size = u32::try_from(data.len()).map_err(|_| {
        Error::new(Kind::Usage, format!("a U-Boot ramdisk holds at most 4 GiB; the initramfs is {} bytes", data.len()))
    })?;
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    // 4..8 the header's CRC (over the header with it zero), 8..12 the time (0)
    h[12..16].copy_from_slice(&size.to_be_bytes());
    // 16..20 load address, 20..24 entry point: 0 for a ramdisk
    h[24..28].copy_from_slice(&crc32(data).to_be_bytes());
    h[28] = OS_LINUX;
    h[29] = arch_code(arch);
    h[30] = TYPE_RAMDISK;
    h[31] = COMP_NONE;
    // 32..64 the name: empty
    let hcrc = crc32(&h);
    h[4..8].copy_from_slice(&hcrc.to_be_bytes());
    let mut out = Vec::with_capacity(HEADER_LEN + data.len());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_mkimages() {
        // `SOURCE_DATE_EPOCH=0 mkimage -A arm64 -O linux -T ramdisk -C none`
        // (u-boot-tools 2023.01) of these 19 bytes wrote this header.
        let data = b"bootlink initramfs\n";
        let want: [u8; 32] = [
            0x27, 0x05, 0x19, 0x56, 0xe1, 0x1e, 0x2d, 0xe7, 0, 0, 0, 0, 0, 0, 0, 0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0x89,
            0x04, 0x3c, 0xfa, 0x05, 0x16, 0x03, 0x00,
        ];
        let img = ramdisk(data, Arch::Arm64).unwrap();
        assert_eq!(img.len(), HEADER_LEN + data.len());
        assert_eq!(&img[..32], &want);
        assert!(img[32..HEADER_LEN].iter().all(|&b| b == 0), "no name");
        assert_eq!(&img[HEADER_LEN..], data);
        // x86_64 (mkimage -A x86_64): only the architecture and so the
        // header's CRC differ
        let x = ramdisk(data, Arch::X86_64).unwrap();
        assert_eq!((x[29], &x[24..28]), (0x18, &want[24..28]));
        assert_ne!(&x[4..8], &want[4..8]);
    }
}
