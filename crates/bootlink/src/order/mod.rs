//! Function reordering: a startup trace of a program's
//! first calls (`trace/bl-trace.c`, linked into a build made with
//! `-finstrument-functions`) mapped to the program's functions (`symbols`),
//! written as link orders for GNU ld, gold and lld (`script`), with a
//! prediction of the pages and storage blocks startup touches before and
//! after (`report`). `synth` generates the synthetic test program; `python`
//! builds the real one (CPython 3.11 from Debian's source); `bolt` is the
//! post-link optimizer beside the order; `case` runs either end to end.

pub mod bolt;
pub mod case;
pub mod data;
pub mod python;
pub mod qemu;
pub mod report;
pub mod request;
pub mod script;
pub mod symbols;
pub mod synth;
pub mod trace;

pub use request::{Ordered, RecordReport, TraceRequest, WriteReport, map, record, write};

/// The order files, one per linker, in [`write_together`]'s order.
pub(crate) const FILES: [&str; 3] = ["order.ld", "order.gold", "order.lld"];

/// Write the three order files (`texts` in [`FILES`]' order) into `dir`
/// together: each whole beside its place, then all put in place, so a
/// full file system leaves none (never a new order.ld beside an old
/// order.lld).
pub(crate) fn write_together(
    dir: &std::path::Path,
    texts: [String; 3],
) -> crate::error::Result<Vec<std::path::PathBuf>> {
    let mut staged = crate::fsutil::Staged::new();
    let mut out = Vec::new();
    for (name, text) in FILES.iter().zip(texts) {
        let p = dir.join(name);
        staged.write(&p, text.as_bytes())?;
        out.push(p);
    }
    staged.commit()?;
    Ok(out)
}
