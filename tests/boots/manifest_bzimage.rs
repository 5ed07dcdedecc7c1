//! The bzImage of a listed vmlinux (`bootlink manifest write --bzimage`),
//! made by replaying kbuild's recorded commands for arch/x86/boot from the
//! self-built kernel's object tree (`bootlink kernel build --tree`, cached).
//! No boot here: tests/boots/manifest_boot.rs boots the result.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use common::TestCommand;

/// Every file under `dir` with its size and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), (m.len(), m.modified().unwrap()));
            }
        }
    }
    out
}

fn shown(image: &Path) -> serde_json::Value {
    let o = TestCommand::new(&[&"manifest", &"show", &"--json", &image]).ok();
    serde_json::from_slice(&o.stdout).unwrap()
}

/// From the build's own vmlinux the replayed chain makes the build's own
/// bzImage, byte for byte: the replay is the build. The object tree is
/// not touched.
#[test]
fn the_replayed_chain_reproduces_the_builds_bzimage() {
    let k = common::self_built(true);
    let before = snapshot(&k.tree.join("arch/x86/boot"));
    let tree_vmlinux = std::fs::metadata(k.tree.join("vmlinux")).unwrap().modified().unwrap();
    let scratch = common::tmpdir("bzimage-same");
    let out = scratch.join("bzImage");
    let r = bootlink::manifest::bzimage::rebuild(&k.tree, &k.dir.join("vmlinux"), &out).unwrap();
    println!("{} steps: {:?}", r.steps.len(), r.steps);
    assert_eq!(r.payload_before, r.payload_after);
    let ours = std::fs::read(&out).unwrap();
    let theirs = std::fs::read(k.dir.join("bzImage")).unwrap();
    assert!(ours == theirs, "the replayed bzImage differs from the build's ({} vs {} bytes)", ours.len(), theirs.len());
    assert_eq!(snapshot(&k.tree.join("arch/x86/boot")), before, "arch/x86/boot of the tree changed");
    assert_eq!(std::fs::metadata(k.tree.join("vmlinux")).unwrap().modified().unwrap(), tree_vmlinux);
}

/// `manifest write --bzimage` (the tree found from the build's build.json)
/// writes a bzImage whose payload lists exactly what the vmlinux lists,
/// and differs from the build's (the payload changed, so did its size);
/// `manifest show` reads it.
#[test]
fn a_listed_bzimage_carries_the_manifest() {
    let k = common::self_built(true);
    let dir = common::tmpdir("bzimage-listed");
    let (vm, bz) = (dir.join("vmlinux.listed"), dir.join("bzImage.listed"));
    let modules = k.dir.join("lib/modules").join(&k.release);
    let o = TestCommand::new(&[
        &"manifest",
        &"write",
        &"--json",
        &"--vmlinux",
        &k.dir.join("vmlinux"),
        &"-o",
        &vm,
        &"--bzimage",
        &bz,
        &modules,
    ])
    .ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["bzimage"];
    assert_eq!(b["tree"].as_str().unwrap(), k.tree.to_str().unwrap(), "{v}");
    assert_ne!(b["payload_before"], b["payload_after"], "the compressed payload changed: {b}");
    let (a, z) = (shown(&vm), shown(&bz));
    let n = a["digests"].as_array().unwrap().len();
    assert!(n > 100, "the build's modules are listed: {n}");
    assert_eq!(a, z, "the bzImage lists what the vmlinux lists");
    assert_ne!(std::fs::read(&bz).unwrap(), std::fs::read(k.dir.join("bzImage")).unwrap());
    // The build's own bzImage lists nothing.
    assert_eq!(shown(&k.dir.join("bzImage"))["digests"].as_array().unwrap().len(), 0);
}

