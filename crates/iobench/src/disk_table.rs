//! The disk beside the CPU per method in the study's outputs: the runs of a use case by method,
//! and their disk table in `summary.md`. The medians and the verdict
//! ([`EnergyDominance`](crate::EnergyDominance)) are `wattio-results`' ([`disk_table`]), which the
//! report draws from too, with the stacked chart of its section.

use crate::catalog::{is_main, Op};
use crate::RunRecord;
use std::collections::BTreeMap;
pub(crate) use wattio_results::iobench::disk_table;

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
