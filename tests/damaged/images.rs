#![allow(dead_code)]
//! The damaged-input generator for what a kernel image says of itself
//! (issue 47, part B): from a real image and a seed, copies damaged one
//! way each in a value a command would otherwise take from the image and
//! write somewhere: an arm64 Image's boot header (text_offset, flags,
//! image_size), an export entry (its value outside the kernel, its name's
//! bytes, its name offset, its namespace), a section reserved for a host
//! tool to fill (`__modhashes`, `__ksymhash`) placed over other bytes of
//! the file or other addresses; and a module whose struct module
//! (`.gnu.linkonce.this_module`) is of a size no kernel's is. The images
//! are read by hand here, not through bootlink's reader.
//!
//! [`run`] takes every damaged image through every command that takes a
//! kernel image: a command that reads the damaged part must refuse the
//! image in one line giving the class's reason and write nothing; any
//! other must do exactly what it does with the undamaged image.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use bootlink::rng::Rng;

use super::generate::{Damaged, put32, put64, u16_at, u32_at, u64_at};
use super::suite::{self, Counts};

/// The reason a refusal of an image or module damaged by `class` gives.
pub fn reason(class: &str) -> &'static [&'static str] {
    match class {
        // A nonzero text_offset in a 6.1 Image (head.S writes 0 since 5.8).
        "arm64-text-offset" => &["text_offset * where a kernel since 5.8 has 0"],
        // A flag bit above bit 3 (reserved, 0) set.
        "arm64-reserved-flags" => &["flags * set reserved bits"],
        // image_size 0, not a multiple of 64 KiB, 2 GiB or more, before the
        // export names, or other than the EFI stub's SizeOfImage.
        "arm64-image-size" => &["damaged arm64 Image header: image_size "],
        // An entry's value moved past the end of the kernel (image_size)
        // or before its first bytes.
        "export-outside-image" => &["the export's address * lies outside the kernel image"],
        // An entry's value moved outside every allocated section.
        "export-outside-sections" => &["the export's address * lies outside the kernel's code and data"],
        // A byte of an export's name made unprintable.
        "export-name-bad-bytes" => &["its name * is not a symbol name"],
        // An entry's name offset pointed outside the strings (vmlinux:
        // outside __ksymtab_strings; Image: outside it, or at no name).
        "export-name-pointer-wild" => {
            &["lies outside __ksymtab_strings", "among no export names", "points outside the Image"]
        }
        // A byte of a namespace string made unprintable.
        "export-namespace-bad" => &["namespace * is not printable"],
        // The name offset of one of the first two or last two entries made
        // wild (as export-name-pointer-wild): too few entries lie beyond it
        // to tell it is one, but its name is left named by no entry.
        "export-name-pointer-edge" => &["is named by none of the"],
        // The reserved section's file offset moved onto another's bytes,
        // the ELF header or the section header table.
        "modhashes-overlaps-file" | "ksymhash-overlaps-file" => &["overlaps * in the file"],
        // Its address moved onto another loaded section's.
        "modhashes-overlaps-memory" | "ksymhash-overlaps-memory" => &["overlaps * in memory"],
        // .gnu.linkonce.this_module 1 to 63 bytes short of whole cache lines.
        "this-module-odd-size" => &["is * bytes, not a multiple of 64"],
        _ => panic!("no reason for the damage class {class}"),
    }
}

/// One section header of an undamaged ELF64 file.
#[derive(Debug, Clone)]
struct Section {
    name: String,
    /// File offset of its header.
    header: usize,
    ty: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
}

const SHF_ALLOC: u64 = 2;
const SHT_NOBITS: u32 = 8;

fn sections(d: &[u8]) -> Vec<Section> {
    let shoff = u64_at(d, 0x28) as usize;
    let count = u16_at(d, 0x3c) as usize;
    let strndx = u16_at(d, 0x3e) as usize;
    let names = u64_at(d, shoff + strndx * 64 + 24) as usize;
    (0..count)
        .map(|i| {
            let h = shoff + i * 64;
            let at = names + u32_at(d, h) as usize;
            let end = d[at..].iter().position(|&b| b == 0).unwrap();
            Section {
                name: String::from_utf8_lossy(&d[at..at + end]).into_owned(),
                header: h,
                ty: u32_at(d, h + 4),
                flags: u64_at(d, h + 8),
                addr: u64_at(d, h + 16),
                offset: u64_at(d, h + 24),
                size: u64_at(d, h + 32),
            }
        })
        .collect()
}

