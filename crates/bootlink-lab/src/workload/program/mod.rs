//! A host program (`run:/PATH ARGS`) run in the guest after the modules
//! load, with its ld.so and libraries copied in, or one of the guest's
//! busybox applets (`run:cat /sys/...`, on a guest of any architecture);
//! its output and exit status are its [`ProgramRun`].

pub mod record;

use std::path::Path;

use crate::lab::Initramfs;
use crate::run::results::{Repetition, WorkloadResult};
use crate::workload::program::record::ProgramRun;
use bootlink::error::Result;

use crate::workload::base::{Console, Context, Workload};

const SECTION: &str = "@@@ bootlink run @@@";
const END: &str = "@@@ bootlink run end @@@";

pub struct Program {
    /// The program's absolute path, then its arguments.
    pub command: String,
}

impl Program {
    /// The host's program, or None for a busybox applet of the guest.
    fn host_program(&self) -> Option<&str> {
        self.command.split_whitespace().next().filter(|p| p.starts_with('/'))
    }
}

impl Workload for Program {
    fn host_programs(&self) -> Option<String> {
        self.host_program().map(|_| format!("run:{} (a host program)", self.command))
    }

    fn add_files(&self, ir: &mut Initramfs, _cx: &Context) -> Result<()> {
        if let Some(program) = self.host_program() {
            crate::lab::userspace::add(ir, Path::new(program))?;
        }
        Ok(())
    }

    fn script(&self, _traced: bool) -> String {
        format!("echo '{SECTION}'\n{} 2>&1\necho \"RUN-EXIT $?\"\necho '{END}'\n", self.command)
    }

    fn parse(&self, c: &Console, rep: &mut Repetition) {
        if let Some((_, r)) = c.main.split_once(SECTION)
            && let Some((text, _)) = r.split_once(END)
        {
            let output = text.trim_matches(['\r', '\n']).replace("\r\n", "\n");
            rep.workloads.push(WorkloadResult::Program(ProgramRun { command: self.command.clone(), output }));
        }
    }
}
