//! The utilisation model's curve: watts per vCPU against utilisation, with the name and
//! coefficients every estimate is labelled with.

use crate::error::EnergyError;
use crate::types::{Mechanism, Provenance};
use serde::{Deserialize, Serialize};

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
