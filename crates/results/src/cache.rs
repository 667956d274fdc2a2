//! The cache simulator's results: `wattio cache replay --json`'s [`RunResult`]s and `wattio cache
//! sweep`'s [`SweepRow`]s (`sweep.csv`, [`sweep_csv`]). `wattio-sim` computes them, `wattio
//! report` reads them back.

/// Result of one replay: the rows `wattio cache replay --json` writes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    /// Strategy name.
    pub strategy: String,
    /// Knob (only meaningful for STPM strategies).
    pub knob: u8,
    /// `off`, `paper`, `predictive`, or `-` for static strategies.
    pub ghost_hints: String,
    /// Mean interactive response time of reads, seconds.
    pub mean_response_s: f64,
    /// Total energy, joules (simulated from the profile: an estimate).
    pub energy_j: f64,
    /// Run time, seconds.
    pub duration_s: f64,
    /// Energy of the storage device, joules.
    pub disk_energy_j: f64,
    /// Energy of the network device, joules.
    pub net_energy_j: f64,
    /// Reads replayed.
    pub reads: usize,
    /// Reads served from the disk cache / network / memory.
    pub from_disk: usize,
    /// Reads served from the network.
    pub from_network: usize,
    /// Reads served from memory (browser memory cache or write queue).
    pub from_memory: usize,
    /// Storage transitions to its high mode.
    pub disk_spinups: u64,
    /// Network transitions to its high mode.
    pub net_ups: u64,
    /// Ghost hints issued.
    pub ghost_hints_issued: u64,
    /// Ghost hints that triggered a transition.
    pub ghost_transitions: u64,
    /// How the energy was obtained.
    pub energy_kind: String,
}

/// One row of a sweep (means over seeds): the rows of `sweep.csv`, which `wattio report` reads
/// back.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SweepRow {
    /// Workload name.
    pub workload: String,
    /// Strategy name.
    pub strategy: String,
    /// Knob.
    pub knob: u8,
    /// Ghost-hint variant.
    pub ghost_hints: String,
    /// Mean over seeds of the mean response time, seconds.
    pub mean_response_s: f64,
    /// Mean over seeds of the total energy, joules (simulated estimate).
    pub energy_j: f64,
    /// Number of seeds.
    pub seeds: usize,
    /// Mean disk spin-ups.
    pub disk_spinups: f64,
    /// Mean ghost hints issued.
    pub ghost_hints_issued: f64,
    /// Provenance of the energy figure.
    pub energy_kind: String,
}

/// The columns of `sweep.csv`: the [`SweepRow`] fields in order.
pub const SWEEP_COLUMNS: &[&str] = &[
    "workload",
    "strategy",
    "knob",
    "ghost_hints",
    "mean_response_s",
    "energy_j",
    "seeds",
    "disk_spinups",
    "ghost_hints_issued",
    "energy_kind",
];

impl SweepRow {
    /// One replay of `workload` as a sweep row: the mean over its one seed.
    pub fn of_replay(workload: &str, r: &RunResult) -> SweepRow {
        SweepRow {
            workload: workload.to_string(),
            strategy: r.strategy.clone(),
            knob: r.knob,
            ghost_hints: r.ghost_hints.clone(),
            mean_response_s: r.mean_response_s,
            energy_j: r.energy_j,
            seeds: 1,
            disk_spinups: r.disk_spinups as f64,
            ghost_hints_issued: r.ghost_hints_issued as f64,
            energy_kind: r.energy_kind.clone(),
        }
    }
}

/// CSV of sweep rows ([`SWEEP_COLUMNS`], then one line per row; numbers at full precision).
pub fn sweep_csv(rows: &[SweepRow]) -> String {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    let written = w
        .write_record(SWEEP_COLUMNS)
        .and_then(|_| rows.iter().try_for_each(|r| w.serialize(r)));
    // Writing into memory fails only if a row cannot be serialized, which a SweepRow always can.
    written.expect("sweep rows serialize");
    let bytes = w.into_inner().expect("flush into memory");
    String::from_utf8(bytes).expect("CSV of UTF-8 fields")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_csv_has_the_row_fields_as_columns_and_reads_back() {
        let row = SweepRow {
            workload: "email".into(),
            strategy: "adaptive+ghost-paper".into(),
            knob: 95,
            ghost_hints: "paper".into(),
            mean_response_s: 0.012_345_678,
            energy_j: 812.5,
            seeds: 3,
            disk_spinups: 4.0 / 3.0,
            ghost_hints_issued: 2.5,
            energy_kind: "simulated (estimated from device profile a, b)".into(),
        };
        let text = sweep_csv(std::slice::from_ref(&row));
        assert_eq!(text.lines().next().unwrap(), SWEEP_COLUMNS.join(","));
        let back: Vec<SweepRow> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, vec![row]);
        assert_eq!(sweep_csv(&[]), format!("{}\n", SWEEP_COLUMNS.join(",")));
    }
}
