//! The energy interval of one device over a window, from its power figures and what it did.
//!
//! For each power state the device was in, the lower bound is the state's idle power (0 where
//! the device reports none) times the time there, the upper bound its maximum power times that
//! time. The central estimate, only where the device reports every figure it needs, is the
//! active power over the busy time (`io_ticks` of kernel Documentation/block/stat.rst) and the
//! idle power over the rest. Time of unknown state is bounded by the least idle power and the
//! greatest maximum power of any state, and leaves no central estimate.

use serde::{Deserialize, Serialize};

use crate::figures::{EnergyInterval, PowerFigures};

/// What one device did over a window: the time in each state, of unknown state and
/// runtime-suspended, and its busy time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DiskWindow {
    /// The window, s.
    pub window_s: f64,
    /// Seconds in each of the figures' states (same order).
    pub residency_s: Vec<f64>,
    /// Seconds of unknown state (no reader answer, or before the first read).
    pub unknown_s: f64,
    /// Seconds runtime-suspended (`power/runtime_suspended_time`), where the device has it.
    pub suspended_s: Option<f64>,
    /// Seconds with I/O in flight, where `stat` was read; never more than the window.
    pub busy_s: Option<f64>,
}

/// Unknown time shorter than this (float rounding of the window's parts) is none.
const UNKNOWN_EPSILON_S: f64 = 1e-3;

/// The index of the lowest-power state: the least maximum power, then the least idle power.
pub(crate) fn lowest_power_state(figures: &PowerFigures) -> Option<usize> {
    let key = |i: usize| {
        let s = &figures.states[i];
        (s.max_w, s.idle_w.unwrap_or(0.0))
    };
    (0..figures.states.len()).min_by(|a, b| {
        key(*a)
            .partial_cmp(&key(*b))
            .unwrap_or(std::cmp::Ordering::Equal)
    })
}

/// Moves the runtime-suspended time into the lowest-power state: a suspended device is in it
/// whatever the polls saw (a poll cannot see a suspended device without waking it). It is
/// taken first from the unknown time, then from the other states in proportion.
pub fn fold_suspended(figures: &PowerFigures, w: &mut DiskWindow) {
    let (Some(suspended), Some(lowest)) = (w.suspended_s, lowest_power_state(figures)) else {
        return;
    };
    if lowest >= w.residency_s.len() {
        return;
    }
    let mut left = suspended.clamp(0.0, w.window_s);
    let from_unknown = left.min(w.unknown_s);
    w.unknown_s -= from_unknown;
    left -= from_unknown;
    let others: f64 = (0..w.residency_s.len())
        .filter(|i| *i != lowest)
        .map(|i| w.residency_s[i])
        .sum();
    let fraction = if others > 0.0 {
        (left / others).min(1.0)
    } else {
        0.0
    };
    let mut moved = from_unknown;
    for (i, t) in w.residency_s.iter_mut().enumerate() {
        if i != lowest {
            moved += *t * fraction;
            *t -= *t * fraction;
        }
    }
    w.residency_s[lowest] += moved;
}

/// The central estimate: active power over the busy time, shared out over the operational
/// states in proportion to the time in each, and idle power over the rest; `None` where a
/// figure it needs is not reported, the busy time is not known, or some time is of unknown
/// state.
fn central_j(figures: &PowerFigures, w: &DiskWindow) -> Option<f64> {
    if w.unknown_s > UNKNOWN_EPSILON_S {
        return None;
    }
    let busy = w.busy_s?.clamp(0.0, w.window_s);
    let operational_s: f64 = figures
        .states
        .iter()
        .zip(&w.residency_s)
        .filter(|(s, _)| !s.non_operational)
        .map(|(_, t)| *t)
        .sum();
    let mut j = 0.0;
    for (s, t) in figures.states.iter().zip(&w.residency_s) {
        if *t <= 0.0 {
            continue;
        }
        let busy_here = if s.non_operational || operational_s <= 0.0 {
            0.0
        } else {
            (busy * t / operational_s).min(*t)
        };
        let active = if busy_here > 0.0 { s.active_w? } else { 0.0 };
        j += busy_here * active + (t - busy_here) * s.idle_w?;
    }
    Some(j)
}

/// The device's energy interval over `w` (runtime-suspended time already folded in with
/// [`fold_suspended`]).
pub fn interval_of(figures: &PowerFigures, w: &DiskWindow) -> EnergyInterval {
    let idle = |i: usize| figures.states[i].idle_w.unwrap_or(0.0);
    let (mut lower, mut upper) = (0.0, 0.0);
    for (i, t) in w.residency_s.iter().enumerate().take(figures.states.len()) {
        lower += idle(i) * t;
        upper += figures.states[i].max_w * t;
    }
    let least_idle = (0..figures.states.len())
        .map(idle)
        .fold(f64::INFINITY, f64::min);
    let greatest_max = figures.states.iter().map(|s| s.max_w).fold(0.0, f64::max);
    if least_idle.is_finite() {
        lower += least_idle * w.unknown_s;
    }
    upper += greatest_max * w.unknown_s;
    EnergyInterval {
        lower_j: lower,
        // A device reporting an active power below its idle one would put the estimate out of
        // its own bounds: it is kept within them.
        central_j: central_j(figures, w).map(|c| c.clamp(lower, upper)),
        upper_j: upper,
    }
}
