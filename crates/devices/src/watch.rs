//! The storage meter and the byte split together: what `wattio measure` and `wattio top` read
//! at each end of a window, and the rows they show.

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use crate::error::DeviceError;
use crate::meter::{storage_energy_between, StorageEnergy, StorageMeter, StorageSnapshot};
use crate::split::{split_by_io_bytes, DiskEnergyShares, IoBytesSample};

/// A [`StorageMeter`] of the machine's block devices and the root its byte counters are read
/// under.
pub struct StorageWatch {
    meter: StorageMeter,
    root: SysRoot,
}

/// What a [`StorageWatch`] read at one end of a window.
#[derive(Debug, Clone)]
pub struct StorageMark {
    storage: StorageSnapshot,
    io: IoBytesSample,
}

/// One device's energy over a window and its split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskEnergyRow {
    /// The device's residency, busy time, bytes and interval.
    #[serde(flatten)]
    pub energy: StorageEnergy,
    /// Its interval split between cgroups or processes, where it has an interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub split: Option<DiskEnergyShares>,
}

impl StorageWatch {
    /// Meters the block devices under `root` ([`StorageMeter::open`]).
    pub fn open(root: &SysRoot) -> Result<StorageWatch, DeviceError> {
        Ok(StorageWatch::with_meter(StorageMeter::open(root)?, root))
    }

    /// Watches with `meter`, reading byte counters under `root`.
    pub fn with_meter(meter: StorageMeter, root: &SysRoot) -> StorageWatch {
        StorageWatch {
            meter,
            root: root.clone(),
        }
    }

    /// Whether there is any device to show.
    pub fn is_empty(&self) -> bool {
        self.meter.devices().next().is_none()
    }

    /// Reads everything now.
    pub fn mark(&self) -> StorageMark {
        StorageMark {
            storage: self.meter.snapshot(),
            io: if self.meter.any_figures() {
                IoBytesSample::read(&self.root)
            } else {
                IoBytesSample::nothing()
            },
        }
    }

    /// Each device's energy and split between marks `a` and `b`.
    pub fn rows_between(&self, a: &StorageMark, b: &StorageMark) -> Vec<DiskEnergyRow> {
        storage_energy_between(&a.storage, &b.storage)
            .into_iter()
            .map(|energy| DiskEnergyRow {
                split: split_by_io_bytes(&energy, &a.io, &b.io),
                energy,
            })
            .collect()
    }
}

impl DiskEnergyRow {
    /// The row as text: the device line (interval and label, or the reason), then the idle
    /// floor and at most `max_shares` shares, indented.
    pub fn text_lines(&self, max_shares: usize) -> Vec<String> {
        let e = &self.energy;
        let busy = e
            .busy_s
            .map(|b| format!("busy {b:.2} s of {:.2} s", e.window_s))
            .unwrap_or_else(|| format!("busy unknown over {:.2} s", e.window_s));
        let bytes = format!(
            "read {} written {}",
            human_bytes(e.read_bytes),
            human_bytes(e.written_bytes)
        );
        let what = match (&e.interval, &e.label, &e.reason) {
            (Some(i), Some(l), _) => format!("{}   {l}", i.display()),
            (_, _, Some(r)) => format!("no interval: {r}"),
            _ => "no interval".into(),
        };
        let mut lines = vec![format!(
            "disk {} ({}) {busy}, {bytes}   {what}",
            e.device, e.kind
        )];
        for err in &e.errors {
            lines.push(format!("  (could not read: {err})"));
        }
        let Some(s) = &self.split else {
            return lines;
        };
        lines.push(format!("  {}   {}", s.idle.display(), s.idle_label));
        for share in s.shares.iter().take(max_shares) {
            let who = match share.pid {
                Some(p) => format!("{p} {}", share.who),
                None => share.who.clone(),
            };
            lines.push(format!(
                "  {}   {:5.1} %  {who}   {}",
                share.energy.display(),
                100.0 * share.fraction,
                s.label
            ));
        }
        if s.shares.len() > max_shares {
            lines.push(format!("  … {} more", s.shares.len() - max_shares));
        }
        if let Some(n) = &s.note {
            lines.push(format!("  ({n})"));
        }
        lines
    }
}

/// `512 B`, `3.0 MiB`.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    match u {
        0 => format!("{b} B"),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_disk_that_can_have_an_interval_no_process_is_read() {
        let t = tempfile::tempdir().unwrap();
        let b = t.path();
        let write = |rel: &str, text: &str| {
            let p = b.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("sys/block/vda/dev", "254:0\n");
        write("sys/block/vda/stat", "1 0 8 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n");
        write("proc/4242/io", "read_bytes: 4096\nwrite_bytes: 8192\n");
        write("proc/4242/comm", "writer\n");
        let root = SysRoot::new(b);
        let watch = StorageWatch::open(&root).unwrap();
        assert!(!watch.meter.any_figures());
        // Only the virtual disk: nothing to split, so /proc is not walked.
        assert_eq!(watch.mark().io, IoBytesSample::nothing());
        // The same tree read directly does see the process.
        assert_ne!(IoBytesSample::read(&root), IoBytesSample::nothing());
    }
}
