//! An energy gate for CI: does a command now use more energy than its baseline by more than a
//! threshold, beyond what run-to-run noise explains?
//!
//! The measure is each run's `attributed_j`, the command's CPU-time share of the machine's
//! energy (measured where RAPL is, else the model's estimate, in which case the gate compares
//! CPU time times a power curve, and says so). The question is one-sided and asked of the
//! threshold itself: the Wilcoxon rank-sum test of the new runs against the baseline runs
//! scaled by `1 + max_increase`, alternative "greater". The gate fails only when that test
//! rejects at `alpha`, i.e. when the increase significantly exceeds the threshold; a smaller
//! increase, or one the runs cannot tell from noise, passes. Beside the verdict: the
//! Hodges–Lehmann estimate of the increase with its 95 % confidence interval, relative to the
//! baseline's median.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use wattio_results::{Align, Table};
use wattio_stats::{hodges_lehmann_ci, median, rank_sum, Alternative};

/// Why a gate cannot be evaluated.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GateError {
    #[error("the gate needs at least {min} kept runs on each side (baseline {baseline}, new {new}): raise --runs, e.g. --runs 10")]
    TooFewRuns {
        min: usize,
        baseline: usize,
        new: usize,
    },
    #[error("the baseline's median energy is {0} J: nothing to compare an increase with")]
    NoBaselineEnergy(f64),
    #[error("the baseline was measured as {baseline:?} and these runs as {new:?}: compare runs measured the same way (same --source, same model)")]
    DifferentMeasures { baseline: String, new: String },
    #[error("the gate's test could not be computed: {0}")]
    Statistics(String),
}

/// The fewest kept runs per side: with 5 against 5 the exact one-sided test can reach p < 0.01.
pub const MIN_RUNS: usize = 5;

/// The gate's verdict and everything it was drawn from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateVerdict {
    /// True when the new runs' energy significantly exceeds the baseline's by more than the
    /// threshold: the CI job should fail.
    pub failed: bool,
    pub max_increase: f64,
    pub alpha: f64,
    /// One-sided p-value of "new > baseline × (1 + max_increase)".
    pub p_value: f64,
    /// Hodges–Lehmann estimate of new − baseline, relative to the baseline's median, with its
    /// 95 % confidence interval.
    pub increase: f64,
    pub increase_low: f64,
    pub increase_high: f64,
    pub baseline_median_j: f64,
    pub new_median_j: f64,
    pub baseline_runs: usize,
    pub new_runs: usize,
    /// What was compared: the label of the runs' `attributed_j`.
    pub measure: String,
    /// True when that measure is a model's estimate: the gate is then a CPU-time gate.
    pub estimated: bool,
}

