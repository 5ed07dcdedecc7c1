//! Debian's kernel source of a [`Line`] (`linux-source-6.1`,
//! `linux-source-6.12`, installed with apt), unpacked once into the cache,
//! with bootlink's patch series applied on top.
//!
//! The unpacked tree is kept between builds so that a changed series
//! rebuilds only what it touches: the patches applied last time are
//! recorded (with their text) in the tree, and a new series reverts the
//! ones it does not share with the old one (newest first) before applying
//! its own. A patch that does not apply is refused with `patch`'s reasons,
//! and the tree is left with the record matching what is applied.
//!
//! While `patch` applies or reverts one, its record is named
//! `.inflight-<name>`: a build stopped then (killed, the machine lost)
//! leaves that name, and the next build finds out from the tree itself
//! whether the patch is in (the record is kept), out (it is dropped) or
//! half in (refused: the tree must be unpacked again).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::line::Line;
use super::series::{Patch, Series};
use crate::error::{Error, Kind, Result};
use crate::{fsutil, hosttool};

const UNPACKED_MARK: &str = ".bootlink-unpacked";
const APPLIED_DIR: &str = ".bootlink-applied";
/// The prefix of a record whose patch `patch` is applying or reverting.
const INFLIGHT: &str = ".inflight-";

/// The installed source package's version; installs the package with apt
/// when it is missing (as root) or says how to.
pub(crate) fn package_version(line: Line) -> Result<String> {
    let (package, tarball) = (line.package, line.tarball);
    let query = || {
        Command::new("dpkg-query")
            .args(["-W", "-f=${Status}\t${Version}", package])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.strip_prefix("install ok installed\t").map(str::to_string))
    };
    if let Some(v) = query().filter(|_| Path::new(tarball).is_file()) {
        return Ok(v);
    }
    if !is_root() {
        return Err(Error::new(
            Kind::Build,
            format!(
                "{package} is not installed: run `apt-get install {package}` as root (bootlink builds Debian's kernel source)"
            ),
        ));
    }
    crate::progress::status(&format!("installing {package} with apt-get"));
    hosttool::run(
        Command::new("apt-get").args(["install", "-y", "-qq", package]).env("DEBIAN_FRONTEND", "noninteractive"),
        &format!("installing {package}"),
        "apt",
    )?;
    query().filter(|_| Path::new(tarball).is_file()).ok_or_else(|| {
        Error::file(Kind::Build, Path::new(tarball), format!("still missing after installing {package}"))
    })
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// The unpacked tree of `line`'s `version` under `kbuild`
/// (`src/<package>`), unpacking it if needed (into a temporary directory
/// renamed into place, so a killed unpack leaves nothing that looks
/// complete; another line's tree beside it is left alone). The tree's path
/// does not depend on the version, so ccache (which sees paths relative to
/// `kbuild`) still hits for the files a new version leaves unchanged.
pub fn unpacked(kbuild: &Path, line: Line, version: &str) -> Result<PathBuf> {
    let (package, tarball) = (line.package, line.tarball);
    let top = kbuild.join("src");
    let tree = top.join(package);
    if std::fs::read_to_string(tree.join(UNPACKED_MARK)).is_ok_and(|v| v.trim() == version) {
        return Ok(tree);
    }
    crate::progress::status(&format!("unpacking {tarball} ({package} {version})"));
    std::fs::create_dir_all(&top).map_err(|e| Error::io(&top, e))?;
    let tmp = tempfile::Builder::new().prefix(".unpack-").tempdir_in(&top).map_err(|e| Error::io(&top, e))?;
    hosttool::run(
        Command::new("tar").arg("-xf").arg(tarball).arg("-C").arg(tmp.path()),
        &format!("unpacking {tarball}"),
        "tar",
    )?;
    let got = tmp.path().join(package);
    if !got.join("Makefile").is_file() {
        return Err(Error::file(
            Kind::Build,
            Path::new(tarball),
            format!("holds no {package}/Makefile: not a kernel source tarball"),
        ));
    }
    fsutil::write_atomic(&got.join(UNPACKED_MARK), version.as_bytes())?;
    if tree.exists() {
        std::fs::remove_dir_all(&tree).map_err(|e| Error::io(&tree, e))?;
    }
    std::fs::rename(&got, &tree).map_err(|e| Error::io(&tree, e))?;
    Ok(tree)
}

