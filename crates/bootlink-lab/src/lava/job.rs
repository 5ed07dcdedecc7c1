//! `bootlink lab --lava DIR`: the lab's run written as LAVA jobs. Each
//! variant is built as the lab builds it (its steps, its initramfs with the
//! lab's /init and markers, the module files inside it), and each
//! repetition becomes one job definition that boots that kernel and
//! initramfs on a device type the user names, with the lab's kernel
//! command line. The guest prints what a lab boot prints; `bootlink lava
//! import` reads it back from the jobs' logs.
//!
//! What DIR holds:
//! - `VARIANT-N.yaml`: one job per variant and repetition (LAVA's job
//!   schema, checked by `lava_common.schemas.validate` in tests/debian/lava.rs);
//! - `artifacts/VARIANT/`: the kernel image and `initramfs.cpio` (for
//!   U-Boot `initramfs.cpio.uboot`: the same cpio behind U-Boot's legacy
//!   ramdisk header, which LAVA's u-boot boot needs), named in the jobs by
//!   URL (`--lava-url`, default `file://` DIR) with their SHA-256, which
//!   LAVA checks after downloading;
//! - `bootlink-lava.json`: what the import needs (the run's record, each
//!   variant's marker tag, module sizes, whether its loads are traced);
//! - `device-qemu.yaml` for the qemu device type: the device dictionary
//!   LAVA's `qemu.jinja2` renders for the jobs' context, for `lava-run`
//!   without a server.
//!
//! The console markers: each variant's /init frames its output with the
//! tag `lava-vI` (I the variant's index), so a log says which variant it
//! is whatever its file is called; the boot action waits for the begin
//! marker as LAVA's "kernel-start-message" (the lab's kernels boot
//! `quiet`) and ends at the status line as its prompt.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::lab::arch::Arch;
use crate::lab::scenario::{self, Scenario};
use crate::lava::uimage;
use crate::run::results::Run;
use bootlink::error::{Error, Kind, Result};
use bootlink::fsutil;

/// The file in a jobs directory that `bootlink lava import` reads.
pub const MANIFEST: &str = "bootlink-lava.json";

/// The device dictionary written for the qemu device type.
pub const QEMU_DEVICE: &str = "device-qemu.yaml";

/// The initramfs of a U-Boot board's jobs: the lab's cpio behind U-Boot's
/// legacy ramdisk header.
pub const UBOOT_INITRAMFS: &str = "initramfs.cpio.uboot";

const MANIFEST_FORMAT: u32 = 1;

/// How the device type boots a kernel and an initramfs (its LAVA boot
/// method and the deploy that goes with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootMethod {
    /// LAVA's qemu device type: `deploy: to: tmpfs`, `boot: method: qemu`.
    Qemu,
    /// A board with U-Boot: `deploy: to: tftp`, `boot: method: u-boot`, `commands: ramdisk`.
    UBoot,
    /// A board with GRUB (x86 PCs): `deploy: to: tftp`, `boot: method: grub`, `commands: ramdisk`.
    Grub,
}

impl BootMethod {
    pub fn parse(s: &str) -> Option<BootMethod> {
        match s {
            "qemu" => Some(BootMethod::Qemu),
            "u-boot" | "uboot" => Some(BootMethod::UBoot),
            "grub" => Some(BootMethod::Grub),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BootMethod::Qemu => "qemu",
            BootMethod::UBoot => "u-boot",
            BootMethod::Grub => "grub",
        }
    }

    /// The method a device type boots with when none is named: qemu for
    /// `qemu`, none for a board (the user names it).
    pub fn of_device_type(device_type: &str) -> Option<BootMethod> {
        (device_type == "qemu").then_some(BootMethod::Qemu)
    }

    /// The method the user named (`--lava-boot`), or the device type's own:
    /// a usage error for an unknown name, or a board's type named alone.
    pub fn choose(named: Option<&str>, device_type: &str) -> Result<BootMethod> {
        match named {
            Some(b) => BootMethod::parse(b)
                .ok_or_else(|| Error::new(Kind::Usage, format!("--lava-boot {b:?}: use qemu, u-boot or grub"))),
            None => BootMethod::of_device_type(device_type).ok_or_else(|| {
                Error::new(
                    Kind::Usage,
                    format!("--lava-device-type {device_type}: name its boot method with --lava-boot u-boot or grub"),
                )
            }),
        }
    }
}

/// What `--lava` asks for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The directory to write (jobs, artifacts, manifest).
    pub dir: PathBuf,
    /// The LAVA device type the jobs ask for (`qemu`, or a board's type).
    pub device_type: String,
    pub boot: BootMethod,
    /// Where LAVA will download DIR's files from (`http://host/path`);
    /// None: `file://` DIR, for a dispatcher on this machine.
    pub url: Option<String>,
    /// A device tree blob for the board's kernel (u-boot).
    pub dtb: Option<PathBuf>,
    /// The kernel's image type for U-Boot (`image`, `zimage`, `uimage`);
    /// default `image` (an arm64 Image).
    pub kernel_type: Option<String>,
}

