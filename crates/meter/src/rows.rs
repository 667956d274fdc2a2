//! The rows of a `wattio record` file: [`RecordRow`], laid out here, written by
//! [`crate::sink::RowFormatter`] and read back by `wattio report`.
//!
//! One row per counter per sample: `timestamp,mechanism,socket,domain,energy_j,estimated,model`
//! ([`RECORD_CSV_HEADER`]) where `timestamp` is seconds since the Unix epoch with microsecond
//! precision, `energy_j` the joules since the previous row of the same counter, `estimated`
//! `true` for model figures, and `model` the model's name and coefficients (empty for
//! measurements, except GPUs read from integrated power: `power, integrated`). Each row carries
//! its own counter's provenance: GPU rows read through NVML say `nvml` and `false` beside CPU
//! rows of any mechanism. `record --by` adds [`RECORD_CSV_ENTITY_COLUMNS`] and attribution rows.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use wattio_energy::{Mechanism, Provenance};

/// The CSV header line (without newline): the counter columns of [`RecordRow`]. It lives with
/// the result schemas, by which `wattio report` recognises a `record` file.
pub use wattio_results::RECORD_CSV_HEADER;

/// The columns `record --by` adds after [`RECORD_CSV_HEADER`]: empty on counter rows; on attribution
/// rows `entity` is `process`, `cgroup`, `other` or `idle`, `domain` is `total` (packages +
/// DRAM, the energy that was split) and `socket` is empty.
pub const RECORD_CSV_ENTITY_COLUMNS: &str = "entity,pid,comm,cgroup,cpu_s";

/// The columns `record --by container` and `--by pod` add after [`RECORD_CSV_ENTITY_COLUMNS`]:
/// the container's id and its pod's uid from the cgroup path, and the names its runtime or the
/// Kubernetes API gives (Kepler's label names), empty where none answered.
pub const RECORD_CSV_WORKLOAD_COLUMNS: &str =
    "container_id,container_name,image,pod_uid,pod_name,container_namespace";

/// Which columns a `record` file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columns {
    /// [`RECORD_CSV_HEADER`] only.
    Counter,
    /// Also [`RECORD_CSV_ENTITY_COLUMNS`] (`record --by`).
    Entity,
    /// Also [`RECORD_CSV_WORKLOAD_COLUMNS`] (`record --by container` or `pod`).
    Workload,
}

/// Output formats of `wattio record`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    Csv,
    JsonLines,
}

impl std::str::FromStr for RecordFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csv" => Ok(RecordFormat::Csv),
            "jsonl" | "json-lines" | "ndjson" => Ok(RecordFormat::JsonLines),
            other => Err(format!("unknown format '{other}': use csv or jsonl")),
        }
    }
}

/// One row of a `wattio record` file (CSV or JSON lines): a counter's energy since its previous
/// row, or (`record --by`) an entity's attributed share of the packages' and DRAM's energy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordRow {
    /// Seconds since the Unix epoch, written with microsecond precision.
    pub timestamp: f64,
    pub mechanism: Mechanism,
    /// Package, or GPU index; `None` on attribution rows.
    #[serde(default)]
    pub socket: Option<u32>,
    /// `package`, `core`, `uncore`, `dram`, `psys`, `gpu`; `total` on attribution rows.
    pub domain: String,
    /// Joules since the previous row of the same counter (attribution rows: the entity's share
    /// of the interval).
    pub energy_j: f64,
    pub estimated: bool,
    /// The model and its coefficients for estimates, how a measurement was made when it is not
    /// a counter's reading (`power, integrated`), the attribution label on attribution rows.
    #[serde(default)]
    pub model: Option<String>,
    /// `process`, `cgroup`, `other` (entries past `--top`) or `idle`; `None` on counter rows.
    #[serde(default)]
    pub entity: Option<String>,
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub comm: Option<String>,
    #[serde(default)]
    pub cgroup: Option<String>,
    /// CPU seconds of the entity over the interval.
    #[serde(default)]
    pub cpu_s: Option<f64>,
    #[serde(default)]
    pub container_id: Option<String>,
    #[serde(default)]
    pub container_name: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub pod_uid: Option<String>,
    #[serde(default)]
    pub pod_name: Option<String>,
    #[serde(default)]
    pub container_namespace: Option<String>,
}

