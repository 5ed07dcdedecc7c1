//! The booted kernel image read back from the lab's emulated flash
//! (`read:FLASH`): the check of the flash model `bootlink recommend`
//! computes read times with. QEMU loads `-kernel` in no guest time, so the
//! read a boot loader would do is modelled; this workload does that read in
//! the guest, once the modules are loaded: the image is written to a
//! null_blk device set up as [`crate::workload::order`]'s flash (one 4 KiB
//! request at a time, each completing after the flash's request time on a
//! guest timer), the page cache dropped, readahead off, and read with
//! 4 KiB `dd` blocks between two kernel log marks. What it measures beyond
//! the model is the guest's own block layer per request, which a boot
//! loader reading raw flash does not pay as such.

pub mod record;
pub mod workload;

use std::path::{Path, PathBuf};

use crate::lab::Initramfs;
use crate::workload::imageread::record::ImageRead;
use crate::workload::order::{FLASH_MODULES, Flash, REQUEST, guest_modules, null_blk_params};
use bootlink::error::{Error, Kind, Result};
use bootlink::kernel::KernelConfig;

pub const SECTION: &str = "@@@ bootlink image read @@@";
const DIR: &str = "/bootlink-read";

/// `read:FLASH` of a lab variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub flash: Flash,
}

/// The device's modules of the variant's tree (refused before booting when
/// it has neither the modules nor them built in).
pub fn check(tree: &Path) -> Result<Vec<(String, PathBuf)>> {
    guest_modules(tree, &FLASH_MODULES, "read")
}

/// The device's completions are guest hrtimers: without high-resolution
/// timers they fire on the next tick (4 ms at CONFIG_HZ=250, the lab
/// build's), not after the flash's request time. Refused then, and when
/// the kernel's configuration is not known.
pub fn check_timers(config: Option<&KernelConfig>, variant: &str) -> Result<()> {
    let Some(c) = config else {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "variant {variant}: read: the kernel's configuration is not known, so neither is whether its timers are high-resolution (null_blk's completions need them)"
            ),
        ));
    };
    if c.get("CONFIG_HIGH_RES_TIMERS") != Some("y") {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "variant {variant}: read: this kernel has no high-resolution timers (CONFIG_HIGH_RES_TIMERS), so null_blk's completions wait for the next tick (CONFIG_HZ={}), not the flash's request time; read on a kernel that has them (kernel:debian)",
                c.get("CONFIG_HZ").unwrap_or("?")
            ),
        ));
    }
    Ok(())
}

/// What the model says reading `bytes` takes (microseconds).
pub fn model_us(bytes: u64, flash: Flash) -> f64 {
    bytes.div_ceil(REQUEST) as f64 * flash.request_ns() as f64 / 1000.0
}

/// The image and the device's modules into the initramfs.
pub(crate) fn add_to(ir: &mut Initramfs, image: &Path, modules: &[(String, PathBuf)]) {
    ir.copy_file(&format!("{DIR}/image"), image);
    for (name, f) in modules {
        ir.copy_file(&format!("{DIR}/{name}.ko"), f);
    }
}

/// The part of /init that reads the image back: `bytes` is its size.
pub(crate) fn script(spec: &Spec, modules: &[(String, PathBuf)], bytes: u64) -> String {
    let mut s = String::new();
    for (name, _) in modules {
        let params = if name == "null_blk" { null_blk_params(1, spec.flash) } else { String::new() };
        s.push_str(&format!("insmod {DIR}/{name}.ko{params} || echo 'bootlink: read cannot load {name}'\n"));
    }
    s.push_str(&format!(
        "echo {} > /sys/block/nullb0/queue/max_sectors_kb\n\
         dd if={DIR}/image of=/dev/nullb0 bs=65536 conv=fsync 2>/dev/null\n\
         echo 0 > /sys/block/nullb0/queue/read_ahead_kb\n\
         echo 3 > /proc/sys/vm/drop_caches\n\
         read rd0 < /sys/block/nullb0/stat\n\
         echo 'bootlink: image read start' > /dev/kmsg\n\
         dd if=/dev/nullb0 of=/dev/null bs={REQUEST} count={} 2>/dev/null\n\
         echo 'bootlink: image read end' > /dev/kmsg\n\
         read rd1 < /sys/block/nullb0/stat\n\
         echo '{SECTION}'\necho \"dev0 $rd0\"\necho \"dev1 $rd1\"\n",
        REQUEST / 1024,
        bytes.div_ceil(REQUEST),
    ));
    s
}

