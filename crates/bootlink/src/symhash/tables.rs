//! The tables' binary layout (little-endian 32-bit words), built here and
//! read by the kernel (patch `symhash-tables`, kernel/module/symhash.c)
//! and by `Tables::lookup` below, which mirrors the kernel's search so the
//! host can check every table it writes.
//!
//! ```text
//! header   magic "KYSH", version, size, checksum,
//!          2 × { nsyms, hashes, sysv, gnu, perfect }   (offsets; 0 = none)
//! hashes   u32 hash[nsyms]                  DJB hash, export table order
//! sysv     nbucket, nchain, bucket[nbucket], chain[nchain]      (-1 ends)
//! gnu      nbuckets, bloom_words, bloom_shift, 0, u64 bloom[bloom_words],
//!          bucket[nbuckets], chain[nsyms] (hash | 1 on a bucket's last),
//!          index[nsyms] (chain position -> export index)
//! perfect  nbuckets, nslots, noverflow, 0, seed[nbuckets], slot[nslots],
//!          overflow[noverflow]
//! ```
//!
//! The GNU table keeps glibc's DT_GNU_HASH layout except for the `index`
//! array: glibc's dynamic symbol table is sorted by bucket, while the
//! kernel's export tables must stay sorted by name (the stock bsearch and
//! the CRC arrays index them), so the chain names the export by index.

use super::hash::{checksum, djb, mix};
use crate::bytes::{LeWriter, le_u32};
use crate::error::{Error, Kind};

/// Bytes that are not symbol hash tables.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

/// Tables that do not come out as they must: a bug in bootlink.
fn internal(msg: impl Into<String>) -> Error {
    Error::new(Kind::Internal, msg)
}

pub(crate) const MAGIC: u32 = 0x4853_594b; // "KYSH"
pub const UNDEF_MAGIC: u32 = 0x4844_4e55; // "UNDH"
pub(crate) const VERSION: u32 = 1;
pub(crate) const HEADER_SIZE: usize = 16 + 2 * 20;
pub const NONE: u32 = u32::MAX;
pub(crate) const OVERFLOW: u32 = 0x8000_0000;
/// `.undef.hash` flag: `__versions` is sorted by name.
pub const VERSIONS_SORTED: u32 = 1;
/// `.undef.hash` flag: after the hashes, each undefined symbol's index in
/// `__versions` ([`NONE`] for a symbol without an entry), so the loader
/// checks one entry instead of searching (patch `versions-indexed`; a kernel
/// without it reads the hashes and ignores the rest).
pub const VERSIONS_INDEXED: u32 = 2;
/// `.undef.hash` flag: then each undefined symbol's slot in vmlinux's export
/// tables ([`NONE`] for a name vmlinux does not export): its index in
/// `__ksymtab`, or in `__ksymtab_gpl` with [`SLOT_GPL`] (patch
/// `export-slots`, which checks the name there before any search).
pub const EXPORT_SLOTS: u32 = 4;
/// An export slot in `__ksymtab_gpl`.
pub const SLOT_GPL: u32 = 0x8000_0000;
const BLOOM_SHIFT: u32 = 26;

/// The SysV bucket counts binutils uses (modpost's table).
const ELF_BUCKETS: [u32; 16] = [1, 3, 17, 37, 67, 97, 131, 197, 263, 521, 1031, 2053, 4099, 8209, 16411, 32771];

/// The search methods, as `module.symlookup=` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Simple,
    Sysv,
    Gnu,
    Perfect,
}

impl Method {
    pub const ALL: [Method; 4] = [Method::Simple, Method::Sysv, Method::Gnu, Method::Perfect];
    pub fn name(self) -> &'static str {
        match self {
            Method::Simple => "simple",
            Method::Sysv => "sysv",
            Method::Gnu => "gnu",
            Method::Perfect => "perfect",
        }
    }
}

fn sysv_buckets(n: usize) -> u32 {
    let mut best = ELF_BUCKETS[0];
    for (i, &b) in ELF_BUCKETS.iter().enumerate() {
        best = b;
        match ELF_BUCKETS.get(i + 1) {
            Some(&next) if (n as u64) < next as u64 => break,
            _ => {}
        }
    }
    best
}