/// A CSV field, quoted by the `csv` crate where RFC 4180 needs it, and also where it starts or
/// ends with a space (which some readers would otherwise trim).
pub(crate) fn csv_field(s: &str) -> String {
    if s.is_empty() {
        // alone on a record the csv crate would quote it (an empty record looks the same)
        return String::new();
    }
    let style = if s.starts_with(' ') || s.ends_with(' ') {
        csv::QuoteStyle::Always
    } else {
        csv::QuoteStyle::Necessary
    };
    // A buffer the size of the quoted field at most, not the crate's default 8 KiB: attribution
    // rows format their text fields once per row.
    let mut w = csv::WriterBuilder::new()
        .quote_style(style)
        .buffer_capacity(2 * s.len() + 3)
        .from_writer(Vec::new());
    // Writing to memory cannot fail; the field is UTF-8, and quoting keeps it so. A record of
    // the one field, less its terminator: the writer closes a quoted field only at the end of
    // the record.
    w.write_record([s]).expect("CSV to memory");
    let mut out =
        String::from_utf8(w.into_inner().expect("CSV to memory")).expect("CSV of a UTF-8 field");
    out.pop();
    out
}

fn json_or_null<T: Serialize>(v: Option<T>) -> String {
    v.and_then(|v| serde_json::to_string(&v).ok())
        .unwrap_or_else(|| "null".into())
}

impl RecordRow {
    /// A counter row's constant columns: counter `socket`/`domain` read with `provenance`
    /// (timestamp and energy zero until filled in).
    pub fn counter(socket: u32, domain: &str, provenance: &Provenance) -> RecordRow {
        RecordRow {
            timestamp: 0.0,
            mechanism: provenance.mechanism,
            socket: Some(socket),
            domain: domain.to_string(),
            energy_j: 0.0,
            estimated: provenance.estimated,
            model: provenance.model.clone(),
            entity: None,
            pid: None,
            comm: None,
            cgroup: None,
            cpu_s: None,
            container_id: None,
            container_name: None,
            image: None,
            pod_uid: None,
            pod_name: None,
            container_namespace: None,
        }
    }

