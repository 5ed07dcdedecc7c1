//! The booted image read back from emulated flash (see
//! [`crate::workload::imageread`]).

use std::path::PathBuf;

use crate::lab::Initramfs;
use crate::run::results::{Repetition, WorkloadResult};
use crate::workload::imageread::{self, Spec};
use bootlink::error::Result;

use crate::workload::base::{Console, Context, Workload};

pub struct ImageRead {
    pub spec: Spec,
    /// The device's modules and the image's size, once prepared.
    pub modules: Vec<(String, PathBuf)>,
    pub bytes: u64,
}

impl Workload for ImageRead {
    fn prepare(&mut self, cx: &Context) -> Result<()> {
        imageread::check_timers(cx.config, cx.variant)?;
        self.modules = imageread::check(cx.tree)?;
        self.bytes = std::fs::metadata(cx.image).map_err(|e| bootlink::error::Error::io(cx.image, e))?.len();
        Ok(())
    }

    fn add_files(&self, ir: &mut Initramfs, cx: &Context) -> Result<()> {
        imageread::add_to(ir, cx.image, &self.modules);
        Ok(())
    }

    fn script(&self, _traced: bool) -> String {
        imageread::script(&self.spec, &self.modules, self.bytes)
    }

    fn starts_programs(&self) -> bool {
        false
    }

    fn parse(&self, c: &Console, rep: &mut Repetition) {
        rep.workloads.push(WorkloadResult::ImageRead(imageread::parse(c.main, c.dmesg, &self.spec, self.bytes)));
    }

    fn problems(&self, rep: &mut Repetition) -> Vec<String> {
        rep.workloads
            .iter()
            .filter_map(|w| match w {
                WorkloadResult::ImageRead(r) => Some(imageread::problems(r)),
                _ => None,
            })
            .flatten()
            .collect()
    }
}