fn sysv(w: &mut LeWriter, hashes: &[u32]) -> u32 {
    let off = w.len() as u32;
    let n = hashes.len();
    let nbucket = sysv_buckets(n);
    let mut bucket = vec![NONE; nbucket as usize];
    let mut chain = vec![NONE; n];
    // Inserted from the end, so each chain runs in export table order.
    for i in (0..n).rev() {
        let b = (hashes[i] % nbucket) as usize;
        chain[i] = bucket[b];
        bucket[b] = i as u32;
    }
    w.u32(nbucket);
    w.u32(n as u32);
    bucket.iter().chain(&chain).for_each(|&v| w.u32(v));
    off
}

fn gnu(w: &mut LeWriter, hashes: &[u32]) -> u32 {
    w.align(8);
    let off = w.len() as u32;
    let n = hashes.len();
    let nbuckets = n.div_ceil(4).max(1) as u32;
    let words = (n / 8).max(1).next_power_of_two();
    let mut bloom = vec![0u64; words];
    for &h in hashes {
        let word = &mut bloom[(h as usize / 64) & (words - 1)];
        *word |= 1 << (h % 64);
        *word |= 1 << ((h >> BLOOM_SHIFT) % 64);
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (hashes[i] % nbuckets, i));
    let mut bucket = vec![NONE; nbuckets as usize];
    let mut chain = vec![0u32; n];
    for (p, &i) in order.iter().enumerate() {
        let b = hashes[i] % nbuckets;
        if bucket[b as usize] == NONE {
            bucket[b as usize] = p as u32;
        }
        let last = order.get(p + 1).is_none_or(|&j| hashes[j] % nbuckets != b);
        chain[p] = (hashes[i] & !1) | last as u32;
    }
    w.u32(nbuckets);
    w.u32(words as u32);
    w.u32(BLOOM_SHIFT);
    w.u32(0);
    for b in bloom {
        w.u64(b);
    }
    bucket.iter().chain(&chain).for_each(|&v| w.u32(v));
    order.iter().for_each(|&i| w.u32(i as u32));
    off
}

/// Hash and displace over the 32-bit hashes: bucket `mix(h) % nbuckets`,
/// slot `mix(h ^ seed[bucket]) % nslots`; the seeds are found at build time,
/// largest buckets first. Exports whose names share a 32-bit hash share a
/// slot that points to a counted list in `overflow`.
fn perfect(w: &mut LeWriter, hashes: &[u32]) -> std::result::Result<u32, Error> {
    let off = w.len() as u32;
    let n = hashes.len();
    let mut keys: Vec<(u32, Vec<u32>)> = Vec::new();
    {
        let mut sorted: Vec<(u32, u32)> = hashes.iter().enumerate().map(|(i, &h)| (h, i as u32)).collect();
        sorted.sort();
        for (h, i) in sorted {
            match keys.last_mut() {
                Some((k, v)) if *k == h => v.push(i),
                _ => keys.push((h, vec![i])),
            }
        }
    }
    let nbuckets = n.div_ceil(4).max(1) as u32;
    let nslots = (n + n / 4).max(1) as u32;
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); nbuckets as usize];
    for (k, (h, _)) in keys.iter().enumerate() {
        buckets[(mix(*h) % nbuckets) as usize].push(k);
    }
    let mut by_size: Vec<usize> = (0..buckets.len()).collect();
    by_size.sort_by_key(|&b| std::cmp::Reverse(buckets[b].len()));
    let mut seed = vec![0u32; nbuckets as usize];
    let mut slot = vec![NONE; nslots as usize];
    let mut overflow = Vec::new();
    let mut taken: Vec<u32> = Vec::new();
    for b in by_size {
        if buckets[b].is_empty() {
            break;
        }
        let mut s = 0u32;
        loop {
            taken.clear();
            let ok = buckets[b].iter().all(|&k| {
                let t = mix(keys[k].0 ^ s) % nslots;
                let free = slot[t as usize] == NONE && !taken.contains(&t);
                taken.push(t);
                free
            });
            if ok {
                break;
            }
            s = s.checked_add(1).ok_or_else(|| internal("perfect hash: no seed places a bucket"))?;
        }
        seed[b] = s;
        for (&k, &t) in buckets[b].iter().zip(&taken) {
            let idx = &keys[k].1;
            slot[t as usize] = if idx.len() == 1 {
                idx[0]
            } else {
                let at = overflow.len() as u32;
                overflow.push(idx.len() as u32);
                overflow.extend_from_slice(idx);
                OVERFLOW | at
            };
        }
    }
    w.u32(nbuckets);
    w.u32(nslots);
    w.u32(overflow.len() as u32);
    w.u32(0);
    seed.iter().chain(&slot).chain(&overflow).for_each(|&v| w.u32(v));
    Ok(off)
}

