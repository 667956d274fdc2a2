//! The measurement-overhead study of the RAPL paper (section V) as data, runner and
//! analysis.
//!
//! * **Load runs**: a fixed amount of work (a `stress-ng` method or the user's command)
//!   is timed with no recorder ("off") and with `wattio record` sampling at each
//!   frequency, for each mechanism. Repetitions are spread over time: each combination
//!   gets `reps_per_visit` consecutive runs, then the next combination, and the whole
//!   cycle is repeated `rounds` times (the paper's Figure 6).
//! * **Idle runs**: the same recorder around a sleep; what is measured is the machine's
//!   busy CPU time (`/proc/stat`), the recorder's own CPU time (`wait4` rusage; both read by
//!   `wattio_energy::attribution::cputime`), the model-estimated power from those, the
//!   recorder's attributed share of it, and C-state residency where
//!   `/sys/devices/system/cpu/cpu*/cpuidle` exists.
//! * **Analysis**: per combination, outliers outside `[q1 − 3·IQR, q3 + 3·IQR]` are
//!   removed; each (workload, mechanism, frequency) is compared with the workload's "off"
//!   runs by a one-sided Wilcoxon rank-sum test (H1: slower with measurement), p-values
//!   are Holm-corrected over the whole table, and the effect is the Hodges–Lehmann shift.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wattio_energy::attribution::{self, cputime};
use wattio_energy::{ModelParams, SysRoot};
use wattio_stats::{
    hodges_lehmann_ci, holm, median, outlier_mask, rank_sum, Alternative, TestMethod,
    PAPER_IQR_FACTOR,
};

/// Columns of the load-run CSV (`runs.csv`).
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
/// Columns of the idle-run CSV (`idle.csv`).
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
#[derive(Debug, Clone, PartialEq)]
pub struct LoadRun {
    pub round: usize,
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
#[derive(Debug, Clone, PartialEq)]
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
    pub n_cpus: Option<usize>,
}

/// One data row of a results CSV, read by column name.
struct Row<'a> {
    headers: &'a [String],
    r: &'a csv::StringRecord,
    /// 1-based line in the file (the header is line 1), for error messages.
    line: usize,
}

impl Row<'_> {
    /// The trimmed text of column `name` ("" if the column or the cell is missing).
    fn text(&self, name: &str) -> &str {
        self.headers
            .iter()
            .position(|h| h == name)
            .and_then(|i| self.r.get(i))
            .unwrap_or("")
            .trim()
    }

    fn num(&self, name: &str) -> Result<f64, String> {
        let s = self.text(name);
        s.parse()
            .map_err(|_| format!("line {}: column {name}: '{s}' is not a number", self.line))
    }
}

/// Builds one value per CSV row (header already split off), stopping at the first bad row.
fn parse_rows<T>(
    headers: &[String],
    rows: &[csv::StringRecord],
    build: impl Fn(&Row) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            build(&Row {
                headers,
                r,
                line: i + 2,
            })
        })
        .collect()
}

/// Parses load runs from CSV rows (header already split off).
pub fn load_runs_from_csv(
    headers: &[String],
    rows: &[csv::StringRecord],
) -> Result<Vec<LoadRun>, String> {
    parse_rows(headers, rows, |r| {
        Ok(LoadRun {
            round: r.num("round")? as usize,
            seq: r.num("seq")? as usize,
            workload: r.text("workload").to_string(),
            mechanism: r.text("mechanism").to_string(),
            freq_hz: r.num("freq_hz")?,
            rep: r.num("rep")? as usize,
            elapsed_s: r.num("elapsed_s")?,
            samples: r.num("samples")? as u64,
            recorder_s: r.num("recorder_s")?,
            recorder_cpu_s: r.num("recorder_cpu_s")?,
            start_unix: r.num("start_unix")?,
        })
    })
}

/// Parses idle runs from CSV rows.
pub fn idle_runs_from_csv(
    headers: &[String],
    rows: &[csv::StringRecord],
) -> Result<Vec<IdleRun>, String> {
    parse_rows(headers, rows, |r| {
        Ok(IdleRun {
            round: r.num("round")? as usize,
            seq: r.num("seq")? as usize,
            mechanism: r.text("mechanism").to_string(),
            freq_hz: r.num("freq_hz")?,
            rep: r.num("rep")? as usize,
            wall_s: r.num("wall_s")?,
            busy_cpu_s: r.num("busy_cpu_s")?,
            recorder_s: r.num("recorder_s")?,
            recorder_cpu_s: r.num("recorder_cpu_s")?,
            samples: r.num("samples")? as u64,
            est_power_w: r.num("est_power_w")?,
            model: r.text("model").to_string(),
            cstates: r.text("cstates").to_string(),
            n_cpus: match r.text("n_cpus") {
                "" => None,
                _ => Some(r.num("n_cpus")? as usize),
            },
        })
    })
}

fn csv_quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl LoadRun {
    fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{},{},{:.9},{},{:.6},{:.6},{:.6}\n",
            self.round,
            self.seq,
            csv_quote(&self.workload),
            self.mechanism,
            self.freq_hz,
            self.rep,
            self.elapsed_s,
            self.samples,
            self.recorder_s,
            self.recorder_cpu_s,
            self.start_unix
        )
    }
}

impl IdleRun {
    fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{},{:.6},{:.3},{:.6},{:.6},{},{:.6},{},{},{}\n",
            self.round,
            self.seq,
            self.mechanism,
            self.freq_hz,
            self.rep,
            self.wall_s,
            self.busy_cpu_s,
            self.recorder_s,
            self.recorder_cpu_s,
            self.samples,
            self.est_power_w,
            csv_quote(&self.model),
            csv_quote(&self.cstates),
            self.n_cpus.map(|n| n.to_string()).unwrap_or_default()
        )
    }
}

