//! Measuring a command: read right before the spawn, right after the exit, poll in between.
//!
//! RAPL counters are machine-wide (the perf `power` PMU refuses per-task events), so the energy
//! reported is the whole machine's during the command, as with `perf stat -a -e power/...`.

use crate::meter::{EnergyReport, Meter};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when it was killed.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// The shell convention: the code, or 128 + signal.
    pub fn shell_code(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            _ => 1,
        }
    }

    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// One measured run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub energy: EnergyReport,
    pub mean_power_w: f64,
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signal: Option<i32>,
    /// User + system CPU seconds of the command and its waited-for descendants (`wait4`).
    pub child_cpu_s: f64,
    /// Model mechanism only: the share of the estimate attributable to the command itself,
    /// its CPU time at the model's busy power per vCPU (`child_cpu_s × W_max`). Estimated.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub command_estimated_j: Option<f64>,
}

/// Errors of `measure`.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("no command given: put it after `--`, e.g. `wattio measure -- sleep 1`")]
    NoCommand,
    #[error("cannot run {cmd:?}: {err}; check the command name and PATH")]
    Spawn { cmd: String, err: std::io::Error },
    #[error("waiting for the command failed: {0}")]
    Wait(std::io::Error),
    #[error("reading energy: {0}")]
    Energy(#[from] wattio_energy::EnergyError),
}

/// Runs `argv` once under `meter`.
pub fn measure_once(meter: &Meter, argv: &[OsString]) -> Result<RunReport, MeasureError> {
    let (prog, args) = argv.split_first().ok_or(MeasureError::NoCommand)?;
    let mut cmd = Command::new(prog);
    cmd.args(args);
    let before = meter.snapshot()?;
    let child = cmd.spawn().map_err(|e| MeasureError::Spawn {
        cmd: prog.to_string_lossy().into_owned(),
        err: e,
    })?;
    let (status, rusage) = wait4(child.id() as libc::pid_t).map_err(MeasureError::Wait)?;
    let after = meter.snapshot()?;
    let energy = meter.between(&before, &after);
    let exit = ExitInfo {
        code: status.code(),
        signal: status.signal(),
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let child_cpu_s = tv(rusage.ru_utime) + tv(rusage.ru_stime);
    Ok(RunReport {
        command_estimated_j: meter.model_params().map(|m| m.max_w_per_cpu * child_cpu_s),
        mean_power_w: energy.mean_power_w(),
        energy,
        exit_code: exit.shell_code(),
        signal: exit.signal,
        child_cpu_s,
    })
}

/// `wait4` on one child: its status and resource usage (CPU time of it and its waited-for
/// descendants), retrying on EINTR.
fn wait4(pid: libc::pid_t) -> std::io::Result<(std::process::ExitStatus, libc::rusage)> {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our child; pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((std::process::ExitStatus::from_raw(status), ru));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Summary of repeated runs: median and interquartile range of each measure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub iqr: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Median and quartiles of `xs` (linear interpolation between order statistics, R type 7).
    pub fn of(xs: &[f64]) -> Spread {
        let q = |p: f64| wattio_stats::quantile(xs, p).unwrap_or(f64::NAN);
        let (q1, q3) = (q(0.25), q(0.75));
        Spread {
            median: q(0.5),
            q1,
            q3,
            iqr: q3 - q1,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Summary of `runs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepeatSummary {
    pub runs: usize,
    pub duration_s: Spread,
    pub total_j: Spread,
    pub mean_power_w: Spread,
}

impl RepeatSummary {
    pub fn of(runs: &[RunReport]) -> RepeatSummary {
        let col = |f: &dyn Fn(&RunReport) -> f64| runs.iter().map(f).collect::<Vec<_>>();
        RepeatSummary {
            runs: runs.len(),
            duration_s: Spread::of(&col(&|r| r.energy.duration_s)),
            total_j: Spread::of(&col(&|r| r.energy.total_j)),
            mean_power_w: Spread::of(&col(&|r| r.mean_power_w)),
        }
    }
}
