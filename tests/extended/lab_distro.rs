//! The lab on the kernel users run (`kernel:distro`): bootlink's series
//! built with Debian's own 6.1 config (`kernel build --config debian`, made
//! first when the cache has none: about an hour on 2 cores), Debian's own
//! modules signed again with the build's key, booted from its bzImage.
//!
//! One deterministic run of three variants of the fs set (vfat, fat,
//! nls_cp437 and isofs), each under `module.sig_enforce=1`:
//!
//! - `stock`: Debian's modules as the build's key signs them: every load
//!   passes its signature check, nothing taints, KASLR put the kernel
//!   elsewhere than its link-time base;
//! - `first-round`: folded against the link-time base with the slide added
//!   at load (patch `preresolved-slide`), finalized, unsigned and listed
//!   in a hash list linked into a new bzImage: the same modules load,
//!   checked by the list, with fewer symbol lookups and a shorter load,
//!   at a randomized base;
//! - `nokaslr`: stock with `kaslr:off`: the kernel at its link-time base,
//!   and the tables say so.

use crate::common;

use bootlink_lab::run::results::{Repetition, Run};

const TEST: &str = "lab_distro";
const E: &str = "module.sig_enforce=1";
/// x86-64's link-time `_text` (CONFIG_PHYSICAL_START 16 MiB, Debian's).
const LINK_TIME_TEXT: &str = "ffffffff81000000";

fn rep<'a>(run: &'a Run, name: &str) -> &'a Repetition {
    &common::variant(run, name).repetitions[0]
}

fn loads_ms(r: &Repetition) -> f64 {
    r.modules.iter().map(|m| m.total_us).sum::<f64>() / 1000.0
}

#[test]
fn debians_modules_load_checked_on_the_distribution_build_with_kaslr() {
    let dir = common::tmpdir("lab-distro");
    let out = dir.join("run");
    let stock = format!("stock=kernel:distro,cmdline:{E}");
    let first = format!(
        "first-round=kernel:distro,manifest:on,steps:fold-slide+unsign+finalize,cmdline:{E} trace_events.eval_one_pass=1"
    );
    let nokaslr = format!("nokaslr=kernel:distro,kaslr:off,cmdline:{E}");
    let t0 = std::time::Instant::now();
    let o = common::TestCommand::new(&[
        &"lab",
        &"vfat",
        &"nls_cp437",
        &"isofs",
        &"--variant",
        &stock,
        &"--variant",
        &first,
        &"--variant",
        &nokaslr,
        &"-o",
        &out,
    ])
    .show_dir(&out)
    .ok();
    let text = common::stdout(&o);
    print!("{text}");
    let run: Run = serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    assert!(!run.partial);
    for v in &run.variants {
        let r = &v.repetitions[0];
        assert!(r.failure.is_none(), "{}: {:?}", v.name, r.failure);
        let names: Vec<&str> = r.modules.iter().map(|m| m.name.as_str()).collect();
        for want in ["fat", "vfat", "nls_cp437", "isofs"] {
            assert!(names.contains(&want), "{}: {want} not loaded: {names:?}", v.name);
        }
        assert!(r.modules.iter().all(|m| m.status == 0), "{}: a load failed", v.name);
        assert_eq!(r.tainted, Some(0), "{}: every module checked, none taints", v.name);
        assert!(v.cmdline.split(' ').any(|w| w == E), "{}: {}", v.name, v.cmdline);
        let log = std::fs::read_to_string(out.join(&r.log)).unwrap();
        assert!(log.contains("Linux version 6.1.0-"), "{}: Debian's release", v.name);
        for bad in ["Key was rejected", "module verification failed", "Loading of unsigned module"] {
            assert!(!log.contains(bad), "{}: the console says {bad:?}", v.name);
        }
    }
    let text_of = |name: &str| rep(&run, name).kernel_text.clone().unwrap_or_else(|| panic!("{name}: no _text"));
    for name in ["stock", "first-round"] {
        assert_ne!(text_of(name), LINK_TIME_TEXT, "{name}: KASLR moved the kernel");
        let v = common::variant(&run, name);
        assert!(!v.cmdline.split(' ').any(|w| w == "nokaslr"), "{name}: {}", v.cmdline);
        let file = v.kernel.file_name().unwrap().to_string_lossy();
        assert!(file.ends_with("bzImage"), "{name} boots a bzImage: {}", v.kernel.display());
    }
    assert_eq!(text_of("nokaslr"), LINK_TIME_TEXT, "kaslr:off: the link-time base");
    // the record's slide: _text at run time minus the booted image's link-time _text
    for name in ["stock", "first-round", "nokaslr"] {
        let (text, slide) = (u64::from_str_radix(&text_of(name), 16).unwrap(), rep(&run, name).kaslr_slide);
        let link = u64::from_str_radix(LINK_TIME_TEXT, 16).unwrap();
        assert_eq!(slide, Some(text - link), "{name}: the record's slide");
    }
    assert!(text.contains("KASLR on; kernel text at") && text.contains("KASLR off (nokaslr)"), "{text}");
    // The list was linked into the first round's own bzImage and trusted there.
    let first_log = std::fs::read_to_string(out.join(&rep(&run, "first-round").log)).unwrap();
    assert!(first_log.contains("module hashes: "), "the first round's kernel read its list");
    let fv = common::variant(&run, "first-round");
    assert!(fv.kernel.starts_with(&out), "the rebuilt bzImage is the run's own: {}", fv.kernel.display());
    let lookups = |name: &str| rep(&run, name).modules.iter().map(|m| m.lookups.unwrap_or(0)).sum::<u64>();
    assert!(lookups("first-round") < lookups("stock") / 4, "folding removes most lookups");
    assert!(loads_ms(rep(&run, "first-round")) < loads_ms(rep(&run, "stock")), "the first round loads faster");
    common::report(
        TEST,
        &format!(
            "{:.0} s wall; stock {:.1} ms at {}, first-round {:.1} ms at {}, nokaslr at {}; lookups {} -> {}",
            t0.elapsed().as_secs_f64(),
            loads_ms(rep(&run, "stock")),
            text_of("stock"),
            loads_ms(rep(&run, "first-round")),
            text_of("first-round"),
            text_of("nokaslr"),
            lookups("stock"),
            lookups("first-round")
        ),
    );
}
