//! Time and memory linear in the input (issue 47) for an ELF vmlinux, one
//! module of growing size, DDLink records and caches, LAVA jobs
//! directories and bootlink's own cache entries. Each input is made here
//! in its real format (vmlinux, module and library linked by the system's
//! assembler and linker from generated assembly), at a size and at 8
//! times it, and every command that reads that kind of input is run on
//! both: `common::linear_in_the_input` fails a command that takes 16 times
//! the CPU time or the peak memory of the smaller (work quadratic in the
//! input takes 64 times).

use crate::common;
use crate::damaged::images;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_owned()).collect()
}

/// `measured` of a command given as owned arguments.
fn measured_args(args: &[OsString], env: &[(&str, &Path)]) -> (f64, i64) {
    let a: Vec<&dyn AsRef<std::ffi::OsStr>> = args.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>).collect();
    common::measured_env(&a, env)
}

/// What gcc puts in every object it compiles: the stack is not executable
/// (ld warns of an object without it, and marks what it links).
const NO_EXEC_STACK: &str = ".section .note.GNU-stack,\"\",@progbits\n";

/// The name of generated export `i` (sorted as `i`, after every fixture
/// export's name).
fn export_name(i: usize) -> String {
    format!("zscale_{i:07}")
}

/// The CRC the generated vmlinux gives export `i` (a module importing it
/// states the same in its `__versions`).
fn export_crc(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ 0x5a5a_0000
}

/// The size of `.gnu.linkonce.this_module` in a module: the size of
/// `struct module` of the kernel it was built for.
fn this_module_size(module: &Path) -> u64 {
    use object::LittleEndian as LE;
    use object::read::elf::{FileHeader, SectionHeader};
    let data = std::fs::read(module).unwrap();
    let header = object::elf::FileHeader64::<LE>::parse(&*data).unwrap();
    let sections = header.sections(LE, &*data).unwrap();
    let (_, this) = sections.section_by_name(LE, b".gnu.linkonce.this_module").expect("a module");
    this.sh_size(LE)
}

fn tool(cmd: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) {
    let o = std::process::Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("run {cmd}: {e}"));
    assert!(o.status.success(), "{cmd} {:?}: {}", os(args), String::from_utf8_lossy(&o.stderr));
}