fn named<'a>(s: &'a [Section], name: &str) -> Option<&'a Section> {
    s.iter().find(|x| x.name == name)
}

fn i32_at(d: &[u8], at: usize) -> i32 {
    u32_at(d, at) as i32
}

/// A byte no symbol name holds (a control character, DEL or non-ASCII).
fn unprintable(rng: &mut Rng) -> u8 {
    [1u8, 0x09, 0x0a, 0x1b, 0x7f, 0x80, 0xc3, 0xff][rng.below(8)]
}

/// Where a string at link address `addr` lies in the file, by the
/// section holding it.
fn file_offset(secs: &[Section], addr: u64) -> Option<usize> {
    secs.iter()
        .find(|s| s.ty != SHT_NOBITS && s.flags & SHF_ALLOC != 0 && (s.addr..s.addr + s.size).contains(&addr))
        .map(|s| (s.offset + (addr - s.addr)) as usize)
}

/// A vmlinux's PREL32 export entries: (file offset, link address) of each,
/// `__ksymtab` then `__ksymtab_gpl`.
fn vmlinux_entries(secs: &[Section]) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for t in ["__ksymtab", "__ksymtab_gpl"] {
        let Some(s) = named(secs, t) else { continue };
        assert_eq!(s.size % 12, 0, "{t}: not PREL32 entries");
        out.extend((0..s.size / 12).map(|i| ((s.offset + 12 * i) as usize, s.addr + 12 * i)));
    }
    out
}

/// The link address field `k` (0 value, 1 name, 2 namespace) of the PREL32
/// entry at file offset `fo`, link address `addr`, points to.
fn prel32_target(d: &[u8], fo: usize, addr: u64, k: usize) -> u64 {
    (addr + 4 * k as u64).wrapping_add(i32_at(d, fo + 4 * k) as i64 as u64)
}

/// `per_class` damaged copies of the x86-64 vmlinux `base` for every class
/// that applies to it (the reserved-section classes need `__modhashes` or
/// `__ksymhash` in it).
pub fn vmlinux(base: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let secs = sections(base);
    let entries = vmlinux_entries(&secs);
    assert!(entries.len() >= 4, "a vmlinux with exports");
    let strings = named(&secs, "__ksymtab_strings").expect("__ksymtab_strings");
    let alloc: Vec<&Section> = secs.iter().filter(|s| s.flags & SHF_ALLOC != 0 && s.size > 0).collect();
    let inside = |a: u64| alloc.iter().any(|s| (s.addr..s.addr + s.size).contains(&a));
    let with_namespace: Vec<(usize, u64)> = entries
        .iter()
        .copied()
        .filter(|&(fo, _)| i32_at(base, fo + 8) != 0)
        .filter(|&(fo, a)| file_offset(&secs, prel32_target(base, fo, a, 2)).is_some_and(|o| base[o] != 0))
        .collect();
    let mut out = Vec::new();
    for &class in VMLINUX_CLASSES {
        for k in 0..per_class {
            let mut d = base.to_vec();
            let (fo, addr) = entries[rng.below(entries.len())];
            let done = match class {
                "export-outside-sections" => {
                    // 16 MiB below the lowest loaded section above 0, or
                    // past the highest one's end.
                    let lo = alloc.iter().map(|s| s.addr).filter(|&a| a != 0).min().unwrap();
                    let hi = alloc.iter().map(|s| s.addr + s.size).max().unwrap();
                    let target = [lo - (16 << 20) + rng.below(4096) as u64, hi + (1 << 20) + rng.below(4096) as u64]
                        [rng.below(2)];
                    assert!(!inside(target));
                    put32(&mut d, fo, target.wrapping_sub(addr) as u32);
                    true
                }
                "export-name-bad-bytes" => {
                    let at = file_offset(&secs, prel32_target(base, fo, addr, 1)).unwrap();
                    let len = base[at..].iter().position(|&b| b == 0).unwrap();
                    let i = at + rng.below(len);
                    d[i] = unprintable(rng);
                    true
                }
                "export-name-pointer-wild" => {
                    // Before the strings, or past them: inside the image.
                    let target =
                        [strings.addr - 1 - rng.below(64) as u64, strings.addr + strings.size + rng.below(64) as u64]
                            [rng.below(2)];
                    put32(&mut d, fo + 4, target.wrapping_sub(addr + 4) as u32);
                    true
                }
                "export-namespace-bad" => match with_namespace.get(rng.below(with_namespace.len().max(1))) {
                    Some(&(fo, addr)) => {
                        let at = file_offset(&secs, prel32_target(base, fo, addr, 2)).unwrap();
                        let len = base[at..].iter().position(|&b| b == 0).unwrap();
                        let i = at + rng.below(len);
                        d[i] = unprintable(rng);
                        true
                    }
                    None => false,
                },
                c => reserved_overlap(c, &mut d, &secs, rng),
            };
            if done {
                out.push(Damaged {
                    name: format!("vmlinux-{class}-{k}"),
                    class,
                    bytes: d,
                    invalid: true,
                    reason: reason(class),
                });
            }
        }
    }
    out
}

