//! Tier 1: the whole tool end to end on small checked-in fixtures
//! (tests/fixtures, made by tests/fixtures/make.py): five tiny real modules
//! built with kbuild against Debian's 6.1 headers, a small vmlinux whose
//! export tables have the 6.1 layout, a real boot log. No network, no
//! kernel package, no QEMU; well under a minute.
//!
//! The figures below follow from the fixtures (see tests/modules/README.md
//! for what each module imports): 27 undefined symbol references in 5
//! modules, 26 of them vmlinux exports (11 distinct names), 1
//! (`bl_plain_hello`, used by bl_user) exported only by a module.

use crate::common;

use std::path::{Path, PathBuf};

use common::TestCommand;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("--json output")
}

#[test]
fn kernel_info_reads_the_fixture_vmlinux() {
    let f = fixtures();
    let v = json(&TestCommand::new(&[&"kernel-info", &f.join("vmlinux"), &"--json"]).ok());
    assert_eq!(v["release"], "6.1.0-56-amd64");
    assert_eq!(v["vermagic"], "6.1.0-56-amd64 SMP preempt mod_unload modversions ");
    assert_eq!((v["exports"].as_u64(), v["gpl_exports"].as_u64()), (Some(12), Some(3)));
    assert_eq!(v["machine"], "x86_64");
    // --exports: address, CRC (from Debian's Module.symvers), type, namespace, name.
    let o = TestCommand::new(&[&"kernel-info", &f.join("vmlinux"), &"--exports"]).ok();
    let text = common::stdout(&o);
    assert!(text.lines().any(|l| l.ends_with("\t0x92997ed8\tEXPORT_SYMBOL\t\t_printk")), "{text}");
    assert!(text.lines().any(|l| l.ends_with("\tEXPORT_SYMBOL_GPL\tDMA_BUF\tdma_buf_put")), "{text}");
    assert!(text.lines().any(|l| l.ends_with("\tEXPORT_SYMBOL\tBL_FIXTURE_NS\tbl_fixture_unused_ns")), "{text}");
    assert!(text.lines().all(|l| l.starts_with("ffffffff81")), "{text}");
}

#[test]
fn inspect_counts_the_fixture_modules() {
    let f = fixtures();
    let v = json(&TestCommand::new(&[&"inspect", &f.join("vmlinux"), &f.join("modules"), &"--json"]).ok());
    let t = &v["totals"];
    assert_eq!(t["modules"], 5);
    assert_eq!(t["undefined"], 27);
    assert_eq!(t["vmlinux"], 26);
    assert_eq!(t["modules_only"], 1);
    assert_eq!(t["unresolved"], 0);
    assert_eq!(t["distinct_names"], 11);
    let user = v["modules"].as_array().unwrap().iter().find(|m| m["name"] == "bl_user").expect("bl_user (from .ko.xz)");
    assert_eq!((user["undefined"].as_u64(), user["modules"].as_u64()), (Some(6), Some(1)));
}

