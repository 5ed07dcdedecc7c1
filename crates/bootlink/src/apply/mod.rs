//! `bootlink apply`: take a kernel build and its installed modules through
//! every build-time step the kernel supports, in order, with the lab's own
//! step list ([`crate::steps`]): the kernel names what it supports in its
//! image (loader-feature notes, patch `feature-notes`), [`plan`] chooses the
//! steps, the steps run in a scratch directory, then the results are
//! installed: every file written whole beside where it goes, then put in
//! place by renames, the kernel image (vmlinux with the module hash list,
//! its bzImage made again) first, then the record of the files written
//! ([`record`]), then the modules; then depmod.
//!
//! Why the image first: until a rewritten (unsigned) module replaces the
//! signed one, the old module still loads through its signature; a run
//! killed at any point leaves every module loadable. A second run finds
//! every module as it wrote it (by the record's digests) and changes
//! nothing; a module installed since is taken through the steps alone.

pub mod build;
pub mod plan;
pub(crate) mod record;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::compress::{self, Compression};
use crate::error::{Error, Kind, Result};
use crate::kernel::{KernelImage, LoaderFeatures};
use crate::sign::SignKey;
use crate::steps::{self, Stage, Step, Tree};
use crate::tree::FileError;
use crate::{fsutil, hosttool, module};

pub use plan::{Facts, Plan, parse_only};

