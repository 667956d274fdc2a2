//! Replay properties: determinism, energy never negative, time never goes back, sanity of the
//! baselines against each other.

use proptest::prelude::*;
use wattio_power::Profile;
use wattio_sim::{email_trace, web_trace};
use wattio_sim::{replay_all, GhostSelection, RunResult};

/// The fixed spin-down timeout of the baseline (`wattio cache`'s default).
const THIRTY_S: std::time::Duration = std::time::Duration::from_secs(30);

fn get<'a>(rs: &'a [RunResult], name: &str) -> &'a RunResult {
    rs.iter()
        .find(|r| r.strategy == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn same_seed_same_result() {
    let p = Profile::builtin("paper-2004").unwrap();
    for seed in [1, 2] {
        let a = replay_all(
            &p,
            &web_trace(seed, false),
            50,
            GhostSelection::All,
            THIRTY_S,
        );
        let b = replay_all(
            &p,
            &web_trace(seed, false),
            50,
            GhostSelection::All,
            THIRTY_S,
        );
        assert_eq!(a, b);
    }
    let a = replay_all(&p, &email_trace(1), 95, GhostSelection::All, THIRTY_S);
    let c = replay_all(&p, &email_trace(2), 95, GhostSelection::All, THIRTY_S);
    assert_ne!(a, c, "different seeds give different traces");
}

#[test]
fn baselines_order_as_theory_says() {
    let p = Profile::builtin("paper-2004").unwrap();
    for tr in [email_trace(1), web_trace(1, false), web_trace(1, true)] {
        let rs = replay_all(&p, &tr, 50, GhostSelection::All, THIRTY_S);
        let lb = get(&rs, "lower-bound");
        let nopm = get(&rs, "static+no-pm");
        let oracle = get(&rs, "static+oracle");
        for r in &rs {
            assert!(
                r.energy_j >= lb.energy_j * 0.999,
                "{} below the lower bound: {} < {}",
                r.strategy,
                r.energy_j,
                lb.energy_j
            );
        }
        // The oracle never pays a spin-up delay and never uses more energy than never spinning down.
        assert!(oracle.energy_j <= nopm.energy_j + 1e-9);
        assert!((oracle.mean_response_s - get(&rs, "static+no-pm").mean_response_s).abs() < 0.2);
        // No PM at all is the fastest static strategy.
        assert!(nopm.mean_response_s <= get(&rs, "static").mean_response_s + 1e-9);
        for r in &rs {
            eprintln!("{:>8} {:<28} rt {:.3}s E {:.1}J dur {:.1}s spinups {} hints {} gt {} disk {} net {} mem {}", tr.name, r.strategy, r.mean_response_s, r.energy_j, r.duration_s, r.disk_spinups, r.ghost_hints_issued, r.ghost_transitions, r.from_disk, r.from_network, r.from_memory);
        }
    }
}

#[test]
fn knob_100_is_no_power_management() {
    let p = Profile::builtin("paper-2004").unwrap();
    let tr = email_trace(3);
    let rs = replay_all(&p, &tr, 100, GhostSelection::Off, THIRTY_S);
    let a = get(&rs, "adaptive");
    assert_eq!(a.disk_spinups, 0, "disk never left its high mode");
    assert_eq!(a.net_ups, 0, "network stayed in CAM");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    /// Any seed, knob and profile: energies are positive, the run lasts at least the trace, and
    /// responses are non-negative.
    #[test]
    fn energy_positive_and_time_forward(seed in 0u64..1000, knob in 0u8..=100, prof in 0usize..4, wl in 0usize..3) {
        let p = Profile::builtin(Profile::builtin_names()[prof]).unwrap();
        let tr = match wl { 0 => email_trace(seed), 1 => web_trace(seed, false), _ => web_trace(seed, true) };
        let span = tr.requests.last().unwrap().t - tr.requests[0].t;
        for r in replay_all(&p, &tr, knob, GhostSelection::All, THIRTY_S) {
            prop_assert!(r.energy_j > 0.0 && r.energy_j.is_finite(), "{}: {}", r.strategy, r.energy_j);
            prop_assert!(r.disk_energy_j >= 0.0 && r.net_energy_j >= 0.0);
            prop_assert!(r.duration_s >= span - 1e-9);
            prop_assert!(r.mean_response_s >= 0.0);
        }
    }
}
