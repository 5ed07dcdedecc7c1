//! `symhash`, `symhash-sorted` and `symhash-slotted`: `bootlink symhash`
//! (with `--sort-versions`, and `--export-slots`): the modules' symbol hash
//! tables.

use std::path::Path;

use crate::error::Result;
use crate::preresolve;
use crate::symhash;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path, sort_versions: bool, export_slots: bool) -> Result<()> {
    let opts = symhash::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        sign: None,
        sort_versions,
        export_slots,
        dry_run: false,
    };
    let report = symhash::run(t.image, &super::inputs(t), &opts)?;
    super::first_error("symhash", &report.errors)?;
    t.modules = super::in_dir(&t.modules, dir);
    Ok(())
}
