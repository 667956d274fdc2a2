//! Reference tests: every expected number below was computed OUTSIDE wattio, by
//! `tests/reference/gen.py` (SciPy 1.17.1 `mannwhitneyu`, NumPy `quantile`/`median`,
//! statsmodels `multipletests(method="holm")`, and brute-force enumeration for the exact
//! Hodges–Lehmann interval), or comes from a published worked example (R's
//! `?wilcox.test` example after Hollander & Wolfe 1973, p. 69: W = 35, exact p = 0.1272
//! for "greater"; 95% CI −0.15 … 0.76, estimate 0.305).

use wattio_stats::*;

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "got {a}, expected {b} (tol {tol})");
}

// Hollander & Wolfe (1973) p. 69, as in R's ?wilcox.test.
const HW_X: [f64; 10] = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
const HW_Y: [f64; 5] = [1.15, 0.88, 0.90, 0.74, 1.21];

fn opts(alternative: Alternative, method: MethodChoice, continuity: bool) -> RankSumOptions {
    RankSumOptions {
        alternative,
        method,
        continuity,
    }
}

#[test]
fn hollander_wolfe_exact() {
    let t = rank_sum(&HW_X, &HW_Y, Alternative::Greater).unwrap();
    assert_eq!(t.w, 35.0);
    assert_eq!(t.method, TestMethod::Exact);
    close(t.p_value, 0.1272061272061272, 1e-12);
    let t = rank_sum(&HW_X, &HW_Y, Alternative::Less).unwrap();
    close(t.p_value, 0.8967698967698967, 1e-12);
    let t = rank_sum(&HW_X, &HW_Y, Alternative::TwoSided).unwrap();
    close(t.p_value, 0.2544122544122544, 1e-12);
}

#[test]
fn hollander_wolfe_normal() {
    let cases = [
        (Alternative::Greater, true, 0.12231180256349167),
        (Alternative::Greater, false, 0.11033568095992347), // R doc: 0.1103
        (Alternative::Less, true, 0.9007753482039937),
        (Alternative::Less, false, 0.8896643190400766),
        (Alternative::TwoSided, true, 0.24462360512698333),
        (Alternative::TwoSided, false, 0.22067136191984693),
    ];
    for (alt, cc, p) in cases {
        let t = rank_sum_with(&HW_X, &HW_Y, &opts(alt, MethodChoice::Normal, cc)).unwrap();
        assert_eq!(t.w, 35.0);
        close(t.p_value, p, 1e-12);
    }
}

#[test]
fn ties_use_corrected_normal() {
    let x = [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0];
    let y = [2.0, 3.0, 3.0, 6.0, 7.0, 8.0, 9.0, 5.0, 10.0];
    for (alt, p) in [
        (Alternative::Greater, 0.9741777205255344),
        (Alternative::Less, 0.032244755519575896),
        (Alternative::TwoSided, 0.06448951103915179),
    ] {
        // Auto (and even Exact) must fall back to the normal approximation with ties.
        for m in [MethodChoice::Auto, MethodChoice::Exact] {
            let t = rank_sum_with(&x, &y, &opts(alt, m, true)).unwrap();
            assert!(t.ties);
            assert!(matches!(t.method, TestMethod::Normal { .. }));
            assert_eq!(t.w, 16.5);
            close(t.p_value, p, 1e-12);
        }
    }
}

const XL: [f64; 30] = [
    10.1852, 11.8493, 11.2687, 10.5228, 8.8814, 8.3872, 11.4867, 11.1245, 8.3053, 10.9253, 7.9121,
    11.2975, 11.0028, 11.2656, 9.8573, 10.9905, 10.0379, 8.8891, 10.8482, 10.7791, 10.4713,
    10.5545, 9.6928, 10.3097, 9.9814, 9.3038, 9.423, 10.2368, 8.2349, 10.1142,
];
const YL: [f64; 25] = [
    11.3739, 11.4975, 10.5372, 10.5344, 9.5892, 10.2825, 9.4631, 10.9396, 9.4862, 8.3908, 8.6757,
    9.1379, 11.1756, 8.2009, 10.9329, 9.8769, 9.4617, 10.5726, 12.405, 10.251, 10.0636, 10.2192,
    9.7384, 10.7727, 8.7883,
];

