//! The report's section for DDLink's program started in the guest: per
//! series, normal loading against File Read Mode and Skip Mode (startup
//! and relocation, medians over the starts), from
//! [`crate::run::userspace`].

use std::fmt::Write;

use crate::run::results::Run;
use crate::run::userspace::{ms_spread, speedup, tables};
use bootlink::table::{ms, thousands};

use super::svg::esc;
use super::svg::userspace::mode_colors;

/// The section, or nothing when no series started a program.
pub fn html(o: &mut String, runs: &[Run]) {
    let tables = tables(runs);
    if tables.is_empty() {
        return;
    }
    o.push_str(r#"<section id="userspace"><h2>User space: before / after DDLink</h2>"#);
    o.push_str(
        r#"<p class="note">A program started in the guest after the modules loaded, under the patched ld.so: normal loading (no cache), File Read Mode (the bindings from a cache), Skip Mode (prelinked images in place, relocation skipped). Startup: guest time from a kernel log marker just before the start to one after the exit. ld.so and relocation: the loader's own statistics (<code>LD_DEBUG=statistics</code>, converted with the guest's TSC rate). Medians over all starts, range in brackets; "vs normal" is how many times faster.</p>"#,
    );
    for t in &tables {
        let base = t.baseline();
        let _ = write!(
            o,
            r#"<h3>{}: {} ({} timing, {} boot(s))</h3><p class="note"><code>{}</code></p>"#,
            esc(&t.label),
            esc(t.program()),
            esc(&t.timing),
            t.repetitions,
            esc(&t.command)
        );
        o.push_str(r#"<table class="userspace"><tr><th class="l">mode</th><th>starts</th><th>startup</th><th>vs normal</th><th>ld.so</th><th>relocation</th><th>vs normal</th><th>lookups</th><th class="l">output</th><th class="l">loader's decision</th></tr>"#);
        for r in &t.rows {
            let swatch = format!(
                r#"<i style="display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:{}"></i>"#,
                mode_colors(&r.mode)[1]
            );
            let starts =
                if r.failed > 0 { format!("{} ({} failed)", r.starts, r.failed) } else { r.starts.to_string() };
            let _ = write!(
                o,
                r#"<tr data-user-mode="{}"><td class="l">{swatch}{}</td><td>{}</td><td>{} ms</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class="l{}">{}</td><td class="l">{}</td></tr>"#,
                esc(&r.mode),
                esc(&r.mode),
                esc(&starts),
                esc(&ms_spread(&r.startup_us)),
                speedup(base.map(|b| &b.startup_us), Some(&r.startup_us)),
                r.loader_us.map(|m| format!("{} ms", ms(m.median))).unwrap_or_else(|| "–".into()),
                r.relocation_us.as_ref().map(|m| format!("{} ms", ms_spread(m))).unwrap_or_else(|| "–".into()),
                speedup(base.and_then(|b| b.relocation_us.as_ref()), r.relocation_us.as_ref()),
                r.lookups.map(|l| thousands(l.round().max(0.0) as usize)).unwrap_or_else(|| "–".into()),
                if r.output_identical { "" } else { " warn" },
                if r.output_identical { "identical" } else { "DIFFERS" },
                esc(&r.decision)
            );
        }
        o.push_str("</table>");
    }
    o.push_str("</section>");
}

#[cfg(test)]
mod tests {
    use crate::run::results::{OrderStart, OrderStarts, Process, Start, WorkloadResult};
    use crate::run::userspace::tests::run;

    fn process(pid: u32, parent: u32, name: &str, t: f64, end: Option<f64>) -> Process {
        Process { pid, parent, name: name.into(), start_us: t, exec_us: Some(t + 100.0), end_us: end }
    }

    #[test]
    fn every_boot_charts_its_processes_and_order_starts_their_time_to_ui() {
        // A boot without a program: /init, the body's shell (both still
        // running at the end), two insmods one after the other.
        let mut plain = run();
        let rep = &mut plain.variants[0].repetitions[0];
        rep.workloads.clear();
        rep.processes = vec![
            process(1, 0, "init", 1_000_000.0, None),
            process(60, 1, "sh", 1_100_000.0, None),
            process(61, 60, "insmod", 1_200_000.0, Some(1_300_000.0)),
            process(62, 60, "insmod", 1_300_000.0, Some(1_500_000.0)),
        ];
        let svg = super::super::render_svg(std::slice::from_ref(&plain));
        assert_eq!(svg.matches(r#"<g class="tl-proc""#).count(), 4, "{svg}");
        assert!(svg.contains("2 still running when the trace stopped"), "{svg}");
        assert!(svg.contains("init [1], parent 0: 1000–still running at 1500 ms"), "{svg}");
        let trace: serde_json::Value = serde_json::from_str(&super::super::render_perfetto(&[plain])).unwrap();
        let ev = trace["traceEvents"].as_array().unwrap();
        let procs: Vec<&serde_json::Value> =
            ev.iter().filter(|e| e["cat"] == "process" && e["name"].as_str().unwrap().contains('[')).collect();
        assert_eq!(procs.len(), 4);
        // Still running: drawn to the last event, and said so.
        assert_eq!((procs[0]["ts"].as_f64(), procs[0]["dur"].as_f64()), (Some(1_000_000.0), Some(500_000.0)));
        assert_eq!(procs[0]["args"]["running_at_end"], true);
        // Packed like bootchart: init, sh, and both insmods on a third track.
        let tracks: std::collections::BTreeSet<u64> = procs.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
        assert_eq!(tracks.len(), 3);
        assert_eq!(procs[2]["tid"], procs[3]["tid"]);
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.starts_with("processes"))
            .collect();
        assert_eq!(names, ["processes", "processes (2)", "processes (3)"]);

        // Reordering's starts: a time-to-UI mark inside each bar, an instant in Perfetto.
        let mut ord = run();
        let starts = (0..2)
            .map(|k| OrderStart {
                start: Start {
                    mode: "unordered/4k/ra0".into(),
                    index: k,
                    start_us: 2_000_000.0 + k as f64 * 400_000.0,
                    duration_us: 300_000.0,
                    exit: 0,
                    output: "checksum 1".into(),
                },
                ui_us: Some(290_000.0),
                ..Default::default()
            })
            .collect();
        ord.variants[0].repetitions[0].workloads =
            vec![WorkloadResult::Order(OrderStarts { command: "synth: a vs b".into(), starts })];
        let svg = super::super::render_svg(std::slice::from_ref(&ord));
        assert_eq!(svg.matches(r#"<rect class="tl-ui" data-ui-us="290000""#).count(), 2, "{svg}");
        assert!(svg.contains("time to UI (first output line): 290 ms") && svg.contains("UI 290 ms"), "{svg}");
        let trace: serde_json::Value = serde_json::from_str(&super::super::render_perfetto(&[ord])).unwrap();
        let ui: Vec<&serde_json::Value> =
            trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "i").collect();
        assert_eq!(ui.len(), 2);
        assert_eq!((ui[1]["cat"].as_str(), ui[1]["ts"].as_f64()), (Some("ui"), Some(2_690_000.0)));
        assert_eq!(ui[1]["args"]["time_to_ui_us"], 290_000.0);
    }

    #[test]
    fn every_chart_shows_the_starts_by_mode() {
        let runs = [run()];
        let html = super::super::render_html(&runs);
        assert!(html.contains(r#"<section id="userspace">"#), "no user-space section");
        for m in ["normal", "file-read", "skip"] {
            assert!(html.contains(&format!(r#"<tr data-user-mode="{m}">"#)), "{m} row");
        }
        assert!(html.contains("skip mode: 12 prelinked objects, 36 runtime relocations"));
        let svg = super::super::render_svg(&runs);
        assert!(svg.contains("User space: synth-main under the patched ld.so"));
        assert_eq!(svg.matches(r#"<g class="tl-user" data-mode="skip""#).count(), 3);
        assert_eq!(svg.matches(r#"data-part="relocation""#).count(), 9);
        let trace: serde_json::Value = serde_json::from_str(&super::super::render_perfetto(&runs)).unwrap();
        let ev = trace["traceEvents"].as_array().unwrap();
        let threads: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.starts_with("ddlink"))
            .collect();
        assert_eq!(threads, ["ddlink normal", "ddlink file-read", "ddlink skip"]);
        let starts: Vec<&serde_json::Value> = ev.iter().filter(|e| e["cat"] == "ddlink").collect();
        assert_eq!(starts.len(), 9);
        assert_eq!(starts[0]["name"], "synth-main (normal #1)");
        assert_eq!(starts[0]["args"]["symbol_lookups"], 40_740);
        // ld.so and its relocation nest inside their start, on its thread.
        for s in &starts {
            let (t0, t1) = (s["ts"].as_f64().unwrap(), s["ts"].as_f64().unwrap() + s["dur"].as_f64().unwrap());
            let inner: Vec<&serde_json::Value> = ev
                .iter()
                .filter(|e| e["cat"] == "ddlink-loader" && e["tid"] == s["tid"])
                .filter(|e| e["ts"].as_f64().unwrap() >= t0 && e["ts"].as_f64().unwrap() < t1)
                .collect();
            assert_eq!(inner.len(), 2, "{s}");
            assert!(inner.iter().all(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap() <= t1));
        }
    }
}
