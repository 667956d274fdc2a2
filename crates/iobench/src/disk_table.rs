//! The disk beside the CPU per method: each method's median disk interval and CPU figure, and
//! which of the two dominates ([`EnergyDominance`]), as a table and a stacked chart.

use crate::analysis::sig;
use crate::catalog::{is_main, Op};
use crate::RunRecord;
use std::collections::{BTreeMap, BTreeSet};
use wattio_devices::EnergyInterval;
use wattio_plot::{energy_axis, stacked_bar_chart, Chart, StackedBar};
use wattio_results::{Align, Table};

/// Which of a method's disk energy and CPU/system energy is the greater, by the disk's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnergyDominance {
    /// The disk's lower bound exceeds the CPU figure.
    Storage,
    /// The disk's upper bound is below the CPU figure.
    Cpu,
    /// The disk's interval spans the CPU figure.
    Undecided,
    /// The disk has no interval (virtual, no figures, no watch).
    NoInterval,
}

impl EnergyDominance {
    /// The verdict for `cpu_j` against the disk's interval `disk`.
    pub fn of(cpu_j: f64, disk: Option<&EnergyInterval>) -> EnergyDominance {
        match disk {
            None => EnergyDominance::NoInterval,
            Some(d) if d.lower_j > cpu_j => EnergyDominance::Storage,
            Some(d) if d.upper_j < cpu_j => EnergyDominance::Cpu,
            Some(_) => EnergyDominance::Undecided,
        }
    }

    /// As written in the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            EnergyDominance::Storage => "storage",
            EnergyDominance::Cpu => "CPU",
            EnergyDominance::Undecided => "undecided (the disk's interval spans the CPU figure)",
            EnergyDominance::NoInterval => "no disk interval",
        }
    }
}

/// One method's medians over its runs: the CPU/system figure and the disk interval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MethodDisk {
    pub method: String,
    /// Median of the runs' `energy_j`.
    pub cpu_j: f64,
    /// The disks under the file (`disk` of the runs).
    pub disks: String,
    /// Medians of the runs' bounds (the central estimate only where every run has one).
    pub interval: Option<EnergyInterval>,
    /// The distinct labels of the runs' disk figures.
    pub labels: Vec<String>,
}

fn median_of(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Option<Vec<f64>> = xs.collect();
    wattio_stats::median(&v?).ok()
}

/// Each method's medians, for the methods whose runs have disk figures; empty where none has
/// (no storage watch, or results written before the disk columns).
pub(crate) fn method_disks(by_method: &BTreeMap<String, Vec<&RunRecord>>) -> Vec<MethodDisk> {
    by_method
        .iter()
        .filter(|(_, rs)| rs.iter().any(|r| r.disk_label.is_some()))
        .filter_map(|(m, rs)| {
            let cpu_j =
                wattio_stats::median(&rs.iter().map(|r| r.energy_j).collect::<Vec<_>>()).ok()?;
            let with: Vec<&&RunRecord> = rs.iter().filter(|r| r.disk_lower_j.is_some()).collect();
            let interval = (with.len() == rs.len()).then(|| {
                Some(EnergyInterval {
                    lower_j: median_of(with.iter().map(|r| r.disk_lower_j))?,
                    central_j: median_of(with.iter().map(|r| r.disk_central_j)),
                    upper_j: median_of(with.iter().map(|r| r.disk_upper_j))?,
                })
            });
            let labels: BTreeSet<String> = rs.iter().filter_map(|r| r.disk_label.clone()).collect();
            let disks: BTreeSet<String> = rs.iter().filter_map(|r| r.disk.clone()).collect();
            Some(MethodDisk {
                method: m.clone(),
                cpu_j,
                disks: disks.into_iter().collect::<Vec<_>>().join(", "),
                interval: interval.flatten(),
                labels: labels.into_iter().collect(),
            })
        })
        .collect()
}

