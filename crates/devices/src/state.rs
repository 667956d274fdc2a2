//! A device's current power state, read from the device itself.

use crate::error::DeviceError;
use crate::figures::PowerFigures;

/// Reads one device's figures and current power state.
///
/// Implemented by the NVMe reader (Get Features, Power Management), the ATA reader (CHECK
/// POWER MODE) and the profile-only reader of devices that cannot say (which always answers
/// `None`). A meter calls [`PowerStateReader::current_state`] at most at
/// [`PowerStateReader::min_interval`], a rate the device tolerates.
pub trait PowerStateReader: Send {
    /// The device's power states and their source.
    fn figures(&self) -> &PowerFigures;

    /// The index into [`PowerFigures::states`] of the state the device is in now, or `None`
    /// where it cannot say.
    fn current_state(&mut self) -> Result<Option<usize>, DeviceError>;

    /// The shortest time between two reads of the state the device is asked for.
    fn min_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
}
