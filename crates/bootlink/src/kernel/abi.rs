//! `bootlink kernel abi`: does a kernel keep another's module ABI? Two
//! `Module.symvers` files (a patched build's, the distribution's) compared
//! symbol by symbol: the CRC modversions gives each export's type. A
//! module built against the other kernel loads only if every symbol it
//! imports is exported here with the same CRC.
//!
//! Compared: every export of `vmlinux` in the other file, and every export
//! of a module both files hold (a build of the image alone has no modules'
//! exports; a distribution's modules are then its own). And the other way:
//! an export ours adds to `vmlinux` that one of their modules exports
//! itself clashes (the kernel refuses that module: "exports duplicate
//! symbol").

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::sysmap::{SymversEntry, parse_symvers};
use crate::error::Result;
use crate::fsutil;

pub struct Options {
    /// The kernel whose ABI is checked (a patched build's Module.symvers).
    pub ours: PathBuf,
    /// The ABI it must keep (the distribution's Module.symvers).
    pub theirs: PathBuf,
}

/// An export whose CRC differs: its type changed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Changed {
    pub name: String,
    pub module: String,
    pub ours: String,
    pub theirs: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ours: PathBuf,
    pub theirs: PathBuf,
    /// Exports of theirs compared (vmlinux's, and those of modules in both).
    pub compared: usize,
    pub same: usize,
    pub changed: Vec<Changed>,
    /// Theirs exports that ours lacks (modules using one would not load).
    pub missing: Vec<String>,
    /// Exports ours adds to vmlinux that none of their modules exports.
    pub added: Vec<String>,
    /// Exports ours adds to vmlinux that one of their modules exports
    /// too: the kernel refuses that module.
    pub clashing: Vec<Clash>,
}

/// A vmlinux export of ours that a module of theirs exports itself.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Clash {
    pub name: String,
    /// Their module that exports it (refused by our kernel).
    pub module: String,
}

impl Report {
    /// Kept: nothing changed, nothing missing, nothing clashing.
    pub fn kept(&self) -> bool {
        self.changed.is_empty() && self.missing.is_empty() && self.clashing.is_empty()
    }
}

impl crate::report::Report for Report {
    fn render(&self) -> String {
        let mut s = format!(
            "ours      {}\ntheirs    {}\ncompared  {} exports: {} the same, {} changed, {} missing; {} added, {} clashing\n",
            self.ours.display(),
            self.theirs.display(),
            self.compared,
            self.same,
            self.changed.len(),
            self.missing.len(),
            self.added.len(),
            self.clashing.len()
        );
        for c in self.changed.iter().take(20) {
            s += &format!("changed   {} ({}): {} here, {} there\n", c.name, c.module, c.ours, c.theirs);
        }
        for m in self.missing.iter().take(20) {
            s += &format!("missing   {m}\n");
        }
        for c in &self.clashing {
            s += &format!(
                "clashing  {}: exported here by vmlinux, there by {} (refused: exports duplicate symbol)\n",
                c.name, c.module
            );
        }
        let more = self.changed.len().saturating_sub(20) + self.missing.len().saturating_sub(20);
        if more > 0 {
            s += &format!("... and {more} more (--json lists them all)\n");
        }
        s += if self.kept() {
            "ABI kept: modules built for theirs find every export with its type\n"
        } else {
            "ABI not kept: modules built for theirs that use these (or export a clashing one) are refused\n"
        };
        s
    }
}

fn read(path: &Path) -> Result<String> {
    fsutil::read_input_text(path)
}

/// Compare two parsed files.
pub(crate) fn compare(
    ours: &[SymversEntry],
    theirs: &[SymversEntry],
) -> (usize, usize, Vec<Changed>, Vec<String>, Vec<String>, Vec<Clash>) {
    let by_name: HashMap<&str, &SymversEntry> = ours.iter().map(|e| (e.name, e)).collect();
    let our_modules: std::collections::HashSet<&str> = ours.iter().map(|e| e.module).collect();
    let (mut compared, mut same, mut changed, mut missing) = (0, 0, Vec::new(), Vec::new());
    for t in theirs.iter().filter(|t| t.module == "vmlinux" || our_modules.contains(t.module)) {
        compared += 1;
        match by_name.get(t.name) {
            Some(o) if o.crc == t.crc => same += 1,
            Some(o) => changed.push(Changed {
                name: t.name.to_string(),
                module: t.module.to_string(),
                ours: format!("0x{:08x}", o.crc),
                theirs: format!("0x{:08x}", t.crc),
            }),
            None => missing.push(t.name.to_string()),
        }
    }
    let theirs_by_name: HashMap<&str, &SymversEntry> = theirs.iter().map(|t| (t.name, t)).collect();
    let (mut added, mut clashing) = (Vec::new(), Vec::new());
    for o in ours.iter().filter(|o| o.module == "vmlinux") {
        match theirs_by_name.get(o.name) {
            None => added.push(o.name.to_string()),
            Some(t) if t.module != "vmlinux" && !our_modules.contains(t.module) => {
                clashing.push(Clash { name: o.name.to_string(), module: t.module.to_string() })
            }
            Some(_) => {}
        }
    }
    clashing.sort_by(|a, b| a.name.cmp(&b.name));
    changed.sort_by(|a, b| a.name.cmp(&b.name));
    missing.sort();
    added.sort();
    (compared, same, changed, missing, added, clashing)
}

