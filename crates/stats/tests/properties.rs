//! Property tests. The exact p-value is checked against a brute-force permutation test
//! written here (enumerating every way to choose which pooled values are "x"), which
//! shares nothing with the library's counting recurrence.

use proptest::prelude::*;
use wattio_stats::*;

/// P(U' >= u) over all C(m+n, m) relabelings of the pooled sample, by enumeration.
fn brute_force_greater(x: &[f64], y: &[f64]) -> f64 {
    let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    let (m, total_n) = (x.len(), pooled.len());
    let u_of = |xs: &[f64], ys: &[f64]| -> usize {
        xs.iter()
            .map(|a| ys.iter().filter(|b| a > *b).count())
            .sum()
    };
    let observed = u_of(x, y);
    let (mut hit, mut all) = (0u64, 0u64);
    for mask in 0u32..(1 << total_n) {
        if mask.count_ones() as usize != m {
            continue;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (i, v) in pooled.iter().enumerate() {
            if mask & (1 << i) != 0 {
                a.push(*v)
            } else {
                b.push(*v)
            }
        }
        all += 1;
        if u_of(&a, &b) >= observed {
            hit += 1;
        }
    }
    hit as f64 / all as f64
}

fn distinct_sample() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    // Distinct integers shuffled into two groups: no ties by construction.
    (1usize..8, 1usize..8).prop_flat_map(|(m, n)| {
        Just((0..(m + n) as i32).collect::<Vec<_>>())
            .prop_shuffle()
            .prop_map(move |v| {
                let f: Vec<f64> = v.iter().map(|&i| f64::from(i) * 0.37 + 1.0).collect();
                (f[..m].to_vec(), f[m..].to_vec())
            })
    })
}

proptest! {
    #[test]
    fn exact_matches_enumeration((x, y) in distinct_sample()) {
        let t = rank_sum(&x, &y, Alternative::Greater).unwrap();
        prop_assert_eq!(t.method, TestMethod::Exact);
        let b = brute_force_greater(&x, &y);
        prop_assert!((t.p_value - b).abs() < 1e-12, "{} vs {}", t.p_value, b);
    }

    #[test]
    fn greater_and_less_mirror((x, y) in distinct_sample()) {
        let g = rank_sum(&x, &y, Alternative::Greater).unwrap().p_value;
        let l = rank_sum(&y, &x, Alternative::Less).unwrap().p_value;
        prop_assert!((g - l).abs() < 1e-12);
    }

    #[test]
    fn holm_never_below_raw_and_at_most_one(p in proptest::collection::vec(0.0f64..=1.0, 1..20)) {
        let a = holm(&p).unwrap();
        for (raw, adj) in p.iter().zip(&a) {
            prop_assert!(adj >= raw && *adj <= 1.0);
        }
    }

    #[test]
    fn hl_shift_equivariant(x in proptest::collection::vec(-100.0f64..100.0, 1..15),
                            y in proptest::collection::vec(-100.0f64..100.0, 1..15),
                            c in -50.0f64..50.0) {
        let moved: Vec<f64> = x.iter().map(|v| v + c).collect();
        let a = hodges_lehmann(&x, &y).unwrap();
        let b = hodges_lehmann(&moved, &y).unwrap();
        prop_assert!((b - a - c).abs() < 1e-9);
    }
}
