//! vmlinux's tables: written after link into the `__ksymhash` section the
//! kernel reserved (CONFIG_MODULE_SYMHASH_VMLINUX_SIZE bytes), so no
//! address moves. The kernel build runs this as its KSYMHASH hook, before
//! the boot image (bzImage, arm64's Image) is made from vmlinux. x86-64
//! and AArch64 vmlinux files are read alike: both lay out `__ksymtab` as
//! PREL32 entries (CONFIG_HAVE_ARCH_PREL32_RELOCATIONS), and the section is
//! found by its name.

use std::path::Path;

use serde::Serialize;

use super::VMLINUX_SECTION;
use super::tables::{self, Tables};
use crate::elf::{Elf, Want};
use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::kernel::ksymtab;

#[derive(Debug, Clone, Serialize)]
pub struct VmlinuxResult {
    pub exports: usize,
    pub gpl_exports: usize,
    pub table_bytes: usize,
    pub reserved_bytes: usize,
    /// The vmlinux filled (the text names it).
    #[serde(skip)]
    pub path: std::path::PathBuf,
}

impl crate::report::Report for VmlinuxResult {
    fn render(&self) -> String {
        format!(
            "{}: {} + {} GPL exports, tables {} of {} reserved bytes\n",
            self.path.display(),
            self.exports,
            self.gpl_exports,
            self.table_bytes,
            self.reserved_bytes
        )
    }
}

/// Fill `path`'s reserved section with tables for its export tables
/// (in place, atomically).
pub fn fill_vmlinux(path: &Path) -> Result<VmlinuxResult> {
    let mut data = crate::fsutil::read_input(path, crate::fsutil::MAX_BINARY)?;
    let (off, size, exports) = {
        let elf = Elf::parse_for(&data, Want::Executable, crate::elf::ANALYSED_MACHINES).map_err(|e| e.at(path))?;
        let (off, size) = elf.reserved_range(VMLINUX_SECTION).map_err(|e| e.at(path))?.ok_or_else(|| {
            Error::file(
                Kind::WrongKernel,
                path,
                format!("no {VMLINUX_SECTION} section: the kernel was built without CONFIG_MODULE_SYMHASH (patch `symhash-vmlinux`)"),
            )
        })?;
        let (exports, _) = ksymtab::read_exports(&elf).map_err(|e| e.at(path))?;
        (off, size, exports)
    };
    let plain: Vec<&str> = exports.iter().filter(|e| !e.gpl).map(|e| e.name.as_str()).collect();
    let gpl: Vec<&str> = exports.iter().filter(|e| e.gpl).map(|e| e.name.as_str()).collect();
    let blob =
        tables::build([&plain, &gpl]).map_err(|e| Error::file(Kind::Internal, path, e.to_string()).because(e))?;
    if blob.len() > size {
        return Err(Error::file(
            Kind::Unsupported,
            path,
            format!(
                "the tables need {} bytes but {VMLINUX_SECTION} reserves {size}: raise CONFIG_MODULE_SYMHASH_VMLINUX_SIZE",
                blob.len()
            ),
        ));
    }
    let region = data.get_mut(off..off + size).ok_or_else(|| {
        Error::file(Kind::Format, path, format!("truncated ELF: {VMLINUX_SECTION} lies outside the file"))
    })?;
    region.fill(0);
    region[..blob.len()].copy_from_slice(&blob);
    Tables::parse(&data[off..off + size])
        .and_then(|t| t.verify([&plain, &gpl]))
        .map_err(|e| Error::file(Kind::Internal, path, format!("internal error: written tables: {e}")).because(e))?;
    fsutil::write_atomic(path, &data)?;
    Ok(VmlinuxResult {
        exports: plain.len(),
        gpl_exports: gpl.len(),
        table_bytes: blob.len(),
        reserved_bytes: size,
        path: path.to_path_buf(),
    })
}
