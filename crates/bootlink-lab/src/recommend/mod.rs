//! `bootlink recommend`: which kernel image boots fastest from a given
//! storage, from a lab run that booted the candidates.
//!
//! A boot loader reads the image, then the machine runs from reset to
//! /init: firmware, setup, the decompressor, the kernel. The lab measures
//! the second part exactly (each boot's `boot_clock`, the guest's
//! cycle counter under `-icount`, see [`crate::lab::bootclock`]); the first
//! is the lab's flash model ([`crate::workload::order::Flash`]: one request of
//! 4 KiB at a time, each `latency + 4 KiB / throughput`), computed for the
//! image's bytes. Each image is then a line in the time per byte; for any
//! storage the best is the lowest line, and where two lines cross is the
//! throughput at which the best image changes. The whole envelope is in
//! the report, so one run answers for every storage speed.
//!
//! The module set is the same trade-off once more: its files are read
//! (each rounded up to whole requests, one file after the other) and
//! loaded, decompressed by the kernel or by user space; the lab measures
//! the load (the set's time in the guest) for each way of storing them
//! (`compress:`, `decompress:`), the model gives the read. Both choices add
//! up to the time until the set is loaded: in a product the initramfs loads
//! it before the root's /init.

mod svg;
mod text;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use svg::{chart, module_chart};

use crate::run::results::Run;
use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;

/// The flash model's request size (bytes).
const REQUEST: f64 = crate::workload::order::REQUEST as f64;

/// Storage the image is read from: throughput and per-request latency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Storage {
    /// MiB/s.
    pub mib_s: f64,
    /// Microseconds per 4 KiB request.
    pub latency_us: f64,
}

impl Storage {
    /// The lab's presets (`slow`, `nand`, `nor`) or `MIBS-USEC` (MiB/s,
    /// fractions allowed, and microseconds per 4 KiB request).
    pub fn parse(value: &str) -> Result<Storage> {
        if let Ok(f) = crate::workload::order::Flash::parse(value) {
            return Ok(Storage { mib_s: f64::from(f.mib_s), latency_us: f64::from(f.latency_us) });
        }
        let bad = || {
            Error::new(
                Kind::Usage,
                format!(
                    "--storage {value}: give slow, nand, nor or MIBS-USEC (MiB/s above 0, microseconds per 4 KiB request, e.g. 25-50)"
                ),
            )
        };
        let (a, b) = value.split_once('-').ok_or_else(bad)?;
        let mib_s: f64 = a.parse().ok().filter(|n: &f64| n.is_finite() && *n > 0.0 && *n <= 1e6).ok_or_else(bad)?;
        let latency_us: f64 =
            b.parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0 && *n <= 1e6).ok_or_else(bad)?;
        Ok(Storage { mib_s, latency_us })
    }

    /// Microseconds to read `bytes`: whole 4 KiB requests, one at a time.
    pub fn read_us(&self, bytes: u64) -> f64 {
        requests(bytes) * self.request_us()
    }

    /// Microseconds per 4 KiB request.
    pub fn request_us(&self) -> f64 {
        self.latency_us + REQUEST / (self.mib_s * 1_048_576.0) * 1e6
    }
}

fn requests(bytes: u64) -> f64 {
    bytes.div_ceil(REQUEST as u64) as f64
}

pub struct Options {
    /// A lab run directory (or its run.json).
    pub run: PathBuf,
    pub storage: Storage,
    /// Also draw the images' chart ([`chart`]) into this SVG.
    pub svg: Option<PathBuf>,
    /// Also draw the module set's chart ([`module_chart`]) into this SVG.
    pub modules_svg: Option<PathBuf>,
}

