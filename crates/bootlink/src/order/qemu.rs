//! A start-up trace without a rebuild: the program run once under QEMU's
//! user-mode emulator (`qemu-x86_64`, Debian's qemu-user), which
//! translates each block of guest code the first time it is about to run
//! it. `-d in_asm` logs every translation (`IN:` and the block's first
//! address), `-d page` the guest's memory layout (`start_code`: where the
//! program's code segment was mapped). The blocks in log order, mapped to
//! the functions of the program that contain them, are the functions in
//! first-call order, written as a bl-trace file (`trace`), so everything
//! after it (`order write`, `order report`) is the same.
//!
//! What differs from the instrumented build: every function is seen (also
//! those `-finstrument-functions` cannot hook, and those inlined in an
//! instrumented build), in the binary that ships, at the price of an
//! emulated run (python3.11's start-up: 0.9 s instead of 0.04 s). A
//! function entered first at a block other than its entry (a jump into
//! it) is still ordered at that point; the trace's call count is the
//! number of blocks translated, not calls.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};

use super::symbols::Functions;
use crate::elf::{Elf, LE, Want};
use crate::error::{Error, Kind, Result};

/// The QEMU user-mode emulator for the host's architecture.
pub const QEMU: &str = "qemu-x86_64";

/// What a log holds: the code segment's load address and the translated
/// blocks' first addresses, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Log {
    pub start_code: Option<u64>,
    pub blocks: Vec<u64>,
}

impl Log {
    pub fn parse(text: &str) -> Log {
        let mut log = Log::default();
        let mut want_block = false;
        for line in text.lines() {
            if line.starts_with("IN:") {
                want_block = true;
            } else if want_block {
                if let Some(a) = line.split(':').next().and_then(|a| a.strip_prefix("0x"))
                    && let Ok(a) = u64::from_str_radix(a.trim(), 16)
                {
                    log.blocks.push(a);
                    want_block = false;
                }
            } else if let Some(v) = line.strip_prefix("start_code")
                && let Some(v) = v.trim().strip_prefix("0x")
            {
                log.start_code = u64::from_str_radix(v, 16).ok();
            }
        }
        log
    }
}

/// The link-time address of `program`'s first executable PT_LOAD.
fn code_vaddr(program: &Path) -> Result<u64> {
    let data = crate::fsutil::map_file(program)?;
    let parsed = Elf::parse(&data, Want::Dynamic).map_err(|m| m.at(program))?;
    let phdrs = parsed
        .header
        .program_headers(LE, &*data)
        .map_err(|e| Error::file(Kind::Format, program, format!("bad program headers: {e}")).because(e))?;
    phdrs
        .iter()
        .find(|p| p.p_type(LE) == elf::PT_LOAD && p.p_flags(LE).0 & elf::PF_X.0 != 0)
        .map(|p| p.p_vaddr(LE))
        .ok_or_else(|| Error::file(Kind::Format, program, "no executable PT_LOAD segment"))
}

/// The bl-trace text of `log` for `program` (its functions `funcs`).
pub(crate) fn to_trace(log: &Log, funcs: &Functions, code_vaddr: u64, program: &Path) -> Result<(String, usize)> {
    let Some(start_code) = log.start_code else {
        return Err(Error::file(Kind::Tool, program, "the QEMU log has no start_code line (-d page)"));
    };
    let bias = start_code.wrapping_sub(code_vaddr);
    let mut starts: Vec<(u64, u64)> = funcs.list.iter().map(|f| (f.addr, f.addr + f.size)).collect();
    starts.sort();
    let mut seen = HashSet::new();
    let mut text = format!("bl-trace 1\nobject {bias:x} -\n");
    let mut n = 0;
    for &b in &log.blocks {
        let a = b.wrapping_sub(bias);
        let i = starts.partition_point(|&(s, _)| s <= a);
        if i == 0 {
            continue;
        }
        let (s, e) = starts[i - 1];
        if a < e && seen.insert(s) {
            text += &format!("fn {:x}\n", s.wrapping_add(bias));
            n += 1;
        }
    }
    if n == 0 {
        return Err(Error::file(
            Kind::Tool,
            program,
            "QEMU translated no block inside its functions: is the log of this program?",
        ));
    }
    text += &format!("end {n} {}\n", log.blocks.len());
    Ok((text, n))
}

/// Run `program ARGS` once under QEMU and write its start-up trace to
/// `out` (atomically); the number of functions and of blocks translated.
/// `env`: the whole environment to run it in (None: this one).
pub fn record(program: &Path, args: &[String], env: Option<&[(&str, &str)]>, out: &Path) -> Result<(usize, usize)> {
    let funcs = Functions::read(program)?;
    let vaddr = code_vaddr(program)?;
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let log_file = tempfile::Builder::new().prefix(".qemu-log-").tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
    let log_path: PathBuf = log_file.path().to_path_buf();
    let mut cmd = Command::new(QEMU);
    if let Some(env) = env {
        cmd.env_clear().envs(env.iter().copied());
    }
    let o = cmd
        .args(["-d", "in_asm,page", "-D"])
        .arg(&log_path)
        .arg(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| crate::hosttool::spawn_error(QEMU, "recording a start-up without a rebuild", "qemu-user", e))?;
    if !o.status.success() {
        return Err(Error::file(Kind::Tool, program, format!("exited {} under {QEMU}", o.status)));
    }
    let text = std::fs::read(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let log = Log::parse(&String::from_utf8_lossy(&text));
    let (trace, n) = to_trace(&log, &funcs, vaddr, program)?;
    crate::fsutil::write_atomic(out, trace.as_bytes())?;
    Ok((n, log.blocks.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_layout_from_the_log() {
        let text = "host mmap_min_addr=0x1000\nstart_brk   0x0000000000000000\n\
                    start_code  0x000055555555a000\nentry 0x1\n----------------\nIN: \n\
                    0x400081bb70:  48 89 e7   movq %rsp, %rdi\n0x400081bb73:  e8   callq 0x1\n\n\
                    ----------------\nIN: main\n0x000055555555a010:  55   pushq %rbp\n";
        let log = Log::parse(text);
        assert_eq!(log.start_code, Some(0x5555_5555_a000));
        assert_eq!(log.blocks, [0x40_0081_bb70, 0x5555_5555_a010]);
    }
}
