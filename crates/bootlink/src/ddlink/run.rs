//! Running a program under the patched ld.so: profile (record every
//! binding), verify (cache and normal lookup side by side), status (what
//! the loader decides, and why). The program is started as
//! `ld.so PROGRAM ARGS` with every inherited `LD_*` variable removed, so
//! the run sees only what bootlink sets.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use super::format::{self, Cache, OBJ_LOADER, OBJ_MAIN, OBJ_PLACED, OBJ_PRELINKED};
use super::objects::{self, ObjFile};
use super::record::Record;
use crate::error::{Error, Kind, Result};

/// A program and its arguments.
#[derive(Debug, Clone, Serialize)]
pub struct Program {
    pub path: PathBuf,
    pub args: Vec<String>,
    /// Run with every file under this directory bind-mounted over the same
    /// path in a private mount namespace (prelinked images, tried without
    /// installing them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlay: Option<PathBuf>,
}

impl Program {
    pub fn new(path: impl Into<PathBuf>, args: Vec<String>) -> Program {
        Program { path: path.into(), args, overlay: None }
    }
}

/// What a run printed.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// `loader PROGRAM ARGS` with a clean `LD_*` environment plus `env`.
pub fn command(loader: &Path, program: &Program, env: &[(&str, OsString)]) -> Command {
    command_with(&[], loader, program, env)
}

/// `PREFIX... loader PROGRAM ARGS` (e.g. perf stat), inside the program's
/// overlay if it has one, with a clean `LD_*` environment plus `env`.
pub(crate) fn command_with(prefix: &[&str], loader: &Path, program: &Program, env: &[(&str, OsString)]) -> Command {
    let mut argv: Vec<OsString> = Vec::new();
    if program.overlay.is_some() {
        // Only the measured command gets the environment, not the
        // namespace's helpers (their loader would act on LD_DEBUG too).
        argv.push("env".into());
        for (k, v) in env {
            let mut kv = OsString::from(k);
            kv.push("=");
            kv.push(v);
            argv.push(kv);
        }
    }
    argv.extend(prefix.iter().map(OsString::from));
    argv.push(loader.into());
    argv.push(program.path.clone().into());
    argv.extend(program.args.iter().map(OsString::from));
    let mut c = match &program.overlay {
        Some(dir) => overlay_command(dir, &argv),
        None => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    c.stdin(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("LD_") {
            c.env_remove(k);
        }
    }
    if program.overlay.is_none() {
        for (k, v) in env {
            c.env(k, v);
        }
    }
    c
}

/// Mounts each (image, target) pair given before `--`, then runs the rest.
const OVERLAY_SCRIPT: &str =
    r#"while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 126; shift 2; done; shift; exec "$@""#;

/// `argv` in a private mount namespace where every regular file under
/// `dir` is bind-mounted over the file at the same path below `/`.
fn overlay_command(dir: &Path, argv: &[OsString]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "--", "sh", "-c", OVERLAY_SCRIPT, "sh"]);
    for image in overlay_files(dir) {
        let target = Path::new("/").join(image.strip_prefix(dir).expect("under dir"));
        c.arg(&image).arg(target);
    }
    c.arg("--").args(argv);
    c
}

/// The regular files under `dir`, sorted (none if it cannot be read: the
/// run then fails to find what it needs and says so).
pub fn overlay_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

pub fn run(loader: &Path, program: &Program, env: &[(&str, OsString)]) -> Result<RunOutput> {
    let out = command(loader, program, env).output().map_err(|e| {
        Error::file(Kind::Tool, loader, format!("cannot run {}: {e}", program.path.display())).because(e)
    })?;
    Ok(RunOutput { code: out.status.code(), stdout: out.stdout, stderr: out.stderr })
}

pub(super) fn scratch() -> Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("bootlink-ddlink-").tempdir().map_err(|e| Error::io(&std::env::temp_dir(), e))
}

