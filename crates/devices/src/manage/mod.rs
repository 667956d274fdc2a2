//! The Ghosts power manager on real devices, through the kernel's own knobs only.
//!
//! Each storage device becomes a device of `wattio_power`'s [`wattio_power::PowerManager`]
//! whose modes are settings of its knobs ([`KnobLadder`], from its own [`crate::PowerFigures`]
//! where it has them), driven by the same [`wattio_power::DiskController`] the simulator drives,
//! on a real clock: an access is a change of the device's I/O counters or in-flight count in
//! `/sys/block/NAME/stat` (kernel Documentation/block/stat.rst), ghost hints come from other
//! programs on a socket ([`HintSocket`]), and the controller's actuator writes the knobs (or, in
//! a dry run, only says what it would write).
//!
//! Every write is reversible: [`RestoreRecord`] holds each knob's original value, on disk
//! before the first write, and is applied at the end or, after a kill, at the next start.
//!
//! - [`device_knobs`], [`DeviceKnob`], [`KnobKind`]: the knobs.
//! - [`KnobLadder`], [`KnobMode`]: the modes they make.
//! - [`run_manager`], [`ManageOptions`], [`PowerEvent`], [`PowerDecision`]: the live loop.
//! - [`power_status`]: what `wattio power status` shows.
//! - [`figures_for`]: a device's figures, from its reader.

mod hints;
mod knob;
mod ladder;
mod restore;
mod run;
mod status;

use std::path::PathBuf;

pub use hints::{parse_hint, HintSocket, ReceivedHint, MAX_HINTS_PER_WAKE};
pub use knob::{device_knobs, DeviceKnob, KnobKind};
pub use ladder::{KnobLadder, KnobMode};
pub use restore::{
    record_path, remove_record, restore_pending, KnobOriginal, RestoreOutcome, RestoreRecord,
    RESTORE_FILE,
};
pub use run::{run_manager, ManageOptions, PowerDecision, PowerEvent, RunSummary};
pub use status::{power_status, DeviceKnobStatus, PowerStatus, RuntimePmStatus};

use wattio_energy::SysRoot;

use crate::figures::PowerFigures;
use crate::inventory::StorageDevice;

/// What went wrong managing a device: one line each, naming the knob or file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    /// A knob could not be read.
    #[error("cannot read knob {}: {source}", path.display())]
    KnobRead {
        /// The knob's system path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused a value (a policy this kernel or device does not support, or no
    /// permission).
    #[error("knob {} refused `{value}`: {source}", path.display())]
    KnobRefused {
        /// The knob's system path.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The restore record could not be written, read or removed.
    #[error("restore record {}: {what}", path.display())]
    Record {
        /// The record's path.
        path: PathBuf,
        /// What went wrong, and the fix where there is one.
        what: String,
    },
    /// The hint socket could not be bound or read.
    #[error("hint socket {}: {source}", path.display())]
    HintSocket {
        /// The socket's path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A device cannot be managed as asked.
    #[error("{device}: {what}")]
    Refused {
        /// The device.
        device: String,
        /// Why, and the fix.
        what: String,
    },
    /// The power manager refused the device's description (a bug in the ladder).
    #[error("{device}: the power manager refused it: {what}")]
    Power {
        /// The device.
        device: String,
        /// Its message.
        what: String,
    },
}

/// A device's power figures, from its reader; `None` where it has none (or the reader failed:
/// the device is then managed on the generic ladder, its trade unknown).
pub fn figures_for(root: &SysRoot, dev: &StorageDevice) -> Option<PowerFigures> {
    match crate::readers::open_reader(root, dev) {
        Ok(Some(reader)) => Some(reader.figures().clone()),
        _ => None,
    }
}
