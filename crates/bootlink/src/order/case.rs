//! One reordering end to end: run the instrumented build to get the trace,
//! map it to functions, write the orders, relink the plain objects with
//! each linker, check the program still prints the same, and compare the
//! blocks its startup functions occupy before and after (predicted from the
//! trace, and measured in each relinked binary's symbol table).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::data::{self, DataObjects, Placement, Touched};
use super::python::{self, PythonBuild};
use super::report::{self, Prediction};
use super::symbols::{self, FunctionId, Functions, Mapped};
use super::synth::{self, Linker, SynthCase, SynthSpec};
use super::trace::Trace;
use crate::error::{Error, Kind, Result};

/// Run `program ARGS` once with the trace written to `out` (bl-trace's
/// `BL_TRACE_FILE`); the program's stdout.
pub fn profile(program: &Path, args: &[String], out: &Path) -> Result<(Trace, Vec<u8>)> {
    let mut c = Command::new(program);
    c.args(args);
    profile_with(c, program, out)
}

/// [`profile`] with a command the caller set up (environment, directory).
pub(crate) fn profile_with(mut cmd: Command, program: &Path, out: &Path) -> Result<(Trace, Vec<u8>)> {
    // Written beside `out` and renamed: a reader never sees half a trace.
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let o = cmd
        .env("BL_TRACE_FILE", &tmp)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::file(Kind::Tool, program, format!("cannot run it: {e}")).because(e))?;
    if !o.status.success() {
        return Err(Error::file(Kind::Tool, program, format!("exited {} while profiling", o.status)));
    }
    if !tmp.is_file() {
        return Err(Error::file(
            Kind::Tool,
            program,
            "wrote no trace: not built with -finstrument-functions and linked with bl-trace",
        ));
    }
    let trace = Trace::read(&tmp);
    if trace.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let trace = trace?;
    std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e))?;
    Ok((trace, o.stdout))
}

#[derive(Debug, Clone, Serialize)]
pub struct Relinked {
    pub linker: &'static str,
    pub program: PathBuf,
    /// Output identical to the unordered program's.
    pub output_identical: bool,
    /// Blocks its startup functions occupy, measured in its symbol table.
    pub measured: Prediction,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    pub case: SynthCase,
    pub trace: PathBuf,
    pub mapped: Mapped,
    pub order_dir: PathBuf,
    /// The unordered program, and what the order should make of it.
    pub predicted: Prediction,
    pub relinked: Vec<Relinked>,
    /// The function order and the data order together (None: no valgrind).
    pub data: Option<DataOrder>,
    /// Linkers (and valgrind) not installed here.
    pub missing: Vec<&'static str>,
}

fn run_output(program: &Path) -> Result<Vec<u8>> {
    let o = Command::new(program)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::file(Kind::Tool, program, format!("cannot run it: {e}")).because(e))?;
    if !o.status.success() {
        return Err(Error::file(Kind::Tool, program, format!("exited {}", o.status)));
    }
    Ok(o.stdout)
}

/// Build the synthetic case, profile it, order it and relink it with every
/// installed linker (into `case.dir`/order).
pub fn synth_case(spec: &SynthSpec) -> Result<CaseReport> {
    let case = synth::build(spec, None)?;
    // The case's order directory is shared: one pipeline at a time.
    let _lock = synth::lock(&case.dir)?;
    let work = case.dir.join("order");
    std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    let trace_path = work.join("trace");
    let (trace, traced_out) = profile(&case.traced, &[], &trace_path)?;
    let traced_funcs = Functions::read(&case.traced)?;
    let mapped = symbols::map(&trace, &trace_path, &traced_funcs, "-")?;
    let plain_funcs = Functions::read(&case.program)?;
    let predicted = report::predict(&symbols::resolve(&mapped.order, &plain_funcs)?);
    super::script::write_all(&work, &mapped.order, &plain_funcs)?;
    let want = run_output(&case.program)?;
    if want != traced_out {
        return Err(Error::file(Kind::Internal, &case.traced, "the instrumented build prints something else"));
    }
    let (relinked, mut missing) = relink_all(
        &mapped.order,
        &work,
        "synth-order",
        &|linker, out| synth::relink(&case.objects, linker, &work, out),
        &|out, _| Ok(run_output(out)? == want),
    )?;
    let reordered = relinked.iter().find(|r| r.linker == "ld.bfd").map(|r| r.program.clone());
    let data = data_order(
        &case.program,
        reordered.as_deref(),
        &|p| Ok(Command::new(p)),
        &mapped.order,
        &plain_funcs,
        &work,
        "synth-order",
        &|linker, dir, out| synth::relink(&case.objects, linker, dir, out),
        &|out, _| Ok(run_output(out)? == want),
    )?;
    if data.is_none() {
        missing.push("valgrind");
    }
    Ok(CaseReport { case, trace: trace_path, mapped, order_dir: work, predicted, relinked, data, missing })
}

