//! Plain-text tables for terminal reports.

/// 184890 -> "184,890"
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Microseconds as milliseconds with a sensible number of digits.
pub fn ms(us: f64) -> String {
    let v = us / 1000.0;
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

pub(crate) fn percent(part: usize, whole: usize) -> String {
    if whole == 0 { "-".into() } else { format!("{:.2} %", 100.0 * part as f64 / whole as f64) }
}

/// A table with a header; the first column is left-aligned, the others
/// right-aligned.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(header: &[S]) -> Table {
        Table { header: header.iter().map(|s| s.as_ref().to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut width = vec![0; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(n) {
                if i == 0 {
                    line.push_str(&format!("{:<w$}", c, w = width[i]));
                } else {
                    line.push_str(&format!("  {:>w$}", c, w = width[i]));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_alignment() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(184890), "184,890");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(percent(1, 4), "25.00 %");
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["ext4".into(), "616".into()]);
        assert_eq!(t.render(), "name    n\next4  616\n");
    }
}
