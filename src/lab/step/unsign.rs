//! `unsign`: the modules without their appended signatures, as `<name>.ko`.

use std::path::Path;

use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::module;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for (name, path) in &t.modules {
        let (data, _) = module::load_bytes(path)?;
        let (len, _) = module::split_signature(&data).map_err(|e| Error::file(Kind::Format, path, e))?;
        let dest = dir.join(format!("{name}.ko"));
        fsutil::write_atomic_nosync(&dest, &data[..len])?;
        files.push((name.clone(), dest));
    }
    t.modules = files;
    Ok(())
}
