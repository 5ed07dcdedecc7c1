//! The bzImage of a kernel whose manifest was filled.
//!
//! A bzImage's payload is the stripped vmlinux (plus its relocations on a
//! relocatable kernel), compressed; the decompressor around it is linked
//! with the payload's sizes (`z_input_len`, `z_output_len`, the end of its
//! own image) and the setup header is assembled from the link's offsets
//! (`zoffset.h`). Filling `__modhashes` changes the payload's bytes, so its
//! compressed size, so everything after it: the chain from
//! `compressed/vmlinux.bin` to `bzImage` has to run again.
//!
//! Why replay kbuild's own commands rather than re-implement the chain or
//! patch the old bzImage: kbuild records the exact command of every target
//! in `.<target>.cmd` beside it, with the flags, linker script, compressor
//! options and size trailer of this very build; running those commands on
//! the filled vmlinux is the build itself, minus make. A patched bzImage
//! would need a compressed payload of exactly the old size (it is not),
//! and a re-implementation would drift from the kernel's Makefiles. The
//! proof that the replay is faithful: from the build's own vmlinux it
//! reproduces the build's bzImage byte for byte (tests/boots/manifest_bzimage.rs).
//!
//! The object tree is never written: the chain runs in a scratch directory
//! holding copies of `arch/x86/boot`'s small inputs (objects, linker
//! scripts, `mkpiggy`, `tools/build`, `voffset.h`), links to the tree's
//! generated headers (read only) and the filled vmlinux; every step's
//! target is removed before the step runs, so no output can go through a
//! link. The result is checked (its payload decompresses to the filled,
//! stripped vmlinux) and written atomically.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::elf::{Elf, Want};
use crate::error::{Error, Kind, Result};
use crate::{fsutil, hosttool};

const BOOT: &str = "arch/x86/boot";

/// kbuild's chain from vmlinux to bzImage, in order. A relocatable
/// kernel's `compressed/vmlinux.relocs` is not remade: filling the manifest
/// moves no relocation, so the tree's own is the filled vmlinux's too (6.1
/// makes it with arch/x86/tools/relocs, which the scratch directory does
/// not hold; since 6.10 the vmlinux postlink step writes it, with no
/// command file, and strips the relocations from vmlinux).
const CHAIN: &[&str] = &[
    "arch/x86/boot/compressed/vmlinux.bin",
    // the compressed payload: its name is read from piggy.S's command
    "",
    "arch/x86/boot/compressed/piggy.S",
    "arch/x86/boot/compressed/piggy.o",
    "arch/x86/boot/compressed/vmlinux",
    "arch/x86/boot/zoffset.h",
    "arch/x86/boot/header.o",
    "arch/x86/boot/setup.elf",
    "arch/x86/boot/setup.bin",
    "arch/x86/boot/vmlinux.bin",
    "arch/x86/boot/bzImage",
];

/// What make exports to the compressor wrappers (scripts/xz_wrap.sh reads
/// `$SRCARCH` and `$XZ`), with kbuild's defaults.
const MAKE_ENV: &[(&str, &str)] = &[
    ("ARCH", "x86"),
    ("SRCARCH", "x86"),
    ("KGZIP", "gzip"),
    ("KBZIP2", "bzip2"),
    ("KLZOP", "lzop"),
    ("LZMA", "lzma"),
    ("LZ4", "lz4"),
    ("XZ", "xz"),
    ("ZSTD", "zstd"),
];

#[derive(Debug, Clone, Serialize)]
pub struct Rebuilt {
    pub bzimage: PathBuf,
    /// The object tree whose commands and objects were used.
    pub tree: PathBuf,
    /// The targets made, in order.
    pub steps: Vec<String>,
    /// The compressed payload's size (bytes), before and after.
    pub payload_before: u64,
    pub payload_after: u64,
    pub bytes: u64,
}

