//! The module hash manifest (kernel/6.1/patches, "module: accept unsigned
//! modules whose SHA-256 the kernel image lists") against the kernel's hash
//! blacklist, in a real boot: a lab kernel built with
//! CONFIG_SYSTEM_BLACKLIST_HASH_LIST naming the digest of one module of the
//! build (nls_cp437, unsigned), the build's modules listed in its image;
//! the blacklisted module is refused with the kernel's own line, with and
//! without module.sig_enforce, and its init never runs, while the other
//! listed modules load. The same with a list of BLAKE2b-256 digests
//! (patch `hashes-blake2b`): the kernel then hashes a listed module with SHA-256 as
//! well, because its blacklist holds a binary hash, and refuses it alike.
//!
//! The blacklist is built into the image, so the digest must be known
//! before the build: it is taken from the lab's usual build (same source,
//! series and key), whose modules the blacklist build reproduces byte for
//! byte (checked; a build that does not is a counted skip). Extended tier:
//! a second kernel configuration, built once and cached.

use crate::common;

use std::path::{Path, PathBuf};

use common::TestCommand;
use sha2::{Digest, Sha256};

const MODULES: &[&str] = &["sctp", "nls_cp437", "crc32c_generic"];
const VICTIM: &str = "nls_cp437.ko";

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// `kernel build --json [--config FRAGMENT]`: the build's directory and release.
fn build(config: Option<&Path>) -> (PathBuf, String) {
    let line = common::line();
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"kernel", &"build", &"--lab", &"--line", &line, &"--json"];
    if let Some(c) = &config {
        args.push(&"--fragment");
        args.push(c);
    }
    let o = TestCommand::new(&args).ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (v["dir"].as_str().unwrap().into(), v["release"].as_str().unwrap().into())
}

/// The build's modules copied to `tree` without their signatures; the
/// victim's path in it.
fn unsigned_tree(built: &Path, release: &str, tree: &Path) -> PathBuf {
    let src = built.join("lib/modules").join(release);
    common::sh("cp", &["-a", src.to_str().unwrap(), tree.to_str().unwrap()]);
    let mut victim = None;
    for f in bootlink::tree::find_modules(&[tree.to_path_buf()]).unwrap() {
        let data = std::fs::read(&f).unwrap();
        let (len, _) = bootlink::module::split_signature(&data).unwrap();
        std::fs::write(&f, &data[..len]).unwrap();
        if f.file_name().unwrap() == VICTIM {
            victim = Some(f);
        }
    }
    victim.unwrap_or_else(|| panic!("{VICTIM} in the build"))
}

fn digest(path: &Path) -> String {
    hex(&Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn a_listed_module_whose_hash_is_blacklisted_is_refused_and_the_others_load() {
    let root = common::tmpdir("manifest-blacklist");
    let (usual, release) = build(None);
    let wanted = digest(&unsigned_tree(&usual, &release, &root.join("usual")));

    // A fixed place per digest: the fragment names it, so the same digest
    // gives the same fragment, cache key and object tree on every run.
    let stable = std::env::temp_dir().join(format!("bootlink-blacklist-{}", &wanted[..16]));
    std::fs::create_dir_all(&stable).unwrap();
    let list = stable.join("blacklist-hashes");
    std::fs::write(&list, format!("\"bin:{wanted}\"\n")).unwrap();
    let lab = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("kernel/{}/configs/lab.config", common::line())),
    )
    .unwrap();
    let fragment = stable.join("blacklist.config");
    std::fs::write(
        &fragment,
        format!(
            "{lab}\n# --- the hash of one module of the build, blacklisted\nCONFIG_KEYS=y\n\
             CONFIG_SYSTEM_BLACKLIST_KEYRING=y\nCONFIG_SYSTEM_BLACKLIST_HASH_LIST=\"{}\"\n",
            list.display()
        ),
    )
    .unwrap();
    let (built, release_b) = build(Some(&fragment));
    assert_eq!(release_b, release, "the blacklist build is the same kernel release");
    let tree = root.join("tree");
    let victim = unsigned_tree(&built, &release, &tree);
    let got = digest(&victim);
    if got != wanted {
        common::skip(
            "manifest_blacklist",
            &format!(
                "the blacklist build's {VICTIM} differs from the usual build's ({got} vs {wanted}): not reproducible"
            ),
        );
        return;
    }

    let mut variants = Vec::new();
    for hash in ["sha256", "blake2b"] {
        let listed = root.join(format!("vmlinux.listed-{hash}"));
        TestCommand::new(&[
            &"manifest",
            &"write",
            &"--hash",
            &hash,
            &"--vmlinux",
            &built.join("vmlinux"),
            &"-o",
            &listed,
            &tree,
        ])
        .ok();
        let kdir = root.join(format!("kernel-{hash}"));
        std::fs::create_dir_all(kdir.join("lib/modules")).unwrap();
        std::fs::copy(&listed, kdir.join("vmlinux")).unwrap();
        std::os::unix::fs::symlink(&tree, kdir.join("lib/modules").join(&release)).unwrap();
        variants.push(format!("enforced-{hash}=kernel:{},cmdline:module.sig_enforce=1", kdir.display()));
        variants.push(format!("unenforced-{hash}=kernel:{}", kdir.display()));
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
    // A refused module makes the lab's checks fail: read run.json either way.
    let (run, _) = common::lab_run_either_way(&args, &out);
    assert_eq!(run.variants.len(), 4, "every variant booted");
    let line = format!("Module hash {wanted} is blacklisted");
    for v in &run.variants {
        let rep = &v.repetitions[0];
        let log = std::fs::read_to_string(out.join(&rep.log)).unwrap();
        let status = rep.modules.iter().find(|m| m.name == "nls_cp437").map(|m| m.status).expect("nls_cp437 was tried");
        let others: Vec<(String, i32)> =
            rep.modules.iter().filter(|m| m.name != "nls_cp437").map(|m| (m.name.clone(), m.status)).collect();
        common::report(
            "manifest blacklist (status 0 = loaded)",
            &format!("{}: nls_cp437 {status}, others {others:?}", v.name),
        );
        let by = if v.name.ends_with("blake2b") { "BLAKE2b-256" } else { "SHA-256" };
        assert!(
            log.contains("module hashes: ") && log.contains(&format!("modules of this build trusted by their {by}")),
            "{}: the {by} list is in use",
            v.name
        );
        assert_ne!(status, 0, "{}: the blacklisted module loaded", v.name);
        assert!(log.contains(&line), "{}: the kernel's line {line:?} is in the log", v.name);
        assert_eq!(rep.initcalls.iter().filter(|i| i.module == "nls_cp437").count(), 0, "{}: its init ran", v.name);
        assert!(
            !others.is_empty() && others.iter().all(|(_, s)| *s == 0),
            "{}: the other listed modules load: {others:?}",
            v.name
        );
        assert!(!log.contains("tainting kernel"), "{}: nothing unlisted loaded", v.name);
    }
}
