//! `bootlink kernel build`: Debian's kernel source of a kernel [`Line`]
//! (6.1, 6.12) with that line's patch series and lab config, built once per
//! (source version, config, series, signing key) and kept in the cache.
//!
//! The pieces: [`series`] (the quilt-style patch list, shared with the
//! glibc build and kept in the ground layer), [`source`] (the
//! Debian source package, unpacked once, the series applied and switched),
//! [`kconfig`] (the config fragment merged onto `tinyconfig`, and checked),
//! [`key`] (the module signing key), [`make`] (running kbuild with ccache),
//! [`lock`] (one lock per kernel line and per object tree).
//!
//! A build's output is a directory under `<cache>/kernels/build-<key>/`:
//! `vmlinux` (boots through PVH), `bzImage`, `System.map`, `Module.symvers`,
//! `config-<release>`, the installed and signed modules under
//! `lib/modules/<release>/`, the signing key and certificate, and
//! `build.json` (what went in). It is renamed into place when complete, so
//! it is either whole or absent. The kernel's object directory is kept
//! (one per config) so a changed patch rebuilds only what it touches.

pub mod kconfig;
pub mod key;
pub mod line;
pub mod lock;
pub mod make;
pub mod source;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Kind, Result};
use crate::{fsutil, hosttool, progress};

pub use crate::series::{self, Series};
pub use kconfig::Fragment;
pub use line::Line;

/// Bumped when the recipe changes in a way that changes the output.
/// Changes when what the build does changes (e.g. the symbol hash tables'
/// format, written into vmlinux by the KSYMHASH hook; build 3: the
/// banner's build number pinned to 1, make.rs).
const RECIPE: &str = "bootlink kernel build 3, symhash tables v1";
/// Where the signing key sits in the object tree (CONFIG_MODULE_SIG_KEY).
const KEY_IN_OBJ: &str = "certs/bootlink-signing.pem";

#[derive(Debug, Clone)]
pub struct Options {
    /// The kernel line: which Debian source package is built.
    pub line: Line,
    /// The architecture built for: x86-64 (the host's), or arm64 cross-built
    /// with `aarch64-linux-gnu-`. Patches marked for other architectures
    /// (`arch:x86` in a series file) are left out.
    pub arch: crate::fetch::Arch,
    /// The directory with the `series` file and its patches.
    pub series: PathBuf,
    /// A second series applied after `series`: the lab-only patches
    /// (`kernel/6.1/lab-patches`), none when `None`.
    pub lab_series: Option<PathBuf>,
    /// Where `.config` starts from: tinyconfig (the lab's kernel), or a
    /// whole config (a distribution's, a user's own).
    pub base: ConfigBase,
    /// The config fragment merged onto the base: the lab's fragment on
    /// tinyconfig, the series' own options on a whole config.
    pub config: PathBuf,
    /// Build flavours (`kernel/<line>/configs/flavours/<name>.config`), in
    /// order, merged over [`Options::config`]: each a build of its own.
    pub flavours: Vec<String>,
    /// Build and install the modules too (a whole config's build may be
    /// vmlinux and bzImage alone, for the distribution's own modules).
    pub modules: bool,
    /// `KERNELRELEASE` for make (a distribution's release string, so its
    /// module tree's directory and vermagic are the kernel's), or kbuild's own.
    pub release: Option<String>,
    /// make -j.
    pub jobs: usize,
    /// The object tree must hold this build (for external modules): a
    /// cached build whose tree another build has used since is made again.
    pub tree: bool,
    /// Only look in the cache: a build that is not there is an error,
    /// nothing is built (`make demo` asks before it offers the patched kernel).
    pub cached_only: bool,
}

impl Options {
    /// Build from the whole config `file` with the line's series options
    /// (`kernel/<line>/configs/series.config`) instead of the lab's.
    pub fn whole_config(&mut self, file: PathBuf) {
        self.base = ConfigBase::Whole(file);
        self.config = self.line.series_config(crate::fsutil::source_tree());
    }

    /// Build from the line's Debian kernel's own config and release (its
    /// reference package on 6.1, the newest of the line otherwise), the
    /// image alone: Debian's own modules load into it
    /// (`kernel build --config debian`).
    pub fn debian_config(&mut self) -> Result<()> {
        let debian = crate::fetch::fetch(&self.line.debian_request())?;
        self.whole_config(debian.config);
        self.release = Some(debian.release);
        self.modules = false;
        Ok(())
    }

    /// The lab-only series (`kernel/<line>/lab-patches`: the lab's boot
    /// landmarks and self-checks) applied after the upstreamable one. The
    /// lab asks for it; a kernel to ship does not (one of its patches says
    /// it is not safe to ship).
    pub fn with_lab_series(mut self) -> Options {
        self.lab_series = Some(self.line.lab_series(crate::fsutil::source_tree()));
        self
    }

    /// [`Options::for_line`] of the default line (6.1).
    pub fn defaults() -> Options {
        Options::for_line(Line::default())
    }

    /// The repository's `kernel/<line>/patches` (the upstreamable series
    /// alone: the lab-only one is [`Options::with_lab_series`]) and
    /// `kernel/<line>/configs/lab.config`, `jobs` = the number of CPUs.
    pub fn for_line(line: Line) -> Options {
        Options::for_line_arch(line, crate::fetch::Arch::Amd64)
    }

    /// [`Options::for_line`] for `arch`: the lab config is
    /// `kernel/<line>/configs/lab-<arch>.config` on arm64.
    pub fn for_line_arch(line: Line, arch: crate::fetch::Arch) -> Options {
        let checkout = crate::fsutil::source_tree();
        Options {
            line,
            arch,
            series: line.series(checkout),
            lab_series: None,
            base: ConfigBase::Tiny,
            config: line.lab_config_for(checkout, arch),
            flavours: Vec::new(),
            modules: true,
            release: None,
            jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
            tree: false,
            cached_only: false,
        }
    }
}

/// Where a build's `.config` starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigBase {
    /// `make tinyconfig`, then [`Options::config`] (the lab's fragment).
    Tiny,
    /// A whole `.config` (a distribution's, or a user's own), then
    /// [`Options::config`] (the series' own options,
    /// `kernel/<line>/configs/series.config`), nothing else: the config is
    /// built as its owner ships it, debug information and BTF included (the
    /// owner's modules' BTF is loaded as by their own kernel).
    Whole(PathBuf),
}

impl ConfigBase {
    /// The name build.json gives it: `tinyconfig`, or the file.
    pub fn describe(&self) -> String {
        match self {
            ConfigBase::Tiny => "tinyconfig".into(),
            ConfigBase::Whole(p) => p.display().to_string(),
        }
    }
}

/// A finished build, what `bootlink kernel build` prints (`--json`: this,
/// as the build.json beside its vmlinux holds it): every path in its
/// output directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub dir: PathBuf,
    /// The kernel line (`6.1`, `6.12`).
    #[serde(default = "default_line")]
    pub line: String,
    /// The architecture (said only when not amd64, the default).
    #[serde(default, skip_serializing_if = "crate::fetch::Arch::is_amd64")]
    pub arch: crate::fetch::Arch,
    pub release: String,
    pub vmlinux: PathBuf,
    /// The boot image: `bzImage` on x86-64, `Image` (arch/arm64/boot/Image,
    /// what QEMU's `-kernel` boots) on arm64.
    pub bzimage: PathBuf,
    pub system_map: PathBuf,
    pub module_symvers: PathBuf,
    pub config: PathBuf,
    /// `lib/modules/<release>`; none when only the image was built.
    pub modules: Option<PathBuf>,
    pub signing_key: PathBuf,
    pub signing_cert: PathBuf,
    /// The cache key (hex).
    pub key: String,
    pub source_package: String,
    pub source_version: String,
    /// The patches applied, in order.
    pub patches: Vec<String>,
    /// The patches the series' `arch:` marks left out for this architecture.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    pub config_fragment: PathBuf,
    /// The flavours merged over it (`sealed`, `lz4`...), none for the lab's
    /// own build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavours: Vec<String>,
    /// What `.config` started from: `tinyconfig` or a whole config's file.
    #[serde(default = "tinyconfig")]
    pub config_base: String,
    /// Seconds this call took.
    #[serde(default)]
    pub seconds: f64,
    /// Found in the cache (nothing was built).
    #[serde(default)]
    pub cached: bool,
    /// The object tree it was built in (shared by builds of one config):
    /// `make -C <tree> M=<dir> modules` builds external modules for it
    /// while `<tree>/bootlink-key` names this build.
    #[serde(default)]
    pub tree: PathBuf,
}

