//! End to end: preresolved modules load in the real kernel and the file
//! systems they drive work.
//!
//! The module set (ext4, vfat with the NLS tables its default mount options
//! need, xfs, btrfs, and the virtio modules for the disks) is resolved by
//! bootlink's own modset code from the reference kernel's tree. Four small
//! sparse images made on the host (mkfs.ext4, mkfs.vfat, mkfs.xfs,
//! mkfs.btrfs) are attached as virtio disks. Three boots of the reference
//! vmlinux (PVH entry, `nokaslr`): the control loads Debian's signed modules
//! unchanged, the others the same set run through `bootlink preresolve
//! --assume-nokaslr`, once with the symbols made SHN_ABS and once with
//! `--fold-symbols` (addresses folded into the relocations, the symbols
//! removed). Each insmods the set in order, then mounts every file
//! system, writes a file of known content, syncs, unmounts, mounts again and
//! compares what it reads back. Unsigned modules taint the kernel with E
//! (8192): the preresolved boots must be E-tainted, module by module, and
//! the control must not be.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bootlink::kernel::KernelImage;
use bootlink::kmod::{LoadPlan, ModTree};
use bootlink::preresolve::{self, ModuleResult, Options, Output, SigAction, Status};
use bootlink::table::Table;
use bootlink_lab::lab::{Boot, Initramfs, QemuOptions, TempDir, busybox, initramfs, qemu};

const CMDLINE: &str = "console=ttyS0 nokaslr panic=-1 oops=panic quiet";
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);
/// TAINT_UNSIGNED_MODULE ("E").
const TAINT_UNSIGNED: u64 = 8192;
/// What the modset code resolves. Debian's config (config-6.1.0-56-amd64)
/// has VIRTIO, VIRTIO_PCI and VIRTIO_BLK as modules (virtio_ring, and the
/// PCI modern/legacy helpers come as dependencies), and vfat mounts by
/// default with codepage 437 (FAT_DEFAULT_CODEPAGE=437) and iocharset ascii
/// (FAT_DEFAULT_IOCHARSET="ascii"; FAT_DEFAULT_UTF8=y uses the built-in
/// UTF-8 code, not nls_utf8): it loads nls_cp437 and nls_ascii at mount
/// time, and with no /sbin/modprobe in the guest they must be there already.
const REQUEST: &[&str] = &["virtio_pci", "virtio_blk", "ext4", "vfat", "nls_cp437", "nls_ascii", "xfs", "btrfs"];
/// `seq 1 50000`: the file each file system round-trips (288,894 bytes).
const SEQ_LAST: u32 = 50_000;

struct Disk {
    fs: &'static str,
    /// The smallest each mkfs accepts here (ext4: with a journal; btrfs:
    /// 114,294,784 bytes; xfs: 300 MB), all different so that the guest can
    /// tell which disk is which by its size.
    mib: u64,
    mkfs: &'static str,
    args: &'static [&'static str],
}

const DISKS: &[Disk] = &[
    Disk { fs: "ext4", mib: 2, mkfs: "mkfs.ext4", args: &["-F", "-q"] },
    Disk { fs: "vfat", mib: 1, mkfs: "mkfs.vfat", args: &[] },
    Disk { fs: "xfs", mib: 300, mkfs: "mkfs.xfs", args: &["-f", "-q"] },
    Disk { fs: "btrfs", mib: 109, mkfs: "mkfs.btrfs", args: &["-f", "-q"] },
];

fn dev(i: usize) -> String {
    format!("vd{}", (b'a' + i as u8) as char)
}

