//! Reading a run directory: each run's files into one [`BenchRow`].

use super::BenchTransferError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What `scripts/bench-transfer.sh` writes for one run as `runs/ID.meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRunMeta {
    pub tool: String,
    #[serde(default = "first_round")]
    pub rep: u32,
    pub dataset: String,
    /// EETT's target in Mbit/s; 0 for the other SLAs and tools.
    pub target_mbit: u64,
    /// Exit status of the tool (through `timeout` and the shell).
    pub rc: i32,
    pub got_files: u64,
    pub got_bytes: u64,
    pub want_files: u64,
    pub want_bytes: u64,
    /// The testbed link's rate, bits per second.
    pub link_bps: f64,
    /// `nginx` or `wattio-serve`.
    #[serde(default)]
    pub server: Option<String>,
    /// nginx's CPU seconds (master and workers, user + system) over the run; absent for the
    /// rows served by `wattio serve`.
    #[serde(default)]
    pub server_cpu_s: Option<f64>,
    pub rtt_ms: f64,
    /// The command the client ran.
    pub cmd: String,
}

fn first_round() -> u32 {
    1
}

/// The one field of a `wattio transfer --json` summary the bench keeps (its own throughput
/// figure, beside the wall-time throughput every tool gets). Read alone rather than as
/// `wattio_transfer::TransferSummary`, so that benchmark runs saved before the summary gained
/// its source kind and verification still read (the published plots come from such runs).
#[derive(Deserialize)]
struct ReportedThroughput {
    throughput_mbps: f64,
}

/// One run, as `results.csv` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub dataset: String,
    pub tool: String,
    pub rep: u32,
    pub target_mbit: u64,
    /// Exit code 0 and every byte arrived.
    pub complete: bool,
    pub exit_code: i32,
    pub bytes: u64,
    pub want_bytes: u64,
    pub files: u64,
    pub want_files: u64,
    pub wall_s: f64,
    pub throughput_mbit: f64,
    pub link_mbit: f64,
    pub rtt_ms: f64,
    pub client_cpu_s: f64,
    pub client_cpu_s_per_gb: Option<f64>,
    pub server: Option<String>,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_s_per_gb: Option<f64>,
    pub client_energy_j_est: f64,
    pub client_j_per_gb_est: Option<f64>,
    /// The model of the client estimate.
    pub model: String,
    pub system_energy_j_est: Option<f64>,
    pub system_mechanism: Option<String>,
    pub system_estimated: Option<bool>,
    pub wattio_reported_mbit: Option<f64>,
    pub cmd: String,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, BenchTransferError> {
    let bad = |reason: String| BenchTransferError::BadFile {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
}

/// Reads every run under `run_dir/runs`, in file-name order. A run without its
/// `.stats.json` (stopped before the tool ended) is left out; an unreadable
/// `.measure.json` or wattio summary leaves only that figure empty.
pub fn read_runs(run_dir: &Path) -> Result<Vec<BenchRow>, BenchTransferError> {
    let runs = run_dir.join("runs");
    let mut metas: Vec<PathBuf> = std::fs::read_dir(&runs)
        .map_err(|_| BenchTransferError::NoRuns(run_dir.display().to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".meta.json"))
        .collect();
    metas.sort();
    let mut rows = Vec::new();
    for meta_path in metas {
        let name = meta_path.to_string_lossy();
        let base = &name[..name.len() - ".meta.json".len()];
        let stats_path = PathBuf::from(format!("{base}.stats.json"));
        if !stats_path.exists() {
            continue;
        }
        let m: BenchRunMeta = read_json(&meta_path)?;
        let s: wattio_results::RunStats = read_json(&stats_path)?;
        let measure: Option<wattio_results::ReportedRun> =
            read_json(Path::new(&format!("{base}.measure.json"))).ok();
        let reported: Option<ReportedThroughput> = if m.tool.starts_with("wattio-") {
            read_json(Path::new(&format!("{base}.stdout"))).ok()
        } else {
            None
        };
        rows.push(row(m, s, measure, reported));
    }
    if rows.is_empty() {
        return Err(BenchTransferError::NoRuns(run_dir.display().to_string()));
    }
    Ok(rows)
}

fn row(
    m: BenchRunMeta,
    s: wattio_results::RunStats,
    measure: Option<wattio_results::ReportedRun>,
    reported: Option<ReportedThroughput>,
) -> BenchRow {
    let cpu = s.user_s + s.sys_s;
    let gb = m.got_bytes as f64 / 1e9;
    let per_gb = |v: f64| (gb > 0.0).then(|| v / gb);
    BenchRow {
        complete: m.rc == 0 && m.got_bytes == m.want_bytes,
        throughput_mbit: if s.wall_s > 0.0 {
            m.got_bytes as f64 * 8.0 / s.wall_s / 1e6
        } else {
            0.0
        },
        link_mbit: m.link_bps / 1e6,
        client_cpu_s: cpu,
        client_cpu_s_per_gb: per_gb(cpu),
        server_cpu_s_per_gb: m.server_cpu_s.and_then(per_gb),
        client_energy_j_est: s.energy_j,
        client_j_per_gb_est: per_gb(s.energy_j),
        system_energy_j_est: measure.as_ref().map(|r| r.total_j),
        system_mechanism: measure.as_ref().map(|r| r.provenance.mechanism.clone()),
        system_estimated: measure.as_ref().map(|r| r.provenance.estimated),
        wattio_reported_mbit: reported.map(|r| r.throughput_mbps),
        wall_s: s.wall_s,
        model: s.model,
        dataset: m.dataset,
        tool: m.tool,
        rep: m.rep,
        target_mbit: m.target_mbit,
        exit_code: m.rc,
        bytes: m.got_bytes,
        want_bytes: m.want_bytes,
        files: m.got_files,
        want_files: m.want_files,
        rtt_ms: m.rtt_ms,
        server: m.server,
        server_cpu_s: m.server_cpu_s,
        cmd: m.cmd,
    }
}
