//! The Figure 1 state machine and the three tuners that run on it.

use super::{ChannelTuner, Observation};
use serde::Serialize;

/// States of Figure 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum State {
    SlowStart,
    Increase,
    Warning,
    Recovery,
    /// Baselines without a state machine.
    Static,
}

/// α, β of the algorithms and ΔCh. The paper does not publish their values; these defaults
/// are ours (5 % bands, one channel per step).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    pub alpha: f64,
    pub beta: f64,
    pub delta_ch: usize,
    pub max_ch: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            alpha: 0.05,
            beta: 0.05,
            delta_ch: 1,
            max_ch: 32,
        }
    }
}

impl Thresholds {
    /// numCh after adding ΔCh channels, at most `max_ch`.
    fn add_ch(&self, num_ch: usize) -> usize {
        (num_ch + self.delta_ch).min(self.max_ch)
    }

    /// numCh after removing ΔCh channels, at least one.
    fn remove_ch(&self, num_ch: usize) -> usize {
        num_ch.saturating_sub(self.delta_ch).max(1)
    }
}

/// Algorithm 2, slow start: after each of a few timeouts, numCh *= bandwidth / lastThroughput.
///
/// Ours where the paper is silent: the loop runs `rounds` timeouts (default 2); one step may
/// change numCh by at most ×2 (the first timeouts include connection set-up and TCP's own
/// slow start, so the measured rate underestimates what the channels will carry); without a
/// known bandwidth, numCh doubles while throughput still grows by ≥ 10 % (at most 5 rounds)
/// and the best throughput seen becomes the bandwidth estimate.
#[derive(Debug, Clone)]
pub struct SlowStart {
    bandwidth_bps: Option<f64>,
    rounds_left: usize,
    best_bps: f64,
    tputs: Vec<f64>,
}

impl SlowStart {
    pub fn new(bandwidth_bps: Option<f64>) -> Self {
        SlowStart {
            bandwidth_bps,
            rounds_left: if bandwidth_bps.is_some() { 2 } else { 5 },
            best_bps: 0.0,
            tputs: Vec::new(),
        }
    }

    /// One slow-start timeout; returns whether slow start is over.
    pub fn step(&mut self, num_ch: &mut usize, tput_bps: f64, max_ch: usize) -> bool {
        self.tputs.push(tput_bps);
        self.rounds_left = self.rounds_left.saturating_sub(1);
        match self.bandwidth_bps {
            Some(bw) => {
                if tput_bps > 0.0 {
                    let f = (bw / tput_bps).clamp(0.5, 2.0);
                    *num_ch = ((*num_ch as f64 * f).ceil() as usize).clamp(1, max_ch);
                }
                self.best_bps = self.best_bps.max(tput_bps);
                self.rounds_left == 0
            }
            None => {
                let grew = tput_bps >= 1.10 * self.best_bps;
                self.best_bps = self.best_bps.max(tput_bps);
                if grew && self.rounds_left > 0 && *num_ch < max_ch {
                    *num_ch = (*num_ch * 2).min(max_ch);
                    false
                } else {
                    true
                }
            }
        }
    }

    /// Mean throughput over the slow-start timeouts.
    pub fn mean_bps(&self) -> f64 {
        if self.tputs.is_empty() {
            0.0
        } else {
            self.tputs.iter().sum::<f64>() / self.tputs.len() as f64
        }
    }
}

/// Algorithm 4, minimum energy (ME).
///
/// Feedback: E_last (energy of the last interval) + E_future (avgPower × remainData /
/// avgThroughput) against E_past, which we read as the previous timeout's E_future — both are
/// then estimates of the energy needed to finish, counted from the previous timeout.
pub struct MeTuner {
    th: Thresholds,
    state: State,
    num_ch: usize,
    ss: SlowStart,
    e_past: Option<f64>,
}

impl MeTuner {
    pub fn new(num_ch: usize, bandwidth_bps: Option<f64>, th: Thresholds) -> Self {
        MeTuner {
            th,
            state: State::SlowStart,
            num_ch: num_ch.clamp(1, th.max_ch),
            ss: SlowStart::new(bandwidth_bps),
            e_past: None,
        }
    }
}

