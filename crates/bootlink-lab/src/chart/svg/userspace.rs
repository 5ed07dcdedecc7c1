//! The user-space panel of a timeline: DDLink's program started in the
//! guest under the patched ld.so, one row per loader mode, each start a
//! bar at its guest time (on the same "time since boot" axis as the
//! kernel's panels), ld.so's own time and its relocation darker inside it.

use std::fmt::Write;

use crate::run::model::Med;
use crate::run::results::{Process, Start, USER_MODES};

use super::panel::{finish_panel, stripe};
use super::*;

/// The colours of a mode: the start, ld.so's part, its relocation.
pub(crate) fn mode_colors(mode: &str) -> [&'static str; 3] {
    match mode {
        "normal" => ["#f2b8a0", "#d8643a", "#8f2d0c"],
        "file-read" => ["#a9c8ea", "#3d7cc9", "#173f78"],
        "skip" => ["#a9dcb9", "#2f9d5c", "#145c33"],
        _ => ["#d5d9de", "#8a96a3", "#3e4c59"],
    }
}

/// What the panel and the Perfetto tracks draw of one start, whichever
/// workload started it: the bar is the common [`Start`]; the rest is the
/// workload's own figures.
pub(crate) trait StartBar: std::ops::Deref<Target = Start> {
    /// ld.so's part and the relocation inside it (DDLink's starts).
    fn spans(&self) -> (Option<Span>, Option<Span>) {
        (None, None)
    }
    /// Time to UI from the start marker (reordering's starts).
    fn ui_us(&self) -> Option<f64> {
        None
    }
    /// ld.so's relocation (DDLink's starts).
    fn relocation_us(&self) -> Option<f64> {
        None
    }
    /// The tooltip's lines of the workload's figures (before the exit status).
    fn figures(&self, _t: &mut String) {}
    /// The tooltip's lines after the exit status.
    fn notes(&self, _t: &mut String) {}
}

/// The modes with starts, [`USER_MODES`] first.
pub(crate) fn modes<S: StartBar>(starts: &[S]) -> Vec<&str> {
    by_mode(starts).into_iter().map(|(m, _)| m).collect()
}

/// Each mode's starts, the modes in [`modes`]' order (one pass).
pub(crate) fn by_mode<S: StartBar>(starts: &[S]) -> Vec<(&str, Vec<&S>)> {
    crate::run::model::grouped(starts, |s| s.mode.as_str(), USER_MODES)
}

/// "median 12.4 ms, relocation 1.23 ms" (or ", UI 12.0 ms": time to UI) for a mode's starts.
fn median_label<S: StartBar>(st: &[&S]) -> String {
    let med = Med::of(st.iter().map(|x| x.duration_us)).map(|m| m.median).unwrap_or(0.0);
    let mut label = format!("median {} ms", ms(med));
    if let Some(u) = Med::of(st.iter().filter_map(|x| x.ui_us())) {
        let _ = write!(label, ", UI {} ms", ms(u.median));
    }
    if let Some(r) = Med::of(st.iter().filter_map(|x| x.relocation_us())) {
        let _ = write!(label, ", relocation {} ms", ms(r.median));
    }
    label
}

fn tooltip<S: StartBar>(s: &S, program: &str) -> String {
    let mut t = format!(
        "{program}, {} #{}: {} ms from the start marker to the exit (from {} ms)",
        s.mode,
        s.index + 1,
        ms(s.duration_us),
        ms(s.start_us)
    );
    s.figures(&mut t);
    if s.exit != 0 {
        let _ = write!(t, "\nexit status: {}", s.exit);
    }
    s.notes(&mut t);
    t
}

/// (start, duration) in µs.
pub(crate) type Span = (f64, f64);

/// The program's file name in a DDLink command (`LD.SO PROGRAM ARGS`).
pub(crate) fn program_name(command: &str) -> String {
    let p = command.split_whitespace().nth(1).unwrap_or(command);
    p.rsplit('/').next().unwrap_or(p).to_string()
}