#[test]
fn medium_samples_exact_and_normal() {
    let t = rank_sum(&XL, &YL, Alternative::Greater).unwrap();
    assert_eq!(t.w, 394.0);
    assert_eq!(t.method, TestMethod::Exact);
    close(t.p_value, 0.3782119337922929, 1e-12);
    let t = rank_sum(&XL, &YL, Alternative::TwoSided).unwrap();
    close(t.p_value, 0.7564238675845858, 1e-12);
    let t = rank_sum_with(
        &XL,
        &YL,
        &opts(Alternative::Greater, MethodChoice::Normal, true),
    )
    .unwrap();
    close(t.p_value, 0.3772516102307101, 1e-12);
    let t = rank_sum_with(
        &XL,
        &YL,
        &opts(Alternative::TwoSided, MethodChoice::Normal, true),
    )
    .unwrap();
    close(t.p_value, 0.7545032204614202, 1e-12);
}

#[test]
fn exact_extreme_tail() {
    // Complete separation, m = 12, n = 10: p = 1 / C(22, 10).
    let x: Vec<f64> = (100..112).map(f64::from).collect();
    let y: Vec<f64> = (0..10).map(f64::from).collect();
    let t = rank_sum(&x, &y, Alternative::Greater).unwrap();
    assert_eq!(t.w, 120.0);
    close(t.p_value / 1.546441174924147e-06, 1.0, 1e-12);
}

#[test]
fn large_samples_auto_is_normal() {
    let x: Vec<f64> = (0..60).map(|i| f64::from(i) * 1.5).collect();
    let y: Vec<f64> = (0..55).map(|i| f64::from(i) * 1.5 + 0.25).collect();
    let t = rank_sum(&x, &y, Alternative::TwoSided).unwrap();
    assert!(matches!(t.method, TestMethod::Normal { .. }));
}

#[test]
fn hodges_lehmann_reference() {
    close(hodges_lehmann(&HW_X, &HW_Y).unwrap(), 0.305, 1e-12);
    let ci = hodges_lehmann_ci(&HW_X, &HW_Y, 0.95).unwrap();
    assert!(ci.exact);
    close(ci.estimate, 0.305, 1e-12);
    close(ci.low, -0.15, 1e-12);
    close(ci.high, 0.76, 1e-12);
    close(ci.achieved_confidence, 0.9600399600399601, 1e-12);

    let xa = [2.1, 3.4, 1.9, 5.6, 4.4, 3.3];
    let ya = [1.2, 0.7, 2.8, 1.5, 0.4, 2.2, 1.0];
    close(hodges_lehmann(&xa, &ya).unwrap(), 2.0, 1e-12);
    let ci = hodges_lehmann_ci(&xa, &ya, 0.90).unwrap();
    close(ci.low, 0.7, 1e-12);
    close(ci.high, 3.4, 1e-12);
    close(ci.achieved_confidence, 0.9265734265734266, 1e-12);
    let ci = hodges_lehmann_ci(&xa, &ya, 0.95).unwrap();
    close(ci.low, 0.6, 1e-12);
    close(ci.high, 3.7, 1e-12);
    close(ci.achieved_confidence, 0.965034965034965, 1e-12);
}

#[test]
fn holm_reference() {
    let p = [0.01, 0.04, 0.03, 0.005, 0.5, 0.0001];
    let expected = [0.04, 0.09, 0.09, 0.025, 0.5, 0.0006];
    for (a, e) in holm(&p).unwrap().iter().zip(expected) {
        close(*a, e, 1e-12);
    }
    assert_eq!(
        holm_reject(&p, 0.05).unwrap(),
        vec![true, false, false, true, false, true]
    );
    assert!(holm(&[1.5]).is_err());
}

