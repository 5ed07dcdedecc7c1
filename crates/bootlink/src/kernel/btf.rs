//! The kernel's own type information, `.BTF` (CONFIG_DEBUG_INFO_BTF, which
//! Debian's kernels have): read for one fact, the size of a struct by its
//! name: `struct module`, whose size a module's `.gnu.linkonce.this_module`
//! must have for this kernel to load it.
//!
//! Layout (include/uapi/linux/btf.h, 6.1 and 6.12): a header (magic
//! 0xeB9F, version 1, flags, hdr_len, type_off, type_len, str_off,
//! str_len; the offsets counted from the header's end), then the types,
//! each a 12-byte `struct btf_type` (name_off; info: vlen in bits 0-15,
//! kind in bits 24-28; size or type) followed by data whose length its kind
//! and vlen give.

use crate::error::{Error, Kind};

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;

fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, format!("corrupt .BTF: {}", msg.into()))
}

/// The bytes that follow a type of `kind` with `vlen` members, None for a
/// kind btf.h does not define.
fn trailing(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // INT, VAR, DECL_TAG: one u32 (or one struct of one).
        1 | 14 | 17 => 4,
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
        2 | 7..=12 | 16 | 18 => 0,
        // ARRAY: struct btf_array.
        3 => 12,
        // STRUCT, UNION: btf_member; DATASEC: btf_var_secinfo; ENUM64: btf_enum64.
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM: btf_enum; FUNC_PROTO: btf_param.
        6 | 13 => 8 * vlen,
        _ => return None,
    })
}

/// The BTF blob inside a raw kernel image (an arm64 Image: `objcopy -O
/// binary` of a vmlinux keeps `.BTF`, which the kernel serves as
/// /sys/kernel/btf/vmlinux), found by its header as pahole writes it: the
/// magic, version 1, no flags, a 24-byte header, the types first
/// (type_off 0) and the strings right after them (str_off = type_len).
/// None when no such header is there (a kernel without
/// CONFIG_DEBUG_INFO_BTF); the first when there are several.
pub(crate) fn find_in_image(image: &[u8]) -> Option<&[u8]> {
    const HEAD: &[u8] = &[0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0];
    memchr::memmem::find_iter(image, HEAD)
        .find(|&at| {
            let u32_at = |o: usize| crate::bytes::le_u32(image, at + o);
            u32_at(12).is_some() && u32_at(12) == u32_at(16)
        })
        .map(|at| &image[at..])
}

/// The size of `struct NAME` in `btf`: None when no struct has that name,
/// or when a type of a kind btf.h (6.12) does not define comes first (a
/// later kernel's: its length is unknown, so nothing past it can be read);
/// an error when the data is not BTF, is cut short, or has two such
/// structs of different sizes.
pub(crate) fn struct_size(btf: &[u8], name: &str) -> Result<Option<u64>, Error> {
    let u32_at = |at: usize| crate::bytes::le_u32(btf, at);
    if crate::bytes::le_u16(btf, 0) != Some(MAGIC) {
        return Err(corrupt("no BTF magic (0xeb9f, little-endian)"));
    }
    let field = |at| u32_at(at).map(|v| v as usize).ok_or_else(|| corrupt("its header is cut short"));
    let (hdr_len, type_off, type_len, str_off, str_len) = (field(4)?, field(8)?, field(12)?, field(16)?, field(20)?);
    let span = |off: usize, len: usize, what: &str| {
        hdr_len
            .checked_add(off)
            .and_then(|a| Some(a..a.checked_add(len)?))
            .filter(|r| r.end <= btf.len())
            .ok_or_else(|| corrupt(format!("its {what} lie outside the section ({} bytes)", btf.len())))
    };
    let types = span(type_off, type_len, "types")?;
    let strings = &btf[span(str_off, str_len, "strings")?];
    let mut found: Option<u64> = None;
    let mut at = types.start;
    while at < types.end {
        let (Some(name_off), Some(info), Some(size)) = (u32_at(at), u32_at(at + 4), u32_at(at + 8)) else {
            return Err(corrupt(format!("the type at {at:#x} is cut short")));
        };
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        let Some(extra) = trailing(kind, vlen) else { return Ok(None) };
        if kind == KIND_STRUCT && crate::elf::cstr(strings, name_off as usize) == Some(name.as_bytes()) {
            match found {
                Some(s) if s != u64::from(size) => {
                    return Err(corrupt(format!("two structs {name}, of {s} and {size} bytes")));
                }
                _ => found = Some(u64::from(size)),
            }
        }
        at += 12 + extra;
    }
    if at != types.end {
        return Err(corrupt("its last type runs past the types' end"));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BTF of an int, `struct module` (2 members) and an enum.
    fn sample(module_size: u32) -> Vec<u8> {
        let strings = b"\0int\0module\0e\0";
        let mut types = crate::bytes::LeWriter::default();
        types.u32(1);
        types.u32(1 << 24);
        types.u32(4);
        types.u32(0x0100_0020); // INT data
        types.u32(5);
        types.u32(KIND_STRUCT << 24 | 2);
        types.u32(module_size);
        for _ in 0..2 * 3 {
            types.u32(0);
        }
        types.u32(12);
        types.u32(6 << 24 | 1);
        types.u32(4);
        types.u32(1);
        types.u32(0);
        let types = types.into_inner();
        let mut w = crate::bytes::LeWriter::default();
        w.bytes(&MAGIC.to_le_bytes());
        w.bytes(&[1, 0]);
        for v in [24, 0, types.len() as u32, types.len() as u32, strings.len() as u32] {
            w.u32(v);
        }
        w.bytes(&types);
        w.bytes(strings);
        w.into_inner()
    }

    #[test]
    fn struct_sizes_are_read_by_name() {
        let b = sample(896);
        assert_eq!(struct_size(&b, "module").unwrap(), Some(896));
        assert_eq!(struct_size(&b, "e").unwrap(), None, "an enum is no struct");
        assert_eq!(struct_size(&b, "task_struct").unwrap(), None);
    }

    #[test]
    fn damaged_btf_is_an_error() {
        let b = sample(896);
        assert!(struct_size(&b[..20], "module").unwrap_err().msg.contains("header is cut short"));
        let mut m = b.clone();
        m[0] = 0;
        assert!(struct_size(&m, "module").unwrap_err().msg.contains("magic"));
        let mut k = b.clone();
        k[24 + 7] = 25; // the int's kind: one btf.h does not define
        assert_eq!(struct_size(&k, "module").unwrap(), None);
        let mut v = b.clone();
        v[24 + 16 + 4] = 0xff; // the struct's vlen: members past the end
        assert!(struct_size(&v, "module").unwrap_err().msg.contains("runs past"));
        let mut l = b;
        l[12] = 0xff; // type_len
        assert!(struct_size(&l, "module").unwrap_err().msg.contains("outside the section"));
    }
}
