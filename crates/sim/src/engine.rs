//! Discrete-event replay on virtual time.
//!
//! The application is closed-loop and single-threaded, as in the paper's replays: each event is
//! issued when the previous one has completed plus the recorded think time (the gap between the
//! two events' recorded times). Each device has its own timeline: idle power of its mode (or
//! transition energy spread over the transition), plus `(P_io − P_mode)` for each I/O. Total
//! energy = base power × run time + both devices' energy.

use crate::trace::{Op, Request, Trace};
use std::collections::{HashMap, HashSet, VecDeque};
use wattio_cache::{access_cost, AccessCost, Queued, WriteQueue, DEFAULT_CAP_BYTES};
use wattio_power::stpm::{self, Ladder};
use wattio_power::{
    eq, DeviceKind, DeviceSpec, DiskPolicy, GhostAccumulator, GhostDevice, GhostHint, GhostPolicy,
    IoOp, ModeId, NetDecision, NetStpm, Profile, Transfer,
};

/// Network device policy.
#[derive(Debug, Clone)]
pub enum NetPolicy {
    /// Stay in the lowest mode that can transfer (802.11 PSM), or go up on demand if none can.
    StaticLow,
    /// Always in the high mode (no power management).
    AlwaysHigh,
    /// Up on demand, down after this idle time (an LTE tail).
    Timeout(f64),
    /// STPM network module.
    Stpm,
}

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
    /// Disk spin-down policy.
    pub disk: DiskPolicy,
    /// Network policy.
    pub net: NetPolicy,
}

/// Result of one replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunResult {
    /// Strategy name.
    pub strategy: String,
    /// Knob (only meaningful for STPM strategies).
    pub knob: u8,
    /// `off`, `paper`, `predictive`, or `-` for static strategies.
    pub ghost_hints: String,
    /// Mean interactive response time of reads, seconds.
    pub mean_response_s: f64,
    /// Total energy, joules (simulated from the profile: an estimate).
    pub energy_j: f64,
    /// Run time, seconds.
    pub duration_s: f64,
    /// Energy of the storage device, joules.
    pub disk_energy_j: f64,
    /// Energy of the network device, joules.
    pub net_energy_j: f64,
    /// Reads replayed.
    pub reads: usize,
    /// Reads served from the disk cache / network / memory.
    pub from_disk: usize,
    /// Reads served from the network.
    pub from_network: usize,
    /// Reads served from memory (browser memory cache or write queue).
    pub from_memory: usize,
    /// Storage transitions to its high mode.
    pub disk_spinups: u64,
    /// Network transitions to its high mode.
    pub net_ups: u64,
    /// Ghost hints issued.
    pub ghost_hints_issued: u64,
    /// Ghost hints that triggered a transition.
    pub ghost_transitions: u64,
    /// How the energy was obtained.
    pub energy_kind: String,
}

#[derive(Debug, Clone, Copy)]
struct Trans {
    to: ModeId,
    end: f64,
    power: f64,
}

#[derive(Debug, Clone)]
struct Dev {
    spec: DeviceSpec,
    high: ModeId,
    mode: ModeId,
    t: f64,
    energy: f64,
    trans: Option<Trans>,
    busy_until: f64,
    idle_since: f64,
    ladder: Ladder,
    rung: usize,
    low_since: f64,
    ups: u64,
    /// Busy intervals (kept for the oracle).
    busy: Vec<(f64, f64)>,
    record_busy: bool,
    io_during_transition: bool,
}

impl Dev {
    fn new(spec: DeviceSpec, mode: ModeId, ladder: Ladder) -> Self {
        let high = spec.high_mode();
        let io_during_transition = spec.kind == DeviceKind::Network;
        Dev {
            spec,
            high,
            mode,
            t: 0.0,
            energy: 0.0,
            trans: None,
            busy_until: 0.0,
            idle_since: 0.0,
            ladder,
            rung: 0,
            low_since: 0.0,
            ups: 0,
            busy: Vec::new(),
            record_busy: false,
            io_during_transition,
        }
    }

