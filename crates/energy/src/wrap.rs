//! Counter wrap correction.

use crate::types::{CounterSpec, Wrap};

/// The wrap-corrected difference `new − prev` of a counter that counts `0..=max`.
///
/// Returns `None` when `new` or `prev` exceed `max` (the reading cannot belong to this counter).
pub(crate) fn wrapping_delta(prev: u64, new: u64, max: u64) -> Option<u64> {
    if prev > max || new > max {
        return None;
    }
    if new >= prev {
        Some(new - prev)
    } else {
        // (max - prev) + new + 1 cannot overflow u64 unless max == u64::MAX and the sum is 2^64,
        // which would need new == prev, excluded by this branch.
        Some((max - prev) + new + 1)
    }
}

/// The difference `new − prev` for a counter whose wrap limit is described by `wrap`.
///
/// With [`Wrap::Unknown`] a decrease is an error (`None`), never a made-up correction.
pub(crate) fn delta(prev: u64, new: u64, wrap: Wrap) -> Option<u64> {
    match wrap {
        Wrap::AtMax(max) => wrapping_delta(prev, new, max),
        Wrap::Unknown => new.checked_sub(prev),
        Wrap::LikelyAt(max) if new < prev && prev <= max => wrapping_delta(prev, new, max),
        Wrap::LikelyAt(_) => new.checked_sub(prev),
    }
}

/// The highest power, in watts, assumed for a domain when computing how often to read it.
///
/// 500 W per socket is above every x86 part's TDP (AMD EPYC 9965: 500 W; Xeon 6980P: 500 W); a
/// counter read at [`max_safe_period`] will therefore never wrap twice unseen.
pub(crate) const ASSUMED_MAX_WATTS: f64 = 500.0;

/// The longest period, in seconds, between two reads of `spec` that keeps at most one wrap
/// between readings with a 4× margin: `(max + 1) · unit / ASSUMED_MAX_WATTS / 4`.
///
/// For an MSR counter at ESU 14 (262 144 J range) this is 131 s; for the DRAM quirk unit
/// (2^-16 J, 65 536 J) it is 32.8 s. Counters without a known limit get 1 s.
///
/// Counter wrap correction.
///
/// RAPL counters are monotonic up to a limit and then restart at zero. Between two readings
/// `prev` and `new` of a counter that counts `0..=max`:
///
/// ```text
/// Δ = new − prev                     if new ≥ prev
/// Δ = (max − prev) + new + 1         if new < prev   (exactly one wrap)
/// ```
///
/// (Raffin & Trystram 2024, §IV-B, Table II; the `+ 1` is the step from `max` back to `0`, which
/// the paper's reference tool omits; Alumet's `CounterDiff` in `core/alumet/src/plugin/util.rs`,
/// <https://github.com/alumet-dev/alumet>, counts it.)
///
/// Only one wrap between two readings can be detected. The sampler therefore reads each counter
/// at least every [`max_safe_period`] seconds, a quarter of the time the counter takes to wrap at
/// the highest power the domain can draw.
pub fn max_safe_period(spec: &CounterSpec) -> f64 {
    spec.seconds_to_wrap(ASSUMED_MAX_WATTS)
        .map(|s| s / 4.0)
        .unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Domain;
    use proptest::prelude::*;

    #[test]
    fn hand_worked_cases() {
        assert_eq!(wrapping_delta(10, 25, 100), Some(15));
        // 98 → 99 → 100 → 0 → 1 → 2: five steps.
        assert_eq!(wrapping_delta(98, 2, 100), Some(5));
        assert_eq!(wrapping_delta(100, 0, 100), Some(1));
        assert_eq!(wrapping_delta(0, 0, 100), Some(0));
        assert_eq!(wrapping_delta(0, 101, 100), None);
        // u64 counters (perf): from max-42 to 0 is 43 steps.
        assert_eq!(wrapping_delta(u64::MAX - 42, 0, u64::MAX), Some(43));
        // powercap ESU 14 limit from the notes: 262143328850 µJ.
        let max = 262_143_328_850;
        assert_eq!(wrapping_delta(max - 1_000, 500, max), Some(1_501));
    }

    #[test]
    fn unknown_limit_refuses_decreases() {
        assert_eq!(delta(5, 9, Wrap::Unknown), Some(4));
        assert_eq!(delta(9, 5, Wrap::Unknown), None);
    }

    #[test]
    fn safe_periods_match_the_wrap_ranges() {
        let msr = CounterSpec {
            socket: 0,
            domain: Domain::Package,
            unit_j: 2f64.powi(-14),
            wrap: Wrap::AtMax(u32::MAX as u64),
            origin: String::new(),
        };
        // 262144 J / 500 W / 4 = 131.072 s
        assert!((max_safe_period(&msr) - 131.072).abs() < 1e-9);
    }

    proptest! {
        /// Walk a counter through a long random sequence of increments, each smaller than one
        /// full range, reducing modulo max+1 as hardware does; the corrected deltas must add up
        /// to the true total exactly.
        #[test]
        fn corrected_deltas_sum_to_the_true_energy(
            max in prop_oneof![Just(u32::MAX as u64), Just(262_143_328_850u64), Just(u64::MAX), 1u64..1_000_000],
            start_frac in 0.0f64..1.0,
            steps in prop::collection::vec(0.0f64..1.0, 1..400),
        ) {
            let modulus = max as u128 + 1;
            let mut raw = ((max as f64) * start_frac) as u128 % modulus;
            let mut truth: u128 = 0;
            let mut summed: u128 = 0;
            for s in steps {
                // Any increment below one full range is recoverable.
                let inc = ((max as f64) * s) as u128 % modulus;
                let new = (raw + inc) % modulus;
                truth += inc;
                summed += wrapping_delta(raw as u64, new as u64, max).unwrap() as u128;
                raw = new;
            }
            prop_assert_eq!(summed, truth);
        }

        #[test]
        fn delta_is_never_more_than_one_range(prev in any::<u32>(), new in any::<u32>()) {
            let d = wrapping_delta(prev as u64, new as u64, u32::MAX as u64).unwrap();
            prop_assert!(d <= u32::MAX as u64);
        }
    }
}
