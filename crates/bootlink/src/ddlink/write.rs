//! Record → cache: the bindings of a profiled run, checked against the
//! files on disk, in the form the loader binary-searches.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::format::{self, Cache, Entry, FileIdentity, Object, UNRESOLVED};
use super::objects;
use super::prelink::PrelinkReport;
use super::record::{Def, Record};
use crate::error::{Error, Kind, Result};

/// What went into a cache.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WriteReport {
    pub objects: usize,
    /// `dlopen` groups, and the objects they hold (of `objects`).
    pub groups: usize,
    pub group_objects: usize,
    /// Bindings the loader takes from the cache.
    pub cached: usize,
    /// Undefined weak references: looked up as usual.
    pub unresolved: usize,
    /// Definitions the loader must see (STB_GNU_UNIQUE) or that lie outside
    /// the initial objects: looked up as usual.
    pub uncacheable: usize,
    pub bytes: usize,
}

/// Build the cache for a record. `loader` is the ld.so that recorded it
/// and `program` the program it ran.
pub(crate) fn cache_from_record(rec: &Record, loader: &Path, program: &Path) -> Result<(Cache, WriteReport)> {
    let files = objects::read_all(&rec.objects, loader, program)?;
    // In the order the loader asked (its lookups come in that order again).
    let mut per_obj: Vec<Vec<Entry>> = vec![Vec::new(); rec.objects.len()];
    let mut seen: HashMap<(u32, u32, u8), Entry> = HashMap::new();
    let mut report = WriteReport { objects: rec.objects.len(), ..Default::default() };
    for b in &rec.binds {
        let reff = &files[b.refobj as usize];
        if b.symidx >= reff.nsyms() {
            return Err(Error::new(
                Kind::Stale,
                format!(
                    "the record binds symbol {} of {}, which has {} dynamic symbols: a record of other files",
                    b.symidx,
                    rec.objects[b.refobj as usize].name,
                    reff.nsyms()
                ),
            ));
        }
        let entry = match b.def {
            Def::Sym { obj, sym } => {
                let def = &files[obj as usize];
                if sym >= def.nsyms() {
                    return Err(Error::new(
                        Kind::Stale,
                        format!(
                            "a binding names symbol {sym} of {}, which it does not have",
                            rec.objects[obj as usize].name
                        ),
                    ));
                }
                // ld.so checks the stored hash against both names
                // (glibc/patches 0008): a binding joins two symbols of one
                // name.
                let (wanted, found) = (&reff.names[b.symidx as usize], &def.names[sym as usize]);
                if wanted != found {
                    let named = |i: usize| match rec.objects[i].name.as_str() {
                        "" => "the program",
                        n => n,
                    };
                    return Err(Error::new(
                        Kind::Stale,
                        format!(
                            "the record binds `{wanted}` of {} to `{found}` of {}, another name: a record of other files",
                            named(b.refobj as usize),
                            named(obj as usize)
                        ),
                    ));
                }
                if def.unique[sym as usize] {
                    report.uncacheable += 1;
                    continue;
                }
                Entry {
                    symidx: b.symidx,
                    tclass: b.tclass,
                    defobj: obj as u16,
                    defsym: sym,
                    name_hash: def.name_hash(sym),
                }
            }
            Def::Unresolved => {
                report.unresolved += 1;
                Entry {
                    symidx: b.symidx,
                    tclass: b.tclass,
                    defobj: UNRESOLVED,
                    defsym: 0,
                    name_hash: reff.name_hash(b.symidx),
                }
            }
            Def::Outside => {
                report.uncacheable += 1;
                continue;
            }
        };
        let key = (b.refobj, b.symidx, b.tclass);
        if let Some(&prev) = seen.get(&key) {
            if prev == entry {
                continue;
            }
            return Err(Error::new(
                Kind::Format,
                format!(
                    "the record binds `{}` of {} two ways: not a deterministic startup",
                    reff.name(b.symidx),
                    rec.objects[b.refobj as usize].name
                ),
            ));
        }
        seen.insert(key, entry);
        per_obj[b.refobj as usize].push(entry);
    }
    let objects = rec
        .objects
        .iter()
        .zip(&files)
        .zip(per_obj)
        .map(|((o, f), entries)| Object {
            name: o.name.clone(),
            flags: o.flags,
            identity: o.identity,
            nsyms: f.nsyms(),
            build_id: o.build_id.clone(),
            entries,
            prelink: None,
        })
        .collect::<Vec<_>>();
    report.cached = objects.iter().flat_map(|o| &o.entries).filter(|e| e.defobj != UNRESOLVED).count();
    let groups =
        rec.groups.iter().map(|g| format::Group { first: g.first, count: g.count, scopes: g.scopes.clone() }).collect();
    let cache = Cache { loader_build_id: rec.loader_build_id.clone(), objects, scope: rec.scope.clone(), groups };
    report.groups = cache.groups.len();
    report.group_objects = cache.objects.len() - cache.initial();
    Ok((cache, report))
}

/// Relocation Skip Mode: where to write the prelinked images.
#[derive(Debug, Clone)]
pub struct PrelinkTo {
    pub dir: std::path::PathBuf,
    pub base: u64,
}

/// How to write a cache beyond the bindings.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Relocation Skip Mode's images.
    pub prelink: Option<PrelinkTo>,
    /// For another file system (a root file system image): no device and
    /// inode numbers; the loader identifies each file by name, size, mtime
    /// in seconds and build ID.
    pub portable: bool,
}

/// Write the cache for `rec` to `out` atomically (mode 0644: the loader
/// refuses a cache others can write). With `prelink`, first write the
/// libraries' prelinked images under its directory; the cache then names
/// the images (their identity) with their bases and runtime relocations.
pub fn write(
    rec: &Record,
    loader: &Path,
    program: &Path,
    out: &Path,
    opts: &WriteOptions,
) -> Result<(WriteReport, Option<PrelinkReport>)> {
    let (mut cache, mut report) = cache_from_record(rec, loader, program)?;
    let mut prelinked = None;
    if let Some(p) = &opts.prelink {
        let (images, preport) = super::prelink::write_images(rec, program, &p.dir, p.base)?;
        for (i, placement) in images {
            let o = &mut cache.objects[i];
            if let Some(identity) = placement.image {
                o.identity = identity;
            }
            o.flags |= placement.flag;
            o.prelink = Some(placement.prelink);
        }
        prelinked = Some(preport);
    }
    if opts.portable {
        for o in &mut cache.objects {
            o.identity = FileIdentity { dev: 0, ino: 0, mtime_nsec: 0, ..o.identity };
        }
    }
    let bytes = format::encode(&cache).map_err(|e| e.at(out))?;
    report.bytes = bytes.len();
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    crate::fsutil::write_atomic(out, &bytes)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o644)).map_err(|e| Error::io(out, e))?;
    Ok((report, prelinked))
}

impl WriteReport {
    pub fn render(&self, out: &Path) -> String {
        format!(
            "wrote {} ({} bytes): {} objects{}, {} bindings from the cache, {} looked up as usual ({} undefined weak, {} uncacheable)\n",
            out.display(),
            self.bytes,
            self.objects,
            match self.groups {
                0 => String::new(),
                n => format!(" ({} of them opened by {n} dlopen calls)", self.group_objects),
            },
            self.cached,
            self.unresolved + self.uncacheable,
            self.unresolved,
            self.uncacheable
        )
    }
}
