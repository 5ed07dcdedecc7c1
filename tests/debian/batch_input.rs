//! Files, batches and outputs (issue 23): only regular files are read (a
//! FIFO or /dev/zero named `x.ko` is refused in one line, never blocks; one
//! symbolic link is followed, a chain or a loop refused), two
//! inputs that would write one output are refused before anything is
//! written, a decompression bomb is refused at the stated limit, and an
//! internal error is one line naming the file being processed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Run bootlink with `args`; kill it and fail if it takes more than 60 s
/// (a read that blocks on a FIFO would hang forever).
fn run_within(args: &[&dyn AsRef<std::ffi::OsStr>], dir: &Path) -> Output {
    let mut c = Command::new(bin());
    c.args(args.iter().map(|a| a.as_ref())).current_dir(dir).env("BOOTLINK_QUIET", "1");
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("bootlink {} still running after 60 s: blocked on a non-regular file?", shown(args));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A command line of bootlink's.
type Args<'a> = Vec<&'a dyn AsRef<std::ffi::OsStr>>;

fn shown(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

fn mkfifo(p: &Path) {
    sh("mkfifo", &[p.to_str().unwrap()]);
}

/// The stderr lines of `o` that are errors, asserting each is one
/// `bootlink: FILE: ...` line and nothing panicked.
fn error_lines(o: &Output) -> Vec<String> {
    let err = stderr(o);
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
    err.lines().filter(|l| l.starts_with("bootlink: ")).map(str::to_string).collect()
}

/// A FIFO, /dev/zero and a symlink loop, each named like a module (and
/// like a kernel, a config, a record, a cache, a trace, a run), given to
/// every subcommand that reads files: each is refused in one line naming
/// it, within the timeout; in a batch the good module is still processed.
#[test]
fn non_regular_files_are_refused_in_one_line_by_every_subcommand() {
    let k = &kernel().vmlinuz;
    let dir = tmpdir("non-regular");
    let fifo = dir.join("fifo.ko");
    mkfifo(&fifo);
    let zero = dir.join("zero.ko");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let (l1, l2) = (dir.join("loop1.ko"), dir.join("loop2.ko"));
    std::os::unix::fs::symlink("loop2.ko", &l1).unwrap();
    std::os::unix::fs::symlink("loop1.ko", &l2).unwrap();
    let bad: [(&Path, &str); 3] = [
        (&fifo, "is a FIFO (named pipe), not a regular file"),
        (&zero, "is a device, not a regular file"),
        (
            &l1,
            "is a symbolic link to loop2.ko, itself a symbolic link (to loop1.ko): bootlink follows one link, not a chain or a loop",
        ),
    ];
    let good = copy_to(&module("fs/fat/fat.ko"), &dir, "fat.ko");
    let tree = dir.join("modules");
    std::fs::create_dir_all(&tree).unwrap();
    copy_to(&good, &tree, "fat.ko");
    let tree_fifo = tree.join("inside.ko");
    mkfifo(&tree_fifo);

    // Batches: the bad file is one line, the good module is still done.
    for (bad, want) in bad {
        let out = dir.join("out");
        let _ = std::fs::remove_dir_all(&out);
        let batches: Vec<(Args, Option<PathBuf>)> = vec![
            (vec![&"inspect", k, &bad, &good], None),
            (
                vec![&"preresolve", &"--kernel", k, &"--assume-nokaslr", &"-o", &out, &bad, &good],
                Some(out.join("fat.ko")),
            ),
            (vec![&"preresolve", &"--kernel", k, &"--assume-nokaslr", &"--dry-run", &bad, &good], None),
            (vec![&"finalize", &"-o", &out, &bad, &good], Some(out.join("fat.ko"))),
            (vec![&"symhash", &"--kernel", k, &"-o", &out, &bad, &good], Some(out.join("fat.ko"))),
        ];
        for (args, written) in batches {
            if let Some(w) = &written {
                let _ = std::fs::remove_file(w);
            }
            let o = run_within(&args, &dir);
            let errors = error_lines(&o);
            assert!(!o.status.success(), "{}", shown(&args));
            assert_eq!(errors, [format!("bootlink: {}: {want}: not read", bad.display())], "{}", shown(&args));
            assert!(stdout(&o).contains("fat"), "the good module is reported: {}", stdout(&o));
            if let Some(w) = written {
                assert!(w.is_file(), "{}: the good module was not written", shown(&args));
                assert!(!out.join(bad.file_name().unwrap()).exists(), "nothing written for the bad file");
            }
        }
    }
    // In a directory, a FIFO named like a module is refused, not skipped unseen.
    let o = run_within(&[&"inspect", k, &tree], &dir);
    assert_eq!(
        error_lines(&o),
        [format!("bootlink: {}: is a FIFO (named pipe), not a regular file: not read", tree_fifo.display())]
    );
    assert!(stdout(&o).contains("fat.ko"), "{}", stdout(&o));

    // Single inputs of every other kind: the kernel, its config, a list of
    // options, a record, a cache, a trace, a run, a vmlinux to fill.
    let x = dir.join("x");
    let singles: Vec<Vec<&dyn AsRef<std::ffi::OsStr>>> = vec![
        vec![&"inspect", &fifo, &good],
        vec![&"inspect", &"--config", &fifo, k, &good],
        vec![&"kernel-info", &fifo],
        vec![&"extract-vmlinux", &fifo, &"-o", &x],
        vec![&"preresolve", &"--kernel", &fifo, &"--dry-run", &good],
        vec![&"symhash", &"--vmlinux", &fifo],
        vec![&"manifest", &"show", &fifo],
        vec![&"manifest", &"write", &"--vmlinux", &fifo, &"-o", &x, &good],
        vec![&"chart", &fifo, &"-o", &x],
        vec![&"plan", &"--options", &fifo, &"--modules", &kernel().modules, &"vfat"],
        vec![&"ddlink", &"write", &"--loader", &"/bin/true", &"--record", &fifo, &"--program", &"/bin/true", &"-o", &x],
        vec![&"ddlink", &"status", &"--loader", &"/bin/true", &"--cache", &fifo, &"/bin/true"],
        vec![&"order", &"write", &"--trace", &fifo, &"--binary", &"/bin/true", &"-o", &x],
        vec![&"order", &"report", &"--trace", &fifo, &"--binary", &"/bin/true"],
    ];
    for args in singles {
        let o = run_within(&args, &dir);
        assert!(!o.status.success(), "{}", shown(&args));
        assert_eq!(
            error_lines(&o),
            [format!("bootlink: {}: is a FIFO (named pipe), not a regular file: not read", fifo.display())],
            "{}",
            shown(&args)
        );
        assert!(!x.exists(), "{} wrote its output", shown(&args));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two inputs that would be written to one output (the same file name from
/// two directories; two trees holding the same relative path; two trees'
/// modules.order) are refused before anything is written, naming both.
#[test]
fn two_inputs_for_one_output_are_refused_before_anything_is_written() {
    let k = &kernel().vmlinuz;
    let dir = tmpdir("one-output");
    let fat = module("fs/fat/fat.ko");
    let (a, b) = (dir.join("a"), dir.join("b"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d.join("fs/fat")).unwrap();
        copy_to(&fat, &d.join("fs/fat"), "fat.ko");
    }
    copy_to(&module("fs/nls/nls_cp437.ko"), &b, "nls_cp437.ko");
    let (fa, fb) = (a.join("fs/fat/fat.ko"), b.join("fs/fat/fat.ko"));
    let out = dir.join("out");
    let refused = |args: Vec<&dyn AsRef<std::ffi::OsStr>>, first: &Path, second: &Path, verb: &str, to: &Path| {
        let o = run_within(&args, &dir);
        assert!(!o.status.success(), "{}", shown(&args));
        let want = format!(
            "bootlink: {}: would be {verb} to {}, as would {}: two inputs, one output (nothing written)",
            second.display(),
            to.display(),
            first.display()
        );
        assert_eq!(error_lines(&o), [want], "{}", shown(&args));
        assert!(
            !out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(),
            "{} wrote into {}",
            shown(&args),
            out.display()
        );
    };
    // Files from two directories, into one directory.
    for cmd in [
        vec![&"preresolve" as &dyn AsRef<std::ffi::OsStr>, &"--kernel", k, &"--assume-nokaslr", &"-o", &out, &fa, &fb],
        vec![&"finalize", &"-o", &out, &fa, &fb],
        vec![&"symhash", &"--kernel", k, &"-o", &out, &fa, &fb],
    ] {
        refused(cmd, &fa, &fb, "written", &out.join("fat.ko"));
    }
    // Two trees that both hold fs/fat/fat.ko.
    refused(vec![&"finalize", &"-o", &out, &a, &b], &fa, &fb, "written", &out.join("fs/fat/fat.ko"));
    // Two trees whose modules.order would be one file (their modules differ).
    std::fs::remove_file(&fb).unwrap();
    for d in [&a, &b] {
        std::fs::write(d.join("modules.order"), "x.ko\n").unwrap();
    }
    let (oa, ob) = (a.join("modules.order"), b.join("modules.order"));
    refused(vec![&"finalize", &"-o", &out, &a, &b], &oa, &ob, "copied", &out.join("modules.order"));
    // One tree named twice, or a tree and a file in it, is one input,
    // written once under the name it was first given (issue 47).
    let o = run_within(&[&"finalize", &"-o", &out, &a, &a, &fa], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("fs/fat/fat.ko").is_file() && !out.join("fat.ko").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An xz stream of `blocks` identical blocks of 16 MiB of zeros (4 GiB for
/// 256), made from one compressed block: a few hundred KiB that would
/// decompress to gigabytes.
fn xz_bomb(blocks: usize) -> Vec<u8> {
    let one = bootlink::compress::compress(&vec![0u8; 16 << 20], bootlink::compress::Compression::Xz).unwrap();
    let crc = |b: &[u8]| {
        let mut c = flate2::Crc::new();
        c.update(b);
        c.sum().to_le_bytes()
    };
    let varint = |mut v: u64, out: &mut Vec<u8>| loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    };
    let read_varint = |b: &[u8], i: &mut usize| {
        let mut v = 0u64;
        for k in 0.. {
            let byte = b[*i];
            *i += 1;
            v |= u64::from(byte & 0x7f) << (7 * k);
            if byte & 0x80 == 0 {
                break;
            }
        }
        v
    };
    // Stream footer: CRC32, backward size, flags, "YZ"; the index before it.
    let n = one.len();
    let backward = u32::from_le_bytes(one[n - 8..n - 4].try_into().unwrap()) as usize;
    let index_start = n - 12 - (backward + 1) * 4;
    let (mut i, index) = (1, &one[index_start..n - 12]);
    assert_eq!(read_varint(index, &mut i), 1, "one block");
    let record_start = i;
    read_varint(index, &mut i);
    read_varint(index, &mut i);
    let record = &index[record_start..i];
    let mut out = one[..12].to_vec();
    for _ in 0..blocks {
        out.extend_from_slice(&one[12..index_start]);
    }
    let mut idx = vec![0u8];
    varint(blocks as u64, &mut idx);
    for _ in 0..blocks {
        idx.extend_from_slice(record);
    }
    while idx.len() % 4 != 0 {
        idx.push(0);
    }
    let c = crc(&idx);
    idx.extend_from_slice(&c);
    out.extend_from_slice(&idx);
    let mut tail = ((idx.len() / 4 - 1) as u32).to_le_bytes().to_vec();
    tail.extend_from_slice(&one[6..8]);
    out.extend_from_slice(&crc(&tail));
    out.extend_from_slice(&tail);
    out.extend_from_slice(b"YZ");
    out
}

/// A module named `.ko.xz` that is 4 GiB of zeros in 600 KiB is refused at
/// the limit in one line, quickly and without the memory; the rest of the
/// batch is read.
#[test]
fn a_decompression_bomb_is_refused_at_the_limit() {
    let dir = tmpdir("bomb");
    let bomb = dir.join("bomb.ko.xz");
    let data = xz_bomb(256);
    println!("xz bomb: {} bytes, 4 GiB of zeros", data.len());
    // The bomb is a well-formed stream: a small one (2 blocks) decompresses.
    let small = xz_bomb(2);
    assert_eq!(bootlink::compress::decompress(&small, bootlink::compress::Compression::Xz, 0).unwrap().len(), 32 << 20);
    std::fs::write(&bomb, &data).unwrap();
    let good = copy_to(&module("fs/fat/fat.ko"), &dir, "fat.ko");
    let t0 = Instant::now();
    let o = run_within(&[&"inspect", &kernel().vmlinuz, &bomb, &good], &dir);
    let took = t0.elapsed();
    assert!(!o.status.success());
    assert_eq!(
        error_lines(&o),
        [format!(
            "bootlink: {}: xz data decompresses to more than 64 MiB (the most bootlink unpacks of this input, 64 times its size): refused as a decompression bomb",
            bomb.display()
        )]
    );
    assert!(stdout(&o).contains("fat.ko"));
    println!("refused in {:.1} s", took.as_secs_f64());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Run by [`an_internal_error_is_one_line_naming_the_file`] in a child
/// process (the hook exits the process): BOOTLINK_PANIC_CASE says which case.
#[test]
#[ignore = "a child process of an_internal_error_is_one_line_naming_the_file"]
fn internal_error_child() {
    let Ok(case) = std::env::var("BOOTLINK_PANIC_CASE") else { return };
    bootlink::panic::install();
    let empty: Vec<u8> = Vec::new();
    let index = std::hint::black_box(3usize);
    match case.as_str() {
        "uncaught" => {
            let _current = bootlink::panic::processing(Path::new("/m/x.ko"));
            println!("{}", empty[index]);
        }
        _ => {
            // A batch: the first file's job panics, the second's runs.
            let r: bootlink::Result<u8> = bootlink::tree::isolated(Path::new("/m/bad.ko"), || Ok(empty[index]));
            eprintln!("bootlink: {}", r.unwrap_err());
            let r = bootlink::tree::isolated(Path::new("/m/good.ko"), || Ok(7));
            println!("next file: {}", r.unwrap());
        }
    }
}

/// An internal error (here a real out-of-bounds index) prints one line
/// naming the file being processed and asking for a report, exits 70 (not
/// 1, which bad input gets), and shows the backtrace only with
/// RUST_BACKTRACE; caught in a batch, it is that file's one line and the
/// next file is processed.
#[test]
fn an_internal_error_is_one_line_naming_the_file() {
    let me = std::env::current_exe().unwrap();
    let child = |case: &str, backtrace: bool| {
        let mut c = Command::new(&me);
        c.args([
            "--ignored",
            "--exact",
            &common::test_name(module_path!(), "internal_error_child"),
            "--nocapture",
            "--test-threads=1",
        ]);
        c.env("BOOTLINK_PANIC_CASE", case).env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        if backtrace {
            c.env("RUST_BACKTRACE", "1");
        }
        c.output().unwrap()
    };
    let line = "index out of bounds: the len is 0 but the index is 3 (at tests/debian/batch_input.rs:";
    let o = child("uncaught", false);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(i32::from(bootlink::panic::EXIT_INTERNAL)), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("bootlink: internal error: {line}")), "{err}");
    assert!(err.trim_end().ends_with(") (while processing /m/x.ko) — please report this"), "{err}");
    let o = child("uncaught", true);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(i32::from(bootlink::panic::EXIT_INTERNAL)), "{err}");
    assert!(err.lines().count() > 3 && err.contains("internal_error_child"), "a backtrace: {err}");

    let o = child("caught", false);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("bootlink: /m/bad.ko: internal error: {line}")), "{err}");
    assert!(err.trim_end().ends_with(") — please report this"), "{err}");
    assert!(stdout(&o).contains("next file: 7"), "{}", stdout(&o));
}

/// `manifest write` reads each file as a module of the kernel's machine
/// and vermagic before hashing it: an empty file, 4 bytes of ELF magic,
/// random bytes named `.ko.xz`, an empty xz stream, a decompression bomb, a
/// module of another kernel (vermagic) and one of another machine are each
/// refused with their own error and not listed; the good modules are.
/// (The binary's side, on a kernel with a manifest section, is
/// tests/boots/manifest_inputs.rs.)
#[test]
fn manifest_lists_only_modules_of_the_kernel() {
    use bootlink::manifest;
    let dir = tmpdir("manifest-inputs");
    let k = bootlink::kernel::KernelImage::open(&kernel().vmlinuz, None).unwrap();
    let good = [
        copy_to(&module("fs/fat/fat.ko"), &dir, "fat.ko"),
        copy_to(&module("fs/nls/nls_cp437.ko"), &dir, "nls_cp437.ko"),
    ];
    let mut rng = bootlink::rng::Rng(23);
    let random: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
    let fat = std::fs::read(&good[0]).unwrap();
    let mut other_kernel = fat.clone();
    let at = other_kernel.windows(9).position(|w| w == b"vermagic=").unwrap() + 9;
    other_kernel[at] = b'5'; // 6.1.0-56-amd64 -> 5.1.0-56-amd64
    let mut other_machine = fat.clone();
    other_machine[18..20].copy_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    let empty_xz = bootlink::compress::compress(b"", bootlink::compress::Compression::Xz).unwrap();
    let bad: [(&str, &[u8], &str); 7] = [
        ("empty.ko", b"", "not an ELF file (the file is empty)"),
        ("magic.ko", b"\x7fELF", "truncated ELF file"),
        ("random.ko.xz", &random, "not an ELF file"),
        ("empty.ko.xz", &empty_xz, "corrupt xz data: it decompresses to nothing"),
        ("bomb.ko.xz", &xz_bomb(256), "refused as a decompression bomb"),
        ("other_kernel.ko", &other_kernel, "built for another kernel: vermagic \"5.1.0-56-amd64"),
        ("other_machine.ko", &other_machine, "aarch64"),
    ];
    for (name, data, _) in &bad {
        std::fs::write(dir.join(name), data).unwrap();
    }
    let (m, listed, errors) = manifest::of_modules_for(&k, manifest::Hash::Sha256, &[dir.to_path_buf()]).unwrap();
    let listed: Vec<&Path> = listed.iter().map(|l| l.path.as_path()).collect();
    assert_eq!(listed, [good[0].as_path(), good[1].as_path()]);
    assert_eq!(m.digests.len(), 2);
    assert_eq!(errors.len(), bad.len(), "{errors:?}");
    for (name, _, want) in bad {
        let e = errors.iter().find(|e| e.path == dir.join(name)).unwrap_or_else(|| panic!("{name} not refused"));
        assert!(e.error.contains(want) && !e.error.contains('\n'), "{name}: {}", e.error);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Symbolic links are followed once (issue 23): one link to a module, a
/// kernel, a config or a tree is read, in a tree too (a link to a module
/// of the same tree is that module, read once); a link to a link is
/// refused in one line naming what each points to, and the rest of the
/// batch is done. A module tree with lib/modules' one level of links
/// (`build` to the headers, whose files link into a common directory) reads
/// as before: linked directories are not walked, files read through them.
#[test]
fn symbolic_links_are_followed_once() {
    use std::os::unix::fs::symlink;
    let k = &kernel().vmlinuz;
    let dir = tmpdir("symlinks-once");
    // lib/modules/R: a module, one link to it, a chain, build -> headers.
    let tree = dir.join("lib/modules/R");
    std::fs::create_dir_all(tree.join("kernel/fs/fat")).unwrap();
    copy_to(&module("fs/fat/fat.ko"), &tree.join("kernel/fs/fat"), "fat.ko");
    symlink("kernel/fs/fat/fat.ko", tree.join("one.ko")).unwrap();
    symlink("one.ko", tree.join("chain.ko")).unwrap();
    let headers = dir.join("usr/src/headers-amd64");
    let common_dir = dir.join("usr/src/headers-common");
    std::fs::create_dir_all(&headers).unwrap();
    std::fs::create_dir_all(&common_dir).unwrap();
    std::fs::write(common_dir.join("config"), "CONFIG_MODULES=y\nCONFIG_RANDOMIZE_BASE=n\n").unwrap();
    symlink("../headers-common/config", headers.join(".config")).unwrap();
    copy_to(&module("fs/fat/fat.ko"), &headers, "in_headers.ko");
    symlink(&headers, tree.join("build")).unwrap();
    // The kernel by one link and by a chain of two.
    let kernel_link = dir.join("vmlinuz");
    symlink(k, &kernel_link).unwrap();
    let kernel_chain = dir.join("vmlinuz.old");
    symlink("vmlinuz", &kernel_chain).unwrap();
    let tree_link = dir.join("modules");
    symlink(&tree, &tree_link).unwrap();
    let tree_chain = dir.join("modules.old");
    symlink("modules", &tree_chain).unwrap();

    let chain_line = |p: &Path, to: &str, then: &str| {
        format!(
            "bootlink: {}: is a symbolic link to {to}, itself a symbolic link (to {then}): bootlink follows one link, not a chain or a loop: not read",
            p.display()
        )
    };
    // The tree (given by one link): fat.ko read, once (one.ko is the same
    // file: one input, issue 47), chain.ko one line, nothing under build/.
    let o = run_within(&[&"inspect", &kernel_link, &tree_link], &dir);
    assert!(!o.status.success());
    assert_eq!(error_lines(&o), [chain_line(&tree_link.join("chain.ko"), "one.ko", "kernel/fs/fat/fat.ko")]);
    let out = stdout(&o);
    let rows = |name: &str| out.lines().filter(|l| l.starts_with(&format!("{name} "))).count();
    assert_eq!((rows("fat.ko"), rows("one.ko")), (1, 0), "{out}");
    assert!(!out.contains("in_headers"), "a linked directory was walked: {out}");
    // The same in a batch that writes: the good ones are written.
    let outdir = dir.join("out");
    let o = run_within(&[&"preresolve", &"--kernel", &kernel_link, &"--assume-nokaslr", &"-o", &outdir, &tree], &dir);
    assert_eq!(error_lines(&o), [chain_line(&tree.join("chain.ko"), "one.ko", "kernel/fs/fat/fat.ko")]);
    assert!(outdir.join("kernel/fs/fat/fat.ko").is_file() && !outdir.join("one.ko").exists());
    assert!(!outdir.join("chain.ko").exists());
    // Files read through the one level of links a kernel tree has.
    let o = run_within(&[&"kernel-info", &"--config", &tree.join("build/.config"), &kernel_link], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_within(&[&"inspect", &kernel_link, &tree.join("build/in_headers.ko")], &dir);
    assert!(o.status.success(), "{}", stderr(&o));
    // Chains given directly: the kernel, a tree.
    let o = run_within(&[&"kernel-info", &kernel_chain], &dir);
    assert!(!o.status.success());
    assert_eq!(error_lines(&o), [chain_line(&kernel_chain, "vmlinuz", &k.display().to_string())]);
    let o = run_within(&[&"inspect", &kernel_link, &tree_chain], &dir);
    assert!(!o.status.success());
    assert_eq!(error_lines(&o), [chain_line(&tree_chain, "modules", &tree.display().to_string())]);
    let _ = std::fs::remove_dir_all(&dir);
}
