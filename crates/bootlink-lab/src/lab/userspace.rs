//! A dynamic user space for the guest: a host program copied into the
//! initramfs with its ELF interpreter (Debian's ld.so) and every shared
//! library it needs, at the same paths, so that it runs in the guest as it
//! runs on the host. The libraries are the ones the host's dynamic loader
//! resolves (`ldd`), following symlinks to the real files.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::lab::Initramfs;
use bootlink::error::{Error, Kind, Result};
use bootlink::hosttool;

/// The files a dynamically linked program needs: itself, its interpreter,
/// its libraries (absolute host paths), in a stable order.
pub(crate) fn closure(program: &Path) -> Result<Vec<PathBuf>> {
    if !program.is_absolute() || !program.is_file() {
        return Err(Error::file(Kind::Usage, program, "give the absolute path of a program on the host"));
    }
    let out = hosttool::run(Command::new("ldd").arg(program), "finding the program's libraries", "libc-bin")?;
    let mut files = vec![program.to_path_buf()];
    for p in listed_files(&out) {
        if !files.contains(&p) {
            files.push(p);
        }
    }
    if lacks_interpreter(&files) {
        return Err(Error::file(
            Kind::Unsupported,
            program,
            "ldd found no ELF interpreter: not a dynamically linked program",
        ));
    }
    Ok(files)
}

/// The files `ldd` (or `ld.so --list`) names, in order, each once.
pub(crate) fn listed_files(out: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for line in out.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
        // "/lib64/ld-linux-x86-64.so.2 (0x...)"; "linux-vdso.so.1 (0x...)" has no file.
        let path = match line.split_once(" => ") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next().filter(|p| p.starts_with('/')),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            let p = PathBuf::from(p);
            if !files.contains(&p) {
                files.push(p);
            }
        }
    }
    files
}

fn lacks_interpreter(files: &[PathBuf]) -> bool {
    !files.iter().any(|f| f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("ld-linux")))
}

/// Put the program and its closure into the initramfs at their host paths.
pub fn add(ir: &mut Initramfs, program: &Path) -> Result<Vec<PathBuf>> {
    let files = closure(program)?;
    for f in &files {
        ir.copy_file_timed(&f.to_string_lossy(), f);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_debian_program_needs_ld_so_and_libc() {
        let files = closure(Path::new("/usr/bin/ls")).unwrap();
        assert_eq!(files[0], Path::new("/usr/bin/ls"));
        let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert!(names.iter().any(|n| n.starts_with("ld-linux-x86-64")), "{names:?}");
        assert!(names.iter().any(|n| n == "libc.so.6"), "{names:?}");
        let e = closure(Path::new("ls")).unwrap_err();
        assert_eq!(e.kind, Kind::Usage);
    }
}
