//! One clock interface with a real-time and a virtual-time implementation.
//!
//! Times are seconds as `f64` since the clock's origin. The power manager, the controllers and
//! the cache manager read the clock the power manager was given: a live application passes a
//! [`RealClock`]; the simulator (`wattio-sim`) runs the same power manager, controllers and cache
//! manager on a [`VirtualClock`], moving it from one device deadline to the next.

use std::sync::Mutex;
use std::time::Instant;

/// A monotonic source of time in seconds.
pub trait Clock: Send + Sync {
    /// Seconds since this clock's origin; never decreases.
    fn now(&self) -> f64;
}

/// Wall-clock time from [`Instant`] (monotonic).
#[derive(Debug)]
pub struct RealClock {
    origin: Instant,
}

impl RealClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
}

/// Virtual time, moved forward explicitly. Moving it backwards is refused (time never goes back).
#[derive(Debug, Default)]
pub struct VirtualClock {
    t: Mutex<f64>,
}

impl VirtualClock {
    /// A virtual clock at time 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Move to `t` if `t` is later than now (and finite). Returns the time after the call.
    pub fn advance_to(&self, t: f64) -> f64 {
        let mut g = self.t.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_finite() && t > *g {
            *g = t;
        }
        *g
    }

    /// Move forward by `dt` seconds (negative or non-finite steps are ignored).
    pub fn advance_by(&self, dt: f64) -> f64 {
        let now = self.now();
        self.advance_to(now + dt.max(0.0))
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> f64 {
        *self.t.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn real_clock_is_monotonic() {
        let c = RealClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
    }

    proptest! {
        /// Whatever sequence of targets is asked for, virtual time never goes back.
        #[test]
        fn virtual_time_never_goes_back(steps in proptest::collection::vec(-1e6f64..1e6, 1..200)) {
            let c = VirtualClock::new();
            let mut last = c.now();
            for s in steps {
                let now = if s >= 0.0 { c.advance_to(s) } else { c.advance_by(s) };
                prop_assert!(now >= last);
                prop_assert_eq!(now, c.now());
                last = now;
            }
        }
    }
}
