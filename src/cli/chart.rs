//! `bootlink chart`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::Error;
use bootlink_lab::chart;

#[derive(clap::Args)]
pub struct Args {
    /// Lab run directories, run.json files or kernel logs (dmesg); or `bootlink system` records (their
    /// directories or system.json files), charted side by side, link by link
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// The HTML report to write
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The timelines as one SVG
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Chrome trace-event JSON for ui.perfetto.dev
    #[arg(long)]
    perfetto: Option<PathBuf>,
    /// Print the before/after summary as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let out = chart::Outputs { html: a.output, svg: a.svg, perfetto: a.perfetto, summary: a.json };
    super::emit(&chart::command(&a.runs, &out)?, a.json);
    Ok(ExitCode::SUCCESS)
}