/// Build the tables for two export tables (`__ksymtab`, `__ksymtab_gpl`),
/// each given as its names in table order.
pub fn build(tables: [&[&str]; 2]) -> std::result::Result<Vec<u8>, Error> {
    let mut w = LeWriter { out: vec![0; HEADER_SIZE] };
    let mut entries = [[0u32; 5]; 2];
    for (t, names) in tables.iter().enumerate() {
        if names.is_empty() {
            continue;
        }
        let hashes: Vec<u32> = names.iter().map(|n| djb(n.as_bytes())).collect();
        w.align(4);
        let hoff = w.len() as u32;
        hashes.iter().for_each(|&h| w.u32(h));
        let s = sysv(&mut w, &hashes);
        let g = gnu(&mut w, &hashes);
        let p = perfect(&mut w, &hashes)?;
        entries[t] = [names.len() as u32, hoff, s, g, p];
    }
    w.align(8);
    let mut out = w.into_inner();
    let mut head = LeWriter::with_capacity(HEADER_SIZE);
    for v in [MAGIC, VERSION, out.len() as u32, checksum(&out[HEADER_SIZE..])] {
        head.u32(v);
    }
    for e in entries {
        e.iter().for_each(|&v| head.u32(v));
    }
    out[..HEADER_SIZE].copy_from_slice(&head.out);
    Ok(out)
}

/// `.undef.hash`: the hash of each undefined symbol, in .symtab order;
/// with `versions` (one index per name), then each one's `__versions`
/// index, flagged [`VERSIONS_INDEXED`]; with `slots`, then each one's
/// export slot, flagged [`EXPORT_SLOTS`].
pub fn undef(names: &[&str], mut flags: u32, versions: Option<&[u32]>, slots: Option<&[u32]>) -> Vec<u8> {
    let versions = versions.filter(|v| v.len() == names.len());
    let slots = slots.filter(|v| v.len() == names.len());
    if versions.is_some() {
        flags |= VERSIONS_INDEXED;
    }
    if slots.is_some() {
        flags |= EXPORT_SLOTS;
    }
    let mut out = LeWriter::with_capacity(16 + 12 * names.len());
    for v in [UNDEF_MAGIC, VERSION, names.len() as u32, flags] {
        out.u32(v);
    }
    for n in names {
        out.u32(djb(n.as_bytes()));
    }
    for &i in versions.unwrap_or_default().iter().chain(slots.unwrap_or_default()) {
        out.u32(i);
    }
    out.into_inner()
}

/// Each of `undefined`'s slot in vmlinux's export tables, `exports` in
/// table order (`__ksymtab`'s, then `__ksymtab_gpl`'s): the index in its
/// table, with [`SLOT_GPL`] for the GPL one; [`NONE`] for a name vmlinux
/// does not export.
pub fn export_slots(undefined: &[&str], exports: &[crate::kernel::Export]) -> Vec<u32> {
    let mut at: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut next = [0u32; 2];
    for e in exports {
        let n = &mut next[e.gpl as usize];
        at.entry(e.name.as_str()).or_insert(if e.gpl { SLOT_GPL | *n } else { *n });
        *n += 1;
    }
    undefined.iter().map(|u| at.get(u).copied().unwrap_or(NONE)).collect()
}

