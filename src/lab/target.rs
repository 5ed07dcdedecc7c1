//! The target a run boots on: the architecture, the emulator, how the
//! kernel is started. Variants pick their kernel ([`KernelChoice`]); the
//! target says what runs it. Another architecture or emulator is another
//! constructor here, and the values it sets reach QEMU through
//! [`crate::lab::qemu::QemuOptions`].

use std::path::PathBuf;

use crate::lab::qemu;
pub use crate::lab::variant::KernelChoice;

/// The guest's architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86-64",
        }
    }
}

/// How the emulator starts the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootMethod {
    /// QEMU's `-kernel`: a vmlinux through its PVH entry, or a bzImage.
    DirectKernel,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub arch: Arch,
    /// The emulator binary.
    pub qemu: PathBuf,
    /// The Debian package that provides it (named when it is missing).
    pub qemu_package: &'static str,
    pub boot: BootMethod,
}

impl Target {
    /// `qemu-system-x86_64` (TCG), the kernel started directly.
    pub fn x86_64() -> Target {
        Target {
            arch: Arch::X86_64,
            qemu: PathBuf::from(qemu::QEMU),
            qemu_package: qemu::QEMU_PACKAGE,
            boot: BootMethod::DirectKernel,
        }
    }
}
