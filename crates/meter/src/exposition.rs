//! The two text formats a metrics scraper reads, each to its own specification:
//!
//! * the Prometheus text format 0.0.4 (<https://prometheus.io/docs/instrumenting/exposition_formats/>),
//!   the default: `# HELP` and `# TYPE` name the sample itself (`…_total` for a counter), HELP
//!   escapes only `\` and line feed, no end marker;
//! * OpenMetrics 1.0 (<https://github.com/prometheus/OpenMetrics/blob/v1.0.0/specification/OpenMetrics.md>),
//!   when the request's `Accept` asks for `application/openmetrics-text`: the metadata names
//!   the family (the counter's samples add `_total`), a `# UNIT` line where the family has one,
//!   HELP also escapes `"`, and the text ends with `# EOF`.
//!
//! Sample names, labels and values are the same in both, so a query works whichever format was
//! scraped.

use std::borrow::Cow;
use std::fmt::Write;

/// One sample's label pairs (name, value), the values borrowed where they can be.
pub type Labels<'a> = Vec<(&'static str, Cow<'a, str>)>;

/// What a family's samples are: counters (`{name}_total`, only ever growing) or gauges (`{name}`,
/// a value now, such as the agent's resident memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// A metric family: a counter's samples are `{name}_total{labels} value`, a gauge's
/// `{name}{labels} value`. Label values borrow from whoever keeps the series (a scrape of 10,000
/// series copies no label).
#[derive(Debug, Clone)]
pub struct MetricFamily<'a> {
    /// The family name, without `_total`.
    pub name: Cow<'static, str>,
    pub kind: MetricKind,
    pub help: Cow<'static, str>,
    /// The unit, a suffix of `name` as OpenMetrics requires (`joules`), if the family has one.
    pub unit: Option<&'static str>,
    /// Label pairs and value of each sample.
    pub samples: Vec<(Labels<'a>, f64)>,
}

/// Which text format a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpositionFormat {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl ExpositionFormat {
    /// The format an `Accept` header asks for (RFC 9110 §12.5.1): OpenMetrics when it names
    /// `application/openmetrics-text` (or `application/*`) with a non-zero quality at least
    /// that of the Prometheus text format, `text/plain`; the Prometheus format otherwise, and
    /// without the header. Each type's quality is that of the most specific range matching it
    /// (`text/plain` before `text/*` before `*/*`); types not served here (protobuf, JSON) do
    /// not count.
    pub fn from_accept(accept: Option<&str>) -> ExpositionFormat {
        let Some(accept) = accept else {
            return ExpositionFormat::Prometheus;
        };
        // (specificity, quality) of the best range seen for each type: 2 exact, 1 `type/*`,
        // 0 `*/*`.
        let mut openmetrics: Option<(u8, f64)> = None;
        let mut text: Option<(u8, f64)> = None;
        let better = |seen: &mut Option<(u8, f64)>, specificity: u8, quality: f64| {
            if seen.is_none_or(|(s, q)| specificity > s || (specificity == s && quality > q)) {
                *seen = Some((specificity, quality));
            }
        };
        for range in accept.split(',') {
            let mut params = range.split(';').map(str::trim);
            let media = params.next().unwrap_or("").to_ascii_lowercase();
            let quality = params
                .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
                .find_map(|q| q.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => better(&mut openmetrics, 2, quality),
                "application/*" => better(&mut openmetrics, 1, quality),
                "text/plain" => better(&mut text, 2, quality),
                "text/*" => better(&mut text, 1, quality),
                "*/*" => {
                    better(&mut openmetrics, 0, quality);
                    better(&mut text, 0, quality);
                }
                _ => {}
            }
        }
        let text = text.map_or(0.0, |(_, q)| q);
        // Named (not only through `*/*`, as curl sends), wanted, and not less than text.
        if openmetrics.is_some_and(|(s, q)| s >= 1 && q > 0.0 && q >= text) {
            ExpositionFormat::OpenMetrics
        } else {
            ExpositionFormat::Prometheus
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            ExpositionFormat::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            ExpositionFormat::OpenMetrics => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            }
        }
    }
}

