//! DDLink's bad input through the binary, without the patched glibc: a
//! truncated or foreign record, a record whose files changed or are gone,
//! a corrupt cache, a missing loader. Each is a one-line error naming the
//! file and the problem, a non-zero exit, and no cache written.

mod common;

use std::path::Path;

use bootlink::ddlink::objects::ObjFile;
use common::TestCommand;

/// A record of /bin/true with its real identity, as the loader writes it.
fn record_of_true(build_id_hex: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/bin/true").unwrap();
    format!(
        "ddlink-record 1\nloader 00\nobj 0 2 0 0 0 0 0 {build_id_hex} \n\
         obj 1 0 {} {} {} {} {} {build_id_hex} /bin/true\nscope 0 1\nbind 0 1 1 1 2\nend 1\n",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    )
}

fn true_build_id() -> String {
    bootlink::ddlink::record::hex(&ObjFile::read(Path::new("/bin/true")).unwrap().build_id)
}

fn write_cmd(dir: &Path, record: &str) -> (TestCommand, std::path::PathBuf) {
    let rec = dir.join("record");
    std::fs::write(&rec, record).unwrap();
    let out = dir.join("out.cache");
    let cmd = TestCommand::new(&[
        &"ddlink",
        &"write",
        &"--loader",
        &"/bin/true",
        &"--record",
        &rec,
        &"--program",
        &"/bin/true",
        &"-o",
        &out,
    ])
    .show_dir(dir);
    (cmd, out)
}

#[test]
fn a_good_record_makes_a_cache_status_can_read() {
    let dir = common::tmpdir("ddlink-good");
    let (cmd, out) = write_cmd(&dir, &record_of_true(&true_build_id()));
    cmd.ok();
    let cache = bootlink::ddlink::format::decode(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(cache.objects.len(), 2);
    assert_eq!(cache.entries(), 1);
}

#[test]
fn truncated_and_foreign_records_are_refused() {
    let dir = common::tmpdir("ddlink-trunc");
    let good = record_of_true(&true_build_id());
    let cut = &good[..good.find("end").unwrap()];
    let (cmd, out) = write_cmd(&dir, cut);
    let err = cmd.fails_with("truncated record");
    assert!(err.contains("record:"), "the error names the file: {err}");
    assert!(!out.exists(), "a refused record left a cache");
    let (cmd, out) = write_cmd(&dir, "\x7fELF not a record");
    cmd.fails_with("not a DDLink record");
    assert!(!out.exists());
}

#[test]
fn a_record_of_other_files_is_stale() {
    let dir = common::tmpdir("ddlink-stale");
    // The recorded build ID is not /bin/true's: a library replaced since.
    let (cmd, out) = write_cmd(&dir, &record_of_true("0123456789abcdef0123456789abcdef01234567"));
    let err = cmd.fails_with("profile again");
    assert!(err.contains("/bin/true") && err.contains("build ID"), "{err}");
    assert!(!out.exists());
    // A symbol index the file does not have.
    let rec = record_of_true(&true_build_id()).replace("bind 0 1 1 1 2", "bind 0 1 1 1 999999");
    let (cmd, out) = write_cmd(&dir, &rec);
    cmd.fails_with("does not have");
    assert!(!out.exists());
    // A library that is gone.
    let rec = record_of_true(&true_build_id()).replace(" /bin/true\n", " /nonexistent/libgone.so\n");
    let (cmd, out) = write_cmd(&dir, &rec);
    cmd.fails_with("/nonexistent/libgone.so: no such file");
    assert!(!out.exists());
}

#[test]
fn corrupt_caches_and_missing_loaders_are_named() {
    let dir = common::tmpdir("ddlink-corrupt");
    let (cmd, out) = write_cmd(&dir, &record_of_true(&true_build_id()));
    cmd.ok();
    let mut bytes = std::fs::read(&out).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    let bad = dir.join("bad.cache");
    std::fs::write(&bad, &bytes).unwrap();
    let err = TestCommand::new(&[&"ddlink", &"status", &"--loader", &"/bin/true", &"--cache", &bad, &"/bin/true"])
        .fails_with("checksum");
    assert!(err.contains("bad.cache"), "{err}");
    let err = TestCommand::new(&[
        &"ddlink",
        &"profile",
        &"--loader",
        &"/nonexistent/ld.so",
        &"-o",
        &dir.join("r"),
        &"/bin/true",
    ])
    .fails_with("no such file");
    assert!(err.contains("/nonexistent/ld.so"), "{err}");
    assert!(!dir.join("r").exists());
}
