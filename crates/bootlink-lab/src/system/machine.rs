//! The PC the system boots on: the lab's QEMU options (TCG, the pinned CPU
//! model, its seed and RTC, an instruction-counted clock) on a q35 machine
//! with the devices a PC has, so that udev has drivers to load: the root
//! disk on virtio-blk, a SATA disk on q35's AHCI, an NVMe disk, an e1000e
//! network card, USB 3 (xhci) with a keyboard, a tablet and a storage
//! stick, HD audio with a codec, a standard VGA card, and q35's own RTC.
//! The kernel and initrd are the ones the package installed in /boot,
//! given to QEMU's `-kernel`/`-initrd` (no boot loader); the kernel's
//! command line is Debian's (`root=UUID=... ro quiet`), every module's
//! check enforced (`module.sig_enforce=1`, as under Secure Boot), the boot
//! parameters the kernel package asks for, and the tracing.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use bootlink::error::{Error, Kind, Result};

use crate::lab::qemu::QemuOptions;
use crate::lab::target::Target;
use crate::system::image::Image;

/// The machine's memory.
pub const MEMORY_MIB: u32 = 1024;

/// QEMU's machine: the PCIe PC (ICH9, AHCI built in).
pub const MACHINE: &str = "q35";

/// The extra disks' size (each reads as zeros: QEMU's null-co driver, no file).
const BLANK_DISK_BYTES: u64 = 64 << 20;

/// The kernel's trace buffer per CPU: the whole boot's module loads, each
/// with its landmarks and every symbol lookup, without overwriting.
const TRACE_BUFFER: &str = "16M";

/// The kernel's log buffer in a traced boot, whose `initcall_debug` adds
/// two lines per initcall (670 built in with Debian's 6.1 config, more as
/// its modules load) to what Debian's 128 KiB (CONFIG_LOG_BUF_SHIFT=17)
/// holds: none may be lost before the report service reads them.
const LOG_BUFFER: &str = "8M";

/// How the boot is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// `-icount shift=0,sleep=on` with the lab's seed and RTC: one CPU,
    /// guest time from executed instructions while it runs, the host's
    /// while it waits for a disk (see [`options`]).
    Deterministic,
    /// Host time, with this many virtual CPUs.
    Realtime { cpus: u32 },
}

/// The functions traced: the lab's phase landmarks (read, load_module,
/// signature, symbols or each lookup, relocation, init), not its finalize
/// and init links. The kernel matches each name of `ftrace_filter=`
/// against all of its ~40,000 traceable functions while it boots, about
/// 85 ms per name under TCG (docs/system.md): the 31 names of the lab's
/// full set cost 2.6 s of the kernel's stage, these 8 about 0.7 s.
pub fn traced() -> Vec<&'static str> {
    crate::run::ftrace::PHASE_FUNCTIONS.iter().copied().chain(["resolve_symbol"]).collect()
}

/// What a boot traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracing {
    /// Nothing: the stages as they are, no load timed.
    Off,
    /// The module loads (their phases' landmarks, the module_load event,
    /// initcall_debug), not the scheduler's switches: the loads' wall
    /// phases only (what tracing the switches costs is this against
    /// [`Tracing::LoadsAndSwitches`]).
    Loads,
    /// The loads and every context switch (`sched:sched_switch`): each
    /// load's time on the CPU too.
    LoadsAndSwitches,
}

/// The kernel command line: Debian's for an installed system
/// (`root=UUID=... ro quiet`), the serial console and, when `trace`,
/// ftrace's function_graph tracer started at boot on [`traced`], with the
/// module_load event naming each load and the scheduler's sched_switch
/// events (each load's time on the CPU, [`super::oncpu`]), and `initcall_debug` (each built-in
/// initcall timed in the kernel's log: the boot's links, [`super::links`]).
pub fn cmdline(img: &Image, clock: Clock, trace: Tracing) -> String {
    // Every module checked, as under Secure Boot: by its signature or by
    // the kernel's module hash list; none loads unchecked with a taint.
    let mut c = format!("root=UUID={} ro quiet console=ttyS0 module.sig_enforce=1", img.root_uuid);
    for extra in &img.cmdline {
        c.push(' ');
        c.push_str(extra);
    }
    if trace != Tracing::Off {
        let events = match trace {
            Tracing::LoadsAndSwitches => "module:module_load,sched:sched_switch",
            _ => "module:module_load",
        };
        c.push_str(&format!(
            " ftrace=function_graph ftrace_filter={} trace_options=funcgraph-abstime,funcgraph-proc \
             trace_buf_size={TRACE_BUFFER} trace_event={events} initcall_debug log_buf_len={LOG_BUFFER}",
            traced().join(",")
        ));
    }
    if let Clock::Realtime { .. } = clock {
        // As the lab's realtime boots: on a busy host the vCPU may see no
        // timer tick within the IO-APIC check's window, and the kernel panics.
        c.push_str(" no_timer_check");
    }
    c
}

