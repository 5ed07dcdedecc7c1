//! The recommendation as a chart: time to /init against the storage's
//! throughput (log scale) at its latency, one line per image, the
//! throughputs where the best image changes marked, and the storage asked
//! about.

use std::fmt::Write;

use super::{Curve, Range, Report, Storage};
use crate::chart::esc;

const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// The throughputs drawn (MiB/s): a slow NOR or SPI flash to fast eMMC.
const FROM_MIB_S: f64 = 0.25;
const TO_MIB_S: f64 = 1024.0;
const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"];

pub fn chart(r: &Report) -> String {
    let curves: Vec<Curve> = r.candidates.iter().map(|c| c.curve()).collect();
    let title = format!(
        "Reset to /init with the image read from storage ({} us per 4 KiB request): kernel {}",
        r.storage.latency_us, r.kernel_release
    );
    draw(&title, "reset to /init (ms, log scale)", &curves, &r.envelope, r.storage)
}

/// The module set's chart: its files read from storage and loaded, one
/// line per way of storing them; None when the run loaded no module set.
pub fn module_chart(r: &Report) -> Option<String> {
    if r.modules.is_empty() {
        return None;
    }
    let curves: Vec<Curve> = r.modules.iter().map(|c| c.curve()).collect();
    let title = format!(
        "The module set read from storage ({} us per 4 KiB request) and loaded: kernel {}",
        r.storage.latency_us, r.kernel_release
    );
    Some(draw(&title, "read and load the set (ms, log scale)", &curves, &r.modules_envelope, r.storage))
}

fn draw(title: &str, y_label: &str, curves: &[Curve], envelope: &[Range], storage: Storage) -> String {
    let lat = storage.latency_us;
    let total_at = |c: &Curve, mib_s: f64| c.total_us(Storage { mib_s, latency_us: lat }) / 1000.0;
    let samples: Vec<f64> = (0..=120).map(|i| FROM_MIB_S * (TO_MIB_S / FROM_MIB_S).powf(i as f64 / 120.0)).collect();
    // y (log scale): from below the fastest image at the fastest
    // throughput drawn to half again the best image at the slowest.
    let best_slowest = curves.iter().map(|c| total_at(c, FROM_MIB_S)).fold(f64::INFINITY, f64::min);
    let best_fastest = curves.iter().map(|c| total_at(c, TO_MIB_S)).fold(f64::INFINITY, f64::min);
    let (y_min, y_max) = (nice_down(best_fastest * 0.8), best_slowest * 1.5);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x_of = |mib_s: f64| LEFT + pw * (mib_s / FROM_MIB_S).ln() / (TO_MIB_S / FROM_MIB_S).ln();
    let y_of = |ms: f64| {
        let f = (ms.max(y_min * 0.9) / y_min).ln() / (y_max / y_min).ln();
        TOP + ph * (1.0 - f.min(1.05))
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(o, r#"<text x="{LEFT}" y="22" font-size="14">{}</text>"#, esc(title));
    let _ = writeln!(o, r#"<clipPath id="plot"><rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}"/></clipPath>"#);
    // axes and grid
    let mut t = FROM_MIB_S;
    while t <= TO_MIB_S * 1.0001 {
        let x = x_of(t);
        let _ = writeln!(o, r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/>"##, TOP + ph);
        let label = if t < 1.0 { format!("{t}") } else { format!("{t:.0}") };
        let _ = writeln!(o, r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#, TOP + ph + 16.0);
        t *= 4.0;
    }
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">storage throughput (MiB/s, log scale)</text>"#,
        LEFT + pw / 2.0,
        H - 10.0
    );
    for v in log_ticks(y_min, y_max) {
        let y = y_of(v);
        let _ = writeln!(o, r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##, LEFT + pw);
        let _ = writeln!(o, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{v:.0}</text>"#, LEFT - 6.0, y + 4.0);
    }
    let _ = writeln!(
        o,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{y_label}</text>"#,
        TOP + ph / 2.0
    );
    // where the best image changes
    for g in envelope.iter().filter(|g| g.from_mib_s > 0.0) {
        if g.from_mib_s < FROM_MIB_S || g.from_mib_s > TO_MIB_S {
            continue;
        }
        let x = x_of(g.from_mib_s);
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#444" stroke-dasharray="4 3"/>"##,
            TOP + ph
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" transform="rotate(-90 {:.1} {:.1})">{} from {:.2} MiB/s</text>"#,
            x - 3.0,
            TOP + ph - 4.0,
            x - 3.0,
            TOP + ph - 4.0,
            esc(&g.variant),
            g.from_mib_s
        );
    }
    // the storage asked about
    if (FROM_MIB_S..=TO_MIB_S).contains(&storage.mib_s) {
        let x = x_of(storage.mib_s);
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#000" stroke-width="2"/>"##,
            TOP + ph
        );
        let _ = writeln!(o, r#"<text x="{:.1}" y="{:.1}">{} MiB/s</text>"#, x + 4.0, TOP + 12.0, storage.mib_s);
    }
    // one line per image, legend at the right
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> =
            samples.iter().map(|&s| format!("{:.1},{:.1}", x_of(s), y_of(total_at(c, s)))).collect();
        let _ = writeln!(
            o,
            r#"<polyline clip-path="url(#plot)" fill="none" stroke="{color}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            points.join(" "),
            esc(&c.name)
        );
        let ly = TOP + 14.0 + i as f64 * 18.0;
        let lx = LEFT + pw + 12.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/>"#,
            lx + 18.0
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}">{} ({:.1} MB)</text>"#,
            lx + 24.0,
            ly + 4.0,
            esc(&c.name),
            c.bytes as f64 / 1e6
        );
    }
    o.push_str("</svg>\n");
    o
}

/// The 1-2-5 value at or below `v` (ms).
fn nice_down(v: f64) -> f64 {
    let step = 10f64.powf(v.max(1.0).log10().floor());
    [5.0, 2.0, 1.0].iter().map(|m| m * step).find(|t| *t <= v).unwrap_or(step)
}

/// 1-2-5 ticks from `lo` up to `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.max(1.0).log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = m * decade;
            if t >= lo && t <= hi {
                out.push(t);
            }
        }
        decade *= 10.0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ticks() {
        assert_eq!(nice_down(1234.0), 1000.0);
        assert_eq!(nice_down(450.0), 200.0);
        assert_eq!(nice_down(600.0), 500.0);
        assert_eq!(log_ticks(200.0, 3000.0), [200.0, 500.0, 1000.0, 2000.0]);
    }
}
