//! The grouped bar charts of a bench: throughput, client energy per GB (estimated), client CPU
//! time, and EETT's achieved throughput against its target.

use super::cells::eett_variant;
use super::{BenchCell, BenchTransfer, EETT_TOLERANCE};
use wattio_plot::{energy_axis, grouped_bar_chart, BarSeries, Chart, GroupedBarOpts, Reference};

impl BenchTransfer {
    /// The charts, as (file name without the prefix, SVG): throughput, client energy per GB
    /// (estimated), client CPU time, and EETT's achieved against target when EETT ran.
    pub fn charts(&self) -> Vec<(&'static str, String)> {
        let datasets: Vec<String> = self.datasets().iter().map(|d| d.to_string()).collect();
        let link = self.link_mbit;
        let estimated = wattio_results::provenance_label("model", true, Some(&self.model));
        let timed = "measured (wall clock; bytes that arrived)".to_string();
        let footnote = "Data: `make bench-transfer` (scripts/bench-transfer.sh); drawn by \
                        `wattio report bench-transfer`. Bars: median of the complete runs."
            .to_string();
        let mut out = vec![
            (
                "throughput.svg",
                grouped_bar_chart(
                    &Chart {
                        title: format!(
                            "Throughput on the emulated WAN ({link:.0} Mbit/s, RTT {:.0} ms)",
                            self.rtt_ms
                        ),
                        provenance: timed.clone(),
                        note: String::new(),
                        x_label: "dataset".into(),
                        y_label: "Mbit/s (payload / wall time)".into(),
                        footnote: footnote.clone(),
                    },
                    &datasets,
                    &self.bars(&datasets, |c| Some(c.throughput_mbit), |c| {
                        Some(c.throughput_range)
                    }),
                    &self.bar_opts(vec![Reference {
                        name: format!("link {link:.0} Mbit/s"),
                        y: link,
                    }]),
                ),
            ),
            (
                "energy.svg",
                grouped_bar_chart(
                    &Chart {
                        title: "Client energy per GB (estimated)".into(),
                        provenance: estimated.clone(),
                        note: format!(
                            "{estimated} applied to the client tool's CPU time, plus idle power over its wall time"
                        ),
                        x_label: "dataset".into(),
                        y_label: energy_axis("J per GB", &estimated),
                        footnote: footnote.clone(),
                    },
                    &datasets,
                    &self.bars(&datasets, |c| c.client_j_per_gb_est, |c| c.j_per_gb_range),
                    &self.bar_opts(Vec::new()),
                ),
            ),
            (
                "cpu.svg",
                grouped_bar_chart(
                    &Chart {
                        title: "Client CPU time (user + system, the tool and its children)".into(),
                        provenance: "measured (getrusage of the tool and its children)".into(),
                        note: String::new(),
                        x_label: "dataset".into(),
                        y_label: "CPU seconds".into(),
                        footnote: footnote.clone(),
                    },
                    &datasets,
                    &self.bars(&datasets, |c| Some(c.client_cpu_s), |c| Some(c.cpu_range)),
                    &self.bar_opts(Vec::new()),
                ),
            ),
        ];
        if let Some(eett) = self.eett_chart(timed, footnote) {
            out.push(("eett.svg", eett));
        }
        out
    }

    /// One bar series per tool over `datasets`: `value` of each cell whose every run completed,
    /// with `range` where the cell has more than one run.
    fn bars(
        &self,
        datasets: &[String],
        value: fn(&BenchCell) -> Option<f64>,
        range: fn(&BenchCell) -> Option<(f64, f64)>,
    ) -> Vec<BarSeries> {
        self.tools()
            .iter()
            .map(|t| {
                let cells: Vec<Option<&BenchCell>> = datasets
                    .iter()
                    .map(|d| self.cell(d, t).filter(|c| c.complete))
                    .collect();
                BarSeries {
                    name: t.clone(),
                    values: cells.iter().map(|c| c.and_then(value)).collect(),
                    ranges: cells
                        .iter()
                        .map(|c| c.filter(|c| c.n > 1).and_then(range))
                        .collect(),
                }
            })
            .collect()
    }

    fn bar_opts(&self, references: Vec<Reference>) -> GroupedBarOpts {
        let reps = self.cells.iter().map(|c| c.n).max().unwrap_or(0);
        GroupedBarOpts {
            references,
            range_name: format!("min–max of the complete runs (up to {reps})"),
            value_labels: true,
            ..Default::default()
        }
    }

    /// EETT's achieved throughput against each target, with the tolerance band; `None` when
    /// EETT did not run.
    fn eett_chart(&self, provenance: String, footnote: String) -> Option<String> {
        let eett = self.eett();
        if eett.is_empty() {
            return None;
        }
        let labels: Vec<String> = eett
            .iter()
            .map(|c| {
                format!(
                    "{:.0} % {}",
                    100.0 * c.target() as f64 / self.link_mbit,
                    eett_variant(c.tool())
                )
            })
            .collect();
        let series = vec![
            BarSeries {
                name: "target".into(),
                values: eett.iter().map(|c| Some(c.target() as f64)).collect(),
                ranges: Vec::new(),
            },
            BarSeries {
                name: "achieved (median)".into(),
                values: eett.iter().map(|c| Some(c.throughput_mbit)).collect(),
                ranges: eett
                    .iter()
                    .map(|c| (c.n > 1).then_some(c.throughput_range))
                    .collect(),
            },
        ];
        let tolerance = format!("target ±{:.0} %", 100.0 * EETT_TOLERANCE);
        Some(grouped_bar_chart(
            &Chart {
                title: "EETT (--sla target:RATE): achieved throughput against its target, mixed dataset".into(),
                provenance,
                note: String::new(),
                x_label: "target (% of the link) and server".into(),
                y_label: "Mbit/s (payload / wall time)".into(),
                footnote,
            },
            &labels,
            &series,
            &GroupedBarOpts {
                bands: eett
                    .iter()
                    .map(|c| {
                        let t = c.target() as f64;
                        Some(((1.0 - EETT_TOLERANCE) * t, (1.0 + EETT_TOLERANCE) * t))
                    })
                    .collect(),
                band_name: tolerance,
                ..self.bar_opts(Vec::new())
            },
        ))
    }
}
