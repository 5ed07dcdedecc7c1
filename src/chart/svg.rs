//! The SVG pieces: colours, time scales and axes, the timeline (initcalls
//! and module loads, each module's bar split by phase) and the per-module
//! stacked phase bars. Everything is plain SVG with `<title>` tooltips.

use std::borrow::Cow;
use std::fmt::Write;

use crate::run::results::{Initcall, ModuleLoad, Repetition};

use crate::run::model::{self, ModuleMean, OTHER};

/// Width of every chart, in CSS pixels.
pub const WIDTH: f64 = 1200.0;
/// Colour of built-in initcalls.
pub const BUILTIN: &str = "#5b7083";
const MUTED: &str = "#616e7c";
const GRID: &str = "#e4e7eb";

/// Fill colour of a phase.
pub fn phase_color(phase: &str) -> &'static str {
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
        // finalize's links: shades of finalize's colour
        p if p.starts_with("finalize: ") => {
            const SHADES: [&str; 8] =
                ["#3f3096", "#5a4bb8", "#6a5acd", "#7d6fd6", "#9083de", "#a398e6", "#b6adee", "#c9c2f5"];
            let step = &p["finalize: ".len()..];
            let i = crate::run::results::FINALIZE_STEPS.iter().position(|s| *s == step).unwrap_or(0);
            SHADES[i % SHADES.len()]
        }
        _ => {
            const EXTRA: [&str; 5] = ["#8c564b", "#17becf", "#bcbd22", "#7f7f7f", "#393b79"];
            let h = phase.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            EXTRA[h % EXTRA.len()]
        }
    }
}

/// What a phase means, for legends and tooltips.
pub fn phase_title(phase: &str) -> String {
    match phase {
        OTHER => "other (not in any phase)".into(),
        p => p.to_string(),
    }
}

/// Text for HTML and SVG: `& < > " '` escaped, control characters dropped.
pub fn esc(s: &str) -> Cow<'_, str> {
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

pub use crate::table::ms;

/// Rough width of text in the charts' font (DejaVu Sans is wide).
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.61
}

/// Cut `s` to fit `px` at `size`, with an ellipsis.
fn fit(s: &str, px: f64, size: f64) -> String {
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
pub struct Scale {
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
    pub fn px_per_us(&self) -> f64 {
        if self.t1 <= self.t0 { 0.0 } else { (self.x1 - self.x0) / (self.t1 - self.t0) }
    }
}

/// Tick positions (µs) on a 1-2-5 step in ms, and the decimals labels need.
pub fn ticks(t0: f64, t1: f64, target: usize) -> (Vec<f64>, usize) {
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
fn axis(o: &mut String, s: &Scale, y: f64, top: bool, grid: Option<(f64, f64)>) {
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

/// The phases of a load as (phase, start, duration) inside the load's
/// interval: as recorded when their times lie in it, else laid end to end
/// from the load's start.
pub fn segments(m: &ModuleLoad) -> Vec<(&str, f64, f64)> {
    let (a, b) = (m.start_us, m.start_us + m.total_us);
    let inside = m.phases.iter().all(|p| p.start_us >= a - 1.0 && p.start_us + p.duration_us <= b + 1.0);
    let mut t = a;
    m.phases
        .iter()
        .map(|p| {
            let s = if inside { p.start_us.max(a) } else { t };
            let d = p.duration_us.min(b - s).max(0.0);
            t = s + d;
            (p.name.as_str(), s, d)
        })
        .collect()
}

fn module_tooltip(m: &ModuleLoad) -> String {
    let mut t = format!("{}: {} ms", m.name, ms(m.total_us));
    let _ = write!(t, " (from {} ms)", ms(m.start_us));
    for p in &m.phases {
        let _ = write!(t, "\n  {}: {} ms", p.name, ms(p.duration_us));
    }
    let rest = model::unattributed(m);
    if rest > 0.0 && !m.phases.is_empty() {
        let _ = write!(t, "\n  {}: {} ms", phase_title(OTHER), ms(rest));
    }
    if let Some(l) = m.lookups {
        let _ = write!(t, "\nsymbol lookups: {l}");
    }
    if m.size > 0 {
        let _ = write!(t, "\nsize: {} bytes", crate::table::thousands(m.size as usize));
    }
    if m.status != 0 {
        let _ = write!(t, "\ninsmod status: {}", m.status);
    }
    t
}

fn initcall_tooltip(i: &Initcall) -> String {
    let mut t = String::new();
    if !i.module.is_empty() {
        let _ = write!(t, "[{}] ", i.module);
    }
    let _ = write!(t, "{}: {} ms (from {} ms)", i.name, ms(i.duration_us), ms(i.start_us));
    if i.ret != 0 {
        let _ = write!(t, ", returned {}", i.ret);
    }
    t
}

/// Greedy lanes for intervals so that no two in a lane overlap by more
/// than `tol`; at most `max` lanes (the last takes what does not fit).
fn pack(items: &[(f64, f64)], tol: f64, max: usize) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[a].0.total_cmp(&items[b].0));
    let mut ends: Vec<f64> = Vec::new();
    let mut lane = vec![0; items.len()];
    for i in order {
        let (s, d) = items[i];
        let l = ends.iter().position(|&e| e <= s + tol).unwrap_or_else(|| {
            if ends.len() < max {
                ends.push(f64::NEG_INFINITY);
                ends.len() - 1
            } else {
                max - 1
            }
        });
        ends[l] = ends[l].max(s + d);
        lane[i] = l;
    }
    (lane, ends.len().max(1))
}

/// A bar to draw in a timeline.
enum Bar<'a> {
    Initcall(&'a Initcall),
    Module(&'a ModuleLoad),
}

impl Bar<'_> {
    fn span(&self) -> (f64, f64) {
        match self {
            Bar::Initcall(i) => (i.start_us, i.duration_us),
            Bar::Module(m) => (m.start_us, m.total_us),
        }
    }
    fn color(&self) -> &'static str {
        match self {
            Bar::Initcall(i) if i.module.is_empty() => BUILTIN,
            Bar::Initcall(_) => phase_color("init"),
            Bar::Module(_) => phase_color(OTHER),
        }
    }
    fn tooltip(&self) -> String {
        match self {
            Bar::Initcall(i) => initcall_tooltip(i),
            Bar::Module(m) => module_tooltip(m),
        }
    }
    fn label(&self) -> String {
        match self {
            Bar::Initcall(i) if i.module.is_empty() => i.name.clone(),
            Bar::Initcall(i) => format!("[{}] {}", i.module, i.name),
            Bar::Module(m) => m.name.clone(),
        }
    }
}