/// Bad input names the file: a vmlinux the tree did not build (one byte
/// changed outside the manifest), a vmlinux outside a build directory
/// without --tree, a tree that built no bzImage.
#[test]
fn a_vmlinux_of_another_build_or_no_tree_is_refused() {
    let k = common::self_built(true);
    let dir = common::tmpdir("bzimage-bad");
    let modules = k.dir.join("lib/modules").join(&k.release);
    let mut data = std::fs::read(k.dir.join("vmlinux")).unwrap();
    // A byte in the middle (inside a section's contents): the ELF stays
    // whole, the file is another build's.
    let i = data.len() / 2;
    data[i] ^= 1;
    let other = dir.join("vmlinux.other");
    std::fs::write(&other, data).unwrap();
    let bz = dir.join("bzImage");
    // `manifest write --vmlinux VMLINUX -o OUT --bzimage bzImage [--tree TREE] MODULES`
    let write = |vmlinux: &std::path::Path, out: &str, tree: Option<&std::path::Path>| {
        let out = dir.join(out);
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"manifest", &"write", &"--vmlinux", &vmlinux, &"-o", &out, &"--bzimage", &bz];
        let t;
        if let Some(tree) = tree {
            t = tree.to_path_buf();
            args.push(&"--tree");
            args.push(&t);
        }
        args.push(&modules);
        TestCommand::new(&args)
    };
    let err = write(&other, "out", Some(&k.tree)).fails_with("the object tree holds another build");
    assert!(err.contains("vmlinux.other"), "{err}");
    assert!(!bz.exists() && !dir.join("out").exists(), "nothing written");
    let err = write(&other, "o2", None).fails_with("--bzimage needs the kernel's object tree");
    assert!(err.contains("vmlinux.other"), "{err}");
    assert!(!dir.join("o2").exists(), "the tree is looked for before anything is written");
    let err = write(&k.dir.join("vmlinux"), "o3", Some(&dir)).fails_with("no arch/x86/boot/.bzImage.cmd");
    assert!(err.contains(dir.to_str().unwrap()), "{err}");
}

/// A bzImage made from a cached build's object tree is made under the
/// line's build lock (`kbuild::with_tree_of`): the tree is shared with the
/// line's other builds, which may switch it, so `manifest write --bzimage`
/// waits while a build of the line holds the lock, says so, and writes a
/// listed bzImage once the lock is free. (Before, it read the tree
/// unlocked: a `bootlink apply` beside a build of the same line failed.)
#[test]
fn a_listed_bzimage_waits_for_the_lines_build_lock() {
    use bootlink::kbuild::{Line, lock};
    use std::time::{Duration, Instant};
    let k = common::self_built(true);
    let line = Line::parse(common::line()).unwrap();
    // This checkout still makes the build: a switched tree would be made
    // to hold it again, not refused.
    let built: bootlink::kbuild::Report =
        serde_json::from_slice(&std::fs::read(k.dir.join("build.json")).unwrap()).unwrap();
    let opts = bootlink::kbuild::options_of(&built).unwrap().expect("the lab build's options, from its build.json");
    assert!(opts.lab_series.is_some() && opts.flavours.is_empty());
    let kbuild = common::cache().join("kbuild");
    let dir = common::tmpdir("bzimage-locked");
    let (vm, bz, stderr) = (dir.join("vmlinux.listed"), dir.join("bzImage.listed"), dir.join("stderr"));
    let modules = k.dir.join("lib/modules").join(&k.release);
    // Held as a build of the line holds it (waited for if a real build has it).
    let held = lock::Held::line(&kbuild, line).unwrap();
    let mut child = std::process::Command::new(common::bin())
        .args(["manifest", "write", "--json", "--vmlinux"])
        .arg(k.dir.join("vmlinux"))
        .arg("-o")
        .arg(&vm)
        .arg("--bzimage")
        .arg(&bz)
        .arg(&modules)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let want = format!("waiting for another kernel build of line {line} to finish");
    let t0 = Instant::now();
    let said = common::wait_for_stderr(&mut child, &stderr, &want, "manifest write with the line's lock held");
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "went on while the line's lock was held: {said}");
    assert!(!bz.exists() && !vm.exists(), "nothing written while waiting");
    drop(held);
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert!(status.success(), "manifest write after the lock was released: {err}");
    let (a, z) = (shown(&vm), shown(&bz));
    assert!(a["digests"].as_array().unwrap().len() > 100, "the build's modules are listed: {a}");
    assert_eq!(a, z, "the bzImage lists what the vmlinux lists");
    println!("waited {:.1} s, saying {:?}", t0.elapsed().as_secs_f64(), said.lines().find(|l| l.contains("waiting")));
}