pub const VMLINUX_CLASSES: &[&str] = &[
    "export-outside-sections",
    "export-name-bad-bytes",
    "export-name-pointer-wild",
    "export-namespace-bad",
    "modhashes-overlaps-file",
    "modhashes-overlaps-memory",
    "ksymhash-overlaps-file",
    "ksymhash-overlaps-memory",
];

/// Move a reserved section (`__modhashes` or `__ksymhash`, by `class`)
/// onto other bytes of the file (another section with data, the ELF
/// header, the section header table) or onto another loaded section's
/// addresses. False when the image has no such section.
fn reserved_overlap(class: &str, d: &mut [u8], secs: &[Section], rng: &mut Rng) -> bool {
    let (name, other) =
        if class.starts_with("modhashes") { ("__modhashes", "__ksymhash") } else { ("__ksymhash", "__modhashes") };
    let Some(r) = named(secs, name) else { return false };
    // Never onto the other reserved section: its readers would then refuse
    // the image too, for a damage that is not theirs.
    let other = named(secs, other);
    let clear = |at: u64, of: fn(&Section) -> u64| other.is_none_or(|o| at + r.size <= of(o) || of(o) + o.size <= at);
    let others: Vec<&Section> =
        secs.iter().filter(|s| s.name != name && Some(s.name.as_str()) != other.map(|o| o.name.as_str())).collect();
    let others: Vec<&Section> = others.into_iter().filter(|s| !s.name.is_empty() && s.size > 0).collect();
    for _ in 0..64 {
        if class.ends_with("-file") {
            let with_data: Vec<&Section> = others.iter().copied().filter(|s| s.ty != SHT_NOBITS).collect();
            let shoff = u64_at(d, 0x28);
            let at = match rng.below(4) {
                0 => 0,
                1 => shoff + rng.below(64) as u64,
                _ => {
                    let s = with_data[rng.below(with_data.len())];
                    s.offset + rng.below(s.size.min(4096) as usize) as u64
                }
            };
            // Still inside the file (else it is refused as outside it): the
            // bytes up to its end then hold what `at` was on.
            let at = at.min(d.len() as u64 - r.size);
            if clear(at, |s| s.offset) {
                put64(d, r.header + 24, at);
                return true;
            }
        } else {
            let loaded: Vec<&Section> = others.iter().copied().filter(|s| s.flags & SHF_ALLOC != 0).collect();
            let s = loaded[rng.below(loaded.len())];
            let at = s.addr + rng.below(s.size.min(4096) as usize) as u64;
            if clear(at, |s| s.addr) {
                put64(d, r.header + 16, at);
                return true;
            }
        }
    }
    false
}

