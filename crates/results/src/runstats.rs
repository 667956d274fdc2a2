//! `wattio testbed exec --stats`: what one run cost (its JSON), which `make bench-transfer`
//! keeps per run and `wattio report bench-transfer` reads back.

use serde::{Deserialize, Serialize};

/// What one run cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStats {
    /// Wall-clock seconds from spawn to exit.
    pub wall_s: f64,
    /// User CPU seconds of the command and its waited-for descendants (`wait4` rusage).
    pub user_s: f64,
    /// System CPU seconds of the command and its waited-for descendants (`wait4` rusage).
    pub sys_s: f64,
    /// Exit code (128 + signal number when killed by a signal).
    pub exit_code: i32,
    /// vCPUs the dedicated-host estimate charges idle power for, and the `n` of the attributed
    /// share: the machine's online CPUs (`wattio_energy::attribution::machine_cpus`).
    pub n_cpus: usize,
    /// Estimated energy in joules of a host running only this command (the dedicated client
    /// host): `min·n_cpus·wall + (max−min)·(user_s + sys_s)`. Not the command's share of this
    /// machine's energy: that is `attributed_j`.
    pub energy_j: f64,
    /// Always true: `energy_j` is a model estimate, no counter measured it.
    pub estimated: bool,
    /// The model and its coefficients (of `energy_j`).
    pub model: String,
    /// What `energy_j` is (`wattio_energy::HOST_ESTIMATE_SCOPE`).
    #[serde(default)]
    pub energy_scope: String,
    /// The meter's whole-machine energy over the run (spawn to exit), when a meter was given.
    #[serde(default)]
    pub system_energy_j: Option<f64>,
    /// The command's CPU-time share of `system_energy_j`:
    /// `wattio_energy::attribution::share_j(system_energy_j, n_cpus, wall_s, user_s + sys_s)`.
    #[serde(default)]
    pub attributed_j: Option<f64>,
    /// Label of `attributed_j`, e.g. `measured (perf), attributed (cpu-time share)`.
    #[serde(default)]
    pub attributed_label: Option<String>,
}
