//! Self-tuning power management (STPM): disk ladders and the network run predictor.
//!
//! The disk module follows the paper's §4.2.2 exactly (equations 2 and 3, stepping down through
//! the low-power modes). The network module follows §4.2.1, which defers to the 2003 STPM paper;
//! where that text is not available the design is ours and is marked so (see
//! `docs/power-cache.md`).

use crate::device::{DeviceSpec, IoOp, ModeId};
use crate::eq;

/// An idle ladder: after `idle_s` seconds without I/O, go to `mode`. Steps are in increasing
/// `idle_s` and strictly decreasing power; consecutive steps have a direct transition.
pub type Ladder = Vec<(f64, ModeId)>;

/// Build a ladder from candidate `(timeout, mode)` pairs: drop infinite timeouts, order by time,
/// keep only steps that lower the power, and drop a step when the device cannot go from it to
/// the next one directly.
pub(crate) fn make_ladder(spec: &DeviceSpec, mut cands: Vec<(f64, ModeId)>) -> Ladder {
    let high = spec.high_mode();
    cands.retain(|(t, m)| t.is_finite() && *m != high && spec.transition(high, *m).is_some());
    cands.sort_by(|a, b| {
        a.0.total_cmp(&b.0).then(
            spec.modes[a.1 .0]
                .power_w
                .total_cmp(&spec.modes[b.1 .0].power_w),
        )
    });
    let mut out: Ladder = Vec::new();
    let mut last_power = spec.modes[high.0].power_w;
    for (t, m) in cands {
        let p = spec.modes[m.0].power_w;
        if p >= last_power {
            continue;
        }
        // Cannot step from the previous rung to this one: skip the previous rung instead.
        while let Some(&(_, prev)) = out.last() {
            if spec.transition(prev, m).is_some() {
                break;
            }
            out.pop();
        }
        out.push((t, m));
        last_power = p;
    }
    out
}

/// Equation (3) break-even time for going from the high mode to `low` (via eq. 2).
pub(crate) fn stpm_break_even(spec: &DeviceSpec, low: ModeId, base_power_w: f64, knob: f64) -> f64 {
    let high = spec.high_mode();
    let (Some(down), Some(up)) = (spec.transition(high, low), spec.transition(low, high)) else {
        return f64::INFINITY;
    };
    let p_hp = spec.modes[high.0].power_w;
    let p_lp = spec.modes[low.0].power_w;
    let c_e = eq::energy_cost_eq2(
        down.energy_j,
        p_hp,
        down.time_s,
        up.energy_j,
        base_power_w,
        up.time_s,
    );
    eq::break_even_eq3(up.time_s, c_e, p_hp, p_lp, knob)
}

/// Equation (1) device-only break-even time for `low`.
pub(crate) fn device_break_even(spec: &DeviceSpec, low: ModeId) -> f64 {
    let high = spec.high_mode();
    let (Some(down), Some(up)) = (spec.transition(high, low), spec.transition(low, high)) else {
        return f64::INFINITY;
    };
    eq::break_even_eq1(
        up.energy_j,
        down.energy_j,
        spec.modes[high.0].power_w,
        spec.modes[low.0].power_w,
    )
}

/// Knob-weighted utility cost of one round trip high → `low` → high (numerator of eq. 3): the
/// threshold a ghost-hint total must pass.
pub fn round_trip_threshold(spec: &DeviceSpec, low: ModeId, base_power_w: f64, knob: f64) -> f64 {
    let high = spec.high_mode();
    let (Some(down), Some(up)) = (spec.transition(high, low), spec.transition(low, high)) else {
        return 0.0;
    };
    let p_hp = spec.modes[high.0].power_w;
    let c_e = eq::energy_cost_eq2(
        down.energy_j,
        p_hp,
        down.time_s,
        up.energy_j,
        base_power_w,
        up.time_s,
    );
    eq::round_trip_cost_utility(up.time_s, c_e, knob)
}