/// An arm64 Image's export entries, found by hand: the entry whose name
/// offset (PREL32, the entry's second field) points at the name "kfree",
/// then its neighbours on both sides while each names a string of C
/// identifier characters: the offsets of the entries, in order.
pub fn arm64_entries(d: &[u8]) -> Vec<usize> {
    let names_ok = |o: usize| -> bool {
        let Some(t) = (o as i64 + 4).checked_add(i32_at(d, o + 4) as i64) else { return false };
        if t < 0 || t as usize >= d.len() {
            return false;
        }
        let s = &d[t as usize..d.len().min(t as usize + 256)];
        match s.iter().position(|&b| b == 0) {
            Some(n) if n > 0 => s[..n].iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.'),
            _ => false,
        }
    };
    let kfree = (0..d.len() - 16).step_by(4).find(|&o| {
        let t = o as i64 + 4 + i32_at(d, o + 4) as i64;
        t >= 1 && (t as usize) + 6 <= d.len() && &d[t as usize..t as usize + 6] == b"kfree\0" && names_ok(o)
    });
    let kfree = kfree.expect("an export entry naming kfree in the arm64 Image");
    let mut start = kfree;
    while start >= 12 && names_ok(start - 12) {
        start -= 12;
    }
    let mut end = kfree;
    while end + 24 <= d.len() && names_ok(end + 12) {
        end += 12;
    }
    (start..=end).step_by(12).collect()
}

pub const ARM64_CLASSES: &[&str] = &[
    "arm64-text-offset",
    "arm64-reserved-flags",
    "arm64-image-size",
    "export-outside-image",
    "export-name-bad-bytes",
    "export-name-pointer-wild",
    "export-namespace-bad",
    "export-name-pointer-edge",
];

/// `per_class` damaged copies of the arm64 Image `base` for every class.
/// `entries` are its export entries ([`arm64_entries`]). An entry damaged
/// in its name offset is one of the first two or last two of the tables
/// only in its own class (`export-name-pointer-edge`), whose line differs.
pub fn arm64(base: &[u8], entries: &[usize], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let size = u64_at(base, 16);
    let target = |d: &[u8], o: usize, k: usize| (o as i64 + 4 * k as i64 + i32_at(d, o + 4 * k) as i64) as usize;
    let with_namespace: Vec<usize> =
        entries.iter().copied().filter(|&o| i32_at(base, o + 8) != 0 && base[target(base, o, 2)] != 0).collect();
    let mut out = Vec::new();
    for &class in ARM64_CLASSES {
        for k in 0..per_class {
            let mut d = base.to_vec();
            let mut o = entries[2 + rng.below(entries.len() - 4)];
            if class == "export-name-pointer-edge" {
                let n = entries.len();
                o = entries[[0, 1, n - 2, n - 1][rng.below(4)]];
            }
            match class {
                "arm64-text-offset" => {
                    let v = [0x80000, 4096 * (1 + rng.below(511) as u64), rng.next_u64() | 1][rng.below(3)];
                    put64(&mut d, 8, v);
                }
                "arm64-reserved-flags" => {
                    let f = u64_at(&d, 24) | 1 << (4 + rng.below(60));
                    put64(&mut d, 24, f);
                }
                "arm64-image-size" => {
                    let v = [0, size - (64 << 10), size + (64 << 10), size | 0x1000, 1 << 31, 1 << 20][rng.below(6)];
                    put64(&mut d, 16, v);
                }
                "export-outside-image" => {
                    let t = [
                        size as i64 + (64 << 10) * (1 + rng.below(64) as i64),
                        -1 - rng.below(4096) as i64,
                        rng.below(64) as i64,
                    ][rng.below(3)];
                    put32(&mut d, o, (t - o as i64) as i32 as u32);
                }
                "export-name-bad-bytes" => {
                    let at = target(base, o, 1);
                    let len = base[at..].iter().position(|&b| b == 0).unwrap();
                    let i = at + rng.below(len);
                    d[i] = unprintable(rng);
                }
                "export-name-pointer-wild" | "export-name-pointer-edge" => {
                    // Past the end of the Image, before its start, or into
                    // the zeros of the boot header's reserved fields.
                    let t = [
                        d.len() as i64 + rng.below(1 << 20) as i64,
                        -1 - rng.below(1 << 20) as i64,
                        0x28 + rng.below(8) as i64,
                    ][rng.below(3)];
                    put32(&mut d, o + 4, (t - (o as i64 + 4)) as i32 as u32);
                }
                "export-namespace-bad" => {
                    let Some(&n) = with_namespace.get(rng.below(with_namespace.len().max(1))) else { continue };
                    let at = target(base, n, 2);
                    let len = base[at..].iter().position(|&b| b == 0).unwrap();
                    let i = at + rng.below(len);
                    d[i] = unprintable(rng);
                }
                _ => unreachable!("{class}"),
            }
            out.push(Damaged {
                name: format!("Image-{class}-{k}"),
                class,
                bytes: d,
                invalid: true,
                reason: reason(class),
            });
        }
    }
    out
}

