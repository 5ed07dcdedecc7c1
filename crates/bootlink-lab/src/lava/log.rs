//! LAVA's job log: one record a line, each a YAML flow mapping with every
//! scalar double-quoted (`lava_common.log.dump`: `default_flow_style=True,
//! default_style='"'`), as `lava-run` prints it and a server keeps it
//! (`lavacli jobs logs ID --raw`, where each line starts with `- `):
//!
//! ```text
//! {"dt": "2026-11-28T00:10:59.394112", "lvl": "target", "msg": "Booting from ROM.."}
//! - {"dt": "...", "lvl": "results", "msg": {"case": "job", "definition": "lava", "result": "pass"}}
//! ```
//!
//! Only this shape is read: a record is a mapping of double-quoted (or
//! plain) scalars, nested mappings and sequences, on one line. The
//! device's console is the `msg` of every `"lvl": "target"` record.

use std::collections::BTreeMap;

/// One value of a record.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Map(BTreeMap<String, Value>),
    List(Vec<Value>),
}

impl Value {
    pub fn str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.get(key),
            _ => None,
        }
    }
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub dt: String,
    pub lvl: String,
    pub msg: Value,
}

/// The record on `line`, None for a line that is not one (blank).
pub fn record(line: &str) -> Result<Option<Record>, String> {
    let t = line.trim();
    let t = t.strip_prefix("- ").unwrap_or(t).trim_start();
    if t.is_empty() {
        return Ok(None);
    }
    if !t.starts_with('{') {
        return Err("not a LAVA log record (a YAML mapping on one line)".into());
    }
    let mut p = Parser { s: t.as_bytes(), i: 0 };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected text after the record at column {}", p.i + 1));
    }
    let get = |k: &str| v.get(k).and_then(Value::str).map(str::to_string);
    let (Some(dt), Some(lvl), Some(msg)) = (get("dt"), get("lvl"), v.get("msg").cloned()) else {
        return Err("a record without dt, lvl and msg".into());
    };
    Ok(Some(Record { dt, lvl, msg }))
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] == b' ' || self.s[self.i] == b'\t') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at column {}", c as char, self.i + 1))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        match self.peek() {
            Some(b'{') => self.map(),
            Some(b'[') => self.list(),
            Some(b'"') => self.quoted().map(Value::Str),
            Some(b'\'') => self.single().map(Value::Str),
            Some(_) => Ok(Value::Str(self.plain())),
            None => Err("the line ends inside the record".into()),
        }
    }

    fn map(&mut self) -> Result<Value, String> {
        self.expect(b'{')?;
        let mut m = BTreeMap::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Value::Map(m));
        }
        loop {
            let key = match self.value()? {
                Value::Str(k) => k,
                _ => return Err(format!("a key that is not a scalar at column {}", self.i + 1)),
            };
            self.expect(b':')?;
            let v = self.value()?;
            m.insert(key, v);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Map(m));
                }
                _ => return Err(format!("expected ',' or '}}' at column {}", self.i + 1)),
            }
        }
    }

    fn list(&mut self) -> Result<Value, String> {
        self.expect(b'[')?;
        let mut l = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Value::List(l));
        }
        loop {
            l.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::List(l));
                }
                _ => return Err(format!("expected ',' or ']' at column {}", self.i + 1)),
            }
        }
    }

    /// A plain scalar in flow context: up to `,`, `:` + space, `}` or `]`.
    fn plain(&mut self) -> String {
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == b',' || c == b'}' || c == b']' {
                break;
            }
            if c == b':' && matches!(self.s.get(self.i + 1), Some(b' ') | None) {
                break;
            }
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).trim().to_string()
    }

    fn single(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err("the line ends inside a quoted string".into()),
                Some(b'\'') if self.s.get(self.i + 1) == Some(&b'\'') => {
                    out.push(b'\'');
                    self.i += 2;
                }
                Some(b'\'') => {
                    self.i += 1;
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// A double-quoted scalar with YAML's escapes.
    fn quoted(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        let start_err = || "the line ends inside a quoted string".to_string();
        loop {
            let rest = std::str::from_utf8(&self.s[self.i..]).map_err(|_| "a record that is not UTF-8".to_string())?;
            let Some(pos) = rest.find(['"', '\\']) else { return Err(start_err()) };
            out.push_str(&rest[..pos]);
            self.i += pos;
            if self.s[self.i] == b'"' {
                self.i += 1;
                return Ok(out);
            }
            // a backslash
            let e = *self.s.get(self.i + 1).ok_or_else(start_err)?;
            self.i += 2;
            let hex = |p: &mut Self, n: usize| -> Result<char, String> {
                let h = p.s.get(p.i..p.i + n).ok_or_else(start_err)?;
                p.i += n;
                let v = u32::from_str_radix(std::str::from_utf8(h).unwrap_or("x"), 16)
                    .map_err(|_| format!("a bad \\x, \\u or \\U escape before column {}", p.i + 1))?;
                Ok(char::from_u32(v).unwrap_or('\u{fffd}'))
            };
            let c = match e {
                b'0' => '\0',
                b'a' => '\u{7}',
                b'b' => '\u{8}',
                b't' | b'\t' => '\t',
                b'n' => '\n',
                b'v' => '\u{b}',
                b'f' => '\u{c}',
                b'r' => '\r',
                b'e' => '\u{1b}',
                b' ' => ' ',
                b'"' => '"',
                b'/' => '/',
                b'\\' => '\\',
                b'N' => '\u{85}',
                b'_' => '\u{a0}',
                b'L' => '\u{2028}',
                b'P' => '\u{2029}',
                b'x' => hex(self, 2)?,
                b'u' => hex(self, 4)?,
                b'U' => hex(self, 8)?,
                other => return Err(format!("an unknown escape \\{} at column {}", other as char, self.i)),
            };
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_as_lava_run_and_a_server_write_them() {
        let r = record(
            r#"{"dt": "2026-11-28T00:10:59.394112", "lvl": "target", "msg": "\e[0mSeaBIOS \"1.16\" \x07\u00e9"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.dt.as_str(), r.lvl.as_str()), ("2026-11-28T00:10:59.394112", "target"));
        assert_eq!(r.msg.str(), Some("\u{1b}[0mSeaBIOS \"1.16\" \u{7}é"));
        let r = record(r#"- {"dt": "x", "lvl": "results", "msg": {"case": "job", "definition": "lava", "extra": {"l": ["a", "b"]}, "result": "pass"}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.msg.get("case").and_then(Value::str), Some("job"));
        assert_eq!(r.msg.get("result").and_then(Value::str), Some("pass"));
        assert_eq!(
            r.msg.get("extra").and_then(|e| e.get("l")),
            Some(&Value::List(vec![Value::Str("a".into()), Value::Str("b".into())]))
        );
        assert_eq!(record("   ").unwrap(), None);
    }

    #[test]
    fn what_is_not_a_record_is_said() {
        assert!(record("[    0.000000] Linux version 6.1").unwrap_err().contains("not a LAVA log record"));
        assert!(record(r#"{"dt": "x", "lvl": "target", "msg": "cut"#).unwrap_err().contains("ends inside"));
        assert!(record(r#"{"dt": "x", "msg": "m"}"#).unwrap_err().contains("without dt, lvl and msg"));
        assert!(record(r#"{"dt": "x", "lvl": "t", "msg": "m"} tail"#).unwrap_err().contains("after the record"));
    }
}
