//! Names shared by every mechanism: domains, mechanisms, provenance, counter specifications.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A RAPL domain (or the model's stand-in for one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    /// The whole processor package (socket).
    Package,
    /// The cores of a package (PP0); included in `Package`.
    Core,
    /// The uncore / integrated GPU (PP1); included in `Package`.
    Uncore,
    /// Memory attached to a package; *not* included in `Package`.
    Dram,
    /// The platform (whole SoC / laptop); one per machine, includes everything else.
    Psys,
}

impl Domain {
    /// Every domain, in the order reports list them.
    pub const ALL: [Domain; 5] = [
        Domain::Package,
        Domain::Core,
        Domain::Uncore,
        Domain::Dram,
        Domain::Psys,
    ];

    /// The short lowercase name used in CSV, JSON and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Domain::Package => "package",
            Domain::Core => "core",
            Domain::Uncore => "uncore",
            Domain::Dram => "dram",
            Domain::Psys => "psys",
        }
    }

    /// Whether this domain counts towards a machine total (`package + dram`).
    /// Core and uncore are inside package; psys overlaps everything and is reported apart.
    pub fn counts_in_total(self) -> bool {
        matches!(self, Domain::Package | Domain::Dram)
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Domain {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "package" | "pkg" => Ok(Domain::Package),
            "core" | "cores" | "pp0" => Ok(Domain::Core),
            "uncore" | "gpu" | "pp1" => Ok(Domain::Uncore),
            "dram" | "ram" => Ok(Domain::Dram),
            "psys" | "platform" => Ok(Domain::Psys),
            other => Err(format!(
                "unknown domain '{other}': use package, core, uncore, dram or psys"
            )),
        }
    }
}

/// How energy figures were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// The perf-events `power` PMU (`perf_event_open`).
    Perf,
    /// The powercap sysfs tree (`/sys/class/powercap/intel-rapl*`).
    Powercap,
    /// RAPL model-specific registers through `/dev/cpu/N/msr`.
    Msr,
    /// A utilisation model: figures are estimates, never measurements.
    Model,
}

impl Mechanism {
    /// Every mechanism, in discovery order.
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Perf,
        Mechanism::Powercap,
        Mechanism::Msr,
        Mechanism::Model,
    ];

    /// The lowercase name used on the command line and in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Perf => "perf",
            Mechanism::Powercap => "powercap",
            Mechanism::Msr => "msr",
            Mechanism::Model => "model",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "perf" | "perf-events" | "perf_event" => Ok(Mechanism::Perf),
            "powercap" => Ok(Mechanism::Powercap),
            "msr" => Ok(Mechanism::Msr),
            "model" => Ok(Mechanism::Model),
            other => Err(format!(
                "unknown mechanism '{other}': use perf, powercap, msr or model"
            )),
        }
    }
}

/// Where a figure comes from. Nothing downstream may drop it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The mechanism that produced the figure.
    pub mechanism: Mechanism,
    /// True for model estimates, false for hardware counters.
    pub estimated: bool,
    /// For estimates: the model's name and coefficients, e.g.
    /// `ccf-linear(min=0.74W,max=3.5W per vCPU)`. `None` for measurements.
    pub model: Option<String>,
}

impl Provenance {
    /// A hardware measurement by `mechanism`.
    pub fn measured(mechanism: Mechanism) -> Self {
        Provenance {
            mechanism,
            estimated: false,
            model: None,
        }
    }

    /// A short label for humans: `measured (perf)` or `estimated (model: ccf-linear(...))`.
    pub fn label(&self) -> String {
        match (&self.model, self.estimated) {
            (Some(m), true) => format!("estimated ({}: {m})", self.mechanism),
            (None, true) => format!("estimated ({})", self.mechanism),
            _ => format!("measured ({})", self.mechanism),
        }
    }
}

/// How a raw counter wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wrap {
    /// The counter counts `0..=max` then restarts at 0.
    AtMax(u64),
    /// The wrap limit could not be read: a decrease cannot be corrected and is reported as an
    /// error instead of being turned into invented energy.
    Unknown,
}

/// One energy counter of a [`crate::Source`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterSpec {
    /// Package (socket) number; psys is attached to socket 0.
    pub socket: u32,
    /// What the counter covers.
    pub domain: Domain,
    /// Joules per raw step.
    pub unit_j: f64,
    /// The raw counter's wrap limit.
    pub wrap: Wrap,
    /// Where it is read from (a sysfs path, an MSR address, a perf event), for `probe`.
    pub origin: String,
}

impl CounterSpec {
    /// Seconds until this counter wraps at a constant `watts` (None when the limit is unknown).
    pub fn seconds_to_wrap(&self, watts: f64) -> Option<f64> {
        match self.wrap {
            Wrap::AtMax(max) if watts > 0.0 => Some((max as f64 + 1.0) * self.unit_j / watts),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_and_mechanisms_round_trip_their_names() {
        for d in Domain::ALL {
            assert_eq!(d.as_str().parse::<Domain>().unwrap(), d);
        }
        for m in Mechanism::ALL {
            assert_eq!(m.as_str().parse::<Mechanism>().unwrap(), m);
        }
        assert!("watts".parse::<Domain>().unwrap_err().contains("package"));
        assert!("rapl"
            .parse::<Mechanism>()
            .unwrap_err()
            .contains("powercap"));
    }

    #[test]
    fn only_package_and_dram_count_in_the_total() {
        let counted: Vec<_> = Domain::ALL
            .into_iter()
            .filter(|d| d.counts_in_total())
            .collect();
        assert_eq!(counted, vec![Domain::Package, Domain::Dram]);
    }

    #[test]
    fn wrap_time_at_esu_14_and_200_watts_is_about_1311_seconds() {
        // 2^32 raw steps of 2^-14 J = 262 144 J; at 200 W that is 1310.72 s (notes §4).
        let spec = CounterSpec {
            socket: 0,
            domain: Domain::Package,
            unit_j: 2f64.powi(-14),
            wrap: Wrap::AtMax(u32::MAX as u64),
            origin: String::new(),
        };
        let s = spec.seconds_to_wrap(200.0).unwrap();
        assert!((s - 1310.72).abs() < 1e-6, "{s}");
    }
}