impl ChannelTuner for MeTuner {
    fn name(&self) -> &'static str {
        "ME"
    }
    fn state(&self) -> State {
        self.state
    }
    fn num_ch(&self) -> usize {
        self.num_ch
    }
    fn on_timeout(&mut self, obs: &Observation) {
        let tput = obs.tput_bps();
        // Line 4: without energy feedback (no meter) ME cannot decide; it holds.
        let (Some(e_last), true) = (obs.energy_j, obs.dt_s > 0.0) else {
            return;
        };
        let avg_power = e_last / obs.dt_s;
        let e_future = if tput > 0.0 {
            avg_power * (obs.remaining_total() as f64 * 8.0 / tput)
        } else {
            f64::INFINITY
        };
        let now = e_last + e_future;
        if self.state == State::SlowStart {
            if self.ss.step(&mut self.num_ch, tput, self.th.max_ch) {
                self.state = State::Increase;
            }
            self.e_past = Some(e_future);
            return;
        }
        let past = self.e_past.unwrap_or(f64::INFINITY);
        let (a, b) = (self.th.alpha, self.th.beta);
        match self.state {
            State::Increase => {
                if now < (1.0 - a) * past {
                    self.num_ch = self.th.add_ch(self.num_ch);
                } else if now > (1.0 + b) * past {
                    self.state = State::Warning;
                }
            }
            State::Warning => {
                if now <= (1.0 + b) * past {
                    self.state = State::Increase;
                } else {
                    self.num_ch = self.th.remove_ch(self.num_ch);
                    self.state = State::Recovery;
                }
            }
            State::Recovery => {
                if now > (1.0 + b) * past {
                    self.num_ch = self.th.add_ch(self.num_ch);
                }
                self.state = State::Increase;
            }
            State::SlowStart | State::Static => {}
        }
        self.e_past = Some(e_future);
    }
}

/// Algorithm 5, energy-efficient maximum throughput (EEMT). The paper's listing is missing;
/// this follows the prose of §IV-B:
///
/// - after slow start the reference throughput is the slow-start mean;
/// - Increase: throughput ≥ (1+β)·ref → add ΔCh and set ref to it (positive); throughput
///   < (1−α)·ref → Warning (negative); otherwise (neutral) hold — and if the last step was an
///   increase that did not pay, take it back (ours: "avoid increasing the channel count if
///   doing so does not increase the throughput"); after `probe_every` neutral timeouts probe
///   again with +ΔCh (ours, so a freed-up path is found) — but not while the throughput is
///   within α of a known `--bandwidth`: each probe is a new TCP connection, and on the
///   `cloudlab` testbed probing every other timeout below the link (tried, `make
///   bench-transfer`, 3 runs) kept large transfers at ~830 Mbit/s through repeated losses;
/// - Warning: positive or neutral → Increase; negative → remember numCh, −ΔCh, Recovery;
/// - Recovery: throughput better than the one that caused it → Increase with the new count;
///   otherwise restore the old count, ref = last throughput, Increase.
pub struct EemtTuner {
    th: Thresholds,
    state: State,
    num_ch: usize,
    ss: SlowStart,
    ref_bps: f64,
    last_bps: f64,
    saved_ch: usize,
    probing: bool,
    neutral_run: usize,
    probe_every: usize,
}

impl EemtTuner {
    pub fn new(num_ch: usize, bandwidth_bps: Option<f64>, th: Thresholds) -> Self {
        EemtTuner {
            th,
            state: State::SlowStart,
            num_ch: num_ch.clamp(1, th.max_ch),
            ss: SlowStart::new(bandwidth_bps),
            ref_bps: 0.0,
            last_bps: 0.0,
            saved_ch: 1,
            probing: false,
            neutral_run: 0,
            probe_every: 5,
        }
    }
}

