//! What `wattio report` reads of a `wattio measure --json` document, of every version: one run
//! ([`ReportedRun`]), one run with its command ([`ReportedSingleRun`]), or a comparison of
//! commands with every run and its status ([`ReportedComparison`]).
//!
//! The writer's types (`wattio_meter::measure::RunReport` and the benchmark report) hold the
//! attribution, the kernel's I/O work, the regions, the CO₂e and each disk's residency besides,
//! built from the meter's vocabulary; the report reads the fields below alone, so it needs no
//! meter, and a document written before a field was added still reads.
//! `tests/report_reads_producers.rs` of the binary reads real `measure --json` output through
//! these types.

use crate::{provenance_label, EnergyInterval};
use serde::Deserialize;

/// Where a figure comes from, as result files write it: the `mechanism`, `estimated` and
/// `model` fields a provenance is flattened into.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub struct ReportedProvenance {
    pub mechanism: String,
    pub estimated: bool,
    #[serde(default)]
    pub model: Option<String>,
}

impl ReportedProvenance {
    /// `measured (perf)`, `estimated (model: …)`: [`provenance_label`].
    pub fn label(&self) -> String {
        provenance_label(&self.mechanism, self.estimated, self.model.as_deref())
    }
}

/// One run of a `measure --json` document: the machine's energy over it and how it ended.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedRun {
    pub duration_s: f64,
    #[serde(flatten)]
    pub provenance: ReportedProvenance,
    /// Each counter's energy (package, DRAM, GPUs, platform meters…).
    pub domains: Vec<ReportedDomainEnergy>,
    /// Packages plus DRAM.
    pub total_j: f64,
    /// The GPUs, beside `total_j`.
    #[serde(default)]
    pub gpu_j: Option<f64>,
    /// 0 in runs written before the exit code was kept.
    #[serde(default)]
    pub exit_code: i32,
    /// The platform meters' view of the machine, where one read it.
    #[serde(default)]
    pub machine: Option<ReportedMachine>,
    /// Each disk's energy interval over the run, where the machine has block devices.
    #[serde(default)]
    pub disks: Option<Vec<ReportedDisk>>,
}

impl ReportedRun {
    /// `total_j` over the run's duration; 0 for a run of no duration.
    pub fn mean_power_w(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.total_j / self.duration_s
        } else {
            0.0
        }
    }
}

/// One counter's energy over a run.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedDomainEnergy {
    pub socket: u32,
    /// `package`, `core`, `uncore`, `dram`, `psys`, `gpu`, `platform` or `device`.
    pub domain: String,
    pub energy_j: f64,
}

/// The machine's platform meters over a run.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedMachine {
    pub platforms: Vec<ReportedPlatform>,
}

/// One platform meter over a run, and the rest RAPL and the GPU meters do not see.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedPlatform {
    /// `platform 0`, `socket 0 psys`.
    pub meter: String,
    pub label: String,
    pub platform_j: f64,
    #[serde(default)]
    pub rest_j: Option<f64>,
    #[serde(default)]
    pub rest_uncertainty_j: Option<f64>,
    /// Why there is no rest, or what the disagreement is.
    #[serde(default)]
    pub note: Option<String>,
}

/// One disk over a run: its name and energy interval with the model's label (the writer
/// flattens the disk's energy into these fields).
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedDisk {
    pub device: String,
    #[serde(default)]
    pub interval: Option<EnergyInterval>,
    #[serde(default)]
    pub label: Option<String>,
}

/// The disks' summed interval and their labels (`nvme0n1: estimated (…)`, each once, `; `
/// between), over the disks given as (device, interval, label) that have an interval; `None`
/// when none has one.
pub fn disks_interval_total<'a>(
    disks: impl IntoIterator<Item = (&'a str, Option<EnergyInterval>, Option<&'a str>)>,
) -> Option<(EnergyInterval, String)> {
    let mut total: Option<EnergyInterval> = None;
    let mut labels: Vec<String> = Vec::new();
    for (device, interval, label) in disks {
        let Some(interval) = interval else {
            continue;
        };
        total = Some(total.map_or(interval, |t| t.plus(interval)));
        labels.push(format!("{device}: {}", label.unwrap_or("")));
    }
    labels.dedup();
    Some((total?, labels.join("; ")))
}

/// `measure --json` of one run of one command.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedSingleRun {
    #[serde(flatten)]
    pub run: ReportedRun,
    /// The command as argv (`sh -c …` for a shell command).
    pub command: Vec<String>,
}

/// `measure --json` of several runs or commands: what every `total_j` comes from, and each
/// command's runs.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedComparison {
    #[serde(flatten)]
    pub provenance: ReportedProvenance,
    pub results: Vec<ReportedCommand>,
}

/// One command of a comparison and every run of it, kept or not.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedCommand {
    pub command: String,
    pub runs: Vec<ReportedBenchRun>,
}

/// One run of a comparison: `ok` (kept), `failed` or `interrupted`, and its figures.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportedBenchRun {
    pub status: String,
    #[serde(flatten)]
    pub run: ReportedRun,
}

impl ReportedBenchRun {
    /// Whether the run counts in the statistics (exit code 0).
    pub fn kept(&self) -> bool {
        self.status == "ok"
    }
}