/// One variant as the import needs it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobVariant {
    pub name: String,
    /// The marker tag its /init frames its output with.
    pub tag: String,
    /// Its loads are ftraced (the trace section is in the console).
    pub traced: bool,
    /// Each module file's size (name, bytes), in load order.
    pub sizes: Vec<(String, u64)>,
    /// Each module's undefined symbols, counted on the host: its load's
    /// lookups where the trace does not count them.
    #[serde(default)]
    pub lookups: Vec<(String, u64)>,
    /// Its job files, one per repetition.
    pub jobs: Vec<String>,
    /// The SHA-256 of the initramfs file its jobs download (with U-Boot's
    /// header for u-boot), which LAVA logs when it downloads it: the import
    /// refuses a job log of another initramfs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub initramfs_sha256: String,
}

/// `bootlink-lava.json`: the run's record (no repetitions yet), the device
/// type, and each variant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format: u32,
    pub device_type: String,
    pub boot_method: BootMethod,
    /// The timing the jobs ask for: "deterministic" (the qemu device type
    /// given the lab's -icount), "realtime", or "realtime (hardware)".
    pub timing: String,
    pub run: Run,
    pub variants: Vec<JobVariant>,
}

/// What `--lava` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub dir: PathBuf,
    pub device_type: String,
    pub boot_method: &'static str,
    pub timing: String,
    pub jobs: Vec<PathBuf>,
    /// The device dictionary for `lava-run` (qemu device type only).
    pub device: Option<PathBuf>,
}

/// The marker tag of the i-th variant's /init.
pub fn tag(i: usize) -> String {
    format!("lava-v{i}")
}

/// The QEMU options the lab's target and clock add on the qemu device
/// type, as the jobs' `context: extra_options` (the device-type template
/// appends them to its own): the pinned CPU and machine (x86-64; arm64's
/// template takes `cpu` and `machine` from the context), TCG, no default
/// devices but the console, and for a deterministic run the lab's -icount,
/// guest random seed and real-time clock.
fn qemu_extra_options(sc: &Scenario) -> Vec<String> {
    let mut o = Vec::new();
    if sc.target.arch == Arch::X86_64 {
        o.push(format!("-cpu {}", sc.target.cpu_arg()));
        o.push(format!("-machine {}", sc.target.machine));
    }
    o.push("-accel tcg".into());
    o.push(format!("-smp {}", sc.cpus));
    o.push("-nodefaults".into());
    o.push("-serial mon:stdio".into());
    o.push("-no-reboot".into());
    if sc.deterministic {
        o.push("-icount shift=0,sleep=off".into());
        o.push(format!("-seed {}", crate::lab::qemu::GUEST_RANDOM_SEED));
        o.push(format!("-rtc {}", crate::lab::qemu::GUEST_RTC));
    }
    o
}

/// LAVA's name of the architecture (the qemu template's `arch`).
fn lava_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "amd64",
        Arch::Arm64 => "arm64",
    }
}

fn sha256_of(path: &Path) -> Result<String> {
    let data = fsutil::map_file(path)?;
    Ok(fsutil::hex(&sha2::Sha256::digest(&data[..])))
}

/// Copy `src` to `dest` atomically. A copy, not a link into the cache:
/// DIR is what gets served to the workers, on its own.
fn copy_atomic(src: &Path, dest: &Path) -> Result<()> {
    let data = fsutil::map_file(src)?;
    fsutil::write_atomic(dest, &data)
}

/// The kernel command line of a board: the variant's, less the lab's
/// console (the board's device type names its own).
fn board_cmdline(cmdline: &str) -> String {
    cmdline.split_whitespace().filter(|w| !w.starts_with("console=")).collect::<Vec<_>>().join(" ")
}

/// Refuse what the jobs cannot carry, before anything is built.
fn check(sc: &Scenario, opts: &Options) -> Result<()> {
    for v in &sc.variants {
        if !v.spec.workloads.is_empty() || v.spec.loader != crate::workload::modules::Loader::Insmod {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "--lava: variant {} runs a workload or a loader other than insmod; the LAVA jobs carry \
                     module loading with busybox insmod only",
                    v.spec.name
                ),
            ));
        }
    }
    if opts.device_type.is_empty()
        || !opts.device_type.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(Error::new(
            Kind::Usage,
            format!("--lava-device-type {:?}: not a device type name", opts.device_type),
        ));
    }
    if opts.boot == BootMethod::Qemu && opts.dtb.is_some() {
        return Err(Error::new(Kind::Usage, "--lava-dtb is for a board's U-Boot, not the qemu boot method"));
    }
    if opts.boot == BootMethod::Grub && sc.target.arch != Arch::X86_64 {
        return Err(Error::new(Kind::Usage, "--lava-boot grub: the jobs' GRUB boot is for x86-64 boards"));
    }
    if let Some(t) = &opts.kernel_type
        && !["image", "zimage", "uimage"].contains(&t.as_str())
    {
        return Err(Error::new(Kind::Usage, format!("--lava-kernel-type {t:?}: use image, zimage or uimage")));
    }
    Ok(())
}

