//! Writing rewritten modules, for every transform (preresolve, symhash):
//! which input file goes to which output, atomic writes, recompression as
//! the input was compressed, and the files beside modules depmod reads.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::compress::{self, Compression};
use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::kernel::KernelImage;
use crate::module::Module;
use crate::progress::Progress;
use crate::sign::SignKey;
use crate::tree::FileError;

#[derive(Debug, Clone)]
pub enum Output {
    /// Write into this directory, mirroring paths under each input directory.
    Dir(PathBuf),
    /// Replace the inputs (atomically).
    InPlace,
}

/// One module to rewrite: where it is read and where it is written.
pub(crate) struct Job {
    pub input: PathBuf,
    pub display: String,
    pub output: PathBuf,
}

/// Which input goes to which output. One file named twice by any
/// spelling (`x.ko` and `./x.ko`, a symbolic or hard link, a directory and
/// a file in it: one device and inode) is one input, written once under
/// its first name. Two inputs that would be written to one output
/// (`a/fat.ko` and `b/fat.ko` into one directory, two trees that both hold
/// `fs/fat/fat.ko`) are refused here, before anything is written, naming
/// both; so is an output that is an input (`-o` the modules' own
/// directory; a link there to the kernel image or the signing key, which
/// `also_read` names) or that is not a regular file (a FIFO named `x.ko`
/// there).
pub(crate) fn plan_jobs(inputs: &[PathBuf], also_read: &[&Path], out: &Output) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for input in inputs {
        let is_dir = std::fs::metadata(input).is_ok_and(|m| m.is_dir());
        let files = crate::tree::find_modules(std::slice::from_ref(input))?;
        for f in files {
            if let Some(id) = fsutil::FileId::of(&f)
                && !ids.insert(id)
            {
                continue;
            }
            let rel = if is_dir {
                f.strip_prefix(input).unwrap_or(&f).to_path_buf()
            } else {
                PathBuf::from(f.file_name().unwrap_or_default())
            };
            let output = match out {
                Output::Dir(d) => d.join(&rel),
                // The file itself: named through a symbolic link, the link
                // keeps pointing to the rewritten file (a rename over the
                // link's name would replace the link and leave the file).
                Output::InPlace => std::fs::canonicalize(&f).unwrap_or_else(|_| f.clone()),
            };
            jobs.push(Job { display: rel.display().to_string(), input: f, output });
        }
    }
    jobs.sort_by(|a, b| a.display.cmp(&b.display));
    let mut seen: std::collections::HashMap<PathBuf, PathBuf> = std::collections::HashMap::new();
    let mut unique = Vec::with_capacity(jobs.len());
    for j in jobs {
        let key = j.output.clone();
        match seen.get(&key) {
            None => {
                seen.insert(key, j.input.clone());
                unique.push(j);
            }
            // The same file named twice (a directory and a file in it) is one job.
            Some(first) if *first == j.input => {}
            Some(first) => {
                return Err(Error::file(
                    Kind::Usage,
                    &j.input,
                    format!(
                        "would be written to {}, as would {}: two inputs, one output (nothing written)",
                        j.output.display(),
                        first.display()
                    ),
                ));
            }
        }
    }
    if let Output::Dir(d) = out {
        let read: Vec<&Path> = unique.iter().map(|j| j.input.as_path()).chain(also_read.iter().copied()).collect();
        let written: Vec<fsutil::Planned> = unique.iter().map(|j| fsutil::Planned::new(&j.output)).collect();
        fsutil::check_outputs(&read, &written)?;
        extras_collide(inputs, d)?;
    }
    Ok(unique)
}

/// The files beside the modules that [`copy_tree_extras`] would copy: each
/// input directory's, by name.
fn tree_extras(inputs: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for input in inputs.iter().filter(|p| p.is_dir()) {
        let Ok(rd) = std::fs::read_dir(input) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "modules.order" || name.starts_with("modules.builtin") {
                out.push((e.path(), name));
            }
        }
    }
    out
}

/// Two input directories that both hold modules.order (or modules.builtin*)
/// would write one output file: refused, naming both.
fn extras_collide(inputs: &[PathBuf], out: &Path) -> Result<()> {
    let mut seen: std::collections::HashMap<String, PathBuf> = std::collections::HashMap::new();
    for (path, name) in tree_extras(inputs) {
        if let Some(first) = seen.get(&name)
            && std::fs::canonicalize(first).ok() != std::fs::canonicalize(&path).ok()
        {
            return Err(Error::file(
                Kind::Usage,
                &path,
                format!(
                    "would be copied to {}, as would {}: two inputs, one output (nothing written)",
                    out.join(&name).display(),
                    first.display()
                ),
            ));
        }
        seen.entry(name).or_insert(path);
    }
    Ok(())
}

/// Files beside the modules that depmod reads (modules.order, modules.builtin...).
pub(crate) fn copy_tree_extras(inputs: &[PathBuf], out: &Path) -> Result<()> {
    for (p, name) in tree_extras(inputs) {
        let data = fsutil::read_input(&p, fsutil::MAX_TEXT)?;
        fsutil::write_atomic(&out.join(&name), &data)?;
    }
    Ok(())
}

