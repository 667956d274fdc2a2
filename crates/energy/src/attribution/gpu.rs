//! A GPU's energy split between the processes using it.
//!
//! NVML says who used a GPU in two ways (NVML API reference, Device Queries,
//! <https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html>, and `nvml.h`):
//! `nvmlDeviceGetProcessUtilization(device, …, lastSeenTimeStamp)` returns one sample per process
//! that used the GPU, its `smUtil` the process's SM utilisation "since the previous query" when
//! `lastSeenTimeStamp` is that query's time (the driver averages its own, finer samples), and
//! `nvmlDeviceGetComputeRunningProcesses` lists the processes holding a compute context with the
//! memory each holds. Given a GPU's energy `E` over a window, with `u_i` = process i's `smUtil`
//! / 100 over the same window:
//!
//! ```text
//! utilisation   Apart   e_i = E · u_i / max(1, Σ u)       idle = E − Σ e_i
//!               Shared  e_i = E · u_i / Σ u               idle = 0 (E when nobody used it)
//! memory (no utilisation samples: NVML_ERROR_NOT_SUPPORTED)
//!               e_i = E · mem_i / Σ mem                   every joule, idle included, to the holders
//! ```
//!
//! The same rule as the CPU's ([`super::split`]): what no process's use explains stays apart as
//! idle. The memory share is a weaker proxy (a process holding memory and doing nothing gets the
//! same share as a busy one) and is labelled apart: `attributed (gpu memory share)` against
//! `attributed (gpu utilisation share)`.

use super::split::IdlePolicy;
use serde::Serialize;

/// What a GPU's split is based on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuShareBasis {
    /// Per-process utilisation samples.
    Utilisation,
    /// Device memory held by each process with a compute context.
    Memory,
}

impl GpuShareBasis {
    /// The label of a figure split on this basis, after the GPU energy's own label.
    pub fn label(&self) -> &'static str {
        match self {
            GpuShareBasis::Utilisation => "attributed (gpu utilisation share)",
            GpuShareBasis::Memory => "attributed (gpu memory share)",
        }
    }
}

/// What one GPU's processes did over a window, as NVML reported it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuUse {
    /// NVML's index of the GPU.
    pub index: u32,
    /// `None` when neither reading answered (`note` says why): the energy stays idle.
    pub basis: Option<GpuShareBasis>,
    /// Per process: its mean SM utilisation over the window as a fraction (0 to 1), or the
    /// bytes it holds.
    pub by_pid: Vec<(u32, f64)>,
    /// The window's length in seconds (since the previous read).
    pub window_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One GPU's split: joules per pid, in the order of [`GpuUse::by_pid`], and the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSplit {
    pub by_pid: Vec<(u32, f64)>,
    pub idle_j: f64,
}

/// Splits `energy_j`, the GPU's energy over the window `u` describes (see the module).
pub fn split_gpu(energy_j: f64, u: &GpuUse, policy: IdlePolicy) -> GpuSplit {
    let energy_j = if energy_j.is_finite() {
        energy_j.max(0.0)
    } else {
        0.0
    };
    let clean = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let weights: Vec<f64> = u.by_pid.iter().map(|&(_, w)| clean(w)).collect();
    let sum: f64 = weights.iter().sum();
    if u.basis.is_none() || sum <= 0.0 {
        return GpuSplit {
            by_pid: u.by_pid.iter().map(|&(p, _)| (p, 0.0)).collect(),
            idle_j: energy_j,
        };
    }
    let denom = match (u.basis, policy) {
        (Some(GpuShareBasis::Utilisation), IdlePolicy::Apart) => sum.max(1.0),
        _ => sum,
    };
    let by_pid: Vec<(u32, f64)> = u
        .by_pid
        .iter()
        .zip(&weights)
        .map(|(&(p, _), w)| (p, energy_j * w / denom))
        .collect();
    let given: f64 = by_pid.iter().map(|(_, j)| j).sum();
    GpuSplit {
        by_pid,
        idle_j: (energy_j - given).max(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn util(by_pid: Vec<(u32, f64)>) -> GpuUse {
        GpuUse {
            index: 0,
            basis: Some(GpuShareBasis::Utilisation),
            by_pid,
            window_s: 2.0,
            note: None,
        }
    }

    #[test]
    fn hand_worked_utilisation() {
        // A at 30 %, B at 60 % of the window: 300 J → 90 J and 180 J, idle 30 J.
        let s = split_gpu(300.0, &util(vec![(1, 0.3), (2, 0.6)]), IdlePolicy::Apart);
        assert!(
            (s.by_pid[0].1 - 90.0).abs() < 1e-9 && (s.by_pid[1].1 - 180.0).abs() < 1e-9,
            "{s:?}"
        );
        assert!((s.idle_j - 30.0).abs() < 1e-9);
        let s = split_gpu(300.0, &util(vec![(1, 0.3), (2, 0.6)]), IdlePolicy::Shared);
        assert!((s.by_pid[0].1 - 100.0).abs() < 1e-9 && s.idle_j.abs() < 1e-9);
    }

    #[test]
    fn over_full_utilisation_never_exceeds_the_energy() {
        // Two processes time-sliced on one GPU can each report 80 %.
        let s = split_gpu(10.0, &util(vec![(1, 0.8), (2, 0.8)]), IdlePolicy::Apart);
        assert!((s.by_pid.iter().map(|p| p.1).sum::<f64>() - 10.0).abs() < 1e-9);
        assert_eq!(s.idle_j, 0.0);
    }

    #[test]
    fn memory_share_gives_everything_to_the_holders() {
        let m = GpuUse {
            basis: Some(GpuShareBasis::Memory),
            ..util(vec![(1, 3e9), (2, 1e9)])
        };
        assert_eq!(
            split_gpu(8.0, &m, IdlePolicy::Apart).by_pid,
            vec![(1, 6.0), (2, 2.0)]
        );
    }

    #[test]
    fn nobody_or_no_reading_leaves_it_idle() {
        let s = split_gpu(5.0, &util(vec![]), IdlePolicy::Apart);
        assert_eq!((s.by_pid.len(), s.idle_j), (0, 5.0));
        let none = GpuUse {
            basis: None,
            ..util(vec![(1, 0.5)])
        };
        assert_eq!(split_gpu(5.0, &none, IdlePolicy::Shared).idle_j, 5.0);
        assert_eq!(split_gpu(f64::NAN, &none, IdlePolicy::Shared).idle_j, 0.0);
    }
}