/// `path` is a regular file (through its links); a path that is there but
/// is something else (a directory, a FIFO) is refused saying what it is.
fn need_file(path: &Path, what: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Err(_) => Err(Error::file(Kind::Io, path, format!("{what}: no such file"))),
        Ok(meta) => match crate::fsutil::not_regular(&meta) {
            None => Ok(()),
            Some(is) => Err(Error::file(Kind::Io, path, format!("{what} {is}"))),
        },
    }
}

/// The cache at `path`, decoded: a damaged or foreign file is refused in
/// one line naming it, before the loader (which would only fall back to
/// loading as usual, and so hide the damage) is given it.
pub(crate) fn read_cache(path: &Path) -> Result<format::Cache> {
    let bytes = crate::fsutil::read_input(path, crate::fsutil::MAX_BINARY)?;
    format::decode(&bytes).map_err(|e| e.at(path))
}

/// Run with `LD_DEBUG=categories` written into `dir` (LD_DEBUG_OUTPUT
/// files are named PREFIX.PID): the output and the loader's debug text.
pub(crate) fn run_debug(
    loader: &Path,
    program: &Program,
    env: &[(&str, OsString)],
    categories: &str,
    dir: &Path,
) -> Result<(RunOutput, String)> {
    let mut env = env.to_vec();
    env.push(("LD_DEBUG", categories.into()));
    env.push(("LD_DEBUG_OUTPUT", dir.join("debug").into_os_string()));
    let out = run(loader, program, &env)?;
    let mut text = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("debug.") {
            text += &std::fs::read_to_string(e.path()).unwrap_or_default();
        }
    }
    Ok((out, text))
}

/// The loader's `LD_DEBUG=ddlink` lines, without their "PID: ddlink: " prefix.
pub fn ddlink_lines(debug: &str) -> impl Iterator<Item = &str> {
    debug.lines().filter_map(|l| l.split_once("ddlink: ").map(|(_, r)| r))
}

/// The loader's reason for normal loading, if it gave one.
fn normal_reason(debug: &str) -> Option<&str> {
    ddlink_lines(debug).find_map(|l| l.strip_prefix("normal loading: "))
}

/// Run the program once with every binding made at startup (BIND_NOW)
/// and recorded; the record is copied to `out` atomically.
pub fn profile(loader: &Path, program: &Program, out: &Path) -> Result<(Record, RunOutput)> {
    need_file(loader, "the patched ld.so")?;
    need_file(&program.path, "the program")?;
    crate::fsutil::check_outputs(&[loader, &program.path], &[crate::fsutil::Planned::new(out)])?;
    let tmp = scratch()?;
    let rec_path = tmp.path().join("record");
    let output =
        run(loader, program, &[("LD_BIND_NOW", "1".into()), ("LD_DDLINK_RECORD", rec_path.clone().into_os_string())])?;
    if !rec_path.is_file() {
        return Err(Error::file(
            Kind::Tool,
            loader,
            format!(
                "{} left no record: not a loader with DDLink, or the program did not start ({})",
                program.path.display(),
                String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
            ),
        ));
    }
    let text = crate::fsutil::read_input(&rec_path, crate::fsutil::MAX_TEXT)?;
    let rec = Record::parse(&String::from_utf8_lossy(&text)).map_err(|e| e.at(&rec_path))?;
    crate::fsutil::write_atomic(out, &text)?;
    Ok((rec, output))
}

/// The result of running with the cache and the normal lookup compared.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// Bindings the cache answered, each compared with a normal lookup.
    pub checked: u64,
    pub mismatched: u64,
    /// Lookups the cache did not answer.
    pub looked_up: u64,
    /// One line per difference: symbol, cache's object, normal object.
    pub mismatches: Vec<String>,
    /// Prelinked images (mapped at their bases, relocated as usual in check
    /// mode) whose every relocated word was compared with the image's.
    pub images: u64,
    pub words_checked: u64,
    pub words_mismatched: u64,
    /// One line per differing word: object, relocation, type, image's
    /// value, normal relocation's value.
    pub word_mismatches: Vec<String>,
    /// Images compared with their originals by bootlink itself (with
    /// `--overlay`: the originals are at their paths outside the run's
    /// namespace): every DT_RELR word equal to the original's plus the
    /// base, every word no relocation targets unchanged.
    pub images_compared: u64,
    pub relr_words_checked: u64,
    pub other_words_checked: u64,
    /// One line per difference, naming the image.
    pub image_differences: Vec<String>,
    /// Why the images were not compared with their originals.
    pub images_not_compared: Option<String>,
    /// Why the loader did not use the cache (then nothing was checked).
    pub not_used: Option<String>,
    /// `dlopen` groups the cache holds, and those the run matched and
    /// checked (their bindings and images are in the counts above).
    pub groups: usize,
    pub groups_checked: usize,
    /// Why the loader stopped matching groups, when it did.
    pub groups_stopped: Option<String>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.not_used.is_none()
            && self.mismatched == 0
            && self.checked > 0
            && self.words_mismatched == 0
            && self.image_differences.is_empty()
            && self.groups_checked == self.groups
    }
}