/// A tool by name: on PATH, else in the sbin directories a non-root PATH
/// may lack (the mkfs tools live in /usr/sbin).
fn tool(name: &str) -> PathBuf {
    let on_path =
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(name).is_file()));
    if !on_path {
        for dir in ["/usr/sbin", "/sbin"] {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from(name)
}

/// Fresh sparse images, one per disk, in `dir`.
fn make_images(dir: &Path) -> Vec<PathBuf> {
    DISKS
        .iter()
        .map(|d| {
            let img = dir.join(format!("{}.img", d.fs));
            let f = std::fs::File::create(&img).unwrap();
            f.set_len(d.mib << 20).unwrap();
            drop(f);
            let o =
                Command::new(tool(d.mkfs)).args(d.args).arg(&img).output().unwrap_or_else(|e| {
                    panic!("{}: {e} (install e2fsprogs, dosfstools, xfsprogs, btrfs-progs)", d.mkfs)
                });
            assert!(o.status.success(), "{} {}: {}", d.mkfs, img.display(), String::from_utf8_lossy(&o.stderr));
            img
        })
        .collect()
}

/// The guest's script: insmod the set in order, check the disks, round-trip
/// a file on every file system, report taint, modules and dmesg.
fn body(release: &str, plan: &LoadPlan) -> String {
    let mut s = String::new();
    s.push_str(&format!("R=/lib/modules/{release}\n"));
    s.push_str("t0=$(cut -d' ' -f1 /proc/uptime)\n");
    for step in plan.steps.iter() {
        let e = step.entry;
        s.push_str(&format!("insmod $R/{} 2>/tmp/insmod.err\necho \"INSMOD {} $?\"\n", e.rel.display(), e.name));
        s.push_str("[ -s /tmp/insmod.err ] && echo \"INSMODERR $(tr '\\n' ' ' < /tmp/insmod.err)\"\n");
    }
    s.push_str("t1=$(cut -d' ' -f1 /proc/uptime)\necho \"LOADTIME $t0 $t1\"\n");
    let last = dev(DISKS.len() - 1);
    s.push_str(&format!("i=0; while [ ! -b /dev/{last} ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\n"));
    for i in 0..DISKS.len() {
        let d = dev(i);
        s.push_str(&format!("echo \"DISK {d} $(cat /sys/block/{d}/size 2>/dev/null || echo missing)\"\n"));
    }
    s.push_str(&format!(
        r#"seq 1 {SEQ_LAST} > /tmp/expect
want=$(md5sum < /tmp/expect | cut -d' ' -f1)
echo "EXPECT $want $(wc -c < /tmp/expect)"
fail() {{ echo "FS $fs FAIL $1: $(tr '\n' ' ' < /tmp/err)"; }}
roundtrip() {{
    fs=$1; dev=$2; mnt=/mnt/$fs
    mkdir -p $mnt
    mount -t $fs $dev $mnt 2>/tmp/err || {{ fail mount; return; }}
    cp /tmp/expect $mnt/data.txt 2>/tmp/err || {{ fail write; umount $mnt; return; }}
    sync
    umount $mnt 2>/tmp/err || {{ fail umount; return; }}
    mount -t $fs $dev $mnt 2>/tmp/err || {{ fail remount; return; }}
    got=$(md5sum < $mnt/data.txt | cut -d' ' -f1)
    if cmp -s /tmp/expect $mnt/data.txt && [ "$got" = "$want" ]; then r=OK; else r="FAIL content differs (md5 $got)"; fi
    umount $mnt 2>/tmp/err || r="FAIL final umount: $(tr '\n' ' ' < /tmp/err)"
    echo "FS $fs $r"
}}
"#
    ));
    for (i, d) in DISKS.iter().enumerate() {
        s.push_str(&format!("roundtrip {} /dev/{}\n", d.fs, dev(i)));
    }
    s.push_str(
        r#"echo "TAINT $(cat /proc/sys/kernel/tainted)"
for m in $(cut -d' ' -f1 /proc/modules); do echo "MODULE $m $(cat /sys/module/$m/taint)"; done
dmesg | grep -e 'disagrees about version' -e 'Unknown symbol' -e 'Key was rejected' -e 'module verification failed' > /tmp/dm
echo "DMESGBAD $(grep -c -e 'disagrees about version' -e 'Unknown symbol' -e 'Key was rejected' /tmp/dm)"
echo "SIGFAILED $(grep -c 'module verification failed' /tmp/dm)"
while read -r l; do echo "DMESG $l"; done < /tmp/dm
echo "WARNINGS $(dmesg | grep -c -e 'WARNING:' -e 'Call Trace')"
exit 0
"#,
    );
    s
}

/// What one boot printed, parsed.
#[derive(Default, Debug)]
struct Outcome {
    insmods: Vec<(String, i32)>,
    insmod_errors: Vec<String>,
    load_secs: Option<f64>,
    disks: Vec<(String, String)>,
    expect: Option<(String, u64)>,
    fs: Vec<(String, String)>,
    taint: Option<u64>,
    /// Loaded modules and their taint flags (/sys/module/*/taint).
    modules: Vec<(String, String)>,
    dmesg_bad: Option<usize>,
    sig_failed: Option<usize>,
    dmesg: Vec<String>,
    warnings: Option<usize>,
}

fn parse(text: &str) -> Outcome {
    let mut o = Outcome::default();
    for line in text.lines() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        match key {
            "INSMOD" if words.len() == 2 => o.insmods.push((words[0].to_string(), words[1].parse().unwrap_or(-1))),
            "INSMODERR" => o.insmod_errors.push(rest.to_string()),
            "LOADTIME" if words.len() == 2 => {
                if let (Ok(a), Ok(b)) = (words[0].parse::<f64>(), words[1].parse::<f64>()) {
                    o.load_secs = Some(b - a);
                }
            }
            "DISK" if words.len() == 2 => o.disks.push((words[0].to_string(), words[1].to_string())),
            "EXPECT" if words.len() == 2 => o.expect = Some((words[0].to_string(), words[1].parse().unwrap_or(0))),
            "FS" if !words.is_empty() => o.fs.push((words[0].to_string(), words[1..].join(" "))),
            "TAINT" => o.taint = rest.trim().parse().ok(),
            "MODULE" if !words.is_empty() => o.modules.push((words[0].to_string(), words[1..].concat())),
            "DMESGBAD" => o.dmesg_bad = rest.trim().parse().ok(),
            "SIGFAILED" => o.sig_failed = rest.trim().parse().ok(),
            "DMESG" => o.dmesg.push(rest.to_string()),
            "WARNINGS" => o.warnings = rest.trim().parse().ok(),
            _ => {}
        }
    }
    o
}

