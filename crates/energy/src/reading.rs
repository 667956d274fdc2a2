//! Readings that say what they are, and their integration into joules.
//!
//! A RAPL register is a counter: cumulative joules that wrap. A BMC's DCMI power reading is a
//! window average (whole watts over its sampling period), measured some time before it arrives;
//! hwmon's `powerN_input` is an instantaneous power and `powerN_average` an average over
//! `powerN_average_interval` (kernel `Documentation/hwmon/sysfs-interface.rst`); a model gives
//! an estimate; a device's own figures bound its power by an interval. Each [`Reading`] carries
//! its [`ReadingValue`] of one of these kinds, the time it was measured and the time it arrived (its
//! age when read), and its channel's [`Scope`]; an [`Integrator`] turns successive readings of
//! one channel into joules by the rule of its kind.

use crate::types::{Domain, Scope, Wrap};
use std::fmt;
use std::time::Duration;

/// The most power a decrease of a [`Wrap::LikelyAt`] counter may imply to be taken for a wrap:
/// above any single GPU board or device a driver meters (a 2 kW step is a reset, not a wrap).
pub const LIKELY_WRAP_MAX_W: f64 = 2000.0;

/// The kind of a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadingKind {
    /// Cumulative energy in raw steps, wrapping at a known or unknown limit.
    Counter,
    /// Power at one instant.
    Power,
    /// Mean power over a window that ends when it was measured.
    WindowAverage,
    /// A model's estimate of the mean power since the previous reading.
    Estimate,
    /// Mean power known only between a lower and an upper bound.
    Interval,
}

impl ReadingKind {
    /// `counter`, `power`, `window average`, `estimate`, `interval`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadingKind::Counter => "counter",
            ReadingKind::Power => "power",
            ReadingKind::WindowAverage => "window average",
            ReadingKind::Estimate => "estimate",
            ReadingKind::Interval => "interval",
        }
    }
}

impl fmt::Display for ReadingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a reading says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadingValue {
    /// A counter's raw value, in its channel's steps of [`Channel::unit_j`] joules.
    Counter { raw: u64 },
    /// Watts at the instant of measurement.
    Power { watts: f64 },
    /// Mean watts over `window`, ending at the instant of measurement.
    WindowAverage { watts: f64, window: Duration },
    /// A model's estimate of the mean watts since the previous reading.
    Estimate { watts: f64 },
    /// Mean watts since the previous reading, between `low_w` and `high_w`.
    Interval { low_w: f64, high_w: f64 },
}

impl ReadingValue {
    /// The kind of this value.
    pub fn kind(&self) -> ReadingKind {
        match self {
            ReadingValue::Counter { .. } => ReadingKind::Counter,
            ReadingValue::Power { .. } => ReadingKind::Power,
            ReadingValue::WindowAverage { .. } => ReadingKind::WindowAverage,
            ReadingValue::Estimate { .. } => ReadingKind::Estimate,
            ReadingValue::Interval { .. } => ReadingKind::Interval,
        }
    }
}

/// One reading of one channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The channel it belongs to (an index into its source's channels).
    pub channel: usize,
    pub value: ReadingValue,
    /// When the quantity was measured, CLOCK_MONOTONIC nanoseconds (a window average: the
    /// window's end).
    pub measured_ns: u64,
    /// When wattio had it in hand, CLOCK_MONOTONIC nanoseconds.
    pub received_ns: u64,
}

impl Reading {
    /// How old the reading was when it arrived.
    pub fn age(&self) -> Duration {
        Duration::from_nanos(self.received_ns.saturating_sub(self.measured_ns))
    }
}

/// One channel of a source: what its readings cover and how they are read.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    /// Which part of the machine it covers.
    pub scope: Scope,
    /// Tells two channels of one scope apart (a package's socket, a GPU's index, a meter's
    /// number).
    pub index: u32,
    pub kind: ReadingKind,
    /// For counters: joules per raw step, and where the raw value wraps.
    pub unit_j: f64,
    pub wrap: Wrap,
    /// How often the meter itself updates (a window average's window), when it says.
    pub update_period: Option<Duration>,
    /// The smallest step of power its readings show, in watts (a DCMI reading's whole watt);
    /// 0 where it is finer than anything that matters (hwmon's microwatts).
    pub resolution_w: f64,
    /// For a counter, the smallest step of energy its readings show, in joules (a Redfish
    /// counter's precision): each end of a window is that uncertain; 0 where it is finer than
    /// anything that matters.
    pub resolution_j: f64,
    /// Where it is read from (a sysfs path, a command), for `probe` and messages.
    pub origin: String,
}

