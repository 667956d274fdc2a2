//! Row writers: CSV and JSON lines of [`RecordRow`]s (the layout is documented in
//! [`crate::rows`]).

use crate::rows::{write_with_parts, Columns, RecordFormat, RecordRow};
pub(crate) use crate::rows::{
    RECORD_CSV_ENTITY_COLUMNS, RECORD_CSV_HEADER, RECORD_CSV_WORKLOAD_COLUMNS,
};
use std::io::{self, Write};
use wattio_energy::{CounterSpec, Provenance};

/// Formats samples of one source as rows.
pub(crate) struct RowFormatter {
    format: RecordFormat,
    /// Per counter: the constant columns of its rows.
    counters: Vec<RecordRow>,
    /// Per counter: its rows' text around the energy ([`RecordRow::parts`]), formatted once.
    prefixes: Vec<(String, String)>,
    line: String,
    /// `record --by`: the constant columns of attribution rows.
    entity: Option<RecordRow>,
    /// `record --by`: the label of the energy that was split (kernel I/O rows name it).
    total_label: String,
    columns: Columns,
}

impl RowFormatter {
    /// A formatter for `specs` read by a source of `provenance` (the tests' shorthand; the
    /// sampler formats per counter, [`RowFormatter::for_source`]).
    #[cfg(test)]
    pub fn new(format: RecordFormat, specs: &[CounterSpec], provenance: &Provenance) -> Self {
        Self::labelled(format, specs, &vec![provenance.clone(); specs.len()])
    }

    /// A formatter for `source`'s counters, each row with its counter's own provenance
    /// ([`wattio_energy::Source::counter_provenance`]).
    pub fn for_source(format: RecordFormat, source: &dyn wattio_energy::Source) -> Self {
        let n = source.counters().len();
        let provs: Vec<Provenance> = (0..n)
            .map(|i| source.counter_provenance(i).clone())
            .collect();
        Self::labelled(format, source.counters(), &provs)
    }

    /// A formatter for `specs`, counter `i` of provenance `provenances[i]`.
    pub fn labelled(
        format: RecordFormat,
        specs: &[CounterSpec],
        provenances: &[Provenance],
    ) -> Self {
        let counters: Vec<RecordRow> = specs
            .iter()
            .zip(provenances)
            .map(|(s, provenance)| RecordRow::counter(s.socket, s.domain.as_str(), provenance))
            .collect();
        let prefixes = counters
            .iter()
            .map(|r| r.parts(format, Columns::Counter))
            .collect();
        RowFormatter {
            format,
            counters,
            prefixes,
            line: String::with_capacity(256),
            entity: None,
            total_label: String::new(),
            columns: Columns::Counter,
        }
    }

    /// Adds the [`RECORD_CSV_ENTITY_COLUMNS`] (CSV) so attribution rows can follow counter rows, with
    /// the attribution label on those rows' `model` field (`…, attributed (cpu-time share)`).
    /// `workload`: also the [`RECORD_CSV_WORKLOAD_COLUMNS`] (`--by container` or `pod`).
    pub fn with_entity_columns(mut self, provenance: &Provenance, workload: bool) -> Self {
        let label = wattio_energy::attribution::attributed_label(&provenance.label());
        self.total_label = provenance.label();
        self.columns = match workload {
            true => Columns::Workload,
            false => Columns::Entity,
        };
        self.prefixes = self
            .counters
            .iter()
            .map(|r| r.parts(self.format, self.columns))
            .collect();
        self.entity = Some(RecordRow {
            socket: None,
            model: Some(label),
            ..RecordRow::counter(0, "total", provenance)
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
        let Some(template) = &self.entity else {
            return Ok(());
        };
        let mut line = RecordRow {
            timestamp: unix_s,
            energy_j: row.energy_j,
            entity: Some(row.entity.to_string()),
            pid: row.pid,
            comm: row.comm.clone(),
            cgroup: row.cgroup.clone(),
            cpu_s: Some(row.cpu_s),
            ..template.clone()
        };
        if let Some(w) = &row.workload {
            let n = w.names.clone().unwrap_or_default();
            line.container_id = w.container_id.clone();
            line.pod_uid = w.pod_uid.clone();
            line.container_name = n.container_name;
            line.image = n.image;
            line.pod_name = n.pod_name;
            line.container_namespace = n.container_namespace;
        }
        match &row.part {
            crate::attribute::RowPart::Total => {}
            // A GPU row: the GPUs' energy, measured through NVML, whatever the CPU's mechanism.
            crate::attribute::RowPart::Gpu(label) => {
                line.mechanism = wattio_energy::Mechanism::Nvml;
                line.domain = "gpu".into();
                line.estimated = false;
                line.model = Some(label.clone());
            }
            // Part of the total row's energy: its label, and the kernel I/O work's rule.
            crate::attribute::RowPart::KernelIo(rule) => {
                line.domain = "kernel_io".into();
                line.model = Some(format!("{}, {rule}", self.total_label));
            }
        }
        let row = line;
        self.line.clear();
        row.write(self.format, self.columns, &mut self.line);
        w.write_all(self.line.as_bytes())
    }

    /// Writes the header (CSV only).
    pub fn write_header(&self, w: &mut impl Write) -> io::Result<()> {
        match self.format {
            RecordFormat::Csv if self.columns == Columns::Workload => writeln!(
                w,
                "{RECORD_CSV_HEADER},{RECORD_CSV_ENTITY_COLUMNS},{RECORD_CSV_WORKLOAD_COLUMNS}"
            ),
            RecordFormat::Csv if self.entity.is_some() => {
                writeln!(w, "{RECORD_CSV_HEADER},{RECORD_CSV_ENTITY_COLUMNS}")
            }
            RecordFormat::Csv => writeln!(w, "{RECORD_CSV_HEADER}"),
            RecordFormat::JsonLines => Ok(()),
        }
    }

    /// Writes one row per counter for a sample taken at `unix_s` with `joules[i]` per counter.
    pub fn write_sample(
        &mut self,
        w: &mut impl Write,
        unix_s: f64,
        joules: &[f64],
    ) -> io::Result<()> {
        for (i, j) in joules.iter().enumerate() {
            self.line.clear();
            let (pre, post) = &self.prefixes[i];
            write_with_parts(&mut self.line, self.format, unix_s, pre, *j, post);
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
        let mut f = RowFormatter::new(RecordFormat::Csv, &specs(), &p);
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
        let mut f =
            RowFormatter::new(RecordFormat::Csv, &specs(), &p).with_entity_columns(&p, false);
        let mut out = Vec::new();
        f.write_header(&mut out).unwrap();
        f.write_sample(&mut out, 1.0, &[0.25]).unwrap();
        let row = crate::attribute::EntityRow {
            entity: "process",
            pid: Some(42),
            comm: Some("a,b".into()),
            cgroup: Some("/system.slice/x.service".into()),
            workload: None,
            cpu_s: 0.5,
            energy_j: 1.25,
            part: crate::attribute::RowPart::Total,
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
        let mut f =
            RowFormatter::new(RecordFormat::JsonLines, &specs(), &p).with_entity_columns(&p, false);
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
        let mut f = RowFormatter::labelled(RecordFormat::Csv, &specs, &provs);
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
        let mut f = RowFormatter::new(RecordFormat::JsonLines, &specs(), &p);
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
