//! Lab variants: the model of what one column of a comparison boots.
//!
#![doc = include_str!("variant.txt")]
//!
//! A [`Variant`] is parsed once, where it enters (a `--variant` string by
//! [`Variant::parse`], a scenario file's table by `lab::scenario_file`,
//! above this layer), both through [`Variant::from_pairs`];
//! the lab acts on the parsed model only: its kernel ([`KernelChoice`]),
//! its [`Step`]s (see [`bootlink::steps`]), its loader and its workloads
//! ([`crate::workload`]).

use std::path::{Path, PathBuf};

use crate::workload;
pub use crate::workload::modules::Loader;
use bootlink::error::{Error, Kind, Result};
use bootlink::steps::{self as step, Step};

/// The variant grammar, as `bootlink lab --help` shows it.
pub const GRAMMAR: &str = include_str!("variant.txt");

/// Which kernel a variant boots.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KernelChoice {
    /// The run's kernel (`--kernel`, else Debian's reference package).
    #[default]
    Default,
    /// Debian's reference package, fetched.
    Debian,
    /// The newest Debian kernel of a series ("6.12"), fetched.
    DebianSeries(String),
    /// `bootlink kernel build` of a kernel line with the repository's series
    /// and config for it (`build` is 6.1's, `build-6.12` 6.12's), and its
    /// build flavours (`build+sealed`, `build-6.12+trim+lz4`).
    Build(bootlink::kbuild::Line, Vec<String>),
    /// The series built with Debian's own config of a line (`distro`:
    /// 6.1's, `distro-6.12`), Debian's modules signed with its key
    /// ([`crate::lab::distro`]): booted from its bzImage, KASLR on.
    Distro(bootlink::kbuild::Line),
    /// A directory with `vmlinux` (or `bzImage`) and `lib/modules/<release>/`.
    Dir(PathBuf),
}

impl KernelChoice {
    pub fn parse(value: &str) -> Result<KernelChoice> {
        Ok(match value {
            "default" => KernelChoice::Default,
            "debian" => KernelChoice::Debian,
            s if s.starts_with("debian-") => {
                let series = &s["debian-".len()..];
                if series.is_empty() || !series.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                    return Err(Error::new(Kind::Usage, format!("kernel:{s}: give a series, e.g. kernel:debian-6.12")));
                }
                KernelChoice::DebianSeries(series.to_string())
            }
            s if s == "build" || s.starts_with("build-") || s.starts_with("build+") => {
                let mut parts = s.split('+');
                let head = parts.next().unwrap_or_default();
                let line = match head.strip_prefix("build-") {
                    Some(l) => bootlink::kbuild::Line::parse(l)?,
                    None => bootlink::kbuild::Line::default(),
                };
                let flavours: Vec<String> = parts.map(str::to_string).collect();
                if let Some(bad) =
                    flavours.iter().find(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
                {
                    return Err(Error::new(
                        Kind::Usage,
                        format!("kernel:{s}: {bad:?} is not a flavour name (kernel:build+sealed)"),
                    ));
                }
                KernelChoice::Build(line, flavours)
            }
            s if s == "distro" || s.starts_with("distro-") => KernelChoice::Distro(match s.strip_prefix("distro-") {
                Some(l) => bootlink::kbuild::Line::parse(l)?,
                None => bootlink::kbuild::Line::default(),
            }),
            "" => return Err(Error::new(Kind::Usage, "kernel: needs a value")),
            dir => KernelChoice::Dir(PathBuf::from(dir)),
        })
    }
}

/// One variant: a name, a kernel, steps in order, a loader, workloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    pub kernel: KernelChoice,
    pub steps: Vec<Step>,
    pub loader: Loader,
    /// What runs in the guest after the modules load.
    pub workloads: Vec<workload::Spec>,
    /// Which of a build's images QEMU boots (`image:`); None: the
    /// default, see [`Variant::boots_bzimage`].
    pub image: Option<BootImage>,
    /// Boot without the lab's `nokaslr` (a bzImage of a build with
    /// CONFIG_RANDOMIZE_BASE: its decompressor picks the slide; an arm64
    /// Image of one: the kernel picks it from the seed QEMU's virt board
    /// puts in the device tree): `kaslr:on`, or the default for such a
    /// build booted from its bzImage, and on arm64 for an Image whose
    /// config has CONFIG_RANDOMIZE_BASE (decided where the run's target
    /// is known, see [`Variant::randomize_by_default`]).
    pub kaslr: bool,
    /// `kaslr:` as the variant wrote it (None: the default).
    pub kaslr_asked: Option<bool>,
}