impl Report {
    /// What the build's bytes are, apart from its key: vmlinux's GNU build
    /// ID (hex), which the linker computes over the image's contents. What
    /// is made from a build (a distribution kernel's directory, a system's
    /// kernel package) is keyed by it too, so a build stored again under
    /// the same key with other bytes (a tool that does not build
    /// reproducibly) gets those made again instead of pairing old modules
    /// with a new image.
    pub fn content_id(&self) -> Result<String> {
        content_id(&self.vmlinux)
    }
}

/// vmlinux's GNU build ID in hex; an error naming the file when it has none.
pub fn content_id(vmlinux: &Path) -> Result<String> {
    let data = fsutil::map_file(vmlinux)?;
    let elf = crate::elf::Elf::parse_for(&data, crate::elf::Want::Executable, crate::elf::ANALYSED_MACHINES)
        .map_err(|e| e.at(vmlinux))?;
    match elf.build_id().map_err(|e| e.at(vmlinux))? {
        Some(id) if !id.is_empty() => Ok(hex(id)),
        _ => Err(Error::file(
            Kind::Format,
            vmlinux,
            "no GNU build ID (NT_GNU_BUILD_ID): the linker was not asked for one",
        )),
    }
}

impl crate::report::Report for Report {
    /// What `bootlink kernel build` prints: the release, how it was got,
    /// and its paths.
    fn render(&self) -> String {
        let how = if self.cached { "cached" } else { "built" };
        let skipped = if self.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} left out for {}", self.skipped.len(), self.arch.kernel())
        };
        let image = if self.arch.is_amd64() { "bzImage" } else { "Image  " };
        let flavours =
            if self.flavours.is_empty() { String::new() } else { format!(", flavour {}", self.flavours.join("+")) };
        format!(
            "kernel    {} ({how} in {:.1} s; {} {}, {} patch(es){skipped}{flavours})\n\
             vmlinux   {}\n{image}   {}\nconfig    {}\nmodules   {}\nkey       {} (certificate {})\n",
            self.release,
            self.seconds,
            self.source_package,
            self.source_version,
            self.patches.len(),
            self.vmlinux.display(),
            self.bzimage.display(),
            self.config.display(),
            self.modules.as_ref().map_or("(not built: the image alone)".into(), |m| m.display().to_string()),
            self.signing_key.display(),
            self.signing_cert.display()
        )
    }
}

/// The `bootlink kernel build` output `vmlinux` lies in, read from the
/// build.json beside it, with the object tree it was built in (whether
/// the tree holds it now is [`with_tree_of`]'s to make sure). A usage
/// error when there is none.
pub(crate) fn cached_build_of(vmlinux: &Path) -> Result<Report> {
    let json = vmlinux.parent().unwrap_or(Path::new(".")).join("build.json");
    let no_tree = || {
        Error::file(
            Kind::Usage,
            vmlinux,
            "--bzimage needs the kernel's object tree: give --tree (`bootlink kernel build --json` prints it)",
        )
    };
    let text = std::fs::read(&json).map_err(|_| no_tree())?;
    let built: Report = serde_json::from_slice(&text).map_err(|e| Error::json(&json, e))?;
    if built.tree.as_os_str().is_empty() {
        return Err(no_tree());
    }
    Ok(built)
}

/// A flavour's `# bootlink-make: NAME=PROGRAM` lines: make's variable NAME
/// set to a program of the checkout's kernel/tools/ (the `none` flavour:
/// KGZIP=gzip-stored). Anything else on such a line is refused.
fn flavour_make_vars(text: &str, file: &Path, checkout: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(v) = line.trim().strip_prefix("# bootlink-make:") else { continue };
        let bad = |why: &str| Error::file(Kind::Usage, file, format!("{line:?}: {why}"));
        let (var, tool) = v.trim().split_once('=').ok_or_else(|| bad("give NAME=PROGRAM"))?;
        if var.is_empty() || !var.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
            return Err(bad("a make variable's name is capitals, digits and _"));
        }
        if tool.is_empty()
            || !tool.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            || tool.starts_with('.')
        {
            return Err(bad("PROGRAM is a file name of kernel/tools/"));
        }
        let path = checkout.join("kernel/tools").join(tool);
        if !path.is_file() {
            return Err(Error::file(Kind::Usage, &path, format!("{line:?} in {}: no such program", file.display())));
        }
        out.push((var.to_string(), path));
    }
    Ok(out)
}

/// Does a flavour ask for an object tree of its own (a line
/// `# bootlink-tree: own`, for options that change a header nearly every
/// object includes, such as CONFIG_RANDOMIZE_BASE)? Sharing the
/// unflavoured tree would rebuild the whole kernel on every switch.
fn wants_own_tree(text: &str, file: &Path) -> Result<bool> {
    let mut own = false;
    for line in text.lines() {
        let Some(v) = line.trim().strip_prefix("# bootlink-tree:") else { continue };
        if v.trim() != "own" {
            return Err(Error::file(
                Kind::Usage,
                file,
                format!("{line:?}: the only tree a flavour can ask for is `own`"),
            ));
        }
        own = true;
    }
    Ok(own)
}

/// Whether `built` has patches of its line's lab-only series.
fn built_with_lab_series(built: &Report) -> bool {
    let Some(line) = Line::parse(&built.line).ok() else { return false };
    let dir = line.lab_series(crate::fsutil::source_tree());
    let Ok(lab) = Series::read(&dir) else { return false };
    // Stacked after the product's series, its patches are named
    // `<its directory>/<patch>` ([`Series::read_stacked`]).
    let prefix = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    lab.patches.iter().any(|p| built.patches.contains(&format!("{prefix}/{}", p.name)))
}

/// The object tree of `built` holds that build: flavours share their
/// unflavoured build's tree (unless one has a tree of its own), and two
/// that differ only in the bzImage's compressor have the same vmlinux, so
/// only the key tells whose boot image the tree's recorded commands would
/// make.
fn tree_holds(built: &Report) -> Result<()> {
    if holds(&built.tree, &built.key) {
        return Ok(());
    }
    let held = std::fs::read_to_string(built.tree.join(TREE_KEY)).unwrap_or_default();
    let held =
        if held == built.key { format!("{held}, but its source has another series applied since") } else { held };
    let flavours: String = built.flavours.iter().map(|f| format!(" --flavour {f}")).collect();
    let line = if built.line == Line::default().name { String::new() } else { format!(" --line {}", built.line) };
    let lab = if built_with_lab_series(built) { " --lab" } else { "" };
    Err(Error::file(
        Kind::Usage,
        &built.tree,
        format!(
            "the object tree does not hold the kernel in {} (it holds {}): `bootlink kernel build --tree{lab}{line}{flavours}` makes it hold that one again",
            built.dir.display(),
            if held.is_empty() { "no finished build".to_string() } else { format!("another build ({held})") },
        ),
    ))
}

/// The file in the object tree naming the build it holds.
const TREE_KEY: &str = "bootlink-key";
/// The file in the object tree naming the patches its source held when
/// the build finished ([`source::applied_state`]).
const TREE_SOURCE: &str = "bootlink-source";

