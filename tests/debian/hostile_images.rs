//! Issue 47 (hostile input, round 2), part B on real images: each finding
//! reproduced on a copy of Debian's kernel or module, damaged byte-exactly
//! here, and now refused in one line naming the file, nothing written:
//!
//! - an arm64 Image's `text_offset` (0 in every 6.1 Image) was added to
//!   every export's address;
//! - an export entry whose value points far outside the Image was taken
//!   as it was;
//! - one export name with an unprintable byte cut the Image's tables where
//!   it lay, silently dropping the exports past it;
//! - a vmlinux whose `__modhashes` lies over `.text` had its code
//!   overwritten by `manifest write`;
//! - `finalize` wrote a module whose `.gnu.linkonce.this_module` was one
//!   byte shorter than any struct module (or of another size than the
//!   kernel's, which its BTF gives).
//!
//! The arm64 tests skip (counted) without Debian's arm64 package.

use crate::common;
// The damaged-input generator's modules, as damaged_real.rs loads them.
use crate::damaged_real::{generate, images};

use std::path::{Path, PathBuf};

use common::*;

/// The kernel's KIMAGE_VADDR with CONFIG_ARM64_VA_BITS=48 (Debian's).
const KIMAGE_VADDR: u64 = 0xffff_8000_0800_0000;

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

fn i32_at(d: &[u8], at: usize) -> i64 {
    i32::from_le_bytes(d[at..at + 4].try_into().unwrap()) as i64
}

/// A copy of `src` in `dir` named `name`, changed by `damage`.
fn damaged_copy(src: &Path, dir: &Path, name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    damaged_bytes(std::fs::read(src).unwrap(), dir, name, damage)
}

