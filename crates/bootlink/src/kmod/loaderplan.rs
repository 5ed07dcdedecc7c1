//! The plan the guest-side batch loader (`loader/`, `bl-modload`) reads:
//! one line per module with the modules that must be live before it
//! starts, so it can load on many workers from a ready queue.
//!
//! ```text
//! bootlink-plan 1
//! NAME PATH DEPS [PARAMS...]
//! ```
//! DEPS is `-` or a comma-separated list of names in the plan: the
//! module's hard dependencies and the soft pre-dependencies the plan
//! provides. Dependencies the kernel has built in are left out; one that is
//! neither in the plan nor built in is an error (the loader would refuse
//! the plan, so bootlink refuses to write it).

use std::collections::HashMap;

use super::entry::{Entry, Provider};
use super::index::ModTree;
use super::normalize;
use crate::error::{Error, Kind, Result};

pub const HEADER: &str = "bootlink-plan 1";

/// What bootlink reads of modprobe.d's form: `options NAME ARGS...` (the
/// module's parameters) and `softdep NAME pre: A B post: C` (modules to load
/// first); comments and other commands are skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModprobeConf {
    pub options: HashMap<String, String>,
    pub soft_pre: HashMap<String, Vec<String>>,
}

/// Runtime dependencies the modules' .modinfo does not declare
/// (`data/runtime-deps.conf`): every plan honours them.
pub const RUNTIME_DEPS: &str = include_str!("../../../../data/runtime-deps.conf");

impl ModprobeConf {
    pub fn parse(text: &str) -> ModprobeConf {
        let mut c = ModprobeConf::default();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let mut words = line.split_whitespace();
            let (cmd, name) = (words.next(), words.next());
            let Some(name) = name else { continue };
            let rest: Vec<&str> = words.collect();
            match cmd {
                Some("options") if !rest.is_empty() => {
                    let slot = c.options.entry(normalize(name)).or_default();
                    if !slot.is_empty() {
                        slot.push(' ');
                    }
                    slot.push_str(&rest.join(" "));
                }
                Some("softdep") => {
                    let (mut pre, mut post) = (Vec::new(), Vec::new());
                    super::parse_softdep(&rest.join(" "), &mut pre, &mut post);
                    c.soft_pre.entry(normalize(name)).or_default().extend(pre);
                }
                _ => {}
            }
        }
        c
    }

    /// Both, `other`'s entries after this one's.
    pub fn merged(mut self, other: ModprobeConf) -> ModprobeConf {
        for (k, v) in other.options {
            let slot = self.options.entry(k).or_default();
            if !slot.is_empty() {
                slot.push(' ');
            }
            slot.push_str(&v);
        }
        for (k, v) in other.soft_pre {
            self.soft_pre.entry(k).or_default().extend(v);
        }
        self
    }

    /// The built-in runtime dependencies ([`RUNTIME_DEPS`]).
    pub fn runtime_deps() -> ModprobeConf {
        ModprobeConf::parse(RUNTIME_DEPS)
    }
}

impl ModTree {
    /// The batch loader's plan for `order` (modules of this tree, each
    /// once, dependencies first). `path_of` gives each module's path in the
    /// guest; `options` its parameters.
    pub fn loader_plan(
        &self,
        order: &[&Entry],
        path_of: impl Fn(&Entry) -> String,
        conf: &ModprobeConf,
    ) -> Result<String> {
        let in_plan: HashMap<&str, usize> = order.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
        let mut out = format!("# written by bootlink: {} modules, dependencies first\n{HEADER}\n", order.len());
        for e in order {
            let mut deps: Vec<&str> = Vec::new();
            for d in &e.depends {
                let dn = normalize(d);
                match in_plan.get_key_value(dn.as_str()) {
                    Some((&k, _)) => deps.push(k),
                    None if self.is_builtin(&dn) => {}
                    None => {
                        return Err(Error::file(
                            Kind::Usage,
                            &self.root,
                            format!("module {} depends on {dn}, which is neither in the plan nor built in", e.name),
                        ));
                    }
                }
            }
            let extra = conf.soft_pre.get(&e.name).map(Vec::as_slice).unwrap_or_default();
            for s in e.soft_pre.iter().chain(extra) {
                // A soft pre-dependency orders the plan only where the
                // plan provides it (modprobe skips ones nobody provides).
                let provider = match self.lookup(s) {
                    Ok(Some(Provider::Module(m))) => Some(m.name.as_str()),
                    _ => None,
                };
                if let Some(p) = provider
                    && let Some((&k, _)) = in_plan.get_key_value(p)
                    && k != e.name
                {
                    deps.push(k);
                }
            }
            let mut seen = Vec::new();
            deps.retain(|d| {
                let new = !seen.contains(d);
                seen.push(*d);
                new
            });
            let path = path_of(e);
            if path.is_empty() || path.contains(char::is_whitespace) {
                return Err(Error::file(
                    Kind::Usage,
                    &e.path,
                    format!("module {}: its guest path {path:?} is empty or has white space", e.name),
                ));
            }
            out.push_str(&e.name);
            out.push(' ');
            out.push_str(&path);
            out.push(' ');
            out.push_str(&if deps.is_empty() { "-".to_string() } else { deps.join(",") });
            if let Some(p) = conf.options.get(&e.name) {
                out.push(' ');
                out.push_str(p);
            }
            out.push('\n');
        }
        Ok(out)
    }
}

