//! `wattio iobench`'s rows: one [`RunRecord`] per measured run (`results.csv`, the `runs` of
//! `results.json`), with the study's use cases ([`Op`]), file sizes ([`Size`]) and library sets
//! ([`Libs`]) they name. `wattio-iobench` writes them, `wattio report` reads them back; what both
//! compute from them (the shared provenance, each method's disk beside its CPU figure) is here
//! too.

mod analysis;

pub use analysis::{disk_table, method_disks, provenance_of, sig, EnergyDominance, MethodDisk};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A use case of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Read the text file by chunks or lines (Table III).
    Read,
    /// Read the whole file at once (Figure 1).
    Readall,
    /// Read 100 bytes, move 10,000 bytes on, to the end of the binary file (Table IV).
    Seek,
    /// Write the text file (Table V): the paper's protocol, the window closing before the kernel
    /// writes the data back.
    Write,
    /// Write the text file with each write method, then fsync it inside the window: the flushed
    /// variant beside the paper's unflushed one.
    Writesync,
    /// RQ2: our Fasta generator with a swappable write method.
    Fasta,
    /// RQ2: our K-nucleotide counter with a swappable read method (input: Fasta's output).
    Knucleotide,
    /// RQ2: Zip4j compressing the text file, read with a swappable method.
    Zip4j,
    /// RQ2: javax.crypto AES decryption of the encrypted text file, read with a swappable method.
    Crypto,
}

impl Op {
    /// The micro-benchmark use cases (the default of `--ops`).
    pub const ALL: [Op; 5] = [Op::Read, Op::Readall, Op::Seek, Op::Write, Op::Writesync];
    /// The RQ2 programs (`--apps`).
    pub const APPS: [Op; 4] = [Op::Fasta, Op::Knucleotide, Op::Zip4j, Op::Crypto];
    /// Everything, in report order.
    pub const EVERY: [Op; 9] = [
        Op::Read,
        Op::Readall,
        Op::Seek,
        Op::Write,
        Op::Writesync,
        Op::Fasta,
        Op::Knucleotide,
        Op::Zip4j,
        Op::Crypto,
    ];

    /// Whether the use case writes the text file (the flushed variant too).
    pub fn writes(self) -> bool {
        matches!(self, Op::Write | Op::Writesync)
    }

    /// One of the RQ2 programs.
    pub fn is_app(self) -> bool {
        Op::APPS.contains(&self)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Readall => "readall",
            Op::Seek => "seek",
            Op::Write => "write",
            Op::Writesync => "writesync",
            Op::Fasta => "fasta",
            Op::Knucleotide => "knucleotide",
            Op::Zip4j => "zip4j",
            Op::Crypto => "crypto",
        }
    }

    /// The JMH benchmark class of this use case.
    pub fn bench_class(self) -> &'static str {
        match self {
            Op::Read => "io.wattio.iobench.ReadBench",
            Op::Readall => "io.wattio.iobench.ReadAllBench",
            Op::Seek => "io.wattio.iobench.SeekBench",
            Op::Write => "io.wattio.iobench.WriteBench",
            Op::Writesync => "io.wattio.iobench.WriteSyncBench",
            _ => "io.wattio.iobench.AppsBench",
        }
    }

    /// What the use case does, for table titles.
    pub fn title(self) -> &'static str {
        match self {
            Op::Read => "read by chunks/lines",
            Op::Readall => "read the whole file",
            Op::Seek => "seek (100 B read, 10,000 B skipped)",
            Op::Write => "write (unflushed, the paper's protocol)",
            Op::Writesync => "write, then fsync (flushed)",
            Op::Fasta => "Fasta (write 60-column nucleotide lines)",
            Op::Knucleotide => "K-nucleotide (read Fasta's output, count k-mers)",
            Op::Zip4j => "Zip4j (compress the text file)",
            Op::Crypto => "javax.crypto (AES-decrypt the text file)",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Op::EVERY
            .into_iter()
            .find(|o| o.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown use case '{s}': use read, readall, seek, write, fasta, knucleotide, zip4j or crypto")
            })
    }
}

/// Table I of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    Tiny,
    Small,
    Medium,
    Medlarge,
    Large,
}