    fn power(&self) -> f64 {
        self.trans
            .map(|t| t.power)
            .unwrap_or(self.spec.modes[self.mode.0].power_w)
    }

    fn integrate(&mut self, to: f64) {
        if to > self.t {
            self.energy += self.power() * (to - self.t);
            self.t = to;
        }
    }

    fn next_rung(&self) -> Option<(f64, ModeId)> {
        if self.trans.is_some() {
            return None;
        }
        self.ladder
            .get(self.rung)
            .map(|(tau, m)| ((self.idle_since + tau).max(self.busy_until), *m))
    }

    /// Process transition completions and ladder steps up to `t`.
    fn advance_to(&mut self, t: f64, policy: &mut DiskPolicy) {
        loop {
            let te = self.trans.map(|x| x.end).unwrap_or(f64::INFINITY);
            let (tl, lm) = self
                .next_rung()
                .map(|(a, m)| (a, Some(m)))
                .unwrap_or((f64::INFINITY, None));
            let next = te.min(tl);
            if next > t {
                break;
            }
            self.integrate(next);
            if te <= tl {
                let tr = self.trans.take().expect("transition");
                let from = self.mode;
                self.mode = tr.to;
                if tr.to == self.high && from != self.high {
                    policy.on_wake(&self.spec, from, (next - self.low_since).max(0.0));
                    // `Never` stands for "the ladder is fixed" (network devices, no-PM disk).
                    if !matches!(policy, DiskPolicy::Never) {
                        self.ladder = policy.ladder(&self.spec);
                    }
                    self.rung = 0;
                    // Idle timers restart when the device is back up.
                    self.idle_since = next;
                } else if from == self.high {
                    self.low_since = next;
                }
            } else if let Some(m) = lm {
                self.rung += 1;
                if m != self.mode {
                    self.start_transition(next, m);
                }
            }
        }
        self.integrate(t);
    }

    fn start_transition(&mut self, t: f64, to: ModeId) -> f64 {
        let c = self
            .spec
            .transition(self.mode, to)
            .or_else(|| self.spec.transition(self.high, to))
            .expect("validated profile has the transition");
        if self.mode == self.high {
            self.low_since = t;
        }
        if to == self.high {
            self.ups += 1;
        }
        let power = if c.time_s > 0.0 {
            c.energy_j / c.time_s
        } else {
            0.0
        };
        if c.time_s <= 0.0 {
            self.energy += c.energy_j;
            self.mode = to;
            return t;
        }
        self.trans = Some(Trans {
            to,
            end: t + c.time_s,
            power,
        });
        t + c.time_s
    }

    /// Start going to the high mode at `t` (no-op if there or on the way); returns ready time.
    fn go_high(&mut self, t: f64, policy: &mut DiskPolicy) -> f64 {
        self.advance_to(t, policy);
        if let Some(tr) = self.trans {
            if tr.to == self.high {
                return tr.end;
            }
            self.advance_to(tr.end, policy);
        }
        if self.mode == self.high {
            return self.t.max(t);
        }
        let s = self.t.max(t);
        self.start_transition(s, self.high)
    }

    /// Time at which `op` could start if issued at `t`, without changing anything.
    fn ready_time(&self, t: f64, op: IoOp) -> f64 {
        let mut r = t.max(self.busy_until);
        if let Some(tr) = self.trans {
            if !(self.io_during_transition && self.spec.modes[self.mode.0].can(op)) {
                r = r.max(tr.end);
                if !self.spec.modes[tr.to.0].can(op) {
                    r += self
                        .spec
                        .transition(tr.to, self.high)
                        .map(|c| c.time_s)
                        .unwrap_or(0.0);
                }
            }
        } else if !self.spec.modes[self.mode.0].can(op) {
            r += self
                .spec
                .transition(self.mode, self.high)
                .map(|c| c.time_s)
                .unwrap_or(0.0);
        }
        r
    }

