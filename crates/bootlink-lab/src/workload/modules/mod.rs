//! How each lab loader runs in the guest: the shell the generated /init
//! runs for it, what it needs in the initramfs, and how its output is read
//! back.
//!
//! - `insmod`: busybox insmod, one module after the other (the default);
//! - `batch[-N]`: bootlink's batch loader (`loader/`, `bl-modload`) with N
//!   workers from a ready queue (default: one per CPU);
//! - `modprobe`: Debian's kmod modprobe, one module after the other, with
//!   a module tree and depmod's indexes;
//! - `modprobe-parallel`: kmod modprobe for every module at once, as udev's
//!   workers ask for modules (each modprobe loads its own dependencies);
//! - `storm`: one worker per CPU, each over the whole set at once with
//!   kmod's insmod (finit_module, as udev's libkmod calls it): the
//!   duplicate requests per-CPU uevents make. Counts the kernel's
//!   file reads (a kretprobe on kernel_read_file), load_module entries,
//!   peak VmallocUsed, time to quiescence and the kernel's own statistics.

pub mod batchloader;
pub mod chart;
pub mod record;
pub mod workload;

use std::path::Path;

use crate::lab::Initramfs;
use crate::workload::modules::record::Storm;
use bootlink::compress::Compression;
use bootlink::error::{Error, Kind, Result};

/// Where the loaders find things in the guest.
pub(crate) const PLAN: &str = "/etc/bootlink/plan";
pub(crate) const LIST: &str = "/etc/bootlink/modules";
pub(crate) const BATCH_BIN: &str = "/bin/bl-modload";
/// kmod under the name it answers as modprobe.
pub(crate) const KMOD_MODPROBE: &str = "/kmod/modprobe";
/// kmod's insmod: finit_module only (busybox's insmod retries a failed
/// finit_module with init_module, a second duplicate load of its own).
pub(crate) const KMOD_INSMOD: &str = "/kmod/insmod";
pub(crate) const KMOD: &str = "/usr/bin/kmod";

pub(crate) const LOADER_SECTION: &str = "@@@ bootlink loader @@@";
pub(crate) const LOADER_END: &str = "@@@ bootlink loader end @@@";
pub(crate) const STORM_SECTION: &str = "@@@ bootlink storm @@@";
pub(crate) const STORM_END: &str = "@@@ bootlink storm end @@@";

/// How the modules are loaded in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Loader {
    /// busybox insmod, one module after the other, in dependency order.
    #[default]
    Insmod,
    /// bootlink's batch loader with this many workers (None: one per CPU),
    /// and who decompresses a compressed module (`decompress:`).
    Batch(Option<u32>, Decompress),
    /// Debian's kmod modprobe, one module after the other.
    Modprobe,
    /// kmod modprobe for every module at once (udev-style).
    ModprobeParallel,
    /// One insmod worker per CPU over the whole set at once.
    Storm,
}

/// Who decompresses a compressed module (`.ko.xz`, `.ko.zst`, `.ko.gz`)
/// for the batch loader: its `--decompress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Decompress {
    /// The kernel (finit_module with MODULE_INIT_COMPRESSED_FILE), user
    /// space when the kernel refuses.
    #[default]
    Auto,
    /// The kernel only: a kernel without MODULE_DECOMPRESS for the format
    /// fails the module.
    Kernel,
    /// User space only (`xz|zstd|gzip -dc`, then init_module).
    User,
}

impl Decompress {
    pub fn parse(v: &str) -> Option<Decompress> {
        match v {
            "kernel" => Some(Decompress::Kernel),
            "user" => Some(Decompress::User),
            "auto" => Some(Decompress::Auto),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Decompress::Auto => "auto",
            Decompress::Kernel => "kernel",
            Decompress::User => "user",
        }
    }
}

/// What a loader puts into the initramfs beyond the modules and their list.
pub(crate) struct Extras<'a> {
    pub plan: &'a str,
    /// The kernel release and each module's path in its tree, for kmod.
    pub release: &'a str,
    pub tree: &'a Path,
    pub rels: &'a [(String, std::path::PathBuf)],
    /// How the guest holds the modules (their files' suffix).
    pub compression: Compression,
    /// The guest's architecture (the batch loader is built for it).
    pub arch: crate::lab::arch::Arch,
}