/// What `bootlink plan` writes: the modules to load, named or by set.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Written {
    pub tree: std::path::PathBuf,
    pub modules: usize,
    /// Names asked for that the kernel has built in (nothing to load).
    pub builtin: Vec<String>,
    pub text: String,
    /// The file the plan was written to (the request's; not in the JSON).
    #[serde(skip)]
    pub output: Option<std::path::PathBuf>,
}

/// The text of `bootlink plan`: the plan itself, or with a file to write,
/// what went into it.
impl crate::report::Report for Written {
    fn render(&self) -> String {
        match &self.output {
            Some(o) => format!("{} modules from {} -> {}\n", self.modules, self.tree.display(), o.display()),
            None => self.text.clone(),
        }
    }
}

/// The plan for module `names` (with their dependencies) or a set (a named
/// set or a list file), paths under `prefix` (default
/// `/lib/modules/<release>`, the tree's own name).
pub fn write_plan(
    tree: &ModTree,
    names: &[String],
    set: Option<&str>,
    prefix: Option<&str>,
    conf: &ModprobeConf,
) -> Result<Written> {
    let (entries, builtin): (Vec<&Entry>, Vec<String>) = match (set, names.is_empty()) {
        (Some(_), false) => return Err(Error::new(Kind::Usage, "give either --set or module names, not both")),
        (None, true) => return Err(Error::new(Kind::Usage, "name the modules to load, or a --set")),
        (None, false) => {
            let p = tree.resolve(names)?;
            (p.entries(), p.builtin.iter().map(|(n, _)| n.clone()).collect())
        }
        (Some(set), true) => {
            let rels = if super::named_set(set).is_some() {
                super::named_set_paths(set)?
            } else {
                super::read_list(std::path::Path::new(set))?
            };
            (tree.from_list(&rels)?, Vec::new())
        }
    };
    let release = tree.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = prefix.map(str::to_string).unwrap_or_else(|| format!("/lib/modules/{release}"));
    let text = tree.loader_plan(&entries, |e| format!("{}/{}", prefix.trim_end_matches('/'), e.rel.display()), conf)?;
    Ok(Written { tree: tree.root.clone(), modules: entries.len(), builtin, text, output: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_softdeps_are_read_as_modprobe_does() {
        let c = ModprobeConf::parse(
            "# comment\noptions null_blk nr_devices=2 irqmode=2\nblacklist foo\noptions null-blk gb=1 # tail\noptions x\n\
             softdep nls-koi8-ru pre: nls_koi8_u post: z\n",
        );
        let o = &c.options;
        assert_eq!(o.get("null_blk").map(String::as_str), Some("nr_devices=2 irqmode=2 gb=1"));
        assert!(!o.contains_key("x") && !o.contains_key("foo"));
        assert_eq!(c.soft_pre.get("nls_koi8_ru"), Some(&vec!["nls_koi8_u".to_string()]));
        assert_eq!(ModprobeConf::runtime_deps().soft_pre.get("nls_koi8_ru"), Some(&vec!["nls_koi8_u".to_string()]));
        let m = c.clone().merged(ModprobeConf::parse("options null_blk x=1\n"));
        assert_eq!(m.options.get("null_blk").map(String::as_str), Some("nr_devices=2 irqmode=2 gb=1 x=1"));
    }
}
