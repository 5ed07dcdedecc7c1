//! End to end: boot the reference kernel's vmlinux under QEMU (TCG, PVH
//! entry, nokaslr) with an initramfs bootlink builds, read /proc/kallsyms
//! from the console, and check that every export bootlink reads from the
//! vmlinuz sits at the address the running kernel reports. Then feed the
//! kallsyms text to bootlink's System.map fallback and check that it finds
//! the same exports.

use crate::common;
use std::collections::HashMap;
use std::path::Path;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bootlink::fetch::{self, Fetched};
use bootlink::kernel::{Export, KernelImage};
use bootlink_lab::lab::{Initramfs, QemuOptions, TempDir, busybox, initramfs, qemu};

const TAG: &str = "kallsyms";
const CMDLINE: &str = "console=ttyS0 nokaslr panic=-1 oops=panic quiet";
/// Exports of symbols inside vmlinux of linux-image-6.1.0-56-amd64 6.1.192-2.
const REFERENCE_EXPORTS: usize = 10_503;

struct Sym {
    addr: u64,
    kind: char,
    name: String,
}

/// "ffffffff81000000 T _stext" lines; anything else (a stray kernel message)
/// is returned apart.
fn parse_kallsyms(text: &str) -> (Vec<Sym>, Vec<&str>) {
    let mut syms = Vec::new();
    let mut other = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        match (f.next(), f.next(), f.next(), f.next()) {
            (Some(a), Some(t), Some(name), None) if a.len() == 16 && t.len() == 1 => match u64::from_str_radix(a, 16) {
                Ok(addr) => syms.push(Sym { addr, kind: t.chars().next().unwrap(), name: name.to_string() }),
                Err(_) => other.push(line),
            },
            _ => other.push(line),
        }
    }
    (syms, other)
}

/// One boot, shared by the tests of this file.
struct Booted {
    fetched: Fetched,
    syms: Vec<Sym>,
    image: KernelImage,
}

static BOOTED: OnceLock<Result<Booted, String>> = OnceLock::new();

fn booted() -> &'static Booted {
    match BOOTED.get_or_init(boot_and_read) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

fn boot_and_read() -> Result<Booted, String> {
    let t0 = Instant::now();
    let f = fetch::fetch(&fetch::Request::Reference).map_err(|e| format!("fetching the reference kernel: {e}"))?;
    println!("kernel: {} {} ({})", f.package, f.version, f.vmlinux.display());
    // Decompressing the vmlinuz takes a while: do it while the guest boots.
    let vmlinuz = f.vmlinuz.clone();
    let reader = std::thread::spawn(move || KernelImage::open(&vmlinuz, None));

    let bb = busybox::busybox().map_err(|e| format!("busybox: {e}"))?;
    let tmp = TempDir::new("lab-boot").map_err(|e| e.to_string())?;
    let initrd = tmp.path().join("initrd.cpio");
    Initramfs::new(&bb)
        .tag(TAG)
        .body("echo 0 > /proc/sys/kernel/kptr_restrict\ncat /proc/kallsyms\n")
        .write(&initrd)
        .map_err(|e| format!("building the initramfs: {e}"))?;
    println!("initramfs: {} bytes", std::fs::metadata(&initrd).map(|m| m.len()).unwrap_or(0));

    let opts = QemuOptions {
        initrd: Some(initrd),
        cmdline: CMDLINE.into(),
        timeout: Duration::from_secs(45),
        ..QemuOptions::new(&f.vmlinux)
    };
    let boot = qemu::run(&opts).map_err(|e| e.to_string())?;
    println!(
        "boot: {} in {:.2} s wall, {} console bytes",
        boot.status.describe(),
        boot.wall.as_secs_f64(),
        boot.log.len()
    );
    boot.check().map_err(|e| format!("{e}\ncommand: {}", boot.command))?;
    let text = boot.framed(TAG).ok_or_else(|| format!("no framed output; console ends:\n{}", boot.excerpt(40)))?;
    if initramfs::body_status(&boot.log, TAG) != Some(0) {
        return Err(format!("the body failed:\n{}", boot.excerpt(40)));
    }
    let (syms, other) = parse_kallsyms(&text);
    println!("kallsyms: {} symbols, {} other lines", syms.len(), other.len());
    for l in other.iter().take(5) {
        println!("  other: {l:?}");
    }
    let image = reader.join().map_err(|_| "reading the vmlinuz panicked".to_string())?.map_err(|e| e.to_string())?;
    println!("exports read from {}: {}", image.path.display(), image.exports.len());
    println!("boot and read: {:.1} s", t0.elapsed().as_secs_f64());
    Ok(Booted { fetched: f, syms, image })
}

/// A name can be in kallsyms more than once (static symbols of the same
/// name); an export is the global one.
fn by_name(syms: &[Sym]) -> HashMap<&str, Vec<&Sym>> {
    let mut m: HashMap<&str, Vec<&Sym>> = HashMap::new();
    for s in syms {
        m.entry(s.name.as_str()).or_default().push(s);
    }
    m
}