    /// Perform `op` of `bytes` issued at `t`; returns (start, end).
    fn io(&mut self, t: f64, op: IoOp, bytes: u64, policy: &mut DiskPolicy) -> (f64, f64) {
        self.advance_to(t, policy);
        let mut ready = t.max(self.busy_until);
        let can_now = self.spec.modes[self.mode.0].can(op)
            && (self.trans.is_none() || self.io_during_transition);
        if !can_now {
            ready = ready.max(self.go_high(t, policy));
            self.advance_to(ready, policy);
        }
        let m = &self.spec.modes[self.mode.0];
        let io = m.io.expect("mode that can do I/O has a model");
        let dur = io.time_s(op, bytes);
        let start = ready;
        let end = start + dur;
        // The I/O power replaces the idle power for the duration (it may be lower: see paper-2004.toml).
        self.energy += (io.power_w(op) - m.power_w) * dur;
        self.busy_until = end;
        self.idle_since = end;
        self.rung = 0;
        if self.record_busy {
            self.busy.push((start, end));
        }
        (start, end)
    }

    fn effective_mode(&self) -> ModeId {
        match self.trans {
            Some(tr) if tr.to == self.high => self.high,
            _ => self.mode,
        }
    }
}

struct QueuedWrite(u64);
impl Queued for QueuedWrite {
    fn bytes(&self) -> u64 {
        self.0
    }
}

/// The replay of one trace under one strategy.
pub struct Sim<'a> {
    profile: &'a Profile,
    strategy: Strategy,
    knob: f64,
    disk: Dev,
    net: Dev,
    disk_pol: DiskPolicy,
    net_dummy: DiskPolicy,
    net_stpm: Option<NetStpm>,
    ghost: Option<GhostAccumulator>,
    queue: WriteQueue<QueuedWrite>,
    on_disk: HashSet<String>,
    queued_objs: HashSet<String>,
    mem: VecDeque<(String, u64)>,
    mem_bytes: u64,
    mem_cap: u64,
    res: RunResult,
    resp_sum: f64,
}

