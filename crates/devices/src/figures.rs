//! A device's power states as it reports them, and the energy interval they bound.

use serde::{Deserialize, Serialize};

/// One power state of a device, in watts and microseconds.
///
/// For NVMe these are the power-state descriptor's fields (NVM Express Base Specification 2.0,
/// Identify Controller, "Power State Descriptor Data Structure"): `max_w` is MP, `idle_w` IDLP,
/// `active_w` ACTP, each already scaled; `None` where the drive does not report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerState {
    /// The state's number as the device numbers it (NVMe PS0…PS31; for ATA and profiles, the
    /// order of [`PowerFigures::states`]).
    pub id: u8,
    /// Its name as shown (`ps0`, `active`, `idle`, `standby`, `link up 1000 Mb/s`).
    pub name: String,
    /// The most the device draws in this state.
    pub max_w: f64,
    /// What it draws idle in this state, where reported.
    pub idle_w: Option<f64>,
    /// What it draws busy in this state, where reported.
    pub active_w: Option<f64>,
    /// A state in which the device does no I/O (NVMe NOPS; ATA standby).
    pub non_operational: bool,
    /// Time to enter the state.
    pub entry_latency_us: u64,
    /// Time to leave it.
    pub exit_latency_us: u64,
}

/// Where a device's figures come from: every energy figure carries this label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FiguresSource {
    /// The drive's own NVMe power-state descriptors.
    NvmeDescriptors,
    /// A shipped per-model profile, with its source (a datasheet, a paper).
    Profile {
        /// The profile's name.
        name: String,
        /// Where its figures come from.
        source: String,
    },
    /// No profile matches the model: a generic class (`3.5-inch 7200 rpm HDD`, `SATA SSD`).
    GenericClass {
        /// The class.
        class: String,
        /// Where its figures come from.
        source: String,
    },
}

impl FiguresSource {
    /// The label an energy from these figures carries.
    pub fn label(&self) -> String {
        match self {
            FiguresSource::NvmeDescriptors => "the drive's NVMe power-state descriptors".into(),
            FiguresSource::Profile { name, source } => format!("profile {name} ({source})"),
            FiguresSource::GenericClass { class, source } => {
                format!("generic class {class} ({source})")
            }
        }
    }
}

/// A device's power states and where they come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerFigures {
    /// Its states, the highest-power operational state first.
    pub states: Vec<PowerState>,
    /// Where the figures come from.
    pub source: FiguresSource,
}

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
