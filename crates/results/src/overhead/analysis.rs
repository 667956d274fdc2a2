//! The statistics of the measurement-overhead study of the RAPL paper (section V) over its rows,
//! shaped like the paper's appendices A and B; `wattio-overhead` writes them as tables, the
//! report draws them.
//!
//! * **Running time**: per combination, outliers outside `[q1 − 3·IQR, q3 + 3·IQR]` are
//!   removed; each (workload, mechanism, frequency) is compared with the workload's "off"
//!   runs by a one-sided Wilcoxon rank-sum test (H1: slower with measurement), p-values
//!   are Holm-corrected over the whole table, and the effect is the Hodges–Lehmann shift.
//! * **Idle machine**: the model-estimated power of the idle runs, tested the same way
//!   (H1: more power with measurement), with the recorder's attributed share of it (given by the
//!   caller) and the C-state residency where the machine exposes it.

use super::{IdleRun, LoadRun, OFF};
use std::collections::BTreeMap;
use wattio_stats::{
    hodges_lehmann_ci, holm, median, outlier_mask, rank_sum, Alternative, TestMethod,
    PAPER_IQR_FACTOR,
};

/// One row of the Appendix-A-shaped table.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeTest {
    pub workload: String,
    pub mechanism: String,
    pub freq_hz: f64,
    /// Runs kept / removed as outliers, baseline and measured group.
    pub n_base: usize,
    pub n: usize,
    pub removed_base: usize,
    pub removed: usize,
    pub median_base_s: f64,
    pub median_s: f64,
    pub p_value: f64,
    pub p_adj: f64,
    /// Two-sided p-value (not adjusted): a diagnostic for differences in the direction the
    /// one-sided test cannot see (faster with measurement = something else is going on).
    pub p_two_sided: f64,
    pub exact: bool,
    /// Hodges–Lehmann shift (measured − off), seconds; positive = slower with measurement.
    pub shift_s: f64,
    pub shift_pct: f64,
    pub ci_low_s: f64,
    pub ci_high_s: f64,
    /// Median rows per second the recorder wrote (sanity check that it really sampled).
    pub sample_rate: f64,
    pub recorder_cpu_s: f64,
}

fn keep_inliers(xs: &[f64]) -> (Vec<f64>, usize) {
    match outlier_mask(xs, PAPER_IQR_FACTOR) {
        Ok((mask, _)) => {
            let kept: Vec<f64> = xs
                .iter()
                .zip(&mask)
                .filter(|(_, k)| **k)
                .map(|(v, _)| *v)
                .collect();
            let removed = xs.len() - kept.len();
            (kept, removed)
        }
        Err(_) => (xs.to_vec(), 0),
    }
}

fn fkey(f: f64) -> u64 {
    (f * 1000.0).round() as u64
}

/// Tests every (workload, mechanism, frequency) against the workload's "off" runs.
/// Holm's correction runs over all rows returned.
pub fn analyze_load(runs: &[LoadRun]) -> Vec<TimeTest> {
    let mut groups: BTreeMap<(String, String, u64), Vec<&LoadRun>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.workload.clone(), r.mechanism.clone(), fkey(r.freq_hz)))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    let workloads: Vec<String> = {
        let mut w: Vec<String> = Vec::new();
        for r in runs {
            if !w.contains(&r.workload) {
                w.push(r.workload.clone());
            }
        }
        w
    };
    for w in &workloads {
        let Some(base) = groups.get(&(w.clone(), OFF.to_string(), 0)) else {
            continue;
        };
        let (b, removed_base) = keep_inliers(&base.iter().map(|r| r.elapsed_s).collect::<Vec<_>>());
        for ((gw, mech, fk), rs) in &groups {
            if gw != w || mech == OFF {
                continue;
            }
            let (x, removed) = keep_inliers(&rs.iter().map(|r| r.elapsed_s).collect::<Vec<_>>());
            let (Ok(t), Ok(hl)) = (
                rank_sum(&x, &b, Alternative::Greater),
                hodges_lehmann_ci(&x, &b, 0.95),
            ) else {
                continue;
            };
            let mb = median(&b).unwrap_or(f64::NAN);
            let rates: Vec<f64> = rs
                .iter()
                .filter(|r| r.recorder_s > 0.0)
                .map(|r| r.samples as f64 / r.recorder_s)
                .collect();
            out.push(TimeTest {
                workload: w.clone(),
                mechanism: mech.clone(),
                freq_hz: *fk as f64 / 1000.0,
                n_base: b.len(),
                n: x.len(),
                removed_base,
                removed,
                median_base_s: mb,
                median_s: median(&x).unwrap_or(f64::NAN),
                p_value: t.p_value,
                p_adj: f64::NAN,
                p_two_sided: rank_sum(&x, &b, Alternative::TwoSided)
                    .map(|t| t.p_value)
                    .unwrap_or(f64::NAN),
                exact: t.method == TestMethod::Exact,
                shift_s: hl.estimate,
                shift_pct: 100.0 * hl.estimate / mb,
                ci_low_s: hl.low,
                ci_high_s: hl.high,
                sample_rate: median(&rates).unwrap_or(0.0),
                recorder_cpu_s: median(&rs.iter().map(|r| r.recorder_cpu_s).collect::<Vec<_>>())
                    .unwrap_or(0.0),
            });
        }
    }
    let adj = holm(&out.iter().map(|t| t.p_value).collect::<Vec<_>>()).unwrap_or_default();
    for (t, a) in out.iter_mut().zip(adj) {
        t.p_adj = a;
    }
    out
}