/// `link` with every installed linker into `work/PREFIX.LINKER`; where
/// `order`'s functions landed in each, and whether it prints what it
/// should (`same_output`); the linkers not installed.
fn relink_all(
    order: &[FunctionId],
    work: &Path,
    prefix: &str,
    link: &dyn Fn(Linker, &Path) -> Result<()>,
    same_output: &dyn Fn(&Path, Linker) -> Result<bool>,
) -> Result<(Vec<Relinked>, Vec<&'static str>)> {
    let mut relinked = Vec::new();
    let mut missing = Vec::new();
    for linker in Linker::ALL {
        if !linker.installed() {
            missing.push(linker.name());
            continue;
        }
        let out = work.join(format!("{prefix}.{}", linker.name()));
        link(linker, &out)?;
        let measured = report::predict(&symbols::resolve(order, &Functions::read(&out)?)?);
        relinked.push(Relinked {
            linker: linker.name(),
            output_identical: same_output(&out, linker)?,
            program: out,
            measured,
        });
    }
    Ok((relinked, missing))
}

/// The unordered program's row, the prediction's, each relink's.
fn blocks_table(predicted: &Prediction, relinked: &[Relinked], extra: &[(String, String)]) -> String {
    let mut t = crate::table::Table::new(&["binary", "4 KiB pages", "16 KiB", "64 KiB", "128 KiB", "output"]);
    let row = |name: String, p: &Prediction, after: bool, out: &str| {
        let mut r = vec![name];
        r.extend(p.blocks.iter().map(|b| if after { b.after } else { b.before }.to_string()));
        r.push(out.to_string());
        r
    };
    t.row(row("unordered (GNU ld)".into(), predicted, false, "-"));
    t.row(row("predicted from the trace".into(), predicted, true, "-"));
    for r in relinked {
        let out = if r.output_identical { "identical" } else { "DIFFERS" };
        t.row(row(format!("ordered, {}", r.linker), &r.measured, false, out));
    }
    for (name, out) in extra {
        let mut r = vec![name.clone()];
        r.extend(predicted.blocks.iter().map(|_| "-".to_string()));
        r.push(out.clone());
        t.row(r);
    }
    t.render()
}

impl CaseReport {
    /// Every relink, the data order's too, prints what the unordered program prints.
    pub fn outputs_identical(&self) -> bool {
        self.relinked.iter().all(|r| r.output_identical)
            && self.data.iter().flat_map(|d| &d.relinked).all(|r| r.relinked.output_identical)
    }
}

impl crate::report::Report for CaseReport {
    fn render(&self) -> String {
        let mut s = format!(
            "{}: {} functions, {} called at startup; trace {}: {} functions in first-call order ({} calls)\n",
            self.case.program.display(),
            self.case.spec.functions,
            self.case.spec.startup,
            self.trace.display(),
            self.mapped.order.len(),
            self.mapped.total_calls
        );
        s += &blocks_table(&self.predicted, &self.relinked, &[]);
        if let Some(d) = &self.data {
            s += &d.render();
        }
        for m in &self.missing {
            s += &format!("{m} is not installed: not used\n");
        }
        s
    }
}