/// The QEMU options of one boot of `img`; the console is kept at `log`.
pub fn options(img: &Image, clock: Clock, trace: Tracing, timeout: Duration, log: &Path) -> Result<QemuOptions> {
    let disk = img.disk.to_string_lossy();
    if disk.contains(',') {
        return Err(Error::file(Kind::Usage, &img.disk, "a disk path with a comma cannot be given to QEMU's -drive"));
    }
    let target = Target { machine: MACHINE.to_string(), ..Target::x86_64() };
    let mut o = QemuOptions::on(&target, &img.vmlinuz);
    o.initrd = Some(img.initrd.clone());
    o.cmdline = cmdline(img, clock, trace);
    o.memory_mib = MEMORY_MIB;
    o.timeout = timeout;
    o.log = Some(log.to_path_buf());
    let mut args = Vec::new();
    match clock {
        // Not the lab's `sleep=off`: with it an idle guest's clock jumps to
        // its next timer at once, and a guest idle while QEMU's block layer
        // completes a read (on the host's time) jumps by whatever its next
        // timer is, seconds on a tickless kernel (measured: two boots of one
        // image, 11.8 s and 22.3 s to multi-user.target). With `sleep=on`
        // the idle guest's clock runs at the host's pace until the read
        // completes, as a machine's would. The seed and RTC are the lab's.
        Clock::Deterministic => {
            args.extend(["-icount".to_string(), "shift=0,sleep=on".to_string()]);
            args.extend(["-seed".to_string(), crate::lab::qemu::GUEST_RANDOM_SEED.to_string()]);
            args.extend(["-rtc".to_string(), crate::lab::qemu::GUEST_RTC.to_string()]);
        }
        Clock::Realtime { cpus } => o.cpus = cpus,
    }
    args.extend(devices(&disk));
    o.extra_args = args.into_iter().map(OsString::from).collect();
    Ok(o)
}

