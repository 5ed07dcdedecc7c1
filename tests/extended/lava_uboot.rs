//! The lab's U-Boot board jobs run for real (the extended tier): `bootlink
//! lab --lava --lava-boot u-boot` writes the jobs of two variants of a
//! small module set for a board's device type, and Debian's `lava-run`
//! (lava-dispatcher, no server) runs each of them on a "board" that is
//! QEMU's arm64 virt machine running Debian's U-Boot (u-boot-qemu) as its
//! firmware: LAVA's tftp deploy, its u-boot boot method with the `ramdisk`
//! commands of base-uboot.jinja2, the board's serial console on a TCP
//! port, power by a script. `bootlink lava import` reads the job logs, and
//! the module loads must be what the lab's own QEMU boot of the same
//! variants measures.
//!
//! The board's device dictionary is written here, not by bootlink: it is
//! what a LAVA server renders for its own U-Boot device (a user with LAVA
//! has those); this one stands in for it, for this QEMU "board" only.
//!
//! The board is the lab's machine with U-Boot in front of the kernel: the
//! lab's QEMU options (CPU, memory, -icount and the guest's seed and
//! clock, from the lab run's `qemu_command`), and instead of `-kernel` the
//! firmware, a virtio NIC on QEMU's user network whose built-in TFTP
//! server serves the directory LAVA deploys into, and the serial line to
//! the console listener LAVA connected to.
//!
//! run-tests: alone (U-Boot's TFTP transfer and LAVA's timeouts run on
//! the host's clock).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use bootlink_lab::run::results::Run;
use common::{TestCommand, skip, tmpdir};

const UBOOT_BIN: &str = "/usr/lib/u-boot/qemu_arm64/u-boot.bin";
/// The device type the jobs ask for (any name: this dictionary is its device).
const DEVICE_TYPE: &str = "qemu-virt-uboot";
/// Where the kernel, the DTB and the ramdisk are loaded: U-Boot's own
/// kernel_addr_r and ramdisk_addr_r on QEMU's virt (RAM from 0x40000000),
/// the DTB between the kernel's image size (32 MiB here) and the ramdisk.
const KERNEL_ADDR: &str = "0x40400000";
const DTB_ADDR: &str = "0x43000000";
const RAMDISK_ADDR: &str = "0x44000000";
/// What base-uboot.jinja2's `ramdisk` bootargs add to the job's
/// extra_kernel_args (besides the console): the lab boots them too, to
/// compare like with like.
const TEMPLATE_ARGS: [&str; 2] = ["root=/dev/ram0", "ip=dhcp"];
/// QEMU's user network: the host as the guest sees it, its TFTP server.
const QEMU_HOST_IP: &str = "10.0.2.2";

/// What this machine needs to run the jobs; None (after a skip) when it
/// lacks any.
fn tools(test: &str) -> Option<(PathBuf, PathBuf)> {
    let need: [(&str, &str); 6] = [
        ("/usr/bin/lava-run", "lava-run (lava-dispatcher)"),
        (UBOOT_BIN, "U-Boot for QEMU's arm64 virt (u-boot-qemu)"),
        ("/usr/bin/qemu-system-aarch64", "qemu-system-aarch64 (qemu-system-arm)"),
        ("/usr/bin/mkimage", "mkimage (u-boot-tools: LAVA's u-boot deploy requires it)"),
        ("/usr/sbin/in.tftpd", "in.tftpd (tftpd-hpa: LAVA's tftp deploy requires it and its TFTP_DIRECTORY)"),
        ("/bin/busybox", "busybox (its nc is the board's console listener)"),
    ];
    for (p, what) in need {
        if !Path::new(p).exists() {
            skip(test, &format!("{what} is not installed (scripts/install-deps installs it)"));
            return None;
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "lava-run runs jobs as root only");
        return None;
    }
    // LAVA deploys into a job directory under tftpd-hpa's TFTP_DIRECTORY
    // (lava_dispatcher.utils.filesystem.tftpd_dir): QEMU's TFTP serves that.
    let conf = std::fs::read_to_string("/etc/default/tftpd-hpa").unwrap_or_default();
    let dir = conf.lines().find_map(|l| l.trim().strip_prefix("TFTP_DIRECTORY=")).map(|v| v.trim_matches('"'));
    match dir {
        Some(d) if Path::new(d).is_dir() => Some((PathBuf::from("/usr/bin/lava-run"), PathBuf::from(d))),
        _ => {
            skip(test, "/etc/default/tftpd-hpa names no TFTP_DIRECTORY that exists (tftpd-hpa sets /srv/tftp)");
            None
        }
    }
}