pub const MODULE_CLASSES: &[&str] = &["this-module-odd-size"];

/// `per_class` damaged copies of module `base` (named `stem`): its
/// `.gnu.linkonce.this_module` 1 to 63 bytes shorter (struct module is
/// cache-line aligned: no kernel's is such a size).
pub fn modules(stem: &str, base: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let secs = sections(base);
    let Some(this) = named(&secs, ".gnu.linkonce.this_module") else { return Vec::new() };
    let mut out = Vec::new();
    for &class in MODULE_CLASSES {
        for k in 0..per_class {
            let mut d = base.to_vec();
            put64(&mut d, this.header + 32, this.size - 1 - rng.below(63) as u64);
            out.push(Damaged {
                name: format!("{class}-{k}-{stem}.ko"),
                class,
                bytes: d,
                invalid: true,
                reason: reason(class),
            });
        }
    }
    out
}

/// `vmlinux` with the two sections bootlink's patches reserve in a kernel
/// for it to fill after link, as their linker script makes them (loaded
/// read-only data at addresses of their own, here past every other
/// section's): `__ksymhash` (`ksymhash` bytes) and `__modhashes` (256 KiB,
/// as the series reserves), added by objcopy.
pub fn with_reserved_sections(vmlinux: &Path, dir: &Path, ksymhash: usize) -> Vec<u8> {
    with_reserved_sections_of(vmlinux, dir, ksymhash, 256 << 10)
}

/// The file offset and size of the section named `name` of an ELF64 file.
pub fn section_range(d: &[u8], name: &str) -> Option<(usize, usize)> {
    sections(d).into_iter().find(|s| s.name == name).map(|s| (s.offset as usize, s.size as usize))
}

/// [`with_reserved_sections`] with a `__modhashes` of `modhashes` bytes
/// (room for a manifest longer than the series reserves).
pub fn with_reserved_sections_of(vmlinux: &Path, dir: &Path, ksymhash: usize, modhashes: usize) -> Vec<u8> {
    let end = sections(&std::fs::read(vmlinux).unwrap())
        .iter()
        .filter(|s| s.flags & SHF_ALLOC != 0)
        .map(|s| s.addr + s.size)
        .max()
        .unwrap();
    let at = (end | ((2 << 20) - 1)) + 1;
    let zeros = |name: &str, len: usize| {
        let p = dir.join(name);
        std::fs::write(&p, vec![0u8; len]).unwrap();
        p
    };
    let (ksymhash_bin, modhashes_bin) = (zeros("ksymhash.bin", ksymhash), zeros("modhashes.bin", modhashes));
    let out = dir.join("vmlinux-reserved");
    let add = |name: &str, file: &Path, addr: u64| {
        [
            "--add-section".to_string(),
            format!("{name}={}", file.display()),
            "--set-section-flags".into(),
            format!("{name}=alloc,load,readonly,data"),
            "--change-section-address".into(),
            format!("{name}={addr:#x}"),
        ]
    };
    let mut args: Vec<String> = add("__ksymhash", &ksymhash_bin, at).into();
    args.extend(add("__modhashes", &modhashes_bin, at + (ksymhash as u64 | ((2 << 20) - 1)) + 1));
    args.extend([vmlinux.display().to_string(), out.display().to_string()]);
    let o = std::process::Command::new("objcopy").args(&args).output().expect("run objcopy");
    assert!(o.status.success(), "objcopy {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    let data = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    data
}

/// A lib/modules/<release> in `dir` holding `module`, for `apply --image`.
pub fn modules_dir(dir: &Path, release: &str, module: &Path) -> std::path::PathBuf {
    let m = dir.join("lib/modules").join(release);
    std::fs::create_dir_all(m.join("kernel")).unwrap();
    std::fs::copy(module, m.join("kernel").join(module.file_name().unwrap())).unwrap();
    m
}

/// A command that takes a kernel image: its label, its arguments given the
/// image and an output path, whether it writes the image itself (in
/// place), and the classes of damage it reads (it must refuse them).
/// A command's arguments given the image and an output path.
pub type ImageArgs<'a> = Box<dyn Fn(&Path, &Path) -> Vec<OsString> + 'a>;

pub struct ImageCommand<'a> {
    pub label: &'static str,
    pub args: ImageArgs<'a>,
    pub in_place: bool,
    pub reads: fn(&str) -> bool,
}

