//! Tidy results: one row per measured run, written as CSV and JSON.

use crate::cache::CacheMode;
use crate::catalog::{Op, Size};
use crate::maven::Libs;
use crate::server::Sample;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One measured run (one fresh JVM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub method: String,
    pub op: Op,
    pub size: Size,
    pub buffer: u32,
    /// 1-based run number within the cell.
    pub run: u32,
    /// Energy of the measured window (see `energy_scope`, `estimated`, `model`).
    pub energy_j: f64,
    /// Duration of the operation measured in the JVM.
    pub time_s: f64,
    /// Bytes read (or visited by the seek pattern) or written.
    pub bytes: u64,
    pub mechanism: String,
    pub estimated: bool,
    /// The model and its coefficients, for estimates ("" for measurements).
    pub model: String,
    /// `process` (model on the JVM's CPU time) or `system` (the meter's whole machine).
    pub energy_scope: String,
    /// The meter's whole-machine figure over the same window.
    pub system_energy_j: f64,
    /// JVM CPU seconds in the window.
    pub cpu_s: f64,
    /// Wall seconds between BEGIN and END as seen by wattio.
    pub window_s: f64,
    pub cache: String,
    /// Fraction of the input file in the page cache just before the run ("" for writes).
    pub cache_resident: Option<f64>,
    pub libs: Libs,
    /// The output check passed (runs that fail it abort the study, so this is always true).
    pub checked: bool,
}

impl RunRecord {
    pub fn from_sample(s: &Sample, run: u32, libs: Libs) -> RunRecord {
        RunRecord {
            method: s.method.clone(),
            op: s.op,
            size: s.size,
            buffer: s.buffer,
            run,
            energy_j: s.energy.energy_j,
            time_s: s.time_s,
            bytes: s.bytes,
            mechanism: s.energy.mechanism.clone(),
            estimated: s.energy.estimated,
            model: s.energy.model.clone().unwrap_or_default(),
            energy_scope: s.energy.scope.clone(),
            system_energy_j: s.energy.system_energy_j,
            cpu_s: s.energy.cpu_s,
            window_s: s.energy.window_s,
            cache: match (s.op, s.cache) {
                (Op::Write, _) | (_, None) => "n/a".into(),
                (_, Some(CacheMode::Cold)) => "cold".into(),
                (_, Some(CacheMode::Warm)) => "warm".into(),
            },
            cache_resident: s.resident,
            libs,
            checked: s.ok,
        }
    }

    /// The provenance label of this row's energy.
    pub fn provenance(&self) -> String {
        if self.estimated {
            format!("estimated ({}: {})", self.mechanism, self.model)
        } else {
            format!("measured ({})", self.mechanism)
        }
    }
}

/// Writes the rows as CSV (header = field names).
pub fn write_csv(path: &Path, rows: &[RunRecord]) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

/// Reads rows written by [`write_csv`].
pub fn read_csv(path: &Path) -> Result<Vec<RunRecord>> {
    let mut r =
        csv::Reader::from_path(path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = vec![];
    for (i, row) in r.deserialize().enumerate() {
        out.push(row.with_context(|| {
            format!(
                "{} row {}: not an iobench results row",
                path.display(),
                i + 2
            )
        })?);
    }
    Ok(out)
}
