//! `preresolve` and `fold`: `bootlink preresolve` (with `--fold-symbols`)
//! against the kernel the variant boots.

use std::path::Path;

use crate::error::Result;
use crate::preresolve;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path, fold: bool) -> Result<()> {
    // The lab boots through PVH with `nokaslr`: the base is not randomized.
    let opts = preresolve::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        assume_nokaslr: true,
        sign: None,
        fold,
        trim: false,
        dry_run: false,
    };
    let report = preresolve::run(t.image, &super::inputs(t), &opts)?;
    super::first_error("preresolve", &report.errors)?;
    t.modules = super::in_dir(&t.modules, dir);
    Ok(())
}
