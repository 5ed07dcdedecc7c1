//! Where a hung guest was: when a boot runs out of time, QEMU is asked
//! (through its machine protocol, QMP, on a socket in the boot's temporary
//! directory) for each vCPU's registers before it is killed, and each
//! vCPU's program counter is named by the kernel's System.map.
//!
//! A boot under `quiet` that hangs before /init prints nothing at all; the
//! program counters are then the only account of where it stopped (a
//! vCPU spinning in a text patch, one waiting for an IPI, the rest idle).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the questions to a hung QEMU may take in all, before the kill.
const ASK_TIME: Duration = Duration::from_secs(3);

/// A socket path longer than this does not fit `sun_path` (108 bytes with
/// its NUL); such a boot is not asked.
pub(crate) const SOCKET_PATH_MAX: usize = 100;

/// One vCPU at the moment the boot's time ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VcpuAt {
    pub cpu: u32,
    /// RIP on x86-64, PC on arm64.
    pub pc: u64,
    /// x86-64's `HLT=1`: the vCPU waits for an interrupt (idle); `None` on
    /// arm64, whose register dump does not say.
    pub halted: Option<bool>,
    /// `function+0xoffset`, when the kernel runs at its link-time addresses
    /// and its System.map was found.
    pub symbol: Option<String>,
}

impl std::fmt::Display for VcpuAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cpu{} {:#x}", self.cpu, self.pc)?;
        if let Some(s) = &self.symbol {
            write!(f, " {s}")?;
        }
        if self.halted == Some(true) {
            write!(f, " (halted)")?;
        }
        Ok(())
    }
}

/// QEMU's arguments for a QMP socket at `sock` that QEMU creates and does
/// not wait on.
pub(crate) fn qmp_args(sock: &Path) -> Vec<std::ffi::OsString> {
    let mut spec = std::ffi::OsString::from("unix:");
    spec.push(sock.as_os_str());
    spec.push(",server=on,wait=off");
    vec!["-qmp".into(), spec]
}

/// Ask the QEMU listening on `sock` for every vCPU's registers (`info
/// registers -a`, through QMP's human-monitor-command). `None` when it does
/// not answer within [`ASK_TIME`].
pub(crate) fn ask_registers(sock: &Path) -> Option<String> {
    let stream = UnixStream::connect(sock).ok()?;
    stream.set_read_timeout(Some(ASK_TIME)).ok()?;
    stream.set_write_timeout(Some(ASK_TIME)).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut writer = stream;
    let mut line = String::new();
    // The greeting, then capabilities negotiation, then the command; events
    // (a line with "event") may come between.
    let mut answer = |reader: &mut BufReader<UnixStream>| -> Option<serde_json::Value> {
        for _ in 0..64 {
            line.clear();
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let v: serde_json::Value = serde_json::from_str(&line).ok()?;
            if v.get("return").is_some() || v.get("error").is_some() || v.get("QMP").is_some() {
                return Some(v);
            }
        }
        None
    };
    answer(&mut reader)?.get("QMP")?;
    writer.write_all(b"{\"execute\":\"qmp_capabilities\"}\n").ok()?;
    answer(&mut reader)?.get("return")?;
    writer
        .write_all(b"{\"execute\":\"human-monitor-command\",\"arguments\":{\"command-line\":\"info registers -a\"}}\n")
        .ok()?;
    answer(&mut reader)?.get("return")?.as_str().map(str::to_string)
}

