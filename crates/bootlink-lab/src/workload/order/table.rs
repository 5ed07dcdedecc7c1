//! Function reordering's cold starts from emulated flash
//! (the lab's `order:` variants): per series, one row per (SquashFS block size,
//! readahead, build) cell with the unordered build and another (the
//! reordered one; for python also BOLT's) side by side (medians over every
//! start of every repetition), and the headline comparisons under them.

use serde::Serialize;

use crate::run::model::{Med, series};
use crate::run::results::{OrderStart, Run};
use bootlink::table::{Table, ms};

/// One build in one cell.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub starts: usize,
    pub wall_us: Med,
    pub major_faults: f64,
    pub minor_faults: f64,
    pub read_bytes: f64,
    pub read_requests: f64,
    /// Time to UI (from the start marker to the first output line), median; NaN when not marked.
    pub ui_us: f64,
    pub failed: usize,
}

/// One (block size, readahead, build) cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub block_kib: u32,
    pub readahead_kib: u32,
    /// The build compared with the unordered one: `reordered` or `bolt`.
    pub build: String,
    pub unordered: Side,
    /// That build's side.
    pub reordered: Side,
    /// Unordered wall / reordered wall (medians).
    pub speedup: f64,
    /// Unordered major faults / reordered (medians; None when reordered has none).
    pub fault_ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OrderTable {
    pub label: String,
    pub command: String,
    pub timing: String,
    pub repetitions: usize,
    pub cells: Vec<Cell>,
    /// Every start of the series printed what the first printed.
    pub output_identical: bool,
}

/// (build, block KiB, readahead KiB) of a mode `build/64k/ra0`.
pub(crate) fn split_mode(mode: &str) -> Option<(&str, u32, u32)> {
    let mut w = mode.split('/');
    let build = w.next()?;
    let block = w.next()?.strip_suffix('k')?.parse().ok()?;
    let ra = w.next()?.strip_prefix("ra")?.parse().ok()?;
    Some((build, block, ra))
}

fn side(st: &[&OrderStart]) -> Option<Side> {
    let med = |f: &dyn Fn(&OrderStart) -> Option<u64>| {
        Med::of(st.iter().filter_map(|s| f(s)).map(|v| v as f64)).map(|m| m.median).unwrap_or(f64::NAN)
    };
    Some(Side {
        starts: st.len(),
        wall_us: Med::of(st.iter().map(|s| s.duration_us))?,
        major_faults: med(&|s| s.major_faults),
        minor_faults: med(&|s| s.minor_faults),
        read_bytes: med(&|s| s.read_bytes),
        read_requests: med(&|s| s.read_requests),
        ui_us: Med::of(st.iter().filter_map(|s| s.ui_us)).map(|m| m.median).unwrap_or(f64::NAN),
        failed: st.iter().filter(|s| s.exit != 0).count(),
    })
}

/// The tables of every series with reordering starts.
pub fn tables(runs: &[Run]) -> Vec<OrderTable> {
    let mut out = Vec::new();
    for s in series(runs) {
        let us: Vec<_> = s.variant.repetitions.iter().filter_map(|r| r.order()).collect();
        let Some(first) = us.first() else { continue };
        let all: Vec<&OrderStart> = us.iter().flat_map(|u| &u.starts).filter(|x| x.duration_us > 0.0).collect();
        // Builds in the order they were started, then cells by block size
        // and readahead.
        let mut builds: Vec<&str> = Vec::new();
        let mut keys: Vec<(u32, u32, usize)> = Vec::new();
        for x in &all {
            if let Some((build, b, ra)) = split_mode(&x.mode)
                && build != "unordered"
            {
                let i = builds.iter().position(|n| *n == build).unwrap_or_else(|| {
                    builds.push(build);
                    builds.len() - 1
                });
                if !keys.contains(&(b, ra, i)) {
                    keys.push((b, ra, i));
                }
            }
        }
        keys.sort();
        let cells = keys
            .iter()
            .filter_map(|&(b, ra, i)| {
                let of = |build: &str| -> Vec<&OrderStart> {
                    all.iter().copied().filter(|x| split_mode(&x.mode) == Some((build, b, ra))).collect()
                };
                let unordered = side(&of("unordered"))?;
                let reordered = side(&of(builds[i]))?;
                let speedup = unordered.wall_us.median / reordered.wall_us.median;
                let fault_ratio =
                    (reordered.major_faults > 0.0).then(|| unordered.major_faults / reordered.major_faults);
                Some(Cell {
                    block_kib: b,
                    readahead_kib: ra,
                    build: builds[i].to_string(),
                    unordered,
                    reordered,
                    speedup,
                    fault_ratio,
                })
            })
            .collect();
        let output = all.first().map(|x| x.output.as_str());
        out.push(OrderTable {
            label: s.label.clone(),
            command: first.command.clone(),
            timing: s.run.timing.clone(),
            repetitions: us.len(),
            cells,
            output_identical: all.iter().all(|x| Some(x.output.as_str()) == output),
        });
    }
    out
}

