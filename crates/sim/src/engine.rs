//! Discrete-event replay on virtual time, driving the library an application links against.
//!
//! Each replay builds what an application would: a [`VirtualClock`], a [`PowerManager`] with the
//! profile's disk and network registered, a [`DiskController`] and a [`NetController`] running
//! the strategy's policies, and a [`CacheManager`] whose store sits on the simulated disk
//! ([`SimulatedDisk`]: every store operation is a disk I/O timed from the profile by the disk
//! controller). The cache manager decides where reads come from ([`wattio_cache::choose_read`],
//! eq. 4) and issues the ghost hints, which go to the controllers' `on_ghost`; its write queue
//! is flushed by the power manager's callback when the disk spins up.
//!
//! The application is closed-loop and single-threaded, as in the paper's replays: each event is
//! issued when the previous one has completed plus the recorded think time (the gap between the
//! two events' recorded times). Between events the engine moves the clock from one device
//! deadline to the next (a transition ending, an idle step falling due) and polls both
//! controllers there, so mode changes, and the callbacks they fire, happen at their own times and
//! in time order. Energy is integrated by the controllers' state machines
//! ([`wattio_power::DeviceMachine`]); total = base power × run time + both devices.

use crate::trace::{Trace, TraceOp, TraceRequest};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use wattio_cache::{
    CacheManager, CacheStatus, GhostNotice, MemStore, ReadSource, Store, StoreError, WriteOptions,
};
use wattio_power::{
    deepest_mode, Clock, DeviceKind, DeviceSpec, DiskController, DiskPolicy, GhostPolicy, IoOp,
    ModeEntered, ModeId, NetController, NetPolicy, PowerManager, Profile, Transfer, VirtualClock,
};
use wattio_progress::Sink;
use wattio_results::RunResult;

/// How the cache chooses where to read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// Fixed hierarchy: cached objects always from disk; writes go straight to disk.
    Static,
    /// Energy-aware choice by eq. (4), deferred writes, optional ghost hints.
    Adaptive(Option<GhostPolicy>),
}

/// A full strategy.
#[derive(Debug, Clone)]
pub struct Strategy {
    /// Name in outputs.
    pub name: String,
    /// Cache behaviour.
    pub cache: CachePolicy,
    /// Disk spin-down policy. STPM takes the replay's knob (the power manager's).
    pub disk: DiskPolicy,
    /// Network policy.
    pub net: NetPolicy,
}

/// One I/O on the simulated disk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskIo {
    /// Read or write.
    pub op: IoOp,
    /// Bytes moved.
    pub bytes: u64,
    /// When the disk started it, seconds.
    pub start: f64,
    /// When it ended, seconds.
    pub end: f64,
}

/// The I/O log of a [`SimulatedDisk`], shared with whoever reads it.
pub type DiskLog = Arc<Mutex<Vec<DiskIo>>>;

fn lock_log(log: &DiskLog) -> std::sync::MutexGuard<'_, Vec<DiskIo>> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cache store on a simulated disk: `S` keeps the objects, and every operation is also an I/O
/// on the disk, timed from its profile by [`DiskController::modelled_io`] (so it waits for a
/// spin-up, restarts the idle timer and draws energy) and logged. A rename or a delete is a
/// write of 0 bytes (one operation's latency).
pub struct SimulatedDisk<S> {
    inner: S,
    disk: Arc<DiskController>,
    log: DiskLog,
}

impl<S: Store> SimulatedDisk<S> {
    /// `inner` on the disk driven by `disk`; the log of its I/O is returned beside it.
    pub fn new(inner: S, disk: Arc<DiskController>) -> (Self, DiskLog) {
        let log = DiskLog::default();
        (
            Self {
                inner,
                disk,
                log: log.clone(),
            },
            log,
        )
    }

    fn io(&self, op: IoOp, bytes: usize) {
        let bytes = bytes as u64;
        let (start, end) = self.disk.modelled_io(op, bytes);
        lock_log(&self.log).push(DiskIo {
            op,
            bytes,
            start,
            end,
        });
    }
}

