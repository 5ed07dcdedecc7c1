//! Drawing shared by the timeline and user-space panels: row stripes, the
//! axes around a panel's body and its marker line. Both panel files use
//! this one; neither uses the other's helpers.

use std::fmt::Write;

use super::*;

/// The background stripe of an odd row (into `under`).
pub(super) fn stripe(under: &mut String, s: &Scale, ry: f64, row_h: f64) {
    let _ = write!(
        under,
        r##"<rect x="{:.1}" y="{ry:.1}" width="{:.1}" height="{row_h:.1}" fill="#f7f8fa"/>"##,
        s.x0,
        s.x1 - s.x0
    );
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

/// A panel's axes around its body (rows from `body0` to `body1`), the
/// marker under the bars, the bars; returns the y below the panel.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_panel(
    o: &mut String,
    s: &Scale,
    under: &str,
    inner: &str,
    axis_top: f64,
    body0: f64,
    body1: f64,
    marker: Option<(f64, &str)>,
) -> f64 {
    o.push_str(under);
    axis(o, s, axis_top, true, Some((body0, body1)));
    // Under the bars and their labels.
    if let Some((t, l)) = marker {
        vmarker(o, s, t, body0, body1, l);
    }
    o.push_str(inner);
    axis(o, s, body1, false, None);
    axis_title(o, (s.x0 + s.x1) / 2.0, body1 + 36.0, "time since boot (ms)");
    body1 + 48.0
}