#[test]
fn preresolve_applies_every_rule_and_a_rerun_changes_nothing() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = TestCommand::new(&[&"preresolve", &"--kernel", &f.join("vmlinux"), &f.join("modules"), &"-o", &out])
        .show_dir(tmp.path())
        .ok();
    let text = common::stdout(&o);
    for line in [
        "PRERESV bl_plain.ko (9/9 *fully* preresolved)",
        "PRERESV bl_ns_import.ko (4/4 *fully* preresolved)",
        "PRERESV bl_ns_missing.ko (3/4 preresolved; kept: 1 namespace not imported)",
        "PRERESV bl_proprietary.ko (3/4 preresolved; kept: 1 GPL-only)",
        "PRERESV bl_user.ko.xz (5/6 preresolved)",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    // The compressed module stays compressed, in xz.
    let xz = std::fs::read(out.join("bl_user.ko.xz")).unwrap();
    assert_eq!(&xz[..6], b"\xfd7zXZ\0");
    // ... with the input's check and dictionary (the kernel build's
    // --check=crc32 --lzma2=dict=1MiB), as xz itself reports them.
    use bootlink::compress::{Compression, Params};
    assert_eq!(Params::detect(&xz, Compression::Xz), Params::Xz { check: 1, dict: 1 << 20 });
    let list = std::process::Command::new("xz")
        .args(["--robot", "--list", "-vv"])
        .arg(out.join("bl_user.ko.xz"))
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.lines().any(|l| l.starts_with("stream\t") && l.contains("\tCRC32\t")), "{list}");
    assert!(list.lines().any(|l| l.starts_with("block\t") && l.contains("dict=1MiB")), "{list}");
    // Inputs untouched.
    let a = std::fs::read(f.join("modules/bl_plain.ko")).unwrap();
    let b = std::fs::read(out.join("bl_plain.ko")).unwrap();
    assert_ne!(a, b);
    // The output inspects as preresolved: only the module-only symbol is left.
    let v = json(&TestCommand::new(&[&"inspect", &f.join("vmlinux"), &out, &"--json"]).ok());
    let rows = v["modules"].as_array().unwrap();
    assert!(rows.iter().all(|m| m["preresolved"] == true), "{rows:?}");
    // A rerun on the output skips every module and writes the same bytes.
    let again = tmp.path().join("again");
    let o = TestCommand::new(&[&"preresolve", &"--kernel", &f.join("vmlinux"), &out, &"-o", &again]).ok();
    let text = common::stdout(&o);
    assert_eq!(text.matches("(already preresolved, skipped)").count(), 5, "{text}");
}

#[test]
fn fold_symbols_keeps_the_rules_and_readelf_reads_the_result() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let o = TestCommand::new(&[
        &"preresolve",
        &"--fold-symbols",
        &"--kernel",
        &f.join("vmlinux"),
        &f.join("modules/bl_plain.ko"),
        &f.join("modules/bl_proprietary.ko"),
        &"-o",
        &tmp.path(),
    ])
    .ok();
    let text = common::stdout(&o);
    assert!(text.contains("PRERESV bl_plain.ko (9/9 *fully* preresolved, folded)"), "{text}");
    assert!(text.contains("PRERESV bl_proprietary.ko (3/4 preresolved, folded; kept: 1 GPL-only)"), "{text}");
    let r = std::process::Command::new("readelf")
        .args(["-W", "-r", "-s"])
        .arg(tmp.path().join("bl_plain.ko"))
        .output()
        .unwrap();
    assert!(r.status.success() && r.stderr.is_empty(), "readelf: {}", String::from_utf8_lossy(&r.stderr));
    let syms = String::from_utf8_lossy(&r.stdout);
    assert!(!syms.contains(" UND _printk"), "folded symbols leave .symtab:\n{syms}");
}

#[test]
fn a_kernel_without_these_exports_is_another_kernel() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    // Truncated vmlinux: a one-line error naming it, nothing written.
    let data = std::fs::read(f.join("vmlinux")).unwrap();
    let cut = tmp.path().join("vmlinux");
    std::fs::write(&cut, &data[..data.len() / 3]).unwrap();
    let out = tmp.path().join("out");
    let err = TestCommand::new(&[&"preresolve", &"--kernel", &cut, &f.join("modules"), &"-o", &out])
        .fails_with(&cut.display().to_string());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!out.exists());
    // A module cut short is that module's error; the others are done.
    let mods = tmp.path().join("mods");
    std::fs::create_dir(&mods).unwrap();
    let plain = std::fs::read(f.join("modules/bl_plain.ko")).unwrap();
    std::fs::write(mods.join("bl_plain.ko"), &plain[..1000]).unwrap();
    std::fs::copy(f.join("modules/bl_ns_import.ko"), mods.join("bl_ns_import.ko")).unwrap();
    let err = TestCommand::new(&[&"preresolve", &"--kernel", &f.join("vmlinux"), &mods, &"-o", &out])
        .fails_with("bl_plain.ko");
    assert!(err.contains("bl_plain.ko"), "{err}");
    assert!(out.join("bl_ns_import.ko").is_file());
    assert!(!out.join("bl_plain.ko").exists());
}

