//! The binding cache file the patched ld.so reads (glibc/patches, elf/dl-ddlink.h):
//! a header, one record per object of the program's initial namespace
//! (in load order, without the kernel's vDSO: it is in no search list),
//! the main search list, each object's bindings in the order its relocation
//! asked for them when recorded (so the loader usually finds the next one
//! right after the last), a per-object index of them sorted by (symbol
//! index, relocation type class) for the others, and a string table. Little-endian, naturally
//! aligned, a multiple of 8 bytes, protected by a checksum over 8-byte
//! words. `encode` and `decode` are exact inverses; `decode` refuses what
//! the loader would refuse, so `bootlink ddlink status` says the same.
//!
//! Version 3 adds Relocation Skip Mode: an object may be a prelinked image
//! (`OBJ_PRELINKED`) with the load address its values were computed for and
//! the relocations the loader must still apply (indices into DT_RELA then
//! DT_JMPREL, IRELATIVE last).
//!
//! Version 4 adds to each binding the GNU hash of its symbol's name
//! ([`name_hash`]): before the loader uses any binding it checks every
//! one's indices against the real symbol tables and the defining
//! symbol's name against the hash, and loads the whole program as usual
//! when one fails.
//!
//! Version 5 (glibc patch 0009) lets the program be a prelinked image too
//! (`OBJ_MAIN | OBJ_PRELINKED`, never only placed) and adds `OBJ_RELR`: the
//! image's DT_RELR words are relocated for its base (its ELF header says
//! so too, and for which base), so the loader skips the RELR pass there.
//!
//! Version 6 (glibc patch 0011) adds `dlopen` groups: the objects after
//! the initial namespace's were loaded by `dlopen` calls, one group per
//! call, each with its objects' search scopes when they were relocated;
//! the loader answers a `dlopen`'s lookups from the cache when the next
//! group matches exactly, and stops at the first that does not.

use serde::Serialize;

use crate::bytes::{LeWriter, le_u16, le_u32, le_u64, le_u64s, set_le_u64};
use crate::error::{Error, Kind};

/// Bytes that are not a DDLink cache this bootlink reads.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

/// A program the cache format cannot describe.
fn unsupported(msg: impl Into<String>) -> Error {
    Error::new(Kind::Unsupported, msg)
}

pub(crate) const MAGIC: &[u8; 8] = b"DDLINK\0\x06";
pub(crate) const VERSION: u32 = 6;
/// sizeof (struct ddlink_header), (struct ddlink_obj), (struct ddlink_entry),
/// (struct ddlink_group).
pub(crate) const HEADER_SIZE: usize = 168;
pub(crate) const GROUP_SIZE: usize = 16;
pub(crate) const OBJ_SIZE: usize = 112;
pub(crate) const ENTRY_SIZE: usize = 16;
/// Byte offset of the checksum field in the header.
const CHECKSUM_AT: usize = 24;
const BUILD_ID_MAX: usize = 32;

/// The program itself.
pub const OBJ_MAIN: u32 = 2;
/// ld.so itself (identified by the loader build ID).
pub const OBJ_LOADER: u32 = 4;
/// A prelinked image (Relocation Skip Mode).
pub const OBJ_PRELINKED: u32 = 8;
/// Not an image, but mapped at its base so that images can bind to it.
pub const OBJ_PLACED: u32 = 16;
/// A prelinked image whose DT_RELR words are relocated for its base
/// (with `OBJ_PRELINKED` only).
pub const OBJ_RELR: u32 = 32;
/// An entry whose symbol the loader looks up as usual.
pub const UNRESOLVED: u16 = 0xffff;

/// What identifies a file: the loader compares all of it (from the fstat it
/// does when it maps the object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
}

impl FileIdentity {
    pub fn of(meta: &std::fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_sec: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

/// One binding: the relocation's symbol in the referencing object, and the
/// object and symbol that define it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Entry {
    pub symidx: u32,
    pub tclass: u8,
    pub defobj: u16,
    pub defsym: u32,
    /// [`name_hash`] of the defining symbol's name, which the symbol the
    /// relocation refers to has too (ld.so checks the hash against both
    /// names, glibc/patches 0008; for an unresolved entry, the
    /// reference's).
    pub name_hash: u32,
}

/// glibc's DT_GNU_HASH function (`_dl_new_hash`: h = h * 33 + c from
/// 5381), which the loader reads from the defining object's hash chain.
pub fn name_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Object {
    /// The name the loader gives the object (its l_name).
    pub name: String,
    pub flags: u32,
    pub identity: FileIdentity,
    /// Entries of its .dynsym.
    pub nsyms: u32,
    pub build_id: Vec<u8>,
    /// In lookup order, no two with the same (symidx, tclass).
    pub entries: Vec<Entry>,
    /// Set for a prelinked image (`flags` has `OBJ_PRELINKED`) or an
    /// object only placed at a base (`OBJ_PLACED`, no runtime list).
    pub prelink: Option<Prelink>,
}

/// A prelinked image's load address (l_addr) and the relocations left for
/// the loader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prelink {
    pub base: u64,
    /// Indices into DT_RELA followed by DT_JMPREL, IRELATIVE last.
    pub runtime: Vec<u32>,
}

