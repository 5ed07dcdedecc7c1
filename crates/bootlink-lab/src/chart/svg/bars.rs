//! Per-module stacked phase bars, one group per series.

use crate::run::model::{ModuleMean, OTHER};
use std::fmt::Write;

use super::*;

/// The per-module stacked phase bars: one bar per loaded module (per
/// series), longest first, phases stacked in kernel order.
pub fn module_bars(series: &[(String, Vec<ModuleMean>)], phases: &[String], reps_note: &str) -> String {
    // Each series' means by name, and the names in first-seen order: one
    // look-up per module and series.
    let by_name: Vec<(&str, std::collections::HashMap<&str, &ModuleMean>)> =
        series.iter().map(|(l, ms)| (l.as_str(), ms.iter().map(|m| (m.name.as_str(), m)).collect())).collect();
    let mut seen = std::collections::HashSet::new();
    let names: Vec<&str> =
        series.iter().flat_map(|(_, ms)| ms).map(|m| m.name.as_str()).filter(|n| seen.insert(*n)).collect();
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
            by_name.iter().filter_map(|(l, ms)| ms.get(name).map(|m| (*l, *m))).collect();
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