// ---------------------------------------------------------------------------------------
// Analysis
// ---------------------------------------------------------------------------------------

/// One row of the Appendix-A-shaped table.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeTest {
    pub workload: String,
    pub mechanism: String,
    pub freq_hz: f64,
    /// Runs kept / removed as outliers, baseline and measured group.
    pub n_base: usize,
    pub n: usize,
    pub removed_base: usize,
    pub removed: usize,
    pub median_base_s: f64,
    pub median_s: f64,
    pub p_value: f64,
    pub p_adj: f64,
    /// Two-sided p-value (not adjusted): a diagnostic for differences in the direction the
    /// one-sided test cannot see (faster with measurement = something else is going on).
    pub p_two_sided: f64,
    pub exact: bool,
    /// Hodges–Lehmann shift (measured − off), seconds; positive = slower with measurement.
    pub shift_s: f64,
    pub shift_pct: f64,
    pub ci_low_s: f64,
    pub ci_high_s: f64,
    /// Median rows per second the recorder wrote (sanity check that it really sampled).
    pub sample_rate: f64,
    pub recorder_cpu_s: f64,
}

fn keep_inliers(xs: &[f64]) -> (Vec<f64>, usize) {
    match outlier_mask(xs, PAPER_IQR_FACTOR) {
        Ok((mask, _)) => {
            let kept: Vec<f64> = xs
                .iter()
                .zip(&mask)
                .filter(|(_, k)| **k)
                .map(|(v, _)| *v)
                .collect();
            let removed = xs.len() - kept.len();
            (kept, removed)
        }
        Err(_) => (xs.to_vec(), 0),
    }
}

fn fkey(f: f64) -> u64 {
    (f * 1000.0).round() as u64
}

/// Tests every (workload, mechanism, frequency) against the workload's "off" runs.
/// Holm's correction runs over all rows returned.
pub fn analyze_load(runs: &[LoadRun]) -> Vec<TimeTest> {
    let mut groups: BTreeMap<(String, String, u64), Vec<&LoadRun>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.workload.clone(), r.mechanism.clone(), fkey(r.freq_hz)))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    let workloads: Vec<String> = {
        let mut w: Vec<String> = Vec::new();
        for r in runs {
            if !w.contains(&r.workload) {
                w.push(r.workload.clone());
            }
        }
        w
    };
    for w in &workloads {
        let Some(base) = groups.get(&(w.clone(), OFF.to_string(), 0)) else {
            continue;
        };
        let (b, removed_base) = keep_inliers(&base.iter().map(|r| r.elapsed_s).collect::<Vec<_>>());
        for ((gw, mech, fk), rs) in &groups {
            if gw != w || mech == OFF {
                continue;
            }
            let (x, removed) = keep_inliers(&rs.iter().map(|r| r.elapsed_s).collect::<Vec<_>>());
            let (Ok(t), Ok(hl)) = (
                rank_sum(&x, &b, Alternative::Greater),
                hodges_lehmann_ci(&x, &b, 0.95),
            ) else {
                continue;
            };
            let mb = median(&b).unwrap_or(f64::NAN);
            let rates: Vec<f64> = rs
                .iter()
                .filter(|r| r.recorder_s > 0.0)
                .map(|r| r.samples as f64 / r.recorder_s)
                .collect();
            out.push(TimeTest {
                workload: w.clone(),
                mechanism: mech.clone(),
                freq_hz: *fk as f64 / 1000.0,
                n_base: b.len(),
                n: x.len(),
                removed_base,
                removed,
                median_base_s: mb,
                median_s: median(&x).unwrap_or(f64::NAN),
                p_value: t.p_value,
                p_adj: f64::NAN,
                p_two_sided: rank_sum(&x, &b, Alternative::TwoSided)
                    .map(|t| t.p_value)
                    .unwrap_or(f64::NAN),
                exact: t.method == TestMethod::Exact,
                shift_s: hl.estimate,
                shift_pct: 100.0 * hl.estimate / mb,
                ci_low_s: hl.low,
                ci_high_s: hl.high,
                sample_rate: median(&rates).unwrap_or(0.0),
                recorder_cpu_s: median(&rs.iter().map(|r| r.recorder_cpu_s).collect::<Vec<_>>())
                    .unwrap_or(0.0),
            });
        }
    }
    let adj = holm(&out.iter().map(|t| t.p_value).collect::<Vec<_>>()).unwrap_or_default();
    for (t, a) in out.iter_mut().zip(adj) {
        t.p_adj = a;
    }
    out
}

/// One row of the Appendix-B-shaped table (idle impact).
#[derive(Debug, Clone, PartialEq)]
pub struct IdleTest {
    pub mechanism: String,
    pub freq_hz: f64,
    pub n_base: usize,
    pub n: usize,
    pub median_power_base_w: f64,
    pub median_power_w: f64,
    pub p_value: f64,
    pub p_adj: f64,
    /// Hodges–Lehmann shift of the estimated power, W (ESTIMATED by the model).
    pub shift_w: f64,
    /// Median recorder CPU time per second of wall time (CPU-seconds/s).
    pub recorder_cpu_per_s: f64,
    /// The recorder's attributed share of the estimated power with it running, W (ESTIMATED):
    /// `attribution::share_j(median_power_w × 1 s, n_cpus, 1 s, recorder_cpu_per_s)`, i.e.
    /// `median_power_w × recorder_cpu_per_s / n_cpus`. NaN when the vCPU count is unknown.
    pub recorder_power_w: f64,
    pub sample_rate: f64,
    /// Mean C-state residency with measurement, or "unavailable".
    pub cstates: String,
    /// Mean C-state residency of the "off" runs.
    pub cstates_base: String,
}

