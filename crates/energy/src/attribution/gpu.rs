//! A GPU's energy split between the processes using it.
//!
//! NVML reports, per GPU, utilisation samples per process (`nvmlDeviceGetProcessUtilization`:
//! one sample per process per driver sampling period in which it used the GPU, `smUtil` the
//! percentage of that period its kernels ran), or at least the processes holding a context and
//! their memory (`nvmlDeviceGetComputeRunningProcesses`); NVML API reference, Device Queries,
//! <https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html>. Given a GPU's
//! energy `E` over a window of `W` seconds:
//!
//! ```text
//! utilisation, sampling period P known
//!   f_i = Σ smUtil_i / 100 · P / W           the share of the window process i kept the GPU busy
//!   Apart   e_i = E · f_i / max(1, Σ f)       idle = E − Σ e_i
//!   Shared  e_i = E · Σsm_i / Σ_j Σsm_j       idle = 0 (E when nobody used it)
//! utilisation, P not yet known (fewer than two samples of one process so far): as Shared
//! memory (no utilisation samples: NVML_ERROR_NOT_SUPPORTED)
//!   e_i = E · mem_i / Σ mem                  every joule, idle included, to the context holders
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
    /// Per process: the sum of its `smUtil` samples, or the bytes it holds.
    pub by_pid: Vec<(u32, f64)>,
    /// The driver's sampling period in seconds, where seen.
    pub sample_period_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One GPU's split: joules per pid, in the order of [`GpuUse::by_pid`], and the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSplit {
    pub by_pid: Vec<(u32, f64)>,
    pub idle_j: f64,
}

/// Splits `energy_j`, the GPU's energy over `window_s` seconds, by `u` (see the module).
pub fn split_gpu(energy_j: f64, window_s: f64, u: &GpuUse, policy: IdlePolicy) -> GpuSplit {
    let energy_j = if energy_j.is_finite() {
        energy_j.max(0.0)
    } else {
        0.0
    };
    let clean = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let weights: Vec<f64> = u.by_pid.iter().map(|&(_, w)| clean(w)).collect();
    let sum: f64 = weights.iter().sum();
    let nobody = || GpuSplit {
        by_pid: u.by_pid.iter().map(|&(p, _)| (p, 0.0)).collect(),
        idle_j: energy_j,
    };
    if u.basis.is_none() || sum <= 0.0 {
        return nobody();
    }
    let fractions: Vec<f64> = match (u.basis, u.sample_period_s, policy) {
        (Some(GpuShareBasis::Utilisation), Some(p), IdlePolicy::Apart) if window_s > 0.0 => {
            let f: Vec<f64> = weights.iter().map(|w| w / 100.0 * p / window_s).collect();
            let denom = f.iter().sum::<f64>().max(1.0);
            f.iter().map(|x| x / denom).collect()
        }
        _ => weights.iter().map(|w| w / sum).collect(),
    };
    let by_pid: Vec<(u32, f64)> = u
        .by_pid
        .iter()
        .zip(&fractions)
        .map(|(&(p, _), f)| (p, energy_j * f))
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

    fn util(by_pid: Vec<(u32, f64)>, period: Option<f64>) -> GpuUse {
        GpuUse {
            index: 0,
            basis: Some(GpuShareBasis::Utilisation),
            by_pid,
            sample_period_s: period,
            note: None,
        }
    }

    #[test]
    fn hand_worked_utilisation() {
        // 2 s window, samples every 0.1 s: A at 30 % for 20 samples (600), B at 60 % (1200).
        // A kept the GPU busy 0.3 of the window, B 0.6: 300 J → 90 J and 180 J, idle 30 J.
        let s = split_gpu(
            300.0,
            2.0,
            &util(vec![(1, 600.0), (2, 1200.0)], Some(0.1)),
            IdlePolicy::Apart,
        );
        assert!(
            (s.by_pid[0].1 - 90.0).abs() < 1e-9 && (s.by_pid[1].1 - 180.0).abs() < 1e-9,
            "{s:?}"
        );
        assert!((s.idle_j - 30.0).abs() < 1e-9);
        let s = split_gpu(
            300.0,
            2.0,
            &util(vec![(1, 600.0), (2, 1200.0)], Some(0.1)),
            IdlePolicy::Shared,
        );
        assert!((s.by_pid[0].1 - 100.0).abs() < 1e-9 && s.idle_j.abs() < 1e-9);
    }

    #[test]
    fn over_full_samples_never_exceed_the_energy() {
        // Samples read at the window's edges can add up to more than the window.
        let s = split_gpu(
            10.0,
            1.0,
            &util(vec![(1, 800.0), (2, 800.0)], Some(0.1)),
            IdlePolicy::Apart,
        );
        assert!((s.by_pid.iter().map(|p| p.1).sum::<f64>() - 10.0).abs() < 1e-9);
        assert_eq!(s.idle_j, 0.0);
    }

    #[test]
    fn unknown_period_and_memory_share_give_everything_to_the_processes() {
        let s = split_gpu(
            10.0,
            1.0,
            &util(vec![(1, 30.0), (2, 10.0)], None),
            IdlePolicy::Apart,
        );
        assert_eq!(s.by_pid, vec![(1, 7.5), (2, 2.5)]);
        let m = GpuUse {
            basis: Some(GpuShareBasis::Memory),
            ..util(vec![(1, 3e9), (2, 1e9)], None)
        };
        assert_eq!(
            split_gpu(8.0, 1.0, &m, IdlePolicy::Apart).by_pid,
            vec![(1, 6.0), (2, 2.0)]
        );
    }

    #[test]
    fn nobody_or_no_reading_leaves_it_idle() {
        let s = split_gpu(5.0, 1.0, &util(vec![], Some(0.1)), IdlePolicy::Apart);
        assert_eq!((s.by_pid.len(), s.idle_j), (0, 5.0));
        let none = GpuUse {
            basis: None,
            ..util(vec![(1, 50.0)], Some(0.1))
        };
        assert_eq!(split_gpu(5.0, 1.0, &none, IdlePolicy::Shared).idle_j, 5.0);
        assert_eq!(
            split_gpu(f64::NAN, 1.0, &none, IdlePolicy::Shared).idle_j,
            0.0
        );
    }
}
