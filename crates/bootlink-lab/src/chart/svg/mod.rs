//! The SVG pieces: colours, time scales and axes, the timeline (initcalls
//! and module loads, each module's bar split by phase) and the per-module
//! stacked phase bars. Everything is plain SVG with `<title>` tooltips.

use std::borrow::Cow;
use std::fmt::Write;

use crate::run::model::OTHER;

/// Width of every chart, in CSS pixels.
pub(crate) const WIDTH: f64 = 1200.0;
/// Colour of built-in initcalls.
pub(crate) const BUILTIN: &str = "#5b7083";
const MUTED: &str = "#616e7c";
const GRID: &str = "#e4e7eb";

/// The shade of `step`, by its place among a phase's `steps`.
fn shade(step: &str, steps: &[&str], shades: &[&'static str]) -> &'static str {
    let i = steps.iter().position(|s| *s == step).unwrap_or(0);
    shades[i % shades.len()]
}

/// Fill colour of a phase.
pub(crate) fn phase_color(phase: &str) -> &'static str {
    match phase {
        "read" => "#0072b2",
        "decompress" => "#56b4e9",
        "signature" => "#e69f00",
        "layout" => "#009e73",
        "symbols" => "#d55e00",
        "relocation" => "#cc79a7",
        "finalize" => "#6a5acd",
        "init" => "#e3c02c",
        OTHER => "#c5cbd3",
        // a phase's links: shades of its colour, in kernel order
        p if let Some(step) = p.strip_prefix("finalize: ") => shade(
            step,
            crate::run::results::FINALIZE_STEPS,
            &[
                "#2e2270", "#3f3096", "#4c3da8", "#5a4bb8", "#6a5acd", "#7466d2", "#7d6fd6", "#8779da", "#9083de",
                "#a398e6", "#b6adee", "#c9c2f5",
            ],
        ),
        p if let Some(step) = p.strip_prefix("init: ") => shade(
            step,
            crate::run::results::INIT_STEPS,
            &["#b8950f", "#cfa919", "#e3c02c", "#e8cb4f", "#edd672", "#f1df8f", "#f5e8ac", "#f9f1c9"],
        ),
        _ => {
            const EXTRA: [&str; 5] = ["#8c564b", "#17becf", "#bcbd22", "#7f7f7f", "#393b79"];
            let h = phase.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            EXTRA[h % EXTRA.len()]
        }
    }
}

/// What a phase means, for legends and tooltips.
pub(crate) fn phase_title(phase: &str) -> String {
    match phase {
        OTHER => "other (not in any phase)".into(),
        p => p.to_string(),
    }
}

/// Text for HTML and SVG: `& < > " '` escaped, control characters dropped.
pub(crate) fn esc(s: &str) -> Cow<'_, str> {
    if !s.bytes().any(|b| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'') || b < 0x20 && b != b'\n' && b != b'\t') {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\n' | '\t' => o.push(c),
            c if (c as u32) < 0x20 => {}
            c => o.push(c),
        }
    }
    Cow::Owned(o)
}

pub use bootlink::table::ms;

/// Rough width of text in the charts' font (DejaVu Sans is wide).
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.61
}

