//! `finalize`, `finalize-orc`, `finalize-mcount`: `bootlink finalize`
//! (all of it, `--no-mcount`, `--no-orc`) against the booted kernel.

use std::path::Path;

use crate::error::Result;
use crate::finalize;
use crate::preresolve;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path, orc: bool, mcount: bool) -> Result<()> {
    let opts = finalize::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        sign: None,
        dry_run: false,
        orc,
        mcount,
    };
    let report = finalize::run(Some(t.image), &super::inputs(t), &opts)?;
    super::first_error("finalize", &report.errors)?;
    t.modules = super::in_dir(&t.modules, dir);
    Ok(())
}
