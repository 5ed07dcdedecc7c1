//! `bootlink inspect` and `kernel-info` on Debian's arm64 kernel package
//! (linux-image-6.1.0-56-arm64 6.1.192-2, the x86 reference's version,
//! fetched as a foreign package), each figure checked against a count made
//! another way: the exports against Debian's own Module.symvers (from
//! linux-headers-6.1.0-56-arm64), their addresses against the Image's own
//! R_AARCH64_RELATIVE relocations, and the modules' undefined symbols
//! against binutils' `nm`; and the export addresses of Debian's newest
//! 6.12 arm64 Image against its own relocations. Without the package (dpkg does not know arm64,
//! or no network) each test is a counted skip.

use crate::common;

use std::collections::HashSet;

use bootlink::kernel::{Kaslr, KernelImage};
use common::arm64::*;
use common::independent;
use common::*;

#[test]
fn exports_of_the_arm64_image_equal_debians_module_symvers() {
    let test = "exports_of_the_arm64_image_equal_debians_module_symvers";
    let Some(k) = arm64(test) else { return };
    let img = KernelImage::open(&k.vmlinuz, None).unwrap();
    assert_eq!(img.machine, "aarch64");
    assert_eq!(img.source.describe(), "arm64 Image");
    assert_eq!(img.release.as_deref(), Some(k.release.as_str()));
    assert_eq!(img.vermagic.as_deref(), Some(format!("{} SMP mod_unload modversions aarch64", k.release).as_str()));
    assert!(matches!(img.kaslr, Kaslr::Possible { .. }), "{:?}", img.kaslr);
    let Some(path) = symvers(test, k) else { return };
    let theirs = read_symvers(&path).vmlinux;
    assert_eq!(img.exports.len(), theirs.len());
    for e in &img.exports {
        let t = theirs.get(&e.name).unwrap_or_else(|| panic!("{} not in Module.symvers", e.name));
        assert_eq!((e.crc, e.gpl, &e.namespace), (Some(t.0), t.1, &t.2), "{}", e.name);
    }
    let gpl = img.gpl_exports();
    println!(
        "{}: {} exports ({} + {} GPL-only) agree with {}",
        k.package,
        img.exports.len(),
        img.exports.len() - gpl,
        gpl,
        path.display()
    );
    if reference(test, k) {
        assert_eq!((img.exports.len(), gpl), (10_973, 6_085));
    }
}

/// Where the Image links `_text` and `_stext` (what the lab measures an
/// arm64 boot's KASLR slide against when its kallsyms has no `_text`):
/// `_stext` is where binutils' objdump, reading the Image as the PE file its
/// EFI stub makes it, places the `.text` section.
#[test]
fn the_images_stext_is_where_objdump_places_its_text_section() {
    let test = "the_images_stext_is_where_objdump_places_its_text_section";
    let Some(k) = arm64(test) else { return };
    let img = KernelImage::open(&k.vmlinuz, None).unwrap();
    let objdump = String::from_utf8(sh("aarch64-linux-gnu-objdump", &["-h", k.vmlinuz.to_str().unwrap()])).unwrap();
    let vma = objdump
        .lines()
        .find_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, ".text", _, vma, ..] => u64::from_str_radix(vma, 16).ok(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no .text in objdump -h:\n{objdump}"));
    let text = img.link_text().expect("_text from the Image header and its config");
    assert_eq!(text, 0xffff_8000_0800_0000, "KIMAGE_VADDR of 6.1 with 48-bit VAs, text_offset 0");
    assert_eq!(img.link_stext, Some(text + vma), "objdump: .text at {vma:#x}");
    println!("{}: _text {text:#x}, _stext {text:#x} + {vma:#x} (objdump's .text)", k.package);
}

/// The Image relocates itself (CONFIG_RELOCATABLE): its R_AARCH64_RELATIVE
/// entries (24 bytes, r_info 1027, 8-aligned) hold link-time addresses. A
/// function or object an export names is mostly also pointed at from data
/// (an ops table), so its address is some relocation's addend: true of
/// most exports at the right base, of almost none at a wrong one.
#[test]
fn export_addresses_are_the_images_own_relocation_targets() {
    let test = "export_addresses_are_the_images_own_relocation_targets";
    let Some(k) = arm64(test) else { return };
    // 6.1, VA_BITS 48: _PAGE_END(48) + MODULES_VSIZE (128 MiB).
    let hit = relocation_targets(k, 0xffff_8000_0800_0000, false);
    if reference(test, k) {
        assert_eq!(hit, 9_626);
    }
}

/// The same on Debian's newest 6.12 arm64 Image, whose module region below
/// the kernel is 2 GiB (MODULES_VSIZE is SZ_2G from 6.5): its exports were
/// placed 1.875 GiB too low while bootlink took every kernel for 6.1's
/// layout. 6.12 is built with `-fpatchable-function-entry=4,2`
/// (DYNAMIC_FTRACE_WITH_CALL_OPS): two NOPs before each function, and a
/// relocated record of each in `__patchable_function_entries` pointing at
/// the first, 8 bytes before the function's address: a target there counts
/// too (a wrong base hits neither).
#[test]
fn export_addresses_of_a_6_12_image_are_its_relocation_targets() {
    let test = "export_addresses_of_a_6_12_image_are_its_relocation_targets";
    let k = match bootlink::fetch::fetch_for(
        &bootlink::fetch::Request::Series("6.12".into()),
        bootlink::fetch::Arch::Arm64,
    ) {
        Ok(k) => k,
        Err(why) => return skip(test, &format!("Debian's 6.12 arm64 kernel package could not be fetched: {why}")),
    };
    assert!(k.release.starts_with("6.12."), "{}", k.release);
    // 6.12, VA_BITS 48: _PAGE_END(48) + MODULES_VSIZE (2 GiB).
    relocation_targets(&k, 0xffff_8000_8000_0000, true);
}