fn low_modes(spec: &DeviceSpec) -> Vec<ModeId> {
    let high = spec.high_mode();
    (0..spec.modes.len())
        .map(ModeId)
        .filter(|m| *m != high)
        .collect()
}

/// The STPM disk ladder (paper §4.2.2): eq. (3) break-even time for each low-power mode.
pub(crate) fn stpm_ladder(spec: &DeviceSpec, base_power_w: f64, knob: f64) -> Ladder {
    make_ladder(
        spec,
        low_modes(spec)
            .into_iter()
            .map(|m| (stpm_break_even(spec, m, base_power_w, knob), m))
            .collect(),
    )
}

/// Device-only break-even ladder, eq. (1) for each low-power mode.
pub(crate) fn break_even_ladder(spec: &DeviceSpec) -> Ladder {
    make_ladder(
        spec,
        low_modes(spec)
            .into_iter()
            .map(|m| (device_break_even(spec, m), m))
            .collect(),
    )
}

/// The deepest mode that has a direct transition from the high mode (e.g. standby).
pub fn deepest_mode(spec: &DeviceSpec) -> Option<ModeId> {
    let high = spec.high_mode();
    low_modes(spec)
        .into_iter()
        .filter(|m| spec.transition(high, *m).is_some())
        .min_by(|a, b| spec.modes[a.0].power_w.total_cmp(&spec.modes[b.0].power_w))
}

/// Spin-down policies for a storage device: STPM and the classic baselines (fixed timeout; break-even, Lu & De Micheli, "Comparing System-Level Power Management Policies", IEEE D&T 2001; Douglis, Krishnan & Bershad, "Adaptive Disk Spin-down Policies for Mobile Computers", USENIX MLICS 1995).
#[derive(Debug, Clone, PartialEq)]
pub enum DiskPolicy {
    /// STPM: eq. (3) ladder for the knob and base power.
    Stpm {
        /// Knob 0..=100.
        knob: f64,
        /// Platform base power, watts.
        base_power_w: f64,
    },
    /// Fixed timeout to the deepest mode.
    FixedTimeout(f64),
    /// Device-only break-even timeout (eq. 1) to the deepest mode: 2-competitive.
    BreakEven,
    /// Douglis–Krishnan–Bershad adaptive timeout to the deepest mode: after each spin-up, double
    /// the timeout if the spin-down was not worth it (standby shorter than break-even), else
    /// lower it by 1 s; clamped to [T_be/2, 10·T_be]. Parameters are ours.
    AdaptiveTimeout {
        /// Current timeout, seconds.
        timeout_s: f64,
    },
    /// ABLE-like firmware ladder (our stand-in for the microdrive's own manager): the eq. (1)
    /// ladder through every idle mode, each rung's timer doubled after a wasted descent and
    /// halved back (not below its base) after a good one.
    Able {
        /// Multiplier per rung (index = ladder position).
        scale: Vec<f64>,
    },
    /// Never leave the high mode (no power management).
    Never,
}

impl DiskPolicy {
    /// Initial Douglis adaptive policy for `spec`.
    pub fn adaptive_timeout(spec: &DeviceSpec) -> Self {
        let t = deepest_mode(spec)
            .map(|m| device_break_even(spec, m))
            .unwrap_or(f64::INFINITY);
        DiskPolicy::AdaptiveTimeout { timeout_s: t }
    }

    /// Initial ABLE-like policy.
    pub fn able(spec: &DeviceSpec) -> Self {
        DiskPolicy::Able {
            scale: vec![1.0; break_even_ladder(spec).len()],
        }
    }

