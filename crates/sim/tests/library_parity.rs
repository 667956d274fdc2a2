//! The simulator adds no decision of its own: an application written directly against the
//! library — a `CacheManager` over the durable `FsStore` (on the simulated disk, so I/O takes
//! the profile's time), a `DiskController` and a `NetController` on a `VirtualClock`, ghost
//! hints wired to the controllers as in the `wattio-cache` crate example — makes the same
//! choices as the simulator, read by read, on the same trace.

use std::sync::Arc;
use wattio_cache::{CacheManager, CacheStatus, FsStore, GhostNotice, ReadSource, WriteOptions};
use wattio_power::{
    DiskController, DiskPolicy, GhostPolicy, IoOp, NetController, NetPolicy, PowerManager, Profile,
    Transfer, VirtualClock,
};
use wattio_progress::Sink;
use wattio_sim::{adaptive, Served, Sim, SimulatedDisk};
use wattio_sim::{email_trace, web_trace, Trace, TraceOp};

/// Where each read came from, replaying `trace` by hand.
fn by_hand(p: &Profile, knob: u8, ghost: GhostPolicy, trace: &Trace) -> Vec<(String, Served)> {
    let clock = Arc::new(VirtualClock::new());
    let pm = Arc::new(PowerManager::new(clock.clone(), p.base_power_w, knob).unwrap());
    let disk_h = pm
        .register_device(p.storage.clone(), p.storage.high_mode())
        .unwrap();
    let net_h = pm
        .register_device(p.network.clone(), NetPolicy::Stpm.initial_mode(&p.network))
        .unwrap();
    let stpm = DiskPolicy::Stpm {
        knob: knob as f64,
        base_power_w: p.base_power_w,
    };
    let disk = Arc::new(DiskController::new(pm.clone(), disk_h, stpm, Some(ghost)).unwrap());
    let net = Arc::new(NetController::new(pm.clone(), net_h, NetPolicy::Stpm).unwrap());

    // The objects cached before the trace starts are already on disk.
    let dir = tempfile::tempdir().unwrap();
    let (fs, _, _) = FsStore::open(dir.path()).unwrap();
    for r in trace.requests.iter().filter(|r| r.cached) {
        if fs.get_data(&r.object).is_err() {
            fs.put_data(&r.object, &vec![7; r.size as usize]).unwrap();
        }
    }
    let (fs, stored, _) = FsStore::open(dir.path()).unwrap();
    let (store, log) = SimulatedDisk::new(fs, disk.clone());
    let cache = CacheManager::with_store(
        Box::new(store),
        stored,
        &WriteOptions::default(),
        pm.clone(),
        disk_h,
        net_h,
    )
    .unwrap();
    let (d, n) = (disk.clone(), net.clone());
    cache.set_ghost_sink(Sink::new(move |g: &GhostNotice| {
        match g.to {
            ReadSource::Disk => d.on_ghost(g.hint),
            ReadSource::Network => n.on_ghost(g.hint),
        }
        .unwrap();
    }));

    // Timers: wake at each controller deadline up to `t`, as a live application's timer would.
    let wait_until = |t: f64| loop {
        let due = [disk.next_deadline(), net.next_deadline()]
            .into_iter()
            .flatten()
            .filter(|d| *d <= t)
            .fold(None, |a: Option<f64>, d| Some(a.map_or(d, |a| a.min(d))));
        clock.advance_to(due.unwrap_or(t));
        disk.poll().unwrap();
        net.poll().unwrap();
        if due.is_none() {
            break;
        }
    };
    let fetch = |op, bytes| {
        net.modelled_transfer(Transfer {
            op,
            bytes,
            foreground: true,
        })
        .1
    };

    let mut served = Vec::new();
    let mut t = 0.0;
    let reqs = &trace.requests;
    for (i, r) in reqs.iter().enumerate() {
        wait_until(t);
        let end = if r.op == TraceOp::Write {
            let end = fetch(IoOp::Write, r.size);
            wait_until(end);
            cache.put_data(&r.object, vec![1; r.size as usize]).unwrap();
            end
        } else {
            let (from, end) = match cache.cache_status(&r.object).unwrap() {
                CacheStatus::NotPresent => {
                    let end = fetch(IoOp::Read, r.size);
                    wait_until(end);
                    cache.put_data(&r.object, vec![2; r.size as usize]).unwrap();
                    (Served::Network, end)
                }
                CacheStatus::NetworkPreferred { .. } => {
                    (Served::Network, fetch(IoOp::Read, r.size))
                }
                CacheStatus::Present { .. } => {
                    let seen = log.lock().unwrap().len();
                    cache.get_data(&r.object).unwrap();
                    let log = log.lock().unwrap();
                    match log[seen..].iter().find(|io| io.op == IoOp::Read) {
                        Some(io) => (Served::Disk, io.end),
                        None => (Served::Memory, t),
                    }
                }
            };
            served.push((r.object.clone(), from));
            end
        };
        let think = reqs.get(i + 1).map_or(0.0, |next| (next.t - r.t).max(0.0));
        t = end + think;
    }
    served
}

#[test]
fn simulator_and_hand_driven_library_choose_the_same_sources() {
    let p = Profile::builtin("paper-2004").unwrap();
    let mut web = web_trace(2, false);
    // The browser's memory cache is the simulator's own (an application feature): off here.
    web.memory_cache_bytes = 0;
    let mut kinds = std::collections::HashSet::new();
    for trace in [email_trace(1), web] {
        for (knob, ghost) in [(50, GhostPolicy::Paper), (99, GhostPolicy::Predictive)] {
            let sim = Sim::new(&p, adaptive(&p, knob, Some(ghost)), knob, &trace).run(&trace);
            let from_sim: Vec<(String, Served)> = sim
                .reads
                .iter()
                .map(|r| (r.object.clone(), r.served))
                .collect();
            let hand = by_hand(&p, knob, ghost, &trace);
            assert_eq!(from_sim, hand, "{} at knob {knob}", trace.name);
            kinds.extend(hand.iter().map(|(_, s)| *s));
            assert!(sim.result.ghost_transitions > 0 || knob == 50);
        }
    }
    // Not vacuous: reads came from the disk, the network and the write queue.
    assert_eq!(kinds.len(), 3, "{kinds:?}");
}
