//! Where a device's time and energy went: the one account of mode residency and transition
//! energy, kept by the [`crate::DeviceMachine`] (which the controllers and the simulator drive)
//! and by the [`crate::PowerManager`] (its per-device [`Residency`]).
//!
//! A settled device draws its mode's idle power. A transition is a state of its own: the Ghosts
//! paper gives each transition as a time and an energy (Anand, Nightingale, Flinn, MobiSys 2004,
//! §2, Figure 2), so for its duration the device draws that energy, spread evenly, in place of
//! either mode's idle power; a zero-time transition adds its energy at once. A device that
//! enters a mode with no transition announced (a driver that only reports arrivals) is taken to
//! have made the transition in no time, and its energy is added at once.

use crate::device::{DeviceSpec, ModeId, TransitionCost};

/// Per-device accounting of time spent in each mode and in transitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Residency {
    /// Seconds settled in each mode (index = mode id), up to the time of the query; time in
    /// transitions is not in any mode.
    pub seconds: Vec<f64>,
    /// Seconds spent in transitions between modes.
    pub transition_seconds: f64,
    /// Number of mode changes completed.
    pub transitions: u64,
    /// Energy of the transitions, from the transition table, joules (of a transition under way,
    /// the part spent so far).
    pub transition_energy_j: f64,
    /// Idle-mode energy `Σ power × seconds` plus transition energy, joules. I/O energy is not
    /// included: the manager does not see individual requests.
    pub energy_j: f64,
}

/// A transition under way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Move {
    pub(crate) to: ModeId,
    pub(crate) start: f64,
    pub(crate) end: f64,
    pub(crate) energy_j: f64,
}

impl Move {
    /// The power drawn during the move: its energy spread over its duration.
    fn power_w(&self) -> f64 {
        if self.end > self.start {
            self.energy_j / (self.end - self.start)
        } else {
            0.0
        }
    }
}

/// The mode a device is in, the transition under way, and the time and energy integrated so
/// far. Times are seconds on the caller's clock; a time earlier than one already given counts
/// nothing.
#[derive(Debug, Clone)]
pub(crate) struct ModeLedger {
    mode: ModeId,
    moving: Option<Move>,
    integrated_to: f64,
    seconds: Vec<f64>,
    transition_seconds: f64,
    transitions: u64,
    mode_energy_j: f64,
    transition_energy_j: f64,
}

impl ModeLedger {
    /// A device of `spec` settled in `mode` at `now`.
    pub(crate) fn new(spec: &DeviceSpec, mode: ModeId, now: f64) -> Self {
        Self {
            mode,
            moving: None,
            integrated_to: now,
            seconds: vec![0.0; spec.modes.len()],
            transition_seconds: 0.0,
            transitions: 0,
            mode_energy_j: 0.0,
            transition_energy_j: 0.0,
        }
    }

    /// The mode the device is settled in (during a transition, the mode it is leaving).
    pub(crate) fn mode(&self) -> ModeId {
        self.mode
    }

    /// The transition under way.
    pub(crate) fn moving(&self) -> Option<Move> {
        self.moving
    }

    /// Time and energy up to `to`. Past the end of a transition whose arrival has not been
    /// reported yet, the device is counted in the mode it was going to.
    pub(crate) fn integrate(&mut self, spec: &DeviceSpec, to: f64) {
        if to <= self.integrated_to {
            return;
        }
        let from = self.integrated_to;
        let settled_from = match self.moving {
            Some(m) => {
                let moving_to = to.min(m.end).max(from);
                self.transition_seconds += moving_to - from;
                self.transition_energy_j += m.power_w() * (moving_to - from);
                Some((m.to, moving_to)).filter(|_| to > m.end)
            }
            None => Some((self.mode, from)),
        };
        if let Some((mode, since)) = settled_from {
            self.seconds[mode.0] += to - since;
            self.mode_energy_j += spec.modes[mode.0].power_w * (to - since);
        }
        self.integrated_to = to;
    }

    /// A transition to `to` starts at `at` and costs `cost`; returns when it ends.
    pub(crate) fn start(
        &mut self,
        spec: &DeviceSpec,
        at: f64,
        to: ModeId,
        cost: TransitionCost,
    ) -> f64 {
        self.integrate(spec, at);
        let start = at.max(self.integrated_to);
        let end = start + cost.time_s;
        self.moving = Some(Move {
            to,
            start,
            end,
            energy_j: cost.energy_j,
        });
        end
    }

    /// The device settles in `mode` at `at`, ending the transition under way (or, with none
    /// announced, making one in no time). Returns the mode it left.
    pub(crate) fn enter(&mut self, spec: &DeviceSpec, at: f64, mode: ModeId) -> ModeId {
        self.integrate(spec, at);
        let from = self.mode;
        match self.moving.take() {
            // Spread over its duration by `integrate`, unless it took no time.
            Some(m) if m.end <= m.start => self.transition_energy_j += m.energy_j,
            Some(_) => {}
            None if mode != from => {
                self.transition_energy_j += move_cost(spec, from, mode).energy_j;
            }
            None => {}
        }
        if mode != from {
            self.transitions += 1;
        }
        self.mode = mode;
        from
    }

    /// Forget the transition under way: the device stays in its mode (what it drew so far
    /// stays counted).
    pub(crate) fn cancel_move(&mut self) {
        self.moving = None;
    }

    /// Energy integrated so far, joules.
    pub(crate) fn energy_j(&self) -> f64 {
        self.mode_energy_j + self.transition_energy_j
    }

    /// The account up to `now` (nothing is changed).
    pub(crate) fn residency(&self, spec: &DeviceSpec, now: f64) -> Residency {
        let mut at_now = self.clone();
        at_now.integrate(spec, now);
        Residency {
            seconds: at_now.seconds,
            transition_seconds: at_now.transition_seconds,
            transitions: at_now.transitions,
            transition_energy_j: at_now.transition_energy_j,
            energy_j: at_now.mode_energy_j + at_now.transition_energy_j,
        }
    }
}

/// The cost of going from `from` to `to`. A validated profile has every transition a ladder or
/// a wake-up takes; the fallbacks (the cost from the high mode, else none) keep a hand-made
/// spec usable.
pub(crate) fn move_cost(spec: &DeviceSpec, from: ModeId, to: ModeId) -> TransitionCost {
    spec.transition(from, to)
        .or_else(|| spec.transition(spec.high_mode(), to))
        .unwrap_or(TransitionCost {
            time_s: 0.0,
            energy_j: 0.0,
        })
}
