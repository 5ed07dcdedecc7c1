//! The product's enums as command-line values. The product crate has no
//! command-line parser, so each value set is named here once, with its help,
//! and mapped onto the product's type.

use bootlink::{fetch, manifest, sign};

/// A Debian architecture (`fetch::Arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl From<Arch> for fetch::Arch {
    fn from(a: Arch) -> Self {
        match a {
            Arch::Amd64 => fetch::Arch::Amd64,
            Arch::Arm64 => fetch::Arch::Arm64,
        }
    }
}

/// The hash of a module hash list (`manifest::Hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListHash {
    /// SHA-256: every kernel with the module hash list takes it
    Sha256,
    /// BLAKE2b-256 (RFC 7693): as strong, about half the instructions a byte
    /// on a CPU without SHA instructions; needs patch `hashes-blake2b`
    /// (CONFIG_MODULE_HASHES_BLAKE2B)
    #[value(name = "blake2b")]
    Blake2b256,
}

impl From<ListHash> for manifest::Hash {
    fn from(h: ListHash) -> Self {
        match h {
            ListHash::Sha256 => manifest::Hash::Sha256,
            ListHash::Blake2b256 => manifest::Hash::Blake2b256,
        }
    }
}

/// The digest of a module signature (`sign::Hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SignHash {
    Sha256,
    Sha384,
    Sha512,
}

impl From<SignHash> for sign::Hash {
    fn from(h: SignHash) -> Self {
        match h {
            SignHash::Sha256 => sign::Hash::Sha256,
            SignHash::Sha384 => sign::Hash::Sha384,
            SignHash::Sha512 => sign::Hash::Sha512,
        }
    }
}
