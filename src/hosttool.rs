//! Running host tools (apt-get, openssl, make, patch, qemu...): a missing
//! tool is reported with the Debian package that provides it, a failing one
//! with its last line of stderr.

use std::process::Command;

use crate::error::{Error, Kind, Result};

/// Run a host tool to completion and return its stdout.
pub fn run(cmd: &mut Command, what: &str, package: &str) -> Result<String> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().map_err(|e| spawn_error(&prog, what, package, e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().map(str::trim).rfind(|l| !l.is_empty() && !l.starts_with("W:")).unwrap_or("");
        return Err(Error::new(Kind::Tool, format!("{what} failed ({prog} exited {}): {last}", out.status)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The error for a tool that could not be started.
pub fn spawn_error(prog: &str, what: &str, package: &str, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(
            Kind::Tool,
            format!("{prog}: missing tool, needed for {what} (install the Debian package {package})"),
        ),
        _ => Error::new(Kind::Tool, format!("{prog}: cannot run it for {what}: {e}")),
    }
}

/// Is `prog` on the PATH?
pub fn exists(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_names_the_package() {
        let err = run(&mut Command::new("bootlink-no-such-tool"), "testing", "some-package").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("bootlink-no-such-tool") && text.contains("some-package"), "{text}");
        let err = run(Command::new("sh").args(["-c", "echo oops >&2; exit 3"]), "testing", "dash").unwrap_err();
        assert!(err.to_string().contains("oops"), "{err}");
    }
}
