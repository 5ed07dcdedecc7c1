//! The workspace's layers, enforced. Three crates, each above the one
//! before: the product (`crates/bootlink`: what users ship), the lab
//! (`crates/bootlink-lab`: boots, run records, charts, LAVA) and the binary
//! (`bootlink-cli`: `src/main.rs`, `src/cli/`). Inside each crate a module
//! may use the layers below its own and, within a layer, its own top-level
//! module and what is listed here. A layer names modules by path
//! (`chart::svg`; `*` is any one name: `workload::*::record` is every
//! workload's record); a file is in the layer of the longest path naming it. Nothing imports upward: the product names neither the lab nor a
//! command-line parser, the lab names no parser, no file imports a file
//! that imports it back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A crate of the workspace: its package, its source directory (from the
/// workspace root), and its top-level modules in layers, bottom first, each
/// with what it is for (docs/architecture.md's table is written from this).
struct Crate {
    package: &'static str,
    src: &'static str,
    layers: &'static [Layer],
    /// Imports allowed within one layer (from, to).
    same_layer: &'static [(&'static str, &'static str)],
}

struct Layer {
    name: &'static str,
    /// Module paths, `*` for any one name.
    modules: &'static [&'static str],
    what: &'static str,
}

const PRODUCT: Crate = Crate {
    package: "bootlink",
    src: "crates/bootlink/src",
    layers: &[
        Layer {
            name: "ground",
            modules: &[
                "error", "fsutil", "buildlog", "compress", "elf", "bytes", "reloc", "report", "table", "progress",
                "hosttool", "series", "cbuild", "rng", "panic", "cache",
            ],
            what: "one error type; file helpers (mapped bytes, atomic writes, `TempDir`, the cache directory, the \
                   source tree); the cache's sealed entries, checked on every read; XZ/zstd/gzip/LZ4/LZO; checked ELF64 views and typed records; fixed-width fields of the other byte formats; relocations; text tables; terminal \
                   progress; the one shape of a command's result (`Report`); the log of the builds a run waited for; the one host-tool runner; quilt series; building the repository's C; a portable RNG; \
                   the panic hook",
        },
        Layer {
            name: "model",
            modules: &["kernel", "module", "modcheck", "tree", "kmod", "fetch", "debsrc"],
            what: "a kernel image (vmlinux, bzImage, arm64 Image) and its exports and KASLR; one module and its \
                   checks; many modules read in parallel; module sets, dependency order and the batch loader's \
                   plan; Debian kernel and source packages",
        },
        Layer {
            name: "transforms",
            modules: &[
                "preresolve",
                "symhash",
                "finalize",
                "modwrite",
                "elfedit",
                "sign",
                "inspect",
                "kbuild",
                "glibc",
                "ddlink",
                "order",
                "manifest",
            ],
            what: "each thing bootlink does to modules, kernels or programs, and the builds it needs",
        },
        Layer {
            name: "steps",
            modules: &["steps"],
            what: "the build-time steps in order: one list for the lab's variants and `bootlink apply`",
        },
        Layer {
            name: "apply",
            modules: &["apply"],
            what: "a user's own kernel build and installed modules taken through the steps",
        },
    ],
    same_layer: &[
        ("preresolve", "elfedit"),
        ("preresolve", "sign"),
        ("preresolve", "modwrite"),
        ("symhash", "elfedit"),
        ("symhash", "sign"),
        ("symhash", "modwrite"),
        ("finalize", "elfedit"),
        ("finalize", "sign"),
        ("finalize", "modwrite"),
        // folding refuses modules whose .ftrace_checked it would invalidate
        ("preresolve", "finalize"),
        ("kbuild", "sign"),
        ("modwrite", "sign"),
        // `manifest write --bzimage` finds the object tree in kbuild's build.json
        ("manifest", "kbuild"),
    ],
};