/// Add what `loader` needs: the batch loader and its plan; kmod, the
/// module tree and depmod's indexes.
pub(crate) fn add_to(ir: &mut Initramfs, loader: Loader, x: &Extras, work: &Path) -> Result<()> {
    match loader {
        Loader::Insmod => Ok(()),
        Loader::Storm => {
            add_kmod(ir, x.arch)?;
            ir.symlink(KMOD_INSMOD, KMOD);
            Ok(())
        }
        Loader::Batch(..) => {
            ir.copy_file(BATCH_BIN, crate::workload::modules::batchloader::binary_for(x.arch)?);
            ir.file(PLAN, 0o644, x.plan.as_bytes().to_vec());
            Ok(())
        }
        Loader::Modprobe | Loader::ModprobeParallel => {
            add_kmod(ir, x.arch)?;
            ir.symlink(KMOD_MODPROBE, KMOD);
            // kmod honours the runtime dependencies as softdeps.
            ir.file("/etc/modprobe.d/bootlink.conf", 0o644, bootlink::kmod::RUNTIME_DEPS.as_bytes().to_vec());
            let staged = module_tree(x, work)?;
            ir.copy_tree(&format!("/lib/modules/{}", x.release), staged);
            Ok(())
        }
    }
}

/// The program the batch loader runs to decompress in user space (`TOOL
/// -dc`, found through /init's PATH=/bin:/sbin) for the modules'
/// compression: busybox's xz and gzip applets; the host's zstd (busybox
/// has none), where the guest runs host programs.
pub(crate) fn add_decompressor(ir: &mut Initramfs, compression: Compression) -> Result<()> {
    match compression {
        Compression::None => {}
        Compression::Xz => {
            ir.applet("xz");
        }
        Compression::Gzip => {
            ir.applet("gzip");
        }
        Compression::Zstd => add_host_zstd(ir)?,
    }
    Ok(())
}