/// One bar: a rect, or a module's rect with its phases on top.
fn draw_bar(o: &mut String, s: &Scale, bar: &Bar, y: f64, h: f64, class: &str) {
    let (start, dur) = bar.span();
    let x = s.x(start);
    let w = (dur * s.px_per_us()).max(1.0);
    let tip = esc(&bar.tooltip()).into_owned();
    match bar {
        Bar::Module(m) => {
            let _ = write!(o, r#"<g class="{class}" data-module="{}"><title>{tip}</title>"#, esc(&m.name));
            let _ = write!(o, r#"<rect x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{h:.1}" fill="{}"/>"#, bar.color());
            for (p, ps, pd) in segments(m) {
                let sw = pd * s.px_per_us();
                if sw < 0.05 {
                    continue;
                }
                let _ = write!(
                    o,
                    r#"<rect class="seg" data-phase="{}" x="{:.2}" y="{y:.1}" width="{sw:.2}" height="{h:.1}" fill="{}"/>"#,
                    esc(p),
                    s.x(ps),
                    phase_color(p)
                );
            }
            o.push_str("</g>");
        }
        Bar::Initcall(i) => {
            let _ = write!(
                o,
                r#"<rect class="{class}" data-initcall="{}" x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{h:.1}" fill="{}"><title>{tip}</title></rect>"#,
                esc(&i.name),
                bar.color()
            );
        }
    }
}

/// All bars in packed lanes; bars narrower than 2 px that touch are drawn
/// as one rect (its tooltip says how many), so any number of initcalls
/// costs at most a few hundred rects per lane.
fn overview(o: &mut String, s: &Scale, bars: &[Bar], y: f64, lane_h: f64, what: &str) -> f64 {
    let spans: Vec<(f64, f64)> = bars.iter().map(Bar::span).collect();
    let tol = if s.px_per_us() > 0.0 { 0.5 / s.px_per_us() } else { 0.0 };
    let (lanes, n) = pack(&spans, tol, 6);
    for lane in 0..n {
        let ly = y + lane as f64 * (lane_h + 2.0);
        let mut idx: Vec<usize> = (0..bars.len()).filter(|&i| lanes[i] == lane).collect();
        idx.sort_by(|&a, &b| spans[a].0.total_cmp(&spans[b].0));
        // (x0, x1, count, sum µs, first index, last index)
        let mut group: Option<(f64, f64, usize, f64, usize, usize)> = None;
        let flush = |o: &mut String, g: (f64, f64, usize, f64, usize, usize)| {
            if g.2 == 1 {
                draw_bar(o, s, &bars[g.4], ly, lane_h, "tl-bar");
            } else {
                let (a, b) = (&bars[g.4], &bars[g.5]);
                let tip = format!(
                    "{} {what}, {}–{} ms, {} ms in all\nfirst: {}\nlast: {}",
                    g.2,
                    ms(a.span().0),
                    ms(b.span().0 + b.span().1),
                    ms(g.3),
                    a.label(),
                    b.label()
                );
                let _ = write!(
                    o,
                    r#"<rect class="tl-group" x="{:.2}" y="{ly:.1}" width="{:.2}" height="{lane_h:.1}" fill="{}" opacity="0.85"><title>{}</title></rect>"#,
                    g.0,
                    (g.1 - g.0).max(1.0),
                    a.color(),
                    esc(&tip)
                );
            }
        };
        for &i in &idx {
            let (st, d) = spans[i];
            let (a, b) = (s.x(st), s.x(st) + (d * s.px_per_us()).max(1.0));
            group = match group {
                Some(g) if b - a < 2.0 && a <= g.1 + 0.5 && b - g.0 < 2.5 => {
                    Some((g.0, g.1.max(b), g.2 + 1, g.3 + d, g.4, i))
                }
                Some(g) => {
                    flush(o, g);
                    Some((a, b, 1, d, i, i))
                }
                None => Some((a, b, 1, d, i, i)),
            };
        }
        if let Some(g) = group {
            flush(o, g);
        }
    }
    n as f64 * (lane_h + 2.0)
}

/// Rows of single bars, each labelled beside its bar (right of it, or left
/// when it would run off the chart).
/// Row stripes go to `under`, drawn before gridlines and markers.
fn detail_rows(o: &mut String, under: &mut String, s: &Scale, bars: &[&Bar], y: f64, row_h: f64, class: &str) -> f64 {
    for (k, bar) in bars.iter().enumerate() {
        let ry = y + k as f64 * row_h;
        if k % 2 == 1 {
            let _ = write!(
                under,
                r##"<rect x="{:.1}" y="{ry:.1}" width="{:.1}" height="{row_h:.1}" fill="#f7f8fa"/>"##,
                s.x0,
                s.x1 - s.x0
            );
        }
        let bh = row_h - 5.0;
        draw_bar(o, s, bar, ry + 2.5, bh, class);
        let (st, d) = bar.span();
        let (a, b) = (s.x(st), s.x(st) + (d * s.px_per_us()).max(1.0));
        let text = format!("{}  {} ms", bar.label(), ms(d));
        let tw = text_width(&text, 11.0);
        let ty = ry + row_h - 4.0;
        if b + 6.0 + tw <= s.x1 + 70.0 {
            let _ = write!(o, r#"<text class="bar-label" x="{:.1}" y="{ty:.1}">{}</text>"#, b + 5.0, esc(&text));
        } else if a - 6.0 - tw >= s.x0 - 110.0 {
            let _ = write!(
                o,
                r#"<text class="bar-label" x="{:.1}" y="{ty:.1}" text-anchor="end">{}</text>"#,
                a - 5.0,
                esc(&text)
            );
        } else {
            let t = fit(&text, (b - a - 8.0).max(0.0), 11.0);
            let _ = write!(o, r#"<text class="bar-label inside" x="{:.1}" y="{ty:.1}">{}</text>"#, a + 4.0, esc(&t));
        }
    }
    bars.len() as f64 * row_h
}

fn vmarker(o: &mut String, s: &Scale, t: f64, y0: f64, y1: f64, label: &str) {
    if t < s.t0 || t > s.t1 {
        return;
    }
    let x = s.x(t);
    let _ = write!(
        o,
        r##"<g class="marker"><line x1="{x:.1}" y1="{y0:.1}" x2="{x:.1}" y2="{y1:.1}" stroke="#9b2c2c" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" class="marker-label">{}</text></g>"##,
        x + 4.0,
        y0 + 11.0,
        esc(label)
    );
}

pub const GUTTER: f64 = 118.0;
const RIGHT: f64 = 90.0;
/// Detail rows shown per timeline panel.
pub const DETAIL_INITCALLS: usize = 30;
pub const DETAIL_MODULES: usize = 60;

/// One timeline panel: title, top axis, overview lane of every bar,
/// detail rows for the longest, bottom axis with its unit. Returns the new y.
#[allow(clippy::too_many_arguments)]
fn panel(
    o: &mut String,
    y: f64,
    title: &str,
    note: &str,
    s: &Scale,
    bars: &[Bar],
    detail: usize,
    what: &str,
    marker: Option<(f64, &str)>,
) -> f64 {
    let mut y = y + 18.0;
    let _ = write!(o, r#"<text class="panel-title" x="10" y="{y:.1}">{}</text>"#, esc(title));
    if !note.is_empty() {
        let _ = write!(
            o,
            r#"<text class="note" x="{:.1}" y="{y:.1}">{}</text>"#,
            16.0 + text_width(title, 13.0) + 8.0,
            esc(note)
        );
    }
    y += 30.0;
    let axis_top = y;
    let body0 = y + 6.0;
    // Overview lane.
    let (mut inner, mut under) = (String::new(), String::new());
    let lane_y = body0 + 4.0;
    let h = overview(&mut inner, s, bars, lane_y, 14.0, what);
    let mut label = format!("all {} {what}", bars.len());
    if text_width(&label, 11.0) > GUTTER - 14.0 {
        label = format!("all {}", bars.len());
    }
    let _ = write!(
        o,
        r#"<text class="lane-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
        s.x0 - 8.0,
        lane_y + 11.0,
        esc(&label)
    );
    let mut yy = lane_y + h + 8.0;
    // Detail rows: the longest, in time order.
    let mut pick: Vec<usize> = (0..bars.len()).collect();
    pick.sort_by(|&a, &b| bars[b].span().1.total_cmp(&bars[a].span().1));
    pick.truncate(detail);
    pick.sort_by(|&a, &b| bars[a].span().0.total_cmp(&bars[b].span().0));
    let chosen: Vec<&Bar> = pick.iter().map(|&i| &bars[i]).collect();
    if !chosen.is_empty() {
        let sub = if chosen.len() < bars.len() { format!("{} longest", chosen.len()) } else { "each".to_string() };
        let _ = write!(
            o,
            r#"<text class="lane-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            s.x0 - 8.0,
            yy + 11.0,
            esc(&sub)
        );
        yy += detail_rows(&mut inner, &mut under, s, &chosen, yy, 16.0, "tl-detail");
    }
    let body1 = yy + 4.0;
    o.push_str(&under);
    axis(o, s, axis_top, true, Some((body0, body1)));
    // Under the bars and their labels.
    if let Some((t, l)) = marker {
        vmarker(o, s, t, body0, body1, l);
    }
    o.push_str(&inner);
    axis(o, s, body1, false, None);
    axis_title(o, (s.x0 + s.x1) / 2.0, body1 + 36.0, "time since boot (ms)");
    body1 + 48.0
}

/// The timeline of a series' median repetition (None without repetitions),
/// noting which repetition it is when there are several.
pub fn series_timeline(s: &crate::run::model::Series, phases: &[String]) -> Option<String> {
    let (i, rep) = crate::run::model::median_repetition(s.variant)?;
    let n = s.variant.repetitions.len();
    let note = if n > 1 { format!("repetition {} of {n} (the median)", i + 1) } else { String::new() };
    Some(timeline(&s.label, &note, rep, phases))
}

/// The timeline of one repetition: built-in initcalls on one time axis,
/// module loads (split by phase) or module init functions on another.
/// An `<svg>` element for a page or for [`stack`], which makes the document.
pub fn timeline(label: &str, rep_note: &str, rep: &Repetition, phases: &[String]) -> String {
    let mut o = String::new();
    let mut y = 0.0;
    let heading = format!("Timeline: {label}");
    let _ = write!(o, r#"<text class="chart-title" x="10" y="22">{}</text>"#, esc(&heading));
    if !rep_note.is_empty() {
        let _ = write!(
            o,
            r#"<text class="note" x="{:.1}" y="22">{}</text>"#,
            18.0 + text_width(&heading, 16.0),
            esc(rep_note)
        );
    }
    y += 32.0;
    let mut entries: Vec<(String, &str)> = vec![("built-in initcall".into(), BUILTIN)];
    let has_modules = !rep.modules.is_empty();
    if has_modules {
        entries.extend(phases.iter().map(|p| (phase_title(p), phase_color(p))));
    } else if model::module_inits(rep).next().is_some() {
        entries.push(("module init function".into(), phase_color("init")));
    }
    y += 14.0;
    y += legend(&mut o, 12.0, y, &entries);

    let builtin: Vec<Bar> = model::builtin(rep).map(Bar::Initcall).collect();
    let init = (rep.init_start_us > 0.0).then_some((rep.init_start_us, "/init"));
    if !builtin.is_empty() {
        let end =
            builtin.iter().map(|b| b.span().0 + b.span().1).fold(0.0, f64::max).max(init.map(|m| m.0).unwrap_or(0.0));
        let s = Scale { t0: 0.0, t1: nice_max(end), x0: GUTTER, x1: WIDTH - RIGHT };
        let sum: f64 = builtin.iter().map(|b| b.span().1).sum();
        let note = format!("{} initcalls, {} ms in all", builtin.len(), ms(sum));
        y = panel(&mut o, y, "Kernel initcalls", &note, &s, &builtin, DETAIL_INITCALLS, "initcalls", init);
    }
    let (mods, what, title): (Vec<Bar>, &str, &str) = if has_modules {
        (rep.modules.iter().map(Bar::Module).collect(), "modules", "Module loads")
    } else {
        (model::module_inits(rep).map(Bar::Initcall).collect(), "module inits", "Module init functions")
    };
    if !mods.is_empty() {
        let a = mods.iter().map(|b| b.span().0).fold(f64::INFINITY, f64::min);
        let b = mods.iter().map(|b| b.span().0 + b.span().1).fold(0.0, f64::max);
        let pad = ((b - a) * 0.02).max(100.0);
        let (ts, _) = ticks(a - pad, b + pad, 10);
        let step = if ts.len() > 1 { ts[1] - ts[0] } else { pad };
        let t0 = (((a - pad) / step).floor() * step).max(0.0);
        let t1 = ((b + pad) / step).ceil() * step;
        let s = Scale { t0, t1, x0: GUTTER, x1: WIDTH - RIGHT };
        let sum: f64 = mods.iter().map(|b| b.span().1).sum();
        let note = format!("{} {what}, {} ms in all, {}–{} ms after boot", mods.len(), ms(sum), ms(a), ms(b));
        y = panel(&mut o, y, title, &note, &s, &mods, DETAIL_MODULES, what, init);
    }
    if builtin.is_empty() && mods.is_empty() {
        y += 20.0;
        let _ = write!(
            o,
            r#"<text class="note" x="12" y="{y:.1}">No initcalls or module loads in this repetition (boot with initcall_debug to get initcalls).</text>"#
        );
        y += 16.0;
    }
    wrap(&o, y + 8.0, "timeline", &heading)
}

/// The per-module stacked phase bars: one bar per loaded module (per
/// series), longest first, phases stacked in kernel order.
pub fn module_bars(series: &[(String, Vec<ModuleMean>)], phases: &[String], reps_note: &str) -> String {
    let mut names: Vec<&str> = Vec::new();
    for (_, ms) in series {
        for m in ms {
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    let multi = series.len() > 1;
    let name_w = names.iter().map(|n| text_width(n, 12.0)).fold(40.0, f64::max).min(240.0) + 14.0;
    let series_w =
        if multi { series.iter().map(|s| text_width(&s.0, 11.0)).fold(30.0, f64::max).min(180.0) + 12.0 } else { 0.0 };
    let x0 = name_w + series_w + 8.0;
    let max = series.iter().flat_map(|s| &s.1).map(|m| m.total.mean).fold(0.0, f64::max);
    let s = Scale { t0: 0.0, t1: nice_max(max), x0, x1: WIDTH - RIGHT };
    let mut o = String::new();
    let title = "Module load time by phase";
    let _ = write!(o, r#"<text class="chart-title" x="10" y="22">{title}</text>"#);
    let note = format!("{} modules, longest first; {reps_note}", names.len());
    let _ = write!(o, r#"<text class="note" x="{:.1}" y="22">{}</text>"#, 18.0 + text_width(title, 16.0), esc(&note));
    let mut y = 46.0;
    let entries: Vec<(String, &str)> = phases.iter().map(|p| (phase_title(p), phase_color(p))).collect();
    y += legend(&mut o, 12.0, y, &entries);
    y += 24.0;
    let axis_top = y;
    let body0 = y + 4.0;
    let row_h = if multi { 15.0 } else { 18.0 };
    let (mut inner, mut under) = (String::new(), String::new());
    let mut yy = body0 + 2.0;
    for (k, name) in names.iter().enumerate() {
        let rows: Vec<(&str, &ModuleMean)> =
            series.iter().filter_map(|(l, ms)| ms.iter().find(|m| m.name == *name).map(|m| (l.as_str(), m))).collect();
        let gh = rows.len() as f64 * row_h + if multi { 6.0 } else { 0.0 };
        if k % 2 == 1 {
            let _ = write!(
                under,
                r##"<rect x="4" y="{yy:.1}" width="{:.1}" height="{gh:.1}" fill="#f7f8fa"/>"##,
                WIDTH - 8.0
            );
        }
        let _ = write!(
            inner,
            r#"<text class="row-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            name_w,
            yy + gh / 2.0 + 4.0,
            esc(&fit(name, name_w - 10.0, 12.0))
        );
        for (j, (label, m)) in rows.iter().enumerate() {
            let ry = yy + j as f64 * row_h + if multi { 3.0 } else { 0.0 };
            if multi {
                let _ = write!(
                    inner,
                    r#"<text class="series-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    x0 - 6.0,
                    ry + row_h - 4.0,
                    esc(&fit(label, series_w - 8.0, 11.0))
                );
            }
            let mut tip = format!(
                "{}{}: {} ms",
                m.name,
                if multi { format!(" ({label})") } else { String::new() },
                ms(m.total.mean)
            );
            if m.total.n > 1 {
                let _ = write!(tip, " mean of {} ({}–{} ms)", m.total.n, ms(m.total.min), ms(m.total.max));
            }
            for (p, us) in m.phases.iter().filter(|p| p.1 > 0.0) {
                let _ = write!(tip, "\n  {}: {} ms", phase_title(p), ms(*us));
            }
            if let Some(l) = m.lookups {
                let _ = write!(tip, "\nsymbol lookups: {l:.0}");
            }
            let _ = write!(
                inner,
                r#"<g class="module-bar" data-module="{}" data-series="{}"><title>{}</title>"#,
                esc(&m.name),
                esc(label),
                esc(&tip)
            );
            let (by, bh) = (ry + 2.0, row_h - 4.0);
            let mut x = s.x0;
            for (p, us) in m.phases.iter().filter(|p| p.1 > 0.0) {
                let w = us * s.px_per_us();
                let _ = write!(
                    inner,
                    r#"<rect class="seg" data-phase="{}" x="{x:.2}" y="{by:.1}" width="{w:.2}" height="{bh:.1}" fill="{}"/>"#,
                    esc(p),
                    phase_color(p)
                );
                x += w;
            }
            if m.phases.iter().all(|p| p.1 <= 0.0) {
                let w = (m.total.mean * s.px_per_us()).max(1.0);
                let _ = write!(
                    inner,
                    r#"<rect x="{x:.2}" y="{by:.1}" width="{w:.2}" height="{bh:.1}" fill="{}"/>"#,
                    phase_color(OTHER)
                );
                x += w;
            }
            inner.push_str("</g>");
            let _ = write!(
                inner,
                r#"<text class="value" x="{:.1}" y="{:.1}">{} ms</text>"#,
                x.max(s.x0 + 1.0) + 5.0,
                ry + row_h - 4.5,
                ms(m.total.mean)
            );
        }
        yy += gh;
    }
    let body1 = yy + 4.0;
    o.push_str(&under);
    axis(&mut o, &s, axis_top, true, Some((body0, body1)));
    o.push_str(&inner);
    axis(&mut o, &s, body1, false, None);
    axis_title(&mut o, (s.x0 + s.x1) / 2.0, body1 + 36.0, "load time per module (ms)");
    wrap(&o, body1 + 48.0, "modules", title)
}

/// Styles shared by all charts (inside the SVG, so a standalone file
/// looks the same).
pub const STYLE: &str = concat!(
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
    "g.module-bar:hover rect,g.tl-bar:hover rect,g.tl-detail:hover rect,rect.tl-bar:hover,rect.tl-detail:hover,rect.tl-group:hover{opacity:0.75}"
);

fn wrap(body: &str, height: f64, class: &str, title: &str) -> String {
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

    #[test]
    fn lanes_pack_overlaps_apart() {
        let (l, n) = pack(&[(0.0, 10.0), (10.0, 5.0), (12.0, 5.0), (20.0, 1.0)], 0.0, 6);
        assert_eq!((l, n), (vec![0, 0, 1, 0], 2));
    }
}
