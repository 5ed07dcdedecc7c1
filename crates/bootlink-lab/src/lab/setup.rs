//! `bootlink lab`: from what the user asks (a kernel or the default Debian
//! one, a module set by name, list file or module names, variants,
//! repetitions) to a [`Scenario`], and from a finished [`Run`] to the
//! report the command prints, with the checks every run must pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::lab::scenario::{Prepared, Scenario};
use crate::lab::target::Target;
use crate::lab::variant::{self, KernelChoice, Variant};
use crate::run::results::{Run, USER_MODES, WorkloadResult};
use bootlink::error::{Error, Kind, Result};
use bootlink::fetch;
use bootlink::kbuild;
use bootlink::kmod::{self as modset, Entry, ModTree};

/// The set `bootlink lab` loads when none is named.
pub(crate) const DEFAULT_SET: &str = "fs-nls-crypto-net-194";

/// `--set none`: load no module (a boot for what runs after, e.g. DDLink's program).
pub(crate) const NO_MODULES: &str = "none";

#[derive(Debug, Clone, Default)]
pub struct Request {
    /// What the run boots on (default: x86-64, [`Target::x86_64`]).
    pub target: Target,
    /// vmlinux (boots through PVH) or bzImage; None: the default Debian kernel.
    pub kernel: Option<PathBuf>,
    /// `lib/modules/<release>` of that kernel (required with `kernel`).
    pub modules_dir: Option<PathBuf>,
    /// A named set ([`modset::NAMED_SETS`]) or a list file.
    pub set: Option<String>,
    /// Module names (or aliases), loaded with their dependencies.
    pub names: Vec<String>,
    /// The variants, parsed (default: stock and preresolved).
    pub variants: Vec<Variant>,
    pub repetitions: usize,
    pub realtime: bool,
    /// Virtual CPUs (realtime only).
    pub smp: u32,
    pub no_trace: bool,
    pub measure_overhead: bool,
    pub timeout: Duration,
    pub memory_mib: u32,
    pub out: Option<PathBuf>,
    pub extra_cmdline: String,
    /// Boots at once (None: one per host CPU for a deterministic run, one
    /// for a realtime run).
    pub jobs: Option<usize>,
}

impl Request {
    /// The request with `more` variants after its own.
    pub fn with_variants(mut self, more: Vec<Variant>) -> Request {
        self.variants.extend(more);
        self
    }
}

/// The kernel image and its module tree a run boots: the ones given, or
/// Debian's reference kernel of `target`'s architecture fetched (its tree
/// unless another is given).
pub(crate) fn kernel_and_tree(
    target: &Target,
    kernel: Option<&Path>,
    modules: Option<&Path>,
) -> Result<(PathBuf, PathBuf)> {
    Ok(match (kernel, modules) {
        (Some(k), Some(m)) => (k.to_path_buf(), m.to_path_buf()),
        (Some(k), None) => {
            return Err(Error::file(
                Kind::Usage,
                k,
                "--kernel needs --modules DIR (the lib/modules/<release> tree of that kernel)",
            ));
        }
        (None, m) => {
            let f = fetch::fetch_for(&fetch::Request::Reference, target.arch.debian())?;
            if let Some(why) = &f.fallback {
                bootlink::progress::status(&format!("note: {why}"));
            }
            (f.vmlinux, m.map(Path::to_path_buf).unwrap_or(f.modules))
        }
    })
}

/// The modules of `--set SET` in `tree`, in the set's order: none for
/// [`NO_MODULES`], a named set's as far as the tree has them (second: the
/// names it lacks), or a list file's, each of which must be in the tree.
pub(crate) fn set_entries<'t>(tree: &'t ModTree, set: &str) -> Result<(Vec<&'t Entry>, Vec<String>)> {
    if set == NO_MODULES {
        Ok((Vec::new(), Vec::new()))
    } else if modset::named_set(set).is_some() {
        tree.from_named_set(&modset::named_set_paths(set)?)
    } else if Path::new(set).is_file() {
        Ok((tree.from_list(&modset::read_list(Path::new(set))?)?, Vec::new()))
    } else {
        let known: Vec<&str> = modset::NAMED_SETS.iter().map(|(n, _)| *n).collect();
        Err(Error::new(
            Kind::Usage,
            format!("--set {set:?}: neither a named set ({}, none) nor a list file", known.join(", ")),
        ))
    }
}

