//! Module sets for the lab: which modules a boot loads, and in what order,
//! worked out by bootlink itself from the modules' `.modinfo` (no modprobe,
//! no depmod).
//!
//! A [`ModTree`] reads every module of a tree (`lib/modules/<release>`) once,
//! in parallel, and indexes it by module name and by `alias=` entries; the
//! tree's `modules.builtin` and `modules.builtin.modinfo` tell which names
//! and aliases the kernel has built in. [`ModTree::resolve`] turns requested
//! names into a load order in which every module comes after its hard
//! dependencies (`depends=`) and its soft pre-dependencies (`softdep=pre:`),
//! each module once. Soft post-dependencies (`softdep=post:`) follow the
//! module, as modprobe loads them.
//!
//! A name is a module's name, else an alias. An alias several modules
//! provide (`crc32c`: crc32c_generic and crc32c_intel) resolves to one,
//! deterministically: one whose name is the alias, else `<alias>_generic`
//! (both also tried without a `crypto-` prefix), else a built-in provider
//! (nothing to load), else the first module by name. Built-in modules count
//! as providers of the aliases `modules.builtin.modinfo` gives them (so
//! `sha256` is the built-in sha256_generic, not the sha256_ssse3 module).
//! Aliases with wildcards (device aliases such as `pci:v...*`) are not
//! indexed.
//!
//! What the modinfo does not say is not known here: a module that asks for
//! another at run time (`request_module`, `load_nls("koi8-u")`) needs it
//! listed by the caller.
//!
//! Fixed sets are list files, one path per line relative to
//! `lib/modules/<release>/`, `#` comments; [`NAMED_SETS`] holds the ones
//! bootlink ships (`data/`).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::module::{self, Module};
use crate::tree;

/// The module sets bootlink ships, by name: list files in `data/`.
pub const NAMED_SETS: &[(&str, &str)] = &[
    // 194 modules (fs, nls, crypto, net) of Debian 6.1.0-56-amd64, the set of ../shared/MEASURED.md.
    ("fs-nls-crypto-net-194", include_str!("../../data/modset-194.txt")),
];

/// The text of a named set.
pub fn named_set(name: &str) -> Option<&'static str> {
    NAMED_SETS.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// The paths of a named set; an unknown name is an error listing the known ones.
pub fn named_set_paths(name: &str) -> Result<Vec<PathBuf>> {
    let text = named_set(name).ok_or_else(|| {
        let known: Vec<&str> = NAMED_SETS.iter().map(|(n, _)| *n).collect();
        Error::new(format!("no module set named {name:?} (known: {})", known.join(", ")))
    })?;
    parse_list(text).map_err(|e| Error::new(format!("module set {name}: {}", e.msg)))
}

/// Parse a list file's text: one module path per line, relative to
/// `lib/modules/<release>/`; blank lines and lines starting with `#` are
/// skipped. Absolute paths, `..`, names that are not module files and
/// duplicates are errors naming the line.
pub fn parse_list(text: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let p = PathBuf::from(line);
        if !p.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(Error::new(format!(
                "line {n}: {line:?}: give a path relative to lib/modules/<release>/, without '..'"
            )));
        }
        if !module::is_module_file(&p) {
            return Err(Error::new(format!("line {n}: {line:?} is not a module file (.ko, .ko.xz, .ko.zst, .ko.gz)")));
        }
        if let Some(first) = seen.insert(rel_key(&p), n) {
            return Err(Error::new(format!("line {n}: {line} is listed twice (first on line {first})")));
        }
        out.push(p);
    }
    Ok(out)
}

/// [`parse_list`] of a file.
pub fn read_list(path: &Path) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_list(&text).map_err(|e| e.at(path))
}

/// Module names and aliases compare with '-' and '_' alike, as the kernel
/// and kmod do.
pub fn normalize(name: &str) -> String {
    name.trim().replace('-', "_")
}

/// A relative module path without its compression suffix, with '/'
/// separators: the key that matches a list line to a file of the tree.
fn rel_key(rel: &Path) -> String {
    let s = rel.to_string_lossy().replace('\\', "/");
    for suffix in [".xz", ".zst", ".gz"] {
        if let Some(base) = s.strip_suffix(suffix)
            && base.ends_with(".ko")
        {
            return base.to_string();
        }
    }
    s
}

