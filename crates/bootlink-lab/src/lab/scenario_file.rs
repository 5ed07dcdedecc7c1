//! A scenario file: a whole lab run in TOML (`bootlink lab --scenario
//! FILE`): the kernel, the module set, the run's settings and its
//! variants. Each `[[variant]]` table is a `name` and the keys of the
//! variant grammar ([`crate::lab::variant::GRAMMAR`]), parsed by the same
//! [`Variant::from_pairs`] as `--variant` strings; `steps` is a list,
//! `manifest` a boolean, `starts` a number. An optional `[target]` table
//! names what boots: `arch` (the target's constructor, default `x86-64`)
//! and, replacing that target's values, `qemu`, `machine` and `cpu` (see
//! [`crate::lab::target`]). Example files: docs/examples/.
//!
//! ```toml
//! set = "fs-nls-crypto-net-194"   # or names = ["crc16"]
//! repetitions = 1
//!
//! [target]
//! arch = "x86-64"
//! machine = "pc"
//!
//! [[variant]]
//! name = "stock"
//!
//! [[variant]]
//! name = "all-fixes"
//! kernel = "build"
//! steps = ["fold", "unsign", "finalize"]
//! manifest = true
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::lab::setup::Request;
use crate::lab::target::{Arch, Target};
use crate::lab::variant::Variant;
use bootlink::error::{Error, Kind, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct File {
    /// vmlinux or bzImage, with `modules` (default: Debian's reference kernel).
    kernel: Option<PathBuf>,
    modules: Option<PathBuf>,
    set: Option<String>,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default = "one")]
    repetitions: usize,
    #[serde(default)]
    realtime: bool,
    #[serde(default = "one_cpu")]
    smp: u32,
    #[serde(default = "yes")]
    trace: bool,
    #[serde(default)]
    measure_overhead: bool,
    #[serde(default = "timeout")]
    timeout: u64,
    #[serde(default = "memory")]
    memory: u32,
    #[serde(default)]
    cmdline: String,
    #[serde(default)]
    target: Option<TargetTable>,
    #[serde(default)]
    variant: Vec<toml::Table>,
}

/// `[target]`: an architecture's target, and what replaces its values.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetTable {
    arch: Option<String>,
    qemu: Option<PathBuf>,
    machine: Option<String>,
    cpu: Option<String>,
}

impl TargetTable {
    fn target(self) -> Result<Target> {
        let arch = match self.arch.as_deref() {
            None => Arch::X86_64,
            Some(a) => Arch::parse(a).ok_or_else(|| {
                let known: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
                Error::new(Kind::Usage, format!("scenario: target: arch {a:?}: not one of {}", known.join(", ")))
            })?,
        };
        let mut t = Target::of(arch);
        let nonempty = |key: &str, v: String| {
            if v.trim().is_empty() || v.contains(char::is_whitespace) {
                Err(Error::new(Kind::Usage, format!("scenario: target: {key} {v:?}: one word, not empty")))
            } else {
                Ok(v)
            }
        };
        if let Some(q) = self.qemu {
            t.qemu = q;
        }
        if let Some(m) = self.machine {
            t.machine = nonempty("machine", m)?;
        }
        if let Some(c) = self.cpu {
            t.cpu_model = nonempty("cpu", c)?;
        }
        Ok(t)
    }
}

fn one() -> usize {
    1
}
fn one_cpu() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn timeout() -> u64 {
    300
}
fn memory() -> u32 {
    1024
}

/// The request a scenario file describes; `out` is the run directory.
pub fn load(path: &Path, out: Option<PathBuf>) -> Result<Request> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse(&text, out).map_err(|e| e.at(path))
}

/// A scenario file's text.
pub fn parse(text: &str, out: Option<PathBuf>) -> Result<Request> {
    let f: File = toml::from_str(text).map_err(|e| Error::new(Kind::Usage, format!("scenario: {}", e.message())))?;
    let variants = f.variant.iter().map(variant).collect::<Result<Vec<_>>>()?;
    let target = match f.target {
        Some(t) => t.target()?,
        None => Target::default(),
    };
    Ok(Request {
        target,
        kernel: f.kernel,
        modules_dir: f.modules,
        set: f.set,
        names: f.names,
        variants,
        repetitions: f.repetitions,
        realtime: f.realtime,
        smp: f.smp,
        no_trace: !f.trace,
        measure_overhead: f.measure_overhead,
        timeout: Duration::from_secs(f.timeout),
        memory_mib: f.memory,
        out,
        extra_cmdline: f.cmdline,
        // how many boots the host runs at once is the command line's (--jobs)
        jobs: None,
    })
}

