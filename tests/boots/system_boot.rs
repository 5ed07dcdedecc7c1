//! A real Debian bookworm system (systemd, udev, initramfs-tools' initrd,
//! Debian's kernel of the tested line installed with dpkg) boots under QEMU's
//! instruction-counted clock (-icount) to multi-user.target, and `bootlink system` reads
//! that boot right: systemd-analyze's figures are positive and add up, the
//! kernel's /init and systemd's start cut them into kernel, initrd and
//! userspace, KASLR is on, the module list is /proc/modules as the guest
//! printed it, each module's load is in the kernel's trace (its
//! module_load event), those the initramfs recorded are a part of it, and
//! module loading's share of the boot is a fraction of it, each load's
//! time on the CPU (the scheduler's switches) fits in its wall time and,
//! one CPU, all loads' together in the time a load was under way, and the
//! boot's links (kernel set-up, initcalls, initrd stretches, systemd) join
//! up from the kernel's start to multi-user.target.
//!
//! The line is 6.1 in tier 3 (Debian's reference package); tier X runs
//! the file again with `BOOTLINK_TEST_LINE=6.12` (`bootlink system --line
//! 6.12`: Debian's newest 6.12 package; a boot of minutes more than make
//! test's budget holds). On either line a patched system whose series
//! build is not cached is refused in one line naming the command that
//! builds it.
//!
//! One boot (several minutes under TCG on a loaded 2-core host); the
//! image is built first when the cache has none (mmdebstrap, dpkg,
//! mkinitramfs, mkfs.ext4: a few minutes more, once per recipe). Two
//! boots load the same modules in the same stages and their figures agree
//! closely but not to the byte (the disk's reads complete on the host's
//! time, docs/system.md#determinism): a second boot here would double the
//! test's time, so `BOOTLINK_SYSTEM_TWICE=1` asks for it.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use bootlink_lab::lab::initramfs::framed;
use bootlink_lab::system::parse::{Boot, proc_modules};

const TEST: &str = "system_boot";

/// Boot once; the record and the console.
fn boot(dir: &Path) -> (serde_json::Value, Boot, String) {
    let t0 = Instant::now();
    common::TestCommand::new(&[&"system", &"--line", &common::line(), &"-o", &dir, &"--json"]).show_dir(dir).ok();
    let wall = t0.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("system.json")).unwrap()).unwrap();
    let b: Boot = serde_json::from_value(v["boot"].clone()).unwrap();
    let log = std::fs::read_to_string(dir.join("console.log")).unwrap();
    common::report(
        TEST,
        &format!(
            "bootlink system --line {}: {wall:.0} s wall (image {}: {:.0} s; boot {:.0} s)",
            common::line(),
            if v["image"]["cached"].as_bool() == Some(true) { "cached" } else { "built" },
            v["image_wall_s"].as_f64().unwrap_or(0.0),
            v["boot_wall_s"].as_f64().unwrap_or(0.0)
        ),
    );
    (v, b, log)
}