/// Per method the CPU/system energy beside the disk interval and which dominates, and the
/// disk figures' labels; `None` where no run has disk figures.
pub(crate) fn disk_table(
    by_method: &BTreeMap<String, Vec<&RunRecord>>,
) -> Option<(Table, Vec<String>)> {
    let methods = method_disks(by_method);
    if methods.is_empty() {
        return None;
    }
    let mut table = Table::new(&[
        ("method", Align::Plain),
        ("CPU/system energy J (median)", Align::Right),
        ("disk", Align::Plain),
        ("disk lower J", Align::Right),
        ("disk central J", Align::Right),
        ("disk upper J", Align::Right),
        ("dominates", Align::Plain),
    ]);
    let mut labels = BTreeSet::new();
    for m in &methods {
        let i = m.interval.as_ref();
        let num = |x: Option<f64>| x.map_or("–".to_string(), sig);
        table.push(vec![
            m.method.clone(),
            sig(m.cpu_j),
            m.disks.clone(),
            num(i.map(|i| i.lower_j)),
            num(i.and_then(|i| i.central_j)),
            num(i.map(|i| i.upper_j)),
            EnergyDominance::of(m.cpu_j, i).as_str().to_string(),
        ]);
        labels.extend(m.labels.iter().cloned());
    }
    Some((table, labels.into_iter().collect()))
}

