//! A function order as each of Debian 12's linkers takes it; every one
//! needs the objects compiled with `-ffunction-sections` (a section per
//! function, `.text.NAME`, or `.text.hot.NAME`, `.text.unlikely.NAME`,
//! `.text.startup.NAME` when GCC classifies it).
//!
//! - GNU ld (bfd): a linker script fragment `-T order.ld` that adds an output
//!   section with the functions in order and `INSERT BEFORE .text`, so the
//!   default script stays in force. A static function whose name another
//!   static function shares is matched by its object file (`*file.o`).
//! - gold: `--section-ordering-file order.gold` (section names).
//! - lld: `--symbol-ordering-file order.lld` (symbol names; lld orders every
//!   static function of that name together, it cannot name the file).
//!
//! lld is the one we recommend: it takes symbols (no section naming rules),
//! warns about symbols it cannot find, and is the fastest; gold is
//! deprecated upstream, and GNU ld only gets --section-ordering-file in
//! binutils 2.43 (Debian 12 has 2.40).

use std::path::{Path, PathBuf};

use super::symbols::{FunctionId, Functions, object_of};
use crate::error::Result;

/// The input section names GCC may give function NAME.
fn sections(name: &str) -> [String; 5] {
    ["", "hot.", "unlikely.", "startup.", "exit."].map(|p| format!(".text.{p}{name}"))
}

/// GNU ld: `ld -T order.ld` (or `gcc -Wl,-T,order.ld`).
pub(crate) fn gnu_ld(order: &[FunctionId], funcs: &Functions) -> String {
    let mut s = String::from(
        "/* bootlink order: the functions startup calls, in first-call order.\n   \
         Use with -T (the default script stays in force: INSERT). */\nSECTIONS\n{\n  .text.bootlink_order :\n  {\n",
    );
    for id in order {
        let file = match &id.file {
            Some(f) if funcs.duplicated.contains(&id.name) => format!("*{}", object_of(f)),
            _ => "*".to_string(),
        };
        s += &format!("    {file}({})\n", sections(&id.name).join(" "));
    }
    s += "  }\n}\nINSERT BEFORE .text;\n";
    s
}

/// gold: `--section-ordering-file order.gold`.
pub fn gold(order: &[FunctionId]) -> String {
    order.iter().flat_map(|id| sections(&id.name)).map(|s| s + "\n").collect()
}

/// lld: `--symbol-ordering-file order.lld`.
pub fn lld(order: &[FunctionId]) -> String {
    let mut seen = std::collections::HashSet::new();
    order.iter().filter(|id| seen.insert(id.name.as_str())).map(|id| format!("{}\n", id.name)).collect()
}

/// Write `order.ld`, `order.gold` and `order.lld` into `dir`, atomically.
pub(crate) fn write_all(dir: &Path, order: &[FunctionId], funcs: &Functions) -> Result<Vec<PathBuf>> {
    write_with_data(dir, order, funcs, None)
}

/// [`write_all`], each file followed by the data order (`data`: the
/// touched objects in first-touch order and the binary's objects).
pub(crate) fn write_with_data(
    dir: &Path,
    order: &[FunctionId],
    funcs: &Functions,
    data: Option<(&[FunctionId], &super::data::DataObjects)>,
) -> Result<Vec<PathBuf>> {
    crate::fsutil::check_output_dir(dir)?;
    std::fs::create_dir_all(dir).map_err(|e| crate::error::Error::io(dir, e))?;
    let (mut ld, mut gd, mut ll) = (gnu_ld(order, funcs), gold(order), lld(order));
    if let Some((touched, objs)) = data {
        ld += &super::data::gnu_ld(touched, objs);
        ld += &super::data::gnu_ld_rest_last();
        gd += &super::data::gold(touched, objs);
        ll += &super::data::lld(touched, objs);
    }
    super::write_together(dir, [ld, gd, ll])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_of_sources() {
        assert_eq!(object_of("src/a.c"), "a.o");
        assert_eq!(object_of("b.cc"), "b.o");
        assert_eq!(object_of("noext"), "noext.o");
    }

    #[test]
    fn lld_lists_each_name_once() {
        let id = |n: &str, f: Option<&str>| FunctionId { name: n.into(), file: f.map(Into::into) };
        let order = [id("s", Some("a.c")), id("main", None), id("s", Some("b.c"))];
        assert_eq!(lld(&order), "s\nmain\n");
        assert!(gold(&order).starts_with(".text.s\n.text.hot.s\n"));
    }
}