/// The real program, end to end: CPython 3.11 built from Debian's source
/// (plain and instrumented), its start-up traced in the installed layout,
/// the order relinked with every installed linker, and BOLT with its own
/// profile of the same start-up beside it.
#[derive(Debug, Clone, Serialize)]
pub struct PythonReport {
    pub build: PythonBuild,
    pub trace: PathBuf,
    pub mapped: Mapped,
    pub order_dir: PathBuf,
    pub predicted: Prediction,
    pub relinked: Vec<Relinked>,
    /// BOLT's rewrite of the plain build (None: llvm-bolt not installed).
    pub bolt: Option<Bolted>,
    /// BOLT's rewrite of GNU ld's link with the data order (None: no
    /// llvm-bolt or no valgrind).
    pub bolt_data: Option<Bolted>,
    /// The order recorded without a rebuild (the plain build under
    /// qemu-x86_64, [`super::qemu`]), relinked by GNU ld (None: no qemu-user).
    pub qemu: Option<QemuOrder>,
    /// The function order and the data order together (None: no valgrind).
    pub data: Option<DataOrder>,
    /// GCC's profile-guided build with both orders (None: no qemu-user or
    /// no valgrind).
    pub pgo: Option<PgoOrder>,
    pub missing: Vec<&'static str>,
    /// What every build printed.
    pub output: String,
}

/// BOLT's rewrite (its layout is BOLT's, not an order's: no block counts).
#[derive(Debug, Clone, Serialize)]
pub struct Bolted {
    pub program: PathBuf,
    /// Output identical to the unordered program's.
    pub output_identical: bool,
}

/// The data a start-up touches, ordered beside the functions (the build
/// the lab calls `reordered+data`).
#[derive(Debug, Clone, Serialize)]
pub struct DataOrder {
    pub touched: Touched,
    pub order_dir: PathBuf,
    /// Where the touched objects lie in the unordered program.
    pub unordered: Placement,
    /// Each installed linker's link with both orders.
    pub relinked: Vec<DataRelinked>,
    /// The start-up's footprint in the file of the unordered build, GNU
    /// ld's function order and GNU ld's link with both orders, each from
    /// its own record.
    pub footprints: Vec<Footprint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DataRelinked {
    #[serde(flatten)]
    pub relinked: Relinked,
    /// Where the touched objects lie in it.
    pub data: Placement,
}

impl DataOrder {}

impl crate::report::Report for DataOrder {
    /// What the start-up touched of the data, and where those objects lie
    /// before and after, per linker.
    fn render(&self) -> String {
        let t = &self.touched;
        let mut s = format!(
            "data: {} objects first touched ({} bytes), {} accesses on {} pages of the file's data, {} of them outside any object ({})\n",
            t.order.len(),
            t.bytes,
            t.accesses,
            t.pages,
            t.pages_outside_objects,
            t.record.display()
        );
        for (section, n, bytes, movable) in &t.sections {
            let how = if *movable { "ordered" } else { "cannot move" };
            s += &format!("  {section}: {n} objects, {bytes} bytes ({how})\n");
        }
        let mut tab = crate::table::Table::new(&[
            "touched objects in",
            "4 KiB pages",
            "16 KiB",
            "64 KiB",
            "128 KiB",
            "in order",
            "output",
        ]);
        let row = |name: String, p: &Placement, out: &str| {
            let mut r = vec![name];
            r.extend(p.blocks.iter().map(|(_, n)| n.to_string()));
            r.push(format!("{}/{}", p.in_order, p.movable.saturating_sub(1)));
            r.push(out.to_string());
            r
        };
        tab.row(row("unordered (GNU ld)".into(), &self.unordered, "-"));
        for r in &self.relinked {
            let out = if r.relinked.output_identical { "identical" } else { "DIFFERS" };
            tab.row(row(format!("functions + data, {}", r.relinked.linker), &r.data, out));
        }
        s += &tab.render();
        s += "the whole start-up in the file (code, data, headers; valgrind's record of each build):\n";
        let mut heads = vec!["build".to_string(), "4 KiB pages".to_string()];
        heads.extend(super::report::BLOCKS.iter().skip(1).map(|b| format!("{} KiB blocks (floor)", b / 1024)));
        let heads: Vec<&str> = heads.iter().map(String::as_str).collect();
        let mut fp = crate::table::Table::new(&heads);
        for f in &self.footprints {
            let mut r = vec![f.build.clone(), f.file_pages.to_string()];
            for &b in super::report::BLOCKS.iter().skip(1) {
                r.push(f.at(b).map_or("-".into(), |(s, fl)| format!("{s} ({fl})")));
            }
            fp.row(r);
        }
        s += &fp.render();
        for f in &self.footprints {
            if let Some((spans, floor)) = f.at(64 << 10) {
                let reached = if spans == floor { "reached" } else { "not reached" };
                s += &format!("64 KiB blocks, {}: {spans}, the floor {floor}: {reached}\n", f.build);
            }
        }
        s
    }
}

/// The start-up's footprint in one build's file, from its own record.
#[derive(Debug, Clone, Serialize)]
pub struct Footprint {
    pub build: String,
    pub program: PathBuf,
    /// 4 KiB pages of the file the start-up touched.
    pub file_pages: usize,
    /// (block size, blocks those pages span).
    pub spans: Vec<(u64, usize)>,
    /// (block size, the fewest blocks as many pages can span).
    pub floor: Vec<(u64, usize)>,
}

impl Footprint {
    fn of(build: &str, program: &Path, t: &Touched) -> Footprint {
        Footprint {
            build: build.to_string(),
            program: program.to_path_buf(),
            file_pages: t.file_pages,
            spans: t.spans.clone(),
            floor: t.floor.clone(),
        }
    }

