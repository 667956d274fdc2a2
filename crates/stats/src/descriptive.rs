//! Descriptive statistics and the paper's IQR outlier rule.

use crate::{check, sorted, StatsError};

/// The paper's outlier factor: a value is an outlier outside `[q1 − 3·IQR, q3 + 3·IQR]`
/// (RAPL paper, section V-A.4). Tukey's "far out" fence.
pub const PAPER_IQR_FACTOR: f64 = 3.0;

/// Quantile of an unsorted sample, R type 7 (linear interpolation between order
/// statistics at `h = (n − 1)·p`; R's and NumPy's default).
pub fn quantile(xs: &[f64], p: f64) -> Result<f64, StatsError> {
    check(xs)?;
    quantile_sorted(&sorted(xs), p)
}

/// [`quantile`] for data already sorted ascending (not re-checked).
pub fn quantile_sorted(sorted: &[f64], p: f64) -> Result<f64, StatsError> {
    if sorted.is_empty() {
        return Err(StatsError::Empty);
    }
    if !(0.0..=1.0).contains(&p) {
        return Err(StatsError::BadProbability(p));
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Ok(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Median (type 7 at p = 0.5, i.e. the mean of the two middle values for even n).
pub fn median(xs: &[f64]) -> Result<f64, StatsError> {
    quantile(xs, 0.5)
}

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> Result<f64, StatsError> {
    check(xs)?;
    Ok(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (n − 1 denominator); 0 for a single observation.
pub fn std_dev(xs: &[f64]) -> Result<f64, StatsError> {
    let m = mean(xs)?;
    if xs.len() < 2 {
        return Ok(0.0);
    }
    let ss: f64 = xs.iter().map(|v| (v - m) * (v - m)).sum();
    Ok((ss / (xs.len() - 1) as f64).sqrt())
}

/// Five-number summary plus mean, the data of one box in a box plot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// Summarise a sample (quartiles by R type 7).
    pub fn of(xs: &[f64]) -> Result<Summary, StatsError> {
        check(xs)?;
        let s = sorted(xs);
        Ok(Summary {
            n: s.len(),
            min: s[0],
            q1: quantile_sorted(&s, 0.25)?,
            median: quantile_sorted(&s, 0.5)?,
            q3: quantile_sorted(&s, 0.75)?,
            max: s[s.len() - 1],
            mean: s.iter().sum::<f64>() / s.len() as f64,
        })
    }

    /// Interquartile range q3 − q1.
    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }

    /// Outlier fences `[q1 − k·IQR, q3 + k·IQR]`.
    pub fn fences(&self, k: f64) -> Fences {
        Fences {
            low: self.q1 - k * self.iqr(),
            high: self.q3 + k * self.iqr(),
        }
    }
}

/// Closed interval outside which a value is an outlier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fences {
    pub low: f64,
    pub high: f64,
}

impl Fences {
    /// True when `v` lies inside the fences (inclusive).
    pub fn contains(&self, v: f64) -> bool {
        v >= self.low && v <= self.high
    }
}

/// Result of [`remove_outliers`]: kept and removed values in their original order.
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierSplit {
    pub kept: Vec<f64>,
    pub removed: Vec<f64>,
    pub fences: Fences,
}

/// For each value, whether it is kept (inside `[q1 − k·IQR, q3 + k·IQR]`). Use this
/// to filter rows that carry more than the value; `k` is normally [`PAPER_IQR_FACTOR`].
pub fn outlier_mask(xs: &[f64], k: f64) -> Result<(Vec<bool>, Fences), StatsError> {
    let f = Summary::of(xs)?.fences(k);
    Ok((xs.iter().map(|&v| f.contains(v)).collect(), f))
}

/// Split a sample into kept values and outliers by the IQR rule with factor `k`.
pub fn remove_outliers(xs: &[f64], k: f64) -> Result<OutlierSplit, StatsError> {
    let (mask, fences) = outlier_mask(xs, k)?;
    let (mut kept, mut removed) = (Vec::new(), Vec::new());
    for (v, keep) in xs.iter().zip(mask) {
        if keep {
            kept.push(*v)
        } else {
            removed.push(*v)
        }
    }
    Ok(OutlierSplit {
        kept,
        removed,
        fences,
    })
}