    /// The current ladder.
    pub fn ladder(&self, spec: &DeviceSpec) -> Ladder {
        let deep = |t: f64| {
            deepest_mode(spec)
                .filter(|_| t.is_finite())
                .map(|m| vec![(t, m)])
                .unwrap_or_default()
        };
        match self {
            DiskPolicy::Stpm { knob, base_power_w } => stpm_ladder(spec, *base_power_w, *knob),
            DiskPolicy::FixedTimeout(t) => deep(*t),
            DiskPolicy::BreakEven => deep(
                deepest_mode(spec)
                    .map(|m| device_break_even(spec, m))
                    .unwrap_or(f64::INFINITY),
            ),
            DiskPolicy::AdaptiveTimeout { timeout_s } => deep(*timeout_s),
            DiskPolicy::Able { scale } => {
                let mut l = break_even_ladder(spec);
                for (i, step) in l.iter_mut().enumerate() {
                    step.0 *= scale.get(i).copied().unwrap_or(1.0);
                }
                // Keep the rungs ordered after scaling.
                let mut t_prev: f64 = 0.0;
                for step in l.iter_mut() {
                    step.0 = step.0.max(t_prev);
                    t_prev = step.0;
                }
                l
            }
            DiskPolicy::Never => Vec::new(),
        }
    }

    /// Feedback after the device woke from `from` having spent `low_s` seconds below the high
    /// mode (used by the adaptive baselines).
    pub fn on_wake(&mut self, spec: &DeviceSpec, from: ModeId, low_s: f64) {
        match self {
            DiskPolicy::AdaptiveTimeout { timeout_s } => {
                let be = deepest_mode(spec)
                    .map(|m| device_break_even(spec, m))
                    .unwrap_or(1.0);
                if low_s < be {
                    *timeout_s = (*timeout_s * 2.0).min(10.0 * be);
                } else {
                    *timeout_s = (*timeout_s - 1.0).max(be / 2.0);
                }
            }
            DiskPolicy::Able { scale } => {
                let base = break_even_ladder(spec);
                if let Some(i) = base.iter().position(|(_, m)| *m == from) {
                    let be = device_break_even(spec, from);
                    if low_s < be {
                        scale[i] = (scale[i] * 2.0).min(16.0);
                    } else {
                        scale[i] = (scale[i] / 2.0).max(1.0);
                    }
                }
            }
            _ => {}
        }
    }
}

/// How a network card is power-managed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NetPolicy {
    /// Stay in the lowest mode that can transfer (802.11 PSM); a mode that cannot transfer
    /// goes up on demand.
    StaticLow,
    /// Always in the high mode (no power management).
    AlwaysHigh,
    /// Up on demand, back to the idle mode after this many idle seconds (an LTE tail).
    Timeout(f64),
    /// The STPM network module ([`NetStpm`]): up when the predicted rest of the run is worth it,
    /// back to the idle mode after its eq. (3) idle timeout.
    Stpm,
}

impl NetPolicy {
    /// The mode the card starts in under this policy.
    pub fn initial_mode(&self, spec: &DeviceSpec) -> ModeId {
        match self {
            NetPolicy::StaticLow => spec.low_readable_mode(),
            _ => spec.high_mode(),
        }
    }

    /// The step-down schedule of the card when idle: a fixed timeout to its idle mode, or none.
    pub fn idle_policy(&self, spec: &DeviceSpec, base_power_w: f64, knob: f64) -> DiskPolicy {
        match self {
            NetPolicy::StaticLow | NetPolicy::AlwaysHigh => DiskPolicy::Never,
            NetPolicy::Timeout(t) => DiskPolicy::FixedTimeout(*t),
            NetPolicy::Stpm => DiskPolicy::FixedTimeout(
                NetStpm::new(spec.clone(), base_power_w, knob).idle_timeout(),
            ),
        }
    }
}

/// Decayed histogram of run lengths (in transfers), bins 1..=MAX (the last bin holds longer runs).
#[derive(Debug, Clone, PartialEq)]
pub struct RunHistogram {
    bins: Vec<f64>,
    decay: f64,
}

impl RunHistogram {
    /// Longest run length tracked separately.
    pub const MAX: usize = 256;

    /// Empty histogram; each recorded run first multiplies old counts by `decay` (0 < decay ≤ 1).
    pub fn new(decay: f64) -> Self {
        Self {
            bins: vec![0.0; Self::MAX + 1],
            decay,
        }
    }