impl<'a> Sim<'a> {
    /// Prepare a replay.
    pub fn new(profile: &'a Profile, strategy: Strategy, knob: u8, trace: &Trace) -> Self {
        let k = knob as f64;
        let s = &profile.storage;
        let n = &profile.network;
        let disk_pol = strategy.disk.clone();
        let disk = Dev::new(s.clone(), s.high_mode(), disk_pol.ladder(s));
        let (net_mode, net_ladder) = match &strategy.net {
            NetPolicy::StaticLow => (n.low_readable_mode(), Vec::new()),
            NetPolicy::AlwaysHigh => (n.high_mode(), Vec::new()),
            NetPolicy::Timeout(tau) => {
                (n.high_mode(), stpm::make_ladder(n, vec![(*tau, lowest(n))]))
            }
            NetPolicy::Stpm => {
                let st = NetStpm::new(n.clone(), profile.base_power_w, k);
                (
                    n.high_mode(),
                    stpm::make_ladder(n, vec![(st.idle_timeout(), st.idle_mode())]),
                )
            }
        };
        let net = Dev::new(n.clone(), net_mode, net_ladder);
        let net_stpm = matches!(strategy.net, NetPolicy::Stpm)
            .then(|| NetStpm::new(n.clone(), profile.base_power_w, k));
        let ghost = match strategy.cache {
            CachePolicy::Adaptive(Some(g)) => {
                let gap = stpm::deepest_mode(s)
                    .map(|m| stpm::stpm_break_even(s, m, profile.base_power_w, k))
                    .unwrap_or(10.0)
                    .clamp(1.0, 60.0);
                Some(GhostAccumulator::new(g, gap))
            }
            _ => None,
        };
        let on_disk = trace
            .requests
            .iter()
            .filter(|r| r.cached)
            .map(|r| r.object.clone())
            .collect();
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
            profile,
            strategy,
            knob: k,
            disk,
            net,
            disk_pol,
            net_dummy: DiskPolicy::Never,
            net_stpm,
            ghost,
            queue: WriteQueue::new(DEFAULT_CAP_BYTES),
            on_disk,
            queued_objs: HashSet::new(),
            mem: VecDeque::new(),
            mem_bytes: 0,
            mem_cap: trace.memory_cache_bytes,
            res,
            resp_sum: 0.0,
        }
    }

    fn mem_hit(&mut self, obj: &str) -> bool {
        if let Some(i) = self.mem.iter().position(|(o, _)| o == obj) {
            let e = self.mem.remove(i).expect("index");
            self.mem.push_back(e);
            return true;
        }
        false
    }

    fn mem_insert(&mut self, obj: &str, size: u64) {
        if size > self.mem_cap {
            return;
        }
        self.mem.push_back((obj.to_string(), size));
        self.mem_bytes += size;
        while self.mem_bytes > self.mem_cap {
            if let Some((_, s)) = self.mem.pop_front() {
                self.mem_bytes -= s;
            }
        }
    }

    fn net_transfer(&mut self, t: f64, op: IoOp, bytes: u64, fg: bool) -> (f64, f64) {
        if let Some(st) = self.net_stpm.as_mut() {
            self.net.advance_to(t, &mut self.net_dummy);
            st.end_run_if_idle(t);
            if st.on_transfer(
                t,
                Transfer {
                    op,
                    bytes,
                    foreground: fg,
                },
                self.net.effective_mode(),
            ) == NetDecision::GoHigh
            {
                self.net.go_high(t, &mut self.net_dummy);
            }
        }
        let (start, end) = self.net.io(t, op, bytes, &mut self.net_dummy);
        if let Some(st) = self.net_stpm.as_mut() {
            st.on_transfer_end(end);
        }
        (start, end)
    }

    fn flush_queue(&mut self, t: f64) -> f64 {
        let items = self.queue.drain();
        let mut end = t;
        for w in items {
            end = self.disk.io(t, IoOp::Write, w.0, &mut self.disk_pol).1;
        }
        for o in self.queued_objs.drain() {
            self.on_disk.insert(o);
        }
        end
    }

    fn disk_write(&mut self, t: f64, obj: &str, bytes: u64) {
        match self.strategy.cache {
            CachePolicy::Static => {
                self.disk.io(t, IoOp::Write, bytes, &mut self.disk_pol);
                self.on_disk.insert(obj.to_string());
                self.queued_objs.remove(obj);
            }
            CachePolicy::Adaptive(_) => {
                self.disk.advance_to(t, &mut self.disk_pol);
                if self.disk.effective_mode() == self.disk.high && self.disk.trans.is_none() {
                    self.flush_queue(t);
                    self.disk.io(t, IoOp::Write, bytes, &mut self.disk_pol);
                    self.on_disk.insert(obj.to_string());
                    return;
                }
                if self.queue.push(QueuedWrite(bytes)).is_err() {
                    // Full: spin up and flush, then queue again (or write through).
                    let ready = self.disk.go_high(t, &mut self.disk_pol);
                    self.flush_queue(ready);
                    if self.queue.push(QueuedWrite(bytes)).is_err() {
                        self.disk.io(ready, IoOp::Write, bytes, &mut self.disk_pol);
                        self.on_disk.insert(obj.to_string());
                        return;
                    }
                }
                self.queued_objs.insert(obj.to_string());
            }
        }
    }

    /// Expected cost of reading `bytes` from `dev` at `t`, including waits for I/O or a
    /// transition already under way (the cache manager sees them as the device's state).
    fn cost(&self, dev: &Dev, other: &Dev, t: f64, bytes: u64) -> Option<AccessCost> {
        let others = self.profile.base_power_w + other.spec.modes[other.mode.0].power_w;
        let (wait, c) = if dev.trans.is_none() {
            (
                (dev.busy_until - t).max(0.0),
                access_cost(&dev.spec, dev.mode, IoOp::Read, bytes, others)?,
            )
        } else {
            (
                (dev.ready_time(t, IoOp::Read) - t).max(0.0),
                access_cost(&dev.spec, dev.high, IoOp::Read, bytes, others)?,
            )
        };
        Some(AccessCost {
            time_s: wait + c.time_s,
            energy_j: c.energy_j + others * wait,
        })
    }

    fn read(&mut self, t: f64, r: &Request) -> f64 {
        self.res.reads += 1;
        if self.mem_cap > 0 && self.mem_hit(&r.object) {
            self.res.from_memory += 1;
            return t;
        }
        let cached = self.on_disk.contains(&r.object) || self.queued_objs.contains(&r.object);
        let end = if !cached {
            let (_, end) = self.net_transfer(t, IoOp::Read, r.size, true);
            self.res.from_network += 1;
            self.disk_write(end, &r.object, r.size);
            end
        } else if self.queued_objs.contains(&r.object) {
            self.res.from_memory += 1;
            t
        } else {
            match self.strategy.cache {
                CachePolicy::Static => {
                    self.res.from_disk += 1;
                    self.disk.io(t, IoOp::Read, r.size, &mut self.disk_pol).1
                }
                CachePolicy::Adaptive(_) => self.adaptive_read(t, r),
            }
        };
        if self.mem_cap > 0 {
            self.mem_insert(&r.object, r.size);
        }
        end
    }

    fn adaptive_read(&mut self, t: f64, r: &Request) -> f64 {
        self.disk.advance_to(t, &mut self.disk_pol);
        self.net.advance_to(t, &mut self.net_dummy);
        if let Some(g) = self.ghost.as_mut() {
            g.on_demand(t);
        }
        let k = self.knob;
        let w = |c: &AccessCost| eq::weighted_cost_eq4(c.time_s, c.energy_j, k);
        let (Some(dc), Some(nc)) = (
            self.cost(&self.disk, &self.net, t, r.size),
            self.cost(&self.net, &self.disk, t, r.size),
        ) else {
            return self.disk.io(t, IoOp::Read, r.size, &mut self.disk_pol).1;
        };
        let use_disk = w(&dc) <= w(&nc);
        // Ideal: each device in its high mode, the other as it is (paper §4.4).
        let others_d = self.profile.base_power_w + self.net.spec.modes[self.net.mode.0].power_w;
        let others_n = self.profile.base_power_w + self.disk.spec.modes[self.disk.mode.0].power_w;
        let di = access_cost(
            &self.disk.spec,
            self.disk.high,
            IoOp::Read,
            r.size,
            others_d,
        );
        let ni = access_cost(&self.net.spec, self.net.high, IoOp::Read, r.size, others_n);
        let ideal_disk = match (di, ni) {
            (Some(a), Some(b)) => w(&a) <= w(&b),
            _ => use_disk,
        };
        let chosen = if use_disk { dc } else { nc };
        if ideal_disk != use_disk {
            let ideal = if ideal_disk { di } else { ni }.expect("ideal cost");
            let hint = GhostHint {
                t,
                delta_t_s: chosen.time_s - ideal.time_s,
                delta_e_j: chosen.energy_j - ideal.energy_j,
                foreground: true,
            };
            if let Some(g) = self.ghost.as_mut() {
                self.res.ghost_hints_issued += 1;
                if ideal_disk {
                    let low = self.disk.mode;
                    if low != self.disk.high && self.disk.trans.is_none() {
                        let s = &self.disk.spec;
                        let dev = GhostDevice {
                            knob: k,
                            p_hp: s.modes[self.disk.high.0].power_w,
                            p_lp: s.modes[low.0].power_w,
                            threshold: stpm::round_trip_threshold(
                                s,
                                low,
                                self.profile.base_power_w,
                                k,
                            ),
                        };
                        if g.on_hint(hint, dev) {
                            self.res.ghost_transitions += 1;
                            let ready = self.disk.go_high(t, &mut self.disk_pol);
                            if !self.queue.is_empty() {
                                self.flush_queue(ready);
                            }
                        }
                    }
                } else if let Some(st) = self.net_stpm.as_mut() {
                    // A network ghost hint counts into the current run.
                    if st.on_transfer(
                        t,
                        Transfer {
                            op: IoOp::Read,
                            bytes: r.size,
                            foreground: true,
                        },
                        self.net.effective_mode(),
                    ) == NetDecision::GoHigh
                    {
                        self.res.ghost_transitions += 1;
                        self.net.go_high(t, &mut self.net_dummy);
                    }
                }
            }
        }
        if use_disk {
            self.res.from_disk += 1;
            let was_low = self.disk.effective_mode() != self.disk.high || self.disk.trans.is_some();
            let (_, end) = self.disk.io(t, IoOp::Read, r.size, &mut self.disk_pol);
            if was_low || !self.queue.is_empty() {
                self.flush_queue(end);
            }
            if let Some(g) = self.ghost.as_mut() {
                g.reset();
            }
            end
        } else {
            self.res.from_network += 1;
            self.net_transfer(t, IoOp::Read, r.size, true).1
        }
    }

    fn write(&mut self, t: f64, r: &Request) -> f64 {
        // Send to the server (the user waits), keep a copy in the cache (background).
        let (_, end) = self.net_transfer(t, IoOp::Write, r.size, true);
        self.disk_write(end, &r.object, r.size);
        end
    }

    /// Replay the whole trace; returns the result.
    pub fn run(mut self, trace: &Trace) -> (RunResult, Vec<(f64, f64)>) {
        self.disk.record_busy = true;
        let reqs = &trace.requests;
        let mut t = 0.0;
        for (i, r) in reqs.iter().enumerate() {
            let end = match r.op {
                Op::Read => {
                    let e = self.read(t, r);
                    self.resp_sum += e - t;
                    e
                }
                Op::Write => self.write(t, r),
            };
            let think = reqs.get(i + 1).map(|n| (n.t - r.t).max(0.0)).unwrap_or(0.0);
            t = end + think;
        }
        // Flush what is still queued: its energy belongs to the run.
        if !self.queue.is_empty() {
            let ready = self.disk.go_high(t, &mut self.disk_pol);
            t = self.flush_queue(ready).max(t);
        }
        let t_end = t.max(self.disk.busy_until).max(self.net.busy_until);
        self.disk.advance_to(t_end, &mut self.disk_pol);
        self.net.advance_to(t_end, &mut self.net_dummy);
        self.res.duration_s = t_end;
        self.res.disk_energy_j = self.disk.energy;
        self.res.net_energy_j = self.net.energy;
        self.res.energy_j = self.profile.base_power_w * t_end + self.disk.energy + self.net.energy;
        self.res.mean_response_s = if self.res.reads > 0 {
            self.resp_sum / self.res.reads as f64
        } else {
            0.0
        };
        self.res.disk_spinups = self.disk.ups;
        self.res.net_ups = self.net.ups;
        let busy = std::mem::take(&mut self.disk.busy);
        (self.res, busy)
    }
}