    /// Blocks of `block` bytes spanned, and the floor.
    pub fn at(&self, block: u64) -> Option<(usize, usize)> {
        let s = self.spans.iter().find(|(b, _)| *b == block)?.1;
        let f = self.floor.iter().find(|(b, _)| *b == block)?.1;
        Some((s, f))
    }
}

/// Record what `run(program)` (the unordered program started as the case
/// starts it) touches of its data, write both orders (`order`: the
/// functions) into `work/data`, and link with every installed linker into
/// `work/PREFIX.data.LINKER`; the start-up's footprint recorded in the
/// unordered build, GNU ld's function order (`reordered`) and GNU ld's
/// link with both. None when valgrind is not installed.
#[allow(clippy::too_many_arguments)]
fn data_order(
    program: &Path,
    reordered: Option<&Path>,
    run: &dyn Fn(&Path) -> Result<Command>,
    order: &[FunctionId],
    funcs: &Functions,
    work: &Path,
    prefix: &str,
    link: &dyn Fn(Linker, &Path, &Path) -> Result<()>,
    same_output: &dyn Fn(&Path, Linker) -> Result<bool>,
) -> Result<Option<DataOrder>> {
    if !crate::hosttool::exists("valgrind") {
        return Ok(None);
    }
    let objs = DataObjects::read(program)?;
    let touched = data::record(run(program)?, true, program, &objs, &work.join("data.touch"))?;
    let mut footprints = vec![Footprint::of("unordered", program, &touched)];
    if let Some(r) = reordered {
        let t = data::record(run(r)?, true, r, &DataObjects::read(r)?, &work.join("data.touch.reordered"))?;
        footprints.push(Footprint::of("reordered", r, &t));
    }
    let dir = work.join("data");
    super::script::write_with_data(&dir, order, funcs, Some((&touched.order, &objs)))?;
    let mut relinked = Vec::new();
    for linker in Linker::ALL {
        if !linker.installed() {
            continue;
        }
        let out = work.join(format!("{prefix}.data.{}", linker.name()));
        link(linker, &dir, &out)?;
        let measured = report::predict(&symbols::resolve(order, &Functions::read(&out)?)?);
        let out_objs = DataObjects::read(&out)?;
        let data = data::placement(&touched.order, &out_objs);
        if linker == Linker::Bfd {
            let t = data::record(run(&out)?, true, &out, &out_objs, &work.join("data.touch.data"))?;
            footprints.push(Footprint::of("reordered+data", &out, &t));
        }
        relinked.push(DataRelinked {
            relinked: Relinked {
                linker: linker.name(),
                output_identical: same_output(&out, linker)?,
                program: out,
                measured,
            },
            data,
        });
    }
    let unordered = data::placement(&touched.order, &objs);
    Ok(Some(DataOrder { touched, order_dir: dir, unordered, relinked, footprints }))
}

/// GCC's profile-guided build ordered by bootlink ([`pgo_order`]).
#[derive(Debug, Clone, Serialize)]
pub struct PgoOrder {
    pub build: python::PgoBuild,
    /// The functions its start-up ran, in first-run order ...
    pub functions: usize,
    /// ... of which the cold parts of split functions.
    pub cold_parts: usize,
    /// QEMU's record of its start-up, as a trace.
    pub trace: PathBuf,
    pub order_dir: PathBuf,
    /// GNU ld's link of its objects with the function and data order.
    pub relinked: Relinked,
    /// What its start-up touches (valgrind): the data order, the footprint.
    #[serde(skip)]
    pub touched: Touched,
}

#[derive(Debug, Clone, Serialize)]
pub struct QemuOrder {
    pub trace: PathBuf,
    pub functions: usize,
    pub order_dir: PathBuf,
    pub relinked: Relinked,
}

/// `binary` copied to `root/bin/NAME` (python finds its library from where it runs).
fn place(root: &Path, binary: &Path, name: &str) -> Result<PathBuf> {
    let to = root.join("bin").join(name);
    let _ = std::fs::remove_file(&to);
    std::fs::copy(binary, &to).map_err(|e| Error::io(binary, e))?;
    Ok(to)
}

/// `binary` as `root/bin/NAME` with [`python::ARGS`], in a clean environment.
fn in_layout(root: &Path, binary: &Path, name: &str) -> Result<Command> {
    Ok(python::start(&place(root, binary, name)?))
}

fn layout_output(root: &Path, binary: &Path, name: &str) -> Result<Vec<u8>> {
    let o = in_layout(root, binary, name)?
        .output()
        .map_err(|e| Error::file(Kind::Tool, binary, format!("cannot run it: {e}")).because(e))?;
    if !o.status.success() {
        return Err(Error::file(Kind::Tool, binary, format!("exited {} in the layout", o.status)));
    }
    Ok(o.stdout)
}

pub fn python_case() -> Result<PythonReport> {
    let b = python::build()?;
    let _lock = synth::lock(&b.dir)?;
    let work = b.dir.join("order");
    std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    let trace_path = work.join("trace");
    let (trace, traced_out) = profile_with(in_layout(&b.root, &b.traced, "traced")?, &b.traced, &trace_path)?;
    let traced_funcs = Functions::read(&b.traced)?;
    let mut mapped = symbols::map(&trace, &trace_path, &traced_funcs, "-")?;
    let plain_funcs = Functions::read(&b.plain)?;
    mapped.keep_present(&plain_funcs);
    let predicted = report::predict(&symbols::resolve(&mapped.order, &plain_funcs)?);
    super::script::write_all(&work, &mapped.order, &plain_funcs)?;
    let want = layout_output(&b.root, &b.plain, "unordered")?;
    if want != traced_out {
        return Err(Error::file(Kind::Internal, &b.traced, "the instrumented build prints something else"));
    }
    let args_of_link = link_args(&b.link);
    let plain_dir = b.plain.parent().unwrap_or(Path::new("."));
    let (relinked, mut missing) = relink_all(
        &mapped.order,
        &work,
        "python",
        &|linker, out| synth::link_ordered(&args_of_link, plain_dir, linker, &work, out),
        &|out, linker| Ok(layout_output(&b.root, out, linker.name())? == want),
    )?;
    let qemu = if crate::hosttool::exists(super::qemu::QEMU) {
        let program = place(&b.root, &b.plain, "unordered")?;
        let trace = work.join("trace.qemu");
        let args: Vec<String> = python::ARGS.iter().map(|a| a.to_string()).collect();
        super::qemu::record(&program, &args, Some(&python::ENV), &trace)?;
        let t = Trace::read(&trace)?;
        let q = symbols::map(&t, &trace, &plain_funcs, "-")?;
        let dir = work.join("qemu");
        super::script::write_all(&dir, &q.order, &plain_funcs)?;
        let out = work.join("python.qemu-order.ld.bfd");
        synth::link_ordered(&args_of_link, plain_dir, Linker::Bfd, &dir, &out)?;
        let measured = report::predict(&symbols::resolve(&q.order, &Functions::read(&out)?)?);
        Some(QemuOrder {
            trace,
            functions: q.order.len(),
            order_dir: dir,
            relinked: Relinked {
                linker: "ld.bfd",
                output_identical: layout_output(&b.root, &out, "qemu-order")? == want,
                program: out,
                measured,
            },
        })
    } else {
        missing.push(super::qemu::QEMU);
        None
    };
    let reordered = relinked.iter().find(|r| r.linker == "ld.bfd").map(|r| r.program.clone());
    let record_in_layout = |p: &Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().replace('.', "-")).unwrap_or_default();
        in_layout(&b.root, p, &format!("record-{name}"))
    };
    let mut data = data_order(
        &b.plain,
        reordered.as_deref(),
        &record_in_layout,
        &mapped.order,
        &plain_funcs,
        &work,
        "python",
        &|linker, dir, out| synth::link_ordered(&args_of_link, plain_dir, linker, dir, out),
        &|out, linker| Ok(layout_output(&b.root, out, &format!("data-{}", linker.name()))? == want),
    )?;
    if data.is_none() {
        missing.push("valgrind");
    }
    // BOLT with its own profile of `input` (`name`: the file names' stem).
    let bolted = |tool: &Path, input: &Path, name: &str| -> Result<Bolted> {
        let inst = work.join(format!("{name}-instrumented"));
        let profile = work.join(format!("{name}.fdata"));
        let _ = std::fs::remove_file(&profile);
        super::bolt::instrument(tool, input, &profile, &inst)?;
        layout_output(&b.root, &inst, "bolt-instrumented")?;
        let out = work.join(name);
        super::bolt::optimize(tool, input, &profile, &out)?;
        Ok(Bolted { output_identical: layout_output(&b.root, &out, "bolt")? == want, program: out })
    };
    let (bolt, bolt_data) = match super::bolt::find() {
        None => {
            missing.push("llvm-bolt");
            (None, None)
        }
        Some(tool) => {
            let plain = bolted(&tool, &b.plain, "python.bolt")?;
            // BOLT on GNU ld's link with the data order (and the function
            // order, which BOLT's own replaces): the data stays where the
            // link put it.
            let with_data = match data.as_ref().and_then(|d| d.relinked.iter().find(|r| r.relinked.linker == "ld.bfd"))
            {
                Some(r) => Some(bolted(&tool, &r.relinked.program, "python.data.bolt")?),
                None => None,
            };
            (Some(plain), with_data)
        }
    };
    // GCC's profile-guided build, ordered from its own record: it needs
    // QEMU's (the cold parts are functions no instrumented build sees)
    // and valgrind's (the data order, the footprints).
    let pgo = match &data {
        Some(_) if qemu.is_some() => Some(pgo_order(&b, &work, &want)?),
        _ => None,
    };
    // The start-up's footprint in BOLT's files and the PGO builds too (the
    // profile-guided build's own from the record its data order came from).
    if let Some(d) = data.as_mut() {
        let footprint = |build: &str, p: &Path| -> Result<Footprint> {
            let record = work.join(format!("data.touch.{build}"));
            let t = data::record(record_in_layout(p)?, true, p, &DataObjects::read(p)?, &record)?;
            Ok(Footprint::of(build, p, &t))
        };
        for (build, r) in [("bolt", &bolt), ("bolt+data", &bolt_data)] {
            if let Some(r) = r {
                d.footprints.push(footprint(build, &r.program)?);
            }
        }
        if let Some(p) = &pgo {
            d.footprints.push(Footprint::of("pgo", &p.build.python, &p.touched));
            d.footprints.push(footprint("pgo+data", &p.relinked.program)?);
        }
    }
    Ok(PythonReport {
        build: b,
        trace: trace_path,
        mapped,
        order_dir: work,
        predicted,
        relinked,
        bolt,
        bolt_data,
        qemu,
        data,
        pgo,
        missing,
        output: String::from_utf8_lossy(&want).trim_end().to_string(),
    })
}