/// `bytes`, changed by `damage`, written to `dir` as `name`.
fn damaged_bytes(mut bytes: Vec<u8>, dir: &Path, name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    damage(&mut bytes);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Run `args`: refused with exactly the one line `bootlink: FILE: WANT`
/// (WANT a pattern, `*` any text), and `out` (if any) not written.
fn refused(args: &[&dyn AsRef<std::ffi::OsStr>], file: &Path, want: &str, out: Option<&Path>) {
    let o = run(args);
    let err = stderr(&o);
    let shown: Vec<String> = args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect();
    assert_ne!(o.status.code(), Some(0), "{shown:?} succeeded:\n{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let prefix = format!("bootlink: {}: ", file.display());
    assert!(err.starts_with(&prefix), "{err}");
    assert!(generate::says(&err, want), "{err}\ndoes not say {want:?}");
    if let Some(out) = out {
        assert!(!out.exists(), "{} written", out.display());
    }
}

/// Where an arm64 export entry at `o` puts its name (a PREL32 offset at
/// `o + 4`), and the name's bytes there up to its NUL.
fn name_at(d: &[u8], o: usize) -> (usize, &[u8]) {
    let at = (o as i64 + 4 + i32_at(d, o + 4)) as usize;
    let len = d[at..].iter().position(|&b| b == 0).unwrap();
    (at, &d[at..at + len])
}

/// The export entry of the arm64 Image `d` naming `name` (found by hand,
/// tests/damaged/images.rs): its offset, and the offset of its name.
fn entry_named(d: &[u8], entries: &[usize], name: &str) -> (usize, usize) {
    let want = format!("{name}\0");
    entries
        .iter()
        .map(|&o| (o, name_at(d, o).0))
        .find(|&(_, at)| d[at..].starts_with(want.as_bytes()))
        .unwrap_or_else(|| panic!("no export entry names {name}"))
}

/// Debian's arm64 Image as it is shipped, and its export entries found by
/// hand: what each arm64 case damages a copy of.
struct Arm64 {
    k: &'static bootlink::fetch::Fetched,
    real: Vec<u8>,
    entries: Vec<usize>,
}

impl Arm64 {
    /// None (a counted skip) without Debian's arm64 package.
    fn new(test: &str) -> Option<Arm64> {
        let k = arm64::arm64(test)?;
        let real = std::fs::read(&k.vmlinuz).unwrap();
        let entries = images::arm64_entries(&real);
        Some(Arm64 { k, real, entries })
    }

    /// A copy of the Image in `dir` named `name`, changed by `damage`.
    fn damaged(&self, dir: &Path, name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
        damaged_bytes(self.real.clone(), dir, name, damage)
    }

    /// `img` (a damaged copy in `dir`) refused with the one line `want`
    /// by kernel-info, and by preresolve of Debian's fat.ko, as it is and
    /// with `--fold-symbols`, before any module is written.
    fn refused(&self, img: &Path, dir: &Path, want: &str) {
        refused(&[&"kernel-info", &img], img, want, None);
        let fat = self.k.modules.join("kernel/fs/fat/fat.ko");
        let out = dir.join("out");
        let pre: [&dyn AsRef<std::ffi::OsStr>; 4] = [&"preresolve", &"--kernel", &img, &"--assume-nokaslr"];
        for fold in [&[][..], &[&"--fold-symbols" as &dyn AsRef<std::ffi::OsStr>][..]] {
            let args: Vec<&dyn AsRef<std::ffi::OsStr>> =
                pre.iter().copied().chain(fold.iter().copied()).chain([&fat as _, &"-o" as _, &out as _]).collect();
            refused(&args, img, want, Some(&out));
        }
    }
}

/// Every 6.1 arm64 Image has text_offset 0 (head.S: `.quad 0` since 5.8):
/// Debian's does. A copy with 2 MiB there is refused, by kernel-info and
/// by preresolve before any module is written; before, every preresolved
/// address moved by 2 MiB and the run said nothing.
#[test]
fn an_arm64_text_offset_is_refused_not_added() {
    let Some(a) = Arm64::new("an_arm64_text_offset_is_refused_not_added") else { return };
    assert_eq!(&a.real[0x38..0x3c], b"ARM\x64");
    assert_eq!(u64_at(&a.real, 8), 0, "Debian's 6.1 Image has text_offset 0");
    let dir = tmpdir("hostile-text-offset");
    let img = a.damaged(&dir, "vmlinuz", |d| d[8..16].copy_from_slice(&0x20_0000u64.to_le_bytes()));
    let want = format!(
        "damaged arm64 Image header: text_offset 0x200000, where a kernel since 5.8 has 0 (release {})",
        a.k.release
    );
    a.refused(&img, &dir, &want);
}

/// kfree's entry in Debian's arm64 Image, its value moved 1 GiB past the
/// end of the kernel, or into the Image's 64-byte boot header (inside the
/// file, but no code or data): refused naming the entry; before, kernel-info
/// listed kfree at that address and preresolve wrote it into modules.
#[test]
fn an_arm64_export_outside_the_image_is_refused() {
    let Some(a) = Arm64::new("an_arm64_export_outside_the_image_is_refused") else { return };
    let (o, _) = entry_named(&a.real, &a.entries, "kfree");
    let size = u64_at(&a.real, 16);
    let dir = tmpdir("hostile-export-far");
    for (name, to) in [("vmlinuz-far", size as i64 + (1 << 30)), ("vmlinuz-header", 8)] {
        let img = a.damaged(&dir, name, |d| d[o..o + 4].copy_from_slice(&((to - o as i64) as i32).to_le_bytes()));
        let want = format!(
            "__ksymtab entry * (kfree) at {:#x}: the export's address {:#x} lies outside the kernel image (past its 64-byte boot header, up to the header's image_size, {size:#x})",
            KIMAGE_VADDR + o as u64,
            KIMAGE_VADDR + to as u64
        );
        a.refused(&img, &dir, &want);
    }
}

/// Debian's arm64 Image holds one export per entry found by hand, as many
/// as Module.symvers lists for vmlinux (10,973 in the reference); kfree's
/// name with a byte made 0x01 refuses the Image in one line naming the
/// entry, where before 2,303 exports (those on the shorter side of it)
/// were dropped without a word.
#[test]
fn one_bad_export_name_refuses_the_arm64_image_instead_of_dropping_exports() {
    let test = "one_bad_export_name_refuses_the_arm64_image_instead_of_dropping_exports";
    let Some(a) = Arm64::new(test) else { return };
    let (k, entries) = (a.k, &a.entries);
    let info = run(&[&"kernel-info", &"--json", &k.vmlinuz]);
    assert!(info.status.success(), "{}", stderr(&info));
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["exports"].as_u64(), Some(entries.len() as u64), "every entry is an export");
    if let Some(sv) = arm64::symvers(test, k) {
        assert_eq!(entries.len(), arm64::read_symvers(&sv).vmlinux.len(), "as many as Module.symvers lists");
        if reference(test, k) {
            assert_eq!(entries.len(), 10_973);
        }
    }
    let (o, at) = entry_named(&a.real, entries, "kfree");
    let dir = tmpdir("hostile-bad-name");
    let img = a.damaged(&dir, "vmlinuz", |d| d[at + 1] = 0x01);
    let want = format!(
        "arm64 Image: the export entry at {o:#x}, * the * entries at *: its name \"k\\x01ree\" is not a symbol name"
    );
    a.refused(&img, &dir, &want);
}

/// The name offset of the first and of the last export entry of
/// Debian's arm64 Image pointed into the boot header's zeros: too few
/// entries lie beyond either to tell it is one, and before, the run of
/// entries simply ended short of it, dropping that export without a word
/// (10,972 exports read). Now its name, left named by no entry, refuses
/// the Image in one line naming it.
#[test]
fn a_damaged_first_or_last_arm64_export_entry_refuses_the_image() {
    let Some(a) = Arm64::new("a_damaged_first_or_last_arm64_export_entry_refuses_the_image") else { return };
    let dir = tmpdir("hostile-edge-entry");
    for (which, o) in [("first", a.entries[0]), ("last", *a.entries.last().unwrap())] {
        let (at, name) = name_at(&a.real, o);
        let name = String::from_utf8(name.to_vec()).unwrap();
        let img = a.damaged(&dir, &format!("vmlinuz-{which}"), |d| {
            d[o + 4..o + 8].copy_from_slice(&((0x28 - (o as i64 + 4)) as i32).to_le_bytes())
        });
        let want = format!("arm64 Image: the export name \"{name}\" at {at:#x} is named by none of the * entries at *");
        a.refused(&img, &dir, &want);
    }
}

/// Where section `name` of the ELF `d` has its header.
fn section_header(d: &[u8], name: &str) -> usize {
    let shoff = u64_at(d, 0x28) as usize;
    let n = u16::from_le_bytes(d[0x3c..0x3e].try_into().unwrap()) as usize;
    let strndx = u16::from_le_bytes(d[0x3e..0x40].try_into().unwrap()) as usize;
    let names = u64_at(d, shoff + 64 * strndx + 24) as usize;
    (0..n)
        .map(|i| shoff + 64 * i)
        .find(|&h| {
            let at = names + u32::from_le_bytes(d[h..h + 4].try_into().unwrap()) as usize;
            d[at..].starts_with(name.as_bytes()) && d[at + name.len()] == 0
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// A copy of the module `plain` with its `.gnu.linkonce.this_module`
/// `by` bytes longer (another kernel's struct module): the section copied
/// before the section header table (which stays last, where the module
/// editors want it), zeros after it.
fn grown_this_module(plain: &Path, dir: &Path, name: &str, by: usize) -> PathBuf {
    damaged_copy(plain, dir, name, |d| {
        let h = section_header(d, ".gnu.linkonce.this_module");
        let size = u64_at(d, h + 32) as usize;
        let shoff = u64_at(d, 0x28) as usize;
        let off = u64_at(d, h + 24) as usize;
        let section = d[off..off + size].to_vec();
        let headers = d.split_off(shoff);
        d.resize(d.len().next_multiple_of(64), 0);
        let at = d.len() as u64;
        d.extend_from_slice(&section);
        d.extend(std::iter::repeat_n(0u8, by));
        let new_shoff = d.len();
        d.extend_from_slice(&headers);
        d[0x28..0x30].copy_from_slice(&(new_shoff as u64).to_le_bytes());
        let h = h - shoff + new_shoff;
        d[h + 24..h + 32].copy_from_slice(&at.to_le_bytes());
        d[h + 32..h + 40].copy_from_slice(&((size + by) as u64).to_le_bytes());
    })
}

/// Debian's arm64 fat.ko against Debian's arm64 Image: an Image has no
/// section headers, but it keeps the vmlinux's `.BTF` (found by its
/// header), so struct module's size is checked as x86's is. A copy whose
/// `.gnu.linkonce.this_module` is 64 bytes longer (another kernel's
/// struct module) is refused by preresolve in one line naming both sizes,
/// nothing written; before, an arm64 module was checked only against the
/// 64-byte bound and written. The module as Debian ships it is
/// preresolved.
#[test]
fn an_arm64_module_of_another_struct_module_size_is_refused() {
    let Some(Arm64 { k, .. }) = Arm64::new("an_arm64_module_of_another_struct_module_size_is_refused") else { return };
    let dir = tmpdir("hostile-arm64-this-module");
    let fat = k.modules.join("kernel/fs/fat/fat.ko");
    let (bytes, _) = bootlink::module::load_bytes(&fat).unwrap();
    let (elf_len, _) = bootlink::module::split_signature(&bytes).unwrap();
    let plain = dir.join("fat-plain.ko");
    std::fs::write(&plain, &bytes[..elf_len]).unwrap();
    let h = section_header(&bytes[..elf_len], ".gnu.linkonce.this_module");
    let size = u64_at(&bytes, h + 32);
    assert_eq!(size % 64, 0, "Debian's arm64 struct module: {size} bytes");
    let other = grown_this_module(&plain, &dir, "fat-other.ko", 64);
    let out = dir.join("out");
    let want = format!(
        "built for another kernel: its .gnu.linkonce.this_module is {} bytes, the kernel's struct module {size} (its BTF)",
        size + 64
    );
    let image = &k.vmlinuz;
    let nokaslr = "--assume-nokaslr";
    refused(
        &[&"preresolve", &"--kernel", image, &nokaslr, &other, &"-o", &out],
        &other,
        &want,
        Some(&out.join("fat-other.ko")),
    );
    TestCommand::new(&[&"preresolve", &"--kernel", image, &nokaslr, &plain, &"-o", &out]).ok();
    assert!(out.join("fat-plain.ko").is_file());
}

/// Debian's vmlinux with `__modhashes` added as the series reserves it:
/// listed by `manifest write`. Its file offset moved onto `.text`, or its
/// address onto `.text`'s: refused naming the overlap, nothing written;
/// before, `manifest write` zeroed 256 KiB of the kernel's code in the
/// copy it wrote, exit 0.
#[test]
fn a_modhashes_section_over_the_kernel_code_is_refused() {
    let k = kernel();
    let dir = tmpdir("hostile-modhashes");
    let base = images::with_reserved_sections(&k.vmlinux, &dir, 64 << 10);
    let good = dir.join("vmlinux");
    std::fs::write(&good, &base).unwrap();
    let fat = module("fs/fat/fat.ko");
    let out = dir.join("vmlinux-listed");
    TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &good, &"-o", &out, &fat]).ok();
    let text = section_header(&base, ".text");
    let mh = section_header(&base, "__modhashes");
    let (text_off, text_addr) = (u64_at(&base, text + 24), u64_at(&base, text + 16));
    for (field, value, how) in [(24, text_off, "in the file"), (16, text_addr, "in memory")] {
        let img = damaged_copy(&good, &dir, "vmlinux-damaged", |d| {
            d[mh + field..mh + field + 8].copy_from_slice(&value.to_le_bytes())
        });
        let out = dir.join("out");
        let want =
            format!("corrupt ELF: __modhashes overlaps section 1 (.text) {how}: filling it would overwrite that");
        refused(&[&"manifest", &"write", &"--vmlinux", &img, &"-o", &out, &fat], &img, &want, Some(&out));
        refused(&[&"manifest", &"show", &img], &img, &want, None);
    }
}

/// Debian's fat.ko with `.gnu.linkonce.this_module` one byte short (895:
/// no struct module is, it is cache-line aligned) is refused by finalize
/// (and every module command); before, finalize wrote it, exit 0. One
/// whose section is copied before the section headers and made 960 bytes
/// (another kernel's struct module) is refused by finalize, preresolve and
/// symhash against Debian's vmlinuz, whose BTF gives 896 (before, all
/// three wrote it, exit 0); the module as Debian ships it is finalized.
#[test]
fn a_struct_module_of_another_size_is_refused() {
    let k = kernel();
    let dir = tmpdir("hostile-this-module");
    let fat = module("fs/fat/fat.ko");
    let (bytes, _) = bootlink::module::load_bytes(&fat).unwrap();
    let (elf_len, _) = bootlink::module::split_signature(&bytes).unwrap();
    let plain = dir.join("fat-plain.ko");
    std::fs::write(&plain, &bytes[..elf_len]).unwrap();
    let h = section_header(&bytes[..elf_len], ".gnu.linkonce.this_module");
    assert_eq!(u64_at(&bytes, h + 32), 896, "Debian's struct module");
    let short = damaged_copy(&plain, &dir, "fat-895.ko", |d| d[h + 32..h + 40].copy_from_slice(&895u64.to_le_bytes()));
    let other = grown_this_module(&plain, &dir, "fat-960.ko", 64);
    // The output directory is made before the modules are read: the
    // refused module must not be in it.
    let out = dir.join("out");
    let vmlinuz = &k.vmlinuz;
    let odd = "corrupt module: .gnu.linkonce.this_module is 895 bytes, not a multiple of 64";
    let short_out = out.join("fat-895.ko");
    refused(&[&"finalize", &"--kernel", vmlinuz, &short, &"-o", &out], &short, odd, Some(&short_out));
    refused(&[&"finalize", &short, &"-o", &out], &short, odd, Some(&short_out));
    let another = "built for another kernel: its .gnu.linkonce.this_module is 960 bytes, the kernel's struct module 896 (its BTF)";
    let other_out = out.join("fat-960.ko");
    refused(&[&"finalize", &"--kernel", vmlinuz, &other, &"-o", &out], &other, another, Some(&other_out));
    let nokaslr = "--assume-nokaslr";
    refused(&[&"preresolve", &"--kernel", vmlinuz, &nokaslr, &other, &"-o", &out], &other, another, Some(&other_out));
    refused(&[&"symhash", &"--kernel", vmlinuz, &other, &"-o", &out], &other, another, Some(&other_out));
    TestCommand::new(&[&"finalize", &"--kernel", vmlinuz, &plain, &"-o", &out]).ok();
    assert!(out.join("fat-plain.ko").is_file());
}

/// Runs of damaged export entries in Debian's arm64 Image, of 1 to 512
/// entries, at the tables' start, in the middle of `__ksymtab`, where
/// `__ksymtab_gpl` begins and at the end, each entry of the run zeroed,
/// made random bytes or given a name offset into the boot header's zeros:
/// every one refuses the Image (the tables are found by their shape, and
/// a run of 8 or more damaged entries is beyond what check_neighbours
/// looks at: what finds it is that the names of the entries it cuts off
/// are named by no entry taken). Before the edge-entry check, the Image
/// was read with the exports on the far side of the run dropped.
#[test]
fn runs_of_damaged_arm64_export_entries_refuse_the_image() {
    let test = "runs_of_damaged_arm64_export_entries_refuse_the_image";
    let Some(Arm64 { k, real, entries }) = Arm64::new(test) else { return };
    // __ksymtab_gpl begins where the sorted names fall.
    let gpl = (1..entries.len()).find(|&i| name_at(&real, entries[i]).1 <= name_at(&real, entries[i - 1]).1).unwrap();
    let dir = tmpdir("hostile-entry-runs");
    let whole = bootlink::kernel::KernelImage::open(&k.vmlinuz, None).unwrap().exports.len();
    assert_eq!(whole, entries.len());
    let mut rng = bootlink::rng::Rng(47);
    let mut failures = Vec::new();
    let mut tried = 0;
    for n in [1usize, 2, 3, 7, 8, 9, 16, 64, 512] {
        for (place, first) in
            [("first", 0), ("mid-__ksymtab", gpl / 2), ("at __ksymtab_gpl", gpl), ("last", entries.len() - n)]
        {
            for how in ["zeroed", "random", "name offset into the header"] {
                let mut d = real.clone();
                for &o in &entries[first..first + n] {
                    match how {
                        "zeroed" => d[o..o + 12].fill(0),
                        "random" => d[o..o + 12].iter_mut().for_each(|b| *b = rng.next_u64() as u8),
                        _ => d[o + 4..o + 8].copy_from_slice(&((0x28 - (o as i64 + 4)) as i32).to_le_bytes()),
                    }
                }
                let p = dir.join("vmlinuz");
                std::fs::write(&p, &d).unwrap();
                tried += 1;
                if let Ok(img) = bootlink::kernel::KernelImage::open(&p, None) {
                    failures.push(format!(
                        "{n} entries {how} from entry {first} ({place}): read, {} of {whole} exports",
                        img.exports.len()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {tried} damaged Images read:\n{}", failures.len(), failures.join("\n"));
    report(test, &format!("{tried} runs of damaged arm64 export entries (1 to 512 entries): every one refused"));
}