/// What an earlier write into `dir` made, as its manifest lists them: the
/// job files and each variant's artifact directory, removed before a new
/// write so that no job of an earlier run (one with more variants or
/// repetitions) stays beside the new ones. Only plain names are taken
/// from the old manifest (a name with a path in it is not bootlink's and
/// is left alone); a manifest that does not read is left as it is.
fn remove_earlier(dir: &Path) -> Result<()> {
    let Ok(data) = std::fs::read(dir.join(MANIFEST)) else { return Ok(()) };
    let Ok(old) = serde_json::from_slice::<Manifest>(&data) else { return Ok(()) };
    let plain = |n: &str| fsutil::is_plain_name(n);
    for v in old.variants.iter().filter(|v| plain(&v.name)) {
        for j in v.jobs.iter().filter(|j| plain(j)) {
            match std::fs::remove_file(dir.join(j)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&dir.join(j), e)),
                _ => {}
            }
        }
        let a = dir.join("artifacts").join(&v.name);
        if a.is_dir() {
            std::fs::remove_dir_all(&a).map_err(|e| Error::io(&a, e))?;
        }
    }
    Ok(())
}

/// Build every variant as the lab does and write its jobs into `opts.dir`
/// (what an earlier write there made is replaced, not added to).
pub fn write(sc: &Scenario, opts: &Options) -> Result<Report> {
    check(sc, opts)?;
    let dir = &opts.dir;
    std::fs::create_dir_all(dir.join("artifacts")).map_err(|e| Error::io(dir, e))?;
    let dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    let base = match &opts.url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => format!("file://{}", dir.display()),
    };
    let work = crate::lab::TempDir::new("lava")?;
    let (mut run, built) = scenario::build(sc, work.path(), &tag)?;
    remove_earlier(&dir)?;
    let timing = match opts.boot {
        BootMethod::Qemu if sc.deterministic => "deterministic".to_string(),
        BootMethod::Qemu => run.timing.clone(),
        _ => "realtime (hardware)".to_string(),
    };
    run.source = "lava".into();
    run.device_type = opts.device_type.clone();
    run.timing = timing.clone();
    if opts.boot != BootMethod::Qemu {
        run.qemu_version.clear();
        run.cpu_model.clear();
        run.machine.clear();
    }
    let extra = qemu_extra_options(sc);
    let dtb = match &opts.dtb {
        Some(p) => {
            let dest = dir.join("artifacts").join(p.file_name().unwrap_or_else(|| "board.dtb".as_ref()));
            copy_atomic(p, &dest)?;
            Some((dest.clone(), sha256_of(&dest)?))
        }
        None => None,
    };
    let url_of = |p: &Path| format!("{base}/{}", p.strip_prefix(&dir).expect("under DIR").display());
    let mut jobs = Vec::new();
    let mut variants = Vec::new();
    for (i, b) in built.iter().enumerate() {
        let name = &b.meta.name;
        let adir = dir.join("artifacts").join(name);
        std::fs::create_dir_all(&adir).map_err(|e| Error::io(&adir, e))?;
        let kname = b.meta.kernel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or("kernel".into());
        let kernel = adir.join(&kname);
        copy_atomic(&b.meta.kernel, &kernel)?;
        let initrd = match opts.boot {
            // U-Boot takes a ramdisk by its legacy header (crates/bootlink-lab/src/lava/uimage.rs)
            BootMethod::UBoot => {
                let p = adir.join(UBOOT_INITRAMFS);
                let data = fsutil::map_file(&b.initramfs)?;
                fsutil::write_atomic(&p, &uimage::ramdisk(&data, sc.target.arch)?)?;
                p
            }
            BootMethod::Qemu | BootMethod::Grub => {
                let p = adir.join("initramfs.cpio");
                copy_atomic(&b.initramfs, &p)?;
                p
            }
        };
        let (ksum, isum) = (sha256_of(&kernel)?, sha256_of(&initrd)?);
        let tag = tag(i);
        let mut files = Vec::new();
        for rep in 0..sc.repetitions {
            let file = format!("{name}-{rep}.yaml");
            let text = job_yaml(&JobText {
                sc,
                opts,
                variant: name,
                rep,
                tag: &tag,
                cmdline: &b.meta.cmdline,
                kernel: (&url_of(&kernel), &ksum),
                initrd: (&url_of(&initrd), &isum),
                dtb: dtb.as_ref().map(|(p, s)| (url_of(p), s.clone())),
                extra: &extra,
            });
            fsutil::write_atomic(&dir.join(&file), text.as_bytes())?;
            jobs.push(dir.join(&file));
            files.push(file);
        }
        variants.push(JobVariant {
            name: name.clone(),
            tag,
            traced: scenario::traced_loads(sc, b),
            sizes: b.facts.sizes.clone(),
            lookups: b.facts.lookups.clone(),
            jobs: files,
            initramfs_sha256: isum,
        });
        // The job boots a copy: the record names what it is a copy of
        // (unless the lab already made the image from another kernel), so
        // what reads it can say the kernel's build and config.
        let v = &mut run.variants[i];
        if v.made_from.as_os_str().is_empty() {
            v.made_from = b.meta.kernel.clone();
        }
        v.kernel = kernel;
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        device_type: opts.device_type.clone(),
        boot_method: opts.boot,
        timing: timing.clone(),
        run,
        variants,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("serializable");
    fsutil::write_atomic(&dir.join(MANIFEST), &json)?;
    let device = if opts.boot == BootMethod::Qemu {
        let p = dir.join(QEMU_DEVICE);
        fsutil::write_atomic(&p, qemu_device_dictionary(sc, &extra).as_bytes())?;
        Some(p)
    } else {
        None
    };
    Ok(Report { dir, device_type: opts.device_type.clone(), boot_method: opts.boot.name(), timing, jobs, device })
}