/// One booted image of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The lab variant that booted it.
    pub variant: String,
    /// `bzImage`, `vmlinux` or `Image`.
    pub kind: String,
    /// The kernel's compressor (`none` when uncompressed).
    pub compression: String,
    /// What the boot loader reads.
    pub read_bytes: u64,
    /// Reset to /init, the median of the variant's boots.
    pub boot_us: f64,
    /// The decompressor's own time, entry to end (median; a bzImage boot
    /// of a lab kernel).
    pub decompress_us: Option<f64>,
    /// Reset to start_kernel() (median; a lab kernel).
    pub start_kernel_us: Option<f64>,
    /// Largest minus smallest of those boots (0 for deterministic boots).
    pub boot_spread_us: f64,
    pub boots: usize,
    /// Reading the image from the storage asked about.
    pub read_us: f64,
    /// Read plus boot.
    pub total_us: f64,
}

/// One way of storing the module set: its files, read and loaded.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleCandidate {
    /// The lab variant that loaded them.
    pub variant: String,
    /// `none`, `xz`, `zstd` or `gzip`.
    pub compression: String,
    /// Who decompressed them: `kernel`, `user` (the batch loader's counts;
    /// `user` too for busybox insmod or kmod, which decompress in their
    /// own process), or `none`.
    pub decompressed_by: String,
    pub files: u64,
    pub file_bytes: u64,
    pub requests_4k: u64,
    /// The set's load in the guest (first module to last), median.
    pub load_us: f64,
    pub boots: usize,
    /// Reading the files from the storage asked about.
    pub read_us: f64,
    pub total_us: f64,
}

/// A line of the chart and the envelope: total = fixed + requests x
/// request time.
pub(crate) struct Curve {
    pub name: String,
    pub requests: f64,
    pub fixed_us: f64,
    pub bytes: u64,
}

impl Curve {
    pub(crate) fn total_us(&self, s: Storage) -> f64 {
        self.requests * s.request_us() + self.fixed_us
    }
}

impl Candidate {
    pub(crate) fn curve(&self) -> Curve {
        Curve {
            name: self.variant.clone(),
            requests: requests(self.read_bytes),
            fixed_us: self.boot_us,
            bytes: self.read_bytes,
        }
    }
}

impl ModuleCandidate {
    pub(crate) fn curve(&self) -> Curve {
        Curve {
            name: self.variant.clone(),
            requests: self.requests_4k as f64,
            fixed_us: self.load_us,
            bytes: self.file_bytes,
        }
    }
}

/// A range of throughput (MiB/s) over which one image is best, at the
/// storage's latency.
#[derive(Debug, Clone, Serialize)]
pub struct Range {
    pub variant: String,
    /// From this throughput (0: from the slowest).
    pub from_mib_s: f64,
    /// Up to this throughput (None: however fast).
    pub to_mib_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub run: PathBuf,
    pub kernel_release: String,
    pub cpu_model: String,
    pub storage: Storage,
    /// Fastest first.
    pub candidates: Vec<Candidate>,
    /// The best image, and how much sooner it reaches /init than the next.
    pub best: String,
    pub margin_us: Option<f64>,
    /// The best image by throughput, at the storage's latency.
    pub envelope: Vec<Range>,
    /// Variants of the run that could not be candidates, and why.
    pub left_out: Vec<LeftOut>,
    /// The ways the run stored and loaded its module set, fastest first
    /// (empty when it loaded none).
    pub modules: Vec<ModuleCandidate>,
    pub best_modules: Option<String>,
    pub modules_margin_us: Option<f64>,
    pub modules_envelope: Vec<Range>,
    /// The best image's read and boot plus the best module files' read
    /// and load: reset until the set is loaded.
    pub best_total_us: Option<f64>,
}

/// A variant of the run that is not a candidate.
#[derive(Debug, Clone, Serialize)]
pub struct LeftOut {
    pub variant: String,
    pub why: String,
}

