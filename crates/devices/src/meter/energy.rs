//! Each device's energy between two snapshots of a [`super::StorageMeter`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{DiskSample, DiskSetup, StorageSnapshot};
use crate::figures::EnergyInterval;
use crate::interval::{fold_suspended, interval_of, DiskWindow};
use crate::inventory::{StorageDevice, StorageKind};

/// Bytes in a sector of `/sys/block/NAME/stat`, whatever the device's own sector size
/// (kernel Documentation/block/stat.rst).
const STAT_SECTOR_BYTES: u64 = 512;

/// The time a device spent in one of its power states over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateResidency {
    /// The state's name (`ps0`, `standby`).
    pub state: String,
    /// Seconds in it.
    pub seconds: f64,
}

/// One device's energy over a window: its residency, busy time and bytes, and its energy
/// interval where it has power figures (else the reason it has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageEnergy {
    /// Its kernel name (`nvme0n1`).
    pub device: String,
    /// Its `major:minor`.
    pub dev: String,
    /// How it is reached (`NVMe`, `ATA`, `SCSI`, `virtual (virtio disk)`, `other`).
    pub kind: String,
    /// Its model, where sysfs gives it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    /// The window, s.
    pub window_s: f64,
    /// Seconds with I/O in flight (`io_ticks`), where `stat` was read; at most the window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_s: Option<f64>,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub written_bytes: u64,
    /// Seconds in each power state (runtime-suspended time in the lowest-power one).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub residency: Vec<StateResidency>,
    /// Seconds of unknown state.
    pub unknown_s: f64,
    /// Seconds runtime-suspended, where the device has runtime PM.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub suspended_s: Option<f64>,
    /// The energy interval, where the device has power figures and its energy is its own.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interval: Option<EnergyInterval>,
    /// The interval's model: `estimated (device-reported interval: …)`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub label: Option<String>,
    /// Why there is no interval (`a virtual disk: its energy is the host's`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// What could not be read (its stat file, its reader), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub errors: Vec<String>,
}

/// A device's kind as shown.
fn kind_label(d: &StorageDevice) -> String {
    match &d.kind {
        StorageKind::Nvme { .. } => "NVMe".into(),
        StorageKind::Ata { .. } => "ATA".into(),
        StorageKind::Scsi { .. } => "SCSI".into(),
        StorageKind::Virtual { what } => format!("virtual ({what})"),
        StorageKind::Other => "other".into(),
    }
}

/// `1 s`, `250 ms`.
fn period(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The interval's label: the word *estimated*, where the figures come from and how the state
/// was read.
fn model_label(setup: &DiskSetup, source: &str) -> String {
    let poll = setup
        .poll
        .map(|p| format!("state polled every {}", period(p)))
        .unwrap_or_else(|| "state not polled".into());
    let pm = match setup.power_dir {
        Some(_) => ", runtime-PM suspended time in the lowest-power state",
        None => "",
    };
    format!("estimated (device-reported interval: {source}, {poll}{pm})")
}

/// The residency deltas over the window: a decrease (a later read moving half a polling
/// interval to another state, see the tally's midpoint rule) counts as none, the sum is
/// brought down to the window where it passes it, and what it lacks is of unknown state.
fn residency_deltas(a: &DiskSample, b: &DiskSample, window_s: f64) -> (Vec<f64>, f64) {
    let mut d: Vec<f64> = b
        .residency_s
        .iter()
        .zip(a.residency_s.iter().chain(std::iter::repeat(&0.0)))
        .map(|(y, x)| (y - x).max(0.0))
        .collect();
    let unknown = (b.unknown_s - a.unknown_s).max(0.0);
    let sum: f64 = d.iter().sum::<f64>() + unknown;
    let scale = if sum > window_s && sum > 0.0 {
        window_s / sum
    } else {
        1.0
    };
    d.iter_mut().for_each(|t| *t *= scale);
    let known: f64 = d.iter().sum();
    (d, (window_s - known).max(0.0))
}

/// One device's energy between samples `a` and `b`, `window_s` apart.
fn device_energy(
    setup: &DiskSetup,
    a: &DiskSample,
    b: &DiskSample,
    window_s: f64,
) -> StorageEnergy {
    let busy_s = a
        .io_ticks_ms
        .zip(b.io_ticks_ms)
        .map(|(x, y)| (y.saturating_sub(x) as f64 / 1e3).min(window_s));
    let suspended_s = a
        .suspended_ms
        .zip(b.suspended_ms)
        .map(|(x, y)| (y.saturating_sub(x) as f64 / 1e3).min(window_s));
    let (residency_s, unknown_s) = residency_deltas(a, b, window_s);
    let mut w = DiskWindow {
        window_s,
        residency_s,
        unknown_s,
        suspended_s,
        busy_s,
    };
    let d = &setup.device;
    let mut errors = b.errors.clone();
    let (interval, label, reason) = match (&setup.figures, &d.kind) {
        (_, StorageKind::Virtual { .. }) => (
            None,
            None,
            Some("a virtual disk: its energy is the host's".to_string()),
        ),
        (None, _) => (None, None, Some(setup.no_figures.clone())),
        (Some(f), _) if f.states.is_empty() => (
            None,
            None,
            Some("no power figures: its reader gives no power state".to_string()),
        ),
        (Some(f), _) => {
            fold_suspended(f, &mut w);
            let label = model_label(setup, &f.source.label());
            (Some(interval_of(f, &w)), Some(label), None)
        }
    };
    let residency = match &setup.figures {
        Some(f) => f
            .states
            .iter()
            .zip(&w.residency_s)
            .map(|(s, t)| StateResidency {
                state: s.name.clone(),
                seconds: *t,
            })
            .collect(),
        None => Vec::new(),
    };
    errors.dedup();
    StorageEnergy {
        device: d.name.clone(),
        dev: d.dev.clone(),
        kind: kind_label(d),
        model: d.model.clone(),
        window_s,
        busy_s,
        read_bytes: b.sectors_read.saturating_sub(a.sectors_read) * STAT_SECTOR_BYTES,
        written_bytes: b.sectors_written.saturating_sub(a.sectors_written) * STAT_SECTOR_BYTES,
        residency,
        unknown_s: if setup.figures.is_some() {
            w.unknown_s
        } else {
            window_s
        },
        suspended_s,
        interval,
        label,
        reason,
        errors,
    }
}

/// Each device's energy between snapshots `a` and `b` of one meter (`a` first): the window,
/// residency, busy time, bytes and energy interval, or the reason there is no interval.
pub fn storage_energy_between(a: &StorageSnapshot, b: &StorageSnapshot) -> Vec<StorageEnergy> {
    let window_s = b.at.saturating_duration_since(a.at).as_secs_f64();
    b.setup
        .iter()
        .zip(a.disks.iter().zip(&b.disks))
        .map(|(s, (x, y))| device_energy(s, x, y, window_s))
        .collect()
}
