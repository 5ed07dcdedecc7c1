//! Module sets for the lab: which modules a boot loads, and in what order,
//! worked out by bootlink itself from the modules' `.modinfo` (no modprobe,
//! no depmod).
//!
//! A [`ModTree`] reads every module of a tree (`lib/modules/<release>`) once,
//! in parallel, and indexes it by module name and by `alias=` entries; the
//! tree's `modules.builtin` and `modules.builtin.modinfo` tell which names
//! and aliases the kernel has built in. [`ModTree::resolve`] turns requested
//! names into a load order in which every module comes after its hard
//! dependencies (`depends=`) and its soft pre-dependencies (`softdep=pre:`),
//! each module once. Soft post-dependencies (`softdep=post:`) follow the
//! module, as modprobe loads them.
//!
//! A name is a module's name, else an alias. An alias several modules
//! provide (`crc32c`: crc32c_generic and crc32c_intel) resolves to one,
//! deterministically: one whose name is the alias, else `<alias>_generic`
//! (both also tried without a `crypto-` prefix), else a built-in provider
//! (nothing to load), else the first module by name. Built-in modules count
//! as providers of the aliases `modules.builtin.modinfo` gives them (so
//! `sha256` is the built-in sha256_generic, not the sha256_ssse3 module).
//! Aliases with wildcards (device aliases such as `pci:v...*`) are not
//! indexed.
//!
//! What the modinfo does not say is not known here: a module that asks for
//! another at run time (`request_module`, `load_nls("koi8-u")`) needs it
//! listed by the caller.
//!
//! Fixed sets are list files, one path per line relative to
//! `lib/modules/<release>/`, `#` comments; [`NAMED_SETS`] holds the ones
//! bootlink ships (`data/`).

mod entry;
mod index;
mod list;
mod loaderplan;
mod plan;
mod request;

pub use entry::{Entry, Provider, parse_softdep};
pub use index::ModTree;
pub use list::{NAMED_SETS, named_set, named_set_paths, parse_list, read_list};
pub use loaderplan::{HEADER as LOADER_PLAN_HEADER, ModprobeConf, RUNTIME_DEPS, Written as WrittenPlan, write_plan};
pub use plan::{LoadPlan, OrderProblem, Step, Why};
pub use request::{PlanRequest, plan};

use std::path::Path;

/// Module names and aliases compare with '-' and '_' alike, as the kernel
/// and kmod do.
pub fn normalize(name: &str) -> String {
    name.trim().replace('-', "_")
}

/// A relative module path without its compression suffix, with '/'
/// separators: the key that matches a list line to a file of the tree.
fn rel_key(rel: &Path) -> String {
    let s = rel.to_string_lossy().replace('\\', "/");
    let suffix = crate::compress::Compression::of_module_name(rel).suffix();
    s.strip_suffix(suffix).map(str::to_string).unwrap_or(s)
}

