//! `trim`: unsigned, the local data symbols no relocation uses removed
//! (`preresolve --trim-symtab` without preresolving); any kernel.

use std::path::Path;

use crate::elfedit::ElfEdit;
use crate::error::Result;
use crate::preresolve;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path) -> Result<()> {
    super::rewrite_unsigned(t, dir, |path, unsigned| {
        let mut ed = ElfEdit::new(unsigned.to_vec()).map_err(|e| e.at(path))?;
        preresolve::trim(&mut ed).map_err(|e| e.at(path))?;
        Ok(Some(ed.data))
    })
}