/// GCC's profile-guided build of `b` ([`python::build_pgo`]), its
/// functions ordered from its own start-up recorded under QEMU (each split
/// function's hot and cold part where it first ran) and its data from its
/// own start-up under valgrind, linked again by GNU ld in `work/pgo/`.
fn pgo_order(b: &python::PythonBuild, work: &Path, want: &[u8]) -> Result<PgoOrder> {
    let p = python::build_pgo(b)?;
    let funcs = Functions::read(&p.python)?;
    let output = layout_output(&b.root, &p.python, "pgo")?;
    if output != want {
        return Err(Error::file(Kind::Internal, &p.python, "the profile-guided build prints something else"));
    }
    let program = place(&b.root, &p.python, "pgo")?;
    let trace = work.join("trace.pgo.qemu");
    let args: Vec<String> = python::ARGS.iter().map(|a| a.to_string()).collect();
    super::qemu::record(&program, &args, Some(&python::ENV), &trace)?;
    let t = Trace::read(&trace)?;
    let order = symbols::map(&t, &trace, &funcs, "-")?.order;
    let objs = DataObjects::read(&p.python)?;
    let touched = data::record(
        in_layout(&b.root, &p.python, "record-pgo")?,
        true,
        &p.python,
        &objs,
        &work.join("data.touch.pgo-order"),
    )?;
    let dir = work.join("pgo");
    super::script::write_with_data(&dir, &order, &funcs, Some((&touched.order, &objs)))?;
    let args_of_link = link_args(&p.link);
    let out = work.join("python.pgo.data.ld.bfd");
    synth::link_ordered(&args_of_link, &p.tree, Linker::Bfd, &dir, &out)?;
    let measured = report::predict(&symbols::resolve(&order, &Functions::read(&out)?)?);
    let cold_parts = order.iter().filter(|f| f.name.ends_with(".cold")).count();
    Ok(PgoOrder {
        functions: order.len(),
        cold_parts,
        trace,
        order_dir: dir,
        relinked: Relinked {
            linker: "ld.bfd",
            output_identical: layout_output(&b.root, &out, "pgo-data")? == want,
            program: out,
            measured,
        },
        build: p,
        touched,
    })
}

