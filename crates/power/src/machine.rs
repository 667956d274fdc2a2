//! The power-mode state machine of one device, without a clock.
//!
//! [`DeviceMachine`] holds what a device is doing — its mode, the transition under way, its idle
//! ladder (the step-down schedule of a [`DiskPolicy`]), when its queued I/O ends — and the energy
//! it has drawn, integrated from the device profile. Every call takes the time as an argument, so
//! the same code runs on wall-clock time (the live [`crate::DiskController`] and
//! [`crate::NetController`] read a [`crate::RealClock`]) and on virtual time (the simulator's
//! [`crate::VirtualClock`]). It never calls out: what it did is queued as [`Step`]s, which its
//! driver takes with [`DeviceMachine::take_steps`] to move the real device and notify the
//! [`crate::PowerManager`].
//!
//! Energy: modes and transitions are accounted as the power manager's [`crate::Residency`] is
//! (the mode's idle power while settled; a transition's energy spread evenly over its duration,
//! in place of the idle power; a zero-time transition adds its energy at once); and, for each
//! I/O timed from the profile's model ([`DeviceMachine::modelled_io`]), `(P_io − P_mode)` for
//! its duration.

use crate::device::{DeviceKind, DeviceSpec, IoOp, ModeId};
use crate::residency::{move_cost, ModeLedger, Residency};
use crate::stpm::{DiskPolicy, Ladder};

/// Something the machine did, stamped with its (clock) time, for its driver to act on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// A transition from `from` to `to` started: a live driver moves the real device now.
    Started {
        /// When, seconds.
        at: f64,
        /// Mode left.
        from: ModeId,
        /// Mode aimed at.
        to: ModeId,
    },
    /// The device entered `mode`, coming from `from`: a driver notifies the power manager.
    Entered {
        /// When, seconds.
        at: f64,
        /// Mode left.
        from: ModeId,
        /// Mode entered.
        mode: ModeId,
    },
}

/// When and how a device could serve an I/O issued now: what a controller knows beyond the
/// current mode (a transition under way, I/O queued ahead).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Readiness {
    /// The mode the device is in (during a transition, the mode it is leaving).
    pub mode: ModeId,
    /// The mode the I/O would start from once `wait_s` is over. When that mode cannot do the
    /// I/O, the I/O also pays the transition from it to the high mode.
    pub io_mode: ModeId,
    /// Seconds before the device gets to the I/O: queued I/O, a transition under way.
    pub wait_s: f64,
}

/// The clock-free state machine of one device (storage or network).
#[derive(Debug, Clone)]
pub struct DeviceMachine {
    spec: DeviceSpec,
    high: ModeId,
    /// Mode, transition under way, and the time and energy they account for.
    ledger: ModeLedger,
    /// Go to the high mode as soon as the transition under way (a step down) ends: a drive
    /// cannot abort a spin-down.
    wake_after_move: bool,
    policy: DiskPolicy,
    ladder: Ladder,
    rung: usize,
    idle_since: f64,
    low_since: f64,
    busy_until: f64,
    io_while_moving: bool,
    /// What modelled I/O drew beyond the mode's idle power.
    io_energy_j: f64,
    wakeups: u64,
    steps: Vec<Step>,
}

impl DeviceMachine {
    /// A device in `mode` at time `now`, stepping down by `policy`'s ladder.
    ///
    /// A network card keeps transferring in its current mode while it changes mode (a switch
    /// to CAM does not hold up the transfer under way); a disk serves no I/O during a
    /// transition.
    pub fn new(spec: DeviceSpec, mode: ModeId, policy: DiskPolicy, now: f64) -> Self {
        let high = spec.high_mode();
        let ladder = policy.ladder(&spec);
        let io_while_moving = spec.kind == DeviceKind::Network;
        Self {
            ledger: ModeLedger::new(&spec, mode, now),
            spec,
            high,
            wake_after_move: false,
            policy,
            ladder,
            rung: 0,
            idle_since: now,
            low_since: now,
            busy_until: now,
            io_while_moving,
            io_energy_j: 0.0,
            wakeups: 0,
            steps: Vec::new(),
        }
    }

    /// The device's description.
    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    /// The mode the device is settled in (during a transition, the mode it is leaving).
    pub fn mode(&self) -> ModeId {
        self.ledger.mode()
    }

