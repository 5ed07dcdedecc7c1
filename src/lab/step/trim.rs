//! `trim`: unsigned, the local data symbols no relocation uses removed
//! (`preresolve --trim-symtab` without preresolving); any kernel.

use std::path::Path;

use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::preresolve;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path) -> Result<()> {
    super::rewrite_unsigned(t, dir, |path, unsigned| {
        let mut ed = ElfEdit::new(unsigned.to_vec()).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
        preresolve::trim(&mut ed).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
        Ok(Some(ed.data))
    })
}
