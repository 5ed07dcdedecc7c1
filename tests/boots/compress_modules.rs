//! The module set's compression against storage speed, at reduced size:
//! nine modules (xfs, ext4, vfat and their dependencies) of the self-built
//! kernel (BOOTLINK_TEST_LINE for the line), loaded by the batch loader
//! under `module.sig_enforce=1` with a module hash manifest (so every load
//! is checked against the digest of the decompressed module), stored
//! plain, compressed and decompressed in user space, compressed and
//! decompressed by the kernel (the MODULE_DECOMPRESS flavour of the line's
//! format: xz on 6.1, zstd on 6.12); and `bootlink recommend` on that run.
//! The lab patch that hashes the bytes read instead (`manifest:read`),
//! which nothing else here needs, is the extended tier's
//! (tests/extended/compress_hash_read.rs). The full grid (the 194-module
//! set, every format, both paths) is `bench/compress-modules`.

use crate::common;

use std::path::PathBuf;
use std::sync::OnceLock;

use bootlink_lab::run::results::{Run, Variant};
use common::TestCommand;

struct Grid {
    dir: PathBuf,
    run: Run,
}

const MODULES: [&str; 3] = ["xfs", "ext4", "vfat"];

fn grid() -> &'static Grid {
    static G: OnceLock<Grid> = OnceLock::new();
    G.get_or_init(|| {
        let k = common::build_kernel();
        let format = common::module_decompress_format();
        let checked = "modules:unsigned,manifest:on,loader:batch-1,cmdline:module.sig_enforce=1";
        let variants = [
            format!("plain={k},{checked}"),
            format!("user={k},{checked},compress:{format},decompress:user"),
            format!("kernel={k}+modules-{format},{checked},compress:{format},decompress:kernel"),
        ];
        let mut head = vec!["--no-trace", "-n", "1"];
        head.extend(MODULES);
        let (dir, run) = common::lab_variants("compress-modules", &head, &variants);
        Grid { dir, run }
    })
}

#[test]
fn each_path_decompresses_what_it_says_and_the_manifest_holds_on_both() {
    let g = grid();
    let (plain, user, kernel) =
        (common::variant(&g.run, "plain"), common::variant(&g.run, "user"), common::variant(&g.run, "kernel"));
    let files = |v: &Variant| v.module_files.clone().unwrap_or_else(|| panic!("{}: no module files", v.name));
    let n = files(plain).files;
    assert!(n >= 9, "{n} modules");
    for (v, compression, by_kernel, by_user) in [
        (plain, "none", 0, 0),
        (user, common::module_decompress_format(), 0, n),
        (kernel, common::module_decompress_format(), n, 0),
    ] {
        let f = files(v);
        assert_eq!((f.compression.as_str(), f.files), (compression, n), "{}", v.name);
        // whole 4 KiB requests per file
        assert!(f.requests_4k >= f.file_bytes.div_ceil(4096) && f.requests_4k <= f.file_bytes / 4096 + n, "{f:?}");
        let l = common::loader_of(v);
        // every module loaded under sig_enforce: its decompressed digest
        // is in the manifest, whichever side decompressed it
        assert!(l.not_loaded.is_empty() && l.exit == 0, "{}: {l:?}", v.name);
        assert_eq!(v.repetitions[0].modules.len() as u64, n, "{}", v.name);
        assert_eq!((l.decompressed_by_kernel, l.decompressed_by_user), (by_kernel, by_user), "{}", v.name);
        assert!(v.cmdline.contains("module.sig_enforce=1"), "{}", v.name);
    }
    // compressed files are a fraction of the plain ones
    assert!(files(user).file_bytes * 3 < files(plain).file_bytes, "{:?} vs {:?}", files(user), files(plain));
    assert_eq!(files(user).file_bytes, files(kernel).file_bytes);
    // decompressing costs load time; the kernel's path saves user space's
    // fork, exec and pipe around the same kind of decoder
    let load = |v: &Variant| v.repetitions[0].modules_total_us;
    assert!(load(plain) < load(kernel), "{} vs {}", load(plain), load(kernel));
    assert!(load(kernel) < load(user), "{} vs {}", load(kernel), load(user));
}