/// `bootlink recommend`: the run's candidates at the storage, ranked, and
/// the charts asked for, written together once both are drawn (neither
/// is written when the other cannot be). The outputs are checked first.
pub fn run(o: &Options) -> Result<Report> {
    let planned: Vec<_> = [&o.svg, &o.modules_svg].into_iter().flatten().map(|p| fsutil::Planned::new(p)).collect();
    fsutil::check_outputs(&[&o.run, &o.run.join("run.json")], &planned)?;
    let report = rank(o)?;
    let mut staged = fsutil::Staged::new();
    if let Some(path) = &o.svg {
        staged.write(path, chart(&report).as_bytes())?;
    }
    if let Some(path) = &o.modules_svg {
        let svg = module_chart(&report).ok_or_else(|| {
            Error::file(
                Kind::Usage,
                &report.run,
                "--modules-svg: this run loaded no module set (its variants name no module files)",
            )
        })?;
        staged.write(path, svg.as_bytes())?;
    }
    staged.commit()?;
    Ok(report)
}

/// The candidates, images and module files, ranked at the storage.
fn rank(o: &Options) -> Result<Report> {
    let run = crate::run::load(&o.run)?;
    let (mut candidates, mut left_out) = candidates(&run, &o.run)?;
    for c in &mut candidates {
        c.read_us = o.storage.read_us(c.read_bytes);
        c.total_us = c.read_us + c.boot_us;
    }
    candidates.sort_by(|a, b| a.total_us.total_cmp(&b.total_us).then_with(|| a.variant.cmp(&b.variant)));
    let curves: Vec<Curve> = candidates.iter().map(Candidate::curve).collect();
    let kernel_envelope = envelope(&curves, o.storage.latency_us);
    let mut modules = module_candidates(&run, &mut left_out);
    for m in &mut modules {
        m.read_us = m.requests_4k as f64 * o.storage.request_us();
        m.total_us = m.read_us + m.load_us;
    }
    modules.sort_by(|a, b| a.total_us.total_cmp(&b.total_us).then_with(|| a.variant.cmp(&b.variant)));
    let curves: Vec<Curve> = modules.iter().map(ModuleCandidate::curve).collect();
    let modules_envelope = if modules.is_empty() { Vec::new() } else { envelope(&curves, o.storage.latency_us) };
    Ok(Report {
        best_modules: modules.first().map(|m| m.variant.clone()),
        modules_margin_us: modules.get(1).map(|m| m.total_us - modules[0].total_us),
        best_total_us: modules.first().map(|m| m.total_us + candidates[0].total_us),
        modules,
        modules_envelope,
        run: o.run.clone(),
        kernel_release: run.kernel_release.clone(),
        cpu_model: run.cpu_model.clone(),
        storage: o.storage,
        best: candidates[0].variant.clone(),
        margin_us: candidates.get(1).map(|c| c.total_us - candidates[0].total_us),
        candidates,
        envelope: kernel_envelope,
        left_out,
    })
}

/// The run's variants that booted an image with a boot clock; the others
/// and why. At least one, else the run cannot answer.
fn candidates(run: &Run, path: &Path) -> Result<(Vec<Candidate>, Vec<LeftOut>)> {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for v in &run.variants {
        let Some(image) = &v.image else {
            left_out.push(LeftOut {
                variant: v.name.clone(),
                why: "no image recorded (a run from before bootlink recorded it)".into(),
            });
            continue;
        };
        let clocks: Vec<_> = v.repetitions.iter().filter(|r| !r.partial).filter_map(|r| r.boot_clock).collect();
        let mut boots: Vec<f64> = clocks.iter().map(|c| c.init_us).collect();
        if boots.is_empty() {
            let why = if run.timing == "deterministic" {
                "no boot reached /init's boot clock"
            } else {
                "not timed from reset (a realtime run: the cycle counter is the host's)"
            };
            left_out.push(LeftOut { variant: v.name.clone(), why: why.into() });
            continue;
        }
        let boot_us = median(&mut boots);
        // every boot's landmark, or none
        let landmark = |f: fn(&crate::run::results::BootClock) -> Option<f64>| {
            let mut got: Vec<f64> = clocks.iter().filter_map(f).collect();
            (got.len() == clocks.len()).then(|| median(&mut got))
        };
        out.push(Candidate {
            variant: v.name.clone(),
            kind: image.kind.clone(),
            compression: image.compression.clone(),
            read_bytes: image.read_bytes,
            boot_us,
            decompress_us: landmark(|c| c.decompress_us()),
            start_kernel_us: landmark(|c| c.start_kernel_us),
            boot_spread_us: boots[boots.len() - 1] - boots[0],
            boots: boots.len(),
            read_us: 0.0,
            total_us: 0.0,
        });
    }
    if out.is_empty() {
        let why: Vec<String> = left_out.iter().map(|l| format!("{}: {}", l.variant, l.why)).collect();
        return Err(Error::file(
            Kind::Usage,
            path,
            format!("no variant of this run was timed from reset to /init ({})", why.join("; ")),
        ));
    }
    Ok((out, left_out))
}

