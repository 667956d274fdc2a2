//! wattio-transfer: energy-aware bulk data transfer over HTTP/1.1.
//!
//! - [`server`]: `wattio serve`, a static-file server (Range, keep-alive, pipelining, sendfile,
//!   a JSON dataset listing with XXH3-64 checksums, path confinement, connection limits).
//! - [`client`]: `wattio transfer`, a tokio + httparse engine with concurrency, parallelism and
//!   pipelining, BDP-sized chunks, verification, temporary names, resume and retries.
//! - [`tls`]: HTTPS for both (rustls, system trust store, `--cacert`, `--insecure`).
//! - [`tuner`]: Algorithm 1 (partitioning and initial parameters), slow start (Alg. 2),
//!   ME (Alg. 4), EEMT (Alg. 5, reconstructed), EETT (Alg. 6) on the Figure 1 state machine,
//!   the threshold CPU scaler (Alg. 3, reconstructed) and baselines, with a simulated channel.
//! - [`actuator`]: CPU frequency (cpufreq), hotplug and affinity backends under `WATTIO_ROOT`.
//!
//! The specification is Di Tacchio et al., "Energy-Efficient High-Throughput Data Transfers via
//! Dynamic CPU Frequency and Core Scaling"; docs/transfer.md says what is the paper's and what
//! is ours.

pub mod actuator;
#[cfg(feature = "engine")]
pub mod checksum;
#[cfg(feature = "engine")]
pub mod client;
#[cfg(feature = "engine")]
pub mod dirindex;
#[cfg(feature = "engine")]
pub mod http;
#[cfg(feature = "engine")]
pub mod listing;
#[cfg(feature = "engine")]
pub mod server;
pub mod sim;
pub mod summary;
#[cfg(feature = "engine")]
pub mod sums;
#[cfg(feature = "engine")]
pub mod tls;
pub mod tuner;
#[cfg(feature = "engine")]
pub mod urllist;

pub use summary::{
    ChecksumFileReport, EnergySummary, IntervalLog, MirrorFallback, MirrorReport, ProcessEnergy,
    TransferSummary, Verification, HOST_ESTIMATE_SCOPE,
};