/// Split a `softdep=` value (`pre: a b post: c`) into pre- and
/// post-dependencies, appended to `pre` and `post` in the order written.
/// Words before any `pre:`/`post:` are ignored, as kmod does.
pub fn parse_softdep(value: &str, pre: &mut Vec<String>, post: &mut Vec<String>) {
    #[derive(PartialEq)]
    enum Mode {
        None,
        Pre,
        Post,
    }
    let mut mode = Mode::None;
    for word in value.split_whitespace() {
        let rest = if let Some(r) = word.strip_prefix("pre:") {
            mode = Mode::Pre;
            r
        } else if let Some(r) = word.strip_prefix("post:") {
            mode = Mode::Post;
            r
        } else {
            word
        };
        if rest.is_empty() {
            continue;
        }
        match mode {
            Mode::Pre => pre.push(rest.to_string()),
            Mode::Post => post.push(rest.to_string()),
            Mode::None => {}
        }
    }
}

fn has_wildcard(alias: &str) -> bool {
    alias.contains(['*', '?', '['])
}

/// What the resolver needs of one module file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The module name as the kernel knows it.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// The file relative to the tree's root (`kernel/fs/ext4/ext4.ko`).
    pub rel: PathBuf,
    /// `depends=`: module names, as written.
    pub depends: Vec<String>,
    /// `softdep=pre:` names (module names or aliases), in the order written.
    pub soft_pre: Vec<String>,
    /// `softdep=post:` names.
    pub soft_post: Vec<String>,
    /// `alias=` entries without wildcards.
    pub aliases: Vec<String>,
    /// The file carries an appended signature.
    pub signed: bool,
    /// The file was rewritten by a preresolver (has a `.preresolved` section).
    pub preresolved: bool,
}

impl Entry {
    fn of(m: &Module, root: &Path) -> Entry {
        let (mut soft_pre, mut soft_post) = (Vec::new(), Vec::new());
        for v in m.modinfo_all("softdep") {
            parse_softdep(v, &mut soft_pre, &mut soft_post);
        }
        Entry {
            name: normalize(&m.name),
            path: m.path.clone(),
            rel: m.path.strip_prefix(root).unwrap_or(&m.path).to_path_buf(),
            depends: m.depends().into_iter().map(str::to_string).collect(),
            soft_pre,
            soft_post,
            aliases: m.modinfo_all("alias").filter(|a| !has_wildcard(a)).map(str::to_string).collect(),
            signed: m.signature.is_some(),
            preresolved: m.preresolved,
        }
    }
}

/// Who provides a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider<'a> {
    /// A module file of the tree.
    Module(&'a Entry),
    /// A module built into the kernel (its name): nothing to load.
    Builtin(&'a str),
}

impl Provider<'_> {
    pub fn name(&self) -> &str {
        match self {
            Provider::Module(e) => &e.name,
            Provider::Builtin(n) => n,
        }
    }
}

/// Why a module is in a load plan (the first reason found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Asked for, by this name (a module name or an alias).
    Requested(String),
    /// In the `depends=` of this module.
    DependencyOf(String),
    /// A `softdep=pre:` of the module (first), asked as the second name.
    SoftPreOf(String, String),
    /// A `softdep=post:` of the module (first), asked as the second name.
    SoftPostOf(String, String),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Requested(n) => write!(f, "requested as {n}"),
            Why::DependencyOf(m) => write!(f, "dependency of {m}"),
            Why::SoftPreOf(m, n) => write!(f, "soft pre-dependency of {m} ({n})"),
            Why::SoftPostOf(m, n) => write!(f, "soft post-dependency of {m} ({n})"),
        }
    }
}

/// One module to load, in order.
#[derive(Debug, Clone)]
pub struct Step<'a> {
    pub entry: &'a Entry,
    pub why: Why,
}

/// The result of [`ModTree::resolve`].
#[derive(Debug, Clone, Default)]
pub struct LoadPlan<'a> {
    /// Modules in load order, each once.
    pub steps: Vec<Step<'a>>,
    /// Names asked for (or depended on) that the kernel has built in:
    /// (name as asked, built-in module).
    pub builtin: Vec<(String, String)>,
    /// Soft dependencies nobody provides, skipped as modprobe skips them:
    /// (module, name).
    pub missing_soft: Vec<(String, String)>,
}

impl<'a> LoadPlan<'a> {
    pub fn entries(&self) -> Vec<&'a Entry> {
        self.steps.iter().map(|s| s.entry).collect()
    }

    pub fn names(&self) -> Vec<&'a str> {
        self.steps.iter().map(|s| s.entry.name.as_str()).collect()
    }

    /// Paths relative to the tree's root, in load order.
    pub fn rel_paths(&self) -> Vec<&'a Path> {
        self.steps.iter().map(|s| s.entry.rel.as_path()).collect()
    }

    /// The plan as a list file ([`parse_list`] reads it back).
    pub fn to_list(&self) -> String {
        let mut s = String::new();
        for step in &self.steps {
            s.push_str(&format!("{}\n", step.entry.rel.display()));
        }
        s
    }
}