/// Why the loader stopped taking `dlopen` groups from the cache (its
/// `LD_DEBUG=ddlink` lines: the group that did not match and why).
fn groups_reason(debug: &str) -> Option<String> {
    let lines: Vec<&str> = ddlink_lines(debug).collect();
    let stop = lines.iter().position(|l| l.contains(" and later: normal loading: "))?;
    // The detail line, when there is one, comes just before.
    let detail = stop.checked_sub(1).map(|i| lines[i]).filter(|l| {
        l.starts_with("dlopen group ") && !l.contains("bindings from the cache") && !l.contains("skip mode")
    });
    Some(detail.unwrap_or(lines[stop]).to_string())
}

/// Run with the cache in check mode: every cached binding is also looked
/// up as usual (the normal result is applied) and differences reported.
pub fn verify(loader: &Path, cache: &Path, program: &Program) -> Result<(VerifyReport, RunOutput)> {
    need_file(loader, "the patched ld.so")?;
    // A missing, non-regular or damaged cache is refused here in one line,
    // as `status` does; the loader would only fall back to loading as usual.
    let decoded = read_cache(cache)?;
    let tmp = scratch()?;
    let check = tmp.path().join("check");
    let env = [
        ("LD_BIND_NOW", "1".into()),
        ("LD_DDLINK", cache.as_os_str().to_owned()),
        ("LD_DDLINK_CHECK", check.clone().into_os_string()),
    ];
    let (output, debug) = run_debug(loader, program, &env, "ddlink", tmp.path())?;
    let mut report = VerifyReport {
        checked: 0,
        mismatched: 0,
        looked_up: 0,
        mismatches: Vec::new(),
        images: 0,
        words_checked: 0,
        words_mismatched: 0,
        word_mismatches: Vec::new(),
        images_compared: 0,
        relr_words_checked: 0,
        other_words_checked: 0,
        image_differences: Vec::new(),
        images_not_compared: None,
        not_used: None,
        groups: decoded.groups.len(),
        groups_checked: 0,
        groups_stopped: groups_reason(&debug),
    };
    compare_images(&decoded, loader, program, &mut report)?;
    let Ok(text) = std::fs::read_to_string(&check) else {
        report.not_used = Some(normal_reason(&debug).unwrap_or("the loader wrote no check report").to_string());
        return Ok((report, output));
    };
    let mut done = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("mismatch ") {
            report.mismatches.push(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("prelink-mismatch ") {
            report.word_mismatches.push(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("prelinked ") {
            let v: Vec<u64> = rest.split(' ').filter_map(|t| t.parse().ok()).collect();
            if let [n, c, m] = v[..] {
                report.images += n;
                report.words_checked += c;
                report.words_mismatched += m;
            }
        } else if let Some(rest) = line.strip_prefix("checked ") {
            let v: Vec<u64> = rest.split(' ').filter_map(|t| t.parse().ok()).collect();
            if let [c, m, l] = v[..] {
                report.checked += c;
                report.mismatched += m;
                report.looked_up += l;
                done = true;
            }
        } else if let Some(rest) = line.strip_prefix("group-checked ") {
            // A dlopen group: its own counts, added to the startup's.
            let v: Vec<u64> = rest.split(' ').filter_map(|t| t.parse().ok()).collect();
            if let [_, c, m, l, n, w, wm] = v[..] {
                report.checked += c;
                report.mismatched += m;
                report.looked_up += l;
                report.images += n;
                report.words_checked += w;
                report.words_mismatched += wm;
                report.groups_checked += 1;
            }
        }
    }
    if !done {
        return Err(Error::file(Kind::Format, &check, "truncated check report (no `checked` line)"));
    }
    Ok((report, output))
}

/// The exactness of what the loader's check mode cannot judge: DT_RELR
/// words (relocated in place, so the image alone does not say what the
/// original held) and every word no relocation targets, by comparing each
/// prelinked image under the overlay with its original.
fn compare_images(cache: &Cache, loader: &Path, program: &Program, report: &mut VerifyReport) -> Result<()> {
    let prelinked: Vec<&format::Object> = cache.objects.iter().filter(|o| o.flags & OBJ_PRELINKED != 0).collect();
    if prelinked.is_empty() {
        return Ok(());
    }
    let Some(dir) = &program.overlay else {
        report.images_not_compared =
            Some("no --overlay: the originals are not at hand (installed images replace them)".into());
        return Ok(());
    };
    for o in prelinked {
        let mut original = objects::file_of(o.flags, &o.name, loader, &program.path);
        if o.flags & OBJ_MAIN != 0 {
            original = std::fs::canonicalize(&original).map_err(|e| Error::io(&original, e))?;
        }
        // A library's image is at its name (the loader's path to it), the
        // program's at its real path.
        let at = if o.flags & OBJ_MAIN != 0 { original.to_string_lossy().into_owned() } else { o.name.clone() };
        let image = super::prelink::image_path(dir, &at);
        let base = o.prelink.as_ref().map_or(0, |p| p.base);
        let (a, b) = (crate::fsutil::map_file(&original)?, crate::fsutil::map_file(&image)?);
        let check = super::prelink::check_image(&a, &b, base).map_err(|e| e.at(&original))?;
        report.images_compared += 1;
        report.relr_words_checked += check.relr_words;
        report.other_words_checked += check.other_words;
        for d in check.differences {
            report.image_differences.push(format!("{}: {d}", image.display()));
        }
    }
    Ok(())
}

/// One object of a cache and whether the files on disk still match it.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectStatus {
    pub name: String,
    pub kind: &'static str,
    pub bindings: usize,
    /// None when the file matches the cache.
    pub problem: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub cache: PathBuf,
    /// "file-read" or "normal": what the loader decided for this run.
    pub mode: String,
    /// The loader's reason for normal loading.
    pub reason: Option<String>,
    pub objects: Vec<ObjectStatus>,
}

/// What the loader decides for the program with this cache, and for each
/// object of the cache whether its file still matches.
pub fn status(loader: &Path, cache_path: &Path, program: &Program) -> Result<StatusReport> {
    need_file(loader, "the patched ld.so")?;
    let cache = read_cache(cache_path)?;
    let tmp = scratch()?;
    let env = [("LD_DDLINK", cache_path.as_os_str().to_owned())];
    let (_, debug) = run_debug(loader, program, &env, "ddlink", tmp.path())?;
    let lines: Vec<&str> = ddlink_lines(&debug).collect();
    let (mode, reason) = if lines.iter().any(|l| l.starts_with("skip mode")) {
        ("skip".to_string(), None)
    } else if lines.iter().any(|l| l.starts_with("file-read mode")) {
        let why = lines.iter().find_map(|l| l.strip_prefix("relocating the "));
        ("file-read".to_string(), why.map(|w| format!("relocating the {w}")))
    } else {
        let why = normal_reason(&debug).unwrap_or("the loader printed no DDLink decision");
        ("normal".to_string(), Some(why.to_string()))
    };
    Ok(StatusReport { cache: cache_path.to_path_buf(), mode, reason, objects: object_status(&cache, loader, program) })
}

fn object_status(cache: &Cache, loader: &Path, program: &Program) -> Vec<ObjectStatus> {
    let initial = cache.initial();
    cache
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let opened = i >= initial;
            let kind = match o.flags {
                f if f & OBJ_LOADER != 0 => "loader",
                f if f & OBJ_MAIN != 0 && f & OBJ_PRELINKED != 0 => "prelinked program",
                f if f & OBJ_MAIN != 0 => "program",
                f if f & OBJ_PRELINKED != 0 && opened => "prelinked, opened by dlopen",
                f if f & OBJ_PRELINKED != 0 => "prelinked library",
                f if f & OBJ_PLACED != 0 && opened => "placed, opened by dlopen",
                f if f & OBJ_PLACED != 0 => "placed library",
                _ if opened => "opened by dlopen",
                _ => "library",
            };
            let mut file = objects::file_of(o.flags, &o.name, loader, &program.path);
            if o.flags & OBJ_MAIN != 0 {
                file = std::fs::canonicalize(&file).unwrap_or(file);
            }
            if let (Some(dir), true) = (&program.overlay, o.flags & OBJ_PRELINKED != 0) {
                let at = if o.flags & OBJ_MAIN != 0 { file.to_string_lossy().into_owned() } else { o.name.clone() };
                file = super::prelink::image_path(dir, &at);
            }
            let problem = match ObjFile::read(&file) {
                Err(e) => Some(e.to_string()),
                Ok(now) => objects::mismatch(&now, o.flags, &o.build_id, &o.identity),
            };
            ObjectStatus { name: o.name.clone(), kind, bindings: o.entries.len(), problem }
        })
        .collect()
}