/// Work out the scenario: fetch the default kernel if needed, read the
/// module tree, resolve the set. In phases: the variants
/// (`variant_specs`), the run's kernel (`run_kernel`), its set
/// (`module_set`), each variant's kernel and tree
/// (`kernel_for_variants`, `module_trees`), the set on every kernel,
/// each variant prepared (`prepare_variant`: `set_in_tree`,
/// `check_steps`, `plan`), the run's settings (`check_run_settings`,
/// `jobs`, `out_dir`).
pub fn scenario(req: &Request) -> Result<Scenario> {
    // Before anything is fetched or built: a run directory that is a
    // file, a device or a FIFO, or holds one where run.json goes.
    if let Some(out) = &req.out {
        let kernel: Vec<&Path> = req.kernel.as_deref().into_iter().collect();
        bootlink::fsutil::check_outputs_in(out, &["run.json"], &kernel)?;
    }
    let specs = variant_specs(req)?;
    // Each variant's own kernel is resolved once (a build looked up, a
    // Debian package fetched), however many variants name it.
    let mut resolved: Vec<(&KernelChoice, (PathBuf, PathBuf))> = Vec::new();
    let (kernel, tree_dir) = run_kernel(req, &specs, &mut resolved)?;
    let tree = ModTree::read(&tree_dir)?;
    let set = module_set(req, &tree)?;
    let kernels = kernel_for_variants(req, &specs, &mut resolved, (&kernel, &tree_dir))?;
    let trees = module_trees(&kernels, &tree_dir)?;
    // A named set runs on what every kernel of the run has of it as
    // modules (built in, removed upstream, not configured: said, and in
    // the set's name in run.json); a list file or names must be in every tree.
    let ModuleSet { name: mut set_name, mut entries, not_modules, named } = set;
    if named {
        let all: Vec<&ModTree> = std::iter::once(&tree).chain(trees.iter().map(|(_, t)| t)).collect();
        (entries, set_name) = on_every_kernel(&all, &entries, not_modules, set_name)?;
    }
    let base: Vec<(String, PathBuf)> = entries.iter().map(|e| (e.name.clone(), e.path.clone())).collect();
    let mut variants = Vec::new();
    let mut randomizes = Vec::new();
    for (mut spec, (image, dir)) in specs.into_iter().zip(kernels) {
        let t = if dir == tree_dir { &tree } else { &trees.iter().find(|(d, _)| *d == dir).expect("read").1 };
        if req.target.arch == crate::lab::arch::Arch::Arm64 && spec.kaslr_asked.is_none() {
            default_kaslr_arm64(&mut spec, &image, &mut randomizes)?;
        }
        variants.push(prepare_variant(req, spec, image, dir, t, &base)?);
    }
    check_run_settings(req)?;
    let jobs = jobs(req)?;
    let out = out_dir(req)?;
    Ok(Scenario {
        target: req.target.clone(),
        kernel,
        modules: entries.iter().map(|e| (e.name.clone(), e.path.clone())).collect(),
        module_set: set_name,
        variants,
        repetitions: req.repetitions,
        deterministic: !req.realtime,
        cpus: req.smp,
        trace: !req.no_trace,
        measure_overhead: req.measure_overhead && !req.no_trace,
        timeout: req.timeout,
        memory_mib: req.memory_mib,
        out,
        extra_cmdline: req.extra_cmdline.clone(),
        jobs,
    })
}

/// The variants asked for (stock and preresolved when none), each name once.
fn variant_specs(req: &Request) -> Result<Vec<Variant>> {
    let specs: Vec<Variant> = if req.variants.is_empty() {
        ["stock", "preresolved"].iter().filter_map(|p| Variant::preset(p)).collect()
    } else {
        req.variants.clone()
    };
    for (i, v) in specs.iter().enumerate() {
        if specs[..i].iter().any(|o| o.name == v.name) {
            return Err(Error::new(Kind::Usage, format!("variant {} given twice", v.name)));
        }
    }
    Ok(specs)
}

/// The run's kernel and tree: --kernel/--modules, else (when every
/// variant names its own kernel) the first variant's, so that a run of
/// other kernels neither fetches nor is shaped by the default one (then
/// kept in `resolved`).
fn run_kernel<'s>(
    req: &Request,
    specs: &'s [Variant],
    resolved: &mut Vec<(&'s KernelChoice, (PathBuf, PathBuf))>,
) -> Result<(PathBuf, PathBuf)> {
    let own =
        req.kernel.is_none() && req.modules_dir.is_none() && specs.iter().all(|s| s.kernel != KernelChoice::Default);
    if own {
        let first = variant_kernel(&specs[0].kernel, req)?;
        resolved.push((&specs[0].kernel, first.clone()));
        Ok(first)
    } else {
        kernel_and_tree(&req.target, req.kernel.as_deref(), req.modules_dir.as_deref())
    }
}

/// The run's module set, found in the run's tree.
struct ModuleSet<'t> {
    name: String,
    entries: Vec<&'t Entry>,
    /// A named set's modules that some kernel of the run does not have as modules.
    not_modules: Vec<String>,
    /// A named set (not names, not a list file).
    named: bool,
}

