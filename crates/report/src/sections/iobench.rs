//! `wattio iobench` runs as a section of a `wattio report` page: the rows the study writes
//! (`wattio-results`' [`RunRecord`]), drawn by the report, with the disk medians and verdicts the
//! study's `summary.md` gives too (`wattio_results::iobench::disk_table`).

use std::collections::BTreeMap;
use wattio_plot::{
    bar_chart, box_plot, energy_axis, stacked_bar_chart, BoxGroup, Chart, HtmlSection,
    ReportSection, StackedBar,
};
use wattio_results::iobench::{disk_table, method_disks, provenance_of};
use wattio_results::RunRecord;

/// `wattio iobench` runs (`results.csv`, or the `runs` of `results.json`) as a section of a
/// `wattio report` page: energy per run and MB per joule, by method, for each operation and size.
#[derive(Debug, Clone)]
pub struct IoBenchRuns {
    pub rows: Vec<RunRecord>,
}

impl ReportSection for IoBenchRuns {
    fn kind(&self) -> &'static str {
        "iobench"
    }

    fn render(&self, out: &mut HtmlSection) {
        let prov = provenance_of(&self.rows);
        let mut ops: BTreeMap<(String, String), BTreeMap<String, Vec<&RunRecord>>> =
            BTreeMap::new();
        for r in &self.rows {
            ops.entry((r.op.to_string(), r.size.to_string()))
                .or_default()
                .entry(r.method.clone())
                .or_default()
                .push(r);
        }
        for ((op, size), methods) in &ops {
            let what = if size.is_empty() {
                op.clone()
            } else {
                format!("{op}, size {size}")
            };
            let groups: Vec<BoxGroup> = methods
                .iter()
                .map(|(m, rs)| BoxGroup {
                    label: m.clone(),
                    values: rs.iter().map(|r| r.energy_j).collect(),
                    baseline: false,
                })
                .collect();
            out.figure(
                &box_plot(
                    &Chart::titled(
                        &format!("Energy per run: {what}"),
                        &prov,
                        "method",
                        &energy_axis("Energy (J)", &prov),
                    ),
                    &groups,
                ),
                &format!("Energy per run by method ({what})"),
                &prov,
            );
            if let Some(svg) = disk_stack_svg(methods, &what, &prov) {
                out.figure(
                    &svg,
                    &format!("CPU/system energy and the disk's interval by method ({what})"),
                    &prov,
                );
            }
            if let Some((table, labels)) = disk_table(methods) {
                out.table(&table.header(), table.rows());
                out.note(&format!("Disk figures ({what}): {}", labels.join("; ")));
            }
            let bars: Vec<(String, f64)> = methods
                .iter()
                .filter_map(|(m, rs)| {
                    let v: Vec<f64> = rs
                        .iter()
                        .filter(|r| r.energy_j > 0.0)
                        .map(|r| r.bytes as f64 / 1e6 / r.energy_j)
                        .collect();
                    wattio_stats::median(&v).ok().map(|x| (m.clone(), x))
                })
                .collect();
            if !bars.is_empty() {
                out.figure(
                    &bar_chart(
                        &Chart::titled(
                            &format!("MB per joule: {what}"),
                            &prov,
                            &energy_axis("MB per joule (median)", &prov),
                            "method",
                        ),
                        &bars,
                    ),
                    &format!("MB per joule by method ({what}), higher is better"),
                    &prov,
                );
            }
        }
    }
}

/// Per method its CPU/system energy and its disk's (central estimate, else the interval's
/// midpoint, the interval a whisker) as stacked bars; `None` where no run has disk figures.
fn disk_stack_svg(
    by_method: &BTreeMap<String, Vec<&RunRecord>>,
    what: &str,
    provenance: &str,
) -> Option<String> {
    let methods = method_disks(by_method);
    if methods.is_empty() {
        return None;
    }
    let bars: Vec<StackedBar> = methods
        .iter()
        .map(|m| StackedBar {
            label: m.method.clone(),
            parts: vec![
                Some(m.cpu_j),
                m.interval
                    .map(|i| i.central_j.unwrap_or((i.lower_j + i.upper_j) / 2.0)),
            ],
            range: m.interval.map(|i| (1, i.lower_j, i.upper_j)),
        })
        .collect();
    let parts = [
        "CPU/system (median)".to_string(),
        "disk (estimated)".to_string(),
    ];
    Some(stacked_bar_chart(
        &Chart::titled(
            &format!("CPU and disk energy per method: {what}"),
            provenance,
            &energy_axis("Energy (J), medians over the runs", provenance),
            "method",
        ),
        &parts,
        &bars,
    ))
}