/// A word for sh, single-quoted.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The lab's QEMU options for its machine and clock: its command up to
/// the kernel's own (`-append`, `-serial`, `-kernel`, `-initrd`).
fn lab_machine(lab: &Run) -> Vec<String> {
    let cmd = &lab.qemu_command;
    let end = cmd.iter().position(|a| a == "-append").expect("the lab's QEMU command has -append");
    let m = cmd[..end].to_vec();
    assert!(m[0].ends_with("qemu-system-aarch64") && m.iter().any(|a| a == "-icount"), "{m:?}");
    m
}

/// The board's DTB: QEMU's own for this machine with U-Boot loaded (with
/// firmware, virt has no PL061 GPIO but an ACPI GED; a DTB dumped without
/// it lists the PL061, and the kernel dies probing it).
fn dump_dtb(machine: &[String], out: &Path) {
    let mut args: Vec<String> = machine[1..].to_vec();
    let m = args.iter().position(|a| a == "-machine").expect("-machine");
    args[m + 1] = format!("{},dumpdtb={}", args[m + 1], out.display());
    let o = Command::new(&machine[0]).args(&args).args(["-bios", UBOOT_BIN]).output().unwrap();
    assert!(o.status.success() && out.exists(), "dumpdtb: {}", String::from_utf8_lossy(&o.stderr));
}

/// The board's power: `on` (also the hard reset) stops a running board
/// and starts QEMU in the background with U-Boot as its firmware, its
/// serial line connecting to the console listener on `port`; `off` stops it.
fn power_scripts(dir: &Path, machine: &[String], tftp: &Path, port: u16) -> (PathBuf, PathBuf) {
    let pid = dir.join("board.pid");
    let stop = format!(
        "if [ -f {p} ]; then kill \"$(cat {p})\" 2>/dev/null || true; rm -f {p}; fi\n",
        p = sh_quote(&pid.to_string_lossy())
    );
    let mut qemu: Vec<String> = machine.iter().map(|a| sh_quote(a)).collect();
    for a in [
        "-bios".to_string(),
        UBOOT_BIN.to_string(),
        "-netdev".into(),
        format!("user,id=n0,tftp={}", tftp.display()),
        "-device".into(),
        "virtio-net-pci,netdev=n0,romfile=".into(),
        "-chardev".into(),
        format!("socket,id=con,host=127.0.0.1,port={port}"),
        "-serial".into(),
        "chardev:con".into(),
        "-daemonize".into(),
        "-pidfile".into(),
        pid.to_string_lossy().into_owned(),
    ] {
        qemu.push(sh_quote(&a));
    }
    let on = dir.join("board-on.sh");
    let off = dir.join("board-off.sh");
    std::fs::write(&on, format!("#!/bin/sh\nset -e\n{stop}exec {}\n", qemu.join(" "))).unwrap();
    std::fs::write(&off, format!("#!/bin/sh\n{stop}")).unwrap();
    for p in [&on, &off] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (on, off)
}

/// A job's `context: extra_kernel_args`, which a server puts into the
/// device type's bootargs.
fn extra_kernel_args(job: &str) -> String {
    let job = bootlink_lab::lava::job::parse_job(job).expect("a job bootlink wrote");
    job.context.extra_kernel_args.expect("extra_kernel_args")
}