/// The set by its name (--set, the default), or the modules named.
fn module_set<'t>(req: &Request, tree: &'t ModTree) -> Result<ModuleSet<'t>> {
    let mut not_modules: Vec<String> = Vec::new();
    let named = req.names.is_empty() && modset::named_set(req.set.as_deref().unwrap_or(DEFAULT_SET)).is_some();
    let (name, entries) = if !req.names.is_empty() {
        if req.set.is_some() {
            return Err(Error::new(Kind::Usage, "give either --set or module names, not both"));
        }
        let plan = tree.resolve(&req.names)?;
        (req.names.join(","), plan.entries())
    } else {
        let set = req.set.clone().unwrap_or_else(|| DEFAULT_SET.to_string());
        let (entries, missing) = set_entries(tree, &set)?;
        not_modules = missing;
        // (a named set is checked once its missing dependencies are in, on every kernel)
        if !named && let Some(p) = tree.check_order(&entries).iter().find(|p| !p.soft) {
            return Err(Error::new(Kind::Usage, format!("--set {set}: the list's order breaks a dependency: {p}")));
        }
        (set, entries)
    };
    if entries.is_empty() && name != NO_MODULES {
        return Err(Error::new(Kind::Usage, "the module set is empty (every requested module is built in?)"));
    }
    Ok(ModuleSet { name, entries, not_modules, named })
}

/// Each variant's kernel image and module tree directory: the run's for
/// the default kernel, else its own, each resolved once.
fn kernel_for_variants<'s>(
    req: &Request,
    specs: &'s [Variant],
    resolved: &mut Vec<(&'s KernelChoice, (PathBuf, PathBuf))>,
    (kernel, tree_dir): (&Path, &Path),
) -> Result<Vec<(PathBuf, PathBuf)>> {
    let mut kernels: Vec<(PathBuf, PathBuf)> = Vec::new();
    for spec in specs {
        let k = match resolved.iter().find(|(c, _)| **c == spec.kernel) {
            Some((_, k)) => k.clone(),
            None if spec.kernel == KernelChoice::Default => (kernel.to_path_buf(), tree_dir.to_path_buf()),
            None => {
                let k = variant_kernel(&spec.kernel, req)?;
                resolved.push((&spec.kernel, k.clone()));
                k
            }
        };
        kernels.push(k);
    }
    Ok(kernels)
}

/// The module trees of the variants' kernels other than the run's, each read once.
fn module_trees(kernels: &[(PathBuf, PathBuf)], tree_dir: &Path) -> Result<Vec<(PathBuf, ModTree)>> {
    let mut trees: Vec<(PathBuf, ModTree)> = Vec::new();
    for (_, dir) in kernels {
        if *dir != tree_dir && !trees.iter().any(|(d, _)| d == dir) {
            trees.push((dir.clone(), ModTree::read(dir)?));
        }
    }
    Ok(trees)
}

/// One variant on its kernel: the set's modules in its tree, its checks,
/// the batch loader's plan.
fn prepare_variant(
    req: &Request,
    spec: Variant,
    image: PathBuf,
    dir: PathBuf,
    t: &ModTree,
    base: &[(String, PathBuf)],
) -> Result<Prepared> {
    let entries = set_in_tree(&spec, &dir, t, base)?;
    check_steps(req, &spec, &entries, &dir)?;
    let compression = bootlink::steps::compression(&spec.steps);
    let plan = plan(t, &entries, compression)?;
    let modules: Vec<(String, PathBuf)> = entries.iter().map(|e| (e.name.clone(), e.path.clone())).collect();
    let rels = entries.iter().map(|e| e.rel.to_string_lossy().into_owned()).collect();
    let boot = boot_image(&spec, &image, req.target.arch)?;
    Ok(Prepared { spec, kernel: image, boot, modules, tree: dir, rels, plan })
}

/// An arm64 Image randomizes itself when its config says so: KASLR on
/// unless the variant says kaslr:off, as for a bzImage. Each image is read
/// once (`known`), however many variants boot it.
fn default_kaslr_arm64(spec: &mut Variant, image: &Path, known: &mut Vec<(PathBuf, bool)>) -> Result<()> {
    let randomizes = match known.iter().find(|(p, _)| p == image) {
        Some(&(_, r)) => r,
        None => {
            let k = bootlink::kernel::KernelImage::open(image, None)?;
            let r = matches!(k.kaslr, bootlink::kernel::Kaslr::Possible { .. });
            known.push((image.to_path_buf(), r));
            r
        }
    };
    spec.randomize_by_default(randomizes).map_err(|m| Error::new(Kind::Usage, format!("variant {}: {m}", spec.name)))
}