    /// The transition under way: target mode and end time.
    pub fn moving_to(&self) -> Option<(ModeId, f64)> {
        self.ledger.moving().map(|m| (m.to, m.end))
    }

    /// The high mode while on the way there, else the settled mode.
    pub fn effective_mode(&self) -> ModeId {
        match self.ledger.moving() {
            Some(m) if m.to == self.high || self.wake_after_move => self.high,
            _ => self.mode(),
        }
    }

    /// The step-down policy in use.
    pub fn policy(&self) -> &DiskPolicy {
        &self.policy
    }

    /// Use `policy` from now on (its ladder replaces the current one; the idle period goes on).
    pub fn set_policy(&mut self, policy: DiskPolicy) {
        if policy != self.policy {
            self.ladder = policy.ladder(&self.spec);
            self.policy = policy;
        }
    }

    /// When queued I/O ends (the last [`Self::modelled_io`]).
    pub fn busy_until(&self) -> f64 {
        self.busy_until
    }

    /// Energy drawn by the device up to the last time given to the machine, joules: modes and
    /// transitions as in [`Self::residency`], plus modelled I/O.
    pub fn energy_j(&self) -> f64 {
        self.ledger.energy_j() + self.io_energy_j
    }

    /// Time in each mode and in transitions, and their energy, up to `now` (nothing is
    /// advanced: steps due before `now` and not yet taken are not in it).
    pub fn residency(&self, now: f64) -> Residency {
        self.ledger.residency(&self.spec, now)
    }

