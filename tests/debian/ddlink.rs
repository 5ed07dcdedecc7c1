//! DDLink end to end with the patched glibc (`bootlink glibc build`,
//! cached): real programs and the playground's libraries profiled, their
//! caches written and verified (0 differences), the programs' output
//! identical under Debian's ld.so, the patched one without a cache and File
//! Read Mode; and every fallback — a library replaced after profiling, a
//! truncated or corrupt cache, a cache of another program, LD_PRELOAD and
//! LD_LIBRARY_PATH, a cache others can write, a setuid program — loads
//! normally with the loader's reason, and the program behaves identically.
//! `verify` catches a deliberately wrong cache entry, which File Read Mode
//! would apply (the playground's output shows it). Relocation Skip Mode:
//! the same programs with prelinked images (every relocated word verified
//! against a normal relocation), and its fallbacks.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use bootlink::ddlink::format::{self, Cache};
use bootlink::ddlink::objects::ObjFile;
use common::TestCommand;
use common::ddlink::*;

/// The playground's program under each mode: every binding kind right.
#[test]
fn playground_every_binding_kind_from_the_cache() {
    let dir = common::tmpdir("ddlink-play");
    let prog = playground(&dir);
    let cache = cache_for(&dir, &prog, &[]);
    let want = PLAYGROUND_OUTPUT;
    let ld = &glibc().ld_so;
    let c = cache.to_str().unwrap();
    let (out, _) = start(Path::new(DEBIAN_LD_SO), &prog, &[], &[]);
    assert_eq!(out, want, "Debian's ld.so");
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", "/nonexistent")]);
    assert_eq!(out, want);
    normal_because(&dbg, "no cache");
    for bind_now in ["", "1"] {
        let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", c), ("LD_BIND_NOW", bind_now)]);
        assert_eq!(out, want, "file-read mode, LD_BIND_NOW={bind_now}");
        assert!(file_read(&dbg), "{dbg}");
    }
    // The GNU unique symbol is left to the normal lookup; the rest cached.
    let bytes = std::fs::read(&cache).unwrap();
    let decoded = format::decode(&bytes).unwrap();
    let uniq = decoded.objects.iter().position(|o| o.name.ends_with("libdduniq.so")).unwrap();
    let uniq_file = ObjFile::read(Path::new(&decoded.objects[uniq].name)).unwrap();
    let unique_bound = decoded
        .objects
        .iter()
        .flat_map(|o| &o.entries)
        .filter(|e| e.defobj as usize == uniq && uniq_file.unique[e.defsym as usize])
        .count();
    assert_eq!(unique_bound, 0, "a STB_GNU_UNIQUE definition was cached");
    // status agrees with the loader.
    let out = TestCommand::new(&[&"ddlink", &"status", &"--json", &"--loader", ld, &"--cache", &cache, &prog]).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "file-read", "{v}");
    assert!(v["objects"].as_array().unwrap().iter().all(|o| o["problem"].is_null()), "{v}");
}

/// A cache with `which` bound to libb's definition instead of liba's.
fn wrong_cache(cache: &Path, program: &Path, out: &Path) {
    let mut c: Cache = format::decode(&std::fs::read(cache).unwrap()).unwrap();
    let find = |c: &Cache, suffix: &str| c.objects.iter().position(|o| o.name.ends_with(suffix)).unwrap();
    let (main, a, b) = (0, find(&c, "libdda.so"), find(&c, "libddb.so"));
    let main_file = ObjFile::read(program).unwrap();
    let a_file = ObjFile::read(Path::new(&c.objects[a].name)).unwrap();
    let b_file = ObjFile::read(Path::new(&c.objects[b].name)).unwrap();
    let idx = |f: &ObjFile| f.names.iter().position(|n| n == "which").unwrap() as u32;
    let mut changed = 0;
    for e in &mut c.objects[main].entries {
        if e.symidx == idx(&main_file) && e.defobj as usize == a && e.defsym == idx(&a_file) {
            e.defobj = b as u16;
            e.defsym = idx(&b_file);
            changed += 1;
        }
    }
    assert!(changed > 0, "the program's binding of `which` is not in the cache");
    std::fs::write(out, format::encode(&c).unwrap()).unwrap();
}

/// `verify` reports a wrong entry (and applies the normal binding), while
/// File Read Mode would apply it: the check is what makes a cache safe.
#[test]
fn verify_catches_a_wrong_entry() {
    let dir = common::tmpdir("ddlink-wrong");
    let prog = playground(&dir);
    let cache = cache_for(&dir, &prog, &[]);
    let wrong = dir.join("wrong.cache");
    wrong_cache(&cache, &prog, &wrong);
    let ld = &glibc().ld_so;
    let out =
        TestCommand::new(&[&"ddlink", &"verify", &"--json", &"--loader", ld, &"--cache", &wrong, &prog]).cmd_output();
    assert!(!out.status.success(), "verify passed a wrong cache");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["mismatched"].as_u64().unwrap() >= 1, "{v}");
    assert!(
        v["mismatches"].to_string().contains("which cache=") && v["mismatches"].to_string().contains("libddb.so"),
        "{v}"
    );
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", wrong.to_str().unwrap())]);
    assert!(file_read(&dbg));
    assert!(out.starts_with("which=libb "), "the wrong entry was not applied, so this test proves nothing: {out}");
}