fn hash_hex(data: &[u8]) -> String {
    let d = Sha256::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file name a patch is recorded under: its position, the hash of its
/// diff (not its message), its name.
fn record_name(i: usize, p: &Patch) -> String {
    let safe: String =
        p.name.chars().map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
    format!("{i:04}-{}-{safe}", &hash_hex(p.diff())[..16])
}

fn applied(tree: &Path) -> Result<Vec<PathBuf>> {
    let dir = tree.join(APPLIED_DIR);
    let mut files = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect::<Vec<_>>(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    files.retain(|p| p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.')));
    files.sort();
    Ok(files)
}

/// What the source tree holds: a digest of the patches applied, by their
/// record names (each carries its diff's hash) in order, each followed by
/// a newline (what `ls -1 .bootlink-applied | sha256sum` prints). An object
/// tree records it when a build finishes: the source is shared by every
/// object tree of a line (x86-64, arm64, other configs), and make in an
/// object tree whose source another build has patched since recompiles
/// what that build changed.
pub(crate) fn applied_state(tree: &Path) -> Result<String> {
    let mut listing = Vec::new();
    for f in applied(tree)? {
        listing.extend_from_slice(f.file_name().unwrap_or_default().as_encoded_bytes());
        listing.push(b'\n');
    }
    Ok(hash_hex(&listing))
}

/// `patch -p1` in `tree`; a failure says why in `patch`'s words (Build), a
/// missing `patch` is a Tool error.
fn patch(tree: &Path, file: &Path, reverse: bool, dry_run: bool, locks: &[std::fs::File]) -> Result<()> {
    let mut c = Command::new("patch");
    hosttool::tie_to_caller_holding(&mut c, locks);
    // No fuzz: a patch applies exactly where its context says or not at
    // all (with fuzz, one found half applied would "apply" again).
    c.current_dir(tree).args(["-p1", "-s", "-f", "--fuzz=0", "--no-backup-if-mismatch", "-r", "-", "-i"]).arg(file);
    if reverse {
        c.arg("-R");
    } else {
        c.arg("-N");
    }
    if dry_run {
        c.arg("--dry-run");
    }
    let out = c.output().map_err(|e| hosttool::spawn_error("patch", "applying the kernel patch series", "patch", e))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).take(4).collect();
    Err(Error::new(Kind::Build, lines.join("; ")))
}

/// The name of record `name` while its patch is applied or reverted.
fn inflight_record(record: &Path, name: &str) -> PathBuf {
    record.join(format!("{INFLIGHT}{name}"))
}

/// Settle what a stopped build left in flight: a patch found wholly in
/// the tree gets its record back, one wholly out loses it, and one half
/// in (`patch` itself stopped midway) is an error naming the tree.
/// Returns the names settled, with whether each was found applied.
fn settle_inflight(tree: &Path, locks: &[std::fs::File]) -> Result<Vec<(String, bool)>> {
    let record = tree.join(APPLIED_DIR);
    let mut found: Vec<PathBuf> = match std::fs::read_dir(&record) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(INFLIGHT)))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(&record, e)),
    };
    found.sort();
    let mut settled = Vec::new();
    for file in found {
        let name = file.file_name().unwrap_or_default().to_string_lossy()[INFLIGHT.len()..].to_string();
        if patch(tree, &file, true, true, locks).is_ok() {
            std::fs::rename(&file, record.join(&name)).map_err(|e| Error::io(&file, e))?;
            settled.push((name, true));
        } else if patch(tree, &file, false, true, locks).is_ok() {
            std::fs::remove_file(&file).map_err(|e| Error::io(&file, e))?;
            settled.push((name, false));
        } else {
            return Err(Error::file(
                Kind::Build,
                tree,
                format!("a build stopped while patching left {name} half applied here; remove this tree to start over"),
            ));
        }
    }
    Ok(settled)
}