fn n(v: f64) -> String {
    if v.is_finite() { format!("{}", v.round() as i64) } else { "-".into() }
}

fn ui(us: f64) -> String {
    if us.is_finite() { ms(us) } else { "-".into() }
}

fn kib(v: f64) -> String {
    if v.is_finite() { format!("{:.0}", v / 1024.0) } else { "-".into() }
}

/// The lines under the table: for the synthetic program the 64 KiB /
/// readahead-off cell (its speedup and major faults); for python (a
/// command starting `python`) every readahead-off cell's major faults and
/// speedup; then whether every start printed the same output.
pub fn headline(t: &OrderTable) -> Vec<String> {
    let mut out = Vec::new();
    if t.command.starts_with("python") {
        for c in t.cells.iter().filter(|c| c.readahead_kib == 0) {
            let (u, r) = (c.unordered.major_faults, c.reordered.major_faults);
            let fewer = 100.0 * (1.0 - r / u);
            out.push(format!(
                "{} {}k, readahead off: major faults {} -> {} ({fewer:.0} % fewer), {:.2}x faster",
                c.build,
                c.block_kib,
                n(u),
                n(r),
                c.speedup
            ));
        }
    } else {
        let at64: Vec<&Cell> = t.cells.iter().filter(|c| c.block_kib == 64 && c.readahead_kib == 0).collect();
        if at64.is_empty() {
            out.push(
                "no 64 KiB / readahead 0 cell measured (the 64 KiB comparison needs order:synth or synth-64k)".into(),
            );
        }
        // The reordered build as it always was, then every other build
        // (`reordered+data`: the data order too) with its name.
        for c in at64 {
            let who = if c.build == "reordered" { String::new() } else { format!("{}: ", c.build) };
            out.push(format!("{who}cold start 64 KiB blocks, readahead off: {:.2}x faster", c.speedup));
            match c.fault_ratio {
                Some(r) => out.push(format!(
                    "{who}major faults {} -> {}: {r:.1}x fewer",
                    n(c.unordered.major_faults),
                    n(c.reordered.major_faults)
                )),
                None => out.push(format!("{who}major faults {} -> 0", n(c.unordered.major_faults))),
            }
        }
    }
    out.push(format!("program output: {}", if t.output_identical { "identical in every start" } else { "DIFFERS" }));
    out
}

