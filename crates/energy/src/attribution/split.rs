//! The split: a window's energy shared between processes or cgroups by their CPU time.
//!
//! Given the energy `E` of a window of `Δt` seconds on a machine of `n` online CPUs, and the
//! CPU-seconds `c_i` each entry (process, cgroup, command) spent on the CPUs in that window:
//!
//! ```text
//! IdlePolicy::Apart  (default)  e_i = E · c_i / max(n·Δt, Σc)     idle = E − Σ e_i
//! IdlePolicy::Shared            e_i = E · c_i / Σc                idle = 0   (E when Σc = 0)
//! ```
//!
//! `Apart` is Scaphandre's rule (host power × the process's share of all CPU time) and gives the
//! same figures as Kepler's active/idle split (`active = E × node CPU usage ratio`, workloads
//! share `active` by their CPU time) whenever the node's busy time is the sum of its workloads'.
//! What no entry's CPU time explains — idle CPUs, and busy time of tasks nobody saw — stays apart
//! as *idle/unattributed*, so a command's share never exceeds the machine's total and the parts
//! always add up to it. `Shared` charges everything to the entries present (the tenants carry the
//! machine's baseline), for users who want every joule on someone's bill.
//!
//! `max(n·Δt, Σc)`: CPU times and the window are read at slightly different instants, so `Σc`
//! can exceed the capacity by a tick; the denominator keeps the parts within the total.

use crate::SysRoot;
use serde::{Deserialize, Serialize};

/// Where the energy that no entry's CPU time explains goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdlePolicy {
    /// Reported apart as idle/unattributed (Scaphandre, Kepler 0.10).
    #[default]
    Apart,
    /// Shared between the entries in proportion to their CPU time.
    Shared,
}

impl IdlePolicy {
    pub fn as_str(&self) -> &'static str {
        match self {
            IdlePolicy::Apart => "apart",
            IdlePolicy::Shared => "shared",
        }
    }
}

impl std::str::FromStr for IdlePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "apart" => Ok(IdlePolicy::Apart),
            "shared" => Ok(IdlePolicy::Shared),
            other => Err(format!(
                "unknown idle policy '{other}': use apart (idle reported on its own) or shared (idle split by CPU time)"
            )),
        }
    }
}

impl std::fmt::Display for IdlePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of a split: one figure per entry, in input order, and the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub entries_j: Vec<f64>,
    pub idle_j: f64,
}

/// Splits `total_j` over `cpu_s` (CPU-seconds per entry in the window) on a machine whose CPU
/// capacity over the window is `capacity_cpu_s` (online CPUs × window seconds).
///
/// Negative or non-finite CPU times count as zero; a non-finite or negative total gives zeros.
pub fn split(total_j: f64, capacity_cpu_s: f64, cpu_s: &[f64], policy: IdlePolicy) -> Split {
    let clean = |c: f64| if c.is_finite() && c > 0.0 { c } else { 0.0 };
    let total_j = clean(total_j);
    let sum: f64 = cpu_s.iter().map(|&c| clean(c)).sum();
    let denom = match policy {
        IdlePolicy::Apart => clean(capacity_cpu_s).max(sum),
        IdlePolicy::Shared => sum,
    };
    if denom <= 0.0 {
        return Split {
            entries_j: vec![0.0; cpu_s.len()],
            idle_j: total_j,
        };
    }
    let entries_j: Vec<f64> = cpu_s.iter().map(|&c| total_j * clean(c) / denom).collect();
    let given: f64 = entries_j.iter().sum();
    Split {
        entries_j,
        idle_j: (total_j - given).max(0.0),
    }
}

/// The share of one entry (a measured command, a transfer client, a JVM) of a window's energy,
/// under the default policy: `E · c / max(n·Δt, c)`. Every wattio figure called a process's
/// energy is this number.
pub fn share_j(total_j: f64, n_cpus: usize, window_s: f64, cpu_s: f64) -> f64 {
    split(
        total_j,
        n_cpus as f64 * window_s,
        &[cpu_s],
        IdlePolicy::Apart,
    )
    .entries_j[0]
}

/// The `n` of [`share_j`]: the CPUs online under `root` ([`crate::online_cpu_count`], the CPUs
/// whose time `/proc/stat` accounts for, so the machine the meter measures), or, where `root`
/// has no readable CPU list, the CPUs this process may run on (`available_parallelism`); at
/// least 1. Not the CPUs a process may use: one confined to fewer still takes its share of the
/// whole machine's energy.
pub fn machine_cpus(root: &SysRoot) -> usize {
    crate::online_cpu_count(root)
        .ok()
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
}

