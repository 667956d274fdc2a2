//! The disks' and NICs' energy intervals beside the CPU's, for `measure` and `top`: a
//! [`wattio_devices::StorageWatch`] and a [`NicMark`] read at each end of a window, and the
//! rows as text.

use wattio_devices::{
    nic_rows_between, DiskEnergyRow, EnergyInterval, NicEnergyRow, NicMark, StorageMark,
    StorageWatch,
};
use wattio_energy::SysRoot;

/// Shares shown under each disk in text (the JSON has them all).
pub const DISK_SHARES_SHOWN: usize = 5;

/// The disks' and NICs' intervals since the last step, as `top` refreshes them.
pub struct DeviceIntervals {
    disks: Option<(StorageWatch, StorageMark)>,
    root: SysRoot,
    nics: NicMark,
}

impl DeviceIntervals {
    /// Watches the block devices (none where there is no `/sys/block`, as in a fixture root
    /// without it) and network interfaces under `root`.
    pub fn open(root: &SysRoot) -> Result<DeviceIntervals, wattio_devices::DeviceError> {
        let disks = open_storage_watch(root)?.map(|w| {
            let m = w.mark();
            (w, m)
        });
        Ok(DeviceIntervals {
            disks,
            root: root.clone(),
            nics: NicMark::read(root),
        })
    }

    /// Each disk's interval and split, and each NIC's interval, since the last step.
    pub fn step(&mut self) -> (Vec<DiskEnergyRow>, Vec<NicEnergyRow>) {
        let disks = match &mut self.disks {
            Some((watch, last)) => {
                let now = watch.mark();
                let rows = watch.rows_between(last, &now);
                *last = now;
                rows
            }
            None => Vec::new(),
        };
        let now = NicMark::read(&self.root);
        let nics = nic_rows_between(&self.nics, &now);
        self.nics = now;
        (disks, nics)
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

/// The NIC rows as text.
pub fn nic_text(rows: &[NicEnergyRow]) -> String {
    wattio_devices::nic_lines(rows)
        .into_iter()
        .map(|l| l + "\n")
        .collect()
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
    wattio_results::disks_interval_total(rows.iter().map(|r| {
        let e = &r.energy;
        (e.device.as_str(), e.interval, e.label.as_deref())
    }))
}
