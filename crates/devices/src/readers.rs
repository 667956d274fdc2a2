//! The reader of each block device's power: what [`open_reader`] gives a meter.

use wattio_energy::SysRoot;

use crate::ata::{AtaStateReader, ProfileOnlyReader};
use crate::error::DeviceError;
use crate::inventory::{StorageDevice, StorageKind};
use crate::nvme::NvmeStateReader;
use crate::profile::profile_for;
use crate::state::PowerStateReader;

/// The power-state reader of `dev`: NVMe drives read their own descriptors and state; SATA
/// disks give their profile's figures (by model, else a generic class) and CHECK POWER MODE;
/// other SCSI disks their profile with no state. `None` for a virtual disk (its energy is the
/// host's), a device of another kind, or a SATA/SCSI disk neither a profile nor a built class
/// describes.
pub fn open_reader(
    root: &SysRoot,
    dev: &StorageDevice,
) -> Result<Option<Box<dyn PowerStateReader>>, DeviceError> {
    match &dev.kind {
        StorageKind::Nvme { controller } => {
            Ok(Some(Box::new(NvmeStateReader::open(root, controller)?)))
        }
        StorageKind::Ata { .. } => {
            Ok(profile_for(dev.model.as_deref(), dev.rotational)?.map(|p| {
                Box::new(AtaStateReader::new(root, &dev.name, p.figures()))
                    as Box<dyn PowerStateReader>
            }))
        }
        StorageKind::Scsi { .. } => Ok(profile_for(dev.model.as_deref(), dev.rotational)?
            .map(|p| Box::new(ProfileOnlyReader::new(p.figures())) as Box<dyn PowerStateReader>)),
        StorageKind::Virtual { .. } | StorageKind::Other => Ok(None),
    }
}
