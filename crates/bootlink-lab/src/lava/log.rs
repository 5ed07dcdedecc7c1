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
//! Each line is read by the YAML crate (`serde-saphyr`, docs/lava.md) into
//! a typed [`Record`], one line at a time: lava-run's output is a record a
//! line, not one YAML document, and a line that does not read is named by
//! its number (a log cut in its last line is a truncated one). The
//! device's console is the `msg` of every `"lvl": "target"` record.

use serde::Deserialize;

/// Who logged a record (`lvl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The device's console.
    Target,
    /// What the device printed after LAVA matched the job's prompt.
    Feedback,
    Info,
    /// A test case's result (LAVA's own actions', and the job's).
    Results,
    Debug,
    Input,
    Warning,
    Error,
    Exception,
    /// A level this reader does not know.
    #[serde(other)]
    Other,
}

/// A record's message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Msg {
    /// A line: the console's, or LAVA's own.
    Text(String),
    /// A `results` record's test case.
    Result(TestCase),
    /// Anything else LAVA logs (kept, not read).
    Other(serde_json::Value),
}

/// A test case of a `results` record: one of LAVA's actions (`definition:
/// lava`), or the job itself (`case: job`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct TestCase {
    #[serde(default)]
    pub definition: String,
    #[serde(default)]
    pub case: String,
    /// `pass` or `fail`.
    #[serde(default)]
    pub result: String,
    /// Why the job failed (its `case: job` record).
    #[serde(default)]
    pub error_type: String,
    #[serde(default)]
    pub error_msg: String,
    /// What the action adds (a download's `label` and `sha256sum`, QEMU's
    /// `qemu_version`).
    #[serde(default)]
    pub extra: serde_json::Value,
}

impl TestCase {
    /// A string of the case's `extra`.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra.get(key).and_then(serde_json::Value::as_str)
    }
}

impl Msg {
    /// The message's text, for a line.
    pub fn text(&self) -> Option<&str> {
        match self {
            Msg::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The test case, for a result.
    pub fn case(&self) -> Option<&TestCase> {
        match self {
            Msg::Result(c) => Some(c),
            _ => None,
        }
    }
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Record {
    pub dt: String,
    pub lvl: Level,
    pub msg: Msg,
}

/// The record on `line`, None for a line that is not one (blank). An error
/// is one line.
pub fn record(line: &str) -> Result<Option<Record>, String> {
    let t = line.trim();
    let t = t.strip_prefix("- ").unwrap_or(t).trim_start();
    if t.is_empty() {
        return Ok(None);
    }
    if !t.starts_with('{') {
        return Err("not a LAVA log record (a YAML mapping on one line)".into());
    }
    serde_saphyr::from_str::<Record>(t).map(Some).map_err(|e| {
        let e = e.to_string();
        format!("not a LAVA log record: {}", e.lines().next().unwrap_or("").trim())
    })
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
        assert_eq!((r.dt.as_str(), r.lvl), ("2026-11-28T00:10:59.394112", Level::Target));
        assert_eq!(r.msg.text(), Some("\u{1b}[0mSeaBIOS \"1.16\" \u{7}é"));
        let r = record(r#"- {"dt": "x", "lvl": "results", "msg": {"case": "job", "definition": "lava", "extra": {"l": ["a", "b"]}, "result": "pass"}}"#)
            .unwrap()
            .unwrap();
        let case = r.msg.case().unwrap();
        assert_eq!((case.case.as_str(), case.result.as_str()), ("job", "pass"));
        assert_eq!(case.extra.get("l"), Some(&serde_json::json!(["a", "b"])));
        assert_eq!(record("   ").unwrap(), None);
        // a level this reader does not know, a message of another shape
        let r = record(r#"{"dt": "x", "lvl": "marker", "msg": ["a", {"b": "c"}]}"#).unwrap().unwrap();
        assert_eq!((r.lvl, r.msg.text()), (Level::Other, None));
    }

    #[test]
    fn what_is_not_a_record_is_said() {
        let err = |l: &str| record(l).unwrap_err();
        assert!(err("[    0.000000] Linux version 6.1").contains("not a LAVA log record"));
        for cut in [
            r#"{"dt": "x", "lvl": "target", "msg": "cut"#,
            r#"{"dt": "x", "msg": "m"}"#,
            r#"{"dt": "x", "lvl": "t", "msg": "m"} tail"#,
        ] {
            let e = err(cut);
            assert!(e.starts_with("not a LAVA log record: ") && e.len() > 23 && !e.contains('\n'), "{cut}: {e}");
        }
        assert!(err(r#"{"dt": "x", "msg": "m"}"#).contains("lvl"), "{}", err(r#"{"dt": "x", "msg": "m"}"#));
    }
}