impl<S: Store> Store for SimulatedDisk<S> {
    fn put_data(&self, name: &str, data: &[u8]) -> Result<(), StoreError> {
        self.inner.put_data(name, data)?;
        self.io(IoOp::Write, data.len());
        Ok(())
    }
    fn put_meta(&self, name: &str, meta: &[u8]) -> Result<(), StoreError> {
        self.inner.put_meta(name, meta)?;
        self.io(IoOp::Write, meta.len());
        Ok(())
    }
    fn get_data(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let d = self.inner.get_data(name)?;
        self.io(IoOp::Read, d.len());
        Ok(d)
    }
    fn get_meta(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let m = self.inner.get_meta(name)?;
        self.io(IoOp::Read, m.len());
        Ok(m)
    }
    fn rename(&self, old: &str, new: &str) -> Result<(), StoreError> {
        self.inner.rename(old, new)?;
        self.io(IoOp::Write, 0);
        Ok(())
    }
    fn delete(&self, name: &str) -> Result<(), StoreError> {
        self.inner.delete(name)?;
        self.io(IoOp::Write, 0);
        Ok(())
    }
}

/// Where a read was served from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Served {
    /// The application's memory cache, or the cache's write queue.
    Memory,
    /// The disk cache.
    Disk,
    /// The server.
    Network,
}

/// One read of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRecord {
    /// When it was issued, seconds.
    pub t: f64,
    /// Object.
    pub object: String,
    /// Where it came from.
    pub served: Served,
    /// When it completed, seconds.
    pub end: f64,
}

/// A mode entered by a device, as the power manager was notified of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeChange {
    /// Clock time of the notification, seconds.
    pub t: f64,
    /// Which device.
    pub device: DeviceKind,
    /// Mode entered.
    pub mode: ModeId,
}

/// Everything one replay produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The summary.
    pub result: RunResult,
    /// Every disk I/O, in issue order.
    pub disk_io: Vec<DiskIo>,
    /// Every read, in trace order.
    pub reads: Vec<ReadRecord>,
    /// Every mode change of both devices, in notification order.
    pub mode_changes: Vec<ModeChange>,
}

/// The application's own memory cache (a browser's): least recently used out, by bytes.
struct MemoryCache {
    entries: VecDeque<(String, u64)>,
    bytes: u64,
    cap: u64,
}