#[test]
fn quantiles_type7() {
    let q = [3.1, 0.2, 7.7, 4.4, 4.4, 9.0, 1.5];
    for (p, e) in [
        (0.0, 0.2),
        (0.1, 0.9800000000000001),
        (0.25, 2.3),
        (0.5, 4.4),
        (0.75, 6.050000000000001),
        (0.9, 8.22),
        (1.0, 9.0),
    ] {
        close(quantile(&q, p).unwrap(), e, 1e-12);
    }
    close(median(&[4.0, 1.0, 3.0, 2.0]).unwrap(), 2.5, 0.0);
    let s = Summary::of(&q).unwrap();
    close(s.iqr(), 6.050000000000001 - 2.3, 1e-12);
}

#[test]
fn outliers_paper_rule() {
    // NumPy: q1 = 10.25, q3 = 12.75, IQR = 2.5, fences [2.75, 20.25].
    let xs = [10.0, 10.0, 11.0, 11.0, 12.0, 12.0, 13.0, 13.0, 40.0, -20.0];
    let split = remove_outliers(&xs, PAPER_IQR_FACTOR).unwrap();
    close(split.fences.low, 2.75, 1e-12);
    close(split.fences.high, 20.25, 1e-12);
    assert_eq!(split.removed, vec![40.0, -20.0]);
    assert_eq!(split.kept, xs[..8].to_vec());
    assert!(split.fences.contains(20.25) && !split.fences.contains(20.250001));
    let (mask, _) = outlier_mask(&xs, PAPER_IQR_FACTOR).unwrap();
    assert_eq!(mask.iter().filter(|k| !**k).count(), 2);
}

#[test]
fn normal_tails() {
    // Φ(−1.959963984540054) = 0.025 and Φ(−8) = 6.22096057427174e-16 (scipy.stats.norm.cdf).
    close(normal_cdf(-1.959963984540054), 0.025, 1e-15);
    close(normal_cdf(-8.0) / 6.22096057427174e-16, 1.0, 1e-9);
    close(normal_quantile(0.975), 1.959963984540054, 1e-12);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert_eq!(median(&[]), Err(StatsError::Empty));
    assert!(matches!(
        mean(&[1.0, f64::NAN]),
        Err(StatsError::NonFinite(_))
    ));
    assert!(rank_sum(&[], &[1.0], Alternative::Greater).is_err());
    assert!(quantile(&[1.0], 1.5).is_err());
    assert!(hodges_lehmann_ci(&[1.0], &[2.0], 1.0).is_err());
    let big: Vec<f64> = (0..100).map(f64::from).collect();
    let opt = RankSumOptions {
        method: MethodChoice::Exact,
        ..Default::default()
    };
    assert!(matches!(
        rank_sum_with(&big, &big, &opt),
        Err(StatsError::TooLargeForExact { .. })
    ));
    // All values equal: defined, no evidence of a difference.
    let t = rank_sum(&[1.0, 1.0, 1.0], &[1.0, 1.0], Alternative::Greater).unwrap();
    assert_eq!(t.p_value, 1.0);
}

#[test]
fn hodges_lehmann_large_sample_interval() {
    // gen.py, last block: 60 vs 55 distinct values, normal-approximation k = 1300.
    let xs: Vec<f64> = (0..60)
        .map(|i: i32| {
            ((0.37 * f64::from(i) + 0.011 * f64::from(i * i % 7)) * 1000.0).round() / 1000.0
        })
        .collect();
    let ys: Vec<f64> = (0..55)
        .map(|j: i32| {
            ((0.41 * f64::from(j) - 1.3 + 0.013 * f64::from(j * j % 5)) * 1000.0).round() / 1000.0
        })
        .collect();
    let ci = hodges_lehmann_ci(&xs, &ys, 0.95).unwrap();
    assert!(!ci.exact);
    close(ci.estimate, 1.1464999999999996, 1e-9);
    close(ci.low, -1.3659999999999997, 1e-9);
    close(ci.high, 3.660000000000002, 1e-9);
}
