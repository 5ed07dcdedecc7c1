//! The record the patched ld.so writes under `LD_DDLINK_RECORD=FILE`
//! (elf/dl-ddlink.c): every symbol lookup of a program's initial
//! relocation, by object index and symbol index, with the identity of
//! every object as the loader saw it. Text, one item a line:
//!
//! ```text
//! ddlink-record 1
//! loader <build id hex>
//! obj <idx> <flags> <dev> <ino> <size> <mtime s> <mtime ns> <build id hex|-> <name>
//! scope <idx> <idx> ...
//! bind <ref idx> <sym idx> <type class> <def idx> <def sym>   (or "- -": undefined weak, "? -": outside)
//! end <lookups>
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub loader_build_id: Vec<u8>,
    pub objects: Vec<RecObj>,
    pub scope: Vec<u32>,
    pub binds: Vec<Bind>,
    /// Lookups the loader counted (the `end` line).
    pub lookups: u64,
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
        const FIRST: &str = "ddlink-record 1";
        if text.is_empty() {
            return Err(corrupt("not a DDLink record (the file is empty)"));
        }
        if !text.contains('\n') && FIRST.starts_with(text) && text != FIRST {
            return Err(corrupt(format!("truncated record: {} bytes, it ends inside its first line", text.len())));
        }
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, FIRST)) => {}
            Some((_, l)) if l.starts_with("ddlink-record ") => {
                return Err(corrupt(format!("line 1: record version {}, this bootlink reads 1", &l[14..])));
            }
            _ => return Err(corrupt("not a DDLink record (no `ddlink-record 1` line)")),
        }
        // The loader ends every line with a newline: a last line without
        // one is where the file was cut.
        let cut_at = (!text.ends_with('\n')).then(|| text.lines().count());
        let mut rec = Record {
            loader_build_id: Vec::new(),
            objects: Vec::new(),
            scope: Vec::new(),
            binds: Vec::new(),
            lookups: 0,
        };
        let mut ended = false;
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
            if ended {
                return Err(corrupt(format!("line {n}: text after the end line: `{shown}`")));
            }
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
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
                    rec.binds.push(Bind {
                        refobj: field(0, "object index")?,
                        symidx: field(1, "symbol index")?,
                        tclass: crate::fsutil::text_field(t[2], "type class").map_err(|why| bad(&why))?,
                        def,
                    });
                }
                "end" if rest.is_empty() => return Err(bad("an `end` line without its count of lookups")),
                "end" => {
                    rec.lookups = nums(1)?[0];
                    ended = true;
                }
                _ => return Err(bad("unknown line")),
            }
        }
        if !ended {
            return Err(corrupt("truncated record (no `end` line): the program's startup relocation did not finish"));
        }
        let nobj = rec.objects.len() as u32;
        if nobj == 0 {
            return Err(corrupt("the record lists no objects"));
        }
        let out_of_range = rec.scope.iter().any(|&s| s >= nobj)
            || rec.binds.iter().any(|b| b.refobj >= nobj || matches!(b.def, Def::Sym { obj, .. } if obj >= nobj));
        if out_of_range {
            return Err(corrupt("a binding or the scope names an object the record does not list"));
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