/// A module tree, read once and indexed.
#[derive(Debug)]
pub struct ModTree {
    root: PathBuf,
    /// Sorted by name, then relative path.
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    /// Normalized alias -> entries, sorted by name.
    by_alias: HashMap<String, Vec<usize>>,
    by_rel: HashMap<String, usize>,
    builtin: BTreeSet<String>,
    /// Normalized alias -> built-in module names, sorted.
    builtin_alias: HashMap<String, Vec<String>>,
    /// Files that could not be read: the name their file name gives, the error.
    unreadable: Vec<(String, Error)>,
}

enum Mark {
    Active,
    Done,
}

struct Walk<'t> {
    tree: &'t ModTree,
    marks: HashMap<usize, Mark>,
    /// The modules being visited, for naming a cycle.
    stack: Vec<usize>,
    plan: LoadPlan<'t>,
}

impl<'t> Walk<'t> {
    fn visit(&mut self, idx: usize, why: Why) -> Result<()> {
        let tree = self.tree;
        match self.marks.get(&idx) {
            Some(Mark::Done) => return Ok(()),
            Some(Mark::Active) => {
                let at = self.stack.iter().position(|&i| i == idx).unwrap_or(0);
                let mut cycle: Vec<&str> = self.stack[at..].iter().map(|&i| tree.entries[i].name.as_str()).collect();
                cycle.push(&tree.entries[idx].name);
                return Err(Error::file(&tree.root, format!("dependency cycle: {}", cycle.join(" -> "))));
            }
            None => {}
        }
        self.marks.insert(idx, Mark::Active);
        self.stack.push(idx);
        let e = &tree.entries[idx];
        for s in &e.soft_pre {
            self.soft(e, s, true)?;
        }
        for d in &e.depends {
            match tree.lookup_module_name(d)? {
                Some(Provider::Module(m)) => self.visit(tree.by_name[&m.name], Why::DependencyOf(e.name.clone()))?,
                Some(Provider::Builtin(b)) => self.plan.builtin.push((d.clone(), b.to_string())),
                None => {
                    return Err(Error::file(
                        &tree.root,
                        format!("module {} ({}) depends on {d}, which is not in this tree", e.name, e.rel.display()),
                    ));
                }
            }
        }
        self.stack.pop();
        self.marks.insert(idx, Mark::Done);
        self.plan.steps.push(Step { entry: e, why });
        for s in &e.soft_post {
            self.soft(e, s, false)?;
        }
        Ok(())
    }

    fn soft(&mut self, of: &Entry, name: &str, pre: bool) -> Result<()> {
        match self.tree.lookup(name)? {
            Some(Provider::Module(m)) => {
                let idx = self.tree.by_name[&m.name];
                // A soft dependency on a module being visited (it asked for
                // us first) is already as satisfied as it can be.
                if matches!(self.marks.get(&idx), Some(Mark::Active)) {
                    return Ok(());
                }
                let why = if pre {
                    Why::SoftPreOf(of.name.clone(), name.to_string())
                } else {
                    Why::SoftPostOf(of.name.clone(), name.to_string())
                };
                self.visit(idx, why)
            }
            Some(Provider::Builtin(b)) => {
                self.plan.builtin.push((name.to_string(), b.to_string()));
                Ok(())
            }
            None => {
                self.plan.missing_soft.push((of.name.clone(), name.to_string()));
                Ok(())
            }
        }
    }
}

impl ModTree {
    /// Read every module under `root` (a `lib/modules/<release>` directory)
    /// and its `modules.builtin*` files. A module that cannot be read is
    /// kept aside ([`ModTree::unreadable`]) and is an error only when a
    /// resolution needs it.
    pub fn read(root: &Path) -> Result<ModTree> {
        let paths = tree::find_modules(&[root.to_path_buf()])?;
        let mut entries = Vec::with_capacity(paths.len());
        let mut unreadable = Vec::new();
        for (path, r) in paths.iter().zip(tree::read_all(&paths)) {
            match r {
                Ok(m) => entries.push(Entry::of(&m, root)),
                Err(e) => unreadable.push((normalize(&module::name_from_path(path)), e)),
            }
        }
        let mut t = ModTree::from_entries(root, entries);
        t.unreadable = unreadable;
        t.read_builtin()?;
        Ok(t)
    }

