//! The disks' energy intervals beside the CPU's, for `measure` and `top`: a
//! [`wattio_devices::StorageWatch`] read at each end of a window, and the rows as text.

use wattio_devices::{DiskEnergyRow, EnergyInterval, StorageMark, StorageWatch};
use wattio_energy::SysRoot;

/// Shares shown under each disk in text (the JSON has them all).
pub const DISK_SHARES_SHOWN: usize = 5;

/// The disks' intervals since the last step, as `top` refreshes them.
pub struct DiskIntervals {
    watch: StorageWatch,
    last: StorageMark,
}

impl DiskIntervals {
    /// Watches the block devices under `root`; `Ok(None)` where there are none (no
    /// `/sys/block`, as in a fixture root without it).
    pub fn open(root: &SysRoot) -> Result<Option<DiskIntervals>, wattio_devices::DeviceError> {
        let watch = match open_storage_watch(root)? {
            Some(w) => w,
            None => return Ok(None),
        };
        let last = watch.mark();
        Ok(Some(DiskIntervals { watch, last }))
    }

    /// Each disk's interval and split since the last step.
    pub fn step(&mut self) -> Vec<DiskEnergyRow> {
        let now = self.watch.mark();
        let rows = self.watch.rows_between(&self.last, &now);
        self.last = now;
        rows
    }
}

/// A watch of the block devices under `root`, `None` where it has none.
pub fn open_storage_watch(
    root: &SysRoot,
) -> Result<Option<StorageWatch>, wattio_devices::DeviceError> {
    if !root.path("/sys/block").is_dir() {
        return Ok(None);
    }
    let watch = StorageWatch::open(root)?;
    Ok((!watch.is_empty()).then_some(watch))
}

/// The rows as text, one block per disk.
pub fn disk_lines(rows: &[DiskEnergyRow]) -> String {
    rows.iter()
        .flat_map(|r| r.text_lines(DISK_SHARES_SHOWN))
        .map(|l| l + "\n")
        .collect()
}

/// The sum of the disks' intervals, over the disks that have one, with their labels (`None`
/// where no disk has one).
pub fn disks_total(rows: &[DiskEnergyRow]) -> Option<(EnergyInterval, String)> {
    let with: Vec<&DiskEnergyRow> = rows
        .iter()
        .filter(|r| r.energy.interval.is_some())
        .collect();
    let first = with.first()?;
    let sum = with[1..].iter().fold(first.energy.interval?, |s, r| {
        s.plus(r.energy.interval.unwrap_or_default())
    });
    let mut labels: Vec<String> = with
        .iter()
        .map(|r| {
            format!(
                "{}: {}",
                r.energy.device,
                r.energy.label.as_deref().unwrap_or("")
            )
        })
        .collect();
    labels.dedup();
    Some((sum, labels.join("; ")))
}