/// Each `CPU#n` block's program counter (`RIP=` on x86-64, `PC=` on
/// arm64) and, on x86-64, its `HLT=` flag.
pub fn parse_registers(text: &str) -> Vec<VcpuAt> {
    let mut out: Vec<VcpuAt> = Vec::new();
    let mut cpu: Option<u32> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(n) = line.strip_prefix("CPU#") {
            cpu = n.trim().parse().ok();
            continue;
        }
        let Some(c) = cpu else { continue };
        for field in line.split_whitespace() {
            let (key, value) = match field.split_once('=') {
                Some(kv) => kv,
                None => continue,
            };
            match key {
                "RIP" | "PC" if !out.iter().any(|v| v.cpu == c) => {
                    if let Ok(pc) = u64::from_str_radix(value, 16) {
                        out.push(VcpuAt { cpu: c, pc, halted: None, symbol: None });
                    }
                }
                "HLT" => {
                    if let Some(v) = out.iter_mut().find(|v| v.cpu == c) {
                        v.halted = Some(value == "1");
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The System.map of a kernel image: `System.map` beside it (a self-built
/// kernel's directory), or the one `System.map-*` there (Debian's /boot).
pub fn system_map_beside(kernel: &Path) -> Option<PathBuf> {
    let dir = kernel.parent()?;
    let plain = dir.join("System.map");
    if plain.is_file() {
        return Some(plain);
    }
    let mut found = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("System.map-")));
    let one = found.next()?;
    found.next().is_none().then_some(one)
}

/// Name each program counter `function+0xoffset` by the text symbols of
/// `system_map` (types t, T, w, W). Only counters inside the kernel's text
/// or init text (`_stext`..`_etext`, `_sinittext`..`_einittext`) are named:
/// user space and modules stay unnamed.
pub fn symbolize(vcpus: &mut [VcpuAt], system_map: &str) {
    let mut text: Vec<(u64, &str)> = Vec::new();
    let mut marks: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for l in system_map.lines() {
        let mut f = l.split_whitespace();
        let (Some(a), Some(t), Some(n)) = (f.next(), f.next(), f.next()) else { continue };
        let Ok(a) = u64::from_str_radix(a, 16) else { continue };
        if matches!(n, "_stext" | "_etext" | "_sinittext" | "_einittext") {
            marks.insert(n, a);
        }
        if matches!(t, "t" | "T" | "w" | "W") {
            text.push((a, n));
        }
    }
    text.sort();
    let ranges: Vec<(u64, u64)> = [("_stext", "_etext"), ("_sinittext", "_einittext")]
        .iter()
        .filter_map(|(s, e)| Some((*marks.get(s)?, *marks.get(e)?)))
        .collect();
    for v in vcpus.iter_mut() {
        if !ranges.iter().any(|&(s, e)| (s..e).contains(&v.pc)) {
            continue;
        }
        let i = text.partition_point(|&(a, _)| a <= v.pc);
        if i > 0 {
            let (a, n) = text[i - 1];
            v.symbol = Some(format!("{n}+{:#x}", v.pc - a));
        }
    }
}

/// Whether the guest's kernel runs at its link-time addresses, so that
/// System.map names its program counters: an x86-64 vmlinux booted through
/// PVH never moves, and `nokaslr` keeps any image where it was linked.
pub(crate) fn at_link_addresses(kernel: &Path, cmdline: &str) -> bool {
    if cmdline.split_whitespace().any(|w| w == "nokaslr") {
        return true;
    }
    let mut head = [0u8; 64];
    let Ok(mut f) = std::fs::File::open(kernel) else { return false };
    use std::io::Read;
    f.read_exact(&mut head).is_ok() && bootlink::elf::wrong_machine(&head, object::elf::EM_X86_64).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "\nCPU#0\nRAX=ffffffff81044c80 RBX=ffff88801f415040\n\
        RIP=ffffffff8102e3e7 RFL=00000093 [--S-A-C] CPL=0 II=0 A20=1 SMM=0 HLT=1\nYMM00=00 00\n\
        CPU#1\nRAX=0000000000000000\nRIP=ffffffff81100010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0\n";
    const ARM64: &str = "\nCPU#0\n PC=ffff800008010000 X00=0000000000000000 X01=0000000000000000\n\
        X29=0000000000000000 X30=0000000000000000  SP=0000000000000000\nCPU#1\n PC=0000000000000200 X00=0\n";
    const MAP: &str = "ffffffff81000000 T _stext\nffffffff8102e3d0 T default_idle\n\
        ffffffff8102e400 t helper\nffffffff81100000 T text_poke_bp_batch\nffffffff81100020 D some_data\n\
        ffffffff81200000 T _etext\nffffffff82000000 T _sinittext\nffffffff82000100 T _einittext\n";

    #[test]
    fn x86_registers_give_each_vcpus_rip_and_halt() {
        let v = parse_registers(X86);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].cpu, v[0].pc, v[0].halted), (0, 0xffffffff8102e3e7, Some(true)));
        assert_eq!((v[1].cpu, v[1].pc, v[1].halted), (1, 0xffffffff81100010, Some(false)));
    }

    #[test]
    fn arm64_registers_give_each_vcpus_pc_and_no_halt_flag() {
        let v = parse_registers(ARM64);
        assert_eq!(
            v.iter().map(|v| (v.cpu, v.pc, v.halted)).collect::<Vec<_>>(),
            [(0, 0xffff800008010000, None), (1, 0x200, None)]
        );
    }

    #[test]
    fn program_counters_are_named_by_text_symbols_only() {
        let mut v = parse_registers(X86);
        symbolize(&mut v, MAP);
        assert_eq!(v[0].symbol.as_deref(), Some("default_idle+0x17"));
        assert_eq!(v[1].symbol.as_deref(), Some("text_poke_bp_batch+0x10"), "the data symbol does not count");
        assert_eq!(v[0].to_string(), "cpu0 0xffffffff8102e3e7 default_idle+0x17 (halted)");
        let at = |pc| VcpuAt { cpu: 0, pc, halted: None, symbol: None };
        let mut outside = vec![at(0x1000), at(0xffffffff81300000), at(0xffffffffa0001000)];
        symbolize(&mut outside, MAP);
        assert!(outside.iter().all(|v| v.symbol.is_none()), "user space, past _etext, a module: {outside:?}");
        let mut init = vec![at(0xffffffff82000010)];
        symbolize(&mut init, MAP);
        assert_eq!(init[0].symbol.as_deref(), Some("_sinittext+0x10"), "init text is named");
    }

    #[test]
    fn an_x86_64_vmlinux_or_nokaslr_runs_at_link_addresses() {
        let tmp = bootlink::fsutil::TempDir::new("hang-test").unwrap();
        let image = |name: &str, machine: u16| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(b"\x7fELF");
            (h[4], h[5], h[6]) = (2, 1, 1);
            h[18..20].copy_from_slice(&machine.to_le_bytes());
            let p = tmp.path().join(name);
            std::fs::write(&p, h).unwrap();
            p
        };
        let vmlinux = image("vmlinux", 62);
        let arm64 = image("arm64-elf", 183);
        let bzimage = tmp.path().join("bzImage");
        std::fs::write(&bzimage, [0u8; 512]).unwrap();
        assert!(at_link_addresses(&vmlinux, "console=ttyS0"), "PVH: never moves");
        assert!(!at_link_addresses(&arm64, "console=ttyAMA0"));
        assert!(!at_link_addresses(&bzimage, "console=ttyS0 quiet"), "KASLR may move it");
        assert!(at_link_addresses(&bzimage, "console=ttyS0 nokaslr quiet"));
        assert!(!at_link_addresses(&tmp.path().join("missing"), "console=ttyS0"));
    }

    #[test]
    fn garbage_gives_nothing() {
        assert!(parse_registers("").is_empty());
        assert!(parse_registers("RIP=ffff\nCPU#x\nRIP=zz").is_empty());
    }
}