impl VerifyReport {}

impl crate::report::Report for VerifyReport {
    fn render(&self) -> String {
        let mut s = String::new();
        if let Some(why) = &self.not_used {
            s += &format!("the loader did not use the cache: {why}\n");
            return s;
        }
        for m in self.mismatches.iter().take(50) {
            s += &format!("mismatch: {m}\n");
        }
        s += &format!(
            "{} bindings from the cache checked against a normal lookup: {} differences ({} other lookups)\n",
            self.checked, self.mismatched, self.looked_up
        );
        for m in self.word_mismatches.iter().take(50) {
            s += &format!("image differs: {m}\n");
        }
        if self.images > 0 || self.words_checked > 0 {
            s += &format!(
                "{} words of {} prelinked images checked against a normal relocation: {} differences\n",
                self.words_checked, self.images, self.words_mismatched
            );
        }
        if self.groups > 0 {
            s += &format!(
                "{} of {} dlopen groups matched and checked{}\n",
                self.groups_checked,
                self.groups,
                match (&self.groups_stopped, self.groups_checked < self.groups) {
                    (Some(why), true) => format!(": {why}"),
                    _ => String::new(),
                }
            );
        }
        for d in self.image_differences.iter().take(50) {
            s += &format!("image differs from its original: {d}\n");
        }
        if self.images_compared > 0 {
            s += &format!(
                "{} images compared with their originals: {} DT_RELR words (each the original's plus the base), {} other words: {} differences\n",
                self.images_compared,
                self.relr_words_checked,
                self.other_words_checked,
                self.image_differences.len()
            );
        }
        if let Some(why) = &self.images_not_compared {
            s += &format!("images not compared with their originals: {why}\n");
        }
        s
    }
}

impl StatusReport {}

impl crate::report::Report for StatusReport {
    fn render(&self) -> String {
        let mut s = match (self.mode.as_str(), &self.reason) {
            ("skip", _) => format!(
                "skip mode: the prelinked images are used as they are, the other bindings come from {}\n",
                self.cache.display()
            ),
            ("file-read", None) => {
                format!("file-read mode: the loader takes the bindings from {}\n", self.cache.display())
            }
            ("file-read", Some(why)) => format!("file-read mode, no skip mode: {why}\n"),
            (_, why) => format!("normal loading: {}\n", why.as_deref().unwrap_or("")),
        };
        let mut t = crate::table::Table::new(&["object", "kind", "bindings", "file"]);
        for o in &self.objects {
            t.row(vec![
                o.name.clone(),
                o.kind.to_string(),
                o.bindings.to_string(),
                o.problem.clone().unwrap_or_else(|| "matches".into()),
            ]);
        }
        s += &t.render();
        s
    }
}
