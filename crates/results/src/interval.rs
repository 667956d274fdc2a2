//! An energy that cannot be measured, bounded: the interval a device model gives (the disks'
//! and NICs' energy), written in `measure --json`, transfer summaries and the exporter, and read
//! back by `wattio report`.

use serde::{Deserialize, Serialize};

/// An energy that cannot be measured, bounded: what the device must at least and can at most
/// have used, with a central estimate where the device reports its active power.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct EnergyInterval {
    /// The least it can have used, J.
    pub lower_j: f64,
    /// The central estimate, J, where there is one.
    pub central_j: Option<f64>,
    /// The most it can have used, J.
    pub upper_j: f64,
}

impl EnergyInterval {
    /// The interval `[lower_j, upper_j]` with its central estimate, where there is one.
    pub fn new(lower_j: f64, central_j: Option<f64>, upper_j: f64) -> EnergyInterval {
        EnergyInterval {
            lower_j,
            central_j,
            upper_j,
        }
    }

    /// The sum of two intervals (the central estimate only where both have one).
    pub fn plus(self, other: EnergyInterval) -> EnergyInterval {
        EnergyInterval {
            lower_j: self.lower_j + other.lower_j,
            central_j: self.central_j.zip(other.central_j).map(|(a, b)| a + b),
            upper_j: self.upper_j + other.upper_j,
        }
    }

    /// The interval times `share` (a part of it given to one cgroup, or per GB).
    pub fn scaled(self, share: f64) -> EnergyInterval {
        EnergyInterval {
            lower_j: self.lower_j * share,
            central_j: self.central_j.map(|c| c * share),
            upper_j: self.upper_j * share,
        }
    }

    /// `[lower, upper] J` with the central estimate where there is one: `3.2 J [1.1, 7.4]`.
    pub fn display(&self) -> String {
        match self.central_j {
            Some(c) => format!("{c:.3} J [{:.3}, {:.3}]", self.lower_j, self.upper_j),
            None => format!("[{:.3}, {:.3}] J", self.lower_j, self.upper_j),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_keep_the_central_estimate_only_where_both_have_one() {
        let a = EnergyInterval {
            lower_j: 1.0,
            central_j: Some(2.0),
            upper_j: 4.0,
        };
        let b = EnergyInterval {
            lower_j: 0.5,
            central_j: None,
            upper_j: 1.0,
        };
        let s = a.plus(b);
        assert_eq!((s.lower_j, s.central_j, s.upper_j), (1.5, None, 5.0));
        let t = a.plus(a).scaled(0.25);
        assert_eq!((t.lower_j, t.central_j, t.upper_j), (0.5, Some(1.0), 2.0));
        assert_eq!(a.display(), "2.000 J [1.000, 4.000]");
        assert_eq!(b.display(), "[0.500, 1.000] J");
    }
}