impl ChannelTuner for EemtTuner {
    fn name(&self) -> &'static str {
        "EEMT"
    }
    fn state(&self) -> State {
        self.state
    }
    fn num_ch(&self) -> usize {
        self.num_ch
    }
    fn on_timeout(&mut self, obs: &Observation) {
        let t = obs.tput_bps();
        let (a, b, m) = (self.th.alpha, self.th.beta, self.th.max_ch);
        match self.state {
            State::SlowStart => {
                if self.ss.step(&mut self.num_ch, t, m) {
                    self.state = State::Increase;
                    self.ref_bps = self.ss.mean_bps().max(t);
                    // first probe right away
                    self.saved_ch = self.num_ch;
                    self.num_ch = self.th.add_ch(self.num_ch);
                    self.probing = self.num_ch != self.saved_ch;
                }
            }
            State::Increase => {
                if t >= (1.0 + b) * self.ref_bps {
                    self.ref_bps = t;
                    self.saved_ch = self.num_ch;
                    self.num_ch = self.th.add_ch(self.num_ch);
                    self.probing = self.num_ch != self.saved_ch;
                    self.neutral_run = 0;
                } else if t < (1.0 - a) * self.ref_bps {
                    self.state = State::Warning;
                    self.probing = false;
                } else {
                    if self.probing {
                        self.num_ch = self.saved_ch; // the probe did not pay
                        self.probing = false;
                    }
                    self.ref_bps = self.ref_bps.max(t);
                    self.neutral_run += 1;
                    // ours: a probe opens a new connection, whose TCP slow start can overflow
                    // the bottleneck queue and cost every stream; on a link known to be full
                    // there is nothing to find, so do not probe there
                    let link_full = self.ss.bandwidth_bps.is_some_and(|bw| t >= (1.0 - a) * bw);
                    if self.neutral_run >= self.probe_every && self.num_ch < m && !link_full {
                        self.neutral_run = 0;
                        self.saved_ch = self.num_ch;
                        self.num_ch = self.th.add_ch(self.num_ch);
                        self.probing = true;
                    }
                }
            }
            State::Warning => {
                if t >= (1.0 - a) * self.ref_bps {
                    self.state = State::Increase;
                } else {
                    self.saved_ch = self.num_ch;
                    self.num_ch = self.th.remove_ch(self.num_ch);
                    self.state = State::Recovery;
                }
            }
            State::Recovery => {
                if t <= self.last_bps {
                    self.num_ch = self.saved_ch;
                }
                self.ref_bps = t;
                self.state = State::Increase;
            }
            State::Static => {}
        }
        self.last_bps = t;
    }
}

/// Algorithm 6, energy-efficient target throughput (EETT), on the three-state machine.
///
/// Ours beyond the paper: channels come in whole units, so when removing one would fall below
/// (1−α)·target (estimated as throughput × (n−1)/n), or one channel alone is already above
/// (1+β)·target, the channel count is kept and the client paces its reads to the target
/// instead (TCP flow control then slows the sender). Below (1−α)·target the cap is lifted
/// before any channel is added. The transfer starts paced at the target (the cap only binds
/// when the channels could go faster).
pub struct EettTuner {
    th: Thresholds,
    state: State,
    num_ch: usize,
    ss: SlowStart,
    target_bps: f64,
    cap: Option<f64>,
}

impl EettTuner {
    pub fn new(num_ch: usize, target_bps: f64, th: Thresholds) -> Self {
        EettTuner {
            th,
            state: State::SlowStart,
            num_ch: num_ch.clamp(1, th.max_ch),
            // slow start aims at the target, not at the link (line 1 + §IV-C)
            ss: SlowStart::new(Some(target_bps)),
            target_bps,
            // ours: start paced at the target, so the first timeouts are not spent above it
            cap: Some(target_bps),
        }
    }
}

