//! Function reordering's cold starts from emulated flash (see
//! [`crate::workload::order`]).

use crate::lab::Initramfs;
use crate::run::results::{Repetition, WorkloadResult};
use crate::workload::order::{self, Prepared, Spec};
use bootlink::error::Result;
use bootlink::progress;

use crate::workload::base::{Console, Context, Workload};

pub struct OrderStarts {
    pub spec: Spec,
    pub prepared: Option<Prepared>,
}

impl OrderStarts {
    fn prepared(&self) -> &Prepared {
        self.prepared.as_ref().expect("prepared before use")
    }
}

impl Workload for OrderStarts {
    fn prepare(&mut self, cx: &Context) -> Result<()> {
        progress::status(&format!("{}: the reordering case and its SquashFS images", cx.variant));
        self.prepared = Some(order::prepare(&self.spec, cx.tree, &cx.work.join("order"))?);
        Ok(())
    }

    fn host_programs(&self) -> Option<String> {
        Some("order: (the programs it starts)".into())
    }

    fn add_files(&self, ir: &mut Initramfs, _cx: &Context) -> Result<()> {
        order::add_to(ir, self.prepared());
        Ok(())
    }

    fn script(&self, _traced: bool) -> String {
        order::script(self.prepared())
    }

    fn parse(&self, c: &Console, rep: &mut Repetition) {
        rep.workloads.extend(order::parse(c.main, c.dmesg).map(WorkloadResult::Order));
    }

    fn problems(&self, rep: &mut Repetition) -> Vec<String> {
        let p = self.prepared();
        let u = rep.order_mut();
        u.command = order::label(p);
        order::problems(u, p)
    }
}
