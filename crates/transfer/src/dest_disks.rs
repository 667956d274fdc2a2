//! The destination's disks in a transfer's summary: each disk under DEST with its energy
//! interval over the run and per GB received, or why it has none. `wattio report` reads them as
//! `wattio_results::ReportedDestDisks`.

use serde::{Deserialize, Serialize};
use wattio_devices::{EnergyInterval, StorageEnergy};
use wattio_results::{dest_disk_figures, dest_disk_name};

/// The disks holding DEST over a transfer, as the summary gives them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DestDisks {
    /// The whole disks under DEST (`wattio_devices::disks_holding`), each with its interval or
    /// the reason it has none.
    pub disks: Vec<DestDiskEnergy>,
    /// Why no disk is given at all: DEST is on no block device (tmpfs), or the disks could not
    /// be watched (the run went on without them).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// What the window leaves out: with `--fsync off` the data was not synced, so its writeback
    /// may fall after the window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub window_note: Option<String>,
}

/// One disk under DEST over the transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DestDiskEnergy {
    /// Its residency, busy time, bytes read and written (by every process, not this transfer
    /// alone), and its interval with the model's label, or the reason it has none.
    #[serde(flatten)]
    pub energy: StorageEnergy,
    /// The interval per GB received by this run: `interval × 1e9 / bytes`, the whole disk's
    /// energy over the run charged to the transfer's bytes; `None` without an interval or
    /// without bytes received.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub per_gb: Option<EnergyInterval>,
}

impl DestDiskEnergy {
    /// The disk's figures over a run that received `received` bytes.
    pub fn new(energy: StorageEnergy, received: u64) -> DestDiskEnergy {
        let per_gb = energy
            .interval
            .filter(|_| received > 0)
            .map(|i| i.scaled(1e9 / received as f64));
        DestDiskEnergy { energy, per_gb }
    }

    /// The disk's name and kind: `nvme0n1 (NVMe)` ([`dest_disk_name`]).
    pub fn name(&self) -> String {
        dest_disk_name(&self.energy.device, &self.energy.kind)
    }

    /// Its interval over the run and per GB with the model's label, or why it has none
    /// ([`dest_disk_figures`], the wording `wattio report` shows too).
    pub fn figures(&self) -> String {
        let e = &self.energy;
        dest_disk_figures(
            e.interval.as_ref(),
            e.label.as_deref(),
            e.reason.as_deref(),
            self.per_gb.as_ref(),
            e.window_s,
        )
    }
}

impl DestDisks {
    /// The summary's lines: one per disk, then the notes.
    pub fn text_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .disks
            .iter()
            .map(|d| format!("destination disk {}: {}", d.name(), d.figures()))
            .collect();
        if let Some(n) = &self.note {
            lines.push(format!("destination disk: {n}"));
        }
        if let Some(n) = &self.window_note {
            lines.push(format!("destination disk: note: {n}"));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nvme(interval: Option<EnergyInterval>) -> StorageEnergy {
        StorageEnergy {
            device: "nvme0n1".into(),
            dev: "259:0".into(),
            kind: "NVMe".into(),
            model: None,
            window_s: 2.0,
            busy_s: Some(0.5),
            read_bytes: 0,
            written_bytes: 4096,
            residency: vec![],
            unknown_s: 0.0,
            suspended_s: None,
            label: interval.map(|_| "estimated (device-reported interval: x)".into()),
            reason: interval
                .is_none()
                .then(|| "a virtual disk: its energy is the host's".into()),
            interval,
            errors: vec![],
        }
    }

    #[test]
    fn per_gb_is_the_interval_over_the_bytes_received() {
        let i = EnergyInterval {
            lower_j: 1.0,
            central_j: Some(2.0),
            upper_j: 8.0,
        };
        // 4 GB received: a quarter of the interval per GB
        let d = DestDiskEnergy::new(nvme(Some(i)), 4_000_000_000);
        let g = d.per_gb.unwrap();
        assert_eq!((g.lower_j, g.central_j, g.upper_j), (0.25, Some(0.5), 2.0));
        assert_eq!(
            d.figures(),
            "2.000 J [1.000, 8.000] over 2.00 s, 0.500 J [0.250, 2.000] per GB received — estimated (device-reported interval: x)"
        );
        assert!(DestDiskEnergy::new(nvme(Some(i)), 0).per_gb.is_none());
        let v = DestDiskEnergy::new(nvme(None), 4_000_000_000);
        assert!(v.per_gb.is_none());
        assert_eq!(
            v.figures(),
            "no interval: a virtual disk: its energy is the host's"
        );
    }

    #[test]
    fn a_summary_without_the_disks_still_reads_and_the_json_round_trips() {
        let d = DestDisks {
            disks: vec![DestDiskEnergy::new(nvme(None), 10)],
            note: None,
            window_note: Some("w".into()),
        };
        let back: DestDisks = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back, d);
        assert_eq!(
            back.text_lines(),
            [
                "destination disk nvme0n1 (NVMe): no interval: a virtual disk: its energy is the host's",
                "destination disk: note: w"
            ]
        );
        let empty: DestDisks = serde_json::from_str("{\"disks\": []}").unwrap();
        assert!(empty.note.is_none() && empty.window_note.is_none());
    }
}
