//! The bootgraph-like timeline: initcalls and module loads on one time
//! axis, each module's phases inside its bar, an overview and detail rows.

use crate::run::model::{self, OTHER};
use crate::run::results::{Initcall, ModuleLoad, Repetition};
use std::fmt::Write;

use super::panel::{finish_panel, stripe};
use super::*;

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
    if let Some(w) = m.worker {
        let _ = write!(t, "\nworker {w}");
    }
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
        let _ = write!(t, "\nsize: {} bytes", bootlink::table::thousands(m.size as usize));
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
pub(super) fn pack(items: &[(f64, f64)], tol: f64, max: usize) -> (Vec<usize>, usize) {
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
            let _ = write!(o, r#"<g class="{class}" data-module="{}""#, esc(&m.name));
            if let Some(l) = m.worker.filter(|_| class == LANE_CLASS) {
                let _ = write!(o, r#" data-lane="{l}""#);
            }
            let _ = write!(o, r#"><title>{tip}</title>"#);
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
            // In a worker lane the name goes inside the bar, where it fits
            // (inside the group, so hovering it still shows the tooltip).
            if class == LANE_CLASS {
                let t = fit(&m.name, w - 6.0, 10.0);
                if t.chars().count() >= 3 {
                    let _ = write!(
                        o,
                        r##"<text class="lane-bar-label" x="{:.1}" y="{:.1}" font-size="10" stroke="#fff" stroke-width="2.5" paint-order="stroke">{}</text>"##,
                        x + 3.0,
                        y + h - 3.5,
                        esc(&t)
                    );
                }
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
            stripe(under, s, ry, row_h);
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
    finish_panel(o, s, &under, &inner, axis_top, body0, yy + 4.0, marker)
}

/// The class of a module's bar in a worker lane.
const LANE_CLASS: &str = "tl-bar tl-lane";

/// The lane of each module of a repetition loaded by parallel workers, and
/// the lane labels: one per worker 0..=max (a worker that loaded nothing
/// keeps its empty row), then "no worker" for loads without one (if any).
/// None when no module carries a worker. Worker numbers come from the
/// run's file: past one row per module, only the workers that loaded a
/// module get a row (in order), so the rows stay within the modules'.
pub(crate) fn worker_lanes(modules: &[ModuleLoad]) -> Option<(Vec<usize>, Vec<String>)> {
    let max = modules.iter().filter_map(|m| m.worker).max()?;
    let workers: Vec<u32> = if (max as usize) < modules.len() {
        (0..=max).collect()
    } else {
        let set: std::collections::BTreeSet<u32> = modules.iter().filter_map(|m| m.worker).collect();
        set.into_iter().collect()
    };
    let row: std::collections::HashMap<u32, usize> = workers.iter().enumerate().map(|(k, &w)| (w, k)).collect();
    let n = workers.len();
    let mut labels: Vec<String> = workers.iter().map(|w| format!("worker {w}")).collect();
    if modules.iter().any(|m| m.worker.is_none()) {
        labels.push("no worker".into());
    }
    let lanes = modules.iter().map(|m| m.worker.map_or(n, |w| row[&w])).collect();
    Some((lanes, labels))
}

/// The module loads of a parallel loader: one row per worker, each module
/// a bar (split by phase) in its worker's row at its start. Returns the new y.
fn worker_panel(
    o: &mut String,
    y: f64,
    s: &Scale,
    modules: &[ModuleLoad],
    lanes: &[usize],
    labels: &[String],
    marker: Option<(f64, &str)>,
) -> f64 {
    let mut y = y + 18.0;
    let title = "Module loads by worker";
    let _ = write!(o, r#"<text class="panel-title" x="10" y="{y:.1}">{title}</text>"#);
    let a = modules.iter().map(|m| m.start_us).fold(f64::INFINITY, f64::min);
    let b = modules.iter().map(|m| m.start_us + m.total_us).fold(0.0, f64::max);
    let sum: f64 = modules.iter().map(|m| m.total_us).sum();
    let workers = labels.iter().filter(|l| l.starts_with("worker ")).count();
    let note = format!(
        "{} modules on {workers} workers, {} ms of loads in {} ms ({}–{} ms after boot)",
        modules.len(),
        ms(sum),
        ms(b - a),
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
    let axis_top = y;
    let body0 = y + 6.0;
    let row_h = 20.0;
    let (mut inner, mut under) = (String::new(), String::new());
    // Each lane's modules, by start: one pass, not one per lane.
    let mut by_lane: Vec<Vec<usize>> = vec![Vec::new(); labels.len()];
    for (i, &l) in lanes.iter().enumerate() {
        by_lane[l].push(i);
    }
    for (k, label) in labels.iter().enumerate() {
        let ry = body0 + 4.0 + k as f64 * row_h;
        if k % 2 == 1 {
            stripe(&mut under, s, ry, row_h);
        }
        let _ = write!(
            o,
            r#"<text class="lane-label" data-lane-label="{k}" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            s.x0 - 8.0,
            ry + 14.0,
            esc(label)
        );
        let idx = &mut by_lane[k];
        idx.sort_by(|&i, &j| modules[i].start_us.total_cmp(&modules[j].start_us));
        for &i in idx.iter() {
            draw_bar(&mut inner, s, &Bar::Module(&modules[i]), ry + 2.5, row_h - 5.0, LANE_CLASS);
        }
    }
    let body1 = body0 + 4.0 + labels.len() as f64 * row_h + 4.0;
    finish_panel(o, s, &under, &inner, axis_top, body0, body1, marker)
}

/// The timeline of a series' median repetition (None without repetitions),
/// noting which repetition it is when there are several.
pub(crate) fn series_timeline(s: &crate::run::model::Series, phases: &[String]) -> Option<String> {
    let (i, rep) = crate::run::model::median_repetition(s.variant)?;
    let n = s.variant.repetitions.len();
    let note = if n > 1 { format!("repetition {} of {n} (the median)", i + 1) } else { String::new() };
    Some(timeline(&s.label, &note, rep, phases))
}

/// The timeline of one repetition: built-in initcalls on one time axis,
/// module loads (split by phase) or module init functions on another, a
/// program started in the guest (one row per DDLink loader mode or
/// reordering mode, time to UI marked) on a third, and the boot's
/// processes from /init on, like bootchart, on a fourth.
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
    if rep.storm().is_some() && rep.modules.is_empty() && rep.initcalls.is_empty() {
        y += 20.0;
        let _ = write!(
            o,
            r#"<text class="note" x="12" y="{y:.1}">A duplicate-request storm: no per-module loads to draw; its figures are in the duplicate-request table.</text>"#
        );
        return wrap(&o, y + 24.0, "timeline", &heading);
    }
    let mut entries: Vec<(String, &str)> = vec![("built-in initcall".into(), BUILTIN)];
    let has_modules = !rep.modules.is_empty();
    if has_modules {
        entries.extend(phases.iter().map(|p| (phase_title(p), phase_color(p))));
    } else if model::module_inits(rep).next().is_some() {
        entries.push(("module init function".into(), phase_color("init")));
    }
    entries.extend(crate::workload::timeline_legend(rep));
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
        if let Some((lanes, labels)) = worker_lanes(&rep.modules) {
            y = worker_panel(&mut o, y, &s, &rep.modules, &lanes, &labels, init);
        } else {
            let note = format!("{} {what}, {} ms in all, {}–{} ms after boot", mods.len(), ms(sum), ms(a), ms(b));
            y = panel(&mut o, y, title, &note, &s, &mods, DETAIL_MODULES, what, init);
        }
    }
    let starts;
    (y, starts) = crate::workload::timeline_panels(&mut o, y, rep);
    y = super::userspace::processes_panel(&mut o, y, &rep.processes);
    if builtin.is_empty() && mods.is_empty() && !starts && rep.processes.is_empty() {
        y += 20.0;
        let _ = write!(
            o,
            r#"<text class="note" x="12" y="{y:.1}">No initcalls or module loads in this repetition (boot with initcall_debug to get initcalls).</text>"#
        );
        y += 16.0;
    }
    wrap(&o, y + 8.0, "timeline", &heading)
}