    /// Record a finished run of `len` transfers (0 is ignored).
    pub fn record(&mut self, len: usize) {
        if len == 0 {
            return;
        }
        for b in &mut self.bins {
            *b *= self.decay;
        }
        self.bins[len.min(Self::MAX)] += 1.0;
    }

    /// Weight of runs of length `n`.
    pub fn weight(&self, n: usize) -> f64 {
        self.bins.get(n).copied().unwrap_or(0.0)
    }

    /// Expected number of transfers still to come in a run that has reached `i` transfers:
    /// `R(i) = Σ_{n>i} (n − i)·H[n] / Σ_{n≥i} H[n]`, 0 when no run that long was seen.
    pub fn expected_remaining(&self, i: usize) -> f64 {
        let i = i.max(1);
        if i > Self::MAX {
            return 0.0;
        }
        let den: f64 = self.bins[i..].iter().sum();
        if den <= 0.0 {
            return 0.0;
        }
        let num: f64 = self.bins[i..]
            .iter()
            .enumerate()
            .map(|(k, h)| k as f64 * h)
            .sum();
        num / den
    }
}

/// A network transfer as the STPM network module sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    /// Read (download) or write (upload).
    pub op: IoOp,
    /// Size in bytes.
    pub bytes: u64,
    /// Foreground (a user waits) or background (only energy counts).
    pub foreground: bool,
}

/// What the network module wants done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetDecision {
    /// Stay in the current mode.
    Stay,
    /// Switch to the high-power mode (CAM) now.
    GoHigh,
}

/// The STPM network module (paper §4.2.1; details ours where the 2003 paper is not at hand).
///
/// Transfers (and ghost hints) are grouped into runs: a transfer belongs to the current run when
/// it starts within `idle_timeout()` of the previous one. A decayed histogram of run lengths
/// predicts how many transfers remain; at each transfer in the low mode the module switches to
/// the high mode when the knob-weighted benefit of the remaining transfers exceeds the cost of the
/// round trip through the high mode. The device goes back down after `idle_timeout()` of idleness:
/// the eq. (3) break-even time of the network card, so the same knob rule governs both devices.
#[derive(Debug, Clone)]
pub struct NetStpm {
    spec: DeviceSpec,
    base_power_w: f64,
    knob: f64,
    runs: RunHistogram,
    gaps: Vec<f64>,
    run_len: usize,
    last_activity: Option<f64>,
}

impl NetStpm {
    /// Decay of the run-length histogram per recorded run (ours).
    pub const DECAY: f64 = 0.9;
    /// Longest gap still counted as within a run, seconds, whatever the knob (ours).
    pub const MAX_RUN_GAP_S: f64 = 10.0;

    /// A module for `spec` on a platform with `base_power_w`, at `knob`.
    pub fn new(spec: DeviceSpec, base_power_w: f64, knob: f64) -> Self {
        Self {
            spec,
            base_power_w,
            knob,
            runs: RunHistogram::new(Self::DECAY),
            gaps: vec![0.0; 16],
            run_len: 0,
            last_activity: None,
        }
    }

    /// Use knob `knob` from now on (the learned histograms are kept).
    pub fn set_knob(&mut self, knob: f64) {
        self.knob = knob;
    }

    /// The mode the device returns to when idle: its deepest mode (802.11 PSM; LTE RRC idle,
    /// which cannot transfer and needs a promotion).
    pub fn idle_mode(&self) -> ModeId {
        deepest_mode(&self.spec).unwrap_or_else(|| self.spec.high_mode())
    }

    /// Idle time after which the card goes back to its idle mode: eq. (3) for the network.
    pub fn idle_timeout(&self) -> f64 {
        stpm_break_even(&self.spec, self.idle_mode(), self.base_power_w, self.knob)
    }

    fn run_gap(&self) -> f64 {
        self.idle_timeout().min(Self::MAX_RUN_GAP_S)
    }

    /// The run-length histogram.
    pub fn runs(&self) -> &RunHistogram {
        &self.runs
    }

