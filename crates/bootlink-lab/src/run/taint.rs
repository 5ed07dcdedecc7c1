//! The kernel's taint flags: the mask in `/proc/sys/kernel/tainted` and
//! the letters the kernel prints for them (Documentation/admin-guide/
//! tainted-kernels.rst, 6.1's `taint_flags`), so a run says in words what
//! tainted the kernel it booted.

/// Bit, letter, meaning, in bit order (6.1: bits 0 to 18).
pub const FLAGS: &[(u32, char, &str)] = &[
    (0, 'P', "proprietary module"),
    (1, 'F', "module force-loaded"),
    (2, 'S', "CPU out of spec"),
    (3, 'R', "module force-unloaded"),
    (4, 'M', "machine check"),
    (5, 'B', "bad page"),
    (6, 'U', "user request"),
    (7, 'D', "kernel died"),
    (8, 'A', "ACPI table overridden"),
    (9, 'W', "warning"),
    (10, 'C', "staging driver"),
    (11, 'I', "firmware workaround"),
    (12, 'O', "out-of-tree module"),
    (13, 'E', "unsigned module"),
    (14, 'L', "soft lockup"),
    (15, 'K', "live patch"),
    (16, 'X', "auxiliary"),
    (17, 'T', "struct randomization"),
    (18, 'N', "test module"),
];

/// `TAINT_UNSIGNED_MODULE`: a module without a valid signature (or, with
/// patch `hash-manifest`, not listed in the image) was loaded.
pub const UNSIGNED_MODULE: u64 = 1 << 13;

/// The letters of the flags set in `mask` ("E", "OE"); bits the table does
/// not know are shown as `?N`.
pub fn letters(mask: u64) -> String {
    let mut s = String::new();
    for bit in 0..64 {
        if mask & (1u64 << bit) == 0 {
            continue;
        }
        match FLAGS.iter().find(|(b, _, _)| *b == bit) {
            Some((_, c, _)) => s.push(*c),
            None => s.push_str(&format!("?{bit}")),
        }
    }
    s
}

/// "8192 (E: unsigned module)", "0 (not tainted)".
pub fn describe(mask: u64) -> String {
    if mask == 0 {
        return "0 (not tainted)".into();
    }
    let words: Vec<String> = (0..64u32)
        .filter(|b| mask & (1u64 << b) != 0)
        .map(|b| match FLAGS.iter().find(|(x, _, _)| *x == b) {
            Some((_, c, w)) => format!("{c}: {w}"),
            None => format!("bit {b}"),
        })
        .collect();
    format!("{mask} ({})", words.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_read_as_the_kernel_prints_them() {
        assert_eq!(letters(0), "");
        assert_eq!(letters(UNSIGNED_MODULE), "E");
        assert_eq!(letters(UNSIGNED_MODULE | 1 << 12), "OE");
        assert_eq!(letters(1 << 40), "?40");
        assert_eq!(describe(8192), "8192 (E: unsigned module)");
        assert_eq!(describe(0), "0 (not tainted)");
        assert_eq!(describe(1 | 1 << 9), "513 (P: proprietary module, W: warning)");
        assert!(FLAGS.windows(2).all(|w| w[0].0 + 1 == w[1].0));
    }
}
