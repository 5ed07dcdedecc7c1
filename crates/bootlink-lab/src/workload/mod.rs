//! Workloads: what runs in the guest, each behind [`Workload`], each one
//! folder, and this file their registry. A variant's workloads are its
//! module loading ([`modules`], always, with the variant's loader) and what
//! it starts once the modules are loaded: a program under DDLink's ld.so
//! ([`ddlink`]), function reordering's cold starts ([`order`]), a host
//! program ([`program`]), the booted image read back ([`imageread`]).
//!
//! A workload is prepared on the host, adds its files to the initramfs,
//! contributes its part of /init, parses its part of the console into the
//! boot's [`Repetition`] and says what is wrong with it. Its folder
//! `workload/<name>/` holds all of it:
//! - `mod.rs`: its spec (the `--variant` grammar's part), host side, /init
//!   part, initramfs files and console parser;
//! - `workload.rs`: its [`Workload`] impl;
//! - `record.rs`: its results as run.json holds them;
//! - `table.rs`, `chart.rs`: what is computed from runs, its text tables,
//!   its sections of the HTML report and its timeline panels.
//!
//! Adding a workload is its folder, its lines here ([`Spec`], [`Spec::check`],
//! [`build`] and, when it has tables or charts, [`html_sections`],
//! [`starts_text`], [`timeline_legend`], [`timeline_panels`]), and, when it
//! records results, its variant of [`crate::run::results::WorkloadResult`]
//! (run.json's records live below the workloads, so that one enum sits
//! with them). [`base`] is what every workload is given; [`start`] the
//! start of a program that DDLink's and reordering's records share.

pub mod base;
pub mod ddlink;
pub mod imageread;
pub mod modules;
pub mod order;
pub mod program;
pub mod start;

use std::path::Path;

use crate::run::model::Series;
use crate::run::results::{Repetition, Run};
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

/// Each workload's sections of the HTML report, in the report's order
/// (`series`: the runs' series).
pub fn html_sections(o: &mut String, runs: &[Run], series: &[Series]) {
    modules::chart::html(o, series);
    ddlink::chart::html(o, runs);
    order::chart::html(o, runs);
}

/// The tables of the programs the workloads started (DDLink's modes,
/// reordering's builds) as text: what `bootlink lab` and `bootlink chart`
/// print after the before/after table.
pub fn starts_text(runs: &[Run]) -> String {
    let mut user = ddlink::table::render_text(runs);
    user.push_str(&order::table::render_text(runs));
    user
}

/// The timeline's legend entries of a repetition's starts.
pub fn timeline_legend(rep: &Repetition) -> Vec<(String, &'static str)> {
    let mut entries = Vec::new();
    if let Some(u) = rep.ddlink().filter(|u| !u.starts.is_empty()) {
        entries.extend(ddlink::chart::legend_ddlink(u));
    }
    if let Some(u) = rep.order().filter(|u| !u.starts.is_empty()) {
        entries.extend(order::chart::legend_order(u));
    }
    entries
}

/// The timeline's panels of a repetition's starts, from `y`: the new y,
/// and whether there was any.
pub fn timeline_panels(o: &mut String, y: f64, rep: &Repetition) -> (f64, bool) {
    let mut y = y;
    let mut any = false;
    if let Some(u) = rep.ddlink().filter(|u| !u.starts.is_empty()) {
        y = ddlink::chart::panel_ddlink(o, y, u);
        any = true;
    }
    if let Some(u) = rep.order().filter(|u| !u.starts.is_empty()) {
        y = order::chart::panel_order(o, y, u);
        any = true;
    }
    (y, any)
}
