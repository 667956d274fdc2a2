//! What `wattio report` reads of a `wattio transfer --json` summary: its headline figures, its
//! energy with their provenance, the destination disks' lines and the interval log. The writer's
//! type (`wattio_transfer::TransferSummary`) holds the tuner's plan, the CPU actuator's reports
//! and the devices' residency besides; the report reads these fields alone, so a summary of any
//! version that has them reads, and the report needs neither the transfer engine nor the device
//! readers. `tests/report_reads_producers.rs` of the binary reads real summaries through it.

use crate::{EnergyInterval, ReportedProvenance};
use serde::{Deserialize, Serialize};

/// Parameters and measurements of one interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalLog {
    pub t_s: f64,
    pub bytes: u64,
    pub throughput_mbps: f64,
    pub tuner: String,
    pub state: String,
    pub num_ch: usize,
    /// Channels per partition (concurrency budget).
    pub channels: Vec<usize>,
    /// Open connections at the end of the interval.
    pub open_channels: usize,
    pub pipelining: Vec<usize>,
    pub files_in_flight: usize,
    /// Mean chunks in flight per file in flight (effective parallelism).
    pub parallelism: f64,
    pub cores: Option<usize>,
    pub freq_khz: Option<u64>,
    pub cpu_load: Option<f64>,
    pub energy_j: Option<f64>,
    pub power_w: Option<f64>,
    pub rate_cap_mbps: Option<f64>,
}

impl IntervalLog {
    /// The tuning parameters of this interval, as (name, value) for a chart of them over time:
    /// the channel budget, open connections, files in flight (concurrency), chunks in flight
    /// per file (parallelism), requests in flight per channel (pipelining, one per partition)
    /// and active cores. The frequency is left out: kHz would flatten the others.
    pub fn parameters(&self) -> Vec<(String, f64)> {
        let mut params = vec![
            ("channels (budget)".to_string(), self.num_ch as f64),
            ("open channels".to_string(), self.open_channels as f64),
            (
                "files in flight (concurrency)".to_string(),
                self.files_in_flight as f64,
            ),
            ("parallelism".to_string(), self.parallelism),
        ];
        let partitions = self.pipelining.len();
        for (i, &p) in self.pipelining.iter().enumerate() {
            let name = if partitions == 1 {
                "pipelining".to_string()
            } else {
                format!("pipelining (partition {})", i + 1)
            };
            params.push((name, p as f64));
        }
        if let Some(c) = self.cores {
            params.push(("cores".to_string(), c as f64));
        }
        params
    }
}

/// The fields of a `wattio transfer --json` summary a report shows.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedTransfer {
    pub source: String,
    pub bytes: u64,
    pub files: usize,
    pub seconds: f64,
    pub throughput_mbps: f64,
    pub sla: String,
    pub tuner: String,
    /// The meter's energy over the transfer, where there was a meter.
    pub energy: Option<ReportedTransferEnergy>,
    /// The estimated energy of a host running only this transfer.
    pub energy_process: ReportedHostEstimate,
    /// The disks holding DEST; absent from summaries written before wattio measured them.
    #[serde(default)]
    pub dest_disks: Option<ReportedDestDisks>,
    pub intervals: Vec<IntervalLog>,
}

/// The meter's energy over a transfer and where it comes from (the writer flattens its
/// provenance into these fields).
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedTransferEnergy {
    pub total_j: f64,
    #[serde(flatten)]
    pub provenance: ReportedProvenance,
}

/// The estimated energy of a host running only the transfer, with its provenance label.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedHostEstimate {
    pub total_j: f64,
    pub provenance: String,
}

/// The destination's disks as a summary gives them.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReportedDestDisks {
    pub disks: Vec<ReportedDestDisk>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub window_note: Option<String>,
}

/// One disk under DEST over a transfer (the writer flattens the disk's energy into these).
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedDestDisk {
    pub device: String,
    pub kind: String,
    pub window_s: f64,
    #[serde(default)]
    pub interval: Option<EnergyInterval>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub per_gb: Option<EnergyInterval>,
}

impl ReportedDestDisk {
    /// [`dest_disk_name`] of this disk.
    pub fn name(&self) -> String {
        dest_disk_name(&self.device, &self.kind)
    }

    /// [`dest_disk_figures`] of this disk.
    pub fn figures(&self) -> String {
        dest_disk_figures(
            self.interval.as_ref(),
            self.label.as_deref(),
            self.reason.as_deref(),
            self.per_gb.as_ref(),
            self.window_s,
        )
    }
}

/// A destination disk's name and kind: `nvme0n1 (NVMe)`.
pub fn dest_disk_name(device: &str, kind: &str) -> String {
    format!("{device} ({kind})")
}

/// A destination disk's interval over the run and per GB with the model's label, or why it has
/// none: `2.100 J [1.000, 8.000] over 1.00 s, 0.525 J [0.250, 2.000] per GB received — estimated
/// (…)`. The one wording of the summary's text lines and the report's table.
pub fn dest_disk_figures(
    interval: Option<&EnergyInterval>,
    label: Option<&str>,
    reason: Option<&str>,
    per_gb: Option<&EnergyInterval>,
    window_s: f64,
) -> String {
    match (interval, label) {
        (Some(i), Some(label)) => {
            let per_gb = match per_gb {
                Some(g) => format!("{} per GB received", g.display()),
                None => "no bytes received, no figure per GB".into(),
            };
            format!("{} over {window_s:.2} s, {per_gb} — {label}", i.display())
        }
        _ => format!("no interval: {}", reason.unwrap_or("no power figures")),
    }
}