/// The image of a self-built x86-64 kernel the lab boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootImage {
    /// The uncompressed vmlinux through its PVH entry: no decompressor.
    Vmlinux,
    /// The bzImage, as a boot loader boots it: setup, the decompressor,
    /// then the kernel.
    BzImage,
}

/// The build flavours that choose the bzImage's compressor.
pub const COMPRESSOR_FLAVOURS: &[&str] = &["none", "gzip", "bzip2", "lzma", "xz", "lzo", "lz4", "zstd"];

/// The name variants had before the model: kept for callers.
pub type VariantSpec = Variant;

/// The keys of a variant, in the order [`GRAMMAR`] lists them.
pub(crate) const KEYS: &[&str] = &[
    "kernel",
    "image",
    "kaslr",
    "modules",
    "steps",
    "compress",
    "manifest",
    "raw",
    "cmdline",
    "loader",
    "decompress",
    "run",
    "ddlink",
    "order",
    "flash",
    "starts",
    "read",
];

impl Variant {
    /// A preset on the run's kernel, named after it.
    pub fn preset(name: &str) -> Option<Variant> {
        Some(Variant {
            name: name.into(),
            kernel: KernelChoice::Default,
            steps: step::preset(name)?.to_vec(),
            loader: Loader::Insmod,
            workloads: Vec::new(),
            image: None,
            kaslr: false,
            kaslr_asked: None,
        })
    }

    /// An arm64 Image whose kernel randomizes its base (its config has
    /// CONFIG_RANDOMIZE_BASE, as Debian's and the lab's arm64 builds do)
    /// boots randomized unless the variant says `kaslr:off`, as a bzImage
    /// does on x86-64. Errs (the usage text) when the variant's steps
    /// write link-time addresses.
    pub fn randomize_by_default(&mut self, image_randomizes: bool) -> std::result::Result<(), String> {
        if self.kaslr_asked.is_none() && image_randomizes {
            self.kaslr = true;
            self.refuse_link_time_steps("an arm64 Image whose config has CONFIG_RANDOMIZE_BASE")?;
        }
        Ok(())
    }

    /// Preresolved at link-time addresses, the modules would jump to where
    /// the kernel was linked, not where a randomized boot put it.
    fn refuse_link_time_steps(&self, default_of: &str) -> std::result::Result<(), String> {
        match self.steps.iter().find(|s| matches!(s, step::Step::Preresolve | step::Step::Fold)) {
            Some(s) if self.kaslr => Err(format!(
                "step {} writes link-time addresses, and this variant boots with KASLR on (kaslr:on, or the default \
                 of {default_of}): use preresolve-slide or fold-slide (modules:preresolved-slide, folded-slide; a \
                 kernel with patch preresolved-slide), or kaslr:off",
                s.name()
            )),
            _ => Ok(()),
        }
    }

    /// Whether a self-built x86-64 kernel boots from its bzImage: as
    /// `image:` says, else when a compressor flavour is named (what the
    /// flavour changes is the bzImage alone).
    pub fn boots_bzimage(&self) -> bool {
        match self.image {
            Some(i) => i == BootImage::BzImage,
            None => match &self.kernel {
                KernelChoice::Build(_, flavours) => flavours.iter().any(|f| COMPRESSOR_FLAVOURS.contains(&f.as_str())),
                KernelChoice::Distro(_) => true,
                _ => false,
            },
        }
    }

    /// How the modules are made, for run.json (see [`step::label`]).
    pub fn transform(&self) -> String {
        step::label(&self.steps)
    }

