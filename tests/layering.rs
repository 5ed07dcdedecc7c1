//! The library's layers, enforced: a module may use the layers below its
//! own and, within a layer, only what is listed here. Nothing imports
//! upward (the lab does not call the charts; the run results are below
//! both; preresolve does not use the inspect report).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, bottom layer first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "ground",
        &["error", "fsutil", "compress", "elf", "table", "progress", "hosttool", "series", "cbuild", "rng", "panic"],
    ),
    ("model", &["kernel", "module", "modcheck", "tree", "kmod", "fetch", "debsrc"]),
    (
        "transforms",
        &[
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
    ),
    ("run results", &["run"]),
    ("lab", &["lab"]),
    ("chart", &["chart"]),
];

/// Imports allowed within one layer (from, to). Ground and model modules
/// may use each other freely.
const SAME_LAYER: &[(&str, &str)] = &[
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
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
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

/// The top-level modules a file names as `crate::X`.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        // `bootlink::crate::` never occurs; skip `$crate::` in macros.
        if text[..i].ends_with('$') {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

#[test]
fn no_module_imports_upward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if top == "main" || top == "lib" {
            continue;
        }
        let Some(own) = layer_of(&top) else {
            problems.push(format!("src/{}: module {top} is in no layer (add it to LAYERS)", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for r in crate_refs(&text) {
            if r == top || r == "Error" || r == "Result" {
                continue;
            }
            let Some(theirs) = layer_of(&r) else {
                problems.push(format!("src/{}: uses crate::{r}, which is in no layer", rel.display()));
                continue;
            };
            checked += 1;
            let ok = theirs < own || (theirs == own && (own <= 1 || SAME_LAYER.contains(&(top.as_str(), r.as_str()))));
            if !ok {
                problems.push(format!(
                    "src/{}: {top} ({}) uses crate::{r} ({})",
                    rel.display(),
                    LAYERS[own].0,
                    LAYERS[theirs].0
                ));
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
}
