//! A labelled CPU power model for machines without energy counters (cloud VMs, these CI hosts).

use crate::cpu;
use crate::error::EnergyError;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance, Wrap};
use crate::Source;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

/// Cloud Carbon Footprint's AWS average idle power per vCPU (`MIN_WATTS_AVG`).
pub const CCF_MIN_W: f64 = 0.74;
/// Cloud Carbon Footprint's AWS average full-load power per vCPU (`MAX_WATTS_AVG`).
pub const CCF_MAX_W: f64 = 3.5;

/// What the estimate of [`ModelParams::energy_j`] over one process's CPU time is, for readers of
/// JSON outputs (`wattio transfer --json`, `wattio testbed exec --stats`).
pub const HOST_ESTIMATE_SCOPE: &str = "estimated energy of a host running only this process: model(min W x vCPUs x wall + (max-min) W x its CPU s)";

/// A power model: watts per vCPU as a piecewise-linear function of utilisation.
///
/// `points` are `(utilisation, watts per vCPU)` with utilisation strictly increasing from 0 to 1;
/// `ccf-linear` is the two-point curve `(0, min), (1, max)`, `tdp-curve` the four Teads points
/// ([`crate::model_for_machine`]), a calibrated model whatever `wattio calibrate` measured.
///
/// A labelled CPU power model for machines without energy counters (cloud VMs, these CI hosts).
///
/// **Every figure this module produces is an estimate**, and its [`Provenance`] says so and names
/// the model with its coefficients.
///
/// A model is a curve of watts per vCPU against utilisation, piecewise linear between points
/// ([`ModelParams`]):
///
/// ```text
/// P(u) = n_cpu · W(u)          u = busy time / (n_cpu · wall time) over the window
/// E    = n_cpu · Δt · W(u)
/// ```
///
/// with busy time the CPU-seconds spent in user, nice, system, irq and softirq from `/proc/stat`
/// (not steal, which is time the hypervisor gave to someone else). Four curves exist:
///
/// * `ccf-linear` — the linear per-vCPU model of the Cloud Carbon Footprint methodology
///   (<https://www.cloudcarbonfootprint.org/docs/methodology>, npm `@cloud-carbon-footprint/core`
///   `src/compute/ComputeEstimator.ts`): two points, `W_min = 0.74 W` and `W_max = 3.5 W` per
///   vCPU by default (CCF's AWS averages over all microarchitectures, `MIN_WATTS_AVG` and
///   `MAX_WATTS_AVG` in npm `@cloud-carbon-footprint/aws` 0.15.0), overridable. Then
///   `E = W_min · n_cpu · Δt + (W_max − W_min) · Δbusy`.
/// * `ccf-linear(arch=…)` — the same line with CCF's coefficients for this CPU's
///   microarchitecture, recognised from CPUID family/model/stepping even where the VM masks the
///   name ([`ModelChoice::CcfArch`]); the default where tdp-curve cannot be had.
/// * `tdp-curve` — the machine's own CPU looked up in a TDP dataset and the Teads load curve
///   ([`crate::model_for_machine`]); the meter's default where the CPU and its thread count are known.
/// * `calibrated` — a curve measured against RAPL by `wattio calibrate` and read from a file
///   ([`crate::ModelFile`]).
///
/// How far off such models can be: Kepler's bare-metal study (kepler #2466) found OS-metric
/// models reach R² ≈ 0.96 on stress-ng but R² ≈ 0.30, with a +3…+15 W idle bias, on live
/// workloads.
///
/// `/proc/stat` counts 10 ms ticks (USER_HZ 100), so an estimate over a window of a few
/// milliseconds is quantised; the cumulative total is not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// The model's name with its coefficients, printed wherever an estimate appears.
    pub name: String,
    /// `(utilisation 0…1, watts per vCPU)`, utilisation strictly increasing, first 0, last 1.
    pub points: Vec<(f64, f64)>,
    /// How this model was chosen (e.g. why the default fell back to ccf-linear), for `probe`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Default for ModelParams {
    /// Cloud Carbon Footprint's AWS averages (`MIN_WATTS_AVG 0.74`, `MAX_WATTS_AVG 3.5`): the
    /// model of callers that ask for ccf-linear explicitly. The meter's default model is chosen
    /// per machine by [`crate::model_for_machine`].
    fn default() -> Self {
        ModelParams::ccf_linear(CCF_MIN_W, CCF_MAX_W)
    }
}

