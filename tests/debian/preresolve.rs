//! `bootlink preresolve` on real modules: the build-time checks on tiny
//! modules built from C against Debian's headers (tests/modules), refusals,
//! idempotence, compression, depmod equivalence, signatures, and failures
//! while writing.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use bootlink::elf::{Elf, Want};
use bootlink::module;
use common::*;

const REFERENCE_RELEASE: &str = "6.1.0-56-amd64";

/// The tiny test modules, built once per test run: the tests of this file
/// run in parallel, and two kbuilds must not share a work directory.
fn test_modules() -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules");
        let o = Command::new("make").arg("-s").arg("-C").arg(&dir).output().unwrap();
        if o.status.success() { Ok(dir.join("build")) } else { Err(String::from_utf8_lossy(&o.stderr).into_owned()) }
    });
    match built {
        Ok(p) => p.clone(),
        Err(e) => panic!("building tests/modules: {e}"),
    }
}

/// Headers of a kernel release other than the reference, if installed.
fn other_headers() -> Option<(PathBuf, String)> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/src")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("linux-headers-")
                && n.ends_with("-amd64")
                && !n.contains(REFERENCE_RELEASE)
                && p.join("Makefile").is_file()
        })
        .collect();
    found.sort();
    let p = found.pop()?;
    let rel = p.file_name().unwrap().to_string_lossy().trim_start_matches("linux-headers-").to_string();
    Some((p, rel))
}

fn preresolve(args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Output {
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"preresolve", &"--json", &"--kernel"];
    all.push(&kernel().vmlinuz);
    all.extend_from_slice(args);
    run(&all)
}

fn report(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: stdout {} stderr {}", stdout(o), stderr(o)))
}

fn by_name(r: &serde_json::Value) -> HashMap<String, serde_json::Value> {
    r["modules"].as_array().unwrap().iter().map(|m| (m["name"].as_str().unwrap().to_string(), m.clone())).collect()
}

/// Addresses of undefined-turned-absolute symbols in a written module.
fn absolute(path: &Path) -> HashMap<String, u64> {
    module::read(path).unwrap().absolute.into_iter().collect()
}