#[test]
fn the_kernel_path_without_module_decompress_refuses_every_module() {
    let refused = format!(
        "refused={},compress:{},loader:batch-1,decompress:kernel",
        common::build_kernel(),
        common::module_decompress_format()
    );
    // EOPNOTSUPP: no user-space fallback took over
    let (out, run) = common::failing_lab("compress-modules-refused", &MODULES, &refused);
    assert!(out.contains("insmod exited 95"), "{out}");
    let v = common::variant(&run, "refused");
    let l = common::loader_of(v);
    let n = v.module_files.as_ref().unwrap().files as usize;
    // the set's roots fail, the rest for their dependencies
    assert_eq!(l.not_loaded.len(), n, "{l:?}");
    assert!(l.not_loaded.iter().any(|(_, r)| r == "failed"), "{l:?}");
    assert_eq!((l.decompressed_by_kernel, l.decompressed_by_user), (0, 0), "{l:?}");
}

#[test]
fn recommend_ranks_the_module_files_by_the_flash_model() {
    let g = grid();
    let o = TestCommand::new(&[&"recommend", &g.dir, &"--storage", &"nand", &"--json"]).ok();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    // nand: 50 us and 4 KiB at 8 MiB/s per request
    let request_us = 50.0 + 4096.0 / (8.0 * 1_048_576.0) * 1e6;
    let mods = r["modules"].as_array().unwrap();
    let names: Vec<&str> = mods.iter().map(|m| m["variant"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let mut last = 0.0;
    for m in mods {
        let v = common::variant(&g.run, m["variant"].as_str().unwrap());
        let files = v.module_files.as_ref().unwrap();
        assert_eq!(m["requests_4k"].as_u64().unwrap(), files.requests_4k);
        assert!((f(&m["read_us"]) - files.requests_4k as f64 * request_us).abs() < 1e-6, "{m}");
        assert_eq!(f(&m["load_us"]), v.repetitions[0].modules_total_us);
        assert!((f(&m["total_us"]) - f(&m["read_us"]) - f(&m["load_us"])).abs() < 1e-6);
        assert!(f(&m["total_us"]) >= last, "fastest first");
        last = f(&m["total_us"]);
    }
    assert_eq!(r["best_modules"], mods[0]["variant"]);
    let best_total = f(&r["candidates"][0]["total_us"]) + f(&mods[0]["total_us"]);
    assert!((f(&r["best_total_us"]) - best_total).abs() < 1e-6);
    // each range of the envelope names the set that is fastest inside it
    let envelope = r["modules_envelope"].as_array().unwrap();
    assert!(!envelope.is_empty());
    for e in envelope {
        let from = f(&e["from_mib_s"]);
        let mid = match e["to_mib_s"].as_f64() {
            Some(to) => (from.max(to / 1e3) + to) / 2.0,
            None => from * 2.0 + 1.0,
        };
        let request = 50.0 + 4096.0 / (mid * 1_048_576.0) * 1e6;
        let best = mods
            .iter()
            .min_by(|a, b| {
                let t = |m: &serde_json::Value| m["requests_4k"].as_f64().unwrap() * request + f(&m["load_us"]);
                t(a).total_cmp(&t(b))
            })
            .unwrap();
        assert_eq!(e["variant"], best["variant"], "at {mid} MiB/s: {e}");
    }
    // the chart draws one line per way of storing the set
    let svg = common::tmpdir("compress-modules-svg").keep().join("modules.svg");
    let text =
        common::stdout(&TestCommand::new(&[&"recommend", &g.dir, &"--storage", &"nand", &"--modules-svg", &svg]).ok());
    assert!(text.contains("best module files: "), "{text}");
    let chart = std::fs::read_to_string(&svg).unwrap();
    for name in names {
        assert!(chart.contains(&format!("<title>{name}</title>")), "{name}");
    }
}
