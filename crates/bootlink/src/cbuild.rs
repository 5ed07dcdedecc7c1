//! Target-side C built from this repository (`loader/`, `trace/`): each
//! directory's own Makefile, run in a scratch copy (the source tree stays
//! clean), its product cached under `<cache>/<name>/<sha256 of the
//! sources>/`, so a build happens once per version of the sources and a
//! failed one leaves nothing in the cache. The product is sealed
//! ([`crate::cache`]) and checked on every use: a damaged one is built
//! again.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::cache;
use crate::error::{Error, Kind, Result};
use crate::fsutil;

/// A source directory of this repository.
pub fn source_dir(name: &str) -> PathBuf {
    fsutil::source_tree().join(name)
}

/// What a build depends on: the Makefile and every C source and header.
fn sources(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n == "Makefile" || n.ends_with(".c") || n.ends_with(".h")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::file(Kind::Usage, dir, "no C sources (Makefile, *.c) here"));
    }
    Ok(files)
}

/// `make TARGET` in a copy of `src` (the repository directory `name`); the
/// product `TARGET`, cached. `what` names the build in messages.
pub fn build(name: &str, target: &str, what: &str) -> Result<PathBuf> {
    build_with(name, target, what, None)
}

/// [`build`] for another machine: `make CROSS_COMPILE=<cross>`
/// (`aarch64-linux-gnu-`: Debian's gcc-aarch64-linux-gnu), cached apart
/// from the host's build; the product is checked to be for `machine`
/// (ELF e_machine).
pub fn build_cross(
    name: &str,
    target: &str,
    what: &str,
    cross: &str,
    machine: object::elf::Machine,
) -> Result<PathBuf> {
    let product = build_with(name, target, what, Some(cross))?;
    let head = std::fs::read(&product).map_err(|e| Error::io(&product, e))?;
    if let Some(why) = crate::elf::wrong_machine(&head, machine) {
        return Err(Error::file(Kind::Tool, &product, format!("{what}: {why}")));
    }
    Ok(product)
}

fn build_with(name: &str, target: &str, what: &str, cross: Option<&str>) -> Result<PathBuf> {
    crate::buildlog::timed(
        || format!("{name}/{target}{}", cross.map(|c| format!(" ({c})")).unwrap_or_default()),
        || build_with_uncounted(name, target, what, cross),
    )
}

fn build_with_uncounted(name: &str, target: &str, what: &str, cross: Option<&str>) -> Result<PathBuf> {
    let src = source_dir(name);
    let mut h = Sha256::new();
    if let Some(c) = cross {
        h.update(b"CROSS_COMPILE=");
        h.update(c.as_bytes());
        h.update([0]);
    }
    for f in sources(&src)? {
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update([0]);
        h.update(std::fs::read(&f).map_err(|e| Error::io(&f, e))?);
    }
    let key: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let parent = fsutil::cache_dir().join(name);
    let dir = parent.join(&key);
    let product = dir.join(target);
    // A product is used only as sealed (crate::cache): a damaged one is
    // built again, never handed on.
    if cache::intact(&dir, what) && product.is_file() {
        return Ok(product);
    }
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let work = tempfile::Builder::new().prefix(".build").tempdir_in(&parent).map_err(|e| Error::io(&parent, e))?;
    for f in sources(&src)? {
        let dest = work.path().join(f.file_name().unwrap_or_default());
        std::fs::copy(&f, &dest).map_err(|e| Error::io(&f, e))?;
    }
    let mut make = Command::new("make");
    make.arg("-s").arg("-C").arg(work.path()).arg(target);
    let package = match cross {
        Some(c) => {
            make.arg(format!("CROSS_COMPILE={c}"));
            // Debian names the cross compiler's package after its prefix.
            format!("gcc-{}", c.trim_end_matches('-'))
        }
        None => "build-essential".to_string(),
    };
    crate::hosttool::run(&mut make, what, &package)?;
    let built = work.path().join(target);
    // Sealed in a stage beside the entry, then put in its place.
    let stage = tempfile::Builder::new().prefix(".stage").tempdir_in(&parent).map_err(|e| Error::io(&parent, e))?;
    let staged = stage.path().join(target);
    std::fs::copy(&built, &staged).map_err(|e| Error::io(&built, e))?;
    cache::seal(stage.path(), &[(PathBuf::from(target), cache::Check::Content)])?;
    cache::install(&stage.keep(), &dir)?;
    Ok(product)
}