impl MemoryCache {
    fn hit(&mut self, obj: &str) -> bool {
        if self.cap == 0 {
            return false;
        }
        match self.entries.iter().position(|(o, _)| o == obj) {
            Some(i) => {
                if let Some(e) = self.entries.remove(i) {
                    self.entries.push_back(e);
                }
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, obj: &str, size: u64) {
        if self.cap == 0 || size > self.cap {
            return;
        }
        self.entries.push_back((obj.to_string(), size));
        self.bytes += size;
        while self.bytes > self.cap {
            if let Some((_, s)) = self.entries.pop_front() {
                self.bytes -= s;
            }
        }
    }
}

#[derive(Default)]
struct HintCounts {
    issued: AtomicU64,
    transitions: AtomicU64,
}

/// The replay of one trace under one strategy.
pub struct Sim {
    strategy: Strategy,
    base_power_w: f64,
    clock: Arc<VirtualClock>,
    disk: Arc<DiskController>,
    net: Arc<NetController>,
    cache: CacheManager,
    disk_log: DiskLog,
    hints: Arc<HintCounts>,
    modes: Arc<Mutex<Vec<ModeChange>>>,
    /// Cache key of each trace object (trace names may not be valid cache names, e.g. long
    /// URLs).
    keys: HashMap<String, String>,
    mem: MemoryCache,
    reads: Vec<ReadRecord>,
    res: RunResult,
    resp_sum: f64,
}

// The devices come from a profile validated when it was loaded, and the simulated store cannot
// fail: errors from the library here are bugs, not input problems.
const VALID: &str = "simulated devices come from a validated profile";

impl Sim {
    /// Prepare a replay: the library stack on a virtual clock at time 0, with the trace's
    /// initially cached objects in the store.
    pub fn new(profile: &Profile, strategy: Strategy, knob: u8, trace: &Trace) -> Self {
        let clock = Arc::new(VirtualClock::new());
        let pm = Arc::new(
            PowerManager::new(clock.clone(), profile.base_power_w, knob.min(100)).expect(VALID),
        );
        let (s, n) = (&profile.storage, &profile.network);
        let disk_h = pm.register_device(s.clone(), s.high_mode()).expect(VALID);
        let net_h = pm
            .register_device(n.clone(), strategy.net.initial_mode(n))
            .expect(VALID);
        let modes: Arc<Mutex<Vec<ModeChange>>> = Arc::default();
        for (h, spec) in [(disk_h, s), (net_h, n)] {
            for m in 0..spec.modes.len() {
                let (log, clock, device) = (modes.clone(), clock.clone(), spec.kind);
                pm.register_callback(
                    h,
                    ModeId(m),
                    Sink::new(move |e: &ModeEntered| {
                        let mode = e.mode;
                        let t = clock.now();
                        let mut g = log.lock().unwrap_or_else(|p| p.into_inner());
                        g.push(ModeChange { t, device, mode });
                    }),
                )
                .expect(VALID);
            }
        }
        let ghost = match strategy.cache {
            CachePolicy::Adaptive(g) => g,
            CachePolicy::Static => None,
        };
        let disk = Arc::new(
            DiskController::new(pm.clone(), disk_h, strategy.disk.clone(), ghost).expect(VALID),
        );
        let net = Arc::new(NetController::new(pm.clone(), net_h, strategy.net).expect(VALID));

        // The first line naming an object says whether it is cached at the start, and its size.
        let mut keys = HashMap::new();
        let store = MemStore::new();
        for r in &trace.requests {
            if keys.contains_key(&r.object) {
                continue;
            }
            let key = format!("o{}", keys.len());
            if r.cached {
                store
                    .put_data(&key, &vec![0; r.size as usize])
                    .expect(VALID);
            }
            keys.insert(r.object.clone(), key);
        }
        let stored = store.entries();
        let (store, disk_log) = SimulatedDisk::new(store, disk.clone());
        let writes = WriteOptions {
            defer: matches!(strategy.cache, CachePolicy::Adaptive(_)),
            ..WriteOptions::default()
        };
        let cache =
            CacheManager::with_store(Box::new(store), stored, &writes, pm.clone(), disk_h, net_h)
                .expect(VALID);
        let hints = Arc::new(HintCounts::default());
        if ghost.is_some() {
            let (d, nc, counts) = (disk.clone(), net.clone(), hints.clone());
            cache.set_ghost_sink(Sink::new(move |g: &GhostNotice| {
                counts.issued.fetch_add(1, Ordering::Relaxed);
                let fired = match g.to {
                    ReadSource::Disk => d.on_ghost(g.hint),
                    ReadSource::Network => nc.on_ghost(g.hint),
                };
                if fired.expect(VALID) {
                    counts.transitions.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let ghost_name = match strategy.cache {
            CachePolicy::Static => "-".to_string(),
            CachePolicy::Adaptive(None) => "off".to_string(),
            CachePolicy::Adaptive(Some(g)) => g.name().to_string(),
        };
        let res = RunResult {
            strategy: strategy.name.clone(),
            knob,
            ghost_hints: ghost_name,
            mean_response_s: 0.0,
            energy_j: 0.0,
            duration_s: 0.0,
            disk_energy_j: 0.0,
            net_energy_j: 0.0,
            reads: 0,
            from_disk: 0,
            from_network: 0,
            from_memory: 0,
            disk_spinups: 0,
            net_ups: 0,
            ghost_hints_issued: 0,
            ghost_transitions: 0,
            energy_kind: format!("simulated (estimated from device profile {})", profile.name),
        };
        Sim {
            strategy,
            base_power_w: profile.base_power_w,
            clock,
            disk,
            net,
            cache,
            disk_log,
            hints,
            modes,
            keys,
            mem: MemoryCache {
                entries: VecDeque::new(),
                bytes: 0,
                cap: trace.memory_cache_bytes,
            },
            reads: Vec::new(),
            res,
            resp_sum: 0.0,
        }
    }

    fn poll(&self) {
        self.disk.poll().expect(VALID);
        self.net.poll().expect(VALID);
    }

    /// Move the clock to `until`, stopping at every device deadline on the way (in time order)
    /// to poll the controllers there.
    fn settle(&self, until: f64) {
        loop {
            let next = [self.disk.next_deadline(), self.net.next_deadline()]
                .into_iter()
                .flatten()
                .fold(f64::INFINITY, f64::min);
            if next > until {
                break;
            }
            self.clock.advance_to(next);
            // Polling takes every step due by now, so the next deadline is later.
            self.poll();
        }
        self.clock.advance_to(until);
        self.poll();
    }

    fn key(&self, r: &TraceRequest) -> String {
        self.keys[&r.object].clone()
    }

    fn transfer(&self, op: IoOp, bytes: u64) -> f64 {
        self.net
            .modelled_transfer(Transfer {
                op,
                bytes,
                foreground: true,
            })
            .1
    }

    /// Fetch from the server, then keep a copy in the cache (the user waits for the fetch only).
    fn fetch_and_store(&self, op: IoOp, r: &TraceRequest) -> f64 {
        let end = self.transfer(op, r.size);
        self.settle(end);
        self.cache
            .put_data(&self.key(r), vec![0; r.size as usize])
            .expect(VALID);
        end
    }

    /// `GetData`: from the disk (the read in the disk's log) or, still queued, from memory.
    fn get_cached(&self, t: f64, key: &str) -> (Served, f64) {
        let before = lock_log(&self.disk_log).len();
        self.cache.get_data(key).expect(VALID);
        let log = lock_log(&self.disk_log);
        match log[before..].iter().find(|io| io.op == IoOp::Read) {
            Some(io) => (Served::Disk, io.end),
            None => (Served::Memory, t),
        }
    }

    fn read(&mut self, t: f64, r: &TraceRequest) -> f64 {
        self.res.reads += 1;
        let (served, end) = if self.mem.hit(&r.object) {
            (Served::Memory, t)
        } else {
            let key = self.key(r);
            let status = self.cache.cache_status(&key).expect(VALID);
            let adaptive = matches!(self.strategy.cache, CachePolicy::Adaptive(_));
            let got = match status {
                CacheStatus::NotPresent => (Served::Network, self.fetch_and_store(IoOp::Read, r)),
                CacheStatus::NetworkPreferred { .. } if adaptive => {
                    (Served::Network, self.transfer(IoOp::Read, r.size))
                }
                _ => self.get_cached(t, &key),
            };
            self.mem.insert(&r.object, r.size);
            got
        };
        match served {
            Served::Memory => self.res.from_memory += 1,
            Served::Disk => self.res.from_disk += 1,
            Served::Network => self.res.from_network += 1,
        }
        self.reads.push(ReadRecord {
            t,
            object: r.object.clone(),
            served,
            end,
        });
        end
    }

    /// Replay the whole trace.
    pub fn run(mut self, trace: &Trace) -> Replay {
        let reqs = &trace.requests;
        let mut t = 0.0;
        for (i, r) in reqs.iter().enumerate() {
            self.settle(t);
            let end = match r.op {
                TraceOp::Read => {
                    let e = self.read(t, r);
                    self.resp_sum += e - t;
                    e
                }
                // Send to the server (the user waits), keep a copy in the cache.
                TraceOp::Write => self.fetch_and_store(IoOp::Write, r),
            };
            let think = reqs.get(i + 1).map(|n| (n.t - r.t).max(0.0)).unwrap_or(0.0);
            t = end + think;
        }
        self.settle(t);
        // Write what is still queued: its energy belongs to the run.
        self.cache.flush();
        let t_end = t
            .max(self.disk.counters().busy_until)
            .max(self.net.counters().busy_until);
        self.settle(t_end);
        let (disk, net) = (self.disk.counters(), self.net.counters());
        let (disk_j, net_j) = (disk.energy_j, net.energy_j);
        let res = &mut self.res;
        res.duration_s = t_end;
        res.disk_energy_j = disk_j;
        res.net_energy_j = net_j;
        res.energy_j = self.base_power_w * t_end + disk_j + net_j;
        res.mean_response_s = if res.reads > 0 {
            self.resp_sum / res.reads as f64
        } else {
            0.0
        };
        res.disk_spinups = disk.wakeups;
        res.net_ups = net.wakeups;
        res.ghost_hints_issued = self.hints.issued.load(Ordering::Relaxed);
        res.ghost_transitions = self.hints.transitions.load(Ordering::Relaxed);
        let disk_io = lock_log(&self.disk_log).clone();
        let mode_changes = self.modes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Replay {
            result: self.res.clone(),
            disk_io,
            reads: std::mem::take(&mut self.reads),
            mode_changes,
        }
    }
}

/// Replay `trace` under `strategy` at `knob`.
pub fn replay(profile: &Profile, strategy: &Strategy, knob: u8, trace: &Trace) -> RunResult {
    Sim::new(profile, strategy.clone(), knob, trace)
        .run(trace)
        .result
}

/// Energy of an idle gap of `g` seconds for the offline oracle: the best of staying in the high
/// mode or a round trip to any low mode, timed so the device is back just in time.
pub(crate) fn oracle_gap_energy(spec: &DeviceSpec, g: f64) -> f64 {
    let high = spec.high_mode();
    let p_hp = spec.modes[high.0].power_w;
    let mut best = p_hp * g;
    for (i, m) in spec.modes.iter().enumerate() {
        let id = ModeId(i);
        if id == high {
            continue;
        }
        if let (Some(d), Some(u)) = (spec.transition(high, id), spec.transition(id, high)) {
            let tt = d.time_s + u.time_s;
            if g >= tt {
                best = best.min(d.energy_j + u.energy_j + m.power_w * (g - tt));
            }
        }
    }
    best
}

/// The offline oracle on the static cache: timing of the never-spin-down run (the oracle is
/// never late), disk idle energy replaced gap by gap with the cheapest of staying up or one round
/// trip to a low mode, timed so the disk is back just in time.
pub fn replay_oracle(profile: &Profile, net: NetPolicy, trace: &Trace) -> RunResult {
    let strat = Strategy {
        name: "static+oracle".into(),
        cache: CachePolicy::Static,
        disk: DiskPolicy::Never,
        net,
    };
    let replay = Sim::new(profile, strat, 0, trace).run(trace);
    let mut r = replay.result;
    let s = &profile.storage;
    let p_hp = s.modes[s.high_mode().0].power_w;
    let mut gaps = Vec::new();
    let mut last = 0.0;
    for DiskIo {
        start: a, end: b, ..
    } in &replay.disk_io
    {
        if *a > last {
            gaps.push(a - last);
        }
        last = last.max(*b);
    }
    if r.duration_s > last {
        gaps.push(r.duration_s - last);
    }
    let delta: f64 = gaps
        .iter()
        .map(|g| oracle_gap_energy(s, *g) - p_hp * g)
        .sum();
    r.disk_energy_j += delta;
    r.energy_j += delta;
    r
}

/// Idle power of the device's deepest mode (its high mode if it has no other).
fn lowest_power_w(spec: &DeviceSpec) -> f64 {
    let m = deepest_mode(spec).unwrap_or_else(|| spec.high_mode());
    spec.modes[m.0].power_w
}

/// The paper's lower bound: idle power with every device in its lowest mode, times the run time
/// of the static cache without power management.
pub fn lower_bound(profile: &Profile, trace: &Trace) -> RunResult {
    let strat = Strategy {
        name: "lower-bound".into(),
        cache: CachePolicy::Static,
        disk: DiskPolicy::Never,
        net: NetPolicy::AlwaysHigh,
    };
    let mut r = replay(profile, &strat, 100, trace);
    let p =
        profile.base_power_w + lowest_power_w(&profile.storage) + lowest_power_w(&profile.network);
    r.energy_j = p * r.duration_s;
    r.disk_energy_j = 0.0;
    r.net_energy_j = 0.0;
    r.ghost_hints = "-".into();
    r
}

/// Count objects in a trace by initial cache state (for reports).
pub fn cached_objects(trace: &Trace) -> (usize, usize) {
    let mut m: HashMap<&str, bool> = HashMap::new();
    for r in &trace.requests {
        m.entry(&r.object).or_insert(r.cached);
    }
    (m.values().filter(|c| **c).count(), m.len())
}
