//! From raw counter readings to joules.

use crate::error::EnergyError;
use crate::types::CounterSpec;
use crate::wrap;

/// The energy one counter gained between two readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterDelta {
    /// Joules since the previous reading.
    pub joules: f64,
    /// True when the counter wrapped between the two readings (and was corrected).
    pub wrapped: bool,
}

/// Keeps the previous raw value of every counter of a source and turns new readings into
/// wrap-corrected joules.
///
/// The first reading only primes the accumulator: a single RAPL reading means nothing.
#[derive(Debug, Clone)]
pub struct Accumulator {
    specs: Vec<CounterSpec>,
    prev: Vec<Option<u64>>,
    totals_j: Vec<f64>,
}

impl Accumulator {
    /// An accumulator for `specs` (a source's counters, in its reading order).
    pub fn new(specs: &[CounterSpec]) -> Self {
        Accumulator {
            specs: specs.to_vec(),
            prev: vec![None; specs.len()],
            totals_j: vec![0.0; specs.len()],
        }
    }

    /// The counters this accumulator follows.
    pub fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// Whether a first reading has been taken.
    pub fn is_primed(&self) -> bool {
        self.prev.iter().all(Option::is_some)
    }

    /// Joules accumulated per counter since the first reading.
    pub fn totals_j(&self) -> &[f64] {
        &self.totals_j
    }

    /// Feeds one reading (`raw[i]` for counter `i`) and writes each counter's delta into `out`.
    ///
    /// On the first reading every delta is zero. A counter that went backwards without a known
    /// wrap limit yields an error; its previous value is then reset to the new one so that the
    /// next interval is measured correctly, and the other counters are still updated.
    pub fn update(&mut self, raw: &[u64], out: &mut [CounterDelta]) -> Result<(), EnergyError> {
        debug_assert_eq!(raw.len(), self.specs.len());
        let mut first_err = None;
        for i in 0..self.specs.len() {
            let spec = &self.specs[i];
            let new = raw[i];
            out[i] = CounterDelta {
                joules: 0.0,
                wrapped: false,
            };
            if let Some(prev) = self.prev[i] {
                match wrap::delta(prev, new, spec.wrap) {
                    Some(d) => {
                        let j = d as f64 * spec.unit_j;
                        out[i] = CounterDelta {
                            joules: j,
                            wrapped: new < prev,
                        };
                        self.totals_j[i] += j;
                    }
                    None if first_err.is_none() => {
                        first_err = Some(EnergyError::UncorrectableDecrease {
                            origin: spec.origin.clone(),
                            prev,
                            new,
                            fix: "make the wrap limit readable (e.g. max_energy_range_uj) or use another --source".into(),
                        });
                    }
                    None => {}
                }
            }
            self.prev[i] = Some(new);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Domain, Wrap};

    fn spec(wrap: Wrap, unit: f64) -> CounterSpec {
        CounterSpec {
            socket: 0,
            domain: Domain::Package,
            unit_j: unit,
            wrap,
            origin: "test".into(),
        }
    }

    #[test]
    fn first_reading_primes_then_deltas_are_in_joules() {
        let mut acc = Accumulator::new(&[spec(Wrap::AtMax(999_999), 1e-6)]);
        let mut out = [CounterDelta {
            joules: -1.0,
            wrapped: false,
        }];
        acc.update(&[999_000], &mut out).unwrap();
        assert_eq!(out[0].joules, 0.0);
        // 999000 → 999999 → 0 → 500: 1000 + 500 µJ
        acc.update(&[500], &mut out).unwrap();
        assert!((out[0].joules - 0.0015).abs() < 1e-12);
        assert!(out[0].wrapped);
        assert!((acc.totals_j()[0] - 0.0015).abs() < 1e-12);
    }

    #[test]
    fn unknown_limit_reports_an_error_and_recovers() {
        let mut acc = Accumulator::new(&[spec(Wrap::Unknown, 1.0), spec(Wrap::AtMax(100), 1.0)]);
        let mut out = [CounterDelta {
            joules: 0.0,
            wrapped: false,
        }; 2];
        acc.update(&[50, 10], &mut out).unwrap();
        let err = acc.update(&[40, 20], &mut out).unwrap_err();
        assert!(err.to_string().contains("wrap limit is unknown"), "{err}");
        assert_eq!(out[0].joules, 0.0);
        assert_eq!(out[1].joules, 10.0, "other counters still advance");
        acc.update(&[45, 20], &mut out).unwrap();
        assert_eq!(out[0].joules, 5.0);
        assert!(acc.totals_j()[0] >= 0.0);
    }
}