/// The PC's devices, as QEMU arguments. The root disk is opened with
/// `snapshot=on`: the boot's writes go to a temporary overlay, so every
/// boot starts from the same bytes.
pub fn devices(disk: &str) -> Vec<String> {
    let blank = |node: &str| {
        vec!["-blockdev".to_string(), format!("null-co,node-name={node},size={BLANK_DISK_BYTES},read-zeroes=on")]
    };
    let mut a: Vec<String> = Vec::new();
    let mut push = |args: &[&str]| a.extend(args.iter().map(|s| s.to_string()));
    push(&["-drive", &format!("if=none,id=root,file={disk},format=raw,snapshot=on")]);
    push(&["-device", "virtio-blk-pci,drive=root"]);
    a.extend(blank("sata0"));
    a.extend(["-device".into(), "ide-hd,drive=sata0,bus=ide.0".into()]);
    a.extend(blank("nvme0"));
    a.extend(["-device".into(), "nvme,serial=bootlink-nvme,drive=nvme0".into()]);
    let mut push = |args: &[&str]| a.extend(args.iter().map(|s| s.to_string()));
    push(&["-device", "qemu-xhci,id=xhci", "-device", "usb-kbd,bus=xhci.0", "-device", "usb-tablet,bus=xhci.0"]);
    a.extend(blank("stick"));
    let mut push = |args: &[&str]| a.extend(args.iter().map(|s| s.to_string()));
    push(&["-device", "usb-storage,bus=xhci.0,drive=stick"]);
    // A network card with nothing behind it that answers: the system
    // configures no interface, and no packet may time the boot.
    push(&["-netdev", "user,id=net0,restrict=on", "-device", "e1000e,netdev=net0,mac=52:54:00:12:34:56"]);
    push(&["-audiodev", "none,id=snd0", "-device", "intel-hda", "-device", "hda-duplex,audiodev=snd0"]);
    push(&["-device", "VGA"]);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Image {
        Image {
            key: "k".into(),
            suite: "bookworm".into(),
            packages: vec![],
            kernel_package: "linux-image-6.1.0-56-amd64".into(),
            kernel_version: "6.1.192-2".into(),
            release: "6.1.0-56-amd64".into(),
            line: "6.1".into(),
            disk: "/c/disk.img".into(),
            vmlinuz: "/c/vmlinuz".into(),
            initrd: "/c/initrd.img".into(),
            root_uuid: crate::system::image::ROOT_UUID.into(),
            disk_bytes: 0,
            root_bytes: 0,
            mmdebstrap_s: 0.0,
            mkfs_s: 0.0,
            cached: false,
            kernel: "debian".into(),
            cmdline: vec![],
            steps: vec![],
        }
    }

    #[test]
    fn a_pc_with_kaslr_and_the_lab_clock() {
        let img = image();
        let o =
            options(&img, Clock::Deterministic, Tracing::LoadsAndSwitches, Duration::from_secs(5), Path::new("/t/log"))
                .unwrap();
        let text: Vec<String> = o.args(Path::new("/t/log")).iter().map(|s| s.to_string_lossy().into_owned()).collect();
        let text = text.join(" ");
        for want in [
            "-machine q35",
            "-icount shift=0,sleep=on -seed 1",
            "-kernel /c/vmlinuz -initrd /c/initrd.img",
            "file=/c/disk.img,format=raw,snapshot=on",
            "nvme,",
            "qemu-xhci",
            "usb-storage",
            "e1000e",
            "intel-hda",
            "-device VGA",
        ] {
            assert!(text.contains(want), "{want} missing: {text}");
        }
        assert!(o.cmdline.contains("ftrace_filter=kernel_read_file_from_fd,") && o.cmdline.contains("load_module"));
        assert!(o.cmdline.contains(" trace_event=module:module_load,sched:sched_switch "), "{}", o.cmdline);
        let loads = cmdline(&img, Clock::Deterministic, Tracing::Loads);
        assert!(loads.contains(" trace_event=module:module_load ") && !loads.contains("sched_switch"), "{loads}");
        assert!(!o.cmdline.contains("nokaslr") && !o.cmdline.contains("no_timer_check"), "{}", o.cmdline);
        let r = options(
            &img,
            Clock::Realtime { cpus: 2 },
            Tracing::LoadsAndSwitches,
            Duration::from_secs(5),
            Path::new("/t/log"),
        )
        .unwrap();
        assert!(!r.deterministic && r.cpus == 2 && r.cmdline.ends_with(" no_timer_check"));
        assert!(!o.deterministic, "the lab's sleep=off is not for a boot that waits for disks");
        assert!(o.cmdline.len() < 2048, "x86's COMMAND_LINE_SIZE: {}", o.cmdline.len());
        let quiet = cmdline(&img, Clock::Deterministic, Tracing::Off);
        assert_eq!(quiet, format!("root=UUID={} ro quiet console=ttyS0 module.sig_enforce=1", img.root_uuid));
        let mut applied = image();
        applied.cmdline = vec!["module.symlookup=gnu".into()];
        assert!(
            cmdline(&applied, Clock::Deterministic, Tracing::Off)
                .ends_with(" module.sig_enforce=1 module.symlookup=gnu")
        );
    }

    #[test]
    fn a_comma_in_the_disk_path_is_refused() {
        let mut img = image();
        img.disk = "/c,d/disk.img".into();
        let e =
            options(&img, Clock::Deterministic, Tracing::LoadsAndSwitches, Duration::from_secs(5), Path::new("/t/log"))
                .unwrap_err();
        assert!(e.to_string().contains("/c,d/disk.img"), "{e}");
    }
}
