//! The fallback when no kernel image is at hand: addresses from `System.map`
//! (or a copy of `/proc/kallsyms`), export types, namespaces and CRCs from
//! `Module.symvers`.

use std::collections::HashMap;
use std::path::Path;

use super::{Kaslr, KernelImage, Source, beside_config, corrupt, load_config_file};
use crate::error::{Error, Kind, Result};
use crate::kernel::ksymtab::Export;

/// "ffffffff81000000 T _stext": a hex address, a type letter, a name.
pub(crate) fn looks_like_system_map(data: &[u8]) -> bool {
    let head = &data[..data.len().min(4096)];
    let Ok(text) = std::str::from_utf8(head) else { return false };
    let mut lines = text.lines().filter(|l| !l.is_empty()).take(3).peekable();
    lines.peek().is_some()
        && lines.all(|l| {
            let mut f = l.split_whitespace();
            matches!((f.next(), f.next(), f.next()),
                (Some(a), Some(t), Some(_)) if a.len() >= 8 && a.bytes().all(|b| b.is_ascii_hexdigit()) && t.len() == 1)
        })
}

/// Name -> address. A name can appear more than once (a static symbol and
/// an exported global of the same name, e.g. acpi_gpe_count on 6.1); the
/// global definition (an upper-case type letter) is the one exports refer to.
pub(crate) fn parse_system_map(text: &str) -> HashMap<&str, u64> {
    let mut map: HashMap<&str, (u64, bool)> = HashMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        if let (Some(a), Some(t), Some(name), None) = (f.next(), f.next(), f.next(), f.next())
            && let Ok(addr) = u64::from_str_radix(a, 16)
        {
            let global = t.starts_with(|c: char| c.is_ascii_uppercase());
            match map.get(name) {
                Some(&(_, true)) => {}
                Some(&(_, false)) if !global => {}
                _ => {
                    map.insert(name, (addr, global));
                }
            }
        }
    }
    map.into_iter().map(|(n, (a, _))| (n, a)).collect()
}

/// One line of Module.symvers: CRC, symbol, module, export type, namespace.
#[derive(Debug)]
pub struct SymversEntry<'a> {
    pub crc: u32,
    pub name: &'a str,
    pub module: &'a str,
    pub gpl: bool,
    pub namespace: Option<&'a str>,
}

pub fn parse_symvers(text: &str) -> std::result::Result<Vec<SymversEntry<'_>>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 4 {
            return Err(corrupt(format!(
                "line {}: not a Module.symvers line (want CRC, symbol, module, export type)",
                i + 1
            )));
        }
        let crc = u32::from_str_radix(f[0].trim_start_matches("0x"), 16)
            .map_err(|_| corrupt(format!("line {}: bad CRC {:?}", i + 1, f[0])))?;
        out.push(SymversEntry {
            crc,
            name: f[1],
            module: f[2],
            gpl: f[3].ends_with("_GPL"),
            namespace: f.get(4).copied().filter(|s| !s.is_empty()),
        });
    }
    Ok(out)
}

pub fn open(map_path: &Path, symvers: &Path, config: Option<&Path>) -> Result<KernelImage> {
    let map_text = crate::fsutil::read_input_text(map_path)?;
    if !symvers.is_file() {
        return Err(Error::file(
            Kind::Format,
            map_path,
            format!(
                "a System.map needs Module.symvers beside it to tell exports apart ({} not found)",
                symvers.display()
            ),
        ));
    }
    let sv_text = crate::fsutil::read_input_text(symvers)?;
    let entries = parse_symvers(&sv_text).map_err(|e| e.at(symvers))?;
    let addrs = parse_system_map(&map_text);
    let mut exports = Vec::new();
    let mut missing = Vec::new();
    for e in entries.iter().filter(|e| e.module == "vmlinux") {
        match addrs.get(e.name) {
            Some(&addr) => exports.push(Export {
                name: e.name.to_string(),
                addr,
                gpl: e.gpl,
                namespace: e.namespace.map(str::to_string),
                crc: Some(e.crc),
            }),
            None => missing.push(e.name),
        }
    }
    if !missing.is_empty() {
        return Err(Error::file(
            Kind::Format,
            map_path,
            format!(
                "{} vmlinux exports of {} have no address here (first: {}); is it the same kernel build?",
                missing.len(),
                symvers.display(),
                missing[0]
            ),
        ));
    }
    let (cfg, cfg_source) = match config {
        Some(c) => (Some(load_config_file(c)?), Some(c.display().to_string())),
        None => beside_config(map_path, None)?,
    };
    let kaslr = Kaslr::from_config(cfg.as_ref(), cfg_source.as_deref().unwrap_or(""));
    Ok(KernelImage {
        path: map_path.to_path_buf(),
        source: Source::SystemMap { symvers: symvers.to_path_buf() },
        release: None,
        vermagic: None,
        machine: "unknown",
        ksymtab_format: None,
        exports,
        config_source: cfg_source,
        kaslr,
        loader_features: super::LoaderFeatures::Unknown,
        slide_base: None,
        image_range: None,
        link_stext: None,
        struct_module_size: None,
        config: cfg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_system_map_and_not_other_text() {
        assert!(looks_like_system_map(b"ffffffff81000000 T _stext\nffffffff81000010 t foo\n"));
        assert!(looks_like_system_map(b"ffffffffc0000000 t foo\t[ext4]\n"));
        assert!(!looks_like_system_map(b"CONFIG_A=y\n"));
        assert!(!looks_like_system_map(b"\x7fELF\x02\x01"));
        assert!(!looks_like_system_map(b""));
    }

    #[test]
    fn a_global_wins_over_a_static_of_the_same_name() {
        let m = parse_system_map(
            "ffffffff84083288 b acpi_gpe_count\nffffffff84083408 B acpi_gpe_count\nffffffff81000000 t only_static\n",
        );
        assert_eq!(m["acpi_gpe_count"], 0xffffffff84083408);
        assert_eq!(m["only_static"], 0xffffffff81000000);
        let m = parse_system_map("ffffffff84083408 B x\nffffffff84083288 b x\n");
        assert_eq!(m["x"], 0xffffffff84083408);
    }

    #[test]
    fn symvers_lines_parse_with_and_without_namespace() {
        let t = "0x12345678\tfoo\tvmlinux\tEXPORT_SYMBOL\t\n0x9abcdef0\tbar\tfs/x\tEXPORT_SYMBOL_GPL\tNS\n";
        let e = parse_symvers(t).unwrap();
        assert_eq!((e[0].crc, e[0].name, e[0].gpl, e[0].namespace), (0x12345678, "foo", false, None));
        assert_eq!((e[1].module, e[1].gpl, e[1].namespace), ("fs/x", true, Some("NS")));
        assert!(parse_symvers("garbage\n").unwrap_err().msg.contains("line 1"));
    }
}