/// Renders `families` in `format`.
pub fn render(families: &[MetricFamily<'_>], format: ExpositionFormat) -> String {
    let mut out = String::new();
    for f in families {
        let (sample, kind) = match f.kind {
            MetricKind::Counter => (format!("{}_total", f.name), "counter"),
            MetricKind::Gauge => (f.name.to_string(), "gauge"),
        };
        match format {
            ExpositionFormat::Prometheus => {
                let _ = writeln!(out, "# HELP {sample} {}", escape(&f.help, false));
                let _ = writeln!(out, "# TYPE {sample} {kind}");
            }
            ExpositionFormat::OpenMetrics => {
                let _ = writeln!(out, "# HELP {} {}", f.name, escape(&f.help, true));
                let _ = writeln!(out, "# TYPE {} {kind}", f.name);
                if let Some(unit) = f.unit {
                    let _ = writeln!(out, "# UNIT {} {unit}", f.name);
                }
            }
        }
        for (labels, value) in &f.samples {
            out.push_str(&sample);
            if !labels.is_empty() {
                out.push('{');
                for (i, (name, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(name);
                    out.push_str("=\"");
                    escape_into(&mut out, v, true);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            push_number(&mut out, *value);
            out.push('\n');
        }
    }
    if format == ExpositionFormat::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// A value as both formats write it: `NaN`, `+Inf`, `-Inf`, or a decimal (never an exponent
/// that a strict parser could refuse: Rust's `Display` for `f64` writes none).
fn push_number(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(out, "{v}");
    }
}

/// `text` with `\` and line feeds escaped, and `"` too where `quotes` (label values in both
/// formats, OpenMetrics' HELP).
fn escape(text: &str, quotes: bool) -> String {
    let mut s = String::with_capacity(text.len());
    escape_into(&mut s, text, quotes);
    s
}

/// [`escape`] appended to `out`; a value with nothing to escape (nearly all) is copied whole.
fn escape_into(out: &mut String, text: &str, quotes: bool) {
    let special = |b: u8| b == b'\\' || b == b'\n' || (quotes && b == b'"');
    if !text.bytes().any(special) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family() -> MetricFamily<'static> {
        MetricFamily {
            name: "x_energy_joules".into(),
            kind: MetricKind::Counter,
            help: "Energy; estimated=\"true\" marks a\\b".into(),
            unit: Some("joules"),
            samples: vec![
                (
                    vec![("socket", "0".into()), ("model", "a\"b\nc".into())],
                    1.5,
                ),
                (vec![], 2.0),
            ],
        }
    }

    #[test]
    fn prometheus_text_names_the_sample_and_has_no_end_marker() {
        let t = render(&[family()], ExpositionFormat::Prometheus);
        assert_eq!(
            t,
            "# HELP x_energy_joules_total Energy; estimated=\"true\" marks a\\\\b\n\
             # TYPE x_energy_joules_total counter\n\
             x_energy_joules_total{socket=\"0\",model=\"a\\\"b\\nc\"} 1.5\n\
             x_energy_joules_total 2\n"
        );
    }

    #[test]
    fn openmetrics_names_the_family_with_its_unit_and_ends_with_eof() {
        let t = render(&[family()], ExpositionFormat::OpenMetrics);
        assert_eq!(
            t,
            "# HELP x_energy_joules Energy; estimated=\\\"true\\\" marks a\\\\b\n\
             # TYPE x_energy_joules counter\n\
             # UNIT x_energy_joules joules\n\
             x_energy_joules_total{socket=\"0\",model=\"a\\\"b\\nc\"} 1.5\n\
             x_energy_joules_total 2\n\
             # EOF\n"
        );
    }

    #[test]
    fn a_gauge_is_named_without_total_in_both_formats() {
        let g = MetricFamily {
            name: "process_resident_memory_bytes".into(),
            kind: MetricKind::Gauge,
            help: "Resident memory".into(),
            unit: Some("bytes"),
            samples: vec![(vec![], 4096.0)],
        };
        assert_eq!(
            render(std::slice::from_ref(&g), ExpositionFormat::Prometheus),
            "# HELP process_resident_memory_bytes Resident memory\n\
             # TYPE process_resident_memory_bytes gauge\n\
             process_resident_memory_bytes 4096\n"
        );
        assert_eq!(
            render(&[g], ExpositionFormat::OpenMetrics),
            "# HELP process_resident_memory_bytes Resident memory\n\
             # TYPE process_resident_memory_bytes gauge\n\
             # UNIT process_resident_memory_bytes bytes\n\
             process_resident_memory_bytes 4096\n\
             # EOF\n"
        );
    }

    #[test]
    fn accept_header_chooses_openmetrics_only_when_preferred() {
        use ExpositionFormat::*;
        assert_eq!(ExpositionFormat::from_accept(None), Prometheus);
        assert_eq!(ExpositionFormat::from_accept(Some("*/*")), Prometheus);
        assert_eq!(
            ExpositionFormat::from_accept(Some("text/plain;version=0.0.4")),
            Prometheus
        );
        // What Prometheus 2.x sends.
        assert_eq!(
            ExpositionFormat::from_accept(Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")),
            OpenMetrics
        );
        assert_eq!(
            ExpositionFormat::from_accept(Some(
                "text/plain;version=0.0.4, application/openmetrics-text;q=0.5"
            )),
            Prometheus
        );
        assert_eq!(
            ExpositionFormat::from_accept(Some("application/openmetrics-text;q=0")),
            Prometheus
        );
        assert_eq!(
            ExpositionFormat::from_accept(Some("Application/OpenMetrics-Text")),
            OpenMetrics
        );
        // Prometheus with protobuf first (native histograms): protobuf is not served here,
        // and OpenMetrics is still preferred to the text format.
        assert_eq!(
            ExpositionFormat::from_accept(Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")),
            OpenMetrics
        );
        assert_eq!(
            ExpositionFormat::from_accept(Some("application/*")),
            OpenMetrics
        );
        assert_eq!(
            ExpositionFormat::from_accept(Some("application/json")),
            Prometheus
        );
        assert_eq!(
            ExpositionFormat::from_accept(Some("text/*;q=0.9, application/openmetrics-text;q=0.8")),
            Prometheus
        );
    }

    fn number(v: f64) -> String {
        let mut s = String::new();
        push_number(&mut s, v);
        s
    }

    #[test]
    fn special_values_are_spelled_as_both_formats_read_them() {
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(1e21), "1000000000000000000000");
        assert_eq!(number(0.25), "0.25");
    }
}
