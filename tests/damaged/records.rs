#![allow(dead_code)]
//! The damaged-input generator for DDLink records and caches and for order
//! traces: from a valid input made in the test and a seed, files damaged
//! one way each, by class, marked `invalid` where the damage must be
//! refused (truncations that may leave a valid file and bit flips are
//! unmarked: they must only not panic or hang). Like generate.rs it reads
//! the formats by hand, not through bootlink's readers.

use bootlink::rng::Rng;

use super::generate::{Damaged, put32, put64, u32_at, u64_at};

/// The class of a path that is not a regular file: the runner makes a FIFO,
/// a directory or a symbolic link to /dev/zero in its place (per copy).
pub const NOT_REGULAR: &str = "not-a-regular-file";

fn damaged(stem: &str, class: &'static str, k: usize, bytes: Vec<u8>, invalid: bool) -> Damaged {
    Damaged { name: format!("{class}-{k}-{stem}"), class, bytes, invalid, reason: reason(stem, class) }
}

/// The reason a refusal of a `format` ("record", "cache" or "trace")
/// damaged by `class` gives, per class with why.
pub fn reason(format: &str, class: &str) -> &'static [&'static str] {
    match (format, class) {
        // Bit flips may leave a valid file: not marked, no reason.
        (_, "bit-flips" | "bit-flips-checksum-fixed") => &[],
        // Cut before its end: the reader finds no `end` line, a line cut
        // short, or less than a header; a cut at 0 leaves an empty file.
        (_, "truncated") => &["truncated", "the file is empty"],
        // A FIFO, a directory or a link to /dev/zero in its place.
        (_, NOT_REGULAR) => &["not a regular file"],
        // Random bytes: no magic, no header line.
        ("record", "random-bytes") => &["not a DDLink record"],
        ("cache", "random-bytes") => &["not a DDLink cache"],
        ("trace", "random-bytes") => &["not a bl-trace file"],
        // Another version or no magic in the first line or bytes (for a
        // cache also its header size: another version's header).
        ("record", "wrong-magic-or-version") => &["record version ", "not a DDLink record"],
        ("cache", "wrong-magic-or-version") => {
            &["DDLink cache version ", "a cache of another version", "not a DDLink cache"]
        }
        ("trace", "wrong-magic-or-version") => &["trace version ", "not a bl-trace file"],
        // A number too large for its field, negative or in hex.
        (_, "huge-numbers") => &["does not fit ", "is not a decimal number", "is not a hexadecimal number"],
        // The end line gone, or left without its count.
        ("record", "no-end-line") => &["no `end` line", "`end` line without its count"],
        ("trace", "no-end-line") => &["no `end` line"],
        // A binding or the scope names an object index past the objects.
        ("record", "object-index-out-of-range") => &["names an object the record does not list"],
        // A resolved binding's symbol index past its object's symbols.
        ("record", "symbol-index-out-of-range") => {
            &["symbol * which has * dynamic symbols", "names symbol * which it does not have"]
        }
        // An obj line's index not the next one.
        ("record", "objects-out-of-order") => &["objects out of order"],
        // A build ID of more than 32 bytes.
        ("record", "build-id-too-long") => &["build ID of * bytes, longer than "],
        // A bit flipped past the header, the checksum left as it was.
        ("cache", "checksum-mismatch") => &["checksum mismatch"],
        // The header's file size is not the file's.
        ("cache", "size-field-wrong") => &["header says * bytes, file has "],
        // A table's count too large for the file.
        ("cache", "counts-huge") => &["table * lies outside the file"],
        // A table's offset past the file, or misaligned.
        ("cache", "offsets-out-of-range") => {
            &["table * lies outside the file", "table's offset * is not *-byte aligned"]
        }
        // An object's entries, runtime relocations or build ID length past
        // their tables.
        ("cache", "object-entries-out-of-range") => &["lie outside the table", "build ID length "],
        // An entry's symbol or defining object past its table.
        ("cache", "entry-index-out-of-range") => &["entry * names * past "],
        // An object's name offset past the string table.
        ("cache", "name-past-strings") => &["name lies outside the strings"],
        // The end line's count is not the number of fn lines.
        ("trace", "end-count-wrong") => &["the end line counts "],
        // A fn address inside a function, not at its start.
        ("trace", "address-starts-no-function") => &["starts no function"],
        // The program's object line names another path.
        ("trace", "no-such-object") => &["lists no object "],
        // The program's bias moved: no call lands in it.
        ("trace", "all-calls-elsewhere") => &["no traced call lies in "],
        // A second `object <bias> -` line: two programs in one trace.
        ("trace", "two-programs") => &["a second program (object `-`"],
        _ => panic!("no reason for the {format} damage class {class}"),
    }
}

