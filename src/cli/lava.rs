//! `bootlink lava`: the lab's runs on LAVA (the jobs are written by
//! `bootlink lab --lava DIR`; this reads their logs back).

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::Error;
use bootlink_lab::lava::import;

use super::{emit, exit};

#[derive(clap::Subcommand)]
pub enum Cmd {
    /// Finished LAVA jobs into a lab run directory: their job logs (lava-run's output, `lavacli
    /// jobs logs ID --raw`) or plain console logs, read by the lab's parser; `bootlink chart`
    /// shows them beside lab runs
    Import(ImportArgs),
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// LAVA job logs or console logs, one per job (a file named ID.yaml gives the job's id)
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    /// The jobs' directory (`bootlink lab --lava DIR`) or its bootlink-lava.json
    #[arg(long)]
    jobs: PathBuf,
    /// Run directory to write (default: ./lava-<time>)
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: Cmd) -> Result<ExitCode, Error> {
    match cmd {
        Cmd::Import(a) => {
            let out = a.output.unwrap_or_else(|| {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                PathBuf::from(format!("lava-{secs}"))
            });
            let r = import::import(&import::Options { jobs: a.jobs, logs: a.logs, out })?;
            for p in &r.problems {
                eprintln!("bootlink: {p}");
            }
            emit(&r, a.json);
            Ok(exit(r.problems.is_empty() && r.run_dir.is_some()))
        }
    }
}