    /// The six workload fields, in [`RECORD_CSV_WORKLOAD_COLUMNS`] order.
    fn workload_fields(&self) -> [(&'static str, Option<&str>); 6] {
        [
            ("container_id", self.container_id.as_deref()),
            ("container_name", self.container_name.as_deref()),
            ("image", self.image.as_deref()),
            ("pod_uid", self.pod_uid.as_deref()),
            ("pod_name", self.pod_name.as_deref()),
            ("container_namespace", self.container_namespace.as_deref()),
        ]
    }

    /// The figure's provenance.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            mechanism: self.mechanism,
            estimated: self.estimated,
            model: self.model.clone().filter(|m| !m.is_empty()),
        }
    }

    /// Whether this is a `record --by` attribution row rather than a counter's reading.
    pub fn is_attribution(&self) -> bool {
        self.entity.as_deref().is_some_and(|e| !e.is_empty())
    }

    /// The row's text on either side of its energy: a row is `{timestamp:.6}`, the first part,
    /// `energy_j`, the second part. The sampler formats the parts once per counter and only
    /// the two numbers per sample. `columns`: those of the file.
    pub fn parts(&self, format: RecordFormat, columns: Columns) -> (String, String) {
        let model = self.model.as_deref().unwrap_or("");
        let cpu_s = self.cpu_s.map(|c| c.to_string());
        match format {
            RecordFormat::Csv => {
                let socket = self.socket.map(|s| s.to_string()).unwrap_or_default();
                let pre = format!(",{},{socket},{},", self.mechanism, csv_field(&self.domain));
                let mut post = format!(",{},{}", self.estimated, csv_field(model));
                if columns != Columns::Counter {
                    let text = |v: &Option<String>| csv_field(v.as_deref().unwrap_or(""));
                    let _ = write!(
                        post,
                        ",{},{},{},{},{}",
                        text(&self.entity),
                        self.pid.map(|p| p.to_string()).unwrap_or_default(),
                        text(&self.comm),
                        text(&self.cgroup),
                        cpu_s.clone().unwrap_or_default()
                    );
                }
                if columns == Columns::Workload {
                    for (_, v) in self.workload_fields() {
                        post.push(',');
                        post.push_str(&csv_field(v.unwrap_or("")));
                    }
                }
                post.push('\n');
                (pre, post)
            }
            RecordFormat::JsonLines => {
                let mut pre = format!(",\"mechanism\":\"{}\"", self.mechanism);
                if let Some(s) = self.socket {
                    let _ = write!(pre, ",\"socket\":{s}");
                }
                let _ = write!(
                    pre,
                    ",\"domain\":{},\"energy_j\":",
                    json_or_null(Some(&self.domain))
                );
                let mut post = format!(
                    ",\"estimated\":{},\"model\":{}",
                    self.estimated,
                    json_or_null(Some(model).filter(|m| !m.is_empty()))
                );
                if let Some(entity) = &self.entity {
                    let _ = write!(
                        post,
                        ",\"entity\":{},\"pid\":{},\"comm\":{},\"cgroup\":{},\"cpu_s\":{}",
                        json_or_null(Some(entity)),
                        json_or_null(self.pid),
                        json_or_null(self.comm.as_ref()),
                        json_or_null(self.cgroup.as_ref()),
                        cpu_s.as_deref().unwrap_or("null")
                    );
                    if columns == Columns::Workload {
                        for (k, v) in self.workload_fields() {
                            let _ = write!(post, ",\"{k}\":{}", json_or_null(v));
                        }
                    }
                }
                post.push_str("}\n");
                (pre, post)
            }
        }
    }

    /// Appends the whole row, newline included, to `out`.
    pub fn write(&self, format: RecordFormat, columns: Columns, out: &mut String) {
        let (pre, post) = self.parts(format, columns);
        write_with_parts(out, format, self.timestamp, &pre, self.energy_j, &post);
    }
}

