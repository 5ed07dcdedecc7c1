//! DDLink's starts: a program under the patched ld.so in each loader mode
//! (see [`crate::workload::ddlink`]).

use crate::lab::Initramfs;
use crate::run::results::{Repetition, WorkloadResult};
use crate::workload::ddlink::{self, Prepared, Spec};
use bootlink::error::Result;
use bootlink::progress;

use crate::workload::base::{Console, Context, Workload};

pub struct DdlinkStarts {
    pub spec: Spec,
    pub prepared: Option<Prepared>,
}

impl DdlinkStarts {
    fn prepared(&self) -> &Prepared {
        self.prepared.as_ref().expect("prepared before use")
    }
}

impl Workload for DdlinkStarts {
    fn prepare(&mut self, cx: &Context) -> Result<()> {
        progress::status(&format!("{}: profiling the DDLink program, writing its caches", cx.variant));
        self.prepared = Some(ddlink::prepare(&self.spec, &cx.work.join("ddlink"))?);
        Ok(())
    }

    fn host_programs(&self) -> Option<String> {
        Some("ddlink: (DDLink's ld.so and the programs it starts)".into())
    }

    fn add_files(&self, ir: &mut Initramfs, _cx: &Context) -> Result<()> {
        ddlink::add_to(ir, self.prepared());
        Ok(())
    }

    fn script(&self, _traced: bool) -> String {
        ddlink::script(self.prepared())
    }

    fn parse(&self, c: &Console, rep: &mut Repetition) {
        rep.workloads.extend(ddlink::parse(c.main, c.dmesg).map(WorkloadResult::Ddlink));
    }

    /// A guest that printed nothing gets an empty record: its checks then
    /// say that no start was measured.
    fn problems(&self, rep: &mut Repetition) -> Vec<String> {
        let p = self.prepared();
        let u = rep.ddlink_mut();
        u.command = ddlink::label(p);
        ddlink::problems(u, p.starts)
    }
}
