//! Function reordering (tier 1: gcc, binutils and lld, no kernel, no
//! QEMU): a small version of the seed's test program built, traced with
//! bl-trace, ordered and relinked with GNU ld, gold and lld through the
//! binary; the output identical and the startup code on fewer pages; the
//! trace kept apart two static functions of one name. And the bad input:
//! a truncated trace, a trace of another build, a binary without a traced
//! function, a linker that refuses the order: each named, nothing written.

use crate::common;

use std::path::{Path, PathBuf};

use common::TestCommand;

fn synth(seed: u64) -> serde_json::Value {
    synth_of(1000, seed)
}

fn synth_of(functions: u32, seed: u64) -> serde_json::Value {
    let out = TestCommand::new(&[
        &"order",
        &"synth",
        &"--json",
        &"--functions",
        &functions.to_string(),
        &"--startup",
        &"100",
        &"--files",
        &"10",
        &"--seed",
        &seed.to_string(),
    ])
    .ok();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn path(v: &serde_json::Value) -> PathBuf {
    PathBuf::from(v.as_str().unwrap_or_else(|| panic!("not a path: {v}")))
}

#[test]
fn synthetic_case_end_to_end() {
    let r = synth(1);
    let order = r["mapped"]["order"].as_array().unwrap();
    // 100 startup functions, main, and the static helpers they call.
    assert!(order.len() > 100, "{} functions traced", order.len());
    let helpers: Vec<&serde_json::Value> = order.iter().filter(|f| f["name"] == "helper").collect();
    assert!(helpers.len() > 1, "the static helpers of several files were merged: {helpers:?}");
    assert!(helpers.iter().all(|h| h["file"].is_string()), "a static helper without its file: {helpers:?}");
    let pages = |p: &serde_json::Value, k: &str| p["blocks"][0][k].as_u64().unwrap();
    let before = pages(&r["predicted"], "before");
    let after = pages(&r["predicted"], "after");
    assert!(before >= 4 * after, "predicted {before} -> {after} pages");
    let linkers: Vec<&str> = r["relinked"].as_array().unwrap().iter().map(|l| l["linker"].as_str().unwrap()).collect();
    for want in ["ld.bfd", "ld.gold", "ld.lld"] {
        if !linkers.contains(&want) {
            common::skip("synthetic_case_end_to_end", &format!("{want} is not installed"));
        }
    }
    for l in r["relinked"].as_array().unwrap() {
        assert_eq!(l["output_identical"], true, "{l}");
        let measured = pages(&l["measured"], "before");
        assert!(measured * 4 <= before, "{}: startup code on {measured} pages, {before} unordered", l["linker"]);
    }
    // The order files are what the linkers took.
    let dir = path(&r["order_dir"]);
    let ld = std::fs::read_to_string(dir.join("order.ld")).unwrap();
    assert!(ld.contains("INSERT BEFORE .text") && ld.contains("(.text.main "), "{ld}");
    assert!(ld.contains("*f0"), "duplicated statics are matched by their object: {ld}");
}

fn write(trace: &Path, binary: &Path, layout: Option<&Path>, out: &Path) -> TestCommand {
    let mut c = TestCommand::new(&[&"order", &"write", &"--trace", &trace, &"--binary", &binary, &"-o", &out]);
    if let Some(l) = layout {
        c = c.arg(&"--layout").arg(&l);
    }
    c.show_dir(out.parent().unwrap())
}

#[test]
fn bad_traces_and_binaries_are_named() {
    let a = synth(1);
    // Another build: more functions, so every address moves.
    let b = synth_of(1100, 2);
    let trace = path(&a["trace"]);
    let traced = path(&a["case"]["traced"]);
    let dir = common::tmpdir("order-bad");
    let out = dir.join("out");
    // The good case writes all three files.
    write(&trace, &traced, Some(&path(&a["case"]["program"])), &out).ok();
    for f in ["order.ld", "order.gold", "order.lld"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let out = dir.join("out2");
    // Truncated.
    let text = std::fs::read_to_string(&trace).unwrap();
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &text[..text.find("end ").unwrap()]).unwrap();
    let err = write(&cut, &traced, None, &out).fails_with("truncated trace");
    assert!(err.contains("cut.trace"), "{err}");
    // A trace of another build: seed 2's functions are elsewhere.
    let err = write(&path(&b["trace"]), &traced, None, &out).fails_with("another build");
    assert!(err.contains("line "), "the entry is named: {err}");
    // A binary that lacks traced functions (a build with fewer functions).
    let other = path(&synth_of(700, 3)["case"]["program"]);
    let err = write(&trace, &traced, Some(&other), &out).fails_with("has no function");
    assert!(err.contains(&*other.to_string_lossy()), "{err}");
    // A stripped binary.
    let stripped = dir.join("stripped");
    common::sh("strip", &["-o", stripped.to_str().unwrap(), traced.to_str().unwrap()]);
    write(&trace, &stripped, None, &out).fails_with("no symbol table");
    assert!(!out.exists(), "a refused order left files");
}

#[test]
fn a_linker_that_refuses_the_order_is_named() {
    let a = synth(1);
    let dir = common::tmpdir("order-badlink");
    let objects: Vec<PathBuf> = a["case"]["objects"].as_array().unwrap().iter().map(path).collect();
    std::fs::write(dir.join("order.ld"), "SECTIONS { this is not a script").unwrap();
    let out = dir.join("prog");
    let err = bootlink::order::synth::relink(&objects, bootlink::order::synth::Linker::Bfd, &dir, &out).unwrap_err();
    assert_eq!(err.kind, bootlink::error::Kind::Tool);
    assert!(err.to_string().contains(&*dir.to_string_lossy()), "{err}");
    assert!(!out.exists() && !out.with_extension("tmp-link").exists(), "a half-linked program was left");
}

/// The same start-up recorded without a rebuild (the plain program under
/// qemu-x86_64): the program's own functions come in the order the
/// instrumented build's trace has them.
#[test]
fn a_record_under_qemu_orders_like_the_instrumented_trace() {
    if !bootlink::hosttool::exists("qemu-x86_64") {
        common::skip("a_record_under_qemu_orders_like_the_instrumented_trace", "qemu-x86_64 (qemu-user) not installed");
        return;
    }
    let a = synth(1);
    let program = path(&a["case"]["program"]);
    let dir = common::tmpdir("order-qemu");
    let trace = dir.join("qemu.trace");
    let out = TestCommand::new(&[&"order", &"record", &"--json", &"-o", &trace, &program]).ok();
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rec["functions"].as_u64().unwrap() > 100, "{rec}");
    let orders = dir.join("orders");
    let w =
        TestCommand::new(&[&"order", &"write", &"--json", &"--trace", &trace, &"--binary", &program, &"-o", &orders])
            .ok();
    let w: serde_json::Value = serde_json::from_slice(&w.stdout).unwrap();
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .filter(|n| n.starts_with('f') && n[1..].chars().all(|c| c.is_ascii_digit()))
            .collect()
    };
    let from_qemu = names(&w["mapped"]["order"]);
    let instrumented = names(&a["mapped"]["order"]);
    assert_eq!(from_qemu.len(), 100, "the 100 start-up functions");
    assert_eq!(from_qemu, instrumented, "QEMU's first translations and the instrumented first calls differ");
    assert!(orders.join("order.lld").is_file());
    // A program that is no ELF file: named, no trace written.
    let bogus = dir.join("bogus");
    std::fs::write(&bogus, b"#!/bin/sh\necho hi\n").unwrap();
    let t2 = dir.join("t2");
    TestCommand::new(&[&"order", &"record", &"-o", &t2, &bogus]).fails_with("bogus");
    assert!(!t2.exists());
}

