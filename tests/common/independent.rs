//! `bootlink inspect`'s figures counted another way, for the tests that
//! check them: each module's undefined symbols by binutils' `nm -u`,
//! resolved against a Module.symvers (the distribution's own, from its
//! headers package), so a pinned figure has a source other than
//! bootlink's own reader.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::arm64::Symvers;

/// Every module's undefined symbols by `nm -u` (binutils reads x86-64 and
/// AArch64 objects alike), keyed by path.
pub fn undefined_by_nm(modules: &Path) -> BTreeMap<PathBuf, Vec<String>> {
    let files = modules_below(modules);
    let mut out: BTreeMap<PathBuf, Vec<String>> = files.iter().map(|f| (f.clone(), Vec::new())).collect();
    for chunk in files.chunks(500) {
        let mut args = vec!["-u", "-A"];
        args.extend(chunk.iter().map(|p| p.to_str().unwrap()));
        let text = String::from_utf8(super::sh("nm", &args)).unwrap();
        for line in text.lines() {
            let (file, rest) = line.split_once(": ").unwrap();
            let name = rest.split_whitespace().last().unwrap();
            out.get_mut(Path::new(file)).unwrap().push(name.to_string());
        }
    }
    out
}

/// Every `.ko` file below `dir`, sorted (a plain walk: not bootlink's).
pub fn modules_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "ko") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// inspect's totals, counted from `nm` and Module.symvers: what `--json`'s
/// `totals` must hold, and each module's (undefined, from vmlinux) by path.
pub struct Totals {
    pub modules: u64,
    pub undefined: u64,
    pub vmlinux: u64,
    pub modules_only: u64,
    pub unresolved: u64,
    pub distinct_names: u64,
    pub fully_preresolvable: u64,
    pub no_undefined: u64,
    pub by_path: HashMap<PathBuf, (u64, u64)>,
}

pub fn totals(undef: &BTreeMap<PathBuf, Vec<String>>, sv: &Symvers) -> Totals {
    let mut t = Totals {
        modules: undef.len() as u64,
        undefined: 0,
        vmlinux: 0,
        modules_only: 0,
        unresolved: 0,
        distinct_names: 0,
        fully_preresolvable: 0,
        no_undefined: 0,
        by_path: HashMap::new(),
    };
    let mut distinct = HashSet::new();
    for (p, names) in undef {
        let v = names.iter().filter(|u| sv.vmlinux.contains_key(*u)).count() as u64;
        let m = names.iter().filter(|u| !sv.vmlinux.contains_key(*u) && sv.modules.contains(*u)).count() as u64;
        let n = names.len() as u64;
        t.undefined += n;
        t.vmlinux += v;
        t.modules_only += m;
        t.unresolved += n - v - m;
        t.fully_preresolvable += (v == n) as u64;
        t.no_undefined += (n == 0) as u64;
        distinct.extend(names.iter().map(String::as_str));
        t.by_path.insert(p.clone(), (n, v));
    }
    t.distinct_names = distinct.len() as u64;
    t
}

/// inspect's `--json` report against the independent count: every total
/// and every module's two figures.
pub fn assert_inspect_equals(r: &serde_json::Value, want: &Totals) {
    let t = &r["totals"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(n(&t["modules"]), want.modules);
    assert_eq!(
        (n(&t["undefined"]), n(&t["vmlinux"]), n(&t["modules_only"]), n(&t["unresolved"])),
        (want.undefined, want.vmlinux, want.modules_only, want.unresolved)
    );
    assert_eq!(n(&t["distinct_names"]), want.distinct_names);
    assert_eq!((n(&t["fully_preresolvable"]), n(&t["no_undefined"])), (want.fully_preresolvable, want.no_undefined));
    for m in r["modules"].as_array().unwrap() {
        let p = PathBuf::from(m["path"].as_str().unwrap());
        assert_eq!(Some(&(n(&m["undefined"]), n(&m["vmlinux"]))), want.by_path.get(&p), "{}", p.display());
    }
}
