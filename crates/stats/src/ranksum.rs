//! Wilcoxon rank-sum test, equivalently the Mann–Whitney U test.
//!
//! Statistic and p-values follow R's `wilcox.test(x, y, paired = FALSE)`:
//! `W = (sum of the ranks of x) − n_x(n_x + 1)/2`, i.e. the number of pairs with
//! `x_i > y_j` (ties count ½). The exact null distribution is used when both samples
//! have fewer than [`EXACT_AUTO_LIMIT`] observations and there are no ties; otherwise
//! the normal approximation with tie-corrected variance and (by default) continuity
//! correction of ½.

use crate::normal::normal_cdf;
use crate::{check, StatsError};

/// Automatic choice uses the exact distribution when `n_x < 50 && n_y < 50` (R's rule).
pub const EXACT_AUTO_LIMIT: usize = 50;
/// Largest `n_x + n_y` for which the exact distribution is computed (u128 counts of
/// C(m+n, m) arrangements stay exact up to here).
pub const EXACT_MAX_TOTAL: usize = 120;

/// Alternative hypothesis, about the location of `x` relative to `y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alternative {
    /// x and y differ in location.
    TwoSided,
    /// x tends to be larger than y (e.g. running time *with* measurement is longer).
    Greater,
    /// x tends to be smaller than y.
    Less,
}

impl Alternative {
    /// R's spelling: "two.sided", "greater", "less".
    pub fn as_str(self) -> &'static str {
        match self {
            Alternative::TwoSided => "two.sided",
            Alternative::Greater => "greater",
            Alternative::Less => "less",
        }
    }
}

/// How the p-value should be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodChoice {
    /// Exact when both n < 50 and no ties, otherwise normal (R's default).
    Auto,
    /// Exact null distribution; falls back to normal when there are ties (as R does).
    Exact,
    /// Normal approximation always.
    Normal,
}

/// Options for [`rank_sum_with`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSumOptions {
    pub alternative: Alternative,
    pub method: MethodChoice,
    /// Continuity correction of ½ in the normal approximation (R's `correct = TRUE`).
    pub continuity: bool,
}

impl Default for RankSumOptions {
    fn default() -> Self {
        RankSumOptions {
            alternative: Alternative::TwoSided,
            method: MethodChoice::Auto,
            continuity: true,
        }
    }
}

/// How a p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TestMethod {
    /// Exact permutation distribution of W.
    Exact,
    /// Normal approximation; `z` is the standardized (and corrected) statistic.
    Normal { z: f64, continuity: bool },
}

/// Outcome of a rank-sum test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSumTest {
    /// R's W = Mann–Whitney U of x (pairs with x > y, ties ½).
    pub w: f64,
    /// Sum of the (mid-)ranks of x in the pooled sample.
    pub rank_sum_x: f64,
    pub n_x: usize,
    pub n_y: usize,
    pub p_value: f64,
    pub alternative: Alternative,
    pub method: TestMethod,
    /// Whether the pooled sample had tied values.
    pub ties: bool,
}

/// Mid-ranks (1-based, ties get the average rank) of `xs` in input order.
pub fn ranks(xs: &[f64]) -> Vec<f64> {
    ranks_and_ties(xs).0
}

/// Ranks plus the tie-group sizes (only groups larger than one).
fn ranks_and_ties(xs: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut r = vec![0.0; xs.len()];
    let mut groups = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i + 1;
        while j < idx.len() && xs[idx[j]] == xs[idx[i]] {
            j += 1;
        }
        // positions i..j (0-based) share ranks i+1..=j, average (i + 1 + j) / 2
        let avg = (i + 1 + j) as f64 / 2.0;
        for &k in &idx[i..j] {
            r[k] = avg;
        }
        if j - i > 1 {
            groups.push(j - i);
        }
        i = j;
    }
    (r, groups)
}

/// Wilcoxon rank-sum test of `x` against `y` with R's defaults (automatic exact/normal
/// choice, continuity correction).
pub fn rank_sum(x: &[f64], y: &[f64], alternative: Alternative) -> Result<RankSumTest, StatsError> {
    rank_sum_with(
        x,
        y,
        &RankSumOptions {
            alternative,
            ..Default::default()
        },
    )
}

