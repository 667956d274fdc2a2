//! Multiple-comparison correction.

use crate::StatsError;

/// Holm–Bonferroni step-down adjusted p-values, in the input order (same as R's
/// `p.adjust(p, "holm")`): sort ascending, `adj(i) = max_{j≤i} min(1, (m − j + 1)·p(j))`.
/// Reject H_i at level α when `adj_i ≤ α`.
pub fn holm(p: &[f64]) -> Result<Vec<f64>, StatsError> {
    for &v in p {
        if !(0.0..=1.0).contains(&v) {
            return Err(StatsError::BadProbability(v));
        }
    }
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![0.0; m];
    let mut running = 0.0_f64;
    for (rank, &i) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    Ok(out)
}

/// Which hypotheses Holm's procedure rejects at family-wise level `alpha`.
pub fn holm_reject(p: &[f64], alpha: f64) -> Result<Vec<bool>, StatsError> {
    Ok(holm(p)?.into_iter().map(|a| a <= alpha).collect())
}