/// The device dictionary a LAVA server renders from base-uboot.jinja2
/// (lava-server 2023.01) for a U-Boot arm64 device with these settings
/// and the job's context: the console (`console_device: ttyAMA0`), the
/// booti addresses, the connection and power commands; its `ramdisk`
/// commands and the u-boot constants and timeouts are the template's.
fn device_dictionary(job: &str, port: u16, on: &Path, off: &Path) -> String {
    let [root, ip] = TEMPLATE_ARGS;
    let bootargs = format!("console=ttyAMA0,115200n8 {root} {} {ip}", extra_kernel_args(job));
    let addrs = format!("    kernel: '{KERNEL_ADDR}'\n    ramdisk: '{RAMDISK_ADDR}'\n    dtb: '{DTB_ADDR}'\n");
    format!(
        "# A U-Boot board as LAVA's base-uboot.jinja2 renders it: QEMU's arm64 virt\n\
         # running U-Boot, written by tests/extended/lava_uboot.rs.\n\
         commands:\n  connections:\n    uart0:\n      \
         connect: sh -c 'stty raw -echo; exec busybox nc -l -p {port}'\n      tags:\n      - primary\n  \
         hard_reset: {on}\n  power_off: {off}\n  power_on: {on}\n\
         constants:\n  posix:\n    lava_test_sh_cmd: /bin/sh\n    lava_test_results_dir: /lava-%s\n    \
         lava_test_shell_file: ~/.bashrc\n  \
         u-boot:\n    interrupt-prompt: 'Hit any key to stop autoboot'\n    interrupt-character: ' '\n    \
         interrupt_ctrl_list: []\n    interrupt-newline: True\n    final-message: 'Starting kernel'\n    \
         error-messages:\n    - 'Resetting CPU'\n    - 'Must RESET board to recover'\n    - 'TIMEOUT'\n    \
         - 'Retry count exceeded'\n    - 'Retry time exceeded; starting again'\n    \
         - 'ERROR: The remote end did not respond in time.'\n    - 'File not found'\n    \
         - 'Bad Linux ARM64 Image magic!'\n    - 'Wrong Ramdisk Image Format'\n    \
         - 'Ramdisk image is corrupt or invalid'\n    - 'ERROR: Failed to allocate'\n    \
         - 'TFTP error: trying to overwrite reserved memory'\n    - 'Wrong Image Format for boot'\n    \
         - 'ERROR: Did not find a cmdline Flattened Device Tree'\n    - 'ERROR: RD image overlaps OS image'\n  \
         shutdown-message: 'The system is going down for reboot NOW'\n  \
         kernel-start-message: 'Linux version [0-9]'\n  default-shell-prompt: 'lava-test: # '\n  \
         spawn_maxread: '4092'\n  failure_retry: 1\n  boot_retry: 1\n\
         parameters:\n  pass:\n  image:\n{addrs}  booti:\n{addrs}\
         actions:\n  deploy:\n    parameters:\n      add_header: u-boot\n      mkimage_arch: arm64\n      \
         append_dtb: false\n      use_xip: false\n    connections:\n      lxc:\n      fastboot:\n      serial:\n    \
         methods:\n      image:\n      lxc:\n      overlay:\n      usb:\n      tftp:\n      nbd:\n  \
         boot:\n    connections:\n      lxc:\n      fastboot:\n      serial:\n    methods:\n      minimal:\n      \
         u-boot:\n        parameters:\n          bootloader_prompt: '=>'\n          \
         interrupt_prompt: 'Hit any key to stop autoboot'\n          interrupt_char: ''\n          \
         needs_interrupt: True\n        ramdisk:\n          commands:\n          - 'setenv autoload no'\n          \
         - 'setenv initrd_high 0xffffffff'\n          - 'setenv fdt_high 0xffffffff'\n          - 'dhcp'\n          \
         - 'setenv serverip {{SERVER_IP}}'\n          - 'tftp {{KERNEL_ADDR}} {{KERNEL}}'\n          \
         - 'tftp {{RAMDISK_ADDR}} {{RAMDISK}}'\n          - 'tftp {{TEE_ADDR}} {{TEE}}'\n          \
         - 'setenv initrd_size ${{filesize}}'\n          - 'tftp {{DTB_ADDR}} {{DTB}}'\n          \
         - \"setenv bootargs '{bootargs}'\"\n          - '{{BOOTX}}'\n\
         timeouts:\n  actions:\n    power-off:\n      seconds: 10\n    bootloader-commands:\n      minutes: 3\n    \
         u-boot-interrupt:\n      seconds: 30\n    auto-login-action:\n      minutes: 2\n    uboot-action:\n      \
         minutes: 3\n    uboot-commands:\n      minutes: 3\n    pdu-reboot:\n      seconds: 30\n    reset-device:\n      \
         seconds: 30\n  connections:\n    uboot-commands:\n      seconds: 30\n    bootloader-commands:\n      \
         seconds: 30\n",
        on = on.display(),
        off = off.display(),
    )
}

/// A TCP port nothing listens on now, for the board's console.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The module set's load time of each variant (guest µs).
fn set_times(run: &Run) -> Vec<(String, f64)> {
    run.variants.iter().map(|v| (v.name.clone(), v.repetitions[0].modules_total_us)).collect()
}

