//! The one table writer: a header and rows of text cells, written as Markdown or CSV with one
//! escaping rule each, so a cell holding a `|`, a newline or a quote cannot break a table.

/// How a Markdown column is aligned (`---`, `:---`, `---:`); CSV ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// No alignment marker (`---`): left in every renderer.
    Plain,
    /// Left, marked (`:---`).
    Left,
    /// Right (`---:`), for figures.
    Right,
}

/// A header and rows of cells. Cells are text as the caller formatted it (precision, signs,
/// units); the writer only escapes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new<S: AsRef<str>>(columns: &[(S, Align)]) -> Table {
        Table {
            columns: columns
                .iter()
                .map(|(n, a)| (n.as_ref().to_string(), *a))
                .collect(),
            rows: Vec::new(),
        }
    }

    /// A table of plain (unaligned) columns, as a CSV header lists them.
    pub fn plain(columns: &[&str]) -> Table {
        Table::new(
            &columns
                .iter()
                .map(|c| (*c, Align::Plain))
                .collect::<Vec<_>>(),
        )
    }

    /// Appends a row; it must have one cell per column.
    pub fn push(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "one cell per column");
        self.rows.push(cells);
    }

    /// The column names, in order (for a renderer of its own, as an HTML page's).
    pub fn header(&self) -> Vec<&str> {
        self.columns.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The rows, each one cell per column, unescaped.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Whether it has no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// GitHub-flavoured Markdown: `| a | b |`, the alignment line, one line per row, each line
    /// ending in a newline; each cell escaped by [`markdown_cell`], an empty cell one space
    /// (`| |`).
    pub fn markdown(&self) -> String {
        let line = |cells: &mut dyn Iterator<Item = String>| {
            let mut s = String::from("|");
            for c in cells {
                if c.is_empty() {
                    s.push_str(" |");
                } else {
                    s.push(' ');
                    s.push_str(&c);
                    s.push_str(" |");
                }
            }
            s.push('\n');
            s
        };
        let mut s = line(&mut self.columns.iter().map(|(n, _)| markdown_cell(n)));
        s.push('|');
        for (_, a) in &self.columns {
            s.push_str(match a {
                Align::Plain => "---|",
                Align::Left => ":---|",
                Align::Right => "---:|",
            });
        }
        s.push('\n');
        for r in &self.rows {
            s.push_str(&line(&mut r.iter().map(|c| markdown_cell(c))));
        }
        s
    }

    /// CSV: the header, then the rows, quoted by the `csv` crate where a field needs it.
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        // Writing strings to memory cannot fail.
        w.write_record(self.columns.iter().map(|(n, _)| n))
            .expect("CSV to memory");
        for r in &self.rows {
            w.write_record(r).expect("CSV to memory");
        }
        String::from_utf8(w.into_inner().expect("CSV to memory")).expect("CSV of UTF-8 fields")
    }
}

/// The one escaping rule of a Markdown cell: `|` escaped as `\|`, a line break as a space, so
/// the cell stays one cell of one line.
pub fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_aligns_and_escapes_and_csv_quotes() {
        let mut t = Table::new(&[
            ("name", Align::Plain),
            ("J", Align::Right),
            ("note", Align::Left),
        ]);
        t.push(vec!["a|b".into(), "1.5".into(), "two\nlines".into()]);
        t.push(vec!["c, \"d\"".into(), "-2".into(), String::new()]);
        assert_eq!(
            t.markdown(),
            "| name | J | note |\n|---|---:|:---|\n| a\\|b | 1.5 | two lines |\n| c, \"d\" | -2 | |\n"
        );
        assert_eq!(
            t.csv(),
            "name,J,note\na|b,1.5,\"two\nlines\"\n\"c, \"\"d\"\"\",-2,\n"
        );
        assert!(!t.is_empty());
        assert_eq!(Table::plain(&["x"]).markdown(), "| x |\n|---|\n");
    }
}