    /// One `--variant` argument: a preset's name, or `NAME=key:value,...`.
    pub fn parse(arg: &str) -> Result<Variant> {
        let Some((name, spec)) = arg.split_once('=') else {
            return Variant::preset(arg).ok_or_else(|| {
                Error::new(
                    Kind::Usage,
                    format!(
                        "unknown variant {arg:?}: use {} (preresolved with --fold-symbols), or NAME=kernel:...,modules:...",
                        step::preset_names()
                    ),
                )
            });
        };
        let mut pairs = Vec::new();
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once(':') else {
                return Err(Error::new(Kind::Usage, format!("variant {name}: {part:?} is not key:value")));
            };
            pairs.push((key.to_string(), value.to_string()));
        }
        Variant::from_pairs(name, &pairs)
    }

    /// A variant from its name and `key`/`value` pairs ([`GRAMMAR`]'s keys).
    /// In phases, each refusing what it reads first: the name and keys
    /// (`Pairs::check`), the kernel and its image (`Pairs::kernel`),
    /// the module steps (`Pairs::steps`), the loader (`Pairs::loader`),
    /// the workloads (`Pairs::workloads`), then the whole.
    pub(crate) fn from_pairs(name: &str, pairs: &[(String, String)]) -> Result<Variant> {
        let p = Pairs { name, pairs };
        p.check()?;
        let (kernel, image) = p.kernel()?;
        let steps = p.steps()?;
        let loader = p.loader()?;
        let workloads = p.workloads()?;
        let kaslr = match p.get("kaslr") {
            None => None,
            Some("off") => Some(false),
            Some("on") => Some(true),
            Some(v) => return Err(p.usage(format!("kaslr:{v}: use on or off"))),
        };
        let mut v = Variant {
            name: name.to_string(),
            kernel,
            steps,
            loader,
            workloads,
            image,
            kaslr: false,
            kaslr_asked: kaslr,
        };
        // A kernel that randomizes its base (a distribution's; the lab's
        // builds, whose config has CONFIG_RANDOMIZE_BASE on every line and
        // arch) boots randomized when its bzImage boots (the vmlinux's PVH
        // entry never randomizes); kaslr:off asks for `nokaslr`. An arm64
        // Image randomizes itself: `kaslr:on` there, which x86-64 refuses
        // without a bzImage, and its default, are decided once the run's
        // target is known (where the run is set up).
        let randomizes = matches!(&v.kernel, KernelChoice::Distro(_) | KernelChoice::Build(..));
        v.kaslr = kaslr.unwrap_or(randomizes && v.boots_bzimage());
        v.refuse_link_time_steps("a bzImage boot").map_err(|e| p.usage(e))?;
        if v.boots_bzimage()
            && !matches!(v.kernel, KernelChoice::Distro(_))
            && v.steps.iter().any(|s| s.stage() == step::Stage::Image)
        {
            return Err(p.usage(
                "the lab boots a bzImage as built, and manifest:on writes a new vmlinux; give image:vmlinux".into(),
            ));
        }
        Ok(v)
    }
}

/// A variant's name and its `key`/`value` pairs, read phase by phase.
struct Pairs<'a> {
    name: &'a str,
    pairs: &'a [(String, String)],
}