struct JobText<'a> {
    sc: &'a Scenario,
    opts: &'a Options,
    variant: &'a str,
    rep: usize,
    tag: &'a str,
    cmdline: &'a str,
    kernel: (&'a str, &'a str),
    initrd: (&'a str, &'a str),
    dtb: Option<(String, String)>,
    extra: &'a [String],
}

/// A LAVA job definition: the keys of LAVA's job schema that bootlink's
/// jobs use, in the order they are written. Serialized by the YAML crate
/// (`serde-saphyr`, docs/lava.md); read back by [`parse_job`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub job_name: String,
    pub device_type: String,
    pub visibility: String,
    pub priority: String,
    pub timeouts: Timeouts,
    pub metadata: Metadata,
    pub context: Context,
    pub actions: Vec<Action>,
}

impl Job {
    /// The job's deploy action.
    pub fn deploy(&self) -> Option<&Deploy> {
        self.actions.iter().find_map(|a| match a {
            Action::Deploy(d) => Some(&**d),
            _ => None,
        })
    }

    /// The job's boot action.
    pub fn boot(&self) -> Option<&Boot> {
        self.actions.iter().find_map(|a| match a {
            Action::Boot(b) => Some(b),
            _ => None,
        })
    }
}

/// A LAVA timeout in one of its units (`{seconds: N}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timeout {
    Minutes(u64),
    Seconds(u64),
}

/// The job's `timeouts`: the whole job, each action and connection by
/// default, and the auto-login action's by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeouts {
    pub job: Timeout,
    pub action: Timeout,
    pub connection: Timeout,
    pub actions: NamedTimeouts,
    pub connections: NamedTimeouts,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedTimeouts {
    #[serde(rename = "auto-login-action")]
    pub auto_login_action: Timeout,
}

/// The job's `metadata`: what the jobs directory's manifest also says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(rename = "bootlink.variant")]
    pub variant: String,
    #[serde(rename = "bootlink.repetition")]
    pub repetition: usize,
    #[serde(rename = "bootlink.module_set")]
    pub module_set: String,
    #[serde(rename = "bootlink.tag")]
    pub tag: String,
}

/// The job's `context`, which the server renders the device type's
/// template with: the qemu type's keys, or a board's kernel arguments.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// LAVA's qemu template reads the string "True".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_kvm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_options: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_kernel_args: Option<String>,
}

/// One item of `actions`: a mapping whose one key is the action's kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Deploy(Box<Deploy>),
    Boot(Boot),
}

/// Where a deploy puts the images (and a qemu boot's `media`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeployTo {
    Tmpfs,
    Tftp,
}

/// The deploy action: the qemu type's `images`, or a board's kernel,
/// ramdisk and dtb over TFTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deploy {
    pub to: DeployTo,
    pub timeout: Timeout,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<QemuImages>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Artifact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramdisk: Option<Artifact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtb: Option<Artifact>,
}

