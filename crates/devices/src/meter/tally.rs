//! Time spent in each power state, from reads of the state at instants.
//!
//! Between two reads the state is not known: a change seen at the second read is taken at the
//! midpoint between the two, so each state gets half of the time between a read that saw it
//! and the next that saw another (the error is at most half a polling interval per change).
//! Time before the first read, and time between reads that could not say, is of unknown
//! state.

use std::time::Instant;

/// One device's residency, kept by the polling thread.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// When metering began: the time before the first read is of unknown state.
    started: Instant,
    /// Seconds in each state, up to the last read.
    states_s: Vec<f64>,
    /// Seconds of unknown state, up to the last read.
    unknown_s: f64,
    /// The last read: when, and the state it gave (`None`: the reader could not say).
    last: Option<(Instant, Option<usize>)>,
}

impl Tally {
    /// A tally of `n_states` states from `started` on.
    pub(crate) fn new(n_states: usize, started: Instant) -> Tally {
        Tally {
            started,
            states_s: vec![0.0; n_states],
            unknown_s: 0.0,
            last: None,
        }
    }

    fn add(&mut self, state: Option<usize>, s: f64) {
        match state.and_then(|i| self.states_s.get_mut(i)) {
            Some(t) => *t += s,
            None => self.unknown_s += s,
        }
    }

    /// A read at `at` that gave `state` (an index into the figures' states, or `None`).
    pub(crate) fn record(&mut self, at: Instant, state: Option<usize>) {
        let state = state.filter(|i| *i < self.states_s.len());
        match self.last {
            None => self.unknown_s += at.saturating_duration_since(self.started).as_secs_f64(),
            Some((t0, s0)) => {
                let gap = at.saturating_duration_since(t0).as_secs_f64();
                if s0 == state {
                    self.add(s0, gap);
                } else {
                    // The change is taken at the midpoint between the two reads.
                    self.add(s0, gap / 2.0);
                    self.add(state, gap / 2.0);
                }
            }
        }
        self.last = Some((at, state));
    }

    /// Seconds per state and of unknown state up to `now`: the time since the last read is
    /// counted in the state it gave (a later read that sees a change moves half of it; the
    /// interval arithmetic takes a decrease as none).
    pub(crate) fn up_to(&self, now: Instant) -> (Vec<f64>, f64) {
        let mut copy = self.clone();
        match self.last {
            Some((t0, s0)) => copy.add(s0, now.saturating_duration_since(t0).as_secs_f64()),
            None => copy.unknown_s += now.saturating_duration_since(self.started).as_secs_f64(),
        }
        (copy.states_s, copy.unknown_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_change_is_taken_at_the_midpoint_between_reads() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut t = Tally::new(3, t0);
        t.record(at(100), Some(0)); // 0.1 s unknown before the first read
        t.record(at(1100), Some(0)); // 1 s in state 0
        t.record(at(2100), Some(2)); // 0.5 s in 0, 0.5 s in 2
        t.record(at(3100), None); // 0.5 s in 2, 0.5 s unknown
        t.record(at(4100), Some(7)); // out of range: unknown, 1 s
        let (states, unknown) = t.up_to(at(4600)); // 0.5 s more unknown
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(states[0], 1.5) && close(states[1], 0.0) && close(states[2], 1.0));
        assert!(close(unknown, 0.1 + 0.5 + 1.0 + 0.5), "{unknown}");
    }
}