/// Damage to what a kernel image says of itself: its header, its exports.
fn header_or_exports(class: &str) -> bool {
    class.starts_with("arm64-") || class.starts_with("export-")
}

/// Those, or `__modhashes` placed over something else.
fn exports_or_modhashes(class: &str) -> bool {
    header_or_exports(class) || class.starts_with("modhashes-")
}

/// Those, or `__ksymhash` placed over something else.
fn exports_or_ksymhash(class: &str) -> bool {
    header_or_exports(class) || class.starts_with("ksymhash-")
}

fn modhashes_only(class: &str) -> bool {
    class.starts_with("modhashes-")
}

fn never(_: &str) -> bool {
    false
}

/// Every command that takes a kernel image (`bootlink --help`), with a
/// good `module` of that kernel and `mods` (a lib/modules/<release> holding
/// it) where one needs modules: what each reads of an image (of an arm64
/// Image when `arm64`). `manifest
/// show` reads only `__modhashes`; `symhash --vmlinux` fills `__ksymhash`
/// in place from the exports; `apply --image` plans (--dry-run) from the
/// image's exports and features.
pub fn commands<'a>(module: &'a Path, mods: &'a Path, arm64: bool) -> Vec<ImageCommand<'a>> {
    // An arm64 Image holds no ELF vmlinux: these refuse it whole.
    let elf_only = |reads: fn(&str) -> bool| if arm64 { never } else { reads };
    let os = |v: &[&dyn AsRef<std::ffi::OsStr>]| -> Vec<OsString> { v.iter().map(|a| a.as_ref().to_owned()).collect() };
    let cmd =
        |label, in_place, reads: fn(&str) -> bool, args: ImageArgs<'a>| ImageCommand { label, args, in_place, reads };
    vec![
        cmd("kernel-info", false, header_or_exports, Box::new(move |p, _| os(&[&"kernel-info", &p]))),
        cmd("inspect", false, header_or_exports, Box::new(move |p, _| os(&[&"inspect", &p, &module]))),
        cmd(
            "preresolve",
            false,
            header_or_exports,
            Box::new(move |p, o| os(&[&"preresolve", &"--kernel", &p, &"--assume-nokaslr", &module, &"-o", &o])),
        ),
        cmd(
            "preresolve --fold-symbols",
            false,
            header_or_exports,
            Box::new(move |p, o| {
                os(&[&"preresolve", &"--kernel", &p, &"--assume-nokaslr", &"--fold-symbols", &module, &"-o", &o])
            }),
        ),
        cmd(
            "finalize",
            false,
            header_or_exports,
            Box::new(move |p, o| os(&[&"finalize", &"--kernel", &p, &module, &"-o", &o])),
        ),
        cmd(
            "symhash",
            false,
            header_or_exports,
            Box::new(move |p, o| os(&[&"symhash", &"--kernel", &p, &module, &"-o", &o])),
        ),
        cmd(
            "symhash --vmlinux",
            true,
            elf_only(exports_or_ksymhash),
            Box::new(move |p, _| os(&[&"symhash", &"--vmlinux", &p])),
        ),
        cmd(
            "extract-vmlinux",
            false,
            elf_only(header_or_exports),
            Box::new(move |p, o| os(&[&"extract-vmlinux", &p, &"-o", &o])),
        ),
        cmd("manifest show", false, modhashes_only, Box::new(move |p, _| os(&[&"manifest", &"show", &p]))),
        cmd(
            "manifest write",
            false,
            exports_or_modhashes,
            Box::new(move |p, o| os(&[&"manifest", &"write", &"--vmlinux", &p, &"-o", &o, &module])),
        ),
        cmd(
            "apply --image",
            false,
            header_or_exports,
            Box::new(move |p, _| {
                os(&[
                    &"apply",
                    &"--image",
                    &p,
                    &"--modules",
                    &mods,
                    &"--assume-nokaslr",
                    &"--allow-unsigned",
                    &"--dry-run",
                ])
            }),
        ),
    ]
}

