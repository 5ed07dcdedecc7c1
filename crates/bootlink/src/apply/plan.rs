//! Which steps a kernel build gets: chosen from what the kernel says it
//! supports (its loader-feature notes), whether its base is randomized,
//! whether its modules are signed, and whether a signing key is at hand.
//! The module steps are the lab's best combination (`folded-finalized`,
//! then the manifest: bench/manifest's `all-listed`), narrowed to what this
//! kernel uses.

use serde::Serialize;

use crate::kernel::LoaderFeatures;
use crate::kernel::features::name;
use crate::steps::Step;

/// What the choice depends on.
#[derive(Debug, Clone)]
pub struct Facts {
    pub features: LoaderFeatures,
    /// The kernel does not randomize its base (no CONFIG_RANDOMIZE_BASE),
    /// or the user said it boots with `nokaslr`.
    pub fixed_base: bool,
    /// The kernel moves preresolved addresses by its slide (it names
    /// `preresolved-slide` and its build ID is known).
    pub slide: bool,
    /// At least one installed module carries a signature.
    pub signed_modules: bool,
    /// The kernel checks module signatures (CONFIG_MODULE_SIG).
    pub checks_signatures: bool,
    /// A signing key (the build's, or one given) is at hand.
    pub key: bool,
    /// vmlinux has room for the module hash list (`__modhashes`).
    pub manifest_room: bool,
    /// The user accepts unsigned modules on a kernel that checks
    /// signatures without enforcing them (a tainted kernel).
    pub allow_unsigned: bool,
    /// The hash the module hash list should hold.
    pub manifest_hash: crate::manifest::Hash,
}

/// The steps, what else to do, and why anything was left out.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// In order (the steps' names).
    #[serde(serialize_with = "step_names")]
    pub steps: Vec<Step>,
    /// Boot parameters that turn on what the steps prepared (bootlink
    /// cannot write a boot loader's configuration: added by the user).
    pub cmdline: Vec<String>,
    /// One line per step left out, and why.
    pub left_out: Vec<String>,
}

fn step_names<S: serde::Serializer>(steps: &[Step], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(steps.iter().map(|st| st.name()))
}