/// The tables as plain text (empty without reordering starts).
pub(crate) fn render_text(runs: &[Run]) -> String {
    let mut out = String::new();
    for t in tables(runs) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "Function reordering on emulated flash, {}: {}\n{} timing (guest time), cold starts (page cache dropped), medians over {} boot(s)\n",
            t.label, t.command, t.timing, t.repetitions
        ));
        let mut tab = Table::new(&[
            "block",
            "readahead",
            "build",
            "starts",
            "unordered ms",
            "build ms",
            "faster",
            "UI ms",
            "major faults",
            "minor faults",
            "KiB read",
            "requests",
        ]);
        for c in &t.cells {
            let (u, r) = (&c.unordered, &c.reordered);
            let failed = u.failed + r.failed;
            tab.row(vec![
                format!("{}k", c.block_kib),
                format!("{} KiB", c.readahead_kib),
                c.build.clone(),
                if failed > 0 {
                    format!("{}+{} ({failed} failed)", u.starts, r.starts)
                } else {
                    format!("{}+{}", u.starts, r.starts)
                },
                ms(u.wall_us.median),
                ms(r.wall_us.median),
                format!("{:.2}x", c.speedup),
                format!("{} -> {}", ui(u.ui_us), ui(r.ui_us)),
                format!("{} -> {}", n(u.major_faults), n(r.major_faults)),
                format!("{} -> {}", n(u.minor_faults), n(r.minor_faults)),
                format!("{} -> {}", kib(u.read_bytes), kib(r.read_bytes)),
                format!("{} -> {}", n(u.read_requests), n(r.read_requests)),
            ]);
        }
        out.push_str(&tab.render());
        for g in headline(&t) {
            out.push_str(&format!("  {g}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::results::{OrderStarts, Start, WorkloadResult};

    fn start(mode: &str, dur: f64, major: u64, bytes: u64) -> OrderStart {
        OrderStart {
            start: Start { mode: mode.into(), duration_us: dur, output: "checksum 1".into(), ..Default::default() },
            major_faults: Some(major),
            minor_faults: Some(100),
            read_bytes: Some(bytes),
            read_requests: Some(bytes / 4096),
            ui_us: Some(dur - 1000.0),
        }
    }

    #[test]
    fn cells_pair_the_builds_and_headline_the_64k_cell() {
        let starts = vec![
            start("unordered/64k/ra0", 600_000.0, 11, 300_000),
            start("reordered/64k/ra0", 120_000.0, 1, 60_000),
            start("unordered/4k/ra128", 400_000.0, 20, 200_000),
            start("reordered/4k/ra128", 200_000.0, 5, 100_000),
            start("reordered+data/64k/ra0", 100_000.0, 0, 30_000),
        ];
        let u = WorkloadResult::Order(OrderStarts { command: "a vs b".into(), starts });
        let mut run = crate::workload::ddlink::table::tests::run();
        run.variants[0].repetitions.truncate(1);
        run.variants[0].repetitions[0].workloads = vec![u];
        let t = &tables(std::slice::from_ref(&run))[0];
        assert_eq!(t.cells.len(), 3);
        assert_eq!((t.cells[0].block_kib, t.cells[0].readahead_kib), (4, 128));
        assert_eq!(t.cells[2].build, "reordered+data");
        assert_eq!(t.cells[1].speedup, 5.0);
        assert_eq!(t.cells[1].fault_ratio, Some(11.0));
        let text = render_text(std::slice::from_ref(&run));
        assert!(text.contains("cold start 64 KiB blocks, readahead off: 5.00x faster\n"), "{text}");
        assert!(text.contains("major faults 11 -> 1: 11.0x fewer\n"), "{text}");
        assert!(text.contains("reordered+data: cold start 64 KiB blocks, readahead off: 6.00x faster\n"), "{text}");
        assert!(text.contains("reordered+data: major faults 11 -> 0\n"), "{text}");
        assert!(!text.contains("goal"), "{text}");
        assert!(text.contains("| 11 -> 1") || text.contains("11 -> 1"), "{text}");
        // Time to UI beside the wall time (medians, ms).
        assert_eq!((t.cells[1].unordered.ui_us, t.cells[1].reordered.ui_us), (599_000.0, 119_000.0));
        assert!(text.contains("UI ms") && text.contains("599 -> 119"), "{text}");
        assert_eq!(split_mode("reordered/128k/ra0"), Some(("reordered", 128, 0)));
    }

    #[test]
    fn python_cells_compare_each_build_with_the_unordered_one() {
        let starts = vec![
            start("unordered/4k/ra0", 900_000.0, 400, 1_600_000),
            start("reordered/4k/ra0", 600_000.0, 260, 1_000_000),
            start("bolt/4k/ra0", 500_000.0, 200, 800_000),
        ];
        let u = WorkloadResult::Order(OrderStarts { command: "python -c print(42): ...".into(), starts });
        let mut run = crate::workload::ddlink::table::tests::run();
        run.variants[0].repetitions.truncate(1);
        run.variants[0].repetitions[0].workloads = vec![u];
        let t = &tables(std::slice::from_ref(&run))[0];
        assert_eq!(t.cells.iter().map(|c| c.build.as_str()).collect::<Vec<_>>(), ["reordered", "bolt"]);
        assert_eq!(t.cells[1].fault_ratio, Some(2.0));
        let g = headline(t).join("\n");
        assert!(g.contains("reordered 4k, readahead off: major faults 400 -> 260 (35 % fewer), 1.50x faster"), "{g}");
        assert!(g.contains("bolt 4k, readahead off: major faults 400 -> 200 (50 % fewer"), "{g}");
    }
}
