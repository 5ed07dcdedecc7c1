//! The real system's boots side by side (`bootlink chart` of `bootlink
//! system` records): one row per boot, its links in time order
//! ([`crate::system::links`]) as coloured segments from the kernel's start
//! to multi-user.target, and under them a strip where a module load was
//! under way. Kernels that differ in one fix show where the time went.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::svg::{GUTTER, RIGHT, STYLE, Scale, WIDTH, axis, esc, legend, ms, wrap};
use crate::system::parse::Boot;
use crate::system::spans;
use bootlink::error::{Error, Kind, Result};

/// What the chart reads of a system.json.
#[derive(Debug, Clone, Deserialize)]
pub struct Record {
    pub boot: Boot,
    #[serde(default)]
    pub clock: String,
    #[serde(default)]
    pub cpus: u32,
}

/// A boot to draw: its name (the record's directory) and record.
#[derive(Debug, Clone)]
pub struct Named {
    pub name: String,
    pub record: Record,
}

/// The system.json of `path`: the file itself or the one in a directory;
/// None when `path` holds no system record (a lab run, a kernel log).
pub fn record_path(path: &Path) -> Option<PathBuf> {
    let file = if path.is_dir() { path.join("system.json") } else { path.to_path_buf() };
    (file.file_name()? == "system.json" && file.is_file()).then_some(file)
}

/// Read one record, named after its directory.
pub fn load(file: &Path) -> Result<Named> {
    // As every input: a regular file (one link followed), at most 256 MiB of text.
    let data = bootlink::fsutil::read_input_text(file)?;
    let record: Record = serde_json::from_str(&data)
        .map_err(|e| Error::file(Kind::Format, file, format!("not a bootlink system.json: {e}")))?;
    if record.boot.links.is_empty() {
        return Err(Error::file(
            Kind::Format,
            file,
            "the record has no links (a boot without tracing, or recorded before bootlink cut boots into links)",
        ));
    }
    let name = file.parent().and_then(|d| d.file_name()).map_or("system".into(), |n| n.to_string_lossy().into_owned());
    Ok(Named { name, record })
}

/// The colour of a link by its stage.
fn color(link: &str) -> &'static str {
    match link.split(':').next().unwrap_or("") {
        "kernel" => "#5b7083",
        "initrd" => "#2f855a",
        "systemd" => "#b7791f",
        _ => "#805ad5",
    }
}

const ROW: f64 = 34.0;
const BAR: f64 = 18.0;
const STRIP: f64 = 6.0;
const LOADING: &str = "#c53030";

/// The boots as one SVG document.
pub fn svg(boots: &[Named]) -> String {
    let end = boots.iter().map(|b| b.record.boot.multi_user_ms).fold(0.0, f64::max) * 1000.0;
    let s = Scale { t0: 0.0, t1: end.max(1.0), x0: GUTTER + 80.0, x1: WIDTH - RIGHT };
    let mut o = String::new();
    let mut y = 24.0;
    let _ = write!(
        o,
        r#"<style>{STYLE}</style><text class="chart-title" x="10" y="{y}">The boot to multi-user.target, link by link</text>"#
    );
    y += 18.0;
    let first = &boots[0].record;
    let _ = write!(
        o,
        r#"<text class="note" x="10" y="{y}">{} clock, {} CPU; ms on the kernel's clock; under each bar (red): a module load under way</text>"#,
        esc(&first.clock),
        first.cpus
    );
    y += 30.0;
    axis(&mut o, &s, y, true, Some((y, y + ROW * boots.len() as f64)));
    y += 6.0;
    for b in boots {
        let boot = &b.record.boot;
        let _ = write!(
            o,
            r#"<text class="row-label" x="10" y="{:.1}">{}</text>"#,
            y + BAR - 5.0,
            esc(&super::svg::fit(&b.name, GUTTER + 70.0, 12.0))
        );
        for l in &boot.links {
            let (x0, x1) = (s.x(l.start_ms * 1000.0), s.x(l.end_ms * 1000.0));
            let loading =
                l.loading_ms.map_or(String::new(), |m| format!(", a module load under way {} ms", ms(m * 1000.0)));
            let _ = write!(
                o,
                r#"<rect class="seg" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{BAR}" fill="{}"><title>{}: {} ms from {} ms{}</title></rect>"#,
                (x1 - x0).max(0.5),
                color(&l.name),
                esc(&l.name),
                ms(l.ms() * 1000.0),
                ms(l.start_ms * 1000.0),
                loading
            );
        }
        for (from, to) in loads(boot) {
            let (x0, x1) = (s.x(from), s.x(to));
            let _ = write!(
                o,
                r#"<rect class="loading" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{STRIP}" fill="{LOADING}"/>"#,
                y + BAR + 1.0,
                (x1 - x0).max(0.5)
            );
        }
        let _ = write!(
            o,
            r#"<text class="value" x="{:.1}" y="{:.1}">{} ms</text>"#,
            s.x(boot.multi_user_ms * 1000.0) + 4.0,
            y + BAR - 5.0,
            ms(boot.multi_user_ms * 1000.0)
        );
        y += ROW;
    }
    y += 16.0;
    let entries: Vec<(String, &str)> = [
        ("kernel (set-up, initcalls, to /init)", color("kernel")),
        ("initrd (coldplug, root, scripts)", color("initrd")),
        ("switch_root", color("switch_root")),
        ("systemd to multi-user.target", color("systemd")),
        ("a module load under way", LOADING),
    ]
    .iter()
    .map(|(l, c)| (l.to_string(), *c))
    .collect();
    y += legend(&mut o, 10.0, y, &entries);
    let mut doc = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    doc.push_str(&wrap(&o, y + 10.0, "system", "bootlink: the system's boot, link by link"));
    doc.push('\n');
    doc
}