impl Pairs<'_> {
    fn get(&self, k: &str) -> Option<&str> {
        self.pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    fn usage(&self, m: String) -> Error {
        Error::new(Kind::Usage, format!("variant {}: {m}", self.name))
    }

    /// A value's own parser says what is wrong with it; the variant's name leads.
    fn in_variant(&self, e: Error) -> Error {
        Error::new(e.kind, format!("variant {}: {}", self.name, e.msg)).because(e)
    }

    /// The name's characters; each key known and given once.
    fn check(&self) -> Result<()> {
        let name = self.name;
        // The name becomes part of file names (logs/NAME-0.log, a LAVA
        // job's artifacts/NAME/).
        if !bootlink::fsutil::is_plain_name(name) {
            return Err(Error::new(
                Kind::Usage,
                format!("variant {name:?}: name it with letters, digits, '-', '_', '.' or '+' (not . or ..)"),
            ));
        }
        let mut seen: Vec<&str> = Vec::new();
        for (key, _) in self.pairs {
            if !KEYS.contains(&key.as_str()) {
                return Err(self.usage(format!("unknown key {key:?} ({})", KEYS.join(", "))));
            }
            if seen.contains(&key.as_str()) {
                return Err(self.usage(format!("{key} given twice")));
            }
            seen.push(key);
        }
        Ok(())
    }

    /// `kernel:` and `image:`.
    fn kernel(&self) -> Result<(KernelChoice, Option<BootImage>)> {
        let kernel = match self.get("kernel") {
            Some(v) => KernelChoice::parse(v).map_err(|e| self.in_variant(e))?,
            None => KernelChoice::Default,
        };
        let image = match self.get("image") {
            None => None,
            Some("bzimage") => Some(BootImage::BzImage),
            Some("vmlinux") => Some(BootImage::Vmlinux),
            Some(v) => return Err(self.usage(format!("image:{v}: use bzimage or vmlinux"))),
        };
        if image.is_some() && !matches!(kernel, KernelChoice::Build(..) | KernelChoice::Distro(_)) {
            return Err(self.usage(
                "image: chooses between a self-built kernel's images; give kernel:build (or build-LINE, distro) too"
                    .into(),
            ));
        }
        Ok((kernel, image))
    }

    /// `modules:` or `steps:`, then `compress:`, `manifest:`, `raw:`,
    /// `cmdline:`, in the steps' order.
    fn steps(&self) -> Result<Vec<Step>> {
        let usage = |m: String| self.usage(m);
        let get = |k: &str| self.get(k);
        let mut steps = match (get("modules"), get("steps")) {
            (Some(_), Some(_)) => return Err(usage("give modules: or steps:, not both".into())),
            (Some(m), None) => {
                step::preset(m).ok_or_else(|| usage(format!("modules:{m}: use {}", step::preset_names())))?.to_vec()
            }
            (None, Some(list)) => list
                .split('+')
                .map(|s| {
                    Step::parse(s)
                        .filter(|s| s.stage() == step::Stage::Modules)
                        .ok_or_else(|| usage(format!("steps:{list}: unknown module step {s:?}")))
                })
                .collect::<Result<Vec<_>>>()?,
            (None, None) => Vec::new(),
        };
        if let Some(v) = get("compress") {
            let kind = match v {
                "xz" => bootlink::compress::Compression::Xz,
                "zstd" => bootlink::compress::Compression::Zstd,
                "gzip" => bootlink::compress::Compression::Gzip,
                _ => return Err(usage(format!("compress:{v}: use xz, zstd or gzip"))),
            };
            steps.push(Step::Compress(kind));
        }
        match get("manifest") {
            Some("on") => steps.push(Step::Manifest),
            Some("blake2b") => steps.push(Step::ManifestBlake2b),
            Some("read") if get("compress").is_some() => steps.push(Step::ManifestRead),
            Some("read") => {
                return Err(usage("manifest:read lists the compressed files as stored; give compress: too".into()));
            }
            Some("off") | None => {}
            Some(v) => return Err(usage(format!("manifest:{v}: use on, blake2b, read or off"))),
        }
        if let Some(v) = get("raw") {
            let (module, file) = v
                .split_once('=')
                .filter(|(m, f)| !m.is_empty() && !f.is_empty())
                .ok_or_else(|| usage(format!("raw:{v}: give raw:MODULE=FILE")))?;
            steps.push(Step::Raw { module: module.to_string(), file: PathBuf::from(file) });
        }
        if let Some(v) = get("cmdline") {
            steps.push(Step::Cmdline(v.to_string()));
        }
        step::check_order(self.name, &steps)?;
        Ok(steps)
    }

    /// `loader:` and the batch loader's `decompress:`.
    fn loader(&self) -> Result<Loader> {
        let usage = |m: String| self.usage(m);
        let get = |k: &str| self.get(k);
        let loader = match get("loader") {
            Some(v) => crate::workload::modules::parse_name(v).ok_or_else(|| {
                usage(format!(
                    "loader:{v}: use insmod, batch, batch-N (1..64 workers), modprobe, modprobe-parallel or storm"
                ))
            })?,
            None => Loader::Insmod,
        };
        Ok(match (get("decompress"), loader) {
            (None, l) => l,
            (Some(v), _) if get("compress").is_none() => {
                return Err(usage(format!(
                    "decompress:{v} chooses who decompresses compress:'s module files; give compress: too"
                )));
            }
            (Some(v), Loader::Batch(workers, _)) => {
                let d = crate::workload::modules::Decompress::parse(v)
                    .ok_or_else(|| usage(format!("decompress:{v}: use kernel, user or auto")))?;
                Loader::Batch(workers, d)
            }
            (Some(v), _) => {
                return Err(usage(format!(
                    "decompress:{v} is the batch loader's choice; give loader:batch (busybox insmod and kmod decompress in user space, in their own process)"
                )));
            }
        })
    }

    /// `run:`, `ddlink:` or `order:` (with `starts:` and `flash:`) and
    /// `read:`, in the order /init runs them.
    fn workloads(&self) -> Result<Vec<workload::Spec>> {
        let usage = |m: String| self.usage(m);
        let in_variant = |e: Error| self.in_variant(e);
        let get = |k: &str| self.get(k);
        let mut workloads = Vec::new();
        if let Some(v) = get("run") {
            let program = v.split_whitespace().next().unwrap_or_default();
            if !v.starts_with('/') && !crate::lab::initramfs::DEFAULT_APPLETS.contains(&program) {
                return Err(usage(format!(
                    "run:{v}: give a program's absolute path, or one of the initramfs's busybox applets (cat, ...)"
                )));
            }
            workloads.push(workload::Spec::Run(v.to_string()));
        }
        let starts = match get("starts") {
            Some(v) => Some(
                v.parse::<usize>()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| usage(format!("starts:{v}: give 1 to 100")))?,
            ),
            None => None,
        };
        let flash = get("flash").map(crate::workload::order::Flash::parse).transpose().map_err(in_variant)?;
        match (get("ddlink"), get("order")) {
            (Some(_), Some(_)) => return Err(usage("give ddlink: or order:, not both".into())),
            (Some(d), None) => {
                let mut d = crate::workload::ddlink::Spec::parse(d).map_err(in_variant)?;
                if let Some(n) = starts {
                    d.starts = n;
                }
                // DDLink's starts come before a run: program's, as /init ran them.
                workloads.insert(0, workload::Spec::Ddlink(d));
            }
            (None, Some(o)) => {
                let mut o = crate::workload::order::Spec::parse(o).map_err(in_variant)?;
                if let Some(n) = starts {
                    o.starts = n;
                }
                if let Some(f) = flash {
                    o.flash = f;
                }
                workloads.insert(0, workload::Spec::Order(o));
            }
            (None, None) => {
                if starts.is_some() {
                    return Err(usage(
                        "starts: counts the starts of a ddlink: or order: program; give ddlink: or order: too".into(),
                    ));
                }
            }
        }
        if let Some(v) = get("read") {
            let flash = crate::workload::order::Flash::parse(v).map_err(|e| usage(format!("read:{v}: {}", e.msg)))?;
            workloads.push(workload::Spec::ImageRead(crate::workload::imageread::Spec { flash }));
        }
        if flash.is_some() && get("order").is_none() {
            return Err(usage("flash: is the device of order:; give order: too".into()));
        }
        Ok(workloads)
    }
}

