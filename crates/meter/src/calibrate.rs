//! `wattio calibrate`: measure a model's curve against RAPL.
//!
//! On a machine with a RAPL mechanism (perf, powercap or MSR), a [`LoadDriver`] holds every CPU
//! at a series of load levels; at each level the package energy the counter measured and the
//! utilisation `/proc/stat` measured give one point `(utilisation, watts per vCPU)`. The curve
//! through those points ([`fit_curve`]) is the calibrated model; each interior level is also
//! predicted by the curve fitted *without* it, and those held-out errors say how well the curve
//! interpolates. The result is a [`ModelFile`] that `--model FILE` uses on VMs of the same type.
//!
//! Without a RAPL counter calibration is refused: fitting the model against the model would
//! prove nothing.

use crate::meter::Meter;
use std::io;
use std::time::{Duration, Instant};
use wattio_energy::attribution::cputime;
use wattio_energy::{
    cpu_id, online_cpu_count, open_source, Domain, EnergyError, Mechanism, ModelParams,
    SourceChoice, SysRoot,
};
use wattio_energy::{FitSummary, LevelResult, ModelFile, MODEL_FILE_FORMAT};
use wattio_progress::{Cancel, Sink, Waited};

/// Something that holds every CPU at a load for a while.
pub trait LoadDriver {
    /// Its name, recorded in the model file.
    fn name(&self) -> String;
    /// Keeps every CPU busy for the fraction `load` (0…1) of `duration`, then returns; returns
    /// early, with the CPUs released, once `cancel` is set.
    fn run(&mut self, load: f64, duration: Duration, cancel: &Cancel) -> io::Result<()>;
}

/// How long a spinner runs between two looks at the cancel flag.
const SPIN_SLICE: Duration = Duration::from_millis(100);

/// wattio's own spinner ([`crate::spin_cpu`]) on one thread per CPU.
pub struct SpinDriver {
    pub n_cpus: usize,
}

impl LoadDriver for SpinDriver {
    fn name(&self) -> String {
        format!("spin ({} threads, 10 ms duty cycle)", self.n_cpus)
    }

    fn run(&mut self, load: f64, duration: Duration, cancel: &Cancel) -> io::Result<()> {
        if load <= 0.0 {
            cancel.sleep(duration);
            return Ok(());
        }
        let end = Instant::now() + duration;
        // Spins in slices of whole 10 ms duty cycles, so a cancel releases the CPUs within one.
        let spin = || loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || cancel.is_set() {
                break;
            }
            crate::workload::spin_cpu(load, Duration::from_millis(10), left.min(SPIN_SLICE));
        };
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..self.n_cpus.max(1)).map(|_| scope.spawn(spin)).collect();
            for t in threads {
                t.join()
                    .map_err(|_| io::Error::other("a spinner thread panicked"))?;
            }
            Ok(())
        })
    }
}

/// `stress-ng --cpu N --cpu-load P` (its own duty-cycle load), when installed.
pub struct StressNgDriver {
    pub n_cpus: usize,
}

impl StressNgDriver {
    /// Whether `stress-ng` is on the PATH.
    pub fn available() -> bool {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("stress-ng").is_file()))
            .unwrap_or(false)
    }
}

/// Which driver loads the CPUs (`wattio calibrate --driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DriverChoice {
    /// stress-ng when installed, else the spinner.
    Auto,
    /// wattio's own spinner ([`SpinDriver`]).
    Spin,
    /// stress-ng ([`StressNgDriver`]); an error when it is not installed.
    StressNg,
}

impl DriverChoice {
    /// The driver this choice names, on `n_cpus` threads.
    pub fn open(self, n_cpus: usize) -> Result<Box<dyn LoadDriver>, CalibrateError> {
        Ok(match self {
            DriverChoice::Spin => Box::new(SpinDriver { n_cpus }),
            DriverChoice::StressNg if !StressNgDriver::available() => {
                return Err(CalibrateError::NoStressNg)
            }
            DriverChoice::StressNg => Box::new(StressNgDriver { n_cpus }),
            DriverChoice::Auto if StressNgDriver::available() => {
                Box::new(StressNgDriver { n_cpus })
            }
            DriverChoice::Auto => Box::new(SpinDriver { n_cpus }),
        })
    }
}