/// The objects one `dlopen` loaded and the search scopes their relocation
/// used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// Objects `first..first + count` of the cache.
    pub first: u32,
    pub count: u32,
    /// Each object's scopes (its l_scope), as object indices.
    pub scopes: Vec<Vec<Vec<u32>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    pub loader_build_id: Vec<u8>,
    /// The initial namespace's objects, then each group's.
    pub objects: Vec<Object>,
    /// The main search list, as object indices.
    pub scope: Vec<u32>,
    pub groups: Vec<Group>,
}

impl Cache {
    pub fn entries(&self) -> usize {
        self.objects.iter().map(|o| o.entries.len()).sum()
    }

    /// The objects of the initial namespace.
    pub fn initial(&self) -> usize {
        self.groups.first().map_or(self.objects.len(), |g| g.first as usize)
    }

    /// The end of the objects loaded with object `i` (its group's, or the
    /// initial namespace's): what its bindings may name.
    pub fn loaded_with(&self, i: usize) -> usize {
        self.groups
            .iter()
            .map(|g| g.first as usize..g.first as usize + g.count as usize)
            .find(|r| r.contains(&i))
            .map_or(self.initial(), |r| r.end)
    }
}

/// A group's scopes as the loader reads them: per object, its number of
/// scopes, then each scope's length and indices.
fn scope_words(g: &Group) -> Vec<u32> {
    let mut w = Vec::new();
    for obj in &g.scopes {
        w.push(obj.len() as u32);
        for list in obj {
            w.push(list.len() as u32);
            w.extend_from_slice(list);
        }
    }
    w
}

/// Why the groups are not what the loader accepts, or None: each follows
/// the one before (the first the initial objects), has objects and one
/// list of scopes per object naming objects up to its last, and the last
/// ends with the objects; the program and ld.so are initial objects.
fn groups_error(c: &Cache) -> Option<String> {
    let mut next = c.initial();
    if next == 0 {
        return Some("a dlopen group before the program".into());
    }
    for (k, g) in c.groups.iter().enumerate() {
        let end = g.first as usize + g.count as usize;
        if g.first as usize != next || g.count == 0 || end > c.objects.len() {
            return Some(format!("dlopen group {k}'s objects do not follow the objects before it"));
        }
        if g.scopes.len() != g.count as usize {
            return Some(format!("dlopen group {k} has {} lists of scopes for {} objects", g.scopes.len(), g.count));
        }
        if g.scopes.iter().flatten().flatten().any(|&i| i as usize >= end) {
            return Some(format!("dlopen group {k}'s scopes name an object loaded after it"));
        }
        if c.objects[next..end].iter().any(|o| o.flags & (OBJ_MAIN | OBJ_LOADER) != 0) {
            return Some(format!("dlopen group {k} holds the program or ld.so"));
        }
        next = end;
    }
    (next != c.objects.len()).then(|| "the dlopen groups do not end with the objects".into())
}

/// Four 64-bit FNV-1a lanes over 8-byte little-endian words (word i to
/// lane i % 4), folded into one; the checksum field reads as 0. The
/// loader computes the same (elf/dl-ddlink.c).
pub fn checksum(data: &[u8]) -> u64 {
    const BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = [BASIS, BASIS ^ 1, BASIS ^ 2, BASIS ^ 3];
    for (i, w) in le_u64s(data).enumerate() {
        let v = if i * 8 == CHECKSUM_AT { 0 } else { w };
        h[i % 4] = (h[i % 4] ^ v).wrapping_mul(PRIME);
    }
    h.iter().fold(BASIS, |r, &x| (r ^ x).wrapping_mul(PRIME))
}

/// A build ID in its fixed field of [`BUILD_ID_MAX`] bytes, zero-padded.
fn put_id(out: &mut LeWriter, id: &[u8]) {
    let mut b = [0u8; BUILD_ID_MAX];
    b[..id.len()].copy_from_slice(id);
    out.bytes(&b);
}