/// Tests each (mechanism, frequency) idle group against the "off" idle runs on the
/// model-estimated power (one-sided, H1: more power with measurement), Holm over all rows.
pub fn analyze_idle(runs: &[IdleRun], model: &ModelParams) -> Vec<IdleTest> {
    let mut groups: BTreeMap<(String, u64), Vec<&IdleRun>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.mechanism.clone(), fkey(r.freq_hz)))
            .or_default()
            .push(r);
    }
    let Some(base) = groups.get(&(OFF.to_string(), 0)) else {
        return vec![];
    };
    let (b, _) = keep_inliers(&base.iter().map(|r| r.est_power_w).collect::<Vec<_>>());
    let mut out = Vec::new();
    for ((mech, fk), rs) in &groups {
        if mech == OFF {
            continue;
        }
        let (x, _) = keep_inliers(&rs.iter().map(|r| r.est_power_w).collect::<Vec<_>>());
        let (Ok(t), Ok(shift)) = (
            rank_sum(&x, &b, Alternative::Greater),
            wattio_stats::hodges_lehmann(&x, &b),
        ) else {
            continue;
        };
        let cpu_per_s: Vec<f64> = rs
            .iter()
            .filter(|r| r.recorder_s > 0.0)
            .map(|r| r.recorder_cpu_s / r.recorder_s)
            .collect();
        let cps = median(&cpu_per_s).unwrap_or(0.0);
        let power_on = median(&x).unwrap_or(f64::NAN);
        let recorder_power_w = match rs.iter().find_map(|r| idle_run_cpus(r, model)) {
            Some(n) => attribution::share_j(power_on * 1.0, n, 1.0, cps),
            None => f64::NAN,
        };
        out.push(IdleTest {
            mechanism: mech.clone(),
            freq_hz: *fk as f64 / 1000.0,
            n_base: b.len(),
            n: x.len(),
            median_power_base_w: median(&b).unwrap_or(f64::NAN),
            median_power_w: power_on,
            p_value: t.p_value,
            p_adj: f64::NAN,
            shift_w: shift,
            recorder_cpu_per_s: cps,
            recorder_power_w,
            sample_rate: median(
                &rs.iter()
                    .filter(|r| r.recorder_s > 0.0)
                    .map(|r| r.samples as f64 / r.recorder_s)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0),
            cstates: mean_cstates(rs.iter().map(|r| r.cstates.as_str())),
            cstates_base: mean_cstates(base.iter().map(|r| r.cstates.as_str())),
        });
    }
    let adj = holm(&out.iter().map(|t| t.p_value).collect::<Vec<_>>()).unwrap_or_default();
    for (t, a) in out.iter_mut().zip(adj) {
        t.p_adj = a;
    }
    out
}

/// The vCPUs an idle run's estimate charged idle power for: its `n_cpus` column, or for files
/// written before that column, solved from its own estimate
/// (`est_power_w = min·n + (max − min)·busy_cpu_s / wall_s`) when it was made with `model`.
fn idle_run_cpus(r: &IdleRun, model: &ModelParams) -> Option<usize> {
    if let Some(n) = r.n_cpus.filter(|&n| n > 0) {
        return Some(n);
    }
    // The solve holds for a straight line only (ccf-linear, two points).
    if r.model != model.name()
        || model.points.len() != 2
        || r.wall_s <= 0.0
        || model.min_w_per_cpu() <= 0.0
    {
        return None;
    }
    let dynamic_w = (model.max_w_per_cpu() - model.min_w_per_cpu()) * r.busy_cpu_s / r.wall_s;
    let n = ((r.est_power_w - dynamic_w) / model.min_w_per_cpu()).round();
    (n >= 1.0).then_some(n as usize)
}

impl IdleTest {
    /// "off: C1 11.0%, … → on: C1 31.0%, …", or "unavailable".
    pub fn cstates_cell(&self) -> String {
        if self.cstates == "unavailable" && self.cstates_base == "unavailable" {
            "unavailable".into()
        } else {
            format!("off: {} → on: {}", self.cstates_base, self.cstates)
        }
    }
}

fn mean_cstates<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut why = None;
    for s in items {
        if s.starts_with("unavailable") {
            why = Some("unavailable".to_string());
            continue;
        }
        for part in s.split(';').filter(|p| !p.is_empty()) {
            if let Some((k, v)) = part.split_once('=') {
                if let Ok(v) = v.parse::<f64>() {
                    let e = sums.entry(k.to_string()).or_default();
                    e.0 += v;
                    e.1 += 1;
                }
            }
        }
    }
    if sums.is_empty() {
        return why.unwrap_or_else(|| "unavailable".into());
    }
    sums.iter()
        .map(|(k, (s, n))| format!("{k} {:.1}%", 100.0 * s / *n as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// p-values as the paper prints them ("< 0.01").
pub fn fmt_p(p: f64) -> String {
    if p.is_nan() {
        "n/a".into()
    } else if p < 0.01 {
        format!("< 0.01 ({p:.1e})")
    } else {
        format!("{p:.2}")
    }
}

/// Markdown table shaped like the paper's Appendix A.
pub fn time_table_markdown(tests: &[TimeTest]) -> String {
    let mut s = String::from(
        "| workload | mechanism | freq (Hz) | n (off/on) | median off (s) | median on (s) | pvalue | adj.pvalue | p two-sided | shift (s) | shift % | 95% CI (s) | rows/s | recorder CPU (s) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
    );
    for t in tests {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}/{} | {:.4} | {:.4} | {} | {} | {} | {:+.4} | {:+.2} | [{:+.4}, {:+.4}] | {:.1} | {:.3} |",
            t.workload,
            t.mechanism,
            t.freq_hz,
            t.n_base,
            t.n,
            t.median_base_s,
            t.median_s,
            fmt_p(t.p_value),
            fmt_p(t.p_adj),
            fmt_p(t.p_two_sided),
            t.shift_s,
            t.shift_pct,
            t.ci_low_s,
            t.ci_high_s,
            t.sample_rate,
            t.recorder_cpu_s
        );
    }
    s
}