const LAB: Crate = Crate {
    package: "bootlink-lab",
    src: "crates/bootlink-lab/src",
    layers: &[
        Layer {
            name: "workload records",
            modules: &["workload::start", "workload::*::record"],
            what: "each workload's results as run.json holds them (`workload/<name>/record.rs`), and the start of \
                   a program that DDLink's and reordering's share",
        },
        Layer {
            name: "run results",
            modules: &["run"],
            what: "what a boot measured, as the lab writes it and the charts read it: run.json (its one list of \
                   workload results), kernel logs, ftrace, the before/after summary",
        },
        Layer {
            name: "lab basics",
            modules: &["lab"],
            what: "targets and QEMU, the initramfs and its cpio, busybox and Debian packages, the processes and \
                   clock of a boot, host programs copied into the guest, the distribution-config kernel",
        },
        Layer {
            name: "chart primitives",
            modules: &["chart::svg"],
            what: "SVG drawing: scales, axes, legends, panels, program starts' bars, process lanes",
        },
        Layer {
            name: "workloads",
            modules: &["workload::base", "workload::*"],
            what: "what runs in the guest, one folder each (`workload/<name>/`): its spec, host side, /init \
                   part, console parser, tables and chart pieces; `base` is what every workload is given",
        },
        Layer {
            name: "workload registry",
            modules: &["workload"],
            what: "the workloads listed once (`workload/mod.rs`): `Spec`, `build`, their charts and tables",
        },
        Layer {
            name: "variants, boots",
            modules: &["lab::variant", "lab::scenario"],
            what: "variants parsed, prepared and booted under QEMU, their consoles parsed",
        },
        Layer {
            name: "LAVA",
            modules: &["lava"],
            what: "the lab's variants as LAVA jobs, and their logs read back with the lab's parser",
        },
        Layer {
            name: "lab runs",
            modules: &["lab::setup", "lab::scenario_file", "lab::survey"],
            what: "`bootlink lab`: a scenario from the command line or a file, booted and checked, or written \
                   as LAVA jobs; surveys",
        },
        Layer {
            name: "system",
            modules: &["system"],
            what: "a real Debian system (systemd, udev, initramfs-tools) on a virtual disk, booted on the lab's \
                   QEMU to multi-user.target; its console read into a record of the boot and its module loads",
        },
        Layer {
            name: "charts, advice",
            modules: &["chart", "chart::svg::timeline", "recommend"],
            what: "HTML, SVG and Perfetto views of runs; the kernel image that reaches /init first from a storage",
        },
    ],
    same_layer: &[("recommend", "chart")],
};

const CLI: Crate = Crate {
    package: "bootlink-cli",
    src: "src",
    layers: &[Layer {
        name: "cli",
        modules: &["cli"],
        what: "the `bootlink` binary: arguments mapped onto the crates' requests, reports printed",
    }],
    same_layer: &[],
};

const CRATES: [&Crate; 3] = [&PRODUCT, &LAB, &CLI];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

impl Crate {
    fn src_dir(&self) -> PathBuf {
        root().join(self.src)
    }

    /// The layer of a module path (segments from the crate root, a type or
    /// function at its end allowed): that of the longest listed path that
    /// starts it, a name before a `*`.
    fn layer_of<S: AsRef<str>>(&self, path: &[S]) -> Option<usize> {
        let mut best: Option<(usize, usize, usize)> = None; // (length, names, layer)
        for (i, l) in self.layers.iter().enumerate() {
            for m in l.modules {
                let segs: Vec<&str> = m.split("::").collect();
                let fits =
                    segs.len() <= path.len() && segs.iter().zip(path).all(|(a, b)| *a == "*" || *a == b.as_ref());
                let key = (segs.len(), segs.iter().filter(|s| **s != "*").count(), i);
                if fits && best.is_none_or(|b| (key.0, key.1) > (b.0, b.1)) {
                    best = Some(key);
                }
            }
        }
        best.map(|b| b.2)
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        rust_files(&self.src_dir(), &mut files);
        files.sort();
        files
    }
}

/// The workspace's packages a crate's manifest depends on (normal
/// dependencies), and whether it names clap.
fn dependencies(package: &Crate) -> Vec<String> {
    let dir = root().join(package.src).parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    let deps = manifest.get("dependencies").and_then(|d| d.as_table()).cloned().unwrap_or_default();
    deps.keys().cloned().collect()
}

