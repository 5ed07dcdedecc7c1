//! DDLink's synthetic case, generated: a program with many shared libraries and
//! many symbols whose startup relocation is dominated by symbol lookups
//! ("12 libraries, ~200,000 symbols, relocation 1,900 ms → 300 ms"), built
//! with the real gcc and GNU ld, deterministic, cached by content.
//!
//! # What it models
//!
//! A big C++ program: a stack of shared libraries (`libsynth00.so`, a base
//! library every other one uses, up to the application's own libraries)
//! and a small `synth-main`. Each library is a namespace of classes
//! (`synth::gfx::PaintLayerObserver`), written in C under their Itanium
//! C++ mangled names, which is what the dynamic linker sees of C++:
//!
//! - methods: tiny functions, `_ZN5synth3gfx18PaintLayerObserver18invalidateGeometryEv`,
//!   a virtual destructor pair (`D2Ev`, `D0Ev`) for polymorphic classes,
//!   constructors (`C2Ev`);
//! - per polymorphic class the three data objects a C++ compiler emits: the
//!   vtable `_ZTV…` (offset-to-top word, typeinfo pointer, method
//!   pointers), the typeinfo `_ZTI…` (a pointer into a "type_info" vtable of
//!   the base library, like libstdc++'s `__si_class_type_info`, the name,
//!   the base class's typeinfo) and the typeinfo name `_ZTS…`;
//! - static data members and namespace-level variables and functions.
//!
//! Names are real-length mangled names with shared prefixes (namespaces,
//! class names, `std::string` parameters), so hashing and the final string
//! compare cost what they cost in a real program.
//!
//! Every symbol has default visibility and the libraries are linked without
//! `-Bsymbolic`, as C++ libraries usually are, so each reference is bound by
//! a lookup at load time, including a library's references to its own
//! symbols:
//!
//! - vtables point at the class's own virtual methods and, for methods a
//!   derived class does not override, at its base class's, which often lives
//!   in a lower library (`R_X86_64_64` against the symbol);
//! - typeinfos point at their name, their base's typeinfo and the base
//!   library's type_info vtables (`R_X86_64_64`);
//! - methods read static data members and variables through the GOT
//!   (`R_X86_64_GLOB_DAT`) and call helper methods of their own and lower
//!   libraries through the PLT (`R_X86_64_JUMP_SLOT`: at startup only with
//!   `LD_BIND_NOW=1` or `-z now`, else lazily at the first call);
//! - `synth-main` holds pointers to some of the vtables (`R_X86_64_64`).
//!
//! GNU ld sorts a library's dynamic relocations by symbol (`-z combreloc`)
//! and glibc reuses the previous lookup for a run of relocations against the
//! same symbol, so the lookups are the distinct symbols each object refers
//! to per relocation class; [`SynthCase::expected_lookups`] counts them from
//! the generated model, plus the C runtime's and libc's own.
//!
//! Library k depends (DT_NEEDED) on library k-1, on the base library 00
//! and on some libraries in between: a layered DAG. `synth-main` links all
//! of them, top first, so the global search scope is main, 11, 10, …, 00,
//! libc: a lookup of a base-library symbol passes every other library's
//! Bloom filter first.
//!
//! `synth-main` walks the typeinfo chains of its vtables and calls
//! 131,072 methods through them in an order its running checksum decides,
//! then prints the checksum and the counts. Nothing it prints depends on
//! addresses, and every binding it uses feeds the checksum, so two loaders
//! that print the same lines bound the program the same way (the generator
//! computes the lines too, and the build checks them).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Kind, Result};
use crate::fsutil;
use crate::hosttool;
use crate::progress;
use crate::progress::Progress;

/// Changes whenever the generated sources or the build change, so older
/// cases are not served from the cache.
pub(crate) const GENERATOR_VERSION: u32 = 1;
/// The program's file name in a case's directory.
pub const PROGRAM: &str = "synth-main";
pub(crate) const MAX_LIBS: usize = 99;
/// Every library gets at least this many symbols.
pub(crate) const MIN_SYMBOLS_PER_LIB: usize = 16;
pub(crate) const MAX_SYMBOLS: usize = 4_000_000;

/// Under `fsutil::cache_dir()`.
const CACHE_SUBDIR: &str = "ddlink-synth";
/// Written last into a case's directory: what was built, from what.
const MANIFEST: &str = "synth.json";
/// Stage directories beside the final one: `.ddlink-synth-stage.<pid>.<random>`.
const STAGE_MARK: &str = ".ddlink-synth-stage.";
/// Method calls `synth-main` makes through its vtables.
const CALLS: u64 = 1 << 17;

/// Lookups the C runtime start files add to each library: `__cxa_finalize`,
/// `_ITM_registerTMCloneTable`, `_ITM_deregisterTMCloneTable`,
/// `__gmon_start__` (the last three weak and undefined: each searches the
/// whole scope and fails).
const LIB_CRT_LOOKUPS: usize = 4;
/// Those of `synth-main` apart from its vtables: the four above,
/// `__libc_start_main` and `printf`.
const MAIN_LIBC_LOOKUPS: usize = 6;
/// libc.so.6's own and the vDSO's, measured with a one-library program on
/// Debian 12's glibc 2.36 (another glibc differs by a few).
const SYSTEM_LOOKUPS: usize = 91;

/// What to generate. `Default` is the standard case (12 libraries, 200,000 symbols).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SynthSpec {
    /// Shared libraries, `libsynth00.so` up.
    pub libs: usize,
    /// Exported symbols (functions and data objects) over all libraries.
    pub symbols: usize,
    /// Varies names, shapes and constants; the same seed builds the same files.
    pub seed: u64,
}

impl Default for SynthSpec {
    fn default() -> SynthSpec {
        SynthSpec { libs: 12, symbols: 200_000, seed: 0 }
    }
}