struct Variant {
    name: &'static str,
    boot: Boot,
    out: Outcome,
    /// Modules expected to load unsigned (E in /sys/module/*/taint).
    unsigned: Vec<String>,
    /// What the body printed.
    text: String,
}

/// Build the initramfs with `files` (guest path relative to
/// lib/modules/<release>, host file), boot with fresh disks, parse.
fn run_variant(
    name: &'static str,
    release: &str,
    plan: &LoadPlan,
    files: &[(PathBuf, PathBuf)],
    unsigned: Vec<String>,
) -> Variant {
    let k = common::kernel();
    let bb = busybox::busybox().expect("busybox");
    let tmp = TempDir::new(&format!("preresolve-boot-{name}")).unwrap();
    let mut init = Initramfs::new(&bb);
    init.tag(name).body(&body(release, plan)).applet("md5sum").applet("cmp");
    for (rel, host) in files {
        init.copy_file(&format!("lib/modules/{release}/{}", rel.display()), host);
    }
    let initrd = tmp.path().join("initrd.cpio");
    init.write(&initrd).expect("write the initramfs");
    let images = make_images(tmp.path());
    let mut extra = Vec::new();
    for img in &images {
        extra.push("-drive".into());
        extra.push(format!("file={},if=virtio,format=raw", img.display()).into());
    }
    let opts = QemuOptions {
        initrd: Some(initrd.clone()),
        cmdline: CMDLINE.into(),
        memory_mib: 1024,
        timeout: BOOT_TIMEOUT,
        extra_args: extra,
        ..QemuOptions::new(&k.vmlinux)
    };
    let boot = qemu::run(&opts).expect("start qemu");
    println!(
        "{name}: {} in {:.1} s wall; initramfs {} KB",
        boot.status.describe(),
        boot.wall.as_secs_f64(),
        std::fs::metadata(&initrd).map(|m| m.len() / 1024).unwrap_or(0)
    );
    if let Err(e) = boot.check() {
        panic!("{name}: {e}\ncommand: {}", boot.command);
    }
    let text =
        boot.framed(name).unwrap_or_else(|| panic!("{name}: no framed output; console ends:\n{}", boot.excerpt(60)));
    assert_eq!(initramfs::body_status(&boot.log, name), Some(0), "{name}: the body failed:\n{text}");
    let out = parse(&text);
    Variant { name, boot, out, unsigned, text }
}