impl Size {
    pub const ALL: [Size; 5] = [
        Size::Tiny,
        Size::Small,
        Size::Medium,
        Size::Medlarge,
        Size::Large,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Medlarge => "medlarge",
            Size::Large => "large",
        }
    }

    /// (lines, line length including the '\n').
    pub fn shape(self) -> (u64, u64) {
        match self {
            Size::Tiny => (1_000, 100),
            Size::Small => (100_000, 150),
            Size::Medium => (1_000_000, 200),
            Size::Medlarge => (8_000_000, 400),
            Size::Large => (40_000_000, 400),
        }
    }

    /// File size in bytes (each of the text and the binary file).
    pub fn bytes(self) -> u64 {
        let (l, n) = self.shape();
        l * n
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let t = if t == "medium-large" {
            "medlarge".to_string()
        } else {
            t
        };
        Size::ALL
            .into_iter()
            .find(|z| z.as_str() == t)
            .ok_or_else(|| {
                format!("unknown size '{s}': use tiny, small, medium, medlarge or large")
            })
    }
}

/// Library versions the benchmarks are built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Libs {
    /// commons-io 2.8.0 and Guava 23.0, as in the paper.
    Paper,
    /// Current releases (the `libs-current` Maven profile).
    Current,
}

impl Libs {
    pub fn as_str(self) -> &'static str {
        match self {
            Libs::Paper => "paper",
            Libs::Current => "current",
        }
    }
}

impl std::str::FromStr for Libs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "paper" => Ok(Libs::Paper),
            "current" => Ok(Libs::Current),
            _ => Err(format!(
                "unknown library set '{s}': use paper (commons-io 2.8.0, guava 23.0) or current"
            )),
        }
    }
}

/// Columns every `results.csv` has: the [`RunRecord`] fields in order, less those added later
/// (`attributed_j` and the `disk…` columns), which files written before them lack.
pub const RESULTS_CSV_COLUMNS: &[&str] = &[
    "method",
    "op",
    "size",
    "buffer",
    "run",
    "energy_j",
    "time_s",
    "bytes",
    "mechanism",
    "estimated",
    "model",
    "energy_scope",
    "system_energy_j",
    "cpu_s",
    "window_s",
    "cache",
    "cache_resident",
    "libs",
    "checked",
];

/// One measured run (one fresh JVM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub method: String,
    pub op: Op,
    pub size: Size,
    pub buffer: u32,
    /// 1-based run number within the cell.
    pub run: u32,
    /// Energy of the measured window that the study ranks by (see `energy_scope`, `estimated`,
    /// `model`): a system figure — measured whole machine, or with the model the estimated
    /// energy of a host running only the JVM.
    pub energy_j: f64,
    /// Duration of the operation measured in the JVM.
    pub time_s: f64,
    /// Bytes read (or visited by the seek pattern) or written.
    pub bytes: u64,
    pub mechanism: String,
    pub estimated: bool,
    /// The model and its coefficients, for estimates ("" for measurements).
    pub model: String,
    /// `process` (the model with the JVM's CPU time as the busy time of a host running only the
    /// JVM: a dedicated-host system estimate) or `system` (the meter's whole machine, measured).
    pub energy_scope: String,
    /// The meter's whole-machine figure over the same window.
    pub system_energy_j: f64,
    /// JVM CPU seconds in the window.
    pub cpu_s: f64,
    /// Wall seconds between BEGIN and END as seen by wattio.
    pub window_s: f64,
    pub cache: String,
    /// Fraction of the input file in the page cache just before the run ("" for writes).
    pub cache_resident: Option<f64>,
    pub libs: Libs,
    /// The output check passed (runs that fail it abort the study, so this is always true).
    pub checked: bool,
    /// The JVM's attributed share of `system_energy_j` (`attribution::share_j` by its CPU time;
    /// label: the meter's provenance + `, attributed (cpu-time share)`). Empty in results
    /// written before the column existed.
    #[serde(alias = "process_j", default)]
    pub attributed_j: Option<f64>,
    /// The whole disk(s) holding the operation's file (`nvme0n1`, several `+`-joined), where a
    /// storage watch ran. Empty in results written before the disk columns existed.
    #[serde(default)]
    pub disk: Option<String>,
    /// The least energy those disks can have used over the window, J (summed over the disks
    /// that have an interval; label: `disk_label`).
    #[serde(default)]
    pub disk_lower_j: Option<f64>,
    /// The disks' central estimate, J, where each reports the figures it needs.
    #[serde(default)]
    pub disk_central_j: Option<f64>,
    /// The most energy those disks can have used over the window, J.
    #[serde(default)]
    pub disk_upper_j: Option<f64>,
    /// The interval's model (`nvme0n1: estimated (device-reported interval: …)`), or, without an
    /// interval, why there is none (`no interval: …`).
    #[serde(default)]
    pub disk_label: Option<String>,
}

impl RunRecord {
    /// The provenance label of this row's energy.
    pub fn provenance(&self) -> String {
        crate::provenance_label(&self.mechanism, self.estimated, Some(&self.model))
    }
}
