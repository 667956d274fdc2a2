//! Row writers: CSV and JSON lines.
//!
//! One row per counter per sample:
//! `timestamp,mechanism,socket,domain,energy_j,estimated,model` where `timestamp` is seconds
//! since the Unix epoch with microsecond precision, `energy_j` the joules since the previous row
//! of the same counter, `estimated` `true` for model figures, and `model` the model's name and
//! coefficients (empty for measurements).

use std::io::{self, Write};
use wattio_energy::{CounterSpec, Provenance};

/// Output formats of `wattio record`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    JsonLines,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csv" => Ok(Format::Csv),
            "jsonl" | "json-lines" | "ndjson" => Ok(Format::JsonLines),
            other => Err(format!("unknown format '{other}': use csv or jsonl")),
        }
    }
}

/// The CSV header line (without newline).
pub const CSV_HEADER: &str = "timestamp,mechanism,socket,domain,energy_j,estimated,model";

/// Formats samples of one source as rows.
pub struct RowFormatter {
    format: Format,
    /// Per counter: the constant part of each row, pre-formatted once.
    prefixes: Vec<(String, String)>,
    line: String,
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl RowFormatter {
    /// A formatter for `specs` read by a source of `provenance`.
    pub fn new(format: Format, specs: &[CounterSpec], provenance: &Provenance) -> Self {
        let model = provenance.model.clone().unwrap_or_default();
        let prefixes = specs
            .iter()
            .map(|s| match format {
                Format::Csv => (
                    format!(",{},{},{},", provenance.mechanism, s.socket, s.domain),
                    format!(",{},{}\n", provenance.estimated, csv_field(&model)),
                ),
                Format::JsonLines => (
                    format!(
                        ",\"mechanism\":\"{}\",\"socket\":{},\"domain\":\"{}\",\"energy_j\":",
                        provenance.mechanism, s.socket, s.domain
                    ),
                    format!(
                        ",\"estimated\":{},\"model\":{}}}\n",
                        provenance.estimated,
                        if model.is_empty() {
                            "null".to_string()
                        } else {
                            serde_json::to_string(&model).unwrap_or_else(|_| "null".into())
                        }
                    ),
                ),
            })
            .collect();
        RowFormatter {
            format,
            prefixes,
            line: String::with_capacity(256),
        }
    }

    /// Writes the header (CSV only).
    pub fn write_header(&self, w: &mut impl Write) -> io::Result<()> {
        match self.format {
            Format::Csv => writeln!(w, "{CSV_HEADER}"),
            Format::JsonLines => Ok(()),
        }
    }

    /// Writes one row per counter for a sample taken at `unix_s` with `joules[i]` per counter.
    pub fn write_sample(
        &mut self,
        w: &mut impl Write,
        unix_s: f64,
        joules: &[f64],
    ) -> io::Result<()> {
        use std::fmt::Write as _;
        for (i, j) in joules.iter().enumerate() {
            self.line.clear();
            let (pre, post) = &self.prefixes[i];
            let _ = match self.format {
                Format::Csv => write!(self.line, "{unix_s:.6}{pre}{j}{post}"),
                Format::JsonLines => write!(self.line, "{{\"timestamp\":{unix_s:.6}{pre}{j}{post}"),
            };
            w.write_all(self.line.as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_energy::{Domain, Mechanism, ModelParams, Wrap};

    fn specs() -> Vec<CounterSpec> {
        vec![CounterSpec {
            socket: 1,
            domain: Domain::Dram,
            unit_j: 1e-6,
            wrap: Wrap::AtMax(100),
            origin: String::new(),
        }]
    }

    #[test]
    fn csv_rows_carry_provenance() {
        let p = ModelParams::default().provenance();
        let mut f = RowFormatter::new(Format::Csv, &specs(), &p);
        let mut out = Vec::new();
        f.write_header(&mut out).unwrap();
        f.write_sample(&mut out, 1700000000.1234567, &[0.25])
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut rdr = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        let rec = rdr.records().next().unwrap().unwrap();
        assert_eq!(&rec[0], "1700000000.123457");
        assert_eq!(&rec[1], "model");
        assert_eq!(&rec[2], "1");
        assert_eq!(&rec[3], "dram");
        assert_eq!(&rec[4], "0.25");
        assert_eq!(&rec[5], "true");
        assert_eq!(&rec[6], "ccf-linear(min=0.74W,max=3.5W per vCPU)");
    }

    #[test]
    fn json_lines_parse_back() {
        let p = Provenance::measured(Mechanism::Perf);
        let mut f = RowFormatter::new(Format::JsonLines, &specs(), &p);
        let mut out = Vec::new();
        f.write_sample(&mut out, 12.5, &[1.5e-7]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["mechanism"], "perf");
        assert_eq!(v["domain"], "dram");
        assert_eq!(v["energy_j"], 1.5e-7);
        assert_eq!(v["estimated"], false);
        assert!(v["model"].is_null());
    }
}