/// Bit flips, a truncation anywhere, random bytes, an empty file and the
/// non-regular paths: damage that applies to every format. `valid_to` is
/// the shortest prefix of `base` that may still be valid (a cut before it
/// is marked).
fn common(stem: &str, base: &[u8], valid_to: usize, rng: &mut Rng, per_class: usize, out: &mut Vec<Damaged>) {
    for k in 0..per_class {
        let mut d = base.to_vec();
        for _ in 0..1 + rng.below(8) {
            let i = rng.below(d.len());
            d[i] ^= 1 << rng.below(8);
        }
        out.push(damaged(stem, "bit-flips", k, d, false));
        let cut = rng.below(base.len());
        out.push(damaged(stem, "truncated", k, base[..cut].to_vec(), cut < valid_to));
        let n = [0usize, 1 + rng.below(64), 4096 + rng.below(1 << 16)][k % 3];
        let junk: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
        out.push(damaged(stem, "random-bytes", k, junk, true));
        out.push(damaged(stem, NOT_REGULAR, k, Vec::new(), true));
    }
}

/// Replace the `nth` (counted from 0) whitespace-separated field of the
/// first line starting with `word ` (after `skip` such lines).
fn set_field(text: &str, word: &str, skip: usize, nth: usize, value: &str) -> Option<String> {
    let mut seen = 0;
    let mut done = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if done || !l.starts_with(&format!("{word} ")) {
                return l.to_string();
            }
            if seen < skip {
                seen += 1;
                return l.to_string();
            }
            let mut f: Vec<&str> = l.split(' ').collect();
            if nth + 1 >= f.len() {
                return l.to_string();
            }
            f[nth + 1] = value;
            done = true;
            f.join(" ")
        })
        .collect();
    done.then(|| lines.join("\n") + "\n")
}

fn count_lines(text: &str, word: &str) -> usize {
    text.lines().filter(|l| l.starts_with(&format!("{word} "))).count()
}

fn huge_number(rng: &mut Rng) -> String {
    ["18446744073709551616", "99999999999999999999999", "-1", "0x10"][rng.below(4)].to_string()
}

pub const RECORD_CLASSES: &[&str] = &[
    "bit-flips",
    "truncated",
    "random-bytes",
    NOT_REGULAR,
    "wrong-magic-or-version",
    "object-index-out-of-range",
    "symbol-index-out-of-range",
    "huge-numbers",
    "objects-out-of-order",
    "build-id-too-long",
    "no-end-line",
];

