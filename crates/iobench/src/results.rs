//! Tidy results: one row per measured run, written as CSV and JSON.

use crate::cache::CacheMode;
use crate::catalog::Op;
use crate::maven::Libs;
use crate::server::RunSample;
use crate::IoBenchError;
use std::path::Path;

pub use wattio_results::{RunRecord, RESULTS_CSV_COLUMNS};

/// The row of one run: the sample the energy server took, its run number and the library set.
pub fn record_of_sample(s: &RunSample, run: u32, libs: Libs) -> RunRecord {
    RunRecord {
        method: s.method.clone(),
        op: s.op,
        size: s.size,
        buffer: s.buffer,
        run,
        energy_j: s.energy.energy_j,
        time_s: s.time_s,
        bytes: s.bytes,
        mechanism: s.energy.provenance.mechanism.to_string(),
        estimated: s.energy.provenance.estimated,
        model: s.energy.provenance.model.clone().unwrap_or_default(),
        energy_scope: s.energy.scope.clone(),
        system_energy_j: s.energy.system_energy_j,
        cpu_s: s.energy.cpu_s,
        window_s: s.energy.window_s,
        cache: match (s.op, s.cache) {
            (Op::Write | Op::Writesync, _) | (_, None) => "n/a".into(),
            (_, Some(CacheMode::Cold)) => "cold".into(),
            (_, Some(CacheMode::Warm)) => "warm".into(),
        },
        cache_resident: s.resident,
        libs,
        checked: s.ok,
        attributed_j: s.energy.attributed_j,
        disk: s.energy.disk.as_ref().map(|d| d.disks.join("+")),
        disk_lower_j: disk_interval(s).map(|i| i.lower_j),
        disk_central_j: disk_interval(s).and_then(|i| i.central_j),
        disk_upper_j: disk_interval(s).map(|i| i.upper_j),
        disk_label: s.energy.disk.as_ref().map(|d| d.label.clone()),
    }
}

/// The interval of the disks under the run's file, where it has one.
fn disk_interval(s: &RunSample) -> Option<&wattio_devices::EnergyInterval> {
    s.energy.disk.as_ref()?.interval.as_ref()
}

/// Writes the rows as CSV (header = field names), through a temporary file renamed over
/// `path`, so a failure never leaves half a file where a complete one was (a study's
/// `results.csv` is rewritten with the same rows when it ends).
pub fn write_results_csv(path: &Path, rows: &[RunRecord]) -> Result<(), IoBenchError> {
    wattio_files::write_atomically(path, |out| {
        let mut w = csv::Writer::from_writer(out);
        for r in rows {
            w.serialize(r).map_err(std::io::Error::other)?;
        }
        w.flush()
    })?;
    Ok(())
}

/// Reads rows written by [`write_results_csv`].
pub fn read_results_csv(path: &Path) -> Result<Vec<RunRecord>, IoBenchError> {
    let mut r = csv::Reader::from_path(path).map_err(|e| IoBenchError::Io {
        what: format!("opening {}", path.display()),
        err: e.into(),
    })?;
    let mut out = vec![];
    for (i, row) in r.deserialize().enumerate() {
        out.push(row.map_err(|e| IoBenchError::NotAResultsRow {
            file: path.to_path_buf(),
            row: i + 2,
            why: e.to_string(),
        })?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Size;

    fn record(attributed_j: Option<f64>) -> RunRecord {
        RunRecord {
            method: "channel".into(),
            op: Op::Read,
            size: Size::Small,
            buffer: 8192,
            run: 1,
            energy_j: 2.0,
            time_s: 0.1,
            bytes: 1_000_000,
            mechanism: "model".into(),
            estimated: true,
            model: "m".into(),
            energy_scope: "process".into(),
            system_energy_j: 3.0,
            cpu_s: 0.05,
            window_s: 0.2,
            cache: "warm".into(),
            cache_resident: Some(1.0),
            libs: Libs::Paper,
            checked: true,
            attributed_j,
            disk: None,
            disk_lower_j: None,
            disk_central_j: None,
            disk_upper_j: None,
            disk_label: None,
        }
    }

    #[test]
    fn the_column_list_is_the_row_fields() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(record(None)).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let header = text.lines().next().unwrap();
        assert_eq!(
            header,
            format!(
                "{},attributed_j,disk,disk_lower_j,disk_central_j,disk_upper_j,disk_label",
                RESULTS_CSV_COLUMNS.join(",")
            )
        );
    }

    #[test]
    fn attributed_j_column_round_trips_and_old_csvs_still_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("results.csv");
        // 3 J over a 0.2 s window of 2 vCPUs, the JVM 0.05 CPU-s: 3 × 0.05 / 0.4 = 0.375 J.
        let share = wattio_energy::attribution::share_j(3.0, 2, 0.2, 0.05);
        assert!((share - 0.375).abs() < 1e-12 && share <= 3.0);
        write_results_csv(&p, &[record(Some(share)), record(None)]).unwrap();
        let back = read_results_csv(&p).unwrap();
        assert_eq!(back[0].attributed_j, Some(share));
        assert_eq!(back[1].attributed_j, None);
        // Written when the column was called process_j: read under its new name.
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replacen(",attributed_j,", ",process_j,", 1)).unwrap();
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .contains(",process_j,"));
        let back = read_results_csv(&p).unwrap();
        assert_eq!(back[0].attributed_j, Some(share));
        assert_eq!(back[1].attributed_j, None);
        std::fs::write(&p, text).unwrap();
        // A results.csv written before the column and the disk columns existed.
        let text = std::fs::read_to_string(&p).unwrap();
        let old: String = text
            .lines()
            .map(|l| {
                let kept: Vec<&str> = l.split(',').take(RESULTS_CSV_COLUMNS.len()).collect();
                format!("{}\n", kept.join(","))
            })
            .collect();
        assert!(old.lines().next().unwrap().ends_with(",checked"));
        std::fs::write(&p, old).unwrap();
        let back = read_results_csv(&p).unwrap();
        assert_eq!(back.len(), 2);
        assert!(back.iter().all(|r| r.attributed_j.is_none() && r.checked));
    }
}
