//! The guest's architecture, by itself: what the lab's pieces (the target,
//! the initramfs's programs, the batch loader's build) are chosen by.
//! It imports nothing of the lab, so every part of it can use it.

/// The guest's architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Arm64,
}

impl Arch {
    /// Every architecture, by the name a scenario file gives it.
    pub const ALL: &[Arch] = &[Arch::X86_64, Arch::Arm64];

    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86-64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The architecture a scenario file or `--arch` names (`x86-64`, also
    /// `x86_64` and Debian's `amd64`; `arm64`, also `aarch64`).
    pub fn parse(s: &str) -> Option<Arch> {
        match s {
            "amd64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Arm64),
            _ => Arch::ALL.iter().copied().find(|a| a.name() == s || a.name().replace('-', "_") == s),
        }
    }

    /// Debian's architecture: its kernel and busybox packages'.
    pub fn debian(self) -> bootlink::fetch::Arch {
        match self {
            Arch::X86_64 => bootlink::fetch::Arch::Amd64,
            Arch::Arm64 => bootlink::fetch::Arch::Arm64,
        }
    }

    /// Whether programs of the host (kmod, bootlink's batch loader and
    /// trace runtime, a `run:` program) run in this guest as they are.
    pub fn runs_host_programs(self) -> bool {
        self == Arch::X86_64 && std::env::consts::ARCH == "x86_64"
    }
}