fn lowest(spec: &DeviceSpec) -> ModeId {
    let high = spec.high_mode();
    (0..spec.modes.len())
        .map(ModeId)
        .filter(|m| *m != high && spec.transition(high, *m).is_some())
        .min_by(|a, b| spec.modes[a.0].power_w.total_cmp(&spec.modes[b.0].power_w))
        .unwrap_or(high)
}

/// Replay `trace` under `strategy` at `knob`.
pub fn replay(profile: &Profile, strategy: &Strategy, knob: u8, trace: &Trace) -> RunResult {
    Sim::new(profile, strategy.clone(), knob, trace)
        .run(trace)
        .0
}

/// Energy of an idle gap of `g` seconds for the offline oracle: the best of staying in the high
/// mode or a round trip to any low mode, timed so the device is back just in time.
pub fn oracle_gap_energy(spec: &DeviceSpec, g: f64) -> f64 {
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
/// never late), disk idle energy replaced gap by gap with [`oracle_gap_energy`].
pub fn replay_oracle(profile: &Profile, net: NetPolicy, trace: &Trace) -> RunResult {
    let strat = Strategy {
        name: "static+oracle".into(),
        cache: CachePolicy::Static,
        disk: DiskPolicy::Never,
        net,
    };
    let (mut r, busy) = Sim::new(profile, strat, 0, trace).run(trace);
    let s = &profile.storage;
    let p_hp = s.modes[s.high_mode().0].power_w;
    let mut gaps = Vec::new();
    let mut last = 0.0;
    for (a, b) in &busy {
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
    let p = profile.base_power_w
        + profile.storage.modes[lowest(&profile.storage).0].power_w
        + profile.network.modes[lowest(&profile.network).0].power_w;
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
