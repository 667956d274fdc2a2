//! Wall time, CPU time and labelled energy figures of one child command.
//!
//! Two figures, two questions:
//!
//! * `energy_j` — the **estimated energy of a host running only this command** (a dedicated
//!   client host): the linear model the meter uses (`wattio_energy::ModelParams`) with
//!   the command's own CPU time as the host's busy time,
//!   `min W × vCPUs × wall + (max − min) W × its CPU s`. It charges every client tool by one
//!   rule whatever else the host runs (the server, the delay line, other users), which is what
//!   the published transfer comparison (`docs/results/transfer.md`) uses. It is not the
//!   command's share of a real machine's energy.
//! * `attributed_j` — the command's **share of the machine's energy** over the same window, when
//!   a meter is given: `wattio_energy::attribution::share_j` of the meter's whole-machine total
//!   (measured with RAPL, estimated with the model) by the command's CPU time, labelled
//!   `…, attributed (cpu-time share)`.
//!
//! The CPU time is the command's `wait4` rusage at exit (`attribution::cputime::wait_child`):
//! every thread and every descendant it waited for, nothing of other children of ours.

use crate::TestbedError;
use std::process::Command;
use std::time::Instant;
use wattio_energy::attribution::{self, cputime};
use wattio_energy::ModelParams;
use wattio_energy::SysRoot;
use wattio_meter::Meter;

/// What `energy_j` is, for readers of the JSON.
pub use wattio_energy::HOST_ESTIMATE_SCOPE;

// What it returns lives with the other result schemas, which the report reads through.
pub use wattio_results::RunStats;

/// Runs `cmd` to completion and returns its statistics. The dedicated-host estimate uses
/// `params`; with a `meter`, the command's attributed share of the machine's energy over the run
/// is added. Both count the CPUs online under `root` (`WATTIO_ROOT`, the meter's root).
pub fn run_with_stats(
    mut cmd: Command,
    params: ModelParams,
    meter: Option<&Meter>,
    root: &SysRoot,
) -> Result<RunStats, TestbedError> {
    let prog = format!("{:?}", cmd.get_program());
    let snap0 = meter.and_then(|m| m.snapshot().ok());
    let t0 = Instant::now();
    let child = cmd.spawn().map_err(TestbedError::io(format!(
        "cannot run {prog}: is it installed and on PATH?"
    )))?;
    let usage =
        cputime::wait_child(child).map_err(TestbedError::io(format!("waiting for {prog}")))?;
    let wall_s = t0.elapsed().as_secs_f64();
    let snap1 = meter.and_then(|m| m.snapshot().ok());
    let n_cpus = attribution::machine_cpus(root);
    let cpu_s = usage.user_s + usage.sys_s;
    let system = match (meter, snap0.as_ref(), snap1.as_ref()) {
        (Some(m), Some(a), Some(b)) => Some(m.between(a, b)),
        _ => None,
    };
    let attributed_j = system
        .as_ref()
        .map(|r| attribution::share_j(r.total_j, n_cpus, wall_s, cpu_s));
    Ok(RunStats {
        wall_s,
        user_s: usage.user_s,
        sys_s: usage.sys_s,
        exit_code: cputime::shell_code(&usage.status),
        n_cpus,
        energy_j: params.energy_j(n_cpus, wall_s, cpu_s),
        estimated: true,
        model: params.name(),
        energy_scope: HOST_ESTIMATE_SCOPE.to_string(),
        system_energy_j: system.as_ref().map(|r| r.total_j),
        attributed_j,
        attributed_label: system
            .as_ref()
            .map(|r| attribution::attributed_label(&r.provenance_label())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_energy::{Mechanism, SourceChoice};
    use wattio_meter::MeterConfig;

    fn busy_child() -> Command {
        // A shell loop that burns CPU for ~0.3 s, then exits 3.
        let mut c = Command::new("sh");
        c.args(["-c", "end=$(( $(date +%s%N) + 300000000 )); while [ $(date +%s%N) -lt $end ]; do :; done; exit 3"]);
        c
    }

    #[test]
    fn counts_the_childs_cpu_and_exit_code() {
        let s = run_with_stats(busy_child(), ModelParams::default(), None, &live()).unwrap();
        assert_eq!(s.exit_code, 3);
        assert!(s.wall_s >= 0.3, "wall {}", s.wall_s);
        assert!(s.user_s + s.sys_s > 0.05, "cpu {} + {}", s.user_s, s.sys_s);
        assert!(s.estimated);
        assert!(s.model.starts_with("ccf-linear"));
        assert!(s.energy_scope.contains("host running only this process"));
        assert!(s.attributed_j.is_none() && s.attributed_label.is_none());
        // Energy is bounded by the model's idle and full-load lines.
        let p = ModelParams::default();
        let lo = p.min_w_per_cpu() * s.n_cpus as f64 * s.wall_s;
        let hi = p.max_w_per_cpu() * s.n_cpus as f64 * s.wall_s;
        assert!(
            s.energy_j > lo && s.energy_j <= hi + 1e-9,
            "{} not in ({lo}, {hi}]",
            s.energy_j
        );
    }

    fn live() -> SysRoot {
        SysRoot::new("/")
    }

    #[test]
    fn attributed_is_the_cpu_time_share_of_the_meters_window_on_the_roots_cpus() {
        let meter = Meter::open(&MeterConfig {
            root: live(),
            choice: SourceChoice::Only(Mechanism::Model),
            domains: None,
            model: ModelParams::default(),
            platforms: Vec::new(),
        })
        .expect("the model source needs only /proc/stat");
        // A root with seven online CPUs, a count no test machine has.
        let d = tempfile::tempdir().unwrap();
        wattio_fixture::online_cpus(d.path(), 7).unwrap();
        let root = SysRoot::new(d.path());
        let s = run_with_stats(busy_child(), ModelParams::default(), Some(&meter), &root).unwrap();
        assert_eq!(s.n_cpus, 7);
        let total = s.system_energy_j.expect("a meter was given");
        let got = s.attributed_j.expect("a meter was given");
        let want = attribution::share_j(total, 7, s.wall_s, s.user_s + s.sys_s);
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        assert!(got > 0.0 && got <= total + 1e-12, "{got} of {total}");
        // Still the dedicated-host estimate next to it, on the same CPUs.
        let p = ModelParams::default();
        let host = p.energy_j(7, s.wall_s, s.user_s + s.sys_s);
        assert!((s.energy_j - host).abs() < 1e-12);
        assert_eq!(
            s.attributed_label.as_deref(),
            Some(
                format!(
                    "estimated (model: {}), attributed (cpu-time share)",
                    p.name()
                )
                .as_str()
            )
        );
    }

    #[test]
    fn old_stats_files_still_parse() {
        let old = r#"{"wall_s":1.0,"user_s":0.5,"sys_s":0.1,"exit_code":0,"n_cpus":2,
            "energy_j":3.1,"estimated":true,"model":"ccf-linear(min=0.74W,max=3.5W per vCPU)"}"#;
        let s: RunStats = serde_json::from_str(old).unwrap();
        assert!(s.attributed_j.is_none() && s.system_energy_j.is_none());
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let e = run_with_stats(
            Command::new("/nonexistent/wattio-tool"),
            ModelParams::default(),
            None,
            &live(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot run"), "{e}");
    }
}