/// dlopen groups (glibc patch 0011): ddlink-open's two dlopens recorded
/// as two groups (plug1 with its dependency pdep, then plug2), their
/// bindings taken from the cache (File Read Mode, lazy and BIND_NOW) and
/// their images skipped (Skip Mode), `verify` comparing every binding and
/// image word of both; plug2's binding to plug1 through the global scope
/// keeps plug1 loaded after its dlclose (kept=1) as under Debian's ld.so.
/// A first dlopen other than recorded, an object unloaded, and a group
/// entry changed in the cache (then the group is not used, and `verify`
/// says so) load the later dlopens as usual, saying why; a wrong binding
/// of the right name, which File Read Mode would apply, `verify` reports.
/// The output is always Debian's ld.so's.
#[test]
fn dlopen_groups_from_the_cache_and_their_fallbacks() {
    let dir = common::tmpdir("ddlink-open");
    let prog = playground(&dir.join("pg")).with_file_name("ddlink-open");
    let ld = &glibc().ld_so;
    let want = |args: &[&str]| start(Path::new(DEBIAN_LD_SO), &prog, args, &[]).0;
    assert_eq!(want(&[]), "plug1=102 plug2=206 kept=1\n");
    let cache = cache_for(&dir, &prog, &[]);
    let decoded = format::decode(&std::fs::read(&cache).unwrap()).unwrap();
    let counts: Vec<u32> = decoded.groups.iter().map(|g| g.count).collect();
    assert_eq!(counts, [2, 1], "groups: {:?}", decoded.groups);
    let group_objects = &decoded.objects[decoded.initial()..];
    assert!(group_objects.iter().all(|o| !o.entries.is_empty()), "a group object without bindings");
    let c = cache.to_str().unwrap();
    for bind_now in ["", "1"] {
        let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", c), ("LD_BIND_NOW", bind_now)]);
        assert_eq!(out, want(&[]), "file-read mode, LD_BIND_NOW={bind_now}");
        for k in 0..2 {
            assert!(
                dbg.contains(&format!("dlopen group {k}: ")) && dbg.contains("their bindings from the cache"),
                "{dbg}"
            );
        }
        assert!(!dbg.contains("normal loading"), "{dbg}");
    }

    // Skip Mode: both groups' images skipped (skip_for verifies every word).
    let (skip_cache, images) = skip_for(&dir, &prog, &[], &[]);
    let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", skip_cache.to_str().unwrap())]);
    assert_eq!(out, want(&[]), "skip mode");
    assert!(skip_mode(&dbg), "{dbg}");
    for k in 0..2 {
        assert!(dbg.contains(&format!("dlopen group {k}: skip mode")), "group {k} not skipped: {dbg}");
    }

    // Another first dlopen: every group loads as usual.
    let (out, dbg) = start(ld, &prog, &["other"], &[("LD_DDLINK", c)]);
    assert_eq!(out, want(&["other"]));
    assert!(file_read(&dbg) && dbg.contains("dlopen group 0: it loaded another number of objects"), "{dbg}");
    assert!(dbg.contains("dlopen group 0 and later: normal loading"), "{dbg}");

    // An object unloaded: recorded up to there, and the run the same.
    let rec = dir.join("unload.record");
    let unload_cache = dir.join("unload.cache");
    TestCommand::new(&[&"ddlink", &"profile", &"--loader", ld, &"-o", &rec, &prog, &"unload"]).ok();
    write_cmd(&rec, &prog, &unload_cache).ok();
    let u = format::decode(&std::fs::read(&unload_cache).unwrap()).unwrap();
    assert_eq!(u.groups.len(), 1, "the record went on after an object was unloaded: {:?}", u.groups);
    let (out, dbg) = start(ld, &prog, &["unload"], &[("LD_DDLINK", unload_cache.to_str().unwrap())]);
    assert_eq!(out, want(&["unload"]));
    assert!(dbg.contains("dlopen group 0: 1 objects, their bindings from the cache"), "{dbg}");
    assert!(dbg.contains("dlopen group 1 and later: normal loading: objects were unloaded"), "{dbg}");

    // A group's entry bound to another symbol's definition: checked before
    // use, the group loads as usual, and verify says it was not checked.
    let find = |c: &Cache, suffix: &str| c.objects.iter().position(|o| o.name.ends_with(suffix)).unwrap();
    let (plug1, pdep, libb) =
        (find(&decoded, "libddplug1.so"), find(&decoded, "libddpdep.so"), find(&decoded, "libddb.so"));
    let names = |i: usize| ObjFile::read(Path::new(&decoded.objects[i].name)).unwrap().names;
    let (plug1_names, pdep_names, libb_names) = (names(plug1), names(pdep), names(libb));
    let sym = |n: &[String], name: &str| n.iter().position(|x| x == name).unwrap() as u32;
    // plug1's bindings of liba_calls_b (its table's pointer and its PLT
    // slot: the call is direct) moved to another definition.
    let retarget = |to_obj: usize, to_sym: u32, out: &Path| {
        let mut x = decoded.clone();
        let mut moved = 0;
        for e in x.objects[plug1].entries.iter_mut() {
            if e.symidx == sym(&plug1_names, "liba_calls_b") && e.defobj as usize == libb {
                assert_eq!(e.defsym, sym(&libb_names, "liba_calls_b"));
                (e.defobj, e.defsym) = (to_obj as u16, to_sym);
                moved += 1;
            }
        }
        assert!(moved > 0, "plug1's binding of liba_calls_b to libddb is not in the cache");
        std::fs::write(out, format::encode(&x).unwrap()).unwrap();
        (out.to_str().unwrap().to_string(), moved)
    };
    let (other_name, _) = retarget(pdep, sym(&pdep_names, "pdep_value"), &dir.join("renamed.cache"));
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", &other_name)]);
    assert_eq!(out, want(&[]));
    assert!(dbg.contains("a binding names a symbol of another name: liba_calls_b"), "{dbg}");
    assert!(dbg.contains("dlopen group 0 and later: normal loading"), "{dbg}");
    let v = TestCommand::new(&[&"ddlink", &"verify", &"--json", &"--loader", ld, &"--cache", &other_name, &prog])
        .cmd_output();
    assert!(!v.status.success(), "verify passed a cache whose groups were not used");
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!((v["groups"].as_u64(), v["groups_checked"].as_u64()), (Some(2), Some(0)), "{v}");

    // The same name in pdep (which loses to libddb's): File Read Mode
    // applies it (the output shows it), verify reports it.
    let (wrong, moved) = retarget(pdep, sym(&pdep_names, "liba_calls_b"), &dir.join("wrong.cache"));
    let (out, _) = start(ld, &prog, &[], &[("LD_DDLINK", &wrong)]);
    assert!(out.starts_with("plug1=1081 "), "the wrong group entry was not applied, so this proves nothing: {out}");
    let v =
        TestCommand::new(&[&"ddlink", &"verify", &"--json", &"--loader", ld, &"--cache", &wrong, &prog]).cmd_output();
    assert!(!v.status.success(), "verify passed a wrong group entry");
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert!(v["mismatches"].to_string().contains("liba_calls_b cache=") && v["mismatched"] == moved, "{v}");
}