/// The same set on every kernel: the same modules, by name, in the variant's tree.
fn set_in_tree<'t>(spec: &Variant, dir: &Path, t: &'t ModTree, base: &[(String, PathBuf)]) -> Result<Vec<&'t Entry>> {
    base.iter()
        .map(|(name, _)| {
            t.module(name).ok_or_else(|| {
                Error::file(
                    Kind::Usage,
                    dir,
                    format!("variant {}: module {name} of the set is not in this tree", spec.name),
                )
            })
        })
        .collect()
}

/// Refuse what the variant cannot run before anything is built: each
/// step's and workload's check, the loader's, and host programs on a
/// guest of another architecture.
fn check_steps(req: &Request, spec: &Variant, entries: &[&Entry], dir: &Path) -> Result<()> {
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    for s in &spec.steps {
        s.check(&spec.name, &names)?;
    }
    crate::workload::modules::check(spec.loader, &spec.name, req.realtime)?;
    if !req.target.arch.runs_host_programs() {
        // the batch loader decompresses zstd with the host's zstd
        let zstd = bootlink::steps::compression(&spec.steps) == bootlink::compress::Compression::Zstd
            && matches!(spec.loader, crate::workload::modules::Loader::Batch(..));
        let host = if zstd {
            Some("compress:zstd with loader:batch (busybox has no zstd: the host's decompresses)".to_string())
        } else {
            crate::workload::build(spec.loader, &spec.workloads).iter().find_map(|w| w.host_programs())
        };
        if let Some(what) = host {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "variant {}: {what} runs the host's programs, which do not run on {}",
                    spec.name,
                    req.target.arch.name()
                ),
            ));
        }
    }
    for w in &spec.workloads {
        w.check(dir).map_err(|e| Error { msg: format!("variant {}: {}", spec.name, e.msg), ..e })?;
    }
    Ok(())
}

/// The batch loader's plan of the variant's modules, with the paths the
/// guest holds them at.
fn plan(t: &ModTree, entries: &[&Entry], compression: bootlink::compress::Compression) -> Result<String> {
    let conf = bootlink::kmod::ModprobeConf::runtime_deps();
    t.loader_plan(entries, |e| crate::workload::modules::guest_path(&e.name, compression), &conf)
}

/// --smp and --repetitions.
fn check_run_settings(req: &Request) -> Result<()> {
    if req.smp == 0 || req.smp > 64 {
        return Err(Error::new(Kind::Usage, format!("--smp {}: give 1 to 64 CPUs", req.smp)));
    }
    if req.smp > 1 && !req.realtime {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "--smp {} needs --realtime: QEMU 7.2's deterministic clock (-icount) runs one CPU (more hang at boot)",
                req.smp
            ),
        ));
    }
    if req.repetitions == 0 {
        return Err(Error::new(Kind::Usage, "--repetitions must be at least 1"));
    }
    Ok(())
}

