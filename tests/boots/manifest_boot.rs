//! The module hash manifest on the self-built kernel (patch `hash-manifest`)
//! under QEMU, with `module.sig_enforce=1`: unsigned modules load when the
//! kernel image lists them (`--variant ...,manifest:on`), are refused
//! without the list and with `module.hashes=0`; the image the variant booted
//! lists exactly the modules it loaded (`bootlink manifest show`). One
//! untraced realtime boot per variant over a few modules of the lab's set.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use bootlink_lab::run::results::Run;
use common::TestCommand;
use sha2::Digest;

/// A few modules of the lab's set with dependencies among them.
const MODULES: &[&str] = &["sctp", "nls_cp437", "crc32c_generic"];
const ENFORCE: &str = "module.sig_enforce=1";

fn lab() -> (Run, PathBuf) {
    let k = common::self_built(false);
    let out = common::tmpdir("manifest-boot").keep().join("run");
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
    common::report("manifest variants: listed / unlisted / module.hashes=0", &common::stdout(&o));
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
    let s = f.section_by_name("__modhashes").expect("a kernel with patch `hash-manifest`");
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

/// A kernel directory for the lab: the image (`vmlinux`, or `bzImage` when
/// it is no ELF file) and a module tree.
fn kernel_dir(
    root: &std::path::Path,
    name: &str,
    vmlinux: &std::path::Path,
    tree: &std::path::Path,
    release: &str,
) -> PathBuf {
    let d = root.join(name);
    std::fs::create_dir_all(d.join("lib/modules")).unwrap();
    let elf = std::fs::read(vmlinux).unwrap().starts_with(b"\x7fELF");
    std::fs::copy(vmlinux, d.join(if elf { "vmlinux" } else { "bzImage" })).unwrap();
    std::os::unix::fs::symlink(tree, d.join("lib/modules").join(release)).unwrap();
    d
}

/// The build's modules, unsigned, in a tree of their own, and the build's
/// vmlinux listing exactly them: what the matrix changes one thing of.
struct Genuine {
    root: common::TestDir,
    release: String,
    /// The kernel as built (its manifest empty).
    vmlinux: PathBuf,
    /// The same kernel listing every module of `tree`.
    listed: PathBuf,
    tree: PathBuf,
    /// The tree's nls_cp437: the module the cases change.
    victim: PathBuf,
}

fn genuine(label: &str) -> Genuine {
    let k = common::self_built(false);
    let root = common::tmpdir(label);
    let src = k.dir.join("lib/modules").join(&k.release);
    let tree = root.join("genuine");
    common::sh("cp", &["-a", src.to_str().unwrap(), tree.to_str().unwrap()]);
    let mut victim = None;
    for f in bootlink::tree::find_modules(std::slice::from_ref(&tree)).unwrap() {
        let data = std::fs::read(&f).unwrap();
        let (len, _) = bootlink::module::split_signature(&data).unwrap();
        std::fs::write(&f, &data[..len]).unwrap();
        if f.file_name().unwrap() == "nls_cp437.ko" {
            victim = Some(f);
        }
    }
    let vmlinux = k.dir.join("vmlinux");
    let listed = root.join("vmlinux.listed");
    TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &vmlinux, &"-o", &listed, &tree]).ok();
    Genuine { root, release: k.release, vmlinux, listed, tree, victim: victim.expect("nls_cp437.ko in the build") }
}

impl Genuine {
    /// A file under the root holding `data` (for `raw:`).
    fn raw(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.root.join("raw").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        p
    }

    /// A copy of the genuine tree with the victim's file holding `data`.
    fn tree_with_victim(&self, name: &str, data: &[u8]) -> PathBuf {
        let t = self.root.join(format!("tree-{name}"));
        common::sh("cp", &["-as", self.tree.to_str().unwrap(), t.to_str().unwrap()]);
        let f = t.join(self.victim.strip_prefix(&self.tree).unwrap());
        std::fs::remove_file(&f).unwrap();
        std::fs::write(&f, data).unwrap();
        t
    }