/// The host's zstd (x86-64 guests only: the lab's setup refuses it for
/// another architecture).
fn add_host_zstd(ir: &mut Initramfs) -> Result<()> {
    let zstd = Path::new("/usr/bin/zstd");
    if !zstd.is_file() {
        return Err(bootlink::hosttool::spawn_error(
            "zstd",
            "the guest's user-space zstd",
            "zstd",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    }
    crate::lab::userspace::add(ir, zstd)?;
    ir.symlink("/bin/zstd", "/usr/bin/zstd");
    Ok(())
}

/// kmod at [`KMOD`]: the host's where the guest runs host programs, else
/// Debian's package of the guest's architecture with its libraries.
fn add_kmod(ir: &mut Initramfs, arch: crate::lab::arch::Arch) -> Result<()> {
    if arch.runs_host_programs() {
        crate::lab::userspace::add(ir, Path::new(KMOD))?;
    } else {
        crate::lab::packaged::add(ir, crate::lab::packaged::KMOD_PACKAGES, arch.debian(), "kmod", KMOD)?;
    }
    Ok(())
}

/// Where the guest holds module `name`: `/lib/modules/NAME.ko` and the
/// suffix of the variant's compression (`.xz`, `.zst`, `.gz`), as the
/// loaders' list and plan name it.
pub(crate) fn guest_path(name: &str, compression: Compression) -> String {
    format!("/lib/modules/{name}.ko{}", compression.suffix())
}

/// The set's modules at their paths in a `lib/modules/<release>` tree with
/// depmod's indexes, for kmod to find by name.
fn module_tree(x: &Extras, work: &Path) -> Result<std::path::PathBuf> {
    let files = x.rels.iter().map(|(r, f)| {
        // The tree's name with the suffix of the variant's compression (a
        // compressed tree's modules are plain unless compress: says).
        let rel = Path::new(r);
        let name = rel.to_string_lossy();
        let plain = name.strip_suffix(Compression::of_module_name(rel).suffix()).unwrap_or(&name);
        (format!("{plain}{}", x.compression.suffix()), f.clone())
    });
    stage_module_tree(&work.join("kmod-root"), x.release, x.tree, files)
}

/// A `ROOT/lib/modules/RELEASE` tree for kmod: each (path in the tree,
/// file) copied in, `tree`'s modules.builtin, modules.builtin.modinfo and
/// modules.order beside them, indexed with `depmod -b ROOT RELEASE`;
/// returns the `lib/modules/RELEASE` directory.
pub fn stage_module_tree(
    root: &Path,
    release: &str,
    tree: &Path,
    files: impl IntoIterator<Item = (String, std::path::PathBuf)>,
) -> Result<std::path::PathBuf> {
    let dir = root.join("lib/modules").join(release);
    for (rel, file) in files {
        let dest = dir.join(rel);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
        }
        std::fs::copy(&file, &dest).map_err(|e| Error::io(&file, e))?;
    }
    for f in ["modules.builtin", "modules.builtin.modinfo", "modules.order"] {
        let src = tree.join(f);
        if src.is_file() {
            std::fs::copy(&src, dir.join(f)).map_err(|e| Error::io(&src, e))?;
        }
    }
    crate::lab::run_tool(
        std::process::Command::new("depmod").arg("-b").arg(root).arg(release),
        "indexing the set's modules for kmod (depmod)",
        "kmod",
    )?;
    Ok(dir)
}

/// The part of /init that loads the modules (after tracing is set up; `T`
/// is the tracefs mount). Every loader brackets its work with the kernel
/// log markers `bootlink: modules begin` / `end`; the sequential ones add
/// `insmod NAME` / `insmod-done NAME RC` per module, as the batch loader
/// does with `--kmsg`.
pub fn script(loader: Loader, trace: bool, marker: &str) -> String {
    let begin = "echo \"bootlink: modules begin\" > /dev/kmsg\n";
    let end = "echo \"bootlink: modules end\" > /dev/kmsg\n";
    match loader {
        Loader::Insmod | Loader::Modprobe => {
            let cmd = if loader == Loader::Insmod { "insmod \"$file\"" } else { "/kmod/modprobe \"$name\"" };
            // The marker is written by the process that then becomes the
            // loader, so the trace parser attributes the load to it by PID.
            let load =
                if trace { format!("(echo \"{marker}$name\" > $T/trace_marker; exec {cmd})") } else { cmd.to_string() };
            format!(
                "{begin}while read name file; do\n  echo \"bootlink: insmod $name\" > /dev/kmsg\n  {load}; rc=$?\n  \
                 echo \"bootlink: insmod-done $name $rc\" > /dev/kmsg\n  echo \"INSMOD $name $rc\"\ndone < {LIST}\n{end}"
            )
        }
        Loader::Batch(workers, decompress) => {
            let mut j = workers.map(|n| format!(" -j {n}")).unwrap_or_default();
            if decompress != Decompress::Auto {
                j.push_str(&format!(" --decompress {}", decompress.name()));
            }
            let tm = if trace { " --trace-marker $T/trace_marker" } else { "" };
            format!(
                "{begin}{BATCH_BIN}{j} --kmsg{tm} {PLAN} > /tmp/loader.out; rc=$?\n{end}\
                 echo '{LOADER_SECTION}'\ncat /tmp/loader.out\necho \"LOADER-EXIT $rc\"\necho '{LOADER_END}'\n"
            )
        }
        Loader::ModprobeParallel => format!(
            "{begin}while read name file; do\n  (echo \"bootlink: insmod $name\" > /dev/kmsg; {KMOD_MODPROBE} \"$name\"; rc=$?\n   \
             echo \"bootlink: insmod-done $name $rc\" > /dev/kmsg; echo \"INSMOD $name $rc\") &\ndone < {LIST}\nwait\n{end}"
        ),
        Loader::Storm => storm_script(),
    }
}

/// The storm: probes on the kernel's read and load, a VmallocUsed sampler,
/// one kmod insmod worker per CPU over the whole list at once.
fn storm_script() -> String {
    format!(
        r#"mount -t debugfs none /sys/kernel/debug 2>/dev/null
echo 'r:bootlink/kread kernel_read_file ret=$retval' >> $T/kprobe_events && echo 1 > $T/events/bootlink/kread/enable || echo 'bootlink: no kretprobe on kernel_read_file'
echo 'p:bootlink/loadmod load_module' >> $T/kprobe_events && echo 1 > $T/events/bootlink/loadmod/enable || echo 'bootlink: no kprobe on load_module'
echo 1 > $T/tracing_on
W=$(nproc)
vm() {{ while read k v u; do [ "$k" = VmallocUsed: ] && echo $v; done < /proc/meminfo; }}
echo "VMALLOC-BEFORE $(vm)" > /tmp/vm.before
(peak=0; while [ ! -e /tmp/storm.done ]; do v=$(vm); [ "$v" -gt "$peak" ] && peak=$v; usleep 1000; done; echo "VMALLOC-PEAK $peak" > /tmp/vm.peak) &
sampler=$!
echo "bootlink: modules begin" > /dev/kmsg
pids=""
for w in $(seq 1 $W); do
  (while read name file; do msg=$({KMOD_INSMOD} "$file" 2>&1); rc=$?; echo "STORM $w $name $rc ${{msg##*: }}"; done < {LIST}) > /tmp/storm.$w &
  pids="$pids $!"
done
wait $pids
echo "bootlink: modules end" > /dev/kmsg
touch /tmp/storm.done; wait $sampler
echo 0 > $T/tracing_on
echo '{STORM_SECTION}'
echo "WORKERS $W"
cat /tmp/vm.before /tmp/vm.peak
cat /tmp/storm.*
grep ' bootlink/\| kread: \| loadmod: ' $T/trace
echo '@@@ kernel stats @@@'
cat /sys/kernel/debug/modules/stats 2>/dev/null
echo '{STORM_END}'
"#
    )
}

/// Read the storm section of a boot's output. `sizes` are the set's module
/// file sizes (one read of each is not a duplicate).
pub(crate) fn parse_storm(section: &str, sizes: &[(String, u64)]) -> Storm {
    let mut s = Storm::default();
    let (main, stats) = section.split_once("@@@ kernel stats @@@").unwrap_or((section, ""));
    let mut results: Vec<(String, u64)> = Vec::new();
    let mut loadmod = 0u64;
    let mut probed_load = false;
    for line in main.lines().map(str::trim) {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("WORKERS") => s.workers = w.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            Some("VMALLOC-BEFORE") => s.vmalloc_before_kb = w.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            Some("VMALLOC-PEAK") => s.vmalloc_peak_kb = w.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            Some("STORM") => {
                let (_worker, _name, rc) = (w.next(), w.next(), w.next());
                let msg: Vec<&str> = w.collect();
                let key = match rc {
                    Some("0") => "loaded".to_string(),
                    _ if msg.is_empty() => format!("failed ({})", rc.unwrap_or("?")),
                    _ => msg.join(" "),
                };
                s.requests += 1;
                match results.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, n)) => *n += 1,
                    None => results.push((key, 1)),
                }
            }
            _ => {
                if line.contains(" kread: ") {
                    s.kernel_reads += 1;
                    s.bytes_read += read_bytes(line.rsplit("ret=").next().unwrap_or(""));
                } else if line.contains(" loadmod: ") {
                    probed_load = true;
                    loadmod += 1;
                }
            }
        }
    }
    s.results = results;
    if probed_load {
        s.load_module_calls = Some(loadmod);
    }
    let once: u64 = sizes.iter().fold(0u64, |a, (_, n)| a.saturating_add(*n));
    s.duplicate_read_bytes = s.bytes_read.saturating_sub(once);
    s.kernel_stats = stats
        .lines()
        .filter_map(|l| {
            let l = l.trim_end();
            let (name, value) = l.rsplit_once(char::is_whitespace)?;
            Some((name.trim().to_string(), value.parse().ok()?))
        })
        .filter(|(n, _): &(String, i64)| !n.is_empty())
        .collect();
    s
}

