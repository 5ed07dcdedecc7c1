//! Several bootlinks fetching one kernel package at once (tests in
//! parallel lanes, a user's two terminals): each gets the package, one
//! unpacked tree is left, nothing half-made beside it. Before the
//! per-release lock, two processes that both found the tree missing or
//! unsealed each removed the other's, and one failed with "Directory not
//! empty" (seen in a whole `make test` when the cache's seals came in).

use crate::common;

use std::process::{Command, Stdio};

use common::*;

#[test]
fn several_fetches_of_one_package_at_once_all_get_it() {
    let k = kernel();
    let deb = std::fs::read_dir(k.dir.parent().unwrap().parent().unwrap().join("debs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&format!("{}_", k.package)) && n.ends_with("_amd64.deb")
        });
    let Some(deb) = deb else {
        return skip("several_fetches_of_one_package_at_once_all_get_it", "the kernel's .deb is not in the cache");
    };
    // A private cache holding the .deb only: every fetch must unpack it.
    let cache = tmpdir("fetch-together");
    std::fs::create_dir_all(cache.join("debs")).unwrap();
    std::fs::copy(&deb, cache.join("debs").join(deb.file_name().unwrap())).unwrap();
    let spec = format!("{}={}", k.package, k.version);
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(bin())
                .args(["fetch-kernel", "--package", &spec, "--json"])
                .env("BOOTLINK_CACHE", &cache)
                .env("BOOTLINK_QUIET", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut dirs = Vec::new();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "a fetch failed: {}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        dirs.push(v["dir"].as_str().unwrap().to_string());
    }
    assert!(dirs.iter().all(|d| *d == dirs[0]), "{dirs:?}");
    let left: Vec<String> = std::fs::read_dir(cache.join("kernels"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert_eq!(left, std::slice::from_ref(&k.release), "one unpacked tree, nothing half-made beside it");
    assert_eq!(bootlink::cache::check(&cache.join("kernels").join(&k.release)), Ok(()), "and it is whole");
    println!("3 fetches of {spec} at once into an empty cache: all got {}", dirs[0]);
}
