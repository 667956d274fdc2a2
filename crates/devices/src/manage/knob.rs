//! The kernel's own power knobs of a storage device, found in sysfs, read and written.
//!
//! - NVMe: `/sys/class/nvme/nvmeN/power/pm_qos_latency_tolerance_us` (kernel
//!   Documentation/ABI/testing/sysfs-devices-power; the NVMe driver, drivers/nvme/host/core.c
//!   `nvme_set_latency_tolerance`, lets APST use only the non-operational states whose entry
//!   plus exit latency is within it; 0 turns APST off, `auto`/`any` lift the bound).
//! - SATA: `/sys/class/scsi_host/hostN/link_power_management_policy` (kernel
//!   Documentation/ABI/testing/sysfs-class-scsi_host).
//! - Runtime PM of the PCIe function or USB device a disk hangs off: `power/control` (`on`,
//!   `auto`), with `power/autosuspend_delay_ms` shown (kernel Documentation/power/runtime_pm.rst,
//!   Documentation/ABI/testing/sysfs-devices-power).
//!
//! The drive's own standby timer (ATA IDLE with a timer, `hdparm -S`) is not a knob here: it
//! cannot be read back, so it could not be restored.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use super::ManageError;
use crate::inventory::{StorageDevice, StorageKind};

/// The longest value a knob file may hold: anything longer is not a knob.
const MAX_KNOB_BYTES: u64 = 256;

/// Which of the kernel's knobs a [`DeviceKnob`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KnobKind {
    /// NVMe `power/pm_qos_latency_tolerance_us`: the APST latency bound, µs.
    NvmeLatencyTolerance,
    /// SATA `link_power_management_policy`.
    SataLinkPolicy,
    /// Runtime PM `power/control` (`on` or `auto`).
    RuntimePmControl,
}

impl KnobKind {
    /// The value that keeps the device at its best performance.
    pub fn performance_value(self) -> &'static str {
        match self {
            KnobKind::NvmeLatencyTolerance => "0",
            KnobKind::SataLinkPolicy => "max_performance",
            KnobKind::RuntimePmControl => "on",
        }
    }
}

/// One knob of one device: its kind and its path as the system names it (`/sys/...`; resolve
/// it under a [`SysRoot`] to read or write it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceKnob {
    /// Which knob.
    pub kind: KnobKind,
    /// Its system path.
    pub path: PathBuf,
}

impl DeviceKnob {
    /// Its current value, trimmed.
    pub fn read(&self, root: &SysRoot) -> Result<String, ManageError> {
        read_knob(root, &self.path)
    }

    /// Writes `value` (with a newline, as `echo` does).
    pub fn write(&self, root: &SysRoot, value: &str) -> Result<(), ManageError> {
        write_knob(root, &self.path, value)
    }
}

/// The trimmed value of the knob at system path `path`.
pub(crate) fn read_knob(root: &SysRoot, path: &Path) -> Result<String, ManageError> {
    let fail = |source| ManageError::KnobRead {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(root.path(path))
        .and_then(|f| f.take(MAX_KNOB_BYTES).read_to_string(&mut text))
        .map_err(fail)?;
    Ok(text.trim().to_string())
}

/// Writes `value` and a newline to the knob at system path `path`.
pub(crate) fn write_knob(root: &SysRoot, path: &Path, value: &str) -> Result<(), ManageError> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(root.path(path))
        .and_then(|mut f| f.write_all(format!("{value}\n").as_bytes()))
        .map_err(|source| ManageError::KnobRefused {
            path: path.to_path_buf(),
            value: value.to_string(),
            source,
        })
}

/// `path` as the system names it: the part below the root.
fn system_path(root: &SysRoot, path: &Path) -> PathBuf {
    match path.strip_prefix(root.base()) {
        Ok(rel) => Path::new("/").join(rel),
        Err(_) => path.to_path_buf(),
    }
}

/// Whether a sysfs directory name is a PCI function (`0000:00:17.0`) or a USB device (`1-2.3`).
fn is_pci_or_usb(name: &str) -> bool {
    let pci = name.len() == 12
        && name.as_bytes()[4] == b':'
        && name.as_bytes()[7] == b':'
        && name.as_bytes()[10] == b'.';
    let usb = name.contains('-')
        && !name.contains(':')
        && name
            .chars()
            .all(|c| c.is_ascii_digit() || c == '-' || c == '.');
    pci || usb
}

/// The system path of the `power/control` of the PCIe function or USB device nearest above
/// the disk, where there is one.
pub(crate) fn runtime_pm_control(root: &SysRoot, dev: &StorageDevice) -> Option<PathBuf> {
    let resolved = std::fs::canonicalize(&dev.sysfs).ok()?;
    resolved
        .ancestors()
        .filter(|a| {
            a.file_name()
                .is_some_and(|n| is_pci_or_usb(&n.to_string_lossy()))
        })
        .map(|a| a.join("power/control"))
        .find(|c| c.is_file())
        .map(|c| system_path(root, &c))
}

/// The knobs of `dev` that exist on this machine (not yet read).
pub fn device_knobs(root: &SysRoot, dev: &StorageDevice) -> Vec<DeviceKnob> {
    let mut knobs = Vec::new();
    let mut add = |kind, path: PathBuf| {
        if root.path(&path).exists() {
            knobs.push(DeviceKnob { kind, path });
        }
    };
    match &dev.kind {
        StorageKind::Nvme { controller } => add(
            KnobKind::NvmeLatencyTolerance,
            Path::new("/sys/class/nvme")
                .join(controller)
                .join("power/pm_qos_latency_tolerance_us"),
        ),
        StorageKind::Ata { host: Some(host) } => add(
            KnobKind::SataLinkPolicy,
            Path::new("/sys/class/scsi_host")
                .join(host)
                .join("link_power_management_policy"),
        ),
        _ => {}
    }
    if let Some(control) = runtime_pm_control(root, dev) {
        add(KnobKind::RuntimePmControl, control);
    }
    knobs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_and_usb_names_are_told_from_other_sysfs_directories() {
        assert!(is_pci_or_usb("0000:00:17.0"));
        assert!(is_pci_or_usb("1-2.3"));
        assert!(!is_pci_or_usb("ata1"));
        assert!(!is_pci_or_usb("host0"));
        assert!(!is_pci_or_usb("0:0:0:0"));
        assert!(!is_pci_or_usb("target0:0:0"));
        assert!(!is_pci_or_usb("pci0000:00"));
    }
}