/// How many boots run at once: --jobs, else one per host CPU (one with --realtime).
fn jobs(req: &Request) -> Result<usize> {
    Ok(match (req.jobs, req.realtime) {
        (Some(0), _) => return Err(Error::new(Kind::Usage, "--jobs must be at least 1")),
        (Some(j), true) if j > 1 => {
            return Err(Error::new(
                Kind::Usage,
                format!("--jobs {j} needs the deterministic clock: realtime boots on one host would time each other"),
            ));
        }
        (Some(j), _) => j,
        (None, true) => 1,
        (None, false) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// The run directory: -o, else `lab-<seconds>`; never one that holds a run.
fn out_dir(req: &Request) -> Result<PathBuf> {
    let out = match &req.out {
        Some(o) => o.clone(),
        None => {
            let secs =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            PathBuf::from(format!("lab-{secs}"))
        }
    };
    if out.join("run.json").exists() {
        return Err(Error::file(Kind::Usage, &out, "already holds a run (run.json): choose another -o"));
    }
    Ok(out)
}

/// A variant's own kernel (not [`KernelChoice::Default`]): its image and
/// module tree, fetched or built as it says.
fn variant_kernel(choice: &KernelChoice, req: &Request) -> Result<(PathBuf, PathBuf)> {
    Ok(match choice {
        KernelChoice::Default => kernel_and_tree(&req.target, req.kernel.as_deref(), req.modules_dir.as_deref())?,
        KernelChoice::Debian => {
            let f = fetch::fetch_for(&fetch::Request::Reference, req.target.arch.debian())?;
            (f.vmlinux, f.modules)
        }
        KernelChoice::DebianSeries(series) => {
            let f = fetch::fetch_for(&fetch::Request::Series(series.clone()), req.target.arch.debian())?;
            (f.vmlinux, f.modules)
        }
        KernelChoice::Build(line, flavours) => {
            let arch = req.target.arch.debian();
            let mut opts = kbuild::Options::for_line_arch(*line, arch).with_lab_series();
            opts.flavours = flavours.clone();
            let b = kbuild::run(&opts)?;
            let modules = b.modules.ok_or_else(|| {
                Error::file(Kind::Usage, &b.dir, "this kernel build has no modules of its own (an image alone)")
            })?;
            // x86-64 boots the vmlinux through its PVH entry; arm64 the
            // Image, as the board's loader would.
            match req.target.arch {
                crate::lab::arch::Arch::X86_64 => (b.vmlinux, modules),
                crate::lab::arch::Arch::Arm64 => (b.bzimage, modules),
            }
        }
        KernelChoice::Distro(line) => {
            let k = crate::lab::distro::kernel(*line, req.target.arch.debian())?;
            (k.vmlinux, k.modules)
        }
        KernelChoice::Dir(d) => variant::kernel_dir(d, req.target.kernel_images)?,
    })
}

/// The bzImage QEMU boots for a variant that asks for one (see
/// [`Variant::boots_bzimage`]): the one beside the build's vmlinux.
/// x86-64 randomizes only through the bzImage's decompressor, so
/// `kaslr:on` there needs one; an arm64 Image randomizes itself.
fn boot_image(spec: &Variant, kernel: &Path, arch: crate::lab::arch::Arch) -> Result<Option<PathBuf>> {
    if !spec.boots_bzimage() {
        if spec.kaslr && arch == crate::lab::arch::Arch::X86_64 {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "variant {}: kaslr:on needs a bzImage boot on x86-64 (image:bzimage of kernel:build or \
                     kernel:distro): the PVH entry of vmlinux does not randomize",
                    spec.name
                ),
            ));
        }
        return Ok(None);
    }
    if arch != crate::lab::arch::Arch::X86_64 {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "variant {}: a bzImage (image:, or a compressor flavour) is x86-64's; {} boots its Image",
                spec.name,
                arch.name()
            ),
        ));
    }
    let bz = kernel.with_file_name("bzImage");
    if !bz.is_file() {
        return Err(Error::file(Kind::Usage, &bz, format!("variant {}: this build has no bzImage", spec.name)));
    }
    Ok(Some(bz))
}

/// A named set on the kernels of a run (`all`, the run's tree first): the
/// modules every tree has as modules, each after its hard dependencies in
/// any tree (added when the set lacks them), in the set's order; what was
/// left out (`not_modules` starts with what the run's tree lacks) and
/// added goes into the set's name.
fn on_every_kernel<'t>(
    all: &[&'t ModTree],
    entries: &[&'t Entry],
    mut not_modules: Vec<String>,
    set_name: String,
) -> Result<(Vec<&'t Entry>, String)> {
    let tree = all[0];
    // Kept: a module every tree has as a module, whose hard dependencies
    // (in every tree) are too; those dependencies join the set.
    let everywhere = |n: &str| all.iter().all(|t| t.module(n).is_some());
    let mut kept: Vec<String> = Vec::new();
    let mut added: Vec<String> = Vec::new();
    for e in entries {
        let mut need: Vec<String> = Vec::new();
        let mut stack = vec![e.name.clone()];
        let mut ok = true;
        while let Some(n) = stack.pop() {
            // depends= spells names as written (crc-itu-t); the tree's are normalized
            let n = bootlink::kmod::normalize(&n);
            if need.contains(&n) {
                continue;
            }
            if !everywhere(&n) {
                ok = false;
                if !not_modules.contains(&n) {
                    not_modules.push(n.clone());
                }
                break;
            }
            for t in all {
                stack.extend(t.module(&n).map(|m| m.depends.clone()).unwrap_or_default());
            }
            need.push(n);
        }
        if !ok {
            if !not_modules.contains(&e.name) {
                not_modules.push(e.name.clone());
            }
            continue;
        }
        for n in need {
            if !kept.contains(&n) {
                if !entries.iter().any(|x| x.name == n) {
                    added.push(n.clone());
                }
                kept.push(n);
            }
        }
    }
    // The set's order, each module after its dependencies in any tree
    // (moved up, or added, when the set has them later or not at all).
    let mut order: Vec<String> = Vec::new();
    fn visit(n: &str, all: &[&ModTree], order: &mut Vec<String>, active: &mut Vec<String>) {
        if order.iter().any(|o| o == n) || active.iter().any(|a| a == n) {
            return;
        }
        active.push(n.to_string());
        for t in all {
            for d in t.module(n).map(|m| m.depends.clone()).unwrap_or_default() {
                if let Some(m) = t.module(&d) {
                    visit(&m.name, all, order, active);
                }
            }
        }
        active.pop();
        order.push(n.to_string());
    }
    for e in entries.iter().filter(|e| kept.contains(&e.name)) {
        visit(&e.name, all, &mut order, &mut Vec::new());
    }
    let entries: Vec<&'t Entry> = order.iter().filter_map(|n| tree.module(n)).collect();
    let mut said = Vec::new();
    if !not_modules.is_empty() {
        said.push(format!("without {} (not modules on every kernel of the run)", not_modules.join(", ")));
    }
    if !added.is_empty() {
        said.push(format!("with {} (dependencies on this line)", added.join(", ")));
    }
    let mut set_name = set_name;
    if !said.is_empty() {
        set_name = format!("{set_name}: {} modules, {}", entries.len(), said.join(", "));
        bootlink::progress::status(&format!("note: module set {set_name}"));
    }
    if let Some(p) = tree.check_order(&entries).iter().find(|p| !p.soft) {
        return Err(Error::new(Kind::Usage, format!("--set {set_name}: the set's order breaks a dependency: {p}")));
    }
    Ok((entries, set_name))
}

/// What a run must show: every module of the set loaded in every
/// repetition, each with its phases, phases adding up to no more than
/// the module's measured load time.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Checks {
    pub modules_expected: usize,
    /// Per variant: repetitions in which every module loaded.
    pub complete: Vec<(String, usize, usize)>,
    pub problems: Vec<String>,
}

