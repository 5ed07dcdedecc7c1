//! The record the patched ld.so writes under `LD_DDLINK_RECORD=FILE`
//! (elf/dl-ddlink.c): every symbol lookup of a program's initial
//! relocation, by object index and symbol index, with the identity of
//! every object as the loader saw it; then, for each `dlopen` that loaded
//! objects, a group: its objects (numbered on), each one's search scopes
//! when it was relocated, and its relocation's lookups. Text, one item a
//! line:
//!
//! ```text
//! ddlink-record 2
//! loader <build id hex>
//! obj <idx> <flags> <dev> <ino> <size> <mtime s> <mtime ns> <build id hex|-> <name>
//! scope <idx> <idx> ...
//! bind <ref idx> <sym idx> <type class> <def idx> <def sym>   (or "- -": undefined weak, "? -": outside)
//! end <lookups>
//! group <k> <first idx> <objects>
//! obj ...                                       (the group's objects)
//! lscope <idx> <scopes> (<length> <idx>...)...  (each object's scopes)
//! bind ...                                      (the group's objects' lookups)
//! end-group <k> <lookups>
//! stop <why>               (the loader recorded no more groups; one cut
//!                           short, by a failed dlopen, is dropped)
//! ```

use std::path::Path;

use super::format::FileIdentity;
use crate::error::{Error, Kind, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Def {
    /// Defined by this object's symbol.
    Sym { obj: u32, sym: u32 },
    /// An undefined weak reference: no definition.
    Unresolved,
    /// Defined by an object outside the initial namespace (not cacheable).
    Outside,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bind {
    pub refobj: u32,
    pub symidx: u32,
    pub tclass: u8,
    pub def: Def,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecObj {
    pub flags: u32,
    pub identity: FileIdentity,
    pub build_id: Vec<u8>,
    pub name: String,
}

/// The objects one `dlopen` loaded, and how their relocation looked
/// symbols up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its objects are `first..first + count` of the record's.
    pub first: u32,
    pub count: u32,
    /// Each object's search scopes (its l_scope) when it was relocated,
    /// as object indices.
    pub scopes: Vec<Vec<Vec<u32>>>,
    /// Lookups the loader counted (the `end-group` line).
    pub lookups: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub loader_build_id: Vec<u8>,
    /// The initial namespace's objects, then each group's.
    pub objects: Vec<RecObj>,
    pub scope: Vec<u32>,
    /// The startup's bindings, then each group's.
    pub binds: Vec<Bind>,
    /// Lookups the loader counted (the `end` line).
    pub lookups: u64,
    pub groups: Vec<Group>,
}

impl Record {
    /// The objects of the initial namespace (before the first group).
    pub fn initial(&self) -> usize {
        self.groups.first().map_or(self.objects.len(), |g| g.first as usize)
    }
}

pub use crate::fsutil::hex;

/// A build ID field (`-`: none), or why it is not one.
fn unhex(s: &str) -> std::result::Result<Vec<u8>, String> {
    if s == "-" {
        return Ok(Vec::new());
    }
    // Bytes, not chars: a non-ASCII character is not hex (slicing the str
    // by byte pairs would cut it).
    let shown: String = s.chars().take(80).collect();
    if !s.is_ascii() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("build ID `{shown}` is not hexadecimal"));
    }
    if !s.len().is_multiple_of(2) {
        return Err(format!("build ID `{shown}` has an odd number of digits"));
    }
    if s.len() > 64 {
        return Err(format!("build ID of {} bytes, longer than the 32 a record holds", s.len() / 2));
    }
    Ok((0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits")).collect())
}

/// A record that is not what `bootlink ddlink record` writes.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

impl Record {
    pub fn read(path: &Path) -> Result<Record> {
        let text = crate::fsutil::read_input(path, crate::fsutil::MAX_TEXT)?;
        Record::parse(&String::from_utf8_lossy(&text)).map_err(|e| e.at(path))
    }

    /// Parse a record; the message names the line that is wrong.
    pub fn parse(text: &str) -> std::result::Result<Record, Error> {
        // Version 1 has no dlopen groups (a loader before glibc patch 0011).
        const FIRST: &str = "ddlink-record 2";
        const FIRST_V1: &str = "ddlink-record 1";
        if text.is_empty() {
            return Err(corrupt("not a DDLink record (the file is empty)"));
        }
        if !text.contains('\n') && FIRST.starts_with(text) && text != FIRST && text != FIRST_V1 {
            return Err(corrupt(format!("truncated record: {} bytes, it ends inside its first line", text.len())));
        }
        let mut lines = text.lines().enumerate();
        let groups_allowed = match lines.next() {
            Some((_, FIRST)) => true,
            Some((_, FIRST_V1)) => false,
            Some((_, l)) if l.starts_with("ddlink-record ") => {
                return Err(corrupt(format!("line 1: record version {}, this bootlink reads 1 and 2", &l[14..])));
            }
            _ => return Err(corrupt("not a DDLink record (no `ddlink-record 2` line)")),
        };
        // The loader ends every line with a newline: a last line without
        // one is where the file was cut.
        let cut_at = (!text.ends_with('\n')).then(|| text.lines().count());
        let mut rec = Record {
            loader_build_id: Vec::new(),
            objects: Vec::new(),
            scope: Vec::new(),
            binds: Vec::new(),
            lookups: 0,
            groups: Vec::new(),
        };
        let mut ended = false;
        // A group being read: it, and where its bindings start.
        let mut open: Option<(Group, usize)> = None;
        let mut stopped = false;
        for (i, line) in lines {
            let n = i + 1;
            let shown = line.chars().take(120).collect::<String>();
            let bad = |what: &str| {
                if cut_at == Some(n) {
                    corrupt(format!("truncated record: it ends inside line {n} (`{shown}`), with no `end` line"))
                } else {
                    corrupt(format!("line {n}: {what}: `{shown}`"))
                }
            };
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            if stopped {
                return Err(bad("text after the `stop` line"));
            }
            if ended && open.is_none() && !(groups_allowed && matches!(word, "group" | "stop")) {
                return Err(bad(if groups_allowed {
                    "after the startup's `end` line, only dlopen groups"
                } else {
                    "text after the end line (a version 1 record has no dlopen groups)"
                }));
            }
            let nums = |k: usize| -> std::result::Result<Vec<u64>, Error> {
                let t: Vec<&str> = rest.split(' ').take(k).collect();
                if t.len() < k || t.iter().any(|t| t.is_empty()) {
                    return Err(bad(&if k == 1 {
                        "expected a number".to_string()
                    } else {
                        format!("expected {k} numbers")
                    }));
                }
                t.iter().map(|t| crate::fsutil::text_number(t, 10).map_err(|why| bad(&why))).collect()
            };
            match word {
                "loader" => rec.loader_build_id = unhex(rest).map_err(|why| bad(&why))?,
                "obj" => {
                    let mut f = rest.splitn(9, ' ');
                    let v: Vec<u64> = nums(7)?;
                    f.by_ref().take(7).for_each(drop);
                    if v[0] != rec.objects.len() as u64 {
                        return Err(bad("objects out of order"));
                    }
                    if let Some((g, _)) = &open
                        && v[0] >= u64::from(g.first + g.count)
                    {
                        return Err(bad("more objects than the group has"));
                    }
                    if ended && open.is_none() {
                        return Err(bad("an object outside a group"));
                    }
                    let id = unhex(f.next().ok_or_else(|| bad("no build ID"))?).map_err(|why| bad(&why))?;
                    let name = f.next().unwrap_or("").to_string();
                    rec.objects.push(RecObj {
                        flags: v[1] as u32,
                        identity: FileIdentity {
                            dev: v[2],
                            ino: v[3],
                            size: v[4],
                            mtime_sec: v[5] as i64,
                            mtime_nsec: v[6] as i64,
                        },
                        build_id: id,
                        name,
                    });
                }
                "scope" if ended => return Err(bad("a second search list")),
                "scope" => {
                    rec.scope = rest
                        .split(' ')
                        .filter(|t| !t.is_empty())
                        .map(|t| crate::fsutil::text_field(t, "object index").map_err(|why| bad(&why)))
                        .collect::<std::result::Result<_, _>>()?;
                }
                "bind" => {
                    let t: Vec<&str> = rest.split(' ').collect();
                    if t.len() != 5 {
                        return Err(bad("expected 5 fields"));
                    }
                    let field = |k: usize, what: &str| -> std::result::Result<u32, Error> {
                        crate::fsutil::text_field(t[k], what).map_err(|why| bad(&why))
                    };
                    let def = match (t[3], t[4]) {
                        ("-", "-") => Def::Unresolved,
                        ("?", "-") => Def::Outside,
                        (o @ ("-" | "?"), s) => {
                            return Err(bad(&format!("defining symbol `{s}` of no defining object (`{o}`)")));
                        }
                        (o, "-") => return Err(bad(&format!("defining object `{o}` with no defining symbol (`-`)"))),
                        _ => Def::Sym { obj: field(3, "object index")?, sym: field(4, "symbol index")? },
                    };
                    let refobj = field(0, "object index")?;
                    if let Some((g, _)) = &open
                        && !(g.first..g.first + g.count).contains(&refobj)
                    {
                        return Err(bad("a binding of an object outside its group"));
                    }
                    rec.binds.push(Bind {
                        refobj,
                        symidx: field(1, "symbol index")?,
                        tclass: crate::fsutil::text_field(t[2], "type class").map_err(|why| bad(&why))?,
                        def,
                    });
                }
                "end" if ended => return Err(bad("a second `end` line")),
                "end" if rest.is_empty() => return Err(bad("an `end` line without its count of lookups")),
                "end" => {
                    rec.lookups = nums(1)?[0];
                    ended = true;
                }
                "group" => {
                    if open.is_some() {
                        return Err(bad("a group inside a group"));
                    }
                    let v = nums(3)?;
                    if v[0] != rec.groups.len() as u64 {
                        return Err(bad("groups out of order"));
                    }
                    if v[1] != rec.objects.len() as u64 || v[2] == 0 || v[1] + v[2] > u64::from(u32::MAX) {
                        return Err(bad("a group's objects do not follow the objects before it"));
                    }
                    let g = Group { first: v[1] as u32, count: v[2] as u32, scopes: Vec::new(), lookups: 0 };
                    open = Some((g, rec.binds.len()));
                }
                "lscope" => {
                    let Some((g, _)) = &mut open else { return Err(bad("search scopes outside a group")) };
                    let v: Vec<u32> = rest
                        .split(' ')
                        .map(|t| crate::fsutil::text_field(t, "number").map_err(|why| bad(&why)))
                        .collect::<std::result::Result<_, _>>()?;
                    if v.first() != Some(&(g.first + g.scopes.len() as u32)) {
                        return Err(bad("search scopes out of order"));
                    }
                    let (mut at, mut scopes) = (2usize, Vec::new());
                    for _ in 0..*v.get(1).ok_or_else(|| bad("no count of scopes"))? {
                        let len = *v.get(at).ok_or_else(|| bad("fewer scopes than its count"))? as usize;
                        let list = v.get(at + 1..at + 1 + len).ok_or_else(|| bad("a scope shorter than its length"))?;
                        scopes.push(list.to_vec());
                        at += 1 + len;
                    }
                    if at != v.len() {
                        return Err(bad("more numbers than its scopes have"));
                    }
                    g.scopes.push(scopes);
                }
                "end-group" => {
                    let Some((mut g, _)) = open.take() else { return Err(bad("an `end-group` outside a group")) };
                    let v = nums(2)?;
                    if v[0] != rec.groups.len() as u64 {
                        return Err(bad("the end of another group"));
                    }
                    if rec.objects.len() as u64 != u64::from(g.first + g.count) || g.scopes.len() != g.count as usize {
                        return Err(bad("a group without all its objects and their scopes"));
                    }
                    g.lookups = v[1];
                    rec.groups.push(g);
                }
                "stop" if !ended => return Err(bad("a `stop` before the startup's `end`")),
                "stop" => {
                    // A group cut short (a dlopen that failed) is dropped.
                    if let Some((g, binds)) = open.take() {
                        rec.objects.truncate(g.first as usize);
                        rec.binds.truncate(binds);
                    }
                    stopped = true;
                }
                _ => return Err(bad("unknown line")),
            }
        }
        if !ended {
            return Err(corrupt("truncated record (no `end` line): the program's startup relocation did not finish"));
        }
        if open.is_some() {
            return Err(corrupt(format!(
                "truncated record: dlopen group {} has no `end-group` line (the program ended inside a dlopen)",
                rec.groups.len()
            )));
        }
        let nobj = rec.objects.len() as u32;
        if nobj == 0 {
            return Err(corrupt("the record lists no objects"));
        }
        // Each object binds only to objects loaded by then: the startup's
        // to the initial ones, a group's to its own and those before.
        let initial = rec.initial() as u32;
        let end_of = |obj: u32| {
            rec.groups
                .iter()
                .find(|g| (g.first..g.first + g.count).contains(&obj))
                .map_or(initial, |g| g.first + g.count)
        };
        let out_of_range = rec.scope.iter().any(|&s| s >= initial)
            || rec
                .binds
                .iter()
                .any(|b| b.refobj >= nobj || matches!(b.def, Def::Sym { obj, .. } if obj >= end_of(b.refobj)))
            || rec.groups.iter().any(|g| g.scopes.iter().flatten().flatten().any(|&s| s >= g.first + g.count));
        if out_of_range {
            return Err(corrupt("a binding or a search list names an object the record does not list"));
        }
        // One file, one object (an image is written per name).
        let mut names = std::collections::HashSet::new();
        if let Some(o) = rec.objects.iter().find(|o| !o.name.is_empty() && !names.insert(o.name.as_str())) {
            return Err(corrupt(format!("{} is listed twice", o.name)));
        }
        Ok(rec)
    }
}

/// What a profile run recorded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub record: std::path::PathBuf,
    pub objects: usize,
    pub bindings: usize,
    pub unresolved: usize,
    pub lookups: u64,
}

impl Summary {
    pub fn of(rec: &Record, path: &Path) -> Summary {
        Summary {
            record: path.to_path_buf(),
            objects: rec.objects.len(),
            bindings: rec.binds.len(),
            unresolved: rec.binds.iter().filter(|b| b.def == Def::Unresolved).count(),
            lookups: rec.lookups,
        }
    }
}

impl crate::report::Report for Summary {
    fn render(&self) -> String {
        format!(
            "recorded {} bindings ({} undefined weak) of {} objects to {}\n",
            self.bindings,
            self.unresolved,
            self.objects,
            self.record.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "ddlink-record 1\nloader 0a0b\n\
obj 0 2 2049 12 3000 1700000000 7 abcd /usr/bin/prog\n\
obj 1 4 0 0 0 0 0 - /lib64/ld-linux-x86-64.so.2\n\
obj 2 0 2049 13 9000 1700000001 0 ef01 /lib/with space.so\n\
scope 0 2\n\
bind 0 3 1 2 7\n\
bind 2 4 0 - -\n\
bind 2 5 0 ? -\n\
end 3\n";

    /// Two dlopen groups after the startup: the second's objects bind to
    /// the first's and to the initial ones.
    const GROUPS: &str = "ddlink-record 2\nloader 0a0b\n\
obj 0 2 2049 12 3000 1700000000 7 abcd /usr/bin/prog\n\
obj 1 4 0 0 0 0 0 - /lib64/ld-linux-x86-64.so.2\n\
scope 0 1\n\
bind 0 3 1 1 7\n\
end 1\n\
group 0 2 2\n\
obj 2 0 2049 13 9000 1700000001 0 ef01 /lib/a.so\n\
obj 3 0 2049 14 9000 1700000001 0 ef02 /lib/b.so\n\
lscope 2 2 2 0 1 2 2 3\n\
lscope 3 2 2 0 1 2 2 3\n\
bind 2 1 0 3 4\n\
bind 3 2 0 1 5\n\
end-group 0 2\n\
group 1 4 1\n\
obj 4 0 2049 15 9000 1700000001 0 ef03 /lib/c.so\n\
lscope 4 2 2 0 1 1 4\n\
bind 4 1 0 2 9\n\
end-group 1 1\n";

    #[test]
    fn parses_dlopen_groups() {
        let r = Record::parse(GROUPS).unwrap();
        assert_eq!(r.initial(), 2);
        assert_eq!(r.objects.len(), 5);
        assert_eq!(r.groups.len(), 2);
        assert_eq!(
            r.groups[0],
            Group { first: 2, count: 2, scopes: vec![vec![vec![0, 1], vec![2, 3]]; 2], lookups: 2 }
        );
        assert_eq!(r.groups[1].scopes, vec![vec![vec![0, 1], vec![4]]]);
        assert_eq!(r.binds.len(), 4);
        assert_eq!(r.binds[3].def, Def::Sym { obj: 2, sym: 9 });
    }

    /// A group cut short by a failed dlopen is dropped at the `stop` line;
    /// one the record ends inside is a truncated record; a group's binding
    /// to an object loaded later, or of an object of another group, and a
    /// version 1 record with groups are refused.
    #[test]
    fn dlopen_groups_cut_short_or_inconsistent() {
        let cut = GROUPS.replace("end-group 1 1\n", "stop a dlopen failed\n");
        let r = Record::parse(&cut).unwrap();
        assert_eq!((r.groups.len(), r.objects.len(), r.binds.len()), (1, 4, 3));
        let e = Record::parse(&GROUPS.replace("end-group 1 1\n", "")).unwrap_err().msg;
        assert!(e.contains("dlopen group 1 has no `end-group` line"), "{e}");
        let e = Record::parse(&GROUPS.replace("bind 2 1 0 3 4", "bind 2 1 0 4 4")).unwrap_err().msg;
        assert!(e.contains("names an object the record does not list"), "{e}");
        let e = Record::parse(&GROUPS.replace("bind 4 1 0 2 9", "bind 3 1 0 2 9")).unwrap_err().msg;
        assert!(e.contains("outside its group"), "{e}");
        let e = Record::parse(&GROUPS.replace("lscope 4 2 2 0 1 1 4", "lscope 4 2 2 0 1 2 4")).unwrap_err().msg;
        assert!(e.contains("a scope shorter than its length"), "{e}");
        let e = Record::parse(&GROUPS.replace("ddlink-record 2", "ddlink-record 1")).unwrap_err().msg;
        assert!(e.contains("a version 1 record has no dlopen groups"), "{e}");
        let e = Record::parse(&GROUPS.replace("/lib/c.so", "/lib/a.so")).unwrap_err().msg;
        assert!(e.contains("/lib/a.so is listed twice"), "{e}");
        let e = Record::parse(&GROUPS.replace("group 1 4 1", "group 1 5 1")).unwrap_err().msg;
        assert!(e.contains("do not follow the objects before it"), "{e}");
    }

    #[test]
    fn parses_objects_scope_and_bindings() {
        let r = Record::parse(GOOD).unwrap();
        assert_eq!(r.loader_build_id, vec![0x0a, 0x0b]);
        assert_eq!(r.objects.len(), 3);
        assert_eq!(r.objects[2].name, "/lib/with space.so");
        assert_eq!(r.objects[0].identity.ino, 12);
        assert_eq!(r.scope, vec![0, 2]);
        assert_eq!(r.binds[0].def, Def::Sym { obj: 2, sym: 7 });
        assert_eq!(r.binds[1].def, Def::Unresolved);
        assert_eq!(r.binds[2].def, Def::Outside);
        assert_eq!(r.lookups, 3);
    }

    /// A build ID with a multi-byte character (found by tests/debian/fuzz_reader.rs)
    /// is refused, not sliced through the character.
    #[test]
    fn a_non_ascii_build_id_is_refused() {
        let bad = GOOD.replace("abcd /usr/bin/prog", "ab\u{fffd}/usr/bin/prog");
        assert!(Record::parse(&bad).is_err());
        assert!(unhex("a\u{e9}b").unwrap_err().contains("not hexadecimal"));
    }

    #[test]
    fn refuses_truncated_foreign_and_inconsistent_records() {
        let cut = &GOOD[..GOOD.find("end").unwrap()];
        assert!(Record::parse(cut).unwrap_err().msg.contains("truncated record"));
        assert!(Record::parse("hello\n").unwrap_err().msg.contains("not a DDLink record"));
        let bad = GOOD.replace("bind 0 3 1 2 7", "bind 0 3 1 9 7");
        assert!(Record::parse(&bad).unwrap_err().msg.contains("does not list"));
        let bad = GOOD.replace("bind 0 3 1 2 7", "bind 0 x 1 2 7");
        assert!(Record::parse(&bad).unwrap_err().msg.starts_with("line 7"));
    }

    /// A record cut anywhere before its `end` line says it is truncated,
    /// also when the cut leaves half a line; an empty file says so.
    #[test]
    fn a_cut_record_is_truncated_wherever_the_cut_is() {
        let end = GOOD.find("end").unwrap();
        for cut in 1..end {
            let e = Record::parse(&GOOD[..cut]).unwrap_err().msg;
            assert!(e.contains("truncated record"), "cut at {cut}: {e}");
        }
        let e = Record::parse(&GOOD[..GOOD.find("2049").unwrap() + 2]).unwrap_err().msg;
        assert_eq!(e, "truncated record: it ends inside line 3 (`obj 0 2 20`), with no `end` line");
        assert_eq!(Record::parse("").unwrap_err().msg, "not a DDLink record (the file is empty)");
    }

    /// Each field that is no number, or too large for its field, is named.
    #[test]
    fn numbers_too_large_or_not_numbers_are_named() {
        let cases = [
            ("bind 0 3 1 2 7", "bind 0 3 300 2 7", "line 7: type class 300 does not fit 8 bits"),
            ("bind 0 3 1 2 7", "bind 4294967296 3 1 2 7", "object index 4294967296 does not fit 32 bits"),
            ("bind 0 3 1 2 7", "bind 0 -1 1 2 7", "symbol index `-1` is not a decimal number"),
            ("bind 2 4 0 - -", "bind 2 4 0 - 9", "defining symbol `9` of no defining object (`-`)"),
            ("bind 2 4 0 - -", "bind 2 4 0 9 -", "defining object `9` with no defining symbol (`-`)"),
            ("end 3", "end 18446744073709551616", "`18446744073709551616` does not fit 64 bits"),
            ("obj 1 4 0 0", "obj 1 4 0x0 0", "line 4: `0x0` is not a decimal number"),
            (" abcd /usr/bin/prog\n", "\n", "line 3: no build ID"),
            (
                "abcd /usr",
                "abcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdab /usr",
                "build ID of 33 bytes",
            ),
        ];
        for (from, to, want) in cases {
            let e = Record::parse(&GOOD.replace(from, to)).unwrap_err().msg;
            assert!(e.contains(want), "{to}: {e}");
        }
    }
}