/// An x86-64 ELF vmlinux as tests/fixtures/make.py links the fixture's:
/// the fixture's exports (tests/fixtures/vmlinux.S) and `n` more, half of
/// them GPL-only, each a function with its `__ksymtab` or `__ksymtab_gpl`
/// entry (6.1's PREL32 entries), CRC and name; and a `.BTF` of `n / 4`
/// struct types besides `struct module` of the size a fixture module's
/// `.gnu.linkonce.this_module` has (compiled by gcc -gbtf); then the two
/// sections the kernel series reserves (`__ksymhash` room for the tables
/// of every export, `__modhashes`), as the damaged-table tests add them.
fn vmlinux_of(dir: &Path, n: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut s = String::from(NO_EXEC_STACK);
    s += ".text\n";
    for i in 0..n {
        let e = export_name(i);
        writeln!(s, ".globl {e}\n.type {e},@function\n{e}:\n  ret\n  .skip 15, 0xcc").unwrap();
    }
    s += ".section __ksymtab_strings,\"a\"\n";
    for i in 0..n {
        let e = export_name(i);
        writeln!(s, "__kstrtab_{e}:\n  .asciz \"{e}\"\n__kstrtabns_{e}:\n  .asciz \"\"").unwrap();
    }
    for gpl in [false, true] {
        let sfx = if gpl { "_gpl" } else { "" };
        writeln!(s, ".section __ksymtab{sfx},\"a\"\n  .balign 4").unwrap();
        for i in (0..n).filter(|i| (i % 2 == 1) == gpl) {
            let e = export_name(i);
            writeln!(s, "  .long {e} - .\n  .long __kstrtab_{e} - .\n  .long __kstrtabns_{e} - .").unwrap();
        }
        writeln!(s, ".section __kcrctab{sfx},\"a\"\n  .balign 4").unwrap();
        for i in (0..n).filter(|i| (i % 2 == 1) == gpl) {
            writeln!(s, "  .long {:#010x}", export_crc(i)).unwrap();
        }
    }
    let exports = dir.join("exports.S");
    std::fs::write(&exports, s).unwrap();
    let this_module = this_module_size(&fixtures().join("modules/bl_plain.ko"));
    let mut c = format!("struct module {{ char bl_bytes[{this_module}]; }};\nstruct module bl_this_module;\n");
    for k in 0..n / 4 {
        writeln!(c, "struct zscale_type{k} {{ int a; long b{k}; }};\nstruct zscale_type{k} zscale_var{k};").unwrap();
    }
    let btf = dir.join("btf.c");
    std::fs::write(&btf, c).unwrap();
    let o = |name: &str| dir.join(name);
    tool("gcc", &[&"-c", &"-o", &o("fixture.o"), &fixtures().join("vmlinux.S")]);
    tool("gcc", &[&"-c", &"-o", &o("exports.o"), &exports]);
    tool("gcc", &[&"-c", &"-gbtf", &"-o", &o("btf.o"), &btf]);
    let linked = dir.join("vmlinux-linked");
    tool(
        "ld",
        &[
            &"-static",
            &"-z",
            &"max-page-size=4096",
            &"--build-id=none",
            &"-T",
            &fixtures().join("vmlinux.lds"),
            &"-o",
            &linked,
            &o("fixture.o"),
            &o("exports.o"),
            &o("btf.o"),
        ],
    );
    // The tables take about 20 bytes an export; room for 32.
    let data = images::with_reserved_sections(&linked, dir, (32 * n).max(64 << 10));
    let out = dir.join("vmlinux");
    std::fs::write(&out, data).unwrap();
    for f in ["fixture.o", "exports.o", "btf.o", "vmlinux-linked", "exports.S", "btf.c"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    out
}

/// [`vmlinux_of`] `n`, made once for the tests of this binary that read
/// it (the vmlinux and cache tests), in a directory kept until it exits.
fn shared_vmlinux(n: usize) -> PathBuf {
    static MADE: std::sync::Mutex<Vec<(usize, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = made.iter().find(|(k, _)| *k == n) {
        return p.clone();
    }
    let p = vmlinux_of(&common::tmpdir(&format!("vmlinux-{n}")).keep(), n);
    made.push((n, p.clone()));
    p
}

/// Run every command of `commands` (tests/damaged/images.rs: every command
/// that takes a kernel image) on `image`, a fresh copy for the one that
/// writes it in place, as many times as `runs` says: each one's cost.
fn each_kernel_command(
    image: &Path,
    commands: &[images::ImageCommand],
    out: &Path,
    runs: &mut common::ScaleRuns,
) -> Vec<(f64, i64)> {
    let copy = out.join("copy-vmlinux");
    commands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let o = out.join(format!("out-{}", c.label.replace([' ', '-'], "_")));
            runs.cost(i, || {
                let target = if c.in_place {
                    std::fs::copy(image, &copy).unwrap();
                    copy.clone()
                } else {
                    image.to_path_buf()
                };
                let cost = measured_args(&(c.args)(&target, &o), &[]);
                let _ = std::fs::remove_dir_all(&o);
                let _ = std::fs::remove_file(&o);
                cost
            })
        })
        .collect()
}