pub fn run(opts: &Options) -> Result<Report> {
    let (ours_text, theirs_text) = (read(&opts.ours)?, read(&opts.theirs)?);
    let ours = parse_symvers(&ours_text).map_err(|e| e.at(&opts.ours))?;
    let theirs = parse_symvers(&theirs_text).map_err(|e| e.at(&opts.theirs))?;
    let (compared, same, changed, missing, added, clashing) = compare(&ours, &theirs);
    Ok(Report {
        ours: opts.ours.clone(),
        theirs: opts.theirs.clone(),
        compared,
        same,
        changed,
        missing,
        added,
        clashing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_missing_and_added_exports() {
        let theirs = "0x00000001\ta\tvmlinux\tEXPORT_SYMBOL\t\n0x00000002\tb\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
                      0x00000003\tc\tvmlinux\tEXPORT_SYMBOL\t\n0x00000004\tm\tdrivers/x\tEXPORT_SYMBOL\t\n";
        let ours = "0x00000001\ta\tvmlinux\tEXPORT_SYMBOL\t\n0x000000ff\tb\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
                    0x00000009\tnew\tvmlinux\tEXPORT_SYMBOL\t\n";
        let (t, o) = (parse_symvers(theirs).unwrap(), parse_symvers(ours).unwrap());
        let (compared, same, changed, missing, added, clashing) = compare(&o, &t);
        assert_eq!((compared, same), (3, 1), "drivers/x is not in ours: not compared");
        assert_eq!(
            changed,
            [Changed {
                name: "b".into(),
                module: "vmlinux".into(),
                ours: "0x000000ff".into(),
                theirs: "0x00000002".into()
            }]
        );
        assert_eq!((missing, added), (vec!["c".to_string()], vec!["new".to_string()]));
        assert!(clashing.is_empty());
    }

    #[test]
    fn an_export_moved_into_vmlinux_clashes_with_their_module() {
        // blake2b_compress_generic exported by their blake2b_generic module,
        // and by our vmlinux: their module is refused ("exports duplicate symbol").
        let theirs = "0x00000001\ta\tvmlinux\tEXPORT_SYMBOL\t\n\
                      0x00000002\tblake2b_compress_generic\tcrypto/blake2b_generic\tEXPORT_SYMBOL\t\n";
        let ours = "0x00000001\ta\tvmlinux\tEXPORT_SYMBOL\t\n\
                    0x00000002\tblake2b_compress_generic\tvmlinux\tEXPORT_SYMBOL\t\n";
        let (t, o) = (parse_symvers(theirs).unwrap(), parse_symvers(ours).unwrap());
        let (compared, same, changed, missing, added, clashing) = compare(&o, &t);
        assert!(added.is_empty());
        let report = Report {
            ours: "ours".into(),
            theirs: "theirs".into(),
            compared,
            same,
            changed,
            missing,
            added,
            clashing: clashing.clone(),
        };
        assert!(!report.kept());
        let text = crate::report::Report::render(&report);
        assert!(
            text.contains(
                "clashing  blake2b_compress_generic: exported here by vmlinux, there by crypto/blake2b_generic"
            ),
            "{text}"
        );
        assert!(text.contains("ABI not kept"), "{text}");
        assert_eq!(
            clashing,
            [Clash { name: "blake2b_compress_generic".into(), module: "crypto/blake2b_generic".into() }]
        );
        // a module ours builds too is ours to export from where it likes
        let ours_with = format!("{ours}0x00000002\tb\tcrypto/blake2b_generic\tEXPORT_SYMBOL\t\n");
        let (.., clashing) = compare(&parse_symvers(&ours_with).unwrap(), &t);
        assert!(clashing.is_empty());
    }
}
