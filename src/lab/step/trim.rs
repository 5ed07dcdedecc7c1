//! `trim`: unsigned, the local data symbols no relocation uses removed
//! (`preresolve --trim-symtab` without preresolving); any kernel.

use std::path::Path;

use crate::elfedit::ElfEdit;
use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::module;
use crate::preresolve;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for (name, path) in &t.modules {
        let (data, _) = module::load_bytes(path)?;
        let (len, _) = module::split_signature(&data).map_err(|e| Error::file(Kind::Format, path, e))?;
        let mut ed = ElfEdit::new(data[..len].to_vec()).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
        preresolve::trim(&mut ed).map_err(|e| Error::file(Kind::Unsupported, path, e))?;
        let dest = dir.join(format!("{name}.ko"));
        fsutil::write_atomic_nosync(&dest, &ed.data)?;
        files.push((name.clone(), dest));
    }
    t.modules = files;
    Ok(())
}
