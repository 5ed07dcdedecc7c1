//! `bootlink order write|report|synth|record|python`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use bootlink::{Error, order};

use super::{emit, exit};

/// A startup trace and the binaries it is read against.
#[derive(clap::Args)]
pub struct TraceArgs {
    /// The trace bl-trace wrote
    #[arg(long)]
    trace: PathBuf,
    /// The binary that was traced (built with -finstrument-functions, not stripped)
    #[arg(long)]
    binary: PathBuf,
    /// The binary the order is for (same sources, without instrumentation), for the
    /// prediction and to check it has every function (default: --binary)
    #[arg(long)]
    layout: Option<PathBuf>,
    /// Which object of the trace is the binary ("-": the program itself)
    #[arg(long, default_value = "-")]
    object: String,
    /// Leave out the traced functions --layout lacks (GCC inlines functions in a build
    /// without -finstrument-functions that the instrumented build keeps) instead of
    /// refusing the trace
    #[arg(long, requires = "layout")]
    allow_missing: bool,
    #[arg(long)]
    json: bool,
}

impl TraceArgs {
    fn request(self) -> (order::TraceRequest, bool) {
        let TraceArgs { trace, binary, layout, object, allow_missing, json } = self;
        (order::TraceRequest { trace, binary, layout, object, allow_missing }, json)
    }
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Map a trace onto the traced binary's functions and write the order for GNU ld
    /// (order.ld), gold (order.gold) and lld (order.lld)
    Write {
        #[command(flatten)]
        t: TraceArgs,
        /// Directory for the order files
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Predict the pages and storage blocks startup touches before and after the order
    Report {
        #[command(flatten)]
        t: TraceArgs,
    },
    /// The synthetic test end to end: generate and build a program of FUNCTIONS small functions
    /// of which STARTUP run at startup, trace it, order it, relink it with every installed
    /// linker, check its output, count blocks
    Synth {
        #[arg(long, default_value_t = 10_000)]
        functions: u32,
        #[arg(long, default_value_t = 1_000)]
        startup: u32,
        #[arg(long, default_value_t = 100)]
        files: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        json: bool,
    },
    /// Record a start-up trace without a rebuild: PROGRAM run once under QEMU's user-mode
    /// emulator (qemu-x86_64), its first translated blocks mapped to its functions
    Record {
        /// Where the trace goes (bl-trace's format: `order write --trace`)
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        json: bool,
        /// The program (not stripped) and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Record the order PROGRAM's start-up first touches its data objects (one run under
    /// valgrind's lackey) and write it for GNU ld (order.ld), gold (order.gold) and lld
    /// (order.lld); the program needs its symbol table and -fdata-sections objects to relink
    Data {
        /// Directory for the record (data.touch) and the order files
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        json: bool,
        /// The program (not stripped) and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The real program end to end: build CPython 3.11 from Debian's source (plain and
    /// instrumented, cached), trace its start-up, order it, relink it with every installed
    /// linker, rewrite it with BOLT and its own profile, check every build's output
    Python {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Write { t, output } => {
            let (req, json) = t.request();
            let w = order::write(&req, &output)?;
            emit(&w, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Report { t } => {
            let (req, json) = t.request();
            let predicted = order::map(&req)?.predicted;
            emit(&predicted, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Synth { functions, startup, files, seed, json } => {
            let spec = order::synth::SynthSpec { functions, startup, files, seed };
            let report = order::case::synth_case(&spec)?;
            emit(&report, json);
            Ok(exit(report.outputs_identical()))
        }
        Cmd::Record { output, json, command } => {
            let r = order::record(&command, &output)?;
            emit(&r, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Data { output, json, command } => {
            let r = order::data::record_command(&command, &output)?;
            emit(&r, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Python { json } => {
            let report = order::case::python_case()?;
            emit(&report, json);
            Ok(exit(report.outputs_identical()))
        }
    }
}