/// Every fallback: normal loading, the loader's reason, identical output.
#[test]
fn fallbacks_load_normally() {
    let dir = common::tmpdir("ddlink-fallback");
    let prog = playground(&dir);
    let cache = cache_for(&dir, &prog, &[]);
    let want = PLAYGROUND_OUTPUT;
    let ld = &glibc().ld_so;
    let bytes = std::fs::read(&cache).unwrap();
    let check = |cache: &Path, env: &[(&str, &str)], why: &str| {
        let mut e = vec![("LD_DDLINK", cache.to_str().unwrap())];
        e.extend_from_slice(env);
        let (out, dbg) = start(ld, &prog, &[], &e);
        assert_eq!(out, want, "fallback `{why}` changed the output");
        normal_because(&dbg, why);
    };

    // truncated, corrupt
    let t = dir.join("truncated.cache");
    std::fs::write(&t, &bytes[..bytes.len() / 2 / 8 * 8]).unwrap();
    check(&t, &[], "truncated");
    std::fs::write(&t, &bytes[..100]).unwrap();
    check(&t, &[], "impossible size");
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 1;
    let c = dir.join("corrupt.cache");
    std::fs::write(&c, &flipped).unwrap();
    check(&c, &[], "checksum");
    // environment
    let libb = dir.join("libddb.so");
    // (a preload that changes no binding: the fallback must not depend on it)
    let uniq = dir.join("libdduniq.so");
    check(&cache, &[("LD_PRELOAD", uniq.to_str().unwrap())], "LD_PRELOAD");
    check(&cache, &[("LD_LIBRARY_PATH", dir.to_str().unwrap())], "LD_LIBRARY_PATH");
    check(&cache, &[("LD_DYNAMIC_WEAK", "1")], "LD_DYNAMIC_WEAK");
    // a cache others can write, or not owned by root
    let w = dir.join("writable.cache");
    std::fs::write(&w, &bytes).unwrap();
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o666)).unwrap();
    check(&w, &[], "writable by others");
    // a cache of another program: Debian's /bin/true under the same loader
    let other_rec = dir.join("true.record");
    let other = dir.join("true.cache");
    TestCommand::new(&[&"ddlink", &"profile", &"--loader", ld, &"-o", &other_rec, &"/bin/true"]).ok();
    TestCommand::new(&[
        &"ddlink",
        &"write",
        &"--loader",
        ld,
        &"--record",
        &other_rec,
        &"--program",
        &"/bin/true",
        &"-o",
        &other,
    ])
    .ok();
    check(&other, &[], "another");
    // a library replaced after profiling: same content, new inode and mtime
    let copy = dir.join("libddb.so.new");
    std::fs::copy(&libb, &copy).unwrap();
    std::fs::rename(&copy, &libb).unwrap();
    check(&cache, &[], "file changed");
    let out = TestCommand::new(&[&"ddlink", &"status", &"--json", &"--loader", ld, &"--cache", &cache, &prog]).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "normal", "{v}");
    let bad: Vec<&serde_json::Value> =
        v["objects"].as_array().unwrap().iter().filter(|o| !o["problem"].is_null()).collect();
    assert_eq!(bad.len(), 1, "status should blame exactly libddb.so: {v}");
    assert!(bad[0]["name"].as_str().unwrap().ends_with("libddb.so"));
    // and `write` refuses the stale record
    let rec = dir.join("ddlink-play.record");
    let err = write_cmd(&rec, &prog, &dir.join("x.cache")).fails_with("profile again");
    assert!(err.contains("libddb.so"), "{err}");
    assert!(!dir.join("x.cache").exists(), "a refused write left a cache");
}

