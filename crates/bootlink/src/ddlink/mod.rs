//! DDLink: profile a program's symbol bindings once, then load it without
//! symbol lookups. The patched ld.so (glibc/patches) records every binding
//! of a program's startup relocation (`record`); bootlink checks the record
//! against the files and writes the cache the loader reads instead of
//! searching the scope (`write`, `format`); `run` profiles, verifies and
//! reports the loader's decision; `measure` times startup in each mode;
//! `synth` generates the synthetic case (12 libraries, ~200,000 symbols).

pub mod format;
pub mod measure;
pub mod objects;
pub mod prelink;
pub mod record;
pub mod request;
pub mod run;
pub mod synth;
pub mod write;