pub(crate) fn has_wildcard(alias: &str) -> bool {
    alias.contains(['*', '?', '['])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    #[test]
    fn lists_parse_with_comments_and_refuse_bad_lines() {
        let l = parse_list("# a set\n\nkernel/fs/fat/fat.ko\n  kernel/fs/fat/vfat.ko.xz  \n# end\n").unwrap();
        assert_eq!(l, vec![PathBuf::from("kernel/fs/fat/fat.ko"), PathBuf::from("kernel/fs/fat/vfat.ko.xz")]);
        let e = parse_list("kernel/a.ko\n/abs/b.ko\n").unwrap_err().msg;
        assert!(e.contains("line 2") && e.contains("/abs/b.ko"), "{e}");
        assert!(parse_list("kernel/../x.ko\n").unwrap_err().msg.contains("'..'"));
        assert!(parse_list("kernel/readme.txt\n").unwrap_err().msg.contains("not a module file"));
        let e = parse_list("kernel/a.ko\n#\nkernel/a.ko.xz\n").unwrap_err().msg;
        assert!(e.contains("line 3") && e.contains("first on line 1"), "{e}");
    }

    #[test]
    fn softdeps_split_into_pre_and_post() {
        let (mut pre, mut post) = (Vec::new(), Vec::new());
        parse_softdep("pre: crc32c crypto-crc32c post: x", &mut pre, &mut post);
        parse_softdep("ignored pre:blake2b-256", &mut pre, &mut post);
        assert_eq!(pre, ["crc32c", "crypto-crc32c", "blake2b-256"]);
        assert_eq!(post, ["x"]);
        assert_eq!(normalize("nls_koi8-ru"), "nls_koi8_ru");
    }

    #[test]
    fn the_named_set_has_194_distinct_modules() {
        let l = named_set_paths("fs-nls-crypto-net-194").unwrap();
        assert_eq!(l.len(), 194);
        assert!(l.iter().all(|p| p.starts_with("kernel")));
        assert!(named_set_paths("nope").unwrap_err().msg.contains("fs-nls-crypto-net-194"));
    }

    fn entry(name: &str, depends: &[&str], soft: &str, aliases: &[&str]) -> Entry {
        let (mut soft_pre, mut soft_post) = (Vec::new(), Vec::new());
        parse_softdep(soft, &mut soft_pre, &mut soft_post);
        Entry {
            name: name.into(),
            path: PathBuf::from(format!("/t/kernel/{name}.ko")),
            rel: PathBuf::from(format!("kernel/{name}.ko")),
            depends: depends.iter().map(|s| s.to_string()).collect(),
            soft_pre,
            soft_post,
            aliases: aliases.iter().map(|s| s.to_string()).collect(),
            signed: false,
            preresolved: false,
        }
    }

    #[test]
    fn synthetic_orders_cycles_and_post_dependencies() {
        let t = ModTree::from_entries(
            Path::new("/t"),
            vec![
                entry("top", &["mid", "leaf"], "pre: hash post: after", &[]),
                entry("mid", &["leaf"], "", &[]),
                entry("leaf", &[], "", &[]),
                entry("hash_fast", &[], "", &["hash"]),
                entry("hash_generic", &[], "", &["hash"]),
                entry("after", &["top"], "", &[]),
                entry("loop_a", &["loop_b"], "", &[]),
                entry("loop_b", &["loop_a"], "", &[]),
                entry("lonely", &["ghost"], "pre: nobody", &[]),
                entry("soft_only", &[], "pre: nobody", &[]),
            ],
        );
        let p = t.resolve(&["top"]).unwrap();
        assert_eq!(p.names(), ["hash_generic", "leaf", "mid", "top", "after"]);
        assert_eq!(p.steps[0].why, Why::SoftPreOf("top".into(), "hash".into()));
        assert_eq!(p.steps[3].why, Why::Requested("top".into()));
        assert!(t.check_order(&p.entries()).is_empty());
        // Asking twice, or for a dependency first, loads each module once.
        assert_eq!(
            t.resolve(&["leaf", "top", "mid"]).unwrap().names(),
            ["leaf", "hash_generic", "mid", "top", "after"]
        );
        let e = t.resolve(&["loop_a"]).unwrap_err().msg;
        assert!(e.contains("dependency cycle: loop_a -> loop_b -> loop_a"), "{e}");
        let e = t.resolve(&["lonely"]).unwrap_err().msg;
        assert!(e.contains("lonely") && e.contains("depends on ghost"), "{e}");
        let p = t.resolve(&["soft_only"]).unwrap();
        assert_eq!(p.missing_soft, [("soft_only".to_string(), "nobody".to_string())]);
        let e = t.resolve(&["leaf", "no-such-module"]).unwrap_err().msg;
        assert!(e.contains("\"no-such-module\" not found"), "{e}");
        let bad: Vec<&Entry> = ["top", "leaf", "mid"].iter().map(|n| t.module(n).unwrap()).collect();
        let problems = t.check_order(&bad);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(!problems[0].soft && problems[0].module == "top", "{problems:?}");
        assert_eq!(problems[0].message, "top (#1) comes before its dependency mid (#3)");
        let soft: Vec<&Entry> = ["hash_fast", "top", "hash_generic"].iter().map(|n| t.module(n).unwrap()).collect();
        assert!(t.check_order(&soft).iter().all(|p| !p.soft), "another provider of the alias came first");
        let late: Vec<&Entry> = ["leaf", "mid", "top", "hash_generic"].iter().map(|n| t.module(n).unwrap()).collect();
        let problems = t.check_order(&late);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].soft && problems[0].message.contains("soft pre-dependency hash (hash_generic #4)"),
            "{problems:?}"
        );
    }

    #[test]
    fn unreadable_modules_are_errors_only_when_needed() {
        let f = crate::fetch::fetch(&crate::fetch::Request::Reference).expect("fetch the reference kernel");
        let tmp = tempfile::tempdir().unwrap();
        let fat = tmp.path().join("kernel/fs/fat");
        std::fs::create_dir_all(&fat).unwrap();
        for m in ["fat.ko", "vfat.ko"] {
            std::fs::copy(f.modules.join("kernel/fs/fat").join(m), fat.join(m)).unwrap();
        }
        std::fs::write(fat.join("msdos.ko"), b"not an ELF file").unwrap();
        std::fs::write(tmp.path().join("modules.builtin"), "kernel/fs/nls/nls_base.ko\n").unwrap();
        let t = ModTree::read(tmp.path()).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.unreadable().len(), 1);
        assert_eq!(t.resolve(&["vfat", "nls-base"]).unwrap().names(), ["fat", "vfat"]);
        let e = t.resolve(&["msdos"]).unwrap_err().to_string();
        assert!(e.contains("msdos.ko") && e.contains("module msdos is needed but could not be read"), "{e}");
        let e = t.from_list(&[PathBuf::from("kernel/fs/fat/msdos.ko")]).unwrap_err().to_string();
        assert!(e.contains("msdos.ko") && e.contains("could not be read"), "{e}");
        let list = t.from_list(&parse_list("kernel/fs/fat/fat.ko.xz\nkernel/fs/fat/vfat.ko\n").unwrap()).unwrap();
        assert_eq!(list.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
        // A named set written with another line's paths finds a moved
        // module by name, and names those the tree does not have.
        let moved = parse_list("kernel/fs/vfat/fat.ko\nkernel/fs/fat/nothere.ko\nkernel/fs/fat/vfat.ko\n").unwrap();
        assert!(t.from_list(&moved).unwrap_err().to_string().contains("not in the tree"));
        let (list, missing) = t.from_named_set(&moved).unwrap();
        assert_eq!(list.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["fat", "vfat"]);
        assert_eq!(missing, ["nothere"]);
        let e = t.from_named_set(&parse_list("kernel/fs/fat/msdos.ko\n").unwrap()).unwrap_err().to_string();
        assert!(e.contains("msdos.ko") && e.contains("could not be read"), "{e}");
    }

    /// The reference kernel's module tree, read once.
    fn real() -> &'static ModTree {
        static T: OnceLock<ModTree> = OnceLock::new();
        T.get_or_init(|| {
            let f = crate::fetch::fetch(&crate::fetch::Request::Reference).expect("fetch the reference kernel");
            ModTree::read(&f.modules).expect("read the module tree")
        })
    }

    fn before(order: &[&str], a: &str, b: &str) -> bool {
        let pos = |n: &str| order.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{n} not in {order:?}"));
        pos(a) < pos(b)
    }

    #[test]
    fn real_ext4_vfat_and_aliases() {
        let t = real();
        assert!(t.len() > 4000, "{} modules", t.len());
        assert!(t.unreadable().is_empty(), "{:?}", t.unreadable());
        let p = t.resolve(&["ext4"]).unwrap();
        let o = p.names();
        // ext4's softdep is crypto-crc32c: crc32c_generic, by the rule.
        assert_eq!(o, ["crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"]);
        assert_eq!(p.steps[0].why, Why::SoftPreOf("ext4".into(), "crypto-crc32c".into()));
        assert_eq!(t.resolve(&["vfat"]).unwrap().names(), ["fat", "vfat"]);
        assert_eq!(t.resolve(&["fs-vfat"]).unwrap().names(), ["fat", "vfat"]);
        assert_eq!(t.resolve(&["nls-cp437"]).unwrap().rel_paths(), [Path::new("kernel/fs/nls/nls_cp437.ko")]);
        match t.lookup("crc32c").unwrap() {
            Some(Provider::Module(e)) => assert_eq!(e.name, "crc32c_generic"),
            other => panic!("crc32c -> {other:?}"),
        }
        // sha256 is built in (sha256_generic) though sha256_ssse3 is a module with that alias.
        assert_eq!(t.lookup("sha256").unwrap(), Some(Provider::Builtin("sha256_generic")));
        // The crypto alias crc32 is crc32_generic's, though lib/crc32 (another module name) is built in.
        assert!(matches!(t.lookup("crc32").unwrap(), Some(Provider::Module(e)) if e.name == "crc32_generic"));
        assert_eq!(t.lookup("cryptomgr").unwrap(), Some(Provider::Builtin("cryptomgr")));
        let p = t.resolve(&["cryptomgr", "libcrc32c"]).unwrap();
        assert_eq!(p.names(), ["crc32c_generic", "libcrc32c"]);
        assert_eq!(p.builtin, [("cryptomgr".to_string(), "cryptomgr".to_string())]);
        assert_eq!(t.lookup("no_such_thing").unwrap(), None);
    }

    #[test]
    fn real_xfs_btrfs_and_virtio() {
        let t = real();
        let o = t.resolve(&["xfs"]).unwrap().names();
        assert_eq!(o, ["crc32c_generic", "libcrc32c", "xfs"]);
        let p = t.resolve(&["btrfs"]).unwrap();
        let o = p.names();
        for dep in
            ["blake2b_generic", "xxhash_generic", "crc32c_generic", "zstd_compress", "raid6_pq", "xor", "libcrc32c"]
        {
            assert!(before(&o, dep, "btrfs"), "{dep} after btrfs: {o:?}");
        }
        assert!(before(&o, "crc32c_generic", "libcrc32c"), "{o:?}");
        assert_eq!(o.last(), Some(&"btrfs"));
        assert!(p.builtin.contains(&("sha256".to_string(), "sha256_generic".to_string())), "{:?}", p.builtin);
        let o = t.resolve(&["virtio_blk", "virtio_pci"]).unwrap().names();
        assert_eq!(
            o,
            ["virtio_ring", "virtio", "virtio_blk", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci"]
        );
        // Together each module comes once, and the whole is in a valid order.
        let p = t.resolve(&["virtio_blk", "virtio_pci", "ext4", "vfat", "xfs", "btrfs"]).unwrap();
        let mut names = p.names();
        assert_eq!(t.check_order(&p.entries()), []);
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
        let e = t.resolve(&["ext4", "ext9"]).unwrap_err().to_string();
        assert!(e.contains("\"ext9\" not found"), "{e}");
    }

    #[test]
    fn real_named_set_is_in_a_valid_order_and_every_module_resolves() {
        let t = real();
        let list = t.from_list(&named_set_paths("fs-nls-crypto-net-194").unwrap()).unwrap();
        assert_eq!(list.len(), 194);
        // The list is a working order; only f2fs's soft dependency on crc32
        // (used at mount time, not load time) comes later in it.
        let problems = t.check_order(&list);
        let hard: Vec<&OrderProblem> = problems.iter().filter(|p| !p.soft).collect();
        assert!(hard.is_empty(), "{hard:#?}");
        let soft: Vec<&str> = problems.iter().map(|p| p.module.as_str()).collect();
        assert_eq!(soft, ["f2fs"], "{problems:#?}");
        let names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
        let p = t.resolve(&names).unwrap();
        // Resolving the set's own names adds only what soft dependencies
        // ask for (ecb, which a module of the set lists as softdep=pre:).
        let outside: Vec<(&str, &Why)> = p
            .steps
            .iter()
            .filter(|s| !names.contains(&s.entry.name.as_str()))
            .map(|s| (s.entry.name.as_str(), &s.why))
            .collect();
        assert!(outside.iter().all(|(_, w)| matches!(w, Why::SoftPreOf(..) | Why::SoftPostOf(..))), "{outside:?}");
        assert_eq!(p.steps.len(), 194 + outside.len());
        println!("resolving the 194 set's names adds {outside:?}");
        let e = t.from_list(&[PathBuf::from("kernel/fs/nope.ko")]).unwrap_err().to_string();
        assert!(e.contains("kernel/fs/nope.ko") && e.contains("not in the tree"), "{e}");
        // Every module of the tree resolves, deterministically.
        let all: Vec<&str> = t.entries().iter().map(|e| e.name.as_str()).collect();
        let a = t.resolve(&all).unwrap();
        assert_eq!(a.steps.len(), t.len());
        assert_eq!(a.names(), t.resolve(&all).unwrap().names());
        assert_eq!(t.check_order(&a.entries()), []);
    }
}