    fn from_entries(root: &Path, mut entries: Vec<Entry>) -> ModTree {
        entries.sort_by(|a, b| (&a.name, &a.rel).cmp(&(&b.name, &b.rel)));
        let mut by_name = HashMap::new();
        let mut by_alias: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_rel = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            by_name.entry(e.name.clone()).or_insert(i);
            by_rel.entry(rel_key(&e.rel)).or_insert(i);
            for a in &e.aliases {
                let v = by_alias.entry(normalize(a)).or_default();
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        ModTree {
            root: root.to_path_buf(),
            entries,
            by_name,
            by_alias,
            by_rel,
            builtin: BTreeSet::new(),
            builtin_alias: HashMap::new(),
            unreadable: Vec::new(),
        }
    }

    /// `modules.builtin` (paths) and `modules.builtin.modinfo`
    /// (`name.key=value` strings, NUL-separated); either may be absent.
    fn read_builtin(&mut self) -> Result<()> {
        let list = self.root.join("modules.builtin");
        match std::fs::read_to_string(&list) {
            Ok(text) => {
                for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                    self.builtin.insert(normalize(&module::name_from_path(Path::new(line))));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&list, e)),
        }
        let info = self.root.join("modules.builtin.modinfo");
        match std::fs::read(&info) {
            Ok(data) => {
                for item in data.split(|&b| b == 0) {
                    let Ok(s) = std::str::from_utf8(item) else { continue };
                    let Some((key, value)) = s.split_once('=') else { continue };
                    let Some((name, key)) = key.split_once('.') else { continue };
                    let name = normalize(name);
                    if key == "alias" && !has_wildcard(value) {
                        let v = self.builtin_alias.entry(normalize(value)).or_default();
                        if !v.contains(&name) {
                            v.push(name.clone());
                        }
                    }
                    self.builtin.insert(name);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&info, e)),
        }
        for v in self.builtin_alias.values_mut() {
            v.sort();
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every module read, sorted by name.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Files that could not be read, with the module name their file name gives.
    pub fn unreadable(&self) -> &[(String, Error)] {
        &self.unreadable
    }

    /// The module file of this exact module name ('-' and '_' alike).
    pub fn module(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(&normalize(name)).map(|&i| &self.entries[i])
    }

    /// Built into the kernel under this module name.
    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&normalize(name))
    }

    fn unreadable_error(&self, n: &str) -> Option<Error> {
        self.unreadable.iter().find(|(u, _)| u == n).map(|(_, e)| Error {
            path: e.path.clone(),
            msg: format!("module {n} is needed but could not be read: {}", e.msg),
        })
    }