/// The object tree `obj` holds the build `key`: its bootlink-key names it
/// and its source still has that build's patches applied.
fn holds(obj: &Path, key: &str) -> bool {
    std::fs::read_to_string(obj.join(TREE_KEY)).is_ok_and(|k| k == key) && source_holds(obj)
}

/// The object tree's source (its `source` link) still has the patches
/// applied that it had when the tree's build finished.
fn source_holds(obj: &Path) -> bool {
    let Ok(recorded) = std::fs::read_to_string(obj.join(TREE_SOURCE)) else { return false };
    std::fs::canonicalize(obj.join("source"))
        .ok()
        .and_then(|src| source::applied_state(&src).ok())
        .is_some_and(|now| now == recorded)
}

use crate::fsutil::hex;

/// The cache key: recipe, source version, config fragment, the patches'
/// diffs in order (not their messages or file names: a reworded message, a
/// renamed file or a patch moved between the two series with the same diff
/// makes no new build) and the signing certificate; and the architecture
/// when it is not x86-64 (so an x86 build's key is what it was before
/// bootlink built for arm64).
pub(crate) fn cache_key(
    arch: crate::fetch::Arch,
    version: &str,
    fragment: &[u8],
    series: &Series,
    cert: &[u8],
    serial_btf: bool,
) -> String {
    let mut h = crate::series::KeyHash::new();
    h.field("recipe", RECIPE.as_bytes());
    // BTF encoded without pahole's -j (make::serial_pahole_flags): another
    // kernel than the one encoded in parallel, so another key; builds
    // without BTF (the lab's configs) keep theirs.
    if serial_btf {
        h.field("btf", b"serial");
    }
    if !arch.is_amd64() {
        h.field("arch", arch.kernel().as_bytes());
    }
    h.field("source", version.as_bytes());
    h.field("config", fragment);
    for p in &series.patches {
        h.field("diff", p.diff());
    }
    h.field("cert", cert);
    h.finish()
}

fn tinyconfig() -> String {
    "tinyconfig".into()
}

fn default_line() -> String {
    Line::default().name.to_string()
}

/// Build (or find in the cache) the kernel.
pub fn run(opts: &Options) -> Result<Report> {
    run_locked(opts).map(|(b, _)| b)
}

/// [`run`], and with [`Options::tree`] the build's locks still held (the
/// tree holds the build until they are dropped).
fn run_locked(opts: &Options) -> Result<(Report, Option<lock::Held>)> {
    crate::buildlog::timed(
        || {
            format!(
                "kernel {} {}{}{}",
                opts.line,
                opts.arch.debian(),
                if opts.lab_series.is_some() { " lab" } else { "" },
                opts.flavours.iter().map(|f| format!(" {f}")).collect::<String>()
            )
        },
        || build_or_find(opts),
    )
}

/// Run `f` on the build `opts` names while its object tree holds it and no
/// other kernel build can change that: the tree made to hold the build
/// (compiled again and relinked where another build changed it, as
/// `kernel build --tree` does), the line's and the tree's locks
/// ([`lock`]) held from then until `f` returns. For work that reads the
/// tree after the build, such as remaking its bzImage around a module
/// hash list: after a build's end another build of the line may switch
/// the line's source and tree. Builds of other lines go on meanwhile.
pub fn with_tree<T>(opts: &Options, f: impl FnOnce(&Report) -> Result<T>) -> Result<T> {
    let mut opts = opts.clone();
    opts.tree = true;
    let (b, held) = run_locked(&opts)?;
    if held.is_none() || !holds(&b.tree, &b.key) {
        return Err(Error::file(
            Kind::Internal,
            &b.tree,
            format!("the object tree was to hold build {} under its lock, and does not", b.key),
        ));
    }
    f(&b)
}

/// [`with_tree`] for the build whose cache key is `key` (found or made
/// before): an internal error when `opts` now names another build.
pub fn with_tree_holding<T>(opts: &Options, key: &str, f: impl FnOnce(&Report) -> Result<T>) -> Result<T> {
    with_tree(opts, |b| {
        if b.key != key {
            return Err(Error::file(
                Kind::Internal,
                &b.dir,
                format!("made the object tree hold build {} instead of {key}", b.key),
            ));
        }
        f(b)
    })
}

/// The options of this checkout that make the cached build `built`
/// again (same cache key), if its series, configs and flavours still make
/// it: the line, architecture, lab series, flavours and config base it
/// names, the release tried as recorded and as kbuild's own.
pub fn options_of(built: &Report) -> Result<Option<Options>> {
    let line = Line::parse(&built.line)?;
    let mut base = Options::for_line_arch(line, built.arch);
    if built_with_lab_series(built) {
        base = base.with_lab_series();
    }
    base.flavours = built.flavours.clone();
    base.modules = built.modules.is_some();
    let mut tries = Vec::new();
    if built.config_base == ConfigBase::Tiny.describe() {
        tries.push(base);
    } else {
        base.whole_config(PathBuf::from(&built.config_base));
        let mut recorded = base.clone();
        recorded.release = Some(built.release.clone());
        tries.extend([recorded, base]);
    }
    let cache = fsutil::cache_dir();
    for opts in tries {
        let Ok((series, _)) = resolve_series(&opts) else { continue };
        let Ok(inputs) = read_config_inputs(&opts) else { continue };
        if key_build(&opts, &cache, &inputs, &series)?.key == built.key {
            return Ok(Some(opts));
        }
    }
    Ok(None)
}

/// Run `f` on the object tree of the cached build `built` while it holds
/// that build and no other build of the line can change it (what `apply`
/// does before making a bzImage again from the tree's recorded commands).
/// The tree is made to hold the build again where another build of the
/// line switched it, when this checkout still makes that build
/// ([`options_of`]); otherwise it is only checked under the locks (the
/// error says how to make it hold the build). Called while this process
/// already holds the line's locks (the lab applies inside [`with_tree`]),
/// the tree is checked and `f` run under those.
pub fn with_tree_of<T>(built: &Report, f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let line = Line::parse(&built.line)?;
    let kbuild = fsutil::cache_dir().join("kbuild");
    let _held = if lock::held_here(&kbuild, line) {
        None
    } else if let Some(opts) = options_of(built)? {
        return with_tree_holding(&opts, &built.key, |b| f(&b.tree));
    } else {
        let mut held = lock::Held::line(&kbuild, line)?;
        held.tree(&built.tree)?;
        Some(held)
    };
    tree_holds(built)?;
    f(&built.tree)
}

/// What the config is made from, as read: the fragment with its flavours
/// over it, the make variables the flavours name, the whole config it
/// starts from (none: tinyconfig), and the text the cache key and the
/// object directory are computed from.
struct ConfigInputs {
    fragment: Fragment,
    make_vars: Vec<String>,
    whole: Option<Vec<u8>>,
    /// What names the object tree: the unflavoured build's config text (a
    /// flavour builds in its unflavoured build's tree).
    obj_text: Vec<u8>,
    /// Everything that goes into the config, as the cache key sees it.
    config_text: Vec<u8>,
}

/// The cache key of a build and where the cache keeps it.
struct Keyed {
    signing: key::SigningKey,
    version: String,
    key: String,
    /// `<cache>/kernels/build-<key>`.
    out: PathBuf,
}