#[test]
fn chart_reads_a_real_boot_log() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("boot.html");
    let log = f.join("dmesg-6.1-vfat.log");
    TestCommand::new(&[
        &"chart",
        &log,
        &"-o",
        &html,
        &"--svg",
        &tmp.path().join("t.svg"),
        &"--perfetto",
        &tmp.path().join("p.json"),
    ])
    .ok();
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>") && text.contains("<svg"), "{}", &text[..200.min(text.len())]);
    let v = json(&TestCommand::new(&[&"chart", &log, &"--json"]).ok());
    // 672 initcalls in the log, every "initcall ... returned" line.
    assert_eq!(v["series"][0]["initcalls"], 672);
    let p: serde_json::Value = serde_json::from_slice(&std::fs::read(tmp.path().join("p.json")).unwrap()).unwrap();
    assert!(p["traceEvents"].as_array().is_some_and(|e| e.len() > 600));
}

/// Byte offsets in a fixture module, found with the object crate.
struct Layout {
    /// (file offset of the symbol, its name) for each .symtab entry.
    symbols: Vec<(usize, String)>,
    /// File offset of the first SHT_RELA section's header, and of its data.
    rela_header: usize,
    rela_data: usize,
}

fn layout(data: &[u8]) -> Layout {
    use object::LittleEndian as LE;
    use object::read::elf::{FileHeader, SectionHeader};
    let h = object::elf::FileHeader64::<LE>::parse(data).unwrap();
    let sections = h.sections(LE, data).unwrap();
    let shoff = h.e_shoff(LE) as usize;
    let (mut symbols, mut rela) = (Vec::new(), None);
    for (i, s) in sections.iter().enumerate() {
        if s.sh_type(LE) == object::elf::SHT_SYMTAB {
            let strtab = sections.section(object::SectionIndex(s.sh_link(LE) as usize)).unwrap();
            let strings = strtab.data(LE, data).unwrap();
            let off = s.sh_offset(LE) as usize;
            for k in 0..(s.sh_size(LE) as usize / 24) {
                let name_off = u32::from_le_bytes(data[off + 24 * k..off + 24 * k + 4].try_into().unwrap()) as usize;
                let end = strings[name_off..].iter().position(|&b| b == 0).unwrap();
                symbols.push((off + 24 * k, String::from_utf8_lossy(&strings[name_off..name_off + end]).into_owned()));
            }
        }
        if s.sh_type(LE) == object::elf::SHT_RELA && rela.is_none() && s.sh_size(LE) > 0 {
            rela = Some((shoff + 64 * i, s.sh_offset(LE) as usize));
        }
    }
    let (rela_header, rela_data) = rela.unwrap();
    Layout { symbols, rela_header, rela_data }
}

/// Corrupt symbol and relocation tables are per-file errors in inspect and
/// in preresolve (both modes): one line naming the file and the problem,
/// exit status 1, nothing written for that module.
#[test]
fn corrupt_symbol_and_relocation_tables_are_refused() {
    let f = fixtures();
    let orig = std::fs::read(f.join("modules/bl_plain.ko")).unwrap();
    let l = layout(&orig);
    let sym = |name: &str| l.symbols.iter().find(|(_, n)| n == name).unwrap_or_else(|| panic!("no symbol {name}")).0;
    let shndx_at = sym("bl_plain_hello") + 6;
    type Patch = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Patch, String)> = vec![
        (
            "reserved",
            Box::new(move |d| d[shndx_at..shndx_at + 2].copy_from_slice(&0xff05u16.to_le_bytes())),
            "symbol bl_plain_hello".to_string() + " (#",
        ),
        (
            "past",
            Box::new(move |d| d[shndx_at..shndx_at + 2].copy_from_slice(&200u16.to_le_bytes())),
            "has section index 200, past the".into(),
        ),
        (
            "rela-offset",
            Box::new({
                let at = l.rela_header + 24;
                move |d| {
                    let len = d.len() as u64;
                    d[at..at + 8].copy_from_slice(&(len + 4096).to_le_bytes())
                }
            }),
            "lies outside the file (offset".into(),
        ),
        (
            "rela-symbol",
            Box::new({
                let at = l.rela_data + 12;
                move |d| d[at..at + 4].copy_from_slice(&0xffffu32.to_le_bytes())
            }),
            "names symbol 65535, past the".into(),
        ),
    ];
    for (what, patch, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let bad = tmp.path().join("bl_plain.ko");
        let mut d = orig.clone();
        patch(&mut d);
        std::fs::write(&bad, &d).unwrap();
        let err = TestCommand::new(&[&"inspect", &f.join("vmlinux"), &bad]).fails_with(&want);
        assert!(err.starts_with(&format!("bootlink: {}: ", bad.display())), "{what}: {err}");
        if what == "reserved" {
            assert!(err.contains("reserved section index 0xff05"), "{err}");
        }
        for fold in [false, true] {
            let out = tmp.path().join(format!("out-{fold}"));
            let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"preresolve", &"--kernel"];
            let vmlinux = f.join("vmlinux");
            args.push(&vmlinux);
            if fold {
                args.push(&"--fold-symbols");
            }
            args.extend([&bad as &dyn AsRef<std::ffi::OsStr>, &"-o", &out]);
            TestCommand::new(&args).fails_with(&want);
            assert!(!out.join("bl_plain.ko").exists(), "{what} (fold {fold}): a module was written");
        }
        assert_eq!(std::fs::read(&bad).unwrap(), d, "{what}: the input was modified");
    }
}