/// The cache as the loader reads it. Refuses what cannot be expressed
/// (too many objects, a build ID longer than 32 bytes, unsorted entries).
pub fn encode(cache: &Cache) -> std::result::Result<Vec<u8>, Error> {
    let nobjs = cache.objects.len();
    if nobjs == 0 || nobjs >= UNRESOLVED as usize {
        return Err(unsupported(format!("{nobjs} objects: a cache holds 1 to {} objects", UNRESOLVED - 1)));
    }
    if cache.loader_build_id.len() > BUILD_ID_MAX {
        return Err(unsupported("the loader's build ID is longer than 32 bytes"));
    }
    let mut strtab = vec![0u8];
    let mut name_off = Vec::with_capacity(nobjs);
    for o in &cache.objects {
        if o.build_id.len() > BUILD_ID_MAX {
            return Err(unsupported(format!("{}: build ID longer than 32 bytes", o.name)));
        }
        if o.name.contains('\0') {
            return Err(unsupported(format!("{}: NUL in the name", o.name)));
        }
        let mut keys: Vec<(u32, u8)> = o.entries.iter().map(|e| (e.symidx, e.tclass)).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Err(unsupported(format!("{}: two entries for one symbol and type class", o.name)));
        }
        if prelink_error(o.flags, o.prelink.as_ref()) {
            return Err(unsupported(format!("{}: bad prelink flags or data", o.name)));
        }
        name_off.push(u32::try_from(strtab.len()).map_err(|_| unsupported("string table over 4 GiB"))?);
        strtab.extend_from_slice(o.name.as_bytes());
        strtab.push(0);
    }
    if let Some(why) = groups_error(cache) {
        return Err(unsupported(why));
    }
    for (i, o) in cache.objects.iter().enumerate() {
        let end = cache.loaded_with(i);
        // (A binding past every object is left for `decode` to name.)
        let later = |e: &Entry| (end..cache.objects.len()).contains(&(e.defobj as usize));
        if o.entries.iter().any(later) {
            return Err(unsupported(format!("{}: a binding to an object loaded after it", o.name)));
        }
    }
    let nentries = cache.entries();
    let objs_off = HEADER_SIZE;
    let scope_off = objs_off + nobjs * OBJ_SIZE;
    let entries_off = (scope_off + cache.scope.len() * 4).next_multiple_of(4);
    let sorted_off = entries_off + nentries * ENTRY_SIZE;
    let nruntime: usize = cache.objects.iter().filter_map(|o| o.prelink.as_ref()).map(|p| p.runtime.len()).sum();
    let runtime_off = sorted_off + nentries * 4;
    let groups_off = runtime_off + nruntime * 4;
    let gscope: Vec<Vec<u32>> = cache.groups.iter().map(scope_words).collect();
    let ngscope: usize = gscope.iter().map(Vec::len).sum();
    let gscope_off = groups_off + cache.groups.len() * GROUP_SIZE;
    let strtab_off = gscope_off + ngscope * 4;
    let file_size = (strtab_off + strtab.len()).next_multiple_of(8);
    let n32 = |n: usize, what: &str| u32::try_from(n).map_err(|_| unsupported(format!("too many {what}")));

    let mut out = LeWriter::with_capacity(file_size);
    out.bytes(MAGIC);
    out.u32(VERSION);
    out.u32(HEADER_SIZE as u32);
    out.u64(file_size as u64);
    out.u64(0); // checksum, filled below
    out.u32(nobjs as u32);
    out.u32(n32(cache.scope.len(), "scope entries")?);
    out.u32(n32(nentries, "entries")?);
    out.u32(n32(strtab.len(), "string bytes")?);
    for off in [objs_off, scope_off, entries_off, sorted_off, strtab_off] {
        out.u64(off as u64);
    }
    put_id(&mut out, &cache.loader_build_id);
    out.u32(cache.loader_build_id.len() as u32);
    out.u32(0);
    out.u64(runtime_off as u64);
    out.u32(n32(nruntime, "runtime relocations")?);
    out.u32(n32(cache.groups.len(), "dlopen groups")?);
    out.u64(groups_off as u64);
    out.u64(gscope_off as u64);
    out.u32(n32(ngscope, "scope words")?);
    out.u32(0);
    debug_assert_eq!(out.len(), HEADER_SIZE);
    let mut first = 0u32;
    let mut first_runtime = 0u32;
    for (o, &name) in cache.objects.iter().zip(&name_off) {
        out.u32(name);
        out.u32(o.flags);
        out.u64(o.identity.dev);
        out.u64(o.identity.ino);
        out.u64(o.identity.size);
        out.u64(o.identity.mtime_sec as u64);
        out.u64(o.identity.mtime_nsec as u64);
        let n = o.entries.len() as u32;
        out.u32(first);
        out.u32(n);
        out.u32(o.nsyms);
        out.u32(o.build_id.len() as u32);
        put_id(&mut out, &o.build_id);
        first += n;
        match &o.prelink {
            Some(p) => {
                out.u64(p.base);
                out.u32(first_runtime);
                out.u32(p.runtime.len() as u32);
                first_runtime += p.runtime.len() as u32;
            }
            None => {
                out.u64(0);
                out.u32(0);
                out.u32(0);
            }
        }
    }
    for &s in &cache.scope {
        out.u32(s);
    }
    while out.len() < entries_off {
        out.u8(0);
    }
    for o in &cache.objects {
        for e in &o.entries {
            out.u32(e.symidx);
            out.u32(e.defsym);
            out.u16(e.defobj);
            out.u8(e.tclass);
            out.u8(0);
            out.u32(e.name_hash);
        }
    }
    for o in &cache.objects {
        let mut order: Vec<u32> = (0..o.entries.len() as u32).collect();
        order.sort_unstable_by_key(|&i| (o.entries[i as usize].symidx, o.entries[i as usize].tclass));
        for i in order {
            out.u32(i);
        }
    }
    for p in cache.objects.iter().filter_map(|o| o.prelink.as_ref()) {
        for &r in &p.runtime {
            out.u32(r);
        }
    }
    let mut first_scope = 0u32;
    for (g, words) in cache.groups.iter().zip(&gscope) {
        out.u32(g.first);
        out.u32(g.count);
        out.u32(first_scope);
        out.u32(words.len() as u32);
        first_scope += words.len() as u32;
    }
    for &w in gscope.iter().flatten() {
        out.u32(w);
    }
    out.bytes(&strtab);
    out.align(8);
    let mut out = out.into_inner();
    debug_assert_eq!(out.len(), file_size);
    let sum = checksum(&out);
    set_le_u64(&mut out, CHECKSUM_AT, sum);
    Ok(out)
}