/// The run's variants that loaded the whole module set: each a way of
/// storing it (the files it read, who decompressed them) and its load time.
/// Variants booted with the lab's hash of the bytes read (lab patch `hash-bytes-read`)
/// are measured but never offered: left out, with the reason.
fn module_candidates(run: &Run, left_out: &mut Vec<LeftOut>) -> Vec<ModuleCandidate> {
    use crate::run::results::WorkloadResult;
    let mut out = Vec::new();
    for v in &run.variants {
        let Some(files) = v.module_files.as_ref().filter(|f| f.files > 0) else { continue };
        if v.cmdline.split_whitespace().any(|a| a == "module.hashes_of_read=1") {
            left_out.push(LeftOut {
                variant: v.name.clone(),
                why: "its module files are checked by the digest of the bytes read (module.hashes_of_read=1, \
                      lab patch `hash-bytes-read`): measured, never a product's (a blacklisted hash is of plain bytes)"
                    .into(),
            });
            continue;
        }
        let whole: Vec<_> = v
            .repetitions
            .iter()
            .filter(|r| !r.partial && r.modules_total_us > 0.0)
            .filter(|r| r.workloads.iter().all(|w| !matches!(w, WorkloadResult::Loader(l) if !l.not_loaded.is_empty())))
            .collect();
        if whole.is_empty() {
            continue;
        }
        let mut loads: Vec<f64> = whole.iter().map(|r| r.modules_total_us).collect();
        let by = whole[0].workloads.iter().find_map(|w| match w {
            WorkloadResult::Loader(l) if l.decompressed_by_kernel > 0 && l.decompressed_by_user > 0 => Some("both"),
            WorkloadResult::Loader(l) if l.decompressed_by_kernel > 0 => Some("kernel"),
            WorkloadResult::Loader(l) if l.decompressed_by_user > 0 => Some("user"),
            _ => None,
        });
        let decompressed_by = match (by, files.compression.as_str()) {
            (Some(b), _) => b,
            (None, "none") => "none",
            // busybox insmod and kmod decompress in their own process
            (None, _) => "user",
        };
        out.push(ModuleCandidate {
            variant: v.name.clone(),
            compression: files.compression.clone(),
            decompressed_by: decompressed_by.into(),
            files: files.files,
            file_bytes: files.file_bytes,
            requests_4k: files.requests_4k,
            load_us: median(&mut loads),
            boots: loads.len(),
            read_us: 0.0,
            total_us: 0.0,
        });
    }
    out
}

