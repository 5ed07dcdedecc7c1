//! Module loading: the set's files, the loader's extras (see
//! [`crate::workload::modules`]), ftrace on the load phases' landmarks, the
//! loader, and the taint the modules left.

use crate::lab::Initramfs;
use crate::lab::procs;
use crate::run::ftrace as trace;
use crate::run::results::{Repetition, WorkloadResult};
use crate::workload::modules::batchloader;
use crate::workload::modules::{self as loaders, Loader};
use bootlink::error::Result;

use crate::workload::base::{Console, Context, Workload};

pub(crate) struct ModuleLoading {
    pub loader: Loader,
}

impl Workload for ModuleLoading {
    fn add_files(&self, ir: &mut Initramfs, cx: &Context) -> Result<()> {
        let mut list = String::new();
        // Where the plan looks for each module: its suffix is the compress:
        // step's, whatever a raw: file is named.
        for (name, path) in cx.files {
            let f = loaders::guest_path(name, cx.compression);
            ir.copy_file(&f, path);
            list.push_str(&format!("{name} {f}\n"));
        }
        ir.file(loaders::LIST, 0o644, list.into_bytes());
        if matches!(self.loader, Loader::Batch(..)) {
            loaders::add_decompressor(ir, cx.compression)?;
        }
        let release = cx.tree.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let extras = loaders::Extras {
            plan: cx.plan,
            release: &release,
            tree: cx.tree,
            rels: cx.rels,
            compression: cx.compression,
            arch: cx.arch,
        };
        loaders::add_to(ir, self.loader, &extras, cx.work)
    }

    /// Set up ftrace on the landmark functions (tracefs is mounted by
    /// /init's prologue), load the modules with the loader (markers in the
    /// trace and the kernel log), stop tracing, print the taint.
    fn script(&self, traced: bool) -> String {
        let mut s = format!("T={}\n", procs::TRACEFS);
        if traced {
            s.push_str("echo 32768 > $T/buffer_size_kb\n");
            s.push_str(&trace::filter_script());
            s.push_str("echo function_graph > $T/current_tracer\necho funcgraph-abstime > $T/trace_options\necho funcgraph-proc > $T/trace_options\necho 1 > $T/tracing_on\n");
        }
        s.push_str(&loaders::script(self.loader, traced, trace::MARKER));
        s.push_str("echo 0 > $T/tracing_on 2>/dev/null\necho \"TAINTED $(cat /proc/sys/kernel/tainted)\"\n");
        // Where the kernel is: KASLR's base (or the link-time one). A
        // kallsyms without `_text` (arm64's without KALLSYMS_ALL: `_text`
        // heads the Image, before `_stext`) gives `_stext`, and the host
        // places `_text` by where the image links the two.
        s.push_str("echo \"KTEXT $(grep -m1 ' _text$' /proc/kallsyms || grep -m1 ' _stext$' /proc/kallsyms)\"\n");
        // Which loaded modules tainted it, with their letters.
        s.push_str(
            "for f in /sys/module/*/taint; do t=$(cat $f 2>/dev/null); n=${f%/taint}; [ -n \"$t\" ] && echo \"MODTAINT ${n#/sys/module/} $t\"; done\n",
        );
        s
    }

    fn starts_programs(&self) -> bool {
        false
    }

    fn untraceable(&self) -> bool {
        !loaders::traceable(self.loader)
    }

    fn parse(&self, c: &Console, rep: &mut Repetition) {
        if let Some(text) = section(c.main, loaders::LOADER_SECTION, loaders::LOADER_END) {
            rep.workloads.push(WorkloadResult::Loader(batchloader::result(text)));
        }
        if let Some(text) = section(c.main, loaders::STORM_SECTION, loaders::STORM_END) {
            let mut storm = loaders::parse_storm(text, c.sizes);
            storm.quiescence_us = rep.modules_total_us;
            rep.workloads.push(WorkloadResult::Storm(storm));
        }
    }
}

pub(crate) fn section<'a>(text: &'a str, begin: &str, end: &str) -> Option<&'a str> {
    let (_, r) = text.split_once(begin)?;
    Some(r.split_once(end).map(|(a, _)| a).unwrap_or(r))
}