/// The intervals (µs) during which a load was under way, up to the target,
/// overlapping loads merged ([`spans::merged`]).
fn loads(b: &Boot) -> Vec<(f64, f64)> {
    let starts: Vec<(f64, f64)> = b
        .modules
        .iter()
        .filter_map(|m| Some((m.start_ms? * 1000.0, m.load_us?)))
        .chain(b.failed_loads.iter().map(|f| (f.start_ms * 1000.0, f.load_us)))
        .collect();
    spans::merged(&starts, 0.0, b.multi_user_ms * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::links::Link;
    use crate::system::parse::Module;

    fn boot(target: f64) -> Named {
        let link = |name: &str, a: f64, z: f64| Link {
            name: name.into(),
            start_ms: a,
            end_ms: z,
            loading_ms: Some(0.0),
            parts: vec![],
        };
        let module = |name: &str, at: f64, us: f64| Module {
            name: name.into(),
            size: 1,
            in_initrd: true,
            load_us: Some(us),
            start_ms: Some(at),
            phases: vec![],
            on_cpu: None,
        };
        let boot = Boot {
            multi_user_ms: target,
            links: vec![
                link("kernel: a", 0.0, 100.0),
                link("initrd: b", 100.0, 300.0),
                link("systemd: c", 300.0, target),
            ],
            modules: vec![module("a", 120.0, 50_000.0), module("b", 150.0, 50_000.0), module("c", 400.0, 10_000.0)],
            ..Boot::default()
        };
        Named { name: "patched".into(), record: Record { boot, clock: "icount".into(), cpus: 1 } }
    }

    #[test]
    fn one_row_per_boot_its_links_and_its_loading() {
        let svg = svg(&[boot(500.0), Named { name: "applied".into(), ..boot(450.0) }]);
        assert_eq!(svg.matches(r#"<rect class="seg""#).count(), 6, "{svg}");
        assert_eq!(svg.matches(r#"<rect class="loading""#).count(), 4, "two merged loads and one per boot");
        assert!(svg.contains(">patched</text>") && svg.contains(">applied</text>"));
        assert!(svg.contains("initrd: b: 200 ms from 100 ms"), "{svg}");
        assert_eq!(loads(&boot(500.0).record.boot), [(120_000.0, 200_000.0), (400_000.0, 410_000.0)]);
        // A load under way at the target is cut there; one after it is left out.
        assert_eq!(loads(&boot(405.0).record.boot).last(), Some(&(400_000.0, 405_000.0)));
    }

    #[test]
    fn a_record_without_links_is_refused() {
        let dir = bootlink::fsutil::TempDir::new("system-chart").unwrap();
        let file = dir.path().join("system.json");
        let plain = serde_json::json!({ "boot": Boot { state: "running".into(), ..Boot::default() } });
        std::fs::write(&file, plain.to_string()).unwrap();
        assert_eq!(record_path(dir.path()), Some(file.clone()));
        let e = load(&file).unwrap_err().to_string();
        assert!(e.contains("system.json") && e.contains("no links"), "{e}");
        std::fs::write(&file, "not json").unwrap();
        assert!(load(&file).unwrap_err().to_string().contains("not a bootlink system.json"));
        assert_eq!(record_path(&dir.path().join("run.json")), None);
    }
}
