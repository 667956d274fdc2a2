//! A labelled CPU power model for machines without energy counters (cloud VMs, these CI hosts).

use crate::cpu;
use crate::error::EnergyError;
use crate::model_params::ModelParams;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Provenance, Wrap};
use crate::Source;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;
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

/// The utilisation model.
pub(crate) fn open_mechanism(req: &crate::opening::OpenRequest) -> crate::opening::Opened {
    let r = crate::model::ModelSource::open(req.root, req.params.clone())
        .map(|s| Box::new(s) as Box<dyn crate::Source>);
    // How the model was chosen (tdp-curve, or why it fell back to ccf-linear).
    (
        r.and_then(|s| crate::opening::filter(s, req.domains)),
        req.params.notes.clone(),
    )
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