/// How a meter that averages or answers late sees time: what the whole-machine view needs to
/// know before it compares the meter with fast counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LateTiming {
    /// The window each reading averages over (or the time between the readings integrated).
    pub averaging: Duration,
    /// How old the newest reading was when it arrived.
    pub delay: Duration,
    /// The smallest step of power its readings show, in watts.
    pub resolution_w: f64,
    /// For a counter, the smallest step of energy its readings show, in joules.
    pub resolution_j: f64,
}

impl Channel {
    /// A channel of `kind` that is not a counter (unit and wrap unused).
    pub fn of_power(scope: Domain, index: u32, kind: ReadingKind, origin: String) -> Channel {
        Channel {
            scope,
            index,
            kind,
            unit_j: 1.0,
            wrap: Wrap::Unknown,
            update_period: None,
            resolution_w: 0.0,
            resolution_j: 0.0,
            origin,
        }
    }
}

/// Energy over one step between two readings: a single figure, or an interval with its central
/// estimate (`low_j <= central_j <= high_j`; all three equal unless the reading is an interval).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepEnergy {
    pub central_j: f64,
    pub low_j: f64,
    pub high_j: f64,
}

impl StepEnergy {
    fn exact(j: f64) -> StepEnergy {
        StepEnergy {
            central_j: j,
            low_j: j,
            high_j: j,
        }
    }
}

/// Why a reading could not be integrated; the step gets no energy and the next reading starts
/// afresh from this one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IntegrationError {
    #[error("{origin}: a {got} reading on a {expected} channel")]
    WrongKind {
        origin: String,
        expected: ReadingKind,
        got: ReadingKind,
    },
    #[error("{origin}: reading dated before the previous one; no energy for this step")]
    TimeWentBack { origin: String },
    #[error("{origin}: counter went back from {prev} to {new} and its wrap limit is unknown; no energy for this step")]
    CounterWentBack { origin: String, prev: u64, new: u64 },
    #[error(
        "{origin}: {what} is not a power a meter can report ({watts} W); no energy for this step"
    )]
    BadPower {
        origin: String,
        what: &'static str,
        watts: f64,
    },
}

/// Turns one channel's successive readings into joules, by the rule of its kind:
///
/// * counter: the wrap-corrected difference times the unit (a decrease without a known wrap
///   limit is an error, never invented energy);
/// * power: the trapezoid between the two instants;
/// * window average, estimate: the mean power times the time since the previous reading (the
///   reading stands for the whole step, as a meter averaging over its own window does);
/// * interval: its bounds and their midpoint each times that time.
///
/// The first reading primes the integrator (no energy), and so does a reading after an error.
/// A reading dated at the previous one's instant (a meter read again before it updated) adds
/// nothing.
#[derive(Debug, Clone)]
pub struct Integrator {
    channel: Channel,
    last: Option<(ReadingValue, u64)>,
}

impl Integrator {
    pub fn new(channel: Channel) -> Integrator {
        Integrator {
            channel,
            last: None,
        }
    }

    /// The channel it integrates.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// When the reading it integrates from was measured, once it has one.
    pub fn last_measured_ns(&self) -> Option<u64> {
        self.last.map(|(_, ns)| ns)
    }

    /// Whether a decrease taken for a wrap gives `steps` over `dt_s` seconds that a device can
    /// draw: only [`Wrap::LikelyAt`] counters are checked, a known limit is trusted.
    fn plausible_wrap(&self, steps: u64, dt_s: f64) -> bool {
        match self.channel.wrap {
            Wrap::LikelyAt(_) => {
                steps as f64 * self.channel.unit_j <= LIKELY_WRAP_MAX_W * dt_s.max(1e-3)
            }
            _ => true,
        }
    }

