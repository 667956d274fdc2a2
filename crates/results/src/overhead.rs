//! The overhead study's result rows: one [`LoadRun`] per timed workload run (`runs.csv`), one
//! [`IdleRun`] per idle run (`idle.csv`). `wattio-overhead`'s runner writes them, `wattio report`
//! reads them; the statistics both draw from them ([`analyze_load`], [`analyze_idle_with`]) are
//! here too.

mod analysis;

pub use analysis::{analyze_idle_with, analyze_load, fmt_p, IdleTest, TimeTest};

use crate::row_from_record;
use serde::{Deserialize, Serialize};

/// Columns of the load-run CSV (`runs.csv`), the [`LoadRun`] fields in order.
pub const LOAD_COLUMNS: &[&str] = &[
    "round",
    "seq",
    "workload",
    "mechanism",
    "freq_hz",
    "rep",
    "elapsed_s",
    "samples",
    "recorder_s",
    "recorder_cpu_s",
    "start_unix",
];
/// Columns of the idle-run CSV (`idle.csv`) every version wrote.
pub const IDLE_COLUMNS: &[&str] = &[
    "round",
    "seq",
    "mechanism",
    "freq_hz",
    "rep",
    "wall_s",
    "busy_cpu_s",
    "recorder_s",
    "recorder_cpu_s",
    "samples",
    "est_power_w",
    "model",
    "cstates",
];
/// Columns of `idle.csv` written after [`IDLE_COLUMNS`] that older files lack.
pub const IDLE_OPTIONAL_COLUMNS: &[&str] = &["n_cpus"];

/// Mechanism name used for the no-measurement baseline.
pub const OFF: &str = "off";

/// One timed run of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRun {
    pub round: usize,
    /// Position in the whole schedule (1-based, idle runs included).
    pub seq: usize,
    pub workload: String,
    /// [`OFF`] for the baseline.
    pub mechanism: String,
    /// 0 for the baseline.
    pub freq_hz: f64,
    pub rep: usize,
    /// Wall-clock time of the workload process, spawn to exit.
    pub elapsed_s: f64,
    /// Rows the recorder wrote (0 when off).
    pub samples: u64,
    /// Wall time the recorder ran (header on disk to SIGTERM), 0 when off.
    pub recorder_s: f64,
    /// User + system CPU time of the recorder process.
    pub recorder_cpu_s: f64,
    pub start_unix: f64,
}

/// One idle run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleRun {
    pub round: usize,
    pub seq: usize,
    pub mechanism: String,
    pub freq_hz: f64,
    pub rep: usize,
    pub wall_s: f64,
    /// Busy CPU-seconds of the whole machine (all CPUs, `/proc/stat`) during the run.
    pub busy_cpu_s: f64,
    /// Wall time the recorder ran, 0 when off.
    pub recorder_s: f64,
    pub recorder_cpu_s: f64,
    pub samples: u64,
    /// Whole-machine power estimated by the model from `busy_cpu_s` (ESTIMATED).
    pub est_power_w: f64,
    /// The model's name with coefficients.
    pub model: String,
    /// "C1=0.12;C6=0.80" residency fractions, or "unavailable: <why>".
    pub cstates: String,
    /// vCPUs the model charged idle power for (`None` in files written before the column).
    #[serde(default)]
    pub n_cpus: Option<usize>,
}

/// Rows `T` from CSV records (header already split off); errors name the line and column.
fn rows_from_csv<T: serde::de::DeserializeOwned>(
    headers: &[String],
    rows: &[csv::StringRecord],
) -> Result<Vec<T>, String> {
    let header = csv::StringRecord::from(headers.iter().map(|h| h.trim()).collect::<Vec<_>>());
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = r.clone();
            r.trim();
            row_from_record(&header, &r, i + 2)
        })
        .collect()
}

/// Parses load runs from CSV rows (header already split off).
pub fn load_runs_from_csv(
    headers: &[String],
    rows: &[csv::StringRecord],
) -> Result<Vec<LoadRun>, String> {
    rows_from_csv(headers, rows)
}

/// Parses idle runs from CSV rows (header already split off).
pub fn idle_runs_from_csv(
    headers: &[String],
    rows: &[csv::StringRecord],
) -> Result<Vec<IdleRun>, String> {
    rows_from_csv(headers, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_of<T: Serialize>(row: &T) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().to_string()
    }

    fn idle(n_cpus: Option<usize>) -> IdleRun {
        IdleRun {
            round: 0,
            seq: 1,
            mechanism: "model".into(),
            freq_hz: 10.0,
            rep: 0,
            wall_s: 1.0,
            busy_cpu_s: 0.5,
            recorder_s: 1.0,
            recorder_cpu_s: 0.01,
            samples: 10,
            est_power_w: 2.5,
            model: "ccf-linear(min=0.74W,max=3.5W per vCPU)".into(),
            cstates: "unavailable".into(),
            n_cpus,
        }
    }

    #[test]
    fn the_column_lists_are_the_row_fields() {
        let load = LoadRun {
            round: 0,
            seq: 1,
            workload: "w".into(),
            mechanism: OFF.into(),
            freq_hz: 0.0,
            rep: 0,
            elapsed_s: 1.0,
            samples: 0,
            recorder_s: 0.0,
            recorder_cpu_s: 0.0,
            start_unix: 0.0,
        };
        assert_eq!(header_of(&load), LOAD_COLUMNS.join(","));
        let cols: Vec<&str> = IDLE_COLUMNS
            .iter()
            .chain(IDLE_OPTIONAL_COLUMNS)
            .copied()
            .collect();
        assert_eq!(header_of(&idle(None)), cols.join(","));
    }

    #[test]
    fn idle_rows_read_with_and_without_the_n_cpus_column() {
        let r = idle(Some(4));
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(&r).unwrap();
        let text = w.into_inner().unwrap();
        let mut rd = csv::Reader::from_reader(&text[..]);
        let headers: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        let rows: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
        let back = idle_runs_from_csv(&headers, &rows).unwrap();
        assert_eq!(back, vec![r]);
        // Written before the n_cpus column existed, by the hand-formatted writer of that time.
        let old = "round,seq,mechanism,freq_hz,rep,wall_s,busy_cpu_s,recorder_s,recorder_cpu_s,samples,est_power_w,model,cstates\n0,1,off,0,0,1.0,0.02,0,0,0,1.50,m,C1=0.1000\n";
        let mut rd = csv::Reader::from_reader(old.as_bytes());
        let headers: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        let rows: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
        let back = idle_runs_from_csv(&headers, &rows).unwrap();
        assert_eq!(back[0].n_cpus, None);
        assert_eq!(back[0].cstates, "C1=0.1000");
        let bad = vec![csv::StringRecord::from(vec![
            "0", "1", "off", "0", "0", "x", "0.02", "0", "0", "0", "1.5", "m", "c",
        ])];
        let e = idle_runs_from_csv(&headers, &bad).unwrap_err();
        assert!(e.starts_with("line 2: column wall_s: "), "{e}");
    }
}