impl ModelParams {
    /// The linear CCF model with `min_w` idle and `max_w` busy watts per vCPU.
    pub fn ccf_linear(min_w: f64, max_w: f64) -> Self {
        ModelParams {
            name: format!("ccf-linear(min={min_w}W,max={max_w}W per vCPU)"),
            points: vec![(0.0, min_w), (1.0, max_w)],
            notes: Vec::new(),
        }
    }

    /// Checks the curve makes a model: at least two points, all finite, watts ≥ 0 and never
    /// decreasing, utilisation strictly increasing from 0 to 1.
    pub fn validate(&self) -> Result<(), EnergyError> {
        let pts = &self.points;
        let finite = pts.iter().all(|(u, w)| u.is_finite() && w.is_finite());
        let problem = if pts.len() < 2 {
            Some("it needs at least two points (utilisation 0 and 1)".to_string())
        } else if !finite {
            Some("every utilisation and watt figure must be a finite number".into())
        } else if pts[0].0 != 0.0 || pts[pts.len() - 1].0 != 1.0 {
            Some("the first point must be at utilisation 0 and the last at 1".into())
        } else if pts.windows(2).any(|w| w[1].0 <= w[0].0) {
            Some("utilisation must increase strictly from point to point".into())
        } else if pts[0].1 < 0.0 || pts.windows(2).any(|w| w[1].1 < w[0].1) {
            Some("watts must be ≥ 0 and must not fall as utilisation rises (max ≥ min)".into())
        } else {
            None
        };
        match problem {
            None => Ok(()),
            Some(p) => Err(EnergyError::Invalid(format!(
                "model {} is not a model: {p}; fix the coefficients or the model file",
                self.name
            ))),
        }
    }

    /// The model's name with its coefficients, as printed wherever an estimate appears.
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// Watts per vCPU when idle (the curve at utilisation 0).
    pub fn min_w_per_cpu(&self) -> f64 {
        self.points.first().map_or(0.0, |p| p.1)
    }

    /// Watts per vCPU at full load (the curve at utilisation 1).
    pub fn max_w_per_cpu(&self) -> f64 {
        self.points.last().map_or(0.0, |p| p.1)
    }

    /// Watts per vCPU at utilisation `u` (0…1), interpolated linearly between points.
    pub fn watts_per_cpu(&self, u: f64) -> f64 {
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let k = self.segment(u);
        let ((u0, w0), (u1, w1)) = (self.points[k], self.points[k + 1]);
        w0 + (w1 - w0) * (u - u0) / (u1 - u0)
    }

    /// The segment (index of its first point) holding utilisation `u`.
    fn segment(&self, u: f64) -> usize {
        let last = self.points.len().saturating_sub(2);
        (0..last)
            .find(|&k| u < self.points[k + 1].0)
            .unwrap_or(last)
    }

    /// Estimated joules for `n_cpus` over `wall_s` seconds of which `busy_cpu_s` CPU-seconds were
    /// busy: `n · Δt · P(u)` with the window's utilisation `u = busy / (n · Δt)`.
    ///
    /// With a curve that is not a straight line the utilisation *of the window* matters, so a
    /// caller should estimate each window on its own, not a long one at its mean. Busy time
    /// beyond `n · Δt` (10 ms tick quantisation) is charged at the last segment's slope, which
    /// for ccf-linear is exactly `W_min · n · Δt + (W_max − W_min) · busy`.
    pub fn energy_j(&self, n_cpus: usize, wall_s: f64, busy_cpu_s: f64) -> f64 {
        if self.points.len() < 2 {
            return 0.0;
        }
        let cap = n_cpus as f64 * wall_s;
        let u = if cap > 0.0 {
            busy_cpu_s / cap
        } else {
            f64::INFINITY
        };
        let k = self.segment(u.min(1.0));
        let ((u0, w0), (u1, w1)) = (self.points[k], self.points[k + 1]);
        let slope = (w1 - w0) / (u1 - u0);
        // n·Δt·(w0 + slope·(u − u0)), written so the two-point curve gives the CCF formula.
        w0 * n_cpus as f64 * wall_s + slope * (busy_cpu_s - u0 * cap)
    }

    /// The provenance label of this model's figures.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            mechanism: Mechanism::Model,
            estimated: true,
            model: Some(self.name()),
        }
    }
}

/// Busy CPU ticks per CPU parsed from `/proc/stat`.
fn parse_proc_stat(text: &str) -> Option<BTreeMap<u32, u64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let (id, counters) = rest.split_once(|c: char| c.is_ascii_whitespace())?;
        let Ok(cpu) = id.parse::<u32>() else { continue }; // the aggregate "cpu" line
        out.insert(cpu, crate::attribution::cputime::busy_ticks(counters)?);
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