/// Damaged copies of a DDLink record (`ddlink-record 1`, text).
pub fn records(base: &str, rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let stem = "record";
    let mut out = Vec::new();
    // The end line's number: a cut inside it may leave a valid record.
    let end_at = base.rfind("\nend ").expect("an end line") + 5;
    common(stem, base.as_bytes(), end_at, rng, per_class, &mut out);
    let nobj = count_lines(base, "obj");
    let nbind = count_lines(base, "bind");
    // The bind lines (counted among bind lines) with a defining object.
    let resolved: Vec<usize> = base
        .lines()
        .filter(|l| l.starts_with("bind "))
        .enumerate()
        .filter(|(_, l)| !matches!(l.split(' ').nth(4), Some("-" | "?")))
        .map(|(i, _)| i)
        .collect();
    for k in 0..per_class {
        let first = ["ddlink-record 3", "ddlink-record 0", "DDLINK", "ddlink-record", "bl-trace 1"][rng.below(5)];
        let t = format!("{first}\n{}", base.split_once('\n').unwrap().1);
        out.push(damaged(stem, "wrong-magic-or-version", k, t.into_bytes(), true));

        let bad = (nobj + rng.below(1000)).to_string();
        let t = match rng.below(3) {
            0 => set_field(base, "bind", rng.below(nbind), 0, &bad),
            // The defining object of a resolved binding (an unresolved
            // one's `- -` would then name an object and no symbol).
            1 => set_field(base, "bind", resolved[rng.below(resolved.len())], 3, &bad),
            _ => set_field(base, "scope", 0, 0, &bad),
        };
        out.push(damaged(stem, "object-index-out-of-range", k, t.unwrap().into_bytes(), true));

        let bad = [u32::MAX.to_string(), (1_000_000 + rng.below(1 << 20)).to_string()][rng.below(2)].clone();
        let field = [1, 4][rng.below(2)];
        // The defining symbol (field 4) of a resolved binding: an
        // unresolved one (`- -`) has no object whose symbols it could pass.
        let which = if field == 4 { resolved[rng.below(resolved.len())] } else { rng.below(nbind) };
        let t = set_field(base, "bind", which, field, &bad).unwrap();
        out.push(damaged(stem, "symbol-index-out-of-range", k, t.into_bytes(), true));

        let t = match rng.below(4) {
            0 => set_field(base, "bind", rng.below(nbind), rng.below(3), &huge_number(rng)),
            1 => set_field(base, "obj", rng.below(nobj), 2 + rng.below(5), &huge_number(rng)),
            2 => set_field(base, "end", 0, 0, &huge_number(rng)),
            _ => set_field(base, "bind", rng.below(nbind), 2, &(256 + rng.below(1000)).to_string()),
        };
        out.push(damaged(stem, "huge-numbers", k, t.unwrap().into_bytes(), true));

        let t = set_field(base, "obj", rng.below(nobj), 0, &(nobj + rng.below(10)).to_string()).unwrap();
        out.push(damaged(stem, "objects-out-of-order", k, t.into_bytes(), true));

        let id: String =
            (0..66 + 2 * rng.below(100)).map(|_| "0123456789abcdef".as_bytes()[rng.below(16)] as char).collect();
        let t = set_field(base, "obj", rng.below(nobj), 7, &id).unwrap();
        out.push(damaged(stem, "build-id-too-long", k, t.into_bytes(), true));

        let t = &base[..end_at - 5];
        let extra = ["", "bind 0 1 1 1 1\n", "end\n"][rng.below(3)];
        out.push(damaged(stem, "no-end-line", k, format!("{t}\n{extra}").into_bytes(), true));
    }
    out
}

pub const CACHE_CLASSES: &[&str] = &[
    "bit-flips",
    "truncated",
    "random-bytes",
    NOT_REGULAR,
    "wrong-magic-or-version",
    "checksum-mismatch",
    "size-field-wrong",
    "counts-huge",
    "offsets-out-of-range",
    "object-entries-out-of-range",
    "entry-index-out-of-range",
    "name-past-strings",
    "bit-flips-checksum-fixed",
];

/// The checksum field again after a damage: the damage itself is what
/// must be found, not the stale checksum (the loader's FNV-1a over
/// 8-byte words, as glibc/patches' elf/dl-ddlink.c computes it).
fn fix_checksum(d: &mut [u8]) {
    if d.len() >= 32 && d.len().is_multiple_of(8) {
        let sum = bootlink::ddlink::format::checksum(d);
        put64(d, 24, sum);
    }
}

