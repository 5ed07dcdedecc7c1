//! Writing rewritten modules, for every transform (preresolve, symhash):
//! which input file goes to which output, atomic writes, recompression as
//! the input was compressed, and the files beside modules depmod reads.

use std::path::{Path, PathBuf};

use crate::compress::{self, Compression};
use crate::error::{Error, Kind, Result};
use crate::fsutil;

#[derive(Debug, Clone)]
pub enum Output {
    /// Write into this directory, mirroring paths under each input directory.
    Dir(PathBuf),
    /// Replace the inputs (atomically).
    InPlace,
}

/// One module to rewrite: where it is read and where it is written.
pub struct Job {
    pub input: PathBuf,
    pub display: String,
    pub output: PathBuf,
}

pub fn plan_jobs(inputs: &[PathBuf], out: &Output) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| Error::io(input, e))?;
        let files = crate::tree::find_modules(std::slice::from_ref(input))?;
        for f in files {
            let rel = if meta.is_dir() {
                f.strip_prefix(input).unwrap_or(&f).to_path_buf()
            } else {
                PathBuf::from(f.file_name().unwrap_or_default())
            };
            let output = match out {
                Output::Dir(d) => d.join(&rel),
                Output::InPlace => f.clone(),
            };
            jobs.push(Job { display: rel.display().to_string(), input: f, output });
        }
    }
    jobs.sort_by(|a, b| a.display.cmp(&b.display));
    Ok(jobs)
}

/// Files beside the modules that depmod reads (modules.order, modules.builtin...).
pub fn copy_tree_extras(inputs: &[PathBuf], out: &Path) -> Result<()> {
    for input in inputs.iter().filter(|p| p.is_dir()) {
        let rd = std::fs::read_dir(input).map_err(|e| Error::io(input, e))?;
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_file() && (name == "modules.order" || name.starts_with("modules.builtin")) {
                let data = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
                fsutil::write_atomic(&out.join(&name), &data)?;
            }
        }
    }
    Ok(())
}

pub fn probe_writable(dir: &Path) -> Result<()> {
    let probe = dir.join(format!(".bootlink-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        Error::file(Kind::Io, dir, format!("output directory is not writable: {}", Error::io(dir, e).msg))
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

pub fn write_output(path: &Path, data: &[u8], mode: &Output) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    match mode {
        // Replacing an input: durable before the rename.
        Output::InPlace => fsutil::write_atomic(path, data),
        Output::Dir(_) => fsutil::write_atomic_nosync(path, data),
    }
}

pub fn copy_unchanged(input: &Path, output: &Path, mode: &Output) -> Result<()> {
    if let Output::Dir(_) = mode {
        let data = std::fs::read(input).map_err(|e| Error::io(input, e))?;
        write_output(output, &data, mode)?;
    }
    Ok(())
}

/// Compress `bytes` as the module at `path` was (check, dictionary or
/// window, level where the header tells), so the kernel needs no more memory.
pub fn recompress_like(path: &Path, compression: Compression, bytes: &[u8]) -> Result<Vec<u8>> {
    let params = if compression == Compression::None {
        compress::Params::None
    } else {
        let mut head = [0u8; 64];
        let n = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .map_err(|e| Error::io(path, e))?;
        compress::Params::detect(&head[..n], compression)
    };
    compress::compress_with(bytes, params).map_err(|e| Error::file(Kind::Format, path, e))
}