/// Make the tree hold exactly `series` on top of the pristine source.
/// Returns how many patches were reverted and applied. `locks` are the
/// kernel build's (the line's: [`super::lock`]), held by each `patch` run too.
pub(crate) fn apply_series(
    tree: &Path,
    series: &Series,
    line: Line,
    version: &str,
    locks: &[std::fs::File],
) -> Result<(usize, usize)> {
    let record = tree.join(APPLIED_DIR);
    std::fs::create_dir_all(&record).map_err(|e| Error::io(&record, e))?;
    for (name, applied) in settle_inflight(tree, locks)? {
        let state = if applied { "applied: kept" } else { "not applied: dropped" };
        crate::progress::status(&format!("a stopped build left {name} in flight; {state}"));
    }
    let have = applied(tree)?;
    let want: Vec<String> = series.patches.iter().enumerate().map(|(i, p)| record_name(i, p)).collect();
    let keep =
        have.iter().zip(&want).take_while(|(h, w)| h.file_name().is_some_and(|n| n.to_string_lossy() == **w)).count();
    // Files the switch touches keep their modification time where their
    // content ends up the same (a patch reverted and applied again, or a
    // later patch of the series changed): make rebuilds only what changed.
    let mut touched: Vec<PathBuf> = Vec::new();
    for file in &have[keep..] {
        touched.extend(patched_files(&std::fs::read(file).unwrap_or_default()));
    }
    for p in &series.patches[keep.min(series.patches.len())..] {
        touched.extend(patched_files(&p.text));
    }
    touched.sort();
    touched.dedup();
    let before: Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> = touched
        .into_iter()
        .filter_map(|rel| {
            let path = tree.join(&rel);
            let meta = std::fs::metadata(&path).ok()?;
            Some((path.clone(), hash_hex(&std::fs::read(&path).ok()?).into_bytes(), meta.modified().ok()?))
        })
        .collect();
    let mut reverted = 0;
    for file in have[keep..].iter().rev() {
        let inflight = inflight_record(&record, &file.file_name().unwrap_or_default().to_string_lossy());
        std::fs::rename(file, &inflight).map_err(|e| Error::io(file, e))?;
        patch(tree, &inflight, true, false, locks).map_err(|e| {
            e.context(tree, |why| {
                format!(
                    "cannot revert {} (applied by an earlier build): {why}; remove this tree to start over",
                    file.display()
                )
            })
        })?;
        std::fs::remove_file(&inflight).map_err(|e| Error::io(&inflight, e))?;
        reverted += 1;
    }
    let mut done = 0;
    for (i, p) in series.patches.iter().enumerate().skip(keep) {
        let inflight = inflight_record(&record, &want[i]);
        fsutil::write_atomic(&inflight, &p.text)?;
        if let Err(e) = patch(tree, &inflight, false, true, locks) {
            let _ = std::fs::remove_file(&inflight);
            return Err(e.context(&p.path, |why| format!("does not apply to {} {version}: {why}", line.package)));
        }
        patch(tree, &inflight, false, false, locks)
            .map_err(|e| e.context(&p.path, |why| format!("failed to apply: {why}")))?;
        let rec = record.join(&want[i]);
        std::fs::rename(&inflight, &rec).map_err(|e| Error::io(&inflight, e))?;
        done += 1;
    }
    for (path, hash, mtime) in before {
        if std::fs::read(&path).is_ok_and(|d| hash_hex(&d).into_bytes() == hash)
            && let Ok(f) = std::fs::File::options().write(true).open(&path)
        {
            let _ = f.set_modified(mtime);
        }
    }
    Ok((reverted, done))
}