/// The command kbuild recorded for `target` (relative to the tree), as the
/// shell runs it: the `cmd_<target> := ` line (6.1), `savedcmd_<target> := `
/// since 6.3 (kbuild renamed it so it cannot clash with a `cmd_*` macro).
fn recorded_command(tree: &Path, target: &str) -> Result<String> {
    let (dir, name) = target.rsplit_once('/').unwrap_or(("", target));
    let file = tree.join(dir).join(format!(".{name}.cmd"));
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
    let prefixes = [format!("cmd_{target} := "), format!("savedcmd_{target} := ")];
    let line =
        text.lines().find_map(|l| prefixes.iter().find_map(|p| l.strip_prefix(p.as_str()))).ok_or_else(|| {
            Error::file(
                Kind::Format,
                &file,
                format!("no `cmd_{target} :=` or `savedcmd_{target} :=` line: not a kbuild command file"),
            )
        })?;
    unescape_make(line).map_err(|e| e.at(&file))
}

/// The files the recorded payload command compresses, in order: the words
/// between `cat` and the first `|` (kbuild's `cat $(real-prereqs) | ...`):
/// `vmlinux.bin`, and on a relocatable kernel `vmlinux.relocs` after it.
fn payload_inputs(cmd: &str) -> Option<Vec<String>> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let start = words.iter().position(|&w| w == "cat")? + 1;
    let end = start + words[start..].iter().position(|&w| w == "|")?;
    let inputs: Vec<String> = words[start..end].iter().map(|w| w.to_string()).collect();
    (!inputs.is_empty() && inputs.iter().all(|w| w.starts_with("arch/x86/boot/compressed/"))).then_some(inputs)
}

/// A recorded command bootlink does not replay (make would expand it).
/// The words of a recorded command that name a file of the tree outside
/// arch/x86/boot (whose files the scratch directory copies) and include/:
/// relative paths ending in `.a` or `.o`, none of them a chain's target.
fn extra_inputs(cmd: &str, targets: &[String]) -> Vec<String> {
    cmd.split_whitespace()
        .filter(|w| w.ends_with(".a") || w.ends_with(".o"))
        .filter(|w| !w.starts_with(['-', '/', '.']) && !w.contains(".."))
        .filter(|w| !w.starts_with("arch/x86/boot/") && !w.starts_with("include/"))
        .filter(|w| !targets.iter().any(|t| t == w))
        .map(str::to_string)
        .collect()
}

fn not_replayable(msg: impl Into<String>) -> Error {
    Error::new(Kind::Unsupported, msg)
}

/// A recorded command is a make right-hand side: `$$` is `$` and
/// `$(pound)` is `#`; anything else make would expand is refused.
/// kbuild's ccache prefix is dropped (nothing goes into a compiler cache).
pub(crate) fn unescape_make(line: &str) -> std::result::Result<String, Error> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("$$") {
            out.push('$');
            rest = t;
        } else if let Some(t) = tail.strip_prefix("$(pound)") {
            out.push('#');
            rest = t;
        } else {
            let what: String = tail.chars().take(20).collect();
            return Err(not_replayable(format!("make would expand {what:?} in this command: not replayed")));
        }
    }
    out.push_str(rest);
    let cmd = out.trim();
    Ok(cmd.strip_prefix("ccache ").unwrap_or(cmd).to_string())
}

/// The file `piggy.S` is made from: the compressed payload.
fn payload_target(tree: &Path) -> Result<String> {
    let cmd = recorded_command(tree, "arch/x86/boot/compressed/piggy.S")?;
    let words: Vec<&str> = cmd.split_whitespace().collect();
    match words.as_slice() {
        [_mkpiggy, input, ">", _out] if input.starts_with("arch/x86/boot/compressed/vmlinux.bin.") => {
            Ok(input.to_string())
        }
        _ => Err(Error::file(
            Kind::Unsupported,
            &tree.join(BOOT).join("compressed/.piggy.S.cmd"),
            format!("piggy.S is made by {cmd:?}, not `mkpiggy PAYLOAD > piggy.S`"),
        )),
    }
}

