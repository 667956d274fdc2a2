//! How one run of the overhead study is carried out: the [`OverheadExecutor`] trait the
//! runner talks to, and [`ProcessOverheadExecutor`], which starts the real processes.

use crate::record::{RecordCommand, Recorder, RecorderStats};
use crate::{OverheadError, Workload};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wattio_energy::attribution::cputime;
use wattio_energy::SysRoot;
use wattio_progress::{Cancel, Waited};
use wattio_runner::GroupChild;

/// What one run does between the recorder's start and stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunBody<'a> {
    /// Time the workload, spawn to exit.
    Workload(&'a Workload),
    /// Sleep this long, reading the machine's busy time and C-states around it.
    Idle { window: Duration },
}

/// One run: an optional recorder, a settle pause, the body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunSpec<'a> {
    pub body: RunBody<'a>,
    /// `(mechanism, frequency)` of the recorder; `None` = off.
    pub recorder: Option<(&'a str, f64)>,
    /// Pause between the recorder sampling (or nothing, when off) and the body.
    pub settle: Duration,
}

/// Idle-run readings.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleReadings {
    /// Busy CPU-seconds of the whole machine (`/proc/stat`) over the window.
    pub busy_cpu_s: f64,
    /// "C1=0.1200;C6=0.8000" residency fractions, or "unavailable: <why>".
    pub cstates: String,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Seconds the body took (the workload's wall time, or the idle window's).
    pub elapsed_s: f64,
    /// Unix time the body started.
    pub start_unix: f64,
    /// The recorder's figures (all zero when off).
    pub recorder: RecorderStats,
    /// For an idle body.
    pub idle: Option<IdleReadings>,
}