/// Markdown table shaped like the paper's Appendix B (idle impact).
pub fn idle_table_markdown(tests: &[IdleTest]) -> String {
    let mut s = String::from(
        "| mechanism | freq (Hz) | n (off/on) | est. power off (W) | est. power on (W) | pvalue | adj.pvalue | shift (W, estimated) | recorder CPU (s/s) | recorder share of est. power (W) | rows/s | C-state residency (off → on) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for t in tests {
        let _ = writeln!(
            s,
            "| {} | {} | {}/{} | {:.3} | {:.3} | {} | {} | {:+.3} | {:.5} | {:.4} | {:.1} | {} |",
            t.mechanism,
            t.freq_hz,
            t.n_base,
            t.n,
            t.median_power_base_w,
            t.median_power_w,
            fmt_p(t.p_value),
            fmt_p(t.p_adj),
            t.shift_w,
            t.recorder_cpu_per_s,
            t.recorder_power_w,
            t.sample_rate,
            t.cstates_cell()
        );
    }
    s
}

/// CSV of the time tests (machine-readable Appendix A).
pub fn time_tests_csv(tests: &[TimeTest]) -> String {
    let mut s = String::from("workload,mechanism,freq_hz,n_base,n,removed_base,removed,median_base_s,median_s,pvalue,adj_pvalue,pvalue_two_sided,exact,shift_s,shift_pct,ci95_low_s,ci95_high_s,rows_per_s,recorder_cpu_s\n");
    for t in tests {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_quote(&t.workload),
            t.mechanism,
            t.freq_hz,
            t.n_base,
            t.n,
            t.removed_base,
            t.removed,
            t.median_base_s,
            t.median_s,
            t.p_value,
            t.p_adj,
            t.p_two_sided,
            t.exact,
            t.shift_s,
            t.shift_pct,
            t.ci_low_s,
            t.ci_high_s,
            t.sample_rate,
            t.recorder_cpu_s
        );
    }
    s
}

/// CSV of the idle tests (machine-readable Appendix B; power figures are ESTIMATED).
pub fn idle_tests_csv(tests: &[IdleTest], model: &ModelParams) -> String {
    let mut s = String::from("mechanism,freq_hz,n_base,n,est_power_base_w,est_power_w,pvalue,adj_pvalue,shift_w,recorder_cpu_per_s,recorder_power_w,rows_per_s,cstates_base,cstates,estimated,model\n");
    for t in tests {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},true,{}",
            t.mechanism,
            t.freq_hz,
            t.n_base,
            t.n,
            t.median_power_base_w,
            t.median_power_w,
            t.p_value,
            t.p_adj,
            t.shift_w,
            t.recorder_cpu_per_s,
            t.recorder_power_w,
            t.sample_rate,
            csv_quote(&t.cstates_base),
            csv_quote(&t.cstates),
            csv_quote(&model.name())
        );
    }
    s
}

// ---------------------------------------------------------------------------------------
// Plan and schedule
// ---------------------------------------------------------------------------------------

/// A workload: a name and the command that does a fixed amount of work.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub argv: Vec<String>,
}

/// The default `stress-ng` workloads: CPU-bound (matrix product), memory-bound (STREAM)
/// and mixed (one matrix worker beside one memory reader). Work is fixed by bogo-op
/// counts so the running time is what changes. `scale` multiplies the op counts
/// (1.0 ≈ 1–2 s each on a 2-vCPU VM).
pub fn default_workloads(workers: usize, scale: f64) -> Vec<Workload> {
    let ops = |base: f64| ((base * scale).round() as u64).max(1).to_string();
    let w = workers.max(1).to_string();
    let half = (workers / 2).max(1).to_string();
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        Workload {
            name: "cpu-matrixprod".into(),
            argv: [
                v(&[
                    "stress-ng",
                    "--cpu",
                    &w,
                    "--cpu-method",
                    "matrixprod",
                    "--cpu-ops",
                ]),
                vec![ops(1000.0)],
                v(&["--quiet"]),
            ]
            .concat(),
        },
        Workload {
            name: "mem-stream".into(),
            argv: [
                v(&["stress-ng", "--stream", &w, "--stream-ops"]),
                vec![ops(2.0)],
                v(&["--quiet"]),
            ]
            .concat(),
        },
        Workload {
            name: "mixed-cpu+vm".into(),
            argv: [
                v(&[
                    "stress-ng",
                    "--cpu",
                    &half,
                    "--cpu-method",
                    "matrixprod",
                    "--cpu-ops",
                ]),
                vec![ops(500.0)],
                v(&[
                    "--vm",
                    &half,
                    "--vm-bytes",
                    "64M",
                    "--vm-keep",
                    "--vm-method",
                    "read64",
                    "--vm-ops",
                ]),
                vec![ops(5000.0)],
                v(&["--quiet"]),
            ]
            .concat(),
        },
    ]
}

/// What `wattio overhead` runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workloads: Vec<Workload>,
    /// Mechanisms to sample with (as `wattio record --source` accepts them).
    pub mechanisms: Vec<String>,
    /// Sampling frequencies (Hz), not including "off" which is always run.
    pub freqs: Vec<f64>,
    pub reps_per_visit: usize,
    pub rounds: usize,
    /// Seconds of each idle run; 0 skips the idle study.
    pub idle_s: f64,
    /// Pause after starting the recorder (and in "off" runs) before the workload starts.
    pub settle_s: f64,
    /// Shuffle the order of combinations in every round with this seed; `None` keeps the
    /// paper's fixed order. A fixed order ties each combination to one position in the
    /// cycle, so anything that drifts with that position (other tenants' load, the
    /// transition between workloads) looks like an effect of the combination.
    pub shuffle_seed: Option<u64>,
}

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, well-known generator, enough for a
/// reproducible run order (not for statistics).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One visit of the round-robin schedule: `reps` consecutive runs of one combination.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    pub round: usize,
    /// Index into `Plan::workloads`, or None for an idle run.
    pub workload: Option<usize>,
    /// None = off.
    pub mechanism: Option<String>,
    pub freq_hz: f64,
    pub reps: usize,
}

