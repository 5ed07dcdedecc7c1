//! `preresolve` and `fold`: `bootlink preresolve` (with `--fold-symbols`)
//! against the kernel the variant boots; `preresolve-slide` and
//! `fold-slide` the same for a kernel that randomizes its base and moves
//! the addresses by its slide (patch `preresolved-slide`).

use std::path::Path;

use crate::error::{Error, Kind, Result};
use crate::preresolve;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path, fold: bool, slide: bool) -> Result<()> {
    // Without the slide the lab boots through PVH or with `nokaslr`: the
    // base is not randomized.
    let opts = preresolve::Options {
        output: preresolve::Output::Dir(dir.to_path_buf()),
        assume_nokaslr: !slide,
        sign: None,
        fold,
        trim: false,
        dry_run: false,
    };
    let report = preresolve::run(t.image, &super::inputs(t), &opts)?;
    super::first_error("preresolve", &report.errors)?;
    if slide && report.addresses != preresolve::Addresses::Slide {
        return Err(Error::file(
            Kind::WrongKernel,
            &t.image.path,
            "the kernel does not randomize its base (no CONFIG_RANDOMIZE_BASE): nothing to move by a slide; \
             use the preresolve or fold step",
        ));
    }
    t.modules = super::in_dir(&t.modules, dir);
    Ok(())
}