/// Wilcoxon rank-sum test with explicit options.
pub fn rank_sum_with(
    x: &[f64],
    y: &[f64],
    opt: &RankSumOptions,
) -> Result<RankSumTest, StatsError> {
    check(x)?;
    check(y)?;
    let (m, n) = (x.len(), y.len());
    let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    let (r, ties) = ranks_and_ties(&pooled);
    let rank_sum_x: f64 = r[..m].iter().sum();
    let w = rank_sum_x - (m * (m + 1)) as f64 / 2.0;
    let has_ties = !ties.is_empty();

    let exact = match opt.method {
        MethodChoice::Auto => m < EXACT_AUTO_LIMIT && n < EXACT_AUTO_LIMIT && !has_ties,
        MethodChoice::Exact => {
            if m + n > EXACT_MAX_TOTAL {
                return Err(StatsError::TooLargeForExact {
                    got: m + n,
                    max: EXACT_MAX_TOTAL,
                });
            }
            !has_ties
        }
        MethodChoice::Normal => false,
    };

    let (p_value, method) = if exact {
        let dist = ExactU::new(m, n);
        let wi = w.round() as usize; // integral without ties
        let p = match opt.alternative {
            Alternative::Less => dist.cdf(wi),
            Alternative::Greater => dist.sf(wi),
            Alternative::TwoSided => (2.0 * dist.cdf(wi).min(dist.sf(wi))).min(1.0),
        };
        (p, TestMethod::Exact)
    } else {
        let (mf, nf) = (m as f64, n as f64);
        let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum::<f64>()
            / ((mf + nf) * (mf + nf - 1.0));
        let sigma = (mf * nf / 12.0 * ((mf + nf + 1.0) - tie_term)).sqrt();
        let d = w - mf * nf / 2.0;
        let corr = if !opt.continuity {
            0.0
        } else {
            match opt.alternative {
                Alternative::TwoSided => 0.5 * d.signum() * f64::from(d != 0.0),
                Alternative::Greater => 0.5,
                Alternative::Less => -0.5,
            }
        };
        if sigma == 0.0 || !sigma.is_finite() {
            // Every observation equal (or a single pooled value): no evidence either way.
            (
                1.0,
                TestMethod::Normal {
                    z: 0.0,
                    continuity: opt.continuity,
                },
            )
        } else {
            let z = (d - corr) / sigma;
            let p = match opt.alternative {
                Alternative::Less => normal_cdf(z),
                Alternative::Greater => normal_cdf(-z),
                Alternative::TwoSided => (2.0 * normal_cdf(z).min(normal_cdf(-z))).min(1.0),
            };
            (
                p,
                TestMethod::Normal {
                    z,
                    continuity: opt.continuity,
                },
            )
        }
    };
    Ok(RankSumTest {
        w,
        rank_sum_x,
        n_x: m,
        n_y: n,
        p_value,
        alternative: opt.alternative,
        method,
        ties: has_ties,
    })
}

/// Exact null distribution of U for sample sizes (m, n): `counts[u]` is the number of
/// the C(m+n, m) equally likely rank arrangements giving U = u.
pub(crate) struct ExactU {
    counts: Vec<u128>,
    total: u128,
}

impl ExactU {
    /// Recurrence c(i, j, u) = c(i−1, j, u−j) + c(i, j−1, u): the largest pooled value
    /// is either an x (beating all j y's) or a y (beating none). O(m²n²/4) additions.
    pub(crate) fn new(m: usize, n: usize) -> ExactU {
        // U's distribution is symmetric in (m, n); iterate over the smaller one.
        let (m, n) = if m <= n { (m, n) } else { (n, m) };
        let mut prev: Vec<Vec<u128>> = (0..=n).map(|_| vec![1u128]).collect(); // i = 0
        for i in 1..=m {
            let mut cur: Vec<Vec<u128>> = Vec::with_capacity(n + 1);
            cur.push(vec![1u128]); // j = 0
            for j in 1..=n {
                let mut c = vec![0u128; i * j + 1];
                for (u, v) in prev[j].iter().enumerate() {
                    c[u + j] += v;
                }
                for (u, v) in cur[j - 1].iter().enumerate() {
                    c[u] += v;
                }
                cur.push(c);
            }
            prev = cur;
        }
        let counts = prev.pop().unwrap_or_else(|| vec![1]);
        let total = counts.iter().sum();
        ExactU { counts, total }
    }

    /// P(U ≤ u).
    pub(crate) fn cdf(&self, u: usize) -> f64 {
        let s: u128 = self.counts.iter().take(u + 1).sum();
        s as f64 / self.total as f64
    }

    /// P(U ≥ u).
    pub(crate) fn sf(&self, u: usize) -> f64 {
        let s: u128 = self.counts.iter().skip(u).sum();
        s as f64 / self.total as f64
    }

    /// R's qwilcox(p) for p ≤ ½: smallest q with P(U ≤ q) ≥ p − 10ε (R's fuzz, so a
    /// probability that is exactly attainable is not missed by rounding).
    pub(crate) fn quantile(&self, p: f64) -> usize {
        let target = p - 10.0 * f64::EPSILON;
        let mut acc: u128 = 0;
        for (u, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc as f64 / self.total as f64 >= target {
                return u;
            }
        }
        self.counts.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_counts_small_case_by_hand() {
        // m = 2, n = 2: 6 arrangements; U values 0,1,2,2,3,4 (listing which ranks x takes:
        // {1,2}:0 {1,3}:1 {1,4}:2 {2,3}:2 {2,4}:3 {3,4}:4).
        let d = ExactU::new(2, 2);
        assert_eq!(d.counts, vec![1, 1, 2, 1, 1]);
        assert_eq!(d.total, 6);
    }

    #[test]
    fn exact_total_is_binomial() {
        // C(98, 49) = 25477612258980856902730428600 (Python math.comb(98, 49)).
        let d = ExactU::new(49, 49);
        assert_eq!(d.total, 25_477_612_258_980_856_902_730_428_600u128);
    }

    #[test]
    fn midranks() {
        assert_eq!(ranks(&[10.0, 20.0, 20.0, 5.0]), vec![2.0, 3.5, 3.5, 1.0]);
    }
}
