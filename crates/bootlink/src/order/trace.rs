//! The trace `bl-trace` writes: the loaded objects with their load bias,
//! then each function's first call (runtime address) in call order.
//!
//! ```text
//! bl-trace 1
//! object <bias hex> <path or ->      ("-": the program itself)
//! fn <address hex>
//! end <fn lines> <calls seen>
//! ```

use std::path::Path;

use crate::error::{Error, Kind, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceObject {
    pub bias: u64,
    /// "-" for the program (the loader gives it no name).
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub objects: Vec<TraceObject>,
    /// First calls: runtime address and the trace line it came from.
    pub calls: Vec<(u64, usize)>,
    /// Every instrumented call the runtime saw.
    pub total_calls: u64,
    /// The runtime's table filled up: later first calls are missing.
    pub overflow: bool,
}

/// Text that is not a trace `bl-trace` writes.
fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(Kind::Format, msg)
}

impl Trace {
    /// Parse a trace; the message names the line.
    pub fn parse(text: &str) -> std::result::Result<Trace, Error> {
        const FIRST: &str = "bl-trace 1";
        if text.is_empty() {
            return Err(corrupt("not a bl-trace file (the file is empty)"));
        }
        if !text.contains('\n') && FIRST.starts_with(text) && text != FIRST {
            return Err(corrupt(format!("truncated trace: {} bytes, it ends inside its first line", text.len())));
        }
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, FIRST)) => {}
            Some((_, l)) if l.starts_with("bl-trace ") => {
                return Err(corrupt(format!("line 1: trace version `{l}`, this bootlink reads `bl-trace 1`")));
            }
            _ => return Err(corrupt("not a bl-trace file (no `bl-trace 1` header)")),
        }
        // bl-trace ends every line with a newline: a last line without one
        // is where the file was cut.
        let cut_at = (!text.ends_with('\n')).then(|| text.lines().count());
        let mut t = Trace { objects: Vec::new(), calls: Vec::new(), total_calls: 0, overflow: false };
        let mut ended = false;
        // The line of the program's `object ... -`.
        let mut program_line: Option<usize> = None;
        for (i, line) in lines {
            let n = i + 1;
            if ended {
                return Err(corrupt(format!("line {n}: text after the `end` line")));
            }
            let shown = line.chars().take(60).collect::<String>();
            // `why`: what is wrong with the line (None: its shape).
            let bad = |why: Option<String>| {
                corrupt(match why {
                    _ if cut_at == Some(n) => {
                        format!("truncated trace: it ends inside line {n} (`{shown}`), with no `end` line")
                    }
                    Some(why) => format!("line {n}: {why}: `{shown}`"),
                    None => format!("line {n}: malformed `{shown}`"),
                })
            };
            let number = |s: &str, radix: u32| crate::fsutil::text_number(s, radix).map_err(|why| bad(Some(why)));
            let mut w = line.splitn(3, ' ');
            match (w.next(), w.next(), w.next()) {
                (Some("object"), Some(bias), Some(path)) => {
                    let bias = number(bias, 16)?;
                    // bl-trace names the program `-` (the loader gives it
                    // no name) and writes one trace per process: a second
                    // `-` is another program's trace run into this one.
                    if path == "-" {
                        if let Some(first) = program_line {
                            return Err(corrupt(format!(
                                "line {n}: a second program (object `-`, the first on line {first}): \
                                 a trace is of one program (two traces run together?)"
                            )));
                        }
                        program_line = Some(n);
                    }
                    t.objects.push(TraceObject { bias, path: path.to_string() })
                }
                (Some("fn"), Some(a), None) => t.calls.push((number(a, 16)?, n)),
                (Some("overflow"), None, None) => t.overflow = true,
                (Some("end"), Some(count), Some(total)) => {
                    let count = number(count, 10)?;
                    t.total_calls = number(total, 10)?;
                    if count != t.calls.len() as u64 {
                        return Err(corrupt(format!(
                            "line {n}: the end line counts {count} functions, the trace has {}: truncated or edited",
                            t.calls.len()
                        )));
                    }
                    ended = true;
                }
                _ => return Err(bad(None)),
            }
        }
        if !ended {
            return Err(corrupt(format!(
                "truncated trace: no `end` line after {} functions (the program was killed before bl-trace wrote it)",
                t.calls.len()
            )));
        }
        Ok(t)
    }

    pub fn read(path: &Path) -> Result<Trace> {
        let bytes = crate::fsutil::read_input(path, crate::fsutil::MAX_TEXT)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Error::file(Kind::Format, path, "not a bl-trace file (not text)"))?;
        Trace::parse(text).map_err(|e| e.at(path))
    }

    /// The load bias of the object named `path` ("-" is the program).
    pub(crate) fn bias_of(&self, path: &str) -> Option<u64> {
        self.objects.iter().find(|o| o.path == path).map(|o| o.bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "bl-trace 1\nobject 555555554000 -\nobject 7ffff7dd0000 /lib/x86_64-linux-gnu/libc.so.6\n\
                        fn 555555555139\nfn 555555555150\nend 2 40\n";

    #[test]
    fn parses_what_the_runtime_writes() {
        let t = Trace::parse(GOOD).unwrap();
        assert_eq!(t.objects.len(), 2);
        assert_eq!(t.bias_of("-"), Some(0x5555_5555_4000));
        assert_eq!(t.calls, vec![(0x5555_5555_5139, 4), (0x5555_5555_5150, 5)]);
        assert_eq!(t.total_calls, 40);
    }

    #[test]
    fn truncation_and_garbage_name_the_line() {
        let cut = &GOOD[..GOOD.find("end").unwrap()];
        assert!(Trace::parse(cut).unwrap_err().msg.contains("truncated"));
        assert!(Trace::parse(&GOOD.replace("end 2", "end 3")).unwrap_err().msg.contains("line 6"));
        assert!(Trace::parse(&GOOD.replace("fn 555555555150", "fn zz")).unwrap_err().msg.contains("line 5"));
        assert!(Trace::parse("hello").unwrap_err().msg.contains("not a bl-trace"));
        assert!(Trace::parse(&format!("{GOOD}fn 1\n")).unwrap_err().msg.contains("after the `end`"));
    }

    /// Two programs in one trace (a second `object ... -`: two traces run
    /// together, or edited) are refused, naming both lines: the addresses
    /// could belong to either.
    #[test]
    fn a_trace_of_two_programs_is_refused() {
        let two = GOOD.replace("fn 555555555139", "object 7ffff7fc0000 -\nfn 555555555139");
        let e = Trace::parse(&two).unwrap_err().msg;
        assert_eq!(
            e,
            "line 4: a second program (object `-`, the first on line 2): a trace is of one program (two traces run together?)"
        );
    }

    /// A trace cut anywhere before its `end` line says it is truncated,
    /// also inside a line; an empty file says so; a number that does not
    /// fit is named.
    #[test]
    fn a_cut_trace_is_truncated_and_numbers_are_named() {
        let end = GOOD.find("end").unwrap();
        for cut in 1..end {
            let e = Trace::parse(&GOOD[..cut]).unwrap_err().msg;
            assert!(e.starts_with("truncated trace"), "cut at {cut}: {e}");
        }
        assert_eq!(Trace::parse("").unwrap_err().msg, "not a bl-trace file (the file is empty)");
        let e = Trace::parse(&GOOD.replace("fn 555555555150", "fn 1ffffffffffffffff")).unwrap_err().msg;
        assert_eq!(e, "line 5: `1ffffffffffffffff` does not fit 64 bits: `fn 1ffffffffffffffff`");
        let e = Trace::parse(&GOOD.replace("end 2 40", "end 2 -1")).unwrap_err().msg;
        assert_eq!(e, "line 6: `-1` is not a decimal number: `end 2 -1`");
    }
}