/// One `[[variant]]` table, through the grammar's keys.
fn variant(t: &toml::Table) -> Result<Variant> {
    let bad = |m: String| Error::new(Kind::Usage, format!("scenario: {m}"));
    let name = t.get("name").and_then(|n| n.as_str()).ok_or_else(|| bad("a [[variant]] without name".into()))?;
    let mut pairs = Vec::new();
    for (key, value) in t.iter().filter(|(k, _)| *k != "name") {
        let v = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) if key == "manifest" => (if *b { "on" } else { "off" }).to_string(),
            toml::Value::Array(a) if key == "steps" => a
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("variant {name}: steps: a list of step names")))
                })
                .collect::<Result<Vec<_>>>()?
                .join("+"),
            _ => return Err(bad(format!("variant {name}: {key}: not a value this key takes"))),
        };
        pairs.push((key.clone(), v));
    }
    Variant::from_pairs(name, &pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootlink::steps::Step;

    #[test]
    fn a_scenario_file_is_the_same_model_as_variant_strings() {
        let r = parse(
            r#"
            names = ["crc16"]
            repetitions = 2
            [[variant]]
            name = "ff"
            kernel = "build"
            steps = ["fold", "unsign", "finalize"]
            manifest = true
            cmdline = "module.sig_enforce=0"
            [[variant]]
            name = "o"
            order = "synth-64k"
            flash = "nand"
            starts = 1
            "#,
            None,
        )
        .unwrap();
        assert_eq!((r.names.as_slice(), r.repetitions, r.no_trace), (&["crc16".to_string()][..], 2, false));
        let same =
            Variant::parse("ff=kernel:build,steps:fold+unsign+finalize,manifest:on,cmdline:module.sig_enforce=0")
                .unwrap();
        assert_eq!(r.variants[0], same);
        assert_eq!(r.variants[1], Variant::parse("o=order:synth-64k,flash:nand,starts:1").unwrap());
        assert_eq!(r.variants[0].steps[3], Step::Manifest);
        assert_eq!(r.target, Target::x86_64());
    }

    #[test]
    fn a_scenario_file_names_its_target() {
        let r = parse("[target]\narch = \"x86-64\"\nmachine = \"q35\"\ncpu = \"Skylake-Client-v4\"\n", None).unwrap();
        assert_eq!((r.target.machine.as_str(), r.target.cpu_model.as_str()), ("q35", "Skylake-Client-v4"));
        assert_eq!((r.target.arch, r.target.console), (Arch::X86_64, "ttyS0"));
        let r = parse("[target]\narch = \"arm64\"\n", None).unwrap();
        assert_eq!(r.target, Target::arm64());
        assert_eq!((r.target.machine.as_str(), r.target.cpu_arg()), ("virt", "cortex-a72".to_string()));
    }

    #[test]
    fn bad_scenario_files_say_what_is_wrong() {
        for (text, want) in [
            ("colour = 1", "unknown field `colour`"),
            ("[[variant]]\nkernel = \"build\"", "without name"),
            ("[[variant]]\nname = \"a\"\nsteps = [1]", "a list of step names"),
            ("[[variant]]\nname = \"a\"\nmanifest = 1", "manifest:1: use on, blake2b, read or off"),
            ("[[variant]]\nname = \"a\"\nmanifest = 1.5", "not a value"),
            ("[[variant]]\nname = \"a\"\nsteps = [\"fold\", \"sign\"]", "unknown module step \"sign\""),
            ("[[variant]]\nname = \"a\"\nloader = \"fast\"", "loader:fast"),
            ("[target]\narch = \"riscv64\"", "arch \"riscv64\": not one of x86-64, arm64"),
            ("[target]\ncpu = \"\"", "cpu \"\": one word"),
            ("[target]\nconsole = \"ttyS1\"", "unknown field `console`"),
        ] {
            let e = parse(text, None).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn every_example_scenario_loads() {
        let dir = bootlink::fsutil::source_tree().join("docs/examples");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml")
                && p.file_name().unwrap().to_string_lossy().starts_with("lab-")
            {
                let r = load(&p, None).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(!r.variants.is_empty(), "{}", p.display());
                n += 1;
            }
        }
        assert!(n >= 4, "{n} example scenarios in {}", dir.display());
    }
}
