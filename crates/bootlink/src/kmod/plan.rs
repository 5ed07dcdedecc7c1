//! Load plans: requested names to a dependency order (hard and soft
//! dependencies, each module once), and checking a given order.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use super::entry::{Entry, Provider};
use super::index::ModTree;
use super::normalize;
use crate::error::{Error, Kind, Result};

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
                return Err(Error::file(Kind::Usage, &tree.root, format!("dependency cycle: {}", cycle.join(" -> "))));
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
                        Kind::Usage,
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
                        Kind::Usage,
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
