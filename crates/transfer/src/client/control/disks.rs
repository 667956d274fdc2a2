//! The destination disks' energy over the run ([`DiskBook`]): a storage watch opened and
//! marked before the first byte is written, marked again once the data is synced and in place,
//! so that the writeback of the transferred bytes lands in the window.

use crate::dest_disks::{DestDiskEnergy, DestDisks};
use std::path::Path;
use wattio_devices::{disks_holding, StorageMark, StorageWatch};
use wattio_energy::SysRoot;

/// What `--fsync off` leaves out of the window.
const UNSYNCED_NOTE: &str = "--fsync off: the data was not synced, so the kernel may write it back after the window closed (dirty pages expire after vm.dirty_expire_centisecs, kernel Documentation/admin-guide/sysctl/vm.rst): the interval may miss that writeback";

/// The disks under DEST and the watch marked at the start, or why there is none.
pub(crate) struct DiskBook {
    watched: Result<Watched, String>,
}

struct Watched {
    watch: StorageWatch,
    start: StorageMark,
    /// The whole disks under DEST, by kernel name.
    disks: Vec<String>,
}

impl DiskBook {
    /// Finds the disks under `dest` and starts watching the machine's block devices under
    /// `root` (blocking: it reads sysfs and each drive's power state once). Whatever fails
    /// leaves a note, never an error: the transfer goes on without the disks.
    pub(crate) fn open(root: &SysRoot, dest: &Path) -> DiskBook {
        DiskBook {
            watched: watch_disks(root, dest),
        }
    }

    /// Each disk's interval from the start to now, over a run that received `received` bytes;
    /// `synced` says whether the data was synced before now (`--fsync on`).
    pub(crate) fn finish(self, received: u64, synced: bool) -> DestDisks {
        let window_note = (!synced).then(|| UNSYNCED_NOTE.to_string());
        let w = match self.watched {
            Ok(w) => w,
            Err(note) => {
                return DestDisks {
                    disks: vec![],
                    note: Some(note),
                    window_note,
                }
            }
        };
        let end = w.watch.mark();
        let mut rows = w.watch.rows_between(&w.start, &end);
        rows.retain(|r| w.disks.contains(&r.energy.device));
        let unmetered: Vec<&str> = w
            .disks
            .iter()
            .filter(|d| !rows.iter().any(|r| &r.energy.device == *d))
            .map(String::as_str)
            .collect();
        let note = (!unmetered.is_empty()).then(|| {
            format!(
                "{} under DEST not metered (a memory, loop or stacked device: no disk of its own)",
                unmetered.join(", ")
            )
        });
        DestDisks {
            disks: rows
                .into_iter()
                .map(|r| DestDiskEnergy::new(r.energy, received))
                .collect(),
            note,
            window_note,
        }
    }
}

/// The watch and the disks under `dest`, or a note saying why there is none.
fn watch_disks(root: &SysRoot, dest: &Path) -> Result<Watched, String> {
    let disks = disks_holding(root, dest)
        .map_err(|e| format!("not measured: cannot find the disks under DEST ({e})"))?;
    if disks.is_empty() {
        return Err(
            "none: DEST is on no block device (tmpfs, overlay or a network file system): no disk energy of its own"
                .into(),
        );
    }
    let watch = match wattio_meter::open_storage_watch(root) {
        Ok(Some(w)) => w,
        Ok(None) => {
            return Err(format!(
                "not measured: no block devices in {} to watch",
                root.path("/sys/block").display()
            ))
        }
        Err(e) => {
            return Err(format!(
            "not measured: the disks could not be watched ({e}); the transfer went on without them"
        ))
        }
    };
    let start = watch.mark();
    Ok(Watched {
        watch,
        start,
        disks,
    })
}