/// stderr with `path` said as IMAGE and `out` as OUT, for comparing two runs.
fn said(stderr: &str, path: &Path, out: &Path) -> String {
    stderr.replace(&*out.to_string_lossy(), "OUT").replace(&*path.to_string_lossy(), "IMAGE")
}

/// Every damaged image alone through every command: first the undamaged
/// `base` (named `name`), then each damaged copy under the same name.
/// Checked for each: no panic, no hang, every stderr line of a failure
/// `bootlink: ...`; a command that reads the class refuses the image in one
/// line `bootlink: IMAGE: ...` giving its reason, writes nothing (no
/// output, the image unchanged, no temporary file); any other exits and
/// says as it did with the undamaged image. Every failure is listed.
pub fn run(
    dir: &Path,
    name: &str,
    base: &[u8],
    files: &[Damaged],
    commands: &[ImageCommand],
    env: &[(&str, &str)],
    counts: &mut Counts,
) {
    std::fs::create_dir_all(dir).unwrap();
    let out_of = |d: &Path, label: &str| d.join(format!("out-{}", label.replace([' ', '-'], "_")));
    let base_dir = dir.join("undamaged");
    std::fs::create_dir_all(&base_dir).unwrap();
    let base_path = base_dir.join(name);
    let mut undamaged = Vec::new();
    std::fs::write(&base_path, base).unwrap();
    for c in commands {
        let out = out_of(&base_dir, c.label);
        let a = (c.args)(&base_path, &out);
        let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
        let r = suite::run_timed_env(&a, Duration::from_secs(120), env);
        undamaged.push((r.code, said(&r.stderr, &base_path, &out)));
        if c.in_place {
            std::fs::write(&base_path, base).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&base_dir);
    let mut failures = Vec::new();
    for (n, f) in files.iter().enumerate() {
        let d = dir.join(format!("{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join(name);
        counts.files += 1;
        counts.invalid += f.invalid as usize;
        counts.by_class.entry(f.class).or_default().0 += 1;
        std::fs::write(&path, &f.bytes).unwrap();
        for (c, (base_code, base_said)) in commands.iter().zip(&undamaged) {
            let out = out_of(&d, c.label);
            let a = (c.args)(&path, &out);
            let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
            let r = suite::run_timed_env(&a, Duration::from_secs(120), env);
            counts.runs += 1;
            let mut fail = |what: String| failures.push(format!("{} {} ({}): {what}", c.label, f.name, f.class));
            if let Some(line) = r.stderr.lines().filter(|_| r.code != 0).find(|l| !l.starts_with("bootlink: ")) {
                fail(format!("a stderr line not `bootlink: ...`: {line}"));
            }
            let prefix = format!("bootlink: {}:", path.display());
            let lines: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with(&prefix)).collect();
            let refused = r.code != 0 && lines.len() == 1;
            let e = counts.by_class.get_mut(f.class).unwrap();
            e.2 += 1;
            e.1 += refused as usize;
            if (c.reads)(f.class) {
                if !refused {
                    fail(format!("not refused in one line `bootlink: IMAGE: ...` (exit {}):\n{}", r.code, r.stderr));
                } else if !super::generate::gives_reason(lines[0], f) {
                    fail(format!("refused without its reason ({:?}): {}", f.reason, lines[0]));
                } else if r.stderr.lines().count() != 1 {
                    fail(format!("more than the image's line:\n{}", r.stderr));
                }
            } else if (r.code, said(&r.stderr, &path, &out)) != (*base_code, base_said.clone()) {
                fail(format!(
                    "does not read this damage, yet exits {} saying {:?}, where the undamaged image gave {base_code}, {base_said:?}",
                    r.code,
                    said(&r.stderr, &path, &out)
                ));
            }
            if r.code != 0 && out.exists() {
                fail(format!("refused but {} was written", out.display()));
            }
            if c.in_place && std::fs::read(&path).unwrap() != f.bytes {
                if r.code != 0 {
                    fail("refused but the image was written".into());
                }
                std::fs::write(&path, &f.bytes).unwrap();
            }
            let leftovers: Vec<String> = std::fs::read_dir(&d)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect();
            if !leftovers.is_empty() {
                fail(format!("temporary files left: {leftovers:?}"));
            }
            let _ = std::fs::remove_dir_all(&out);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