/// make's link without its `-o python`.
fn link_args(link: &[String]) -> Vec<std::ffi::OsString> {
    let mut args = Vec::new();
    let mut skip = false;
    for a in link {
        if std::mem::take(&mut skip) {
            continue;
        }
        if a == "-o" {
            skip = true;
            continue;
        }
        args.push(a.into());
    }
    args
}

impl PythonReport {
    /// Every relink, the QEMU-ordered build and BOLT's print what the plain build prints.
    pub fn outputs_identical(&self) -> bool {
        self.relinked.iter().all(|r| r.output_identical)
            && self.qemu.iter().all(|q| q.relinked.output_identical)
            && self.data.iter().flat_map(|d| &d.relinked).all(|r| r.relinked.output_identical)
            && self.bolt.iter().chain(&self.bolt_data).all(|b| b.output_identical)
            && self.pgo.iter().all(|p| p.relinked.output_identical)
    }
}

impl crate::report::Report for PythonReport {
    fn render(&self) -> String {
        let mut s = format!(
            "python3.11 {} ({}): `python {}` starts {} of its functions ({} more are inlined in the plain build), {} calls\n",
            self.build.version,
            self.build.plain.display(),
            python::ARGS.join(" "),
            self.mapped.order.len(),
            self.mapped.missing,
            self.mapped.total_calls
        );
        let mut relinked = self.relinked.clone();
        if let Some(q) = &self.qemu {
            relinked.push(Relinked { linker: "ld.bfd, recorded under qemu-x86_64", ..q.relinked.clone() });
        }
        let extra: Vec<(String, String)> = self
            .bolt
            .iter()
            .map(|r| (format!("BOLT ({})", super::bolt::OPTIONS.join(" ")), r))
            .chain(self.bolt_data.iter().map(|r| ("BOLT on the link with the data order".to_string(), r)))
            .map(|(name, r)| (name, if r.output_identical { "identical" } else { "DIFFERS" }.to_string()))
            .collect();
        s += &blocks_table(&self.predicted, &relinked, &extra);
        if let Some(q) = &self.qemu {
            s +=
                &format!("recorded under qemu-x86_64, no rebuild: {} functions ({})\n", q.functions, q.trace.display());
        }
        if let Some(p) = &self.pgo {
            s += &format!(
                "GCC's profile-guided build ({} start-ups, {}): its start-up recorded under qemu-x86_64 runs {} functions, {} of them cold parts; with the data order: {} ({})\n",
                p.build.training_runs,
                p.build.python.display(),
                p.functions,
                p.cold_parts,
                p.relinked.program.display(),
                if p.relinked.output_identical { "identical output" } else { "output DIFFERS" }
            );
        }
        if let Some(d) = &self.data {
            s += &d.render();
        }
        for m in &self.missing {
            s += &format!("{m} is not installed: not used\n");
        }
        s
    }
}
