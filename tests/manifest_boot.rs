//! The module hash manifest on the self-built kernel (kernel/patches 0012)
//! under QEMU, with `module.sig_enforce=1`: unsigned modules load when the
//! kernel image lists them (`--variant ...,manifest:on`), are refused
//! without the list and with `module.hashes=0`; the image the variant booted
//! lists exactly the modules it loaded (`bootlink manifest show`). One
//! untraced realtime boot per variant over a few modules of the lab's set.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use bootlink::run::results::Run;
use common::TestCommand;

/// A few modules of the lab's set with dependencies among them.
const MODULES: &[&str] = &["sctp", "nls_cp437", "crc32c_generic"];
const ENFORCE: &str = "module.sig_enforce=1";

fn lab() -> (Run, PathBuf) {
    let k = common::self_built(false);
    let out = common::tmpdir("manifest-boot").join("run");
    let vmlinux = k.dir.join("vmlinux");
    let modules = k.dir.join("lib/modules").join(&k.release);
    let listed = format!("listed=modules:unsigned,manifest:on,cmdline:{ENFORCE}");
    let unlisted = format!("unlisted=modules:unsigned,cmdline:{ENFORCE}");
    let off = format!("off=modules:unsigned,manifest:on,cmdline:{ENFORCE} module.hashes=0");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
        &"lab",
        &"--no-trace",
        &"--realtime",
        &"--kernel",
        &vmlinux,
        &"--modules",
        &modules,
        &"--variant",
        &listed,
        &"--variant",
        &unlisted,
        &"--variant",
        &off,
        &"-o",
        &out,
    ];
    for m in MODULES {
        args.push(m);
    }
    // Refused modules make the lab's checks fail: read run.json either way.
    let o = TestCommand::new(&args).cmd_output();
    let text = std::fs::read(out.join("run.json"))
        .unwrap_or_else(|e| panic!("no run.json ({e}):\n{}\n{}", common::stdout(&o), common::stderr(&o)));
    (serde_json::from_slice(&text).unwrap(), out)
}