/// Whether an object's flags and prelink data contradict each other (what
/// the loader refuses): prelink data exactly for prelinked or placed
/// objects, never both, never ld.so, the program only prelinked (not
/// placed), `OBJ_RELR` only on a prelinked object, a nonzero page-aligned
/// base, no runtime relocations for a placed object.
fn prelink_error(flags: u32, p: Option<&Prelink>) -> bool {
    let based = flags & (OBJ_PRELINKED | OBJ_PLACED) != 0;
    if flags & OBJ_RELR != 0 && flags & OBJ_PRELINKED == 0 {
        return true;
    }
    match p {
        None => based,
        Some(p) => {
            !based
                || flags & OBJ_PRELINKED != 0 && flags & OBJ_PLACED != 0
                || flags & OBJ_LOADER != 0
                || flags & (OBJ_MAIN | OBJ_PLACED) == OBJ_MAIN | OBJ_PLACED
                || p.base == 0
                || !p.base.is_multiple_of(4096)
                || flags & OBJ_PLACED != 0 && !p.runtime.is_empty()
        }
    }
}

// Offsets are checked against the file's size before these are called.
fn u16_at(d: &[u8], off: usize) -> u16 {
    le_u16(d, off).expect("offset checked")
}
fn u32_at(d: &[u8], off: usize) -> u32 {
    le_u32(d, off).expect("offset checked")
}
fn u64_at(d: &[u8], off: usize) -> u64 {
    le_u64(d, off).expect("offset checked")
}

/// An object's name in a one-line message: the program's is empty in the
/// cache (the loader gives it none); a damaged string table's control
/// characters are escaped.
fn shown(name: &str) -> String {
    if name.is_empty() { "the program".into() } else { crate::elf::printable(name.as_bytes()) }
}

