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

pub mod base;
pub mod ddlink;
pub mod imageread;
pub mod modules;
pub mod order;
pub mod program;
pub mod start;

use std::path::Path;

pub use base::{Console, Context, Workload};
use bootlink::error::Result;
use modules::Loader;

/// A workload the variant asks for (besides loading its modules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `ddlink:...`: a program started under DDLink's patched ld.so.
    Ddlink(ddlink::Spec),
    /// `order:...`: function reordering's cold starts from emulated flash.
    Order(order::Spec),
    /// `run:/PATH ARGS`: a host program with its ld.so and libraries.
    Run(String),
    /// `read:FLASH`: the booted image read back from emulated flash.
    ImageRead(imageread::Spec),
}

impl Spec {
    /// Refuse a workload the variant cannot run before anything is built:
    /// `tree` is the variant's module tree.
    pub fn check(&self, tree: &Path) -> Result<()> {
        match self {
            Spec::Ddlink(d) => d.check(),
            Spec::Order(_) => order::check(tree).map(|_| ()),
            Spec::Run(_) => Ok(()),
            Spec::ImageRead(_) => imageread::check(tree).map(|_| ()),
        }
    }
}

/// The workloads of a variant, in the order /init runs them.
pub fn build(loader: Loader, specs: &[Spec]) -> Vec<Box<dyn Workload>> {
    let mut w: Vec<Box<dyn Workload>> = vec![Box::new(modules::workload::ModuleLoading { loader })];
    for s in specs {
        w.push(match s {
            Spec::Ddlink(d) => Box::new(ddlink::workload::DdlinkStarts { spec: d.clone(), prepared: None }),
            Spec::Order(o) => Box::new(order::workload::OrderStarts { spec: o.clone(), prepared: None }),
            Spec::Run(cmd) => Box::new(program::Program { command: cmd.clone() }),
            Spec::ImageRead(r) => Box::new(imageread::workload::ImageRead { spec: *r, modules: Vec::new(), bytes: 0 }),
        });
    }
    w
}