    /// Inter-arrival histogram: bin `b` counts gaps in `[2^(b−8), 2^(b−7))` seconds.
    pub fn gap_histogram(&self) -> &[f64] {
        &self.gaps
    }

    fn note_activity(&mut self, now: f64) {
        if let Some(last) = self.last_activity {
            let gap = (now - last).max(0.0);
            let b = if gap <= 0.0 {
                0
            } else {
                ((gap.log2() + 8.0).floor().max(0.0) as usize).min(15)
            };
            self.gaps[b] += 1.0;
            if gap > self.run_gap() {
                self.runs.record(self.run_len);
                self.run_len = 0;
            }
        }
        self.run_len += 1;
        self.last_activity = Some(now);
    }

    /// Application hint: the transfer that started last has ended at `now`. Gaps between
    /// transfers are measured from here, so long transfers do not split runs.
    pub fn on_transfer_end(&mut self, now: f64) {
        if self.last_activity.is_some_and(|t| now > t) {
            self.last_activity = Some(now);
        }
    }

    /// Close the current run if the device has been idle long enough (call on idle timers).
    pub fn end_run_if_idle(&mut self, now: f64) {
        if let Some(last) = self.last_activity {
            if now - last > self.run_gap() && self.run_len > 0 {
                self.runs.record(self.run_len);
                self.run_len = 0;
            }
        }
    }

