//! The report's section for function reordering on emulated flash
//! ([`crate::workload::order::table`]): the before/after table and the block size x
//! readahead grid as a plot (cold-start wall time of both builds per cell,
//! major faults written on the bars).

use std::fmt::Write;

use crate::chart::svg::esc;
use crate::chart::svg::userspace::{StartBar, UI, mode_colors, panel, program_name};
use crate::run::results::Run;
use crate::workload::order::record::{OrderStart, OrderStarts};
use crate::workload::order::table::{OrderTable, headline, tables};
use bootlink::table::ms;

const UNORDERED: &str = "#d9822b";
const REORDERED: &str = "#2b8a3e";
const BOLT: &str = "#1c7ed6";
const QEMU: &str = "#7048e8";
/// The function order with the data order (issue 29), alone and under BOLT.
const DATA: &str = "#0ca678";
const BOLT_DATA: &str = "#0b7285";
/// GCC's profile-guided build, alone and with both orders.
const PGO: &str = "#c2255c";
const PGO_DATA: &str = "#862e9c";

fn color(build: &str) -> &'static str {
    match build {
        "bolt" => BOLT,
        "qemu" => QEMU,
        "reordered+data" => DATA,
        "bolt+data" => BOLT_DATA,
        "pgo" => PGO,
        "pgo+data" => PGO_DATA,
        _ => REORDERED,
    }
}

fn ui(us: f64) -> String {
    if us.is_finite() { format!("{} ms", ms(us)) } else { "–".into() }
}

