#![allow(dead_code)]
//! Outputs that must not be written, drawn by seed (issue 47): for a
//! command that writes files, one of its outputs named as something that
//! writing it would destroy or that no rename may replace: one of the
//! command's inputs (by its own name, `./` its name, `DIR/../` its name, a
//! symbolic link to it, a hard link to it), another of its outputs, a
//! device node (as root), a symbolic link to one, a FIFO, a directory or a
//! socket. tests/offline/outputs.rs runs each case.

use bootlink::rng::Rng;

/// What an output is named as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alias {
    /// The command's input of this index, spelled so.
    Input(usize, Spelling),
    /// The command's other output of this index (by its own name or `./`).
    Output(usize, Spelling),
    Device,
    DeviceLink,
    Fifo,
    Directory,
    Socket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    Plain,
    DotSlash,
    Parent,
    Symlink,
    Hardlink,
}

/// The shape of one command: how many inputs and outputs it names, and
/// the (input, output) pairs it may write in place (manifest write's
/// `-o VMLINUX`).
pub struct Shape {
    pub inputs: usize,
    pub outputs: usize,
    pub in_place: &'static [(usize, usize)],
}

/// One case: the command (an index into the shapes), which of its outputs,
/// and what that output is named as.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub command: usize,
    pub output: usize,
    pub alias: Alias,
}

/// `n` cases over `shapes`, a device node only when `root` (mknod).
pub fn cases(shapes: &[Shape], root: bool, rng: &mut Rng, n: usize) -> Vec<Case> {
    let spellings = [Spelling::Plain, Spelling::DotSlash, Spelling::Parent, Spelling::Symlink, Spelling::Hardlink];
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let command = rng.below(shapes.len());
        let s = &shapes[command];
        let output = rng.below(s.outputs);
        let alias = match rng.below(8) {
            0..=2 => {
                let input = rng.below(s.inputs);
                if s.in_place.contains(&(input, output)) {
                    continue;
                }
                Alias::Input(input, spellings[rng.below(spellings.len())])
            }
            3 if s.outputs > 1 => {
                let other = (output + 1 + rng.below(s.outputs - 1)) % s.outputs;
                // another output exists only once written: by name or `./`
                Alias::Output(other, spellings[rng.below(2)])
            }
            3 => continue,
            4 if root => [Alias::Device, Alias::DeviceLink][rng.below(2)],
            4 => continue,
            5 => Alias::Fifo,
            6 => Alias::Directory,
            _ => Alias::Socket,
        };
        v.push(Case { command, output, alias });
    }
    v
}