    /// A module name only (what `depends=` holds).
    fn lookup_module_name(&self, name: &str) -> Result<Option<Provider<'_>>> {
        let n = normalize(name);
        if let Some(&i) = self.by_name.get(&n) {
            return Ok(Some(Provider::Module(&self.entries[i])));
        }
        if let Some(b) = self.builtin.get(&n) {
            return Ok(Some(Provider::Builtin(b)));
        }
        match self.unreadable_error(&n) {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// Who provides `name`: a module file of that name; else the providers
    /// of the alias (module files, and built-in modules that declare it),
    /// chosen as the module docs say; else a built-in module of that name
    /// (lib/crc32 is built in, yet the crypto alias `crc32` is
    /// crc32_generic's). None when nobody does; an error when the module
    /// that would is unreadable.
    pub fn lookup(&self, name: &str) -> Result<Option<Provider<'_>>> {
        let n = normalize(name);
        if let Some(&i) = self.by_name.get(&n) {
            return Ok(Some(Provider::Module(&self.entries[i])));
        }
        let mods: &[usize] = self.by_alias.get(&n).map_or(&[], |v| v.as_slice());
        let bins: &[String] = self.builtin_alias.get(&n).map_or(&[], |v| v.as_slice());
        if mods.is_empty() && bins.is_empty() {
            return self.lookup_module_name(&n);
        }
        let named = |want: &str| -> Option<Provider<'_>> {
            if let Some(&i) = mods.iter().find(|&&i| self.entries[i].name == want) {
                return Some(Provider::Module(&self.entries[i]));
            }
            bins.iter().find(|b| *b == want).map(|b| Provider::Builtin(b.as_str()))
        };
        let mut wanted = vec![n.clone(), format!("{n}_generic")];
        if let Some(base) = n.strip_prefix("crypto_") {
            wanted.push(base.to_string());
            wanted.push(format!("{base}_generic"));
        }
        for w in &wanted {
            if let Some(p) = named(w) {
                return Ok(Some(p));
            }
        }
        if let Some(b) = bins.first() {
            return Ok(Some(Provider::Builtin(b)));
        }
        Ok(mods.first().map(|&i| Provider::Module(&self.entries[i])))
    }

    /// The load order for `names` (module names or aliases): each module
    /// after its soft pre-dependencies and hard dependencies, soft
    /// post-dependencies after it, each module once; requested names in the
    /// order given. Names nobody provides, unreadable modules and hard
    /// dependency cycles are errors that name the module.
    pub fn resolve<S: AsRef<str>>(&self, names: &[S]) -> Result<LoadPlan<'_>> {
        let mut walk = Walk { tree: self, marks: HashMap::new(), stack: Vec::new(), plan: LoadPlan::default() };
        for name in names {
            let name = name.as_ref();
            match self.lookup(name)? {
                Some(Provider::Module(m)) => walk.visit(self.by_name[&m.name], Why::Requested(name.to_string()))?,
                Some(Provider::Builtin(b)) => walk.plan.builtin.push((name.to_string(), b.to_string())),
                None => {
                    return Err(Error::file(
                        &self.root,
                        format!(
                            "module {name:?} not found: no module of that name or alias among the {} modules of this tree, and not built in",
                            self.entries.len()
                        ),
                    ));
                }
            }
        }
        Ok(walk.plan)
    }

    /// The modules of a list ([`parse_list`]), in its order. A path may
    /// differ from the file's by its compression suffix (`x.ko` finds
    /// `x.ko.xz`). A path missing from the tree is an error naming it.
    pub fn from_list(&self, rels: &[PathBuf]) -> Result<Vec<&Entry>> {
        rels.iter()
            .map(|rel| {
                let key = rel_key(rel);
                if let Some(&i) = self.by_rel.get(&key) {
                    return Ok(&self.entries[i]);
                }
                if let Some((_, e)) = self.unreadable.iter().find(|(_, e)| {
                    e.path.as_deref().is_some_and(|p| rel_key(p.strip_prefix(&self.root).unwrap_or(p)) == key)
                }) {
                    return Err(Error {
                        path: e.path.clone(),
                        msg: format!("listed module could not be read: {}", e.msg),
                    });
                }
                Err(Error::file(&self.root.join(rel), "listed in the module set but not in the tree"))
            })
            .collect()
    }

    /// Where a load order breaks what the modinfo says: a module before one
    /// of its hard dependencies (or with one absent and not built in), or
    /// before a soft pre-dependency that the list holds only later (`soft`;
    /// a built-in provider satisfies it).
    /// Empty when the order is good.
    pub fn check_order(&self, order: &[&Entry]) -> Vec<OrderProblem> {
        let pos: HashMap<&str, usize> = order.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
        let mut problems = Vec::new();
        for (i, e) in order.iter().enumerate() {
            let mut problem = |soft: bool, message: String| {
                problems.push(OrderProblem { module: e.name.clone(), soft, message });
            };
            for d in &e.depends {
                let dn = normalize(d);
                match pos.get(dn.as_str()) {
                    Some(&j) if j < i => {}
                    Some(&j) => {
                        problem(false, format!("{} (#{}) comes before its dependency {dn} (#{})", e.name, i + 1, j + 1))
                    }
                    None if self.builtin.contains(&dn) => {}
                    None => {
                        problem(false, format!("{} (#{}) depends on {dn}, which is not in the list", e.name, i + 1))
                    }
                }
            }
            for s in &e.soft_pre {
                // Built into the kernel: nothing to load first.
                if matches!(self.lookup(s), Ok(Some(Provider::Builtin(_)))) {
                    continue;
                }
                let sn = normalize(s);
                // Anything in the list that provides the name counts.
                let providers: Vec<usize> = order
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.name == sn || o.aliases.iter().any(|a| normalize(a) == sn))
                    .map(|(j, _)| j)
                    .collect();
                if let Some(&first) = providers.first()
                    && first > i
                {
                    let msg = format!(
                        "{} (#{}) comes before its soft pre-dependency {s} ({} #{})",
                        e.name,
                        i + 1,
                        order[first].name,
                        first + 1
                    );
                    problem(true, msg);
                }
            }
        }
        problems
    }
}

/// One way a load order breaks the modinfo ([`ModTree::check_order`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderProblem {
    pub module: String,
    /// A soft dependency (the module may still load; modprobe would have
    /// loaded the other first).
    pub soft: bool,
    pub message: String,
}

