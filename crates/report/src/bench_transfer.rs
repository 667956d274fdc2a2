//! Tables and charts of a `make bench-transfer` run directory (`scripts/bench-transfer.sh`):
//! every transfer tool on every dataset through the emulated WAN, several runs per cell.
//!
//! The script leaves, per run `ID` (`DATASET.TOOL.rREP`), under `RUN_DIR/runs/`:
//! `ID.meta.json` ([`BenchRunMeta`], what the script knows: tool, dataset, exit code, bytes
//! that arrived, the link, nginx's CPU time), `ID.stats.json` (`wattio testbed exec --stats`:
//! [`wattio_testbed::RunStats`], the tool's wall and CPU time and the client's
//! *estimated* energy), `ID.measure.json` (`wattio measure --json`:
//! [`wattio_meter::measure::RunReport`], the whole host's energy) and, for wattio's rows, `ID.stdout`
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

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wattio_energy::Provenance;
use wattio_plot::{energy_axis, grouped_bar_chart, BarSeries, Chart, GroupedBarOpts, Reference};

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
        let s: wattio_testbed::RunStats = read_json(&stats_path)?;
        let measure: Option<wattio_meter::measure::RunReport> =
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
    s: wattio_testbed::RunStats,
    measure: Option<wattio_meter::measure::RunReport>,
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
        system_energy_j_est: measure.as_ref().map(|r| r.energy.total_j),
        system_mechanism: measure
            .as_ref()
            .map(|r| r.energy.mechanism.as_str().to_string()),
        system_estimated: measure.as_ref().map(|r| r.energy.estimated),
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

/// The runs of one cell (dataset, tool, target), summarised.
#[derive(Debug, Clone)]
pub struct BenchCell {
    /// The run with the median wall time; the figures below replace its own.
    pub typical: BenchRow,
    pub wall_s: f64,
    pub throughput_mbit: f64,
    pub client_cpu_s: f64,
    pub client_energy_j_est: f64,
    pub client_j_per_gb_est: Option<f64>,
    pub system_energy_j_est: Option<f64>,
    pub client_cpu_s_per_gb: Option<f64>,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_s_per_gb: Option<f64>,
    /// Runs in the cell, and how many of them completed.
    pub n: usize,
    pub n_complete: usize,
    /// Every run of the cell completed.
    pub complete: bool,
    /// Smallest and largest throughput, client CPU seconds and client J/GB of the runs the
    /// medians are taken over.
    pub throughput_range: (f64, f64),
    pub cpu_range: (f64, f64),
    pub j_per_gb_range: Option<(f64, f64)>,
}

impl BenchCell {
    fn tool(&self) -> &str {
        &self.typical.tool
    }
    fn dataset(&self) -> &str {
        &self.typical.dataset
    }
    fn target(&self) -> u64 {
        self.typical.target_mbit
    }
}

fn median_of(vals: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = vals.flatten().collect();
    wattio_stats::median(&v).ok()
}

fn range_of(vals: impl Iterator<Item = Option<f64>>) -> Option<(f64, f64)> {
    vals.flatten().fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((a, b)) => Some((f64::min(a, v), f64::max(b, v))),
    })
}

