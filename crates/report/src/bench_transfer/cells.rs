//! The runs of each cell (dataset, tool, EETT target) summarised: medians, counts, ranges.

use super::{BenchRow, TOOL_ORDER};
use std::collections::BTreeMap;

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
    pub(super) fn tool(&self) -> &str {
        &self.typical.tool
    }
    pub(super) fn dataset(&self) -> &str {
        &self.typical.dataset
    }
    pub(super) fn target(&self) -> u64 {
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

pub(super) fn tool_key(tool: &str) -> (usize, &str) {
    (
        TOOL_ORDER
            .iter()
            .position(|t| *t == tool)
            .unwrap_or(TOOL_ORDER.len()),
        tool,
    )
}

pub(super) fn is_eett(tool: &str) -> bool {
    tool.starts_with("wattio-eett")
}

/// EETT runs against nginx over TLS, or against `wattio serve`.
pub(super) fn eett_variant(tool: &str) -> &'static str {
    if tool.starts_with("wattio-eett-tls") {
        "nginx HTTPS"
    } else {
        "wattio serve"
    }
}

/// The first element with the largest key (ties keep the earlier element).
pub(super) fn first_max_by<'a, T>(items: &[&'a T], key: impl Fn(&T) -> f64) -> Option<&'a T> {
    items
        .iter()
        .copied()
        .fold(None, |best: Option<&T>, x| match best {
            Some(b) if key(b) >= key(x) => Some(b),
            _ => Some(x),
        })
}

/// The first element with the smallest key (ties keep the earlier element).
pub(super) fn first_min_by<'a, T>(items: &[&'a T], key: impl Fn(&T) -> f64) -> Option<&'a T> {
    first_max_by(items, |x| -key(x))
}
