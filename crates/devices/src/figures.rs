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

// The interval is written into result files (the transfer summary's destination disks) and read
// back by the iobench disk table, so it lives with the result schemas, which the report reads
// without this crate.
pub use wattio_results::EnergyInterval;
