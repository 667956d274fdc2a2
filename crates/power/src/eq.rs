//! The paper's equations (1)–(4), as plain functions so they can be checked by hand.
//!
//! Units: seconds, watts, joules. `knob` is the global performance/energy knob `K` in 0..=100:
//! `K` is the utility of one second of interactive delay saved and `100 − K` the utility of one
//! joule saved (paper §4.2.2).

/// Equation (1): device-only break-even time, `T_be = (E_up + E_down) / (P_hp − P_lp)`.
///
/// Returns `+∞` when the low-power mode saves nothing (`P_hp ≤ P_lp`).
pub(crate) fn break_even_eq1(e_up: f64, e_down: f64, p_hp: f64, p_lp: f64) -> f64 {
    let dp = p_hp - p_lp;
    if dp <= 0.0 {
        return f64::INFINITY;
    }
    (e_up + e_down) / dp
}

/// Equation (2): energy cost of a round trip to a low-power mode for the whole machine,
/// `C_E = E_down − P_hp·T_down + E_up + P_base·T_up`.
///
/// The down transition happens while the machine is idle, so only the disk's extra energy over
/// staying in the high-power mode counts; the up transition delays the next request, so the
/// whole machine's base power is charged for `T_up`.
pub(crate) fn energy_cost_eq2(
    e_down: f64,
    p_hp: f64,
    t_down: f64,
    e_up: f64,
    p_base: f64,
    t_up: f64,
) -> f64 {
    e_down - p_hp * t_down + e_up + p_base * t_up
}

/// Equation (3): knob-weighted break-even time,
/// `T_be = (T_up·K + C_E·(100 − K)) / ((P_hp − P_lp)·(100 − K))`.
///
/// At `K = 100` (performance only) or when the low mode saves no power the result is `+∞`:
/// never transition down.
pub(crate) fn break_even_eq3(t_up: f64, c_e: f64, p_hp: f64, p_lp: f64, knob: f64) -> f64 {
    let dp = p_hp - p_lp;
    let we = 100.0 - knob;
    if dp <= 0.0 || we <= 0.0 {
        return f64::INFINITY;
    }
    ((t_up * knob + c_e * we) / (dp * we)).max(0.0)
}

/// The numerator of equation (3): the knob-weighted cost (utility units) of one round trip
/// through the low-power mode. A ghost-hint total must exceed it before the device spins up
/// (our reading of "the break-even threshold, calculated in Equation 3", §4.4).
pub(crate) fn round_trip_cost_utility(t_up: f64, c_e: f64, knob: f64) -> f64 {
    t_up * knob + c_e * (100.0 - knob)
}

/// Equation (4): `Cost_total = Exp_time·K + Exp_energy·(100 − K)`.
pub fn weighted_cost_eq4(exp_time: f64, exp_energy: f64, knob: f64) -> f64 {
    exp_time * knob + exp_energy * (100.0 - knob)
}

#[cfg(test)]
mod tests {
    //! Expected values are worked out by hand from the paper's Figures 1–2 (Hitachi microdrive,
    //! iPAQ base power 1.44 W); the arithmetic is in the comments.
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn eq1_microdrive_standby() {
        // (0.9 + 0.3) / (0.76 − 0.08) = 1.2 / 0.68 = 1.764705882…
        assert!(close(break_even_eq1(0.9, 0.3, 0.76, 0.08), 1.2 / 0.68));
        assert!((break_even_eq1(0.9, 0.3, 0.76, 0.08) - 1.764_705_882).abs() < 1e-8);
    }

    #[test]
    fn eq1_no_saving_is_infinite() {
        assert!(break_even_eq1(1.0, 1.0, 0.5, 0.5).is_infinite());
        assert!(break_even_eq1(1.0, 1.0, 0.4, 0.5).is_infinite());
    }

    #[test]
    fn eq2_microdrive_standby() {
        // 0.3 − 0.76·0.32 + 0.9 + 1.44·0.82 = 0.3 − 0.2432 + 0.9 + 1.1808 = 2.1376 J
        assert!(close(
            energy_cost_eq2(0.3, 0.76, 0.32, 0.9, 1.44, 0.82),
            2.1376
        ));
    }

    #[test]
    fn eq2_microdrive_low_power_idle() {
        // 0.15 − 0.76·0.16 + 0.31 + 1.44·0.30 = 0.15 − 0.1216 + 0.31 + 0.432 = 0.7704 J
        assert!(close(
            energy_cost_eq2(0.15, 0.76, 0.16, 0.31, 1.44, 0.30),
            0.7704
        ));
    }

    #[test]
    fn eq3_microdrive_standby_knob_50() {
        // (0.82·50 + 2.1376·50) / (0.68·50) = (41 + 106.88) / 34 = 4.349411764…
        let t = break_even_eq3(0.82, 2.1376, 0.76, 0.08, 50.0);
        assert!((t - 4.349_411_764_7).abs() < 1e-9, "{t}");
    }

    #[test]
    fn eq3_microdrive_lpi_knob_50() {
        // (0.30·50 + 0.7704·50) / (0.42·50) = (15 + 38.52) / 21 = 2.548571428…
        let t = break_even_eq3(0.30, 0.7704, 0.76, 0.34, 50.0);
        assert!((t - 2.548_571_428_6).abs() < 1e-9, "{t}");
    }

    #[test]
    fn eq3_knob_0_is_energy_only_and_99_is_long() {
        // K = 0: C_E / ΔP = 2.1376 / 0.68 = 3.143529411…
        assert!((break_even_eq3(0.82, 2.1376, 0.76, 0.08, 0.0) - 3.143_529_411_8).abs() < 1e-9);
        // K = 99: (0.82·99 + 2.1376·1) / (0.68·1) = (81.18 + 2.1376) / 0.68 = 122.525882…
        assert!((break_even_eq3(0.82, 2.1376, 0.76, 0.08, 99.0) - 122.525_882_352_9).abs() < 1e-6);
        assert!(break_even_eq3(0.82, 2.1376, 0.76, 0.08, 100.0).is_infinite());
    }

    #[test]
    fn eq3_grows_with_knob() {
        let mut last = 0.0;
        for k in 0..100 {
            let t = break_even_eq3(0.82, 2.1376, 0.76, 0.08, k as f64);
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn round_trip_cost_matches_eq3_numerator() {
        // 0.82·50 + 2.1376·50 = 147.88
        assert!(close(round_trip_cost_utility(0.82, 2.1376, 50.0), 147.88));
    }

    #[test]
    fn eq4_weights() {
        // 0.25 s and 0.9 J at K = 50: 12.5 + 45 = 57.5
        assert!(close(weighted_cost_eq4(0.25, 0.9, 50.0), 57.5));
        assert!(close(weighted_cost_eq4(0.25, 0.9, 100.0), 25.0));
        assert!(close(weighted_cost_eq4(0.25, 0.9, 0.0), 90.0));
    }
}