impl SynthSpec {
    /// A Usage error for a spec that cannot be built.
    pub fn check(&self) -> Result<()> {
        if self.libs == 0 || self.libs > MAX_LIBS {
            return Err(Error::new(
                Kind::Usage,
                format!("a synthetic case has 1 to {MAX_LIBS} libraries, not {}", self.libs),
            ));
        }
        let min = self.libs * MIN_SYMBOLS_PER_LIB;
        if self.symbols < min || self.symbols > MAX_SYMBOLS {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "{} symbols over {} libraries: give {min} to {MAX_SYMBOLS} ({MIN_SYMBOLS_PER_LIB} or more a library)",
                    self.symbols, self.libs
                ),
            ));
        }
        Ok(())
    }

    /// The cache key: SHA-256 (first 128 bits, hex) of the spec, the
    /// generator's version and the compiler (`gcc --version`'s first line).
    pub fn key(&self, gcc: &str) -> String {
        use sha2::{Digest, Sha256};
        let text = format!(
            "bootlink ddlink-synth\ngenerator {GENERATOR_VERSION}\nlibs {}\nsymbols {}\nseed {}\ngcc {gcc}\n",
            self.libs, self.symbols, self.seed
        );
        Sha256::digest(text.as_bytes())[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A built case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SynthCase {
    /// Holds the program, the libraries and `synth.json`.
    pub dir: PathBuf,
    /// `synth-main`: runs as it is, finds its libraries through RUNPATH `$ORIGIN`.
    pub program: PathBuf,
    /// `libsynth00.so` … in order.
    pub libs: Vec<PathBuf>,
    /// Each library's DT_NEEDED among the synthetic libraries, in link order
    /// (each also needs libc.so.6).
    pub needed: Vec<Vec<String>>,
    /// Exported symbols over all libraries (= the spec's).
    pub symbols: usize,
    /// Symbol lookups the dynamic linker makes at startup with
    /// `LD_BIND_NOW=1` (glibc's "number of relocations"), counted from the
    /// generated model plus the C runtime's and libc's own.
    pub expected_lookups: usize,
    /// What `synth-main` prints (two lines: checksum, counts).
    pub expected_output: String,
    pub key: String,
    /// Found complete in place, not built by this call.
    pub from_cache: bool,
}

impl crate::report::Report for SynthCase {
    fn render(&self) -> String {
        format!(
            "{}: {} libraries, {} symbols, ~{} lookups at startup{}\n",
            self.program.display(),
            self.libs.len(),
            self.symbols,
            self.expected_lookups,
            if self.from_cache { " (cached)" } else { "" }
        )
    }
}

/// `synth.json`: everything a case is, without the directory it is in.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    generator: u32,
    key: String,
    spec: SynthSpec,
    gcc: String,
    libs: Vec<String>,
    needed: Vec<Vec<String>>,
    program: String,
    symbols: usize,
    functions: usize,
    data_objects: usize,
    classes: usize,
    vtables: usize,
    vtable_slots: usize,
    roots: usize,
    /// Per library: distinct symbols it refers to through data relocations
    /// and the GOT, and through the PLT (each one lookup at startup).
    references: Vec<[usize; 2]>,
    expected_lookups: usize,
    expected_output: String,
}

impl Manifest {
    fn case(&self, dir: &Path, from_cache: bool) -> SynthCase {
        SynthCase {
            dir: dir.to_path_buf(),
            program: dir.join(&self.program),
            libs: self.libs.iter().map(|l| dir.join(l)).collect(),
            needed: self.needed.clone(),
            symbols: self.symbols,
            expected_lookups: self.expected_lookups,
            expected_output: self.expected_output.clone(),
            key: self.key.clone(),
            from_cache,
        }
    }
}

/// Build the case for `spec` in `out_dir`, or in
/// `<cache>/ddlink-synth/<key>/` when None, unless it is there already.
///
/// The files are made in a stage directory beside the final one and renamed
/// into place when complete (and checked: the program runs and prints what
/// the generator predicts), so a killed build leaves nothing that looks
/// complete. An `out_dir` that holds another case (or nothing) is
/// replaced; one that holds anything else is refused. Cached cases stay
/// until removed (the default case's is about 60 MB; a generator change makes new
/// keys and leaves the old cases unused).
pub fn build(spec: &SynthSpec, out_dir: Option<&Path>) -> Result<SynthCase> {
    crate::buildlog::timed(
        || format!("DDLink synthetic case {} libs x {} symbols", spec.libs, spec.symbols),
        || build_case(spec, out_dir),
    )
}

fn build_case(spec: &SynthSpec, out_dir: Option<&Path>) -> Result<SynthCase> {
    spec.check()?;
    let gcc = gcc_version()?;
    let key = spec.key(&gcc);
    let dir = match out_dir {
        Some(d) => d.to_path_buf(),
        None => fsutil::cache_dir().join(CACHE_SUBDIR).join(&key),
    };
    if let Some(m) = read_manifest(&dir, &key) {
        return Ok(m.case(&dir, true));
    }
    if dir.exists() && !replaceable(&dir) {
        return Err(Error::file(
            Kind::Usage,
            &dir,
            format!("exists and is not a synthetic case (no {MANIFEST}): give an empty or new directory"),
        ));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    remove_stale_stages(&parent);
    let stage = tempfile::Builder::new()
        .prefix(&format!("{STAGE_MARK}{}.", std::process::id()))
        .tempdir_in(&parent)
        .map_err(|e| Error::io(&parent, e))?;
    let work = stage.path().join("work");
    let out = stage.path().join("out");
    for d in [&work, &out] {
        std::fs::create_dir(d).map_err(|e| Error::io(d, e))?;
    }

    progress::status(&format!(
        "ddlink synth: generating {} libraries, {} symbols (seed {})",
        spec.libs, spec.symbols, spec.seed
    ));
    let model = generate(spec);
    compile_all(&model, &work)?;
    link_all(&model, &work, &out)?;
    let expected_output = expected_output(&model);
    check_program(&out.join(PROGRAM), &expected_output)?;

    let vtables: Vec<&Vtable> = model.classes.iter().filter_map(|c| c.vtable.as_ref()).collect();
    let manifest = Manifest {
        generator: GENERATOR_VERSION,
        key: key.clone(),
        spec: *spec,
        gcc,
        libs: (0..spec.libs).map(lib_file).collect(),
        needed: model.libs.iter().map(|l| l.deps.iter().map(|&d| lib_file(d)).collect()).collect(),
        program: PROGRAM.into(),
        symbols: model.libs.iter().map(|l| l.symbols).sum(),
        functions: model.funcs.len(),
        data_objects: model.datas.len() + RTTI.len() + 3 * vtables.len(),
        classes: model.classes.len(),
        vtables: vtables.len(),
        vtable_slots: vtables.iter().map(|v| v.slots.len()).sum(),
        roots: model.roots.len(),
        references: (0..spec.libs)
            .map(|k| {
                let (data, plt) = references(&model, k);
                [data.len(), plt.len()]
            })
            .collect(),
        expected_lookups: expected_lookups(&model),
        expected_output,
    };
    debug_assert_eq!(manifest.symbols, spec.symbols);
    let json = serde_json::to_vec_pretty(&manifest).expect("serializable");
    fsutil::write_atomic_nosync(&out.join(MANIFEST), &json)?;
    crate::cache::seal_tree(&out, |_| Some(crate::cache::Check::Content))?;

    // Into place: an older case there (another key, another generator, or
    // an empty directory) is moved into the stage first and goes with it.
    if let Some(m) = read_manifest(&dir, &key) {
        // Another process built the same case meanwhile.
        return Ok(m.case(&dir, true));
    }
    if dir.exists() {
        std::fs::rename(&dir, stage.path().join("old")).map_err(|e| Error::io(&dir, e))?;
    }
    match std::fs::rename(&out, &dir) {
        Ok(()) => Ok(manifest.case(&dir, false)),
        // Another process placed the same case first.
        Err(_) if read_manifest(&dir, &key).is_some() => Ok(manifest.case(&dir, true)),
        Err(e) => Err(Error::io(&dir, e)),
    }
}

/// The complete case in `dir` for `key`, if there is one.
/// Used only while every file matches the seal written with it
/// ([`crate::cache`]): a damaged case is made again.
fn read_manifest(dir: &Path, key: &str) -> Option<Manifest> {
    if !crate::cache::intact(dir, "the DDLink synthetic case") {
        return None;
    }
    let m: Manifest =
        serde_json::from_slice(&fsutil::read_input(&dir.join(MANIFEST), fsutil::MAX_BINARY).ok()?).ok()?;
    let complete = m.generator == GENERATOR_VERSION
        && m.key == key
        && dir.join(&m.program).is_file()
        && m.libs.iter().all(|l| dir.join(l).is_file());
    complete.then_some(m)
}

/// A directory build may replace: empty, or a case (of any key or version).
fn replaceable(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file() || std::fs::read_dir(dir).is_ok_and(|mut rd| rd.next().is_none())
}

/// Remove the stage directories of builds that were killed (their process
/// is gone) from `parent`.
fn remove_stale_stages(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(STAGE_MARK)).and_then(|r| r.split('.').next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `libsynthNN.so`, library k's file name and soname.
pub(crate) fn lib_file(k: usize) -> String {
    format!("libsynth{k:02}.so")
}

fn lib_stem(k: usize) -> String {
    format!("libsynth{k:02}")
}

// ---------------------------------------------------------------------------
// The model

use crate::rng::Rng;

/// The generator's helpers for the model.
trait Choose {
    fn range(&mut self, lo: usize, hi: usize) -> usize;
    fn percent(&mut self, p: usize) -> bool;
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T;
    fn odd(&mut self) -> u64;
}

impl Choose for Rng {
    /// lo..=hi.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }

    /// An odd multiplier.
    fn odd(&mut self) -> u64 {
        self.next_u64() | 1
    }
}

enum Body {
    /// `x * mul + add`
    Leaf { mul: u64, add: u64 },
    /// `callee(x ^ xor) [+ second(x)] + add`: calls through the PLT.
    Call { callee: usize, second: Option<usize>, xor: u64, add: u64 },
    /// `x * mul + data`: a read through the GOT.
    Load { data: usize, mul: u64 },
    /// `x * mul + vtable.top`: a constructor, which reads its class's vtable
    /// through the GOT (where C++ stores its address into the object).
    Vptr { class: usize, mul: u64 },
}

struct Func {
    lib: usize,
    name: String,
    body: Body,
}

struct Data {
    lib: usize,
    name: String,
    value: u64,
}

struct Vtable {
    /// The offset-to-top word (here a class constant the walk reads).
    top: u64,
    base: Option<usize>,
    slots: Vec<usize>,
}

struct Class {
    lib: usize,
    /// The nested name, `N5synth3gfx10PaintLayerE`: `_ZTV`, `_ZTI`, `_ZTS`
    /// and this are the class's data objects; it is also the typeinfo name.
    nested: String,
    vtable: Option<Vtable>,
}

#[derive(Default)]
struct Lib {
    /// DT_NEEDED among the synthetic libraries, highest first.
    deps: Vec<usize>,
    funcs: Vec<usize>,
    datas: Vec<usize>,
    classes: Vec<usize>,
    /// Polymorphic classes (candidates for bases).
    polys: Vec<usize>,
    /// Functions with a leaf body (candidates for calls).
    leaves: Vec<usize>,
    symbols: usize,
}

struct Model {
    spec: SynthSpec,
    libs: Vec<Lib>,
    funcs: Vec<Func>,
    datas: Vec<Data>,
    classes: Vec<Class>,
    /// The classes whose vtables `synth-main` holds.
    roots: Vec<usize>,
    /// The base library's two type_info vtables' class words (plain, with base).
    rtti: [u64; 2],
    main_seed: u64,
}

impl Model {
    /// The library that defines a symbol.
    fn owner(&self, sym: Sym) -> usize {
        match sym {
            Sym::Func(f) => self.funcs[f].lib,
            Sym::Data(d) => self.datas[d].lib,
            Sym::Typeinfo(c) | Sym::TypeName(c) | Sym::Vtable(c) => self.classes[c].lib,
            Sym::Rtti(_) => 0,
        }
    }
}

/// The type_info vtables of the base library, like libstdc++'s
/// `__class_type_info` and `__si_class_type_info`.
const RTTI: [&str; 2] = ["_ZTVN5synth3abi17class_type_infoE", "_ZTVN5synth3abi20si_class_type_infoE"];

const NAMESPACES: &[&str] =
    &["base", "core", "gfx", "text", "net", "media", "dom", "style", "layout", "paint", "script", "ui"];
const CLASS_HEADS: &[&str] = &[
    "Paint",
    "Layout",
    "Render",
    "Frame",
    "Style",
    "Text",
    "Font",
    "Image",
    "Layer",
    "Scroll",
    "Input",
    "Event",
    "Focus",
    "Media",
    "Audio",
    "Video",
    "Network",
    "Socket",
    "Stream",
    "Buffer",
    "Cache",
    "Storage",
    "File",
    "Task",
    "Thread",
    "Timer",
    "Script",
    "Module",
    "Resource",
    "Shader",
    "Texture",
    "Surface",
    "Display",
    "Window",
    "Document",
    "Element",
    "Selection",
    "Clipboard",
    "Accessibility",
    "Animation",
];
const CLASS_NOUNS: &[&str] = &[
    "Layer", "Box", "Node", "Item", "View", "Frame", "Block", "Span", "Cell", "Row", "Group", "Context", "State",
    "Record", "Entry", "Path", "Shape", "Region", "Range", "Queue", "Pool", "Table", "Map", "List", "Set", "Graph",
];
const CLASS_ROLES: &[&str] = &[
    "Manager",
    "Controller",
    "Observer",
    "Delegate",
    "Factory",
    "Builder",
    "Client",
    "Host",
    "Proxy",
    "Impl",
    "Handler",
    "Provider",
    "Registry",
    "Tracker",
    "Scheduler",
    "Dispatcher",
    "Resolver",
    "Painter",
    "Writer",
    "Reader",
];
const VERBS: &[&str] = &[
    "update",
    "paint",
    "layout",
    "handle",
    "notify",
    "create",
    "destroy",
    "reset",
    "flush",
    "compute",
    "resolve",
    "attach",
    "detach",
    "invalidate",
    "dispatch",
    "schedule",
    "visit",
    "measure",
    "serialize",
    "load",
    "store",
    "clone",
    "apply",
    "commit",
    "release",
    "acquire",
    "begin",
    "end",
    "set",
    "get",
    "find",
    "insert",
    "remove",
    "did",
    "will",
    "should",
    "can",
];
const OBJECTS: &[&str] = &[
    "Geometry",
    "Children",
    "Style",
    "Event",
    "Bounds",
    "Cache",
    "State",
    "Rect",
    "Size",
    "Offset",
    "Parent",
    "Owner",
    "Client",
    "Layer",
    "Frame",
    "Buffer",
    "Text",
    "Font",
    "Color",
    "Transform",
    "Opacity",
    "Visibility",
    "Focus",
    "Selection",
    "Range",
    "Index",
    "Count",
    "Length",
    "Data",
    "Value",
    "Name",
    "Id",
    "Type",
    "Flags",
    "Priority",
    "Timeout",
    "Callback",
    "Listener",
    "ScrollPosition",
    "ClipRect",
    "DirtyRegion",
];
const MEMBERS: &[&str] = &[
    "sInstances",
    "kDefaultCapacity",
    "kMaxDepth",
    "sLiveObjects",
    "kTypeId",
    "sRegistry",
    "kVersion",
    "sEnabled",
    "kFlags",
    "sTraceCategory",
];
/// Mangled parameter lists, with no substitutions so each stands alone:
/// (), (int), (bool), (unsigned long), (unsigned, unsigned), (const char*),
/// (const char*, unsigned long), (void*), (int, double), (const std::string&),
/// (std::vector<int>), (const std::vector<unsigned long>&).
const PARAMS: &[&str] = &[
    "v",
    "v",
    "v",
    "i",
    "b",
    "m",
    "jj",
    "PKc",
    "PKcm",
    "Pv",
    "id",
    "RKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
    "St6vectorIiSaIiEE",
    "RKSt6vectorImSaImEE",
];

/// `<length><name>`, a mangled source name.
fn source_name(s: &str) -> String {
    format!("{}{s}", s.len())
}

/// The mangled namespace prefix of library k: `5synth3gfx`.
fn namespace(k: usize) -> String {
    let word = NAMESPACES[k % NAMESPACES.len()];
    let ns = if k < NAMESPACES.len() { word.to_string() } else { format!("{word}{}", k / NAMESPACES.len()) };
    format!("5synth{}", source_name(&ns))
}

/// `name` if unused, else with a number that makes it unique.
fn unique(used: &mut HashSet<String>, name: String) -> String {
    let mut n = name.clone();
    let mut i = 2;
    while !used.insert(n.clone()) {
        n = format!("{name}{i}");
        i += 1;
    }
    n
}

fn generate(spec: &SynthSpec) -> Model {
    let mut rng = Rng(spec.seed ^ 0x6464_6c69_6e6b_0001);
    let n = spec.libs;
    // Each library gets the minimum plus a share of the rest, ±25 %.
    let weights: Vec<u128> = (0..n).map(|_| 75 + rng.below(51) as u128).collect();
    let total: u128 = weights.iter().sum();
    let spare = (spec.symbols - n * MIN_SYMBOLS_PER_LIB) as u128;
    let mut shares: Vec<usize> = weights.iter().map(|w| MIN_SYMBOLS_PER_LIB + (spare * w / total) as usize).collect();
    let mut i = 0;
    while shares.iter().sum::<usize>() < spec.symbols {
        shares[i % n] += 1;
        i += 1;
    }
    let mut m = Model {
        spec: *spec,
        libs: Vec::new(),
        funcs: Vec::new(),
        datas: Vec::new(),
        classes: Vec::new(),
        roots: Vec::new(),
        rtti: [rng.next_u64(), rng.next_u64()],
        main_seed: rng.next_u64(),
    };
    for (k, &share) in shares.iter().enumerate() {
        let mut deps = Vec::new();
        if k > 0 {
            deps.push(k - 1);
            for j in (1..k - 1).rev() {
                if rng.percent(35) {
                    deps.push(j);
                }
            }
            if k > 1 {
                deps.push(0);
            }
        }
        m.libs.push(Lib { deps, symbols: share, ..Lib::default() });
        generate_lib(&mut m, &mut rng, k, share);
        // A vtable inherits slots from its base's bases, which may live in
        // libraries below its dependencies: those are linked too (as a
        // real build would have to, for ld to resolve them).
        let (data, plt) = references(&m, k);
        let mut deps: std::collections::BTreeSet<usize> = m.libs[k].deps.iter().copied().collect();
        deps.extend(data.into_iter().chain(plt.into_iter().map(Sym::Func)).map(|s| m.owner(s)).filter(|&o| o != k));
        m.libs[k].deps = deps.into_iter().rev().collect();
    }
    m
}

fn generate_lib(m: &mut Model, rng: &mut Rng, k: usize, share: usize) {
    let ns = namespace(k);
    let mut left = share - if k == 0 { RTTI.len() } else { 0 };
    let mut class_names = HashSet::new();
    let mut free_names = HashSet::new();
    while left > 0 {
        if left < 8 {
            // The last few: namespace-level functions and variables.
            if rng.percent(70) {
                let base = format!("{}{}", rng.pick(VERBS), rng.pick(OBJECTS));
                let name = unique(&mut free_names, base);
                let sym = format!("_ZN{ns}{}E{}", source_name(&name), rng.pick(PARAMS));
                add_func(m, rng, k, sym, None, None);
            } else {
                let base = format!("kDefault{}", rng.pick(OBJECTS));
                let name = unique(&mut free_names, base);
                let sym = format!("_ZN{ns}{}E", source_name(&name));
                add_data(m, rng, k, sym);
            }
            left -= 1;
            continue;
        }
        let poly = rng.percent(65);
        let member = rng.percent(40);
        let fixed = 3 * poly as usize + member as usize;
        let methods = rng.range(2 + poly as usize, 12).min(left - fixed);
        generate_class(m, rng, k, &ns, &mut class_names, poly, member, methods);
        left -= fixed + methods;
    }
}

#[allow(clippy::too_many_arguments)]
fn generate_class(
    m: &mut Model,
    rng: &mut Rng,
    k: usize,
    ns: &str,
    names: &mut HashSet<String>,
    poly: bool,
    member: bool,
    methods: usize,
) {
    let sub = match rng.below(100) {
        0..25 => "8internal",
        25..35 => "6detail",
        _ => "",
    };
    let mut base_name = format!("{}{}", rng.pick(CLASS_HEADS), rng.pick(CLASS_NOUNS));
    if rng.percent(60) {
        base_name.push_str(rng.pick::<&str>(CLASS_ROLES));
    }
    let cname = unique(names, base_name);
    let prefix = format!("{ns}{sub}{}", source_name(&cname));
    let own_data = member.then(|| {
        let sym = format!("_ZN{prefix}{}E", source_name(rng.pick::<&str>(MEMBERS)));
        add_data(m, rng, k, sym)
    });
    let c = m.classes.len();
    let mut method_names = HashSet::new();
    let mut virtuals = Vec::new();
    for j in 0..methods {
        let mut ctor = None;
        let (component, params, virt) = if poly && j < 2 {
            // The virtual destructor pair.
            ((if j == 0 { "D2" } else { "D0" }).to_string(), "v", true)
        } else if j == methods - 1 && (poly || rng.percent(50)) {
            // A constructor; a polymorphic class's stores its vtable.
            if poly {
                ctor = Some(Body::Vptr { class: c, mul: rng.odd() });
            }
            ("C2".to_string(), "v", false)
        } else {
            let base = format!("{}{}", rng.pick(VERBS), rng.pick(OBJECTS));
            let name = unique(&mut method_names, base);
            (source_name(&name), *rng.pick(PARAMS), poly && rng.percent(60))
        };
        let sym = format!("_ZN{prefix}{component}E{params}");
        let f = add_func(m, rng, k, sym, own_data, ctor);
        if virt {
            virtuals.push(f);
        }
    }
    let vtable = poly.then(|| {
        let base = if rng.percent(70) { pick_base(m, rng, k) } else { None };
        let mut slots = base.map_or_else(Vec::new, |b| m.classes[b].vtable.as_ref().unwrap().slots.clone());
        let mut overridden = vec![false; slots.len()];
        for v in virtuals {
            if !slots.is_empty() && rng.percent(50) {
                let i = rng.below(slots.len());
                if !overridden[i] {
                    slots[i] = v;
                    overridden[i] = true;
                    continue;
                }
            }
            slots.push(v);
            overridden.push(true);
        }
        Vtable { top: rng.next_u64(), base, slots }
    });
    let is_root = vtable.is_some() && rng.percent(25);
    m.classes.push(Class { lib: k, nested: format!("N{prefix}E"), vtable });
    m.libs[k].classes.push(c);
    if poly {
        m.libs[k].polys.push(c);
    }
    if is_root {
        m.roots.push(c);
    }
}

/// A base class from this library or one it depends on, with a vtable that
/// is not too long already.
fn pick_base(m: &Model, rng: &mut Rng, k: usize) -> Option<usize> {
    for _ in 0..4 {
        let from = if m.libs[k].deps.is_empty() || rng.percent(50) { k } else { *rng.pick(&m.libs[k].deps) };
        if m.libs[from].polys.is_empty() {
            continue;
        }
        let c = *rng.pick(&m.libs[from].polys);
        if m.classes[c].vtable.as_ref().is_some_and(|v| v.slots.len() <= 24) {
            return Some(c);
        }
    }
    None
}

/// A library this one's code refers to: itself half the time, else one of
/// its dependencies.
fn pick_lib(m: &Model, rng: &mut Rng, k: usize) -> usize {
    if m.libs[k].deps.is_empty() || rng.percent(50) { k } else { *rng.pick(&m.libs[k].deps) }
}

/// A leaf function of this library or a dependency, to call.
fn pick_leaf(m: &Model, rng: &mut Rng, k: usize) -> Option<usize> {
    let from = pick_lib(m, rng, k);
    (!m.libs[from].leaves.is_empty()).then(|| *rng.pick(&m.libs[from].leaves))
}

fn add_func(
    m: &mut Model,
    rng: &mut Rng,
    k: usize,
    name: String,
    own_data: Option<usize>,
    body: Option<Body>,
) -> usize {
    let mut body = body;
    let r = if body.is_some() { 100 } else { rng.below(100) };
    if r < 40 {
        if let Some(first) = pick_leaf(m, rng, k) {
            let second = if rng.percent(30) { pick_leaf(m, rng, k) } else { None };
            body = Some(Body::Call { callee: first, second, xor: rng.next_u64(), add: rng.next_u64() });
        }
    } else if r < 55 {
        let data = match own_data {
            Some(d) if rng.percent(50) => Some(d),
            _ => {
                let from = pick_lib(m, rng, k);
                (!m.libs[from].datas.is_empty()).then(|| *rng.pick(&m.libs[from].datas))
            }
        };
        if let Some(data) = data {
            body = Some(Body::Load { data, mul: rng.odd() });
        }
    }
    let body = body.unwrap_or_else(|| Body::Leaf { mul: rng.odd(), add: rng.next_u64() });
    let f = m.funcs.len();
    if matches!(body, Body::Leaf { .. }) {
        m.libs[k].leaves.push(f);
    }
    m.funcs.push(Func { lib: k, name, body });
    m.libs[k].funcs.push(f);
    f
}

fn add_data(m: &mut Model, rng: &mut Rng, k: usize, name: String) -> usize {
    let d = m.datas.len();
    m.datas.push(Data { lib: k, name, value: rng.next_u64() });
    m.libs[k].datas.push(d);
    d
}

/// A symbol, for counting distinct references.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Sym {
    Func(usize),
    Data(usize),
    Typeinfo(usize),
    TypeName(usize),
    Rtti(usize),
    Vtable(usize),
}

/// The symbols each library refers to through data relocations and the
/// GOT (one lookup class), and through the PLT (the other).
fn references(m: &Model, k: usize) -> (HashSet<Sym>, HashSet<usize>) {
    let mut data = HashSet::new();
    let mut plt = HashSet::new();
    for &c in &m.libs[k].classes {
        if let Some(vt) = &m.classes[c].vtable {
            data.insert(Sym::Typeinfo(c));
            data.extend(vt.slots.iter().map(|&f| Sym::Func(f)));
            data.insert(Sym::TypeName(c));
            data.insert(Sym::Rtti(vt.base.is_some() as usize));
            if let Some(b) = vt.base {
                data.insert(Sym::Typeinfo(b));
            }
        }
    }
    for &f in &m.libs[k].funcs {
        match m.funcs[f].body {
            Body::Call { callee, second, .. } => {
                plt.insert(callee);
                plt.extend(second);
            }
            Body::Load { data: d, .. } => {
                data.insert(Sym::Data(d));
            }
            Body::Vptr { class, .. } => {
                data.insert(Sym::Vtable(class));
            }
            Body::Leaf { .. } => {}
        }
    }
    (data, plt)
}

fn expected_lookups(m: &Model) -> usize {
    let libs: usize = (0..m.libs.len())
        .map(|k| {
            let (data, plt) = references(m, k);
            data.len() + plt.len() + LIB_CRT_LOOKUPS
        })
        .sum();
    libs + m.roots.len() + MAIN_LIBC_LOOKUPS + SYSTEM_LOOKUPS
}

// ---------------------------------------------------------------------------
// What the program prints, computed

fn eval(m: &Model, f: usize, x: u64) -> u64 {
    match m.funcs[f].body {
        Body::Leaf { mul, add } => x.wrapping_mul(mul).wrapping_add(add),
        Body::Call { callee, second, xor, add } => {
            let y = eval(m, callee, x ^ xor).wrapping_add(add);
            second.map_or(y, |s| y.wrapping_add(eval(m, s, x)))
        }
        Body::Load { data, mul } => x.wrapping_mul(mul).wrapping_add(m.datas[data].value),
        Body::Vptr { class, mul } => x.wrapping_mul(mul).wrapping_add(vtable(m, class).top),
    }
}

fn mix(h: u64, v: u64) -> u64 {
    let h = (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

/// FNV-1a, 64 bits.
fn name_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn vtable(m: &Model, c: usize) -> &Vtable {
    m.classes[c].vtable.as_ref().expect("a polymorphic class")
}

fn expected_output(m: &Model) -> String {
    let mut h = m.main_seed;
    let (mut slots, mut typeinfos) = (0, 0);
    for &c in &m.roots {
        let vt = vtable(m, c);
        h = mix(h, vt.top);
        let mut t = Some(c);
        while let Some(ti) = t {
            let base = vtable(m, ti).base;
            h = mix(h, name_hash(&m.classes[ti].nested));
            h = mix(h, m.rtti[base.is_some() as usize]);
            typeinfos += 1;
            t = base;
        }
        slots += vt.slots.len();
    }
    let calls = if m.roots.is_empty() { 0 } else { CALLS };
    for _ in 0..calls {
        let vt = vtable(m, m.roots[((h >> 7) % m.roots.len() as u64) as usize]);
        let f = vt.slots[((h >> 35) % vt.slots.len() as u64) as usize];
        h = mix(h, eval(m, f, h));
    }
    format!(
        "checksum {h:016x}\nlibraries {} symbols {} vtables {} slots {slots} typeinfos {typeinfos} calls {calls}\n",
        m.spec.libs,
        m.spec.symbols,
        m.roots.len()
    )
}

// ---------------------------------------------------------------------------
// C sources

const PRELUDE: &str = "\
/* Generated by bootlink (ddlink synth): C++-shaped symbols in C. */
typedef unsigned long (*synth_fn)(unsigned long);
struct synth_ti { const void *vptr; const char *name; const struct synth_ti *base; };
struct synth_vtbl { unsigned long top; const struct synth_ti *ti; synth_fn m[]; };
";

fn declare(m: &Model, s: &mut String, sym: Sym) {
    match sym {
        Sym::Func(f) => writeln!(s, "unsigned long {}(unsigned long);", m.funcs[f].name),
        Sym::Data(d) => writeln!(s, "extern unsigned long {};", m.datas[d].name),
        Sym::Typeinfo(c) => writeln!(s, "extern const struct synth_ti _ZTI{};", m.classes[c].nested),
        Sym::TypeName(c) => writeln!(s, "extern const char _ZTS{}[];", m.classes[c].nested),
        Sym::Rtti(i) => writeln!(s, "extern const unsigned long {}[4];", RTTI[i]),
        Sym::Vtable(c) => writeln!(s, "extern const struct synth_vtbl _ZTV{};", m.classes[c].nested),
    }
    .expect("write to a String");
}

fn lib_source(m: &Model, k: usize) -> String {
    let lib = &m.libs[k];
    let mut s = String::with_capacity(lib.symbols * 200);
    s.push_str(PRELUDE);
    // Declarations: what it uses of other libraries, then its own.
    let (data, plt) = references(m, k);
    let mut external: Vec<Sym> =
        data.into_iter().chain(plt.into_iter().map(Sym::Func)).filter(|&sym| m.owner(sym) != k).collect();
    external.sort_by_key(|&sym| match sym {
        Sym::Func(i) => (0, i),
        Sym::Data(i) => (1, i),
        Sym::Typeinfo(i) => (2, i),
        Sym::TypeName(i) => (3, i),
        Sym::Rtti(i) => (4, i),
        Sym::Vtable(i) => (5, i),
    });
    external.dedup();
    for sym in external {
        declare(m, &mut s, sym);
    }
    for &f in &lib.funcs {
        declare(m, &mut s, Sym::Func(f));
    }
    for &c in &lib.classes {
        if m.classes[c].vtable.is_some() {
            declare(m, &mut s, Sym::Typeinfo(c));
            declare(m, &mut s, Sym::Vtable(c));
        }
    }
    let w = &mut s;
    if k == 0 {
        for (i, name) in RTTI.iter().enumerate() {
            let v = m.rtti[i];
            writeln!(w, "const unsigned long {name}[4] = {{ 0, 0, {v:#x}UL, {:#x}UL }};", !v).unwrap();
        }
    }
    for &d in &lib.datas {
        writeln!(w, "unsigned long {} = {:#x}UL;", m.datas[d].name, m.datas[d].value).unwrap();
    }
    for &f in &lib.funcs {
        let func = &m.funcs[f];
        match func.body {
            Body::Leaf { mul, add } => {
                writeln!(w, "unsigned long {}(unsigned long x) {{ return x * {mul:#x}UL + {add:#x}UL; }}", func.name)
            }
            Body::Call { callee, second, xor, add } => {
                write!(w, "unsigned long {}(unsigned long x) {{ return {}(x ^ {xor:#x}UL) + {add:#x}UL", func.name, m.funcs[callee].name).unwrap();
                if let Some(s) = second {
                    write!(w, " + {}(x)", m.funcs[s].name).unwrap();
                }
                writeln!(w, "; }}")
            }
            Body::Load { data, mul } => writeln!(
                w,
                "unsigned long {}(unsigned long x) {{ return x * {mul:#x}UL + {}; }}",
                func.name, m.datas[data].name
            ),
            // Through a volatile pointer: gcc would fold the constant, and
            // a C++ constructor takes the vtable's address from the GOT.
            Body::Vptr { class, mul } => writeln!(
                w,
                "unsigned long {}(unsigned long x) {{ return x * {mul:#x}UL + *(const volatile unsigned long *)&_ZTV{}.top; }}",
                func.name, m.classes[class].nested
            ),
        }
        .unwrap();
    }
    for &c in &lib.classes {
        let class = &m.classes[c];
        let Some(vt) = &class.vtable else { continue };
        let n = &class.nested;
        writeln!(w, "const char _ZTS{n}[] = \"{n}\";").unwrap();
        let base = vt.base.map_or_else(|| "0".to_string(), |b| format!("&_ZTI{}", m.classes[b].nested));
        let rtti = RTTI[vt.base.is_some() as usize];
        writeln!(w, "const struct synth_ti _ZTI{n} = {{ &{rtti}[2], _ZTS{n}, {base} }};").unwrap();
        write!(w, "const struct synth_vtbl _ZTV{n} = {{ {:#x}UL, &_ZTI{n}, {{", vt.top).unwrap();
        for (i, &f) in vt.slots.iter().enumerate() {
            write!(w, "{}{}", if i == 0 { " " } else { ", " }, m.funcs[f].name).unwrap();
        }
        writeln!(w, " }} }};").unwrap();
    }
    s
}

fn main_source(m: &Model) -> String {
    let mut s = String::from("#include <stdio.h>\n");
    s.push_str(PRELUDE);
    let w = &mut s;
    writeln!(w, "#define NROOTS {}UL\n#define CALLS {CALLS}UL", m.roots.len()).unwrap();
    for &c in &m.roots {
        writeln!(w, "extern const struct synth_vtbl _ZTV{};", m.classes[c].nested).unwrap();
    }
    if !m.roots.is_empty() {
        w.push_str("static const struct synth_vtbl *const roots[] = {\n");
        for &c in &m.roots {
            writeln!(w, "  &_ZTV{},", m.classes[c].nested).unwrap();
        }
        w.push_str("};\nstatic const unsigned short nslots[] = {\n");
        for &c in &m.roots {
            writeln!(w, "  {},", vtable(m, c).slots.len()).unwrap();
        }
        w.push_str("};\n");
    }
    w.push_str(
        "static unsigned long mix(unsigned long h, unsigned long v)
{
  h = (h ^ v) * 0x9e3779b97f4a7c15UL;
  return h ^ (h >> 29);
}

static unsigned long name_hash(const char *s)
{
  unsigned long h = 0xcbf29ce484222325UL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3UL;
  return h;
}

int main(void)
{
",
    );
    writeln!(w, "  unsigned long h = {:#x}UL, slots = 0, typeinfos = 0, calls = 0;", m.main_seed).unwrap();
    if !m.roots.is_empty() {
        w.push_str(
            "  for (unsigned long i = 0; i < NROOTS; i++) {
    h = mix(h, roots[i]->top);
    for (const struct synth_ti *t = roots[i]->ti; t; t = t->base) {
      h = mix(h, name_hash(t->name));
      h = mix(h, *(const unsigned long *)t->vptr);
      typeinfos++;
    }
    slots += nslots[i];
  }
  for (; calls < CALLS; calls++) {
    const struct synth_vtbl *v = roots[(h >> 7) % NROOTS];
    unsigned long s = (h >> 35) % nslots[(h >> 7) % NROOTS];
    h = mix(h, v->m[s](h));
  }
",
        );
    }
    writeln!(
        w,
        "  printf(\"checksum %016lx\\n\", h);
  printf(\"libraries {} symbols {} vtables %lu slots %lu typeinfos %lu calls %lu\\n\", NROOTS, slots, typeinfos, calls);
  return 0;
}}",
        m.spec.libs, m.spec.symbols
    )
    .unwrap();
    s
}

// ---------------------------------------------------------------------------
// Building

fn gcc_version() -> Result<String> {
    let out = hosttool::run(Command::new("gcc").arg("--version"), "the DDLink synthetic case", "gcc")?;
    Ok(out.lines().next().unwrap_or("").trim().to_string())
}

/// Run gcc in `cwd`; a failure names `file` and shows gcc's message.
fn gcc(args: &[OsString], cwd: &Path, file: &Path, what: &str) -> Result<()> {
    let out = Command::new("gcc")
        .args(args)
        .current_dir(cwd)
        .output()
        .map_err(|e| hosttool::spawn_error("gcc", "the DDLink synthetic case", "gcc", e).at(file))?;
    if out.status.success() {
        return Ok(());
    }
    const SHOWN: usize = 8;
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut msg = format!("gcc failed {what} ({}):", out.status);
    for l in lines.iter().take(SHOWN) {
        msg.push_str("\n  ");
        msg.push_str(l);
    }
    if lines.len() > SHOWN {
        msg.push_str(&format!("\n  ({} more lines)", lines.len() - SHOWN));
    }
    Err(Error::file(Kind::Tool, file, msg))
}

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// Write and compile every source (the libraries and the program), as many
/// at a time as there are cores.
fn compile_all(m: &Model, work: &Path) -> Result<()> {
    let jobs = m.libs.len() + 1;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let errors = Mutex::new(Vec::new());
    let progress = Progress::new("ddlink synth: compiling", jobs);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= jobs {
                        break;
                    }
                    match compile_one(m, work, i) {
                        Ok(()) => progress.inc(),
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            errors.lock().unwrap().push((i, e));
                        }
                    }
                }
            });
        }
    });
    drop(progress);
    let mut errors = errors.into_inner().unwrap();
    errors.sort_by_key(|(i, _)| *i);
    match errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Job i: library i, or the program when i is the number of libraries.
