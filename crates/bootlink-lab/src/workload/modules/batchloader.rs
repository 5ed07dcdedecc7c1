//! The guest-side batch loader (`loader/` in the repository, small C):
//! built static with its own Makefile for the lab's initramfs, cached under
//! `<cache>/loader/<sha256 of its sources>/bl-modload`, and its output read
//! back.

use std::path::PathBuf;

use bootlink::error::Result;

/// The loader's source directory in this repository.
pub fn source_dir() -> PathBuf {
    bootlink::cbuild::source_dir("loader")
}

/// The static `bl-modload`, built on first use for each version of its sources.
pub fn binary() -> Result<PathBuf> {
    bootlink::cbuild::build("loader", "bl-modload", "building the batch loader (loader/)")
}

/// The static `bl-modload` for a guest of `arch`: the host's build, or a
/// cross build (`aarch64-linux-gnu-gcc`) for arm64.
pub fn binary_for(arch: crate::lab::arch::Arch) -> Result<PathBuf> {
    match arch {
        crate::lab::arch::Arch::X86_64 => binary(),
        crate::lab::arch::Arch::Arm64 => bootlink::cbuild::build_cross(
            "loader",
            "bl-modload",
            "building the batch loader (loader/) for arm64",
            arch.debian().cross_compile(),
            arch.debian().machine(),
        ),
    }
}

/// One `LOAD` line of the loader's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub name: String,
    pub worker: i32,
    pub start_us: f64,
    pub end_us: f64,
    pub result: String,
    pub errno: i32,
    /// `kernel`, `user` or `none`: who decompressed the module.
    pub decompress: String,
}

/// The loader's report: its `LOAD` lines and the `SUMMARY` fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub outcomes: Vec<Outcome>,
    pub summary: Vec<(String, i64)>,
}

impl Report {
    pub fn summary(&self, key: &str) -> Option<i64> {
        self.summary.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

fn fields(line: &str) -> impl Iterator<Item = (&str, &str)> {
    line.split_whitespace().filter_map(|w| w.split_once('='))
}

/// Read the loader's stdout (other lines are skipped).
pub fn parse(out: &str) -> Report {
    let mut r = Report::default();
    for line in out.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("LOAD ") {
            let mut o = Outcome {
                name: String::new(),
                worker: -1,
                start_us: 0.0,
                end_us: 0.0,
                result: String::new(),
                errno: 0,
                decompress: String::new(),
            };
            for (k, v) in fields(rest) {
                match k {
                    "name" => o.name = v.to_string(),
                    "worker" => o.worker = v.parse().unwrap_or(-1),
                    "start_us" => o.start_us = v.parse().unwrap_or(0.0),
                    "end_us" => o.end_us = v.parse().unwrap_or(0.0),
                    "result" => o.result = v.to_string(),
                    "errno" => o.errno = v.parse().unwrap_or(0),
                    "decompress" => o.decompress = v.to_string(),
                    _ => {}
                }
            }
            if !o.name.is_empty() {
                r.outcomes.push(o);
            }
        } else if let Some(rest) = line.strip_prefix("SUMMARY ") {
            r.summary = fields(rest).filter_map(|(k, v)| v.parse().ok().map(|v| (k.to_string(), v))).collect();
        }
    }
    r
}

/// The batch loader's report as the run records it.
pub fn result(text: &str) -> crate::workload::modules::record::LoaderResult {
    let report = parse(text);
    let exit = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("LOADER-EXIT "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1);
    let mut seen: Vec<&str> = Vec::new();
    let mut duplicates = Vec::new();
    for o in report.outcomes.iter().filter(|o| o.worker >= 0) {
        if seen.contains(&o.name.as_str()) {
            duplicates.push(o.name.clone());
        }
        seen.push(&o.name);
    }
    crate::workload::modules::record::LoaderResult {
        kind: "batch".into(),
        workers: report.summary("workers").unwrap_or(0) as u32,
        exit,
        wall_us: report.summary("wall_us").unwrap_or(0) as f64,
        load_calls: report.outcomes.iter().filter(|o| o.worker >= 0).count() as u64,
        duplicates,
        not_loaded: report
            .outcomes
            .iter()
            .filter(|o| o.result != "loaded")
            .map(|o| (o.name.clone(), o.result.clone()))
            .collect(),
        decompressed_by_kernel: decompressed_by(&report, "kernel"),
        decompressed_by_user: decompressed_by(&report, "user"),
    }
}

/// Modules loaded after `by` decompressed them (a refused attempt is not
/// a decompression).
fn decompressed_by(report: &Report, by: &str) -> u64 {
    report.outcomes.iter().filter(|o| o.decompress == by && o.result == "loaded").count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loader_report_parses() {
        let r = parse(
            "noise\nLOAD name=crc16 worker=1 start_us=10 end_us=25 result=loaded errno=0 decompress=none\n\
             LOAD name=ext4 worker=-1 start_us=0 end_us=0 result=dep-failed errno=0 decompress=none cause=jbd2\n\
             SUMMARY modules=2 loaded=1 dep-failed=1 workers=4 wall_us=99\n",
        );
        assert_eq!(r.outcomes.len(), 2);
        assert_eq!((r.outcomes[0].worker, r.outcomes[0].end_us, r.outcomes[0].result.as_str()), (1, 25.0, "loaded"));
        assert_eq!(r.outcomes[1].result, "dep-failed");
        assert_eq!((r.outcomes[0].decompress.as_str(), r.outcomes[1].decompress.as_str()), ("none", "none"));
        assert_eq!((r.summary("workers"), r.summary("wall_us"), r.summary("x")), (Some(4), Some(99), None));
    }
}
