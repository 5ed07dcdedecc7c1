//! The docs' figures come from scripts: `scripts/check-docs` (the lints
//! tier) fails on a figure typed into the README outside a region a script
//! writes, on a docs page holding more hand-typed figures than its ledger
//! allows, and on a region whose script does not exist; a figure inside a
//! region, in code, or a plain number passes. It also fails on a kernel
//! patch cited by number (`patch 0014`: the numbers differ between the
//! kernel lines) outside the region that maps names to numbers, and on a
//! region of a boot-measuring script that does not say which kernel config
//! it booted and whether KASLR was on. Checked on
//! pages of its own (`--root`), and on the repository's own pages.

use std::path::Path;
use std::process::{Command, Output};

fn check(root: &Path) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-docs"))
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn tree(readme: &str, page: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("docs")).unwrap();
    std::fs::create_dir_all(d.path().join("scripts")).unwrap();
    let script = d.path().join("scripts/measure");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(d.path().join("README.md"), readme).unwrap();
    std::fs::write(d.path().join("docs/new-page.md"), page).unwrap();
    d
}

const REGION: &str = "<!-- begin t (written by scripts/measure) -->\n| a | 1,688 ms | 37 % |\n<!-- end t -->\n";

#[test]
fn figures_stand_only_in_regions_a_script_writes() {
    // Clean: figures in the region, in code, plain counts and sizes outside.
    let ok = tree(
        &format!("# x\n\n{REGION}\n194 modules, 4 KiB pages, `12 ms` in code.\n\n```\n5 s\n```\n"),
        "# page\n\nNo figures, 3 modules.\n",
    );
    let o = check(ok.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));

    // A figure typed into the README's prose.
    let bad = tree(&format!("# x\n\n{REGION}\nThe set loads in 1,688 ms.\n"), "# page\n");
    let o = check(bad.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(text.contains("README.md:7: figure '1,688 ms' typed by hand"), "{text}");

    // A new docs page has no ledger entry: any hand figure fails.
    let bad = tree("# x\n", "# page\n\nQuicker by 4.2x, +5.4 % of stock.\n");
    let o = check(bad.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(text.contains("docs/new-page.md:1: 2 figures typed by hand, HAND_FIGURES allows 0"), "{text}");

    // A region naming a script that is not there.
    let bad = tree("# x\n\n<!-- begin t (written by scripts/gone) -->\n| 1 s |\n<!-- end t -->\n", "# page\n");
    let text = String::from_utf8_lossy(&check(bad.path()).stdout).into_owned();
    assert!(text.contains("written by scripts/gone, which is not an executable file here"), "{text}");
}

#[test]
fn boot_figures_say_their_kernel_and_kaslr_state() {
    // A region of a boot-measuring script (scripts/loading-table is one)
    // without the kernel and KASLR line fails; with it, it passes.
    let body = "| set | 1,688 ms |\n";
    let with = |extra: &str| {
        let t = tree(
            &format!(
                "# x\n\n<!-- begin boots (written by scripts/loading-table) -->\n{body}{extra}<!-- end boots -->\n"
            ),
            "# page\n",
        );
        let script = t.path().join("scripts/loading-table");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        t
    };
    let bad = with("");
    let o = check(bad.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(
        text.contains("README.md:3: region boots (scripts/loading-table) holds boot figures without the kernel config"),
        "{text}"
    );
    let ok = with("Kernel and KASLR (run.json): lab config (6.1.192), KASLR on.\n");
    let o = check(ok.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn kernel_patches_are_cited_by_name() {
    // Clean: names, a glibc patch's number, a path to a patch file, a number
    // in code, and the numbers in the patch-names region.
    let names = "<!-- begin patch-names (written by scripts/measure) -->\n| `dedup` | 0010 | 0009 |\n\
                 <!-- end patch-names -->\n";
    let ok = tree(
        &format!(
            "# x\n\nPatch `dedup` and lab patch `hash-bytes-read`; glibc patch 0005, glibc/patches 0006;\n\
             `kernel/6.1/patches/0011-module-x.patch`, `patch 0014` in code.\n\n{names}"
        ),
        "# page\n",
    );
    let o = check(ok.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));

    // Every numbered form, one line each, one cut by a line break, and the
    // series' own numbering ("patch 8").
    let bad = tree(
        "# x\n\nSee patch 0014, Patches 0005-0008 and kernel/6.12/patches 0011.\n",
        "# page\n\nlab patch 0004 hashes the bytes; the kernel patches\n0016-0018 do it. Patch 8 once did.\n",
    );
    let o = check(bad.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    for want in [
        "README.md:3: kernel patch cited by number ('patch 0014')",
        "README.md:3: kernel patch cited by number ('Patches 0005-0008')",
        "README.md:3: kernel patch cited by number ('kernel/6.12/patches 0011')",
        "docs/new-page.md:3: kernel patch cited by number ('lab patch 0004')",
        "docs/new-page.md:3: kernel patch cited by number ('patches 0016-0018', across a line break)",
        "docs/new-page.md:4: kernel patch cited by number ('Patch 8')",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    assert!(text.contains(", 6 problems"), "{text}");
}

#[test]
fn the_repositorys_pages_pass() {
    let o = check(Path::new(env!("CARGO_MANIFEST_DIR")));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("0 problems"), "{text}");
}
