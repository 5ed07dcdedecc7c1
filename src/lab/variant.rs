//! Lab variants: what one column of a comparison boots. A variant is a
//! kernel (the run's default, Debian's reference package, the self-built
//! `bootlink kernel build`, or any build directory), a module transform
//! (stock, unsigned, preresolved, folded), a loader and extra kernel
//! command line.
//!
//! On the command line (`bootlink lab --variant ...`):
//!
//! ```text
//! stock | unsigned | preresolved | folded          the transform, on the run's kernel
//!   | symhash | symhash-sorted | preresolved-symhash  (hash tables; the kernel needs kernel/patches)
//!   | finalized | finalized-orc | finalized-mcount | folded-finalized  (build-time finalize work)
//!   | trimmed  (local data symbols removed; any kernel)
//! NAME=key:value,key:value...                        a composed variant
//!     kernel:default | debian | debian-SERIES | build | DIR
//!                                                    debian-6.12: Debian's newest kernel of that series;
//!                                                    DIR holds vmlinux (or bzImage) and lib/modules/<release>/
//!     modules:TRANSFORM                              one of the above (default stock)
//!     loader:insmod                                  busybox insmod, one module after the other (default)
//!       | batch | batch-N                            bootlink's batch loader, one worker per CPU or N
//!       | modprobe | modprobe-parallel               Debian's kmod, one module after the other or all at once
//!       | storm                                      one kmod insmod worker per CPU over the whole set at once
//!                                                    (modprobe-parallel and storm need --realtime --smp N)
//!     cmdline:ARGS                                   appended to the kernel command line (no commas)
//!     run:/PATH ARGS                                 a host program run after the modules load, with
//!                                                    its ld.so and libraries copied in (no commas)
//!     manifest:on                                    boot a copy of the kernel (a vmlinux with
//!                                                    kernel/patches 0012) whose module hash manifest
//!                                                    lists this variant's final modules
//!     raw:NAME=FILE                                  FILE's bytes, as they are, in the guest as module
//!                                                    NAME's file (after the tree is read and a manifest
//!                                                    made): a truncated or renamed module the host-side
//!                                                    tree reader would refuse, offered to the kernel
//!     ddlink:synth | synth-SYMBOLS | /PATH ARGS      DDLink: after the modules load, start the seed's
//!                                                    case (`ddlink synth`, 12 libraries, 50,000 symbols
//!                                                    or SYMBOLS) or a host program under the patched
//!                                                    ld.so, normal / File Read Mode / Skip Mode
//!     order:PROGRAM[-BLOCKk[+BLOCKk]]              function reordering on slow flash: after the modules
//!                                                    load, PROGRAM (synth: `order synth`'s program; python:
//!                                                    `order python`'s CPython 3.11, with BOLT's rewrite too)
//!                                                    unordered and reordered (GNU ld), started cold from
//!                                                    SquashFS (4k, 64k, 128k blocks; default all) on
//!                                                    null_blk, readahead 0 and default
//!     flash:seed | nand | nor | MIBS-USEC            the emulated flash (with order; default seed: 1 MiB/s,
//!                                                    100 us per request)
//!     starts:N                                       starts per mode per boot (default 3 with ddlink, 2 with order)
//! ```
//!
//! e.g. `--variant debian=kernel:debian,modules:unsigned --variant
//! ours=kernel:build,modules:unsigned,cmdline:module.sig_enforce=0`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Kind, Result};

/// How the modules of a variant are made from the kernel's own files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transform {
    /// The modules as shipped (signed, for a distribution kernel).
    #[default]
    Stock,
    /// The same bytes without the appended signature.
    Unsigned,
    /// `bootlink preresolve` against the booted kernel (signature removed).
    Preresolved,
    /// Preresolved with `--fold-symbols`: the addresses in the relocations,
    /// the symbols removed from .symtab.
    Folded,
    /// `bootlink symhash`: export and undefined-symbol hash tables added
    /// (signature removed); the kernel's `module.symlookup=` picks the method.
    Symhash,
    /// `bootlink symhash --sort-versions`: tables and `__versions` sorted.
    SymhashSorted,
    /// Preresolved, then `symhash --sort-versions` for what is left.
    PreresolvedSymhash,
    /// `bootlink finalize`: ORC tables sorted and ftrace records checked
    /// at build time (the kernel needs kernel/patches to skip the work).
    Finalized,
    /// `bootlink finalize --no-mcount`: only the ORC tables sorted.
    FinalizedOrc,
    /// `bootlink finalize --no-orc`: only the ftrace records checked.
    FinalizedMcount,
    /// Preresolved with `--fold-symbols`, then finalized.
    FoldedFinalized,
    /// Unsigned, local data symbols no relocation uses removed (what
    /// `preresolve --trim-symtab` does, without preresolving): shorter
    /// kallsyms scans on a stock kernel.
    Trimmed,
}