/// One summary per (dataset, tool, target), in the order the cells first appear in `rows`:
/// medians over the complete runs (all runs when none completed), the run counts and ranges.
pub fn summarise(rows: &[BenchRow]) -> Vec<BenchCell> {
    let mut order: Vec<(String, String, u64)> = Vec::new();
    let mut cells: BTreeMap<(String, String, u64), Vec<&BenchRow>> = BTreeMap::new();
    for r in rows {
        let key = (r.dataset.clone(), r.tool.clone(), r.target_mbit);
        if !cells.contains_key(&key) {
            order.push(key.clone());
        }
        cells.entry(key).or_default().push(r);
    }
    order
        .iter()
        .map(|key| {
            let runs = &cells[key];
            let done: Vec<&BenchRow> = runs.iter().copied().filter(|r| r.complete).collect();
            let used = if done.is_empty() {
                runs.clone()
            } else {
                done.clone()
            };
            // The median-time run; among equal wall times the earlier run stays first.
            let mut by_wall = used.clone();
            by_wall.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
            let typical = by_wall[by_wall.len() / 2].clone();
            let median = |f: fn(&BenchRow) -> Option<f64>| median_of(used.iter().map(|r| f(r)));
            let range = |f: fn(&BenchRow) -> Option<f64>| range_of(used.iter().map(|r| f(r)));
            let nan = (f64::NAN, f64::NAN);
            BenchCell {
                wall_s: median(|r| Some(r.wall_s)).unwrap_or(f64::NAN),
                throughput_mbit: median(|r| Some(r.throughput_mbit)).unwrap_or(f64::NAN),
                client_cpu_s: median(|r| Some(r.client_cpu_s)).unwrap_or(f64::NAN),
                client_energy_j_est: median(|r| Some(r.client_energy_j_est)).unwrap_or(f64::NAN),
                client_j_per_gb_est: median(|r| r.client_j_per_gb_est),
                system_energy_j_est: median(|r| r.system_energy_j_est),
                client_cpu_s_per_gb: median(|r| r.client_cpu_s_per_gb),
                server_cpu_s: median(|r| r.server_cpu_s),
                server_cpu_s_per_gb: median(|r| r.server_cpu_s_per_gb),
                n: runs.len(),
                n_complete: done.len(),
                complete: done.len() == runs.len(),
                throughput_range: range(|r| Some(r.throughput_mbit)).unwrap_or(nan),
                cpu_range: range(|r| Some(r.client_cpu_s)).unwrap_or(nan),
                j_per_gb_range: range(|r| r.client_j_per_gb_est),
                typical,
            }
        })
        .collect()
}

fn tool_key(tool: &str) -> (usize, &str) {
    (
        TOOL_ORDER
            .iter()
            .position(|t| *t == tool)
            .unwrap_or(TOOL_ORDER.len()),
        tool,
    )
}

fn is_eett(tool: &str) -> bool {
    tool.starts_with("wattio-eett")
}

/// EETT runs against nginx over TLS, or against `wattio serve`.
fn eett_variant(tool: &str) -> &'static str {
    if tool.starts_with("wattio-eett-tls") {
        "nginx HTTPS"
    } else {
        "wattio serve"
    }
}

/// The first element with the largest key (ties keep the earlier element).
fn first_max_by<'a, T>(items: &[&'a T], key: impl Fn(&T) -> f64) -> Option<&'a T> {
    items
        .iter()
        .copied()
        .fold(None, |best: Option<&T>, x| match best {
            Some(b) if key(b) >= key(x) => Some(b),
            _ => Some(x),
        })
}