pub(crate) fn probe_writable(dir: &Path) -> Result<()> {
    let probe = dir.join(format!(".bootlink-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        Error::file(Kind::Io, dir, format!("output directory is not writable: {}", Error::io(dir, e).msg))
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

pub(crate) fn write_output(path: &Path, data: &[u8], mode: &Output) -> Result<()> {
    match mode {
        // Replacing an input: durable before the rename.
        Output::InPlace => fsutil::write_atomic(path, data),
        // The directory is made when its first file is written (not before,
        // so a module that fails leaves no empty directory for itself).
        Output::Dir(_) => match fsutil::write_new_nosync(path, data) {
            Err(e) if e.is_not_found() => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
                }
                fsutil::write_new_nosync(path, data)
            }
            r => r,
        },
    }
}

pub(crate) fn copy_unchanged(input: &Path, output: &Path, mode: &Output) -> Result<()> {
    if let Output::Dir(_) = mode {
        let data = fsutil::read_input(input, fsutil::MAX_BINARY)?;
        write_output(output, &data, mode)?;
    }
    Ok(())
}

/// A rewritten module's bytes signed with `key` (the signer's scratch files
/// go beside the job's output).
pub(crate) fn sign_for(job: &Job, key: &SignKey, name: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let scratch = job.output.parent().unwrap_or(Path::new("."));
    crate::sign::sign(bytes, key, scratch, name)
}

/// Write a rewritten module to the job's output, compressed as its input
/// was (see [`recompress_like`]).
pub(crate) fn write_module(job: &Job, compression: Compression, bytes: Vec<u8>, mode: &Output) -> Result<()> {
    let out = if compression == Compression::None { bytes } else { recompress_like(&job.input, compression, &bytes)? };
    write_output(&job.output, &out, mode)
}

/// Compress `bytes` as the module at `path` was (check, dictionary or
/// window, level where the header tells), so the kernel needs no more memory.
pub(crate) fn recompress_like(path: &Path, compression: Compression, bytes: &[u8]) -> Result<Vec<u8>> {
    let params = if compression == Compression::None {
        compress::Params::None
    } else {
        let mut head = [0u8; 64];
        let (mut f, _) = fsutil::open_input(path)?;
        let n = std::io::Read::read(&mut f, &mut head).map_err(|e| Error::io(path, e))?;
        compress::Params::detect(&head[..n], compression)
    };
    compress::compress_with(bytes, params).map_err(|e| e.at(path))
}

/// Refuse a module built for another kernel than `k` (by vermagic).
pub(crate) fn check_vermagic(path: &Path, m: &Module, k: &KernelImage) -> Result<()> {
    let kv = k.vermagic.as_deref().unwrap_or_default();
    match m.kernel_vermagic() {
        Some(v) if v == kv => k.same_struct_module(m, ""),
        Some(v) => Err(Error::file(
            Kind::WrongKernel,
            path,
            format!("built for another kernel: vermagic \"{}\", the kernel's is \"{}\"", v.trim(), kv.trim()),
        )),
        None => Err(Error::file(
            Kind::WrongKernel,
            path,
            "module has no vermagic: cannot tell which kernel it was built for",
        )),
    }
}

/// What a module batch reads besides its modules: the kernel image's file
/// and the signing key's and certificate's.
pub(crate) fn read_besides<'a>(
    kernel: Option<&'a crate::kernel::KernelImage>,
    sign: Option<&'a crate::sign::SignKey>,
) -> Vec<&'a Path> {
    kernel.map(|k| k.path.as_path()).into_iter().chain(sign.into_iter().flat_map(|s| s.files())).collect()
}

/// Rewrite every module under `inputs` with `one`, in parallel, showing
/// `what` as progress: the output directory is made and probed first
/// (unless `write` is false), a killed earlier run's temporaries are
/// removed, and the files beside the modules are copied after. Returns
/// each module's result and each failed module's error. `also_read`:
/// the other files the command reads (its kernel image, its signing key
/// and certificate), which no output may be.
pub(crate) fn run_batch<T: Send>(
    inputs: &[PathBuf],
    also_read: &[&Path],
    output: &Output,
    write: bool,
    what: &str,
    one: impl Fn(&Job) -> Result<T> + Sync,
) -> Result<(Vec<T>, Vec<FileError>)> {
    let jobs = plan_jobs(inputs, also_read, output)?;
    if let (Output::Dir(d), true) = (output, write) {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        probe_writable(d)?;
    }
    // A killed earlier run (kill -9 of --in-place) may have left its
    // temporary files where it wrote: remove those of dead processes.
    let dirs: std::collections::BTreeSet<&Path> = jobs.iter().filter_map(|j| j.output.parent()).collect();
    for d in dirs {
        fsutil::remove_stale_temps(d);
    }
    let progress = Progress::new(what, jobs.len());
    let results: Vec<Result<T>> = jobs
        .par_iter()
        .map(|j| {
            let r = crate::tree::isolated(&j.input, || one(j));
            progress.inc();
            r
        })
        .collect();
    drop(progress);
    if let (Output::Dir(d), true) = (output, write) {
        copy_tree_extras(inputs, d)?;
    }
    let (mut done, mut errors) = (Vec::new(), Vec::new());
    for r in results {
        match r {
            Ok(m) => done.push(m),
            Err(e) => errors.push(FileError::from(e)),
        }
    }
    Ok((done, errors))
}