/// The build (found or made) and, with [`Options::tree`], the locks under
/// which its object tree was found or made to hold it.
fn build_or_find(opts: &Options) -> Result<(Report, Option<lock::Held>)> {
    let t0 = Instant::now();
    let (series, skipped) = resolve_series(opts)?;
    let mut inputs = read_config_inputs(opts)?;
    leave_out_options_of_other_series(opts, &series, &mut inputs.fragment)?;
    let cache = fsutil::cache_dir();
    let keyed = key_build(opts, &cache, &inputs, &series)?;
    let kbuild = cache.join("kbuild");
    let obj = kbuild.join(format!("{}{}", obj_prefix(opts.arch), &hex(&Sha256::digest(&inputs.obj_text))[..12]));
    let not_cached = || {
        Error::new(
            Kind::Build,
            format!(
                "this kernel build is not in the cache ({}): `bootlink kernel build` makes it",
                keyed.out.display()
            ),
        )
    };
    // A build in the cache is whole (renamed into place) and read without
    // a lock; whether the object tree holds it is known only under the
    // line's and the tree's locks (a build of the line may be switching
    // the source or the tree).
    if !opts.tree
        && let Some(b) = lookup_cache(&keyed.out, |_| true, t0)
    {
        return Ok((b, None));
    }
    if opts.cached_only && cached(&keyed.out).is_none() {
        return Err(not_cached());
    }
    let mut held = lock::Held::line(&kbuild, opts.line)?;
    held.tree(&obj)?;
    // Found (another process may have built it while we waited).
    let tree_holds = |b: &Report| !opts.tree || holds(&b.tree, &keyed.key);
    if let Some(b) = lookup_cache(&keyed.out, tree_holds, t0) {
        return Ok((b, opts.tree.then_some(held)));
    }
    if opts.cached_only {
        return Err(not_cached());
    }
    crate::buildlog::failed_earlier("kernel", &keyed.key)?;
    check_tools(opts)?;
    let tree = prepare_tree(opts, &kbuild, &series, &keyed.version, &obj, held.files())?;
    let log = obj.join("bootlink-build.log");
    let _ = std::fs::remove_file(&log);
    let mut make_vars = inputs.make_vars.clone();
    make_vars.extend(make::serial_pahole_flags(&tree).map(|flags| format!("PAHOLE_FLAGS={flags}")));
    let env = make::Env {
        tree: &tree,
        obj: &obj,
        ccache_dir: &cache.join("ccache"),
        base: &kbuild,
        jobs: opts.jobs,
        arch: opts.arch,
        symhash_hook: Some(make::symhash_hook()?),
        make_vars,
        locks: held.files(),
    };
    let done = configure_obj(opts, &env, &inputs, &keyed, &log)
        .and_then(|()| compile(opts, &env, &keyed.key, &log))
        .and_then(|release| config_still_holds(&env, &inputs, &opts.config).map(|()| release))
        .and_then(|release| install_into_cache(opts, &env, &keyed, &series, skipped, &release, &log));
    let mut built = crate::buildlog::remember("kernel", &keyed.key, done)?;
    built.seconds = t0.elapsed().as_secs_f64();
    prune_objects(&kbuild, &obj, obj_prefix(opts.arch), KEEP_OBJECT_DIRS);
    Ok((built, opts.tree.then_some(held)))
}

/// A build of another series than the line's own (the stock kernel the
/// kmod selftests compare with: no series at all) with the lab's fragment:
/// the fragment names the line's series' own options (CONFIG_MODULE_SYMHASH
/// and the like), which that source's Kconfig does not define and
/// olddefconfig drops. Those lines, and only those, are not asked of the
/// config (said on stderr); any other line that does not hold still fails
/// the build. The cache key keeps the fragment as read.
fn leave_out_options_of_other_series(opts: &Options, series: &Series, fragment: &mut kconfig::Fragment) -> Result<()> {
    let checkout = fsutil::source_tree();
    let (own, lab) = (opts.line.series(checkout), opts.line.lab_series(checkout));
    if opts.series == own && opts.lab_series.as_ref().is_none_or(|l| *l == lab) {
        return Ok(());
    }
    let (line_series, _) = Series::read_stacked(&own, &[&lab])?.for_arch(opts.arch.kernel());
    let theirs = kconfig::defined_by(&line_series);
    let ours = kconfig::defined_by(series);
    let mut left_out = Vec::new();
    fragment.values.retain(|(k, _)| {
        let keep = !theirs.contains(k) || ours.contains(k);
        if !keep {
            left_out.push(k.clone());
        }
        keep
    });
    if !left_out.is_empty() {
        progress::status(&format!(
            "{}: {} left out: the line's series defines them, this build's series ({}) does not",
            opts.config.display(),
            left_out.join(", "),
            opts.series.display()
        ));
    }
    Ok(())
}

/// The series for the architecture (the lab's stacked on the product's
/// with `--lab`), and the patches it leaves out; refused for an
/// architecture the line has no lab config for.
fn resolve_series(opts: &Options) -> Result<(Series, Vec<String>)> {
    let lab: Vec<&Path> = opts.lab_series.iter().map(PathBuf::as_path).collect();
    let (series, skipped) = Series::read_stacked(&opts.series, &lab)?.for_arch(opts.arch.kernel());
    if !opts.arch.is_amd64() && !opts.config.exists() {
        return Err(Error::file(
            Kind::Unsupported,
            &opts.config,
            format!(
                "no {} lab config for kernel line {}: only 6.1 is built for {} so far (or give --fragment FILE)",
                opts.arch.debian(),
                opts.line,
                opts.arch.debian()
            ),
        ));
    }
    Ok((series, skipped))
}

/// Read the fragment, each flavour's lines over it (and into the key after
/// it, with the bytes of the programs a flavour names as make variables)
/// and the whole config, if any.
fn read_config_inputs(opts: &Options) -> Result<ConfigInputs> {
    let mut fragment_text = crate::fsutil::read_input(&opts.config, crate::fsutil::MAX_TEXT)?;
    let unflavoured_text = fragment_text.clone();
    let mut fragment = Fragment::parse(&String::from_utf8_lossy(&fragment_text), &opts.config)?;
    // A flavour's lines go over the fragment's (and into the key after
    // them: no flavour, the key it always had).
    let checkout = crate::fsutil::source_tree();
    let mut make_vars: Vec<String> = Vec::new();
    let mut own_tree = false;
    for name in &opts.flavours {
        let file = opts.line.flavour_config(checkout, name);
        if !file.is_file() {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "kernel line {} has no build flavour {name:?} (it has: {})",
                    opts.line,
                    opts.line.flavours(checkout).join(", ")
                ),
            ));
        }
        let text = crate::fsutil::read_input(&file, crate::fsutil::MAX_TEXT)?;
        own_tree |= wants_own_tree(&String::from_utf8_lossy(&text), &file)?;
        fragment = fragment.overlaid(&Fragment::parse(&String::from_utf8_lossy(&text), &file)?);
        fragment_text.extend_from_slice(format!("\n# bootlink: flavour {name}\n").as_bytes());
        fragment_text.extend_from_slice(&text);
        for (var, tool) in flavour_make_vars(&String::from_utf8_lossy(&text), &file, checkout)? {
            // the program's bytes make the key too
            let bytes = crate::fsutil::read_input(&tool, crate::fsutil::MAX_TEXT)?;
            fragment_text.extend_from_slice(
                format!("# bootlink: make {var} sha256 {}\n", hex(&Sha256::digest(&bytes))).as_bytes(),
            );
            make_vars.push(format!("{var}={}", tool.display()));
        }
    }
    // What makes the config: the lab's fragment alone (so its key is what
    // it always was), or a whole config with the series' options, the
    // build-time changes, the release and whether modules are built.
    let whole = match &opts.base {
        ConfigBase::Tiny => None,
        ConfigBase::Whole(file) => {
            let whole = crate::fsutil::read_input(file, crate::fsutil::MAX_TEXT)?;
            Fragment::parse(&String::from_utf8_lossy(&whole), file)?;
            Some(whole)
        }
    };
    let with_whole = |fragment_text: &[u8]| match &whole {
        None => fragment_text.to_vec(),
        Some(whole) => {
            let mut t = whole.clone();
            t.extend_from_slice(b"\n# bootlink: the series' options\n");
            t.extend_from_slice(fragment_text);
            t.extend_from_slice(
                format!("# bootlink: release {:?}, modules {}\n", opts.release, opts.modules).as_bytes(),
            );
            t
        }
    };
    // A flavour builds in its unflavoured build's object tree: what its
    // options change is rebuilt there (a compressor: the boot image alone).
    // One whose options reach nearly every object (`# bootlink-tree: own`)
    // gets a tree of its own, so going to it and back rebuilds nothing.
    let obj_text = with_whole(if own_tree { &fragment_text } else { &unflavoured_text });
    let config_text = with_whole(&fragment_text);
    Ok(ConfigInputs { fragment, make_vars, whole, obj_text, config_text })
}