/// Check a run against the set it was meant to load.
pub fn check(run: &Run, expected: usize, traced: bool) -> Checks {
    let mut c = Checks { modules_expected: expected, ..Default::default() };
    for v in &run.variants {
        let mut complete = 0;
        for r in &v.repetitions {
            let user_problems = user_problems(r);
            let user_ok = user_problems.is_empty();
            c.problems.extend(user_problems.into_iter().map(|p| format!("{} #{}: {p}", v.name, r.index + 1)));
            // A storm counts requests, not per-module loads.
            if r.storm().is_some() {
                complete += (!r.partial && user_ok) as usize;
                continue;
            }
            let mut ok = r.modules.len() == expected && !r.partial && user_ok;
            if r.modules.len() != expected {
                c.problems.push(format!(
                    "{} #{}: {} of {expected} modules measured",
                    v.name,
                    r.index + 1,
                    r.modules.len()
                ));
            }
            for m in &r.modules {
                if m.status != 0 {
                    ok = false;
                    c.problems.push(format!("{} #{}: {}: insmod exited {}", v.name, r.index + 1, m.name, m.status));
                }
                if traced && m.phases.is_empty() {
                    ok = false;
                    c.problems.push(format!("{} #{}: {}: no phases traced", v.name, r.index + 1, m.name));
                }
                let sum: f64 = m.phases.iter().map(|p| p.duration_us).sum();
                // Times are printed to the microsecond; allow for rounding.
                if sum > m.total_us + 1.0 {
                    ok = false;
                    c.problems.push(format!(
                        "{} #{}: {}: phases add up to {sum:.0} us, more than its load time {:.0} us",
                        v.name,
                        r.index + 1,
                        m.name,
                        m.total_us
                    ));
                }
            }
            complete += ok as usize;
        }
        c.complete.push((v.name.clone(), complete, v.repetitions.len()));
    }
    c
}

/// What is wrong with the programs a repetition started, from run.json
/// alone: under DDLink, every mode as often as the most-started one, the
/// caches used, the same output; reordering's cold starts, each measured.
fn user_problems(r: &crate::run::results::Repetition) -> Vec<String> {
    let mut out = Vec::new();
    for w in &r.workloads {
        match w {
            WorkloadResult::Ddlink(u) => {
                let n = USER_MODES.iter().map(|m| u.starts.iter().filter(|s| s.mode == *m).count());
                out.extend(crate::workload::ddlink::problems(u, n.max().unwrap_or(0).max(1)));
            }
            WorkloadResult::Order(u) => out.extend(crate::workload::order::problems_alone(u)),
            WorkloadResult::Loader(_)
            | WorkloadResult::Storm(_)
            | WorkloadResult::Program(_)
            | WorkloadResult::ImageRead(_) => {}
        }
    }
    out
}

/// What `bootlink lab` did: the boots and their checks, or (asked for
/// `--lava DIR`) the LAVA jobs written in their place.
pub enum Outcome {
    Booted(Box<Booted>),
    Jobs(crate::lava::job::Report),
}

/// A finished run with what ran and its checks.
pub struct Booted {
    pub scenario: Scenario,
    pub run: Run,
    pub checks: Checks,
}

