//! The replay engine: event order, energy integration against traces worked out by hand, and
//! determinism. Numbers are the paper-2004 profile's, written out here: base 1.44 W; microdrive
//! performance idle 0.76 W, standby 0.08 W, I/O 0.065 s + B / 1.3 MB/s at 0.72 W, to standby
//! 0.32 s / 0.3 J, spin-up 0.82 s / 0.9 J; Cisco 350 CAM 1.41 W, PSM 0.39 W, CAM I/O 0.163 s +
//! B / 375 kB/s at 2.08 W, CAM → PSM 0.41 s / 0.53 J.

use wattio_power::{DeviceKind, DiskPolicy, GhostPolicy, IoOp, NetPolicy, Profile};
use wattio_sim::{email_trace, web_trace, Trace, TraceOp, TraceRequest};
use wattio_sim::{CachePolicy, Served, Sim, Strategy};

fn paper() -> Profile {
    Profile::builtin("paper-2004").unwrap()
}

fn trace(reqs: &[(f64, &str, u64, bool)]) -> Trace {
    Trace {
        name: "hand".into(),
        requests: reqs
            .iter()
            .map(|&(t, o, size, cached)| TraceRequest {
                t,
                object: o.to_string(),
                size,
                op: TraceOp::Read,
                cached,
            })
            .collect(),
        memory_cache_bytes: 0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn strategy(cache: CachePolicy, disk: DiskPolicy, net: NetPolicy) -> Strategy {
    Strategy {
        name: "hand".into(),
        cache,
        disk,
        net,
    }
}

/// Static cache, disk to standby after 5 idle seconds, network to PSM after 2: an uncached
/// read (fetched, then written through to the disk), and 10 s later a read of the same object
/// from the disk in standby.
#[test]
fn energy_of_both_devices_by_hand() {
    let p = paper();
    let s = strategy(
        CachePolicy::Static,
        DiskPolicy::FixedTimeout(5.0),
        NetPolicy::Timeout(2.0),
    );
    let tr = trace(&[(0.0, "a", 32768, false), (10.0, "a", 32768, false)]);
    let out = Sim::new(&p, s, 50, &tr).run(&tr);
    let r = &out.result;

    let tn = 0.163 + 32768.0 / 375_000.0; // the fetch, in CAM
    let td = 0.065 + 32768.0 / 1.3e6; // one disk write or read
    let e1 = tn; // response of the first read
    let t1 = e1 + 10.0; // second read issued
    let t_end = t1 + 0.82 + td;
    assert!(close(r.duration_s, t_end), "{} vs {t_end}", r.duration_s);
    assert!(close(r.mean_response_s, (e1 + 0.82 + td) / 2.0));

    let net = 2.08 * tn // fetch
        + 1.41 * 2.0 // CAM until the timeout
        + 0.53 // CAM → PSM
        + 0.39 * (t_end - (e1 + 2.0 + 0.41)); // PSM to the end
    let disk = 0.76 * e1 // performance idle until the write
        + 0.72 * td // write-through
        + 0.76 * 5.0 // idle until the timeout
        + 0.30 // → standby
        + 0.08 * (t1 - (e1 + td + 5.0 + 0.32)) // standby
        + 0.90 // spin-up
        + 0.72 * td; // read
    assert!(close(r.net_energy_j, net), "{} vs {net}", r.net_energy_j);
    assert!(
        close(r.disk_energy_j, disk),
        "{} vs {disk}",
        r.disk_energy_j
    );
    assert!(close(r.energy_j, 1.44 * t_end + disk + net));
    assert_eq!((r.disk_spinups, r.net_ups), (1, 0));
    assert_eq!((r.from_network, r.from_disk), (1, 1));

    // Events in time order, at the times worked out above.
    let (s, n) = (&p.storage, &p.network);
    let expect = [
        (
            e1 + 2.41,
            DeviceKind::Network,
            n.mode_by_name("psm").unwrap(),
        ),
        (
            e1 + td + 5.32,
            DeviceKind::Storage,
            s.mode_by_name("standby").unwrap(),
        ),
        (t1 + 0.82, DeviceKind::Storage, s.high_mode()),
    ];
    assert_eq!(
        out.mode_changes.len(),
        expect.len(),
        "{:?}",
        out.mode_changes
    );
    for (got, (t, dev, mode)) in out.mode_changes.iter().zip(expect) {
        assert!(
            close(got.t, t) && got.device == dev && got.mode == mode,
            "{got:?}"
        );
    }
    // The disk's I/O: the write-through right after the fetch, the read after the spin-up.
    let io: Vec<(IoOp, f64)> = out.disk_io.iter().map(|x| (x.op, x.start)).collect();
    assert_eq!(io.len(), 2);
    assert!(io[0].0 == IoOp::Write && close(io[0].1, e1));
    assert!(io[1].0 == IoOp::Read && close(io[1].1, t1 + 0.82));
}

/// Adaptive cache: a write made while the disk is in standby waits in the queue; a large read
/// that eq. (4) sends to the disk spins it up and is read before the queue is written.
#[test]
fn queued_write_goes_after_the_read_that_spins_the_disk_up() {
    let p = paper();
    let s = strategy(
        CachePolicy::Adaptive(None),
        DiskPolicy::FixedTimeout(5.0),
        NetPolicy::AlwaysHigh,
    );
    let big = 512 * 1024;
    let tr = trace(&[(0.0, "x", 4000, false), (20.0, "big", big, true)]);
    let out = Sim::new(&p, s.clone(), 50, &tr).run(&tr);
    let tn = 0.163 + 4000.0 / 375_000.0;
    // "x" is written through at tn (disk up); the disk is in standby from tn + 0.065 +
    // 4000/1.3e6 + 5.32 on; at 20 + tn the big read spins it up.
    let t1 = tn + 20.0;
    let read = 0.065 + big as f64 / 1.3e6;
    assert_eq!(out.reads[1].served, Served::Disk);
    assert!(close(out.reads[1].end, t1 + 0.82 + read));
    assert_eq!(out.disk_io.len(), 2, "{:?}", out.disk_io);

    // Same, but "x" fetched after the disk went down: its write is queued.
    let tr = trace(&[
        (0.0, "y", 100, true),
        (30.0, "x", 4000, false),
        (31.0, "big", big, true),
    ]);
    let out = Sim::new(&p, s, 50, &tr).run(&tr);
    let io = &out.disk_io;
    assert_eq!(io.len(), 3, "{io:?}");
    assert_eq!((io[1].op, io[1].bytes), (IoOp::Read, big));
    assert_eq!((io[2].op, io[2].bytes), (IoOp::Write, 4000));
    assert!(close(io[2].start, io[1].end), "the flush follows the read");
    let spin_up = out
        .mode_changes
        .iter()
        .find(|m| m.device == DeviceKind::Storage && m.mode == p.storage.high_mode())
        .unwrap();
    assert!(close(io[1].start, spin_up.t));
}

/// Ghost hints spin the disk up between requests: the queued write is written by the power
/// manager's callback at the instant the disk is up, not at the next request.
#[test]
fn flush_happens_when_the_disk_is_up_not_at_the_next_request() {
    let p = paper();
    let s = strategy(
        CachePolicy::Adaptive(Some(GhostPolicy::Paper)),
        DiskPolicy::FixedTimeout(1.0),
        NetPolicy::AlwaysHigh,
    );
    let mut reqs = vec![
        (0.0, "u".to_string(), 1000, false),
        (10.0, "v".into(), 1000, false),
    ];
    for i in 0..10 {
        reqs.push((10.5 + 0.2 * i as f64, format!("s{i}"), 32768, true));
    }
    let refs: Vec<(f64, &str, u64, bool)> = reqs
        .iter()
        .map(|(t, o, s, c)| (*t, o.as_str(), *s, *c))
        .collect();
    let tr = trace(&refs);
    let out = Sim::new(&p, s, 50, &tr).run(&tr);
    assert!(out.result.ghost_transitions >= 1, "{:?}", out.result);
    let up = out
        .mode_changes
        .iter()
        .find(|m| m.device == DeviceKind::Storage && m.mode == p.storage.high_mode())
        .unwrap();
    let write_v = out
        .disk_io
        .iter()
        .find(|x| x.op == IoOp::Write && x.start > 5.0)
        .unwrap();
    assert!(close(write_v.start, up.t), "{write_v:?} vs {up:?}");
    assert!(
        out.reads.iter().all(|r| !close(r.t, up.t)),
        "no request was issued at that instant"
    );
    // Mode changes are notified in time order.
    assert!(out.mode_changes.windows(2).all(|w| w[0].t <= w[1].t));
}

#[test]
fn same_seed_same_replay() {
    let p = paper();
    for (tr, other) in [
        (email_trace(4), email_trace(5)),
        (web_trace(4, false), web_trace(5, false)),
    ] {
        let s = wattio_sim::adaptive(&p, 95, Some(GhostPolicy::Predictive));
        let a = Sim::new(&p, s.clone(), 95, &tr).run(&tr);
        let b = Sim::new(&p, s.clone(), 95, &tr).run(&tr);
        assert_eq!(a, b);
        let c = Sim::new(&p, s, 95, &other).run(&other);
        assert_ne!(a.result, c.result);
    }
}