/// Judges `new` against `baseline` (joules per run, each the command's `attributed_j`, both
/// labelled `label`).
pub fn judge(
    baseline: &[f64],
    new: &[f64],
    (baseline_label, label): (&str, &str),
    max_increase: f64,
    alpha: f64,
) -> Result<GateVerdict, GateError> {
    if baseline.len() < MIN_RUNS || new.len() < MIN_RUNS {
        return Err(GateError::TooFewRuns {
            min: MIN_RUNS,
            baseline: baseline.len(),
            new: new.len(),
        });
    }
    if baseline_label != label {
        return Err(GateError::DifferentMeasures {
            baseline: baseline_label.into(),
            new: label.into(),
        });
    }
    // Both lengths were checked, so these cannot fail.
    let base_median = median(baseline).unwrap_or(0.0);
    if base_median <= 0.0 || !base_median.is_finite() {
        return Err(GateError::NoBaselineEnergy(base_median));
    }
    let threshold: Vec<f64> = baseline.iter().map(|j| j * (1.0 + max_increase)).collect();
    // A test that cannot be computed (a run's figure not finite) is an error, never a pass.
    let stats = |e: wattio_stats::StatsError| GateError::Statistics(e.to_string());
    let p_value = rank_sum(new, &threshold, Alternative::Greater)
        .map_err(stats)?
        .p_value;
    let shift = hodges_lehmann_ci(new, baseline, 0.95).map_err(stats)?;
    let rel = |j: f64| j / base_median;
    Ok(GateVerdict {
        failed: p_value < alpha,
        max_increase,
        alpha,
        p_value,
        increase: rel(shift.estimate),
        increase_low: rel(shift.low),
        increase_high: rel(shift.high),
        baseline_median_j: base_median,
        new_median_j: median(new).unwrap_or(f64::NAN),
        baseline_runs: baseline.len(),
        new_runs: new.len(),
        estimated: label.starts_with("estimated"),
        measure: label.to_string(),
    })
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

impl GateVerdict {
    /// What the measure is, for people: a measured energy gate or a CPU-time gate.
    fn what(&self) -> &'static str {
        if self.estimated {
            "a CPU-time gate: no energy counter here, so the energy is the model's estimate (CPU time times a power curve)"
        } else {
            "an energy gate on measured energy"
        }
    }

    /// The change, its interval, the limit and the test, as one phrase.
    fn change(&self) -> String {
        format!(
            "{} (95 % CI {} to {}) against a limit of {}, p = {:.4} (fails below {})",
            pct(self.increase),
            pct(self.increase_low),
            pct(self.increase_high),
            pct(self.max_increase),
            self.p_value,
            self.alpha
        )
    }

    /// The terminal lines.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let verdict = if self.failed { "FAIL" } else { "pass" };
        let _ = writeln!(s, "gate         {verdict}: energy {}", self.change());
        let _ = writeln!(
            s,
            "             median {:.3} J now against {:.3} J ({} runs against {}); {}; measure: {}",
            self.new_median_j,
            self.baseline_median_j,
            self.new_runs,
            self.baseline_runs,
            self.what(),
            self.measure
        );
        s
    }

    /// A Markdown summary a CI job can post (GitHub's `$GITHUB_STEP_SUMMARY`, a merge-request
    /// note).
    pub fn markdown(&self, command: &str) -> String {
        let mut s = String::new();
        let verdict = if self.failed {
            "❌ fails"
        } else {
            "✅ passes"
        };
        let _ = writeln!(s, "### wattio energy gate: {verdict}\n");
        let _ = writeln!(s, "`{}`\n", command.replace('`', "'"));
        let mut table = Table::new(&[
            ("", Align::Plain),
            ("baseline", Align::Right),
            ("now", Align::Right),
        ]);
        table.push(vec![
            "median energy (J)".into(),
            format!("{:.3}", self.baseline_median_j),
            format!("{:.3}", self.new_median_j),
        ]);
        table.push(vec![
            "runs".into(),
            self.baseline_runs.to_string(),
            self.new_runs.to_string(),
        ]);
        s.push_str(&table.markdown());
        s.push('\n');
        let _ = writeln!(
            s,
            "Change: {} (one-sided Wilcoxon rank-sum test of an increase beyond the limit).\n",
            self.change()
        );
        let _ = writeln!(s, "This is {}. Measure: {}.", self.what(), self.measure);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL: &str = "measured (perf), attributed (cpu-time share)";

    fn runs(base: f64, step: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| base + step * i as f64).collect()
    }

    #[test]
    fn a_clear_increase_beyond_the_limit_fails_and_a_small_one_passes() {
        let baseline = runs(10.0, 0.01, 10);
        // +20 %: far beyond a 5 % limit, every run above every scaled baseline run.
        let v = judge(&baseline, &runs(12.0, 0.01, 10), (LABEL, LABEL), 0.05, 0.05).unwrap();
        assert!(v.failed, "{v:?}");
        assert!((v.increase - 0.2).abs() < 0.01, "{v:?}");
        assert!(v.increase_low <= v.increase && v.increase <= v.increase_high);
        assert!(
            v.p_value < 1e-4,
            "exact p of complete separation, 10 against 10: {v:?}"
        );
        // +2 %: an increase, but under the limit.
        let v = judge(&baseline, &runs(10.2, 0.01, 10), (LABEL, LABEL), 0.05, 0.05).unwrap();
        assert!(!v.failed, "{v:?}");
        // Identical runs pass.
        let v = judge(&baseline, &baseline, (LABEL, LABEL), 0.05, 0.05).unwrap();
        assert!(!v.failed && v.p_value > 0.5, "{v:?}");
    }

    #[test]
    fn noise_as_large_as_the_increase_passes() {
        // +10 % in the medians, but the runs spread over ±30 %: not significant at 5 runs.
        let baseline = [7.0, 10.0, 13.0, 8.5, 11.5];
        let new = [7.8, 11.0, 14.3, 9.4, 12.6];
        let v = judge(&baseline, &new, (LABEL, LABEL), 0.05, 0.05).unwrap();
        assert!(!v.failed, "{v:?}");
    }

    #[test]
    fn it_refuses_what_cannot_be_compared() {
        let five = runs(1.0, 0.1, 5);
        assert!(matches!(
            judge(&five[..4], &five, (LABEL, LABEL), 0.05, 0.05),
            Err(GateError::TooFewRuns { .. })
        ));
        let est = "estimated (model: ccf-linear(...)), attributed (cpu-time share)";
        assert!(matches!(
            judge(&five, &five, (LABEL, est), 0.05, 0.05),
            Err(GateError::DifferentMeasures { .. })
        ));
        assert!(matches!(
            judge(&[0.0; 5], &five, (LABEL, LABEL), 0.05, 0.05),
            Err(GateError::NoBaselineEnergy(_))
        ));
    }

    #[test]
    fn an_estimate_makes_it_a_cpu_time_gate_and_says_so() {
        let est = "estimated (model: ccf-linear(...)), attributed (cpu-time share)";
        let v = judge(
            &runs(1.0, 0.0, 6),
            &runs(1.0, 0.0, 6),
            (est, est),
            0.05,
            0.05,
        )
        .unwrap();
        assert!(v.estimated);
        assert!(v.text().contains("a CPU-time gate"), "{}", v.text());
        let md = v.markdown("make `bench`");
        assert!(
            md.contains("✅ passes") && md.contains("a CPU-time gate"),
            "{md}"
        );
        assert!(md.contains("`make 'bench'`"), "{md}");
    }
}