#[test]
fn debian_system_boots_and_its_figures_add_up() {
    if !common::can_boot_system(TEST) {
        return;
    }
    let dir = common::tmpdir("system-boot").keep();
    let (v, b, log) = boot(&dir.join("one"));
    assert!(b.problems.is_empty(), "{:?}", b.problems);
    assert_eq!(b.state, "running", "systemctl is-system-running; failed: {:?}", b.failed_units);
    assert_eq!(v["clock"], "icount");
    // Debian's package of the line: the reference on 6.1, the newest on 6.12.
    let debian = common::debian_of_line();
    assert_eq!(v["image"]["line"], common::line());
    assert_eq!(v["image"]["kernel_package"], debian.package.as_str());
    assert_eq!(v["image"]["kernel_version"], debian.version.as_str());
    assert_eq!(v["image"]["release"], debian.release.as_str());
    assert!(
        log.contains(&format!("Linux version {} ", debian.release)),
        "the console's kernel is not {}",
        debian.release
    );
    assert_eq!(b.kaslr, Some(true), "_text at {:?}", b.kernel_text);

    // systemd-analyze: positive, kernel + userspace = total to its rounding.
    let a = &b.analyze;
    assert!(a.kernel_ms > 0.0 && a.userspace_ms > 0.0, "{a:?}");
    assert_eq!(a.initrd_ms, None, "initramfs-tools' initrd is not systemd's: {a:?}");
    assert!((a.kernel_ms + a.userspace_ms - a.total_ms).abs() <= 1.0, "{a:?}");
    assert_eq!(a.target, "multi-user.target");
    // The split: kernel + initrd + userspace = total, each positive, the
    // landmarks in order.
    assert!(b.kernel_ms > 0.0 && b.initrd_ms > 0.0 && b.userspace_ms > 0.0, "{b:?}");
    assert!((b.kernel_ms + b.initrd_ms + b.userspace_ms - b.total_ms).abs() <= 1.0);
    let (init, done, sd) = (b.init_started_ms.unwrap(), b.initrd_done_ms.unwrap(), b.systemd_started_ms.unwrap());
    assert!(init < done && done < sd, "/init {init}, init-bottom {done}, systemd {sd}");
    // systemd's start (its CLOCK_MONOTONIC stamp, systemd-analyze's kernel
    // figure) falls between the initramfs's last line and systemd's first
    // line in the kernel's log (the kernel's clock).
    assert!(
        done < a.kernel_ms && a.kernel_ms <= sd,
        "init-bottom {done}, systemd-analyze kernel {}, systemd's first line {sd}",
        a.kernel_ms
    );
    assert!(b.multi_user_ms > b.kernel_ms + b.initrd_ms && b.multi_user_ms <= b.total_ms + 1.0, "{b:?}");
    let top = &b.critical_chain[0];
    assert_eq!((top.unit.as_str(), top.depth), ("multi-user.target", 0), "{:?}", b.critical_chain);
    assert!(!b.blame.is_empty() && b.blame.len() <= 30 && b.blame.windows(2).all(|w| w[0].ms >= w[1].ms));

    // Modules: /proc/modules as printed, each load in the kernel's trace.
    let printed: BTreeSet<String> =
        proc_modules(&framed(&log, "modules").expect("a modules section")).into_iter().map(|m| m.0).collect();
    let parsed: BTreeSet<String> = b.modules.iter().map(|m| m.name.clone()).collect();
    assert!(parsed.len() > 20, "{parsed:?}");
    assert_eq!(parsed, printed);
    let trace = framed(&log, "trace").expect("a trace section");
    let events: BTreeSet<&str> = trace
        .lines()
        .filter_map(|l| l.split("/* module_load: ").nth(1))
        .filter_map(|e| e.split_whitespace().next())
        .collect();
    for m in &b.modules {
        assert!(events.contains(m.name.as_str()), "{}: no module_load event in the trace", m.name);
        let load = m.load_us.unwrap_or_else(|| panic!("{}: no load time", m.name));
        let phases: f64 = m.phases.iter().map(|p| p.duration_us).sum();
        assert!(load > 0.0 && phases <= load + 1.0, "{}: phases {phases} > load {load}", m.name);
    }
    // Each load's time on the CPU (the scheduler's switches are traced):
    // each phase's wall time is its time on the CPU and off it, so a load's
    // phases on the CPU add up to at most its wall time; with one CPU no
    // two loads are on it at once, so all their time on it together fits
    // in the time a load was under way (the loads' union, the whole trace).
    let mut on_cpu_us = 0.0;
    let mut spans = Vec::new();
    let all = b.modules.iter().map(|m| (m.name.as_str(), &m.phases, m.on_cpu.as_ref(), m.start_ms, m.load_us));
    let refused =
        b.failed_loads.iter().map(|f| ("(refused)", &f.phases, f.on_cpu.as_ref(), Some(f.start_ms), Some(f.load_us)));
    for (name, phases, cpu, start, load) in all.chain(refused) {
        let c = cpu.unwrap_or_else(|| panic!("{name}: no time on the CPU (sched_switch not traced?)"));
        assert_eq!(c.phases.len(), phases.len(), "{name}");
        for (p, q) in phases.iter().zip(&c.phases) {
            assert_eq!(p.name, q.name, "{name}");
            assert!(q.on_cpu_us >= 0.0 && q.preempted_us >= 0.0 && q.blocked_us >= 0.0, "{name}: {q:?}");
            assert!(
                (q.on_cpu_us + q.preempted_us + q.blocked_us - p.duration_us).abs() < 0.01,
                "{name}: {q:?} against the phase's {} us",
                p.duration_us
            );
        }
        let wall: f64 = phases.iter().map(|p| p.duration_us).sum();
        let on: f64 = c.phases.iter().map(|p| p.on_cpu_us).sum();
        assert!(
            (on - c.on_cpu_us).abs() < 0.01 && c.on_cpu_us <= wall + 0.01,
            "{name}: {} us on the CPU, {wall} us wall",
            c.on_cpu_us
        );
        on_cpu_us += c.on_cpu_us;
        spans.push((start.unwrap() * 1000.0, load.unwrap()));
    }
    let busy = bootlink_lab::system::spans::loading(&spans, 0.0, f64::MAX).busy_us;
    // A few µs a load: phases are cut at printed entry times (a leaf's line
    // is its ring-buffer entry, a few µs after the call).
    let slack = 10.0 * spans.len() as f64;
    assert!(on_cpu_us <= busy + slack, "the loads on the CPU {on_cpu_us} us, loading under way {busy} us");
    let wall_us: f64 = spans.iter().map(|s| s.1).sum();
    common::report(
        TEST,
        &format!(
            "the loads: {:.0} ms wall added up, {:.0} ms on the CPU, loading under way {:.0} ms",
            wall_us / 1000.0,
            on_cpu_us / 1000.0,
            busy / 1000.0
        ),
    );
    let initrd: Vec<&str> = b.modules.iter().filter(|m| m.in_initrd).map(|m| m.name.as_str()).collect();
    assert!(!initrd.is_empty() && initrd.len() < b.modules.len(), "{initrd:?}");
    for m in b.modules.iter().filter(|m| m.in_initrd) {
        let t = m.start_ms.unwrap();
        assert!(t > init && t < done, "{} loaded at {t} ms, outside the initrd ({init}..{done})", m.name);
    }
    // The root disk's driver is in the initrd: the kernel needs it to mount /.
    assert!(initrd.contains(&"virtio_blk"), "{initrd:?}");
    assert!(b.share_of_boot > 0.0 && b.share_of_boot < 1.0, "{}", b.share_of_boot);
    assert!(b.loading.busy_us <= b.loading.sum_us + 1.0);

    // The whole boot's links: from the kernel's start to multi-user.target
    // without a gap, each landmark where the split above puts it, the
    // loading in them the boot's loading, and the kernel's built-in
    // initcalls (initcall_debug) within their link.
    let links = &b.links;
    assert_eq!(links.len(), 9, "{links:?}");
    assert_eq!(links[0].start_ms, 0.0);
    assert!(links.windows(2).all(|w| w[0].end_ms == w[1].start_ms && w[0].start_ms <= w[0].end_ms), "{links:?}");
    assert_eq!(links[8].end_ms, b.multi_user_ms);
    assert_eq!(links[2].end_ms, init, "the kernel's links end at /init");
    assert_eq!(links[6].end_ms, done, "the initrd's links end at init-bottom");
    assert_eq!(links[7].end_ms, sd, "switch_root's link ends at systemd's first line");
    let in_links: f64 = links.iter().map(|l| l.loading_ms.unwrap()).sum();
    assert!((in_links - b.loading.busy_us / 1000.0).abs() < 0.01, "{in_links} ms vs {}", b.loading.busy_us / 1000.0);
    let calls = &b.initcalls;
    assert!(calls.count > 300, "Debian's config builds hundreds of initcalls in: {calls:?}");
    assert!(calls.sum_ms > 0.0 && calls.sum_ms <= links[1].ms() + 1.0, "{calls:?} in {:?}", links[1]);
    assert!(!links[1].parts.is_empty() && links[1].parts.windows(2).all(|w| w[0].ms >= w[1].ms));
    // udev's coldplug loads modules in the initrd.
    assert!(links[4].loading_ms.unwrap() > 0.0, "{:?}", links[4]);
    let longest = links.iter().max_by(|x, y| x.ms().total_cmp(&y.ms())).unwrap();
    common::report(
        TEST,
        &format!(
            "{} links; the longest: {} {:.0} ms; built-in initcalls {} ({:.0} ms)",
            links.len(),
            longest.name,
            longest.ms(),
            calls.count,
            calls.sum_ms
        ),
    );
    common::report(
        TEST,
        &format!(
            "kernel {:.0} ms + initrd {:.0} ms + userspace {:.0} ms; multi-user.target at {:.0} ms; \
             {} modules ({} in the initrd); loading {:.1} % of the boot",
            b.kernel_ms,
            b.initrd_ms,
            b.userspace_ms,
            b.multi_user_ms,
            b.modules.len(),
            initrd.len(),
            100.0 * b.share_of_boot
        ),
    );

    // Read again from its console, booting nothing: the same record.
    let one = dir.join("one");
    common::TestCommand::new(&[&"system", &"--reread", &"-o", &one, &"--json"]).ok();
    let again: serde_json::Value = serde_json::from_slice(&std::fs::read(one.join("system.json")).unwrap()).unwrap();
    assert_eq!(again, v, "the record read again from console.log differs");

    if std::env::var_os("BOOTLINK_SYSTEM_TWICE").is_some() {
        // Under sleep=on the disk's reads land on the host's time: the same
        // modules, loaded in the same stages, the figures close but not
        // equal. Each stage within 3x what two boots differed by
        // (scripts/system-measure, 2026-11-29, docs/system.md): the kernel, which
        // reads no disk, 0.00 % (so 0.1 %, the lab's bound where two boots
        // agree), the initrd +0.58 %, userspace +0.79 %, multi-user.target
        // +0.44 %. Those were two boots one after the other, as here.
        // Between runs under another host load the disk stages move
        // further (the cold `make test` of 2026-11-29, beside a kernel
        // build: initrd 2,771 ms, userspace 4,916 ms, +7.3 % on the
        // script's run; the kernel 4,548 ms again), so the bounds hold for
        // two boots under the same load, not across runs.
        let (_, again, _) = boot(&dir.join("two"));
        let names = |b: &Boot, initrd: bool| -> BTreeSet<String> {
            b.modules.iter().filter(|m| !initrd || m.in_initrd).map(|m| m.name.clone()).collect()
        };
        assert_eq!(names(&again, false), names(&b, false));
        assert_eq!(names(&again, true), names(&b, true));
        for (what, x, y, measured_pct, bound_pct) in [
            ("kernel", b.kernel_ms, again.kernel_ms, 0.0, 0.1),
            ("initrd", b.initrd_ms, again.initrd_ms, 0.58, 3.0 * 0.58),
            ("userspace", b.userspace_ms, again.userspace_ms, 0.79, 3.0 * 0.79),
            ("multi-user.target", b.multi_user_ms, again.multi_user_ms, 0.44, 3.0 * 0.44),
        ] {
            assert!(
                (x - y).abs() <= bound_pct / 100.0 * x,
                "{what}: {x} ms, then {y} ms ({:+.2} %; two boots measured {measured_pct} % apart, bound {bound_pct:.2} %)",
                (y - x) / x * 100.0
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--kernel patched` on a line whose series' Debian-config build is not
/// in the kernel cache: one line naming the command that builds it, no
/// record directory, nothing booted or built. The cache is a fresh one
/// holding only Debian's package of the line (linked from the real
/// cache), so the build is absent whatever the real cache holds.
#[test]
fn a_patched_system_without_its_build_is_refused_in_one_line() {
    let line = common::line();
    let debian = common::debian_of_line();
    let dir = common::tmpdir("system-refused");
    let cache = dir.join("cache");
    std::fs::create_dir_all(cache.join("kernels")).unwrap();
    std::os::unix::fs::symlink(&debian.dir, cache.join("kernels").join(&debian.release)).unwrap();
    let debs = bootlink::fsutil::cache_dir().join("debs");
    std::os::unix::fs::symlink(&debs, cache.join("debs")).unwrap();
    let out = dir.join("record");
    let command = if line == "6.1" {
        "`bootlink kernel build --config debian`".to_string()
    } else {
        format!("`bootlink kernel build --config debian --line {line}`")
    };
    let err = common::TestCommand::new(&[&"system", &"--line", &line, &"--kernel", &"patched", &"-o", &out])
        .env("BOOTLINK_CACHE", cache.to_str().unwrap())
        .fails_with(&command);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("bootlink: ") && err.contains(&format!("the {line} series")), "{err}");
    assert!(err.contains("not in the cache"), "{err}");
    assert!(!out.exists(), "a refused boot leaves no record directory");
    assert!(!cache.join("systems").exists(), "nothing made for the refused kernel");
    common::report(TEST, &format!("{line}: {}", err.trim_end()));
}
