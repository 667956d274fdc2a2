//! wattio-devices: what the I/O devices say of their own power, turned into honest energy
//! intervals.
//!
//! A disk's or a NIC's power cannot be measured on a machine without a lab meter, so every
//! figure here is what the device reports of itself (NVMe power-state descriptors, the ATA
//! power mode, runtime-PM residency) or a shipped profile with its sources, and every energy is
//! an [`EnergyInterval`]: a lower and an upper bound, with a central estimate where the device
//! gives one.
//!
//! - [`storage_devices`]: the block devices of the machine, by protocol ([`StorageKind`]), with
//!   the one holding `/` marked; virtual disks are listed as the host's.
//! - [`PowerFigures`] / [`PowerState`]: a device's power states as it reports them;
//!   [`PowerStateReader`]: the state it is in now; [`open_reader`]: a device's reader.
//! - [`StorageMeter`]: polls each device's state and keeps its residency; two snapshots give
//!   each device's [`StorageEnergy`] ([`storage_energy_between`], the rule in [`interval_of`]).
//! - [`split_by_io_bytes`]: a device's interval split between cgroups (`io.stat`) or processes
//!   (`/proc/PID/io`), the idle floor kept apart; [`StorageWatch`]: both, as `measure` and
//!   `top` read them.

mod error;
mod figures;
mod interval;
mod inventory;
mod meter;
mod readers;
mod split;
mod state;
mod watch;

pub mod ata;
pub mod manage;
pub mod nic;
mod nic_energy;
pub mod nvme;
pub mod probe;
pub mod profile;
pub mod runtime_pm;

pub use error::DeviceError;
pub use figures::{EnergyInterval, FiguresSource, PowerFigures, PowerState};
pub use interval::{fold_suspended, interval_of, DiskWindow};
pub use inventory::{disks_holding, storage_devices, StorageDevice, StorageKind};
pub use meter::{
    storage_energy_between, DiskSample, StateResidency, StorageEnergy, StorageMeter,
    StorageSnapshot,
};
pub use nic::{network_interfaces, NetworkInterface, NicPowerFigures};
pub use nic_energy::{nic_lines, nic_rows_between, NicEnergyRow, NicMark};
pub use probe::{probe_devices, DevicesProbe, StorageProbe};
pub use readers::open_reader;
pub use runtime_pm::RuntimePm;
pub use split::{
    split_by_io_bytes, DiskEnergyShares, IoByteShare, IoBytesSample, ShareRule, CGROUP_SHARE_LABEL,
    IDLE_LABEL, PROCESS_SHARE_LABEL,
};
pub use state::PowerStateReader;
pub use watch::{DiskEnergyRow, StorageMark, StorageWatch};