fn describe(entries: Option<&Vec<&Sym>>) -> String {
    entries
        .map(|v| v.iter().map(|s| format!("{:#x} {}", s.addr, s.kind)).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|| "none".into())
}

#[test]
fn booted_kallsyms_match_vmlinuz_exports() {
    let b = booted();
    let syms = &b.syms;
    assert!(syms.len() > 50_000, "only {} kallsyms lines", syms.len());
    assert!(
        syms.iter().any(|s| s.name == "_stext" && s.addr == 0xffff_ffff_8100_0000),
        "kernel not at its link address"
    );
    if common::reference("booted_kallsyms_match_vmlinuz_exports: export count", &b.fetched) {
        assert_eq!(b.image.exports.len(), REFERENCE_EXPORTS);
    }
    let names = by_name(syms);
    // A Debian kernel exports ten thousand symbols; an empty list must not pass.
    assert!(b.image.exports.len() > 10_000, "only {} exports read", b.image.exports.len());
    let mut mismatches = Vec::new();
    for e in &b.image.exports {
        let found = names.get(e.name.as_str());
        let sym = found.and_then(|v| v.iter().find(|s| s.kind.is_ascii_uppercase()).or(v.first()));
        if sym.map(|s| s.addr) != Some(e.addr) {
            mismatches.push(format!("{}: bootlink {:#x}, kallsyms {}", e.name, e.addr, describe(found)));
        }
    }
    println!("compared {} exports with kallsyms: {} mismatches", b.image.exports.len(), mismatches.len());
    for m in mismatches.iter().take(20) {
        println!("  mismatch: {m}");
    }
    assert_eq!(mismatches.len(), 0, "first: {:?}", &mismatches[..mismatches.len().min(5)]);
}

/// The kallsyms text as a System.map, with Debian's Module.symvers beside
/// it: bootlink's fallback must find the exports the vmlinuz holds.
#[test]
fn system_map_fallback_matches_vmlinuz_exports() {
    let release = &booted().fetched.release;
    let symvers = Path::new("/usr/src").join(format!("linux-headers-{release}")).join("Module.symvers");
    if !symvers.is_file() {
        common::skip("System.map check", &format!("{} is absent (package linux-headers-{release})", symvers.display()));
        return;
    }
    let b = booted();
    let tmp = TempDir::new("lab-sysmap").unwrap();
    let mut map = String::with_capacity(b.syms.len() * 48);
    for s in &b.syms {
        map.push_str(&format!("{:016x} {} {}\n", s.addr, s.kind, s.name));
    }
    let map_path = tmp.path().join("System.map");
    std::fs::write(&map_path, map).unwrap();
    std::fs::copy(&symvers, tmp.path().join("Module.symvers")).unwrap();

    let fallback = KernelImage::open(&map_path, None).expect("open the System.map");
    println!("System.map fallback ({}): {} exports", fallback.source.describe(), fallback.exports.len());
    let want: HashMap<&str, &Export> = b.image.export_map();
    let got: HashMap<&str, &Export> = fallback.export_map();
    let mut missing: Vec<&str> = want.keys().filter(|n| !got.contains_key(*n)).copied().collect();
    let mut extra: Vec<&str> = got.keys().filter(|n| !want.contains_key(*n)).copied().collect();
    missing.sort();
    extra.sort();
    let names = by_name(&b.syms);
    let mut differ = Vec::new();
    for (name, w) in &want {
        let Some(g) = got.get(name) else { continue };
        if (g.addr, g.gpl, &g.namespace, g.crc) != (w.addr, w.gpl, &w.namespace, w.crc) {
            differ.push(format!(
                "{name}: vmlinuz ({:#x}, gpl {}, ns {:?}, crc {:x?}), System.map ({:#x}, gpl {}, ns {:?}, crc {:x?}); kallsyms has {}",
                w.addr, w.gpl, w.namespace, w.crc, g.addr, g.gpl, g.namespace, g.crc, describe(names.get(name))
            ));
        }
    }
    differ.sort();
    println!(
        "System.map vs vmlinuz: {} in both, {} only in the vmlinuz, {} only in the System.map, {} differ",
        want.len() - missing.len(),
        missing.len(),
        extra.len(),
        differ.len()
    );
    for m in missing.iter().take(5) {
        println!("  only in the vmlinuz: {m}");
    }
    for m in extra.iter().take(5) {
        println!("  only in the System.map: {m}");
    }
    for d in differ.iter().take(10) {
        println!("  differ: {d}");
    }
    assert_eq!(fallback.exports.len(), got.len(), "duplicate exports in the System.map fallback");
    assert!(missing.is_empty(), "{} exports missing from the System.map fallback", missing.len());
    assert!(extra.is_empty(), "{} exports only in the System.map fallback", extra.len());
    assert!(differ.is_empty(), "{} exports differ; first: {}", differ.len(), differ[0]);
}