impl Transform {
    pub const ALL: [Transform; 12] = [
        Transform::Stock,
        Transform::Unsigned,
        Transform::Preresolved,
        Transform::Folded,
        Transform::Symhash,
        Transform::SymhashSorted,
        Transform::PreresolvedSymhash,
        Transform::Finalized,
        Transform::FinalizedOrc,
        Transform::FinalizedMcount,
        Transform::FoldedFinalized,
        Transform::Trimmed,
    ];

    pub fn parse(s: &str) -> Option<Transform> {
        Transform::ALL.into_iter().find(|t| t.name() == s)
    }

    pub fn name(self) -> &'static str {
        match self {
            Transform::Stock => "stock",
            Transform::Unsigned => "unsigned",
            Transform::Preresolved => "preresolved",
            Transform::Folded => "folded",
            Transform::Symhash => "symhash",
            Transform::SymhashSorted => "symhash-sorted",
            Transform::PreresolvedSymhash => "preresolved-symhash",
            Transform::Finalized => "finalized",
            Transform::FinalizedOrc => "finalized-orc",
            Transform::FinalizedMcount => "finalized-mcount",
            Transform::FoldedFinalized => "folded-finalized",
            Transform::Trimmed => "trimmed",
        }
    }
}

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
    /// `bootlink kernel build` with the repository's series and config.
    Build,
    /// A directory with `vmlinux` (or `bzImage`) and `lib/modules/<release>/`.
    Dir(PathBuf),
}

/// How the modules are loaded in the guest (see [`crate::lab::loaders`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Loader {
    /// busybox insmod, one module after the other, in dependency order.
    #[default]
    Insmod,
    /// bootlink's batch loader with this many workers (None: one per CPU).
    Batch(Option<u32>),
    /// Debian's kmod modprobe, one module after the other.
    Modprobe,
    /// kmod modprobe for every module at once (udev-style).
    ModprobeParallel,
    /// One insmod worker per CPU over the whole set at once.
    Storm,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantSpec {
    pub name: String,
    pub kernel: KernelChoice,
    pub transform: Transform,
    pub loader: Loader,
    /// Appended to the kernel command line.
    pub cmdline: String,
    /// A host program (absolute path, then its arguments) run in the guest
    /// after the modules are loaded, with its ld.so and libraries copied in.
    pub run: Option<String>,
    /// A program started under DDLink's patched ld.so in each loader mode
    /// after the modules are loaded (see [`crate::lab::ddlink`]).
    pub ddlink: Option<crate::lab::ddlink::Spec>,
    /// Boot a copy of the kernel whose module hash manifest lists this
    /// variant's final modules (kernel/patches 0012, [`crate::manifest`]).
    pub manifest: bool,
    /// Module NAME's file in the guest replaced by FILE's bytes, unread by
    /// the host (`raw:NAME=FILE`): what the kernel does with a module the
    /// tree reader would refuse (truncated) or know by another name.
    pub raw: Option<(String, PathBuf)>,
    /// Function reordering's cold starts from emulated flash (see
    /// [`crate::lab::order`]).
    pub order: Option<crate::lab::order::Spec>,
}

impl VariantSpec {
    pub fn of(t: Transform) -> VariantSpec {
        VariantSpec {
            name: t.name().into(),
            kernel: KernelChoice::Default,
            transform: t,
            loader: Loader::Insmod,
            cmdline: String::new(),
            run: None,
            ddlink: None,
            manifest: false,
            raw: None,
            order: None,
        }
    }

