//! What `wattio iobench` and the report both compute from the runs: the energy provenance the
//! rows share, each method's disk beside its CPU figure (medians over the runs, the interval's
//! verdict, [`disk_table`]), and figures at three significant digits ([`sig`]). Pure: no
//! measurement, no drawing.

use super::RunRecord;
use crate::{Align, EnergyInterval, Table};
use std::collections::{BTreeMap, BTreeSet};

/// The provenance label shared by the rows (they come from one meter, so they agree).
pub fn provenance_of(rows: &[RunRecord]) -> String {
    crate::join_provenance_labels(rows.iter().map(RunRecord::provenance))
}

/// Three significant digits, plain notation for everyday magnitudes.
pub fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "NA".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-4..1e6).contains(&a) {
        format!("{x:.2e}")
    } else {
        let digits = (2 - a.log10().floor() as i32).max(0) as usize;
        format!("{x:.digits$}")
    }
}

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
pub struct MethodDisk {
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
pub fn method_disks(by_method: &BTreeMap<String, Vec<&RunRecord>>) -> Vec<MethodDisk> {
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
pub fn disk_table(by_method: &BTreeMap<String, Vec<&RunRecord>>) -> Option<(Table, Vec<String>)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_compares_the_cpu_figure_with_the_disks_bounds() {
        // A drive idling at 0.05 W and at most 8 W over a 2 s window: [0.1, 16] J.
        let d = EnergyInterval::new(0.05 * 2.0, Some(3.0), 8.0 * 2.0);
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

    #[test]
    fn formatting() {
        assert_eq!(sig(0.012345), "0.0123");
        assert_eq!(sig(12.345), "12.3");
        assert_eq!(sig(1234.5), "1234");
        assert_eq!(sig(f64::NAN), "NA");
    }
}