/// Carries out runs. The runner only talks to this, so its schedule, resume and rows are
/// tested with fakes; [`ProcessOverheadExecutor`] is the real one.
pub trait OverheadExecutor {
    /// Carries out `run`. When `cancel` is set meanwhile, ends what it started and returns
    /// [`OverheadError::Cancelled`].
    fn run(&mut self, run: &RunSpec<'_>, cancel: &Cancel) -> Result<Measured, OverheadError>;

    /// vCPUs of the machine (the model charges idle power for each; its C-state residency and
    /// the recorder's share are per vCPU).
    fn n_cpus(&self) -> usize;
}

/// Starts `wattio record` (through [`RecordCommand`]) and the workloads as processes, each in
/// its own process group, and reads `/proc/stat` and cpuidle under `root`.
pub struct ProcessOverheadExecutor {
    wattio_exe: PathBuf,
    scratch: PathBuf,
    root: SysRoot,
    n_cpus: usize,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl ProcessOverheadExecutor {
    /// Runs `wattio_exe` as the recorder, which writes its rows into `scratch` (created here,
    /// removed when the executor is dropped).
    pub fn new(
        wattio_exe: PathBuf,
        scratch: PathBuf,
        root: SysRoot,
    ) -> Result<ProcessOverheadExecutor, OverheadError> {
        std::fs::create_dir_all(&scratch)?;
        Ok(ProcessOverheadExecutor {
            wattio_exe,
            scratch,
            // The CPUs whose time `/proc/stat` and cpuidle hold under `root`.
            n_cpus: wattio_energy::attribution::machine_cpus(&root),
            root,
        })
    }

    fn start_recorder(
        &self,
        mechanism: &str,
        freq_hz: f64,
        cancel: &Cancel,
    ) -> Result<Recorder, OverheadError> {
        let cmd = RecordCommand::new(mechanism, freq_hz, &self.scratch.join("recorder.csv"));
        Recorder::start(
            &self.wattio_exe,
            cmd,
            self.scratch.join("recorder.err"),
            cancel,
        )
    }

    /// Records with `mechanism` at `freq_hz` for a moment, so a mechanism that cannot record
    /// (dead counters, no permission) is found before the study starts.
    pub fn preflight(
        &self,
        mechanism: &str,
        freq_hz: f64,
        cancel: &Cancel,
    ) -> Result<(), OverheadError> {
        let rec = self.start_recorder(mechanism, freq_hz, cancel)?;
        if cancel.sleep(Duration::from_millis(200)) {
            return Err(OverheadError::Cancelled);
        }
        rec.stop().map(|_| ())
    }

    fn time_workload(&self, w: &Workload, cancel: &Cancel) -> Result<f64, OverheadError> {
        let shown = w.argv.join(" ");
        let argv0 = w.argv.first().ok_or_else(|| OverheadError::Spawn {
            cmd: w.name.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"),
        })?;
        let t0 = Instant::now();
        let mut child = GroupChild::spawn(
            Command::new(argv0)
                .args(&w.argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .map_err(|e| OverheadError::Spawn {
            cmd: shown.clone(),
            source: e,
        })?;
        if cancel.wait_exit(child.id())? == Waited::Cancelled {
            return Err(OverheadError::Cancelled);
        }
        let status = child.child_mut().wait()?;
        let elapsed = t0.elapsed().as_secs_f64();
        if !status.success() {
            return Err(OverheadError::WorkloadFailed {
                cmd: shown,
                status: status.to_string(),
            });
        }
        Ok(elapsed)
    }

    fn idle_window(
        &self,
        window: Duration,
        cancel: &Cancel,
    ) -> Result<(f64, IdleReadings), OverheadError> {
        let c0 = cstate_times(&self.root);
        let b0 = cputime::machine_busy_cpu_s(&self.root)?;
        let t0 = Instant::now();
        if cancel.sleep(window) {
            return Err(OverheadError::Cancelled);
        }
        let wall = t0.elapsed().as_secs_f64();
        let b1 = cputime::machine_busy_cpu_s(&self.root)?;
        let c1 = cstate_times(&self.root);
        let cstates = match (c0, c1) {
            (Ok(a), Ok(b)) => b
                .iter()
                .map(|(k, v)| {
                    let d = v.saturating_sub(*a.get(k).unwrap_or(&0)) as f64 * 1e-6;
                    format!("{k}={:.4}", d / (wall * self.n_cpus as f64))
                })
                .collect::<Vec<_>>()
                .join(";"),
            (Err(e), _) | (_, Err(e)) => format!("unavailable: {e}"),
        };
        Ok((
            wall,
            IdleReadings {
                busy_cpu_s: (b1 - b0).max(0.0),
                cstates,
            },
        ))
    }
}

impl Drop for ProcessOverheadExecutor {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl OverheadExecutor for ProcessOverheadExecutor {
    fn run(&mut self, run: &RunSpec<'_>, cancel: &Cancel) -> Result<Measured, OverheadError> {
        let rec = match run.recorder {
            Some((m, f)) => Some(self.start_recorder(m, f, cancel)?),
            None => None,
        };
        if cancel.sleep(run.settle) {
            return Err(OverheadError::Cancelled);
        }
        let start_unix = unix_now();
        let body = match run.body {
            RunBody::Workload(w) => self.time_workload(w, cancel).map(|e| (e, None)),
            RunBody::Idle { window } => self
                .idle_window(window, cancel)
                .map(|(wall, readings)| (wall, Some(readings))),
        };
        // A failed or cancelled body drops the recorder, which kills it; otherwise stop it
        // cleanly for its figures.
        let (elapsed_s, idle) = body?;
        let recorder = rec.map(Recorder::stop).transpose()?.unwrap_or_default();
        Ok(Measured {
            elapsed_s,
            start_unix,
            recorder,
            idle,
        })
    }

    fn n_cpus(&self) -> usize {
        self.n_cpus
    }
}

/// Cumulative residency (µs) per idle-state name summed over CPUs, from
/// `/sys/devices/system/cpu/cpu*/cpuidle/state*/{name,time}` (kernel documentation:
/// admin-guide/pm/cpuidle.rst); Err says why not.
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

/// Where a [`ProcessOverheadExecutor`] for the study in `out_dir` keeps the recorder's files.
pub fn scratch_dir(out_dir: &Path) -> PathBuf {
    out_dir.join(".scratch")
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_vcpus_are_the_online_cpus_under_the_root() {
        let d = tempfile::tempdir().unwrap();
        // Seven CPUs, a count no test machine has.
        wattio_fixture::online_cpus(&d.path().join("root"), 7).unwrap();
        let ex = ProcessOverheadExecutor::new(
            PathBuf::from("/nonexistent/wattio"),
            d.path().join("s"),
            SysRoot::new(d.path().join("root")),
        )
        .unwrap();
        assert_eq!(ex.n_cpus(), 7);
    }

    #[test]
    fn a_real_workload_is_timed_and_a_cancel_ends_it() {
        let d = tempfile::tempdir().unwrap();
        let mut ex = ProcessOverheadExecutor::new(
            PathBuf::from("/nonexistent/wattio"),
            d.path().join("s"),
            SysRoot::new("/"),
        )
        .unwrap();
        let cancel = Cancel::new().unwrap();
        let w = Workload {
            name: "sleep".into(),
            argv: vec!["sleep".into(), "0.2".into()],
        };
        let spec = RunSpec {
            body: RunBody::Workload(&w),
            recorder: None,
            settle: Duration::ZERO,
        };
        let m = ex.run(&spec, &cancel).unwrap();
        assert!(m.elapsed_s >= 0.2 && m.elapsed_s < 10.0, "{m:?}");
        assert_eq!(m.recorder, RecorderStats::default());
        let fails = Workload {
            name: "false".into(),
            argv: vec!["false".into()],
        };
        let e = ex
            .run(
                &RunSpec {
                    body: RunBody::Workload(&fails),
                    ..spec
                },
                &cancel,
            )
            .unwrap_err();
        assert!(matches!(e, OverheadError::WorkloadFailed { .. }), "{e}");
        // A recorder that cannot start is an error naming the executable.
        let e = ex
            .run(
                &RunSpec {
                    recorder: Some(("model", 10.0)),
                    ..spec
                },
                &cancel,
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/wattio"), "{e}");
        let long = Workload {
            name: "sleep".into(),
            argv: vec!["sleep".into(), "30".into()],
        };
        cancel.set();
        let t0 = Instant::now();
        let e = ex
            .run(
                &RunSpec {
                    body: RunBody::Workload(&long),
                    ..spec
                },
                &cancel,
            )
            .unwrap_err();
        assert!(matches!(e, OverheadError::Cancelled));
        assert!(t0.elapsed() < Duration::from_secs(10));
        drop(ex);
        assert!(!d.path().join("s").exists(), "scratch removed");
    }
}