    /// One `--variant` argument: a transform's name, or `NAME=key:value,...`.
    pub fn parse(arg: &str) -> Result<VariantSpec> {
        let transforms = || Transform::ALL.map(|t| t.name()).join(", ");
        let Some((name, spec)) = arg.split_once('=') else {
            return Transform::parse(arg).map(VariantSpec::of).ok_or_else(|| {
                Error::new(Kind::Usage, format!(
                    "unknown variant {arg:?}: use {} (preresolved with --fold-symbols), or NAME=kernel:...,modules:...",
                    transforms()
                ))
            });
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b)) {
            return Err(Error::new(
                Kind::Usage,
                format!("variant {arg:?}: name it with letters, digits, '-', '_', '.' or '+' before '='"),
            ));
        }
        let mut v = VariantSpec::of(Transform::Stock);
        v.name = name.to_string();
        let mut seen = Vec::new();
        let mut starts = None;
        let mut flash = None;
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once(':') else {
                return Err(Error::new(Kind::Usage, format!("variant {name}: {part:?} is not key:value")));
            };
            if seen.contains(&key) {
                return Err(Error::new(Kind::Usage, format!("variant {name}: {key} given twice")));
            }
            seen.push(key);
            match key {
                "kernel" => {
                    v.kernel = match value {
                        "default" => KernelChoice::Default,
                        "debian" => KernelChoice::Debian,
                        s if s.starts_with("debian-") => {
                            let series = &s["debian-".len()..];
                            if series.is_empty() || !series.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                                return Err(Error::new(
                                    Kind::Usage,
                                    format!("variant {name}: kernel:{s}: give a series, e.g. kernel:debian-6.12"),
                                ));
                            }
                            KernelChoice::DebianSeries(series.to_string())
                        }
                        "build" => KernelChoice::Build,
                        "" => return Err(Error::new(Kind::Usage, format!("variant {name}: kernel: needs a value"))),
                        dir => KernelChoice::Dir(PathBuf::from(dir)),
                    }
                }
                "modules" => {
                    v.transform = Transform::parse(value).ok_or_else(|| {
                        Error::new(Kind::Usage, format!("variant {name}: modules:{value}: use {}", transforms()))
                    })?
                }
                "loader" => {
                    v.loader = crate::lab::loaders::parse_name(value).ok_or_else(|| {
                        Error::new(
                            Kind::Usage,
                            format!(
                                "variant {name}: loader:{value}: use insmod, batch, batch-N (1..64 workers), modprobe, modprobe-parallel or storm"
                            ),
                        )
                    })?
                }
                "cmdline" => v.cmdline = value.to_string(),
                "run" if value.starts_with('/') => v.run = Some(value.to_string()),
                "run" => {
                    return Err(Error::new(
                        Kind::Usage,
                        format!("variant {name}: run:{value}: give a program's absolute path"),
                    ));
                }
                "ddlink" => {
                    v.ddlink = Some(
                        crate::lab::ddlink::Spec::parse(value)
                            .map_err(|m| Error::new(Kind::Usage, format!("variant {name}: {m}")))?,
                    )
                }
                "manifest" => {
                    v.manifest = match value {
                        "on" => true,
                        "off" => false,
                        _ => {
                            return Err(Error::new(
                                Kind::Usage,
                                format!("variant {name}: manifest:{value}: use on or off"),
                            ));
                        }
                    }
                }
                "raw" => {
                    let (module, file) = value.split_once('=').filter(|(m, f)| !m.is_empty() && !f.is_empty()).ok_or_else(|| {
                        Error::new(Kind::Usage, format!("variant {name}: raw:{value}: give raw:MODULE=FILE"))
                    })?;
                    v.raw = Some((module.to_string(), PathBuf::from(file)));
                }
                "order" => {
                    v.order = Some(
                        crate::lab::order::Spec::parse(value)
                            .map_err(|m| Error::new(Kind::Usage, format!("variant {name}: {m}")))?,
                    )
                }
                "flash" => {
                    flash = Some(
                        crate::lab::order::Flash::parse(value)
                            .map_err(|m| Error::new(Kind::Usage, format!("variant {name}: {m}")))?,
                    )
                }
                "starts" => {
                    starts = Some(value.parse::<usize>().ok().filter(|n| (1..=100).contains(n)).ok_or_else(|| {
                        Error::new(Kind::Usage, format!("variant {name}: starts:{value}: give 1 to 100"))
                    })?)
                }
                _ => {
                    return Err(Error::new(
                        Kind::Usage,
                        format!(
                            "variant {name}: unknown key {key:?} (kernel, modules, loader, cmdline, run, ddlink, order, flash, starts, manifest, raw)"
                        ),
                    ));
                }
            }
        }
        if v.ddlink.is_some() && v.order.is_some() {
            return Err(Error::new(Kind::Usage, format!("variant {name}: give ddlink: or order:, not both")));
        }
        match (&mut v.ddlink, &mut v.order, starts) {
            (Some(d), _, Some(n)) => d.starts = n,
            (_, Some(o), Some(n)) => o.starts = n,
            (None, None, Some(_)) => {
                return Err(Error::new(
                    Kind::Usage,
                    format!(
                        "variant {name}: starts: counts the starts of a ddlink: or order: program; give ddlink: or order: too"
                    ),
                ));
            }
            _ => {}
        }
        match (&mut v.order, flash) {
            (Some(o), Some(f)) => o.flash = f,
            (None, Some(_)) => {
                return Err(Error::new(
                    Kind::Usage,
                    format!("variant {name}: flash: is the device of order:; give order: too"),
                ));
            }
            _ => {}
        }
        Ok(v)
    }
}

