//! # wattio-stats
//!
//! The statistics of the measurement-overhead protocol of the RAPL paper (section V,
//! appendices A–B), as a small dependency-free library that every wattio part uses:
//!
//! * [`quantile`] (R's **type 7**, the default of R and NumPy), [`median`], [`Summary`]
//!   (min, q1, median, q3, max, mean, IQR);
//! * outlier removal with the paper's fences `[q1 − 3·IQR, q3 + 3·IQR]`
//!   ([`remove_outliers`], [`outlier_mask`], [`PAPER_IQR_FACTOR`]);
//! * the Wilcoxon rank-sum / Mann–Whitney U test ([`rank_sum`], [`rank_sum_with`]) with
//!   one- and two-sided alternatives, exact null distribution for small samples without
//!   ties, and the normal approximation with tie and continuity correction otherwise —
//!   the same rules and the same statistic `W` as R's `wilcox.test`;
//! * the Hodges–Lehmann location shift with a confidence interval ([`hodges_lehmann`],
//!   [`hodges_lehmann_ci`]);
//! * the Holm–Bonferroni step-down correction ([`holm`], [`holm_reject`]);
//! * [`SplitMix64`], the one seeded generator of wattio, for reproducible run orders and
//!   generated inputs.
//!
//! All functions take `&[f64]`, reject empty or non-finite input with a [`StatsError`]
//! (never panic), and do not reorder the caller's data.
//!
//! ```
//! use wattio_stats::{rank_sum, hodges_lehmann, holm, Alternative};
//! let with_meter = [10.4, 10.6, 10.5, 10.9, 10.7];
//! let without = [10.1, 10.2, 10.0, 10.3, 10.25];
//! // H1: running time is larger with measurement (x = with, y = without).
//! let t = rank_sum(&with_meter, &without, Alternative::Greater).unwrap();
//! assert!(t.p_value < 0.01);
//! let shift = hodges_lehmann(&with_meter, &without).unwrap(); // seconds slower
//! assert!(shift > 0.0);
//! let adjusted = holm(&[t.p_value, 0.2, 0.04]).unwrap();
//! assert_eq!(adjusted.len(), 3);
//! ```

mod descriptive;
mod multiple;
mod normal;
mod ranksum;
mod rng;
mod shift;

pub use descriptive::{
    mean, median, outlier_mask, quantile, quantile_sorted, remove_outliers, std_dev, Fences,
    OutlierSplit, Summary, PAPER_IQR_FACTOR,
};
pub use multiple::{holm, holm_reject};
pub use normal::{normal_cdf, normal_quantile};
pub use ranksum::{
    rank_sum, rank_sum_with, ranks, Alternative, MethodChoice, RankSumOptions, RankSumTest,
    TestMethod, EXACT_AUTO_LIMIT, EXACT_MAX_TOTAL,
};
pub use rng::SplitMix64;
pub use shift::{hodges_lehmann, hodges_lehmann_ci, ShiftEstimate};

/// Why a statistic could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// A sample had no observations.
    #[error("empty sample: at least one observation is needed")]
    Empty,
    /// A sample contained NaN or an infinity.
    #[error("non-finite value {0} in sample: remove NaN/inf before testing")]
    NonFinite(f64),
    /// A probability / confidence level outside its range.
    #[error("probability {0} outside [0, 1]")]
    BadProbability(f64),
    /// The exact distribution was requested for samples too large to enumerate.
    #[error("exact rank-sum distribution needs m + n <= {max} (got {got}); use the normal approximation")]
    TooLargeForExact { got: usize, max: usize },
}

pub(crate) fn check(xs: &[f64]) -> Result<(), StatsError> {
    if xs.is_empty() {
        return Err(StatsError::Empty);
    }
    match xs.iter().find(|v| !v.is_finite()) {
        Some(v) => Err(StatsError::NonFinite(*v)),
        None => Ok(()),
    }
}

pub(crate) fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    // Inputs are checked finite, so total_cmp equals numeric order here.
    v.sort_by(f64::total_cmp);
    v
}
