//! A module tree read once and indexed by name, alias and path, with the
//! kernel's built-in modules; finding who provides a name.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::entry::{Entry, Provider};
use super::{has_wildcard, normalize, rel_key};
use crate::error::{Error, Kind, Result};
use crate::module;
use crate::tree;

/// A module tree, read once and indexed.
#[derive(Debug)]
pub struct ModTree {
    pub(super) root: PathBuf,
    /// Sorted by name, then relative path.
    pub(super) entries: Vec<Entry>,
    pub(super) by_name: HashMap<String, usize>,
    /// Normalized alias -> entries, sorted by name.
    pub(super) by_alias: HashMap<String, Vec<usize>>,
    pub(super) by_rel: HashMap<String, usize>,
    pub(super) builtin: BTreeSet<String>,
    /// Normalized alias -> built-in module names, sorted.
    pub(super) builtin_alias: HashMap<String, Vec<String>>,
    /// Files that could not be read: the name their file name gives, the error.
    pub(super) unreadable: Vec<(String, Error)>,
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
        // Names, dependencies and modinfo are the same on every machine:
        // a tree of any machine bootlink analyses is read (a command that
        // rewrites the files reads them again, for its machine).
        for (path, r) in paths.iter().zip(tree::read_all_with(&paths, module::read_analysed)) {
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

    pub(super) fn from_entries(root: &Path, mut entries: Vec<Entry>) -> ModTree {
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
    pub(crate) fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&normalize(name))
    }

    fn unreadable_error(&self, n: &str) -> Option<Error> {
        self.unreadable.iter().find(|(u, _)| u == n).map(|(_, e)| Error {
            kind: e.kind,
            path: e.path.clone(),
            msg: format!("module {n} is needed but could not be read: {}", e.msg),
            source: e.source.clone(),
        })
    }

    /// A module name only (what `depends=` holds).
    pub(super) fn lookup_module_name(&self, name: &str) -> Result<Option<Provider<'_>>> {
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

    /// The modules of one of bootlink's named sets that this tree has as
    /// modules, in the set's order: by path, else by the module's name
    /// (the sets are written with Debian 6.1's paths, and a module moves
    /// between kernel lines: 6.12 builds `gf128mul` under lib/crypto/).
    /// Second, the set's modules this tree does not have as modules (built
    /// in, removed upstream, or not configured), by name, for the caller
    /// to say.
    pub fn from_named_set(&self, rels: &[PathBuf]) -> Result<(Vec<&Entry>, Vec<String>)> {
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for rel in rels {
            match self.from_list(std::slice::from_ref(rel)) {
                Ok(mut e) => found.push(e.remove(0)),
                Err(e) if e.kind != Kind::Usage => return Err(e),
                Err(_) => {
                    let name = super::normalize(&module_name_of(rel));
                    match self.module(&name) {
                        Some(e) => found.push(e),
                        None => missing.push(name),
                    }
                }
            }
        }
        Ok((found, missing))
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
                        kind: e.kind,
                        path: e.path.clone(),
                        msg: format!("listed module could not be read: {}", e.msg),
                        source: e.source.clone(),
                    });
                }
                Err(Error::file(Kind::Usage, &self.root.join(rel), "listed in the module set but not in the tree"))
            })
            .collect()
    }
}

/// A module's name from its path: the file name up to `.ko`.
fn module_name_of(rel: &Path) -> String {
    let f = rel.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    f.split(".ko").next().unwrap_or(&f).to_string()
}
