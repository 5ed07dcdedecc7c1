//! A host program (`run:/PATH ARGS`) run in the guest after the modules
//! load, with its ld.so and libraries copied in; its output and exit
//! status are its [`ProgramRun`].

use std::path::Path;

use crate::error::Result;
use crate::lab::Initramfs;
use crate::run::results::{ProgramRun, Repetition, WorkloadResult};

use super::{Console, Context, Workload};

const SECTION: &str = "@@@ bootlink run @@@";
const END: &str = "@@@ bootlink run end @@@";

pub struct Program {
    /// The program's absolute path, then its arguments.
    pub command: String,
}

impl Workload for Program {
    fn host_programs(&self) -> Option<String> {
        Some(format!("run:{} (a host program)", self.command))
    }

    fn add_files(&self, ir: &mut Initramfs, _cx: &Context) -> Result<()> {
        let program = self.command.split_whitespace().next().unwrap_or_default();
        crate::lab::userspace::add(ir, Path::new(program))?;
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