/// Before it uses any binding, ld.so checks every one against the loaded
/// objects' real symbol tables: a cache whose index points past a
/// library's symbol table (the cache claiming a bigger table), or at a
/// symbol of another name than the stored name hash, or that binds a
/// reference to another symbol (the stored hash that symbol's), is refused
/// for the whole program, which runs as usual through the normal lookup;
/// the debug line names the symbol the binding refers to.
#[test]
fn bindings_past_a_symbol_table_or_to_another_name_are_refused() {
    let dir = common::tmpdir("ddlink-bounds");
    let prog = playground(&dir);
    let cache = cache_for(&dir, &prog, &[]);
    let ld = &glibc().ld_so;
    let good: Cache = format::decode(&std::fs::read(&cache).unwrap()).unwrap();
    let a = good.objects.iter().position(|o| o.name.ends_with("libdda.so")).unwrap();
    let a_file = ObjFile::read(Path::new(&good.objects[a].name)).unwrap();
    let main_file = ObjFile::read(&prog).unwrap();
    let sym = |f: &ObjFile, n: &str| f.names.iter().position(|x| x == n).unwrap() as u32;
    let which_ref = sym(&main_file, "which");
    // The program's binding of `which`, changed by `edit`, then run.
    let run_with = |name: &str, edit: &dyn Fn(&mut Cache, usize)| -> String {
        let mut c = good.clone();
        let k = c.objects[0]
            .entries
            .iter()
            .position(|e| e.symidx == which_ref && e.defobj as usize == a)
            .expect("the program's binding of `which` to libdda.so is in the cache");
        edit(&mut c, k);
        let path = dir.join(name);
        std::fs::write(&path, format::encode(&c).unwrap()).unwrap();
        let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", path.to_str().unwrap())]);
        assert_eq!(out, PLAYGROUND_OUTPUT, "{name}: the program did not run as usual");
        assert!(!file_read(&dbg), "{name}: the loader used the cache: {dbg}");
        dbg
    };
    // Past libdda.so's table: the cache claims 16 more symbols than the
    // file has and binds `which` to one of them.
    let real = a_file.nsyms();
    let dbg = run_with("past-the-table.cache", &|c, k| {
        c.objects[a].nsyms = real + 16;
        c.objects[0].entries[k].defsym = real + 8;
    });
    let line = normal_because(&dbg, "symbol table has another size");
    assert!(line.contains("libdda.so"), "{line}");
    // Inside the table, at `liba_value` while the stored hash is `which`'s.
    let other = sym(&a_file, "liba_value");
    let dbg = run_with("another-name.cache", &|c, k| c.objects[0].entries[k].defsym = other);
    let line = normal_because(&dbg, "a symbol of another name");
    assert!(line.contains("the program") && line.ends_with(": which"), "{line}");
    // Retargeted whole: `which` bound to `liba_value` with that symbol's
    // own hash, so the definition's name matches the cache; the name the
    // program refers to is another (glibc/patches 0008 compares the two).
    let dbg = run_with("retargeted.cache", &|c, k| {
        c.objects[0].entries[k].defsym = other;
        c.objects[0].entries[k].name_hash = format::name_hash(b"liba_value");
    });
    let line = normal_because(&dbg, "a binding joins a reference to a definition of another name");
    assert!(line.contains("the program") && line.ends_with(": which"), "{line}");
    // The unchanged cache is used (the refusals above are the check's).
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", cache.to_str().unwrap())]);
    assert_eq!(out, PLAYGROUND_OUTPUT);
    assert!(file_read(&dbg), "{dbg}");
}

/// A cache for a root file system image (`write --portable`, glibc/patches 0006:
/// no device and inode) identifies each library by name, size, mtime in
/// seconds and build ID: a library changed with the same name and size is
/// refused, whether its mtime or its content and build ID differ.
#[test]
fn portable_cache_refuses_a_changed_file_of_the_same_size() {
    let dir = common::tmpdir("ddlink-portable");
    let prog = playground(&dir);
    cache_for(&dir, &prog, &[]);
    let ld = &glibc().ld_so;
    let rec = dir.join("ddlink-play.record");
    let cache = dir.join("portable.cache");
    write_cmd(&rec, &prog, &cache).arg(&"--portable").ok();
    let c = cache.to_str().unwrap();
    let decoded = format::decode(&std::fs::read(&cache).unwrap()).unwrap();
    assert!(decoded.objects.iter().all(|o| o.identity.dev == 0 && o.identity.ino == 0), "not portable");
    let libb = dir.join("libddb.so");
    // A fresh copy (another inode) is still the same file for this cache.
    let original = std::fs::read(&libb).unwrap();
    let mtime = std::fs::metadata(&libb).unwrap().modified().unwrap();
    let replace = |bytes: &[u8], mtime: std::time::SystemTime| {
        let tmp = dir.join("libddb.so.new");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::File::options().write(true).open(&tmp).unwrap().set_modified(mtime).unwrap();
        std::fs::rename(&tmp, &libb).unwrap();
    };
    replace(&original, mtime);
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", c)]);
    assert_eq!(out, PLAYGROUND_OUTPUT);
    assert!(file_read(&dbg), "a copy with the same name, size, mtime and build ID was refused: {dbg}");
    // Same content, another mtime.
    replace(&original, mtime + std::time::Duration::from_secs(2));
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", c)]);
    assert_eq!(out, PLAYGROUND_OUTPUT);
    normal_because(&dbg, "file changed");
    // Same size and mtime, other content: one byte of the build ID note.
    let id = ObjFile::read(&libb).unwrap().build_id;
    assert!(!id.is_empty(), "libddb.so has no build ID");
    let at = original.windows(id.len()).position(|w| w == id.as_slice()).expect("the build ID in the file");
    let mut changed = original.clone();
    changed[at] ^= 0xff;
    replace(&changed, mtime);
    assert_eq!(std::fs::metadata(&libb).unwrap().len(), original.len() as u64);
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", c)]);
    assert_eq!(out, PLAYGROUND_OUTPUT);
    normal_because(&dbg, "build ID");
}

