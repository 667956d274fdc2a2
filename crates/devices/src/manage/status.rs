//! What `wattio power status` shows: each storage device's knobs and their values, the
//! runtime-PM state and residency of the PCIe and USB devices that have runtime PM (kernel
//! Documentation/ABI/testing/sysfs-devices-power: `runtime_status`, `runtime_active_time`,
//! `runtime_suspended_time` in ms, `control`, `autosuspend_delay_ms`), and whether a restore
//! record is pending.

use std::path::{Path, PathBuf};

use wattio_energy::SysRoot;

use super::knob::{device_knobs, read_knob, DeviceKnob};
use super::restore::RestoreRecord;
use super::ManageError;
use crate::inventory::{storage_devices, StorageDevice};

/// One storage device and its knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceKnobStatus {
    /// The device.
    pub device: StorageDevice,
    /// Each knob with its current value, or the one-line error reading it.
    pub knobs: Vec<(DeviceKnob, Result<String, String>)>,
}

/// One device with runtime PM.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimePmStatus {
    /// Its sysfs directory, as the system names it (`/sys/bus/pci/devices/0000:00:17.0`).
    pub path: PathBuf,
    /// `power/control` (`on`, `auto`).
    pub control: Option<String>,
    /// `power/runtime_status` (`active`, `suspended`, `unsupported`).
    pub status: Option<String>,
    /// `power/runtime_active_time`, ms.
    pub active_ms: Option<u64>,
    /// `power/runtime_suspended_time`, ms.
    pub suspended_ms: Option<u64>,
    /// `power/autosuspend_delay_ms`, where the device has one.
    pub autosuspend_delay_ms: Option<i64>,
}

/// Everything `power status` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerStatus {
    /// The storage devices.
    pub devices: Vec<DeviceKnobStatus>,
    /// The PCIe and USB devices with runtime PM.
    pub runtime_pm: Vec<RuntimePmStatus>,
    /// A restore record left by a run that was killed, or one running now.
    pub pending: Option<RestoreRecord>,
}

fn read_opt(root: &SysRoot, path: &Path) -> Option<String> {
    read_knob(root, path).ok()
}

/// The runtime-PM state of the device at system path `dir`; `None` without runtime PM.
fn runtime_pm_of(root: &SysRoot, dir: &Path) -> Option<RuntimePmStatus> {
    let power = dir.join("power");
    let status = read_opt(root, &power.join("runtime_status"))?;
    let number = |f: &str| read_opt(root, &power.join(f)).and_then(|v| v.parse().ok());
    Some(RuntimePmStatus {
        path: dir.to_path_buf(),
        control: read_opt(root, &power.join("control")),
        status: Some(status),
        active_ms: number("runtime_active_time"),
        suspended_ms: number("runtime_suspended_time"),
        autosuspend_delay_ms: read_opt(root, &power.join("autosuspend_delay_ms"))
            .and_then(|v| v.parse().ok()),
    })
}

/// The PCIe and USB devices with runtime PM, sorted by path.
fn runtime_pm_devices(root: &SysRoot) -> Vec<RuntimePmStatus> {
    let mut out = Vec::new();
    for bus in ["/sys/bus/pci/devices", "/sys/bus/usb/devices"] {
        let Ok(entries) = std::fs::read_dir(root.path(bus)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        out.extend(
            names
                .iter()
                .filter_map(|n| runtime_pm_of(root, &Path::new(bus).join(n))),
        );
    }
    out
}

/// The machine's power-management state as `power status` shows it.
pub fn power_status(root: &SysRoot, state_dir: &Path) -> Result<PowerStatus, ManageError> {
    let devices = storage_devices(root).map_err(|e| ManageError::Refused {
        device: "/sys/block".into(),
        what: e.to_string(),
    })?;
    let devices = devices
        .into_iter()
        .map(|device| {
            let knobs = device_knobs(root, &device)
                .into_iter()
                .map(|k| {
                    let value = k.read(root).map_err(|e| e.to_string());
                    (k, value)
                })
                .collect();
            DeviceKnobStatus { device, knobs }
        })
        .collect();
    Ok(PowerStatus {
        devices,
        runtime_pm: runtime_pm_devices(root),
        pending: RestoreRecord::load(root, state_dir)?,
    })
}
