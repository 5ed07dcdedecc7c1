//! docs/cli.md is the binary's own reference (`bootlink help-reference`,
//! built from clap's command tree): this fails when a flag, a default or a
//! help line changes without the docs, so the reference cannot go stale.

use std::path::Path;
use std::process::Command;

#[test]
fn docs_cli_md_is_what_the_binary_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootlink")).arg("help-reference").output().unwrap();
    assert!(out.status.success(), "help-reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let written = std::fs::read_to_string(&file).unwrap();
    // Every subcommand of `bootlink --help` has its section.
    let help = Command::new(env!("CARGO_BIN_EXE_bootlink")).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let names: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .collect();
    assert!(names.len() >= 15, "too few subcommands read from --help: {names:?}");
    for n in &names {
        assert!(printed.contains(&format!("\n## `bootlink {n}`\n")), "no section for `bootlink {n}`");
    }
    assert!(
        printed == written,
        "docs/cli.md differs from `bootlink help-reference`: regenerate it with\n  \
         cargo run --release -- help-reference > docs/cli.md"
    );
}