/// Relocation Skip Mode on the playground (lazy and BIND_NOW), and every way
/// it falls back: the images are ordinary libraries (Debian's ld.so and the
/// patched one without a cache run them, lazily, through GOT[1]'s PLT
/// base), an image not at its base is relocated as usual with the cache's
/// bindings, the skip cache without its images, an image changed after it
/// was written, LD_PRELOAD: the output never changes.
#[test]
fn playground_skip_mode_and_its_fallbacks() {
    let dir = common::tmpdir("ddlink-skip");
    let prog = playground(&dir.join("pg"));
    let (cache, images) = skip_for(&dir, &prog, &[], &[]);
    let ld = &glibc().ld_so;
    let c = cache.to_str().unwrap();
    let want = PLAYGROUND_OUTPUT;
    for extra in [&[][..], &[("LD_BIND_NOW", "1")][..]] {
        let mut env = vec![("LD_DDLINK", c)];
        env.extend_from_slice(extra);
        let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &env);
        assert!(skip_mode(&dbg), "skip mode not used {extra:?}: {dbg}");
        assert_eq!(out, want, "skip mode {extra:?}");
    }
    let (out, _) = start_in(Some(&images), Path::new(DEBIAN_LD_SO), &prog, &[], &[]);
    assert_eq!(out, want, "the images under Debian's ld.so (lazy)");
    let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", "/nonexistent")]);
    assert_eq!(out, want, "the images under the patched ld.so without a cache");
    normal_because(&dbg, "no cache");

    // Not at its base: 0x1000 is below the kernel's mmap_min_addr.
    let low_cache = dir.join("low.cache");
    let low = dir.join("low-images");
    let rec = dir.join("ddlink-play.skip-record");
    write_cmd(&rec, &prog, &low_cache).arg(&"--prelink").arg(&low).arg(&"--base").arg(&"0x1000").ok();
    let (out, dbg) = start_in(Some(&low), ld, &prog, &[], &[("LD_DDLINK", low_cache.to_str().unwrap())]);
    assert_eq!(out, want, "images not at their base");
    assert!(file_read(&dbg) && dbg.contains("not mapped at its base"), "{dbg}");

    // The skip cache with the original files (not the images it names).
    let (out, dbg) = start(ld, &prog, &[], &[("LD_DDLINK", c)]);
    assert_eq!(out, want);
    normal_because(&dbg, "file changed");

    // An image changed after it was written (here: only its mtime).
    let libb =
        bootlink::ddlink::prelink::image_path(&images, prog.parent().unwrap().join("libddb.so").to_str().unwrap());
    common::sh("touch", &["-d", "2020-01-01", libb.to_str().unwrap()]);
    let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", c)]);
    assert_eq!(out, want);
    normal_because(&dbg, "file changed");
    let st = overlay_cmd("status", &cache, &images).arg(&prog).ok();
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let bad: Vec<&serde_json::Value> =
        v["objects"].as_array().unwrap().iter().filter(|o| !o["problem"].is_null()).collect();
    assert!(bad.len() == 1 && bad[0]["name"].as_str().unwrap().ends_with("libddb.so"), "status: {v}");

    // LD_PRELOAD turns DDLink off; the images are relocated as usual.
    let uniq = prog.parent().unwrap().join("libdduniq.so");
    let (out, dbg) =
        start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", c), ("LD_PRELOAD", uniq.to_str().unwrap())]);
    assert_eq!(out, want);
    normal_because(&dbg, "LD_PRELOAD");
}

/// A setuid program ignores every cache (even one in the default place),
/// while the same program run by its owner uses it: the wrong cache makes
/// the difference visible without LD_DEBUG (which AT_SECURE turns off).
#[test]
fn setuid_program_ignores_the_cache() {
    if !Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n") {
        common::skip("setuid_program_ignores_the_cache", "needs root to make a setuid-root program");
        return;
    }
    let dir = common::tmpdir("ddlink-setuid");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = playground(&dir);
    let cache = cache_for(&dir, &prog, &[]);
    // The default place: SYSCONFDIR/ld.so.ddlink/<build id of the program>.
    let id = ObjFile::read(&prog).unwrap().build_id;
    let default = glibc().prefix.join("etc/ld.so.ddlink").join(bootlink::ddlink::record::hex(&id));
    std::fs::create_dir_all(default.parent().unwrap()).unwrap();
    wrong_cache(&cache, &prog, &default);
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _cleanup = Remove(default.clone());
    // Started by the kernel through PT_INTERP, by root: the default cache is used.
    let out = Command::new(&prog).env_clear().output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("which=libb "), "default cache not used: {out:?}");
    // setuid root, started by nobody: AT_SECURE, normal loading.
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .arg(&prog)
        .env_clear()
        .output()
        .expect("setpriv");
    assert_eq!(String::from_utf8_lossy(&out.stdout), PLAYGROUND_OUTPUT, "the setuid program used the cache: {out:?}");
}

