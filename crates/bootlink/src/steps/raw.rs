//! `raw`: FILE's bytes, as they are, in the guest as module NAME's file,
//! unread by the host (after the manifest: it lists the genuine module).

use std::path::Path;

use crate::error::{Error, Kind, Result};

use super::Tree;

pub fn apply(t: &mut Tree, module: &str, file: &Path) -> Result<()> {
    t.raw_module = format!("{module}={}", file.display());
    for (n, p) in &mut t.modules {
        if n == module {
            *p = file.to_path_buf();
        }
    }
    Ok(())
}

/// The module must be one of the set, the file a file.
pub fn check(variant: &str, module: &str, file: &Path, set: &[&str]) -> Result<()> {
    if !set.contains(&module) {
        return Err(Error::new(
            Kind::Usage,
            format!("variant {variant}: raw:{module}=...: {module} is not a module of the set"),
        ));
    }
    if !std::fs::metadata(file).map_err(|e| Error::io(file, e))?.is_file() {
        return Err(Error::file(Kind::Usage, file, format!("variant {variant}: raw:{module}=: not a file")));
    }
    Ok(())
}