#[test]
fn crates_depend_downward_only() {
    let product = dependencies(&PRODUCT);
    let lab = dependencies(&LAB);
    let cli = dependencies(&CLI);
    assert!(product.len() > 5, "the product's dependencies were not read: {product:?}");
    for forbidden in ["bootlink-lab", "bootlink-cli", "clap"] {
        assert!(!product.iter().any(|d| d == forbidden), "the product crate depends on {forbidden}");
    }
    for forbidden in ["bootlink-cli", "clap"] {
        assert!(!lab.iter().any(|d| d == forbidden), "the lab crate depends on {forbidden}");
    }
    assert!(lab.iter().any(|d| d == "bootlink"), "the lab is built on the product crate: {lab:?}");
    assert!(cli.iter().any(|d| d == "bootlink") && cli.iter().any(|d| d == "bootlink-lab"), "{cli:?}");
    // ... and the sources agree with the manifests.
    for (c, names) in [(&PRODUCT, &["bootlink_lab", "clap::"][..]), (&LAB, &["clap::"][..])] {
        let mut seen = 0;
        for f in c.files() {
            let text = std::fs::read_to_string(&f).unwrap();
            seen += 1;
            for n in names {
                assert!(!text.contains(n), "{}: names {n}, above the {} crate", f.display(), c.package);
            }
        }
        assert!(seen > 10, "{}: only {seen} files read", c.package);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The paths a file names as `crate::a::b...` (the names after `crate::`,
/// up to a `{` group or anything else).
fn crate_paths(text: &str) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        // `bootlink::crate::` never occurs; skip `$crate::` in macros.
        if text[..i].ends_with('$') {
            continue;
        }
        let mut rest = &text[i + "crate::".len()..];
        let mut path = Vec::new();
        loop {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if name.is_empty() {
                break;
            }
            rest = &rest[name.len()..];
            path.push(name);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        if !path.is_empty() {
            out.insert(path);
        }
    }
    out
}

/// The top-level modules a file names as `crate::X`.
fn crate_refs(text: &str) -> BTreeSet<String> {
    crate_paths(text).into_iter().map(|p| p[0].clone()).collect()
}

#[test]
fn no_module_imports_upward() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for c in CRATES {
        let src = c.src_dir();
        for f in c.files() {
            let rel = f.strip_prefix(&src).unwrap();
            let own_path = module_of(rel);
            let Some(top) = own_path.first().cloned() else { continue }; // lib.rs, main.rs
            let Some(own) = c.layer_of(&own_path) else {
                problems.push(format!(
                    "{}/{}: module {} is in no layer (add it to tests/offline/layering.rs)",
                    c.src,
                    rel.display(),
                    own_path.join("::")
                ));
                continue;
            };
            let text = std::fs::read_to_string(&f).unwrap();
            for named in crate_paths(&text) {
                let r = &named[0];
                if r == "Error" || r == "Result" {
                    continue;
                }
                // The module it names: that of the deepest file the path reaches.
                let p = match file_of(&src, &named) {
                    Some(file) => module_of(file.strip_prefix(&src).unwrap()),
                    None => named.clone(),
                };
                let Some(theirs) = c.layer_of(&p) else {
                    problems.push(format!("{}/{}: uses crate::{r}, which is in no layer", c.src, rel.display()));
                    continue;
                };
                // Its own top-level module, in its own layer: one unit.
                if *r == top && theirs == own {
                    continue;
                }
                checked += 1;
                let ok = theirs < own
                    || (theirs == own
                        && ((c.package == "bootlink" && own <= 1)
                            || c.same_layer.contains(&(top.as_str(), r.as_str()))));
                if !ok {
                    problems.push(format!(
                        "{}/{}: {} ({}) uses crate::{} ({})",
                        c.src,
                        rel.display(),
                        own_path.join("::"),
                        c.layers[own].name,
                        p.join("::"),
                        c.layers[theirs].name
                    ));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} cross-module uses found: is the scan broken?");
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
}

#[test]
fn the_scan_sees_uses() {
    let refs = crate_refs("use crate::run::results::Run;\nlet x = crate::lab::qemu::run(); macro $crate::foo");
    assert_eq!(refs.into_iter().collect::<Vec<_>>(), ["lab", "run"]);
    let paths = crate_paths("use crate::workload::order::{self, Spec};\nlet r = crate::run::results::Run::default();");
    let paths: Vec<String> = paths.into_iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["run::results::Run::default", "workload::order"]);
}

#[test]
fn a_file_is_in_the_layer_of_its_longest_path() {
    let layer = |p: &str| LAB.layers[LAB.layer_of(&p.split("::").collect::<Vec<_>>()).unwrap()].name;
    assert_eq!(layer("workload::order::record::OrderStarts"), "workload records");
    assert_eq!(layer("workload::start"), "workload records");
    assert_eq!(layer("workload::order::chart"), "workloads");
    assert_eq!(layer("workload::base::Workload"), "workloads");
    assert_eq!(layer("workload"), "workload registry");
    assert_eq!(layer("chart::svg::timeline"), "charts, advice");
    assert_eq!(layer("chart::svg::userspace"), "chart primitives");
    assert_eq!(layer("lab::setup::Request"), "lab runs");
    assert_eq!(layer("lab::scenario::Scenario"), "variants, boots");
    assert_eq!(layer("lab::qemu"), "lab basics");
    assert_eq!(PRODUCT.layers[PRODUCT.layer_of(&["steps", "Step"]).unwrap()].name, "steps");
    // A path is read as the module of the deepest file it reaches: the
    // registry's Spec is the registry's, not a workload's.
    let src = LAB.src_dir();
    let spec = file_of(&src, &["workload".to_string(), "Spec".to_string()]).unwrap();
    assert_eq!(module_of(spec.strip_prefix(&src).unwrap()), ["workload"]);
}

/// docs/architecture.md's layer table, from the lists above.
fn layer_table() -> String {
    let mut t = String::from("| crate | layer | modules | for |\n|---|---|---|---|\n");
    for c in CRATES {
        for l in c.layers {
            let mods: Vec<String> = l.modules.iter().map(|m| format!("`{m}`")).collect();
            let what: String = l.what.split_whitespace().collect::<Vec<_>>().join(" ");
            t.push_str(&format!("| `{}` | {} | {} | {} |\n", c.package, l.name, mods.join(", "), what));
        }
    }
    t
}

/// The layer table in docs/architecture.md is this test's own list:
/// `scripts/layer-table` writes it (BOOTLINK_WRITE_DOCS=1), and the test
/// fails while the page says anything else.
#[test]
fn the_architecture_page_shows_these_layers() {
    let table = layer_table();
    let page = root().join("docs/architecture.md");
    if std::env::var_os("BOOTLINK_WRITE_DOCS").is_some() {
        let mut child = std::process::Command::new(root().join("scripts/doc-region"))
            .arg(&page)
            .arg("layers")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(table.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "scripts/doc-region failed");
    }
    let text = std::fs::read_to_string(&page).unwrap();
    let begin = "<!-- begin layers (written by scripts/layer-table) -->\n";
    let from = text.find(begin).expect("docs/architecture.md has no layers region") + begin.len();
    let to = text[from..].find("<!-- end layers -->").expect("the layers region is not closed") + from;
    assert_eq!(&text[from..to], table, "docs/architecture.md's layer table is stale: run scripts/layer-table");
}

/// The module path of a file under a crate's src/ (`chart/svg/mod.rs` -> chart::svg).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// The file of the deepest module named by `path` (segments from the crate
/// root), if any.
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    let mut best = None;
    let mut dir = src.to_path_buf();
    for seg in path {
        let (file, modrs) = (dir.join(format!("{seg}.rs")), dir.join(seg).join("mod.rs"));
        if file.is_file() {
            best = Some(file);
        } else if modrs.is_file() {
            best = Some(modrs);
        } else {
            break;
        }
        dir = dir.join(seg);
    }
    best
}

/// The module paths a file names with `crate::`, `super::` or `self::`
/// (outside comments), brace groups of `use` expanded one level. `own` is
/// the file's module; `super` is its parent for a mod.rs and a plain file alike.
fn module_refs(text: &str, own: &[String]) -> Vec<Vec<String>> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        for (start, _) in line.match_indices("::") {
            // the path's first segment: the identifier just before `::`
            let before = &line[..start];
            let first: String = before.chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let first: String = first.chars().rev().collect();
            let at = start - first.len();
            if line[..at].ends_with("::") || line[..at].ends_with('$') {
                continue; // not the start of a path
            }
            let mut base: Vec<String> = match first.as_str() {
                "crate" => Vec::new(),
                "self" => own.to_vec(),
                "super" => own[..own.len().saturating_sub(1)].to_vec(),
                _ => continue,
            };
            let mut rest = &line[start + 2..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            // leading segments, then an optional `{a, b::c}` group
            loop {
                let seg = ident(rest);
                if seg.is_empty() {
                    break;
                }
                base.push(seg.clone());
                match rest[seg.len()..].strip_prefix("::") {
                    Some(r) => rest = r,
                    None => {
                        rest = "";
                        break;
                    }
                }
            }
            if let Some(group) = rest.strip_prefix('{') {
                for item in group.split(['}', ',']).take_while(|s| !s.contains(';')) {
                    let mut p = base.clone();
                    p.extend(item.trim().split("::").map(ident).take_while(|s| !s.is_empty()));
                    out.push(p);
                }
            } else {
                out.push(base);
            }
        }
    }
    out
}

#[test]
fn no_import_cycles_between_files() {
    let mut seen = 0;
    let mut problems = Vec::new();
    for c in CRATES {
        let src = c.src_dir();
        let files = c.files();
        let index = |f: &Path| files.iter().position(|g| g == f);
        let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
        for (i, f) in files.iter().enumerate() {
            let rel = f.strip_prefix(&src).unwrap();
            let own = module_of(rel);
            let whole = std::fs::read_to_string(f).unwrap();
            // A file's unit tests (`#[cfg(test)] mod tests`, at its end) may use
            // what the file's callers are: they are not part of the build.
            let text = match whole.find("#[cfg(test)]\nmod tests") {
                Some(at) => &whole[..at],
                None => &whole[..],
            };
            for p in module_refs(text, &own) {
                let Some(target) = file_of(&src, &p) else { continue };
                let Some(j) = index(&target) else { continue };
                let tmod = module_of(target.strip_prefix(&src).unwrap());
                // A module and its parents (re-exports, `mod x;`) are one unit.
                if j == i || own.starts_with(&tmod) || tmod.starts_with(&own) {
                    continue;
                }
                seen += 1;
                edges[i].insert(j);
            }
        }
        // Cycles: a file that reaches itself again.
        let name = |i: usize| format!("{}/{}", c.src, files[i].strip_prefix(&src).unwrap().display());
        for a in 0..files.len() {
            for &b in &edges[a] {
                // is there a path b -> ... -> a?
                let mut stack = vec![b];
                let mut visited = BTreeSet::new();
                let mut back = false;
                while let Some(n) = stack.pop() {
                    if n == a {
                        back = true;
                        break;
                    }
                    if visited.insert(n) {
                        stack.extend(edges[n].iter().copied());
                    }
                }
                if back && a < b {
                    problems.push(format!(
                        "{} and {} import each other (directly or through others)",
                        name(a),
                        name(b)
                    ));
                }
            }
        }
    }
    assert!(seen > 100, "only {seen} file-to-file uses found: is the scan broken?");
    assert!(problems.is_empty(), "import cycles:\n{}", problems.join("\n"));
}

#[test]
fn the_cycle_scan_resolves_paths() {
    let own = vec!["chart".to_string(), "svg".to_string(), "userspace".to_string()];
    let refs = module_refs("use super::panel::{finish_panel, stripe};\nuse crate::run::{model, results::X};", &own);
    assert!(refs.contains(&vec!["chart".into(), "svg".into(), "panel".into(), "finish_panel".into()]), "{refs:?}");
    assert!(refs.contains(&vec!["run".into(), "results".into(), "X".into()]), "{refs:?}");
}