/// The build's cache key ([`cache_key`]: with the signing certificate,
/// made once under the cache, and the source package's version) and its
/// directory in the cache.
fn key_build(opts: &Options, cache: &Path, inputs: &ConfigInputs, series: &Series) -> Result<Keyed> {
    let signing = key::ensure(&cache.join("keys"))?;
    let cert = crate::fsutil::read_input(&signing.cert, crate::fsutil::MAX_TEXT)?;
    let version = source::package_version(opts.line)?;
    // 6.1's pahole-flags.sh is the one that asked for -j (6.12 leaves it
    // out with KBUILD_BUILD_TIMESTAMP set): only a BTF build of it changes.
    let serial_btf = opts.line == Line::V6_1
        && crate::kernel::config::KernelConfig::parse(&String::from_utf8_lossy(&inputs.config_text))
            .get("CONFIG_DEBUG_INFO_BTF")
            == Some("y");
    let key = cache_key(opts.arch, &version, &inputs.config_text, series, &cert, serial_btf);
    let out = cache.join("kernels").join(format!("build-{key}"));
    Ok(Keyed { signing, version, key, out })
}

/// The complete build cached in `out` (whose object tree `tree_holds`
/// when asked to), marked as found in the cache.
fn lookup_cache(out: &Path, tree_holds: impl Fn(&Report) -> bool, t0: Instant) -> Option<Report> {
    let mut b = cached(out).filter(|b| tree_holds(b))?;
    b.seconds = t0.elapsed().as_secs_f64();
    b.cached = true;
    Some(b)
}

/// The host tools a kernel build runs, each found or named as missing.
fn check_tools(opts: &Options) -> Result<()> {
    let cross_gcc = format!("{}gcc", opts.arch.cross_compile());
    for tool in ["make", "gcc", cross_gcc.as_str(), "flex", "bison", "bc", "patch", "openssl", "depmod"] {
        if !hosttool::exists(tool) && !Path::new("/sbin").join(tool).is_file() {
            if tool != "gcc" && tool == cross_gcc {
                return Err(Error::new(
                    Kind::Tool,
                    format!(
                        "{tool}: missing cross compiler for --arch {} (run scripts/install-deps or install gcc-aarch64-linux-gnu)",
                        opts.arch.debian()
                    ),
                ));
            }
            return Err(Error::new(
                Kind::Tool,
                format!(
                    "{tool}: missing tool, needed for building the kernel (run scripts/install-deps or install build-essential flex bison bc libelf-dev libssl-dev kmod)"
                ),
            ));
        }
    }
    Ok(())
}

/// The unpacked source with the series applied (what is already applied
/// stays), and the object directory `obj` made if absent.
fn prepare_tree(
    opts: &Options,
    kbuild: &Path,
    series: &Series,
    version: &str,
    obj: &Path,
    locks: &[std::fs::File],
) -> Result<PathBuf> {
    let tree = source::unpacked(kbuild, opts.line, version)?;
    let (reverted, applied) = source::apply_series(&tree, series, opts.line, version, locks)?;
    if reverted + applied > 0 {
        progress::status(&format!("patch series {}: {reverted} reverted, {applied} applied", series.dir.display()));
    }
    std::fs::create_dir_all(obj).map_err(|e| Error::io(obj, e))?;
    Ok(tree)
}

/// The signing key in the object tree, then `.config` ([`configure`]).
fn configure_obj(opts: &Options, env: &make::Env<'_>, inputs: &ConfigInputs, keyed: &Keyed, log: &Path) -> Result<()> {
    // The key goes into the object tree under a fixed name, so the config
    // (and every object's preprocessed input through autoconf.h) does not
    // depend on where the cache is: ccache hits across caches and keys.
    let key_in_obj = env.obj.join(KEY_IN_OBJ);
    let key_data = crate::fsutil::read_input(&keyed.signing.pem, crate::fsutil::MAX_TEXT)?;
    if std::fs::read(&key_in_obj).ok().as_deref() != Some(key_data.as_slice()) {
        std::fs::create_dir_all(env.obj.join("certs")).map_err(|e| Error::io(env.obj, e))?;
        fsutil::write_atomic(&key_in_obj, &key_data)?;
    }
    let wanted =
        Wanted { whole: inputs.whole.as_deref(), fragment: &inputs.fragment, config_text: &inputs.config_text };
    configure(env, &wanted, &opts.config, log)
}

/// The config the kernel was built with still holds every line of the
/// fragment. `make` runs syncconfig again when a Kconfig file changed, and
/// a symbol missing from the source's Kconfig at that moment is dropped
/// from `.config` without a word: a 6.12 lab build was once cached with
/// CONFIG_MODULE_SYMHASH and CONFIG_MODULE_HASHES_BLAKE2B gone (found by
/// scripts/sealed-measure's export tables). Such a build is refused, not
/// cached.
fn config_still_holds(env: &make::Env<'_>, inputs: &ConfigInputs, fragment_file: &Path) -> Result<()> {
    let dotconfig = env.obj.join(".config");
    let built = std::fs::read_to_string(&dotconfig).map_err(|e| Error::io(&dotconfig, e))?;
    let why = format!("in the built kernel's .config ({}) any more", dotconfig.display());
    fragment_holds(&inputs.fragment, &built, Kind::Build, fragment_file, &why).inspect_err(|_| {
        // Configured again from scratch by the next build.
        let _ = std::fs::remove_file(env.obj.join("bootlink-fragment"));
    })
}

/// Every line of `fragment` holds in the `.config` text `dotconfig`; else
/// an error of `kind` on `path` naming the first lines that do not, and
/// `when`.
fn fragment_holds(fragment: &Fragment, dotconfig: &str, kind: Kind, path: &Path, when: &str) -> Result<()> {
    let unmet = fragment.unmet(dotconfig);
    if unmet.is_empty() {
        return Ok(());
    }
    Err(Error::file(
        kind,
        path,
        format!(
            "{} line(s) do not hold {when}: {}",
            unmet.len(),
            unmet.iter().take(8).cloned().collect::<Vec<_>>().join("; ")
        ),
    ))
}

