//! The HTML report: one self-contained file (inline CSS and SVG, no script,
//! nothing fetched) with the before/after tables, the timelines, the
//! per-module phase bars and the longest links.

use std::fmt::Write;

use crate::run::results::Run;

use super::svg::{self, BUILTIN, esc, ms, phase_color, phase_title};
use crate::run::model::{self, ModuleMean, Row, Stat, Summary};

const CSS: &str = "
:root{color-scheme:light}
body{margin:0;background:#f4f5f7;color:#1f2933;font:14px/1.45 'DejaVu Sans','Segoe UI',Roboto,Helvetica,Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:20px}
h1{font-size:24px;margin:4px 0 2px}
h2{font-size:18px;margin:0 0 10px}
h3{font-size:14px;margin:14px 0 6px;color:#3e4c59}
.sub{color:#616e7c;margin:0 0 16px}
section{background:#fff;border:1px solid #e4e7eb;border-radius:8px;padding:16px 18px;margin:0 0 18px;overflow-x:auto}
svg.chart{display:block;max-width:100%;height:auto;margin:4px 0 10px}
table{border-collapse:collapse;margin:4px 0 12px;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid #e4e7eb;text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
th{background:#f4f5f7;color:#3e4c59;font-weight:600}
th:first-child,td:first-child,td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fafbfc}
tr.total td{font-weight:700;border-top:2px solid #cbd2d9}
tr.step td{font-size:12px;color:#3e4c59}
td .spread{display:block;font-size:11px;color:#7b8794}
.gain-down{color:#1e7b34;font-weight:600}
.gain-up{color:#b42318;font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:0 0 8px}
.legend span{display:inline-flex;align-items:center;gap:6px}
.legend i{display:inline-block;width:14px;height:12px;border-radius:2px}
.note{color:#616e7c;font-size:12px}
.warn{color:#b42318}
.grid{display:flex;flex-wrap:wrap;gap:0 28px}
code{font-size:12px;background:#f4f5f7;padding:1px 4px;border-radius:3px;white-space:pre-wrap;word-break:break-all}
footer{color:#7b8794;font-size:12px;text-align:center;margin:8px 0 24px}
";

fn stat_cell(v: Option<Stat>, unit: &str) -> String {
    let Some(s) = v else { return "<td>–</td>".into() };
    let fmt = |x: f64| {
        if unit == "count" { bootlink::table::thousands(x.round().max(0.0) as usize) } else { format!("{} ms", ms(x)) }
    };
    let mut c = format!("<td>{}", fmt(s.median));
    if s.n > 1 {
        let sd = if unit == "count" { format!("{:.0}", s.stddev) } else { ms(s.stddev) };
        let _ = write!(c, r#"<span class="spread">{}–{} · sd {sd} · n={}</span>"#, fmt(s.min), fmt(s.max), s.n);
    }
    c.push_str("</td>");
    c
}

fn gain_cell(g: Option<f64>) -> String {
    match g {
        None => "<td>–</td>".into(),
        Some(g) => {
            let class = if g < -0.05 {
                "gain-down"
            } else if g > 0.05 {
                "gain-up"
            } else {
                ""
            };
            let sign = if g > 0.0 { "+" } else { "" };
            format!(r#"<td class="{class}">{sign}{g:.2} %</td>"#)
        }
    }
}

fn row_name(r: &Row) -> String {
    match r.name.as_str() {
        "total" => "Total (module loads)".into(),
        "symbol lookups" => "symbol lookups (count)".into(),
        n if n.starts_with("  ") => n.trim_start().to_string(),
        n => phase_title(n),
    }
}

fn before_after(o: &mut String, sum: &Summary, phases: &[String]) {
    // Series other than the baseline with nothing measured in any row (a
    // duplicate-request storm loads no modules one by one) get no columns.
    let measured = |i: usize| sum.rows.iter().any(|r| r.values[i].is_some());
    let shown: Vec<usize> = (0..sum.series.len()).filter(|&i| i == 0 || measured(i)).collect();
    let labels: Vec<&str> = shown.iter().map(|&i| sum.series[i].label.as_str()).collect();
    let left_out: Vec<&str> =
        (0..sum.series.len()).filter(|i| !shown.contains(i)).map(|i| sum.series[i].label.as_str()).collect();
    o.push_str(r#"<section id="before-after"><h2>Before / after</h2>"#);
    let _ = write!(
        o,
        r#"<p class="note">Baseline (old): <b>{}</b>. Figures are medians over repetitions; gain = (new − old) / old × 100 on the medians; negative is faster. Spread: min–max and standard deviation over repetitions.</p>"#,
        esc(labels[0])
    );
    if !left_out.is_empty() {
        let _ = write!(
            o,
            r#"<p class="note">Not in these tables (no module loads or initcalls measured): {}.</p>"#,
            esc(&left_out.join(", "))
        );
    }
    let header = |o: &mut String, first: &str| {
        let _ = write!(o, "<table><tr><th>{first}</th><th>{} (old)</th>", esc(labels[0]));
        for l in &labels[1..] {
            let _ = write!(o, "<th>{}</th><th>gain</th>", esc(l));
        }
        o.push_str("</tr>");
    };
    header(o, "Phase");
    let mut parent = "";
    for r in &sum.rows {
        // Finalize's and init's links ("  ORC sort") sit under their phase,
        // indented, with their shade of its colour.
        let step = r.name.strip_prefix("  ");
        if step.is_none() {
            parent = &r.name;
        }
        let class = match (r.name.as_str(), step) {
            ("total", _) => r#" class="total""#,
            (_, Some(_)) => r#" class="step""#,
            _ => "",
        };
        let swatch = if let Some(st) = step {
            format!(
                r#"<i style="display:inline-block;width:8px;height:8px;border-radius:2px;margin:0 6px 0 14px;background:{}"></i>"#,
                phase_color(&crate::run::model::step_link(parent, st))
            )
        } else if phases.contains(&r.name) {
            format!(
                r#"<i style="display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:{}"></i>"#,
                phase_color(&r.name)
            )
        } else {
            String::new()
        };
        let _ = write!(o, "<tr{class}><td>{swatch}{}</td>{}", esc(&row_name(r)), stat_cell(r.values[0], r.unit));
        for &i in &shown[1..] {
            o.push_str(&stat_cell(r.values[i], r.unit));
            o.push_str(&gain_cell(r.gain_pct[i]));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    if !sum.modules.is_empty() {
        const MAX: usize = 40;
        let _ = write!(
            o,
            "<h3>Per module: load time (load_module + init), {} modules{}</h3>",
            sum.modules.len(),
            if sum.modules.len() > MAX { format!(", the {MAX} longest in the baseline") } else { String::new() }
        );
        header(o, "Module");
        for m in sum.modules.iter().take(MAX) {
            let _ = write!(o, "<tr><td>{}</td>{}", esc(&m.module), stat_cell(m.values[0], "us"));
            for &i in &shown[1..] {
                o.push_str(&stat_cell(m.values[i], "us"));
                o.push_str(&gain_cell(m.gain_pct[i]));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    o.push_str("</section>");
}

fn links_section(
    o: &mut String,
    label: &str,
    means: &[ModuleMean],
    rep: Option<&crate::run::results::Repetition>,
    multi: bool,
) {
    let title = if multi { format!("Longest links: {label}") } else { "Longest links".into() };
    let _ = write!(
        o,
        r#"<section class="longest"><h2>{}</h2><p class="note">The biggest contributors first. Module figures are means over repetitions; shares are of the module set's load time.</p><div class="grid">"#,
        esc(&title)
    );
    if !means.is_empty() {
        let by_phase = model::links_by_phase(means);
        o.push_str(
            "<div><h3>By phase</h3><table><tr><th>Phase</th><th>time</th><th>share</th><th>longest in</th></tr>",
        );
        for l in &by_phase {
            let _ = write!(
                o,
                r#"<tr><td><i style="display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:{}"></i>{}</td><td>{} ms</td><td>{:.1} %</td><td class="l">{}</td></tr>"#,
                phase_color(&l.what),
                esc(&phase_title(&l.what)),
                ms(l.us),
                l.share_pct,
                esc(&l.detail)
            );
        }
        o.push_str("</table></div>");
        let total: f64 = means.iter().map(|m| m.total.mean).sum();
        o.push_str("<div><h3>By module</h3><table><tr><th>Module</th><th>total</th><th>share</th><th class=\"l\">largest phase</th></tr>");
        for m in means.iter().take(15) {
            let top = m.phases.iter().max_by(|a, b| a.1.total_cmp(&b.1)).filter(|p| p.1 > 0.0);
            let top = top.map(|(p, us)| {
                format!(
                    "{} {} ms ({:.0} %)",
                    phase_title(p),
                    ms(*us),
                    if m.total.mean > 0.0 { us / m.total.mean * 100.0 } else { 0.0 }
                )
            });
            let _ = write!(
                o,
                r#"<tr><td>{}</td><td>{} ms</td><td>{:.1} %</td><td class="l">{}</td></tr>"#,
                esc(&m.name),
                ms(m.total.mean),
                if total > 0.0 { m.total.mean / total * 100.0 } else { 0.0 },
                esc(&top.unwrap_or_default())
            );
        }
        o.push_str("</table></div>");
        o.push_str("<div><h3>By module and phase</h3><table><tr><th>Module</th><th class=\"l\">phase</th><th>time</th><th>share</th></tr>");
        for l in model::links_by_module_phase(means, 15) {
            let _ = write!(
                o,
                r#"<tr><td>{}</td><td class="l">{}</td><td>{} ms</td><td>{:.1} %</td></tr>"#,
                esc(&l.what),
                esc(&phase_title(&l.detail)),
                ms(l.us),
                l.share_pct
            );
        }
        o.push_str("</table></div>");
    }
    if let Some(rep) = rep.filter(|r| !r.initcalls.is_empty()) {
        o.push_str("<div><h3>Initcalls</h3><table><tr><th>Initcall</th><th class=\"l\">module</th><th>time</th><th>share</th></tr>");
        for l in model::longest_initcalls(rep, 15) {
            let _ = write!(
                o,
                r#"<tr><td>{}</td><td class="l">{}</td><td>{} ms</td><td>{:.1} %</td></tr>"#,
                esc(&l.what),
                if l.detail.is_empty() { "built-in".to_string() } else { esc(&l.detail).into_owned() },
                ms(l.us),
                l.share_pct
            );
        }
        o.push_str(
            "</table><p class=\"note\">Share of all initcall time in the repetition the timeline shows.</p></div>",
        );
    }
    o.push_str("</div></section>");
}

fn runs_section(o: &mut String, runs: &[Run]) {
    o.push_str(r#"<section id="runs"><h2>Runs</h2><table><tr><th>#</th><th class="l">source</th><th class="l">kernel</th><th class="l">timing</th><th class="l">module set</th><th class="l">variants (repetitions)</th></tr>"#);
    for (i, r) in runs.iter().enumerate() {
        let variants: Vec<String> =
            r.variants.iter().map(|v| format!("{} ({})", v.name, v.repetitions.len())).collect();
        let _ = write!(
            o,
            r#"<tr><td>{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td></tr>"#,
            i + 1,
            esc(&r.source),
            esc(if r.kernel_release.is_empty() { "?" } else { &r.kernel_release }),
            esc(&r.timing),
            esc(&r.module_set),
            esc(&variants.join(", "))
        );
    }
    o.push_str("</table>");
    for (i, r) in runs.iter().enumerate() {
        if !r.cmdline.is_empty() {
            let _ = write!(o, r#"<p class="note">Run {} command line: <code>{}</code></p>"#, i + 1, esc(&r.cmdline));
        }
        if r.partial || r.variants.iter().flat_map(|v| &v.repetitions).any(|x| x.partial) {
            let _ = write!(
                o,
                r#"<p class="note warn">Run {}: partial (a boot failed or timed out); what is shown is what was recorded.</p>"#,
                i + 1
            );
        }
        for f in r.variants.iter().flat_map(|v| &v.repetitions).filter_map(|x| x.failure.as_deref()) {
            let _ = write!(o, r#"<p class="note warn">Run {}: {}</p>"#, i + 1, esc(f));
        }
        if let Some(p) = r.tracing_overhead_pct {
            let _ = write!(
                o,
                r#"<p class="note">Run {}: tracing overhead {p:.1} % of the module set's load time.</p>"#,
                i + 1
            );
        }
    }
    o.push_str("</section>");
}

/// The whole report.
pub fn render(runs: &[Run]) -> String {
    let series = model::series(runs);
    let phases = model::phase_order(runs);
    let mut o = String::with_capacity(64 * 1024);
    let title = match runs.first() {
        Some(r) if !r.kernel_release.is_empty() => format!("bootlink chart: {}", r.kernel_release),
        _ => "bootlink chart".to_string(),
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{CSS}{}</style></head><body><main>",
        esc(&title),
        svg::STYLE
    );
    let _ = write!(o, "<h1>{}</h1>", esc(&title));
    let boots: Vec<String> =
        series.iter().map(|s| format!("{} ×{}", esc(&s.label), s.variant.repetitions.len())).collect();
    let what = runs
        .first()
        .map(|r| {
            let set = if r.module_set.is_empty() { String::new() } else { format!(", module set {}", r.module_set) };
            format!("{} timing{set}", r.timing)
        })
        .unwrap_or_default();
    let _ = write!(
        o,
        r#"<p class="sub">{} run(s); boots per series: {}; {}. Times are guest time, shown in milliseconds.</p>"#,
        runs.len(),
        boots.join(", "),
        esc(&what)
    );
    // The colour key, once for the page.
    o.push_str(r#"<div class="legend">"#);
    let _ = write!(o, r#"<span><i style="background:{BUILTIN}"></i>built-in initcall</span>"#);
    for p in &phases {
        let _ = write!(o, r#"<span><i style="background:{}"></i>{}</span>"#, phase_color(p), esc(&phase_title(p)));
    }
    if phases.is_empty()
        && series.iter().flat_map(|s| &s.variant.repetitions).any(|r| model::module_inits(r).next().is_some())
    {
        let _ = write!(o, r#"<span><i style="background:{}"></i>module init function</span>"#, phase_color("init"));
    }
    o.push_str("</div>");

    if series.len() >= 2 {
        // Nothing to compare (storms only, no initcalls): no empty table.
        let sum = model::summary(runs);
        if !sum.rows.is_empty() {
            before_after(&mut o, &sum, &phases);
        }
    }
    crate::workload::html_sections(&mut o, runs, &series);

    o.push_str(r#"<section id="timeline"><h2>Timeline</h2><p class="note">Like bootgraph: every initcall and module load on a time axis. Each lane at the top holds all of them (hover for names); the rows below are the longest, in time order. Module bars are split by phase. Below them, user space: a program started in the guest (its time to UI, the first output line, marked) and every process from /init on, fork to exit, like bootchart.</p>"#);
    if series.is_empty() {
        o.push_str(r#"<p class="note">No variants in these runs.</p>"#);
    }
    for s in &series {
        if let Some(t) = svg::series_timeline(s, &phases) {
            o.push_str(&t);
        }
    }
    o.push_str("</section>");

    let means: Vec<(String, Vec<ModuleMean>)> =
        series.iter().map(|s| (s.label.clone(), model::module_means(s, &phases))).collect();
    if means.iter().any(|m| !m.1.is_empty()) {
        let counts: Vec<usize> = series.iter().map(|s| s.variant.repetitions.len()).collect();
        let reps_note = if counts.iter().all(|&c| c == 1) {
            "one repetition".to_string()
        } else {
            format!("mean over repetitions ({})", counts.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "))
        };
        o.push_str(r#"<section id="modules"><h2>Module loads by phase</h2>"#);
        o.push_str(&svg::module_bars(&means, &phases, &reps_note));
        for s in &series {
            let failed = model::failed_modules(s);
            if !failed.is_empty() {
                let list: Vec<String> = failed.iter().map(|(n, st)| format!("{n} (status {st})")).collect();
                let _ =
                    write!(o, r#"<p class="note warn">{}: not loaded: {}</p>"#, esc(&s.label), esc(&list.join(", ")));
            }
        }
        o.push_str("</section>");
    }

    for (s, (_, m)) in series.iter().zip(&means) {
        let rep = model::median_repetition(s.variant).map(|r| r.1);
        if !m.is_empty() || rep.is_some_and(|r| !r.initcalls.is_empty()) {
            links_section(&mut o, &s.label, m, rep, series.len() > 1);
        }
    }
    runs_section(&mut o, runs);
    let _ = writeln!(
        o,
        "<footer>bootlink {} · self-contained: no scripts, nothing loaded from the network</footer></main></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    o
}