/// Damaged copies of a DDLink cache (binary, version 6; the layout of
/// crates/bootlink/src/ddlink/format.rs: a 168-byte header, 112-byte objects, 16-byte
/// entries, 16-byte dlopen groups).
pub fn caches(base: &[u8], rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let stem = "cache";
    let mut out = Vec::new();
    common(stem, base, base.len(), rng, per_class, &mut out);
    let nobjs = u32_at(base, 32) as usize;
    let nentries = u32_at(base, 40) as usize;
    let objs_off = u64_at(base, 48) as usize;
    let entries_off = u64_at(base, 64) as usize;
    let strsize = u32_at(base, 44) as u64;
    let len = base.len() as u64;
    for k in 0..per_class {
        let fixed = |mut d: Vec<u8>| {
            fix_checksum(&mut d);
            d
        };
        let mut d = base.to_vec();
        // Another version, or another version's header size, than the
        // base's own (the format's version moves: 4 was bootlink's when
        // this was written, and 5 became the current one after).
        let (version, header) = (u32_at(base, 8), u32_at(base, 12));
        match rng.below(3) {
            0 => d[rng.below(8)] ^= 1 << rng.below(8),
            1 => put32(&mut d, 8, [version - 1, version + 1, 0, u32::MAX][rng.below(4)]),
            _ => put32(&mut d, 12, [0u32, header - 1, header + 8, u32::MAX][rng.below(4)]),
        }
        out.push(damaged(stem, "wrong-magic-or-version", k, fixed(d), true));

        let mut d = base.to_vec();
        let at = 32 + 8 * rng.below((base.len() - 32) / 8);
        d[at + rng.below(8)] ^= 1 << rng.below(8);
        out.push(damaged(stem, "checksum-mismatch", k, d, true));

        let mut d = base.to_vec();
        put64(&mut d, 16, [len + 8, len - 8, 0, u64::MAX - 7][rng.below(4)]);
        out.push(damaged(stem, "size-field-wrong", k, fixed(d), true));

        let mut d = base.to_vec();
        let at = [32, 36, 40, 44, 136, 140, 160][rng.below(7)];
        put32(&mut d, at, [u32::MAX, u32::MAX - rng.below(64) as u32, len as u32 + 1][rng.below(3)]);
        out.push(damaged(stem, "counts-huge", k, fixed(d), true));

        let mut d = base.to_vec();
        let at = [48, 56, 64, 72, 80, 128, 144, 152][rng.below(8)];
        // Past the end by 8 at least (an empty table may end the file: the
        // runtime relocations' offset `len` with none is valid), near the
        // top of the address space, or 1: misaligned (the string table has
        // no alignment to break: it gets one past the end instead).
        let v = [len + 8, len + 8 * (1 + rng.below(1 << 10) as u64), u64::MAX - 7 - 8 * rng.below(8) as u64, 1]
            [rng.below(4)];
        let v = if at == 80 && v == 1 { len + 8 } else { v };
        put64(&mut d, at, v);
        out.push(damaged(stem, "offsets-out-of-range", k, fixed(d), true));

        let mut d = base.to_vec();
        let obj = objs_off + 112 * rng.below(nobjs);
        match rng.below(4) {
            0 => put32(&mut d, obj + 48, nentries as u32 + 1 + rng.below(100) as u32),
            1 => put32(&mut d, obj + 52, nentries as u32 + 1 + rng.below(100) as u32),
            2 => put32(&mut d, obj + 60, 33 + rng.below(1000) as u32),
            _ => put32(&mut d, obj + 108, 1 + rng.below(100) as u32),
        }
        out.push(damaged(stem, "object-entries-out-of-range", k, fixed(d), true));

        // An entry's symbol or defining object past its table: the loader
        // would index past a symbol table with it.
        if nentries > 0 {
            let mut d = base.to_vec();
            let e = entries_off + 16 * rng.below(nentries);
            // (The defining symbol of an unresolved entry is not read.)
            let unresolved = d[e + 8..e + 10] == [0xff, 0xff];
            match rng.below(3) {
                1 if !unresolved => put32(&mut d, e + 4, u32::MAX - rng.below(1 << 16) as u32),
                0 | 1 => put32(&mut d, e, u32::MAX - rng.below(1 << 16) as u32),
                _ => d[e + 8..e + 10].copy_from_slice(&(nobjs as u16 + rng.below(100) as u16).to_le_bytes()),
            }
            out.push(damaged(stem, "entry-index-out-of-range", k, fixed(d), true));
        }

        let mut d = base.to_vec();
        let obj = objs_off + 112 * rng.below(nobjs);
        put32(&mut d, obj, (strsize + rng.below(1 << 20) as u64) as u32);
        out.push(damaged(stem, "name-past-strings", k, fixed(d), true));

        let mut d = base.to_vec();
        for _ in 0..1 + rng.below(4) {
            let i = 32 + rng.below(d.len() - 32);
            d[i] ^= 1 << rng.below(8);
        }
        out.push(damaged(stem, "bit-flips-checksum-fixed", k, fixed(d), false));
    }
    out
}