/// The panel of a series of starts; returns the new y.
pub(crate) fn panel<S: StartBar>(o: &mut String, y: f64, title: &str, what: &str, program: &str, starts: &[S]) -> f64 {
    let mut y = y + 18.0;
    let _ = write!(o, r#"<text class="panel-title" x="10" y="{y:.1}">{}</text>"#, esc(title));
    let a = starts.iter().map(|s| s.start_us).fold(f64::INFINITY, f64::min);
    let b = starts.iter().map(|s| s.start_us + s.duration_us).fold(0.0, f64::max);
    let note = format!(
        "{} starts, {}–{} ms after boot; bar: marker before the start to the exit, {what}",
        starts.len(),
        ms(a),
        ms(b)
    );
    let _ = write!(
        o,
        r#"<text class="note" x="{:.1}" y="{y:.1}">{}</text>"#,
        16.0 + text_width(title, 13.0) + 8.0,
        esc(&note)
    );
    y += 30.0;
    let pad = ((b - a) * 0.02).max(100.0);
    let (ts, _) = ticks(a - pad, b + pad, 10);
    let step = if ts.len() > 1 { ts[1] - ts[0] } else { pad };
    let t0 = (((a - pad) / step).floor() * step).max(0.0);
    let mut t1 = ((b + pad) / step).ceil() * step;
    // Room right of the last bars for the rows' median labels.
    let modes = by_mode(starts);
    let labels: Vec<String> = modes.iter().map(|(_, st)| median_label(st)).collect();
    let widest = labels.iter().map(|l| text_width(l, 11.0)).fold(0.0, f64::max);
    let x1 = WIDTH - RIGHT;
    // (At most 10,000 widenings: a step too small for t1's magnitude adds nothing.)
    let mut widenings = 0;
    while GUTTER + (b - t0) / (t1 - t0) * (x1 - GUTTER) + 5.0 + widest > WIDTH - 8.0
        && t1 < b + 100.0 * (b - t0)
        && widenings < 10_000
    {
        widenings += 1;
        t1 += step;
    }
    let s = Scale { t0, t1, x0: GUTTER, x1 };
    let axis_top = y;
    let body0 = y + 6.0;
    let row_h = 22.0;
    let (mut inner, mut under) = (String::new(), String::new());
    for (k, (mode, row)) in modes.iter().enumerate() {
        let ry = body0 + 4.0 + k as f64 * row_h;
        if k % 2 == 1 {
            stripe(&mut under, &s, ry, row_h);
        }
        let _ = write!(
            o,
            r#"<text class="lane-label" data-user-mode="{}" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            esc(mode),
            s.x0 - 8.0,
            ry + 15.0,
            esc(mode)
        );
        let [c_start, c_ldso, c_reloc] = mode_colors(mode);
        let (bh, by) = (row_h - 6.0, ry + 3.0);
        for st in row.iter() {
            let x = s.x(st.start_us);
            let w = (st.duration_us * s.px_per_us()).max(1.0);
            let _ = write!(
                inner,
                r#"<g class="tl-user" data-mode="{}" data-start="{}"><title>{}</title><rect x="{x:.2}" y="{by:.1}" width="{w:.2}" height="{bh:.1}" fill="{c_start}"/>"#,
                esc(mode),
                st.index,
                esc(&tooltip(*st, program))
            );
            let (ldso, reloc) = st.spans();
            for (span, color, what) in [(ldso, c_ldso, "ld.so"), (reloc, c_reloc, "relocation")] {
                if let Some((sa, sd)) = span {
                    let sw = sd * s.px_per_us();
                    if sw >= 0.05 {
                        let _ = write!(
                            inner,
                            r#"<rect class="seg" data-part="{what}" x="{:.2}" y="{by:.1}" width="{sw:.2}" height="{bh:.1}" fill="{color}"/>"#,
                            s.x(sa)
                        );
                    }
                }
            }
            if let Some(ui) = st.ui_us() {
                let _ = write!(
                    inner,
                    r#"<rect class="tl-ui" data-ui-us="{}" x="{:.2}" y="{:.1}" width="2" height="{:.1}" fill="{UI}"/>"#,
                    ui.round(),
                    s.x(st.start_us + ui) - 1.0,
                    by - 2.0,
                    bh + 4.0
                );
            }
            inner.push_str("</g>");
        }
        // The median beside the row's last bar.
        if let Some(last) = row.iter().map(|x| x.start_us + x.duration_us).reduce(f64::max) {
            let _ = write!(
                inner,
                r#"<text class="bar-label" x="{:.1}" y="{:.1}">{}</text>"#,
                s.x(last) + 5.0,
                ry + 15.0,
                esc(&labels[k])
            );
        }
    }
    let body1 = body0 + 4.0 + modes.len() as f64 * row_h + 4.0;
    finish_panel(o, &s, &under, &inner, axis_top, body0, body1, None)
}

const PROC: &str = "#c9d3dd";
const PROC_EXEC: &str = "#5b7083";
/// The time-to-UI mark of a start.
pub const UI: &str = "#d6336c";

/// Processes packed into lanes like bootchart: each goes into the first
/// lane free at its fork. Returns each one's (lane, end: its exit, or the
/// end of the trace for one still running then), the number of lanes, and
/// that end (the latest time any process was seen).
pub(crate) fn process_lanes(procs: &[Process]) -> (Vec<(usize, f64)>, usize, f64) {
    let last =
        procs.iter().flat_map(|p| [Some(p.start_us), p.exec_us, p.end_us]).flatten().fold(f64::NEG_INFINITY, f64::max);
    let mut lanes = super::FirstFit::new(procs.len());
    let mut out = Vec::with_capacity(procs.len());
    for p in procs {
        let end = p.end_us.unwrap_or(last).max(p.start_us);
        let l = lanes.free_at(p.start_us).or_else(|| lanes.open()).expect("a lane per process at most");
        lanes.set(l, end);
        out.push((l, end));
    }
    (out, lanes.lanes(), last)
}

/// The boot's processes from /init on (fork to exit, exec darker), packed
/// into lanes like bootchart, on the kernel's time axis; returns the new y.
pub(crate) fn processes_panel(o: &mut String, y: f64, procs: &[Process]) -> f64 {
    if procs.is_empty() {
        return y;
    }
    let (lanes, n_lanes, b) = process_lanes(procs);
    let mut y = y + 18.0;
    let title = "User space: processes (fork to exit; darker: after exec)";
    let _ = write!(o, r#"<text class="panel-title" x="10" y="{y:.1}">{}</text>"#, esc(title));
    let a = procs.iter().map(|p| p.start_us).fold(f64::INFINITY, f64::min);
    let running = procs.iter().filter(|p| p.end_us.is_none()).count();
    let note = format!(
        "{} processes, {}–{} ms after boot (ftrace sched_process_fork/exec/exit{})",
        procs.len(),
        ms(a),
        ms(b),
        if running > 0 { format!("; {running} still running when the trace stopped") } else { String::new() }
    );
    let _ = write!(
        o,
        r#"<text class="note" x="{:.1}" y="{y:.1}">{}</text>"#,
        16.0 + text_width(title, 13.0) + 8.0,
        esc(&note)
    );
    y += 30.0;
    let pad = ((b - a) * 0.02).max(100.0);
    let (ts, _) = ticks(a - pad, b + pad, 10);
    let step = if ts.len() > 1 { ts[1] - ts[0] } else { pad };
    let s = Scale {
        t0: (((a - pad) / step).floor() * step).max(0.0),
        t1: ((b + pad) / step).ceil() * step,
        x0: GUTTER,
        x1: WIDTH - RIGHT,
    };
    let axis_top = y;
    let body0 = y + 6.0;
    let row_h = 16.0;
    let (mut inner, mut under) = (String::new(), String::new());
    for l in 0..n_lanes {
        if l % 2 == 1 {
            stripe(&mut under, &s, body0 + 4.0 + l as f64 * row_h, row_h);
        }
    }
    for (p, &(l, e)) in procs.iter().zip(&lanes) {
        let ry = body0 + 4.0 + l as f64 * row_h;
        let (bh, by) = (row_h - 4.0, ry + 2.0);
        let x = s.x(p.start_us);
        let w = ((e - p.start_us) * s.px_per_us()).max(1.0);
        let until = match p.end_us {
            Some(_) => format!("{} ms", ms(e)),
            None => format!("still running at {} ms", ms(e)),
        };
        let _ = write!(
            inner,
            r##"<g class="tl-proc" data-pid="{}" data-name="{}"><title>{} [{}], parent {}: {}–{until}{}</title><rect x="{x:.2}" y="{by:.1}" width="{w:.2}" height="{bh:.1}" fill="{PROC}"/>"##,
            p.pid,
            esc(&p.name),
            esc(&p.name),
            p.pid,
            p.parent,
            ms(p.start_us),
            p.exec_us.map(|x| format!(", exec at {} ms", ms(x))).unwrap_or_default()
        );
        if let Some(xe) = p.exec_us {
            let _ = write!(
                inner,
                r#"<rect class="seg" x="{:.2}" y="{by:.1}" width="{:.2}" height="{bh:.1}" fill="{PROC_EXEC}"/>"#,
                s.x(xe),
                ((e - xe) * s.px_per_us()).max(0.5)
            );
        }
        if w > text_width(&p.name, 10.0) + 6.0 {
            let _ = write!(
                inner,
                r#"<text class="bar-label" x="{:.1}" y="{:.1}" fill="white">{}</text>"#,
                x + 3.0,
                ry + 12.0,
                esc(&p.name)
            );
        }
        inner.push_str("</g>");
    }
    let body1 = body0 + 4.0 + n_lanes as f64 * row_h + 4.0;
    finish_panel(o, &s, &under, &inner, axis_top, body0, body1, None)
}