    /// The lab over MODULES (nls_cp437 among them), one realtime boot per variant
    /// (`NAME=...` without the kernel, which `cases` gives as an image and
    /// a module tree); its run.json and directory.
    fn lab(&self, cases: &[(&str, &std::path::Path, &std::path::Path, String)]) -> (Run, PathBuf) {
        let mut variants = Vec::new();
        for (name, image, tree, rest) in cases {
            let d = kernel_dir(&self.root.join("kernels"), name, image, tree, &self.release);
            variants.push(format!("{name}=kernel:{}{rest}", d.display()));
        }
        let out = self.root.join("run");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"lab", &"--no-trace", &"--realtime", &"-o", &out];
        for v in &variants {
            args.push(&"--variant");
            args.push(v);
        }
        for m in MODULES {
            args.push(m);
        }
        // Refused modules make the lab's checks fail: read run.json either way.
        let (run, o) = common::lab_run_either_way(&args, &out);
        println!("{}", common::stdout(&o));
        (run, out)
    }
}

/// The accept/refuse matrix with `module.sig_enforce=1`: the build's modules,
/// unsigned, listed in the kernel's manifest load; a listed module with one
/// byte flipped, a module of another build (Debian's, under the same name),
/// a listed module cut short, one renamed inside (its .modinfo and
/// this_module name edited), and every module under a manifest that is
/// empty, corrupted (bad magic) or holds a duplicate entry are refused with
/// the kernel's usual line, and none of them loads. The truncated and
/// renamed files reach the guest as raw bytes (`raw:`), past the host's
/// tree reader. Another listed module's file under the victim's name loads,
/// as itself: the list trusts a module's bytes, never a file name (as a
/// signature does); the victim's name is never loaded. The victim signed by
/// a key the kernel does not hold (standing for a revoked one) and listed
/// is refused by the signature path: a signed module never takes the list,
/// so the list cannot undo a revocation.
#[test]
fn tampered_modules_and_manifests_are_refused() {
    let g = genuine("manifest-matrix");
    let victim = std::fs::read(&g.victim).unwrap();
    let flipped = g.tree_with_victim("flipped", &{
        let mut d = victim.clone();
        let i = d.len() / 2;
        d[i] ^= 1;
        d
    });
    let debian = common::kernel();
    let theirs = bootlink::tree::find_modules(std::slice::from_ref(&debian.modules))
        .unwrap()
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("nls_cp437.ko"))
        .unwrap();
    let other = g.tree_with_victim("other-build", &bootlink::module::load_bytes(&theirs).unwrap().0);
    let truncated = g.raw("truncated.ko", &victim[..victim.len() / 2]);
    let renamed = g.raw("renamed.ko", &{
        // Every "nls_cp437\0" (the .modinfo name, this_module's name, the
        // init function's symbol) becomes "nls_cp438\0": same length.
        let (from, to) = (b"nls_cp437\0", b"nls_cp438\0");
        let mut d = victim.clone();
        let mut n = 0;
        for i in 0..d.len() - from.len() {
            if &d[i..i + from.len()] == from {
                d[i..i + from.len()].copy_from_slice(to);
                n += 1;
            }
        }
        assert!(n >= 2, "the name is in .modinfo and this_module: {n} found");
        d
    });
    // nls_ascii: listed, no dependencies, not otherwise in the set.
    let ascii = g.tree.join(g.victim.parent().unwrap().join("nls_ascii.ko").strip_prefix(&g.tree).unwrap());
    let swapped = g.raw("swapped.ko", &std::fs::read(&ascii).unwrap());

    let area = {
        let data = std::fs::read(&g.listed).unwrap();
        let (off, size) = section_range(&g.listed);
        bootlink::manifest::Manifest::decode(&data[off..off + size]).unwrap().unwrap().encode()
    };
    let empty = g.root.join("vmlinux.empty");
    with_area(&g.vmlinux, &empty, &[]);
    let bad_magic = g.root.join("vmlinux.bad-magic");
    let mut a = area.clone();
    a[0] ^= 0x20;
    with_area(&g.vmlinux, &bad_magic, &a);
    let duplicate = g.root.join("vmlinux.duplicate");
    let mut a = area.clone();
    let n = u32::from_le_bytes(a[8..12].try_into().unwrap());
    a[8..12].copy_from_slice(&(n + 1).to_le_bytes());
    let first: Vec<u8> = a[16..48].to_vec();
    a.splice(16..16, first);
    with_area(&g.vmlinux, &duplicate, &a);

    // The victim signed by a key this kernel does not trust (as a revoked
    // key would be), and listed: a signed module never takes the list, so
    // the signature path refuses it as it would without the list.
    let (key, cert) = common::key_pair(&g.root, "untrusted");
    let sign_key = bootlink::sign::SignKey { key, cert, hash: bootlink::sign::Hash::Sha256 };
    let signed = bootlink::sign::sign(&victim, &sign_key, &g.root, "untrusted").unwrap();
    let signed_tree = g.tree_with_victim("signed-listed", &signed);
    let signed_listed = g.root.join("vmlinux.signed-listed");
    TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &g.vmlinux, &"-o", &signed_listed, &signed_tree]).ok();
    let shown = TestCommand::new(&[&"manifest", &"show", &"--json", &signed_listed]).ok();
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let digest: String = sha2::Sha256::digest(&signed).iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        v["digests"].as_array().unwrap().iter().any(|d| d.as_str() == Some(digest.as_str())),
        "the signed victim's digest is listed: {v}"
    );

    let e = format!(",cmdline:{ENFORCE}");
    let raw = |f: &PathBuf| format!(",cmdline:{ENFORCE},raw:nls_cp437={}", f.display());
    let (run, out) = g.lab(&[
        ("listed", &g.listed, &g.tree, e.clone()),
        ("flipped", &g.listed, &flipped, e.clone()),
        ("other-build", &g.listed, &other, e.clone()),
        ("truncated", &g.listed, &g.tree, raw(&truncated)),
        ("renamed", &g.listed, &g.tree, raw(&renamed)),
        ("swapped", &g.listed, &g.tree, raw(&swapped)),
        ("empty", &empty, &g.tree, e.clone()),
        ("bad-magic", &bad_magic, &g.tree, e.clone()),
        ("duplicate", &duplicate, &g.tree, e.clone()),
        ("signed-listed", &signed_listed, &signed_tree, e.clone()),
    ]);
    assert_eq!(run.variants.len(), 10, "every case booted");
    for v in &run.variants {
        let rep = &v.repetitions[0];
        let log = std::fs::read_to_string(out.join(&rep.log)).unwrap();
        let status = |m: &str| rep.modules.iter().find(|x| x.name == m).map(|x| x.status);
        let victim = status("nls_cp437").expect("nls_cp437 was tried");
        let others: Vec<i32> = rep.modules.iter().filter(|m| m.name != "nls_cp437").map(|m| m.status).collect();
        // Which module each init function ran for (initcall_debug).
        let inits = |m: &str| rep.initcalls.iter().filter(|i| i.module == m).count();
        common::report(
            "manifest matrix (module.sig_enforce=1; status 0 = loaded)",
            &format!("{}: nls_cp437 {victim}, others {others:?}, tainted {:?}", v.name, rep.tainted),
        );
        assert!(!others.is_empty(), "{}: the set's other modules were tried", v.name);
        match v.name.as_str() {
            "listed" => {
                assert_eq!(victim, 0);
                assert!(others.iter().all(|&s| s == 0), "{others:?}");
                assert_eq!(inits("nls_cp437"), 1, "nls_cp437's init ran");
            }
            "flipped" | "other-build" | "truncated" | "renamed" | "signed-listed" => {
                assert!(v.name != "truncated" && v.name != "renamed" || !v.raw_module.is_empty(), "raw: recorded");
                assert_ne!(victim, 0, "{}: a changed module loaded", v.name);
                assert!(others.iter().all(|&s| s == 0), "{}: the listed ones still load: {others:?}", v.name);
                // Debian's module is signed, by a key this kernel does not hold.
                let line = if v.name == "other-build" || v.name == "signed-listed" {
                    "Loading of module with unavailable key is rejected"
                } else {
                    "Loading of unsigned module is rejected"
                };
                assert!(log.contains(line), "{}: the kernel's refusal line", v.name);
                assert_eq!(inits("nls_cp437") + inits("nls_cp438"), 0, "{}: no init ran for it", v.name);
            }
            "swapped" => {
                // The bytes are nls_ascii's, listed: the kernel loads nls_ascii.
                assert_eq!(victim, 0, "a listed module's bytes load whatever the file is called");
                assert!(others.iter().all(|&s| s == 0), "{others:?}");
                assert_eq!(inits("nls_ascii"), 1, "what loaded is nls_ascii");
                assert_eq!(inits("nls_cp437"), 0, "nls_cp437 never loaded");
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
        let mask = rep.tainted.expect("the guest reported its taint mask");
        assert_eq!(mask & bootlink_lab::run::taint::UNSIGNED_MODULE, 0, "{}: tainted {mask}", v.name);
    }
}

/// Without `module.sig_enforce`: the listed modules load and taint nothing;
/// under the build's own (empty) list the same modules load, each tainting
/// the kernel 'E' (bit 13 of /proc/sys/kernel/tainted) with the kernel's
/// "module verification failed" line; a listed module changed in one byte
/// that nothing reads (its .comment) loads too, and it alone taints.
#[test]
fn without_sig_enforce_unlisted_modules_load_but_taint() {
    let g = genuine("manifest-taint");
    let mut tampered = std::fs::read(&g.victim).unwrap();
    {
        use object::read::{Object, ObjectSection};
        let f = object::File::parse(&*tampered).unwrap();
        let (off, size) = f.section_by_name(".comment").expect("a .comment section").file_range().unwrap();
        assert!(size > 4);
        let i = off as usize + 1;
        drop(f);
        tampered[i] ^= 0x20;
    }
    let tampered = g.raw("comment-changed.ko", &tampered);
    let (run, out) = g.lab(&[
        ("listed", &g.listed, &g.tree, String::new()),
        ("unlisted", &g.vmlinux, &g.tree, String::new()),
        ("tampered", &g.listed, &g.tree, format!(",raw:nls_cp437={}", tampered.display())),
    ]);
    assert_eq!(run.variants.len(), 3, "every case booted");
    let e = bootlink_lab::run::taint::UNSIGNED_MODULE;
    for v in &run.variants {
        let rep = &v.repetitions[0];
        let log = std::fs::read_to_string(out.join(&rep.log)).unwrap();
        let statuses: Vec<i32> = rep.modules.iter().map(|m| m.status).collect();
        let names: Vec<&str> = rep.modules.iter().map(|m| m.name.as_str()).collect();
        let mask = rep.tainted.expect("the guest reported its taint mask");
        common::report(
            "manifest without sig_enforce (status 0 = loaded)",
            &format!("{}: {statuses:?}, tainted {mask}, by {:?}", v.name, rep.module_taints),
        );
        assert!(statuses.len() > 1 && statuses.iter().all(|&s| s == 0), "{}: all load: {statuses:?}", v.name);
        let verification = log.matches("module verification failed: signature and/or required key missing").count();
        match v.name.as_str() {
            "listed" => {
                assert_eq!(mask & e, 0, "listed modules do not taint: {mask}");
                assert!(rep.module_taints.is_empty(), "{:?}", rep.module_taints);
                assert_eq!(verification, 0);
            }
            "unlisted" => {
                assert_ne!(mask & e, 0, "unlisted unsigned modules taint 'E': {mask}");
                let tainted: Vec<&str> = rep.module_taints.keys().map(String::as_str).collect();
                let mut want = names.clone();
                want.sort();
                assert_eq!(tainted, want, "each module taints");
                assert!(rep.module_taints.values().all(|l| l == "E"), "{:?}", rep.module_taints);
                assert_eq!(verification, 1, "the kernel says it once");
            }
            "tampered" => {
                assert_ne!(mask & e, 0, "{mask}");
                let only: Vec<(&str, &str)> = rep.module_taints.iter().map(|(m, l)| (m.as_str(), l.as_str())).collect();
                assert_eq!(only, [("nls_cp437", "E")], "the changed module alone taints");
                assert!(log.contains("nls_cp437: module verification failed"), "the kernel names it");
            }
            n => panic!("unknown variant {n}"),
        }
    }
}

/// The bzImage `manifest write --bzimage` makes boots (QEMU `-kernel
/// bzImage`: the real-mode setup and the decompressor, not PVH) and its
/// kernel trusts its list: the build's modules, unsigned, load under
/// `module.sig_enforce=1` without tainting; the build's own bzImage (an
/// empty list) refuses them.
#[test]
fn a_listed_bzimage_boots_and_trusts_its_list() {
    let g = genuine("manifest-bzimage");
    let k = common::self_built(true);
    let bz = g.root.join("bzImage.listed");
    let vm = g.root.join("vmlinux.for-bzimage");
    TestCommand::new(&[&"manifest", &"write", &"--vmlinux", &g.vmlinux, &"-o", &vm, &"--bzimage", &bz, &g.tree]).ok();
    let e = format!(",cmdline:{ENFORCE}");
    let built = k.dir.join("bzImage");
    let (run, out) = g.lab(&[("bz-listed", &bz, &g.tree, e.clone()), ("bz-built", &built, &g.tree, e)]);
    assert_eq!(run.variants.len(), 2, "both booted");
    let listed = bootlink::tree::find_modules(std::slice::from_ref(&g.tree)).unwrap().len();
    for v in &run.variants {
        assert_eq!(v.kernel.file_name().unwrap(), "bzImage", "{}: booted {}", v.name, v.kernel.display());
        let rep = &v.repetitions[0];
        let log = std::fs::read_to_string(out.join(&rep.log)).unwrap();
        let statuses: Vec<i32> = rep.modules.iter().map(|m| m.status).collect();
        common::report(
            "manifest in a bzImage (status 0 = loaded)",
            &format!("{}: {statuses:?}, tainted {:?}", v.name, rep.tainted),
        );
        assert!(statuses.len() > 1, "{}: the set was tried", v.name);
        if v.name == "bz-listed" {
            assert!(statuses.iter().all(|&s| s == 0), "listed modules load: {statuses:?}");
            assert!(
                log.contains(&format!("module hashes: {listed} modules of this build trusted")),
                "the list is read"
            );
            assert_eq!(rep.tainted.map(|m| m & bootlink_lab::run::taint::UNSIGNED_MODULE), Some(0));
        } else {
            assert!(statuses.iter().all(|&s| s != 0), "the empty list trusts nothing: {statuses:?}");
            assert!(log.contains("Loading of unsigned module is rejected"));
        }
    }
}

/// A list of BLAKE2b-256 digests (patch `hashes-blake2b`,
/// `manifest write --hash blake2b`) with `module.sig_enforce=1`: the
/// build's unsigned modules load, the kernel saying it trusts them by their
/// BLAKE2b-256; a listed module with one byte flipped is refused, and so is
/// the victim signed by a key the kernel does not hold (the signature path,
/// as with a SHA-256 list); a header naming BLAKE2b-256 over the SHA-256
/// digests trusts nothing (the kernel hashes by the header's hash), and a
/// header naming a hash the kernel does not know (2) is ignored whole. The
/// host tool refuses a BLAKE2b-256 list for a kernel that does not name the
/// feature (Debian's), writing nothing.
#[test]
fn a_blake2b_list_trusts_its_modules_and_nothing_else() {
    let g = genuine("manifest-blake2b");
    let write = |out: &std::path::Path, tree: &std::path::Path| {
        TestCommand::new(&[&"manifest", &"write", &"--hash", &"blake2b", &"--vmlinux", &g.vmlinux, &"-o", &out, &tree])
            .ok()
    };
    let listed = g.root.join("vmlinux.blake2b");
    let o = write(&listed, &g.tree);
    assert!(common::stdout(&o).contains("listed by their BLAKE2b-256"), "{}", common::stdout(&o));

    // What the list holds, read back: the header's hash and the digests.
    let data = std::fs::read(&listed).unwrap();
    let (off, size) = section_range(&listed);
    let m = bootlink::manifest::Manifest::decode(&data[off..off + size]).unwrap().unwrap();
    assert_eq!(m.hash, bootlink::manifest::Hash::Blake2b256);
    let victim = std::fs::read(&g.victim).unwrap();
    assert!(m.contains(&bootlink::manifest::Hash::Blake2b256.digest(&victim)), "the victim is listed by its BLAKE2b");

    let flipped = g.tree_with_victim("flipped", &{
        let mut d = victim.clone();
        let i = d.len() / 2;
        d[i] ^= 1;
        d
    });
    let (key, cert) = common::key_pair(&g.root, "untrusted");
    let sign_key = bootlink::sign::SignKey { key, cert, hash: bootlink::sign::Hash::Sha256 };
    let signed = bootlink::sign::sign(&victim, &sign_key, &g.root, "untrusted").unwrap();
    let signed_tree = g.tree_with_victim("signed-listed", &signed);
    let signed_listed = g.root.join("vmlinux.blake2b-signed-listed");
    write(&signed_listed, &signed_tree);
    // The SHA-256 list's digests under a header that says BLAKE2b-256.
    let sha_area = {
        let data = std::fs::read(&g.listed).unwrap();
        let (off, size) = section_range(&g.listed);
        let sha = bootlink::manifest::Manifest::decode(&data[off..off + size]).unwrap().unwrap();
        assert_eq!(sha.hash, bootlink::manifest::Hash::Sha256);
        bootlink::manifest::Manifest { hash: bootlink::manifest::Hash::Blake2b256, digests: sha.digests }.encode()
    };
    let mislabelled = g.root.join("vmlinux.mislabelled");
    with_area(&g.vmlinux, &mislabelled, &sha_area);
    let unknown = g.root.join("vmlinux.unknown-hash");
    let mut a = m.encode();
    a[12..16].copy_from_slice(&2u32.to_le_bytes());
    with_area(&g.vmlinux, &unknown, &a);

    // Debian's kernel names no such feature: refused, nothing written.
    let debian = common::kernel();
    let refused = g.root.join("vmlinux.debian-blake2b");
    let o = TestCommand::new(&[
        &"manifest",
        &"write",
        &"--hash",
        &"blake2b",
        &"--vmlinux",
        &debian.vmlinux,
        &"-o",
        &refused,
        &g.tree,
    ])
    .cmd_output();
    assert!(!o.status.success(), "a BLAKE2b list for a kernel without patch `hashes-blake2b`");
    assert!(common::stderr(&o).contains("hashes-blake2b"), "{}", common::stderr(&o));
    assert!(!refused.exists(), "nothing written");

    let e = format!(",cmdline:{ENFORCE}");
    let (run, out) = g.lab(&[
        ("listed", &listed, &g.tree, e.clone()),
        ("flipped", &listed, &flipped, e.clone()),
        ("signed-listed", &signed_listed, &signed_tree, e.clone()),
        ("mislabelled", &mislabelled, &g.tree, e.clone()),
        ("unknown-hash", &unknown, &g.tree, e.clone()),
    ]);
    assert_eq!(run.variants.len(), 5, "every case booted");
    for v in &run.variants {
        let rep = &v.repetitions[0];
        let log = std::fs::read_to_string(out.join(&rep.log)).unwrap();
        let victim = rep.modules.iter().find(|x| x.name == "nls_cp437").map(|x| x.status).expect("nls_cp437 was tried");
        let others: Vec<i32> = rep.modules.iter().filter(|m| m.name != "nls_cp437").map(|m| m.status).collect();
        let inits = rep.initcalls.iter().filter(|i| i.module == "nls_cp437").count();
        common::report(
            "BLAKE2b-256 list (module.sig_enforce=1; status 0 = loaded)",
            &format!("{}: nls_cp437 {victim}, others {others:?}", v.name),
        );
        assert!(!others.is_empty(), "{}: the set's other modules were tried", v.name);
        match v.name.as_str() {
            "listed" => {
                assert!(victim == 0 && others.iter().all(|&s| s == 0), "{others:?}");
                let n = m.digests.len();
                let line = format!("module hashes: {n} modules of this build trusted by their BLAKE2b-256");
                assert!(log.contains(&line), "the kernel says {line:?}");
                assert_eq!(inits, 1, "nls_cp437's init ran");
            }
            "flipped" | "signed-listed" => {
                assert_ne!(victim, 0, "{}: a changed module loaded", v.name);
                assert!(others.iter().all(|&s| s == 0), "{}: the listed ones still load: {others:?}", v.name);
                let line = if v.name == "signed-listed" {
                    "Loading of module with unavailable key is rejected"
                } else {
                    "Loading of unsigned module is rejected"
                };
                assert!(log.contains(line), "{}: the kernel's refusal line", v.name);
                assert_eq!(inits, 0, "{}: no init ran for it", v.name);
            }
            "mislabelled" | "unknown-hash" => {
                assert!(victim != 0 && others.iter().all(|&s| s != 0), "{}: a module loaded: {others:?}", v.name);
                assert!(log.contains("Loading of unsigned module is rejected"), "{}", v.name);
                let invalid = log.contains("module hashes: the list in the kernel image is invalid");
                assert_eq!(
                    invalid,
                    v.name == "unknown-hash",
                    "{}: only an unknown hash makes the list invalid",
                    v.name
                );
            }
            n => panic!("unknown variant {n}"),
        }
        assert!(!log.contains("tainting kernel"), "{}: sig_enforce refuses, it never taints", v.name);
    }
}
