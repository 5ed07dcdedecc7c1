//! What lab patch `slide-check` (module.slide_check=1) counts in a boot of
//! modules preresolved for the KASLR slide, and where `_text` was: read
//! from the output of the [`PROGRAM`] workload.

use bootlink_lab::run::results::Repetition;

/// The workload that prints the counters and `_text`'s line of
/// /proc/kallsyms.
pub const PROGRAM: &str = "run:grep -e slide= -e \" _text$\" /sys/module/module/parameters/slide_stats /proc/kallsyms";

/// The counts of lab patch `slide-check` and `_text` at run time.
#[derive(Debug)]
pub struct Stats {
    pub slide: u64,
    pub modules: u64,
    pub moved: u64,
    pub checked: u64,
    pub disagreements: u64,
    pub text: u64,
}

/// The figures of a boot that ran [`PROGRAM`] (the test fails naming what
/// its output lacks).
pub fn stats(r: &Repetition) -> Stats {
    let out = &r.program().expect("the grep ran").output;
    let field = |k: &str| -> u64 {
        let w = out
            .split(|c: char| c.is_whitespace() || c == ':')
            .find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("no {k}= in {out}"));
        match w.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap(),
            None => w.parse().unwrap(),
        }
    };
    let text = out
        .lines()
        .find_map(|l| l.strip_suffix(" _text").and_then(|l| l.rsplit(':').next()))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .unwrap_or_else(|| panic!("no _text in {out}"));
    Stats {
        slide: field("slide"),
        modules: field("modules"),
        moved: field("moved"),
        checked: field("checked"),
        disagreements: field("disagreements"),
        text,
    }
}

/// One boot of modules preresolved for the slide, checked: every value
/// the loader moved equal to the stock lookup's (0 disagreements), every
/// module with a table, more than `at_least` values moved and checked,
/// the loader's slide where `_text` is now minus `link` (its link-time
/// address), not 0, and the lab's record of the boot saying the same.
/// `name` names the boot in every failure.
pub fn check_boot(name: &str, r: &Repetition, link: u64, at_least: u64) -> Stats {
    let s = stats(r);
    println!("{name}: {s:?}");
    assert_eq!(s.disagreements, 0, "{name}: {s:?}");
    assert_eq!(s.modules as usize, r.modules.len(), "{name}: every module had a table");
    assert!(s.checked > at_least && s.moved > at_least, "{name}: {s:?}");
    assert_eq!(s.text.wrapping_sub(link), s.slide, "{name}: _text {:#x}, linked at {link:#x}", s.text);
    assert_ne!(s.slide, 0, "{name}: KASLR did not move the kernel");
    assert_eq!(r.kaslr_slide, Some(s.slide), "{name}: the record's slide");
    s
}