/// Everything wrong with one variant (empty: all good).
fn problems(v: &Variant, plan: &LoadPlan, expect_bytes: u64) -> Vec<String> {
    let mut p = Vec::new();
    let o = &v.out;
    let names = plan.names();
    let got: Vec<&str> = o.insmods.iter().map(|(n, _)| n.as_str()).collect();
    if got != names {
        p.push(format!("insmod lines {got:?}, expected {names:?}"));
    }
    for (n, rc) in &o.insmods {
        if *rc != 0 {
            p.push(format!("insmod {n} returned {rc}"));
        }
    }
    for e in &o.insmod_errors {
        p.push(format!("insmod said: {e}"));
    }
    for (i, d) in DISKS.iter().enumerate() {
        let want = (dev(i), (d.mib * 2048).to_string());
        if o.disks.get(i) != Some(&want) {
            p.push(format!("disk {} for {} should have {} sectors: got {:?}", want.0, d.fs, want.1, o.disks.get(i)));
        }
    }
    match &o.expect {
        Some((_, n)) if *n == expect_bytes => {}
        other => p.push(format!("guest's expected file: {other:?}, want {expect_bytes} bytes")),
    }
    for d in DISKS {
        match o.fs.iter().find(|(f, _)| f == d.fs) {
            Some((_, r)) if r == "OK" => {}
            Some((_, r)) => p.push(format!("{}: {r}", d.fs)),
            None => p.push(format!("{}: no FS line", d.fs)),
        }
    }
    let loaded: Vec<&str> = o.modules.iter().map(|(n, _)| n.as_str()).collect();
    for n in &names {
        if !loaded.contains(n) {
            p.push(format!("{n} is not in /proc/modules"));
        }
    }
    for (m, flags) in &o.modules {
        let want_e = v.unsigned.contains(m);
        if flags.contains('E') != want_e {
            p.push(format!(
                "module {m}: taint flags {flags:?}, expected {}",
                if want_e { "E (unsigned)" } else { "no E" }
            ));
        }
    }
    let want_e = !v.unsigned.is_empty();
    match o.taint {
        Some(t) if (t & TAINT_UNSIGNED != 0) == want_e => {}
        other => p.push(format!("kernel taint {other:?}: E (8192) should be {}", if want_e { "set" } else { "clear" })),
    }
    if o.dmesg_bad != Some(0) {
        p.push(format!("{:?} dmesg lines about versions, unknown symbols or rejected keys", o.dmesg_bad));
    }
    if o.warnings != Some(0) {
        p.push(format!("{:?} kernel warnings in dmesg", o.warnings));
    }
    p
}

