//! The one shape of a command's result: a value that serializes (the
//! command's `--json`) and renders as the text a person reads. The binary
//! prints every command's result through one helper that takes a
//! [`Report`], so the text and the JSON always come from the same value.

/// A command's result.
pub trait Report: serde::Serialize {
    /// The text a person reads: whole lines, each ending in a newline (empty
    /// when there is nothing to say).
    fn render(&self) -> String;
}