impl LoadDriver for StressNgDriver {
    fn name(&self) -> String {
        format!("stress-ng --cpu {} --cpu-load", self.n_cpus)
    }

    fn run(&mut self, load: f64, duration: Duration, cancel: &Cancel) -> io::Result<()> {
        if load <= 0.0 {
            cancel.sleep(duration);
            return Ok(());
        }
        // stress-ng takes whole seconds; the level's wall time is measured, not assumed.
        let secs = duration.as_secs_f64().ceil().max(1.0) as u64;
        let mut child = std::process::Command::new("stress-ng")
            .args([
                "--cpu",
                &self.n_cpus.to_string(),
                "--cpu-load",
                &format!("{}", (load * 100.0).round() as u32),
                "--timeout",
                &format!("{secs}s"),
                "--quiet",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()?;
        if cancel.wait_exit(child.id())? == Waited::Cancelled {
            // SIGTERM, which stress-ng handles by stopping its workers (SIGKILL would leave
            // them spinning).
            // SAFETY: kill(2) on our own un-reaped child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        let status = child.wait()?;
        // Ended by the cancel (or by the same Ctrl-C, which reaches its process group too).
        if status.success() || cancel.is_set() {
            Ok(())
        } else {
            Err(io::Error::other(format!("stress-ng ended with {status}")))
        }
    }
}

/// What to calibrate and how.
#[derive(Debug, Clone)]
pub struct CalibrateConfig {
    pub root: SysRoot,
    /// `Auto` (perf, powercap, MSR in turn) or one of them; never the model.
    pub choice: SourceChoice,
    /// Load levels, each 0…1; at least three distinct ones (two to fit, one to hold out).
    pub levels: Vec<f64>,
    /// How long each level is measured.
    pub duration: Duration,
    /// How long each level runs before it is measured (power settles).
    pub settle: Duration,
}

/// Why a calibration could not be made; each is one line naming the fix.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error("--driver stress-ng: stress-ng is not on the PATH; install it (apt-get install stress-ng) or use --driver spin")]
    NoStressNg,
    #[error("calibrate needs a RAPL energy counter (perf, powercap or msr) and none is usable here ({0}); calibrating a model against the model would prove nothing: run it on a machine of the same type that exposes RAPL (`wattio probe` says what is missing)")]
    NoRapl(String),
    #[error("{0}")]
    Config(String),
    #[error("the RAPL counter did not advance during the level at load {0}: it is not measuring; check `wattio probe` on this machine")]
    Dead(f64),
    #[error(transparent)]
    Energy(#[from] EnergyError),
    #[error("load driver {driver}: {source}; try --driver spin")]
    Driver {
        driver: String,
        #[source]
        source: io::Error,
    },
    #[error("reading /proc/stat: {0}; check WATTIO_ROOT")]
    Stat(io::Error),
    /// The cancel flag was set: no curve, since one needs every level.
    #[error("interrupted after {measured} of {total} levels; no curve was fitted (it needs every level)")]
    Cancelled { measured: usize, total: usize },
}

impl CalibrateConfig {
    /// Checks the levels and durations (one line saying what is wrong).
    pub fn check(&self) -> Result<(), CalibrateError> {
        if self.choice == SourceChoice::Only(Mechanism::Model) {
            return Err(CalibrateError::NoRapl(
                "--source model was asked for".into(),
            ));
        }
        if self
            .levels
            .iter()
            .any(|l| !(l.is_finite() && (0.0..=1.0).contains(l)))
        {
            return Err(CalibrateError::Config(format!(
                "--levels must be loads between 0 and 1 (got {:?}); e.g. --levels 0,0.1,0.25,0.5,0.75,1",
                self.levels
            )));
        }
        let mut distinct = self.levels.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        if distinct.len() < 3 {
            return Err(CalibrateError::Config(
                "--levels needs at least three distinct loads (two to fit a curve, one to check it on); e.g. --levels 0,0.1,0.25,0.5,0.75,1".into(),
            ));
        }
        if self.duration.is_zero() {
            return Err(CalibrateError::Config(
                "--duration must be more than 0, e.g. 10s".into(),
            ));
        }
        Ok(())
    }
}

/// Opens the package counters of the first usable RAPL mechanism, or says why there is none.
pub fn open_rapl(root: &SysRoot, choice: SourceChoice) -> Result<Meter, CalibrateError> {
    let candidates: Vec<Mechanism> = match choice {
        SourceChoice::Only(Mechanism::Model) => {
            return Err(CalibrateError::NoRapl(
                "--source model was asked for".into(),
            ))
        }
        SourceChoice::Only(m) => vec![m],
        SourceChoice::Auto => vec![Mechanism::Perf, Mechanism::Powercap, Mechanism::Msr],
    };
    let mut why = Vec::new();
    for m in candidates {
        match open_source(
            root,
            SourceChoice::Only(m),
            Some(&[Domain::Package]),
            ModelParams::default(),
        ) {
            Ok((src, _)) if !src.provenance().estimated => {
                return Ok(Meter::from_source(src, why, None)?);
            }
            Ok(_) => why.push(format!("{m}: not a hardware counter")),
            Err(e) => why.push(format!("{m}: {e}")),
        }
    }
    Err(CalibrateError::NoRapl(why.join("; ")))
}

/// Runs the calibration: every level through `driver`, measured by RAPL, fitted and checked.
/// Each level measured is told to `progress`. Once `cancel` is set the level under way stops
/// and [`CalibrateError::Cancelled`] says how many were measured.
pub fn calibrate(
    cfg: &CalibrateConfig,
    driver: &mut dyn LoadDriver,
    progress: &Sink<LevelResult>,
    cancel: &Cancel,
) -> Result<ModelFile, CalibrateError> {
    cfg.check()?;
    let meter = open_rapl(&cfg.root, cfg.choice)?;
    let n_cpus = online_cpu_count(&cfg.root)?;
    let cpu_name = cpu_id(&cfg.root)
        .map(|id| id.model_name)
        .unwrap_or_else(|_| "unknown".into());
    let mut levels = Vec::new();
    let cancelled = |measured: usize| CalibrateError::Cancelled {
        measured,
        total: cfg.levels.len(),
    };
    for &load in &cfg.levels {
        let run = |driver: &mut dyn LoadDriver, duration: Duration| {
            driver
                .run(load, duration, cancel)
                .map_err(|source| CalibrateError::Driver {
                    driver: driver.name(),
                    source,
                })
        };
        if !cfg.settle.is_zero() {
            run(driver, cfg.settle)?;
        }
        if cancel.is_set() {
            return Err(cancelled(levels.len()));
        }
        let busy0 = cputime::machine_busy_cpu_s(&cfg.root).map_err(CalibrateError::Stat)?;
        let a = meter.snapshot()?;
        let t0 = Instant::now();
        run(driver, cfg.duration)?;
        if cancel.is_set() {
            return Err(cancelled(levels.len()));
        }
        let b = meter.snapshot()?;
        let wall = t0.elapsed().as_secs_f64();
        let busy1 = cputime::machine_busy_cpu_s(&cfg.root).map_err(CalibrateError::Stat)?;
        let report = meter.between(&a, &b);
        if report.total_j <= 0.0 {
            return Err(CalibrateError::Dead(load));
        }
        let cap = n_cpus as f64 * wall;
        let level = LevelResult {
            load,
            utilisation: ((busy1 - busy0) / cap).clamp(0.0, 1.0),
            watts_per_vcpu: report.total_j / cap,
            holdout_predicted_w: None,
            holdout_error_pct: None,
        };
        progress.tell(&level);
        levels.push(level);
    }
    let measured: Vec<(f64, f64)> = levels
        .iter()
        .map(|l| (l.utilisation, l.watts_per_vcpu))
        .collect();
    let points = fit_curve(&measured).ok_or_else(|| {
        CalibrateError::Config(
            "the measured utilisations do not spread over at least two distinct levels: the load driver did not load the CPUs; try --driver spin or a longer --duration".into(),
        )
    })?;
    let errors = holdout(&measured);
    for (l, e) in levels.iter_mut().zip(&errors) {
        if let Some(pred) = e {
            l.holdout_predicted_w = Some(*pred);
            l.holdout_error_pct = Some((pred - l.watts_per_vcpu) / l.watts_per_vcpu * 100.0);
        }
    }
    let abs: Vec<f64> = levels
        .iter()
        .filter_map(|l| l.holdout_error_pct.map(f64::abs))
        .collect();
    let fit = FitSummary {
        holdout_mean_abs_error_pct: (!abs.is_empty())
            .then(|| abs.iter().sum::<f64>() / abs.len() as f64),
        holdout_max_abs_error_pct: abs.iter().cloned().reduce(f64::max),
        levels,
        seconds_per_level: cfg.duration.as_secs_f64(),
        driver: driver.name(),
    };
    Ok(ModelFile {
        format: MODEL_FILE_FORMAT.into(),
        cpu: cpu_name,
        vcpus: n_cpus,
        measured_with: meter.provenance().mechanism.to_string(),
        points,
        fit: Some(fit),
    })
}

/// Utilisations closer than this are one level (and snap to 0 or 1 at the ends).
const MERGE: f64 = 0.02;

/// The curve through measured `(utilisation, watts per vCPU)` points: sorted, points closer
/// than 0.02 in utilisation averaged, watts made non-decreasing (a later point below an earlier
/// one is raised to it: measurement noise, not physics), and extended to utilisation 0 and 1
/// along the end segments (never below 0 W). `None` with fewer than two distinct utilisations.
pub(crate) fn fit_curve(measured: &[(f64, f64)]) -> Option<Vec<(f64, f64)>> {
    let mut pts: Vec<(f64, f64)> = measured
        .iter()
        .filter(|(u, w)| u.is_finite() && w.is_finite())
        .cloned()
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64, usize)> = Vec::new();
    for (u, w) in pts {
        match merged.last_mut() {
            Some((mu, mw, n)) if u - *mu / *n as f64 <= MERGE => {
                *mu += u;
                *mw += w;
                *n += 1;
            }
            _ => merged.push((u, w, 1)),
        }
    }
    let mut pts: Vec<(f64, f64)> = merged
        .into_iter()
        .map(|(u, w, n)| (u / n as f64, w / n as f64))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    for i in 1..pts.len() {
        pts[i].1 = pts[i].1.max(pts[i - 1].1);
    }
    let slope = |a: (f64, f64), b: (f64, f64)| (b.1 - a.1) / (b.0 - a.0);
    if pts[0].0 <= MERGE {
        pts[0].0 = 0.0;
    } else {
        let w0 = pts[0].1 - slope(pts[0], pts[1]) * pts[0].0;
        pts.insert(0, (0.0, w0.clamp(0.0, pts[0].1)));
    }
    let n = pts.len();
    if pts[n - 1].0 >= 1.0 - MERGE {
        pts[n - 1].0 = 1.0;
    } else {
        let w1 = pts[n - 1].1 + slope(pts[n - 2], pts[n - 1]) * (1.0 - pts[n - 1].0);
        pts.push((1.0, w1.max(pts[n - 1].1)));
    }
    Some(pts)
}

/// For each measured point: what the curve fitted on the others predicts for it, for interior
/// points only (the lowest and highest utilisation are the curve's ends, not interpolations).
pub(crate) fn holdout(measured: &[(f64, f64)]) -> Vec<Option<f64>> {
    let lo = measured.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = measured
        .iter()
        .map(|p| p.0)
        .fold(f64::NEG_INFINITY, f64::max);
    measured
        .iter()
        .enumerate()
        .map(|(i, &(u, _))| {
            if u - lo <= MERGE || hi - u <= MERGE {
                return None;
            }
            let rest: Vec<(f64, f64)> = measured
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| *p)
                .collect();
            let points = fit_curve(&rest)?;
            let m = ModelParams {
                name: String::new(),
                points,
                notes: vec![],
            };
            Some(m.watts_per_cpu(u))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_through_points_extends_to_the_ends() {
        // Idle measured at 1 % busy snaps to 0; the top at 90 % is extended along its segment.
        let c = fit_curve(&[(0.01, 2.0), (0.5, 6.0), (0.9, 8.0)]).unwrap();
        assert_eq!(c[0], (0.0, 2.0));
        assert_eq!(c[1], (0.5, 6.0));
        assert_eq!(c[2], (0.9, 8.0));
        assert!(
            (c[3].0 - 1.0).abs() < 1e-12 && (c[3].1 - 8.5).abs() < 1e-9,
            "{c:?}"
        );
        // Noise that dips is raised; close points merge.
        let c = fit_curve(&[(0.0, 2.0), (0.3, 5.0), (0.31, 4.0), (1.0, 4.0)]).unwrap();
        assert_eq!(c.len(), 3);
        assert!((c[1].0 - 0.305).abs() < 1e-12 && (c[1].1 - 4.5).abs() < 1e-12);
        assert_eq!(c[2], (1.0, 4.5));
        // Extrapolating down never goes below 0 W.
        let c = fit_curve(&[(0.5, 1.0), (1.0, 10.0)]).unwrap();
        assert_eq!(c[0], (0.0, 0.0));
        assert!(fit_curve(&[(0.5, 1.0)]).is_none());
        assert!(fit_curve(&[(0.5, 1.0), (0.51, 1.0)]).is_none());
    }

    #[test]
    fn holdout_predicts_interior_points_from_the_others() {
        // A straight line is predicted exactly; the ends are not held out.
        let line: Vec<(f64, f64)> = [0.0, 0.25, 0.5, 1.0]
            .iter()
            .map(|&u| (u, 1.0 + 4.0 * u))
            .collect();
        let h = holdout(&line);
        assert_eq!(h[0], None);
        assert_eq!(h[3], None);
        assert!((h[1].unwrap() - 2.0).abs() < 1e-12);
        assert!((h[2].unwrap() - 3.0).abs() < 1e-12);
    }

    #[test]
    fn the_spin_driver_releases_the_cpus_soon_after_a_cancel() {
        let cancel = std::sync::Arc::new(Cancel::new().unwrap());
        let c = std::sync::Arc::clone(&cancel);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c.set();
        });
        let t0 = Instant::now();
        let mut spin = SpinDriver { n_cpus: 1 };
        spin.run(0.5, Duration::from_secs(30), &cancel).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        // An idle level (load 0) sleeps on the flag: set already, it returns at once.
        let t0 = Instant::now();
        spin.run(0.0, Duration::from_secs(30), &cancel).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        setter.join().unwrap();
    }

    #[test]
    fn bad_configs_are_refused_in_one_line() {
        let cfg = |levels: Vec<f64>, choice| CalibrateConfig {
            root: SysRoot::new("/nonexistent"),
            choice,
            levels,
            duration: Duration::from_secs(1),
            settle: Duration::ZERO,
        };
        let e = cfg(vec![0.0, 1.0], SourceChoice::Auto).check().unwrap_err();
        assert!(e.to_string().contains("three distinct"), "{e}");
        let e = cfg(vec![0.0, 0.5, 1.5], SourceChoice::Auto)
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("between 0 and 1"), "{e}");
        let e = cfg(vec![0.0, 0.5, 1.0], SourceChoice::Only(Mechanism::Model))
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("needs a RAPL"), "{e}");
        assert!(!e.to_string().contains('\n'));
        let zero = CalibrateConfig {
            duration: Duration::ZERO,
            ..cfg(vec![0.0, 0.5, 1.0], SourceChoice::Auto)
        };
        let e = zero.check().unwrap_err();
        assert!(
            e.to_string().contains("--duration must be more than 0"),
            "{e}"
        );
    }
}