/// `a` and `b` are the same vmlinux but for `__modhashes`.
fn same_but_manifest(a: &[u8], b: &[u8], a_path: &Path, b_path: &Path) -> Result<()> {
    let range = |data: &[u8], path: &Path| -> Result<(usize, usize)> {
        let elf = Elf::parse(data, Want::Executable).map_err(|e| e.at(path))?;
        elf.reserved_range(super::SECTION)
            .map_err(|e| e.at(path))?
            .ok_or_else(|| Error::file(Kind::WrongKernel, path, format!("no {} section", super::SECTION)))
    };
    let (ra, rb) = (range(a, a_path)?, range(b, b_path)?);
    let (off, size) = ra;
    if ra != rb || a.len() != b.len() || a[..off] != b[..off] || a[off + size..] != b[off + size..] {
        return Err(Error::file(
            Kind::WrongKernel,
            b_path,
            format!(
                "is not {} with another manifest: the object tree holds another build (make it again with `bootlink kernel build --tree`)",
                a_path.display()
            ),
        ));
    }
    Ok(())
}

fn copy_files(from: &Path, to: &Path, skip: &[PathBuf]) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for e in std::fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let e = e.map_err(|e| Error::io(from, e))?;
        let p = e.path();
        let name = e.file_name();
        let ft = e.file_type().map_err(|e| Error::io(&p, e))?;
        if ft.is_dir() {
            copy_files(&p, &to.join(&name), skip)?;
        } else if ft.is_file() && !name.to_string_lossy().starts_with('.') && !skip.contains(&p) {
            std::fs::copy(&p, to.join(&name)).map_err(|e| Error::io(&p, e))?;
        }
    }
    Ok(())
}

/// Can the bzImage of `vmlinux` be made from `tree`: did the tree build
/// an x86 bzImage, and is `vmlinux` the tree's own but for its manifest?
pub fn check(tree: &Path, vmlinux: &Path) -> Result<()> {
    if !tree.join(BOOT).join(".bzImage.cmd").is_file() {
        return Err(Error::file(
            Kind::Usage,
            tree,
            "not a kernel object tree that built an x86 bzImage (no arch/x86/boot/.bzImage.cmd)",
        ));
    }
    let theirs = fsutil::map_file(&tree.join("vmlinux"))?;
    let ours = fsutil::map_file(vmlinux)?;
    same_but_manifest(&theirs, &ours, &tree.join("vmlinux"), vmlinux)
}

/// Make `out`, the bzImage of `vmlinux` (the object tree's own vmlinux with
/// any manifest), by replaying the object tree's recorded chain.
pub fn rebuild(tree: &Path, vmlinux: &Path, out: &Path) -> Result<Rebuilt> {
    let (rebuilt, built) = rebuild_bytes(tree, vmlinux, out)?;
    fsutil::write_atomic(out, &built)?;
    Ok(rebuilt)
}