impl Plan {
    /// Combinations in their fixed order: for each workload (then idle), off first,
    /// then each mechanism × frequency.
    pub fn combinations(&self) -> Vec<(Option<usize>, Option<String>, f64)> {
        let mut targets: Vec<Option<usize>> = (0..self.workloads.len()).map(Some).collect();
        if self.idle_s > 0.0 {
            targets.push(None);
        }
        let mut out = Vec::new();
        for t in targets {
            out.push((t, None, 0.0));
            for m in &self.mechanisms {
                for f in &self.freqs {
                    out.push((t, Some(m.clone()), *f));
                }
            }
        }
        out
    }

    /// The schedule of the paper's Figure 6: every combination gets `reps_per_visit` runs,
    /// then the next one, and the whole cycle repeats `rounds` times — in the same order
    /// each round, or shuffled per round (Fisher–Yates) when `shuffle_seed` is set.
    pub fn schedule(&self) -> Vec<Visit> {
        let mut combos = self.combinations();
        let mut rng = self.shuffle_seed.unwrap_or(0);
        let mut v = Vec::new();
        for round in 0..self.rounds {
            if self.shuffle_seed.is_some() {
                for i in (1..combos.len()).rev() {
                    let j = (splitmix64(&mut rng) % (i as u64 + 1)) as usize;
                    combos.swap(i, j);
                }
            }
            for (w, m, f) in &combos {
                v.push(Visit {
                    round,
                    workload: *w,
                    mechanism: m.clone(),
                    freq_hz: *f,
                    reps: self.reps_per_visit,
                });
            }
        }
        v
    }

    /// Seconds the plan is expected to take given a per-workload time estimate.
    pub fn estimate_s(&self, per_workload_s: &[f64]) -> f64 {
        self.schedule()
            .iter()
            .map(|v| {
                let body = match v.workload {
                    Some(i) => per_workload_s.get(i).copied().unwrap_or(1.0),
                    None => self.idle_s,
                };
                v.reps as f64 * (body + self.settle_s + 0.1)
            })
            .sum()
    }
}

// ---------------------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------------------

