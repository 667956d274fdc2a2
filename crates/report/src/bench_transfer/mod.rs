//! Tables and charts of a `make bench-transfer` run directory (`scripts/bench-transfer.sh`):
//! every transfer tool on every dataset through the emulated WAN, several runs per cell.
//!
//! The script leaves, per run `ID` (`DATASET.TOOL.rREP`), under `RUN_DIR/runs/`:
//! `ID.meta.json` ([`BenchRunMeta`], what the script knows: tool, dataset, exit code, bytes
//! that arrived, the link, nginx's CPU time), `ID.stats.json` (`wattio testbed exec --stats`:
//! [`wattio_results::RunStats`], the tool's wall and CPU time and the client's
//! *estimated* energy), `ID.measure.json` (`wattio measure --json`:
//! [`wattio_results::ReportedRun`], the whole host's energy) and, for wattio's rows, `ID.stdout`
//! (the `wattio transfer --json` summary).
//!
//! Each cell (dataset, tool, EETT target) may hold several runs: the tables and charts show the
//! median over the complete runs (all runs when none completed, so an incomplete cell still
//! shows what happened), with the range of the runs; `results.csv` keeps every run.
//!
//! Throughput is the payload bytes that arrived divided by the tool's wall time. "Client
//! energy" is the meter's linear model applied to the tool's own CPU time (every tool charged
//! by the same rule) and is an *estimate*; "system" is `wattio measure`'s whole-host figure
//! (also an estimate on a machine without RAPL) and includes the server, the delay line and
//! anything else on the host.

//!
//! The module reads the run directory (`runs`), summarises each cell (`cells`), and writes the
//! markdown tables (`tables`), the charts (`charts`) and every run as CSV (`csv`).

mod cells;
mod charts;
mod csv;
mod runs;
mod tables;

use std::path::{Path, PathBuf};

use cells::{eett_variant, is_eett, tool_key};
pub use cells::{summarise, BenchCell};
pub use runs::{read_runs, BenchRow, BenchRunMeta};

/// Tools in the order tables and charts list them (others follow, by name).
pub const TOOL_ORDER: [&str; 18] = [
    "curl-seq",
    "curl-par",
    "wget",
    "wget2",
    "aria2-default",
    "aria2-tuned",
    "nghttp-h2",
    "wattio-me",
    "wattio-eemt",
    "wattio-me-ng",
    "wattio-eemt-ng",
    "curl-par-tls",
    "wget2-tls",
    "aria2-tuned-tls",
    "wattio-me-tls",
    "wattio-eemt-tls",
    "wattio-me-tls-list",
    "wattio-eemt-tls-list",
];

/// (plain, HTTPS) pairs against the same nginx: the difference is what TLS costs.
const TLS_PAIRS: [(&str, &str); 5] = [
    ("curl-par", "curl-par-tls"),
    ("wget2", "wget2-tls"),
    ("aria2-tuned", "aria2-tuned-tls"),
    ("wattio-me-ng", "wattio-me-tls"),
    ("wattio-eemt-ng", "wattio-eemt-tls"),
];

/// The paper's datasets, in the order tables and charts list them.
const DATASETS: [&str; 4] = ["small", "medium", "large", "mixed"];

/// An EETT run reaches its target when within this fraction of it (the goal).
const EETT_TOLERANCE: f64 = 0.10;

/// Errors of [`read_runs`] and [`write_bench_transfer`]: each names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum BenchTransferError {
    #[error("no runs under {0}/runs (no *.meta.json with its *.stats.json): give the directory `make bench-transfer` wrote (results/transfer/run-…)")]
    NoRuns(String),
    #[error("cannot read {path}: {reason}; the run directory is not one `make bench-transfer` wrote, or the file was cut short")]
    BadFile { path: String, reason: String },
    #[error("cannot write {path}: {source}; check the directory exists and is writable")]
    Output {
        path: String,
        source: std::io::Error,
    },
}

/// The whole bench, summarised, with the figures every table and chart shares.
pub struct BenchTransfer {
    pub rows: Vec<BenchRow>,
    pub cells: Vec<BenchCell>,
    /// Link rate (Mbit/s), RTT (ms) and the client estimate's model, of the first run.
    pub link_mbit: f64,
    pub rtt_ms: f64,
    pub model: String,
}