/// `--allow-missing`: traced functions the layout build lacks are left out
/// and counted instead of refusing the trace; it needs `--layout`.
#[test]
fn allow_missing_leaves_out_and_counts_what_the_layout_lacks() {
    let a = synth(1);
    let trace = path(&a["trace"]);
    let traced = path(&a["case"]["traced"]);
    let fewer = path(&synth_of(700, 3)["case"]["program"]);
    let dir = common::tmpdir("order-allow-missing");
    let out = dir.join("out");
    let o = write(&trace, &traced, Some(&fewer), &out).arg(&"--allow-missing").arg(&"--json").ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kept = v["mapped"]["order"].as_array().unwrap().len();
    let missing = v["mapped"]["missing"].as_u64().unwrap() as usize;
    assert!(missing > 0 && kept > 0, "kept {kept}, missing {missing}");
    assert_eq!(
        kept + missing,
        synth(1)["mapped"]["order"].as_array().unwrap().len(),
        "every traced function kept or counted"
    );
    assert!(out.join("order.lld").is_file());
    let err = write(&trace, &traced, None, &dir.join("out2")).arg(&"--allow-missing").fails_with("--layout");
    assert!(!dir.join("out2").exists(), "{err}");
}

/// Data ordering (issue 29) on a program made for it: 64 writable and 64
/// read-only tables of 1 KiB, of which `main` reads 12 of each in a fixed
/// order. `order data` records (under valgrind) exactly those, in that
/// order; each linker's link with the order prints the same and lays
/// them out one after the other in that order, where the plain link has
/// them in source order.
#[test]
fn data_objects_are_recorded_and_laid_out_in_first_touch_order() {
    if !bootlink::hosttool::exists("valgrind") {
        common::skip("data_objects_are_recorded_and_laid_out_in_first_touch_order", "valgrind is not installed");
        return;
    }
    const TOUCHED: [u32; 12] = [41, 3, 58, 17, 29, 8, 62, 33, 0, 50, 21, 12];
    let dir = common::tmpdir("order-data");
    let mut c = String::from("#include <stdio.h>\n");
    for i in 0..64 {
        c += &format!("int d{i}[256] = {{ {i}, 1 }};\nconst int r{i}[256] = {{ {}, 2 }};\n", i * 3 + 1);
    }
    c += "int main(void)\n{\n\tvolatile int k = 0;\n\tint s = 0;\n";
    for i in TOUCHED {
        c += &format!("\ts += d{i}[k] * 7 + r{i}[k];\n");
    }
    c += "\tprintf(\"sum %d\\n\", s);\n\treturn 0;\n}\n";
    std::fs::write(dir.join("main.c"), c).unwrap();
    let (src, obj, prog) = (dir.join("main.c"), dir.join("main.o"), dir.join("prog"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    common::sh("gcc", &["-O1", "-fdata-sections", "-ffunction-sections", "-c", &s(&src), "-o", &s(&obj)]);
    common::sh("gcc", &["-o", &s(&prog), &s(&obj)]);
    let want = common::sh(&s(&prog), &[]);
    let orders = dir.join("orders");
    let out = TestCommand::new(&[&"order", &"data", &"--json", &"-o", &orders, &prog]).ok();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = r["touched"]["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .filter(|n| {
            n.len() > 1 && (n.starts_with('d') || n.starts_with('r')) && n[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    let expected: Vec<String> = TOUCHED.iter().flat_map(|i| [format!("d{i}"), format!("r{i}")]).collect();
    assert_eq!(names, expected, "the tables main reads, in the order it reads them");
    // Where a link put each table: nm's addresses.
    let addrs = |p: &Path| -> std::collections::HashMap<String, u64> {
        String::from_utf8(common::sh("nm", &["--defined-only", &s(p)]))
            .unwrap()
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 3).then(|| (w[2].to_string(), u64::from_str_radix(w[0], 16).unwrap()))
            })
            .collect()
    };
    // Each touched table directly after the one touched before it.
    let follows = |a: &std::collections::HashMap<String, u64>, kind: &str| -> Vec<bool> {
        let seq: Vec<u64> = TOUCHED.iter().map(|i| a[&format!("{kind}{i}")]).collect();
        seq.windows(2).map(|w| w[1] == w[0] + 1024).collect()
    };
    let plain = addrs(&prog);
    assert!(follows(&plain, "d").iter().all(|f| !f), "the plain link has source order, not the touched order");
    let mut linked = 0;
    for (linker, opt) in [
        ("bfd", format!("-Wl,-T,{}", s(&orders.join("order.ld")))),
        ("gold", format!("-Wl,--section-ordering-file,{}", s(&orders.join("order.gold")))),
        ("lld", format!("-Wl,--symbol-ordering-file,{}", s(&orders.join("order.lld")))),
    ] {
        if !bootlink::hosttool::exists(&format!("ld.{linker}")) {
            common::skip(
                "data_objects_are_recorded_and_laid_out_in_first_touch_order",
                &format!("ld.{linker} not installed"),
            );
            continue;
        }
        let out = dir.join(format!("prog.{linker}"));
        common::sh("gcc", &["-o", &s(&out), &s(&obj), &format!("-fuse-ld={linker}"), &opt]);
        assert_eq!(common::sh(&s(&out), &[]), want, "{linker}: output differs");
        let a = addrs(&out);
        for kind in ["d", "r"] {
            let seq: Vec<u64> = TOUCHED.iter().map(|i| a[&format!("{kind}{i}")]).collect();
            for (w, i) in seq.windows(2).zip(TOUCHED.iter().skip(1)) {
                assert_eq!(
                    w[1],
                    w[0] + 1024,
                    "{linker}: {kind}{i} does not follow the table touched before it: {seq:x?}"
                );
            }
        }
        linked += 1;
    }
    assert!(linked > 0, "no linker to check the order with");
    // Bad input: no ELF file, a stripped program; named, nothing written.
    let bogus = dir.join("bogus");
    std::fs::write(&bogus, b"#!/bin/sh\necho hi\n").unwrap();
    let none = dir.join("none");
    let err = TestCommand::new(&[&"order", &"data", &"-o", &none, &bogus]).fails_with("bogus");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let stripped = dir.join("stripped");
    common::sh("strip", &["-o", &s(&stripped), &s(&prog)]);
    TestCommand::new(&[&"order", &"data", &"-o", &none, &stripped]).fails_with("no symbol table");
    assert!(!none.exists(), "a refused record left files");
}

/// The synthetic program's start-up, code and data, recorded in each
/// build: with the data order (the rest of the code and the unwind tables
/// after the data) GNU ld's link spans exactly the fewest 64 KiB blocks
/// its pages can, and every link with the data order prints the same.
#[test]
fn the_synthetic_start_up_reaches_its_64k_floor_with_the_data_order() {
    // The lab's program (10,000 functions, 1,000 at start-up).
    let out = TestCommand::new(&[&"order", &"synth", &"--json"]).ok();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let Some(d) = r["data"].as_object() else {
        common::skip("the_synthetic_start_up_reaches_its_64k_floor_with_the_data_order", "valgrind is not installed");
        return;
    };
    for l in d["relinked"].as_array().unwrap() {
        assert_eq!(l["output_identical"], true, "{l}");
    }
    let at = |build: &str, key: &str, block: u64| -> u64 {
        let f = d["footprints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["build"] == build)
            .unwrap_or_else(|| panic!("no {build}"));
        f[key].as_array().unwrap().iter().find(|p| p[0] == block).unwrap()[1].as_u64().unwrap()
    };
    let k64 = 64 << 10;
    let (un, re, da, floor) = (
        at("unordered", "spans", k64),
        at("reordered", "spans", k64),
        at("reordered+data", "spans", k64),
        at("reordered+data", "floor", k64),
    );
    println!("64 KiB blocks of the start-up: unordered {un}, reordered {re}, reordered+data {da}, floor {floor}");
    assert_eq!(da, floor, "the data order's layout spans {da} blocks, its floor is {floor}");
    assert!(da < re && re < un, "{un} -> {re} -> {da}");
}
