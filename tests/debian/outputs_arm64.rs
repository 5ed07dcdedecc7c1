//! `manifest write --image` on Debian's arm64 Image (issue 47, part C):
//! the Image and the vmlinux are two outputs that must never destroy each
//! other or an input. The vmlinux "of" the Image is made here with
//! aarch64-linux-gnu-as and -ld: `_text` at the Image's first byte and
//! `.rodata` and a 4 KiB `__modhashes` whose bytes are the Image's own at
//! their offsets, which is all `manifest write` checks of the pair (the
//! same build: the reserved section and the head of .rodata agree).

use crate::common;

use std::path::{Path, PathBuf};

use common::TestCommand;
use common::arm64::arm64;

/// Where the made vmlinux places its sections in the Image.
const RODATA_AT: u64 = 0x80_0000;
const MODHASHES_AT: u64 = 0x90_0000;
const TEXT: u64 = 0xffff_8000_0800_0000;

/// A directory with Debian's arm64 Image and a vmlinux made for it,
/// as `kernel build --arch arm64` leaves them; None (a counted skip)
/// without the package or the cross binutils.
fn kernel_pair(test: &str, dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let k = arm64(test)?;
    for tool in ["aarch64-linux-gnu-as", "aarch64-linux-gnu-ld"] {
        if std::process::Command::new(tool).arg("--version").output().is_err() {
            common::skip(test, &format!("{tool} missing (scripts/install-deps installs binutils-aarch64-linux-gnu)"));
            return None;
        }
    }
    let image = common::copy_to(&k.vmlinux, dir, "Image");
    let src = dir.join("vmlinux.S");
    std::fs::write(
        &src,
        format!(
            ".section .text, \"ax\"\n.globl _text\n_text:\n.incbin \"{i}\", 0, 4096\n\
             .section .rodata, \"a\"\n.incbin \"{i}\", {RODATA_AT:#x}, 4096\n\
             .section __modhashes, \"a\"\n.incbin \"{i}\", {MODHASHES_AT:#x}, 4096\n",
            i = image.display()
        ),
    )
    .unwrap();
    let lds = dir.join("vmlinux.lds");
    std::fs::write(
        &lds,
        format!(
            "SECTIONS {{\n . = {TEXT:#x};\n .text : {{ *(.text) }}\n . = {:#x};\n .rodata : {{ *(.rodata) }}\n \
             . = {:#x};\n __modhashes : {{ *(__modhashes) }}\n}}\n",
            TEXT + RODATA_AT,
            TEXT + MODHASHES_AT
        ),
    )
    .unwrap();
    let (obj, vmlinux) = (dir.join("vmlinux.o"), dir.join("vmlinux"));
    common::sh("aarch64-linux-gnu-as", &["-o", obj.to_str().unwrap(), src.to_str().unwrap()]);
    common::sh(
        "aarch64-linux-gnu-ld",
        &["-T", lds.to_str().unwrap(), "-o", vmlinux.to_str().unwrap(), obj.to_str().unwrap()],
    );
    for f in [src, lds, obj] {
        std::fs::remove_file(f).unwrap();
    }
    Some((vmlinux, image))
}

fn fat(test: &str) -> Option<PathBuf> {
    Some(arm64(test)?.modules.join("kernel/fs/fat/fat.ko"))
}

fn write(v: &Path, out: &Path, image: &Path, module: &Path) -> TestCommand {
    TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &v, &"-o", &out, &"--image", &image, &module])
}

/// `--image X -o X` and `--image VMLINUX`: refused in one line before any
/// work, the inputs unchanged and no output made. Named apart, both are
/// written; in place of the Image and the vmlinux beside it, too.
#[test]
fn manifest_write_never_writes_its_image_over_another_file() {
    let test = "manifest_write_never_writes_its_image_over_another_file";
    let dir = common::tmpdir("arm64-outputs");
    let Some((v, image)) = kernel_pair(test, &dir) else { return };
    let Some(fat) = fat(test) else { return };
    let (v_sum, image_sum) = (common::sha256_hex(&v), common::sha256_hex(&image));
    let x = dir.join("X");
    let err = write(&v, &x, &x, &fat).fails_with("named as two outputs");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!x.exists(), "an output was written");
    let err = write(&v, &dir.join("other"), &v, &fat).fails_with("is the input");
    assert!(err.lines().count() == 1 && err.contains(&*v.to_string_lossy()), "{err}");
    assert!(!dir.join("other").exists());
    assert_eq!((common::sha256_hex(&v), common::sha256_hex(&image)), (v_sum.clone(), image_sum.clone()));

    let (out_v, out_image) = (dir.join("listed.vmlinux"), dir.join("listed.Image"));
    write(&v, &out_v, &out_image, &fat).ok();
    let shown = |args: &[&dyn AsRef<std::ffi::OsStr>]| common::stdout(&TestCommand::new(args).ok());
    assert_eq!(shown(&[&"manifest", &"show", &out_v]).lines().count(), 1);
    assert_eq!(std::fs::metadata(&out_image).unwrap().len(), std::fs::metadata(&image).unwrap().len());
    // In place: the Image beside the vmlinux and the vmlinux itself.
    write(&v, &v, &image, &fat).ok();
    assert_ne!((common::sha256_hex(&v), common::sha256_hex(&image)), (v_sum, image_sum));
    assert_eq!(shown(&[&"manifest", &"show", &v]).lines().count(), 1);
}

/// A full file system under `-o` (a 64 KiB tmpfs, as root; the vmlinux
/// is 197 KiB): one line saying so, and the Image, written to a roomy
/// directory, is not left behind either.
#[test]
fn manifest_write_on_a_full_file_system_leaves_no_image_behind() {
    let test = "manifest_write_on_a_full_file_system_leaves_no_image_behind";
    let dir = common::tmpdir("arm64-enospc");
    let Some((v, _)) = kernel_pair(test, &dir) else { return };
    let Some(fat) = fat(test) else { return };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return common::skip(test, "mounting a small tmpfs needs root");
    }
    let small = dir.join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&small)
        .output()
        .unwrap();
    if !mounted.status.success() {
        return common::skip(test, &format!("mount -t tmpfs: {}", String::from_utf8_lossy(&mounted.stderr).trim()));
    }
    let (out_v, out_image) = (small.join("vmlinux"), dir.join("new.Image"));
    let o = write(&v, &out_v, &out_image, &fat).cmd_output();
    let left: Vec<_> = std::fs::read_dir(&small).unwrap().flatten().map(|e| e.file_name()).collect();
    let _ = std::process::Command::new("umount").arg(&small).status();
    let err = common::stderr(&o);
    assert!(!o.status.success() && err.lines().count() == 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "bootlink: {}: no space left on device: not written, nothing left behind",
            out_v.display()
        )),
        "{err}"
    );
    assert!(left.is_empty(), "{left:?}");
    assert!(!out_image.exists(), "the Image was left behind when the vmlinux did not fit");
}
