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

/// Module options in modprobe.d's form: `options NAME ARGS...` lines
/// (comments and other commands are skipped). Returns name -> arguments.
pub fn parse_options(text: &str) -> HashMap<String, String> {
    let mut opts: HashMap<String, String> = HashMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        if words.next() != Some("options") {
            continue;
        }
        let Some(name) = words.next() else { continue };
        let args: Vec<&str> = words.collect();
        if args.is_empty() {
            continue;
        }
        let slot = opts.entry(normalize(name)).or_default();
        if !slot.is_empty() {
            slot.push(' ');
        }
        slot.push_str(&args.join(" "));
    }
    opts
}

impl ModTree {
    /// The batch loader's plan for `order` (modules of this tree, each
    /// once, dependencies first). `path_of` gives each module's path in the
    /// guest; `options` its parameters.
    pub fn loader_plan(
        &self,
        order: &[&Entry],
        path_of: impl Fn(&Entry) -> String,
        options: &HashMap<String, String>,
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
            for s in &e.soft_pre {
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
            if let Some(p) = options.get(&e.name) {
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
}

/// The plan for module `names` (with their dependencies) or a set (a named
/// set or a list file), paths under `prefix` (default
/// `/lib/modules/<release>`, the tree's own name).
pub fn write_plan(
    tree: &ModTree,
    names: &[String],
    set: Option<&str>,
    prefix: Option<&str>,
    options: &HashMap<String, String>,
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
    let text =
        tree.loader_plan(&entries, |e| format!("{}/{}", prefix.trim_end_matches('/'), e.rel.display()), options)?;
    Ok(Written { tree: tree.root.clone(), modules: entries.len(), builtin, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_lines_are_read_as_modprobe_does() {
        let o = parse_options(
            "# comment\noptions null_blk nr_devices=2 irqmode=2\nblacklist foo\noptions null-blk gb=1 # tail\noptions x\n",
        );
        assert_eq!(o.get("null_blk").map(String::as_str), Some("nr_devices=2 irqmode=2 gb=1"));
        assert!(!o.contains_key("x") && !o.contains_key("foo"));
    }
}