/// `make` the kernel (and its modules) in the object tree, marking the
/// tree with the source state and the key it now holds; returns the
/// release it was built as.
fn compile(opts: &Options, env: &make::Env<'_>, key: &str, log: &Path) -> Result<String> {
    let obj = env.obj;
    // A build killed in the middle (SIGKILL, a session's end) can leave a
    // half-written object that make then takes as up to date: objects made
    // since an unfinished build began are removed and made again (ccache
    // makes that cheap).
    let building = obj.join("bootlink-building");
    if building.exists() {
        let n = remove_newer_objects(obj, &building);
        progress::status(&format!("an earlier build was interrupted: {n} objects it made are rebuilt"));
    } else {
        std::fs::write(&building, b"").map_err(|e| Error::io(&building, e))?;
    }
    // vmlinux is linked again for every new build key, so link-vmlinux.sh
    // runs this bootlink's KSYMHASH hook (make would not relink for a new
    // hook or a new tables format alone).
    let _ = std::fs::remove_file(obj.join("vmlinux"));
    let _ = std::fs::remove_file(obj.join(TREE_KEY));
    let _ = std::fs::remove_file(obj.join(TREE_SOURCE));
    let (image_in_obj, image_name) = opts.arch.boot_image();
    // `all` makes the boot image too (arm64's makes Image.gz from Image).
    let image_target = image_in_obj.rsplit('/').next().unwrap_or(image_name);
    let targets: Vec<&str> = if opts.modules { vec!["all"] } else { vec!["vmlinux", image_target] };
    env.run(&targets, &release_vars(opts), log, "kernel build")?;
    let _ = std::fs::remove_file(&building);
    fsutil::write_atomic(&obj.join(TREE_SOURCE), source::applied_state(env.tree)?.as_bytes())?;
    fsutil::write_atomic(&obj.join(TREE_KEY), key.as_bytes())?;
    Ok(match &opts.release {
        Some(r) => r.clone(),
        None => std::fs::read_to_string(obj.join("include/config/kernel.release"))
            .map_err(|e| Error::io(&obj.join("include/config/kernel.release"), e))?
            .trim()
            .to_string(),
    })
}

/// `KERNELRELEASE=` for make, when a release is asked for.
fn release_vars(opts: &Options) -> Vec<String> {
    opts.release.iter().map(|r| format!("KERNELRELEASE={r}")).collect()
}

/// Install the build into a temporary directory beside its place in the
/// cache (the modules, the images, System.map, Module.symvers, the config,
/// the signing key and `build.json`), then rename it into place.
fn install_into_cache(
    opts: &Options,
    env: &make::Env<'_>,
    keyed: &Keyed,
    series: &Series,
    skipped: Vec<String>,
    release: &str,
    log: &Path,
) -> Result<Report> {
    let (obj, out) = (env.obj, &keyed.out);
    let kernels = out.parent().expect("build-<key> lies in kernels/");
    std::fs::create_dir_all(kernels).map_err(|e| Error::io(kernels, e))?;
    let stage = tempfile::Builder::new().prefix(".build-").tempdir_in(kernels).map_err(|e| Error::io(kernels, e))?;
    if opts.modules {
        let mut vars = vec![format!("INSTALL_MOD_PATH={}", stage.path().display()), "INSTALL_MOD_STRIP=1".into()];
        vars.extend(release_vars(opts));
        env.run(&["modules_install"], &vars, log, "installing modules")?;
        let modules = stage.path().join("lib/modules").join(release);
        for link in ["build", "source"] {
            let _ = std::fs::remove_file(modules.join(link));
        }
    }
    let copy = |from: &Path, name: &str| -> Result<()> {
        let to = stage.path().join(name);
        std::fs::copy(from, &to).map_err(|e| Error::io(from, e))?;
        Ok(())
    };
    let (image_in_obj, image_name) = opts.arch.boot_image();
    copy(&obj.join("vmlinux"), "vmlinux")?;
    copy(&obj.join(image_in_obj), image_name)?;
    copy(&obj.join("System.map"), "System.map")?;
    // Module.symvers holds vmlinux's exports and the modules'; an image
    // alone has vmlinux.symvers (the same lines for vmlinux).
    let symvers = if opts.modules { obj.join("Module.symvers") } else { obj.join("vmlinux.symvers") };
    copy(&symvers, "Module.symvers")?;
    copy(&obj.join(".config"), &format!("config-{release}"))?;
    copy(&keyed.signing.pem, "module-signing.pem")?;
    copy(&keyed.signing.cert, "module-signing.crt")?;
    let built = Report {
        dir: out.clone(),
        line: opts.line.name.to_string(),
        arch: opts.arch,
        release: release.to_string(),
        vmlinux: out.join("vmlinux"),
        bzimage: out.join(image_name),
        system_map: out.join("System.map"),
        module_symvers: out.join("Module.symvers"),
        config: out.join(format!("config-{release}")),
        modules: opts.modules.then(|| out.join("lib/modules").join(release)),
        signing_key: out.join("module-signing.pem"),
        signing_cert: out.join("module-signing.crt"),
        key: keyed.key.clone(),
        source_package: opts.line.package.into(),
        source_version: keyed.version.clone(),
        patches: series.patches.iter().map(|p| p.name.clone()).collect(),
        skipped,
        config_fragment: opts.config.clone(),
        flavours: opts.flavours.clone(),
        config_base: opts.base.describe(),
        seconds: 0.0,
        cached: false,
        tree: obj.to_path_buf(),
    };
    let json = serde_json::to_vec_pretty(&built).expect("serializable");
    fsutil::write_atomic(&stage.path().join("build.json"), &json)?;
    let root = stage.path().to_path_buf();
    crate::cache::seal_tree(&root, |rel| sealed_check(&root, rel))?;
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| Error::io(out, e))?;
    }
    std::fs::rename(stage.path(), out).map_err(|e| Error::io(out, e))?;
    let _ = stage.keep();
    Ok(built)
}

/// Remove build products (`.o`, `.ko`, `.a`) under `dir` modified after `mark`.
fn remove_newer_objects(dir: &Path, mark: &Path) -> usize {
    let Ok(since) = std::fs::metadata(mark).and_then(|m| m.modified()) else { return 0 };
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file()
                && p.extension().is_some_and(|x| x == "o" || x == "ko" || x == "a")
                && e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t > since)
                && std::fs::remove_file(&p).is_ok()
            {
                n += 1;
            }
        }
    }
    n
}

/// Object directories kept in the cache per architecture (a lab config's
/// about 500 MB, a Debian config's several GB): this build's and the most
/// recent others, so switching between configs stays incremental. Six:
/// the lab config, a Debian-config build and the extended tier's second
/// lab configuration (a hash blacklist's) on each line; with four, each
/// extended run pruned a tree the next build of a new series then made
/// from nothing.
const KEEP_OBJECT_DIRS: usize = 6;

/// How an architecture's object directories are named (`obj-<hash>` on
/// x86-64, as before there were others; `obj-arm64-<hash>`), so each
/// architecture keeps its own [`KEEP_OBJECT_DIRS`].
fn obj_prefix(arch: crate::fetch::Arch) -> String {
    if arch.is_amd64() { "obj-".into() } else { format!("obj-{}-", arch.kernel()) }
}