impl ChannelTuner for EettTuner {
    fn name(&self) -> &'static str {
        "EETT"
    }
    fn state(&self) -> State {
        self.state
    }
    fn num_ch(&self) -> usize {
        self.num_ch
    }
    fn rate_cap_bps(&self) -> Option<f64> {
        self.cap
    }
    fn on_timeout(&mut self, obs: &Observation) {
        let t = obs.tput_bps();
        let (a, b, m) = (self.th.alpha, self.th.beta, self.th.max_ch);
        let hi = (1.0 + b) * self.target_bps;
        let lo = (1.0 - a) * self.target_bps;
        match self.state {
            State::SlowStart => {
                if self.ss.step(&mut self.num_ch, t, m) {
                    self.state = State::Increase;
                }
            }
            State::Increase => {
                if t > hi || t < lo {
                    self.state = State::Recovery;
                }
            }
            State::Recovery => {
                if t > hi {
                    let n = self.num_ch as f64;
                    let fewer = self.th.remove_ch(self.num_ch);
                    if self.num_ch > 1 && t * fewer as f64 / n >= lo {
                        self.num_ch = fewer;
                    } else {
                        self.cap = Some(self.target_bps);
                    }
                } else if t < lo && !obs.cap_held {
                    // (with cap_held the channels were ahead of the cap's schedule: the dip is
                    // a stall that the pacer makes up for, not a path that is too slow)
                    if self.cap.is_some() {
                        self.cap = None; // the cap binds too hard: lift it before adding channels
                    } else {
                        self.num_ch = self.th.add_ch(self.num_ch);
                    }
                }
                self.state = State::Increase;
            }
            State::Warning | State::Static => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(tput_bps: f64, energy: Option<f64>, remaining: u64) -> Observation {
        Observation {
            dt_s: 1.0,
            bytes: (tput_bps / 8.0) as u64,
            energy_j: energy,
            remaining: vec![remaining],
            cpu_load: None,
            cap_held: false,
        }
    }

    #[test]
    fn slow_start_scales_by_bandwidth_ratio() {
        let mut ss = SlowStart::new(Some(1000.0));
        let mut n = 2;
        assert!(!ss.step(&mut n, 400.0, 64));
        assert_eq!(n, 4); // ×2.5 wanted, ×2 at most per step
        assert!(ss.step(&mut n, 900.0, 64));
        assert_eq!(n, 5); // ceil(4 × 1.11)
    }

    #[test]
    fn slow_start_without_bandwidth_doubles_until_flat() {
        let mut ss = SlowStart::new(None);
        let mut n = 2;
        assert!(!ss.step(&mut n, 100.0, 64));
        assert_eq!(n, 4);
        assert!(!ss.step(&mut n, 190.0, 64));
        assert_eq!(n, 8);
        assert!(ss.step(&mut n, 200.0, 64), "5 % growth ends it");
        assert_eq!(n, 8);
    }

    #[test]
    fn eemt_warning_then_back_on_a_temporary_dip() {
        let mut t = EemtTuner::new(4, Some(1000.0), Thresholds::default());
        t.on_timeout(&obs(1000.0, None, 1));
        t.on_timeout(&obs(1000.0, None, 1));
        assert_eq!(t.state(), State::Increase);
        let probe = t.num_ch();
        assert_eq!(probe, 5, "slow start kept 4, then one probe channel");
        t.on_timeout(&obs(1000.0, None, 1)); // neutral: probe withdrawn
        assert_eq!(t.num_ch(), 4);
        t.on_timeout(&obs(500.0, None, 1)); // negative
        assert_eq!(t.state(), State::Warning);
        t.on_timeout(&obs(990.0, None, 1)); // neutral again
        assert_eq!(t.state(), State::Increase);
        assert_eq!(t.num_ch(), 4);
    }

    #[test]
    fn eemt_does_not_probe_a_full_link() {
        let th = Thresholds::default();
        // at the link's rate: after the first probe is withdrawn, no more probes
        let mut full = EemtTuner::new(4, Some(1000.0), th);
        full.on_timeout(&obs(1000.0, None, 1));
        full.on_timeout(&obs(1000.0, None, 1)); // slow start over: one probe channel
        assert_eq!(full.num_ch(), 5);
        for _ in 0..12 {
            full.on_timeout(&obs(1000.0, None, 1));
            assert_eq!(full.num_ch(), 4, "no probe while the link is full");
        }
        // below it, the same neutral feedback probes after probe_every timeouts
        let mut below = EemtTuner::new(4, Some(1000.0), th);
        below.on_timeout(&obs(900.0, None, 1));
        below.on_timeout(&obs(900.0, None, 1)); // ×1.11 twice: 5, 6; then a probe to 7
        assert_eq!(below.num_ch(), 7);
        let counts: Vec<usize> = (0..6)
            .map(|_| {
                below.on_timeout(&obs(900.0, None, 1));
                below.num_ch()
            })
            .collect();
        assert_eq!(
            counts,
            vec![6, 6, 6, 6, 7, 6],
            "withdrawn, then probed at the 5th"
        );
    }

    #[test]
    fn eemt_recovery_restores_count_when_bandwidth_dropped() {
        let mut t = EemtTuner::new(4, Some(1000.0), Thresholds::default());
        t.on_timeout(&obs(1000.0, None, 1));
        t.on_timeout(&obs(1000.0, None, 1));
        t.on_timeout(&obs(1000.0, None, 1));
        assert_eq!(t.num_ch(), 4);
        t.on_timeout(&obs(500.0, None, 1));
        t.on_timeout(&obs(500.0, None, 1)); // second negative: −1, Recovery
        assert_eq!((t.state(), t.num_ch()), (State::Recovery, 3));
        t.on_timeout(&obs(450.0, None, 1)); // worse: the path lost bandwidth
        assert_eq!((t.state(), t.num_ch()), (State::Increase, 4));
    }

    #[test]
    fn eemt_recovery_keeps_fewer_channels_when_that_helped() {
        let mut t = EemtTuner::new(4, Some(1000.0), Thresholds::default());
        for _ in 0..3 {
            t.on_timeout(&obs(1000.0, None, 1));
        }
        t.on_timeout(&obs(500.0, None, 1));
        t.on_timeout(&obs(500.0, None, 1));
        t.on_timeout(&obs(800.0, None, 1));
        assert_eq!((t.state(), t.num_ch()), (State::Increase, 3));
    }

    #[test]
    fn me_adds_channels_while_energy_to_finish_falls() {
        let th = Thresholds::default();
        let mut t = MeTuner::new(2, Some(1000.0), th);
        // slow start: 2 rounds at 1000 bit/s → count unchanged
        t.on_timeout(&obs(1000.0, Some(10.0), 100_000));
        t.on_timeout(&obs(1000.0, Some(10.0), 99_875));
        assert_eq!((t.state(), t.num_ch()), (State::Increase, 2));
        // E_past = 10 W × 99_875·8/1000 s. Throughput doubles at the same power:
        // E_last + E_future = 10 + 10 × 99_625·8/2000 ≈ 3995 < 0.95 × 7990 → +1 channel
        t.on_timeout(&obs(2000.0, Some(10.0), 99_625));
        assert_eq!(t.num_ch(), 3);
        // now power triples for the same throughput: 30 + 30·99_375·8/2000 ≫ 1.05 × 3985
        t.on_timeout(&obs(2000.0, Some(30.0), 99_375));
        assert_eq!(t.state(), State::Warning);
        t.on_timeout(&obs(2000.0, Some(90.0), 99_125));
        assert_eq!((t.state(), t.num_ch()), (State::Recovery, 2));
    }

    #[test]
    fn me_without_energy_holds() {
        let mut t = MeTuner::new(3, None, Thresholds::default());
        t.on_timeout(&obs(1000.0, None, 10));
        assert_eq!((t.state(), t.num_ch()), (State::SlowStart, 3));
    }

    #[test]
    fn eett_moves_toward_target_and_caps_below_one_channel() {
        // rates are multiples of 8 so bytes/interval are exact
        let mut t = EettTuner::new(1, 4000.0, Thresholds::default());
        assert_eq!(t.rate_cap_bps(), Some(4000.0), "starts paced at the target");
        t.on_timeout(&obs(2000.0, None, 1)); // slow start ×2
        assert_eq!(t.num_ch(), 2);
        t.on_timeout(&obs(4000.0, None, 1));
        assert_eq!((t.state(), t.num_ch()), (State::Increase, 2));
        t.on_timeout(&obs(9000.0, None, 1)); // above 4200
        assert_eq!(t.state(), State::Recovery);
        t.on_timeout(&obs(9000.0, None, 1)); // one channel ≈ 4500 ≥ 3800: drop one
        assert_eq!((t.state(), t.num_ch()), (State::Increase, 1));
        t.on_timeout(&obs(5200.0, None, 1));
        t.on_timeout(&obs(5200.0, None, 1)); // one channel is too fast: pace
        assert_eq!((t.rate_cap_bps(), t.num_ch()), (Some(4000.0), 1));
        // a dip while the pacer was holding reads back is a stall: the cap stays
        let stalled = Observation {
            cap_held: true,
            ..obs(2400.0, None, 1)
        };
        t.on_timeout(&stalled);
        t.on_timeout(&stalled);
        assert_eq!((t.rate_cap_bps(), t.num_ch()), (Some(4000.0), 1));
        t.on_timeout(&obs(2400.0, None, 1));
        t.on_timeout(&obs(2400.0, None, 1)); // too slow: the cap goes first
        assert_eq!((t.rate_cap_bps(), t.num_ch()), (None, 1));
        t.on_timeout(&obs(2400.0, None, 1));
        t.on_timeout(&obs(2400.0, None, 1)); // then a channel is added
        assert_eq!(t.num_ch(), 2);
    }

    #[test]
    fn eett_paces_instead_of_dropping_below_target() {
        let mut t = EettTuner::new(2, 4000.0, Thresholds::default());
        t.on_timeout(&obs(4000.0, None, 1));
        t.on_timeout(&obs(4000.0, None, 1));
        t.on_timeout(&obs(4800.0, None, 1));
        t.on_timeout(&obs(4800.0, None, 1)); // one channel would give 2400 < 3800
        assert_eq!((t.rate_cap_bps(), t.num_ch()), (Some(4000.0), 2));
    }
}