/// The first element with the smallest key (ties keep the earlier element).
fn first_min_by<'a, T>(items: &[&'a T], key: impl Fn(&T) -> f64) -> Option<&'a T> {
    first_max_by(items, |x| -key(x))
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

    /// The markdown tables: per dataset, what TLS costs, the goals on the HTTPS rows, EETT.
    pub fn markdown(&self) -> String {
        let link = self.link_mbit;
        let reps = self.cells.iter().map(|c| c.n).max().unwrap_or(0);
        let mut md: Vec<String> = vec![
            format!(
                "Link {link:.0} Mbit/s, RTT {rtt:.0} ms. Client energy is ESTIMATED: {model} applied to the \
                 client tool's CPU time (idle share for the whole VM over the wall time); system-wide is \
                 `wattio measure` (also estimated here) and includes the server, the delay line and other load. \
                 Up to {reps} runs per cell: every figure is the median over the complete runs; \
                 the Mbit/s column gives the range in brackets.",
                rtt = self.rtt_ms,
                model = self.model
            ),
            String::new(),
        ];
        let base = self.base();
        for d in self.datasets() {
            let mut dr: Vec<&BenchCell> =
                base.iter().copied().filter(|c| c.dataset() == d).collect();
            dr.sort_by(|a, b| tool_key(a.tool()).cmp(&tool_key(b.tool())));
            let Some(r0) = dr.first() else { continue };
            md.push(format!(
                "### {d} ({} files, {:.0} MB)",
                r0.typical.want_files,
                r0.typical.want_bytes as f64 / 1e6
            ));
            md.push(String::new());
            md.push("| tool | complete | time s | Mbit/s [range] | % link | client CPU s | client J (est.) | J/GB (est.) | nginx CPU s | system J (est.) |".into());
            md.push("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|".into());
            for r in dr {
                let t = &r.typical;
                let comp = if r.complete {
                    format!("{}/{}", r.n_complete, r.n)
                } else {
                    format!(
                        "NO: {}/{} (exit {}, {}/{} B)",
                        r.n_complete, r.n, t.exit_code, t.bytes, t.want_bytes
                    )
                };
                let jpg = match r.client_j_per_gb_est {
                    Some(v) if v != 0.0 => format!("{v:.1}"),
                    _ => "-".into(),
                };
                let sysj = opt(r.system_energy_j_est, |v| format!("{v:.0}"));
                let rng = if r.n > 1 {
                    format!(" [{:.0}–{:.0}]", r.throughput_range.0, r.throughput_range.1)
                } else {
                    String::new()
                };
                let srv = opt(r.server_cpu_s, |v| format!("{v:.2}"));
                md.push(format!(
                    "| {} | {comp} | {:.1} | {:.0}{rng} | {:.0} | {:.2} | {:.1} | {jpg} | {srv} | {sysj} |",
                    r.tool(),
                    r.wall_s,
                    r.throughput_mbit,
                    100.0 * r.throughput_mbit / link,
                    r.client_cpu_s,
                    r.client_energy_j_est
                ));
            }
            md.push(String::new());
        }
        md.extend(self.tls_cost());
        md.extend(self.goals());
        let eett = self.eett();
        if !eett.is_empty() {
            md.push("### EETT (wattio transfer --sla target:RATE), mixed dataset".into());
            md.push(String::new());
            md.push("| server | target % of link | target Mbit/s | achieved Mbit/s [range] | error (median) | worst error | complete | client J (est.) |".into());
            md.push("|---|---:|---:|---:|---:|---:|---|---:|".into());
            for r in eett {
                let target = r.target() as f64;
                let err = |v: f64| 100.0 * (v / target - 1.0);
                let (lo, hi) = r.throughput_range;
                let worst = if err(hi).abs() > err(lo).abs() {
                    err(hi)
                } else {
                    err(lo)
                };
                md.push(format!(
                    "| {} | {:.0} % | {} | {:.0} [{lo:.0}–{hi:.0}] | {:+.1} % | {worst:+.1} % | {}/{} | {:.0} |",
                    eett_variant(r.tool()),
                    100.0 * target / link,
                    r.target(),
                    r.throughput_mbit,
                    err(r.throughput_mbit),
                    r.n_complete,
                    r.n,
                    r.client_energy_j_est
                ));
            }
            md.push(String::new());
        }
        md.join("\n") + "\n"
    }

    /// Plain against HTTPS on the same nginx, per tool and dataset: client and server CPU
    /// seconds per GB and the client's estimated J per GB.
    fn tls_cost(&self) -> Vec<String> {
        let mut rows = Vec::new();
        for d in self.datasets() {
            for (plain, tls) in TLS_PAIRS {
                let (Some(a), Some(b)) = (self.cell(d, plain), self.cell(d, tls)) else {
                    continue;
                };
                if !a.complete || !b.complete {
                    continue;
                }
                let f2 = |v: Option<f64>| opt(v, |v| format!("{v:.2}"));
                let f1 = |v: Option<f64>| opt(v, |v| format!("{v:.1}"));
                let diff = |x: Option<f64>, y: Option<f64>| Some(y? - x?);
                let dj = diff(a.client_j_per_gb_est, b.client_j_per_gb_est);
                let dcpu = diff(a.client_cpu_s_per_gb, b.client_cpu_s_per_gb);
                let dsrv = diff(a.server_cpu_s_per_gb, b.server_cpu_s_per_gb);
                rows.push(format!(
                    "| {d} | {plain} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} / {:.0} |",
                    f2(a.client_cpu_s_per_gb),
                    f2(b.client_cpu_s_per_gb),
                    opt(dcpu, |v| format!("{v:+.2}")),
                    f1(a.client_j_per_gb_est),
                    f1(b.client_j_per_gb_est),
                    opt(dj, |v| format!("{v:+.1}")),
                    f2(a.server_cpu_s_per_gb),
                    f2(b.server_cpu_s_per_gb),
                    opt(dsrv, |v| format!("{v:+.2}")),
                    a.throughput_mbit,
                    b.throughput_mbit
                ));
            }
        }
        if rows.is_empty() {
            return rows;
        }
        let mut out = vec![
            "### What TLS costs: the same tool, plain HTTP and HTTPS from the same nginx".into(),
            String::new(),
            "CPU seconds per GB moved (medians); J/GB is the client's ESTIMATED energy (it charges idle \
             power over the wall time too, so a slower run costs more whatever its CPU)."
                .into(),
            String::new(),
            "| dataset | tool | client CPU s/GB plain | HTTPS | Δ | client J/GB (est.) plain | HTTPS | Δ | \
             nginx CPU s/GB plain | HTTPS | Δ | Mbit/s plain / HTTPS |"
                .into(),
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into(),
        ];
        out.extend(rows);
        out.push(String::new());
        out
    }

    /// The goals on the HTTPS rows: ME the least J/GB of all HTTPS tools, EEMT at or
    /// above the best other HTTPS tool's throughput, EETT within ±10 % of its target. wattio
    /// walking nginx's index first; then, when the bench ran them, wattio handed the same URL
    /// list as the other tools (`-i`, the `-tls-list` rows), which discovers nothing.
    fn goals(&self) -> Vec<String> {
        let mut out = self.goal_table(
            "### Goals on the HTTPS rows (nginx over TLS, no wattio server)",
            "wattio-me-tls",
            "wattio-eemt-tls",
        );
        if !out.is_empty() {
            out.extend(self.eett_goal_rows());
            out.push(String::new());
        }
        let list = self.goal_table(
            "### Goals on the HTTPS rows, wattio given the same URL list as the other tools (-i)",
            "wattio-me-tls-list",
            "wattio-eemt-tls-list",
        );
        if !list.is_empty() {
            out.extend(list);
            out.push(String::new());
        }
        out
    }

    /// The goal table's EETT lines: each HTTPS EETT target, achieved, within ±10 %?
    fn eett_goal_rows(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut eett: Vec<&BenchCell> = self
            .cells
            .iter()
            .filter(|c| c.tool().starts_with("wattio-eett-tls"))
            .collect();
        eett.sort_by_key(|c| std::cmp::Reverse(c.target()));
        for r in eett {
            let target = r.target() as f64;
            let err = 100.0 * (r.throughput_mbit / target - 1.0);
            out.push(format!(
                "| EETT {:.0} % (mixed) | target {} Mbit/s | | | achieved {:.0} | {err:+.1} % | {} (±10 %) |",
                100.0 * target / self.link_mbit,
                r.target(),
                r.throughput_mbit,
                if err.abs() <= 100.0 * EETT_TOLERANCE { "yes" } else { "NO" }
            ));
        }
        out
    }

    /// One goal table: per dataset where both `me` and `eemt` completed, whether `me` has the
    /// least J/GB among them and the other tools' HTTPS rows, and whether `eemt` is at or above
    /// the best other tool's throughput; no lines when neither ran.
    fn goal_table(&self, title: &str, me: &str, eemt: &str) -> Vec<String> {
        let candidates: Vec<&BenchCell> = self
            .base()
            .into_iter()
            .filter(|c| {
                let t = c.tool();
                t == me || t == eemt || (t.ends_with("-tls") && !t.starts_with("wattio-"))
            })
            .collect();
        if !candidates
            .iter()
            .any(|c| c.tool() == me || c.tool() == eemt)
        {
            return Vec::new();
        }
        let mut out: Vec<String> = vec![
            title.into(),
            String::new(),
            "| dataset | least J/GB (est.): tool | ME J/GB | ME least? | best other Mbit/s: tool | EEMT Mbit/s | EEMT ≥ best? |".into(),
            "|---|---|---:|---|---|---:|---|".into(),
        ];
        let jpg = |c: &BenchCell| c.client_j_per_gb_est.unwrap_or(f64::INFINITY);
        for d in self.datasets() {
            let rows: Vec<&BenchCell> = candidates
                .iter()
                .copied()
                .filter(|c| c.dataset() == d && c.complete)
                .collect();
            let me = rows.iter().find(|c| c.tool() == me);
            let eemt = rows.iter().find(|c| c.tool() == eemt);
            let (Some(me), Some(eemt)) = (me, eemt) else {
                continue;
            };
            let Some(least) = first_min_by(&rows, jpg) else {
                continue;
            };
            let others: Vec<&BenchCell> = rows
                .iter()
                .copied()
                .filter(|c| !c.tool().starts_with("wattio-"))
                .collect();
            let best = first_max_by(&others, |c| c.throughput_mbit);
            let best_txt = best.map_or("-".to_string(), |b| {
                format!("{:.0}: {}", b.throughput_mbit, b.tool())
            });
            let eemt_ok = best.is_none_or(|b| eemt.throughput_mbit >= b.throughput_mbit);
            out.push(format!(
                "| {d} | {:.1}: {} | {:.1} | {} | {best_txt} | {:.0} | {} |",
                jpg(least),
                least.tool(),
                jpg(me),
                if least.tool() == me.tool() {
                    "yes"
                } else {
                    "NO"
                },
                eemt.throughput_mbit,
                if eemt_ok { "yes" } else { "NO" }
            ));
        }
        out
    }

    /// The charts, as (file name without the prefix, SVG): throughput, client energy per GB
    /// (estimated), client CPU time, and EETT's achieved against target when EETT ran.
    pub fn charts(&self) -> Vec<(&'static str, String)> {
        let datasets: Vec<String> = self.datasets().iter().map(|d| d.to_string()).collect();
        let tools = self.tools();
        let reps = self.cells.iter().map(|c| c.n).max().unwrap_or(0);
        let range_name = format!("min–max of the complete runs (up to {reps})");
        let bars = |value: fn(&BenchCell) -> Option<f64>,
                    range: fn(&BenchCell) -> Option<(f64, f64)>| {
            tools
                .iter()
                .map(|t| {
                    // Only cells whose every run completed get a bar.
                    let cells: Vec<Option<&BenchCell>> = datasets
                        .iter()
                        .map(|d| self.cell(d, t).filter(|c| c.complete))
                        .collect();
                    BarSeries {
                        name: t.clone(),
                        values: cells.iter().map(|c| c.and_then(value)).collect(),
                        ranges: cells
                            .iter()
                            .map(|c| c.filter(|c| c.n > 1).and_then(range))
                            .collect(),
                    }
                })
                .collect::<Vec<_>>()
        };
        let link = self.link_mbit;
        let estimated = Provenance::estimated(self.model.clone()).label();
        let timed = "measured (wall clock; bytes that arrived)".to_string();
        let footnote = "Data: `make bench-transfer` (scripts/bench-transfer.sh); drawn by \
                        `wattio report bench-transfer`. Bars: median of the complete runs."
            .to_string();
        let opts = |references: Vec<Reference>| GroupedBarOpts {
            references,
            range_name: range_name.clone(),
            value_labels: true,
            ..Default::default()
        };
        let mut out = vec![
            (
                "throughput.svg",
                grouped_bar_chart(
                    &Chart {
                        title: format!(
                            "Throughput on the emulated WAN ({link:.0} Mbit/s, RTT {:.0} ms)",
                            self.rtt_ms
                        ),
                        provenance: timed.clone(),
                        note: String::new(),
                        x_label: "dataset".into(),
                        y_label: "Mbit/s (payload / wall time)".into(),
                        footnote: footnote.clone(),
                    },
                    &datasets,
                    &bars(|c| Some(c.throughput_mbit), |c| Some(c.throughput_range)),
                    &opts(vec![Reference {
                        name: format!("link {link:.0} Mbit/s"),
                        y: link,
                    }]),
                ),
            ),
            (
                "energy.svg",
                grouped_bar_chart(
                    &Chart {
                        title: "Client energy per GB (estimated)".into(),
                        provenance: estimated.clone(),
                        note: format!(
                            "{estimated} applied to the client tool's CPU time, plus idle power over its wall time"
                        ),
                        x_label: "dataset".into(),
                        y_label: energy_axis("J per GB", &estimated),
                        footnote: footnote.clone(),
                    },
                    &datasets,
                    &bars(|c| c.client_j_per_gb_est, |c| c.j_per_gb_range),
                    &opts(Vec::new()),
                ),
            ),
            (
                "cpu.svg",
                grouped_bar_chart(
                    &Chart {
                        title: "Client CPU time (user + system, the tool and its children)".into(),
                        provenance: "measured (getrusage of the tool and its children)".into(),
                        note: String::new(),
                        x_label: "dataset".into(),
                        y_label: "CPU seconds".into(),
                        footnote: footnote.clone(),
                    },
                    &datasets,
                    &bars(|c| Some(c.client_cpu_s), |c| Some(c.cpu_range)),
                    &opts(Vec::new()),
                ),
            ),
        ];
        let eett = self.eett();
        if !eett.is_empty() {
            let labels: Vec<String> = eett
                .iter()
                .map(|c| {
                    format!(
                        "{:.0} % {}",
                        100.0 * c.target() as f64 / link,
                        eett_variant(c.tool())
                    )
                })
                .collect();
            let series = vec![
                BarSeries {
                    name: "target".into(),
                    values: eett.iter().map(|c| Some(c.target() as f64)).collect(),
                    ranges: Vec::new(),
                },
                BarSeries {
                    name: "achieved (median)".into(),
                    values: eett.iter().map(|c| Some(c.throughput_mbit)).collect(),
                    ranges: eett
                        .iter()
                        .map(|c| (c.n > 1).then_some(c.throughput_range))
                        .collect(),
                },
            ];
            let tolerance = format!("target ±{:.0} %", 100.0 * EETT_TOLERANCE);
            out.push((
                "eett.svg",
                grouped_bar_chart(
                    &Chart {
                        title: "EETT (--sla target:RATE): achieved throughput against its target, mixed dataset".into(),
                        provenance: timed,
                        note: String::new(),
                        x_label: "target (% of the link) and server".into(),
                        y_label: "Mbit/s (payload / wall time)".into(),
                        footnote,
                    },
                    &labels,
                    &series,
                    &GroupedBarOpts {
                        bands: eett
                            .iter()
                            .map(|c| {
                                let t = c.target() as f64;
                                Some(((1.0 - EETT_TOLERANCE) * t, (1.0 + EETT_TOLERANCE) * t))
                            })
                            .collect(),
                        band_name: tolerance,
                        ..opts(Vec::new())
                    },
                ),
            ));
        }
        out
    }

    /// Every run as CSV, one line per run (the columns of [`BenchRow`]).
    pub fn csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &self.rows {
            w.serialize(r)?;
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
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
        std::fs::write(&path, text).map_err(|source| BenchTransferError::Output {
            path: path.display().to_string(),
            source,
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