/// A kernel directory: its bootable image (the first of `images`, the
/// target's kernel images, it holds) and its module tree.
pub fn kernel_dir(dir: &Path, images: &[&str]) -> Result<(PathBuf, PathBuf)> {
    let image = images.iter().map(|n| dir.join(n)).find(|p| p.is_file()).ok_or_else(|| {
        Error::file(
            Kind::Usage,
            dir,
            format!("no {} in this kernel directory (give a `bootlink kernel build` output)", images.join(" or ")),
        )
    })?;
    let lm = dir.join("lib/modules");
    let mut trees: Vec<PathBuf> = std::fs::read_dir(&lm)
        .map_err(|e| Error::io(&lm, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    trees.sort();
    match trees.len() {
        1 => Ok((image, trees.remove(0))),
        0 => Err(Error::file(Kind::Usage, &lm, "no module tree (lib/modules/<release>/) in it")),
        n => Err(Error::file(Kind::Usage, &lm, format!("{n} module trees: keep one release per kernel directory"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthands_and_composed_variants() {
        let folded = Variant::parse("folded").unwrap();
        assert_eq!((folded.steps.as_slice(), folded.transform().as_str()), (&[Step::Fold][..], "folded"));
        let v = Variant::parse("ours=kernel:build,modules:unsigned,cmdline:module.sig_enforce=1 quiet").unwrap();
        assert_eq!(v.name, "ours");
        assert_eq!(v.kernel, KernelChoice::Build(bootlink::kbuild::Line::V6_1, vec![]));
        let newer = Variant::parse("n=kernel:build-6.12").unwrap();
        assert_eq!(newer.kernel, KernelChoice::Build(bootlink::kbuild::Line::V6_12, vec![]));
        let sealed = Variant::parse("s=kernel:build-6.12+sealed+lz4").unwrap();
        assert_eq!(
            sealed.kernel,
            KernelChoice::Build(bootlink::kbuild::Line::V6_12, vec!["sealed".into(), "lz4".into()])
        );
        assert!(Variant::parse("s=kernel:build+").unwrap_err().to_string().contains("not a flavour name"));
        assert!(Variant::parse("n=kernel:build-5.4").unwrap_err().to_string().contains("6.1, 6.12"));
        assert_eq!(v.steps, [Step::Unsign, Step::Cmdline("module.sig_enforce=1 quiet".into())]);
        assert_eq!(v.transform(), "unsigned");
        let v = Variant::parse("d=kernel:build,ddlink:synth-9000,starts:5").unwrap();
        let [workload::Spec::Ddlink(d)] = v.workloads.as_slice() else { panic!("{:?}", v.workloads) };
        assert_eq!((&d.program, d.starts), (&crate::workload::ddlink::Program::Synth { symbols: 9000 }, 5));
        let v = Variant::parse("o=order:synth-64k,flash:4-20,starts:1").unwrap();
        let [workload::Spec::Order(o)] = v.workloads.as_slice() else { panic!("{:?}", v.workloads) };
        assert_eq!(
            (&o.blocks, o.flash, o.starts),
            (&vec![64], crate::workload::order::Flash { mib_s: 4, latency_us: 20 }, 1)
        );
        let v = Variant::parse("t=manifest:on,raw:nls_cp437=/tmp/cut.ko").unwrap();
        assert_eq!(v.steps, [Step::Manifest, Step::Raw { module: "nls_cp437".into(), file: "/tmp/cut.ko".into() }]);
        let v = Variant::parse("x=kernel:/k/dir").unwrap();
        assert_eq!((v.kernel, v.steps), (KernelChoice::Dir("/k/dir".into()), vec![]));
        let v = Variant::parse("ff=steps:fold+unsign+finalize,manifest:on").unwrap();
        assert_eq!(v.steps, [Step::Fold, Step::Unsign, Step::Finalize, Step::Manifest]);
        assert_eq!(v.transform(), "folded-finalized");
        let v = Variant::parse("both=run:/bin/true,ddlink:synth").unwrap();
        assert!(matches!(v.workloads.as_slice(), [workload::Spec::Ddlink(_), workload::Spec::Run(_)]));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (arg, want) in [
            ("fast", "unknown variant \"fast\""),
            ("=kernel:build", "name it"),
            ("a=kernel", "is not key:value"),
            ("a=modules:fast", "modules:fast: use stock, unsigned, preresolved, folded"),
            ("a=kernel:build,kernel:debian", "kernel given twice"),
            ("a=colour:red", "unknown key \"colour\""),
            ("a=loader:modprobe2", "loader:modprobe2: use insmod, batch"),
            ("a=kernel:", "needs a value"),
            ("a=ddlink:llc", "ddlink:llc: give synth, synth-SYMBOLS or a program's absolute path"),
            ("a=ddlink:synth,starts:0", "starts:0: give 1 to 100"),
            ("a=starts:2", "give ddlink: or order: too"),
            ("a=order:synth-32k", "block size \"32k\": use 4k, 64k or 128k"),
            ("a=order:/bin/ls", "order:/bin/ls: give synth"),
            ("a=flash:nand", "give order: too"),
            ("a=order:synth,flash:fast", "flash:fast: give slow, nand, nor or MIBS-USEC"),
            ("a=order:synth,ddlink:synth", "not both"),
            ("a=manifest:yes", "manifest:yes: use on, blake2b, read or off"),
            ("a=manifest:read", "give compress: too"),
            ("a=raw:sctp", "raw:sctp: give raw:MODULE=FILE"),
            ("a=raw:=/f", "give raw:MODULE=FILE"),
            ("a=modules:folded,steps:fold", "not both"),
            ("a=steps:fold+manifest", "unknown module step \"manifest\""),
            ("a=compress:lz4", "compress:lz4: use xz, zstd or gzip"),
            ("a=loader:batch,decompress:user", "give compress: too"),
            ("a=compress:xz,decompress:user", "the batch loader's choice; give loader:batch"),
            ("a=compress:xz,loader:batch,decompress:now", "decompress:now: use kernel, user or auto"),
            (
                "a=run:python3 -V",
                "run:python3 -V: give a program's absolute path, or one of the initramfs's busybox applets",
            ),
        ] {
            let e = Variant::parse(arg).unwrap_err().to_string();
            assert!(e.contains(want), "{arg}: {e}");
        }
    }

    #[test]
    fn compress_and_decompress_choose_the_module_files_and_who_unpacks_them() {
        use crate::workload::modules::Decompress;
        let v = Variant::parse("a=kernel:build+modules-xz,manifest:on,compress:xz,loader:batch-1,decompress:kernel")
            .unwrap();
        assert_eq!(v.steps, [Step::Compress(bootlink::compress::Compression::Xz), Step::Manifest]);
        assert_eq!(v.loader, Loader::Batch(Some(1), Decompress::Kernel));
        let v = Variant::parse("a=compress:gzip,manifest:read").unwrap();
        assert_eq!(v.steps, [Step::Compress(bootlink::compress::Compression::Gzip), Step::ManifestRead]);
        let v = Variant::parse("a=compress:zstd,loader:batch").unwrap();
        assert_eq!(v.loader, Loader::Batch(None, Decompress::Auto));
        // busybox insmod decompresses in its own process
        assert_eq!(Variant::parse("a=compress:gzip").unwrap().loader, Loader::Insmod);
    }

    #[test]
    fn image_chooses_a_builds_vmlinux_or_bzimage() {
        assert!(!Variant::parse("a=kernel:build").unwrap().boots_bzimage());
        assert!(Variant::parse("a=kernel:build,image:bzimage").unwrap().boots_bzimage());
        assert!(Variant::parse("a=kernel:build+lz4").unwrap().boots_bzimage());
        assert!(Variant::parse("a=kernel:build-6.12+sealed+zstd").unwrap().boots_bzimage());
        assert!(!Variant::parse("a=kernel:build+sealed").unwrap().boots_bzimage());
        assert!(!Variant::parse("a=kernel:build+lz4,image:vmlinux").unwrap().boots_bzimage());
        for (arg, want) in [
            ("a=kernel:build,image:zimage", "use bzimage or vmlinux"),
            ("a=kernel:debian,image:bzimage", "give kernel:build"),
            ("a=image:vmlinux", "give kernel:build"),
            ("a=kernel:build+gzip,manifest:on", "give image:vmlinux"),
        ] {
            let e = Variant::parse(arg).unwrap_err().to_string();
            assert!(e.contains(want), "{arg}: {e}");
        }
        // the manifest's own vmlinux with a compressor flavour's build, said
        assert!(Variant::parse("a=kernel:build+gzip,image:vmlinux,manifest:on").is_ok());
    }

    #[test]
    fn a_distribution_kernel_boots_its_bzimage_randomized() {
        use bootlink::kbuild::Line;
        let v = Variant::parse("a=kernel:distro").unwrap();
        assert_eq!(v.kernel, KernelChoice::Distro(Line::V6_1));
        assert!(v.boots_bzimage() && v.kaslr, "as a distribution ships it");
        let v = Variant::parse("a=kernel:distro-6.12,kaslr:off").unwrap();
        assert_eq!(v.kernel, KernelChoice::Distro(Line::V6_12));
        assert!(v.boots_bzimage() && !v.kaslr);
        let v = Variant::parse("a=kernel:distro,image:vmlinux").unwrap();
        assert!(!v.boots_bzimage() && !v.kaslr, "the PVH entry does not randomize");
        // the hash list is linked into the distribution build's bzImage
        let v = Variant::parse("a=kernel:distro,manifest:on,modules:unsigned").unwrap();
        assert!(v.boots_bzimage() && v.kaslr);
        // asked for: the target decides (x86-64 refuses it, see setup)
        let v = Variant::parse("a=kernel:distro,image:vmlinux,kaslr:on").unwrap();
        assert!(!v.boots_bzimage() && v.kaslr);
        assert!(Variant::parse("a=kernel:distro-5.4").unwrap_err().to_string().contains("6.1, 6.12"));
    }

    /// Modules preresolved at link-time addresses need a kernel that did
    /// not move: with KASLR on, the -slide steps or kaslr:off.
    #[test]
    fn link_time_addresses_are_refused_on_a_randomized_boot() {
        for spec in [
            "a=kernel:distro,modules:preresolved",
            "a=kernel:build,image:bzimage,modules:folded",
            "a=kernel:build,kaslr:on,steps:fold+unsign",
            "a=kernel:build-6.12+lz4,modules:folded-finalized",
        ] {
            let e = Variant::parse(spec).unwrap_err().to_string();
            assert!(e.contains("writes link-time addresses") && e.contains("kaslr:off"), "{spec}: {e}");
        }
        for spec in [
            "a=kernel:distro,modules:preresolved,kaslr:off",
            "a=kernel:distro,modules:folded-slide",
            "a=kernel:build,modules:folded",
            "a=kernel:build,image:bzimage,kaslr:on,modules:preresolved-slide",
        ] {
            assert!(Variant::parse(spec).is_ok(), "{spec}");
        }
    }

    /// An arm64 Image that randomizes: KASLR on unless the variant says
    /// otherwise, and then link-time addresses are refused.
    #[test]
    fn an_arm64_image_that_randomizes_boots_randomized_unless_told() {
        let mut v = Variant::parse("a=modules:unsigned").unwrap();
        v.randomize_by_default(true).unwrap();
        assert!(v.kaslr);
        let mut v = Variant::parse("a=modules:unsigned").unwrap();
        v.randomize_by_default(false).unwrap();
        assert!(!v.kaslr, "a config without CONFIG_RANDOMIZE_BASE (or none found)");
        let mut v = Variant::parse("a=modules:unsigned,kaslr:off").unwrap();
        v.randomize_by_default(true).unwrap();
        assert!(!v.kaslr, "kaslr:off");
        let mut v = Variant::preset("preresolved").unwrap();
        let e = v.randomize_by_default(true).unwrap_err();
        assert!(e.contains("writes link-time addresses") && e.contains("an arm64 Image"), "{e}");
        for spec in ["a=modules:preresolved,kaslr:off", "a=modules:folded-slide"] {
            let mut v = Variant::parse(spec).unwrap();
            v.randomize_by_default(true).unwrap();
        }
    }

    #[test]
    fn a_lab_build_that_randomizes_boots_randomized_unless_told() {
        let v = Variant::parse("a=kernel:build,image:bzimage").unwrap();
        assert!(v.kaslr, "CONFIG_RANDOMIZE_BASE, booted from the bzImage");
        assert!(!Variant::parse("a=kernel:build,image:bzimage,kaslr:off").unwrap().kaslr);
        assert!(!Variant::parse("a=kernel:build").unwrap().kaslr, "the PVH entry does not randomize");
        assert!(Variant::parse("a=kernel:build-6.12+lz4").unwrap().kaslr, "a compressor flavour boots its bzImage");
        assert!(!Variant::parse("a=kernel:build-6.12+lz4,kaslr:off").unwrap().kaslr);
    }

    #[test]
    fn run_takes_a_host_program_or_a_guest_applet() {
        let v = Variant::parse("a=run:cat /sys/module/x/parameters/y").unwrap();
        assert!(matches!(v.workloads.as_slice(), [workload::Spec::Run(c)] if c == "cat /sys/module/x/parameters/y"));
        let w = workload::build(v.loader, &v.workloads);
        assert_eq!(w[1].host_programs(), None, "an applet runs on any guest");
        let v = Variant::parse("a=run:/usr/bin/true").unwrap();
        let w = workload::build(v.loader, &v.workloads);
        assert!(w[1].host_programs().is_some_and(|p| p.contains("/usr/bin/true")));
    }

    #[test]
    fn docs_lab_md_holds_the_grammar() {
        let doc = std::fs::read_to_string(bootlink::fsutil::source_tree().join("docs/lab.md")).unwrap();
        assert!(
            doc.contains(GRAMMAR),
            "docs/lab.md: copy crates/bootlink-lab/src/lab/variant.txt into its grammar block"
        );
    }

    #[test]
    fn the_grammar_names_every_key_and_step() {
        for k in KEYS {
            assert!(GRAMMAR.contains(&format!("{k}:")), "{k}");
        }
        for s in Step::ALL.iter().filter(|s| s.stage() == step::Stage::Modules) {
            assert!(GRAMMAR.contains(s.name()), "{}", s.name());
        }
        for (p, _) in step::PRESETS {
            assert!(GRAMMAR.contains(p), "{p}");
        }
    }

    #[test]
    fn kernel_dirs_need_an_image_and_one_tree() {
        const IMAGES: &[&str] = &["vmlinux", "bzImage"];
        let t = tempfile::tempdir().unwrap();
        let e = kernel_dir(t.path(), IMAGES).unwrap_err().to_string();
        assert!(e.contains("no vmlinux or bzImage"), "{e}");
        std::fs::write(t.path().join("vmlinux"), b"x").unwrap();
        assert!(kernel_dir(t.path(), IMAGES).unwrap_err().to_string().contains("lib/modules"));
        std::fs::create_dir_all(t.path().join("lib/modules/6.1.0-x")).unwrap();
        let (img, tree) = kernel_dir(t.path(), IMAGES).unwrap();
        assert_eq!((img, tree), (t.path().join("vmlinux"), t.path().join("lib/modules/6.1.0-x")));
        std::fs::create_dir_all(t.path().join("lib/modules/6.1.0-y")).unwrap();
        assert!(kernel_dir(t.path(), IMAGES).unwrap_err().to_string().contains("2 module trees"));
    }
}
