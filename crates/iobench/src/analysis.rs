//! Statistics over the runs: per-cell medians with IQR, the paper-shaped tables, the MB/J
//! ranking, and one recommendation per use case backed by Wilcoxon rank-sum tests with Holm
//! correction (from `wattio-stats`).

#[cfg(test)]
use crate::catalog::DEFAULT_BUFFER;
use crate::catalog::{is_main, Op, Size};
use crate::results::RunRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use wattio_stats::{holm, rank_sum, Alternative, Summary};
// Figures at three significant digits, shared with the report.
pub(crate) use wattio_results::iobench::sig;

/// Significance level of the recommendation tests.
pub(crate) const ALPHA: f64 = 0.05;

/// Statistics of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellStats {
    pub op: Op,
    pub method: String,
    pub size: Size,
    pub buffer: u32,
    pub n: usize,
    pub energy_median_j: f64,
    pub energy_q1_j: f64,
    pub energy_q3_j: f64,
    pub time_median_s: f64,
    pub time_q1_s: f64,
    pub time_q3_s: f64,
    pub bytes: u64,
    /// Megabytes (10^6 B) per joule at the median energy.
    pub mb_per_j: f64,
}

fn summary(xs: &[f64]) -> Summary {
    Summary::of(xs).unwrap_or(Summary {
        n: 0,
        min: f64::NAN,
        q1: f64::NAN,
        median: f64::NAN,
        q3: f64::NAN,
        max: f64::NAN,
        mean: f64::NAN,
    })
}

type Key = (Op, Size, u32, String);

fn group(rows: &[RunRecord]) -> BTreeMap<Key, Vec<&RunRecord>> {
    let mut g: BTreeMap<Key, Vec<&RunRecord>> = BTreeMap::new();
    for r in rows {
        g.entry((r.op, r.size, r.buffer, r.method.clone()))
            .or_default()
            .push(r);
    }
    g
}

/// One [`CellStats`] per (use case, size, buffer, method), sorted by those keys.
pub(crate) fn cell_stats(rows: &[RunRecord]) -> Vec<CellStats> {
    group(rows)
        .into_iter()
        .map(|((op, size, buffer, method), rs)| {
            let e: Vec<f64> = rs.iter().map(|r| r.energy_j).collect();
            let t: Vec<f64> = rs.iter().map(|r| r.time_s).collect();
            let (se, st) = (summary(&e), summary(&t));
            let bytes = rs[0].bytes;
            CellStats {
                op,
                method,
                size,
                buffer,
                n: rs.len(),
                energy_median_j: se.median,
                energy_q1_j: se.q1,
                energy_q3_j: se.q3,
                time_median_s: st.median,
                time_q1_s: st.q1,
                time_q3_s: st.q3,
                bytes,
                mb_per_j: bytes as f64 / 1e6 / se.median,
            }
        })
        .collect()
}

/// The runner-up comparison behind a recommendation.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub method: String,
    pub median_j: f64,
    /// One-sided rank-sum p-value for "the best method uses less energy than this one".
    pub p: f64,
    pub p_holm: f64,
    pub significant: bool,
    /// Energy saved by the best method, relative to this one's median.
    pub saving: f64,
}

/// The recommendation of one use case.
#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    pub op: Op,
    pub size: Size,
    pub best: String,
    pub best_median_j: f64,
    pub best_q1_j: f64,
    pub best_q3_j: f64,
    pub n: usize,
    pub comparisons: Vec<Comparison>,
    pub line: String,
}

/// The largest size of `op` with runs at the default buffer.
pub(crate) fn largest_size(rows: &[RunRecord], op: Op) -> Option<Size> {
    rows.iter()
        .filter(|r| r.op == op && is_main(r.op, r.buffer))
        .map(|r| r.size)
        .max()
}

