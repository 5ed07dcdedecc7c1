//! `bootlink plan` as a request: the batch loader's plan for a module tree
//! (Debian's reference kernel's when none is given), with bootlink's known
//! runtime dependencies and the user's modprobe.d-style file.

use std::path::PathBuf;

use crate::error::Result;
use crate::kmod::{ModTree, ModprobeConf, WrittenPlan, write_plan};

#[derive(Debug, Clone, Default)]
pub struct PlanRequest {
    /// Module names or aliases to load, with their dependencies.
    pub names: Vec<String>,
    /// A named module set or a list file instead of names.
    pub set: Option<String>,
    /// lib/modules/<release> (default: Debian's reference kernel's, fetched).
    pub modules: Option<PathBuf>,
    /// Directory the plan's paths start with.
    pub prefix: Option<String>,
    /// modprobe.d-style options and softdeps, added to the known ones.
    pub options: Option<PathBuf>,
    /// Write the plan here (atomically).
    pub output: Option<PathBuf>,
}

/// Read the tree, merge the dependencies, write the plan (to `output` when
/// given) and return it.
pub fn plan(req: &PlanRequest) -> Result<WrittenPlan> {
    if let Some(o) = &req.output {
        crate::fsutil::check_outputs(
            &req.options.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
            &[crate::fsutil::Planned::new(o)],
        )?;
    }
    let dir = match &req.modules {
        Some(d) => d.clone(),
        None => crate::fetch::fetch(&crate::fetch::Request::Reference)?.modules,
    };
    let tree = ModTree::read(&dir)?;
    // The runtime dependencies bootlink knows, then the user's file.
    let mut conf = ModprobeConf::runtime_deps();
    if let Some(f) = &req.options {
        let text = crate::fsutil::read_input_text(f)?;
        conf = conf.merged(ModprobeConf::parse(&text));
    }
    let mut w = write_plan(&tree, &req.names, req.set.as_deref(), req.prefix.as_deref(), &conf)?;
    if let Some(o) = &req.output {
        crate::fsutil::write_atomic(o, w.text.as_bytes())?;
        w.output = Some(o.clone());
    }
    Ok(w)
}
