//! What a transfer is asked to do ([`TransferOptions`], in a part per stage: [`DiscoveryOptions`],
//! [`DataOptions`], [`TuningOptions`]) and the defaults it derives from the host (the per-stream
//! TCP window).

use crate::actuator::CoreBackend;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;
use wattio_energy::SysRoot;
use wattio_http::tls::ClientTlsOptions;
use wattio_progress::Sink;
use wattio_tuner::{Sla, TunerChoice};

/// Most connections the tuners may open unless told otherwise.
pub const DEFAULT_MAX_CHANNELS: usize = 32;
/// Consecutive failed attempts a channel tolerates unless told otherwise.
pub const DEFAULT_RETRIES: u32 = 10;
/// The tuning interval (the algorithms' timeout) unless told otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Something the client has to tell its user: a note on the source or a warning about a part
/// that could not do its job. The client itself never prints: it tells these to
/// [`TransferOptions::notices`], and the binary writes them to stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// How the source was read (e.g. a directory index instead of a listing).
    Note(String),
    /// A part that did not work; the transfer goes on without it.
    Warning(String),
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Note(m) => write!(f, "note: {m}"),
            Notice::Warning(m) => write!(f, "warning: {m}"),
        }
    }
}

/// Where a transfer stands, for a progress display the caller draws.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferProgress {
    /// Bytes the transfer will have when done (resumed bytes included); while `total_known`
    /// is false, only of the files found so far.
    pub planned_bytes: u64,
    /// False while a directory index is still being walked: more files may come, the total
    /// is not known yet.
    pub total_known: bool,
    /// Bytes on disk so far (resumed bytes included).
    pub done_bytes: u64,
    /// The tuner, its state and its open channels, once a tuning interval has passed.
    pub status: Option<String>,
    /// The last update: the transfer's loop has ended.
    pub finished: bool,
}

/// Everything `wattio transfer` needs: each stage's part, built in one place.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// What finds the files.
    pub discovery: DiscoveryOptions,
    /// What fetches and places them.
    pub data: DataOptions,
    /// What the control loop tunes with and reports to.
    pub tuning: TuningOptions,
    /// Where notes and warnings go, from every stage (dropped by default).
    pub notices: Sink<Notice>,
}

/// What discovery needs: where the files are and what vouches for them.
#[derive(Debug, Clone)]
pub struct DiscoveryOptions {
    /// A URL: a wattio listing, a directory (its listing, else its index), or one file. Unused
    /// with `input_file`.
    pub source: String,
    /// A URL list in aria2's input-file format (`-` for standard input), instead of `source`.
    pub input_file: Option<PathBuf>,
    /// Publisher checksums (`SHA256SUMS`, `MD5SUMS`, …): a URL or a local path.
    pub checksum_file: Option<String>,
}

/// What the data stage needs: where files go, how they are kept, how servers are reached.
#[derive(Debug, Clone)]
pub struct DataOptions {
    pub dest: PathBuf,
    /// Sync data to disk before recording it as fetched, and before and after renaming a file
    /// into place (`--fsync on`, the default), so that a power cut never leaves a record or a
    /// name pointing at data the disk does not hold. Off: a crash of the process is still
    /// safe, a power cut may lose data that was recorded.
    pub fsync: bool,
    /// Consecutive failed attempts a channel tolerates before the transfer fails.
    pub retries: u32,
    /// Certificate checks for `https` sources.
    pub tls: ClientTlsOptions,
}

/// What the control loop needs: the SLA and its tuner, the network as given, the CPU
/// actuator, the meter, the interval log and progress.
#[derive(Debug, Clone)]
pub struct TuningOptions {
    pub sla: Sla,
    pub tuner: TunerChoice,
    pub rtt: Option<Duration>,
    pub bandwidth_bps: Option<f64>,
    pub window_bytes: Option<u64>,
    pub max_ch: usize,
    pub interval: Duration,
    pub core_backend: CoreBackend,
    pub cpufreq: bool,
    /// Run Algorithm 3 (CPU scaling); off for the baselines by default.
    pub cpu_scaling: bool,
    /// Where progress updates go, several a second while bytes arrive (none by default: the
    /// library draws nothing).
    pub progress: Sink<TransferProgress>,
    /// Use the energy meter (feedback for ME, figures in the summary).
    pub meter: bool,
    /// What feeds ME's energy comparisons.
    pub energy_feedback: EnergyFeedback,
    /// Append one JSON line per interval to this file.
    pub log: Option<PathBuf>,
    /// System root for sysfs/proc reads (`WATTIO_ROOT`).
    pub root: SysRoot,
}

impl TransferOptions {
    /// Defaults for `source` → `dest` under `sla`.
    pub fn new(source: impl Into<String>, dest: impl Into<PathBuf>, sla: Sla) -> Self {
        TransferOptions {
            discovery: DiscoveryOptions {
                source: source.into(),
                input_file: None,
                checksum_file: None,
            },
            data: DataOptions {
                dest: dest.into(),
                fsync: true,
                retries: DEFAULT_RETRIES,
                tls: ClientTlsOptions::default(),
            },
            tuning: TuningOptions {
                sla,
                tuner: TunerChoice::Wattio,
                rtt: None,
                bandwidth_bps: None,
                window_bytes: None,
                max_ch: DEFAULT_MAX_CHANNELS,
                interval: DEFAULT_INTERVAL,
                core_backend: CoreBackend::default(),
                cpufreq: true,
                cpu_scaling: true,
                progress: Sink::none(),
                meter: true,
                energy_feedback: EnergyFeedback::default(),
                log: None,
                root: SysRoot::from_env(),
            },
            notices: Sink::none(),
        }
    }
}

/// Source of the per-interval energy the tuners see (`wattio transfer --energy-feedback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum EnergyFeedback {
    /// The meter when it measures (RAPL, perf); the process estimate when the meter itself is
    /// only a model — a system-wide model on a shared machine mostly measures the neighbours.
    #[default]
    Auto,
    /// The meter (whole machine).
    Meter,
    /// The estimated energy of a host running only this process: the model with this process's
    /// CPU time as the host's busy time, idle power of the CPUs it may use plus its CPU time at
    /// busy power (`ModelParams::energy_j(cpus, dt, cpu_s)`). Estimated; a dedicated-host
    /// figure, not this process's share of the machine.
    Process,
}

fn read_proc_max(root: &SysRoot, p: &str) -> Option<u64> {
    std::fs::read_to_string(root.path(p))
        .ok()?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The default per-stream window: half of tcp_rmem's maximum (tcp_adv_win_scale = 1), at most
/// tcp_wmem's maximum (assuming the peer's send buffer is configured like ours); 4 MiB when
/// /proc cannot be read.
pub fn default_window(root: &SysRoot) -> u64 {
    let r = read_proc_max(root, "/proc/sys/net/ipv4/tcp_rmem").map(|x| x / 2);
    let w = read_proc_max(root, "/proc/sys/net/ipv4/tcp_wmem");
    match (r, w) {
        (Some(r), Some(w)) => r.min(w).max(64 * 1024),
        (Some(x), None) | (None, Some(x)) => x.max(64 * 1024),
        (None, None) => 4 << 20,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_from_proc_fixture() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("proc/sys/net/ipv4");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("tcp_rmem"), "4096 131072 33554432\n").unwrap();
        std::fs::write(p.join("tcp_wmem"), "4096 16384 4194304\n").unwrap();
        assert_eq!(default_window(&SysRoot::new(d.path())), 4194304);
        assert_eq!(default_window(&SysRoot::new("/nonexistent")), 4 << 20);
    }
}
