//! The report's section for DDLink's program started in the guest: per
//! series, normal loading against File Read Mode and Skip Mode (startup
//! and relocation, medians over the starts), from
//! [`crate::workload::ddlink::table`].

use std::fmt::Write;

use crate::chart::svg::esc;
use crate::chart::svg::userspace::{Span, StartBar, mode_colors, modes, panel, program_name};
use crate::run::results::Run;
use crate::workload::ddlink::record::{DdlinkStart, DdlinkStarts};
use crate::workload::ddlink::table::{ms_spread, speedup, tables};
use bootlink::table::{ms, thousands};

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

impl StartBar for DdlinkStart {
    fn spans(&self) -> (Option<Span>, Option<Span>) {
        inner_spans(self)
    }
    fn relocation_us(&self) -> Option<f64> {
        self.relocation_us
    }
    fn figures(&self, t: &mut String) {
        if let Some(l) = self.loader_us {
            let _ = write!(t, "\nld.so: {} ms", ms(l));
        }
        if let Some(l) = self.load_objects_us {
            let _ = write!(t, "\n  loading objects: {} ms", ms(l));
        }
        if let Some(r) = self.relocation_us {
            let _ = write!(t, "\n  relocation: {} ms", ms(r));
        }
        if let Some(n) = self.lookups {
            let _ = write!(t, "\nsymbol lookups: {}", bootlink::table::thousands(n as usize));
        }
    }
    fn notes(&self, t: &mut String) {
        for d in self.decision.split("; ").filter(|d| !d.is_empty()) {
            let _ = write!(t, "\n{d}");
        }
    }
}

/// Legend entries of DDLink's starts: the modes that have starts.
pub(crate) fn legend_ddlink(u: &DdlinkStarts) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for m in modes(&u.starts) {
        let [start, ldso, reloc] = mode_colors(m);
        out.push((format!("{m}: start"), start));
        out.push((format!("{m}: ld.so"), ldso));
        out.push((format!("{m}: relocation"), reloc));
    }
    out
}

/// ld.so's part of a start and the relocation inside it, as (start,
/// duration) clamped to the start's bar: ld.so runs first (the fork and
/// exec before it are not told apart), relocation after it loaded the
/// objects.
pub(crate) fn inner_spans(s: &DdlinkStart) -> (Option<Span>, Option<Span>) {
    let end = s.start_us + s.duration_us.max(0.0);
    let ldso = s.loader_us.map(|l| (s.start_us, l.min(end - s.start_us).max(0.0)));
    let ld_end = ldso.map(|(a, d)| a + d).unwrap_or(end);
    let reloc = s.relocation_us.map(|r| {
        let a = (s.start_us + s.load_objects_us.unwrap_or(0.0)).min(ld_end);
        (a, r.min(ld_end - a).max(0.0))
    });
    (ldso, reloc)
}

/// DDLink's panel; returns the new y.
pub(crate) fn panel_ddlink(o: &mut String, y: f64, u: &DdlinkStarts) -> f64 {
    let program = program_name(&u.command);
    let title = format!("User space: {program} under the patched ld.so");
    panel(o, y, &title, "darker: ld.so, darkest: its relocation", &program, &u.starts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::start::Start;

    #[test]
    fn inner_parts_stay_inside_the_bar() {
        let s = DdlinkStart {
            start: Start { mode: "normal".into(), start_us: 1000.0, duration_us: 100.0, ..Default::default() },
            loader_us: Some(80.0),
            load_objects_us: Some(10.0),
            relocation_us: Some(60.0),
            ..Default::default()
        };
        assert_eq!(inner_spans(&s), (Some((1000.0, 80.0)), Some((1010.0, 60.0))));
        // Figures larger than the span (another clock) are cut to it.
        let s = DdlinkStart { loader_us: Some(500.0), relocation_us: Some(400.0), ..s };
        assert_eq!(inner_spans(&s), (Some((1000.0, 100.0)), Some((1010.0, 90.0))));
        let s = DdlinkStart { loader_us: None, load_objects_us: None, ..s };
        assert_eq!(inner_spans(&s), (None, Some((1000.0, 100.0))));
    }
}
