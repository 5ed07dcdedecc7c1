//! DDLink on the seed's own synthetic case (12 libraries, ~200,000
//! symbols, `ddlink synth`, cached): every binding and every relocated
//! word verified, the same output under Debian's ld.so, the patched one,
//! File Read Mode and Skip Mode. `make test` runs the same check on the
//! 50,000-symbol case its DDLink boot builds anyway; this size's own build
//! (about six minutes on 2 cores) is the extended tier's.

use crate::common;

#[test]
fn seed_case_identical_in_every_mode() {
    common::ddlink::identical_in_every_mode(&common::tmpdir("ddlink-seed"), 200_000);
}
