//! Row writers: CSV and JSON lines.
//!
//! One row per counter per sample:
//! `timestamp,mechanism,socket,domain,energy_j,estimated,model` where `timestamp` is seconds
//! since the Unix epoch with microsecond precision, `energy_j` the joules since the previous row
//! of the same counter, `estimated` `true` for model figures, and `model` the model's name and
//! coefficients (empty for measurements, except GPUs read from integrated power: `power,
//! integrated`). Each row carries its own counter's provenance: GPU rows read through NVML say
//! `nvml` and `false` beside CPU rows of any mechanism.

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

/// The columns `record --by` adds after [`CSV_HEADER`]: empty on counter rows; on attribution
/// rows `entity` is `process`, `cgroup`, `other` or `idle`, `domain` is `total` (packages +
/// DRAM, the energy that was split) and `socket` is empty.
pub const CSV_ENTITY_COLUMNS: &str = "entity,pid,comm,cgroup,cpu_s";

/// Formats samples of one source as rows.
pub struct RowFormatter {
    format: Format,
    /// Per counter: the constant part of each row, pre-formatted once.
    prefixes: Vec<(String, String)>,
    line: String,
    /// `record --by`: the extra columns, and the constant parts of attribution rows.
    entity: Option<(String, String)>,
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl RowFormatter {
    /// A formatter for `specs` read by a source of `provenance`.
    pub fn new(format: Format, specs: &[CounterSpec], provenance: &Provenance) -> Self {
        Self::labelled(format, specs, &vec![provenance.clone(); specs.len()])
    }

    /// A formatter for `source`'s counters, each row with its counter's own provenance
    /// ([`wattio_energy::Source::counter_provenance`]).
    pub fn for_source(format: Format, source: &dyn wattio_energy::Source) -> Self {
        let n = source.counters().len();
        let provs: Vec<Provenance> = (0..n)
            .map(|i| source.counter_provenance(i).clone())
            .collect();
        Self::labelled(format, source.counters(), &provs)
    }

    /// A formatter for `specs`, counter `i` of provenance `provenances[i]`.
    pub fn labelled(format: Format, specs: &[CounterSpec], provenances: &[Provenance]) -> Self {
        let prefixes = specs
            .iter()
            .zip(provenances)
            .map(|(s, provenance)| (s, provenance, provenance.model.clone().unwrap_or_default()))
            .map(|(s, provenance, model)| match format {
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
            entity: None,
        }
    }

    /// Adds the [`CSV_ENTITY_COLUMNS`] (CSV) so attribution rows can follow counter rows, with
    /// the attribution label on those rows' `model` field (`…, attributed (cpu-time share)`).
    pub fn with_entity_columns(mut self, provenance: &Provenance) -> Self {
        let label = wattio_energy::attribution::attributed_label(&provenance.label());
        if self.format == Format::Csv {
            for (_, post) in &mut self.prefixes {
                post.insert_str(post.len() - 1, ",,,,,");
            }
        }
        self.entity = Some(match self.format {
            Format::Csv => (
                format!(",{},,total,", provenance.mechanism),
                format!(",{},{}", provenance.estimated, csv_field(&label)),
            ),
            Format::JsonLines => (
                format!(
                    ",\"mechanism\":\"{}\",\"domain\":\"total\",\"energy_j\":",
                    provenance.mechanism
                ),
                format!(
                    ",\"estimated\":{},\"model\":{}",
                    provenance.estimated,
                    serde_json::to_string(&label).unwrap_or_else(|_| "null".into())
                ),
            ),
        });
        self
    }

    /// Writes one attribution row (after [`RowFormatter::with_entity_columns`]).
    pub fn write_entity_row(
        &mut self,
        w: &mut impl Write,
        unix_s: f64,
        row: &crate::attribute::EntityRow,
    ) -> io::Result<()> {
        use std::fmt::Write as _;
        let Some((pre, post)) = &self.entity else {
            return Ok(());
        };
        self.line.clear();
        let pid = row.pid.map(|p| p.to_string()).unwrap_or_default();
        let _ = match self.format {
            Format::Csv => writeln!(
                self.line,
                "{unix_s:.6}{pre}{}{post},{},{pid},{},{},{}",
                row.energy_j,
                row.entity,
                csv_field(row.comm.as_deref().unwrap_or("")),
                csv_field(row.cgroup.as_deref().unwrap_or("")),
                row.cpu_s
            ),
            Format::JsonLines => {
                let js = |o: &Option<String>| {
                    o.as_ref()
                        .and_then(|v| serde_json::to_string(v).ok())
                        .unwrap_or_else(|| "null".into())
                };
                writeln!(
                    self.line,
                    "{{\"timestamp\":{unix_s:.6}{pre}{}{post},\"entity\":\"{}\",\"pid\":{},\"comm\":{},\"cgroup\":{},\"cpu_s\":{}}}",
                    row.energy_j,
                    row.entity,
                    if pid.is_empty() { "null".to_string() } else { pid },
                    js(&row.comm),
                    js(&row.cgroup),
                    row.cpu_s
                )
            }
        };
        w.write_all(self.line.as_bytes())
    }

    /// Writes the header (CSV only).
    pub fn write_header(&self, w: &mut impl Write) -> io::Result<()> {
        match self.format {
            Format::Csv if self.entity.is_some() => {
                writeln!(w, "{CSV_HEADER},{CSV_ENTITY_COLUMNS}")
            }
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
    fn entity_rows_share_the_csv_with_counter_rows() {
        let p = ModelParams::default().provenance();
        let mut f = RowFormatter::new(Format::Csv, &specs(), &p).with_entity_columns(&p);
        let mut out = Vec::new();
        f.write_header(&mut out).unwrap();
        f.write_sample(&mut out, 1.0, &[0.25]).unwrap();
        let row = crate::attribute::EntityRow {
            entity: "process",
            pid: Some(42),
            comm: Some("a,b".into()),
            cgroup: Some("/system.slice/x.service".into()),
            cpu_s: 0.5,
            energy_j: 1.25,
        };
        f.write_entity_row(&mut out, 2.0, &row).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut rdr = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        let h = rdr.headers().unwrap().clone();
        assert_eq!(h.len(), 12);
        let recs: Vec<_> = rdr.records().map(|r| r.unwrap()).collect();
        assert_eq!(&recs[0][3], "dram");
        assert_eq!(&recs[0][7], "");
        assert_eq!(&recs[1][2], "");
        assert_eq!(&recs[1][3], "total");
        assert_eq!(&recs[1][4], "1.25");
        assert!(recs[1][6].ends_with("attributed (cpu-time share)"));
        assert_eq!(&recs[1][7], "process");
        assert_eq!(&recs[1][8], "42");
        assert_eq!(&recs[1][9], "a,b");
        assert_eq!(&recs[1][11], "0.5");
        // JSON lines too.
        let mut f = RowFormatter::new(Format::JsonLines, &specs(), &p).with_entity_columns(&p);
        let mut out = Vec::new();
        f.write_entity_row(&mut out, 2.0, &row).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["entity"], "process");
        assert_eq!(v["pid"], 42);
        assert_eq!(v["estimated"], true);
        assert_eq!(v["domain"], "total");
    }

    #[test]
    fn each_row_carries_its_own_counters_provenance() {
        let mut specs = specs();
        specs.push(CounterSpec {
            socket: 0,
            domain: Domain::Gpu,
            unit_j: 1e-3,
            wrap: Wrap::AtMax(u64::MAX),
            origin: String::new(),
        });
        let provs = [
            ModelParams::default().provenance(),
            Provenance::integrated_power(Mechanism::Nvml),
        ];
        let mut f = RowFormatter::labelled(Format::Csv, &specs, &provs);
        let mut out = Vec::new();
        f.write_header(&mut out).unwrap();
        f.write_sample(&mut out, 1.0, &[0.5, 2.0]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut rdr = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        let recs: Vec<_> = rdr.records().map(|r| r.unwrap()).collect();
        assert_eq!((&recs[0][1], &recs[0][5]), ("model", "true"));
        assert_eq!(
            (&recs[1][1], &recs[1][3], &recs[1][5], &recs[1][6]),
            ("nvml", "gpu", "false", "power, integrated")
        );
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