pub const TRACE_CLASSES: &[&str] = &[
    "bit-flips",
    "truncated",
    "random-bytes",
    NOT_REGULAR,
    "wrong-magic-or-version",
    "end-count-wrong",
    "address-starts-no-function",
    "no-such-object",
    "huge-numbers",
    "no-end-line",
    "all-calls-elsewhere",
    "two-programs",
];

/// Damaged copies of a bl-trace file whose program is object `-` and whose
/// `fn` lines start functions of it (`inside`: an address inside a
/// function of the program, past its first byte).
pub fn traces(base: &str, inside: u64, rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let stem = "trace";
    let mut out = Vec::new();
    let end_at = base.rfind("\nend ").expect("an end line") + 1;
    // A cut inside the end line's last number may leave a valid trace.
    let last_space = base.trim_end().rfind(' ').unwrap() + 1;
    common(stem, base.as_bytes(), last_space, rng, per_class, &mut out);
    let nfn = count_lines(base, "fn");
    for k in 0..per_class {
        let first = ["bl-trace 2", "bl-trace", "ddlink-record 1", "BL-TRACE 1"][rng.below(4)];
        let t = format!("{first}\n{}", base.split_once('\n').unwrap().1);
        out.push(damaged(stem, "wrong-magic-or-version", k, t.into_bytes(), true));

        let n = [nfn + 1 + rng.below(10), nfn.saturating_sub(1 + rng.below(nfn))][rng.below(2)];
        let t = set_field(base, "end", 0, 0, &n.to_string()).unwrap();
        out.push(damaged(stem, "end-count-wrong", k, t.into_bytes(), true));

        let bias = u64::from_str_radix(base.lines().nth(1).unwrap().split(' ').nth(1).unwrap(), 16).unwrap();
        let t = set_field(base, "fn", rng.below(nfn), 0, &format!("{:x}", bias + inside)).unwrap();
        out.push(damaged(stem, "address-starts-no-function", k, t.into_bytes(), true));

        let t = set_field(base, "object", 0, 1, ["/bin/other", "--", "prog"][rng.below(3)]).unwrap();
        out.push(damaged(stem, "no-such-object", k, t.into_bytes(), true));

        let t = match rng.below(3) {
            0 => set_field(base, "fn", rng.below(nfn), 0, "1ffffffffffffffff"),
            1 => set_field(base, "object", 0, 0, "fffffffffffffffff0"),
            _ => set_field(base, "end", 0, 1, &huge_number(rng)),
        };
        out.push(damaged(stem, "huge-numbers", k, t.unwrap().into_bytes(), true));

        let extra = ["", "fn 1000\n", "overflow\n"][rng.below(3)];
        out.push(damaged(stem, "no-end-line", k, format!("{}{extra}", &base[..end_at]).into_bytes(), true));

        // Every first call outside the program: a trace of another program.
        let t = set_field(base, "object", 0, 0, ["ffffffffffff0000", "0"][rng.below(2)]).unwrap();
        out.push(damaged(stem, "all-calls-elsewhere", k, t.into_bytes(), true));

        // Another program's object line anywhere before the end line (as
        // two traces run together would have it), at its own bias or the
        // first one's.
        let lines: Vec<&str> = base.lines().collect();
        let at = 2 + rng.below(lines.len() - 2);
        let bias = ["7ffff7fc0000", "555555554000", "0"][rng.below(3)];
        let mut t: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        t.insert(at, format!("object {bias} -"));
        out.push(damaged(stem, "two-programs", k, (t.join("\n") + "\n").into_bytes(), true));
    }
    out
}