/// A kernel directory: its bootable image and its module tree.
pub fn kernel_dir(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let image = ["vmlinux", "bzImage"].iter().map(|n| dir.join(n)).find(|p| p.is_file()).ok_or_else(|| {
        Error::file(
            Kind::Usage,
            dir,
            "no vmlinux or bzImage in this kernel directory (give a `bootlink kernel build` output)",
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
        assert_eq!(VariantSpec::parse("folded").unwrap(), VariantSpec::of(Transform::Folded));
        let v = VariantSpec::parse("ours=kernel:build,modules:unsigned,cmdline:module.sig_enforce=1 quiet").unwrap();
        assert_eq!(v.name, "ours");
        assert_eq!(v.kernel, KernelChoice::Build);
        assert_eq!(v.transform, Transform::Unsigned);
        assert_eq!(v.cmdline, "module.sig_enforce=1 quiet");
        let v = VariantSpec::parse("d=kernel:build,ddlink:synth-9000,starts:5").unwrap();
        let d = v.ddlink.unwrap();
        assert_eq!((d.program, d.starts), (crate::lab::ddlink::Program::Synth { symbols: 9000 }, 5));
        let v = VariantSpec::parse("o=order:synth-64k,flash:4-20,starts:1").unwrap();
        let o = v.order.unwrap();
        assert_eq!((o.blocks, o.flash, o.starts), (vec![64], crate::lab::order::Flash { mib_s: 4, latency_us: 20 }, 1));
        let v = VariantSpec::parse("t=manifest:on,raw:nls_cp437=/tmp/cut.ko").unwrap();
        assert_eq!(v.raw, Some(("nls_cp437".to_string(), PathBuf::from("/tmp/cut.ko"))));
        let v = VariantSpec::parse("x=kernel:/k/dir").unwrap();
        assert_eq!((v.kernel, v.transform), (KernelChoice::Dir("/k/dir".into()), Transform::Stock));
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
            ("a=order:synth,flash:fast", "flash:fast: give seed, nand, nor or MIBS-USEC"),
            ("a=order:synth,ddlink:synth", "not both"),
            ("a=manifest:yes", "manifest:yes: use on or off"),
            ("a=raw:sctp", "raw:sctp: give raw:MODULE=FILE"),
            ("a=raw:=/f", "give raw:MODULE=FILE"),
        ] {
            let e = VariantSpec::parse(arg).unwrap_err().to_string();
            assert!(e.contains(want), "{arg}: {e}");
        }
    }

    #[test]
    fn kernel_dirs_need_an_image_and_one_tree() {
        let t = tempfile::tempdir().unwrap();
        let e = kernel_dir(t.path()).unwrap_err().to_string();
        assert!(e.contains("no vmlinux or bzImage"), "{e}");
        std::fs::write(t.path().join("vmlinux"), b"x").unwrap();
        assert!(kernel_dir(t.path()).unwrap_err().to_string().contains("lib/modules"));
        std::fs::create_dir_all(t.path().join("lib/modules/6.1.0-x")).unwrap();
        let (img, tree) = kernel_dir(t.path()).unwrap();
        assert_eq!((img, tree), (t.path().join("vmlinux"), t.path().join("lib/modules/6.1.0-x")));
        std::fs::create_dir_all(t.path().join("lib/modules/6.1.0-y")).unwrap();
        assert!(kernel_dir(t.path()).unwrap_err().to_string().contains("2 module trees"));
    }
}