/// Every command that takes a kernel image and reads its exports
/// (`kernel-info`, `inspect`, `preresolve`, `finalize`, `symhash
/// --kernel` and `--vmlinux`, `extract-vmlinux`, `manifest write`, `apply
/// --image`; not `manifest show`, which reads none), on an
/// ELF vmlinux of 8,000 and then 64,000 exports more than the fixture's
/// (and a `.BTF` of 2,000 and then 16,000 types): the export tables and
/// the BTF types are read in one pass each.
#[test]
fn an_elf_vmlinux_takes_time_and_memory_linear_in_its_exports() {
    let dir = common::tmpdir("vmlinux-scale");
    let module = fixtures().join("modules/bl_plain.ko");
    let mods = images::modules_dir(&dir, "6.1.0-56-amd64", &module);
    // `manifest show` reads the ELF headers and `__modhashes`, not the
    // exports: 0.3 ms beyond the start-up at 8,000 and at 64,000 exports,
    // below the floor even summed over `common::SCALE_MAX_RUNS` runs, so
    // this input cannot show its scale (its own input is the manifest).
    let commands: Vec<_> =
        images::commands(&module, &mods, false).into_iter().filter(|c| c.label != "manifest show").collect();
    let mut costs = Vec::new();
    let mut runs = common::ScaleRuns::default();
    for n in [8_000, 64_000] {
        let d = dir.join(format!("{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let image = shared_vmlinux(n);
        // Every export read (the fixture's 12 and these).
        let info = common::TestCommand::new(&[&"kernel-info", &image, &"--json"]).ok();
        let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
        assert_eq!(v["exports"].as_u64(), Some(n as u64 + 12), "{v}");
        assert_eq!(v["gpl_exports"].as_u64(), Some(n as u64 / 2 + 3), "{v}");
        costs.push(each_kernel_command(&image, &commands, &d, &mut runs));
        let _ = std::fs::remove_dir_all(&d);
    }
    let labels = commands
        .iter()
        .enumerate()
        .map(|(i, c)| runs.label(i, &format!("{} (vmlinux of 8,000 -> 64,000 exports)", c.label)));
    common::report("vmlinux scale", &common::each_linear(labels, &costs));
}

/// One module made from the fixture `bl_plain.ko` linked (`ld -r`) with
/// `m` generated functions, each in a section of its own, each calling
/// export `i` of the generated vmlinux (its CRC in `__versions`) and
/// `_printk`, each exported itself (`__ksymtab`, `__kcrctab`, its name):
/// `m` more imports and exports, 2 `m` more sections (each function's
/// and its relocations'), 5 `m` more symbols (the function, its section,
/// its import, its name's two labels) and 5 `m` more relocations than the
/// fixture module.
fn module_of(dir: &Path, m: usize) -> PathBuf {
    let mut s = String::from(NO_EXEC_STACK);
    for i in 0..m {
        let f = format!("zmod_f{i:07}");
        writeln!(
            s,
            ".section .text.{f},\"ax\",@progbits\n.globl {f}\n.type {f},@function\n{f}:\n  call {}\n  call _printk\n  ret\n.size {f}, .-{f}",
            export_name(i)
        )
        .unwrap();
    }
    s += ".section __ksymtab_strings,\"a\"\n";
    for i in 0..m {
        writeln!(s, "__kstrtab_zmod_f{i:07}:\n  .asciz \"zmod_f{i:07}\"\n__kstrtabns_zmod_f{i:07}:\n  .asciz \"\"")
            .unwrap();
    }
    s += ".section __ksymtab,\"a\"\n  .balign 4\n";
    for i in 0..m {
        let f = format!("zmod_f{i:07}");
        writeln!(s, "  .long {f} - .\n  .long __kstrtab_{f} - .\n  .long __kstrtabns_{f} - .").unwrap();
    }
    s += ".section __kcrctab,\"a\"\n  .balign 4\n";
    for i in 0..m {
        writeln!(s, "  .long {:#010x}", export_crc(i) ^ 1).unwrap();
    }
    // struct modversion_info: the CRC, then the name in 56 bytes.
    s += ".section __versions,\"a\"\n  .balign 32\n";
    for i in 0..m {
        writeln!(s, "  .quad {:#x}\n  .ascii \"{}\"\n  .fill {}, 1, 0", export_crc(i), export_name(i), 56 - 14)
            .unwrap();
    }
    std::fs::create_dir_all(dir).unwrap();
    let src = dir.join("more.S");
    std::fs::write(&src, s).unwrap();
    let obj = dir.join("more.o");
    tool("gcc", &[&"-c", &"-o", &obj, &src]);
    let ko = dir.join("bl_scale.ko");
    tool("ld", &[&"-r", &"-o", &ko, &fixtures().join("modules/bl_plain.ko"), &obj]);
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&obj);
    ko
}

/// Remove what the commands of a scale test wrote into `dir` (its
/// `out-*` files and directories), so that each run writes anew.
fn remove_outputs(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("out-") {
            let _ = std::fs::remove_dir_all(e.path());
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `inspect`, `preresolve` (also `--fold-symbols`), `symhash`,
/// `finalize` and `manifest write` of one module 8 times as large: 3,000
/// and then 24,000 functions more than the fixture's, each in a section of
/// its own, each importing an export of the vmlinux and exported itself. The batch test above grows the number of modules; this one
/// grows one module's sections, symbols and relocations.
#[test]
fn one_module_takes_time_and_memory_linear_in_its_sections_symbols_and_relocations() {
    let dir = common::tmpdir("module-scale");
    let vmlinux = vmlinux_of(&dir.join("kernel"), 24_000);
    let mut costs: Vec<Vec<(f64, i64)>> = Vec::new();
    let mut labels = Vec::new();
    let mut runs = common::ScaleRuns::default();
    for m in [3_000, 24_000] {
        let d = dir.join(format!("{m}"));
        let ko = module_of(&d, m);
        let out = |s: &str| d.join(format!("out-{s}"));
        let commands: Vec<(&str, Vec<OsString>)> = vec![
            ("inspect", os(&[&"inspect", &vmlinux, &ko])),
            (
                "preresolve",
                os(&[&"preresolve", &"--kernel", &vmlinux, &"--assume-nokaslr", &ko, &"-o", &out("preresolve")]),
            ),
            (
                "preresolve --fold-symbols",
                os(&[
                    &"preresolve",
                    &"--kernel",
                    &vmlinux,
                    &"--assume-nokaslr",
                    &"--fold-symbols",
                    &ko,
                    &"-o",
                    &out("fold"),
                ]),
            ),
            ("symhash", os(&[&"symhash", &"--kernel", &vmlinux, &ko, &"-o", &out("symhash")])),
            ("finalize", os(&[&"finalize", &"--kernel", &vmlinux, &ko, &"-o", &out("finalize")])),
            ("manifest write", os(&[&"manifest", &"write", &"--vmlinux", &vmlinux, &"-o", &out("manifest"), &ko])),
        ];
        // The module is read whole: every import (the fixture module's 9
        // and these) found in vmlinux.
        let o = common::TestCommand::new(&[&"inspect", &vmlinux, &ko, &"--json"]).ok();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["totals"]["vmlinux"].as_u64(), Some(m as u64 + 9), "{}", v["totals"]);
        assert_eq!(v["totals"]["after"].as_u64(), Some(0), "{}", v["totals"]);
        labels = commands.iter().map(|(l, _)| *l).collect();
        costs.push(
            commands
                .iter()
                .enumerate()
                .map(|(i, (_, a))| {
                    runs.cost(i, || {
                        remove_outputs(&d);
                        measured_args(a, &[])
                    })
                })
                .collect(),
        );
        let _ = std::fs::remove_dir_all(&d);
    }
    let labels = labels
        .iter()
        .enumerate()
        .map(|(i, l)| runs.label(i, &format!("{l} (one module, 3,000 -> 24,000 functions more)")));
    common::report("module scale", &common::each_linear(labels, &costs));
}

/// A shared library of `n` exported functions, each calling the next
/// through the PLT (a JUMP_SLOT relocation each), linked by gcc with a
/// build ID; and a DDLink record of /bin/true with it, as the patched
/// loader writes one: each call's binding, the library's symbol to itself.
fn ddlink_case(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    use bootlink::ddlink::objects::ObjFile;
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(dir).unwrap();
    let mut s = String::from(NO_EXEC_STACK);
    s += ".text\n";
    for i in 0..n {
        let f = format!("zscale_s{i:07}");
        let next = if i + 1 < n { format!("  jmp zscale_s{:07}@PLT", i + 1) } else { "  ret".into() };
        writeln!(s, ".globl {f}\n.type {f},@function\n{f}:\n{next}\n.size {f}, .-{f}").unwrap();
    }
    let src = dir.join("lib.S");
    std::fs::write(&src, s).unwrap();
    let lib = dir.join("libzscale.so");
    tool("gcc", &[&"-shared", &"-nostdlib", &"-Wl,--build-id", &"-o", &lib, &src]);
    let _ = std::fs::remove_file(&src);
    let f = ObjFile::read(&lib).unwrap();
    let id = |p: &Path| bootlink::ddlink::record::hex(&ObjFile::read(p).unwrap().build_id);
    let m = std::fs::metadata(&lib).unwrap();
    let mut r = format!(
        "ddlink-record 1\nloader 00\nobj 0 2 0 0 0 0 0 {} \nobj 1 0 {} {} {} {} {} {} {}\nscope 0 1\n",
        id(Path::new("/bin/true")),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        id(&lib),
        lib.display()
    );
    let mut binds = 0;
    for i in 0..f.nsyms() {
        if f.name(i).starts_with("zscale_s") && f.name(i) != format!("zscale_s{:07}", 0) {
            writeln!(r, "bind 1 {i} 1 1 {i}").unwrap();
            binds += 1;
        }
    }
    assert_eq!(binds, n - 1, "the library's symbols");
    writeln!(r, "end {binds}").unwrap();
    let record = dir.join("record");
    std::fs::write(&record, r).unwrap();
    (lib, record)
}

/// `ddlink write` of a record 8 times as long, and `ddlink status` and
/// `ddlink verify` of the cache it writes (8 times as many entries): a
/// library of 8,000 and then 64,000 functions, every call between them
/// bound. (The loader given is /bin/true: the commands read and check
/// the cache and the objects it names before they hand it on.)
#[test]
fn ddlink_records_and_caches_take_time_and_memory_linear_in_their_bindings() {
    let dir = common::tmpdir("ddlink-scale");
    let mut costs = Vec::new();
    let mut runs = common::ScaleRuns::default();
    for n in [8_000, 64_000] {
        let d = dir.join(format!("{n}"));
        let (_lib, record) = ddlink_case(&d, n);
        let cache = d.join("cache");
        let write = runs.cost(0, || {
            let _ = std::fs::remove_file(&cache);
            common::measured(&[
                &"ddlink",
                &"write",
                &"--loader",
                &"/bin/true",
                &"--record",
                &record,
                &"--program",
                &"/bin/true",
                &"-o",
                &cache,
            ])
        });
        let o = common::TestCommand::new(&[
            &"ddlink",
            &"status",
            &"--json",
            &"--loader",
            &"/bin/true",
            &"--cache",
            &cache,
            &"/bin/true",
        ])
        .ok();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let bindings: u64 = v["objects"].as_array().unwrap().iter().filter_map(|o| o["bindings"].as_u64()).sum();
        assert_eq!(bindings, n as u64 - 1, "every binding in the cache: {v}");
        let run = |sub: &str| -> (f64, i64) {
            let (cost, code) = common::measured_status(&[
                &"ddlink",
                &sub,
                &"--loader",
                &"/bin/true",
                &"--cache",
                &cache,
                &"/bin/true",
            ]);
            assert!(code == 0 || code == 1, "ddlink {sub}: exit {code}");
            cost
        };
        let status = runs.cost(1, || run("status"));
        let verify = runs.cost(2, || run("verify"));
        costs.push(vec![write, status, verify]);
        let _ = std::fs::remove_dir_all(&d);
    }
    let labels = ["write", "status", "verify"]
        .iter()
        .enumerate()
        .map(|(i, c)| runs.label(i, &format!("ddlink {c} (8,000 -> 64,000 bindings)")));
    common::report("ddlink scale", &common::each_linear(labels, &costs));
}

/// A LAVA jobs directory of `variants` variants (`bootlink-lava.json` as
/// `lab --lava` writes it: the fixture's two, and copies of its stock
/// variant under names and marker tags of their own) and `logs` job logs:
/// the fixture's job 101 each time as the job of another copy (its marker
/// tag that copy's).
fn lava_case(dir: &Path, variants: usize, logs: usize) -> (PathBuf, Vec<PathBuf>) {
    let src = fixtures().join("lava");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("bootlink-lava.json")).unwrap()).unwrap();
    let (job, run) = (m["variants"][0].clone(), m["run"]["variants"][0].clone());
    for k in 2..variants {
        let name = format!("copy{k}");
        let (mut j, mut r) = (job.clone(), run.clone());
        j["name"] = name.clone().into();
        j["tag"] = format!("lava-v{k}").into();
        j["jobs"] = serde_json::json!([format!("{name}-0.yaml")]);
        r["name"] = name.into();
        m["variants"].as_array_mut().unwrap().push(j);
        m["run"]["variants"].as_array_mut().unwrap().push(r);
    }
    let jobs = dir.join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::write(jobs.join("bootlink-lava.json"), serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let log = String::from_utf8(common::sh("xz", &["-dc", src.join("101.yaml.xz").to_str().unwrap()])).unwrap();
    assert!(log.contains("BOOTLINK BEGIN lava-v0 ==="), "job 101 is the stock variant's");
    let paths = (0..logs)
        .map(|k| {
            let p = dir.join(format!("{}.yaml", 1000 + k));
            std::fs::write(&p, log.replace("lava-v0", &format!("lava-v{}", 2 + k * (variants - 2) / logs))).unwrap();
            p
        })
        .collect();
    (jobs, paths)
}

/// `lava import` of a jobs directory 8 times as large: a manifest of 1,000
/// and then 8,000 variants, with 4 and then 32 of their jobs' logs (each
/// job 101's log, as another variant's). Every log is matched to its
/// variant by its marker tag in a map made once for all the logs (it was
/// made again for each log: the variants times the logs).
#[test]
fn lava_import_takes_time_and_memory_linear_in_the_jobs_directory() {
    let dir = common::tmpdir("lava-jobs-scale");
    let mut cost = Vec::new();
    for (variants, logs) in [(1_000, 4), (8_000, 32)] {
        let d = dir.join(format!("{variants}"));
        let (jobs, paths) = lava_case(&d, variants, logs);
        let out = d.join("run");
        let mut args = os(&[&"lava", &"import", &"--jobs", &jobs, &"-o", &out]);
        args.extend(paths.iter().map(|p| p.clone().into_os_string()));
        cost.push(measured_args(&args, &[]));
        // Each log imported as its own variant's repetition.
        let run = bootlink_lab::run::load(&out).unwrap();
        assert_eq!(run.variants.len(), logs, "a variant for each log");
        for v in &run.variants {
            assert_eq!(v.repetitions.len(), 1, "{}", v.name);
            assert!(v.repetitions[0].job.is_some(), "{}", v.name);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    let line = common::linear_in_the_input("lava import (1,000 -> 8,000 variants, 4 -> 32 job logs)", cost[0], cost[1]);
    common::report("lava jobs scale", &line);
}

/// An unpacked kernel package's entry in the cache `cache`, as
/// `fetch-kernel` leaves it (tests/debian runs the real one): its images
/// (`vmlinuz`, and `image` as the vmlinux extracted from it), config and
/// record, and a module tree of `files` modules; sealed as `fetch` seals
/// it, what it wrote by content, the tree by size and time.
fn kernel_package_entry(cache: &Path, image: &Path, vmlinuz: &Path, files: usize) {
    use bootlink::cache::Check;
    let release = "6.1.0-56-amd64";
    let dir = cache.join("kernels").join(release);
    let modules = dir.join("lib/modules").join(release);
    std::fs::create_dir_all(&modules).unwrap();
    let one = modules.join("bl_plain.ko");
    std::fs::copy(fixtures().join("modules/bl_plain.ko"), &one).unwrap();
    // (Links to one file: the seal lists each by its name, size and time.)
    for k in 1..files {
        let sub = modules.join(format!("kernel/drivers/d{}", k / 100));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::hard_link(&one, sub.join(format!("m{k}.ko"))).unwrap();
    }
    std::fs::create_dir_all(dir.join("boot")).unwrap();
    std::fs::copy(image, dir.join("boot/vmlinux")).unwrap();
    std::fs::copy(vmlinuz, dir.join(format!("boot/vmlinuz-{release}"))).unwrap();
    std::fs::copy(fixtures().join(format!("config-{release}")), dir.join(format!("boot/config-{release}"))).unwrap();
    let f = bootlink::fetch::Fetched {
        package: format!("linux-image-{release}"),
        version: "6.1.192-2".into(),
        release: release.into(),
        arch: bootlink::fetch::Arch::Amd64,
        dir: dir.clone(),
        vmlinuz: dir.join(format!("boot/vmlinuz-{release}")),
        vmlinux: dir.join("boot/vmlinux"),
        config: dir.join(format!("boot/config-{release}")),
        modules: modules.clone(),
        reference: true,
        fallback: None,
    };
    std::fs::write(dir.join("bootlink-fetched.json"), serde_json::to_string_pretty(&f).unwrap()).unwrap();
    bootlink::cache::seal_tree(&dir, |rel| {
        Some(if rel.starts_with("lib") || rel.starts_with("usr") { Check::Stat } else { Check::Content })
    })
    .unwrap();
}

/// The reads of bootlink's own cache entries at 8 times the entry: an
/// unpacked kernel package (`fetch-kernel --package NAME=VERSION`, a hit:
/// its seal checked, the images hashed, 1,000 and then 8,000 modules
/// stat'ed) whose vmlinux has 8,000 and then 64,000 exports more than the
/// fixture's, and a hit of the decompressed-image cache (`kernel-info` of
/// that vmlinux gzip-compressed, run twice: the second hashes the cached
/// vmlinux and reads it).
#[test]
fn cache_entries_are_read_in_time_and_memory_linear_in_the_entry() {
    let dir = common::tmpdir("cache-scale");
    let mut costs = Vec::new();
    let mut runs = common::ScaleRuns::default();
    for (exports, files) in [(8_000, 1_000), (64_000, 8_000)] {
        let d = dir.join(format!("{files}"));
        std::fs::create_dir_all(&d).unwrap();
        let cache = d.join("cache");
        let image = shared_vmlinux(exports);
        let gz = d.join("vmlinux.gz");
        let data = std::fs::read(&image).unwrap();
        std::fs::write(&gz, bootlink::compress::compress(&data, bootlink::compress::Compression::Gzip).unwrap())
            .unwrap();
        drop(data);
        kernel_package_entry(&cache, &image, &gz, files);
        let env = [("BOOTLINK_CACHE", cache.as_path())];
        let package = "linux-image-6.1.0-56-amd64=6.1.192-2";
        let o = common::TestCommand::new(&[&"fetch-kernel", &"--package", &package, &"--json"])
            .env("BOOTLINK_CACHE", cache.to_str().unwrap())
            .ok();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["vmlinux"].as_str(), Some(cache.join("kernels/6.1.0-56-amd64/boot/vmlinux").to_str().unwrap()));
        assert_eq!(bootlink::cache::check(&cache.join("kernels/6.1.0-56-amd64")), Ok(()), "the entry whole");
        let fetch = runs.cost(0, || measured_args(&os(&[&"fetch-kernel", &"--package", &package]), &env));

        let first = common::TestCommand::new(&[&"kernel-info", &gz, &"--json"])
            .env("BOOTLINK_CACHE", cache.to_str().unwrap())
            .ok();
        let elfs = std::fs::read_dir(cache.join("vmlinux"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "elf"))
            .count();
        assert_eq!(elfs, 1, "the image's vmlinux is in the cache");
        let image_hit = runs.cost(1, || measured_args(&os(&[&"kernel-info", &gz, &"--json"]), &env));
        let again = common::TestCommand::new(&[&"kernel-info", &gz, &"--json"])
            .env("BOOTLINK_CACHE", cache.to_str().unwrap())
            .ok();
        assert_eq!(again.stdout, first.stdout, "the cache's answer is the image's");
        costs.push(vec![fetch, image_hit]);
        let _ = std::fs::remove_dir_all(&d);
    }
    let labels = [
        "fetch-kernel, a kernel package in the cache (1,000 -> 8,000 modules, 8,000 -> 64,000 exports)",
        "kernel-info, a decompressed-image cache hit (vmlinux of 8,000 -> 64,000 exports)",
    ]
    .iter()
    .enumerate()
    .map(|(i, l)| runs.label(i, l));
    common::report("cache scale", &common::each_linear(labels, &costs));
}

/// `manifest show` of a manifest 8 times as long: a vmlinux (the
/// fixture's, the two sections bootlink's patches reserve added) whose
/// `__modhashes` lists 32,768 and then 262,144 SHA-256 digests (random,
/// encoded by bootlink's manifest writer, `Manifest::encode`). Each run
/// reads the section, checks the digests strictly increasing and prints
/// one line a digest. (The vmlinux test above does not grow this input.)
#[test]
fn manifest_show_takes_time_and_memory_linear_in_the_manifest() {
    use bootlink::manifest::{Hash, Manifest};
    let dir = common::tmpdir("manifest-scale");
    let mut rng = bootlink::rng::Rng(47);
    let mut costs = Vec::new();
    let mut runs = common::ScaleRuns::default();
    for n in [32_768usize, 262_144] {
        let digests = (0..n)
            .map(|_| {
                let mut d = [0u8; 32];
                for c in d.chunks_exact_mut(8) {
                    c.copy_from_slice(&rng.next_u64().to_le_bytes());
                }
                d
            })
            .collect();
        let manifest = Manifest::new(Hash::Sha256, digests).encode();
        let mut data = images::with_reserved_sections_of(&fixtures().join("vmlinux"), &dir, 64 << 10, manifest.len());
        let (at, size) = images::section_range(&data, "__modhashes").expect("the reserved section");
        assert_eq!(size, manifest.len());
        data[at..at + size].copy_from_slice(&manifest);
        let vmlinux = dir.join(format!("vmlinux-{n}"));
        std::fs::write(&vmlinux, &data).unwrap();
        drop(data);
        // Every digest listed.
        let o = common::TestCommand::new(&[&"manifest", &"show", &vmlinux]).ok();
        assert_eq!(common::stdout(&o).lines().filter(|l| l.len() >= 64).count(), n, "a line a digest");
        costs.push(vec![runs.cost(0, || common::measured(&[&"manifest", &"show", &vmlinux]))]);
        let _ = std::fs::remove_file(&vmlinux);
    }
    let labels = [runs.label(0, "manifest show (32,768 -> 262,144 digests)")];
    common::report("manifest scale", &common::each_linear(labels, &costs));
}

/// The arithmetic of every scale check above (`common::scale_verdict`) on
/// synthetic costs (CPU seconds, peak KiB): the process's start-up is
/// taken off both sizes before the ratio, so quadratic work the start-up
/// hid fails; an input whose part at the smaller size is below the floor
/// fails instead of passing; memory is held the same way.
#[test]
fn the_scale_check_holds_the_inputs_part_and_fails_below_its_floor() {
    let start = (0.030, 6_000);
    let mem = |small: i64, large: i64| (start.1 + small, start.1 + large);
    let (m0, m1) = mem(4_000, 32_000);
    let ok = |small: f64, large: f64| common::scale_verdict("c", start, (small, m0), (large, m1), 16.0);
    // Linear: 25 ms of input at the smaller size, 8 times it at the larger.
    let line = ok(start.0 + 0.025, start.0 + 0.200).unwrap();
    assert!(line.contains("8.0 x the input's CPU time"), "{line}");
    // Linear work of 25 ms and quadratic work of 6 ms at the smaller size
    // (64 times it at the larger) beside a start-up of 30 ms: the whole
    // costs' ratio (what the check held before) is 10.1, under 16; the
    // input's part's is 18.8.
    let (small, large) = (start.0 + 0.025 + 0.006, start.0 + 8.0 * 0.025 + 64.0 * 0.006);
    assert!(large / small < 16.0, "the whole costs' ratio hides it: {}", large / small);
    let e = ok(small, large).unwrap_err();
    assert!(e.contains("18.8 x the input's CPU time") && e.contains("more than linear"), "{e}");
    // Quadratic work of a sixth of the linear part or more fails; less passes.
    let mix = |q: f64| ok(start.0 + 0.030 + q, start.0 + 8.0 * 0.030 + 64.0 * q);
    assert!(mix(0.030 / 6.0 + 1e-4).is_err());
    assert!(mix(0.030 / 6.0 - 1e-3).is_ok());
    // Below the floor: a cheap input fails, whatever its ratio.
    let e = ok(start.0 + 0.010, start.0 + 0.080).unwrap_err();
    assert!(e.contains("10.0 ms") && e.contains("below the floor of 25 ms"), "{e}");
    let e = ok(start.0 + 0.001, start.0 + 0.064).unwrap_err();
    assert!(e.contains("below the floor"), "{e}");
    // Another bound for work that outgrows the caches.
    assert!(common::scale_verdict("c", start, (0.055, m0), (0.030 + 0.5, m1), 24.0).is_ok());
    assert!(common::scale_verdict("c", start, (0.055, m0), (0.030 + 0.5, m1), 16.0).is_err());
    // Memory: the input's part, 8 times: passes; 64 times: fails; under
    // the floor at the smaller size: fails.
    let cpu = (start.0 + 0.025, start.0 + 0.200);
    let mem_check = |small: i64, large: i64| {
        let (a, b) = mem(small, large);
        common::scale_verdict("c", start, (cpu.0, a), (cpu.1, b), 16.0)
    };
    assert!(mem_check(2_048, 16_384).is_ok());
    let e = mem_check(2_048, 64 * 2_048).unwrap_err();
    assert!(e.contains("64.0 x the input's peak memory"), "{e}");
    let e = mem_check(512, 4_096).unwrap_err();
    assert!(e.contains("peak memory at the smaller size is 512 KiB") && e.contains("below the floor"), "{e}");
}
