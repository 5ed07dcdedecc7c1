//! What the resolver knows of one module file: its name, dependencies,
//! soft dependencies and aliases, read from its `.modinfo`.

use std::path::{Path, PathBuf};

use super::{has_wildcard, normalize};
use crate::module::Module;

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
    pub(super) fn of(m: &Module, root: &Path) -> Entry {
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