#[test]
fn preresolved_modules_mount_four_file_systems() {
    let k = common::kernel();
    let release = &k.release;
    println!("kernel: {} {} ({})", k.package, k.version, k.vmlinux.display());

    // The set, by bootlink's own resolution.
    let tree = ModTree::read(&k.modules).expect("read the module tree");
    let plan = tree.resolve(REQUEST).expect("resolve the module set");
    println!("module set ({} modules, from {} in the tree):", plan.steps.len(), tree.len());
    for s in &plan.steps {
        println!("  {:<24} {:<44} {}", s.entry.name, s.entry.rel.display(), s.why);
    }
    for (asked, b) in &plan.builtin {
        println!("  built in: {asked} ({b})");
    }
    let names = plan.names();
    for want in ["virtio", "virtio_ring", "crc32c_generic", "libcrc32c", "jbd2", "mbcache", "crc16", "fat"] {
        assert!(names.contains(&want), "{want} is missing from {names:?}");
    }
    assert!(tree.check_order(&plan.entries()).is_empty(), "{:?}", tree.check_order(&plan.entries()));

    // The preresolved copies: SHN_ABS, and folded into the relocations.
    let tmp = TempDir::new("preresolve-boot").unwrap();
    let image = KernelImage::open(&k.vmlinux, Some(&k.config)).expect("open vmlinux");
    let inputs: Vec<PathBuf> = plan.steps.iter().map(|s| s.entry.path.clone()).collect();
    let rewrite = |fold: bool| -> (Vec<(PathBuf, PathBuf)>, Vec<String>) {
        let out_dir = tmp.path().join(if fold { "folded" } else { "preresolved" });
        let opts = Options {
            output: Output::Dir(out_dir),
            assume_nokaslr: true,
            sign: None,
            fold,
            trim: false,
            dry_run: false,
        };
        let report = preresolve::run(&image, &inputs, &opts).expect("preresolve");
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        for m in &report.modules {
            println!("  {}", m.line());
        }
        let result = |name: &str| -> &ModuleResult {
            report.modules.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no preresolve result for {name}"))
        };
        for fs in ["ext4", "vfat", "xfs", "btrfs"] {
            assert_eq!(result(fs).status, Status::Preresolved, "{}", result(fs).line());
        }
        for m in &report.modules {
            if m.status == Status::Preresolved {
                let w = bootlink::module::read(&m.output).expect("read a preresolved module");
                assert!(
                    w.preresolved && w.signature.is_none(),
                    "{} is not a stripped, preresolved module",
                    m.output.display()
                );
                // Folded: no symbol left SHN_ABS, each listed in .preresolved.
                let want = if fold { (0, m.preresolved) } else { (m.preresolved, 0) };
                assert_eq!((w.absolute.len(), w.folded.len()), want, "{}", m.output.display());
            }
        }
        let files = plan.steps.iter().map(|s| (s.entry.rel.clone(), result(&s.entry.name).output.clone())).collect();
        let unsigned = plan
            .steps
            .iter()
            .filter(|s| result(&s.entry.name).signature != SigAction::Kept)
            .map(|s| s.entry.name.clone())
            .collect();
        (files, unsigned)
    };
    let (rewritten, unsigned) = rewrite(false);
    let (folded, folded_unsigned) = rewrite(true);
    assert_eq!(unsigned, folded_unsigned);

    let original: Vec<(PathBuf, PathBuf)> =
        plan.steps.iter().map(|s| (s.entry.rel.clone(), s.entry.path.clone())).collect();
    assert!(plan.steps.iter().all(|s| s.entry.signed), "Debian's modules are all signed");

    let expect_bytes: u64 = (1..=SEQ_LAST).map(|n| n.to_string().len() as u64 + 1).sum();
    let variants = [
        run_variant("control", release, &plan, &original, Vec::new()),
        run_variant("preresolved", release, &plan, &rewritten, unsigned),
        run_variant("folded", release, &plan, &folded, folded_unsigned),
    ];

    let mut table = Table::new(&[
        "variant",
        "boot wall",
        "insmod ok",
        "load (guest)",
        "ext4",
        "vfat",
        "xfs",
        "btrfs",
        "taint",
        "unsigned modules",
        "bad dmesg",
    ]);
    let mut all = Vec::new();
    for v in &variants {
        let o = &v.out;
        let fs = |name: &str| {
            o.fs.iter()
                .find(|(f, _)| f == name)
                .map(|(_, r)| if r == "OK" { "OK".to_string() } else { "FAIL".to_string() })
                .unwrap_or_else(|| "-".into())
        };
        let e_modules = o.modules.iter().filter(|(_, f)| f.contains('E')).count();
        table.row(vec![
            v.name.to_string(),
            format!("{:.1} s", v.boot.wall.as_secs_f64()),
            format!("{}/{}", o.insmods.iter().filter(|(_, rc)| *rc == 0).count(), plan.steps.len()),
            o.load_secs.map_or("-".into(), |s| format!("{s:.2} s")),
            fs("ext4"),
            fs("vfat"),
            fs("xfs"),
            fs("btrfs"),
            o.taint.map_or("-".into(), |t| t.to_string()),
            format!("{e_modules}/{}", o.modules.len()),
            o.dmesg_bad.map_or("-".into(), |n| n.to_string()),
        ]);
        for l in &o.dmesg {
            println!("{} dmesg: {l}", v.name);
        }
        for (f, r) in &o.fs {
            println!("{} FS {f} {r}", v.name);
        }
        let found = problems(v, &plan, expect_bytes);
        if !found.is_empty() {
            println!("--- {} printed ---\n{}---", v.name, v.text);
        }
        for p in found {
            all.push(format!("{}: {p}", v.name));
        }
    }
    println!("\n{}", table.render());
    println!(
        "(load (guest) is /proc/uptime around the insmods: the preresolved modules are also unsigned, so the \
         difference includes the signature checks they skip, not only symbol resolution)"
    );
    assert!(all.is_empty(), "{} problems:\n{}", all.len(), all.join("\n"));
}
