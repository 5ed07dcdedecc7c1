//! Debian's arm64 kernel package (linux-image-6.1.0-56-arm64, fetched as
//! a foreign package) and Debian's own Module.symvers of the same build
//! (from linux-headers-6.1.0-56-arm64), for the arm64 tests.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bootlink::fetch::{self, Fetched};

use super::{cache, sh, skip};

/// The arm64 package, or why there is none (each test skips with it).
pub fn arm64(test: &str) -> Option<&'static Fetched> {
    static K: OnceLock<Result<Fetched, String>> = OnceLock::new();
    let k =
        K.get_or_init(|| fetch::fetch_for(&fetch::Request::Reference, fetch::Arch::Arm64).map_err(|e| e.to_string()));
    match k {
        Ok(f) => Some(f),
        Err(why) => {
            skip(test, &format!("Debian's arm64 kernel package could not be fetched: {why}"));
            None
        }
    }
}

/// Debian's Module.symvers of the same build, from its arm64 headers
/// package (downloaded and unpacked once into the cache, never installed).
pub fn symvers(test: &str, k: &Fetched) -> Option<PathBuf> {
    static S: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match S.get_or_init(|| symvers_of(k)) {
        Ok(p) => Some(p.clone()),
        Err(why) => {
            skip(test, why);
            None
        }
    }
}

fn symvers_of(k: &Fetched) -> Result<PathBuf, String> {
    let dir = cache().join("arm64-headers").join(&k.release);
    let file = dir.join(format!("usr/src/linux-headers-{}/Module.symvers", k.release));
    if file.is_file() {
        return Ok(file);
    }
    let debs = cache().join("debs");
    std::fs::create_dir_all(&debs).unwrap();
    let package = format!("linux-headers-{}={}", k.release, k.version);
    let got = std::process::Command::new("apt-get")
        .current_dir(&debs)
        .args(["download", "-qq", &package])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let deb = debs.join(format!("linux-headers-{}_{}_arm64.deb", k.release, k.version.replace(':', "%3a")));
    if !got && !deb.is_file() {
        return Err(format!("{package} could not be downloaded"));
    }
    let tmp = dir.parent().unwrap().join(format!(".{}.tmp", k.release));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    sh("dpkg-deb", &["-x", deb.to_str().unwrap(), tmp.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).unwrap();
    Ok(file)
}

pub struct Symvers {
    pub vmlinux: HashMap<String, (u32, bool, Option<String>)>,
    pub modules: HashSet<String>,
}

/// Module.symvers: CRC, name, module, export type, namespace (tab-separated).
pub fn read_symvers(path: &Path) -> Symvers {
    let mut s = Symvers { vmlinux: HashMap::new(), modules: HashSet::new() };
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let crc = u32::from_str_radix(f[0].trim_start_matches("0x"), 16).unwrap();
        if f[2] == "vmlinux" {
            let ns = f.get(4).filter(|n| !n.is_empty()).map(|n| n.to_string());
            s.vmlinux.insert(f[1].to_string(), (crc, f[3] == "EXPORT_SYMBOL_GPL", ns));
        } else {
            s.modules.insert(f[1].to_string());
        }
    }
    s
}
