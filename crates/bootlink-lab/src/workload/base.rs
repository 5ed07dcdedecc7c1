//! What every workload is: the [`Workload`] trait, what its host side is
//! given ([`Context`]) and what it reads its results from ([`Console`]).
//! Each workload's folder implements it; the registry, `workload/mod.rs`,
//! lists them.

use std::path::{Path, PathBuf};

use crate::lab::Initramfs;
use crate::run::results::Repetition;
use bootlink::error::Result;

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
    /// [`crate::workload::modules::guest_path`], as the plan names it.
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