impl BenchTransfer {
    /// Reads and summarises the run directory `run_dir`.
    pub fn read(run_dir: &Path) -> Result<BenchTransfer, BenchTransferError> {
        Ok(BenchTransfer::from_rows(read_runs(run_dir)?))
    }

    /// Summarises runs already read (at least one).
    pub fn from_rows(rows: Vec<BenchRow>) -> BenchTransfer {
        let cells = summarise(&rows);
        let first = &rows[0];
        BenchTransfer {
            link_mbit: first.link_mbit,
            rtt_ms: first.rtt_ms,
            model: first.model.clone(),
            cells,
            rows,
        }
    }

    /// The non-EETT cells.
    fn base(&self) -> Vec<&BenchCell> {
        self.cells.iter().filter(|c| !is_eett(c.tool())).collect()
    }

    fn datasets(&self) -> Vec<&'static str> {
        let base = self.base();
        DATASETS
            .into_iter()
            .filter(|d| base.iter().any(|c| c.dataset() == *d))
            .collect()
    }

    fn tools(&self) -> Vec<String> {
        let mut tools: Vec<String> = self.base().iter().map(|c| c.tool().to_string()).collect();
        tools.sort_by(|a, b| tool_key(a).cmp(&tool_key(b)));
        tools.dedup();
        tools
    }

    fn cell(&self, dataset: &str, tool: &str) -> Option<&BenchCell> {
        // The last cell of a (dataset, tool) wins, as a dictionary built in order would.
        self.base()
            .into_iter()
            .rev()
            .find(|c| c.dataset() == dataset && c.tool() == tool)
    }

    /// EETT cells by variant, then target, highest first.
    fn eett(&self) -> Vec<&BenchCell> {
        let mut e: Vec<&BenchCell> = self.cells.iter().filter(|c| is_eett(c.tool())).collect();
        e.sort_by(|a, b| {
            (eett_variant(a.tool()), std::cmp::Reverse(a.target()))
                .cmp(&(eett_variant(b.tool()), std::cmp::Reverse(b.target())))
        });
        e
    }
}

/// What [`write_bench_transfer`] wrote.
#[derive(Debug, Clone)]
pub struct BenchTransferOutput {
    /// The markdown tables (also written as `report.md` unless charts only).
    pub markdown: String,
    pub files: Vec<PathBuf>,
    pub runs: usize,
}

/// Reads the bench run in `run_dir` and writes into `out_dir`: `PREFIX-throughput.svg`,
/// `PREFIX-energy.svg`, `PREFIX-cpu.svg` and `PREFIX-eett.svg` (when EETT ran), and, unless
/// `charts_only`, `results.csv` (every run) and `report.md` (the tables).
pub fn write_bench_transfer(
    run_dir: &Path,
    out_dir: &Path,
    prefix: &str,
    charts_only: bool,
) -> Result<BenchTransferOutput, BenchTransferError> {
    let bench = BenchTransfer::read(run_dir)?;
    let write = |name: String, text: &str| -> Result<PathBuf, BenchTransferError> {
        let path = out_dir.join(name);
        wattio_files::write_atomically(&path, |w| w.write_all(text.as_bytes())).map_err(|e| {
            BenchTransferError::Output {
                path: path.display().to_string(),
                source: e.into(),
            }
        })?;
        Ok(path)
    };
    std::fs::create_dir_all(out_dir).map_err(|source| BenchTransferError::Output {
        path: out_dir.display().to_string(),
        source,
    })?;
    let mut files = Vec::new();
    for (name, svg) in bench.charts() {
        files.push(write(format!("{prefix}-{name}"), &svg)?);
    }
    let markdown = bench.markdown();
    if !charts_only {
        let csv = bench.csv().map_err(|e| BenchTransferError::Output {
            path: out_dir.join("results.csv").display().to_string(),
            source: std::io::Error::other(e),
        })?;
        files.push(write("results.csv".into(), &csv)?);
        files.push(write("report.md".into(), &markdown)?);
    }
    Ok(BenchTransferOutput {
        markdown,
        files,
        runs: bench.rows.len(),
    })
}
