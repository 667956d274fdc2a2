//! Runtime-PM residency of a device, from its sysfs `power/` directory (kernel
//! Documentation/ABI/testing/sysfs-devices-power): `runtime_status`, and
//! `runtime_active_time` / `runtime_suspended_time`, cumulative milliseconds.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use crate::inventory::{read_trimmed, StorageDevice, StorageKind};

/// One device's runtime-PM state and residency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimePm {
    /// The sysfs device directory read.
    pub device_dir: PathBuf,
    /// `active`, `suspended`, `suspending`, `resuming`, `error` or `unsupported`.
    pub status: String,
    /// `power/control`: `auto` (runtime PM allowed) or `on`, where present.
    pub control: Option<String>,
    /// Time spent active since boot, ms.
    pub active_ms: Option<u64>,
    /// Time spent suspended since boot, ms.
    pub suspended_ms: Option<u64>,
}

/// The runtime-PM state of sysfs device directory `dir`, where it has `power/runtime_status`.
pub fn runtime_pm(dir: &Path) -> Option<RuntimePm> {
    let power = dir.join("power");
    let status = read_trimmed(&power.join("runtime_status"))?;
    let ms = |f: &str| read_trimmed(&power.join(f)).and_then(|s| s.parse::<u64>().ok());
    Some(RuntimePm {
        device_dir: dir.to_path_buf(),
        status,
        control: read_trimmed(&power.join("control")),
        active_ms: ms("runtime_active_time"),
        suspended_ms: ms("runtime_suspended_time"),
    })
}

/// The sysfs directories whose runtime PM governs a block device's power: for NVMe the PCI
/// function behind `/sys/class/nvme/nvmeN/device`; for a SCSI/SATA disk the disk's device
/// and the parent of its SCSI host (the host adapter), resolved through the links.
pub fn power_dirs(root: &SysRoot, dev: &StorageDevice) -> Vec<PathBuf> {
    let resolve = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    match &dev.kind {
        StorageKind::Nvme { controller } => {
            vec![resolve(
                root.path("/sys/class/nvme").join(controller).join("device"),
            )]
        }
        StorageKind::Ata { host } | StorageKind::Scsi { host } => {
            let mut dirs = vec![resolve(dev.sysfs.join("device"))];
            if let Some(h) = host {
                let host_dir = resolve(root.path("/sys/class/scsi_host").join(h).join("device"));
                if let Some(parent) = host_dir.parent() {
                    dirs.push(parent.to_path_buf());
                }
            }
            dirs
        }
        StorageKind::Virtual { .. } | StorageKind::Other => Vec::new(),
    }
}

/// The runtime-PM state of every directory of [`power_dirs`] that has one.
pub fn storage_runtime_pm(root: &SysRoot, dev: &StorageDevice) -> Vec<RuntimePm> {
    power_dirs(root, dev)
        .iter()
        .filter_map(|d| runtime_pm(d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residency_is_read_in_milliseconds() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("power");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("runtime_status"), "suspended\n").unwrap();
        std::fs::write(p.join("runtime_active_time"), "1500\n").unwrap();
        std::fs::write(p.join("runtime_suspended_time"), "98500\n").unwrap();
        std::fs::write(p.join("control"), "auto\n").unwrap();
        let r = runtime_pm(t.path()).unwrap();
        assert_eq!(r.status, "suspended");
        assert_eq!((r.active_ms, r.suspended_ms), (Some(1500), Some(98500)));
        assert_eq!(r.control.as_deref(), Some("auto"));
        assert!(runtime_pm(&t.path().join("none")).is_none());
    }
}