/// Is `name` an object directory named with `prefix` (an x86 one's
/// `obj-<hex>` is not an arm64 one's `obj-arm64-<hex>`, nor the reverse)?
fn is_obj_dir(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Remove all but the `keep` most recently used object directories of one
/// architecture (named with `prefix`; `current` always stays, and so does
/// a tree another build is in: its lock is held).
fn prune_objects(kbuild: &Path, current: &Path, prefix: String, keep: usize) {
    let Ok(rd) = std::fs::read_dir(kbuild) else { return };
    let mut others: Vec<(std::time::SystemTime, PathBuf)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != current && p.file_name().is_some_and(|n| is_obj_dir(&n.to_string_lossy(), &prefix)))
        .filter_map(|p| {
            let t = std::fs::metadata(p.join("bootlink-build.log")).and_then(|m| m.modified()).ok()?;
            Some((t, p))
        })
        .collect();
    others.sort_by_key(|x| std::cmp::Reverse(x.0));
    for (_, p) in others.into_iter().skip(keep.saturating_sub(1)) {
        if let Some(_free) = lock::tree_if_free(&p) {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// How a build's files in the cache are checked on every use
/// ([`crate::cache`]): by content up to 64 MiB (the record, System.map,
/// Module.symvers, the config, the signing key, a lab kernel's images); by
/// size and modification time above (a Debian config's vmlinux with its
/// debug info) and for the module tree (thousands of files, each read as an
/// input and checked as one anyway). depmod's indexes (`modules.dep` and
/// the like) are left out: depmod writes them again.
fn sealed_check(root: &Path, rel: &Path) -> Option<crate::cache::Check> {
    let name = rel.file_name()?.to_string_lossy();
    let in_modules = rel.starts_with("lib");
    if in_modules && name.starts_with("modules.") {
        return None;
    }
    let big = std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.len() > 64 << 20);
    Some(if in_modules || big { crate::cache::Check::Stat } else { crate::cache::Check::Content })
}

/// A complete earlier build in `out`, if there is one and it is whole: a
/// damaged one is built again.
fn cached(out: &Path) -> Option<Report> {
    if !crate::cache::intact(out, "the kernel build") {
        return None;
    }
    let text = fsutil::read_input(&out.join("build.json"), 1 << 20).ok()?;
    let b: Report = serde_json::from_slice(&text).ok()?;
    (b.vmlinux.is_file() && b.modules.as_ref().is_none_or(|m| m.is_dir())).then_some(b)
}

/// `.config` in `obj`: tinyconfig, the fragment merged on top, the signing
/// key, olddefconfig; every fragment line must hold in the result. Done
/// again only when the fragment differs from the one it was made from.
/// What [`configure`] makes `.config` from.
struct Wanted<'a> {
    /// The whole config it starts from (as read for the cache key), or
    /// none for tinyconfig.
    whole: Option<&'a [u8]>,
    fragment: &'a Fragment,
    /// Everything that goes into it, as the cache key sees it.
    config_text: &'a [u8],
}

fn configure(env: &make::Env, wanted: &Wanted, path: &Path, log: &Path) -> Result<()> {
    let dotconfig = env.obj.join(".config");
    let made_from = env.obj.join("bootlink-fragment");
    // The source's series is part of what `.config` was made for: builds
    // of one config with and without the series (the stock build the kmod
    // selftests compare with) share this object tree, and make's
    // syncconfig under the other series' Kconfig drops the symbols that
    // series does not define (CONFIG_MODULE_SYMHASH...), leaving a
    // `.config` the same stamp would otherwise take as made.
    let stamp = format!(
        "{}\nkey {KEY_IN_OBJ}\nsource {}",
        hex(&Sha256::digest(wanted.config_text)),
        source::applied_state(env.tree)?
    );
    if dotconfig.is_file() && std::fs::read_to_string(&made_from).is_ok_and(|t| t == stamp) {
        return Ok(());
    }
    // The stamp goes before `.config` changes: a configure that fails
    // midway (a fragment line that does not hold, a stopped make) must
    // not leave the last build's stamp beside a `.config` it did not make.
    // (A stock build's failed configure once left the patched build's
    // stamp beside stock's `.config`; the next patched build skipped
    // configure and built without the series' options.)
    match std::fs::remove_file(&made_from) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&made_from, e)),
        _ => {}
    }
    match wanted.whole {
        None => env.run(&["tinyconfig"], &[], log, "kernel config (tinyconfig)")?,
        Some(whole) => fsutil::write_atomic(&dotconfig, whole)?,
    }
    let fragment = wanted.fragment;
    let mut text = std::fs::read_to_string(&dotconfig).map_err(|e| Error::io(&dotconfig, e))?;
    let mut set: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for (k, v) in &fragment.values {
        set.insert(k.as_str(), if v == "n" { format!("# {k} is not set") } else { format!("{k}={v}") });
    }
    set.insert("CONFIG_MODULE_SIG_KEY", format!("CONFIG_MODULE_SIG_KEY=\"{KEY_IN_OBJ}\""));
    // Replace the lines tinyconfig wrote for these symbols, append the rest.
    let mut out = String::new();
    for line in text.lines() {
        let sym = line
            .strip_prefix("# ")
            .and_then(|l| l.strip_suffix(" is not set"))
            .or_else(|| line.split_once('=').map(|(k, _)| k));
        if sym.is_some_and(|s| set.contains_key(s)) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    for (k, _) in &fragment.values {
        out.push_str(&set[k.as_str()]);
        out.push('\n');
    }
    out.push_str(&set["CONFIG_MODULE_SIG_KEY"]);
    out.push('\n');
    text = out;
    fsutil::write_atomic(&dotconfig, text.as_bytes())?;
    env.run(&["olddefconfig"], &[], log, "kernel config (olddefconfig)")?;
    let result = std::fs::read_to_string(&dotconfig).map_err(|e| Error::io(&dotconfig, e))?;
    fragment_holds(fragment, &result, Kind::Format, path, "after olddefconfig (unmet dependencies?)")?;
    fsutil::write_atomic(&made_from, stamp.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report as _;

    #[test]
    fn flavours_name_make_variables_of_kernel_tools_only() {
        let checkout = crate::fsutil::source_tree();
        let f = Path::new("none.config");
        let got = flavour_make_vars("CONFIG_X=y\n# bootlink-make: KGZIP=gzip-stored\n", f, checkout).unwrap();
        assert_eq!(got, [("KGZIP".to_string(), checkout.join("kernel/tools/gzip-stored"))]);
        assert!(flavour_make_vars("# CONFIG_X is not set\n", f, checkout).unwrap().is_empty());
        for (line, want) in [
            ("# bootlink-make: KGZIP", "NAME=PROGRAM"),
            ("# bootlink-make: kgzip=gzip-stored", "capitals"),
            ("# bootlink-make: KGZIP=../../bin/sh", "file name of kernel/tools/"),
            ("# bootlink-make: KGZIP=/bin/sh", "file name of kernel/tools/"),
            ("# bootlink-make: KGZIP=.hidden", "file name of kernel/tools/"),
            ("# bootlink-make: KGZIP=no-such-tool", "no such program"),
        ] {
            let e = flavour_make_vars(line, f, checkout).unwrap_err().to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    fn report(d: PathBuf) -> Report {
        Report {
            dir: d.clone(),
            line: "6.1".into(),
            arch: crate::fetch::Arch::Amd64,
            release: "6.1.192".into(),
            vmlinux: d.join("vmlinux"),
            bzimage: d.join("bzImage"),
            system_map: d.join("System.map"),
            module_symvers: d.join("Module.symvers"),
            config: d.join("config"),
            modules: Some(d.join("lib/modules/6.1.192")),
            signing_key: "/c/keys/signing.pem".into(),
            signing_cert: "/c/keys/signing.crt".into(),
            key: "k1".into(),
            source_package: "linux-source-6.1".into(),
            source_version: "6.1.192-1".into(),
            patches: vec!["0001-a.patch".into(), "0002-b.patch".into()],
            skipped: Vec::new(),
            config_fragment: "lab.config".into(),
            flavours: Vec::new(),
            config_base: "tinyconfig".into(),
            seconds: 0.04,
            cached: true,
            tree: "/c/kernel/obj".into(),
        }
    }

    #[test]
    fn the_report_prints_the_paths_and_reads_back_from_its_json() {
        let r = report(PathBuf::from("/c/kernel/k1"));
        let text = r.render();
        assert!(
            text.starts_with("kernel    6.1.192 (cached in 0.0 s; linux-source-6.1 6.1.192-1, 2 patch(es))\n"),
            "{text}"
        );
        assert!(
            text.contains("\nvmlinux   /c/kernel/k1/vmlinux\n")
                && text.ends_with("(certificate /c/keys/signing.crt)\n")
        );
        let json = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!((back.key, back.tree, back.cached), (r.key, r.tree, true));
    }

    /// A flavour's build and its unflavoured one share a tree: only the
    /// build the tree holds (its key in bootlink-key) gets the tree back.
    #[test]
    fn the_object_tree_is_given_only_for_the_build_it_holds() {
        let t = tempfile::tempdir().unwrap();
        let build = t.path().join("build-k1");
        std::fs::create_dir_all(&build).unwrap();
        let mut r = report(build.clone());
        r.tree = t.path().join("obj");
        r.flavours = vec!["lz4".into()];
        std::fs::create_dir_all(&r.tree).unwrap();
        std::fs::write(build.join("build.json"), serde_json::to_vec(&r).unwrap()).unwrap();
        let vmlinux = build.join("vmlinux");
        // The source the tree links, with one patch applied, as the build
        // left it.
        let src = t.path().join("src");
        std::fs::create_dir_all(src.join(".bootlink-applied")).unwrap();
        std::fs::write(src.join(".bootlink-applied/0000-abc-one.patch"), "x").unwrap();
        std::os::unix::fs::symlink(&src, r.tree.join("source")).unwrap();
        std::fs::write(r.tree.join(TREE_SOURCE), source::applied_state(&src).unwrap()).unwrap();
        // What `ls -1 .bootlink-applied | sha256sum` prints.
        assert_eq!(source::applied_state(&src).unwrap(), hex(&Sha256::digest(b"0000-abc-one.patch\n")));
        std::fs::write(r.tree.join(TREE_KEY), "k1").unwrap();
        assert_eq!(object_tree_of(&vmlinux).unwrap(), r.tree);
        // Another build (arm64's series) patched the shared source since.
        std::fs::write(src.join(".bootlink-applied/0001-def-two.patch"), "y").unwrap();
        let e = object_tree_of(&vmlinux).unwrap_err().to_string();
        assert!(e.contains("k1, but its source has another series applied since"), "{e}");
        std::fs::remove_file(src.join(".bootlink-applied/0001-def-two.patch")).unwrap();
        assert_eq!(object_tree_of(&vmlinux).unwrap(), r.tree);
        std::fs::write(r.tree.join(TREE_KEY), "k2").unwrap();
        let e = object_tree_of(&vmlinux).unwrap_err().to_string();
        assert!(e.contains("another build (k2)") && e.contains("bootlink kernel build --tree --flavour lz4"), "{e}");
        std::fs::remove_file(r.tree.join(TREE_KEY)).unwrap();
        assert!(object_tree_of(&vmlinux).unwrap_err().to_string().contains("no finished build"));
    }

    /// The object tree of the cached build `vmlinux` lies in, if it holds
    /// that build (what [`with_tree_of`] checks under the line's locks).
    fn object_tree_of(vmlinux: &Path) -> Result<PathBuf> {
        let built = cached_build_of(vmlinux)?;
        tree_holds(&built)?;
        Ok(built.tree)
    }

    const MAIL: &str = "From: a <a@localhost>\nSubject: [PATCH 1/2] x\n\nWhy: 3 ms.\n\nSigned-off-by: a <a@localhost>\n---\n\
                        diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n";

    fn series(patches: &[(&str, &str)]) -> Series {
        let d = tempfile::tempdir().unwrap();
        crate::series::write_for_test(d.path(), patches)
    }

    #[test]
    fn the_key_follows_the_diffs_not_the_messages_or_names() {
        use crate::fetch::Arch;
        let k = |s: &Series| cache_key(Arch::Amd64, "6.1.1-1", b"CONFIG_X=y\n", s, b"cert", false);
        let base = k(&series(&[("0001-x.patch", MAIL)]));
        let reworded = MAIL.replace("Why: 3 ms.", "Why, remeasured: 2.5 ms.").replace("[PATCH 1/2]", "[PATCH v2 1/3]");
        assert_eq!(base, k(&series(&[("0001-x.patch", &reworded)])), "a reworded message");
        assert_eq!(base, k(&series(&[("0003-renamed.patch", MAIL)])), "a renamed file");
        assert_ne!(base, k(&series(&[("0001-x.patch", &MAIL.replace("+b", "+c"))])), "a changed diff");
        assert_ne!(base, k(&series(&[])), "a patch fewer");
        assert_ne!(
            base,
            cache_key(Arch::Amd64, "6.1.1-2", b"CONFIG_X=y\n", &series(&[("0001-x.patch", MAIL)]), b"cert", false)
        );
        // BTF encoded serially is another kernel than in parallel.
        assert_ne!(
            base,
            cache_key(Arch::Amd64, "6.1.1-1", b"CONFIG_X=y\n", &series(&[("0001-x.patch", MAIL)]), b"cert", true)
        );
        // The architecture is part of the key (the same inputs for arm64
        // are another build); x86's key has no arch field, as before.
        let arm =
            cache_key(Arch::Arm64, "6.1.1-1", b"CONFIG_X=y\n", &series(&[("0001-x.patch", MAIL)]), b"cert", false);
        assert_ne!(base, arm);
        let mut h = crate::series::KeyHash::new();
        h.field("recipe", RECIPE.as_bytes());
        h.field("source", b"6.1.1-1");
        h.field("config", b"CONFIG_X=y\n");
        h.field("diff", series(&[("0001-x.patch", MAIL)]).patches[0].diff());
        h.field("cert", b"cert");
        assert_eq!(base, h.finish(), "x86's key is the one it was before there were other architectures");
    }

    #[test]
    fn a_flavour_asks_for_a_tree_of_its_own_in_one_way() {
        let f = Path::new("own.config");
        assert!(wants_own_tree("# kaslr\n# bootlink-tree: own\nCONFIG_RANDOMIZE_BASE=y\n", f).unwrap());
        assert!(!wants_own_tree("CONFIG_KERNEL_LZ4=y\n", f).unwrap());
        let e = wants_own_tree("# bootlink-tree: shared\n", f).unwrap_err().to_string();
        assert!(e.contains("own.config") && e.contains("only tree a flavour can ask for is `own`"), "{e}");
    }

    #[test]
    fn each_architecture_prunes_its_own_object_directories() {
        use crate::fetch::Arch;
        assert_eq!(obj_prefix(Arch::Amd64), "obj-");
        assert_eq!(obj_prefix(Arch::Arm64), "obj-arm64-");
        assert!(is_obj_dir("obj-3258f85e4791", "obj-") && !is_obj_dir("obj-arm64-3258f85e4791", "obj-"));
        assert!(is_obj_dir("obj-arm64-3258f85e4791", "obj-arm64-") && !is_obj_dir("obj-3258f85e4791", "obj-arm64-"));
        let d = tempfile::tempdir().unwrap();
        for n in ["obj-aa", "obj-bb", "obj-arm64-cc", "obj-arm64-dd"] {
            std::fs::create_dir_all(d.path().join(n)).unwrap();
            std::fs::write(d.path().join(n).join("bootlink-build.log"), b"").unwrap();
        }
        prune_objects(d.path(), &d.path().join("obj-arm64-cc"), obj_prefix(Arch::Arm64), 1);
        let left = |n: &str| d.path().join(n).is_dir();
        assert!(left("obj-aa") && left("obj-bb") && left("obj-arm64-cc") && !left("obj-arm64-dd"));
    }

    /// A tree another build is in (another line's: its lock is held) is not
    /// pruned; once free, it is.
    #[test]
    fn a_tree_another_build_is_in_is_not_pruned() {
        let d = tempfile::tempdir().unwrap();
        for n in ["obj-aa", "obj-bb"] {
            std::fs::create_dir_all(d.path().join(n)).unwrap();
            std::fs::write(d.path().join(n).join("bootlink-build.log"), b"").unwrap();
        }
        let (aa, bb) = (d.path().join("obj-aa"), d.path().join("obj-bb"));
        let mut other = lock::Held::line(d.path(), Line::V6_12).unwrap();
        other.tree(&bb).unwrap();
        prune_objects(d.path(), &aa, "obj-".into(), 1);
        assert!(aa.is_dir() && bb.is_dir(), "the tree in use stays");
        drop(other);
        prune_objects(d.path(), &aa, "obj-".into(), 1);
        assert!(aa.is_dir() && !bb.is_dir(), "pruned once free");
        assert!(lock::tree_path(&bb).is_file(), "its lock file stays (never removed)");
    }
}