/// The section, or nothing without reordering starts.
pub fn html(o: &mut String, runs: &[Run]) {
    let tables = tables(runs);
    if tables.is_empty() {
        return;
    }
    o.push_str(r#"<section id="order"><h2>Function reordering on emulated flash</h2>"#);
    o.push_str(r#"<p class="note">A program as linked and relinked with its startup order (the synthetic program of `bootlink order synth`: 10,000 small functions, 1,000 run at startup; or CPython 3.11 from Debian's source, with BOLT's rewrite as a third build), started cold (page cache dropped, SquashFS mounted afresh) from a SquashFS image on a null_blk device whose delays run on guest timers. Wall: guest time between kernel log markers around the start. Time to UI: from the start marker to the program's first output line (a kernel log marker written by the shell reading its output). Faults: the starting shell's cmajflt/cminflt. Read: the device's /sys/block/DEV/stat. Medians over all starts.</p>"#);
    for t in &tables {
        let _ = write!(
            o,
            r#"<h3>{} ({} timing, {} boot(s))</h3><p class="note"><code>{}</code></p>"#,
            esc(&t.label),
            esc(&t.timing),
            t.repetitions,
            esc(&t.command)
        );
        o.push_str(r#"<table class="userspace order"><tr><th>block</th><th>readahead</th><th>build</th><th>unordered</th><th>build</th><th>faster</th><th>time to UI</th><th>major faults</th><th>minor faults</th><th>KiB read</th><th>requests</th></tr>"#);
        for c in &t.cells {
            let (u, r) = (&c.unordered, &c.reordered);
            let _ = write!(
                o,
                r#"<tr data-order-cell="{}k/ra{}/{}"><td>{}k</td><td>{} KiB</td><td>{}</td><td>{} ms</td><td>{} ms</td><td>{:.2}x</td><td>{} → {}</td><td>{:.0} → {:.0}</td><td>{:.0} → {:.0}</td><td>{:.0} → {:.0}</td><td>{:.0} → {:.0}</td></tr>"#,
                c.block_kib,
                c.readahead_kib,
                esc(&c.build),
                c.block_kib,
                c.readahead_kib,
                esc(&c.build),
                ms(u.wall_us.median),
                ms(r.wall_us.median),
                c.speedup,
                ui(u.ui_us),
                ui(r.ui_us),
                u.major_faults,
                r.major_faults,
                u.minor_faults,
                r.minor_faults,
                u.read_bytes / 1024.0,
                r.read_bytes / 1024.0,
                u.read_requests,
                r.read_requests
            );
        }
        o.push_str("</table><ul class=\"note\">");
        for g in headline(t) {
            let _ = write!(o, "<li>{}</li>", esc(&g));
        }
        o.push_str("</ul>");
        o.push_str(&grid_svg(t));
    }
    o.push_str("</section>");
}

/// The grid as a bar plot: one group per (block size, readahead) cell, a
/// bar per build, height the median cold-start wall time.
pub(crate) fn grid_svg(t: &OrderTable) -> String {
    let n = t.cells.len().max(1) as f64;
    // At least 40 px per cell: python's six builds make 30 of them.
    // Each cell's label slanted under its bars (speedup first, then block,
    // readahead and build), the legend below them.
    let (w, h, left, top, bottom) = ((70.0 + 40.0 * n).max(1000.0), 370.0, 120.0, 20.0, 150.0);
    let max = t.cells.iter().map(|c| c.unordered.wall_us.median.max(c.reordered.wall_us.median)).fold(1.0, f64::max);
    let group = (w - left - 10.0) / n;
    let bar = (group - 16.0) / 2.0;
    let y = |us: f64| top + (h - top - bottom) * (1.0 - us / max);
    let mut s = format!(
        r#"<svg class="order-grid" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="grey"/><text x="4" y="{}" >{} ms</text><text x="4" y="{}">0</text>"#,
        h - bottom,
        w - 10.0,
        h - bottom,
        top + 4.0,
        ms(max),
        h - bottom
    );
    for (i, c) in t.cells.iter().enumerate() {
        let x0 = left + i as f64 * group + 8.0;
        for (j, (side, color, name)) in
            [(&c.unordered, UNORDERED, "unordered"), (&c.reordered, color(&c.build), c.build.as_str())]
                .into_iter()
                .enumerate()
        {
            let x = x0 + j as f64 * bar;
            let top_y = y(side.wall_us.median);
            let _ = write!(
                s,
                r#"<rect data-order-bar="{name}/{}k/ra{}" x="{x:.1}" y="{top_y:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{name}, {}k blocks, readahead {} KiB: {} ms, {:.0} major faults, {:.0} KiB read</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle">{:.0}</text>"#,
                c.block_kib,
                c.readahead_kib,
                bar - 2.0,
                (h - bottom - top_y).max(0.5),
                c.block_kib,
                c.readahead_kib,
                ms(side.wall_us.median),
                side.major_faults,
                side.read_bytes / 1024.0,
                x + bar / 2.0 - 1.0,
                top_y - 3.0,
                side.major_faults
            );
        }
        let _ = write!(
            s,
            r#"<text x="{lx:.1}" y="{ly}" text-anchor="end" transform="rotate(-35 {lx:.1} {ly})">{}k, ra {}{}</text><text x="{:.1}" y="{}" text-anchor="middle">{:.2}x</text>"#,
            c.block_kib,
            c.readahead_kib,
            if c.build == "reordered" { String::new() } else { format!(", {}", c.build) },
            x0 + bar,
            h - bottom + 12.0,
            c.speedup,
            lx = x0 + bar + 4.0,
            ly = h - bottom + 26.0,
        );
    }
    let mut x = left;
    for (color, label) in [
        (UNORDERED, "unordered"),
        (REORDERED, "reordered"),
        (QEMU, "ordered from QEMU"),
        (DATA, "+ data order"),
        (BOLT, "BOLT"),
        (BOLT_DATA, "BOLT + data order"),
    ] {
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{color}"/><text x="{}" y="{}">{label}</text>"#,
            h - 14.0,
            x + 14.0,
            h - 5.0
        );
        x += 24.0 + 6.5 * label.len() as f64;
    }
    let _ = write!(s, r#"<text x="{x}" y="{}">(wall time; numbers on bars: major faults)</text></svg>"#, h - 5.0);
    s
}

impl StartBar for OrderStart {
    fn ui_us(&self) -> Option<f64> {
        self.ui_us
    }
    fn figures(&self, t: &mut String) {
        if let Some(u) = self.ui_us {
            let _ = write!(t, "\ntime to UI (first output line): {} ms", ms(u));
        }
    }
}

/// Legend entries of reordering's cold starts: one bar per start, no
/// loader spans, the time-to-UI mark.
pub(crate) fn legend_order(u: &OrderStarts) -> Vec<(String, &'static str)> {
    let mut out = vec![("cold start (marker to exit)".to_string(), mode_colors("")[0])];
    if u.starts.iter().any(|s| s.ui_us.is_some()) {
        out.push(("time to UI (first output line)".to_string(), UI));
    }
    out
}

/// Reordering's panel; returns the new y.
pub(crate) fn panel_order(o: &mut String, y: f64, u: &OrderStarts) -> f64 {
    let program = program_name(&u.command);
    let title = "User space: cold starts from emulated flash, unordered vs reordered (SquashFS block / readahead KiB)";
    panel(o, y, title, "mark: time to UI (the first output line)", &program, &u.starts)
}