/// The median of `v`, which it leaves sorted.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The best candidate over throughput at a fixed latency. Each candidate's
/// total is `n·L + n·4096·x + boot` in x = seconds per byte, a line; the
/// best is the lowest, and changes only where two lines cross.
fn envelope(cands: &[Curve], latency_us: f64) -> Vec<Range> {
    // In x (microseconds per byte): total = a + b·x.
    let line = |c: &Curve| (c.requests * latency_us + c.fixed_us, c.requests * REQUEST);
    let best_at = |x: f64| {
        cands
            .iter()
            .min_by(|p, q| {
                let (pa, pb) = line(p);
                let (qa, qb) = line(q);
                (pa + pb * x).total_cmp(&(qa + qb * x)).then_with(|| p.name.cmp(&q.name))
            })
            .expect("at least one candidate")
    };
    let mut cuts: Vec<f64> = Vec::new();
    for (i, p) in cands.iter().enumerate() {
        for q in &cands[i + 1..] {
            let ((pa, pb), (qa, qb)) = (line(p), line(q));
            if pb != qb {
                let x = (qa - pa) / (pb - qb);
                if x.is_finite() && x > 0.0 {
                    cuts.push(x);
                }
            }
        }
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    // Walk x from 0 (infinitely fast storage) upwards: throughput falls.
    let mut ranges: Vec<(String, f64, Option<f64>)> = Vec::new(); // (variant, x from, x to)
    let mut from = 0.0;
    for (i, &cut) in cuts.iter().chain(std::iter::once(&f64::INFINITY)).enumerate() {
        let mid = if cut.is_infinite() { from * 2.0 + 1.0 } else { (from + cut) / 2.0 };
        let name = best_at(mid).name.clone();
        match ranges.last_mut() {
            Some(last) if last.0 == name => last.2 = cut.is_finite().then_some(cut),
            _ => ranges.push((name, from, cut.is_finite().then_some(cut))),
        }
        if i < cuts.len() {
            from = cut;
        }
    }
    // x microseconds per byte is 1/(x·1.048576) MiB/s; report slowest first.
    let mib_s = |x: f64| 1.0 / (x * 1.048_576);
    ranges
        .into_iter()
        .rev()
        .map(|(variant, x_from, x_to)| Range {
            variant,
            from_mib_s: x_to.map(mib_s).unwrap_or(0.0),
            to_mib_s: (x_from > 0.0).then(|| mib_s(x_from)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::order::Flash;

    #[test]
    fn reading_is_the_labs_flash_model() {
        for f in [Flash::SLOW, Flash::NAND, Flash::NOR, Flash { mib_s: 64, latency_us: 0 }] {
            let s = Storage { mib_s: f64::from(f.mib_s), latency_us: f64::from(f.latency_us) };
            let one = s.read_us(4096);
            assert!((one * 1000.0 - f.request_ns() as f64).abs() < 1.0, "{f:?}: {one} us");
            // whole requests: one byte more is one request more
            assert!((s.read_us(8193) - 3.0 * one).abs() < 1e-6);
            assert_eq!(s.read_us(0), 0.0);
        }
        assert_eq!(Storage::parse("nand").unwrap(), Storage { mib_s: 8.0, latency_us: 50.0 });
        assert_eq!(Storage::parse("0.5-20").unwrap(), Storage { mib_s: 0.5, latency_us: 20.0 });
        for bad in ["", "fast", "0-5", "-1-5", "8", "8-", "nan-5", "8--1", "inf-0"] {
            let e = Storage::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--storage") && e.contains("MIBS-USEC"), "{bad}: {e}");
        }
    }

    fn cand(name: &str, read_bytes: u64, boot_us: f64) -> Candidate {
        Candidate {
            variant: name.into(),
            kind: "bzImage".into(),
            compression: name.into(),
            read_bytes,
            boot_us,
            decompress_us: None,
            start_kernel_us: None,
            boot_spread_us: 0.0,
            boots: 1,
            read_us: 0.0,
            total_us: 0.0,
        }
    }

    #[test]
    fn the_envelope_changes_where_the_lines_cross() {
        // small and slow to unpack against large and quick, no latency:
        // 4 MiB + 1.8 s and 8 MiB + 0.2 s cross where 4 MiB takes 1.6 s,
        // 2.5 MiB/s.
        let cands = [cand("xz", 4 << 20, 1_800_000.0), cand("lz4", 8 << 20, 200_000.0)];
        let lines = |c: &[Candidate]| c.iter().map(Candidate::curve).collect::<Vec<_>>();
        let e = envelope(&lines(&cands), 0.0);
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!((e[0].variant.as_str(), e[0].from_mib_s), ("xz", 0.0));
        assert_eq!((e[1].variant.as_str(), e[1].to_mib_s), ("lz4", None));
        let cross = e[0].to_mib_s.unwrap();
        assert!((cross - 2.5).abs() < 1e-9 && (e[1].from_mib_s - 2.5).abs() < 1e-9, "{e:?}");
        // on either side of the crossing the totals agree with the envelope
        for (mib_s, best) in [(2.0, "xz"), (3.0, "lz4")] {
            let s = Storage { mib_s, latency_us: 0.0 };
            let t: Vec<f64> = cands.iter().map(|c| s.read_us(c.read_bytes) + c.boot_us).collect();
            assert_eq!(if t[0] < t[1] { "xz" } else { "lz4" }, best);
        }
        // a candidate that is never best does not appear; one that always is, alone
        let e = envelope(&lines(&[cand("a", 4096, 10.0), cand("b", 8192, 20.0)]), 50.0);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].variant.as_str(), e[0].from_mib_s, e[0].to_mib_s), ("a", 0.0, None));
        // latency counts per request: it moves the crossing
        let slow = envelope(&lines(&cands), 100.0)[0].to_mib_s.unwrap();
        assert!(slow > cross, "{slow} vs {cross}");
    }

    /// A run's module variants: plain files against xz decompressed by
    /// the kernel; one that did not load the whole set is not a candidate.
    #[test]
    fn module_files_are_ranked_by_read_and_load() {
        use crate::run::results::{LoaderResult, ModuleFiles, Repetition, Variant, WorkloadResult};
        let variant = |name: &str, compression: &str, bytes: u64, requests: u64, load_us: f64, by_kernel: u64| {
            let mut v = Variant::named(name);
            v.module_files = Some(ModuleFiles {
                compression: compression.into(),
                files: 9,
                file_bytes: bytes,
                requests_4k: requests,
            });
            let loader = LoaderResult { decompressed_by_kernel: by_kernel, ..Default::default() };
            v.repetitions = [load_us, load_us + 2.0]
                .into_iter()
                .map(|t| Repetition {
                    modules_total_us: t,
                    workloads: vec![WorkloadResult::Loader(loader.clone())],
                    ..Default::default()
                })
                .collect();
            v
        };
        let mut failed = variant("gz", "gzip", 1, 1, 1.0, 9);
        if let Some(WorkloadResult::Loader(l)) = failed.repetitions[0].workloads.first_mut() {
            l.not_loaded.push(("vfat".into(), "failed".into()));
        }
        failed.repetitions.truncate(1);
        let run = Run {
            variants: vec![
                variant("plain", "none", 5_859_111, 1435, 1_286_000.0, 0),
                variant("xz", "xz", 905_272, 226, 1_706_000.0, 9),
                failed,
                Variant::named("no-files"),
            ],
            ..Default::default()
        };
        let mut left_out = Vec::new();
        let m = module_candidates(&run, &mut left_out);
        assert!(left_out.is_empty());
        assert_eq!(m.iter().map(|c| c.variant.as_str()).collect::<Vec<_>>(), ["plain", "xz"]);
        assert_eq!((m[0].decompressed_by.as_str(), m[1].decompressed_by.as_str()), ("none", "kernel"));
        // the median of two boots
        assert_eq!((m[0].load_us, m[0].boots), (1_286_001.0, 2));
        // the lines cross where 1209 requests take 420 ms: 347.4 us each,
        // 50 us of latency leave 297.4 us per 4 KiB, 13.1 MiB/s
        let curves: Vec<Curve> = m.iter().map(ModuleCandidate::curve).collect();
        let e = envelope(&curves, 50.0);
        assert_eq!((e[0].variant.as_str(), e[1].variant.as_str()), ("xz", "plain"));
        let x = 420_000.0 / 1209.0 - 50.0;
        let cross = 4096.0 / x / 1.048_576;
        assert!((e[0].to_mib_s.unwrap() - cross).abs() < 1e-9, "{e:?} vs {cross}");
    }
}