fn compile_one(m: &Model, work: &Path, i: usize) -> Result<()> {
    let (stem, source, pic) = if i < m.libs.len() {
        (lib_stem(i), lib_source(m, i), "-fPIC")
    } else {
        (PROGRAM.to_string(), main_source(m), "-fPIE")
    };
    let c = format!("{stem}.c");
    let path = work.join(&c);
    std::fs::write(&path, source).map_err(|e| Error::io(&path, e))?;
    let seed = format!("-frandom-seed={stem}");
    let o = format!("{stem}.o");
    gcc(&args(&["-c", "-O1", "-g0", pic, &seed, "-o", &o, &c]), work, &path, "compiling it")
}

/// The link options every object gets.
const LINK_FLAGS: &[&str] = &[
    "-Wl,--no-as-needed",
    "-Wl,--hash-style=gnu",
    "-Wl,--build-id",
    "-Wl,--enable-new-dtags",
    "-Wl,-rpath,$ORIGIN",
    "-Wl,-z,defs",
];

/// Link the libraries in dependency order (each against the ones it
/// needs), then the program against all of them, top first.
fn link_all(m: &Model, work: &Path, out: &Path) -> Result<()> {
    let progress = Progress::new("ddlink synth: linking", m.libs.len() + 1);
    let libdir = format!("-L{}", out.display());
    for (k, lib) in m.libs.iter().enumerate() {
        let so = out.join(lib_file(k));
        let mut a = args(&["-shared", "-o"]);
        a.push(so.clone().into());
        a.extend(args(&[&format!("{}.o", lib_stem(k)), &format!("-Wl,-soname,{}", lib_file(k))]));
        a.extend(args(LINK_FLAGS));
        a.push(libdir.clone().into());
        a.extend(lib.deps.iter().map(|&d| OsString::from(format!("-lsynth{d:02}"))));
        gcc(&a, work, &so, "linking it")?;
        progress.inc();
    }
    let program = out.join(PROGRAM);
    let mut a = args(&["-o"]);
    a.push(program.clone().into());
    a.push(format!("{PROGRAM}.o").into());
    a.extend(args(LINK_FLAGS));
    a.push(libdir.into());
    a.extend((0..m.libs.len()).rev().map(|k| OsString::from(format!("-lsynth{k:02}"))));
    gcc(&a, work, &program, "linking it")?;
    progress.inc();
    Ok(())
}