/// Read a cache, with every check the loader makes on the file itself (the
/// checks against the loaded objects are `status`'s). The message says
/// what is wrong, for a one-line error naming the file.
pub fn decode(d: &[u8]) -> std::result::Result<Cache, Error> {
    if d.is_empty() {
        return Err(corrupt("not a DDLink cache (the file is empty)"));
    }
    // The magic first (as much of it as there is): random bytes are not a
    // cache cut short.
    let head = d.len().min(MAGIC.len());
    if d[..head] != MAGIC[..head] {
        return Err(corrupt("not a DDLink cache (bad magic)"));
    }
    if d.len() < HEADER_SIZE {
        return Err(corrupt(format!("truncated DDLink cache: {} bytes, shorter than its header", d.len())));
    }
    let version = u32_at(d, 8);
    if version != VERSION {
        return Err(corrupt(format!("DDLink cache version {version}, this bootlink writes {VERSION}")));
    }
    let header_size = u32_at(d, 12);
    if header_size as usize != HEADER_SIZE {
        return Err(corrupt(format!(
            "DDLink cache header of {header_size} bytes, version {VERSION}'s has {HEADER_SIZE}: a cache of another version"
        )));
    }
    let size = u64_at(d, 16);
    if size != d.len() as u64 || !d.len().is_multiple_of(8) {
        return Err(corrupt(format!(
            "truncated or padded DDLink cache: header says {size} bytes, file has {}",
            d.len()
        )));
    }
    if checksum(d) != u64_at(d, CHECKSUM_AT) {
        return Err(corrupt("corrupt DDLink cache: checksum mismatch"));
    }
    let (nobjs, nscope, nentries, strsize) =
        (u32_at(d, 32) as usize, u32_at(d, 36) as usize, u32_at(d, 40) as usize, u32_at(d, 44) as usize);
    let (objs_off, scope_off, entries_off, sorted_off, str_off) = (
        u64_at(d, 48) as usize,
        u64_at(d, 56) as usize,
        u64_at(d, 64) as usize,
        u64_at(d, 72) as usize,
        u64_at(d, 80) as usize,
    );
    let (runtime_off, nruntime) = (u64_at(d, 128) as usize, u32_at(d, 136) as usize);
    let (ngroups, groups_off, gscope_off, ngscope) =
        (u32_at(d, 140) as usize, u64_at(d, 144) as usize, u64_at(d, 152) as usize, u32_at(d, 160) as usize);
    // The loader's checks of the header (glibc/patches 0003, 0005), each
    // refusal saying which one failed.
    let fits = |off: usize, n: usize, each: usize| off <= d.len() && n <= (d.len() - off) / each;
    let tables = [
        ("object", objs_off, nobjs, OBJ_SIZE, 8),
        ("search list", scope_off, nscope, 4, 4),
        ("entry", entries_off, nentries, ENTRY_SIZE, 4),
        ("sorted index", sorted_off, nentries, 4, 4),
        ("runtime relocation", runtime_off, nruntime, 4, 4),
        ("dlopen group", groups_off, ngroups, GROUP_SIZE, 4),
        ("group scope", gscope_off, ngscope, 4, 4),
        ("string", str_off, strsize, 1, 1),
    ];
    for (name, off, n, each, align) in tables {
        if !off.is_multiple_of(align) {
            return Err(corrupt(format!(
                "malformed DDLink cache: the {name} table's offset {off:#x} is not {align}-byte aligned"
            )));
        }
        if !fits(off, n, each) {
            return Err(corrupt(format!(
                "malformed DDLink cache: the {name} table ({n} records of {each} bytes at {off:#x}) lies outside the file ({} bytes)",
                d.len()
            )));
        }
    }
    if strsize == 0 || d[str_off + strsize - 1] != 0 {
        return Err(corrupt("malformed DDLink cache: the string table does not end in a NUL"));
    }
    if nobjs == 0 || nobjs >= UNRESOLVED as usize {
        return Err(corrupt(format!(
            "malformed DDLink cache: {nobjs} objects (a cache holds 1 to {})",
            UNRESOLVED - 1
        )));
    }
    if u32_at(d, 124) != 0 || u32_at(d, 164) != 0 {
        return Err(corrupt("malformed DDLink cache: a reserved header field is not 0"));
    }
    let idlen = u32_at(d, 120) as usize;
    if idlen > BUILD_ID_MAX {
        return Err(corrupt("malformed DDLink cache: loader build ID length"));
    }
    let strtab = &d[str_off..str_off + strsize];
    let mut objects = Vec::with_capacity(nobjs);
    for i in 0..nobjs {
        let b = objs_off + i * OBJ_SIZE;
        let name_off = u32_at(d, b) as usize;
        let name = crate::elf::cstr(strtab, name_off)
            .ok_or_else(|| corrupt(format!("malformed DDLink cache: object {i}'s name lies outside the strings")))?;
        let (first, n) = (u32_at(d, b + 48) as usize, u32_at(d, b + 52) as usize);
        let blen = u32_at(d, b + 60) as usize;
        if first > nentries || n > nentries - first {
            return Err(corrupt(format!("malformed DDLink cache: object {i}'s entries lie outside the table")));
        }
        if blen > BUILD_ID_MAX {
            return Err(corrupt(format!(
                "malformed DDLink cache: object {i}'s build ID length {blen}, more than {BUILD_ID_MAX}"
            )));
        }
        if (first..first + n).any(|k| d[entries_off + k * ENTRY_SIZE + 11] != 0) {
            return Err(corrupt(format!("malformed DDLink cache: object {i} has an entry with unknown flags")));
        }
        let flags = u32_at(d, b + 4);
        let (base, rfirst, rn) = (u64_at(d, b + 96), u32_at(d, b + 104) as usize, u32_at(d, b + 108) as usize);
        if rfirst > nruntime || rn > nruntime - rfirst {
            return Err(corrupt(format!(
                "malformed DDLink cache: object {i}'s runtime relocations lie outside the table"
            )));
        }
        let prelink = (flags & (OBJ_PRELINKED | OBJ_PLACED) != 0).then(|| Prelink {
            base,
            runtime: (rfirst..rfirst + rn).map(|k| u32_at(d, runtime_off + 4 * k)).collect(),
        });
        if prelink_error(flags, prelink.as_ref()) || (prelink.is_none() && (base != 0 || rn != 0)) {
            return Err(corrupt(format!("malformed DDLink cache: object {i}'s prelink flags or data")));
        }
        let entries = (first..first + n)
            .map(|k| {
                let e = entries_off + k * ENTRY_SIZE;
                Entry {
                    symidx: u32_at(d, e),
                    defsym: u32_at(d, e + 4),
                    defobj: u16_at(d, e + 8),
                    tclass: d[e + 10],
                    name_hash: u32_at(d, e + 12),
                }
            })
            .collect::<Vec<_>>();
        objects.push(Object {
            name: String::from_utf8_lossy(name).into_owned(),
            flags,
            identity: FileIdentity {
                dev: u64_at(d, b + 8),
                ino: u64_at(d, b + 16),
                size: u64_at(d, b + 24),
                mtime_sec: u64_at(d, b + 32) as i64,
                mtime_nsec: u64_at(d, b + 40) as i64,
            },
            nsyms: u32_at(d, b + 56),
            build_id: d[b + 64..b + 64 + blen].to_vec(),
            entries,
            prelink,
        });
    }
    for o in &objects {
        if o.flags & !(OBJ_MAIN | OBJ_LOADER | OBJ_PRELINKED | OBJ_PLACED | OBJ_RELR) != 0 {
            return Err(corrupt(format!("malformed DDLink cache: {} has unknown flags", shown(&o.name))));
        }
        for (k, e) in o.entries.iter().enumerate() {
            let outside =
                |what: String| corrupt(format!("malformed DDLink cache: {}'s entry {k} names {what}", shown(&o.name)));
            if e.symidx >= o.nsyms {
                return Err(outside(format!("symbol {}, past its {} symbols", e.symidx, o.nsyms)));
            }
            if e.defobj == UNRESOLVED {
                continue;
            }
            let def = objects.get(e.defobj as usize).ok_or_else(|| {
                outside(format!("defining object {}, past the cache's {} objects", e.defobj, objects.len()))
            })?;
            if e.defsym >= def.nsyms {
                let of = shown(&def.name);
                return Err(outside(format!("symbol {} of {of}, past its {} symbols", e.defsym, def.nsyms)));
            }
        }
    }
    let mut first = 0;
    for o in &objects {
        let key = |i: u32| o.entries.get(i as usize).map(|e| (e.symidx, e.tclass));
        let idx: Vec<u32> = (0..o.entries.len()).map(|k| u32_at(d, sorted_off + 4 * (first + k))).collect();
        let ascending = idx.iter().all(|&i| key(i).is_some()) && idx.windows(2).all(|w| key(w[0]) < key(w[1]));
        if !ascending {
            return Err(corrupt(format!("malformed DDLink cache: {}'s sorted index is not sorted", shown(&o.name))));
        }
        first += o.entries.len();
    }
    let mut groups = Vec::with_capacity(ngroups);
    for k in 0..ngroups {
        let b = groups_off + k * GROUP_SIZE;
        let (first, count, wfirst, wn) =
            (u32_at(d, b), u32_at(d, b + 4), u32_at(d, b + 8) as usize, u32_at(d, b + 12) as usize);
        if wfirst > ngscope || wn > ngscope - wfirst {
            return Err(corrupt(format!("malformed DDLink cache: dlopen group {k}'s scopes lie outside the table")));
        }
        let words: Vec<u32> = (wfirst..wfirst + wn).map(|i| u32_at(d, gscope_off + 4 * i)).collect();
        let bad = || corrupt(format!("malformed DDLink cache: dlopen group {k}'s scopes do not add up"));
        let (mut at, mut scopes) = (0usize, Vec::new());
        while at < words.len() {
            let n = words[at] as usize;
            at += 1;
            let mut obj = Vec::new();
            for _ in 0..n {
                let len = *words.get(at).ok_or_else(bad)? as usize;
                obj.push(words.get(at + 1..at + 1 + len).ok_or_else(bad)?.to_vec());
                at += 1 + len;
            }
            scopes.push(obj);
        }
        groups.push(Group { first, count, scopes });
    }
    let scope: Vec<u32> = (0..nscope).map(|k| u32_at(d, scope_off + 4 * k)).collect();
    let cache = Cache { loader_build_id: d[88..88 + idlen].to_vec(), objects, scope, groups };
    if let Some(why) = groups_error(&cache) {
        return Err(corrupt(format!("malformed DDLink cache: {why}")));
    }
    if cache.scope.iter().any(|&s| s as usize >= cache.initial()) {
        return Err(corrupt("malformed DDLink cache: the search list names an object the cache does not list"));
    }
    for (i, o) in cache.objects.iter().enumerate() {
        let end = cache.loaded_with(i);
        if let Some(k) = o.entries.iter().position(|e| e.defobj != UNRESOLVED && e.defobj as usize >= end) {
            return Err(corrupt(format!(
                "malformed DDLink cache: {}'s entry {k} names object {}, loaded after it",
                shown(&o.name),
                o.entries[k].defobj
            )));
        }
    }
    Ok(cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Cache {
        let obj = |name: &str, flags, entries| Object {
            name: name.into(),
            flags,
            identity: FileIdentity { dev: 2049, ino: 77, size: 4096, mtime_sec: 1_700_000_000, mtime_nsec: 5 },
            nsyms: 10,
            build_id: vec![0xab; 20],
            entries,
            prelink: None,
        };
        Cache {
            loader_build_id: vec![1, 2, 3, 4],
            objects: vec![
                obj("", OBJ_MAIN, vec![Entry { symidx: 1, tclass: 1, defobj: 2, defsym: 3, name_hash: 0x1003 }]),
                obj("/lib64/ld-linux-x86-64.so.2", OBJ_LOADER, vec![]),
                obj(
                    "/lib/libx.so",
                    0,
                    vec![
                        Entry { symidx: 2, tclass: 0, defobj: 2, defsym: 9, name_hash: 0x1009 },
                        Entry { symidx: 2, tclass: 1, defobj: 0, defsym: 4, name_hash: 0x1004 },
                        Entry { symidx: 5, tclass: 0, defobj: UNRESOLVED, defsym: 0, name_hash: 0x1000 },
                    ],
                ),
            ],
            scope: vec![0, 2],
            groups: Vec::new(),
        }
    }

    fn prelinked_sample() -> Cache {
        let mut c = sample();
        c.objects[2].flags |= OBJ_PRELINKED;
        c.objects[2].prelink = Some(Prelink { base: 0x30_0000_0000, runtime: vec![4, 1, 7] });
        c
    }

    /// The sample with two dlopen groups after it: one of two objects (the
    /// first prelinked), one of one.
    fn grouped_sample() -> Cache {
        let mut c = prelinked_sample();
        let lib = |name: &str, entries| Object {
            name: name.into(),
            flags: 0,
            identity: FileIdentity { dev: 2049, ino: 90, size: 8192, mtime_sec: 1_700_000_001, mtime_nsec: 0 },
            nsyms: 12,
            build_id: vec![0xcd; 20],
            entries,
            prelink: None,
        };
        let e = |defobj, defsym| Entry { symidx: 3, tclass: 0, defobj, defsym, name_hash: 0x2000 };
        c.objects.push(lib("/lib/a.so", vec![e(4, 5)]));
        c.objects.push(lib("/lib/b.so", vec![e(2, 1)]));
        c.objects.push(lib("/lib/c.so", vec![e(3, 7)]));
        c.objects[3].flags = OBJ_PRELINKED;
        c.objects[3].prelink = Some(Prelink { base: 0x31_0000_0000, runtime: vec![0] });
        c.groups = vec![
            Group { first: 3, count: 2, scopes: vec![vec![vec![0, 2], vec![3, 4]]; 2] },
            Group { first: 5, count: 1, scopes: vec![vec![vec![0, 2], vec![5, 3]]] },
        ];
        c
    }

    /// Version 6: the groups and their scopes round-trip; what the loader
    /// would refuse is refused on writing and on reading.
    #[test]
    fn dlopen_groups_round_trip_and_bad_ones_are_refused() {
        let c = grouped_sample();
        let b = encode(&c).unwrap();
        assert_eq!(u32_at(&b, 140), 2);
        assert_eq!(decode(&b).unwrap(), c);
        assert_eq!((c.initial(), c.loaded_with(1), c.loaded_with(4), c.loaded_with(5)), (3, 3, 5, 6));
        let refused = |f: &dyn Fn(&mut Cache), want: &str| {
            let mut x = c.clone();
            f(&mut x);
            let e = encode(&x).unwrap_err().msg;
            assert!(e.contains(want), "{e}");
        };
        refused(&|x| x.groups[1].first = 4, "do not follow");
        refused(&|x| x.groups[1].count = 2, "do not follow");
        refused(&|x| x.groups.truncate(1), "do not end with the objects");
        refused(&|x| x.groups[0].scopes.pop().map(drop).unwrap_or(()), "1 lists of scopes for 2 objects");
        refused(&|x| x.groups[0].scopes[0][1].push(5), "an object loaded after it");
        refused(&|x| x.objects[2].entries[0].defobj = 3, "a binding to an object loaded after it");
        refused(&|x| x.objects[4].flags = OBJ_LOADER, "holds the program or ld.so");
        // A group's scope words that do not add up, the checksum made right.
        let mut d = b.clone();
        let gscope = u64_at(&d, 152) as usize;
        d[gscope..gscope + 4].copy_from_slice(&9u32.to_le_bytes());
        let sum = checksum(&d);
        set_le_u64(&mut d, CHECKSUM_AT, sum);
        assert!(decode(&d).unwrap_err().msg.contains("dlopen group 0's scopes do not add up"));
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "truncation to {n} accepted");
        }
    }

    #[test]
    fn round_trip_with_the_c_layout() {
        let c = sample();
        let b = encode(&c).unwrap();
        assert!(b.len().is_multiple_of(8));
        assert_eq!(&b[..8], MAGIC);
        assert_eq!(u64_at(&b, 48) as usize, HEADER_SIZE);
        assert_eq!(u64_at(&b, 56) as usize, HEADER_SIZE + 3 * OBJ_SIZE);
        assert_eq!(decode(&b).unwrap(), c);
        let c = prelinked_sample();
        let b = encode(&c).unwrap();
        let obj2 = HEADER_SIZE + 2 * OBJ_SIZE;
        assert_eq!(u64_at(&b, obj2 + 96), 0x30_0000_0000);
        assert_eq!(u32_at(&b, obj2 + 108), 3);
        assert_eq!(u32_at(&b, 136), 3);
        assert_eq!(decode(&b).unwrap(), c);
    }

    /// Version 5: the program prelinked (never only placed), `OBJ_RELR`
    /// only with `OBJ_PRELINKED`, ld.so never based.
    #[test]
    fn the_program_and_relr_images_round_trip_and_contradictions_are_refused() {
        let mut c = prelinked_sample();
        c.objects[0].flags |= OBJ_PRELINKED | OBJ_RELR;
        c.objects[0].prelink = Some(Prelink { base: 0x20_0000_0000, runtime: vec![2, 0] });
        c.objects[2].flags |= OBJ_RELR;
        assert_eq!(decode(&encode(&c).unwrap()).unwrap(), c);
        let refused = |f: &dyn Fn(&mut Cache)| {
            let mut x = c.clone();
            f(&mut x);
            assert!(encode(&x).is_err(), "{:?}", x.objects.iter().map(|o| o.flags).collect::<Vec<_>>());
        };
        refused(&|x| x.objects[0].flags = OBJ_MAIN | OBJ_PLACED);
        refused(&|x| x.objects[2].flags = OBJ_PLACED | OBJ_RELR);
        refused(&|x| {
            x.objects[1].flags |= OBJ_PRELINKED;
            x.objects[1].prelink = Some(Prelink { base: 0x40_0000_0000, runtime: vec![] });
        });
        refused(&|x| {
            x.objects[0].flags = OBJ_MAIN | OBJ_RELR;
            x.objects[0].prelink = None;
        });
        // The same contradictions written by hand are refused on reading.
        let mut b = encode(&c).unwrap();
        let flags0 = HEADER_SIZE + 4;
        b[flags0..flags0 + 4].copy_from_slice(&(OBJ_MAIN | OBJ_PLACED | OBJ_RELR).to_le_bytes());
        let sum = checksum(&b);
        set_le_u64(&mut b, CHECKSUM_AT, sum);
        assert!(decode(&b).unwrap_err().msg.contains("object 0's prelink flags"));
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_refused() {
        let b = encode(&prelinked_sample()).unwrap();
        for i in 0..b.len() {
            let mut x = b.clone();
            x[i] ^= 0x10;
            assert!(decode(&x).is_err(), "byte {i} flipped was accepted");
        }
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "truncation to {n} accepted");
        }
    }

    /// Each of the loader's header checks says which one failed.
    #[test]
    fn each_header_check_says_which_failed() {
        let b = encode(&sample()).unwrap();
        let msg = |d: &[u8]| decode(d).unwrap_err().msg;
        // A header field set, the checksum made right again.
        let with = |at: usize, v: u32| {
            let mut d = b.clone();
            d[at..at + 4].copy_from_slice(&v.to_le_bytes());
            let sum = checksum(&d);
            set_le_u64(&mut d, CHECKSUM_AT, sum);
            msg(&d)
        };
        assert_eq!(msg(&[]), "not a DDLink cache (the file is empty)");
        assert_eq!(msg(b"xyz"), "not a DDLink cache (bad magic)");
        assert_eq!(msg(&b[..5]), "truncated DDLink cache: 5 bytes, shorter than its header");
        assert_eq!(msg(&b[..100]), "truncated DDLink cache: 100 bytes, shorter than its header");
        assert!(with(12, 152).starts_with("DDLink cache header of 152 bytes, version 6's has 168"));
        // The objects' offset (its low half) misaligned, the entries' count too large.
        assert!(with(48, HEADER_SIZE as u32 + 4).contains("the object table's offset 0xac is not 8-byte aligned"));
        assert!(with(40, 1 << 20).contains("the entry table (1048576 records of 16 bytes at"));
        assert!(with(HEADER_SIZE + 60, 33).contains("object 0's build ID length 33, more than 32"));
    }

    #[test]
    fn the_name_hash_is_glibcs_gnu_hash() {
        // glibc's elf/tst-dl-hash.c vectors for _dl_new_hash.
        assert_eq!(name_hash(b""), 0x0000_1505);
        assert_eq!(name_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(name_hash(b"exit"), 0x7c96_7e3f);
        let b = encode(&sample()).unwrap();
        let first_entry = u64_at(&b, 64) as usize;
        assert_eq!(u32_at(&b, first_entry + 12), sample().objects[0].entries[0].name_hash);
    }

    #[test]
    fn unsorted_or_out_of_range_entries_are_refused() {
        let mut c = sample();
        c.objects[2].entries[1].tclass = 0;
        assert!(encode(&c).unwrap_err().msg.contains("two entries"));
        let mut c = sample();
        c.objects[0].entries[0].defsym = 10;
        let b = encode(&c).unwrap();
        let e = decode(&b).unwrap_err().msg;
        assert!(e.contains("entry 0 names symbol 10 of") && e.contains(", past its"), "{e}");
        let mut c = sample();
        c.objects[0].entries[0].defobj = 3; // no such object
        let e = decode(&encode(&c).unwrap()).unwrap_err().msg;
        assert!(e.contains("entry 0 names defining object 3, past the cache's 3 objects"), "{e}");
        let mut c = sample();
        c.scope = vec![0, 3]; // no such object
        assert!(decode(&encode(&c).unwrap()).unwrap_err().msg.contains("search list"));
    }
}