/// Checks that at least 80 % of the exports of `k`'s Image are targets of
/// its relative relocations (read at `kimage_vaddr`; `patchable`: or 8
/// bytes before them), almost none 4 bytes on, and all inside the image;
/// returns how many are.
fn relocation_targets(k: &bootlink::fetch::Fetched, kimage_vaddr: u64, patchable: bool) -> usize {
    let data = std::fs::read(&k.vmlinuz).unwrap();
    let u64_at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap());
    assert_eq!(&data[0x38..0x3c], b"ARM\x64");
    let image_size = u64_at(16);
    let mut addends = HashSet::new();
    let mut in_image = 0;
    for o in (8..data.len() - 16).step_by(8) {
        if u64_at(o) == 1027 {
            let (offset, addend) = (u64_at(o - 8), u64_at(o + 8));
            if (kimage_vaddr..kimage_vaddr + image_size).contains(&offset) {
                in_image += 1;
                addends.insert(addend);
            }
        }
    }
    assert!(in_image > 100_000, "{}: {in_image} relocations at {kimage_vaddr:#x}", k.package);
    let img = KernelImage::open(&k.vmlinuz, None).unwrap();
    let target = |a: u64| addends.contains(&a) || (patchable && addends.contains(&(a - 8)));
    let hit = img.exports.iter().filter(|e| target(e.addr)).count();
    let off = img.exports.iter().filter(|e| target(e.addr + 4)).count();
    println!(
        "{}: {in_image} relocations; {hit} of {} export addresses are targets ({off} at +4)",
        k.package,
        img.exports.len()
    );
    assert!(hit * 100 > img.exports.len() * 80 && off * 100 < img.exports.len(), "{hit} {off}");
    assert!(img.exports.iter().all(|e| (kimage_vaddr..kimage_vaddr + image_size).contains(&e.addr)));
    hit
}

#[test]
fn inspect_all_arm64_modules_against_an_independent_count() {
    let test = "inspect_all_arm64_modules_against_an_independent_count";
    let Some(k) = arm64(test) else { return };
    let Some(path) = symvers(test, k) else { return };
    let o = run(&[&"inspect", &"--json", &k.vmlinuz, &k.modules]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["errors"].as_array().unwrap().is_empty(), "{}", r["errors"]);
    assert_eq!(r["kernel"]["machine"], "aarch64");
    let t = &r["totals"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    println!("totals: {t}");

    // The same count from nm and Debian's Module.symvers.
    let want = independent::totals(&independent::undefined_by_nm(&k.modules), &read_symvers(&path));
    independent::assert_inspect_equals(&r, &want);
    if reference(test, k) {
        assert_eq!(n(&t["modules"]), 3_685);
        assert_eq!(n(&t["undefined"]), 162_021);
        assert_eq!(n(&t["vmlinux"]), 124_610);
        assert_eq!(n(&t["modules_only"]), 37_411);
        assert_eq!(n(&t["unresolved"]), 0);
        assert_eq!(n(&t["distinct_names"]), 17_253);
        assert_eq!(n(&t["fully_preresolvable"]), 1_086);
        assert_eq!(n(&t["no_undefined"]), 13);
        assert_eq!(n(&t["signed"]), 3_685);
    }
}

/// A module and a kernel of different machines are refused in one line
/// naming the module and both machines, either way round; an arm64 Image
/// is not extracted as if it held a vmlinux; and the rewriting commands
/// that do not handle arm64 yet (finalize, manifest) refuse the arm64
/// kernel in one line.
#[test]
fn mixed_machines_and_rewrites_are_refused_in_one_line() {
    let test = "mixed_machines_and_rewrites_are_refused_in_one_line";
    let Some(a) = arm64(test) else { return };
    let x = kernel();
    let fat_arm = a.modules.join("kernel/fs/fat/fat.ko");
    let fat_x86 = x.modules.join("kernel/fs/fat/fat.ko");
    for (k, good, m, want) in [
        (&a.vmlinuz, &fat_arm, &fat_x86, "a module for x86_64, the kernel is aarch64: not counted"),
        (&x.vmlinuz, &fat_x86, &fat_arm, "a module for aarch64, the kernel is x86_64: not counted"),
    ] {
        let o = run(&[&"inspect", &"--json", k, good, m]);
        assert_eq!(o.status.code(), Some(1), "a refused file fails the batch: {}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["totals"]["modules"], 1);
        let errors = r["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{r}");
        assert_eq!(errors[0]["path"], m.to_str().unwrap());
        let e = errors[0]["error"].as_str().unwrap();
        assert!(e.contains(want) && !e.contains('\n'), "{e}");
    }
    let o = run(&[&"finalize", &"--kernel", &a.vmlinuz, &"--dry-run", &fat_arm]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.starts_with(&format!("bootlink: {}: AArch64: nothing to finalize: ", a.vmlinuz.display())), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Into a scratch file (an output is never a device: -o /dev/null is
    // refused before the kernel is read).
    let dir = common::tmpdir("arm64-refusals");
    let out = dir.join("out");
    let o = run(&[&"manifest", &"write", &"--vmlinux", &a.vmlinuz, &"-o", &out, &fat_arm]);
    assert!(!o.status.success());
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let o = run(&[&"extract-vmlinux", &a.vmlinuz, &"-o", &out]);
    assert!(!o.status.success() && stderr(&o).contains("an arm64 Image holds no ELF vmlinux"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1);
    assert!(!out.exists());
}
