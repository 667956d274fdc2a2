//! One section of a `wattio report` page: the figures, tables and notes drawn for one result
//! file. The report has a [`ReportSection`] for each kind of result it reads, and lays out the
//! page around them.

use crate::{esc, Chart};
use std::fmt::Write as _;

/// A result that knows how to show itself in an HTML report.
pub trait ReportSection {
    /// Short kind name used in the section's heading and the table of contents.
    fn kind(&self) -> &'static str;
    /// Appends this result's figures, tables and notes to `section`.
    fn render(&self, section: &mut HtmlSection);
}

/// The HTML of one section, built from figures, tables and paragraphs. Every figure names the
/// provenance of its numbers in its caption; estimates are styled apart from measurements.
#[derive(Debug, Default, Clone)]
pub struct HtmlSection {
    html: String,
}

impl HtmlSection {
    pub fn new() -> HtmlSection {
        HtmlSection::default()
    }

    /// A figure whose numbers are energy: the caption names the energy provenance.
    pub fn figure(&mut self, svg: &str, caption: &str, provenance: &str) {
        self.figure_as(svg, caption, "energy", provenance);
    }

    /// A figure whose caption names `what` the provenance is about (timing, CPU time, …).
    pub fn figure_as(&mut self, svg: &str, caption: &str, what: &str, provenance: &str) {
        let _ = writeln!(
            self.html,
            "<figure>{svg}<figcaption>{} — {}: {}</figcaption></figure>",
            esc(caption),
            esc(what),
            provenance_html(provenance)
        );
    }

    /// A table with one header row; every cell is escaped.
    pub fn table(&mut self, head: &[&str], rows: &[Vec<String>]) {
        self.html.push_str("<table><tr>");
        for h in head {
            let _ = write!(self.html, "<th>{}</th>", esc(h));
        }
        self.html.push_str("</tr>\n");
        for r in rows {
            self.html.push_str("<tr>");
            for c in r {
                let _ = write!(self.html, "<td>{}</td>", esc(c));
            }
            self.html.push_str("</tr>\n");
        }
        self.html.push_str("</table>\n");
    }

    /// A paragraph of HTML the caller built (escaping what it inserts, e.g. with [`esc`] and
    /// [`provenance_html`]).
    pub fn paragraph_html(&mut self, html: &str) {
        let _ = write!(self.html, "<p>{html}</p>");
    }

    /// A small-print note; `text` is escaped.
    pub fn note(&mut self, text: &str) {
        let _ = write!(self.html, "<p class=\"note\">{}</p>", esc(text));
    }

    /// The HTML written so far.
    pub fn as_str(&self) -> &str {
        &self.html
    }

    pub fn into_html(self) -> String {
        self.html
    }
}

/// A provenance label as HTML: estimates and simulations are styled apart (class `est`).
pub fn provenance_html(label: &str) -> String {
    let class = if label.contains("estimated") || label.contains("simulat") {
        "prov est"
    } else {
        "prov"
    };
    format!(r#"<span class="{class}">{}</span>"#, esc(label))
}

impl Chart {
    /// A chart with a title, a provenance and axis names, and nothing else.
    pub fn titled(title: &str, provenance: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            provenance: provenance.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_styled_apart_and_everything_is_escaped() {
        let mut s = HtmlSection::new();
        s.figure("<svg/>", "a < b", "estimated (model: x&y)");
        s.figure_as("<svg/>", "t", "timing", "measured (perf)");
        s.table(&["h<"], &[vec!["c&".into()]]);
        s.note("n>");
        let html = s.into_html();
        assert!(html.contains(
            r#"a &lt; b — energy: <span class="prov est">estimated (model: x&amp;y)</span>"#
        ));
        assert!(html.contains(r#"t — timing: <span class="prov">measured (perf)</span>"#));
        assert!(html.contains("<th>h&lt;</th>"));
        assert!(html.contains("<td>c&amp;</td>"));
        assert!(html.contains(r#"<p class="note">n&gt;</p>"#));
    }
}
