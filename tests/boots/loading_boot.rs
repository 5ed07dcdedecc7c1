//! Duplicate-free, parallel module loading on the self-built kernel under
//! QEMU (patches `load-stats` and `dedup`, and the batch loader in loader/):
//! - a duplicate-request storm (one kmod insmod worker per CPU over the same
//!   set) reads each module once with module.dedup on, and wastes reads and
//!   vmalloc with it off (the stock path, same build) and on Debian's 6.1;
//! - the batch loader's failure handling in the guest: a plan with a cycle, a missing
//!   file, a module whose init fails (its dependent is never loaded), a
//!   worker killed mid-load, a timeout, a built-in module, a module already
//!   live; and a module whose init requests its own alias through a
//!   modprobe that loads the same file again, which must not deadlock;
//! - duplicate requests with upstream's semantics (patch `dedup`): those
//!   that come while the first load's init runs wait for it and return its
//!   result (the init's error, the module absent after; or success once
//!   the module is live), and the init runs once.
//!
//! The batch loader's worker counts are tests/boots/batch_boot.rs (in a
//! lane beside other boots).
//!
//! run-tests: alone (realtime guests with four vCPUs race duplicate
//! requests, and a loader timeout is checked against the host's clock).

use crate::common;

use std::path::Path;
use std::time::Duration;

use bootlink::kmod::ModTree;
use bootlink_lab::lab::{Initramfs, QemuOptions, busybox, initramfs, qemu};
use bootlink_lab::run::results::{Run, Storm};
use common::*;

const SMP: &str = "4";

/// One boot at a time: realtime guests with several vCPUs on 2 host cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first `n` modules of the 194-set (dependencies first) that every
/// tree has as modules (the line's self-built kernel and Debian's), by name.
fn small_set(trees: &[&ModTree], n: usize) -> Vec<String> {
    let paths = bootlink::kmod::named_set_paths("fs-nls-crypto-net-194").unwrap();
    let (found, _) = trees[0].from_named_set(&paths).unwrap();
    found.iter().map(|e| e.name.clone()).filter(|m| trees.iter().all(|t| t.module(m).is_some())).take(n).collect()
}

fn stat(s: &Storm, name: &str) -> i64 {
    s.kernel_stats.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap_or_else(|| panic!("no {name:?} in {s:?}"))
}

fn storm_of<'a>(run: &'a Run, variant: &str) -> &'a Storm {
    let v = run.variants.iter().find(|v| v.name == variant).unwrap();
    v.repetitions[0].storm().unwrap_or_else(|| panic!("{variant}: no storm figures"))
}

#[test]
fn a_storm_reads_each_module_once_with_dedup_and_wastes_without() {
    let _one = one_at_a_time();
    let tmp = tmpdir("storm");
    let b = self_built(false);
    let ours = ModTree::read(&b.dir.join("lib/modules").join(&b.release)).unwrap();
    let debian = ModTree::read(&common::debian_of_line().modules).unwrap();
    let set = small_set(&[&ours, &debian], 40);
    let out = tmp.join("run");
    let kb = common::build_kernel();
    let (dedup, nodedup, deb) = (
        format!("dedup={kb},modules:unsigned,loader:storm"),
        format!("nodedup={kb},modules:unsigned,loader:storm,cmdline:module.dedup=0"),
        format!("debian={},modules:unsigned,loader:storm", common::debian_kernel()),
    );
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"--smp", &SMP, &"--variant", &dedup, &"--variant", &nodedup, &"--variant", &deb];
    set.iter().for_each(|m| args.push(m));
    let run = lab_realtime(&args, &out);
    let n = set.len() as u64;
    assert_eq!(n, 40);
    for v in ["dedup", "nodedup", "debian"] {
        let s = storm_of(&run, v);
        println!("{v}: {s:?}");
        assert_eq!(s.workers, 4, "{v}");
        assert_eq!(s.requests, 4 * n, "{v}: every worker asked for every module");
        assert!(s.quiescence_us >= 0.0 && s.vmalloc_peak_kb >= s.vmalloc_before_kb, "{v}");
        let failed = common::storm_failures(s);
        assert_eq!(failed, 0, "{v}: only loads and EEXIST expected: {:?}", s.results);
    }
    assert_eq!(b.release, run.variants[0].kernel_release);
    let on = storm_of(&run, "dedup");
    let off = storm_of(&run, "nodedup");
    let deb = storm_of(&run, "debian");
    assert_eq!(on.kernel_reads, n, "dedup: each module file read once");
    assert_eq!(on.duplicate_read_bytes, 0);
    assert_eq!(stat(on, "Virtual mem wasted bytes"), 0);
    assert!(off.duplicate_read_bytes > 0 && off.kernel_reads > n, "stock path: duplicates read the file again");
    assert!(stat(off, "Virtual mem wasted bytes") > 0);
    assert!(deb.kernel_reads > n, "Debian's kernel reads duplicates ({})", deb.kernel_reads);
    assert!(deb.kernel_stats.is_empty(), "Debian's kernel has no module stats");
    if common::line() == "6.1" {
        // The series' own statistics (patch `load-stats` on 6.1).
        assert_eq!(stat(on, "load_module calls"), n as i64);
        assert_eq!(stat(on, "Mods ever loaded"), n as i64);
        assert_eq!(stat(on, "Load requests"), n as i64, "duplicates never reach the read");
        let answered = stat(on, "Duplicates waited for")
            + stat(on, "Duplicates of a live module")
            + stat(on, "Duplicates during init");
        assert_eq!(answered, 3 * n as i64, "every duplicate answered before reading");
        assert!(stat(off, "Duplicates found late (EEXIST)") > 0);
        assert_eq!(stat(off, "Duplicates waited for") + stat(off, "Duplicates of a live module"), 0);
    } else {
        // 6.12: upstream's statistics (MODULE_STATS) with the patch's three
        // counters; upstream's idempotent finit_module() makes concurrent
        // requests wait with dedup off too, so each request either read
        // the file or waited.
        let dups =
            |s: &Storm| stat(s, "Dups waited for") + stat(s, "Dups of a live module") + stat(s, "Dups during init");
        assert_eq!(dups(on), 3 * n as i64, "every duplicate answered before reading");
        assert_eq!(stat(off, "Dups of a live module") + stat(off, "Dups during init"), 0, "module.dedup=0");
        assert_eq!(off.kernel_reads as i64 + stat(off, "Dups waited for"), 4 * n as i64, "read, or waited");
        assert_eq!(on.load_module_calls, Some(n), "one load per module");
    }
}

