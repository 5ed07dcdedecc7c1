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
//! A function GCC split into a hot and a cold part (`-freorder-blocks-and-partition`
//! with a profile: `NAME` in `.text.NAME` or `.text.hot.NAME`, `NAME.cold`
//! in `.text.unlikely.NAME`) is two entries of an order, each placed where
//! it first ran: NAME's entry names its hot sections only, `NAME.cold`'s
//! the unlikely one.
//!
//! lld is the one we recommend: it takes symbols (no section naming rules),
//! warns about symbols it cannot find, and is the fastest; gold is
//! deprecated upstream, and GNU ld only gets --section-ordering-file in
//! binutils 2.43 (Debian 12 has 2.40).

use std::path::{Path, PathBuf};

use super::symbols::{FunctionId, Functions, file_pattern};
use crate::error::Result;

/// GCC's suffix for the cold part of a function it split.
const COLD: &str = ".cold";

/// The input section names GCC may give function NAME of `funcs`: the
/// cold part of a split function is in `.text.unlikely.` its hot part's
/// name, and that section is then not its hot part's.
fn sections(name: &str, funcs: &Functions) -> Vec<String> {
    if let Some(hot) = name.strip_suffix(COLD) {
        return vec![format!(".text.unlikely.{hot}")];
    }
    let split = funcs.has_name(&format!("{name}{COLD}"));
    ["", "hot.", "unlikely.", "startup.", "exit."]
        .iter()
        .filter(|p| !(split && **p == "unlikely."))
        .map(|p| format!(".text.{p}{name}"))
        .collect()
}

/// GNU ld: `ld -T order.ld` (or `gcc -Wl,-T,order.ld`).
pub(crate) fn gnu_ld(order: &[FunctionId], funcs: &Functions) -> String {
    let mut s = String::from(
        "/* bootlink order: the functions startup calls, in first-call order.\n   \
         Use with -T (the default script stays in force: INSERT). */\nSECTIONS\n{\n  .text.bootlink_order :\n  {\n",
    );
    for id in order {
        s += &format!("    {}({})\n", file_pattern(id, &funcs.duplicated), sections(&id.name, funcs).join(" "));
    }
    s += "  }\n}\nINSERT BEFORE .text;\n";
    s
}

/// gold: `--section-ordering-file order.gold`.
pub fn gold(order: &[FunctionId], funcs: &Functions) -> String {
    order.iter().flat_map(|id| sections(&id.name, funcs)).map(|s| s + "\n").collect()
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
    let (mut ld, mut gd, mut ll) = (gnu_ld(order, funcs), gold(order, funcs), lld(order));
    if let Some((touched, objs)) = data {
        ld += &super::data::gnu_ld(touched, objs);
        ld += &super::data::gnu_ld_literals(order, &funcs.duplicated, touched, objs);
        ld += &super::data::gnu_ld_rest_last();
        gd += &super::data::gold(touched, objs);
        ll += &super::data::lld(touched, objs);
    }
    super::write_together(dir, [ld, gd, ll])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::symbols::{Function, object_of};

    #[test]
    fn object_names_of_sources() {
        assert_eq!(object_of("src/a.c"), "a.o");
        assert_eq!(object_of("b.cc"), "b.o");
        assert_eq!(object_of("noext"), "noext.o");
    }

    fn id(n: &str, f: Option<&str>) -> FunctionId {
        FunctionId { name: n.into(), file: f.map(Into::into) }
    }

    fn functions(names: &[(&str, Option<&str>)]) -> Functions {
        let list = names
            .iter()
            .enumerate()
            .map(|(i, (n, f))| Function { id: id(n, *f), addr: 0x1000 + 16 * i as u64, size: 16, file_off: 0 })
            .collect();
        Functions::index(Path::new("prog"), list, Default::default())
    }

    #[test]
    fn lld_lists_each_name_once() {
        let order = [id("s", Some("a.c")), id("main", None), id("s", Some("b.c"))];
        let funcs = functions(&[("s", Some("a.c")), ("main", None), ("s", Some("b.c"))]);
        assert_eq!(lld(&order), "s\nmain\n");
        assert!(gold(&order, &funcs).starts_with(".text.s\n.text.hot.s\n.text.unlikely.s\n"));
    }

    #[test]
    fn a_split_functions_parts_are_placed_apart() {
        // GCC's hot/cold split: `f` in .text.hot.f, `f.cold` in .text.unlikely.f.
        let funcs = functions(&[("f", None), ("f.cold", None), ("g", None)]);
        let order = [id("f", None), id("g", None), id("f.cold", None)];
        assert_eq!(
            gold(&order, &funcs),
            ".text.f\n.text.hot.f\n.text.startup.f\n.text.exit.f\n\
             .text.g\n.text.hot.g\n.text.unlikely.g\n.text.startup.g\n.text.exit.g\n\
             .text.unlikely.f\n"
        );
        let ld = gnu_ld(&order, &funcs);
        let lines: Vec<&str> = ld.lines().filter(|l| l.trim_start().starts_with("*(")).collect();
        assert_eq!(lines.len(), 3);
        assert!(!lines[0].contains(".text.unlikely.f ") && !lines[0].contains(".text.unlikely.f)"), "{}", lines[0]);
        assert_eq!(lines[2].trim(), "*(.text.unlikely.f)");
        // lld orders the symbols: each part's own.
        assert_eq!(lld(&order), "f\ng\nf.cold\n");
    }
}