/// Estimates package energy per socket from `/proc/stat` with [`ModelParams`].
///
/// Each counter is a cumulative estimate in nanojoules (wrapping at 2^64, i.e. never).
pub struct ModelSource {
    params: ModelParams,
    provenance: Provenance,
    specs: Vec<CounterSpec>,
    stat_path: PathBuf,
    stat: File,
    buf: Vec<u8>,
    /// CPUs of each socket, in spec order.
    sockets: Vec<Vec<u32>>,
    tick_s: f64,
    last: Option<(Instant, Vec<u64>)>,
    totals_nj: Vec<f64>,
    /// Busy CPU-seconds counted in ticks but not yet attributed, per socket (see `read_raw`).
    pending_busy_s: Vec<f64>,
}

impl ModelSource {
    /// Opens `/proc/stat` under `root` and groups CPUs by package.
    pub fn open(root: &SysRoot, params: ModelParams) -> Result<Self, EnergyError> {
        params.validate()?;
        let packages = cpu::packages(root)?;
        let stat_path = root.path("/proc/stat");
        let stat = File::open(&stat_path)
            .map_err(|e| EnergyError::from_io(&stat_path, e, "is /proc mounted?"))?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let provenance = params.provenance();
        let specs = packages
            .iter()
            .map(|(&socket, cpus)| CounterSpec {
                socket,
                domain: Domain::Package,
                unit_j: 1e-9,
                wrap: Wrap::AtMax(u64::MAX),
                origin: format!(
                    "{} cpus {:?} × {}",
                    stat_path.display(),
                    cpus,
                    params.name()
                ),
            })
            .collect();
        let mut src = ModelSource {
            params,
            provenance,
            specs,
            stat_path,
            stat,
            buf: vec![0; 64 * 1024],
            sockets: packages.into_values().collect(),
            tick_s: if hz > 0 { 1.0 / hz as f64 } else { 0.01 },
            last: None,
            totals_nj: Vec::new(),
            pending_busy_s: Vec::new(),
        };
        src.totals_nj = vec![0.0; src.specs.len()];
        src.pending_busy_s = vec![0.0; src.specs.len()];
        let mut probe = vec![0; src.specs.len()];
        src.read_raw(&mut probe)?;
        Ok(src)
    }

    /// The model's coefficients.
    pub fn params(&self) -> &ModelParams {
        &self.params
    }

    fn busy_ticks(&mut self) -> Result<Vec<u64>, EnergyError> {
        let mut len = 0;
        loop {
            let n = self
                .stat
                .read_at(&mut self.buf[len..], len as u64)
                .map_err(|e| EnergyError::from_io(&self.stat_path, e, "is /proc mounted?"))?;
            if n == 0 {
                break;
            }
            len += n;
            if len == self.buf.len() {
                self.buf.resize(len * 2, 0);
            }
        }
        let text = String::from_utf8_lossy(&self.buf[..len]);
        let per_cpu = parse_proc_stat(&text).ok_or_else(|| EnergyError::Malformed {
            path: self.stat_path.clone(),
            content: text.lines().next().unwrap_or("").to_string(),
            expected: "cpuN lines with at least 7 tick counters".into(),
            fix: "check WATTIO_ROOT".into(),
        })?;
        Ok(self
            .sockets
            .iter()
            .map(|cpus| cpus.iter().filter_map(|c| per_cpu.get(c)).sum())
            .collect())
    }
}

