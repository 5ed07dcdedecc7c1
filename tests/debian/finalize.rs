//! `bootlink finalize` on Debian's real 6.1 modules and on test modules
//! built from C: every module's ORC table sorted and its ftrace records
//! checked, the records of overridden weak functions dropped (kvm's, and
//! bl_weak's), the written modules re-read in order, inputs untouched, and
//! bad input failing clearly.

use crate::common;

use std::path::Path;

use bootlink::elf::{Elf, Want};
use bootlink::finalize::{mcount, orc};
use common::*;

fn sha(p: &Path) -> Vec<u8> {
    sh("sha256sum", &[p.to_str().unwrap()])
}

#[test]
fn the_whole_debian_tree_is_planned() {
    let k = kernel();
    let o = TestCommand::new(&[&"finalize", &"--kernel", &k.vmlinux, &"--dry-run", &"--json", &k.modules]).ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = v["modules"].as_array().unwrap();
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| m.iter().filter(|x| f(x)).count();
    let sorted = count(&|x| x["orc_sorted"].as_bool().unwrap());
    let checked = count(&|x| x["mcount_checked"].as_bool().unwrap());
    let dropped: u64 = m.iter().map(|x| x["mcount_dropped"].as_u64().unwrap()).sum();
    let records: u64 = m.iter().map(|x| x["mcount_records"].as_u64().unwrap()).sum();
    let skipped: Vec<String> =
        m.iter().flat_map(|x| x["skipped"].as_array().unwrap().clone()).map(|s| s.to_string()).collect();
    println!(
        "{} modules: {sorted} ORC tables sorted, {checked} checked ({records} ftrace records, {dropped} dropped), {} skipped steps",
        m.len(),
        skipped.len()
    );
    assert!(m.len() > 4000);
    // every module that has the tables gets the work done
    assert!(sorted + 5 >= m.len() && checked + 30 >= m.len(), "{skipped:?}");
    assert!(skipped.is_empty(), "{skipped:?}");
    // kvm.ko links generic code with weak kvm_arch_* hooks and the x86
    // definitions that replace them: their records are dropped.
    let kvm = m.iter().find(|x| x["display"].as_str().unwrap().ends_with("arch/x86/kvm/kvm.ko")).unwrap();
    assert!(kvm["mcount_dropped"].as_u64().unwrap() > 0, "{kvm}");
    assert!(dropped >= kvm["mcount_dropped"].as_u64().unwrap());
}

#[test]
fn written_modules_read_back_in_order_and_refuse_a_second_pass() {
    let out = tmpdir("finalize-write");
    let inputs = [module("fs/xfs/xfs.ko"), module("arch/x86/kvm/kvm.ko"), module("fs/nfs/nfsv4.ko")];
    let before: Vec<Vec<u8>> = inputs.iter().map(|p| sha(p)).collect();
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"finalize", &"-o", &out];
    inputs.iter().for_each(|p| args.push(p));
    TestCommand::new(&args).ok();
    for (p, h) in inputs.iter().zip(&before) {
        assert_eq!(&sha(p), h, "{} changed", p.display());
        let name = p.file_name().unwrap();
        let data = std::fs::read(out.join(name)).unwrap();
        let elf = Elf::parse(&data, Want::Relocatable).unwrap();
        let order = orc::plan(&elf).unwrap().unwrap();
        assert!(order.iter().enumerate().all(|(i, &k)| i == k), "{name:?}: ORC table not in order");
        assert!(elf.section(orc::SORTED_SECTION).is_some());
        let syms = mcount::parse_section(elf.named_section_data(mcount::CHECKED_SECTION).unwrap().unwrap()).unwrap();
        let records = elf.named_section_data(mcount::SECTION).unwrap().unwrap().len() / 8;
        assert_eq!(syms.len(), records, "{name:?}: one symbol per kept record");
        let o = TestCommand::new(&[&"finalize", &"--dry-run", &out.join(name)]).cmd_output();
        assert!(!o.status.success());
        assert!(stderr(&o).contains("already finalized"), "{}", stderr(&o));
    }
}

#[test]
fn a_module_with_nothing_to_do_is_copied_as_it_is() {
    // cast_common: no ORC table, no ftrace records; signed by Debian
    let input = module("crypto/cast_common.ko");
    let out = tmpdir("finalize-nothing");
    let o = TestCommand::new(&[&"finalize", &"--json", &"-o", &out, &input]).ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["modules"][0];
    assert!(!m["orc_sorted"].as_bool().unwrap() && !m["mcount_checked"].as_bool().unwrap(), "{m}");
    assert!(
        std::fs::read(out.join("cast_common.ko")).unwrap() == std::fs::read(&input).unwrap(),
        "not copied as it is"
    );
}

#[test]
fn test_modules_weak_function_record_is_dropped() {
    let dir = tmpdir("finalize-test-modules");
    finalize_test_modules(None, &dir);
    let o =
        TestCommand::new(&[&"finalize", &"--dry-run", &"--json", &dir.join("bl_weak.ko"), &dir.join("bl_unwind.ko")])
            .ok();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = v["modules"].as_array().unwrap();
    let get = |n: &str| m.iter().find(|x| x["name"] == n).unwrap().clone();
    let (weak, unwind) = (get("bl_weak"), get("bl_unwind"));
    assert_eq!(weak["mcount_dropped"], 1, "{weak}");
    assert_eq!(unwind["mcount_dropped"], 0, "{unwind}");
    assert!(weak["orc_sorted"].as_bool().unwrap() && unwind["orc_sorted"].as_bool().unwrap());
}

#[test]
fn bad_input_fails_naming_the_file_and_writes_nothing() {
    let dir = tmpdir("finalize-bad");
    let good = copy_to(&module("fs/xfs/xfs.ko"), &dir, "xfs.ko");
    let data = std::fs::read(&good).unwrap();
    let cut = dir.join("cut.ko");
    std::fs::write(&cut, &data[..data.len() / 3]).unwrap();
    let out = dir.join("out");
    let e = TestCommand::new(&[&"finalize", &"-o", &out, &cut]).fails_with("cut.ko");
    assert!(e.contains("truncated") || e.contains("corrupt") || e.contains("outside"), "{e}");
    assert!(!out.join("cut.ko").exists(), "a half-written module");
    let other = dir.join("notelf.ko");
    std::fs::write(&other, b"not an ELF file at all, just text").unwrap();
    TestCommand::new(&[&"finalize", &"-o", &out, &other]).fails_with("notelf.ko");
    // a module built for another kernel (Debian 12's 6.12 headers)
    let o612 = dir.join("6.12");
    finalize_test_modules(Some(Path::new("/usr/src/linux-headers-6.12.117+deb12-amd64")), &o612);
    let e = TestCommand::new(&[&"finalize", &"--kernel", &kernel().vmlinux, &"-o", &out, &o612.join("bl_weak.ko")])
        .fails_with("bl_weak.ko");
    assert!(e.contains("built for another kernel"), "{e}");
    assert!(!out.join("bl_weak.ko").exists());
}