impl Booted {
    /// Its report (text and `--json`).
    pub fn report(&self) -> Report<'_> {
        Report::of(&self.scenario, &self.run, &self.checks)
    }

    /// Every boot finished and every check passed.
    pub fn ok(&self) -> bool {
        !self.run.partial && self.checks.problems.is_empty()
    }
}

/// `bootlink lab`: the scenario worked out ([`scenario`]), then either its
/// LAVA jobs written into `lava`'s directory (which is the run's
/// directory) or its boots run ([`crate::lab::scenario::run`]) and checked
/// against the set ([`check`]).
pub fn run(req: Request, lava: Option<crate::lava::job::Options>) -> Result<Outcome> {
    let req = match &lava {
        Some(o) => Request { out: Some(o.dir.clone()), ..req },
        None => req,
    };
    let scenario = scenario(&req)?;
    if let Some(o) = lava {
        return crate::lava::job::write(&scenario, &o).map(Outcome::Jobs);
    }
    let run = crate::lab::scenario::run(&scenario)?;
    let checks = check(&run, scenario.modules.len(), scenario.trace);
    Ok(Outcome::Booted(Box::new(Booted { scenario, run, checks })))
}

/// The report `bootlink lab --json` prints.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub run_dir: &'a Path,
    pub checks: &'a Checks,
    pub summary: crate::run::Summary,
    pub tracing_overhead_pct: Option<f64>,
    pub partial: bool,
    /// A program started under DDLink's ld.so: per series, its modes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub userspace: Vec<crate::workload::ddlink::table::UserTable>,
    /// What ran (the text names it; the JSON has the run directory).
    #[serde(skip)]
    pub scenario: &'a Scenario,
    #[serde(skip)]
    pub run: &'a Run,
}

impl<'a> Report<'a> {
    /// The report of a finished run and its checks.
    pub fn of(sc: &'a Scenario, run: &'a Run, checks: &'a Checks) -> Report<'a> {
        Report {
            run_dir: &sc.out,
            checks,
            summary: crate::run::summary(std::slice::from_ref(run)),
            tracing_overhead_pct: run.tracing_overhead_pct,
            partial: run.partial,
            userspace: crate::workload::ddlink::table::tables(std::slice::from_ref(run)),
            scenario: sc,
            run,
        }
    }
}

/// The human report: what ran, the before/after table, the checks.
impl bootlink::report::Report for Report<'_> {
    fn render(&self) -> String {
        render(self.scenario, self.run, self.checks)
    }
}

