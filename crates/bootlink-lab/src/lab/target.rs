//! The target a run boots on: the architecture, the emulator and the
//! machine it emulates, the pinned guest CPU, the kernel's console, the
//! kernel images it boots. Variants pick their kernel ([`KernelChoice`]);
//! the target says what runs it. QEMU is reached only through a target
//! ([`crate::lab::qemu::QemuOptions::on`]); run.json records its machine
//! and CPU model.
//!
//! Another architecture is another constructor here. What the arm64
//! target ([`Target::arm64`]) sets differently from [`Target::x86_64`]:
//! - the emulator: `qemu-system-aarch64` (Debian package `qemu-system-arm`);
//! - the machine: `virt` (x86-64: `pc`, i440FX);
//! - the CPU model: a named core, [`ARM64_CPU_MODEL`] (x86-64: Haswell
//!   minus what TCG lacks, see [`X86_64_CPU_MODEL`]);
//! - the console: `ttyAMA0`, virt's PL011 UART (x86-64: `ttyS0`, the 16550A);
//! - the kernel image: `Image`, or Debian's `vmlinuz`, which on arm64 is
//!   the raw Image behind an EFI stub (x86-64: a vmlinux through its PVH
//!   entry, or a bzImage);
//! - the guest's programs: Debian's `busybox-static:arm64`; host programs
//!   (kmod, the batch loader, DDLink's and the order's programs) are the
//!   host's architecture and are refused on it.
//!
//! What stays the same on every target lives in [`crate::lab::qemu`]: TCG,
//! the deterministic clock (`-icount`), the guest's random seed and
//! real-time clock (`-seed`, `-rtc`), which QEMU offers for every machine.

use std::path::PathBuf;

pub use crate::lab::arch::Arch;

/// The x86-64 guest CPU: QEMU's Haswell model, version 2 (no TSX; the model
/// `Haswell-noTSX` names), without the four features QEMU 7.2's TCG does
/// not implement, so that `enforce` holds: QEMU refuses to start rather
/// than boot a CPU other than this one. `max` under TCG is QEMU's own
/// AMD-vendor CPU with every feature this QEMU build emulates: it follows
/// the QEMU version, not the host, and grows with each release. Haswell is
/// the x86-64-v3 baseline: AVX2, BMI2 and XSAVE, which the kernel's
/// `sha256-avx2` (the module hash manifest's SHA-256) needs. See
/// docs/reproducibility.md.
pub(crate) const X86_64_CPU_MODEL: &str = "Haswell-v2,-pcid,-x2apic,-tsc-deadline,-invpcid";

/// The arm64 guest CPU: QEMU's Cortex-A72 (ARMv8.0-A with the crypto
/// extensions: AES, PMULL, SHA-1, SHA-256, which the kernel's `sha2-ce`
/// uses), the core of many arm64 boards. A named Arm core has a fixed
/// feature set in QEMU (x86's `enforce` does not exist there); `max`
/// follows the QEMU version. See docs/reproducibility.md.
pub(crate) const ARM64_CPU_MODEL: &str = "cortex-a72";

/// How the emulator starts the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootMethod {
    /// QEMU's `-kernel`: one of the target's [`Target::kernel_images`].
    DirectKernel,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub arch: Arch,
    /// The emulator binary.
    pub qemu: PathBuf,
    /// The Debian package that provides it (named when it is missing).
    pub qemu_package: &'static str,
    /// QEMU's `-machine`.
    pub machine: String,
    /// QEMU's `-cpu`: a model and its feature changes; on x86-64 `,enforce` is added,
    /// so QEMU refuses what TCG lacks. run.json records it (`cpu_model`).
    pub cpu_model: String,
    /// The serial console the kernel writes to (`console=` on its command
    /// line), which QEMU's `-serial` captures.
    pub console: &'static str,
    /// The kernel images a kernel directory may hold, in order of
    /// preference (`kernel:DIR`, `bootlink kernel build`'s output).
    pub kernel_images: &'static [&'static str],
    pub boot: BootMethod,
}

impl Target {
    /// `qemu-system-x86_64` (TCG) emulating a PC with the pinned Haswell
    /// CPU, the console on the first 16550A UART, the kernel started
    /// directly: an uncompressed vmlinux through its PVH entry (no
    /// decompressor, no KASLR), or a bzImage.
    pub fn x86_64() -> Target {
        Target {
            arch: Arch::X86_64,
            qemu: PathBuf::from("qemu-system-x86_64"),
            qemu_package: "qemu-system-x86",
            machine: "pc".to_string(),
            cpu_model: X86_64_CPU_MODEL.to_string(),
            console: "ttyS0",
            kernel_images: &["vmlinux", "bzImage"],
            boot: BootMethod::DirectKernel,
        }
    }

    /// `qemu-system-aarch64` (TCG) emulating QEMU's `virt` board with the
    /// pinned Cortex-A72, the console on its PL011 UART, the kernel started
    /// directly from its Image header (no firmware, no UEFI).
    pub fn arm64() -> Target {
        Target {
            arch: Arch::Arm64,
            qemu: PathBuf::from("qemu-system-aarch64"),
            qemu_package: "qemu-system-arm",
            machine: "virt".to_string(),
            cpu_model: ARM64_CPU_MODEL.to_string(),
            console: "ttyAMA0",
            kernel_images: &["Image", "vmlinuz"],
            boot: BootMethod::DirectKernel,
        }
    }

    /// The target of an architecture, with its defaults.
    pub fn of(arch: Arch) -> Target {
        match arch {
            Arch::X86_64 => Target::x86_64(),
            Arch::Arm64 => Target::arm64(),
        }
    }

    /// QEMU's `-cpu` argument: on x86-64 the model with `,enforce` (QEMU
    /// refuses to start rather than leave out a feature TCG lacks); an Arm
    /// core's features are fixed by its name.
    pub fn cpu_arg(&self) -> String {
        match self.arch {
            Arch::X86_64 => format!("{},enforce", self.cpu_model),
            Arch::Arm64 => self.cpu_model.clone(),
        }
    }
}

impl Default for Target {
    fn default() -> Target {
        Target::x86_64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_by_name() {
        assert_eq!(Arch::parse("x86-64"), Some(Arch::X86_64));
        assert_eq!(Arch::parse("x86_64"), Some(Arch::X86_64));
        assert_eq!(Arch::parse("amd64"), Some(Arch::X86_64));
        assert_eq!(Arch::parse("arm64"), Some(Arch::Arm64));
        assert_eq!(Arch::parse("aarch64"), Some(Arch::Arm64));
        assert_eq!(Arch::parse("riscv64"), None);
        assert_eq!(Target::of(Arch::X86_64), Target::default());
        assert_eq!(Target::of(Arch::Arm64).console, "ttyAMA0");
    }

    #[test]
    fn only_x86_cpu_models_are_enforced() {
        assert_eq!(Target::x86_64().cpu_arg(), format!("{X86_64_CPU_MODEL},enforce"));
        assert_eq!(Target::arm64().cpu_arg(), "cortex-a72");
    }
}
