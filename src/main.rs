//! The `bootlink` binary. The command line lives in src/cli/ (one file per
//! subcommand, argument mapping and printing only); the work is the
//! library's (src/lib.rs).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