/// Appends a row from its [`RecordRow::parts`], its timestamp and its energy.
pub(crate) fn write_with_parts(
    out: &mut String,
    format: RecordFormat,
    unix_s: f64,
    pre: &str,
    energy_j: f64,
    post: &str,
) {
    let _ = match format {
        RecordFormat::Csv => write!(out, "{unix_s:.6}{pre}{energy_j}{post}"),
        RecordFormat::JsonLines => write!(out, "{{\"timestamp\":{unix_s:.6}{pre}{energy_j}{post}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_where_they_need_it() {
        assert_eq!(csv_field("package-0"), "package-0");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field(" padded"), "\" padded\"");
        assert_eq!(csv_field(""), "");
    }

    fn rows() -> Vec<RecordRow> {
        let measured = Provenance::measured(Mechanism::Perf);
        let gpu = Provenance::integrated_power(Mechanism::Nvml);
        let model = Provenance::estimated("ccf-linear(min=0.74W,max=3.5W per vCPU)");
        let mut a = RecordRow::counter(0, "package", &measured);
        a.timestamp = 1_700_000_000.123457;
        a.energy_j = 1.5e-7;
        let mut b = RecordRow::counter(1, "gpu", &gpu);
        b.timestamp = 1_700_000_000.5;
        b.energy_j = 12.25;
        let mut c = RecordRow::counter(0, "dram", &model);
        c.timestamp = 1_700_000_001.0;
        c.energy_j = 0.0;
        let attribution = RecordRow {
            timestamp: 1_700_000_002.25,
            socket: None,
            domain: "total".into(),
            energy_j: 3.75,
            model: Some("estimated (model: m), attributed (cpu-time share)".into()),
            entity: Some("process".into()),
            pid: Some(42),
            comm: Some("a \"b\",c".into()),
            cgroup: Some("/system.slice/x.service".into()),
            cpu_s: Some(0.5),
            ..RecordRow::counter(0, "", &model)
        };
        let idle = RecordRow {
            entity: Some("idle".into()),
            pid: None,
            comm: None,
            cgroup: None,
            ..attribution.clone()
        };
        vec![a, b, c, attribution, idle]
    }

    fn csv_text(rows: &[RecordRow]) -> String {
        let mut text = format!("{RECORD_CSV_HEADER},{RECORD_CSV_ENTITY_COLUMNS}\n");
        for r in rows {
            r.write(RecordFormat::Csv, Columns::Entity, &mut text);
        }
        text
    }

    #[test]
    fn csv_rows_read_back_as_written() {
        let text = csv_text(&rows());
        let back: Vec<RecordRow> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, rows());
        assert!(back[3].is_attribution() && !back[0].is_attribution());
        assert_eq!(
            back[1].provenance().label(),
            "measured (nvml power, integrated)"
        );
    }

    #[test]
    fn json_lines_read_back_as_written() {
        let mut text = String::new();
        for r in rows() {
            r.write(RecordFormat::JsonLines, Columns::Counter, &mut text);
        }
        let back: Vec<RecordRow> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, rows());
        // Counter rows have no entity keys, attribution rows no socket.
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert!(first.get("entity").is_none() && first["model"].is_null());
        let fourth: serde_json::Value = serde_json::from_str(text.lines().nth(3).unwrap()).unwrap();
        assert!(fourth.get("socket").is_none() && fourth["pid"] == 42);
    }

    #[test]
    fn the_header_is_the_row_fields_in_order() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(&rows()[0]).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            format!(
                "{RECORD_CSV_HEADER},{RECORD_CSV_ENTITY_COLUMNS},{RECORD_CSV_WORKLOAD_COLUMNS}"
            )
        );
    }

    #[test]
    fn workload_columns_read_back_as_written() {
        let mut row = rows()[3].clone();
        row.entity = Some("container".into());
        row.container_id = Some("ab".repeat(32));
        row.container_name = Some("web, 1".into());
        row.pod_name = Some("shop-7d9".into());
        row.container_namespace = Some("prod".into());
        let idle = RecordRow {
            entity: Some("idle".into()),
            ..rows()[4].clone()
        };
        for format in [RecordFormat::Csv, RecordFormat::JsonLines] {
            let mut text = match format {
                RecordFormat::Csv => format!(
                    "{RECORD_CSV_HEADER},{RECORD_CSV_ENTITY_COLUMNS},{RECORD_CSV_WORKLOAD_COLUMNS}\n"
                ),
                RecordFormat::JsonLines => String::new(),
            };
            row.write(format, Columns::Workload, &mut text);
            idle.write(format, Columns::Workload, &mut text);
            let back: Vec<RecordRow> = match format {
                RecordFormat::Csv => csv::Reader::from_reader(text.as_bytes())
                    .deserialize()
                    .collect::<Result<_, _>>()
                    .unwrap(),
                RecordFormat::JsonLines => text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect(),
            };
            assert_eq!(back, vec![row.clone(), idle.clone()], "{format:?}");
        }
    }

    #[test]
    fn files_without_the_entity_columns_read() {
        let text = format!("{RECORD_CSV_HEADER}\n12.000000,powercap,0,package,2.5,false,\n");
        let back: Vec<RecordRow> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back[0].socket, Some(0));
        assert_eq!(back[0].model, None);
        assert_eq!(back[0].entity, None);
        assert_eq!(
            back[0].provenance(),
            Provenance::measured(Mechanism::Powercap)
        );
    }
}