impl Plan {
    pub fn of(f: &Facts) -> Plan {
        let mut steps = Vec::new();
        let mut cmdline = Vec::new();
        let mut left_out = Vec::new();
        let patched = matches!(&f.features, LoaderFeatures::Named(n) if !n.is_empty());
        // Rewriting a signed module drops its signature: it must then be
        // listed in the image or signed again, else the kernel refuses it.
        let finish = if !f.checks_signatures || !f.signed_modules {
            Some(None)
        } else if f.features.has(name::HASHES) && f.manifest_room {
            Some(Some(match f.manifest_hash {
                crate::manifest::Hash::Blake2b256 if f.features.has(name::HASHES_BLAKE2B) => Step::ManifestBlake2b,
                crate::manifest::Hash::Blake2b256 => {
                    left_out.push(
                        "manifest-blake2b: the kernel names no hashes-blake2b (patch `hashes-blake2b`, \
                         CONFIG_MODULE_HASHES_BLAKE2B) and would ignore such a list: listed by SHA-256"
                            .into(),
                    );
                    Step::Manifest
                }
                crate::manifest::Hash::Sha256 => {
                    if f.features.has(name::HASHES_BLAKE2B) {
                        // The hash that is cheaper depends on the CPU the
                        // kernel boots on, which apply does not see.
                        left_out.push(
                            "manifest-blake2b: the kernel also takes a list of BLAKE2b-256 digests \
                             (hashes-blake2b); listed by SHA-256, as asked. On a CPU without SHA \
                             instructions --manifest-hash blake2b checks the modules in about half the time \
                             (docs/links.md); the target's CPU decides, which apply cannot see"
                                .into(),
                        );
                    }
                    Step::Manifest
                }
            }))
        } else if f.key {
            Some(Some(Step::Sign))
        } else if f.allow_unsigned {
            Some(None)
        } else {
            None
        };
        let Some(finish) = finish else {
            left_out.push(
                "every step: the modules are signed and the kernel checks signatures (CONFIG_MODULE_SIG), \
                 and there is neither a signing key (--sign-key) nor a module hash list in the kernel \
                 (patch `hash-manifest`): a rewritten module would be refused with module.sig_enforce=1 or \
                 Secure Boot, and taint the kernel otherwise (--allow-unsigned takes that)"
                    .into(),
            );
            return Plan { steps, cmdline, left_out };
        };
        if f.fixed_base {
            steps.push(Step::Fold);
        } else if f.slide {
            steps.push(Step::FoldSlide);
        } else {
            left_out.push(
                "fold: the kernel randomizes its base (CONFIG_RANDOMIZE_BASE) and has no patch \
                 `preresolved-slide`; pass --assume-nokaslr if it boots with nokaslr"
                    .into(),
            );
        }
        let folded = f.fixed_base || f.slide;
        if !patched {
            steps.push(Step::Trim);
            left_out.push(
                "finalize, symbol tables, module hash list: the kernel names no loader features (a kernel \
                 without bootlink's series, kernel/6.1/patches); a patched kernel would add them"
                    .into(),
            );
        } else {
            steps.push(Step::Unsign);
            let (orc, mcount) = (f.features.has(name::ORC_SORTED), f.features.has(name::FTRACE_CHECKED));
            match (orc, mcount) {
                (true, true) => steps.push(Step::Finalize),
                (true, false) => steps.push(Step::FinalizeOrc),
                (false, true) => steps.push(Step::FinalizeMcount),
                (false, false) => {
                    left_out.push("finalize: the kernel names neither orc-sorted nor ftrace-checked".into())
                }
            }
            // Folded modules keep few lookups (module-to-module only): the
            // lab's best combination has no tables. Without folding, the
            // tables are the symbols phase's gain.
            if !folded && f.features.has(name::SYMHASH) {
                if f.features.has(name::EXPORT_SLOTS) {
                    steps.push(Step::SymhashSlotted);
                } else if f.features.has(name::VERSIONS_SORTED) {
                    steps.push(Step::SymhashSorted);
                } else {
                    steps.push(Step::Symhash);
                }
                cmdline.push("module.symlookup=gnu".into());
            } else if f.features.has(name::SYMHASH) {
                left_out.push("symhash: folded modules keep only module-to-module lookups".into());
            }
            if f.features.has(name::EVAL_ONE_PASS) {
                cmdline.push("trace_events.eval_one_pass=1".into());
            }
        }
        if let Some(s) = finish {
            if s == Step::Sign && patched {
                left_out.push(if f.features.has(name::HASHES) {
                    "manifest: the kernel has a module hash list (hashes) but the image given has no room for it \
                     (it is written into vmlinux's __modhashes, from the build directory): modules are signed \
                     again instead"
                        .into()
                } else {
                    "manifest: the kernel has no module hash list (hashes): modules are signed again instead".into()
                });
            }
            steps.push(s);
        }
        Plan { steps, cmdline, left_out }
    }
}

/// The steps `--only` may name: the fixes a plan can hold, and its ways to
/// finish (the module hash lists, `sign`).
pub fn parse_only(list: &str) -> std::result::Result<Vec<Step>, String> {
    let names = || {
        Step::ALL
            .iter()
            .chain([Step::ManifestBlake2b, Step::Sign].iter())
            .filter(|s| **s != Step::Unsign)
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        let step = match name {
            "sign" => Step::Sign,
            "manifest-blake2b" => Step::ManifestBlake2b,
            "unsign" => return Err("unsign: not a fix (it comes with the steps that need it)".into()),
            n => Step::parse(n).ok_or_else(|| format!("{n:?}: no such step (one of {})", names()))?,
        };
        if !out.contains(&step) {
            out.push(step);
        }
    }
    Ok(out)
}