/// The kernel apply reads.
#[derive(Debug, Clone)]
pub enum Kernel {
    /// The kernel's build (object) directory: vmlinux, .config, System.map,
    /// arch/x86/boot/bzImage, the signing key.
    Build(PathBuf),
    /// An installed image (`/boot/vmlinuz-<release>`, with `config-` and
    /// `System.map-<release>` beside it), as a distribution's package
    /// installs it: read, never written. Only the steps that need no image
    /// rewrite are taken (the module hash list is written into a vmlinux).
    Image(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub kernel: Kernel,
    /// INSTALL_MOD_PATH (or its lib/modules/<release>).
    pub modules: PathBuf,
    /// Write vmlinux and bzImage here instead of over the build's own.
    pub kernel_out: Option<PathBuf>,
    /// The kernel boots with `nokaslr` although it could randomize.
    pub assume_nokaslr: bool,
    /// Sign with this key instead of the build's.
    pub sign_key: Option<SignKey>,
    /// Leave rewritten modules unsigned on a kernel that checks but does
    /// not enforce signatures, when neither a key nor a list is at hand.
    pub allow_unsigned: bool,
    /// Run depmod on the tree afterwards (`make modules_install`'s DEPMOD
    /// hook runs the real depmod itself).
    pub depmod: bool,
    /// Say what would be done; write nothing.
    pub dry_run: bool,
    /// The hash the module hash list holds (BLAKE2b-256 only for a kernel
    /// that names `hashes-blake2b`).
    pub manifest_hash: crate::manifest::Hash,
    /// Only these of the plan's fixes (`--only`), with what they need
    /// ([`Plan::narrow`]); all of them when `None`.
    pub only: Option<Vec<Step>>,
}

/// What [`run`] did (or, with `dry_run`, would do).
#[derive(Debug, Serialize)]
pub struct Report {
    pub release: String,
    pub modules_dir: PathBuf,
    pub loader_features: LoaderFeatures,
    pub plan: Plan,
    /// Modules taken through the steps (to be, with `dry_run`).
    pub applied: usize,
    /// Modules found as an earlier run wrote them.
    pub already: usize,
    /// Files whose bytes the steps left as they were (not rewritten).
    pub unchanged: usize,
    /// Files written (modules, vmlinux, bzImage, the record).
    pub written: Vec<PathBuf>,
    /// The modules refused (each left as it is), one line each.
    pub errors: Vec<FileError>,
    /// What was not done, and why (one line each).
    pub notes: Vec<String>,
    pub depmod: bool,
    pub dry_run: bool,
}

impl Report {
    /// Nothing was (or would be) changed.
    pub fn nothing_to_do(&self) -> bool {
        self.applied == 0 && self.written.is_empty()
    }
}

impl crate::report::Report for Report {
    fn render(&self) -> String {
        let mut s = format!(
            "kernel   {} ({})\nloader   {}\nsteps    {}\n",
            self.release,
            self.modules_dir.display(),
            self.loader_features.describe(),
            if self.plan.steps.is_empty() {
                "none".to_string()
            } else {
                self.plan.steps.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
            }
        );
        for l in &self.plan.left_out {
            s += &format!("left out {l}\n");
        }
        for l in &self.notes {
            s += &format!("note     {l}\n");
        }
        if !self.plan.cmdline.is_empty() {
            s += &format!("cmdline  add to the kernel command line: {}\n", self.plan.cmdline.join(" "));
        }
        let verb = if self.dry_run { "would take" } else { "took" };
        s += &format!(
            "modules  {verb} {} through the steps; {} already applied by an earlier run\n",
            self.applied, self.already
        );
        if self.dry_run {
            s += "dry run: nothing written\n";
        } else if self.plan.steps.is_empty() {
            s += "nothing applied (see \"left out\"), nothing written\n";
        } else if self.nothing_to_do() {
            s += "nothing to do: the tree is as an earlier run left it, nothing written\n";
        } else {
            s += &format!("written  {} files", self.written.len());
            if self.unchanged > 0 {
                s += &format!(" ({} modules the steps left byte for byte as they were)", self.unchanged);
            }
            s += "\n";
            if self.depmod {
                s += "depmod   run\n";
            }
        }
        s
    }
}

/// One installed module: its file, its path below the release directory,
/// its name.
struct Installed {
    path: PathBuf,
    rel: String,
    name: String,
    /// The SHA-256 of the file as found.
    sha: String,
}

/// What apply reads before it decides anything: the kernel (its build or
/// installed image, read), the installed modules' directory and the
/// record of an earlier run.
struct Inputs {
    build: build::Build,
    /// The build directory (absolute), when given one.
    build_dir: Option<PathBuf>,
    image: KernelImage,
    release: String,
    /// lib/modules/<release>.
    dir: PathBuf,
    /// INSTALL_MOD_PATH, when `dir` lies below one (what depmod needs).
    root: Option<PathBuf>,
    record: record::Record,
}

/// The installed modules, sorted: those to take through the steps (with
/// how each was compressed), those an earlier run wrote, and those refused.
struct Modules {
    todo: Vec<(Installed, Compression)>,
    already: Vec<Installed>,
    /// Some module is (or, written by an earlier run, was) signed.
    signed: bool,
    errors: Vec<FileError>,
}

/// The final files made in the scratch directory, before anything is
/// installed: the record that will list them, and each file to install
/// (scratch file, installed path).
struct Staged {
    record: record::Record,
    installs: Vec<(PathBuf, PathBuf)>,
}

/// Read the kernel and its modules, plan the steps, take the modules (and
/// the kernel) through them in a scratch directory, then install the
/// results, the image first.
pub fn run(opts: &Options) -> Result<Report> {
    let inputs = read_inputs(opts)?;
    let mut modules = sort_modules(&inputs)?;
    let sign_key = opts.sign_key.clone().or_else(|| {
        inputs.build_dir.as_deref().and_then(|d| build::Build::signing_key(d, inputs.image.config.as_ref()))
    });
    let mut report = plan_steps(opts, &inputs, &mut modules, sign_key.is_some())?;
    if opts.dry_run || report.plan.steps.is_empty() {
        return Ok(report);
    }
    let kernel_out = opts.kernel_out.clone().or_else(|| inputs.build_dir.clone()).unwrap_or_default();
    let list_hash = report.plan.steps.iter().find_map(Step::list_hash);
    remove_stale_temps(&modules, &kernel_out, &inputs.dir);
    let built = &inputs.build.vmlinux;
    if modules.todo.is_empty() && !manifest_stale(list_hash, built, &kernel_out.join("vmlinux"), &modules.already)? {
        return Ok(report);
    }
    let work = fsutil::TempDir::new("apply")?;
    let (kernel, finals) = apply_steps(&inputs, &modules, &report.plan.steps, sign_key, work.path())?;
    let staged = final_files(&modules, &finals, work.path(), &mut report)?;
    install(opts, &inputs, &kernel_out, list_hash.is_some(), &kernel, staged, &mut report)?;
    if opts.depmod {
        run_depmod(&inputs)?;
        report.depmod = true;
    }
    Ok(report)
}

/// The kernel (its build directory or installed image), its release, the
/// module tree of that release and the record an earlier run left there.
fn read_inputs(opts: &Options) -> Result<Inputs> {
    let (mut build, build_dir) = match &opts.kernel {
        Kernel::Build(dir) => {
            let b = build::Build::find(dir)?;
            // The directory as Build::find made it absolute.
            let dir = b.vmlinux.parent().map(Path::to_path_buf);
            (b, dir)
        }
        Kernel::Image(image) => {
            if let Some(out) = &opts.kernel_out {
                return Err(Error::file(
                    Kind::Usage,
                    out,
                    "--kernel-out with --image: an installed image is never written (give --build)",
                ));
            }
            (build::Build::installed(image)?, None)
        }
    };
    let image = KernelImage::open(&build.vmlinux, None)?;
    let release = image.release.clone().ok_or_else(|| {
        Error::file(Kind::Format, &build.vmlinux, "no release string (linux_banner) found in the kernel image")
    })?;
    if build.installed {
        build.find_installed_map(&release);
    }
    let (dir, root) = build::module_tree(&opts.modules, &release)?;
    if opts.depmod && root.is_none() && !opts.dry_run {
        return Err(Error::file(
            Kind::Usage,
            &dir,
            "depmod needs ROOT/lib/modules/<release>: give INSTALL_MOD_PATH, or pass --no-depmod",
        ));
    }
    let record = record::Record::load(&dir)?;
    Ok(Inputs { build, build_dir, image, release, dir, root, record })
}

/// Each installed module: already written by apply, or checked (with its
/// compression, and whether it is signed) to be taken through the steps.
/// A module the kernel would refuse is left alone, and so is every file
/// of a module name found twice.
fn sort_modules(inputs: &Inputs) -> Result<Modules> {
    let (dir, record) = (&inputs.dir, &inputs.record);
    let files = crate::tree::find_modules(std::slice::from_ref(dir))?;
    let mut errors = Vec::new();
    let mut found: Vec<(Installed, Option<(Compression, bool)>)> = Vec::new();
    for path in files {
        let rel = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().into_owned();
        let name = module::name_from_path(&path);
        let checked = crate::tree::isolated(&path, || {
            let sha = record::sha256_file(&path)?;
            if record.wrote(&rel, &sha) {
                return Ok((sha, None));
            }
            let m = module::read_analysed(&path)?;
            inputs.image.accepts(&m, "left as it is")?;
            Ok((sha, Some((m.compression, m.signature.is_some()))))
        });
        match checked {
            Err(e) => errors.push(FileError::from(e)),
            Ok((sha, state)) => found.push((Installed { path, rel, name, sha }, state)),
        }
    }
    // The steps write <name>.ko: one name, one module. Every file of a
    // name found twice is refused and left as it is.
    let mut paths_of: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for (m, _) in &found {
        paths_of.entry(m.name.clone()).or_default().push(m.path.clone());
    }
    let mut todo: Vec<(Installed, Compression)> = Vec::new();
    let mut already: Vec<Installed> = Vec::new();
    let mut signed = false;
    let mut doubles = Vec::new();
    for (m, state) in found {
        let others: Vec<String> =
            paths_of[&m.name].iter().filter(|p| **p != m.path).map(|p| p.display().to_string()).collect();
        if !others.is_empty() {
            doubles.push(FileError::from(Error::file(
                Kind::Usage,
                &m.path,
                format!("module {} also at {}: both left as they are", m.name, others.join(", ")),
            )));
            continue;
        }
        match state {
            None => already.push(m),
            Some((compression, sig)) => {
                signed |= sig;
                todo.push((m, compression));
            }
        }
    }
    errors.extend(doubles);
    // Modules an earlier run signed again are signed: the plan (and the
    // line that shows it) is the same when there is nothing left to do.
    signed |= !already.is_empty() && record.steps.iter().any(|s| s == Step::Sign.name());
    Ok(Modules { todo, already, signed, errors })
}

/// The steps the kernel supports for these modules ([`Plan::of`]), as the
/// report that says so; refused for a sealed kernel the modules cannot be
/// folded against. A build's bzImage that cannot be made again is left
/// out (with a note) unless it is the build directory's own.
fn plan_steps(opts: &Options, inputs: &Inputs, modules: &mut Modules, key: bool) -> Result<Report> {
    let (k, build) = (&inputs.image, &inputs.build);
    let config = k.config.as_ref();
    let facts = Facts {
        features: k.loader_features.clone(),
        fixed_base: opts.assume_nokaslr || matches!(k.kaslr, crate::kernel::Kaslr::No { .. }),
        slide: k.loader_features.has(crate::kernel::slide::FEATURE) && k.slide_base.is_some(),
        signed_modules: modules.signed,
        checks_signatures: config.is_some_and(|c| c.is_enabled("CONFIG_MODULE_SIG")),
        key,
        // The list is written into a vmlinux; an installed bzImage has none.
        manifest_room: !build.installed && crate::manifest::read(&build.vmlinux).is_ok(),
        allow_unsigned: opts.allow_unsigned,
        manifest_hash: opts.manifest_hash,
    };
    let mut plan = Plan::of(&facts);
    if let Some(only) = &opts.only {
        plan = plan.narrow(only, key).map_err(|e| Error::file(Kind::Usage, &build.vmlinux, e))?;
    }
    // A sealed kernel looks nothing up in its own exports after boot: a
    // module left unfolded would be refused at load, so nothing is done.
    if k.loader_features.has(crate::kernel::features::name::EXPORTS_SEALED)
        && !plan.steps.iter().any(|s| matches!(s, Step::Fold | Step::FoldSlide))
    {
        let why = plan.left_out.first().cloned().unwrap_or_default();
        return Err(Error::file(
            Kind::WrongKernel,
            &build.vmlinux,
            format!(
                "the kernel is sealed (exports-sealed): every module must be folded against it, and cannot be here \
                 ({why}); nothing written"
            ),
        ));
    }
    let applied = if plan.steps.is_empty() { 0 } else { modules.todo.len() };
    let mut report = Report {
        release: inputs.release.clone(),
        modules_dir: inputs.dir.clone(),
        loader_features: k.loader_features.clone(),
        plan,
        applied,
        already: modules.already.len(),
        unchanged: 0,
        written: Vec::new(),
        errors: std::mem::take(&mut modules.errors),
        notes: Vec::new(),
        depmod: false,
        dry_run: opts.dry_run,
    };
    if build.installed {
        report.notes.push(installed_note(&build.vmlinux, &k.loader_features));
    }
    let manifest = report.plan.steps.iter().any(|s| s.list_hash().is_some());
    // A kbuild tree's own bzImage must be made again from it: checked
    // here. bootlink's cached build shares its object tree with the line's
    // other builds: the tree is made to hold it again, and checked, under
    // the line's locks when the bzImage is made (install), not here.
    if manifest
        && build.cached.is_none()
        && let Some((_, tree)) = &build.bzimage
    {
        crate::manifest::bzimage::check(tree, &build.vmlinux)?;
    }
    Ok(report)
}

/// A run killed while installing leaves its temporary files beside the
/// modules and the image: remove those of processes that are gone.
fn remove_stale_temps(modules: &Modules, kernel_out: &Path, dir: &Path) {
    let dirs: std::collections::BTreeSet<&Path> = modules
        .todo
        .iter()
        .map(|(m, _)| m.path.as_path())
        .chain(modules.already.iter().map(|m| m.path.as_path()))
        .filter_map(Path::parent)
        .chain([kernel_out, dir])
        .collect();
    for d in dirs {
        fsutil::remove_stale_temps(d);
    }
}

/// Take the modules through the module steps, then (with the modules an
/// earlier run wrote) the kernel through the image steps, in `work`.
/// Returns the kernel as the steps left it and each module's file after
/// the module steps (in `todo`'s order).
fn apply_steps(
    inputs: &Inputs,
    modules: &Modules,
    steps: &[Step],
    sign_key: Option<SignKey>,
    work: &Path,
) -> Result<(PathBuf, Vec<(PathBuf, PathBuf)>)> {
    let mut tree = Tree {
        image: &inputs.image,
        kernel: inputs.build.vmlinux.clone(),
        modules: modules.todo.iter().map(|(m, _)| (m.name.clone(), m.path.clone())).collect(),
        cmdline: Vec::new(),
        raw_module: String::new(),
        work: work.to_path_buf(),
        kernel_copy: work.join("vmlinux"),
        sign_key,
    };
    let (module_steps, image_steps): (Vec<Step>, Vec<Step>) =
        steps.iter().cloned().partition(|s| s.stage() == Stage::Modules);
    if !tree.modules.is_empty() {
        steps::apply_all(&module_steps, &mut tree)?;
    }
    let finals: Vec<(PathBuf, PathBuf)> =
        modules.todo.iter().zip(&tree.modules).map(|((m, _), (_, f))| (m.path.clone(), f.clone())).collect();
    // The list covers every module: those rewritten now and those an
    // earlier run wrote.
    tree.modules.extend(modules.already.iter().map(|m| (m.name.clone(), m.path.clone())));
    if !image_steps.is_empty() {
        steps::apply_all(&image_steps, &mut tree)?;
    }
    Ok((tree.kernel, finals))
}

/// Every module's final file (compressed back as it was installed: the
/// paths in modules.order and the initramfs tools' lists still hold),
/// made before anything is installed, in the scratch directory; and the
/// record that will list them. A module the steps left as it was is
/// counted in the report, not installed.
fn final_files(modules: &Modules, finals: &[(PathBuf, PathBuf)], work: &Path, report: &mut Report) -> Result<Staged> {
    let mut new_record = record::Record { format: 1, steps: names_of(&report.plan.steps), ..Default::default() };
    let ready = work.join("install");
    std::fs::create_dir_all(&ready).map_err(|e| Error::io(&ready, e))?;
    let mut installs = Vec::new();
    for (i, ((m, kind), (orig, fin))) in modules.todo.iter().zip(finals).enumerate() {
        let (plain, _) = module::load_bytes(fin)?;
        let bytes = if *kind == Compression::None {
            plain.to_vec()
        } else {
            compress::compress(&plain, *kind).map_err(|e| e.at(orig))?
        };
        let sha = fsutil::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes));
        new_record.modules.insert(m.rel.clone(), sha.clone());
        // Unchanged: the same digest as the file found.
        if sha == m.sha {
            report.unchanged += 1;
            continue;
        }
        let file = ready.join(i.to_string());
        fsutil::write_atomic_nosync(&file, &bytes)?;
        installs.push((file, orig.clone()));
    }
    for m in &modules.already {
        new_record.modules.insert(m.rel.clone(), m.sha.clone());
    }
    Ok(Staged { record: new_record, installs })
}