/// Per method its CPU/system energy and its disk's (central estimate, else the interval's
/// midpoint, the interval a whisker) as stacked bars; `None` where no run has disk figures.
pub(crate) fn disk_stack_svg(
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

/// The runs of `op` at its largest size (default buffer), by method.
pub(crate) fn main_runs_by_method(rows: &[RunRecord], op: Op) -> BTreeMap<String, Vec<&RunRecord>> {
    let main: Vec<&RunRecord> = rows
        .iter()
        .filter(|r| r.op == op && is_main(r.op, r.buffer))
        .collect();
    let largest = main.iter().map(|r| r.size).max();
    let mut by: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
    for r in main.into_iter().filter(|r| Some(r.size) == largest) {
        by.entry(r.method.clone()).or_default().push(r);
    }
    by
}

/// The disk table of `op` as markdown with its labels below, for `summary.md`.
pub(crate) fn disk_markdown(rows: &[RunRecord], op: Op, provenance: &str) -> Option<String> {
    let by = main_runs_by_method(rows, op);
    let size = by.values().flatten().next()?.size;
    let (table, labels) = disk_table(&by)?;
    Some(format!(
        "**{} — disk beside CPU on {size}**: CPU/system energy {provenance}; disk intervals by what the drive says of itself (medians over the runs).\n\n{}\nDisk figures: {}\n",
        op.title(),
        table.markdown(),
        labels.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(lower_j: f64, central_j: Option<f64>, upper_j: f64) -> EnergyInterval {
        EnergyInterval {
            lower_j,
            central_j,
            upper_j,
        }
    }

    #[test]
    fn the_verdict_compares_the_cpu_figure_with_the_disks_bounds() {
        // A drive idling at 0.05 W and at most 8 W over a 2 s window: [0.1, 16] J.
        let d = interval(0.05 * 2.0, Some(3.0), 8.0 * 2.0);
        // 20 J of CPU is above the 16 J bound: the CPU dominates.
        assert_eq!(EnergyDominance::of(20.0, Some(&d)), EnergyDominance::Cpu);
        // 0.08 J of CPU is below the 0.1 J floor: the disk dominates.
        assert_eq!(
            EnergyDominance::of(0.08, Some(&d)),
            EnergyDominance::Storage
        );
        // 5 J lies inside [0.1, 16]: undecided, whatever the central estimate says.
        assert_eq!(
            EnergyDominance::of(5.0, Some(&d)),
            EnergyDominance::Undecided
        );
        // On a bound: not strictly beyond it, so undecided.
        assert_eq!(
            EnergyDominance::of(16.0, Some(&d)),
            EnergyDominance::Undecided
        );
        assert_eq!(
            EnergyDominance::of(0.1, Some(&d)),
            EnergyDominance::Undecided
        );
        assert_eq!(EnergyDominance::of(5.0, None), EnergyDominance::NoInterval);
        assert_eq!(
            EnergyDominance::Undecided.as_str(),
            "undecided (the disk's interval spans the CPU figure)"
        );
    }

    fn run(method: &str, energy_j: f64, disk: Option<(f64, Option<f64>, f64)>) -> RunRecord {
        RunRecord {
            method: method.into(),
            op: Op::Read,
            size: crate::Size::Tiny,
            buffer: crate::catalog::DEFAULT_BUFFER,
            run: 1,
            energy_j,
            time_s: 0.1,
            bytes: 1,
            mechanism: "perf".into(),
            estimated: false,
            model: String::new(),
            energy_scope: "system".into(),
            system_energy_j: energy_j,
            cpu_s: 0.1,
            window_s: 0.1,
            cache: "warm".into(),
            cache_resident: None,
            libs: crate::Libs::Paper,
            checked: true,
            attributed_j: None,
            disk: Some(if disk.is_some() { "nvme0n1" } else { "vda" }.into()),
            disk_lower_j: disk.map(|d| d.0),
            disk_central_j: disk.and_then(|d| d.1),
            disk_upper_j: disk.map(|d| d.2),
            disk_label: Some(match disk {
                Some(_) => "nvme0n1: estimated (device-reported interval: x)".into(),
                None => "no interval: vda: a virtual disk: its energy is the host's".into(),
            }),
        }
    }

    #[test]
    fn the_table_gives_each_methods_medians_and_verdict() {
        let rows = vec![
            // channel: CPU 1, 2, 3 J (median 2); disk [0.5, 0.6, 0.7] to [5, 6, 7] (medians 0.6
            // and 6, central 1.0): 2 J lies inside, undecided.
            run("channel", 1.0, Some((0.5, Some(0.9), 5.0))),
            run("channel", 2.0, Some((0.6, Some(1.0), 6.0))),
            run("channel", 3.0, Some((0.7, Some(1.1), 7.0))),
            // mapped: CPU 10 J, disk at most 1 J: the CPU dominates; no central estimate.
            run("mapped", 10.0, Some((0.1, None, 1.0))),
            // scanner: 0.5 J of CPU below the disk's 0.8 J floor: storage.
            run("scanner", 0.5, Some((0.8, Some(1.2), 2.0))),
            // virtual: a disk without an interval.
            run("virtual", 4.0, None),
        ];
        let by = main_runs_by_method(&rows, Op::Read);
        let (table, labels) = disk_table(&by).unwrap();
        let want = [
            [
                "channel",
                "2.00",
                "nvme0n1",
                "0.600",
                "1.00",
                "6.00",
                "undecided (the disk's interval spans the CPU figure)",
            ],
            ["mapped", "10.0", "nvme0n1", "0.100", "–", "1.00", "CPU"],
            [
                "scanner", "0.500", "nvme0n1", "0.800", "1.20", "2.00", "storage",
            ],
            ["virtual", "4.00", "vda", "–", "–", "–", "no disk interval"],
        ];
        assert_eq!(table.rows().len(), want.len());
        for (got, want) in table.rows().iter().zip(want) {
            assert_eq!(got, &want.map(String::from).to_vec());
        }
        assert_eq!(labels.len(), 2, "{labels:?}");
        // Results without disk columns have no table.
        let old: Vec<RunRecord> = rows
            .into_iter()
            .map(|r| RunRecord {
                disk: None,
                disk_lower_j: None,
                disk_central_j: None,
                disk_upper_j: None,
                disk_label: None,
                ..r
            })
            .collect();
        assert!(disk_table(&main_runs_by_method(&old, Op::Read)).is_none());
    }
}