/// Each of `undefined`'s index among the `__versions` record names
/// `records` (in the section's order), [`NONE`] for a name without one; a
/// name listed twice gets its first record, as the kernel's search would.
pub fn version_index(undefined: &[&str], records: &[Vec<u8>]) -> Vec<u32> {
    let mut at: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    for (i, r) in records.iter().enumerate() {
        at.entry(r.as_slice()).or_insert(i as u32);
    }
    undefined.iter().map(|u| at.get(u.as_bytes()).copied().unwrap_or(NONE)).collect()
}

/// A read view of built tables, searching as the kernel does.
#[derive(Debug)]
pub struct Tables<'d> {
    data: &'d [u8],
}

impl<'d> Tables<'d> {
    pub fn parse(data: &'d [u8]) -> std::result::Result<Tables<'d>, Error> {
        let t = Tables { data };
        if data.len() < HEADER_SIZE || t.word(0) != MAGIC {
            return Err(corrupt("no symbol hash tables (bad magic)"));
        }
        if t.word(4) != VERSION {
            return Err(corrupt(format!("symbol hash tables of unknown version {}", t.word(4))));
        }
        let size = t.word(8) as usize;
        if size < HEADER_SIZE || size > data.len() || checksum(&data[HEADER_SIZE..size]) != t.word(12) {
            return Err(corrupt("symbol hash tables are corrupt (size or checksum)"));
        }
        Ok(t)
    }

    fn word(&self, off: usize) -> u32 {
        le_u32(self.data, off).unwrap_or(NONE)
    }

    fn at(&self, base: u32, i: u64) -> u32 {
        usize::try_from(base as u64 + 4 * i).map_or(NONE, |o| self.word(o))
    }

    pub fn nsyms(&self, tab: usize) -> u32 {
        self.word(16 + 20 * tab)
    }

    pub fn size(&self) -> usize {
        self.word(8) as usize
    }

    /// Index of `name` in export table `tab`, given the names in table order.
    pub fn lookup(&self, method: Method, tab: usize, names: &[&str], name: &str) -> Option<u32> {
        let e = 16 + 20 * tab;
        let (n, hashes, sysv, gnu, perfect) =
            (self.word(e), self.word(e + 4), self.word(e + 8), self.word(e + 12), self.word(e + 16));
        let h = djb(name.as_bytes());
        let is = |i: u32| i < n && names.get(i as usize) == Some(&name);
        if n == 0 {
            return None;
        }
        match method {
            Method::Simple => (0..n).find(|&i| self.at(hashes, i as u64) == h && is(i)),
            Method::Sysv => {
                let nbucket = self.at(sysv, 0);
                let nchain = self.at(sysv, 1);
                let mut i = self.at(sysv, 2 + (h % nbucket) as u64);
                let mut steps = 0;
                while i < nchain && steps < nchain {
                    if self.at(hashes, i as u64) == h && is(i) {
                        return Some(i);
                    }
                    i = self.at(sysv, 2 + nbucket as u64 + i as u64);
                    steps += 1;
                }
                None
            }
            Method::Gnu => {
                let (nbuckets, words, shift) = (self.at(gnu, 0), self.at(gnu, 1), self.at(gnu, 2));
                let wi = ((h / 64) & (words - 1)) as u64;
                let w = self.at(gnu, 4 + 2 * wi) as u64 | (self.at(gnu, 5 + 2 * wi) as u64) << 32;
                if (w >> (h % 64)) & (w >> ((h >> shift) % 64)) & 1 == 0 {
                    return None;
                }
                let base = 4 + 2 * words as u64;
                let mut p = self.at(gnu, base + (h % nbuckets) as u64);
                while p < n {
                    let c = self.at(gnu, base + nbuckets as u64 + p as u64);
                    let i = self.at(gnu, base + nbuckets as u64 + n as u64 + p as u64);
                    if c | 1 == h | 1 && is(i) {
                        return Some(i);
                    }
                    if c & 1 == 1 {
                        break;
                    }
                    p += 1;
                }
                None
            }
            Method::Perfect => {
                let (nbuckets, nslots, noverflow) = (self.at(perfect, 0), self.at(perfect, 1), self.at(perfect, 2));
                let seed = self.at(perfect, 4 + (mix(h) % nbuckets) as u64);
                let v = self.at(perfect, 4 + nbuckets as u64 + (mix(h ^ seed) % nslots) as u64);
                if v & OVERFLOW == 0 {
                    return (self.at(hashes, v as u64) == h && is(v)).then_some(v);
                }
                let v = v & !OVERFLOW;
                if v >= noverflow {
                    return None;
                }
                let list = 4 + nbuckets as u64 + nslots as u64 + v as u64;
                let count = self.at(perfect, list).min(noverflow - v - 1);
                (1..=count as u64).map(|k| self.at(perfect, list + k)).find(|&i| is(i))
            }
        }
    }

    /// Check what the kernel checks before using the tables: every export
    /// found at its own index by every method.
    pub fn verify(&self, tables: [&[&str]; 2]) -> std::result::Result<(), Error> {
        for (tab, names) in tables.iter().enumerate() {
            if self.nsyms(tab) as usize != names.len() {
                return Err(internal(format!(
                    "table {tab}: {} entries, the export table has {}",
                    self.nsyms(tab),
                    names.len()
                )));
            }
            self.verify_simple(tab, names)?;
            for m in Method::ALL.into_iter().filter(|&m| m != Method::Simple) {
                for (i, name) in names.iter().enumerate() {
                    if self.lookup(m, tab, names, name) != Some(i as u32) {
                        return Err(internal(format!("{} table does not find {name} at index {i}", m.name())));
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Self::verify`] of the simple method in one pass: its search finds
    /// each export at its own index exactly when every stored hash is its
    /// name's and no earlier entry has the same name (searching the table
    /// once per export made `symhash --vmlinux` quadratic in the exports:
    /// tests/offline/input_scale.rs).
    fn verify_simple(&self, tab: usize, names: &[&str]) -> std::result::Result<(), Error> {
        let hashes = self.word(16 + 20 * tab + 4);
        let mut first: std::collections::HashMap<&str, usize> = std::collections::HashMap::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let found = *first.entry(name).or_insert(i);
            if found != i || self.at(hashes, i as u64) != djb(name.as_bytes()) {
                return Err(internal(format!("simple table does not find {name} at index {i}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        let mut v: Vec<String> = (0..n).map(|i| format!("sym_{i:05}_{}", i * 7919 % 1000)).collect();
        v.sort();
        v
    }

    fn export(name: &str, gpl: bool) -> crate::kernel::Export {
        crate::kernel::Export { name: name.into(), addr: 0, gpl, namespace: None, crc: None }
    }

    #[test]
    fn undef_arrays_follow_the_hashes_in_the_order_the_kernel_reads_them() {
        let words = |b: &[u8]| crate::bytes::le_u32s(b).collect::<Vec<_>>();
        let names = ["kmalloc", "btrfs_own", "gpl_one"];
        let exports =
            [export("a_first", false), export("kmalloc", false), export("gpl_zero", true), export("gpl_one", true)];
        let slots = export_slots(&names, &exports);
        // kmalloc is __ksymtab's entry 1, gpl_one __ksymtab_gpl's entry 1, btrfs_own not vmlinux's.
        assert_eq!(slots, [1, NONE, SLOT_GPL | 1]);
        let records: Vec<Vec<u8>> = [b"gpl_one".to_vec(), b"kmalloc".to_vec(), b"module_layout".to_vec()].into();
        let versions = version_index(&names, &records);
        assert_eq!(versions, [1, NONE, 0]);
        let hashes: Vec<u32> = names.iter().map(|n| djb(n.as_bytes())).collect();
        let head = |flags| vec![UNDEF_MAGIC, VERSION, 3, flags];
        let w = words(&undef(&names, VERSIONS_SORTED, Some(&versions), Some(&slots)));
        assert_eq!(
            w,
            [head(VERSIONS_SORTED | VERSIONS_INDEXED | EXPORT_SLOTS), hashes.clone(), versions.clone(), slots.clone()]
                .concat()
        );
        // Either array alone comes right after the hashes.
        let w = words(&undef(&names, 0, None, Some(&slots)));
        assert_eq!(w, [head(EXPORT_SLOTS), hashes.clone(), slots.clone()].concat());
        let w = words(&undef(&names, 0, Some(&versions), None));
        assert_eq!(w, [head(VERSIONS_INDEXED), hashes.clone(), versions].concat());
        // An array of the wrong length is not written (nor flagged).
        assert_eq!(words(&undef(&names, 0, Some(&[1]), None)), [head(0), hashes].concat());
    }

    #[test]
    fn every_method_finds_every_export_and_nothing_else() {
        for n in [0, 1, 2, 3, 17, 100, 4097] {
            let a = names(n);
            let b: Vec<String> = names(n / 3).into_iter().map(|s| format!("gpl_{s}")).collect();
            let (a, b): (Vec<&str>, Vec<&str>) =
                (a.iter().map(|s| s.as_str()).collect(), b.iter().map(|s| s.as_str()).collect());
            let blob = build([&a, &b]).unwrap();
            let t = Tables::parse(&blob).unwrap();
            t.verify([&a, &b]).unwrap();
            for m in Method::ALL {
                assert_eq!(t.lookup(m, 0, &a, "not_exported"), None);
                assert_eq!(t.lookup(m, 1, &b, "sym_00000_0"), None);
            }
        }
    }

    #[test]
    fn names_sharing_a_hash_are_told_apart() {
        // "Ez" and "FY" have the same DJB hash (33 * 'E' + 'z' == 33 * 'F' + 'Y').
        assert_eq!(djb(b"Ez"), djb(b"FY"));
        let a = ["Ez", "FY", "x"];
        let blob = build([&a, &[]]).unwrap();
        let t = Tables::parse(&blob).unwrap();
        t.verify([&a, &[]]).unwrap();
    }

    /// The simple method's check, made in one pass, still refuses what
    /// the simple search would not find at its index: a name given twice,
    /// a stored hash that is not its name's.
    #[test]
    fn the_simple_check_refuses_a_name_twice_or_a_wrong_hash() {
        let twice = ["a", "b", "a"];
        let blob = build([&twice, &[]]).unwrap();
        let e = Tables::parse(&blob).unwrap().verify([&twice, &[]]).unwrap_err();
        assert!(e.msg.contains("simple table does not find a at index 2"), "{}", e.msg);
        let a = ["a", "b", "c"];
        let mut blob = build([&a, &[]]).unwrap();
        let hashes = u32::from_le_bytes(blob[20..24].try_into().unwrap()) as usize;
        blob[hashes + 4] ^= 2;
        let size = u32::from_le_bytes(blob[8..12].try_into().unwrap()) as usize;
        let sum = checksum(&blob[HEADER_SIZE..size]);
        blob[12..16].copy_from_slice(&sum.to_le_bytes());
        let e = Tables::parse(&blob).unwrap().verify([&a, &[]]).unwrap_err();
        assert!(e.msg.contains("simple table does not find b at index 1"), "{}", e.msg);
    }

    #[test]
    fn corruption_is_refused() {
        let a = ["a", "b", "c"];
        let mut blob = build([&a, &[]]).unwrap();
        let last = blob.len() - 8;
        blob[last] ^= 1;
        assert!(Tables::parse(&blob).unwrap_err().msg.contains("checksum"));
        assert!(Tables::parse(&blob[..20]).is_err());
    }

    #[test]
    fn sysv_bucket_counts_follow_binutils() {
        assert_eq!(sysv_buckets(0), 1);
        assert_eq!(sysv_buckets(3), 3);
        assert_eq!(sysv_buckets(3855), 2053);
        assert_eq!(sysv_buckets(100_000), 32771);
    }
}