/// The files a patch changes, relative to the tree: its `+++ b/...` and
/// `--- a/...` names (not /dev/null).
fn patched_files(text: &[u8]) -> Vec<PathBuf> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| l.strip_prefix("+++ b/").or_else(|| l.strip_prefix("--- a/")))
        .map(|p| PathBuf::from(p.split('\t').next().unwrap_or(p).trim_end()))
        .filter(|p| p.components().all(|c| matches!(c, std::path::Component::Normal(_))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series_of(dir: &Path, patches: &[(&str, &str)]) -> Series {
        crate::series::write_for_test(dir, patches)
    }

    const P1: &str = "--- a/f.c\n+++ b/f.c\n@@ -1,2 +1,3 @@\n one\n+one and a half\n two\n";
    const P2: &str = "--- a/f.c\n+++ b/f.c\n@@ -2,2 +2,3 @@\n one and a half\n two\n+three\n";
    const BAD: &str = "--- a/f.c\n+++ b/f.c\n@@ -1,1 +1,1 @@\n-nothing like this\n+x\n";

    #[test]
    fn series_switch_reverts_what_differs_and_refuses_a_bad_patch() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        let pdir = t.path().join("p");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&pdir).unwrap();
        std::fs::write(tree.join("f.c"), "one\ntwo\n").unwrap();
        let read = || std::fs::read_to_string(tree.join("f.c")).unwrap();
        let lock = [std::fs::File::create(t.path().join(".lock")).unwrap()];

        let s12 = series_of(&pdir, &[("1.patch", P1), ("2.patch", P2)]);
        assert_eq!(apply_series(&tree, &s12, Line::V6_1, "v", &lock).unwrap(), (0, 2));
        assert_eq!(read(), "one\none and a half\ntwo\nthree\n");
        // The same series again: nothing to do.
        assert_eq!(apply_series(&tree, &s12, Line::V6_1, "v", &lock).unwrap(), (0, 0));
        // Only the first: the second is reverted.
        let s1 = series_of(&pdir, &[("1.patch", P1)]);
        assert_eq!(apply_series(&tree, &s1, Line::V6_1, "v", &lock).unwrap(), (1, 0));
        assert_eq!(read(), "one\none and a half\ntwo\n");
        // Switching away from and back to a patch whose content ends up the
        // same keeps the file's modification time (nothing to rebuild).
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options().write(true).open(tree.join("f.c")).unwrap().set_modified(old).unwrap();
        let reworded = series_of(&pdir, &[("1.patch", &format!("Reworded.\n\n{P1}"))]);
        assert_eq!(apply_series(&tree, &reworded, Line::V6_1, "v", &lock).unwrap(), (0, 0), "same diff: nothing to do");
        let other = series_of(&pdir, &[("1b.patch", P1)]);
        assert_eq!(apply_series(&tree, &other, Line::V6_1, "v", &lock).unwrap(), (1, 1));
        assert_eq!(std::fs::metadata(tree.join("f.c")).unwrap().modified().unwrap(), old);
        // Empty series: pristine again.
        let s0 = series_of(&pdir, &[]);
        assert_eq!(apply_series(&tree, &s0, Line::V6_1, "v", &lock).unwrap(), (1, 0));
        assert_eq!(read(), "one\ntwo\n");
        // A patch that does not apply: named, nothing changed, record consistent.
        let sb = series_of(&pdir, &[("1.patch", P1), ("bad.patch", BAD)]);
        let e = apply_series(&tree, &sb, Line::V6_1, "6.1.1-1", &lock).unwrap_err().to_string();
        assert!(e.contains("bad.patch: does not apply to linux-source-6.1 6.1.1-1"), "{e}");
        assert_eq!(read(), "one\none and a half\ntwo\n");
        assert_eq!(apply_series(&tree, &s0, Line::V6_1, "v", &lock).unwrap(), (1, 0));
        assert_eq!(read(), "one\ntwo\n");
    }

    const G1: &str = "--- a/g.c\n+++ b/g.c\n@@ -1,1 +1,2 @@\n g\n+g2\n";

    /// What a build stopped mid-way leaves: a record in flight for a patch
    /// wholly applied (stopped after `patch`), not applied (stopped before)
    /// or half applied (`patch` itself stopped between two files).
    #[test]
    fn a_stopped_build_leaves_nothing_the_next_one_trusts_blindly() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        let pdir = t.path().join("p");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&pdir).unwrap();
        let lock = [std::fs::File::create(t.path().join(".lock")).unwrap()];
        let pristine = || {
            std::fs::write(tree.join("f.c"), "one\ntwo\n").unwrap();
            std::fs::write(tree.join("g.c"), "g\n").unwrap();
            let _ = std::fs::remove_dir_all(tree.join(APPLIED_DIR));
        };
        let read = |f: &str| std::fs::read_to_string(tree.join(f)).unwrap();
        let both = format!("{P1}{G1}");
        let s = series_of(&pdir, &[("1.patch", P1), ("2.patch", P2), ("fg.patch", &both)]);
        let s2 = series_of(&pdir, &[("1.patch", P1), ("2.patch", P2)]);
        let names: Vec<String> = s.patches.iter().enumerate().map(|(i, p)| record_name(i, p)).collect();
        let inflight = |i: usize| inflight_record(&tree.join(APPLIED_DIR), &names[i]);
        let records = || {
            let mut v: Vec<String> = std::fs::read_dir(tree.join(APPLIED_DIR))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };

        // Stopped after `patch` applied the second patch, before its record
        // was renamed: the patch is found in the tree and kept.
        pristine();
        assert_eq!(apply_series(&tree, &s2, Line::V6_1, "v", &lock).unwrap(), (0, 2));
        std::fs::rename(tree.join(APPLIED_DIR).join(&names[1]), inflight(1)).unwrap();
        assert_eq!(apply_series(&tree, &s2, Line::V6_1, "v", &lock).unwrap(), (0, 0), "nothing applied twice");
        assert_eq!(read("f.c"), "one\none and a half\ntwo\nthree\n");
        assert_eq!(records(), names[..2].to_vec());

        // Stopped before `patch` ran (or after it reverted one): dropped,
        // then applied as any missing patch.
        std::fs::copy(pdir.join("2.patch"), inflight(1)).unwrap();
        std::fs::remove_file(tree.join(APPLIED_DIR).join(&names[1])).unwrap();
        std::fs::write(tree.join("f.c"), "one\none and a half\ntwo\n").unwrap();
        assert_eq!(apply_series(&tree, &s2, Line::V6_1, "v", &lock).unwrap(), (0, 1));
        assert_eq!(read("f.c"), "one\none and a half\ntwo\nthree\n");
        assert_eq!(records(), names[..2].to_vec());

        // Half applied: the patch's first file changed, its second not.
        // Refused, naming the patch and the way out; nothing changed.
        pristine();
        std::fs::write(tree.join("f.c"), "one\none and a half\ntwo\n").unwrap();
        std::fs::create_dir_all(tree.join(APPLIED_DIR)).unwrap();
        std::fs::write(inflight(2), &both).unwrap();
        let e = apply_series(&tree, &s, Line::V6_1, "v", &lock).unwrap_err();
        assert_eq!(e.kind, Kind::Build);
        let text = e.to_string();
        assert!(
            text.contains(&format!("left {} half applied here; remove this tree to start over", names[2])),
            "{text}"
        );
        assert_eq!((read("f.c").as_str(), read("g.c").as_str()), ("one\none and a half\ntwo\n", "g\n"));
        assert!(inflight(2).is_file(), "the evidence stays for whoever looks");
    }
}