/// One row of the Appendix-B-shaped table (idle impact).
#[derive(Debug, Clone, PartialEq)]
pub struct IdleTest {
    pub mechanism: String,
    pub freq_hz: f64,
    pub n_base: usize,
    pub n: usize,
    pub median_power_base_w: f64,
    pub median_power_w: f64,
    pub p_value: f64,
    pub p_adj: f64,
    /// Hodges–Lehmann shift of the estimated power, W (ESTIMATED by the model).
    pub shift_w: f64,
    /// Median recorder CPU time per second of wall time (CPU-seconds/s).
    pub recorder_cpu_per_s: f64,
    /// The recorder's attributed share of the estimated power with it running, W (ESTIMATED):
    /// `attribution::share_j(median_power_w × 1 s, n_cpus, 1 s, recorder_cpu_per_s)`, i.e.
    /// `median_power_w × recorder_cpu_per_s / n_cpus`. NaN when the vCPU count is unknown, or
    /// where the caller of [`analyze_idle_with`] gives no share (the report, which leaves it out).
    pub recorder_power_w: f64,
    pub sample_rate: f64,
    /// Mean C-state residency with measurement, or "unavailable".
    pub cstates: String,
    /// Mean C-state residency of the "off" runs.
    pub cstates_base: String,
}

/// Tests each (mechanism, frequency) idle group against the "off" idle runs on the
/// model-estimated power (one-sided, H1: more power with measurement), Holm over all rows.
/// `recorder_share_w(run, power_w, cpu_per_s)` is the recorder's attributed share of `power_w`
/// when it takes `cpu_per_s` CPU-seconds a second on the machine `run` was made on, `None` where
/// the run cannot tell (its vCPU count unknown): the first run of a group that tells gives
/// [`IdleTest::recorder_power_w`]. The share is the meter's attribution, which this crate does
/// not hold: `wattio-overhead`'s `analyze_idle` passes it in.
pub fn analyze_idle_with(
    runs: &[IdleRun],
    recorder_share_w: impl Fn(&IdleRun, f64, f64) -> Option<f64>,
) -> Vec<IdleTest> {
    let mut groups: BTreeMap<(String, u64), Vec<&IdleRun>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.mechanism.clone(), fkey(r.freq_hz)))
            .or_default()
            .push(r);
    }
    let Some(base) = groups.get(&(OFF.to_string(), 0)) else {
        return vec![];
    };
    let (b, _) = keep_inliers(&base.iter().map(|r| r.est_power_w).collect::<Vec<_>>());
    let mut out = Vec::new();
    for ((mech, fk), rs) in &groups {
        if mech == OFF {
            continue;
        }
        let (x, _) = keep_inliers(&rs.iter().map(|r| r.est_power_w).collect::<Vec<_>>());
        let (Ok(t), Ok(shift)) = (
            rank_sum(&x, &b, Alternative::Greater),
            wattio_stats::hodges_lehmann(&x, &b),
        ) else {
            continue;
        };
        let cpu_per_s: Vec<f64> = rs
            .iter()
            .filter(|r| r.recorder_s > 0.0)
            .map(|r| r.recorder_cpu_s / r.recorder_s)
            .collect();
        let cps = median(&cpu_per_s).unwrap_or(0.0);
        let power_on = median(&x).unwrap_or(f64::NAN);
        let recorder_power_w = rs
            .iter()
            .find_map(|r| recorder_share_w(r, power_on, cps))
            .unwrap_or(f64::NAN);
        out.push(IdleTest {
            mechanism: mech.clone(),
            freq_hz: *fk as f64 / 1000.0,
            n_base: b.len(),
            n: x.len(),
            median_power_base_w: median(&b).unwrap_or(f64::NAN),
            median_power_w: power_on,
            p_value: t.p_value,
            p_adj: f64::NAN,
            shift_w: shift,
            recorder_cpu_per_s: cps,
            recorder_power_w,
            sample_rate: median(
                &rs.iter()
                    .filter(|r| r.recorder_s > 0.0)
                    .map(|r| r.samples as f64 / r.recorder_s)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0),
            cstates: mean_cstates(rs.iter().map(|r| r.cstates.as_str())),
            cstates_base: mean_cstates(base.iter().map(|r| r.cstates.as_str())),
        });
    }
    let adj = holm(&out.iter().map(|t| t.p_value).collect::<Vec<_>>()).unwrap_or_default();
    for (t, a) in out.iter_mut().zip(adj) {
        t.p_adj = a;
    }
    out
}