/// [`rebuild`]'s bzImage as bytes, for the caller to write (`out` is only
/// named in the report and errors).
pub(crate) fn rebuild_bytes(tree: &Path, vmlinux: &Path, out: &Path) -> Result<(Rebuilt, Vec<u8>)> {
    // The scratch directory links to the tree's files: by absolute paths,
    // or a tree given as "." (kbuild's DEPMOD hook runs in it) would link
    // to itself.
    let tree = &std::fs::canonicalize(tree).map_err(|e| Error::io(tree, e))?;
    check(tree, vmlinux)?;
    let payload = payload_target(tree)?;
    let targets: Vec<String> =
        CHAIN.iter().map(|t| if t.is_empty() { payload.clone() } else { t.to_string() }).collect();

    let scratch = tempfile::Builder::new()
        .prefix("bootlink-bzimage-")
        .tempdir()
        .map_err(|e| Error::io(&std::env::temp_dir(), e))?;
    let s = scratch.path();
    let outputs: Vec<PathBuf> = targets.iter().map(|t| tree.join(t)).collect();
    copy_files(&tree.join(BOOT), &s.join(BOOT), &outputs)?;
    let link = |to: &Path, at: &Path| -> Result<()> {
        std::fs::create_dir_all(at.parent().expect("a parent")).map_err(|e| Error::io(at, e))?;
        std::os::unix::fs::symlink(to, at).map_err(|e| Error::io(at, e))
    };
    link(&tree.join("include"), &s.join("include"))?;
    link(&tree.join("arch/x86/include"), &s.join("arch/x86/include"))?;
    let abs = std::path::absolute(vmlinux).map_err(|e| Error::io(vmlinux, e))?;
    link(&abs, &s.join("vmlinux"))?;

    for t in &targets {
        let cmd = recorded_command(tree, t)?;
        // Inputs from outside arch/x86/boot (the EFI stub's
        // drivers/firmware/efi/libstub/lib.a, linked into the decompressor
        // with CONFIG_EFI_STUB, as distributions build): the tree's own
        // directory holding each, linked read-only (lib.a is a thin
        // archive: its members are named by their paths in the tree). No
        // step writes there.
        for word in extra_inputs(&cmd, &targets) {
            let Some(dir) = Path::new(&word).parent() else { continue };
            let (from, at) = (tree.join(dir), s.join(dir));
            if tree.join(&word).is_file() && !at.exists() {
                link(&from, &at)?;
            }
        }
        let target = s.join(t);
        match std::fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&target, e)),
        }
        let mut c = Command::new("sh");
        c.arg("-c").arg(&cmd).current_dir(s).envs(MAKE_ENV.iter().copied());
        hosttool::run(&mut c, &format!("making {t} (kbuild's recorded command)"), "binutils, gcc, xz-utils")?;
        if !target.is_file() {
            return Err(Error::file(Kind::Internal, &target, format!("internal error: {cmd:?} made no {t}")));
        }
    }

    // The payload is what kbuild compresses (the filled vmlinux, stripped,
    // and the tree's relocations when it has them), and the size trailer kbuild wrote into the recorded
    // command says how long that is.
    let payload_cmd = recorded_command(tree, &payload)?;
    let inputs = payload_inputs(&payload_cmd).ok_or_else(|| {
        Error::file(
            Kind::Unsupported,
            &tree.join(&payload),
            format!("the payload is made by {payload_cmd:?}, not `cat FILES | COMPRESSOR`: not replayed"),
        )
    })?;
    let input = inputs.join(" + ");
    let mut bin = Vec::new();
    for f in &inputs {
        bin.extend(std::fs::read(s.join(f)).map_err(|e| Error::io(&s.join(f), e))?);
    }
    let packed = std::fs::read(s.join(&payload)).map_err(|e| Error::io(&s.join(&payload), e))?;
    let trailer = crate::elf::read_u32(&packed, packed.len().saturating_sub(4)).unwrap_or(0) as usize;
    if trailer != bin.len() {
        return Err(Error::file(
            Kind::Unsupported,
            &tree.join(&payload),
            format!("the recorded size trailer says {trailer} bytes, the payload is {}: not replayed", bin.len()),
        ));
    }
    let built = std::fs::read(s.join("arch/x86/boot/bzImage")).map_err(|e| Error::io(&s.join(BOOT), e))?;
    let inside = crate::kernel::find_vmlinux(built.clone().into()).map_err(|e| {
        Error::file(Kind::Internal, out, format!("internal error: the new bzImage: {}", e.msg)).because(e)
    })?;
    if !bin.starts_with(&inside.data) {
        return Err(Error::file(
            Kind::Internal,
            out,
            format!("internal error: the new bzImage's payload is not {input}"),
        ));
    }
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let rebuilt = Rebuilt {
        bzimage: out.to_path_buf(),
        tree: tree.to_path_buf(),
        steps: targets.clone(),
        payload_before: size(&tree.join(&payload)),
        payload_after: size(&s.join(&payload)),
        bytes: built.len() as u64,
    };
    Ok((rebuilt, built))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_commands_unescape_as_make_would() {
        assert_eq!(
            unescape_make("nm vmlinux | sed -n -e 's/^\\([0-9]*\\)$$/$(pound)define/p' ").unwrap(),
            "nm vmlinux | sed -n -e 's/^\\([0-9]*\\)$/#define/p'"
        );
        assert_eq!(unescape_make("ccache gcc -c x.S").unwrap(), "gcc -c x.S");
        assert!(unescape_make("gcc $(CFLAGS) x.c").unwrap_err().msg.contains("$(CFLAGS)"));
    }

    #[test]
    fn commands_are_read_from_6_1_and_6_12_command_files() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("arch/x86/boot/compressed");
        std::fs::create_dir_all(&dir).unwrap();
        let target = "arch/x86/boot/compressed/vmlinux.bin";
        // 6.1: cmd_; 6.12 (kbuild since 6.3): savedcmd_, with the deps after it.
        for (prefix, tail) in [("cmd_", ""), ("savedcmd_", "\nsource_arch/x86/boot/compressed/vmlinux.bin := x\n")] {
            std::fs::write(
                dir.join(".vmlinux.bin.cmd"),
                format!("{prefix}{target} := objcopy  -R .comment -S vmlinux {target}\n{tail}"),
            )
            .unwrap();
            assert_eq!(
                recorded_command(t.path(), target).unwrap(),
                format!("objcopy  -R .comment -S vmlinux {target}"),
                "{prefix}"
            );
        }
        std::fs::write(dir.join(".vmlinux.bin.cmd"), "deps_x := y\n").unwrap();
        let e = recorded_command(t.path(), target).unwrap_err().to_string();
        assert!(e.contains("not a kbuild command file"), "{e}");
    }

    #[test]
    fn the_payload_inputs_are_what_its_command_cats() {
        let c = "arch/x86/boot/compressed";
        // 6.1 and 6.12, not relocatable (the lab's builds), as recorded.
        let xz61 = format!(
            "{{ cat {c}/vmlinux.bin | sh scripts/xz_wrap.sh; printf \\060\\073\\152\\001; }} > {c}/vmlinux.bin.xz"
        );
        assert_eq!(payload_inputs(&xz61).unwrap(), [format!("{c}/vmlinux.bin")]);
        let xz612 = format!(
            "{{ cat {c}/vmlinux.bin | sh /work/k612/scripts/xz_wrap.sh; printf \\320\\354\\172\\001; }} > {c}/vmlinux.bin.xz"
        );
        assert_eq!(payload_inputs(&xz612).unwrap(), [format!("{c}/vmlinux.bin")]);
        // Relocatable (both lines): the relocations follow vmlinux.bin.
        let rel = format!(
            "{{ cat {c}/vmlinux.bin {c}/vmlinux.relocs | sh scripts/xz_wrap.sh; printf x; }} > {c}/vmlinux.bin.xz"
        );
        assert_eq!(payload_inputs(&rel).unwrap(), [format!("{c}/vmlinux.bin"), format!("{c}/vmlinux.relocs")]);
        let gz = format!("cat {c}/vmlinux.bin {c}/vmlinux.relocs | gzip -n -f -9 > {c}/vmlinux.bin.gz");
        assert_eq!(payload_inputs(&gz).unwrap().len(), 2);
        assert!(payload_inputs("xz -c vmlinux.bin > x").is_none());
        assert!(payload_inputs("cat /etc/passwd | xz > x").is_none());
    }

    #[test]
    fn the_efi_stub_library_is_an_input_from_outside_the_boot_directory() {
        let t = ["arch/x86/boot/compressed/vmlinux".to_string()];
        let cmd = "ld -m elf_x86_64 -pie --no-dynamic-linker -T arch/x86/boot/compressed/vmlinux.lds \
                   arch/x86/boot/compressed/head_64.o arch/x86/boot/compressed/piggy.o \
                   drivers/firmware/efi/libstub/lib.a -o arch/x86/boot/compressed/vmlinux";
        assert_eq!(extra_inputs(cmd, &t), ["drivers/firmware/efi/libstub/lib.a"]);
        assert!(extra_inputs("cat /etc/x.o ../y.a -lfoo.a include/z.o", &t).is_empty());
    }

    #[test]
    fn a_tree_without_a_bzimage_build_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let e = rebuild(t.path(), &t.path().join("vmlinux"), &t.path().join("bzImage")).unwrap_err();
        assert_eq!(e.kind, Kind::Usage);
        assert!(e.to_string().contains("no arch/x86/boot/.bzImage.cmd"), "{e}");
    }
}