/// The read from the boot's console: the device's read requests (first
/// field of `/sys/block/DEV/stat`) before and after, the marks' times.
pub(crate) fn parse(main: &str, dmesg: &str, spec: &Spec, bytes: u64) -> ImageRead {
    let stat = |key: &str| -> Option<u64> {
        let rest = main.split_once(SECTION)?.1;
        let line = rest.lines().find_map(|l| l.strip_prefix(key))?;
        line.split_whitespace().next()?.parse().ok()
    };
    let mark = |what: &str| {
        dmesg.lines().find_map(|l| {
            let (t, text) = crate::run::dmesg::timed_message(l.as_bytes())?;
            (text == format!("bootlink: image read {what}").as_bytes()).then_some(t)
        })
    };
    ImageRead {
        mib_s: spec.flash.mib_s,
        latency_us: spec.flash.latency_us,
        bytes,
        requests: stat("dev1 ").zip(stat("dev0 ")).map(|(b, a)| b.saturating_sub(a)),
        measured_us: mark("start").zip(mark("end")).map(|(a, b)| b - a),
        model_us: model_us(bytes, spec.flash),
    }
}

/// What is wrong with a read: not measured, another number of requests
/// than whole 4 KiB blocks, or quicker than the device can be.
pub fn problems(r: &ImageRead) -> Vec<String> {
    let mut out = Vec::new();
    let want = r.bytes.div_ceil(REQUEST);
    match r.requests {
        Some(n) if n == want => {}
        Some(n) => out.push(format!("read: the device served {n} read requests for {want} blocks of 4 KiB")),
        None => out.push("read: no device statistics in the console".into()),
    }
    match r.measured_us {
        Some(t) if t < r.model_us => {
            out.push(format!("read: {t:.0} us, quicker than the flash model's {:.0} us", r.model_us))
        }
        Some(_) => {}
        None => out.push("read: no start and end marks in the kernel log".into()),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec { flash: Flash::NAND };

    #[test]
    fn the_model_is_the_flash_devices_request_time() {
        // 8 MiB/s and 50 us: 4 KiB take 538.28125 us
        assert_eq!(model_us(4096, Flash::NAND), 538.281);
        assert_eq!(model_us(4097, Flash::NAND), 2.0 * 538.281);
        let s = script(&SPEC, &[("null_blk".into(), "/x".into())], 10_000);
        assert!(s.contains("completion_nsec=538281") && s.contains("bs=4096 count=3"), "{s}");
    }

    #[test]
    fn the_device_needs_high_resolution_timers() {
        let lab = KernelConfig::parse("# CONFIG_HIGH_RES_TIMERS is not set\nCONFIG_HZ=250\n");
        let e = check_timers(Some(&lab), "v").unwrap_err().to_string();
        assert!(e.contains("CONFIG_HZ=250") && e.contains("variant v"), "{e}");
        assert!(check_timers(None, "v").unwrap_err().to_string().contains("not known"));
        assert!(check_timers(Some(&KernelConfig::parse("CONFIG_HIGH_RES_TIMERS=y\n")), "v").is_ok());
    }

    #[test]
    fn a_read_is_parsed_and_checked() {
        let main = format!("x\n{SECTION}\ndev0 5 0 40 0 0 0 0 0 0 0 0\ndev1 8 0 64 7 0 0 0 0 0 0 0\n");
        let dmesg = "[    3.000000] bootlink: image read start\n[    3.002000] bootlink: image read end\n";
        let r = parse(&main, dmesg, &SPEC, 10_000);
        assert_eq!((r.requests, r.measured_us), (Some(3), Some(2000.0)));
        assert!((r.model_us - 3.0 * 538.281).abs() < 1e-6);
        assert!(problems(&r).is_empty(), "{:?}", problems(&r));
        let quick = ImageRead { measured_us: Some(100.0), ..r.clone() };
        assert!(problems(&quick)[0].contains("quicker than the flash model"));
        let more = ImageRead { requests: Some(4), ..r.clone() };
        assert!(problems(&more)[0].contains("4 read requests for 3 blocks"));
        let none = parse("", "", &SPEC, 10_000);
        assert_eq!(problems(&none).len(), 2);
    }
}
