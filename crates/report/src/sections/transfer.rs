//! A `wattio transfer --json` summary as a section of a `wattio report` page: its figures as a
//! table, and throughput, power and the tuning parameters over time. The summary is read as
//! [`ReportedTransfer`], the fields of it the page shows.

use std::collections::BTreeMap;
use wattio_plot::{energy_axis, line_chart, Chart, HtmlSection, LineOpts, ReportSection, Series};
use wattio_results::{IntervalLog, ReportedTransfer};

/// A `wattio transfer --json` summary, as the page shows it.
#[derive(Debug, Clone)]
pub struct TransferSection {
    pub summary: ReportedTransfer,
}

impl ReportSection for TransferSection {
    fn kind(&self) -> &'static str {
        "transfer"
    }

    fn render(&self, out: &mut HtmlSection) {
        let summary = &self.summary;
        let prov = summary
            .energy
            .as_ref()
            .map(|e| e.provenance.label())
            .unwrap_or_else(|| "no energy recorded".into());
        out.table(&["field", "value"], &figures(summary, &prov));
        if !summary.intervals.is_empty() {
            render_intervals(out, &summary.intervals, &prov);
        }
    }
}

/// The summary's headline figures as (field, value) rows; `prov` labels the energy.
fn figures(s: &ReportedTransfer, prov: &str) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = vec![
        vec!["source".into(), s.source.clone()],
        vec!["bytes".into(), s.bytes.to_string()],
        vec!["files".into(), s.files.to_string()],
        vec!["seconds".into(), format!("{:.3}", s.seconds)],
        vec![
            "throughput (Mbit/s)".into(),
            format!("{:.1}", s.throughput_mbps),
        ],
        vec!["SLA".into(), s.sla.clone()],
        vec!["tuner".into(), s.tuner.clone()],
    ];
    if let Some(e) = &s.energy {
        rows.push(vec![
            "energy (J)".into(),
            format!("{:.3} — {prov}", e.total_j),
        ]);
    }
    let process = &s.energy_process;
    rows.push(vec![
        "energy of a host running only this transfer (J)".into(),
        format!("{:.3} — {}", process.total_j, process.provenance),
    ]);
    rows.extend(dest_disk_rows(s));
    rows
}

/// The destination disks' rows: each disk's interval over the run and per GB received
/// with its model, or why it has none; then the notes. None for a summary written before
/// wattio measured them.
fn dest_disk_rows(s: &ReportedTransfer) -> Vec<Vec<String>> {
    let Some(d) = &s.dest_disks else {
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
