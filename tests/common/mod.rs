//! Shared by the integration tests: the real reference kernel (fetched and
//! cached once), the binary, temporary directories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use bootlink::fetch::{self, Fetched};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_bootlink")
}

/// The reference Debian kernel (linux-image-6.1.0-56-amd64 6.1.192-2), or
/// the newest 6.1 when that exact package can no longer be downloaded. The
/// tests say which one they got.
pub fn kernel() -> &'static Fetched {
    static K: OnceLock<Fetched> = OnceLock::new();
    K.get_or_init(|| {
        let f = fetch::fetch(&fetch::Request::Reference).expect("fetch the reference kernel");
        if !f.reference {
            eprintln!(
                "NOTE: testing {} {} instead of the reference package: exact figures are replaced by invariants ({})",
                f.package,
                f.version,
                f.fallback.as_deref().unwrap_or("")
            );
        }
        f
    })
}

pub fn module(rel: &str) -> PathBuf {
    kernel().modules.join("kernel").join(rel)
}

pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(bin());
    for a in args {
        c.arg(a);
    }
    c.env("BOOTLINK_QUIET", "1").output().expect("run bootlink")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh, empty directory unique to this test.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bootlink-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn copy_to(src: &Path, dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(src, &p).unwrap();
    p
}

/// Run a system tool; panics with its stderr if it fails.
pub fn sh(cmd: &str, args: &[&str]) -> Vec<u8> {
    let o = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// Every `initcall ... returned R after N usecs` line, read independently
/// of the parser: (function as printed, N).
pub fn printed_durations(log: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for line in log.lines() {
        let Some(i) = line.find("] initcall ") else { continue };
        let rest = &line[i + "] initcall ".len()..];
        let Some((func, tail)) = rest.split_once(" returned ") else { continue };
        let words: Vec<&str> = tail.split_whitespace().collect();
        if words.len() == 4 && words[1] == "after" && words[3] == "usecs" {
            out.push((func.to_string(), words[2].parse().unwrap()));
        }
    }
    out
}
