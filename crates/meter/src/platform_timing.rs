//! How a whole-machine meter sees time over a window: what the meter hands the machine view
//! ([`crate::MachineView`]) and what decides whether `measure` waits for a late meter.

/// How many averaging periods (plus the meter's delay) a window must span for a rest.
pub const WINDOW_PERIODS: f64 = 5.0;

/// What a whole-machine meter's counter says of its timing, for the rules above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlatformTiming {
    pub averaging_s: f64,
    pub delay_s: f64,
    pub resolution_w: f64,
    /// A counter's step, in joules: each end of the window is that uncertain.
    pub resolution_j: f64,
    /// What its readings could not say about the window's ends, in joules (0 for a counter
    /// read at both ends).
    pub edge_uncertainty_j: f64,
}

impl PlatformTiming {
    /// A late meter's timing, with what its readings could not say about the window's ends.
    pub fn of(t: &wattio_energy::LateTiming, edge_uncertainty_j: f64) -> PlatformTiming {
        PlatformTiming {
            averaging_s: t.averaging.as_secs_f64(),
            delay_s: t.delay.as_secs_f64(),
            resolution_w: t.resolution_w,
            resolution_j: t.resolution_j,
            edge_uncertainty_j,
        }
    }

    /// How long a late meter's figure lags when it is not placed: its averaging and delay.
    pub fn lag_s(t: &wattio_energy::LateTiming) -> f64 {
        (t.averaging + t.delay).as_secs_f64()
    }

    /// A counter read as it is (RAPL psys): no averaging, no delay.
    pub const INSTANT: PlatformTiming = PlatformTiming {
        averaging_s: 0.0,
        delay_s: 0.0,
        resolution_w: 0.0,
        resolution_j: 0.0,
        edge_uncertainty_j: 0.0,
    };
}
