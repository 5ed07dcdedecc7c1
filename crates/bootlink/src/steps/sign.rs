//! `sign`: each module signed with the build's key (its old signature, if
//! any, replaced), as kbuild's `modules_install` signs: for a kernel that
//! checks signatures and cannot take the module hash list instead.

use std::path::Path;

use crate::error::{Error, Kind, Result};

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path) -> Result<()> {
    let Some(key) = t.sign_key.clone() else {
        return Err(Error::new(Kind::Usage, "step sign: no signing key given"));
    };
    key.check()?;
    let scratch = dir.join(".sign");
    std::fs::create_dir_all(&scratch).map_err(|e| Error::io(&scratch, e))?;
    let result = super::rewrite_unsigned(t, dir, |path, unsigned| {
        let tag = crate::module::name_from_path(path);
        crate::sign::sign(unsigned, &key, &scratch, &tag).map(Some)
    });
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
