//! Workloads: what runs in the guest, each behind [`Workload`]. A
//! variant's workloads are its module loading ([`modules`], always, with
//! the variant's loader) and what it starts once the modules are loaded: a
//! program under DDLink's ld.so ([`ddlink`]), function reordering's cold
//! starts ([`order`]), a host program ([`program`]).
//!
//! A workload is prepared on the host, adds its files to the initramfs,
//! contributes its part of /init, parses its part of the console into the
//! boot's [`Repetition`] and says what is wrong with it. Adding a workload
//! is a [`Spec`] variant, its file here, and its line in [`build`].

mod ddlink;
mod imageread;
mod modules;
mod order;
mod program;

use std::path::{Path, PathBuf};

use crate::lab::Initramfs;
use crate::lab::loaders::Loader;
use crate::run::results::Repetition;
use bootlink::error::Result;

/// A workload the variant asks for (besides loading its modules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `ddlink:...`: a program started under DDLink's patched ld.so.
    Ddlink(crate::lab::ddlink::Spec),
    /// `order:...`: function reordering's cold starts from emulated flash.
    Order(crate::lab::order::Spec),
    /// `run:/PATH ARGS`: a host program with its ld.so and libraries.
    Run(String),
    /// `read:FLASH`: the booted image read back from emulated flash.
    ImageRead(crate::lab::imageread::Spec),
}

impl Spec {
    /// Refuse a workload the variant cannot run before anything is built:
    /// `tree` is the variant's module tree.
    pub fn check(&self, tree: &Path) -> Result<()> {
        match self {
            Spec::Ddlink(d) => d.check(),
            Spec::Order(_) => crate::lab::order::check(tree).map(|_| ()),
            Spec::Run(_) => Ok(()),
            Spec::ImageRead(_) => crate::lab::imageread::check(tree).map(|_| ()),
        }
    }
}

/// What a workload's host side and its files can use of the variant.
pub struct Context<'a> {
    pub variant: &'a str,
    /// The variant's module tree (`lib/modules/<release>`).
    pub tree: &'a Path,
    /// Each module's path in that tree, with its final file.
    pub rels: &'a [(String, PathBuf)],
    /// The set's final module files (name, file), in load order.
    pub files: &'a [(String, PathBuf)],
    /// How the guest holds them (the compress: step's format): each at
    /// [`crate::lab::loaders::guest_path`], as the plan names it.
    pub compression: bootlink::compress::Compression,
    /// The batch loader's plan, with the paths /init uses.
    pub plan: &'a str,
    /// Scratch space for this variant.
    pub work: &'a Path,
    /// The guest's architecture: the programs put into the initramfs are its.
    pub arch: crate::lab::arch::Arch,
    /// The kernel image QEMU boots.
    pub image: &'a Path,
    /// Its configuration, when bootlink found it (a build's, a Debian
    /// package's `config-<release>`).
    pub config: Option<&'a bootlink::kernel::KernelConfig>,
}

/// One boot's console, cut into what /init printed and the kernel log.
pub struct Console<'a> {
    pub main: &'a str,
    pub dmesg: &'a str,
    /// Each module file's size (name, bytes).
    pub sizes: &'a [(String, u64)],
}

/// Send + Sync: the lab boots a run's variants on several threads.
pub trait Workload: Send + Sync {
    /// Host side, once per variant (build, profile, write caches).
    fn prepare(&mut self, _cx: &Context) -> Result<()> {
        Ok(())
    }
    /// Put the workload's files into the initramfs.
    fn add_files(&self, ir: &mut Initramfs, cx: &Context) -> Result<()>;
    /// Its part of /init; `traced`: the load phases are ftraced.
    fn script(&self, traced: bool) -> String;
    /// It starts programs after the modules load (the boot then records
    /// every process).
    fn starts_programs(&self) -> bool {
        true
    }
    /// Its loads cannot be traced per module.
    fn untraceable(&self) -> bool {
        false
    }
    /// The host's programs it copies into the guest as they are (named
    /// for the refusal on a guest of another architecture), if any.
    fn host_programs(&self) -> Option<String> {
        None
    }
    /// Read its results from the console into `rep` (the common part of
    /// the boot, modules and kernel log, is already there).
    fn parse(&self, c: &Console, rep: &mut Repetition);
    /// What is wrong with its results in `rep` (it may fill in what the
    /// host knows, such as the command it started).
    fn problems(&self, _rep: &mut Repetition) -> Vec<String> {
        Vec::new()
    }
}

/// The workloads of a variant, in the order /init runs them.
pub fn build(loader: Loader, specs: &[Spec]) -> Vec<Box<dyn Workload>> {
    let mut w: Vec<Box<dyn Workload>> = vec![Box::new(modules::ModuleLoading { loader })];
    for s in specs {
        w.push(match s {
            Spec::Ddlink(d) => Box::new(ddlink::DdlinkStarts { spec: d.clone(), prepared: None }),
            Spec::Order(o) => Box::new(order::OrderStarts { spec: o.clone(), prepared: None }),
            Spec::Run(cmd) => Box::new(program::Program { command: cmd.clone() }),
            Spec::ImageRead(r) => Box::new(imageread::ImageRead { spec: *r, modules: Vec::new(), bytes: 0 }),
        });
    }
    w
}
