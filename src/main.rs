//! The `bootlink` binary. The command line lives in src/cli/ (one file per
//! subcommand, argument mapping and printing only); the work is the
//! crates' (crates/bootlink, crates/bootlink-lab).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