/// Run the program as it is (no loader settings from the environment) and
/// compare what it prints with the generator's prediction.
fn check_program(program: &Path, want: &str) -> Result<()> {
    let mut cmd = Command::new(program);
    for v in ["LD_BIND_NOW", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_DEBUG", "LD_DEBUG_OUTPUT", "LD_AUDIT", "LD_PROFILE"] {
        cmd.env_remove(v);
    }
    let out = cmd.output().map_err(|e| Error::io(program, e))?;
    let got = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || got != want {
        return Err(Error::file(
            Kind::Internal,
            program,
            format!(
                "the generated program ({}) printed {got:?}, the generator predicted {want:?}; stderr: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SynthSpec {
        SynthSpec { libs: 4, symbols: 2_000, seed: 7 }
    }

    #[test]
    fn the_symbols_add_up_and_are_unique() {
        let m = generate(&small());
        assert_eq!(m.libs.iter().map(|l| l.symbols).sum::<usize>(), 2_000);
        for (k, lib) in m.libs.iter().enumerate() {
            let vtables = lib.classes.iter().filter(|&&c| m.classes[c].vtable.is_some()).count();
            let rtti = if k == 0 { RTTI.len() } else { 0 };
            assert_eq!(lib.funcs.len() + lib.datas.len() + 3 * vtables + rtti, lib.symbols, "library {k}");
        }
        let mut names = HashSet::new();
        let all = m.funcs.iter().map(|f| f.name.clone()).chain(m.datas.iter().map(|d| d.name.clone())).chain(
            m.classes
                .iter()
                .filter(|c| c.vtable.is_some())
                .flat_map(|c| ["_ZTV", "_ZTI", "_ZTS"].map(|p| format!("{p}{}", c.nested))),
        );
        for n in all {
            assert!(names.insert(n.clone()), "{n} twice");
        }
        assert!(!m.roots.is_empty());
    }

    #[test]
    fn the_same_spec_generates_the_same_sources() {
        let (a, b) = (generate(&small()), generate(&small()));
        assert_eq!(lib_source(&a, 3), lib_source(&b, 3));
        assert_eq!(main_source(&a), main_source(&b));
        let c = generate(&SynthSpec { seed: 8, ..small() });
        assert_ne!(lib_source(&a, 3), lib_source(&c, 3));
    }

    #[test]
    fn references_go_down_the_dag_only() {
        let m = generate(&small());
        for (k, lib) in m.libs.iter().enumerate() {
            let (data, plt) = references(&m, k);
            for s in data.into_iter().chain(plt.into_iter().map(Sym::Func)) {
                let o = m.owner(s);
                assert!(o == k || lib.deps.contains(&o), "library {k} refers to library {o}");
            }
            assert!(lib.deps.iter().all(|&d| d < k), "{:?}", lib.deps);
            assert!(lib.deps.windows(2).all(|w| w[0] > w[1]), "{:?}", lib.deps);
            if k > 0 {
                assert!(lib.deps.contains(&(k - 1)) && lib.deps.contains(&0), "{:?}", lib.deps);
            }
        }
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        for spec in [
            SynthSpec { libs: 0, ..small() },
            SynthSpec { libs: MAX_LIBS + 1, symbols: 10_000, seed: 0 },
            SynthSpec { libs: 4, symbols: 4 * MIN_SYMBOLS_PER_LIB - 1, seed: 0 },
            SynthSpec { libs: 4, symbols: MAX_SYMBOLS + 1, seed: 0 },
        ] {
            assert_eq!(spec.check().unwrap_err().kind, Kind::Usage, "{spec:?}");
        }
        SynthSpec::default().check().unwrap();
    }

    #[test]
    fn the_key_covers_spec_and_compiler() {
        let s = SynthSpec::default();
        assert_eq!(s.key("gcc 12").len(), 32);
        assert_ne!(s.key("gcc 12"), s.key("gcc 13"));
        assert_ne!(s.key("gcc 12"), SynthSpec { seed: 1, ..s }.key("gcc 12"));
    }

    #[test]
    fn a_gcc_failure_names_the_file_and_shows_gccs_message() {
        if !hosttool::exists("gcc") {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("broken.c");
        std::fs::write(&src, "int f(void) { return undeclared_thing; }\n").unwrap();
        let e = gcc(&args(&["-c", "broken.c"]), t.path(), &src, "compiling it").unwrap_err();
        assert_eq!(e.kind, Kind::Tool);
        let text = e.to_string();
        assert!(text.starts_with(&src.display().to_string()), "{text}");
        assert!(text.contains("undeclared_thing"), "{text}");
    }
}
