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
        &[
            "error", "fsutil", "compress", "elf", "reloc", "table", "progress", "hosttool", "series", "cbuild", "rng",
            "panic",
        ],
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
    // build-time steps in order (the lab's variants and `bootlink apply`)
    ("steps", &["steps"]),
    ("run results", &["run"]),
    ("lab", &["lab", "apply", "lava"]),
    ("chart", &["chart", "recommend"]),
    // the binary's command line (src/main.rs `mod cli;`), over everything
    ("cli", &["cli"]),
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
    // `manifest write --bzimage` finds the object tree in kbuild's build.json
    ("manifest", "kbuild"),
    ("recommend", "chart"),
    // LAVA jobs are the lab's variants built and its consoles parsed
    ("lava", "lab"),
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

/// The module path of a file under src/ (`chart/svg/mod.rs` -> chart::svg).
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let index = |f: &Path| files.iter().position(|g| g == f);
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    let mut seen = 0;
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
    assert!(seen > 100, "only {seen} file-to-file uses found: is the scan broken?");
    // Cycles: a file that reaches itself again.
    let name = |i: usize| files[i].strip_prefix(&src).unwrap().display().to_string();
    let known: [(&str, &str); 0] = [];
    let mut problems = Vec::new();
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
            let pair = (name(a), name(b));
            let is_known = known.iter().any(|(x, y)| (pair.0 == *x && pair.1 == *y) || (pair.0 == *y && pair.1 == *x));
            if back && a < b && !is_known {
                problems
                    .push(format!("src/{} and src/{} import each other (directly or through others)", pair.0, pair.1));
            }
        }
    }
    assert!(problems.is_empty(), "import cycles:\n{}", problems.join("\n"));
}

#[test]
fn the_cycle_scan_resolves_paths() {
    let own = vec!["chart".to_string(), "svg".to_string(), "userspace".to_string()];
    let refs = module_refs("use super::panel::{finish_panel, stripe};\nuse crate::run::{model, results::X};", &own);
    assert!(refs.contains(&vec!["chart".into(), "svg".into(), "panel".into(), "finish_panel".into()]), "{refs:?}");
    assert!(refs.contains(&vec!["run".into(), "results".into(), "X".into()]), "{refs:?}");
}