/// The bytes a kretprobe's `ret=` says were read: 6.1 prints it in hex
/// (`0x1f40`, an error as a huge value), 6.12 in decimal (`8000`, `-17`);
/// an error reads nothing.
fn read_bytes(ret: &str) -> u64 {
    let ret = ret.trim();
    let v = match ret.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => ret.parse::<i64>().ok().map(|v| v as u64),
    };
    v.filter(|&v| v < 1 << 63).unwrap_or(0)
}

/// One loader's name on the command line.
pub(crate) fn parse_name(value: &str) -> Option<Loader> {
    Some(match value {
        "insmod" => Loader::Insmod,
        "batch" => Loader::Batch(None, Decompress::Auto),
        "modprobe" => Loader::Modprobe,
        "modprobe-parallel" => Loader::ModprobeParallel,
        "storm" => Loader::Storm,
        v => {
            let n: u32 = v.strip_prefix("batch-")?.parse().ok()?;
            if n == 0 || n > 64 {
                return None;
            }
            Loader::Batch(Some(n), Decompress::Auto)
        }
    })
}

/// Loaders whose loads cannot be traced per module (their load runs in a
/// process other than the one that wrote the marker, or many at once).
pub(crate) fn traceable(loader: Loader) -> bool {
    matches!(loader, Loader::Insmod | Loader::Modprobe | Loader::Batch(..))
}

