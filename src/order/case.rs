//! One reordering end to end: run the instrumented build to get the trace,
//! map it to functions, write the orders, relink the plain objects with
//! each linker, check the program still prints the same, and compare the
//! blocks its startup functions occupy before and after (predicted from the
//! trace, and measured in each relinked binary's symbol table).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

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
    /// Linkers not installed here.
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
    let (relinked, missing) = relink_all(
        &mapped.order,
        &work,
        "synth-order",
        &|linker, out| synth::relink(&case.objects, linker, &work, out),
        &|out, _| Ok(run_output(out)? == want),
    )?;
    Ok(CaseReport { case, trace: trace_path, mapped, order_dir: work, predicted, relinked, missing })
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
    pub fn render(&self) -> String {
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
        for m in &self.missing {
            s += &format!("{m} is not installed: not relinked with it\n");
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
    /// The order recorded without a rebuild (the plain build under
    /// qemu-x86_64, [`super::qemu`]), relinked by GNU ld (None: no qemu-user).
    pub qemu: Option<QemuOrder>,
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

#[derive(Debug, Clone, Serialize)]
pub struct QemuOrder {
    pub trace: PathBuf,
    pub functions: usize,
    pub order_dir: PathBuf,
    pub relinked: Relinked,
}

/// The environment of every python start: nothing but these.
const ENV: [(&str, &str); 2] = [("PATH", "/usr/bin:/bin"), ("HOME", "/")];

/// `binary` copied to `root/bin/NAME` (python finds its library from where it runs).
fn place(root: &Path, binary: &Path, name: &str) -> Result<PathBuf> {
    let to = root.join("bin").join(name);
    let _ = std::fs::remove_file(&to);
    std::fs::copy(binary, &to).map_err(|e| Error::io(binary, e))?;
    Ok(to)
}

/// `binary` as `root/bin/NAME` with [`python::ARGS`], in a clean environment.
fn in_layout(root: &Path, binary: &Path, name: &str) -> Result<Command> {
    let mut c = Command::new(place(root, binary, name)?);
    c.args(python::ARGS).env_clear().envs(ENV).stdin(std::process::Stdio::null());
    Ok(c)
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
    // make's link without its `-o python`.
    let mut args_of_link: Vec<std::ffi::OsString> = Vec::new();
    let mut skip = false;
    for a in &b.link {
        if std::mem::take(&mut skip) {
            continue;
        }
        if a == "-o" {
            skip = true;
            continue;
        }
        args_of_link.push(a.into());
    }
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
        super::qemu::record(&program, &args, Some(&ENV), &trace)?;
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
    let bolt = match super::bolt::find() {
        None => {
            missing.push("llvm-bolt");
            None
        }
        Some(tool) => {
            let inst = work.join("python.bolt-instrumented");
            let profile = work.join("bolt.fdata");
            let _ = std::fs::remove_file(&profile);
            super::bolt::instrument(&tool, &b.plain, &profile, &inst)?;
            layout_output(&b.root, &inst, "bolt-instrumented")?;
            let out = work.join("python.bolt");
            super::bolt::optimize(&tool, &b.plain, &profile, &out)?;
            Some(Bolted { output_identical: layout_output(&b.root, &out, "bolt")? == want, program: out })
        }
    };
    Ok(PythonReport {
        build: b,
        trace: trace_path,
        mapped,
        order_dir: work,
        predicted,
        relinked,
        bolt,
        qemu,
        missing,
        output: String::from_utf8_lossy(&want).trim_end().to_string(),
    })
}

impl PythonReport {
    /// Every relink, the QEMU-ordered build and BOLT's print what the plain build prints.
    pub fn outputs_identical(&self) -> bool {
        self.relinked.iter().all(|r| r.output_identical)
            && self.qemu.iter().all(|q| q.relinked.output_identical)
            && self.bolt.iter().all(|b| b.output_identical)
    }

    pub fn render(&self) -> String {
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
            .map(|r| {
                let out = if r.output_identical { "identical" } else { "DIFFERS" };
                (format!("BOLT ({})", super::bolt::OPTIONS.join(" ")), out.to_string())
            })
            .collect();
        s += &blocks_table(&self.predicted, &relinked, &extra);
        if let Some(q) = &self.qemu {
            s +=
                &format!("recorded under qemu-x86_64, no rebuild: {} functions ({})\n", q.functions, q.trace.display());
        }
        for m in &self.missing {
            s += &format!("{m} is not installed: not used\n");
        }
        s
    }
}