    /// Transitions to the high mode started so far (disk spin-ups, network wake-ups).
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }

    /// What the machine did since the last call, oldest first.
    pub fn take_steps(&mut self) -> Vec<Step> {
        std::mem::take(&mut self.steps)
    }

    fn next_rung(&self) -> Option<(f64, ModeId)> {
        if self.ledger.moving().is_some() {
            return None;
        }
        self.ladder
            .get(self.rung)
            .map(|(tau, m)| ((self.idle_since + tau).max(self.busy_until), *m))
            .filter(|(at, _)| at.is_finite())
    }

    /// When the next step is due (transition end or ladder rung), if any.
    pub fn next_deadline(&self) -> Option<f64> {
        match self.ledger.moving() {
            Some(m) => Some(m.end),
            None => self.next_rung().map(|(at, _)| at),
        }
    }

    fn transition_time(&self, from: ModeId, to: ModeId) -> f64 {
        move_cost(&self.spec, from, to).time_s
    }

    fn start(&mut self, at: f64, to: ModeId) -> f64 {
        let from = self.mode();
        if from == self.high {
            self.low_since = at;
        }
        if to == self.high {
            self.wakeups += 1;
        }
        self.steps.push(Step::Started { at, from, to });
        let cost = move_cost(&self.spec, from, to);
        self.ledger.start(&self.spec, at, to, cost)
    }

    fn finish_move(&mut self, at: f64) {
        let Some(m) = self.ledger.moving() else {
            return;
        };
        let from = self.ledger.enter(&self.spec, at, m.to);
        self.steps.push(Step::Entered {
            at,
            from,
            mode: m.to,
        });
        if m.to == self.high && from != self.high {
            self.policy
                .on_wake(&self.spec, from, (at - self.low_since).max(0.0));
            self.ladder = self.policy.ladder(&self.spec);
            self.rung = 0;
            // Idle timers restart when the device is back up (or when I/O queued behind the
            // wake-up ends, whichever is later).
            self.idle_since = self.idle_since.max(at);
        } else if from == self.high {
            self.low_since = at;
        }
        if self.wake_after_move {
            self.wake_after_move = false;
            if self.mode() != self.high {
                self.start(at, self.high);
            }
        }
    }

    /// Complete transitions and take ladder steps due by `now`, in time order; the energy is
    /// integrated up to `now`.
    pub fn advance(&mut self, now: f64) {
        loop {
            let te = self.ledger.moving().map(|m| m.end).unwrap_or(f64::INFINITY);
            let (tl, rung_mode) = self
                .next_rung()
                .map(|(at, m)| (at, Some(m)))
                .unwrap_or((f64::INFINITY, None));
            let next = te.min(tl);
            if next > now {
                break;
            }
            self.ledger.integrate(&self.spec, next);
            if te <= tl {
                self.finish_move(next);
            } else if let Some(m) = rung_mode {
                self.rung += 1;
                if m != self.mode() {
                    self.start(next, m);
                }
            }
        }
        self.ledger.integrate(&self.spec, now);
    }

    /// Start towards the high mode at `now` (nothing if there or on the way; after a step down
    /// under way, once it ends). Returns when the device will be in the high mode.
    pub fn wake(&mut self, now: f64) -> f64 {
        self.advance(now);
        if let Some(m) = self.ledger.moving() {
            if m.to == self.high {
                return m.end;
            }
            self.wake_after_move = true;
            return m.end + self.transition_time(m.to, self.high);
        }
        if self.mode() == self.high {
            return now;
        }
        self.start(now, self.high)
    }

    /// Application I/O `op` begins at `now` (live use: the real I/O is timed by the device):
    /// wake the device if it cannot do `op` now, and restart the idle period. Returns when the
    /// device can start it.
    pub fn io_begins(&mut self, now: f64, op: IoOp) -> f64 {
        self.advance(now);
        self.idle_since = self.idle_since.max(now);
        self.rung = 0;
        let can_now = self.can_now(op);
        if can_now {
            return now;
        }
        self.wake(now)
    }

    /// Application I/O ended at `now` (live use): the idle period starts here.
    pub fn io_ends(&mut self, now: f64) {
        self.advance(now);
        self.idle_since = now;
        self.rung = 0;
    }

    /// An I/O of `bytes` issued at `now`, timed by the profile's I/O model (the simulator's
    /// I/O): it waits for queued I/O and, if the device cannot do it in its mode, for a
    /// wake-up. Returns its start and end; the idle period starts at its end.
    pub fn modelled_io(&mut self, now: f64, op: IoOp, bytes: u64) -> (f64, f64) {
        self.advance(now);
        let can_now = self.can_now(op);
        let (io_mode, ready) = if can_now {
            (self.mode(), now)
        } else {
            (self.high, self.wake(now))
        };
        let m = &self.spec.modes[io_mode.0];
        // Modes that can do I/O have a model (checked when the profile is loaded); a hand-made
        // spec without one gets instant I/O.
        let (dur, extra_w) =
            m.io.map(|io| (io.time_s(op, bytes), io.power_w(op) - m.power_w))
                .unwrap_or((0.0, 0.0));
        let start = ready.max(self.busy_until).max(now);
        let end = start + dur;
        // The I/O power replaces the mode's idle power for the duration (it may be lower).
        self.io_energy_j += extra_w * dur;
        self.busy_until = end;
        self.idle_since = end;
        self.rung = 0;
        (start, end)
    }

    /// How an I/O issued at `now` would be served (no state changes).
    pub fn readiness(&self, now: f64, op: IoOp) -> Readiness {
        if self.next_deadline().is_some_and(|d| d <= now) {
            // Steps are due that nobody has taken yet: answer for the state they lead to.
            let mut ahead = self.clone();
            ahead.advance(now);
            return ahead.readiness(now, op);
        }
        let busy = (self.busy_until - now).max(0.0);
        let mode = self.mode();
        let settled = |io_mode| Readiness {
            mode,
            io_mode,
            wait_s: busy,
        };
        let Some(m) = self.ledger.moving() else {
            return settled(mode);
        };
        if self.io_while_moving && self.spec.modes[mode.0].can(op) {
            return settled(mode);
        }
        let (io_mode, ready) = if self.wake_after_move {
            (self.high, m.end + self.transition_time(m.to, self.high))
        } else {
            (m.to, m.end)
        };
        Readiness {
            mode,
            io_mode,
            wait_s: busy.max(ready - now).max(0.0),
        }
    }

    /// Forget the transition under way (its actuator failed): the device stays in its mode.
    pub fn cancel_move(&mut self) {
        self.ledger.cancel_move();
        self.wake_after_move = false;
    }

    /// Whether `op` can start now: the mode can do it, and a transition under way does not
    /// hold it up.
    fn can_now(&self, op: IoOp) -> bool {
        self.spec.modes[self.mode().0].can(op)
            && (self.ledger.moving().is_none() || self.io_while_moving)
    }
}