impl fmt::Display for OrderProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    #[test]
    fn lists_parse_with_comments_and_refuse_bad_lines() {
        let l = parse_list("# a set\n\nkernel/fs/fat/fat.ko\n  kernel/fs/fat/vfat.ko.xz  \n# end\n").unwrap();
        assert_eq!(l, vec![PathBuf::from("kernel/fs/fat/fat.ko"), PathBuf::from("kernel/fs/fat/vfat.ko.xz")]);
        let e = parse_list("kernel/a.ko\n/abs/b.ko\n").unwrap_err().msg;
        assert!(e.contains("line 2") && e.contains("/abs/b.ko"), "{e}");
        assert!(parse_list("kernel/../x.ko\n").unwrap_err().msg.contains("'..'"));
        assert!(parse_list("kernel/readme.txt\n").unwrap_err().msg.contains("not a module file"));
        let e = parse_list("kernel/a.ko\n#\nkernel/a.ko.xz\n").unwrap_err().msg;
        assert!(e.contains("line 3") && e.contains("first on line 1"), "{e}");
    }

    #[test]
    fn softdeps_split_into_pre_and_post() {
        let (mut pre, mut post) = (Vec::new(), Vec::new());
        parse_softdep("pre: crc32c crypto-crc32c post: x", &mut pre, &mut post);
        parse_softdep("ignored pre:blake2b-256", &mut pre, &mut post);
        assert_eq!(pre, ["crc32c", "crypto-crc32c", "blake2b-256"]);
        assert_eq!(post, ["x"]);
        assert_eq!(normalize("nls_koi8-ru"), "nls_koi8_ru");
    }

    #[test]
    fn the_named_set_has_194_distinct_modules() {
        let l = named_set_paths("fs-nls-crypto-net-194").unwrap();
        assert_eq!(l.len(), 194);
        assert!(l.iter().all(|p| p.starts_with("kernel")));
        assert!(named_set_paths("nope").unwrap_err().msg.contains("fs-nls-crypto-net-194"));
    }

    fn entry(name: &str, depends: &[&str], soft: &str, aliases: &[&str]) -> Entry {
        let (mut soft_pre, mut soft_post) = (Vec::new(), Vec::new());
        parse_softdep(soft, &mut soft_pre, &mut soft_post);
        Entry {
            name: name.into(),
            path: PathBuf::from(format!("/t/kernel/{name}.ko")),
            rel: PathBuf::from(format!("kernel/{name}.ko")),
            depends: depends.iter().map(|s| s.to_string()).collect(),
            soft_pre,
            soft_post,
            aliases: aliases.iter().map(|s| s.to_string()).collect(),
            signed: false,
            preresolved: false,
        }
    }

    #[test]
    fn synthetic_orders_cycles_and_post_dependencies() {
        let t = ModTree::from_entries(
            Path::new("/t"),
            vec![
                entry("top", &["mid", "leaf"], "pre: hash post: after", &[]),
                entry("mid", &["leaf"], "", &[]),
                entry("leaf", &[], "", &[]),
                entry("hash_fast", &[], "", &["hash"]),
                entry("hash_generic", &[], "", &["hash"]),
                entry("after", &["top"], "", &[]),
                entry("loop_a", &["loop_b"], "", &[]),
                entry("loop_b", &["loop_a"], "", &[]),
                entry("lonely", &["ghost"], "pre: nobody", &[]),
                entry("soft_only", &[], "pre: nobody", &[]),
            ],
        );
        let p = t.resolve(&["top"]).unwrap();
        assert_eq!(p.names(), ["hash_generic", "leaf", "mid", "top", "after"]);
        assert_eq!(p.steps[0].why, Why::SoftPreOf("top".into(), "hash".into()));
        assert_eq!(p.steps[3].why, Why::Requested("top".into()));
        assert!(t.check_order(&p.entries()).is_empty());
        // Asking twice, or for a dependency first, loads each module once.
        assert_eq!(
            t.resolve(&["leaf", "top", "mid"]).unwrap().names(),
            ["leaf", "hash_generic", "mid", "top", "after"]
        );
        let e = t.resolve(&["loop_a"]).unwrap_err().msg;
        assert!(e.contains("dependency cycle: loop_a -> loop_b -> loop_a"), "{e}");
        let e = t.resolve(&["lonely"]).unwrap_err().msg;
        assert!(e.contains("lonely") && e.contains("depends on ghost"), "{e}");
        let p = t.resolve(&["soft_only"]).unwrap();
        assert_eq!(p.missing_soft, [("soft_only".to_string(), "nobody".to_string())]);
        let e = t.resolve(&["leaf", "no-such-module"]).unwrap_err().msg;
        assert!(e.contains("\"no-such-module\" not found"), "{e}");
        let bad: Vec<&Entry> = ["top", "leaf", "mid"].iter().map(|n| t.module(n).unwrap()).collect();
        let problems = t.check_order(&bad);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(!problems[0].soft && problems[0].module == "top", "{problems:?}");
        assert_eq!(problems[0].message, "top (#1) comes before its dependency mid (#3)");
        let soft: Vec<&Entry> = ["hash_fast", "top", "hash_generic"].iter().map(|n| t.module(n).unwrap()).collect();
        assert!(t.check_order(&soft).iter().all(|p| !p.soft), "another provider of the alias came first");
        let late: Vec<&Entry> = ["leaf", "mid", "top", "hash_generic"].iter().map(|n| t.module(n).unwrap()).collect();
        let problems = t.check_order(&late);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].soft && problems[0].message.contains("soft pre-dependency hash (hash_generic #4)"),
            "{problems:?}"
        );
    }

    #[test]
    fn unreadable_modules_are_errors_only_when_needed() {
        let f = crate::fetch::fetch(&crate::fetch::Request::Reference).expect("fetch the reference kernel");
        let tmp = crate::lab::TempDir::new("modset-test").unwrap();
        let fat = tmp.path().join("kernel/fs/fat");
        std::fs::create_dir_all(&fat).unwrap();
        for m in ["fat.ko", "vfat.ko"] {
            std::fs::copy(f.modules.join("kernel/fs/fat").join(m), fat.join(m)).unwrap();
        }
        std::fs::write(fat.join("msdos.ko"), b"not an ELF file").unwrap();
        std::fs::write(tmp.path().join("modules.builtin"), "kernel/fs/nls/nls_base.ko\n").unwrap();
        let t = ModTree::read(tmp.path()).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.unreadable().len(), 1);
        assert_eq!(t.resolve(&["vfat", "nls-base"]).unwrap().names(), ["fat", "vfat"]);
        let e = t.resolve(&["msdos"]).unwrap_err().to_string();
        assert!(e.contains("msdos.ko") && e.contains("module msdos is needed but could not be read"), "{e}");
        let e = t.from_list(&[PathBuf::from("kernel/fs/fat/msdos.ko")]).unwrap_err().to_string();
        assert!(e.contains("msdos.ko") && e.contains("could not be read"), "{e}");
        let list = t.from_list(&parse_list("kernel/fs/fat/fat.ko.xz\nkernel/fs/fat/vfat.ko\n").unwrap()).unwrap();
        assert_eq!(list.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
    }

    /// The reference kernel's module tree, read once.
    fn real() -> &'static ModTree {
        static T: OnceLock<ModTree> = OnceLock::new();
        T.get_or_init(|| {
            let f = crate::fetch::fetch(&crate::fetch::Request::Reference).expect("fetch the reference kernel");
            ModTree::read(&f.modules).expect("read the module tree")
        })
    }

    fn before(order: &[&str], a: &str, b: &str) -> bool {
        let pos = |n: &str| order.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{n} not in {order:?}"));
        pos(a) < pos(b)
    }

    #[test]
    fn real_ext4_vfat_and_aliases() {
        let t = real();
        assert!(t.len() > 4000, "{} modules", t.len());
        assert!(t.unreadable().is_empty(), "{:?}", t.unreadable());
        let p = t.resolve(&["ext4"]).unwrap();
        let o = p.names();
        // ext4's softdep is crypto-crc32c: crc32c_generic, by the rule.
        assert_eq!(o, ["crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"]);
        assert_eq!(p.steps[0].why, Why::SoftPreOf("ext4".into(), "crypto-crc32c".into()));
        assert_eq!(t.resolve(&["vfat"]).unwrap().names(), ["fat", "vfat"]);
        assert_eq!(t.resolve(&["fs-vfat"]).unwrap().names(), ["fat", "vfat"]);
        assert_eq!(t.resolve(&["nls-cp437"]).unwrap().rel_paths(), [Path::new("kernel/fs/nls/nls_cp437.ko")]);
        match t.lookup("crc32c").unwrap() {
            Some(Provider::Module(e)) => assert_eq!(e.name, "crc32c_generic"),
            other => panic!("crc32c -> {other:?}"),
        }
        // sha256 is built in (sha256_generic) though sha256_ssse3 is a module with that alias.
        assert_eq!(t.lookup("sha256").unwrap(), Some(Provider::Builtin("sha256_generic")));
        // The crypto alias crc32 is crc32_generic's, though lib/crc32 (another module name) is built in.
        assert!(matches!(t.lookup("crc32").unwrap(), Some(Provider::Module(e)) if e.name == "crc32_generic"));
        assert_eq!(t.lookup("cryptomgr").unwrap(), Some(Provider::Builtin("cryptomgr")));
        let p = t.resolve(&["cryptomgr", "libcrc32c"]).unwrap();
        assert_eq!(p.names(), ["crc32c_generic", "libcrc32c"]);
        assert_eq!(p.builtin, [("cryptomgr".to_string(), "cryptomgr".to_string())]);
        assert_eq!(t.lookup("no_such_thing").unwrap(), None);
    }

    #[test]
    fn real_xfs_btrfs_and_virtio() {
        let t = real();
        let o = t.resolve(&["xfs"]).unwrap().names();
        assert_eq!(o, ["crc32c_generic", "libcrc32c", "xfs"]);
        let p = t.resolve(&["btrfs"]).unwrap();
        let o = p.names();
        for dep in
            ["blake2b_generic", "xxhash_generic", "crc32c_generic", "zstd_compress", "raid6_pq", "xor", "libcrc32c"]
        {
            assert!(before(&o, dep, "btrfs"), "{dep} after btrfs: {o:?}");
        }
        assert!(before(&o, "crc32c_generic", "libcrc32c"), "{o:?}");
        assert_eq!(o.last(), Some(&"btrfs"));
        assert!(p.builtin.contains(&("sha256".to_string(), "sha256_generic".to_string())), "{:?}", p.builtin);
        let o = t.resolve(&["virtio_blk", "virtio_pci"]).unwrap().names();
        assert_eq!(
            o,
            ["virtio_ring", "virtio", "virtio_blk", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci"]
        );
        // Together each module comes once, and the whole is in a valid order.
        let p = t.resolve(&["virtio_blk", "virtio_pci", "ext4", "vfat", "xfs", "btrfs"]).unwrap();
        let mut names = p.names();
        assert_eq!(t.check_order(&p.entries()), []);
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
        let e = t.resolve(&["ext4", "ext9"]).unwrap_err().to_string();
        assert!(e.contains("\"ext9\" not found"), "{e}");
    }

    #[test]
    fn real_named_set_is_in_a_valid_order_and_every_module_resolves() {
        let t = real();
        let list = t.from_list(&named_set_paths("fs-nls-crypto-net-194").unwrap()).unwrap();
        assert_eq!(list.len(), 194);
        // The list is a working order; only f2fs's soft dependency on crc32
        // (used at mount time, not load time) comes later in it.
        let problems = t.check_order(&list);
        let hard: Vec<&OrderProblem> = problems.iter().filter(|p| !p.soft).collect();
        assert!(hard.is_empty(), "{hard:#?}");
        let soft: Vec<&str> = problems.iter().map(|p| p.module.as_str()).collect();
        assert_eq!(soft, ["f2fs"], "{problems:#?}");
        let names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
        let p = t.resolve(&names).unwrap();
        // Resolving the set's own names adds only what soft dependencies
        // ask for (ecb, which a module of the set lists as softdep=pre:).
        let outside: Vec<(&str, &Why)> = p
            .steps
            .iter()
            .filter(|s| !names.contains(&s.entry.name.as_str()))
            .map(|s| (s.entry.name.as_str(), &s.why))
            .collect();
        assert!(outside.iter().all(|(_, w)| matches!(w, Why::SoftPreOf(..) | Why::SoftPostOf(..))), "{outside:?}");
        assert_eq!(p.steps.len(), 194 + outside.len());
        println!("resolving the 194 set's names adds {outside:?}");
        let e = t.from_list(&[PathBuf::from("kernel/fs/nope.ko")]).unwrap_err().to_string();
        assert!(e.contains("kernel/fs/nope.ko") && e.contains("not in the tree"), "{e}");
        // Every module of the tree resolves, deterministically.
        let all: Vec<&str> = t.entries().iter().map(|e| e.name.as_str()).collect();
        let a = t.resolve(&all).unwrap();
        assert_eq!(a.steps.len(), t.len());
        assert_eq!(a.names(), t.resolve(&all).unwrap().names());
        assert_eq!(t.check_order(&a.entries()), []);
    }
}