impl IdleTest {
    /// "off: C1 11.0%, … → on: C1 31.0%, …", or "unavailable".
    pub fn cstates_cell(&self) -> String {
        if self.cstates == "unavailable" && self.cstates_base == "unavailable" {
            "unavailable".into()
        } else {
            format!("off: {} → on: {}", self.cstates_base, self.cstates)
        }
    }
}

fn mean_cstates<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut why = None;
    for s in items {
        if s.starts_with("unavailable") {
            why = Some("unavailable".to_string());
            continue;
        }
        for part in s.split(';').filter(|p| !p.is_empty()) {
            if let Some((k, v)) = part.split_once('=') {
                if let Ok(v) = v.parse::<f64>() {
                    let e = sums.entry(k.to_string()).or_default();
                    e.0 += v;
                    e.1 += 1;
                }
            }
        }
    }
    if sums.is_empty() {
        return why.unwrap_or_else(|| "unavailable".into());
    }
    sums.iter()
        .map(|(k, (s, n))| format!("{k} {:.1}%", 100.0 * s / *n as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// p-values as the paper prints them ("< 0.01").
pub fn fmt_p(p: f64) -> String {
    if p.is_nan() {
        "n/a".into()
    } else if p < 0.01 {
        format!("< 0.01 ({p:.1e})")
    } else {
        format!("{p:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analysis_finds_a_planted_slowdown_and_not_a_null_one() {
        // Hand-made data: "off" and 10 Hz interleave; 1000 Hz is 5 % slower in every run.
        let mut runs = Vec::new();
        let base = [10.00, 10.02, 9.98, 10.01, 9.99, 10.03, 9.97, 10.04]; // no ties: exact test
        let mut push = |mech: &str, f: f64, xs: Vec<f64>| {
            for (i, e) in xs.into_iter().enumerate() {
                runs.push(LoadRun {
                    round: 0,
                    seq: i,
                    workload: "w".into(),
                    mechanism: mech.into(),
                    freq_hz: f,
                    rep: i,
                    elapsed_s: e,
                    samples: (f * e) as u64,
                    recorder_s: e,
                    recorder_cpu_s: 0.0,
                    start_unix: 0.0,
                });
            }
        };
        push(OFF, 0.0, base.to_vec());
        push("model", 10.0, base.iter().map(|v| v + 0.005).collect());
        push("model", 1000.0, base.iter().map(|v| v * 1.05).collect());
        let t = analyze_load(&runs);
        assert_eq!(t.len(), 2);
        let slow = t.iter().find(|x| x.freq_hz == 1000.0).unwrap();
        let null = t.iter().find(|x| x.freq_hz == 10.0).unwrap();
        // Complete separation, 8 vs 8: exact p = 1/C(16,8) = 1/12870; Holm ×2.
        assert!((slow.p_value - 1.0 / 12870.0).abs() < 1e-12);
        assert!((slow.p_adj - 2.0 / 12870.0).abs() < 1e-12);
        assert!(slow.shift_pct > 4.5 && slow.shift_pct < 5.5);
        assert!(null.p_adj > 0.05);
    }

    #[test]
    fn outliers_are_removed_before_testing() {
        let mut runs: Vec<LoadRun> = Vec::new();
        let mk = |mech: &str, f: f64, e: f64| LoadRun {
            round: 0,
            seq: 0,
            workload: "w".into(),
            mechanism: mech.into(),
            freq_hz: f,
            rep: 0,
            elapsed_s: e,
            samples: 0,
            recorder_s: 0.0,
            recorder_cpu_s: 0.0,
            start_unix: 0.0,
        };
        for e in [1.0, 1.01, 0.99, 1.02, 0.98, 1.0] {
            runs.push(mk(OFF, 0.0, e));
            runs.push(mk("model", 1.0, e));
        }
        runs.push(mk("model", 1.0, 50.0)); // a run disturbed by something else
        let t = analyze_load(&runs);
        assert_eq!(t[0].removed, 1);
        assert_eq!(t[0].n, 6);
    }
}