    /// A transfer starts at `now` (or a ghost hint arrives: it counts into the run); the device
    /// is in `mode`. Returns whether to switch to the high mode.
    pub fn on_transfer(&mut self, now: f64, t: Transfer, mode: ModeId) -> NetDecision {
        self.note_activity(now);
        let high = self.spec.high_mode();
        if mode == high {
            return NetDecision::Stay;
        }
        let k = if t.foreground { self.knob } else { 0.0 };
        if k >= 100.0 {
            return NetDecision::GoHigh;
        }
        let (Some(up), Some(down)) = (
            self.spec.transition(mode, high),
            self.spec.transition(high, mode),
        ) else {
            return NetDecision::Stay;
        };
        let hi = &self.spec.modes[high.0];
        let lo = &self.spec.modes[mode.0];
        let per_transfer = match (lo.io.as_ref().filter(|_| lo.can(t.op)), hi.io.as_ref()) {
            // The low mode cannot transfer at all: the transfer itself forces the switch.
            (None, _) => return NetDecision::GoHigh,
            (Some(l), Some(h)) => {
                let (tl, th) = (l.time_s(t.op, t.bytes), h.time_s(t.op, t.bytes));
                let dt = tl - th;
                let de = (l.power_w(t.op) + self.base_power_w) * tl
                    - (h.power_w(t.op) + self.base_power_w) * th;
                eq::weighted_cost_eq4(dt, de, k)
            }
            (Some(_), None) => return NetDecision::Stay,
        };
        let remaining = self.runs.expected_remaining(self.run_len);
        let benefit = remaining * per_transfer;
        let theta = self.idle_timeout().min(Self::MAX_RUN_GAP_S);
        let cost_e = up.energy_j + down.energy_j - lo.power_w * (up.time_s + down.time_s)
            + (hi.power_w - lo.power_w) * theta;
        let cost = eq::weighted_cost_eq4(0.0, cost_e, k);
        if benefit > cost {
            NetDecision::GoHigh
        } else {
            NetDecision::Stay
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn paper() -> Profile {
        Profile::builtin("paper-2004").unwrap()
    }

    #[test]
    fn stpm_ladder_knob_50_by_hand() {
        // LPI: 2.548571… s (eq3 test), standby: 4.349411… s.
        let p = paper();
        let l = stpm_ladder(&p.storage, 1.44, 50.0);
        assert_eq!(l.len(), 2);
        assert_eq!(p.storage.modes[l[0].1 .0].name, "low-power-idle");
        assert!((l[0].0 - 2.548_571_428_6).abs() < 1e-9);
        assert_eq!(p.storage.modes[l[1].1 .0].name, "standby");
        assert!((l[1].0 - 4.349_411_764_7).abs() < 1e-9);
    }

    #[test]
    fn stpm_ladder_knob_100_never_spins_down() {
        assert!(stpm_ladder(&paper().storage, 1.44, 100.0).is_empty());
    }

    #[test]
    fn break_even_ladder_by_hand() {
        // eq1 LPI: (0.31 + 0.15)/(0.76 − 0.34) = 0.46/0.42 = 1.095238…; standby 1.2/0.68 = 1.764705…
        let l = break_even_ladder(&paper().storage);
        assert_eq!(l.len(), 2);
        assert!((l[0].0 - 0.46 / 0.42).abs() < 1e-12);
        assert!((l[1].0 - 1.2 / 0.68).abs() < 1e-12);
    }

    #[test]
    fn ladder_drops_rungs_that_do_not_save_power_or_cannot_chain() {
        let p = paper();
        let s = &p.storage;
        let lpi = s.mode_by_name("low-power-idle").unwrap();
        let sb = s.mode_by_name("standby").unwrap();
        // Standby first, then LPI later: LPI would raise power, so it is dropped.
        let l = make_ladder(s, vec![(1.0, sb), (2.0, lpi)]);
        assert_eq!(l, vec![(1.0, sb)]);
        // Infinite timeouts are dropped.
        assert_eq!(make_ladder(s, vec![(f64::INFINITY, sb)]), vec![]);
    }

    #[test]
    fn network_idle_timeout_by_hand() {
        // Cisco 350: C_E = 0.53 − 1.41·0.41 + 0.51 + 1.44·0.40 = 1.0379 J.
        // K = 0: 1.0379 / 1.02 = 1.017549…; K = 50: (0.4·50 + 1.0379·50)/(1.02·50) = 1.409705…
        let p = paper();
        let n0 = NetStpm::new(p.network.clone(), 1.44, 0.0);
        assert!((n0.idle_timeout() - 1.0379 / 1.02).abs() < 1e-9);
        let n50 = NetStpm::new(p.network.clone(), 1.44, 50.0);
        assert!((n50.idle_timeout() - 1.4379 / 1.02).abs() < 1e-9);
    }

    #[test]
    fn run_histogram_expected_remaining_by_hand() {
        let mut h = RunHistogram::new(1.0);
        // Runs of length 1, 3, 3, 6.
        for l in [1, 3, 3, 6] {
            h.record(l);
        }
        // R(1) = (0·1 + 2·2 + 5·1) / 4 = 9/4
        assert!((h.expected_remaining(1) - 2.25).abs() < 1e-12);
        // R(3) = (0·2 + 3·1) / 3 = 1
        assert!((h.expected_remaining(3) - 1.0).abs() < 1e-12);
        // R(6) = 0, R(7) = 0 (nothing that long)
        assert_eq!(h.expected_remaining(6), 0.0);
        assert_eq!(h.expected_remaining(7), 0.0);
    }

    #[test]
    fn run_histogram_decays() {
        let mut h = RunHistogram::new(0.5);
        h.record(2);
        h.record(4);
        assert!((h.weight(2) - 0.5).abs() < 1e-12);
        assert!((h.weight(4) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn net_stpm_learns_long_runs_and_switches() {
        let p = paper();
        let psm = p.network.low_readable_mode();
        let mut n = NetStpm::new(p.network.clone(), 1.44, 50.0);
        let t = Transfer {
            op: IoOp::Read,
            bytes: 32768,
            foreground: true,
        };
        // Nothing learned yet: stay in PSM.
        assert_eq!(n.on_transfer(0.0, t, psm), NetDecision::Stay);
        // Teach it runs of 20 transfers 0.3 s apart, separated by 60 s of idleness.
        let mut now = 0.0;
        for _ in 0..5 {
            for _ in 0..20 {
                now += 0.3;
                n.on_transfer(now, t, psm);
            }
            now += 60.0;
        }
        // A new run: at its first transfer ~19 more are expected; per transfer PSM costs 0.15 s
        // and ≈0.35 J more, worth 50·0.15 + 50·0.35 ≈ 25 utility; cost ≈ 50·(0.51 + 0.53 −
        // 0.39·0.81 + 1.02·1.41) ≈ 108. 19·25 > 108: switch.
        assert_eq!(n.on_transfer(now, t, psm), NetDecision::GoHigh);
    }

    #[test]
    fn transfer_end_hint_keeps_long_transfers_in_one_run() {
        let p = paper();
        let psm = p.network.low_readable_mode();
        let t = Transfer {
            op: IoOp::Read,
            bytes: 1 << 20,
            foreground: true,
        };
        // Transfers of 3 s each, the next starting 0.5 s after the previous ends. K = 50: the run
        // gap is 1.41 s. Without end hints the 3.5 s start-to-start gap splits every run.
        let mut with = NetStpm::new(p.network.clone(), 1.44, 50.0);
        let mut without = NetStpm::new(p.network.clone(), 1.44, 50.0);
        let mut now = 0.0;
        for _ in 0..5 {
            with.on_transfer(now, t, psm);
            without.on_transfer(now, t, psm);
            with.on_transfer_end(now + 3.0);
            now += 3.5;
        }
        with.end_run_if_idle(now + 100.0);
        without.end_run_if_idle(now + 100.0);
        assert_eq!(with.runs().weight(5), 1.0);
        assert!(without.runs().weight(1) > 4.0);
    }

    #[test]
    fn lte_idle_mode_is_rrc_idle_with_a_finite_timeout() {
        // LTE: promotion 0.26 s / 0.3146 J, release free; connected 1.06 W, idle 0.02 W, base 5 W.
        // C_E = 0 − 1.06·0 + 0.3146 + 5·0.26 = 1.6146 J; K = 50:
        // T_be = (0.26·50 + 1.6146·50) / (1.04·50) = 1.8746 / 1.04 = 1.802500 s.
        let p = Profile::builtin("laptop-hdd-lte").unwrap();
        let n = NetStpm::new(p.network.clone(), 5.0, 50.0);
        assert_eq!(p.network.modes[n.idle_mode().0].name, "idle");
        assert!(
            (n.idle_timeout() - 1.8746 / 1.04).abs() < 1e-9,
            "{}",
            n.idle_timeout()
        );
    }

    #[test]
    fn net_stpm_background_only_counts_energy() {
        let p = paper();
        let psm = p.network.low_readable_mode();
        let mut n = NetStpm::new(p.network.clone(), 1.44, 99.0);
        let bg = Transfer {
            op: IoOp::Read,
            bytes: 32768,
            foreground: false,
        };
        // Single-transfer runs: no benefit expected, background never switches.
        let mut now = 0.0;
        for _ in 0..10 {
            assert_eq!(n.on_transfer(now, bg, psm), NetDecision::Stay);
            now += 100.0;
        }
    }

    #[test]
    fn policies_adapt_within_bounds() {
        let p = paper();
        let s = &p.storage;
        let sb = s.mode_by_name("standby").unwrap();
        let be = 1.2 / 0.68;
        let mut a = DiskPolicy::adaptive_timeout(s);
        for _ in 0..10 {
            a.on_wake(s, sb, 0.1);
        }
        assert!((a.ladder(s)[0].0 - 10.0 * be).abs() < 1e-9);
        for _ in 0..100 {
            a.on_wake(s, sb, 100.0);
        }
        assert!((a.ladder(s)[0].0 - be / 2.0).abs() < 1e-9);
        let mut able = DiskPolicy::able(s);
        let base = able.ladder(s);
        able.on_wake(s, sb, 0.1);
        let l = able.ladder(s);
        assert!((l[1].0 - 2.0 * base[1].0).abs() < 1e-9);
        assert_eq!(l[0], base[0]);
        assert!(DiskPolicy::Never.ladder(s).is_empty());
        assert_eq!(DiskPolicy::FixedTimeout(30.0).ladder(s), vec![(30.0, sb)]);
    }
}
