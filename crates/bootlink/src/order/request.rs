//! The order capability as requests: a startup trace read against the traced
//! binary (and the binary the order is for) becomes the order's functions and
//! a prediction; [`write`] also writes the link orders.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::order::report::{self, Prediction};
use crate::order::symbols::{self, Functions, Mapped};
use crate::order::{script, trace};

/// A startup trace and the binaries it is read against.
#[derive(Debug, Clone)]
pub struct TraceRequest {
    /// The trace bl-trace wrote.
    pub trace: PathBuf,
    /// The binary that was traced.
    pub binary: PathBuf,
    /// The binary the order is for (default: `binary`).
    pub layout: Option<PathBuf>,
    /// Which object of the trace is the binary ("-": the program itself).
    pub object: String,
    /// Leave out the traced functions `layout` lacks instead of refusing.
    pub allow_missing: bool,
}

/// The trace mapped onto the binary, the order's functions in the layout
/// binary, and the predicted pages and blocks.
pub struct Ordered {
    pub mapped: Mapped,
    pub funcs: Functions,
    pub predicted: Prediction,
}

/// Read the trace and the binaries; map, resolve and predict.
pub fn map(req: &TraceRequest) -> Result<Ordered> {
    let t = trace::Trace::read(&req.trace)?;
    let traced = Functions::read(&req.binary)?;
    let mut mapped = symbols::map(&t, &req.trace, &traced, &req.object)?;
    let funcs = match &req.layout {
        Some(l) => Functions::read(l)?,
        None => traced,
    };
    if req.allow_missing {
        mapped.keep_present(&funcs);
    }
    let predicted = report::predict(&symbols::resolve(&mapped.order, &funcs)?);
    Ok(Ordered { mapped, funcs, predicted })
}

/// What [`write`] wrote (fields in the order `--json` has always printed).
#[derive(Debug, Serialize)]
pub struct WriteReport {
    /// order.ld, order.gold and order.lld.
    pub files: Vec<PathBuf>,
    pub mapped: Mapped,
    pub predicted: Prediction,
}

impl crate::report::Report for WriteReport {
    fn render(&self) -> String {
        format!(
            "{} functions in first-call order ({} first calls in other objects, {} not in the layout) -> {}\n{}",
            self.mapped.order.len(),
            self.mapped.other_objects,
            self.mapped.missing,
            self.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "),
            self.predicted.render()
        )
    }
}

/// Map the trace and write the order for GNU ld, gold and lld into `output`.
pub fn write(req: &TraceRequest, output: &std::path::Path) -> Result<WriteReport> {
    let mut inputs = vec![req.trace.as_path(), req.binary.as_path()];
    inputs.extend(req.layout.as_deref());
    crate::fsutil::check_outputs_in(output, &super::FILES, &inputs)?;
    let Ordered { mapped, funcs, predicted } = map(req)?;
    let files = script::write_all(output, &mapped.order, &funcs)?;
    Ok(WriteReport { files, mapped, predicted })
}

/// What `order record` wrote.
#[derive(Debug, Serialize)]
pub struct RecordReport {
    pub blocks: usize,
    pub functions: usize,
    pub trace: PathBuf,
    /// The program traced (the text names it).
    #[serde(skip)]
    pub program: PathBuf,
}

impl crate::report::Report for RecordReport {
    fn render(&self) -> String {
        format!(
            "{}: {} functions in first-call order ({} blocks translated) -> {}\n",
            self.program.display(),
            self.functions,
            self.blocks,
            self.trace.display()
        )
    }
}

/// Record a start-up trace of `command` (program and arguments) under
/// QEMU's user-mode emulator into `output`.
pub fn record(command: &[String], output: &std::path::Path) -> Result<RecordReport> {
    let program = PathBuf::from(command.first().map(String::as_str).unwrap_or_default());
    let args = command.get(1..).unwrap_or_default();
    crate::fsutil::check_outputs(&[&program], &[crate::fsutil::Planned::new(output)])?;
    let (functions, blocks) = crate::order::qemu::record(&program, args, None, output)?;
    Ok(RecordReport { blocks, functions, trace: output.to_path_buf(), program })
}
