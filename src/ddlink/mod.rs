//! DDLink: profile a program's symbol bindings once, then load it without symbol lookups.

pub mod synth;