impl Plan {
    /// Of this plan's steps, only the fixes in `only` (what `--only` names),
    /// with what they need: `unsign` before a module step, and the plan's
    /// way to finish (the module hash list when `only` names it, else the
    /// modules signed again: `key` says whether a key is at hand). A
    /// module hash list or a signing step alone is allowed (`--only sign`:
    /// the modules signed again with the build's key and nothing else). The
    /// command line keeps `module.symlookup=gnu` only with a symbol-table
    /// step; the other parameters are the user's to add. An `only` step
    /// the plan does not hold is an error naming it and why it is out.
    pub fn narrow(self, only: &[Step], key: bool) -> std::result::Result<Plan, String> {
        let finishing = |s: &Step| s.list_hash().is_some() || *s == Step::Sign;
        for s in only {
            let allowed = self.steps.contains(s) || (*s == Step::Sign && key);
            if !allowed {
                let why = self
                    .left_out
                    .iter()
                    .find(|l| l.starts_with(s.name()) || l.starts_with("every step"))
                    .cloned()
                    .unwrap_or_else(|| "the kernel's plan does not hold it".into());
                return Err(format!("--only {}: not a step for this kernel ({why})", s.name()));
            }
        }
        let fixes: Vec<Step> = self.steps.iter().filter(|s| only.contains(s) && !finishing(s)).cloned().collect();
        let mut steps = Vec::new();
        // A rewritten module loses its signature, and a listed one needs
        // none: the plan's unsign comes first for either.
        let list = only.iter().find(|s| s.list_hash().is_some());
        let rewrites = fixes.iter().any(|s| *s != Step::Unsign) || list.is_some();
        if rewrites && self.steps.contains(&Step::Unsign) && !fixes.contains(&Step::Unsign) {
            steps.push(Step::Unsign);
        }
        // In the plan's order.
        steps.extend(self.steps.iter().filter(|s| fixes.contains(s)).cloned());
        if let Some(list) = list {
            steps.push(list.clone());
        } else if only.contains(&Step::Sign) || self.steps.iter().any(finishing) {
            if !key {
                return Err("--only without the module hash list: the rewritten modules must be signed again, \
                            and no signing key is at hand (--sign-key)"
                    .into());
            }
            steps.push(Step::Sign);
        }
        let symhash = steps.iter().any(|s| matches!(s, Step::Symhash | Step::SymhashSorted | Step::SymhashSlotted));
        let mut left_out = self.left_out;
        let mut cmdline = Vec::new();
        for c in self.cmdline {
            if c == "module.symlookup=gnu" && symhash {
                cmdline.push(c);
            } else if c != "module.symlookup=gnu" {
                left_out.push(format!("{c}: not added with --only (add it to the command line yourself)"));
            }
        }
        for s in self.steps.iter().filter(|s| !steps.contains(s)) {
            left_out.push(format!("{}: not named by --only", s.name()));
        }
        Ok(Plan { steps, cmdline, left_out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(features: &[&str]) -> Facts {
        Facts {
            features: LoaderFeatures::Named(features.iter().map(|s| s.to_string()).collect()),
            fixed_base: true,
            slide: false,
            signed_modules: true,
            checks_signatures: true,
            key: true,
            manifest_room: true,
            allow_unsigned: false,
            manifest_hash: crate::manifest::Hash::Sha256,
        }
    }

    const ALL: &[&str] = &[
        "symhash",
        "symhash-vmlinux",
        "versions-sorted",
        "versions-indexed",
        "export-slots",
        "symlookup-direct",
        "ftrace-check-sorted",
        "ftrace-checked",
        "orc-sorted",
        "eval-one-pass",
        "load-stats",
        "dedup",
        "hashes",
    ];

    #[test]
    fn a_patched_kernel_gets_the_labs_best_combination() {
        let p = Plan::of(&facts(ALL));
        assert_eq!(p.steps, [Step::Fold, Step::Unsign, Step::Finalize, Step::Manifest]);
        assert_eq!(p.cmdline, ["trace_events.eval_one_pass=1"]);
        // The same module steps as the lab's preset.
        assert_eq!(&p.steps[..3], crate::steps::preset("folded-finalized").unwrap());
    }

    #[test]
    fn a_blake2b_list_when_asked_and_the_kernel_takes_it() {
        let mut f = facts(ALL);
        f.manifest_hash = crate::manifest::Hash::Blake2b256;
        // Not named: SHA-256, and said.
        let p = Plan::of(&f);
        assert_eq!(p.steps.last(), Some(&Step::Manifest));
        assert!(p.left_out.iter().any(|l| l.starts_with("manifest-blake2b:")), "{:?}", p.left_out);
        let mut with: Vec<&str> = ALL.to_vec();
        with.push("hashes-blake2b");
        f.features = LoaderFeatures::Named(with.iter().map(|s| s.to_string()).collect());
        let p = Plan::of(&f);
        assert_eq!(p.steps, [Step::Fold, Step::Unsign, Step::Finalize, Step::ManifestBlake2b]);
        assert!(!p.left_out.iter().any(|l| l.starts_with("manifest-blake2b:")), "{:?}", p.left_out);
        // Not asked, the kernel taking both: SHA-256, and a line saying the
        // other is the user's choice.
        f.manifest_hash = crate::manifest::Hash::Sha256;
        let p = Plan::of(&f);
        assert_eq!(p.steps, [Step::Fold, Step::Unsign, Step::Finalize, Step::Manifest]);
        assert!(
            p.left_out.iter().any(|l| l.starts_with("manifest-blake2b:") && l.contains("--manifest-hash blake2b")),
            "{:?}",
            p.left_out
        );
    }

    #[test]
    fn a_randomized_base_gets_tables_instead_of_folding() {
        let mut f = facts(ALL);
        f.fixed_base = false;
        let p = Plan::of(&f);
        assert_eq!(p.steps, [Step::Unsign, Step::Finalize, Step::SymhashSlotted, Step::Manifest]);
        assert!(p.cmdline.contains(&"module.symlookup=gnu".to_string()));
        assert!(p.left_out[0].starts_with("fold:"), "{:?}", p.left_out);
    }

    #[test]
    fn a_randomized_base_with_the_slide_patch_folds_for_the_slide() {
        let mut f = facts(ALL);
        f.fixed_base = false;
        f.slide = true;
        let p = Plan::of(&f);
        assert_eq!(p.steps, [Step::FoldSlide, Step::Unsign, Step::Finalize, Step::Manifest]);
        assert!(!p.cmdline.contains(&"module.symlookup=gnu".to_string()), "{:?}", p.cmdline);
        // A fixed base keeps the link-time fold, byte for byte as before.
        f.fixed_base = true;
        assert_eq!(Plan::of(&f).steps[0], Step::Fold);
    }

    #[test]
    fn a_stock_kernel_gets_what_needs_no_patch_and_is_told_the_rest() {
        let mut f = facts(&[]);
        f.signed_modules = false;
        let p = Plan::of(&f);
        assert_eq!(p.steps, [Step::Fold, Step::Trim]);
        assert!(p.left_out.iter().any(|l| l.contains("a patched kernel would add them")), "{:?}", p.left_out);
        // Signed modules on a stock kernel: signed again with the key.
        let p = Plan::of(&facts(&[]));
        assert_eq!(p.steps, [Step::Fold, Step::Trim, Step::Sign]);
    }

    #[test]
    fn signed_modules_without_a_key_or_a_list_are_left_alone() {
        let mut f = facts(&["orc-sorted"]);
        f.key = false;
        let p = Plan::of(&f);
        assert!(p.steps.is_empty());
        assert!(p.left_out[0].contains("would be refused"), "{:?}", p.left_out);
        // Without hashes but with a key: finalized, then signed again.
        // Unsigned modules taken on purpose.
        f.allow_unsigned = true;
        assert_eq!(Plan::of(&f).steps, [Step::Fold, Step::Unsign, Step::FinalizeOrc]);
        f.key = true;
        assert_eq!(Plan::of(&f).steps, [Step::Fold, Step::Unsign, Step::FinalizeOrc, Step::Sign]);
    }

    #[test]
    fn an_image_without_room_for_the_list_is_signed_again_and_says_why() {
        // An installed bzImage (apply --image): the kernel names hashes,
        // but the list can only be written into vmlinux.
        let mut f = facts(ALL);
        f.manifest_room = false;
        let p = Plan::of(&f);
        assert_eq!(p.steps, [Step::Fold, Step::Unsign, Step::Finalize, Step::Sign]);
        let l = p.left_out.iter().find(|l| l.starts_with("manifest:")).expect("manifest left out");
        assert!(l.contains("no room") && l.contains("build directory"), "{l}");
        f.key = false;
        assert!(Plan::of(&f).steps.is_empty(), "no key, no room: nothing may be rewritten");
    }

    fn randomized() -> Plan {
        let mut f = facts(ALL);
        f.fixed_base = false;
        Plan::of(&f)
    }

    #[test]
    fn only_one_fix_keeps_what_it_needs_and_signs_again() {
        let full = randomized();
        assert_eq!(full.steps, [Step::Unsign, Step::Finalize, Step::SymhashSlotted, Step::Manifest]);
        let p = full.clone().narrow(&[Step::Finalize], true).unwrap();
        assert_eq!(p.steps, [Step::Unsign, Step::Finalize, Step::Sign]);
        assert!(p.cmdline.is_empty(), "{:?}", p.cmdline);
        assert!(p.left_out.iter().any(|l| l.starts_with("trace_events.eval_one_pass=1")), "{:?}", p.left_out);
        let p = full.clone().narrow(&[Step::SymhashSlotted], true).unwrap();
        assert_eq!(p.steps, [Step::Unsign, Step::SymhashSlotted, Step::Sign]);
        assert_eq!(p.cmdline, ["module.symlookup=gnu"]);
        // The hash list alone: the signatures removed, the list written.
        let p = full.clone().narrow(&[Step::Manifest], true).unwrap();
        assert_eq!(p.steps, [Step::Unsign, Step::Manifest]);
        // Signed again with the build's key, nothing else.
        let p = full.clone().narrow(&[Step::Sign], true).unwrap();
        assert_eq!(p.steps, [Step::Sign]);
        // Every fix named: the plan itself, less the parameters.
        let p = full.clone().narrow(&[Step::Finalize, Step::SymhashSlotted, Step::Manifest], true).unwrap();
        assert_eq!(p.steps, full.steps);
    }

    #[test]
    fn only_names_fixes() {
        assert_eq!(parse_only("finalize,manifest").unwrap(), [Step::Finalize, Step::Manifest]);
        assert_eq!(parse_only("sign").unwrap(), [Step::Sign]);
        assert!(parse_only("unsign").unwrap_err().contains("not a fix"));
        let e = parse_only("finalise").unwrap_err();
        assert!(e.starts_with("\"finalise\": no such step") && e.contains("symhash-slotted"), "{e}");
    }

    #[test]
    fn only_refuses_what_the_plan_cannot_do() {
        let full = randomized();
        let e = full.clone().narrow(&[Step::Fold], true).unwrap_err();
        assert!(e.starts_with("--only fold: not a step for this kernel (fold: the kernel randomizes"), "{e}");
        let e = full.clone().narrow(&[Step::Sign], false).unwrap_err();
        assert!(e.contains("--only sign"), "{e}");
        let e = full.narrow(&[Step::Finalize], false).unwrap_err();
        assert!(e.contains("no signing key"), "{e}");
    }
}
