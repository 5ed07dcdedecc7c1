//! `bootlink ddlink profile|write|verify|measure|synth|status`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::ddlink::request::{CacheRequest, MeasureRequest};
use bootlink::ddlink::run::Program;
use bootlink::{Error, ddlink, glibc};

use super::{emit, exit};

/// A program run under the patched loader with a cache.
#[derive(clap::Args)]
pub struct CacheRun {
    /// The patched ld.so (default: `bootlink glibc build`'s, built if needed)
    #[arg(long)]
    loader: Option<PathBuf>,
    /// The cache from `bootlink ddlink write`
    #[arg(long)]
    cache: PathBuf,
    /// Run with the prelinked images under DIR in place (`ddlink write --prelink DIR`)
    #[arg(long, value_name = "DIR")]
    overlay: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<String>,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Run PROGRAM once under the patched ld.so with every binding made at startup, recording them
    Profile {
        /// The patched ld.so (default: `bootlink glibc build`'s, built if needed)
        #[arg(long)]
        loader: Option<PathBuf>,
        /// Where to write the record
        #[arg(long, short)]
        output: PathBuf,
        #[arg(long)]
        json: bool,
        /// The program and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<String>,
    },
    /// Turn a record into the cache the loader reads, after checking it against the files
    Write {
        /// The patched ld.so that recorded (default: `bootlink glibc build`'s)
        #[arg(long)]
        loader: Option<PathBuf>,
        /// The record from `bootlink ddlink profile`
        #[arg(long)]
        record: PathBuf,
        /// The program the record is of (the loader records the program
        /// without a name)
        #[arg(long)]
        program: PathBuf,
        /// Where to write the cache
        #[arg(long, short)]
        output: PathBuf,
        /// Relocation Skip Mode: also write prelinked images of the program
        /// (a position-independent executable) and its libraries under DIR
        /// (each at its own path below DIR; run with `--overlay DIR` or
        /// install them), and a cache that names them
        #[arg(long, value_name = "DIR")]
        prelink: Option<PathBuf>,
        /// Load address of the first prelinked image (default: chosen at
        /// random for each build, see docs/ddlink-security.md)
        #[arg(long, value_parser = parse_address)]
        base: Option<u64>,
        /// For a root file system image: identify files by name, size, mtime
        /// (seconds) and build ID, not device and inode
        #[arg(long)]
        portable: bool,
        #[arg(long)]
        json: bool,
    },
    /// Run PROGRAM with the cache, look every cached binding up the normal way too, and compare
    Verify(CacheRun),
    /// Startup of PROGRAM under Debian's ld.so, the patched one without a cache, and with the
    /// cache: relocation time, lookups, task-clock, page faults, output identical
    Measure {
        /// The patched ld.so (default: `bootlink glibc build`'s, built if needed)
        #[arg(long)]
        loader: Option<PathBuf>,
        #[arg(long)]
        cache: PathBuf,
        /// Debian's loader, the baseline
        #[arg(long, default_value = "/lib64/ld-linux-x86-64.so.2")]
        stock: PathBuf,
        /// Runs per mode (statistics runs and perf stat -r)
        #[arg(long, default_value_t = 30)]
        runs: usize,
        /// Also write the result as JSON to this file (for charts and benches)
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Bind every symbol at startup (LD_BIND_NOW=1) in every mode
        #[arg(long)]
        bind_now: bool,
        /// Also measure Relocation Skip Mode: this cache (from `ddlink write
        /// --prelink`) with the images of `--overlay`
        #[arg(long, requires = "overlay")]
        skip_cache: Option<PathBuf>,
        /// The prelinked images (`ddlink write --prelink DIR`)
        #[arg(long, value_name = "DIR", requires = "skip_cache")]
        overlay: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<String>,
    },
    /// Generate and build the synthetic case: a program with 12 libraries and ~200,000 symbols
    /// whose startup relocation is symbol lookups (cached by content)
    Synth {
        #[arg(long, default_value_t = 12)]
        libs: usize,
        #[arg(long, default_value_t = 200_000)]
        symbols: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Build into this directory (default: the cache)
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Which mode the loader uses for PROGRAM with the cache, and why; each object's state
    Status(CacheRun),
}

/// `--base`: decimal or 0x-hexadecimal.
fn parse_address(s: &str) -> Result<u64, Error> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    v.map_err(|e| Error::new(bootlink::error::Kind::Usage, format!("`{s}` is not an address: {e}")).because(e))
}

/// The given ld.so, or the one `bootlink glibc build` makes from this
/// checkout's series (a cache hit once built).
fn loader_or_default(loader: Option<PathBuf>) -> Result<PathBuf, Error> {
    match loader {
        Some(l) => Ok(l),
        None => Ok(glibc::run(&glibc::Options::defaults())?.ld_so),
    }
}

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Profile { loader, output, json, program } => {
            let loader = loader_or_default(loader)?;
            let (rec, _) = ddlink::run::profile(&loader, &Program::from_words(program, None), &output)?;
            let summary = ddlink::record::Summary::of(&rec, &output);
            emit(&summary, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Write { loader, record, program, output, prelink, base, portable, json } => {
            let loader = loader_or_default(loader)?;
            let req = CacheRequest { loader, record, program, output, prelink, base, portable };
            let w = ddlink::request::write_cache(&req)?;
            emit(&w, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Verify(CacheRun { loader, cache, overlay, json, program }) => {
            let loader = loader_or_default(loader)?;
            let (report, _) = ddlink::run::verify(&loader, &cache, &Program::from_words(program, overlay))?;
            emit(&report, json);
            Ok(exit(report.ok()))
        }
        Cmd::Measure { loader, cache, stock, runs, output, bind_now, skip_cache, overlay, json, program } => {
            let req = MeasureRequest {
                loader: loader_or_default(loader)?,
                cache,
                stock,
                runs,
                bind_now,
                skip: skip_cache.zip(overlay),
                output,
                program: Program::from_words(program, None),
            };
            let result = ddlink::request::measure(&req)?;
            emit(&result, json);
            Ok(exit(result.modes.iter().all(|m| m.output_identical)))
        }
        Cmd::Synth { libs, symbols, seed, out, json } => {
            let spec = ddlink::synth::SynthSpec { libs, symbols, seed };
            let case = ddlink::synth::build(&spec, out.as_deref())?;
            emit(&case, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Status(CacheRun { loader, cache, overlay, json, program }) => {
            let loader = loader_or_default(loader)?;
            let report = ddlink::run::status(&loader, &cache, &Program::from_words(program, overlay))?;
            emit(&report, json);
            Ok(ExitCode::SUCCESS)
        }
    }
}
