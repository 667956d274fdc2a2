//! A labelled CPU power model for machines without energy counters (cloud VMs, these CI hosts).
//!
//! **Every figure this module produces is an estimate**, and its [`Provenance`] says so and names
//! the model with its coefficients.
//!
//! The model is the linear per-vCPU model of the Cloud Carbon Footprint methodology
//! (`cloud-carbon-footprint/cloud-carbon-footprint`,
//! `packages/core/src/compute/ComputeEstimator.ts`; see `shared/notes/anchors-meters.md` §5.2):
//!
//! ```text
//! P(u) = n_cpu · (W_min + u · (W_max − W_min))        u = busy time / wall time
//! E    = W_min · n_cpu · Δt + (W_max − W_min) · Δbusy
//! ```
//!
//! with `Δbusy` the CPU-seconds spent busy (user, nice, system, irq, softirq from `/proc/stat`,
//! not steal, which is time the hypervisor gave to someone else). Defaults are CCF's AWS averages,
//! `W_min = 0.74 W` and `W_max = 3.5 W` per vCPU, derived from SPECpower results; they can be
//! overridden ([`ModelParams`]). How far off such a model can be: Kepler's bare-metal study
//! (kepler #2466) found OS-metric models reach R² ≈ 0.96 on stress-ng but R² ≈ 0.30, with a
//! +3…+15 W idle bias, on live workloads.
//!
//! `/proc/stat` counts 10 ms ticks (USER_HZ 100), so an estimate over a window of a few
//! milliseconds is quantised; the cumulative total is not.

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

/// Coefficients of the linear model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// Watts per vCPU when idle.
    pub min_w_per_cpu: f64,
    /// Watts per vCPU when fully busy.
    pub max_w_per_cpu: f64,
}

impl Default for ModelParams {
    /// Cloud Carbon Footprint's AWS averages (`MIN_WATTS_AVG 0.74`, `MAX_WATTS_AVG 3.5`).
    fn default() -> Self {
        ModelParams {
            min_w_per_cpu: 0.74,
            max_w_per_cpu: 3.5,
        }
    }
}

impl ModelParams {
    /// Checks the coefficients make a model (finite, non-negative, max ≥ min).
    pub fn validate(&self) -> Result<(), EnergyError> {
        let ok = self.min_w_per_cpu.is_finite()
            && self.max_w_per_cpu.is_finite()
            && self.min_w_per_cpu >= 0.0
            && self.max_w_per_cpu >= self.min_w_per_cpu;
        if ok {
            Ok(())
        } else {
            Err(EnergyError::Invalid(format!(
                "model coefficients min={} W, max={} W per vCPU are not a model: both must be finite, min ≥ 0 and max ≥ min",
                self.min_w_per_cpu, self.max_w_per_cpu
            )))
        }
    }

    /// The model's name with its coefficients, as printed wherever an estimate appears.
    pub fn name(&self) -> String {
        format!(
            "ccf-linear(min={}W,max={}W per vCPU)",
            self.min_w_per_cpu, self.max_w_per_cpu
        )
    }

    /// Estimated joules for `n_cpus` over `wall_s` seconds of which `busy_cpu_s` CPU-seconds were
    /// busy.
    pub fn energy_j(&self, n_cpus: usize, wall_s: f64, busy_cpu_s: f64) -> f64 {
        self.min_w_per_cpu * n_cpus as f64 * wall_s
            + (self.max_w_per_cpu - self.min_w_per_cpu) * busy_cpu_s
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
        let mut fields = rest.split_ascii_whitespace();
        let id = fields.next()?;
        let Ok(cpu) = id.parse::<u32>() else { continue }; // the aggregate "cpu" line
        let v: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 7 {
            return None;
        }
        // user nice system idle iowait irq softirq [steal guest guest_nice]
        out.insert(cpu, v[0] + v[1] + v[2] + v[5] + v[6]);
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
    pub fn params(&self) -> ModelParams {
        self.params
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
        assert!(p.provenance().estimated);
    }

    #[test]
    fn bad_coefficients_are_refused() {
        let p = ModelParams {
            min_w_per_cpu: 5.0,
            max_w_per_cpu: 1.0,
        };
        assert!(p.validate().unwrap_err().to_string().contains("max ≥ min"));
        let p = ModelParams {
            min_w_per_cpu: f64::NAN,
            max_w_per_cpu: 1.0,
        };
        assert!(p.validate().is_err());
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
