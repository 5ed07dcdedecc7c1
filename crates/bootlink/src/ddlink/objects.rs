//! The objects a record names, read from disk: each one's file, .dynsym
//! and build ID, checked against what the loader saw when it recorded.

use std::path::{Path, PathBuf};

use object::elf::STB_GNU_UNIQUE;
use object::read::elf::Sym;

use super::format::{FileIdentity, OBJ_LOADER, OBJ_MAIN};
use super::record::{RecObj, hex};
use crate::elf::{Elf, LE, Want};
use crate::error::{Error, Kind, Result};

/// One object of the program's initial namespace as found on disk.
pub struct ObjFile {
    pub identity: FileIdentity,
    pub build_id: Vec<u8>,
    pub names: Vec<String>,
    /// Per .dynsym entry: STB_GNU_UNIQUE (the loader must register those in
    /// its unique-symbol table, so their lookups are never cached).
    pub unique: Vec<bool>,
    /// The GNU hash of each symbol's name (its bytes as in the file).
    pub name_hashes: Vec<u32>,
}

impl ObjFile {
    pub fn nsyms(&self) -> u32 {
        self.names.len() as u32
    }

    /// The GNU hash of symbol `sym`'s name (inside the table: checked by
    /// the caller).
    pub fn name_hash(&self, sym: u32) -> u32 {
        self.name_hashes.get(sym as usize).copied().unwrap_or(0)
    }

    pub fn name(&self, sym: u32) -> &str {
        self.names.get(sym as usize).map_or("?", String::as_str)
    }

    /// Read the file at `path`: its identity, build ID and dynamic symbols.
    pub fn read(path: &Path) -> Result<ObjFile> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let data = crate::fsutil::map_file(path)?;
        let elf = Elf::parse(&data, Want::Dynamic).map_err(|m| m.at(path))?;
        let build_id = elf.build_id().map_err(|m| m.at(path))?.unwrap_or_default().to_vec();
        let syms = elf.dynamic_symbols().map_err(|m| m.at(path))?;
        let mut names = Vec::with_capacity(syms.len());
        let mut unique = Vec::with_capacity(syms.len());
        let mut name_hashes = Vec::with_capacity(syms.len());
        for s in syms.iter() {
            let name = s.name(LE, syms.strings()).unwrap_or(b"?");
            names.push(String::from_utf8_lossy(name).into_owned());
            name_hashes.push(super::format::name_hash(name));
            unique.push(s.st_bind() == STB_GNU_UNIQUE);
        }
        if names.is_empty() {
            return Err(Error::file(
                Kind::Unsupported,
                path,
                "no .dynsym section (DDLink reads the dynamic symbol table through the section headers)",
            ));
        }
        Ok(ObjFile { identity: FileIdentity::of(&meta), build_id, names, unique, name_hashes })
    }
}

/// Where an object's file is, from its flags and name (a record's or a
/// cache's): ld.so and the program are given (ld.so's l_name is the name
/// it was asked for, not always its file; the program's is empty). A
/// library's name is the path the loader opened, which may be a chain of
/// links (Debian's alternatives: libblas.so.3 -> /etc/alternatives/... ->
/// the file): the loader followed all of them, and so is the file read
/// here (the identity check then compares the file itself).
pub fn file_of(flags: u32, name: &str, loader: &Path, program: &Path) -> PathBuf {
    if flags & OBJ_LOADER != 0 {
        loader.to_path_buf()
    } else if flags & OBJ_MAIN != 0 {
        program.to_path_buf()
    } else {
        // A name that does not resolve stays as it is: reading it names it.
        std::fs::canonicalize(name).unwrap_or_else(|_| PathBuf::from(name))
    }
}

/// How the file on disk differs from what the loader saw when it recorded:
/// another build ID, or (except for ld.so and a program the kernel mapped,
/// which have no file identity in the record) another device, inode, size
/// or mtime. None when it matches.
pub fn mismatch(file: &ObjFile, flags: u32, build_id: &[u8], identity: &FileIdentity) -> Option<String> {
    if file.build_id != build_id {
        return Some(format!(
            "build ID {} on disk, {} when the bindings were recorded",
            show_id(&file.build_id),
            show_id(build_id)
        ));
    }
    let checked = flags & OBJ_LOADER == 0 && identity.ino != 0;
    (checked && file.identity != *identity).then(|| {
        "replaced or modified since the bindings were recorded (device, inode, size or mtime differ)".to_string()
    })
}

/// Every recorded object read from disk and checked against the record
/// (`mismatch`).
pub(crate) fn read_all(objs: &[RecObj], loader: &Path, program: &Path) -> Result<Vec<ObjFile>> {
    objs.iter()
        .map(|o| {
            let path = file_of(o.flags, &o.name, loader, program);
            let f = ObjFile::read(&path)?;
            match mismatch(&f, o.flags, &o.build_id, &o.identity) {
                Some(why) => Err(Error::file(Kind::Stale, &path, format!("{why}: profile again"))),
                None => Ok(f),
            }
        })
        .collect()
}

pub(crate) fn show_id(id: &[u8]) -> String {
    if id.is_empty() { "(none)".into() } else { hex(id) }
}