/// What the interpreter case runs: numpy's, lxml's and libyaml's C
/// extensions imported (dlopen: relocated as usual, DDLink covers the
/// interpreter's startup objects) and used, so the output shows them work.
const PYTHON_IMPORTS: &str = "import numpy, lxml.etree, yaml; print(numpy.arange(10).sum(), \
    lxml.etree.tostring(lxml.etree.fromstring('<a><b/></a>')).decode(), \
    yaml.dump(yaml.load('a: [1, 2]', Loader=yaml.CLoader)), end='')";

/// Real Debian programs (a compiler, a C++ GTK GUI, a Qt GUI): every
/// binding and every image word verified, output identical in every mode.
/// A program not installed is skipped.
#[test]
fn real_programs_identical_in_every_mode() {
    let dir = common::tmpdir("ddlink-real");
    // qbittorrent is a Qt GUI: its --version starts Qt, which needs a platform.
    let qt: &[(&str, &str)] = &[("QT_QPA_PLATFORM", "offscreen")];
    real_program_in_every_mode(&dir, "real_programs_identical_in_every_mode", "/usr/bin/llc-14", &["--version"], &[]);
    real_program_in_every_mode(&dir, "real_programs_identical_in_every_mode", "/usr/bin/inkscape", &["--version"], &[]);
    real_program_in_every_mode(
        &dir,
        "real_programs_identical_in_every_mode",
        "/usr/bin/qbittorrent",
        &["--version"],
        qt,
    );
}

/// A browser of 100+ libraries (Debian's chromium: the program itself a
/// PIE of about a million relative relocations, imaged too).
#[test]
fn browser_identical_in_every_mode() {
    let dir = common::tmpdir("ddlink-browser");
    let prog = "/usr/lib/chromium/chromium";
    real_program_in_every_mode(&dir, "browser_identical_in_every_mode", prog, &["--version"], &[]);
}

/// An interpreter importing C extensions (python3.11 with numpy, lxml and
/// yaml): the startup objects and the extensions (dlopen groups) from the
/// cache and images; the output, which uses each extension, the same.
#[test]
fn interpreter_with_c_extensions_identical_in_every_mode() {
    let test = "interpreter_with_c_extensions_identical_in_every_mode";
    let prog = "/usr/bin/python3.11";
    if !Command::new(prog).args(["-c", "import numpy, lxml.etree, yaml"]).status().is_ok_and(|s| s.success()) {
        common::skip(test, "python3-numpy, python3-lxml or python3-yaml is not installed");
        return;
    }
    let dir = common::tmpdir("ddlink-python");
    real_program_in_every_mode(&dir, test, prog, &["-c", PYTHON_IMPORTS], &[]);
}

/// A server (PostgreSQL 15's postgres, 40 libraries: ICU, OpenSSL, LDAP, Kerberos).
#[test]
fn server_identical_in_every_mode() {
    let dir = common::tmpdir("ddlink-server");
    let prog = "/usr/lib/postgresql/15/bin/postgres";
    real_program_in_every_mode(&dir, "server_identical_in_every_mode", prog, &["--version"], &[]);
}

/// `prog` profiled, its File Read Mode cache and its Skip Mode cache and
/// images written and verified (0 differences in bindings and words), its
/// output under the patched ld.so without a cache, File Read Mode and Skip
/// Mode the same as under Debian's ld.so (and not empty); skipped (counted
/// against `test`) when not installed.
fn real_program_in_every_mode(dir: &Path, test: &str, prog: &str, args: &[&str], env: &[(&str, &str)]) {
    let prog = Path::new(prog);
    if !prog.is_file() {
        common::skip(test, &format!("{} is not installed", prog.display()));
        return;
    }
    let cache = cache_for_env(dir, prog, args, env);
    let c = cache.to_str().unwrap();
    let mut plain_env = env.to_vec();
    plain_env.push(("LD_DDLINK", "/nonexistent"));
    let mut fast_env = env.to_vec();
    fast_env.push(("LD_DDLINK", c));
    let (stock, _) = start(Path::new(DEBIAN_LD_SO), prog, args, env);
    let (plain, _) = start(&glibc().ld_so, prog, args, &plain_env);
    let (fast, dbg) = start(&glibc().ld_so, prog, args, &fast_env);
    assert!(file_read(&dbg), "{}: {dbg}", prog.display());
    // Every dlopen group of the cache used.
    let groups = format::decode(&std::fs::read(&cache).unwrap()).unwrap().groups.len();
    let used = |dbg: &str| dbg.matches("their bindings from the cache").count();
    assert_eq!(used(&dbg), groups, "{}: {dbg}", prog.display());
    assert_eq!(plain, stock, "{}: patched loader output differs", prog.display());
    assert_eq!(fast, stock, "{}: file-read output differs", prog.display());
    let (skip_cache, images) = skip_for(dir, prog, args, env);
    let mut skip_env = env.to_vec();
    skip_env.push(("LD_DDLINK", skip_cache.to_str().unwrap()));
    let (skipped, dbg) = start_in(Some(&images), &glibc().ld_so, prog, args, &skip_env);
    assert!(skip_mode(&dbg), "{}: {dbg}", prog.display());
    assert_eq!(used(&dbg), groups, "{}: {dbg}", prog.display());
    assert!(!dbg.contains("normal loading") && !dbg.contains("relocating its"), "{}: {dbg}", prog.display());
    assert_eq!(skipped, stock, "{}: skip-mode output differs", prog.display());
    assert!(!stock.is_empty(), "{} printed nothing: the comparison shows nothing", prog.display());
    std::fs::remove_dir_all(&images).unwrap();
}

