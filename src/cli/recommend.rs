//! `bootlink recommend`

use std::path::PathBuf;
use std::process::ExitCode;

use bootlink::Error;
use bootlink_lab::recommend;

use super::print_json;

#[derive(clap::Args)]
pub struct Args {
    /// A lab run that booted the candidate images (e.g. kernel:build+lz4, kernel:build+xz,
    /// kernel:build,image:vmlinux), deterministic; variants that store the module set differently
    /// (compress:xz, decompress:kernel...) are the module candidates
    run: PathBuf,
    /// The storage the image is read from: slow (1 MiB/s, 100 us per 4 KiB request), nand (8 MiB/s,
    /// 50 us), nor (4 MiB/s, 5 us) or MIBS-USEC (e.g. 25-50, 0.5-100)
    #[arg(long, value_parser = recommend::Storage::parse)]
    storage: recommend::Storage,
    /// Also draw the chart (reset to /init against throughput, one line per image) as SVG
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also draw the module set's chart (its files read and loaded against throughput, one line
    /// per way of storing them) as SVG
    #[arg(long)]
    modules_svg: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let r = recommend::run(&recommend::Options { run: a.run, storage: a.storage })?;
    if let Some(path) = &a.svg {
        bootlink::fsutil::write_atomic(path, recommend::chart(&r).as_bytes())?;
    }
    if let Some(path) = &a.modules_svg {
        let Some(svg) = recommend::module_chart(&r) else {
            return Err(Error::file(
                bootlink::error::Kind::Usage,
                &r.run,
                "--modules-svg: this run loaded no module set (its variants name no module files)",
            ));
        };
        bootlink::fsutil::write_atomic(path, svg.as_bytes())?;
    }
    if a.json {
        print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    let ms = |us: f64| format!("{:.1} ms", us / 1000.0);
    println!(
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
    print!("{}", t.render());
    match r.margin_us {
        Some(m) => println!("best: {}, {} sooner at /init than {}", r.best, ms(m), r.candidates[1].variant),
        None => println!("best: {} (the only candidate)", r.best),
    }
    print_envelope("best", &r.envelope, r.storage.latency_us);
    if !r.modules.is_empty() {
        println!("the module set ({} modules), read one file after the other and loaded:", r.modules[0].files);
        let mut t =
            bootlink::table::Table::new(&["variant", "files", "decompressed by", "read", "read time", "load", "total"]);
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
        print!("{}", t.render());
        if let Some(best) = &r.best_modules {
            match r.modules_margin_us {
                Some(m) => println!("best module files: {best}, {} sooner than {}", ms(m), r.modules[1].variant),
                None => println!("best module files: {best} (the only candidate)"),
            }
        }
        print_envelope("best module files", &r.modules_envelope, r.storage.latency_us);
        if let (Some(best), Some(total)) = (&r.best_modules, r.best_total_us) {
            println!("reset until the set is loaded: {} ({} image, {} module files)", ms(total), r.best, best);
        }
    }
    for l in &r.left_out {
        println!("left out: {}: {}", l.variant, l.why);
    }
    Ok(ExitCode::SUCCESS)
}

/// The best candidate by throughput, one range a line.
fn print_envelope(what: &str, ranges: &[recommend::Range], latency_us: f64) {
    println!("{what} by throughput at {latency_us} us per request:");
    for g in ranges {
        let to = g.to_mib_s.map(|t| format!("{t:.2} MiB/s")).unwrap_or_else(|| "any speed".into());
        println!("  {:>10.2} MiB/s to {to}: {}", g.from_mib_s, g.variant);
    }
}
