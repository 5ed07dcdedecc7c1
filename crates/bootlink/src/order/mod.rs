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