/// `ddlink measure` in every mode with prelinked images that include a
/// marked DT_RELR image of a library perf links too (Debian's libm, imaged
/// for python3.11): perf runs inside the images' namespace, and Debian's
/// ld.so refuses a marked image (glibc patch 0009), so perf is started by
/// the patched loader there. Each mode measured each run (task-clock and
/// page faults of every run), the output identical, Skip Mode used.
#[test]
fn measure_every_mode_with_a_marked_image_perf_links() {
    let dir = common::tmpdir("ddlink-measure");
    let prog = Path::new("/usr/bin/python3.11");
    let args = ["-c", "import math; print(math.sqrt(2))"];
    let cache = cache_for(&dir, prog, &args);
    let (skip_cache, images) = skip_for(&dir, prog, &args, &[]);
    let libm = images.join("lib/x86_64-linux-gnu/libm.so.6");
    assert!(libm.is_file(), "libm was not imaged, so this test shows nothing: {}", images.display());
    let out = dir.join("measure.json");
    let ld = &glibc().ld_so;
    TestCommand::new(&[
        &"ddlink",
        &"measure",
        &"--loader",
        ld,
        &"--cache",
        &cache,
        &"--skip-cache",
        &skip_cache,
        &"--overlay",
        &images,
        &"--runs",
        &"3",
        &"-o",
        &out,
        &prog,
        &args[0],
        &args[1],
    ])
    .ok();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let modes = v["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["debian ld.so", "patched, no cache", "file-read", "skip"], "{v}");
    for m in modes {
        assert_eq!(m["output_identical"], true, "{m}");
        assert!(m["task_clock"]["min"].as_f64().unwrap() > 0.0, "a run without task-clock: {m}");
        assert!(m["page_fault_spread"]["min"].as_f64().unwrap() > 0.0, "a run without page faults: {m}");
        let lookups = (m["startup_lookups"].as_u64().unwrap(), m["lookups"].as_u64().unwrap());
        assert!(lookups.0 <= lookups.1, "more lookups at startup than by exit: {m}");
    }
    assert!(modes[3]["ddlink"].as_str().unwrap().contains("skip mode"), "{}", modes[3]);
    // File Read Mode and Skip Mode take the startup bindings from the cache.
    let startup = |m: usize| modes[m]["startup_lookups"].as_u64().unwrap();
    assert!(startup(2) < startup(0) && startup(3) < startup(0), "{v}");
}

/// The synthetic case at the size the tier-3 boot uses (12 libraries,
/// 50,000 symbols: one build serves both; the seed's own 200,000 are the
/// extended tier's, tests/extended/ddlink_seed.rs): every binding and every
/// relocated word verified, the same output under Debian's ld.so, the
/// patched one, File Read Mode and Skip Mode.
#[test]
fn synthetic_case_identical_in_every_mode() {
    identical_in_every_mode(&common::tmpdir("ddlink-synth"), SHARED_SYMBOLS);
}

/// The counts of LD_DEBUG=ddlink's last line: (objects prelinked, whether
/// the program's relocation was skipped, DT_RELR passes skipped, moved).
fn final_counts(dbg: &str) -> (u64, bool, u64, u64) {
    let line = dbg.lines().find(|l| l.contains("objects prelinked (program")).unwrap_or_else(|| panic!("{dbg}"));
    let num = |after: &str| -> u64 {
        let rest = &line[line.find(after).unwrap_or_else(|| panic!("{after}: {line}")) + after.len()..];
        rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    let prelinked = line.split(" objects prelinked").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    (prelinked, line.contains("(program included)"), num("DT_RELR passes:"), num("skipped,"))
}

/// `argv` started directly (the kernel maps the program, its PT_INTERP the
/// patched ld.so) with the images under `images` bind-mounted, as
/// `--overlay` does, and `env`: (exit status, stdout, stderr).
fn exec_in(images: &Path, argv: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "--", "sh", "-c"]);
    c.arg(r#"while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 126; shift 2; done; shift; exec "$@""#);
    c.arg("sh");
    for image in bootlink::ddlink::run::overlay_files(images) {
        c.arg(&image).arg(Path::new("/").join(image.strip_prefix(images).unwrap()));
    }
    c.arg("--").args(argv);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("LD_") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Skip Mode for the whole program (glibc patch 0009): the playground's
/// ddlink-relr (a PIE and a library, both with DT_RELR, a copy relocation)
/// with the patched libc (DT_RELR) all imaged; `verify` compares every
/// relocated word with a normal relocation and every DT_RELR word with the
/// original's plus the base (0 differences); in Skip Mode the program's
/// relocation and every DT_RELR pass is skipped (LD_DEBUG=ddlink's
/// counts), the output unchanged; the program not at its base (or started
/// by the kernel) is relocated as usual, its DT_RELR words moved by the
/// difference only; Debian's ld.so refuses the marked library rather than
/// relocating it twice.
#[test]
fn whole_program_skip_mode_with_relr() {
    let dir = common::tmpdir("ddlink-relr");
    let pg = dir.join("pg");
    playground(&pg);
    let prog = pg.join("ddlink-relr");
    let (want, _) = start(Path::new(DEBIAN_LD_SO), &prog, &[], &[]);
    assert!(want.contains("counter 42"), "{want}");
    let (cache, images) = skip_for(&dir, &prog, &[], &[]);
    let decoded = format::decode(&std::fs::read(&cache).unwrap()).unwrap();
    use bootlink::ddlink::format::{OBJ_MAIN, OBJ_PRELINKED, OBJ_RELR};
    assert_eq!(decoded.objects[0].flags & (OBJ_MAIN | OBJ_PRELINKED | OBJ_RELR), OBJ_MAIN | OBJ_PRELINKED | OBJ_RELR);
    let relr_images = decoded.objects.iter().filter(|o| o.flags & OBJ_RELR != 0).count();
    assert!(relr_images >= 3, "the program, libddr and libc: {relr_images}");
    let out = overlay_cmd("verify", &cache, &images).arg(&prog).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["images_compared"], v["images"], "{v}");
    assert!(v["relr_words_checked"].as_u64().unwrap() > 1000, "libc's DT_RELR words too: {v}");
    assert!(v["image_differences"].as_array().unwrap().is_empty(), "{v}");

    let ld = &glibc().ld_so;
    let c = cache.to_str().unwrap();
    for bind_now in ["", "1"] {
        let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", c), ("LD_BIND_NOW", bind_now)]);
        assert_eq!(out, want, "skip mode, LD_BIND_NOW={bind_now}");
        assert!(skip_mode(&dbg) && dbg.contains("skip mode: the program too"), "{dbg}");
        let (prelinked, program, skipped, moved) = final_counts(&dbg);
        assert!(program && prelinked as usize == decoded.objects.len() - 1, "{dbg}");
        assert!(skipped as usize >= relr_images && moved == 0, "{dbg}");
    }

    // The program not at its base (0x1000 is below mmap_min_addr): it is
    // relocated as usual, its DT_RELR words moved by the difference; the
    // libraries (after the heap gap, free) keep Skip Mode.
    let low_cache = dir.join("low.cache");
    let low = dir.join("low-images");
    let rec = dir.join("ddlink-relr.skip-record");
    write_cmd(&rec, &prog, &low_cache).arg(&"--prelink").arg(&low).arg(&"--base").arg(&"0x1000").ok();
    let (out, dbg) = start_in(Some(&low), ld, &prog, &[], &[("LD_DDLINK", low_cache.to_str().unwrap())]);
    assert_eq!(out, want, "the program not at its base");
    assert!(dbg.contains("relocating the program as usual: not mapped at its base"), "{dbg}");
    let (_, program, _, moved) = final_counts(&dbg);
    assert!(!program && moved == 1, "{dbg}");

    // Started by the kernel (at a random address) with the images in place:
    // the same, found from the program's own ELF header.
    let dbgdir = tempfile::tempdir().unwrap();
    let dbgfile = dbgdir.path().join("d");
    let (ok, out, err) = exec_in(
        &images,
        &[prog.to_str().unwrap()],
        &[("LD_DDLINK", c), ("LD_DEBUG", "ddlink"), ("LD_DEBUG_OUTPUT", dbgfile.to_str().unwrap())],
    );
    assert!(ok, "{err}");
    assert_eq!(out, want, "started by the kernel");
    let dbg: String = std::fs::read_dir(dbgdir.path())
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(dbg.contains("relocating the program as usual: started by the kernel"), "{dbg}");
    assert!(dbg.contains("the program: DT_RELR words relocated for"), "{dbg}");

    // Without DDLink (no cache) the marked images still load exactly.
    let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", "/nonexistent")]);
    assert_eq!(out, want, "the images, no cache");
    normal_because(&dbg, "no cache");

    // The program's image changed after it was written (here: only its
    // mtime): not the image the cache names, so it is relocated as usual
    // (its DT_RELR words moved), the libraries keep Skip Mode.
    let prog_image = bootlink::ddlink::prelink::image_path(&images, prog.to_str().unwrap());
    common::sh("touch", &["-d", "2020-01-01", prog_image.to_str().unwrap()]);
    let (out, dbg) = start_in(Some(&images), ld, &prog, &[], &[("LD_DDLINK", c)]);
    assert_eq!(out, want, "a changed program image");
    assert!(dbg.contains("relocating the program as usual: not the image the cache names"), "{dbg}");
    let (_, program, _, moved) = final_counts(&dbg);
    assert!(!program && moved == 1, "{dbg}");

    // Debian's ld.so does not know the mark: it refuses the marked file,
    // naming it, instead of adding the base a second time.
    let (ok, _, err) = exec_in(&images, &[DEBIAN_LD_SO, prog.to_str().unwrap()], &[]);
    assert!(!ok && err.contains("ddlink-relr: nonzero padding in e_ident"), "{err}");
}