/// What a `kill -9` of `preresolve --in-place` leaves (a hidden temporary
/// beside the module) is removed by the next run; a live process's is not.
#[test]
fn a_later_run_removes_a_killed_runs_temporaries() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("bl_plain.ko");
    std::fs::copy(f.join("modules/bl_plain.ko"), &m).unwrap();
    // No process has pid 4194304 (above Linux's pid_max limit).
    let dead = tmp.path().join(".bl_plain.ko.bootlink-tmp.4194304");
    std::fs::write(&dead, b"half a module").unwrap();
    let live = tmp.path().join(format!(".bl_plain.ko.bootlink-tmp.{}", std::process::id()));
    std::fs::write(&live, b"being written").unwrap();
    TestCommand::new(&[&"preresolve", &"--kernel", &f.join("vmlinux"), &m, &"--in-place"]).show_dir(tmp.path()).ok();
    assert!(!dead.exists(), "the dead run's temporary is still there");
    assert!(live.exists(), "a live process's temporary was removed");
    let names: Vec<String> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// A rerun reports the same module set consistently: nothing preresolved
/// now, the earlier run's symbols as already preresolved, and the same
/// symbols left to modules' exports and kept by reason.
#[test]
fn a_rerun_counts_like_the_first_run() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let first = json(
        &TestCommand::new(&[&"preresolve", &"--kernel", &f.join("vmlinux"), &f.join("modules"), &"-o", &a, &"--json"])
            .ok(),
    );
    let again =
        json(&TestCommand::new(&[&"preresolve", &"--kernel", &f.join("vmlinux"), &a, &"-o", &b, &"--json"]).ok());
    let (t1, t2) = (&first["totals"], &again["totals"]);
    assert_eq!((t1["preresolved"].as_u64(), t1["already_symbols"].as_u64()), (Some(24), Some(0)), "{t1}");
    assert_eq!((t2["preresolved"].as_u64(), t2["already_symbols"].as_u64()), (Some(0), Some(24)), "{t2}");
    assert_eq!((t2["already"].as_u64(), t2["preresolved_modules"].as_u64()), (Some(5), Some(0)), "{t2}");
    for key in ["modules", "undefined", "module_symbols", "kept", "fully_preresolved"] {
        assert_eq!(t1[key], t2[key], "{key}: first {t1}, rerun {t2}");
    }
    assert_eq!(t2["module_symbols"], 1);
}