impl Source for ModelSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        let now = Instant::now();
        let busy = self.busy_ticks()?;
        if let Some((then, prev)) = &self.last {
            let wall = now.duration_since(*then).as_secs_f64();
            for (i, cpus) in self.sockets.iter().enumerate() {
                // Ticks arrive in 10 ms lumps: a 1 ms window can see 20 ms of busy time. No more
                // than n_cpu × wall busy seconds are attributed to a window; the rest carries to
                // the next, so the total is kept and no window exceeds the model's maximum power.
                let available =
                    self.pending_busy_s[i] + busy[i].saturating_sub(prev[i]) as f64 * self.tick_s;
                let used = available.min(cpus.len() as f64 * wall);
                self.pending_busy_s[i] = available - used;
                self.totals_nj[i] += self.params.energy_j(cpus.len(), wall, used) * 1e9;
            }
        }
        for (o, t) in out.iter_mut().zip(&self.totals_nj) {
            *o = *t as u64;
        }
        self.last = Some((now, busy));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked_energy() {
        let p = ModelParams::default();
        // 2 vCPUs for 10 s, one fully busy: 0.74·2·10 + 2.76·10 = 14.8 + 27.6 = 42.4 J
        assert!((p.energy_j(2, 10.0, 10.0) - 42.4).abs() < 1e-9);
        // idle: 0.74 W per vCPU
        assert!((p.energy_j(4, 1.0, 0.0) - 2.96).abs() < 1e-9);
        assert!(p.name().contains("ccf-linear"));
        assert_eq!(p.name(), "ccf-linear(min=0.74W,max=3.5W per vCPU)");
        assert!(p.provenance().estimated);
    }

    #[test]
    fn two_point_curve_is_exactly_the_ccf_formula() {
        for (min, max) in [(0.74, 3.5), (1.0, 2.0), (0.0, 7.25)] {
            let p = ModelParams::ccf_linear(min, max);
            for (n, wall, busy) in [
                (2, 10.0, 10.0),
                (4, 1.0, 0.0),
                (8, 0.3, 1.7),
                (1, 0.01, 0.02), // more busy time than wall time: tick quantisation
                (4, 0.0, 0.5),   // no wall time at all
            ] {
                let ccf = min * n as f64 * wall + (max - min) * busy;
                assert_eq!(
                    p.energy_j(n, wall, busy),
                    ccf,
                    "{min} {max} {n} {wall} {busy}"
                );
            }
        }
    }

    #[test]
    fn curve_interpolates_by_hand() {
        // Teads ratios × 10 W per vCPU: (0, 1.2) (0.1, 3.2) (0.5, 7.5) (1, 10.2)
        let p = ModelParams {
            name: "test".into(),
            points: vec![(0.0, 1.2), (0.1, 3.2), (0.5, 7.5), (1.0, 10.2)],
            notes: vec![],
        };
        p.validate().unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(p.watts_per_cpu(0.0), 1.2));
        assert!(close(p.watts_per_cpu(0.05), 2.2)); // 1.2 + 20 × 0.05
        assert!(close(p.watts_per_cpu(0.3), 5.35)); // 3.2 + 10.75 × 0.2
        assert!(close(p.watts_per_cpu(0.75), 8.85)); // 7.5 + 5.4 × 0.25
        assert!(close(p.watts_per_cpu(1.0), 10.2));
        assert!(close(p.watts_per_cpu(2.0), 10.2)); // clamped
                                                    // 4 vCPUs, 2 s, 2.4 busy CPU-s: u = 0.3 → 4 · 2 · 5.35 = 42.8 J
        assert!(close(p.energy_j(4, 2.0, 2.4), 42.8));
        // idle: 4 · 2 · 1.2 = 9.6 J
        assert!(close(p.energy_j(4, 2.0, 0.0), 9.6));
        // 10 % more than full load is charged at the last slope (5.4 W per busy CPU-s)
        assert!(close(p.energy_j(1, 1.0, 1.1), 10.2 + 0.54));
        assert!(close(p.min_w_per_cpu(), 1.2) && close(p.max_w_per_cpu(), 10.2));
    }

    #[test]
    fn bad_coefficients_are_refused() {
        let p = ModelParams::ccf_linear(5.0, 1.0);
        assert!(p.validate().unwrap_err().to_string().contains("max ≥ min"));
        let p = ModelParams::ccf_linear(f64::NAN, 1.0);
        assert!(p.validate().is_err());
        let mut p = ModelParams {
            points: vec![(0.0, 1.0), (0.5, 2.0)],
            ..ModelParams::default()
        };
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("last at 1") && !e.contains('\n'), "{e}");
        p.points = vec![(0.0, 1.0), (0.5, 2.0), (0.5, 3.0), (1.0, 4.0)];
        assert!(p.validate().unwrap_err().to_string().contains("strictly"));
        p.points = vec![(0.0, 1.0)];
        assert!(p.validate().unwrap_err().to_string().contains("two points"));
    }

    #[test]
    fn proc_stat_busy_ticks() {
        let text = "cpu  10 0 5 100 1 0 0 0 0 0\ncpu0 4 1 2 50 1 3 4 9 0 0\ncpu1 6 0 3 50 0 0 0 0 0 0\nintr 1\n";
        let m = parse_proc_stat(text).unwrap();
        assert_eq!(m[&0], 4 + 1 + 2 + 3 + 4); // steal (9) excluded
        assert_eq!(m[&1], 9);
        assert!(parse_proc_stat("intr 1\n").is_none());
        assert!(parse_proc_stat("cpu0 1 2\n").is_none());
    }
}