#[test]
fn listed_modules_load_unsigned_under_sig_enforce_and_only_they() {
    let (run, out) = lab();
    let by_name = |n: &str| run.variants.iter().find(|v| v.name == n).unwrap_or_else(|| panic!("no variant {n}"));
    let statuses = |n: &str| -> Vec<i32> { by_name(n).repetitions[0].modules.iter().map(|m| m.status).collect() };
    let listed = statuses("listed");
    assert!(!listed.is_empty() && listed.iter().all(|&s| s == 0), "listed: {listed:?}");
    for n in ["unlisted", "off"] {
        let s = statuses(n);
        assert!(!s.is_empty() && s.iter().all(|&s| s != 0), "{n}: an unsigned module loaded under sig_enforce: {s:?}");
        let log = std::fs::read_to_string(out.join(&by_name(n).repetitions[0].log)).unwrap();
        assert!(log.contains("Loading of unsigned module is rejected"), "{n}: the kernel's refusal is in its log");
    }
    let log = std::fs::read_to_string(out.join(&by_name("listed").repetitions[0].log)).unwrap();
    let n = listed.len();
    assert!(log.contains(&format!("module hashes: {n} modules of this build trusted")), "listed's log");
    assert!(!log.contains("tainting kernel"), "a listed module tainted the kernel");

    // The kernel listed's variant booted lists exactly what it loaded.
    let kernel = &by_name("listed").kernel;
    assert!(kernel.starts_with(&out), "the filled kernel is kept in the run: {}", kernel.display());
    let shown = TestCommand::new(&[&"manifest", &"show", &"--json", kernel]).ok();
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let digests: BTreeSet<String> =
        v["digests"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect();
    assert_eq!(digests.len(), n, "{v}");
    assert!(!by_name("unlisted").kernel.starts_with(&out), "unlisted boots the build's own (empty) list");
}

/// Where `__modhashes` lies in a vmlinux file.
fn section_range(vmlinux: &std::path::Path) -> (usize, usize) {
    use object::read::{Object, ObjectSection};
    let data = std::fs::read(vmlinux).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f.section_by_name("__modhashes").expect("a kernel with kernel/patches 0012");
    let (off, size) = s.file_range().unwrap();
    (off as usize, size as usize)
}

/// The same kernel with `area` as its manifest section (as found, or corrupted).
fn with_area(vmlinux: &std::path::Path, out: &std::path::Path, area: &[u8]) {
    let mut data = std::fs::read(vmlinux).unwrap();
    let (off, size) = section_range(vmlinux);
    data[off..off + size].fill(0);
    data[off..off + area.len()].copy_from_slice(area);
    std::fs::write(out, data).unwrap();
}

/// A kernel directory for the lab: `vmlinux` and a module tree.
fn kernel_dir(
    root: &std::path::Path,
    name: &str,
    vmlinux: &std::path::Path,
    tree: &std::path::Path,
    release: &str,
) -> PathBuf {
    let d = root.join(name);
    std::fs::create_dir_all(d.join("lib/modules")).unwrap();
    std::fs::copy(vmlinux, d.join("vmlinux")).unwrap();
    std::os::unix::fs::symlink(tree, d.join("lib/modules").join(release)).unwrap();
    d
}

/// The accept/refuse matrix with `module.sig_enforce=1`: the build's modules,
/// unsigned, listed in the kernel's manifest load; a listed module with one
/// byte flipped, a module of another build (Debian's, under the same name),
/// and every module under a manifest that is empty, corrupted (bad magic) or
/// holds a duplicate entry are refused with the kernel's usual line, and
/// none of them loads. (A truncated module, or one renamed inside, never
/// reaches the guest: the lab's module tree reader refuses the first and
/// knows the second by its new name; to the kernel either is another hash,
/// as a flipped byte is.)
#[test]
fn tampered_modules_and_manifests_are_refused() {
    let k = common::self_built(false);
    let root = common::tmpdir("manifest-matrix");
    let src = k.dir.join("lib/modules").join(&k.release);
    // The genuine tree: every module with its signature stripped.
    let genuine = root.join("genuine");
    common::sh("cp", &["-a", src.to_str().unwrap(), genuine.to_str().unwrap()]);
    let mut listed = Vec::new();
    for f in bootlink::tree::find_modules(std::slice::from_ref(&genuine)).unwrap() {
        let data = std::fs::read(&f).unwrap();
        let (len, _) = bootlink::module::split_signature(&data).unwrap();
        std::fs::write(&f, &data[..len]).unwrap();
        listed.push(f);
    }
    let vmlinux = k.dir.join("vmlinux");
    let good = root.join("vmlinux.listed");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"manifest", &"write", &"--vmlinux", &vmlinux, &"-o", &good];
    args.push(&genuine);
    TestCommand::new(&args).ok();
    let area = {
        let data = std::fs::read(&good).unwrap();
        let (off, size) = section_range(&good);
        let m = bootlink::manifest::Manifest::decode(&data[off..off + size]).unwrap().unwrap();
        m.encode()
    };
    // One module changed three ways, and one from Debian's own build.
    let victim =
        listed.iter().find(|p| p.file_name().unwrap().to_string_lossy().starts_with("nls_cp437.ko")).unwrap().clone();
    let changed = |name: &str, edit: &dyn Fn(&mut Vec<u8>)| -> PathBuf {
        let t = root.join(format!("tree-{name}"));
        common::sh("cp", &["-as", genuine.to_str().unwrap(), t.to_str().unwrap()]);
        let f = t.join(victim.strip_prefix(&genuine).unwrap());
        let mut data = std::fs::read(&victim).unwrap();
        edit(&mut data);
        std::fs::remove_file(&f).unwrap();
        std::fs::write(&f, data).unwrap();
        t
    };
    let flipped = changed("flipped", &|d| {
        let i = d.len() / 2;
        d[i] ^= 1;
    });
    let debian = common::kernel();
    let theirs = bootlink::tree::find_modules(std::slice::from_ref(&debian.modules))
        .unwrap()
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("nls_cp437.ko"))
        .unwrap();
    let other = changed("other-build", &|d| *d = bootlink::module::load_bytes(&theirs).unwrap().0.to_vec());
    let empty = root.join("vmlinux.empty");
    with_area(&vmlinux, &empty, &[]);
    let bad_magic = root.join("vmlinux.bad-magic");
    let mut a = area.clone();
    a[0] ^= 0x20;
    with_area(&vmlinux, &bad_magic, &a);
    let duplicate = root.join("vmlinux.duplicate");
    let mut a = area.clone();
    let n = u32::from_le_bytes(a[8..12].try_into().unwrap());
    a[8..12].copy_from_slice(&(n + 1).to_le_bytes());
    let first: Vec<u8> = a[16..48].to_vec();
    a.splice(16..16, first);
    with_area(&vmlinux, &duplicate, &a);

    let cases: Vec<(&str, PathBuf, &PathBuf)> = vec![
        ("listed", good.clone(), &genuine),
        ("flipped", good.clone(), &flipped),
        ("other-build", good.clone(), &other),
        ("empty", empty, &genuine),
        ("bad-magic", bad_magic, &genuine),
        ("duplicate", duplicate, &genuine),
    ];
    let mut variants = Vec::new();
    for (name, v, tree) in &cases {
        let d = kernel_dir(&root.join("kernels"), name, v, tree, &k.release);
        variants.push(format!("{name}=kernel:{},cmdline:{ENFORCE}", d.display()));
    }
    let out = root.join("run");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"lab", &"--no-trace", &"--realtime", &"-o", &out];
    for v in &variants {
        args.push(&"--variant");
        args.push(v);
    }
    for m in MODULES {
        args.push(m);
    }
    args.push(&"nls_cp437");
    let o = TestCommand::new(&args).cmd_output();
    let run: Run = serde_json::from_slice(
        &std::fs::read(out.join("run.json"))
            .unwrap_or_else(|e| panic!("no run.json ({e}):\n{}\n{}", common::stdout(&o), common::stderr(&o))),
    )
    .unwrap();
    for v in &run.variants {
        let rep = &v.repetitions[0];
        let log = std::fs::read_to_string(out.join(&rep.log)).unwrap();
        let status = |m: &str| rep.modules.iter().find(|x| x.name == m).map(|x| x.status);
        let victim = status("nls_cp437").expect("nls_cp437 was tried");
        let others: Vec<i32> = rep.modules.iter().filter(|m| m.name != "nls_cp437").map(|m| m.status).collect();
        println!("{}: nls_cp437 {victim}, others {others:?}", v.name);
        match v.name.as_str() {
            "listed" => {
                assert_eq!(victim, 0);
                assert!(others.iter().all(|&s| s == 0), "{others:?}");
            }
            "flipped" | "other-build" => {
                assert_ne!(victim, 0, "{}: a changed module loaded", v.name);
                assert!(others.iter().all(|&s| s == 0), "{}: the listed ones still load: {others:?}", v.name);
                assert!(log.contains("is rejected"), "{}: the kernel's refusal line", v.name);
            }
            "empty" | "bad-magic" | "duplicate" => {
                assert!(victim != 0 && others.iter().all(|&s| s != 0), "{}: a module loaded: {others:?}", v.name);
                assert!(log.contains("Loading of unsigned module is rejected"), "{}", v.name);
                if v.name != "empty" {
                    assert!(log.contains("module hashes: the list in the kernel image is invalid"), "{}", v.name);
                }
            }
            n => panic!("unknown variant {n}"),
        }
        assert!(!log.contains("tainting kernel"), "{}: sig_enforce refuses, it never taints", v.name);
    }
}