/// Errors in a report carry their kind, so callers (and these tests) match
/// on what went wrong rather than on message text.
#[test]
fn report_errors_are_typed() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let orig = std::fs::read(f.join("modules/bl_plain.ko")).unwrap();
    // Another kernel: the module's vermagic names 6.1.0-57.
    let mut other = orig.clone();
    let at = other.windows(22).position(|w| w == b"vermagic=6.1.0-56-amd6").unwrap();
    other[at + 16] = b'7';
    std::fs::write(tmp.path().join("other.ko"), &other).unwrap();
    // Truncated.
    std::fs::write(tmp.path().join("short.ko"), &orig[..600]).unwrap();
    let o = TestCommand::new(&[
        &"preresolve",
        &"--kernel",
        &f.join("vmlinux"),
        &tmp.path(),
        &"-o",
        &tmp.path().join("out"),
        &"--json",
    ])
    .cmd_output();
    assert!(!o.status.success());
    let v = json(&o);
    let kinds: std::collections::BTreeMap<String, String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let p = e["path"].as_str().unwrap();
            (Path::new(p).file_name().unwrap().to_string_lossy().into_owned(), e["kind"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(kinds.get("other.ko").map(String::as_str), Some("wrong_kernel"), "{v}");
    assert_eq!(kinds.get("short.ko").map(String::as_str), Some("format"), "{v}");
}

/// Enumerated flags are checked by the command line itself, naming the choices.
#[test]
fn an_unknown_signature_digest_is_refused_with_the_choices() {
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("k.pem");
    let err = TestCommand::new(&[
        &"preresolve",
        &"--kernel",
        &f.join("vmlinux"),
        &f.join("modules"),
        &"-o",
        &tmp.path().join("out"),
        &"--sign-key",
        &key,
        &"--sign-cert",
        &key,
        &"--sign-hash",
        &"md5",
    ])
    .fails_with("invalid value 'md5' for '--sign-hash <SIGN_HASH>'");
    assert!(err.contains("[possible values: sha256, sha384, sha512]"), "{err}");
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn plan_writes_dependencies_and_refuses_what_it_cannot_order() {
    let f = fixtures().join("modules");
    let tmp = tempfile::tempdir().unwrap();
    // bl_user uses bl_plain's export: bl_plain first, and named as its dependency.
    let o = TestCommand::new(&[&"plan", &"--modules", &f, &"--prefix", &"/m", &"bl_user"]).ok();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines, ["bootlink-plan 1", "bl_plain /m/bl_plain.ko -", "bl_user /m/bl_user.ko.xz bl_plain"], "{text}");
    // Parameters and extra ordering from a modprobe.d-style file, written atomically.
    let conf = tmp.path().join("x.conf");
    std::fs::write(&conf, "options bl_plain answer=42\nsoftdep bl_user pre: bl_proprietary\n").unwrap();
    let list = tmp.path().join("set.txt");
    std::fs::write(&list, "bl_proprietary.ko\nbl_plain.ko\nbl_user.ko.xz\n").unwrap();
    let out = tmp.path().join("plan");
    TestCommand::new(&[
        &"plan",
        &"--modules",
        &f,
        &"--prefix",
        &"/m",
        &"--set",
        &list,
        &"--options",
        &conf,
        &"-o",
        &out,
    ])
    .ok();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("bl_plain /m/bl_plain.ko - answer=42\n"), "{text}");
    assert!(text.contains("bl_user /m/bl_user.ko.xz bl_plain,bl_proprietary\n"), "{text}");
    // A dependency neither in the plan nor built in: refused, nothing written.
    std::fs::write(&list, "bl_user.ko.xz\n").unwrap();
    let bad = tmp.path().join("bad-plan");
    let e = TestCommand::new(&[&"plan", &"--modules", &f, &"--set", &list, &"-o", &bad])
        .fails_with("depends on bl_plain, which is neither in the plan nor built in");
    assert!(e.contains("bl_user"), "{e}");
    assert!(!bad.exists());
    TestCommand::new(&[&"plan", &"--modules", &f, &"--set", &list, &"bl_user"])
        .fails_with("either --set or module names");
    TestCommand::new(&[&"plan", &"--modules", &f]).fails_with("name the modules to load");
}

/// Output into a pipe nobody reads (`bootlink ... | head` after head ends)
/// ends the command quietly, as SIGPIPE ends any Unix filter: no internal
/// error on stderr.
#[test]
fn printing_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = std::process::Command::new(common::bin())
        .arg("help-reference")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?}", o.status);
}
