//! Wall time, CPU time and labelled model energy of one child command.
//!
//! The system-wide meter (`wattio measure`) also counts the server, the delay line and whatever
//! else runs on the host. To compare *client* tools, the energy of the client alone is estimated
//! with the same linear model the meter uses (`wattio_energy::model::ModelParams`) applied to the
//! client's own CPU time (`getrusage(RUSAGE_CHILDREN)`: every thread and waited-for descendant),
//! so every tool is charged by one rule. The figure is an estimate and is labelled so.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::process::Command;
use std::time::Instant;
use wattio_energy::model::ModelParams;

/// What one run cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStats {
    /// Wall-clock seconds from spawn to exit.
    pub wall_s: f64,
    /// User CPU seconds of the command and its waited-for descendants.
    pub user_s: f64,
    /// System CPU seconds of the command and its waited-for descendants.
    pub sys_s: f64,
    /// Exit code (128 + signal number when killed by a signal).
    pub exit_code: i32,
    /// Online CPUs the model charges idle power for.
    pub n_cpus: usize,
    /// Estimated client energy in joules: `min·n_cpus·wall + (max−min)·cpu`.
    pub energy_j: f64,
    /// Always true: no counter measured this.
    pub estimated: bool,
    /// The model and its coefficients.
    pub model: String,
}

fn tv_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

fn children_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    (tv_s(ru.ru_utime), tv_s(ru.ru_stime))
}

/// Runs `cmd` to completion and returns its statistics. The model estimate uses `params`.
pub fn run(mut cmd: Command, params: ModelParams) -> Result<RunStats> {
    let (u0, s0) = children_cpu();
    let t0 = Instant::now();
    let prog = format!("{:?}", cmd.get_program());
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {prog}: is it installed and on PATH?"))?;
    let wall_s = t0.elapsed().as_secs_f64();
    let (u1, s1) = children_cpu();
    use std::os::unix::process::ExitStatusExt;
    let exit_code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let n_cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (user_s, sys_s) = (u1 - u0, s1 - s0);
    Ok(RunStats {
        wall_s,
        user_s,
        sys_s,
        exit_code,
        n_cpus,
        energy_j: params.energy_j(n_cpus, wall_s, user_s + sys_s),
        estimated: true,
        model: params.name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_childs_cpu_and_exit_code() {
        // A shell loop that burns CPU for ~0.3 s, then exits 3.
        let mut c = Command::new("sh");
        c.args(["-c", "end=$(( $(date +%s%N) + 300000000 )); while [ $(date +%s%N) -lt $end ]; do :; done; exit 3"]);
        let s = run(c, ModelParams::default()).unwrap();
        assert_eq!(s.exit_code, 3);
        assert!(s.wall_s >= 0.3, "wall {}", s.wall_s);
        assert!(s.user_s + s.sys_s > 0.05, "cpu {} + {}", s.user_s, s.sys_s);
        assert!(s.estimated);
        assert!(s.model.starts_with("ccf-linear"));
        // Energy is bounded by the model's idle and full-load lines.
        let p = ModelParams::default();
        let lo = p.min_w_per_cpu * s.n_cpus as f64 * s.wall_s;
        let hi = p.max_w_per_cpu * s.n_cpus as f64 * s.wall_s;
        assert!(
            s.energy_j > lo && s.energy_j <= hi + 1e-9,
            "{} not in ({lo}, {hi}]",
            s.energy_j
        );
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let e = run(
            Command::new("/nonexistent/wattio-tool"),
            ModelParams::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot run"), "{e}");
    }
}