/// Cut `s` to fit `px` at `size`, with an ellipsis.
pub(crate) fn fit(s: &str, px: f64, size: f64) -> String {
    let max = (px / (size * 0.61)).floor() as usize;
    if s.chars().count() <= max {
        s.to_string()
    } else if max <= 1 {
        String::new()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// A linear map from microseconds to x.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub t0: f64,
    pub t1: f64,
    pub x0: f64,
    pub x1: f64,
}

impl Scale {
    pub fn x(&self, t: f64) -> f64 {
        if self.t1 <= self.t0 {
            return self.x0;
        }
        self.x0 + (t - self.t0) / (self.t1 - self.t0) * (self.x1 - self.x0)
    }
    pub(crate) fn px_per_us(&self) -> f64 {
        if self.t1 <= self.t0 { 0.0 } else { (self.x1 - self.x0) / (self.t1 - self.t0) }
    }
}

/// Lanes filled first-fit: each interval goes into the lowest-numbered
/// lane whose last interval ended by its start. A tree of the lanes' end
/// times (the least of each subtree) finds that lane in O(log lanes), so
/// any number of overlapping intervals packs in O(n log n), where a scan
/// of the lanes made n overlapping ones O(n²).
pub(crate) struct FirstFit {
    /// Leaves from `size`: lane k's end at `size + k` (+inf: no lane yet).
    tree: Vec<f64>,
    size: usize,
    lanes: usize,
}

impl FirstFit {
    /// Room for up to `most` lanes.
    pub(crate) fn new(most: usize) -> FirstFit {
        let size = most.max(1).next_power_of_two();
        FirstFit { tree: vec![f64::INFINITY; 2 * size], size, lanes: 0 }
    }

    pub(crate) fn lanes(&self) -> usize {
        self.lanes
    }

    /// The lowest lane whose end is at most `t`.
    pub(crate) fn free_at(&self, t: f64) -> Option<usize> {
        if self.tree[1] > t {
            return None;
        }
        let mut i = 1;
        while i < self.size {
            i = if self.tree[2 * i] <= t { 2 * i } else { 2 * i + 1 };
        }
        Some(i - self.size)
    }

    /// A new lane (none of its own yet: free at any time); None when all
    /// `most` are taken.
    pub(crate) fn open(&mut self) -> Option<usize> {
        (self.lanes < self.size).then(|| {
            self.lanes += 1;
            self.set(self.lanes - 1, f64::NEG_INFINITY);
            self.lanes - 1
        })
    }

    #[cfg(test)]
    pub(crate) fn end(&self, lane: usize) -> f64 {
        self.tree[self.size + lane]
    }

    pub(crate) fn set(&mut self, lane: usize, end: f64) {
        let mut i = self.size + lane;
        self.tree[i] = end;
        while i > 1 {
            i /= 2;
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
    }
}

/// Tick positions (µs) on a 1-2-5 step in ms, and the decimals labels need.
pub(crate) fn ticks(t0: f64, t1: f64, target: usize) -> (Vec<f64>, usize) {
    let span_ms = ((t1 - t0) / 1000.0).max(1e-6);
    let raw = span_ms / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let decimals = if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize };
    let first = (t0 / 1000.0 / step).ceil() as i64;
    let last = (t1 / 1000.0 / step + 1e-9).floor() as i64;
    let v = (first..=last).map(|k| k as f64 * step * 1000.0).collect();
    (v, decimals)
}

/// A domain that ends on a tick: [0, nice(max)].
fn nice_max(max_us: f64) -> f64 {
    if max_us <= 0.0 {
        return 1000.0;
    }
    let (t, _) = ticks(0.0, max_us, 6);
    let step = if t.len() > 1 { t[1] - t[0] } else { max_us };
    (max_us / step).ceil() * step
}

/// A horizontal axis at `y`: line, ticks and labels (above for the top
/// axis, below otherwise), gridlines down to `grid_to`.
pub(crate) fn axis(o: &mut String, s: &Scale, y: f64, top: bool, grid: Option<(f64, f64)>) {
    let (ts, dec) = ticks(s.t0, s.t1, ((s.x1 - s.x0) / 90.0).round().max(2.0) as usize);
    let _ = write!(o, r#"<g class="axis">"#);
    if let Some((g0, g1)) = grid {
        for t in &ts {
            let x = s.x(*t);
            let _ = write!(o, r#"<line x1="{x:.1}" y1="{g0:.1}" x2="{x:.1}" y2="{g1:.1}" stroke="{GRID}"/>"#);
        }
    }
    let _ = write!(o, r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{MUTED}"/>"#, s.x0, s.x1);
    for t in &ts {
        let x = s.x(*t);
        let (y2, ty) = if top { (y - 5.0, y - 8.0) } else { (y + 5.0, y + 17.0) };
        let label = format!("{:.*}", dec, t / 1000.0);
        let _ = write!(
            o,
            r#"<line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{y2:.1}" stroke="{MUTED}"/><text class="tick" x="{x:.1}" y="{ty:.1}" text-anchor="middle">{label}</text>"#
        );
    }
    o.push_str("</g>");
}

fn axis_title(o: &mut String, x: f64, y: f64, text: &str) {
    let _ = write!(o, r#"<text class="axis-label" x="{x:.1}" y="{y:.1}" text-anchor="middle">{}</text>"#, esc(text));
}

/// A row of colour swatches; wraps at the chart's width. Returns the
/// height used.
pub fn legend(o: &mut String, x0: f64, y: f64, entries: &[(String, &str)]) -> f64 {
    let mut x = x0;
    let mut row = 0.0;
    o.push_str(r#"<g class="legend">"#);
    for (label, color) in entries {
        let w = 14.0 + 6.0 + text_width(label, 12.0) + 18.0;
        if x + w > WIDTH - 10.0 && x > x0 {
            x = x0;
            row += 20.0;
        }
        let yy = y + row;
        let _ = write!(
            o,
            r#"<rect x="{x:.1}" y="{:.1}" width="14" height="12" rx="2" fill="{color}"/><text x="{:.1}" y="{:.1}" class="legend-text">{}</text>"#,
            yy - 10.0,
            x + 20.0,
            yy,
            esc(label)
        );
        x += w;
    }
    o.push_str("</g>");
    row + 20.0
}

pub(crate) const GUTTER: f64 = 118.0;
pub(crate) const RIGHT: f64 = 90.0;
/// Detail rows shown per timeline panel.
pub(crate) const DETAIL_INITCALLS: usize = 30;
pub(crate) const DETAIL_MODULES: usize = 60;

mod bars;
mod panel;
mod timeline;
pub mod userspace;

pub use bars::module_bars;
pub use timeline::*;

/// Styles shared by all charts (inside the SVG, so a standalone file
/// looks the same).
pub(crate) const STYLE: &str = concat!(
    "text{font-family:'DejaVu Sans','Segoe UI',Roboto,Helvetica,Arial,sans-serif;fill:#1f2933}",
    ".chart-title{font-size:16px;font-weight:bold}",
    ".panel-title{font-size:13px;font-weight:bold}",
    ".note{font-size:11px;fill:#616e7c}",
    ".tick{font-size:10px;fill:#616e7c}",
    ".axis-label{font-size:12px;fill:#3e4c59}",
    ".legend-text{font-size:12px}",
    ".lane-label{font-size:11px;fill:#3e4c59}",
    ".bar-label{font-size:11px}",
    ".bar-label.inside{fill:#fff}",
    ".row-label{font-size:12px}",
    ".series-label{font-size:11px;fill:#616e7c}",
    ".value{font-size:11px;fill:#3e4c59}",
    ".marker-label{font-size:10px;fill:#9b2c2c}",
    "rect.seg{stroke:#fff;stroke-width:0.5}",
    "g.module-bar:hover rect,g.tl-bar:hover rect,g.tl-user:hover rect,g.tl-detail:hover rect,rect.tl-bar:hover,rect.tl-detail:hover,rect.tl-group:hover{opacity:0.75}"
);

pub(crate) fn wrap(body: &str, height: f64, class: &str, title: &str) -> String {
    let h = height.ceil();
    let mut o = String::with_capacity(body.len() + 1024);
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart {class}" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" role="img" aria-label="{}">"#,
        esc(title)
    );
    o.push_str(body);
    o.push_str("</svg>");
    o
}

/// Several SVG charts stacked into one standalone SVG document.
pub fn stack(title: &str, parts: &[String]) -> String {
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let mut h = 0.0;
    let mut inner = String::new();
    for p in parts {
        let ph = p
            .split_once("height=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .and_then(|(v, _)| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        let _ = write!(inner, r#"<g transform="translate(0 {h})">{p}</g>"#);
        h += ph + 10.0;
    }
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}"><title>{}</title><style>{STYLE}</style><rect width="100%" height="100%" fill="#fff"/>{inner}</svg>"##,
        esc(title)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_of_a_phase_has_its_own_shade() {
        for (phase, steps) in
            [("finalize", crate::run::results::FINALIZE_STEPS), ("init", crate::run::results::INIT_STEPS)]
        {
            let mut colours: Vec<&str> = steps.iter().map(|s| phase_color(&format!("{phase}: {s}"))).collect();
            colours.sort();
            colours.dedup();
            assert_eq!(colours.len(), steps.len(), "{phase}");
        }
    }

    #[test]
    fn tick_steps() {
        let (t, d) = ticks(0.0, 1_000_000.0, 10);
        assert_eq!(t.len(), 11);
        assert_eq!(t[1], 100_000.0);
        assert_eq!(d, 0);
        let (t, d) = ticks(0.0, 1500.0, 5);
        assert_eq!((t[1], d), (500.0, 1));
        assert_eq!(nice_max(3_456_000.0), 4_000_000.0);
    }

    #[test]
    fn escaping_and_numbers() {
        assert_eq!(esc("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(esc("x\u{1}y"), "xy");
        assert!(matches!(esc("plain"), Cow::Borrowed(_)));
        assert_eq!(ms(123_456.0), "123");
        assert_eq!(ms(12_345.0), "12.3");
        assert_eq!(ms(1_234.0), "1.23");
        assert_eq!(ms(123.0), "0.123");
    }

    /// First fit by the tree is first fit by a scan of the lanes.
    #[test]
    fn first_fit_takes_the_lowest_free_lane() {
        let mut rng = bootlink::rng::Rng(7);
        for round in 0..200 {
            let n = 1 + rng.below(60);
            let spans: Vec<(f64, f64)> = (0..n)
                .map(|_| (rng.below(100) as f64, rng.below(if round % 2 == 0 { 200 } else { 10 }) as f64))
                .collect();
            let (mut scan, mut fit) = (Vec::<f64>::new(), FirstFit::new(n));
            for &(s, d) in &spans {
                let a = scan.iter().position(|&e| e <= s).unwrap_or_else(|| {
                    scan.push(f64::NEG_INFINITY);
                    scan.len() - 1
                });
                scan[a] = scan[a].max(s + d);
                let b = fit.free_at(s).or_else(|| fit.open()).unwrap();
                fit.set(b, fit.end(b).max(s + d));
                assert_eq!(a, b, "round {round}: {spans:?}");
            }
            assert_eq!(scan.len(), fit.lanes());
        }
    }

    #[test]
    fn lanes_pack_overlaps_apart() {
        let (l, n) = pack(&[(0.0, 10.0), (10.0, 5.0), (12.0, 5.0), (20.0, 1.0)], 0.0, 6);
        assert_eq!((l, n), (vec![0, 0, 1, 0], 2));
    }
}