#[test]
fn each_build_time_check_keeps_the_symbol_undefined() {
    if !kernel().reference {
        common::skip(
            "test modules",
            &format!(
                "tests/modules are built against {REFERENCE_RELEASE} headers, the reference kernel is not available"
            ),
        );
        return;
    }
    let built = test_modules();
    let out = tmpdir("pr-rules");
    let o = preresolve(&[
        &"--assume-nokaslr",
        &"-o",
        &out,
        &built.join("bl_plain.ko"),
        &built.join("bl_user.ko"),
        &built.join("bl_proprietary.ko"),
        &built.join("bl_ns_missing.ko"),
        &built.join("bl_ns_import.ko"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&o);
    let m = by_name(&r);
    let kept = |name: &str| m[name]["kept_symbols"].as_array().cloned().unwrap_or_default();
    let exports: HashMap<String, u64> = bootlink::kernel::KernelImage::open(&kernel().vmlinuz, None)
        .unwrap()
        .exports
        .into_iter()
        .map(|e| (e.name, e.addr))
        .collect();

    // GPL module using a GPL-only export: preresolved, at the kernel's address.
    assert_eq!(m["bl_plain"]["preresolved"], m["bl_plain"]["undefined"]);
    let abs = absolute(&out.join("bl_plain.ko"));
    assert_eq!(abs["ktime_get"], exports["ktime_get"]);
    assert_eq!(abs["_printk"], exports["_printk"]);
    // Proprietary module: the GPL-only export stays undefined, the rest is preresolved.
    assert_eq!(kept("bl_proprietary"), vec![serde_json::json!(["ktime_get", "gpl_only"])]);
    let p = module::read(&out.join("bl_proprietary.ko")).unwrap();
    assert_eq!(p.undefined, vec!["ktime_get"]);
    assert!(p.preresolved && p.absolute.iter().any(|(n, _)| n == "_printk"));
    // Namespaced export without MODULE_IMPORT_NS stays undefined; with it, it is preresolved.
    assert_eq!(kept("bl_ns_missing"), vec![serde_json::json!(["dma_buf_put", "namespace"])]);
    assert_eq!(module::read(&out.join("bl_ns_missing.ko")).unwrap().undefined, vec!["dma_buf_put"]);
    assert!(kept("bl_ns_import").is_empty());
    assert_eq!(absolute(&out.join("bl_ns_import.ko"))["dma_buf_put"], exports["dma_buf_put"]);
    // A symbol only a module exports is left to the loader.
    assert_eq!(m["bl_user"]["module_symbols"], 1);
    assert_eq!(module::read(&out.join("bl_user.ko")).unwrap().undefined, vec!["bl_plain_hello"]);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_forged_versions_crc_keeps_the_symbol_undefined() {
    if !kernel().reference {
        common::skip("test modules", "needs the reference kernel's headers");
        return;
    }
    let built = test_modules();
    let dir = tmpdir("pr-crc");
    let forged = copy_to(&built.join("bl_plain.ko"), &dir, "bl_forged.ko");
    let mut data = std::fs::read(&forged).unwrap();
    let (off, len) = {
        let elf = Elf::parse(&data, Want::Relocatable).unwrap();
        let (_, sh) = elf.section("__versions").unwrap();
        let start = elf.section_data(sh).unwrap().as_ptr() as usize - data.as_ptr() as usize;
        (start, elf.section_data(sh).unwrap().len())
    };
    let entry =
        data[off..off + len].chunks(64).position(|e| e[8..].starts_with(b"kstrdup\0")).expect("kstrdup in __versions");
    data[off + entry * 64] ^= 0xff;
    std::fs::write(&forged, &data).unwrap();
    let out = dir.join("out");
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &out, &forged]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&o);
    assert_eq!(r["modules"][0]["kept_symbols"], serde_json::json!([["kstrdup", "crc_mismatch"]]));
    assert_eq!(module::read(&out.join("bl_forged.ko")).unwrap().undefined, vec!["kstrdup"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_module_of_another_release_is_refused() {
    let Some((kdir, rel)) = other_headers() else {
        common::skip("other release", "no kernel headers of another release in /usr/src (make test installs them)");
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules");
    let o = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&dir)
        .arg("other-release")
        .arg(format!("KDIR_OTHER={}", kdir.display()))
        .arg(format!("RELEASE_OTHER={rel}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let other = dir.join("build/other-release/bl_plain.ko");
    let out = tmpdir("pr-other");
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &out, &other]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("built for another kernel") && err.contains(&rel) && err.contains(&other.display().to_string()),
        "{err}"
    );
    assert!(!out.join("bl_plain.ko").exists(), "nothing written for a refused module");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn kaslr_kernels_are_refused_and_nothing_is_written() {
    let k = kernel();
    let out = std::env::temp_dir().join(format!("bootlink-pr-kaslr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = run(&[&"preresolve", &"--kernel", &k.vmlinuz, &"-o", &out, &module("fs/fat")]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("refusing to preresolve")
            && err.contains("CONFIG_RANDOMIZE_BASE=y")
            && err.contains("--assume-nokaslr"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    assert!(!out.exists(), "no output directory for a refused run");
    // A vmlinux with no config anywhere: KASLR unknown, refused too.
    let dir = tmpdir("pr-noconfig");
    let bare = copy_to(&k.vmlinux, &dir, "vmlinux");
    let o = run(&[&"preresolve", &"--kernel", &bare, &"-o", &dir.join("out"), &module("fs/fat")]);
    assert!(stderr(&o).contains("KASLR cannot be ruled out"), "{}", stderr(&o));
    assert!(!dir.join("out").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn twice_is_a_no_op_inputs_are_untouched_and_compression_is_kept() {
    let dir = tmpdir("pr-twice");
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    for m in ["fat", "vfat"] {
        copy_to(&module(&format!("fs/fat/{m}.ko")), &input, &format!("{m}.ko"));
    }
    let msdos = copy_to(&module("fs/fat/msdos.ko"), &input, "msdos.ko");
    sh("xz", &["--check=crc32", "--lzma2=dict=1MiB", msdos.to_str().unwrap()]);
    let nls = copy_to(&module("fs/nls/nls_cp437.ko"), &input, "nls_cp437.ko");
    sh("zstd", &["-q", "--rm", nls.to_str().unwrap()]);
    let before: Vec<(PathBuf, Vec<u8>)> = bootlink::tree::find_modules(std::slice::from_ref(&input))
        .unwrap()
        .into_iter()
        .map(|p| {
            let d = std::fs::read(&p).unwrap();
            (p, d)
        })
        .collect();
    let out = dir.join("out");
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &out, &input]);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = report(&o)["totals"].clone();
    for (p, d) in &before {
        assert_eq!(&std::fs::read(p).unwrap(), d, "input {} changed", p.display());
    }
    // Compressed in, compressed out, in the same format, and valid for the tools.
    sh("xz", &["-t", out.join("msdos.ko.xz").to_str().unwrap()]);
    sh("zstd", &["-q", "-t", out.join("nls_cp437.ko.zst").to_str().unwrap()]);
    let x = module::read(&out.join("msdos.ko.xz")).unwrap();
    assert!(x.preresolved && x.signature.is_none() && x.compression == bootlink::compress::Compression::Xz);
    // ...with the input's xz parameters (the kernel build's crc32 and 1 MiB dictionary).
    let head = std::fs::read(out.join("msdos.ko.xz")).unwrap();
    assert_eq!(
        bootlink::compress::Params::detect(&head[..64], bootlink::compress::Compression::Xz),
        bootlink::compress::Params::Xz { check: 1, dict: 1 << 20 }
    );
    // Second run over the output, in place: every module reported as already done, bytes unchanged.
    let snapshot: Vec<Vec<u8>> = bootlink::tree::find_modules(std::slice::from_ref(&out))
        .unwrap()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let o = preresolve(&[&"--assume-nokaslr", &"--in-place", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&o);
    assert_eq!(r["totals"]["already"], 4, "{}", r["totals"]);
    // The rerun counts like the first run: nothing preresolved now, the
    // first run's symbols as already preresolved, the same symbols left to
    // modules' exports and kept by reason.
    let t = &r["totals"];
    assert!(first["preresolved"].as_u64().unwrap() > 0, "{first}");
    for (now, before) in [
        ("preresolved_modules", 0.into()),
        ("preresolved", 0.into()),
        ("unchanged", 0.into()),
        ("errors", 0.into()),
        ("modules", first["modules"].clone()),
        ("already_symbols", first["preresolved"].clone()),
        ("undefined", first["undefined"].clone()),
        ("module_symbols", first["module_symbols"].clone()),
        ("kept", first["kept"].clone()),
        ("fully_preresolved", first["fully_preresolved"].clone()),
    ] {
        assert_eq!(t[now], before, "{now}: rerun {t}, first run {first}");
    }
    let again: Vec<Vec<u8>> = bootlink::tree::find_modules(std::slice::from_ref(&out))
        .unwrap()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(snapshot == again, "a second run changed bytes");
    let text = stdout(&run(&[&"preresolve", &"--assume-nokaslr", &"--kernel", &kernel().vmlinuz, &"--in-place", &out]));
    assert!(text.contains("PRERESV fat.ko (already preresolved, skipped)"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_module_preresolved_for_another_build_is_refused() {
    let dir = tmpdir("pr-otherbuild");
    let out = dir.join("out");
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &out, &module("fs/fat/fat.ko")]);
    assert!(o.status.success(), "{}", stderr(&o));
    // What another build of the same release would leave: other addresses.
    let p = out.join("fat.ko");
    let mut data = std::fs::read(&p).unwrap();
    let (symoff, idx) = {
        let elf = Elf::parse(&data, Want::Relocatable).unwrap();
        let syms = elf.symbols().unwrap();
        let idx = syms.iter().position(|s| bootlink::elf::sym_name(&syms, s).unwrap() == b"_printk").unwrap();
        let (_, sh) = elf.section(".symtab").unwrap();
        (elf.section_data(sh).unwrap().as_ptr() as usize - data.as_ptr() as usize, idx)
    };
    let at = symoff + idx * 24 + 8;
    let v = u64::from_le_bytes(data[at..at + 8].try_into().unwrap()) + 0x20_0000;
    data[at..at + 8].copy_from_slice(&v.to_le_bytes());
    std::fs::write(&p, &data).unwrap();
    assert_refused_as_other_build(&p, &data, &[false]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Preresolving `path` in place (folding or not, per `folds`) is refused as
/// made for another build, naming `_printk`, and leaves `data` as it was.
fn assert_refused_as_other_build(path: &Path, data: &[u8], folds: &[bool]) {
    for &fold in folds {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"--assume-nokaslr", &"--in-place", &path];
        if fold {
            args.push(&"--fold-symbols");
        }
        let o = preresolve(&args);
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(err.contains("already preresolved for a different kernel build") && err.contains("_printk"), "{err}");
        assert_eq!(std::fs::read(path).unwrap(), data, "refused module untouched");
    }
}

#[test]
fn depmod_gives_the_same_modules_dep_for_the_preresolved_tree() {
    let k = kernel();
    let dir = tmpdir("pr-depmod");
    let a = dir.join("a");
    let b = dir.join("b");
    std::fs::create_dir_all(a.join("lib/modules")).unwrap();
    sh("cp", &["-al", k.modules.to_str().unwrap(), a.join("lib/modules").to_str().unwrap()]);
    let out = b.join("lib/modules").join(&k.release);
    let t = std::time::Instant::now();
    let o = run(&[&"preresolve", &"--assume-nokaslr", &"--kernel", &k.vmlinuz, &"-o", &out, &k.modules]);
    assert!(o.status.success(), "{}", stderr(&o));
    println!("preresolved the whole tree in {:.2} s", t.elapsed().as_secs_f64());
    sh("depmod", &["-b", a.to_str().unwrap(), &k.release]);
    sh("depmod", &["-b", b.to_str().unwrap(), &k.release]);
    let read =
        |base: &Path| std::fs::read_to_string(base.join("lib/modules").join(&k.release).join("modules.dep")).unwrap();
    let (da, db) = (read(&a), read(&b));
    assert_eq!(da.lines().count(), bootlink::tree::find_modules(std::slice::from_ref(&k.modules)).unwrap().len());
    assert!(da == db, "modules.dep differs");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resigned_modules_verify_with_openssl_and_equal_sign_file() {
    let dir = tmpdir("pr-sign");
    let key = dir.join("key.pem");
    let cert = dir.join("cert.pem");
    sh(
        "openssl",
        &[
            "req",
            "-new",
            "-nodes",
            "-utf8",
            "-sha256",
            "-days",
            "36500",
            "-batch",
            "-x509",
            "-outform",
            "PEM",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
            "-newkey",
            "rsa:2048",
            "-subj",
            "/CN=bootlink test key",
        ],
    );
    for hash in ["sha256", "sha512"] {
        let out = dir.join(hash);
        let o = preresolve(&[
            &"--assume-nokaslr",
            &"-o",
            &out,
            &"--sign-key",
            &key,
            &"--sign-cert",
            &cert,
            &"--sign-hash",
            &hash,
            &module("fs/fat/fat.ko"),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(report(&o)["modules"][0]["signature"], "resigned");
        let signed = std::fs::read(out.join("fat.ko")).unwrap();
        let (elf_len, sig) = module::split_signature(&signed).unwrap();
        let sig = sig.expect("signature appended");
        assert_eq!(sig.id_type, bootlink::sign::PKEY_ID_PKCS7);
        let elf = out.join("fat.elf");
        let p7 = out.join("fat.p7s");
        std::fs::write(&elf, &signed[..elf_len]).unwrap();
        std::fs::write(&p7, &signed[elf_len..elf_len + sig.sig_len]).unwrap();
        // An independent verifier: openssl checks the PKCS#7 over the module bytes.
        sh(
            "openssl",
            &[
                "cms",
                "-verify",
                "-binary",
                "-inform",
                "DER",
                "-in",
                p7.to_str().unwrap(),
                "-content",
                elf.to_str().unwrap(),
                "-certfile",
                cert.to_str().unwrap(),
                "-CAfile",
                cert.to_str().unwrap(),
                "-purpose",
                "any",
                "-out",
                "/dev/null",
            ],
        );
        // The kernel's own signer gives the same bytes for the same module and key.
        let sign_file = Path::new("/usr/lib/linux-kbuild-6.1/scripts/sign-file");
        if sign_file.is_file() {
            let reference = out.join("fat.sign-file.ko");
            sh(
                sign_file.to_str().unwrap(),
                &[
                    hash,
                    key.to_str().unwrap(),
                    cert.to_str().unwrap(),
                    elf.to_str().unwrap(),
                    reference.to_str().unwrap(),
                ],
            );
            assert!(std::fs::read(&reference).unwrap() == signed, "differs from scripts/sign-file ({hash})");
            println!("{hash}: identical to scripts/sign-file");
        } else {
            common::skip(
                "signatures identical to scripts/sign-file",
                &format!("{} is absent (Debian package linux-kbuild-6.1)", sign_file.display()),
            );
        }
    }
    // A digest the kernel does not take for modules is a usage error naming the choices; nothing is written.
    let o = preresolve(&[
        &"--assume-nokaslr",
        &"-o",
        &dir.join("md5"),
        &"--sign-key",
        &key,
        &"--sign-cert",
        &cert,
        &"--sign-hash",
        &"md5",
        &module("fs/fat/fat.ko"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("sha256, sha384, sha512"), "{}", stderr(&o));
    assert!(!dir.join("md5").exists());
    // Without a key the stale signature is removed.
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &dir.join("plain"), &module("fs/fat/fat.ko")]);
    assert_eq!(report(&o)["modules"][0]["signature"], "removed");
    assert!(module::read(&dir.join("plain/fat.ko")).unwrap().signature.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unwritable_output_and_a_full_disk_leave_nothing_half_written() {
    let dir = tmpdir("pr-enospc");
    // An output path under a regular file cannot be created.
    let file = dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &file.join("out"), &module("fs/fat/fat.ko")]);
    assert!(!o.status.success() && stderr(&o).contains(&file.join("out").display().to_string()), "{}", stderr(&o));
    // A full disk: an 8 MiB tmpfs for ~30 MB of modules.
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8M", "tmpfs"])
        .arg(&mnt)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !mounted {
        common::skip("disk full", "cannot mount a tmpfs here (not root?)");
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    let src = module("fs");
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &mnt, &src]);
    let err = stderr(&o);
    let _cleanup = Umount(mnt.clone());
    assert!(!o.status.success());
    assert!(err.contains("no space left on device"), "{err}");
    // Every file that exists is whole: it reads as a module; no temporary is left.
    let mut whole = 0;
    for p in walk(&mnt) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains("bootlink-tmp") && !name.contains("bootlink-sign"), "left behind: {}", p.display());
        module::read(&p).unwrap_or_else(|e| panic!("half-written {}: {e}", p.display()));
        whole += 1;
    }
    println!("disk full after {whole} whole modules; {} errors reported", err.lines().count());
    // The inputs are intact: still signed, still the package's bytes.
    assert!(module::read(&module("fs/ext4/ext4.ko")).unwrap().signature.is_some());
}

struct Umount(PathBuf);
impl Drop for Umount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Where a relocation's value comes from, as the loader sees it: an
/// absolute address (SHN_ABS, or symbol 0), a section of the module
/// (through a named or unnamed symbol), or a symbol left to the loader.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Abs,
    Section(u16, String),
    Undefined(String),
}

/// One relocation: section, offset, type, target, and the value the
/// target contributes plus the addend (S + A; A alone for Undefined).
type Reloc = (String, u64, u32, Target, u64);

/// A symbol table entry: name, st_info, st_other, st_shndx, st_value, st_size.
type SymEntry = (String, u8, u8, u16, u64, u64);

/// Every relocation and symbol of a module, read with the `object` crate.
fn relocs_and_symbols(path: &Path) -> (Vec<Reloc>, Vec<SymEntry>) {
    use object::read::elf::{Rela, SectionHeader, Sym};
    let (data, _) = module::load_bytes(path).unwrap();
    let (len, _) = module::split_signature(&data).unwrap();
    let data = &data[..len];
    let elf = Elf::parse(data, Want::Relocatable).unwrap();
    let le = bootlink::elf::LE;
    let syms = elf.symbols().unwrap();
    let name =
        |s: &bootlink::elf::Symbol| String::from_utf8(bootlink::elf::sym_name(&syms, s).unwrap().to_vec()).unwrap();
    let symbols: Vec<SymEntry> = syms
        .iter()
        .map(|s| (name(s), s.st_info().0, s.st_other().0, s.st_shndx(le).0, s.st_value(le), s.st_size(le)))
        .collect();
    let mut relocs = Vec::new();
    for sh in elf.sections.iter() {
        if sh.sh_type(le) != object::elf::SHT_RELA {
            continue;
        }
        let sec = String::from_utf8_lossy(elf.section_name(sh)).into_owned();
        for r in sh.data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(le, data).unwrap() {
            let a = r.r_addend(le) as u64;
            let index = r.r_sym(le, false) as usize;
            if index == 0 {
                // STN_UNDEF: S is 0.
                relocs.push((sec.clone(), r.r_offset(le), r.r_type(le, false).0, Target::Abs, a));
                continue;
            }
            let sym = syms.symbol(object::SymbolIndex(index)).unwrap();
            let shndx = sym.st_shndx(le);
            let (target, value) = if shndx == object::elf::SHN_ABS {
                (Target::Abs, sym.st_value(le).wrapping_add(a))
            } else if shndx == object::elf::SHN_UNDEF {
                (Target::Undefined(name(sym)), a)
            } else {
                (Target::Section(shndx.0, name(sym)), sym.st_value(le).wrapping_add(a))
            };
            relocs.push((sec.clone(), r.r_offset(le), r.r_type(le, false).0, target, value));
        }
    }
    (relocs, symbols)
}

/// Compare a folded module with the SHN_ABS one made from the same input.
fn compare_folded(abs: &Path, folded: &Path) -> Result<usize, String> {
    let (ra, sa) = relocs_and_symbols(abs);
    let (rf, sf) = relocs_and_symbols(folded);
    let a = module::read(abs).map_err(|e| e.to_string())?;
    let f = module::read(folded).map_err(|e| e.to_string())?;
    if !(a.preresolved && f.preresolved && f.absolute.is_empty()) {
        return Err("not both preresolved, or SHN_ABS symbols left in the folded one".into());
    }
    // .preresolved lists exactly what the SHN_ABS module holds as SHN_ABS.
    let mut listed = f.folded.clone();
    let mut abs_syms = a.absolute.clone();
    listed.sort();
    abs_syms.sort();
    if listed != abs_syms {
        return Err(format!("{} folded symbols listed, {} SHN_ABS in the other output", listed.len(), abs_syms.len()));
    }
    // Same relocations, same S + A, same named targets; only the indices moved.
    if ra.len() != rf.len() {
        return Err(format!("{} relocations, {} folded", ra.len(), rf.len()));
    }
    if let Some((x, y)) = ra.iter().zip(&rf).find(|(x, y)| x != y) {
        return Err(format!("relocation differs: SHN_ABS {x:?}, folded {y:?}"));
    }
    // The symbol table is the SHN_ABS one without the preresolved symbols.
    let names: std::collections::HashSet<&str> = f.folded.iter().map(|(n, _)| n.as_str()).collect();
    let kept: Vec<&SymEntry> =
        sa.iter().filter(|s| !(s.3 == object::elf::SHN_ABS.0 && names.contains(s.0.as_str()))).collect();
    if kept.len() != sf.len() || kept.iter().zip(&sf).any(|(x, y)| *x != y) {
        return Err(format!(
            "symbol table: {} entries kept from the SHN_ABS output, {} in the folded one",
            kept.len(),
            sf.len()
        ));
    }
    Ok(ra.len())
}

/// A folded tree against the SHN_ABS tree from the same input: every
/// relocation keeps its S + A, the remaining symbols their names and
/// attributes; binutils reads every file without a warning; depmod computes
/// the same modules.dep as for the input tree.
#[test]
fn folding_the_whole_tree_keeps_every_relocation_and_depmod_agrees() {
    use rayon::prelude::*;
    let k = kernel();
    let dir = tmpdir("pr-fold-tree");
    let abs = dir.join("abs");
    let a = dir.join("a");
    let b = dir.join("b");
    let folded = b.join("lib/modules").join(&k.release);
    let o = run(&[&"preresolve", &"--assume-nokaslr", &"--kernel", &k.vmlinuz, &"-o", &abs, &k.modules]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = std::time::Instant::now();
    let o = preresolve(&[&"--assume-nokaslr", &"--fold-symbols", &"-o", &folded, &k.modules]);
    assert!(o.status.success(), "{}", stderr(&o));
    println!("folded the whole tree in {:.2} s", t.elapsed().as_secs_f64());
    let r = report(&o);
    let mods = r["modules"].as_array().unwrap();
    let total = bootlink::tree::find_modules(std::slice::from_ref(&k.modules)).unwrap().len();
    assert_eq!(mods.len(), total);
    assert_eq!(r["totals"]["errors"], 0);
    assert_eq!(r["totals"]["folded_modules"], r["totals"]["preresolved_modules"]);

    // The counts are the SHN_ABS mode's, module by module.
    let o = preresolve(&[&"--assume-nokaslr", &"-o", &dir.join("abs-again"), &k.modules]);
    let abs_report = report(&o);
    std::fs::remove_dir_all(dir.join("abs-again")).unwrap();
    for (x, y) in abs_report["modules"].as_array().unwrap().iter().zip(mods) {
        for key in ["display", "status", "undefined", "preresolved", "kept", "module_symbols", "signature"] {
            assert_eq!(x[key], y[key], "{key} of {}", x["display"]);
        }
        let mode = if x["status"] == "preresolved" { ("abs", "folded") } else { ("", "") };
        assert_eq!((x["mode"].as_str().unwrap_or(""), y["mode"].as_str().unwrap_or("")), mode, "{}", x["display"]);
    }

    // Relocations and symbols, module by module.
    let checked: Vec<(String, Result<usize, String>)> = mods
        .par_iter()
        .filter(|m| m["status"] == "preresolved")
        .map(|m| {
            let rel = m["display"].as_str().unwrap().to_string();
            let res = compare_folded(&abs.join(&rel), &folded.join(&rel));
            (rel, res)
        })
        .collect();
    let bad: Vec<String> = checked.iter().filter_map(|(p, r)| r.as_ref().err().map(|e| format!("{p}: {e}"))).collect();
    assert!(bad.is_empty(), "{} modules differ:\n{}", bad.len(), bad[..bad.len().min(20)].join("\n"));
    let relocs: usize = checked.iter().map(|(_, r)| *r.as_ref().unwrap()).sum();
    println!("{} folded modules, {relocs} relocations: S + A and targets equal to the SHN_ABS output", checked.len());
    assert!(checked.len() > 4000 && relocs > 1_000_000, "{} modules, {relocs} relocations", checked.len());

    // binutils: readelf -a and -r read every file without a warning.
    let files: Vec<String> =
        walk(&folded).into_iter().filter(|p| module::is_module_file(p)).map(|p| p.display().to_string()).collect();
    assert_eq!(files.len(), total);
    files.par_chunks(200).for_each(|chunk| {
        for flags in ["-aW", "-rW"] {
            let o = Command::new("readelf").arg(flags).args(chunk).output().expect("readelf (binutils)");
            assert!(
                o.status.success() && o.stderr.is_empty(),
                "readelf {flags}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    });

    // depmod: the same modules.dep as for the input tree.
    std::fs::create_dir_all(a.join("lib/modules")).unwrap();
    sh("cp", &["-al", k.modules.to_str().unwrap(), a.join("lib/modules").to_str().unwrap()]);
    sh("depmod", &["-b", a.to_str().unwrap(), &k.release]);
    sh("depmod", &["-b", b.to_str().unwrap(), &k.release]);
    let read =
        |base: &Path| std::fs::read_to_string(base.join("lib/modules").join(&k.release).join("modules.dep")).unwrap();
    let (da, db) = (read(&a), read(&b));
    assert_eq!(da.lines().count(), total);
    assert!(da == db, "modules.dep differs");

    // Twice is a no-op: every folded module is recognised and left as it is,
    // with or without --fold-symbols.
    let fs = folded.join("kernel/fs");
    let snapshot: Vec<(PathBuf, Vec<u8>)> = bootlink::tree::find_modules(std::slice::from_ref(&fs))
        .unwrap()
        .into_iter()
        .map(|p| {
            let d = std::fs::read(&p).unwrap();
            (p, d)
        })
        .collect();
    for fold in [true, false] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"--assume-nokaslr", &"--in-place", &fs];
        if fold {
            args.push(&"--fold-symbols");
        }
        let o = preresolve(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let r = report(&o);
        assert_eq!(r["totals"]["already"].as_u64().unwrap() as usize, snapshot.len(), "{}", r["totals"]);
        assert!(r["modules"].as_array().unwrap().iter().all(|m| m["mode"] == "folded"));
        for (p, d) in &snapshot {
            assert!(&std::fs::read(p).unwrap() == d, "a second run changed {}", p.display());
        }
    }
    let text = stdout(&run(&[
        &"preresolve",
        &"--assume-nokaslr",
        &"--fold-symbols",
        &"--kernel",
        &k.vmlinuz,
        &"--in-place",
        &fs.join("fat"),
    ]));
    assert!(text.contains("PRERESV fat.ko (already preresolved, folded, skipped)"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Change the address of `name` in a folded module's .preresolved list, as
/// another build of the same release would have it.
fn shift_listed_address(path: &Path, name: &str) -> Vec<u8> {
    let mut data = std::fs::read(path).unwrap();
    let (off, text) = {
        let elf = Elf::parse(&data, Want::Relocatable).unwrap();
        let d = elf.named_section_data(module::PRERESOLVED_SECTION).unwrap().unwrap();
        (d.as_ptr() as usize - data.as_ptr() as usize, String::from_utf8(d.to_vec()).unwrap())
    };
    let line =
        text.lines().position(|l| l.ends_with(&format!(" {name}"))).unwrap_or_else(|| panic!("{name} not listed"));
    let at = off + text.lines().take(line).map(|l| l.len() + 1).sum::<usize>();
    let addr = u64::from_str_radix(std::str::from_utf8(&data[at..at + 16]).unwrap(), 16).unwrap() + 0x20_0000;
    data[at..at + 16].copy_from_slice(format!("{addr:016x}").as_bytes());
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn a_folded_module_preresolved_for_another_build_is_refused() {
    let dir = tmpdir("pr-fold-otherbuild");
    let out = dir.join("out");
    let o = preresolve(&[&"--assume-nokaslr", &"--fold-symbols", &"-o", &out, &module("fs/fat/fat.ko")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = out.join("fat.ko");
    let m = module::read(&p).unwrap();
    assert!(m.preresolved && m.absolute.is_empty() && m.folded.iter().any(|(n, _)| n == "_printk"));
    assert!(m.undefined.is_empty(), "fat is fully preresolved: {:?}", m.undefined);
    let data = shift_listed_address(&p, "_printk");
    assert_refused_as_other_build(&p, &data, &[true, false]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A module whose relocations cannot be remapped exactly (here .rela.text
/// turned into SHT_REL, whose 24-byte entries then no longer fit the
/// 16-byte REL format: the module reader refuses it as corrupt before the
/// folding could) is refused by name; the others are still written, and an
/// in-place run leaves the refused file as it was.
#[test]
fn folding_refuses_a_module_it_cannot_remap_and_names_it() {
    let dir = tmpdir("pr-fold-refuse");
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    let bad = copy_to(&module("fs/fat/fat.ko"), &input, "fat.ko");
    copy_to(&module("fs/fat/vfat.ko"), &input, "vfat.ko");
    let mut data = std::fs::read(&bad).unwrap();
    let header = {
        let elf = Elf::parse(&data, Want::Relocatable).unwrap();
        let (i, _) = elf.section(".rela.text").expect(".rela.text");
        let shoff = u64::from_le_bytes(data[0x28..0x30].try_into().unwrap()) as usize;
        shoff + i * 64
    };
    data[header + 4..header + 8].copy_from_slice(&object::elf::SHT_REL.0.to_le_bytes());
    std::fs::write(&bad, &data).unwrap();
    let out = dir.join("out");
    let o = preresolve(&[&"--assume-nokaslr", &"--fold-symbols", &"-o", &out, &input]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&bad.display().to_string())
            && err.contains("corrupt relocation section .rela.text")
            && err.contains("want whole 16-byte entries"),
        "{err}"
    );
    assert!(!out.join("fat.ko").exists(), "nothing written for a refused module");
    let vfat = module::read(&out.join("vfat.ko")).unwrap();
    assert!(vfat.preresolved && !vfat.folded.is_empty());
    let o = preresolve(&[&"--assume-nokaslr", &"--fold-symbols", &"--in-place", &bad]);
    assert!(!o.status.success() && stderr(&o).contains("relocation section .rela.text"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&bad).unwrap(), data, "refused module untouched");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every relocation of a module by (section, offset): its type, addend and
/// the name and section of its symbol; and the symbols in code.
#[allow(clippy::type_complexity)]
fn relocation_targets(data: &[u8]) -> (Vec<(String, u64, u32, i64, String, u16)>, Vec<(String, u16, u64)>) {
    use object::read::elf::{Rela, SectionHeader, Sym};
    let le = bootlink::elf::LE;
    let elf = Elf::parse(data, Want::Relocatable).unwrap();
    let symtab = elf.symbols().unwrap();
    let mut out = Vec::new();
    for sh in elf.sections.iter() {
        if sh.sh_type(le) != object::elf::SHT_RELA {
            continue;
        }
        let name = String::from_utf8_lossy(elf.section_name(sh)).into_owned();
        for r in sh.data_as_array::<object::elf::Rela64<object::LittleEndian>, _>(le, data).unwrap() {
            let s = symtab.symbol(object::read::SymbolIndex(r.r_sym(le, false) as usize)).unwrap();
            let sname = String::from_utf8_lossy(bootlink::elf::sym_name(&symtab, s).unwrap()).into_owned();
            out.push((name.clone(), r.r_offset(le), r.r_type(le, false).0, r.r_addend(le), sname, s.st_shndx(le).0));
        }
    }
    let mut code = Vec::new();
    for s in symtab.iter() {
        let shndx = s.st_shndx(le).0;
        let exec = elf
            .section_by_index(shndx as usize)
            .is_some_and(|h| shndx != 0 && h.sh_flags(le).0 & object::elf::SHF_EXECINSTR.0 != 0);
        if exec {
            code.push((
                String::from_utf8_lossy(bootlink::elf::sym_name(&symtab, s).unwrap()).into_owned(),
                shndx,
                s.st_value(le),
            ));
        }
    }
    (out, code)
}

#[test]
fn trim_symtab_removes_unused_data_symbols_and_nothing_else() {
    let k = kernel();
    let out = tmpdir("preresolve-trim");
    let inputs = [module("fs/xfs/xfs.ko"), module("fs/nfs/nfsv4.ko"), module("net/sunrpc/sunrpc.ko")];
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"preresolve", &"--kernel", &k.vmlinux, &"--assume-nokaslr", &"--trim-symtab", &"--json", &"-o", &out];
    inputs.iter().for_each(|p| args.push(p));
    let o = TestCommand::new(&args).ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for input in &inputs {
        let file = input.file_name().unwrap().to_str().unwrap();
        let m = v["modules"].as_array().unwrap().iter().find(|m| m["display"] == file).unwrap();
        let trimmed = m["symbols_trimmed"].as_u64().unwrap();
        let before = std::fs::read(input).unwrap();
        let (len, _) = module::split_signature(&before).unwrap();
        let after = std::fs::read(out.join(input.file_name().unwrap())).unwrap();
        let (mut r0, c0) = relocation_targets(&before[..len]);
        let (r1, c1) = relocation_targets(&after);
        // The same relocations against the same symbols, except that
        // preresolving made the vmlinux ones absolute (same names).
        assert_eq!(r0.len(), r1.len());
        for (a, b) in r0.iter_mut().zip(&r1) {
            if a.5 == 0 && b.5 == object::elf::SHN_ABS.0 {
                a.5 = b.5;
            }
        }
        assert_eq!(r0, r1, "{}: relocations changed", input.display());
        assert_eq!(c0, c1, "{}: symbols in code changed", input.display());
        let count = |d: &[u8]| Elf::parse(d, Want::Relocatable).unwrap().symbols().unwrap().len() as u64;
        assert_eq!(count(&before[..len]) - count(&after), trimmed);
        assert!(trimmed > 500, "{}: only {trimmed} trimmed", input.display());
        println!("{}: {} -> {} symbols", m["name"], count(&before[..len]), count(&after));
    }
    // --dry-run: the same work and report, nothing written
    let dry = tmpdir("preresolve-trim-dry");
    let input = copy_to(&inputs[0], &dry, "xfs.ko");
    let before = std::fs::read(&input).unwrap();
    let o = TestCommand::new(&[
        &"preresolve",
        &"--kernel",
        &k.vmlinux,
        &"--assume-nokaslr",
        &"--trim-symtab",
        &"--dry-run",
        &"--json",
        &input,
    ])
    .ok();
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let xfs = v["modules"].as_array().unwrap().iter().find(|m| m["display"] == "xfs.ko").unwrap();
    assert_eq!(d["modules"][0]["symbols_trimmed"], xfs["symbols_trimmed"]);
    assert!(std::fs::read(&input).unwrap() == before, "--dry-run changed its input");
    assert_eq!(std::fs::read_dir(&dry).unwrap().count(), 1, "--dry-run wrote a file");
}