/// Errors of the runner, each naming the fix.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start workload {cmd:?}: {source}; is it installed? (stress-ng: `make deps` or apt-get install stress-ng)")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("workload {cmd:?} failed with exit status {status}; run it by hand to see why")]
    WorkloadFailed { cmd: String, status: String },
    #[error("`wattio record --source {mechanism} --freq {freq}` exited early: {stderr}")]
    RecorderDied {
        mechanism: String,
        freq: f64,
        stderr: String,
    },
    #[error(
        "`wattio record` wrote no header within 10 s (mechanism {0}); is the machine overloaded?"
    )]
    RecorderSlow(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A running `wattio record` subprocess.
struct Recorder {
    child: Child,
    /// When the header appeared (sampling started).
    ready: Instant,
    out: PathBuf,
    err: PathBuf,
    mechanism: String,
    freq: f64,
}

impl Recorder {
    fn start(exe: &Path, mechanism: &str, freq: f64, dir: &Path) -> Result<Recorder, RunError> {
        let out = dir.join("recorder.csv");
        let err = dir.join("recorder.err");
        let _ = std::fs::remove_file(&out);
        let child = Command::new(exe)
            .args([
                "record",
                "--source",
                mechanism,
                "--freq",
                &freq.to_string(),
                "--format",
                "csv",
                "-o",
            ])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err)?)
            .spawn()
            .map_err(|e| RunError::Spawn {
                cmd: exe.display().to_string(),
                source: e,
            })?;
        let mut r = Recorder {
            ready: Instant::now(),
            child,
            out,
            err,
            mechanism: mechanism.into(),
            freq,
        };
        // Ready when the CSV header is on disk: the source is open and sampling.
        let t0 = Instant::now();
        loop {
            if let Some(_status) = r.child.try_wait()? {
                return Err(r.died());
            }
            if std::fs::metadata(&r.out)
                .map(|m| m.len() > 0)
                .unwrap_or(false)
            {
                r.ready = Instant::now();
                return Ok(r);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = r.child.kill();
                let _ = r.child.wait();
                return Err(RunError::RecorderSlow(r.mechanism.clone()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn died(&self) -> RunError {
        let stderr = std::fs::read_to_string(&self.err).unwrap_or_default();
        RunError::RecorderDied {
            mechanism: self.mechanism.clone(),
            freq: self.freq,
            stderr: stderr
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .to_string(),
        }
    }

    /// SIGTERM, reap with `wait4` (`cputime::wait_child`) to get the CPU time, count data rows.
    /// Returns (rows, seconds since ready, CPU seconds).
    fn stop(self) -> Result<(u64, f64, f64), RunError> {
        use std::os::unix::process::ExitStatusExt;
        let ran = self.ready.elapsed().as_secs_f64();
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: pid is our own un-reaped child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let usage = cputime::wait_child(self.child)?;
        let (status, cpu) = (usage.status, usage.cpu_s);
        let terminated_by_us = status.signal() == Some(libc::SIGTERM);
        let clean_exit = status.code() == Some(0);
        if !(clean_exit || terminated_by_us) {
            let stderr = std::fs::read_to_string(&self.err).unwrap_or_default();
            return Err(RunError::RecorderDied {
                mechanism: self.mechanism,
                freq: self.freq,
                stderr: stderr.lines().last().unwrap_or("no message").to_string(),
            });
        }
        let rows = std::fs::File::open(&self.out)
            .map(|f| std::io::BufReader::new(f).lines().count().saturating_sub(1) as u64)
            .unwrap_or(0);
        let _ = std::fs::remove_file(&self.out);
        Ok((rows, ran, cpu))
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Cumulative residency (µs) per idle-state name summed over CPUs, from
/// `/sys/devices/system/cpu/cpu*/cpuidle/state*/{name,time}`; Err says why not.
pub fn cstate_times(root: &SysRoot) -> Result<BTreeMap<String, u64>, String> {
    let base = root.path("/sys/devices/system/cpu");
    let rd = std::fs::read_dir(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    let mut cpus = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("cpu")
            && name[3..].chars().all(|c| c.is_ascii_digit())
            && name.len() > 3)
        {
            continue;
        }
        cpus += 1;
        let Ok(states) = std::fs::read_dir(e.path().join("cpuidle")) else {
            continue;
        };
        for s in states.flatten() {
            let p = s.path();
            let (Ok(n), Ok(t)) = (
                std::fs::read_to_string(p.join("name")),
                std::fs::read_to_string(p.join("time")),
            ) else {
                continue;
            };
            if let Ok(t) = t.trim().parse::<u64>() {
                *out.entry(n.trim().to_string()).or_default() += t;
            }
        }
    }
    if out.is_empty() {
        let driver =
            std::fs::read_to_string(root.path("/sys/devices/system/cpu/cpuidle/current_driver"))
                .unwrap_or_default();
        return Err(format!(
            "no cpu*/cpuidle/state* under {} ({} CPUs; cpuidle driver '{}'): the hypervisor exposes no C-states",
            base.display(),
            cpus,
            driver.trim()
        ));
    }
    Ok(out)
}

/// Progress callback: (runs done, runs total, what just ran).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// Where the runner writes and what it uses.
pub struct Runner<'a> {
    pub plan: &'a Plan,
    /// The `wattio` executable to run as the recorder.
    pub wattio_exe: PathBuf,
    pub out_dir: PathBuf,
    pub root: SysRoot,
    pub model: ModelParams,
}

/// What a finished run produced.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub load: Vec<LoadRun>,
    pub idle: Vec<IdleRun>,
}

impl Runner<'_> {
    /// Starts and stops a recorder for `mechanism` at `freq_hz` for a moment, so a mechanism
    /// that cannot record (dead counters, no permission) is found before the study starts.
    pub fn preflight(&self, mechanism: &str, freq_hz: f64) -> Result<(), RunError> {
        let dir = self.out_dir.join(".preflight");
        std::fs::create_dir_all(&dir)?;
        let r = Recorder::start(&self.wattio_exe, mechanism, freq_hz, &dir).and_then(|rec| {
            std::thread::sleep(Duration::from_millis(200));
            rec.stop().map(|_| ())
        });
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    /// Runs the whole schedule, appending every run to `runs.csv` / `idle.csv` in
    /// `out_dir` as it finishes (a crash loses at most the run in progress).
    pub fn run(&self, progress: Progress) -> Result<Outcome, RunError> {
        std::fs::create_dir_all(&self.out_dir)?;
        let scratch = self.out_dir.join(".scratch");
        std::fs::create_dir_all(&scratch)?;
        let mut load_csv = std::fs::File::create(self.out_dir.join("runs.csv"))?;
        writeln!(load_csv, "{}", LOAD_COLUMNS.join(","))?;
        let mut idle_csv = if self.plan.idle_s > 0.0 {
            let mut f = std::fs::File::create(self.out_dir.join("idle.csv"))?;
            let cols: Vec<&str> = IDLE_COLUMNS
                .iter()
                .chain(IDLE_OPTIONAL_COLUMNS)
                .copied()
                .collect();
            writeln!(f, "{}", cols.join(","))?;
            Some(f)
        } else {
            None
        };
        let schedule = self.plan.schedule();
        let total: usize = schedule.iter().map(|v| v.reps).sum();
        let n_cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut out = Outcome::default();
        let (mut done, mut seq) = (0, 0);
        let result = (|| -> Result<(), RunError> {
            for v in &schedule {
                for rep in 0..v.reps {
                    seq += 1;
                    let label = format!(
                        "{} {} {}",
                        v.workload
                            .map(|i| self.plan.workloads[i].name.as_str())
                            .unwrap_or("idle"),
                        v.mechanism.as_deref().unwrap_or(OFF),
                        if v.mechanism.is_some() {
                            format!("{} Hz", v.freq_hz)
                        } else {
                            String::new()
                        }
                    );
                    let rec = match &v.mechanism {
                        Some(m) => Some(Recorder::start(&self.wattio_exe, m, v.freq_hz, &scratch)?),
                        None => None,
                    };
                    std::thread::sleep(Duration::from_secs_f64(self.plan.settle_s));
                    let start_unix = unix_now();
                    let body = match v.workload {
                        Some(i) => self
                            .time_workload(&self.plan.workloads[i])
                            .map(|e| (e, None)),
                        None => self
                            .idle_window()
                            .map(|(wall, busy, cs)| (wall, Some((busy, cs)))),
                    };
                    // Stop the recorder even when the workload failed.
                    let stopped = rec.map(|r| r.stop()).transpose();
                    let (elapsed, idle) = body?;
                    let (samples, rec_s, rec_cpu) = stopped?.unwrap_or((0, 0.0, 0.0));
                    let mechanism = v.mechanism.clone().unwrap_or_else(|| OFF.into());
                    match (v.workload, idle) {
                        (Some(i), _) => {
                            let r = LoadRun {
                                round: v.round,
                                seq,
                                workload: self.plan.workloads[i].name.clone(),
                                mechanism,
                                freq_hz: v.freq_hz,
                                rep,
                                elapsed_s: elapsed,
                                samples,
                                recorder_s: rec_s,
                                recorder_cpu_s: rec_cpu,
                                start_unix,
                            };
                            load_csv.write_all(r.csv_line().as_bytes())?;
                            out.load.push(r);
                        }
                        (None, Some((busy, cstates))) => {
                            let e = self.model.energy_j(n_cpus, elapsed, busy);
                            let r = IdleRun {
                                round: v.round,
                                seq,
                                mechanism,
                                freq_hz: v.freq_hz,
                                rep,
                                wall_s: elapsed,
                                busy_cpu_s: busy,
                                recorder_s: rec_s,
                                recorder_cpu_s: rec_cpu,
                                samples,
                                est_power_w: e / elapsed.max(1e-9),
                                model: self.model.name(),
                                cstates,
                                n_cpus: Some(n_cpus),
                            };
                            if let Some(f) = idle_csv.as_mut() {
                                f.write_all(r.csv_line().as_bytes())?;
                            }
                            out.idle.push(r);
                        }
                        (None, None) => {}
                    }
                    done += 1;
                    progress(done, total, &label);
                }
            }
            Ok(())
        })();
        let _ = std::fs::remove_dir_all(&scratch);
        result.map(|_| out)
    }

    fn time_workload(&self, w: &Workload) -> Result<f64, RunError> {
        let cmd = w.argv.join(" ");
        let t0 = Instant::now();
        let mut child = Command::new(&w.argv[0])
            .args(&w.argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| RunError::Spawn {
                cmd: cmd.clone(),
                source: e,
            })?;
        let status = child.wait()?;
        let elapsed = t0.elapsed().as_secs_f64();
        if !status.success() {
            return Err(RunError::WorkloadFailed {
                cmd,
                status: status.to_string(),
            });
        }
        Ok(elapsed)
    }

    fn idle_window(&self) -> Result<(f64, f64, String), RunError> {
        let c0 = cstate_times(&self.root);
        let b0 = cputime::machine_busy_cpu_s(&self.root)?;
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(self.plan.idle_s));
        let wall = t0.elapsed().as_secs_f64();
        let b1 = cputime::machine_busy_cpu_s(&self.root)?;
        let c1 = cstate_times(&self.root);
        let n_cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64;
        let cs = match (c0, c1) {
            (Ok(a), Ok(b)) => b
                .iter()
                .map(|(k, v)| {
                    let d = v.saturating_sub(*a.get(k).unwrap_or(&0)) as f64 * 1e-6;
                    format!("{k}={:.4}", d / (wall * n_cpus))
                })
                .collect::<Vec<_>>()
                .join(";"),
            (Err(e), _) | (_, Err(e)) => format!("unavailable: {e}"),
        };
        Ok((wall, (b1 - b0).max(0.0), cs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            workloads: default_workloads(2, 1.0),
            mechanisms: vec!["model".into()],
            freqs: vec![0.1, 1.0, 10.0, 100.0, 1000.0],
            reps_per_visit: 3,
            rounds: 2,
            idle_s: 2.0,
            settle_s: 0.2,
            shuffle_seed: None,
        }
    }

    #[test]
    fn schedule_is_round_robin_like_figure_6() {
        let p = plan();
        let s = p.schedule();
        // 3 workloads + idle, each: off + 5 freqs, two rounds.
        assert_eq!(s.len(), 4 * 6 * 2);
        assert_eq!(s[0].mechanism, None);
        assert_eq!(s[1].freq_hz, 0.1);
        // The second round starts over with the first combination.
        assert_eq!(s[24].round, 1);
        assert_eq!((s[24].workload, s[24].mechanism.clone()), (Some(0), None));
        assert!(s.iter().all(|v| v.reps == 3));
    }

    #[test]
    fn shuffled_schedule_covers_every_combination_each_round() {
        let mut p = plan();
        p.shuffle_seed = Some(42);
        let s = p.schedule();
        let fixed = plan().schedule();
        assert_eq!(s.len(), fixed.len());
        assert_ne!(s, fixed, "seed 42 should change the order");
        let key = |v: &Visit| format!("{:?}{:?}{}", v.workload, v.mechanism, v.freq_hz);
        for round in 0..2 {
            let mut a: Vec<String> = s.iter().filter(|v| v.round == round).map(key).collect();
            let mut b: Vec<String> = fixed.iter().filter(|v| v.round == round).map(key).collect();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
        // Same seed, same order.
        assert_eq!(s, p.schedule());
    }

    #[test]
    fn cstates_unavailable_is_reported_with_reason() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/cpu/cpu0")).unwrap();
        let e = cstate_times(&SysRoot::new(d.path())).unwrap_err();
        assert!(e.contains("no cpu*/cpuidle/state*"), "{e}");
    }

    #[test]
    fn cstates_are_summed_from_a_fixture_tree() {
        let d = tempfile::tempdir().unwrap();
        for cpu in 0..2 {
            for (i, (n, t)) in [("POLL", 5u64), ("C1", 100), ("C6", 1000)]
                .iter()
                .enumerate()
            {
                let s = d
                    .path()
                    .join(format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{i}"));
                std::fs::create_dir_all(&s).unwrap();
                std::fs::write(s.join("name"), format!("{n}\n")).unwrap();
                std::fs::write(s.join("time"), format!("{}\n", t * (cpu + 1))).unwrap();
            }
        }
        let m = cstate_times(&SysRoot::new(d.path())).unwrap();
        assert_eq!(m["C1"], 300);
        assert_eq!(m["C6"], 3000);
        assert_eq!(m["POLL"], 15);
    }

    #[test]
    fn analysis_finds_a_planted_slowdown_and_not_a_null_one() {
        // Hand-made data: "off" and 10 Hz interleave; 1000 Hz is 5 % slower in every run.
        let mut runs = Vec::new();
        let base = [10.00, 10.02, 9.98, 10.01, 9.99, 10.03, 9.97, 10.04]; // no ties: exact test
        let mut push = |mech: &str, f: f64, xs: Vec<f64>| {
            for (i, e) in xs.into_iter().enumerate() {
                runs.push(LoadRun {
                    round: 0,
                    seq: i,
                    workload: "w".into(),
                    mechanism: mech.into(),
                    freq_hz: f,
                    rep: i,
                    elapsed_s: e,
                    samples: (f * e) as u64,
                    recorder_s: e,
                    recorder_cpu_s: 0.0,
                    start_unix: 0.0,
                });
            }
        };
        push(OFF, 0.0, base.to_vec());
        push("model", 10.0, base.iter().map(|v| v + 0.005).collect());
        push("model", 1000.0, base.iter().map(|v| v * 1.05).collect());
        let t = analyze_load(&runs);
        assert_eq!(t.len(), 2);
        let slow = t.iter().find(|x| x.freq_hz == 1000.0).unwrap();
        let null = t.iter().find(|x| x.freq_hz == 10.0).unwrap();
        // Complete separation, 8 vs 8: exact p = 1/C(16,8) = 1/12870; Holm ×2.
        assert!((slow.p_value - 1.0 / 12870.0).abs() < 1e-12);
        assert!((slow.p_adj - 2.0 / 12870.0).abs() < 1e-12);
        assert!(slow.shift_pct > 4.5 && slow.shift_pct < 5.5);
        assert!(null.p_adj > 0.05);
    }

    #[test]
    fn outliers_are_removed_before_testing() {
        let mut runs: Vec<LoadRun> = Vec::new();
        let mk = |mech: &str, f: f64, e: f64| LoadRun {
            round: 0,
            seq: 0,
            workload: "w".into(),
            mechanism: mech.into(),
            freq_hz: f,
            rep: 0,
            elapsed_s: e,
            samples: 0,
            recorder_s: 0.0,
            recorder_cpu_s: 0.0,
            start_unix: 0.0,
        };
        for e in [1.0, 1.01, 0.99, 1.02, 0.98, 1.0] {
            runs.push(mk(OFF, 0.0, e));
            runs.push(mk("model", 1.0, e));
        }
        runs.push(mk("model", 1.0, 50.0)); // a run disturbed by something else
        let t = analyze_load(&runs);
        assert_eq!(t[0].removed, 1);
        assert_eq!(t[0].n, 6);
    }

    fn idle_run(
        mech: &str,
        f: f64,
        rep: usize,
        busy: f64,
        rec_cpu: f64,
        n: Option<usize>,
    ) -> IdleRun {
        let model = ModelParams::default();
        IdleRun {
            round: 0,
            seq: rep,
            mechanism: mech.into(),
            freq_hz: f,
            rep,
            wall_s: 2.0,
            busy_cpu_s: busy,
            recorder_s: if mech == OFF { 0.0 } else { 2.0 },
            recorder_cpu_s: rec_cpu,
            samples: 0,
            est_power_w: model.energy_j(2, 2.0, busy) / 2.0,
            model: model.name(),
            cstates: "unavailable".into(),
            n_cpus: n,
        }
    }

    #[test]
    fn recorder_power_is_its_attributed_share_of_the_estimated_power() {
        let model = ModelParams::default();
        let mut runs = Vec::new();
        for i in 0..5 {
            runs.push(idle_run(OFF, 0.0, i, 1.0 + 0.01 * i as f64, 0.0, Some(2)));
            runs.push(idle_run(
                "model",
                1000.0,
                i,
                1.1 + 0.01 * i as f64,
                0.08,
                Some(2),
            ));
        }
        let t = analyze_idle(&runs, &model);
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert!((t.recorder_cpu_per_s - 0.04).abs() < 1e-12);
        let want = attribution::share_j(t.median_power_w * 1.0, 2, 1.0, t.recorder_cpu_per_s);
        assert_eq!(t.recorder_power_w, want);
        // = est. power on × recorder CPU s/s ÷ vCPUs, within the power it is a share of.
        assert!((t.recorder_power_w - t.median_power_w * 0.04 / 2.0).abs() < 1e-12);
        assert!(t.recorder_power_w > 0.0 && t.recorder_power_w <= t.median_power_w);
        // A file written before the n_cpus column: the count is solved from the estimate.
        let old: Vec<IdleRun> = runs
            .iter()
            .cloned()
            .map(|mut r| {
                r.n_cpus = None;
                r
            })
            .collect();
        assert_eq!(analyze_idle(&old, &model)[0].recorder_power_w, want);
        // ... but not from another model's estimate.
        let other = ModelParams::ccf_linear(1.0, 2.0);
        assert!(analyze_idle(&old, &other)[0].recorder_power_w.is_nan());
    }

    #[test]
    fn idle_csv_round_trips_with_and_without_the_n_cpus_column() {
        let r = idle_run("model", 10.0, 0, 0.5, 0.01, Some(4));
        let cols: Vec<&str> = IDLE_COLUMNS
            .iter()
            .chain(IDLE_OPTIONAL_COLUMNS)
            .copied()
            .collect();
        let text = format!("{}\n{}", cols.join(","), r.csv_line());
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let headers: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        let rows: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
        let back = idle_runs_from_csv(&headers, &rows).unwrap();
        assert_eq!(back[0].n_cpus, Some(4));
        assert_eq!(back[0].cstates, "unavailable");
        let old = "round,seq,mechanism,freq_hz,rep,wall_s,busy_cpu_s,recorder_s,recorder_cpu_s,samples,est_power_w,model,cstates\n0,1,off,0,0,1.0,0.02,0,0,0,1.50,m,C1=0.1000\n";
        let mut rd = csv::Reader::from_reader(old.as_bytes());
        let headers: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        let rows: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
        assert_eq!(idle_runs_from_csv(&headers, &rows).unwrap()[0].n_cpus, None);
    }
}