#[test]
fn uboot_jobs_boot_a_qemu_board_through_lava_run_as_the_lab_boots() {
    let test = "lava_uboot";
    let Some((lava_run, tftp)) = tools(test) else { return };
    let started = std::time::Instant::now();
    let dir = tmpdir("lava-uboot");
    let base: [&dyn AsRef<std::ffi::OsStr>; 7] =
        [&"lab", &"vfat", &"--arch", &"arm64", &"--variant", &"stock", &"--variant"];
    // The lab's own boot of the variants, and from it the board's machine.
    let lab = dir.join("lab");
    TestCommand::new(&base).arg(&"unsigned").arg(&"-o").arg(&lab).ok();
    let from_lab = bootlink_lab::run::load(&lab).unwrap();
    let machine = lab_machine(&from_lab);
    // and with the command line the board's kernel gets from the template
    let lab_args = dir.join("lab-template-args");
    TestCommand::new(&base)
        .arg(&"unsigned")
        .arg(&"--cmdline")
        .arg(&TEMPLATE_ARGS.join(" "))
        .arg(&"-o")
        .arg(&lab_args)
        .ok();
    let from_lab_args = bootlink_lab::run::load(&lab_args).unwrap();
    let dtb = dir.join("qemu-virt-uboot.dtb");
    dump_dtb(&machine, &dtb);
    // The jobs, for the board's device type.
    let jobs = dir.join("jobs");
    TestCommand::new(&base)
        .arg(&"unsigned")
        .arg(&"--lava")
        .arg(&jobs)
        .arg(&"--lava-device-type")
        .arg(&DEVICE_TYPE)
        .arg(&"--lava-boot")
        .arg(&"u-boot")
        .arg(&"--lava-dtb")
        .arg(&dtb)
        .show_dir(&jobs)
        .ok();
    // LAVA's {SERVER_IP}: the host as QEMU's user network shows it.
    let dispatcher = dir.join("dispatcher.yaml");
    std::fs::write(&dispatcher, format!("dispatcher_ip: {QEMU_HOST_IP}\n")).unwrap();
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut imported = Vec::new();
    for (k, job) in ["stock-0", "unsigned-0"].iter().enumerate() {
        let text = std::fs::read_to_string(jobs.join(format!("{job}.yaml"))).unwrap();
        let port = free_port();
        let (on, off) = power_scripts(&dir, &machine, &tftp, port);
        let device = dir.join(format!("device-{job}.yaml"));
        std::fs::write(&device, device_dictionary(&text, port, &on, &off)).unwrap();
        let id = format!("{}", 860_000 + (std::process::id() % 10_000) * 2 + k as u32);
        let log = logs.join(format!("{id}.yaml"));
        let t0 = std::time::Instant::now();
        let o = Command::new(&lava_run)
            .args(["--job-id", &id, "--output-dir"])
            .arg(dir.join(format!("out-{id}")))
            .arg("--device")
            .arg(&device)
            .arg("--dispatcher")
            .arg(&dispatcher)
            .arg(jobs.join(format!("{job}.yaml")))
            .output()
            .unwrap();
        let secs = t0.elapsed().as_secs_f64();
        // whatever happened, no board stays powered
        let _ = Command::new(&off).status();
        std::fs::write(&log, &o.stderr).unwrap();
        let text = String::from_utf8_lossy(&o.stderr);
        let tail = || text.lines().rev().take(30).collect::<Vec<_>>().join("\n");
        assert!(o.status.success(), "lava-run {job}: {}\n{}", o.status, tail());
        assert!(text.contains(r#""case": "job", "definition": "lava", "result": "pass""#), "{}", tail());
        // U-Boot loaded the files LAVA deployed from QEMU's TFTP, took the
        // ramdisk by its header and started the kernel with booti
        for want in [
            &format!("TFTP from server {QEMU_HOST_IP}"),
            "Verifying Checksum ... OK",
            &format!("booti {KERNEL_ADDR} {RAMDISK_ADDR} {DTB_ADDR}"),
            "Starting kernel ...",
            r#""lvl": "target", "msg": "=== BOOTLINK END lava-v"#,
        ] {
            assert!(text.contains(want), "{want:?} in the log of {job}:\n{}", tail());
        }
        common::report(test, &format!("{job}: lava-run took {secs:.1} s"));
        imported.push(log);
    }
    let lava = dir.join("lava-run");
    let o = TestCommand::new(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &lava, &imported[0], &imported[1]]).ok();
    assert!(common::stdout(&o).contains(&format!("2 of 2 log(s) imported (device type {DEVICE_TYPE})")));
    let from_lava = bootlink_lab::run::load(&lava).unwrap();
    common::report(
        test,
        &format!("arm64: {}", common::boot_line(&[("lab", &lab), ("lab-args", &lab_args), ("board", &lava)])),
    );
    assert_eq!((from_lava.source.as_str(), from_lava.device_type.as_str()), ("lava", DEVICE_TYPE));
    assert_eq!(from_lava.timing, "realtime (hardware)", "a board's jobs carry no QEMU clock");
    for v in &from_lava.variants {
        let r = &v.repetitions[0];
        assert!(r.failure.is_none(), "{}: {:?}", v.name, r.failure);
        assert_eq!(r.modules.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
        assert!(r.modules.iter().all(|m| !m.phases.is_empty()));
    }
    // Same kernel, initramfs (but its marker tag), CPU, clock and command
    // line (the template's root= and ip= added to the lab's); the kernel is
    // started by U-Boot with its DTB, the initrd and the DTB where U-Boot
    // puts them. Without root=/dev/ram0 the lab's set is 72 to 96 us
    // longer (the module files' read phase; 0.4 % of stock's 22 ms, 1.6 to
    // 1.8 % of unsigned's 4.6 ms): that is reported, and the gain of one
    // variant over the other must hold against it too. Board runs differ
    // by some us: U-Boot waits for LAVA's typed commands in host time, so
    // the kernel starts at another virtual time each run, and its timer
    // interrupts fall elsewhere in the loads. What one run measured
    // (2026-11-28, scripts/lava-measure, docs/lava.md), board against the
    // lab with the same command line: the module set +0.000 % (stock) and
    // +0.243 % (unsigned), the loading proper +0.067 % and +0.640 %, the
    // gain -0.063 % (-0.086 % against the lab without). The module set and
    // the gain are held to 3x those; the loading proper keeps 1 %, below
    // 3x its 0.640 % (1.9 %): the spread between two board runs is not
    // measured yet, and 1 % has held in every run so far.
    const SET_PCT: f64 = 3.0 * 0.243;
    const PROPER_PCT: f64 = 1.0;
    const GAIN_PCT: f64 = 3.0 * 0.086;
    let proper = |run: &Run, i: usize| -> f64 {
        run.variants[i].repetitions[0]
            .modules
            .iter()
            .flat_map(|m| &m.phases)
            .filter(|p| ["signature", "layout", "symbols", "relocation"].contains(&p.name.as_str()))
            .map(|p| p.duration_us)
            .sum()
    };
    let pct = |a: f64, b: f64| (b - a) / a * 100.0;
    let (lab_t, args_t, board_t) = (set_times(&from_lab), set_times(&from_lab_args), set_times(&from_lava));
    for (i, (name, b)) in board_t.iter().enumerate() {
        let (a, plain) = (args_t[i].1, lab_t[i].1);
        let (pa, pb) = (proper(&from_lab_args, i), proper(&from_lava, i));
        common::report(
            test,
            &format!(
                "arm64 {name}: module set {b:.0} us on the U-Boot board, {a:.0} us in the lab with {} ({:+.3} %), \
                 {plain:.0} us in the lab without ({:+.0} us); loading proper {pb:.0} against {pa:.0} us ({:+.3} %)",
                TEMPLATE_ARGS.join(" "),
                pct(a, *b),
                b - plain,
                pct(pa, pb)
            ),
        );
        assert!(
            pct(a, *b).abs() <= SET_PCT,
            "{name}: module set {a} vs {b} us ({:+.3} %; measured at most 0.243 %, bound {SET_PCT:.3} %)",
            pct(a, *b)
        );
        assert!(
            pct(pa, pb).abs() < PROPER_PCT,
            "{name}: loading proper {pa} vs {pb} us ({:+.3} %; measured at most 0.640 %, bound {PROPER_PCT} %)",
            pct(pa, pb)
        );
    }
    // what the lab is for: the gain of one variant over the other
    let gain = |t: &[(String, f64)]| t[0].1 - t[1].1;
    let (ga, gp, gb) = (gain(&args_t), gain(&lab_t), gain(&board_t));
    common::report(
        test,
        &format!(
            "stock - unsigned: {gb:.0} us on the board, {ga:.0} us in the lab with the same command line, {gp:.0} us without"
        ),
    );
    assert!(
        pct(ga, gb).abs() <= GAIN_PCT && pct(gp, gb).abs() <= GAIN_PCT,
        "the gain: {gb} us on the board vs {ga} and {gp} us in the lab ({:+.3} %, {:+.3} %; measured at most \
         0.086 %, bound {GAIN_PCT:.3} %)",
        pct(ga, gb),
        pct(gp, gb)
    );
    let init = |r: &Run| r.variants[0].repetitions[0].init_start_us;
    common::report(
        test,
        &format!(
            "kernel start to /init: {:.0} us in the lab, {:.0} us on the U-Boot board; the test took {:.0} s",
            init(&from_lab),
            init(&from_lava),
            started.elapsed().as_secs_f64()
        ),
    );
}
