//! `cmdline`: words appended to the kernel command line.

use crate::error::Result;

use super::Tree;

pub fn apply(t: &mut Tree, args: &str) -> Result<()> {
    if !args.trim().is_empty() {
        t.cmdline.push(args.to_string());
    }
    Ok(())
}