pub fn describe(loader: Loader) -> String {
    match loader {
        Loader::Insmod => "insmod".into(),
        Loader::Batch(None, _) => "batch".into(),
        Loader::Batch(Some(n), _) => format!("batch-{n}"),
        Loader::Modprobe => "modprobe".into(),
        Loader::ModprobeParallel => "modprobe-parallel".into(),
        Loader::Storm => "storm".into(),
    }
}

/// Refuse a loader the run cannot give it.
pub fn check(loader: Loader, variant: &str, realtime: bool) -> Result<()> {
    if matches!(loader, Loader::Storm | Loader::ModprobeParallel) && !realtime {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "variant {variant}: loader:{} needs --realtime and --smp N: concurrent requests need several CPUs, and QEMU's deterministic clock runs one",
                describe(loader)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_names_parse() {
        assert_eq!(parse_name("batch-4"), Some(Loader::Batch(Some(4), Decompress::Auto)));
        assert_eq!(parse_name("batch"), Some(Loader::Batch(None, Decompress::Auto)));
        assert_eq!(parse_name("storm"), Some(Loader::Storm));
        assert_eq!(parse_name("batch-0"), None);
        assert_eq!(parse_name("batch-x"), None);
        for l in [Loader::Insmod, Loader::Modprobe, Loader::ModprobeParallel, Loader::Batch(Some(2), Decompress::Auto)]
        {
            assert_eq!(parse_name(&describe(l)), Some(l));
        }
    }

    #[test]
    fn a_storm_section_parses() {
        let text = "WORKERS 4\nVMALLOC-BEFORE 1000\nVMALLOC-PEAK 5000\n\
            STORM 1 crc16 0 \nSTORM 2 crc16 1 File exists\nSTORM 3 crc16 1 File exists\n\
            insmod-80 [001] ..... 1.0: kread: (kernel_read_file_from_fd+0x1/0x2 <- kernel_read_file) ret=0x1000\n\
            insmod-81 [002] ..... 1.1: kread: (kernel_read_file_from_fd+0x1/0x2 <- kernel_read_file) ret=0xfffffffffffffffe\n\
            insmod-80 [001] ..... 1.0: loadmod: (load_module+0x0/0x10)\n\
            @@@ kernel stats @@@\nLoad requests                    3\nVirtual mem wasted bytes         0\n";
        let s = parse_storm(text, &[("crc16".into(), 0x800)]);
        assert_eq!((s.workers, s.requests, s.vmalloc_before_kb, s.vmalloc_peak_kb), (4, 3, 1000, 5000));
        assert_eq!(s.results, vec![("loaded".to_string(), 1), ("File exists".to_string(), 2)]);
        assert_eq!((s.kernel_reads, s.bytes_read, s.duplicate_read_bytes), (2, 0x1000, 0x800));
        assert_eq!(s.load_module_calls, Some(1));
        assert_eq!(
            (read_bytes("0x1000"), read_bytes("4096"), read_bytes("-17"), read_bytes("0xffffffffffffffef")),
            (4096, 4096, 0, 0)
        );
        assert_eq!(s.kernel_stats, vec![("Load requests".to_string(), 3), ("Virtual mem wasted bytes".to_string(), 0)]);
    }
}