/// The label of an attributed figure: the total's provenance with the split named, e.g.
/// `measured (perf), attributed (cpu-time share)` or
/// `estimated (model: ccf-linear(...)), attributed (cpu-time share)`.
pub fn attributed_label(total_label: &str) -> String {
    format!("{total_label}, attributed (cpu-time share)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_worked_apart() {
        // 2 CPUs for 10 s = 20 CPU-s; 100 J. A used 5 s, B 10 s: 25 J and 50 J, idle 25 J.
        let s = split(100.0, 20.0, &[5.0, 10.0], IdlePolicy::Apart);
        assert_eq!(s.entries_j, vec![25.0, 50.0]);
        assert_eq!(s.idle_j, 25.0);
    }

    #[test]
    fn twice_the_cpu_time_twice_the_energy() {
        for policy in [IdlePolicy::Apart, IdlePolicy::Shared] {
            let s = split(37.0, 8.0, &[0.3, 0.6, 0.0], policy);
            assert!((s.entries_j[1] - 2.0 * s.entries_j[0]).abs() < 1e-12);
            assert_eq!(s.entries_j[2], 0.0);
        }
    }

    #[test]
    fn shared_leaves_no_idle() {
        let s = split(100.0, 20.0, &[5.0, 15.0], IdlePolicy::Shared);
        assert_eq!(s.entries_j, vec![25.0, 75.0]);
        assert_eq!(s.idle_j, 0.0);
        // Nobody ran: everything is idle whatever the policy.
        let s = split(10.0, 20.0, &[0.0, 0.0], IdlePolicy::Shared);
        assert_eq!(s.idle_j, 10.0);
    }

    #[test]
    fn cpu_time_over_capacity_never_exceeds_the_total() {
        // Read skew: 2.02 CPU-s in a 1 s window of 2 CPUs.
        let s = split(10.0, 2.0, &[1.01, 1.01], IdlePolicy::Apart);
        assert!((s.entries_j.iter().sum::<f64>() - 10.0).abs() < 1e-9);
        assert_eq!(s.idle_j, 0.0);
        // A tiny command on a big machine never gets more than the machine used.
        assert!(share_j(3.0, 2, 0.001, 0.5) <= 3.0);
    }

    #[test]
    fn bad_numbers_count_as_zero() {
        let s = split(f64::NAN, 2.0, &[1.0], IdlePolicy::Apart);
        assert_eq!(s.entries_j, vec![0.0]);
        let s = split(4.0, 2.0, &[-1.0, f64::INFINITY, 1.0], IdlePolicy::Apart);
        assert_eq!(s.entries_j, vec![0.0, 0.0, 2.0]);
        assert_eq!(s.idle_j, 2.0);
    }

    #[test]
    fn label_names_the_split() {
        assert_eq!(
            attributed_label("measured (perf)"),
            "measured (perf), attributed (cpu-time share)"
        );
    }

    #[test]
    fn machine_cpus_are_the_online_cpus_under_the_root() {
        let d = tempfile::tempdir().unwrap();
        // Seven CPUs, a count no test machine has.
        wattio_fixture::online_cpus(d.path(), 7).unwrap();
        assert_eq!(machine_cpus(&SysRoot::new(d.path())), 7);
        // No CPU list under the root: the CPUs this process may run on.
        let empty = tempfile::tempdir().unwrap();
        let here = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(machine_cpus(&SysRoot::new(empty.path())), here);
    }

    proptest! {
        #[test]
        fn parts_add_up_to_the_total(
            total in 0.0f64..1e6,
            cap in 0.0f64..1e3,
            cpu in proptest::collection::vec(0.0f64..1e3, 0..20),
            shared in any::<bool>(),
        ) {
            let policy = if shared { IdlePolicy::Shared } else { IdlePolicy::Apart };
            let s = split(total, cap, &cpu, policy);
            let sum: f64 = s.entries_j.iter().sum::<f64>() + s.idle_j;
            prop_assert!((sum - total).abs() <= 1e-9 * total.max(1.0));
            prop_assert!(s.entries_j.iter().all(|&e| e >= 0.0 && e <= total + 1e-9));
        }
    }
}