fn render(sc: &Scenario, run: &Run, checks: &Checks) -> String {
    let mut o = String::new();
    // The run's kernel, unless every variant names its own (then each
    // variant's line says which it boots).
    let kernel = if run.variants.iter().any(|v| v.kernel == sc.kernel) {
        format!("kernel {} ({})", run.kernel_release, sc.kernel.display())
    } else {
        "kernels per variant (below)".to_string()
    };
    o.push_str(&format!(
        "{kernel}, {} modules ({}), {} timing, {} repetition(s) per variant\nguest CPU: {}\n",
        sc.modules.len(),
        sc.module_set,
        run.timing,
        sc.repetitions,
        run.cpu_model
    ));
    for v in &run.variants {
        let walls: Vec<String> = v.repetitions.iter().map(|r| format!("{:.1} s", r.boot_wall_s)).collect();
        o.push_str(&format!(
            "  {:<12} {} modules on {} ({}); host wall per boot: {}\n",
            v.name,
            v.transform,
            v.kernel_release,
            v.kernel.display(),
            walls.join(", ")
        ));
        let bases: std::collections::BTreeSet<String> = v
            .repetitions
            .iter()
            .filter_map(|r| {
                let text = r.kernel_text.as_deref()?;
                Some(match r.kaslr_slide {
                    Some(s) => format!("{text} (slide {s:#x})"),
                    None => text.to_string(),
                })
            })
            .collect();
        let kaslr = if v.cmdline.split(' ').any(|w| w == "nokaslr") { "off (nokaslr)" } else { "on" };
        if !bases.is_empty() {
            let bases: Vec<String> = bases.into_iter().collect();
            o.push_str(&format!("  {:<12} KASLR {kaslr}; kernel text at {}\n", "", bases.join(", ")));
        }
        if let Some((name, file)) = v.raw_module.split_once('=') {
            o.push_str(&format!("  {:<12} {name}'s file in the guest: the raw bytes of {file}\n", ""));
        }
    }
    o.push('\n');
    o.push_str(&crate::run::render_summary_text(&crate::run::summary(std::slice::from_ref(run))));
    o.push('\n');
    let user = crate::workload::starts_text(std::slice::from_ref(run));
    if !user.is_empty() {
        o.push_str(&user);
        o.push('\n');
    }
    match run.tracing_overhead_pct {
        Some(p) => o.push_str(&format!(
            "tracing overhead: {p:+.2} % of the module set's load time (traced vs untraced boot of {})\n",
            run.variants.first().map(|v| v.name.as_str()).unwrap_or("")
        )),
        None if sc.trace => {
            o.push_str("tracing overhead: not measured (--measure-overhead boots once more without tracing)\n")
        }
        None => {}
    }
    for (name, ok, n) in &checks.complete {
        let reps: Vec<_> = run.variants.iter().filter(|v| v.name == *name).flat_map(|v| &v.repetitions).collect();
        let user = if reps.iter().any(|r| r.order().is_some()) {
            "; both builds started cold in every block size and readahead, faults and reads counted, the same output"
        } else if reps.iter().any(|r| r.ddlink().is_some()) {
            "; the DDLink program started in every mode, the caches taken, the same output"
        } else {
            ""
        };
        o.push_str(&format!(
            "{name}: {ok}/{n} repetition(s) loaded all {} modules{}{}\n",
            checks.modules_expected,
            if sc.trace { ", each with its phases, phases within load time" } else { "" },
            user
        ));
    }
    // A boot that hung before /init and was booted again is said.
    for v in &run.variants {
        for r in &v.repetitions {
            if let Some(why) = &r.booted_again {
                o.push_str(&format!(
                    "{} #{}: booted again, the first boot hung before /init: {why}\n",
                    v.name,
                    r.index + 1
                ));
            }
        }
    }
    // A tainted kernel is said, with the modules that tainted it.
    for v in &run.variants {
        for r in &v.repetitions {
            let Some(mask) = r.tainted.filter(|&m| m != 0) else { continue };
            let mut by: Vec<String> = r.module_taints.iter().take(4).map(|(m, l)| format!("{m} {l}")).collect();
            if r.module_taints.len() > 4 {
                by.push(format!("{} more (run.json)", r.module_taints.len() - 4));
            }
            o.push_str(&format!(
                "{} #{}: kernel tainted {}{}\n",
                v.name,
                r.index + 1,
                crate::run::taint::describe(mask),
                if by.is_empty() { String::new() } else { format!(" by {}", by.join(", ")) }
            ));
        }
    }
    for p in checks.problems.iter().take(20) {
        o.push_str(&format!("problem: {p}\n"));
    }
    if checks.problems.len() > 20 {
        o.push_str(&format!("... and {} more problems (see run.json)\n", checks.problems.len() - 20));
    }
    if run.partial {
        for v in &run.variants {
            for r in v.repetitions.iter().filter(|r| r.partial) {
                o.push_str(&format!(
                    "PARTIAL: {} #{} failed: {}\n",
                    v.name,
                    r.index + 1,
                    r.failure.as_deref().unwrap_or("")
                ));
            }
        }
    }
    o.push_str(&format!("run: {}\n", sc.out.display()));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kaslr:on` without a bzImage: refused on x86-64 (the PVH entry does
    /// not randomize), the Image itself on arm64; a bzImage is x86-64's.
    #[test]
    fn kaslr_on_needs_a_bzimage_on_x86_only() {
        use crate::lab::arch::Arch;
        let k = Path::new("/nonexistent/vmlinux");
        let v = Variant::parse("a=kernel:build,kaslr:on").unwrap();
        let e = boot_image(&v, k, Arch::X86_64).unwrap_err().to_string();
        assert!(e.contains("variant a: kaslr:on needs a bzImage boot on x86-64"), "{e}");
        assert_eq!(boot_image(&v, Path::new("/nonexistent/Image"), Arch::Arm64).unwrap(), None);
        let v = Variant::parse("a=kernel:build").unwrap();
        assert_eq!(boot_image(&v, k, Arch::X86_64).unwrap(), None);
        let v = Variant::parse("a=kernel:build,image:bzimage").unwrap();
        assert!(boot_image(&v, k, Arch::Arm64).unwrap_err().to_string().contains("is x86-64's"));
    }

    #[test]
    fn a_start_the_cache_did_not_serve_fails_the_checks() {
        let mut run = crate::workload::ddlink::table::tests::run();
        let c = check(&run, 0, false);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.complete, [("ddl".to_string(), 1, 1)]);
        let u = run.variants[0].repetitions[0].ddlink_mut();
        u.starts[5].decision = "normal loading: /s: libsynth03.so: another mtime".into();
        u.starts.pop();
        let c = check(&run, 0, false);
        assert_eq!(
            c.problems,
            [
                "ddl #1: ddlink skip: 2 of 3 starts measured",
                "ddl #1: ddlink skip #2: the loader did not use the cache: normal loading: /s: libsynth03.so: another mtime"
            ]
        );
        assert_eq!(c.complete, [("ddl".to_string(), 0, 1)]);
    }
}
