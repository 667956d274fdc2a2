//! [`TestbedError`]: what the testbed's public functions return.

use std::io;
use std::path::PathBuf;

/// Everything that stops a testbed command or the dataset generator. Each message is one line
/// that names the problem and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error(
        "testbed name {0:?} is invalid: use 1-15 characters a-z, 0-9, '-', starting with a letter"
    )]
    BadName(String),
    #[error("wattio testbed needs root (network namespaces, TUN, tc): run it with sudo")]
    NeedsRoot,
    #[error("testbed {0} is not up: run `wattio testbed up` first")]
    NotUp(String),
    #[error("nothing to run: give the command after --, e.g. wattio testbed exec client -- ping 10.77.0.2")]
    NothingToRun,
    /// A link rate outside what the testbed emulates (`rate` as tc writes it).
    #[error("rate {0} is out of range: use 1mbit … 100gbit (e.g. --rate 1gbit)")]
    RateOutOfRange(String),
    #[error("RTT {rtt_ms} ms is out of range: use 0 … 10 s (e.g. --rtt 36ms)")]
    RttOutOfRange { rtt_ms: u64 },
    #[error("MTU {0} is out of range: use 1280 … 65535")]
    MtuOutOfRange(u32),
    #[error("congestion control {0:?} is not a name such as cubic, bbr or reno")]
    BadCongestionControl(String),
    #[error("queue of {queue_bytes} bytes is smaller than two packets: use at least {min_bytes}")]
    QueueTooSmall { queue_bytes: u64, min_bytes: u64 },
    /// `choices`: the profile names, comma-separated.
    #[error("unknown profile {name:?}: use one of {choices}")]
    UnknownProfile { name: String, choices: String },
    /// `available`: the kernel's `tcp_available_congestion_control`.
    #[error("congestion control {cc:?} is not in this kernel (available: {available}): pick one with --cc")]
    CongestionControlMissing { cc: String, available: String },
    /// A tool the testbed is built with (`ip`, `tc`) could not be started.
    #[error("cannot run {program}: install iproute2 (scripts/install-deps.sh): {err}")]
    NoTool { program: String, err: io::Error },
    /// `ip` or `tc` refused; `stderr` is what it said, on one line.
    #[error("`{command}` failed: {stderr}")]
    CommandFailed { command: String, stderr: String },
    /// The calling thread could not move into a testbed namespace.
    #[error("cannot enter network namespace {path}: {err} (needs root / CAP_SYS_ADMIN)")]
    EnterNamespace { path: PathBuf, err: io::Error },
    /// `log`: the daemon's log, on one line.
    #[error("delay line exited ({status}): {log}")]
    DelayLineExited { status: String, log: String },
    #[error("delay line did not become ready within 10 s")]
    DelayLineSlow,
    /// `up` failed and removed what it had made; `source` says why it failed.
    #[error("testbed {name} could not be built (cleaned up)")]
    NotBuilt {
        name: String,
        #[source]
        source: Box<TestbedError>,
    },
    /// One of the testbed's threads (`what`: "namespace", "check", "client→server") panicked.
    #[error("{0} thread panicked")]
    ThreadPanicked(&'static str),
    /// The receiving end of `testbed check` sent no address within 5 s.
    #[error("the server side of the check did not start")]
    CheckNotStarted,
    #[error("scale {0} is out of range: use a factor in (0, 1], e.g. --scale 0.05")]
    ScaleOutOfRange(f64),
    #[error("unknown dataset {0:?}: use small, medium, large or mixed")]
    UnknownDataset(String),
    /// A dataset manifest line that is not `path<TAB>size` (`line` counts from 1).
    #[error("{path}:{line}: {why}")]
    BadManifest {
        path: PathBuf,
        line: usize,
        why: String,
    },
    /// Another I/O error; `what` says what was being done (`cannot create DIR`).
    // The io::Error is in the message, not a `source`, so chained printing does not repeat it.
    #[error("{what}: {err}")]
    Io { what: String, err: io::Error },
    #[error(transparent)]
    Write(#[from] wattio_files::WriteError),
}

impl TestbedError {
    /// An I/O error while doing `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> TestbedError {
        let what = what.into();
        move |err| TestbedError::Io { what, err }
    }
}