/// Recommends the method of `op` with the lowest median energy on the largest size measured,
/// testing it against every other method (one-sided Wilcoxon rank-sum, Holm-adjusted).
pub(crate) fn recommend(rows: &[RunRecord], op: Op, provenance: &str) -> Option<Recommendation> {
    let size = largest_size(rows, op)?;
    let mut by_method: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.op == op && r.size == size && is_main(r.op, r.buffer))
    {
        by_method
            .entry(r.method.as_str())
            .or_default()
            .push(r.energy_j);
    }
    let med = |xs: &Vec<f64>| summary(xs).median;
    let (best, best_xs) = by_method
        .iter()
        .min_by(|a, b| med(a.1).total_cmp(&med(b.1)))
        .map(|(k, v)| (k.to_string(), v.clone()))?;
    let bs = summary(&best_xs);
    let others: Vec<(&str, &Vec<f64>)> = by_method
        .iter()
        .filter(|(k, _)| **k != best)
        .map(|(k, v)| (*k, v))
        .collect();
    let ps: Vec<f64> = others
        .iter()
        .map(|(_, xs)| {
            rank_sum(&best_xs, xs, Alternative::Less)
                .map(|t| t.p_value)
                .unwrap_or(1.0)
        })
        .collect();
    let adj = if ps.is_empty() {
        vec![]
    } else {
        holm(&ps).unwrap_or_else(|_| vec![1.0; ps.len()])
    };
    let mut comparisons: Vec<Comparison> = others
        .iter()
        .zip(ps.iter().zip(&adj))
        .map(|((m, xs), (&p, &ph))| {
            let mj = med(xs);
            Comparison {
                method: m.to_string(),
                median_j: mj,
                p,
                p_holm: ph,
                significant: ph < ALPHA,
                saving: 1.0 - bs.median / mj,
            }
        })
        .collect();
    comparisons.sort_by(|a, b| a.median_j.total_cmp(&b.median_j));
    let n = best_xs.len();
    let beaten = comparisons.iter().filter(|c| c.significant).count();
    let tied: Vec<String> = comparisons
        .iter()
        .filter(|c| !c.significant)
        .map(|c| format!("{} (p_holm={:.3})", c.method, c.p_holm))
        .collect();
    let mut line = format!(
        "{}: use {} — median {} J [IQR {}–{}] on {} ({}, {})",
        op,
        best,
        sig(bs.median),
        sig(bs.q1),
        sig(bs.q3),
        size,
        runs_label(n),
        provenance
    );
    if comparisons.is_empty() {
        line.push_str("; the only method run");
    } else {
        line.push_str(&format!(
            "; significantly lower than {beaten} of {} alternatives (one-sided Wilcoxon rank-sum, Holm, α={ALPHA})",
            comparisons.len()
        ));
        if let Some(r) = comparisons.first() {
            line.push_str(&format!(
                "; {:.0}% less energy than the runner-up {}",
                100.0 * r.saving,
                r.method
            ));
        }
        if !tied.is_empty() {
            line.push_str(&format!("; not distinguishable from {}", tied.join(", ")));
            if n < 4 {
                line.push_str(" — too few runs for the test to decide, use --runs 10 or more");
            }
        }
    }
    Some(Recommendation {
        op,
        size,
        best,
        best_median_j: bs.median,
        best_q1_j: bs.q1,
        best_q3_j: bs.q3,
        n,
        comparisons,
        line,
    })
}

/// "1 run", "5 runs".
pub(crate) fn runs_label(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maven::Libs;

    fn row(op: Op, method: &str, size: Size, run: u32, e: f64) -> RunRecord {
        RunRecord {
            method: method.into(),
            op,
            size,
            buffer: DEFAULT_BUFFER,
            run,
            energy_j: e,
            time_s: e / 10.0,
            bytes: 1_000_000,
            mechanism: "model".into(),
            estimated: true,
            model: "m".into(),
            energy_scope: "process".into(),
            system_energy_j: e,
            cpu_s: 0.0,
            window_s: 0.0,
            cache: "warm".into(),
            cache_resident: Some(1.0),
            libs: Libs::Paper,
            checked: true,
            attributed_j: None,
            disk: None,
            disk_lower_j: None,
            disk_central_j: None,
            disk_upper_j: None,
            disk_label: None,
        }
    }

    #[test]
    fn stats_and_recommendation() {
        let mut rows = vec![];
        for i in 0..8 {
            let d = i as f64 * 0.01;
            rows.push(row(Op::Read, "channel", Size::Small, i + 1, 1.0 + d));
            rows.push(row(Op::Read, "filereader", Size::Small, i + 1, 1.05 + d));
            rows.push(row(Op::Read, "scanner", Size::Small, i + 1, 4.0 + d));
            rows.push(row(Op::Read, "scanner", Size::Tiny, i + 1, 0.1 + d));
        }
        let s = cell_stats(&rows);
        let ch = s.iter().find(|c| c.method == "channel").unwrap();
        // Eight values 1.00..1.07: type-7 median 1.035, q1 1.0175, q3 1.0525.
        assert!((ch.energy_median_j - 1.035).abs() < 1e-12);
        assert!((ch.energy_q1_j - 1.0175).abs() < 1e-12);
        assert!((ch.mb_per_j - 1.0 / 1.035).abs() < 1e-12);
        let r = recommend(&rows, Op::Read, "estimated (x)").unwrap();
        assert_eq!(r.best, "channel");
        assert_eq!(r.size, Size::Small);
        let sc = r
            .comparisons
            .iter()
            .find(|c| c.method == "scanner")
            .unwrap();
        // 8 vs 8 with complete separation: exact one-sided p = 1/C(16,8) = 1/12870.
        assert!((sc.p - 1.0 / 12870.0).abs() < 1e-12, "{}", sc.p);
        assert!(sc.significant);
        let fr = r
            .comparisons
            .iter()
            .find(|c| c.method == "filereader")
            .unwrap();
        assert!(fr.p > sc.p);
        assert!(r.line.contains("use channel"), "{}", r.line);
    }

    #[test]
    fn few_runs_say_so() {
        let rows: Vec<RunRecord> = (0..3)
            .flat_map(|i| {
                [
                    row(Op::Write, "iostream", Size::Tiny, i + 1, 1.0 + i as f64),
                    row(Op::Write, "guava", Size::Tiny, i + 1, 10.0 + i as f64),
                ]
            })
            .collect();
        let r = recommend(&rows, Op::Write, "e").unwrap();
        assert_eq!(r.best, "iostream");
        // n=3 vs 3: the smallest one-sided exact p is 1/20 = 0.05, not below α.
        assert!(!r.comparisons[0].significant);
        assert!(r.line.contains("too few runs"), "{}", r.line);
        assert!(recommend(&rows, Op::Seek, "e").is_none());
    }
}
