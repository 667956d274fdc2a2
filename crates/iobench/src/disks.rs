//! The disks under a benchmark's file: a storage watch read at `BEGIN` and `END` of each
//! measured window, and the energy interval of the disk(s) holding the file (`PREPARE`'s path);
//! per method, `disk_table.rs` sets it beside the CPU figure.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use wattio_devices::{disks_holding, EnergyInterval, StorageMark, StorageWatch};
use wattio_energy::SysRoot;

/// The storage watch a study opens once and its energy socket shares between connections.
#[derive(Clone)]
pub struct OperationDiskWatch {
    watch: Arc<StorageWatch>,
    root: SysRoot,
}

impl std::fmt::Debug for OperationDiskWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationDiskWatch")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The disk figures of one measured window: the disks holding the operation's file and their
/// summed interval, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationDisks {
    /// The whole disks holding the file (empty: on no block device).
    pub disks: Vec<String>,
    /// Their energy interval over the window, summed over the disks that have one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interval: Option<EnergyInterval>,
    /// The interval's model per disk (`nvme0n1: estimated (device-reported interval: …)`), or
    /// without an interval why there is none (`no interval: …`).
    pub label: String,
}

impl OperationDiskWatch {
    /// Watches the block devices under `root`; `Err` says in one line why there is no watch
    /// (the study goes on without disk figures).
    pub fn open(root: &SysRoot) -> Result<OperationDiskWatch, String> {
        match wattio_meter::open_storage_watch(root) {
            Ok(Some(watch)) => Ok(OperationDiskWatch {
                watch: Arc::new(watch),
                root: root.clone(),
            }),
            Ok(None) => Err(format!(
                "no block devices under {}",
                root.path("/sys/block").display()
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Reads every disk now.
    pub fn mark(&self) -> StorageMark {
        self.watch.mark()
    }

    /// The whole disks holding `path`, or why they cannot be found.
    pub fn disks_of(&self, path: &Path) -> Result<Vec<String>, String> {
        disks_holding(&self.root, path).map_err(|e| e.to_string())
    }

    /// The interval of `disks` between marks `a` and `b`.
    pub fn between(&self, disks: &[String], a: &StorageMark, b: &StorageMark) -> OperationDisks {
        let rows: Vec<_> = self
            .watch
            .rows_between(a, b)
            .into_iter()
            .filter(|r| disks.contains(&r.energy.device))
            .collect();
        let (interval, label) = match wattio_meter::disks_total(&rows) {
            Some((i, label)) => (Some(i), label),
            None if disks.is_empty() => (
                None,
                "no interval: the file is on no block device (tmpfs, overlay or network)".into(),
            ),
            None => (None, no_interval_label(&rows, disks)),
        };
        OperationDisks {
            disks: disks.to_vec(),
            interval,
            label,
        }
    }
}

/// `no interval: nvme0n1: why; sda: why`.
fn no_interval_label(rows: &[wattio_devices::DiskEnergyRow], disks: &[String]) -> String {
    let whys: Vec<String> = disks
        .iter()
        .map(|d| {
            let why = rows
                .iter()
                .find(|r| &r.energy.device == d)
                .and_then(|r| r.energy.reason.clone())
                .unwrap_or_else(|| "not metered".into());
            format!("{d}: {why}")
        })
        .collect();
    format!("no interval: {}", whys.join("; "))
}
