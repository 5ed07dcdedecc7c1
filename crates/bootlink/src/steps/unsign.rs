//! `unsign`: the modules without their appended signatures, as `<name>.ko`.

use std::path::Path;

use crate::error::Result;

use super::Tree;

pub fn apply(t: &mut Tree, dir: &Path) -> Result<()> {
    super::rewrite_unsigned(t, dir, |_, _| Ok(None))
}