/// Guest-side failures of the batch loader, duplicates of a load whose init
/// runs, and the self-request trap.
#[test]
fn the_batch_loader_fails_cleanly_duplicates_wait_and_self_requests_do_not_deadlock() {
    let _one = one_at_a_time();
    let tmp = tmpdir("batchbad");
    let b = self_built(true);
    let mods = tmp.join("test-modules");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules");
    sh(
        "make",
        &[
            "-s",
            "-C",
            src.to_str().unwrap(),
            "loading",
            &format!("KDIR={}", b.tree.display()),
            &format!("O={}", mods.display()),
        ],
    );
    let tree = ModTree::read(&b.dir.join("lib/modules").join(&b.release)).unwrap();
    let fat = tree.module("fat").unwrap().path.clone();
    let vfat = tree.module("vfat").unwrap().path.clone();

    let mut ir = Initramfs::new(busybox::busybox().unwrap());
    ir.copy_file("/bin/bl-modload", bootlink_lab::workload::modules::batchloader::binary().unwrap());
    for m in ["bl_fail", "bl_needs_fail", "bl_slow", "bl_selfreq"] {
        ir.copy_file(&format!("/m/{m}.ko"), mods.join(format!("{m}.ko")));
    }
    ir.copy_file("/m/fat.ko", &fat);
    // kmod's insmod loads by finit_module() (busybox's by init_module()).
    bootlink_lab::lab::userspace::add(&mut ir, Path::new("/usr/bin/kmod")).unwrap();
    ir.symlink("/kmod/insmod", "/usr/bin/kmod");
    ir.copy_file("/m/vfat.ko", &vfat);
    let plans: &[(&str, &str)] = &[
        ("cycle", "a /m/fat.ko b\nb /m/vfat.ko a\n"),
        ("missing", "nothere /m/nothere.ko -\nneedsit /m/vfat.ko nothere\n"),
        (
            "fails",
            "bl_fail /m/bl_fail.ko -\nbl_needs_fail /m/bl_needs_fail.ko bl_fail\nfat /m/fat.ko -\nvfat /m/vfat.ko fat\n",
        ),
        ("again", "fat /m/fat.ko -\nprintk /m/printk.ko -\n"),
        ("timeout", "bl_slow /m/bl_slow.ko - ms=4000\nvfat2 /m/vfat.ko bl_slow\n"),
    ];
    for (name, body) in plans {
        ir.file(&format!("/plans/{name}"), 0o644, format!("bootlink-plan 1\n{body}").into_bytes());
    }
    ir.file(
        "/sbin/naive-modprobe",
        0o755,
        b"#!/bin/sh\n# the kernel's request_module: load the file again, no checks\nexec insmod /m/bl_selfreq.ko\n"
            .to_vec(),
    );
    ir.file(
        "/sbin/naive-modprobe-finit",
        0o755,
        b"#!/bin/sh\n# the same by finit_module()\nexec /kmod/insmod /m/bl_selfreq.ko\n".to_vec(),
    );
    let script = r#"mount -t debugfs none /sys/kernel/debug
run() { n=$1; shift; bl-modload "$@" /plans/$n > /tmp/$n.out 2> /tmp/$n.err; echo "EXIT $n $?"; sed "s/^/OUT $n /" /tmp/$n.out; sed "s/^/ERR $n /" /tmp/$n.err; }
run cycle -j 2
echo "LSMOD-AFTER-CYCLE $(cat /proc/modules | wc -l)"
run missing -j 2
run fails -j 2
run again -j 2
t0=$(date +%s); run timeout -j 2 -t 1; echo "TIMEOUT-SECONDS $(( $(date +%s) - t0 ))"
sleep 4
# A worker killed while its module's init runs: nothing is loaded twice.
rmmod bl_slow
printf 'bootlink-plan 1\nbl_slow /m/bl_slow.ko - ms=2000\n' > /plans/killed
bl-modload -j 1 /plans/killed > /tmp/killed.out 2>&1 &
lp=$!
sleep 1
for p in /proc/[0-9]*; do
  pp=$(sed -n 's/^PPid:[[:space:]]*//p' $p/status 2>/dev/null)
  [ "$pp" = "$lp" ] && kill -9 ${p#/proc/} && echo "KILLED worker ${p#/proc/}"
done
wait $lp; echo "EXIT killed $?"; sed 's/^/OUT killed /' /tmp/killed.out
echo "SLOWLOADS $(dmesg | grep -c 'bl_slow: init takes')"
# Duplicates (kmod's insmod: finit_module()) of a load whose init runs.
waited() { awk '/(Duplicates|Dups) waited for/ { print $NF }' /sys/kernel/debug/modules/stats; }
dup() { /kmod/insmod "$@" 2>&1; echo "RC $?"; }
w0=$(waited); f0=$(dmesg | grep -c 'bl_fail: init fails')
dup /m/bl_fail.ko ms=2000 | sed 's/^/DUPFAIL first /' > /tmp/df0 &
sleep 0.5
dup /m/bl_fail.ko ms=2000 | sed 's/^/DUPFAIL dup1 /' > /tmp/df1 &
dup /m/bl_fail.ko ms=2000 | sed 's/^/DUPFAIL dup2 /' > /tmp/df2 &
wait; cat /tmp/df0 /tmp/df1 /tmp/df2
echo "DUPFAIL inits $(( $(dmesg | grep -c 'bl_fail: init fails') - f0 )) waited $(( $(waited) - w0 )) absent $([ -e /sys/module/bl_fail ] && echo no || echo yes)"
rmmod bl_slow
w0=$(waited); s0=$(dmesg | grep -c 'bl_slow: init takes')
dup /m/bl_slow.ko ms=2000 | sed 's/^/DUPSLOW first /' > /tmp/ds0 &
sleep 0.5
dup /m/bl_slow.ko ms=2000 | sed 's/^/DUPSLOW dup1 /'
echo "DUPSLOW state $(cat /sys/module/bl_slow/initstate 2>&1)"
wait; cat /tmp/ds0
echo "DUPSLOW inits $(( $(dmesg | grep -c 'bl_slow: init takes') - s0 )) waited $(( $(waited) - w0 ))"
# The self-request: bl_selfreq's init asks for its own alias, and the
# kernel's modprobe loads the same file again while that init runs.
echo /sbin/naive-modprobe > /proc/sys/kernel/modprobe
timeout 60 insmod /m/bl_selfreq.ko; echo "SELFREQ $?"
# The same with both loads by finit_module() (kmod's insmod).
rmmod bl_selfreq
echo /sbin/naive-modprobe-finit > /proc/sys/kernel/modprobe
timeout 60 /kmod/insmod /m/bl_selfreq.ko; echo "SELFREQ-FINIT $?"
dmesg | grep 'bl_selfreq:' | sed 's/^/DMESG /'
grep -e 'Duplicates during init' -e 'Dups during init' /sys/kernel/debug/modules/stats | sed 's/^/STAT /'
"#;
    ir.tag("batchbad").body(script);
    let initrd = tmp.join("initrd.cpio");
    ir.write(&initrd).unwrap();
    let opts = QemuOptions {
        initrd: Some(initrd),
        cmdline: format!(
            "console=ttyS0 nokaslr panic=-1 oops=panic quiet {}",
            bootlink_lab::lab::scenario::REALTIME_SMP_CMDLINE
        ),
        timeout: Duration::from_secs(240),
        cpus: 2,
        ..QemuOptions::new(b.dir.join("vmlinux"))
    };
    let boot = qemu::run(&opts).expect("start qemu");
    boot.check().unwrap_or_else(|e| panic!("{e}\n{}", boot.excerpt(60)));
    let text = boot.framed("batchbad").unwrap_or_else(|| panic!("no output:\n{}", boot.excerpt(60)));
    assert_eq!(initramfs::body_status(&boot.log, "batchbad"), Some(0), "{text}");
    println!("{text}");
    let exit = |n: &str| {
        text.lines().find_map(|l| l.strip_prefix(&format!("EXIT {n} "))).map(str::trim).unwrap_or("?").to_string()
    };
    let result = |n: &str, m: &str| -> String {
        let key = format!("OUT {n} LOAD name={m} ");
        let line =
            text.lines().find(|l| l.starts_with(&key)).unwrap_or_else(|| panic!("no result for {m} in {n}\n{text}"));
        line.split_whitespace().find_map(|w| w.strip_prefix("result=")).unwrap().to_string()
    };
    // A cycle: refused before anything is loaded.
    assert_eq!(exit("cycle"), "2");
    assert!(text.contains("ERR cycle ") && text.contains("cycle"), "{text}");
    assert!(text.contains("LSMOD-AFTER-CYCLE 0"), "{text}");
    // A missing file fails; its dependent is never loaded.
    assert_eq!(exit("missing"), "1");
    assert_eq!(result("missing", "nothere"), "failed");
    assert_eq!(result("missing", "needsit"), "dep-failed");
    // An init that fails: its dependent is not loaded, the rest is.
    assert_eq!(exit("fails"), "1");
    assert_eq!(result("fails", "bl_fail"), "failed");
    assert_eq!(result("fails", "bl_needs_fail"), "dep-failed");
    assert_eq!(result("fails", "fat"), "loaded");
    assert_eq!(result("fails", "vfat"), "loaded");
    // Already live, and built in (printk has /sys/module/printk): skipped.
    assert_eq!(exit("again"), "0");
    assert_eq!(result("again", "fat"), "already-live");
    assert_eq!(result("again", "printk"), "builtin");
    // A timeout: reported, its dependent not loaded, the loader returns.
    assert_eq!(exit("timeout"), "1");
    assert_eq!(result("timeout", "bl_slow"), "timeout");
    assert_eq!(result("timeout", "vfat2"), "dep-failed");
    let secs: u64 = text.lines().find_map(|l| l.strip_prefix("TIMEOUT-SECONDS ")).unwrap().trim().parse().unwrap();
    // A realtime boot (TCG, the host's clock, a 2-core host shared with
    // other work): the loader's 1 s timeout is host time, and the whole
    // seconds it prints carry the host's delays, so the bound is 3 s, not
    // a measured spread (none is recorded for this figure).
    assert!(secs <= 3, "the loader waited {secs} s for a 1 s timeout (realtime: up to 3 s allowed)");
    // A killed worker: its load is not retried; the module's state decides.
    assert!(text.contains("KILLED worker"), "{text}");
    assert_eq!(result("killed", "bl_slow"), "loaded");
    assert!(text.contains("SLOWLOADS 2"), "bl_slow's init ran once per plan, never twice: {text}");
    // Duplicates while the first load's init runs and fails: each gets the
    // init's error (ENODEV, "No such device"), having waited; the init ran
    // once and the module is absent.
    for who in ["first", "dup1", "dup2"] {
        let lines: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix(&format!("DUPFAIL {who} "))).collect();
        assert!(lines.iter().any(|l| l.contains("No such device")), "{who}: {lines:?}\n{text}");
        assert_eq!(lines.last(), Some(&"RC 1"), "{who}: {lines:?}");
    }
    assert!(text.contains("DUPFAIL inits 1 waited 2 absent yes"), "{text}");
    // Duplicates while a slow init runs: they return only once the module
    // is live, with the first load's result (success), the init ran once.
    assert!(text.contains("DUPSLOW dup1 RC 0"), "{text}");
    assert!(text.contains("DUPSLOW first RC 0"), "{text}");
    assert!(text.contains("DUPSLOW state live"), "{text}");
    assert!(text.contains("DUPSLOW inits 1 waited 1"), "{text}");
    // The self-request finished (no deadlock), answered at once, by
    // init_module() (busybox) and by finit_module() (kmod).
    assert!(text.contains("SELFREQ 0"), "{text}");
    assert!(text.contains("SELFREQ-FINIT 0"), "{text}");
    assert_eq!(text.matches("bl_selfreq: request_module(own alias) returned").count(), 2, "{text}");
    // (6.1's statistics patch says "Duplicates", 6.12's upstream file "Dups")
    let during: i64 = text
        .lines()
        .find(|l| l.starts_with("STAT ") && l.contains("during init"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    assert!(during >= 2, "both nested requests were answered as duplicates during init: {text}");
}