    /// The energy between the previous reading and `r`.
    pub fn add(&mut self, r: &Reading) -> Result<StepEnergy, IntegrationError> {
        let origin = || self.channel.origin.clone();
        if r.value.kind() != self.channel.kind {
            return Err(IntegrationError::WrongKind {
                origin: origin(),
                expected: self.channel.kind,
                got: r.value.kind(),
            });
        }
        check_power(&r.value, &self.channel.origin)?;
        let Some((prev, prev_ns)) = self.last.replace((r.value, r.measured_ns)) else {
            return Ok(StepEnergy::default());
        };
        if r.measured_ns < prev_ns {
            self.last = None;
            return Err(IntegrationError::TimeWentBack { origin: origin() });
        }
        let dt = (r.measured_ns - prev_ns) as f64 / 1e9;
        let step = match (prev, r.value) {
            (ReadingValue::Counter { raw: a }, ReadingValue::Counter { raw: b }) => {
                match crate::wrap::delta(a, b, self.channel.wrap) {
                    Some(d) if b >= a || self.plausible_wrap(d, dt) => {
                        StepEnergy::exact(d as f64 * self.channel.unit_j)
                    }
                    _ => {
                        self.last = None;
                        return Err(IntegrationError::CounterWentBack {
                            origin: origin(),
                            prev: a,
                            new: b,
                        });
                    }
                }
            }
            (ReadingValue::Power { watts: a }, ReadingValue::Power { watts: b }) => {
                StepEnergy::exact((a + b) / 2.0 * dt)
            }
            (_, ReadingValue::WindowAverage { watts, .. })
            | (_, ReadingValue::Estimate { watts }) => StepEnergy::exact(watts * dt),
            (_, ReadingValue::Interval { low_w, high_w }) => StepEnergy {
                central_j: (low_w + high_w) / 2.0 * dt,
                low_j: low_w * dt,
                high_j: high_w * dt,
            },
            // Kinds are checked above: both readings are of the channel's kind.
            _ => StepEnergy::default(),
        };
        Ok(step)
    }
}

