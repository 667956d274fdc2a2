//! A `wattio transfer --json` summary as a section of a `wattio report` page: its figures as a
//! table, and throughput, power and the tuning parameters over time.

use crate::{IntervalLog, TransferSummary};
use std::collections::BTreeMap;
use wattio_plot::{energy_axis, line_chart, Chart, HtmlSection, LineOpts, ReportSection, Series};

impl IntervalLog {
    /// The tuning parameters of this interval, as (name, value) for a chart of them over time:
    /// the channel budget, open connections, files in flight (concurrency), chunks in flight
    /// per file (parallelism), requests in flight per channel (pipelining, one per partition)
    /// and active cores. The frequency is left out: kHz would flatten the others.
    pub fn parameters(&self) -> Vec<(String, f64)> {
        let mut params = vec![
            ("channels (budget)".to_string(), self.num_ch as f64),
            ("open channels".to_string(), self.open_channels as f64),
            (
                "files in flight (concurrency)".to_string(),
                self.files_in_flight as f64,
            ),
            ("parallelism".to_string(), self.parallelism),
        ];
        let partitions = self.pipelining.len();
        for (i, &p) in self.pipelining.iter().enumerate() {
            let name = if partitions == 1 {
                "pipelining".to_string()
            } else {
                format!("pipelining (partition {})", i + 1)
            };
            params.push((name, p as f64));
        }
        if let Some(c) = self.cores {
            params.push(("cores".to_string(), c as f64));
        }
        params
    }
}

impl ReportSection for TransferSummary {
    fn kind(&self) -> &'static str {
        "transfer"
    }

    fn render(&self, out: &mut HtmlSection) {
        let prov = self
            .energy
            .as_ref()
            .map(|e| e.source.label())
            .unwrap_or_else(|| "no energy recorded".into());
        out.table(&["field", "value"], &self.figures(&prov));
        if !self.intervals.is_empty() {
            render_intervals(out, &self.intervals, &prov);
        }
    }
}

impl TransferSummary {
    /// The summary's headline figures as (field, value) rows; `prov` labels the energy.
    fn figures(&self, prov: &str) -> Vec<Vec<String>> {
        let mut rows: Vec<Vec<String>> = vec![
            vec!["source".into(), self.source.clone()],
            vec!["bytes".into(), self.bytes.to_string()],
            vec!["files".into(), self.files.to_string()],
            vec!["seconds".into(), format!("{:.3}", self.seconds)],
            vec![
                "throughput (Mbit/s)".into(),
                format!("{:.1}", self.throughput_mbps),
            ],
            vec!["SLA".into(), self.sla.clone()],
            vec!["tuner".into(), self.tuner.clone()],
        ];
        if let Some(e) = &self.energy {
            rows.push(vec![
                "energy (J)".into(),
                format!("{:.3} — {prov}", e.total_j),
            ]);
        }
        let process = &self.energy_process;
        rows.push(vec![
            "energy of a host running only this transfer (J)".into(),
            format!("{:.3} — {}", process.total_j, process.provenance),
        ]);
        rows.extend(self.dest_disk_rows());
        rows
    }

    /// The destination disks' rows: each disk's interval over the run and per GB received
    /// with its model, or why it has none; then the notes. None for a summary written before
    /// wattio measured them.
    fn dest_disk_rows(&self) -> Vec<Vec<String>> {
        let Some(d) = &self.dest_disks else {
            return vec![];
        };
        let mut rows: Vec<Vec<String>> = d
            .disks
            .iter()
            .map(|disk| vec![format!("destination disk {}", disk.name()), disk.figures()])
            .collect();
        for note in d.note.iter().chain(&d.window_note) {
            rows.push(vec!["destination disk".into(), note.clone()]);
        }
        rows
    }
}

/// Throughput, power (where recorded) and the tuning parameters over time.
fn render_intervals(out: &mut HtmlSection, intervals: &[IntervalLog], prov: &str) {
    let opts = LineOpts {
        y_zero: true,
        ..Default::default()
    };
    let chart = |title: &str, y: &str| Chart::titled(title, prov, "time (s)", y);
    let throughput = Series {
        name: "throughput".into(),
        points: intervals
            .iter()
            .map(|i| (i.t_s, i.throughput_mbps))
            .collect(),
    };
    out.figure(
        &line_chart(
            &chart("Throughput over time", "Throughput (Mbit/s)"),
            &[throughput],
            &[],
            &opts,
        ),
        "Throughput over time",
        prov,
    );
    let power: Vec<(f64, f64)> = intervals
        .iter()
        .filter_map(|i| i.power_w.map(|p| (i.t_s, p)))
        .collect();
    if !power.is_empty() {
        out.figure(
            &line_chart(
                &chart("Power over time", &energy_axis("Power (W)", prov)),
                &[Series {
                    name: "power".into(),
                    points: power,
                }],
                &[],
                &opts,
            ),
            "Power over time",
            prov,
        );
    }
    let mut params: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for i in intervals {
        for (k, v) in i.parameters() {
            params.entry(k).or_default().push((i.t_s, v));
        }
    }
    let series: Vec<Series> = params
        .into_iter()
        .map(|(name, points)| Series { name, points })
        .collect();
    if !series.is_empty() {
        out.figure(
            &line_chart(&chart("Parameters over time", "value"), &series, &[], &opts),
            "Tuning parameters over time",
            prov,
        );
    }
}
