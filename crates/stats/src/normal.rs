//! Standard normal distribution.

/// Standard normal CDF Φ(z), accurate to double precision in both tails (via erfc).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// Standard normal quantile Φ⁻¹(p) for p in (0, 1), by bisection on [`normal_cdf`]
/// (≈ 1e-15 absolute; only used for confidence intervals, so speed does not matter).
/// Returns ±infinity at p = 0 / 1 and NaN outside [0, 1].
pub fn normal_quantile(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (-40.0_f64, 40.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(mid) < p {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo < 1e-15 {
            break;
        }
    }
    0.5 * (lo + hi)
}