/// Refuses a power no meter reports: negative, not a number, infinite, or an interval whose
/// bounds are crossed.
fn check_power(v: &ReadingValue, origin: &str) -> Result<(), IntegrationError> {
    let bad = |what, watts: f64| {
        Err(IntegrationError::BadPower {
            origin: origin.to_string(),
            what,
            watts,
        })
    };
    let ok = |w: f64| w.is_finite() && w >= 0.0;
    match *v {
        ReadingValue::Counter { .. } => Ok(()),
        ReadingValue::Power { watts }
        | ReadingValue::WindowAverage { watts, .. }
        | ReadingValue::Estimate { watts } => {
            if ok(watts) {
                Ok(())
            } else {
                bad("the reading", watts)
            }
        }
        ReadingValue::Interval { low_w, high_w } => {
            if !ok(low_w) {
                bad("the lower bound", low_w)
            } else if !ok(high_w) || high_w < low_w {
                bad("the upper bound", high_w)
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn at(channel: &Channel, value: ReadingValue, measured_s: f64) -> Reading {
        let ns = (measured_s * S as f64) as u64;
        let _ = channel;
        Reading {
            channel: 0,
            value,
            measured_ns: ns,
            received_ns: ns + 2 * S,
        }
    }

    fn integrate(
        channel: Channel,
        values: &[(ReadingValue, f64)],
    ) -> Vec<Result<StepEnergy, IntegrationError>> {
        let mut i = Integrator::new(channel.clone());
        values
            .iter()
            .map(|&(v, t)| i.add(&at(&channel, v, t)))
            .collect()
    }

    fn central(steps: &[Result<StepEnergy, IntegrationError>]) -> f64 {
        steps
            .iter()
            .map(|s| s.as_ref().map_or(0.0, |s| s.central_j))
            .sum()
    }

    #[test]
    fn a_counter_is_corrected_for_its_wrap_and_a_decrease_without_limit_is_an_error() {
        let mut ch = Channel::of_power(
            Domain::Device,
            0,
            ReadingKind::Counter,
            "energy1_input".into(),
        );
        ch.unit_j = 1e-6;
        ch.wrap = Wrap::AtMax(u32::MAX as u64);
        let steps = integrate(
            ch.clone(),
            &[
                (
                    ReadingValue::Counter {
                        raw: u32::MAX as u64 - 999_999,
                    },
                    0.0,
                ),
                (ReadingValue::Counter { raw: 1_000_000 }, 1.0),
            ],
        );
        // 999 999 steps to the limit, one back to 0, 1 000 000 after: 2 J.
        assert!((central(&steps) - 2.0).abs() < 1e-9, "{steps:?}");
        ch.wrap = Wrap::Unknown;
        let steps = integrate(
            ch,
            &[
                (ReadingValue::Counter { raw: 5_000_000 }, 0.0),
                (ReadingValue::Counter { raw: 1_000_000 }, 1.0),
                (ReadingValue::Counter { raw: 3_000_000 }, 2.0),
                (ReadingValue::Counter { raw: 4_000_000 }, 3.0),
            ],
        );
        assert!(matches!(
            steps[1],
            Err(IntegrationError::CounterWentBack { .. })
        ));
        // After the error the next reading primes again: only the last step counts.
        assert_eq!(steps[2], Ok(StepEnergy::default()));
        assert!((central(&steps) - 1.0).abs() < 1e-9, "{steps:?}");
    }

    #[test]
    fn a_likely_wrap_is_taken_only_where_its_energy_is_possible() {
        let mut ch = Channel::of_power(Domain::Gpu, 0, ReadingKind::Counter, "xe".into());
        ch.unit_j = 1e-6;
        ch.wrap = Wrap::LikelyAt(u32::MAX as u64);
        let max = u32::MAX as u64;
        let run = |values: &[(u64, f64)]| {
            let values: Vec<_> = values
                .iter()
                .map(|&(raw, t)| (ReadingValue::Counter { raw }, t))
                .collect();
            integrate(ch.clone(), &values)
        };
        // Past 2^32 as a driver that widens the register reads: taken as it is.
        let steps = run(&[(max + 5_000_000, 0.0), (max + 6_000_000, 1.0)]);
        assert_eq!(steps[1].as_ref().map(|s| s.central_j), Ok(1.0));
        // A wrap at 2^32 µJ from just below it: 2 J in a second.
        let steps = run(&[(max - 999_999, 0.0), (1_000_000, 1.0)]);
        assert!((central(&steps) - 2.0).abs() < 1e-9, "{steps:?}");
        // A fall that only a reset explains (3,300 J in a second), or from past the limit: refused.
        for from in [1_000_000_000, max + 6_000_000] {
            let steps = run(&[(from, 0.0), (2_000_000, 1.0)]);
            assert!(
                matches!(steps[1], Err(IntegrationError::CounterWentBack { .. })),
                "{steps:?}"
            );
        }
    }

    #[test]
    fn power_is_integrated_by_trapezoid_and_a_window_average_holds_for_its_step() {
        let ch = Channel::of_power(
            Domain::Platform,
            0,
            ReadingKind::Power,
            "power1_input".into(),
        );
        let steps = integrate(
            ch,
            &[
                (ReadingValue::Power { watts: 100.0 }, 0.0),
                (ReadingValue::Power { watts: 200.0 }, 2.0),
            ],
        );
        assert!((central(&steps) - 300.0).abs() < 1e-9);
        let ch = Channel::of_power(
            Domain::Platform,
            0,
            ReadingKind::WindowAverage,
            "dcmi".into(),
        );
        let w = |watts| ReadingValue::WindowAverage {
            watts,
            window: Duration::from_secs(1),
        };
        let steps = integrate(
            ch,
            &[
                (w(50.0), 10.0),
                (w(200.0), 11.0),
                (w(200.0), 11.0),
                (w(100.0), 13.0),
            ],
        );
        // 200 W over [10, 11], the same reading again adds nothing, 100 W over [11, 13].
        assert!((central(&steps) - 400.0).abs() < 1e-9, "{steps:?}");
    }

    #[test]
    fn an_interval_keeps_its_bounds_and_a_bad_reading_is_refused() {
        let ch = Channel::of_power(Domain::Device, 0, ReadingKind::Interval, "nvme0".into());
        let steps = integrate(
            ch.clone(),
            &[
                (
                    ReadingValue::Interval {
                        low_w: 1.0,
                        high_w: 8.0,
                    },
                    0.0,
                ),
                (
                    ReadingValue::Interval {
                        low_w: 1.0,
                        high_w: 8.0,
                    },
                    10.0,
                ),
            ],
        );
        let s = steps[1].as_ref().unwrap();
        assert_eq!((s.low_j, s.central_j, s.high_j), (10.0, 45.0, 80.0));
        let steps = integrate(
            ch,
            &[(
                ReadingValue::Interval {
                    low_w: 3.0,
                    high_w: 2.0,
                },
                0.0,
            )],
        );
        assert!(matches!(steps[0], Err(IntegrationError::BadPower { .. })));
        let ch = Channel::of_power(Domain::Platform, 0, ReadingKind::Power, "p".into());
        let steps = integrate(
            ch,
            &[
                (ReadingValue::Power { watts: f64::NAN }, 0.0),
                (
                    ReadingValue::WindowAverage {
                        watts: 1.0,
                        window: Duration::ZERO,
                    },
                    1.0,
                ),
                (ReadingValue::Power { watts: 5.0 }, 2.0),
                (ReadingValue::Power { watts: 5.0 }, 1.0),
            ],
        );
        assert!(matches!(steps[0], Err(IntegrationError::BadPower { .. })));
        assert!(matches!(steps[1], Err(IntegrationError::WrongKind { .. })));
        assert!(matches!(
            steps[3],
            Err(IntegrationError::TimeWentBack { .. })
        ));
    }

    #[test]
    fn a_reading_knows_its_age() {
        let ch = Channel::of_power(Domain::Platform, 0, ReadingKind::Power, "p".into());
        assert_eq!(
            at(&ch, ReadingValue::Power { watts: 1.0 }, 1.0).age(),
            Duration::from_secs(2)
        );
    }
}