impl Deploy {
    /// Every file the deploy downloads: kernel, initramfs, then a dtb.
    pub fn artifacts(&self) -> Vec<&Artifact> {
        let images = self.images.iter().flat_map(|i| [&i.kernel, &i.initrd]);
        images.chain(&self.kernel).chain(&self.ramdisk).chain(&self.dtb).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QemuImages {
    pub kernel: Artifact,
    pub initrd: Artifact,
}

/// A file LAVA downloads (and checks by its SHA-256), with what the
/// deploy says of it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Artifact {
    pub url: String,
    pub sha256sum: String,
    /// The qemu type's QEMU arguments for it (`{kernel}`, `{initrd}`: its path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_arg: Option<String>,
    /// A U-Boot kernel's image type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modules: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_overlay: Option<bool>,
    /// `u-boot`: the ramdisk already has U-Boot's header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// The boot action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boot {
    pub method: BootMethod,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<DeployTo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<String>,
    pub timeout: Timeout,
    pub parameters: BootParameters,
    pub prompts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootParameters {
    /// A Python regular expression LAVA waits for as the kernel's start.
    #[serde(rename = "kernel-start-message")]
    pub kernel_start_message: String,
}

/// A job's YAML as the YAML crate writes it with its defaults, which
/// quote a string that YAML 1.1 (PyYAML, which LAVA reads jobs with) would
/// take for another type (`yes`, `on`, `1_000`, a date), less its folding
/// of long strings (`>`): a job's lines stay whole, to grep.
pub fn job_to_yaml(job: &Job) -> String {
    let opts = serde_saphyr::ser_options! { prefer_block_scalars: false };
    serde_saphyr::to_string_with_options(job, opts).expect("a job serializes")
}

/// A job definition's text, read into a [`Job`] (what bootlink wrote).
pub fn parse_job(text: &str) -> std::result::Result<Job, String> {
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}

/// One job definition.
fn job(j: &JobText) -> Job {
    let sc = j.sc;
    let seconds = sc.timeout.as_secs().max(60);
    let secs = Timeout::Seconds(seconds);
    let begin = crate::lab::initramfs::begin_marker(j.tag);
    let artifact = |(url, sum): (&str, &str)| Artifact { url: url.into(), sha256sum: sum.into(), ..Default::default() };
    let (context, deploy) = match j.opts.boot {
        BootMethod::Qemu => {
            let arm64 = sc.target.arch == Arch::Arm64;
            let context = Context {
                arch: Some(lava_arch(sc.target.arch).into()),
                no_kvm: Some("True".into()),
                memory: Some(sc.memory_mib),
                cpu: arm64.then(|| sc.target.cpu_model.clone()),
                machine: arm64.then(|| sc.target.machine.clone()),
                extra_options: Some(j.extra.to_vec()),
                ..Default::default()
            };
            let images = QemuImages {
                kernel: Artifact {
                    image_arg: Some(format!("-kernel {{kernel}} -append \"{}\"", j.cmdline)),
                    ..artifact(j.kernel)
                },
                initrd: Artifact { image_arg: Some("-initrd {initrd}".into()), ..artifact(j.initrd) },
            };
            let deploy = Deploy {
                to: DeployTo::Tmpfs,
                timeout: Timeout::Minutes(10),
                os: None,
                images: Some(images),
                kernel: None,
                ramdisk: None,
                dtb: None,
            };
            (context, deploy)
        }
        BootMethod::UBoot | BootMethod::Grub => {
            let uboot = j.opts.boot == BootMethod::UBoot;
            let context = Context { extra_kernel_args: Some(board_cmdline(j.cmdline)), ..Default::default() };
            let kernel_type = j.opts.kernel_type.as_deref().unwrap_or("image");
            let deploy = Deploy {
                to: DeployTo::Tftp,
                timeout: Timeout::Minutes(10),
                os: Some("oe".into()),
                images: None,
                kernel: Some(Artifact { kind: uboot.then(|| kernel_type.into()), ..artifact(j.kernel) }),
                ramdisk: Some(Artifact {
                    install_modules: Some(false),
                    install_overlay: Some(false),
                    header: uboot.then(|| "u-boot".into()),
                    ..artifact(j.initrd)
                }),
                dtb: j.dtb.as_ref().map(|(u, s)| artifact((u, s))),
            };
            (context, deploy)
        }
    };
    let qemu = j.opts.boot == BootMethod::Qemu;
    let boot = Boot {
        method: j.opts.boot,
        media: qemu.then_some(DeployTo::Tmpfs),
        commands: (!qemu).then(|| "ramdisk".into()),
        timeout: secs,
        parameters: BootParameters { kernel_start_message: regex_literal(&begin) },
        prompts: vec![format!("=== BOOTLINK STATUS {} -?[0-9]+ ===", j.tag)],
    };
    Job {
        job_name: format!("bootlink {} {} #{}", sc.module_set, j.variant, j.rep + 1),
        device_type: j.opts.device_type.clone(),
        visibility: "public".into(),
        priority: "medium".into(),
        timeouts: Timeouts {
            job: Timeout::Seconds(seconds * 2 + 600),
            action: secs,
            connection: secs,
            actions: NamedTimeouts { auto_login_action: secs },
            connections: NamedTimeouts { auto_login_action: secs },
        },
        metadata: Metadata {
            variant: j.variant.into(),
            repetition: j.rep,
            module_set: sc.module_set.clone(),
            tag: j.tag.into(),
        },
        context,
        actions: vec![Action::Deploy(Box::new(deploy)), Action::Boot(boot)],
    }
}

/// One job definition's text: a comment saying what it is, then the job.
fn job_yaml(j: &JobText) -> String {
    let sc = j.sc;
    let mut y = format!(
        "# bootlink lab --lava: variant {}, repetition {} of {}, module set {}.\n\
         # The guest prints the lab's markers; `bootlink lava import` reads this job's log.\n",
        j.variant,
        j.rep + 1,
        sc.repetitions,
        sc.module_set
    );
    y.push_str(&job_to_yaml(&job(j)));
    y
}

/// `s` as a Python regular expression matching itself.
fn regex_literal(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.^$*+?{}[]|()".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The device dictionary LAVA's `qemu.jinja2` (on `base.jinja2`) renders
/// for the jobs' context (`arch`, `no_kvm`, `memory`, `extra_options`, and
/// on arm64 `cpu` and `machine`): what a LAVA server would hand its
/// dispatcher, for `lava-run --device` without one. Its default NIC stays
/// (`-net nic,model=virtio ... -net user`), as on a server's qemu device.
fn qemu_device_dictionary(sc: &Scenario, extra: &[String]) -> String {
    let arch = lava_arch(sc.target.arch);
    let command = match sc.target.arch {
        Arch::X86_64 => "qemu-system-x86_64",
        Arch::Arm64 => "qemu-system-aarch64",
    };
    let arch_options = match sc.target.arch {
        Arch::X86_64 => String::new(),
        Arch::Arm64 => {
            format!("          - -cpu {}\n          - -machine {}\n", sc.target.cpu_model, sc.target.machine)
        }
    };
    let extra = extra.iter().map(|o| format!("'{o}'")).collect::<Vec<_>>().join(", ");
    format!(
        "# The qemu device type's dictionary (LAVA's qemu.jinja2 on base.jinja2) rendered\n\
         # for the context of bootlink's jobs; written by `bootlink lab --lava` for\n\
         # `lava-run --device {QEMU_DEVICE} --job-id N --output-dir DIR JOB.yaml`.\n\
         constants:\n  posix:\n    lava_test_sh_cmd: /bin/sh\n    lava_test_results_dir: /lava-%s\n    \
         lava_test_shell_file: ~/.bashrc\n  \
         shutdown-message: 'The system is going down for reboot NOW'\n  \
         kernel-start-message: 'Linux version [0-9]'\n  default-shell-prompt: 'lava-test: # '\n  \
         spawn_maxread: '4092'\n  failure_retry: 1\n  boot_retry: 1\n\
         parameters:\n  pass:\n\
         available_architectures:\n- {arch}\n\
         actions:\n  deploy:\n    connections:\n      serial:\n      lxc:\n    methods:\n      nfs:\n      lxc:\n      \
         image:\n        parameters:\n          guest:\n            size: 512\n            interface: ide\n            \
         driveid: lavatest\n  boot:\n    connections:\n      serial:\n      ssh:\n      lxc:\n    methods:\n      \
         qemu:\n        parameters:\n          command: {command}\n          options:\n{arch_options}          \
         - -nographic\n          - -net nic,model=virtio,macaddr=52:54:00:12:34:58 -net user\n          \
         - -m {memory}\n          - -monitor none\n          extra: [{extra}]\n\
         timeouts:\n  actions:\n    auto-login-action:\n      minutes: 2\n  connections:\n    auto-login-action:\n      \
         minutes: 2\n",
        memory = sc.memory_mib,
    )
}

/// What `--lava` prints: the jobs and how to run them.
impl bootlink::report::Report for Report {
    fn render(&self) -> String {
        let r = self;
        let mut s = format!(
            "{} LAVA job(s) for device type {} (boot method {}, timing {}) in {}\n",
            r.jobs.len(),
            r.device_type,
            r.boot_method,
            r.timing,
            r.dir.display()
        );
        for j in &r.jobs {
            s.push_str(&format!("  {}\n", j.display()));
        }
        match &r.device {
            Some(d) => s.push_str(&format!(
                "without a server: lava-run --device {} --job-id N --output-dir OUT JOB.yaml 2> N.yaml\n",
                d.display()
            )),
            None => {
                s.push_str("submit: lavacli jobs submit JOB.yaml (the artifacts' URLs must reach the dispatcher)\n")
            }
        }
        s.push_str(&format!("then: bootlink lava import --jobs {} LOGS... -o RUNDIR\n", r.dir.display()));
        s
    }
}

/// A jobs directory's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = if dir.is_dir() { dir.join(MANIFEST) } else { dir.to_path_buf() };
    let data = fsutil::map_file(&path)?;
    let m: Manifest = serde_json::from_slice(&data).map_err(|e| {
        let e = crate::run::json_error(&data, &e);
        Error::file(Kind::Format, &path, format!("not a bootlink-lava.json (written by `bootlink lab --lava`): {e}"))
    })?;
    if m.format != MANIFEST_FORMAT {
        return Err(Error::file(
            Kind::Format,
            &path,
            format!("bootlink-lava.json format {} is not {MANIFEST_FORMAT}", m.format),
        ));
    }
    // The variants' names become file names (the import's
    // logs/NAME-N.log): each one plain. check_manifest: the run's variants
    // those of the jobs, in their order (the import files a log under the
    // run's variant of the same index).
    let mut names = m.variants.iter().map(|v| v.name.as_str()).chain(m.run.variants.iter().map(|v| v.name.as_str()));
    if let Some(bad) = names.find(|n| !fsutil::is_plain_name(n)) {
        return Err(Error::file(
            Kind::Format,
            &path,
            format!(
                "variant name {bad:?} is not a file name (letters, digits, '-', '_', '.' or '+'; not . or ..): \
                 nothing imported"
            ),
        ));
    }
    check_manifest(&m)
        .map_err(|why| Error::file(Kind::Format, &path, format!("{why}: not as `bootlink lab --lava` writes it")))?;
    Ok(m)
}

/// What `--lava` writes and the import relies on: at least one variant,
/// the run's variants the jobs' variants in the same order, each variant's
/// name and marker tag its own (a tag as the lab's /init can print it).
fn check_manifest(m: &Manifest) -> std::result::Result<(), String> {
    if m.variants.is_empty() {
        return Err("no variants".into());
    }
    if m.run.variants.len() != m.variants.len() {
        return Err(format!("the run lists {} variant(s), the jobs {}", m.run.variants.len(), m.variants.len()));
    }
    let mut names = std::collections::HashSet::new();
    let mut tags = std::collections::HashSet::new();
    for (k, (v, r)) in m.variants.iter().zip(&m.run.variants).enumerate() {
        if v.name != r.name {
            return Err(format!("variant {} is {:?} in the jobs and {:?} in the run", k + 1, v.name, r.name));
        }
        if !names.insert(v.name.as_str()) {
            return Err(format!("variant {:?} is listed twice", v.name));
        }
        crate::lab::initramfs::check_tag(&v.tag).map_err(|e| format!("variant {:?}: {}", v.name, e.msg))?;
        if !tags.insert(v.tag.as_str()) {
            return Err(format!("marker tag {:?} is given to two variants", v.tag));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boards_keep_the_command_line_but_the_console() {
        assert_eq!(board_cmdline("console=ttyS0 nokaslr quiet initcall_debug"), "nokaslr quiet initcall_debug");
        assert_eq!(regex_literal("=== BOOTLINK BEGIN lava-v0 ==="), "=== BOOTLINK BEGIN lava-v0 ===");
        assert_eq!(regex_literal("a.b(c)"), "a\\.b\\(c\\)");
        assert_eq!(BootMethod::parse("uboot"), Some(BootMethod::UBoot));
        assert_eq!(BootMethod::of_device_type("qemu"), Some(BootMethod::Qemu));
        assert_eq!(BootMethod::of_device_type("bcm2711-rpi-4-b"), None);
    }

    /// One job of each kind the jobs directory can hold, from fixed
    /// inputs (no build): (fixture name, job text).
    fn sample_jobs() -> Vec<(String, String)> {
        use crate::lab::target::Target;
        let sum = |s: &str| fsutil::hex(&sha2::Sha256::digest(s.as_bytes()));
        let mut out = Vec::new();
        // (name, arch, device type, boot, deterministic, kernel type, dtb)
        type Kind = (&'static str, Arch, &'static str, BootMethod, bool, Option<&'static str>, bool);
        let kinds: [Kind; 6] = [
            ("qemu-x86_64", Arch::X86_64, "qemu", BootMethod::Qemu, true, None, false),
            ("qemu-x86_64-realtime", Arch::X86_64, "qemu", BootMethod::Qemu, false, None, false),
            ("qemu-arm64", Arch::Arm64, "qemu", BootMethod::Qemu, true, None, false),
            ("u-boot-arm64-dtb", Arch::Arm64, "bcm2711-rpi-4-b", BootMethod::UBoot, false, None, true),
            ("u-boot-arm64-uimage", Arch::Arm64, "beaglebone.black", BootMethod::UBoot, false, Some("uimage"), false),
            ("grub-x86_64", Arch::X86_64, "x86-pc", BootMethod::Grub, false, None, false),
        ];
        for (name, arch, device_type, boot, deterministic, kernel_type, dtb) in kinds {
            let target = Target::of(arch);
            let console = target.console;
            let sc = Scenario {
                target,
                kernel: PathBuf::from("/k/vmlinux"),
                modules: Vec::new(),
                module_set: "vfat".into(),
                variants: Vec::new(),
                repetitions: 3,
                deterministic,
                cpus: if deterministic { 1 } else { 2 },
                trace: true,
                measure_overhead: false,
                timeout: std::time::Duration::from_secs(if deterministic { 300 } else { 30 }),
                memory_mib: 1024,
                out: PathBuf::from("/out"),
                extra_cmdline: String::new(),
                jobs: 1,
            };
            let opts = Options {
                dir: PathBuf::from("/jobs"),
                device_type: device_type.into(),
                boot,
                url: None,
                dtb: dtb.then(|| PathBuf::from("/b/board.dtb")),
                kernel_type: kernel_type.map(str::to_string),
            };
            let base = if boot == BootMethod::Qemu { "file:///jobs" } else { "http://files.example/lab" };
            let kernel = format!("{base}/artifacts/stock/{}", if arch == Arch::X86_64 { "vmlinux" } else { "Image" });
            let initrd = format!(
                "{base}/artifacts/stock/{}",
                if boot == BootMethod::UBoot { UBOOT_INITRAMFS } else { "initramfs.cpio" }
            );
            let (ksum, isum) = (sum("kernel"), sum("initrd"));
            // a user's --cmdline may quote
            let cmdline = format!(
                "console={console} nokaslr panic=-1 oops=panic quiet initcall_debug log_buf_len=8M \
                 dyndbg=\"module fat +p\""
            );
            let extra = qemu_extra_options(&sc);
            let text = job_yaml(&JobText {
                sc: &sc,
                opts: &opts,
                variant: "stock",
                rep: 1,
                tag: &tag(0),
                cmdline: &cmdline,
                kernel: (&kernel, &ksum),
                initrd: (&initrd, &isum),
                dtb: dtb.then(|| (format!("{base}/artifacts/board.dtb"), sum("dtb"))),
                extra: &extra,
            });
            out.push((format!("{name}.yaml"), text));
            if boot == BootMethod::Qemu && deterministic {
                out.push((format!("device-{name}.yaml"), qemu_device_dictionary(&sc, &extra)));
            }
        }
        out
    }

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/lava/jobs")
    }

    /// Each job means what the string-building writer's job meant (its
    /// text, kept as a fixture from before the switch to typed data): the
    /// same YAML value to the YAML crate and, where Python's YAML is
    /// installed, to PyYAML, which LAVA reads jobs with. The qemu device
    /// dictionaries are still written as text, unchanged.
    #[test]
    fn jobs_mean_what_the_string_built_jobs_meant() {
        let scratch = tempfile::tempdir().unwrap();
        let mut pairs = Vec::new();
        for (name, text) in sample_jobs() {
            let path = fixtures().join(&name);
            let old = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if name.starts_with("device-") {
                assert_eq!(text, old, "{name}");
                continue;
            }
            let value = |t: &str| serde_saphyr::from_str::<serde_json::Value>(t).unwrap();
            assert_eq!(value(&text), value(&old), "{name}:\n{text}");
            assert!(text.starts_with("# bootlink lab --lava: variant stock, repetition 2 of 3"), "{text}");
            // and it reads back as the job it was written from
            let job = parse_job(&text).unwrap();
            assert_eq!(job_to_yaml(&job), text.lines().skip(2).map(|l| format!("{l}\n")).collect::<String>());
            let new = scratch.path().join(&name);
            std::fs::write(&new, &text).unwrap();
            pairs.push((path, new));
        }
        assert_eq!(pairs.len(), 6);
        let python = "import sys, yaml\nfor a, b in zip(sys.argv[1::2], sys.argv[2::2]):\n    \
                      assert yaml.safe_load(open(a)) == yaml.safe_load(open(b)), (a, b)\n";
        let has_yaml = std::process::Command::new("python3").args(["-c", "import yaml"]).output();
        if !has_yaml.is_ok_and(|o| o.status.success()) {
            eprintln!("skipped: PyYAML's reading of the jobs (python3 with yaml is not installed)");
            return;
        }
        let o = std::process::Command::new("python3")
            .args(["-c", python])
            .args(pairs.iter().flat_map(|(a, b)| [a, b]))
            .output()
            .unwrap();
        assert!(o.status.success(), "PyYAML reads a job otherwise:\n{}", String::from_utf8_lossy(&o.stderr));
    }

    /// Names a user chooses stay strings to YAML 1.1 (PyYAML), as they did
    /// when every string was double-quoted.
    #[test]
    fn names_yaml_1_1_would_retype_stay_strings() {
        let (_, text) = sample_jobs().swap_remove(0);
        let mut job = parse_job(&text).unwrap();
        let names = ["yes", "on", "off", "1_000", "2026-11-28", "0x1f", "~", "1:30", "012"];
        job.device_type = names.join(" ");
        for (i, n) in names.iter().enumerate() {
            let (variant, set, tag) = (&mut job.metadata.variant, &mut job.metadata.module_set, &mut job.metadata.tag);
            [variant, set, tag][i % 3].clone_from(&n.to_string());
            let y = job_to_yaml(&job);
            assert_eq!(parse_job(&y).unwrap(), job, "{y}");
            let has_yaml = std::process::Command::new("python3").args(["-c", "import yaml"]).output();
            if !has_yaml.is_ok_and(|o| o.status.success()) {
                continue;
            }
            let python = "import sys, yaml\nm = yaml.safe_load(sys.stdin)['metadata']\n\
                          assert all(type(v) is str for k, v in m.items() if k != 'bootlink.repetition'), m\n";
            let mut c = std::process::Command::new("python3")
                .args(["-c", python])
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            c.stdin.take().unwrap().write_all(y.as_bytes()).unwrap();
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{n:?}: {}\n{y}", String::from_utf8_lossy(&o.stderr));
        }
    }
}