#[cfg(test)]
mod tests {
    //! Times and energies worked out by hand from the paper-2004 profile (Hitachi microdrive:
    //! performance idle 0.76 W, low-power idle 0.34 W, standby 0.08 W; read 0.065 s + B/1.3 MB/s
    //! at 0.72 W; Cisco 350: CAM 1.41 W, PSM 0.39 W).
    use super::*;
    use crate::profile::Profile;

    fn disk() -> (DeviceSpec, ModeId, ModeId, ModeId) {
        let p = Profile::builtin("paper-2004").unwrap();
        let s = p.storage;
        let lpi = s.mode_by_name("low-power-idle").unwrap();
        let sb = s.mode_by_name("standby").unwrap();
        let hi = s.high_mode();
        (s, hi, lpi, sb)
    }

    #[test]
    fn ladder_steps_and_energy_by_hand() {
        let (s, hi, _, sb) = disk();
        let mut m = DeviceMachine::new(s, hi, DiskPolicy::FixedTimeout(10.0), 0.0);
        assert_eq!(m.next_deadline(), Some(10.0));
        m.advance(100.0);
        // 10 s at 0.76 W, 0.32 s / 0.3 J to standby, 89.68 s at 0.08 W.
        let e = 7.6 + 0.3 + 0.08 * 89.68;
        assert!((m.energy_j() - e).abs() < 1e-9, "{} vs {e}", m.energy_j());
        assert_eq!(
            m.take_steps(),
            vec![
                Step::Started {
                    at: 10.0,
                    from: hi,
                    to: sb
                },
                Step::Entered {
                    at: 10.32,
                    from: hi,
                    mode: sb
                }
            ]
        );
        assert_eq!(m.mode(), sb);
    }

    #[test]
    fn read_from_standby_waits_for_the_spin_up() {
        let (s, hi, _, sb) = disk();
        let mut m = DeviceMachine::new(s, sb, DiskPolicy::Never, 0.0);
        let t_io = 0.065 + 32768.0 / 1.3e6;
        let (start, end) = m.modelled_io(5.0, IoOp::Read, 32768);
        assert!((start - 5.82).abs() < 1e-12);
        assert!((end - (5.82 + t_io)).abs() < 1e-12);
        assert_eq!(m.wakeups(), 1);
        // The machine is moving until 5.82; the read itself is accounted at once.
        assert_eq!(m.moving_to(), Some((hi, 5.82)));
        m.advance(end);
        // 5 s standby 0.4 J + spin-up 0.9 J + idle 0.76 W × t_io + (0.72 − 0.76) × t_io.
        let e = 0.4 + 0.9 + 0.72 * t_io;
        assert!((m.energy_j() - e).abs() < 1e-9, "{} vs {e}", m.energy_j());
    }

    #[test]
    fn wake_during_a_spin_down_waits_for_it_to_end() {
        let (s, hi, _, sb) = disk();
        let mut m = DeviceMachine::new(s, hi, DiskPolicy::FixedTimeout(1.0), 0.0);
        m.advance(1.1); // spinning down since 1.0, until 1.32
        let r = m.readiness(1.1, IoOp::Read);
        assert_eq!(r.io_mode, sb);
        assert!((r.wait_s - 0.22).abs() < 1e-12);
        let ready = m.wake(1.1);
        assert!((ready - (1.32 + 0.82)).abs() < 1e-12);
        assert_eq!(m.effective_mode(), hi);
        assert_eq!(m.next_deadline(), Some(1.32));
        m.advance(3.0);
        assert_eq!(m.mode(), hi);
        let steps = m.take_steps();
        assert_eq!(steps.len(), 4, "{steps:?}");
        assert!(matches!(steps[2], Step::Started { at, to, .. } if at == 1.32 && to == hi));
        assert!(
            matches!(steps[3], Step::Entered { at, mode, .. } if (at - 2.14).abs() < 1e-12 && mode == hi)
        );
    }

    #[test]
    fn readiness_looks_past_steps_not_yet_taken() {
        let (s, hi, _, sb) = disk();
        let m = DeviceMachine::new(s, hi, DiskPolicy::FixedTimeout(1.0), 0.0);
        // At 2.0 the drive is in standby although nobody advanced the machine.
        let r = m.readiness(2.0, IoOp::Read);
        assert_eq!(r.mode, sb);
        assert_eq!(r.io_mode, sb);
        assert_eq!(r.wait_s, 0.0);
        assert_eq!(m.mode(), hi);
    }
}