/// Install: every file is first written whole beside where it goes (the
/// modules, then the image and the record), then the files are put in
/// place by renames, the image first (see the module's doc), then the
/// record, then the modules. A file that cannot be written (a full file
/// system, a file size limit) is never half there: a module that does not
/// fit is that module's one line, left as installed and out of the record,
/// and the rest are still written; an image or record that does not fit
/// leaves every file as it was. A run killed while writing leaves only
/// temporaries (removed by the next run); one killed among the renames
/// leaves each module either as installed (its digest not the record's:
/// taken through the steps next time) or as written (in the record: left
/// alone), never a rewritten module taken through the steps twice, and
/// the record never lists a digest for a module apply did not write.
fn install(
    opts: &Options,
    inputs: &Inputs,
    kernel_out: &Path,
    manifest: bool,
    kernel: &Path,
    staged: Staged,
    report: &mut Report,
) -> Result<()> {
    let Staged { record: mut new_record, installs } = staged;
    // The image and the record first: a module that does not fit leaves
    // room for neither to be written after it.
    let mut image = fsutil::Staged::new();
    let mut image_paths = Vec::new();
    if manifest {
        std::fs::create_dir_all(kernel_out).map_err(|e| Error::io(kernel_out, e))?;
        let out = kernel_out.join("vmlinux");
        let bytes = fsutil::read_input(kernel, fsutil::MAX_BINARY)?;
        let at = image.write(&out, &bytes)?;
        image_paths.push(out.clone());
        if let Some((bz, obj)) = &inputs.build.bzimage {
            let bz_out = if opts.kernel_out.is_some() { kernel_out.join("bzImage") } else { bz.clone() };
            // Made from, and put in place with, the staged vmlinux.
            let (_, built) = match &inputs.build.cached {
                Some(cached) => crate::kbuild::with_tree_of(cached, |tree| {
                    crate::manifest::bzimage::rebuild_bytes(tree, &at, &bz_out)
                })?,
                None => crate::manifest::bzimage::rebuild_bytes(obj, &at, &bz_out)?,
            };
            image.write(&bz_out, &built)?;
            image_paths.push(bz_out);
        }
        new_record.vmlinux = Some(fsutil::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
    }
    let record_path = new_record.stage(&inputs.dir, &mut image)?;
    let mut modules = fsutil::Staged::new();
    let mut module_paths = Vec::new();
    let mut left = false;
    for (file, orig) in installs {
        let bytes = fsutil::read_input(&file, fsutil::MAX_BINARY)?;
        match modules.write(&orig, &bytes) {
            Ok(_) => module_paths.push(orig),
            Err(e) => {
                // Left as installed: the record must not claim it.
                let rel = orig.strip_prefix(&inputs.dir).unwrap_or(&orig).to_string_lossy().into_owned();
                new_record.modules.remove(&rel);
                report.errors.push(FileError::from(e));
                left = true;
            }
        }
    }
    if left {
        // Fewer entries: the room of the record staged first is enough.
        image.discard(&record_path);
        new_record.stage(&inputs.dir, &mut image)?;
    }
    image.commit()?;
    report.written.extend(image_paths);
    report.written.push(record_path);
    modules.commit()?;
    report.written.extend(module_paths);
    Ok(())
}

/// depmod on the tree, with the kernel's System.map when there is one.
fn run_depmod(inputs: &Inputs) -> Result<()> {
    let root = inputs.root.as_ref().expect("checked in read_inputs");
    let mut cmd = Command::new("depmod");
    cmd.arg("-a").arg("-b").arg(root);
    if let Some(map) = &inputs.build.system_map {
        cmd.arg("-F").arg(map);
    }
    cmd.arg(&inputs.release);
    hosttool::run(&mut cmd, "depmod for the applied modules", "kmod")?;
    Ok(())
}

/// What an installed image leaves out, and what the build would add.
fn installed_note(image: &Path, features: &LoaderFeatures) -> String {
    let what = if features.has(crate::kernel::features::name::HASHES) {
        "the module hash list (the kernel names `hashes`; it is written into vmlinux, then the bzImage is made \
         again), in place of the signatures"
    } else {
        "nothing for this kernel (it names no module hash list, `hashes`, patch `hash-manifest`): the list needs \
         the series and vmlinux"
    };
    format!(
        "{} is an installed image: read, never written; only steps that need no image rewrite are taken. \
         The build directory (--build, with vmlinux) would add {what}",
        image.display()
    )
}

fn names_of(steps: &[Step]) -> Vec<String> {
    steps.iter().map(|s| s.name().to_string()).collect()
}

/// With every module as an earlier run wrote it: does the kernel's list
/// still need writing into `target` (absent, made before the build's
/// vmlinux was linked again, of another hash than `hash`, or missing a
/// module)?
fn manifest_stale(
    hash: Option<crate::manifest::Hash>,
    built: &Path,
    target: &Path,
    modules: &[Installed],
) -> Result<bool> {
    let Some(hash) = hash else { return Ok(false) };
    if !target.is_file() {
        return Ok(true);
    }
    if target != built {
        let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).map_err(|e| Error::io(p, e));
        if mtime(built)? > mtime(target)? {
            return Ok(true);
        }
    }
    let listed = crate::manifest::read(target)?;
    let Some(listed) = listed else { return Ok(true) };
    if listed.hash != hash {
        return Ok(true);
    }
    for m in modules {
        let d = crate::manifest::digest_of(listed.hash, &m.path)?;
        if !listed.contains(&d) {
            return Ok(true);
        }
    }
    Ok(false)
}
