//! The replay's time and energy accounting against traces small enough to work out by hand
//! (paper-2004 profile: base 1.44 W; disk 0.76/0.34/0.08 W, read 0.72 W, 0.065 s + B/1.3 MB/s;
//! network CAM 1.41 W).

use wattio_power::{DiskPolicy, Profile};
use wattio_sim::{replay, CachePolicy, NetPolicy, Strategy};
use wattio_sim::{Trace, TraceOp, TraceRequest};

fn trace(reqs: &[(f64, &str, u64)]) -> Trace {
    Trace {
        name: "hand".into(),
        requests: reqs
            .iter()
            .map(|(t, o, s)| TraceRequest {
                t: *t,
                object: o.to_string(),
                size: *s,
                op: TraceOp::Read,
                cached: true,
            })
            .collect(),
        memory_cache_bytes: 0,
    }
}

const T: f64 = 0.065 + 32768.0 / 1.3e6; // one 32 KB disk read: 0.090206… s

#[test]
fn one_read_no_power_management() {
    let p = Profile::builtin("paper-2004").unwrap();
    let s = Strategy {
        name: "x".into(),
        cache: CachePolicy::Static,
        disk: DiskPolicy::Never,
        net: NetPolicy::AlwaysHigh,
    };
    let r = replay(&p, &s, 50, &trace(&[(0.0, "a", 32768)]));
    assert!((r.duration_s - T).abs() < 1e-12);
    assert!((r.mean_response_s - T).abs() < 1e-12);
    // (1.44 base + 0.72 disk reading + 1.41 CAM) × T
    assert!((r.energy_j - 3.57 * T).abs() < 1e-9, "{}", r.energy_j);
}

#[test]
fn two_reads_through_the_stpm_ladder() {
    let p = Profile::builtin("paper-2004").unwrap();
    let s = Strategy {
        name: "x".into(),
        cache: CachePolicy::Static,
        disk: DiskPolicy::Stpm {
            knob: 50.0,
            base_power_w: 1.44,
        },
        net: NetPolicy::AlwaysHigh,
    };
    // Second read 10 s (think time) after the first completes.
    let r = replay(&p, &s, 50, &trace(&[(0.0, "a", 32768), (10.0, "b", 32768)]));
    let lpi_at = 2.548_571_428_571_428_5; // eq. 3, K = 50 (see eq.rs)
    let sb_at = 4.349_411_764_705_882;
    // Timeline: read [0, T]; idle; LPI transition [T+2.5486, +0.16]; LPI; standby transition
    // [T+4.3494, +0.32]; standby until the request at T+10; spin-up 0.82 s; read T.
    let dur = T + 10.0 + 0.82 + T;
    assert!((r.duration_s - dur).abs() < 1e-9, "{}", r.duration_s);
    assert!((r.mean_response_s - (T + (0.82 + T)) / 2.0).abs() < 1e-9);
    let disk = 0.72 * T // first read
        + 0.76 * lpi_at // performance idle
        + 0.15 // → LPI
        + 0.34 * (sb_at - lpi_at - 0.16) // LPI
        + 0.30 // → standby
        + 0.08 * (10.0 - sb_at - 0.32) // standby
        + 0.90 // spin-up
        + 0.72 * T; // second read
    assert!(
        (r.disk_energy_j - disk).abs() < 1e-9,
        "{} vs {disk}",
        r.disk_energy_j
    );
    assert!((r.energy_j - (disk + (1.44 + 1.41) * dur)).abs() < 1e-9);
    assert_eq!(r.disk_spinups, 1);
}
