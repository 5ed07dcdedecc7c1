//! `bootlink recommend`'s text: the candidates' table, the best image and
//! module files, and the best candidate by throughput.

use std::fmt::Write as _;

use super::{Range, Report};

impl bootlink::report::Report for Report {
    fn render(&self) -> String {
        let r = self;
        let mut o = String::new();
        let ms = |us: f64| format!("{:.1} ms", us / 1000.0);
        let _ = writeln!(
            o,
            "kernel {} on {} (lab CPU {}), read from {} MiB/s with {} us per 4 KiB request:",
            r.kernel_release,
            r.run.display(),
            if r.cpu_model.is_empty() { "unknown" } else { &r.cpu_model },
            r.storage.mib_s,
            r.storage.latency_us
        );
        let mut t = bootlink::table::Table::new(&[
            "variant",
            "image",
            "read",
            "read time",
            "decompress",
            "reset to start_kernel",
            "reset to /init",
            "total",
        ]);
        let maybe = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "-".into());
        for c in &r.candidates {
            t.row(vec![
                c.variant.clone(),
                format!("{} {}", c.kind, c.compression),
                format!("{:.2} MB", c.read_bytes as f64 / 1e6),
                ms(c.read_us),
                maybe(c.decompress_us),
                maybe(c.start_kernel_us),
                ms(c.boot_us),
                ms(c.total_us),
            ]);
        }
        o.push_str(&t.render());
        match r.margin_us {
            Some(m) => {
                let _ = writeln!(o, "best: {}, {} sooner at /init than {}", r.best, ms(m), r.candidates[1].variant);
            }
            None => {
                let _ = writeln!(o, "best: {} (the only candidate)", r.best);
            }
        }
        envelope(&mut o, "best", &r.envelope, r.storage.latency_us);
        if !r.modules.is_empty() {
            let _ = writeln!(
                o,
                "the module set ({} modules), read one file after the other and loaded:",
                r.modules[0].files
            );
            let mut t = bootlink::table::Table::new(&[
                "variant",
                "files",
                "decompressed by",
                "read",
                "read time",
                "load",
                "total",
            ]);
            for m in &r.modules {
                t.row(vec![
                    m.variant.clone(),
                    m.compression.clone(),
                    m.decompressed_by.clone(),
                    format!("{:.2} MB", m.file_bytes as f64 / 1e6),
                    ms(m.read_us),
                    ms(m.load_us),
                    ms(m.total_us),
                ]);
            }
            o.push_str(&t.render());
            if let Some(best) = &r.best_modules {
                match r.modules_margin_us {
                    Some(m) => {
                        let _ =
                            writeln!(o, "best module files: {best}, {} sooner than {}", ms(m), r.modules[1].variant);
                    }
                    None => {
                        let _ = writeln!(o, "best module files: {best} (the only candidate)");
                    }
                }
            }
            envelope(&mut o, "best module files", &r.modules_envelope, r.storage.latency_us);
            if let (Some(best), Some(total)) = (&r.best_modules, r.best_total_us) {
                let _ = writeln!(
                    o,
                    "reset until the set is loaded: {} ({} image, {} module files)",
                    ms(total),
                    r.best,
                    best
                );
            }
        }
        for l in &r.left_out {
            let _ = writeln!(o, "left out: {}: {}", l.variant, l.why);
        }
        o
    }
}

/// The best candidate by throughput, one range a line.
fn envelope(o: &mut String, what: &str, ranges: &[Range], latency_us: f64) {
    let _ = writeln!(o, "{what} by throughput at {latency_us} us per request:");
    for g in ranges {
        let to = g.to_mib_s.map(|t| format!("{t:.2} MiB/s")).unwrap_or_else(|| "any speed".into());
        let _ = writeln!(o, "  {:>10.2} MiB/s to {to}: {}", g.from_mib_s, g.variant);
    }
}
