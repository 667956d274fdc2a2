//! wattio-transfer: energy-aware bulk data transfer over HTTP/1.1.
//!
//! The API is re-exported here:
//! - `wattio serve`: [`Server`] / [`ServerHandle`] with a [`ServerConfig`], a static-file server
//!   (Range, keep-alive, pipelining, sendfile, a JSON dataset listing with XXH3-64 checksums
//!   written by [`write_listing`] and read by [`Listing`], path confinement, connection limits).
//! - `wattio transfer`: [`run_transfer`] with [`TransferOptions`], a tokio + httparse engine
//!   with concurrency, parallelism and pipelining, BDP-sized chunks, verification, temporary
//!   names, resume and retries; it returns the `--json` summary, [`TransferSummary`], and tells
//!   [`Notice`]s and [`TransferProgress`] to the callbacks the options hold.
//! - HTTPS for both (rustls, system trust store, `--cacert`, `--insecure`): [`ClientTlsOptions`],
//!   [`tls_server_config`].
//! - The CPU actuator's choices and reports: [`CoreBackend`], [`ApplyReport`], [`KnobOutcome`].
//!
//! Two namespaces stay public, because their names are the paper's and read as such under them
//! (`tuner::State`, `tuner::Controller`, `sim::run`): [`tuner`], Algorithm 1 (partitioning and
//! initial parameters), slow start (Alg. 2), ME (Alg. 4), EEMT (Alg. 5, reconstructed), EETT
//! (Alg. 6) on the Figure 1 state machine, the threshold CPU scaler (Alg. 3, reconstructed) and
//! baselines; and [`sim`], the simulated channel they are tested on. The tuner types a caller
//! of the engine needs ([`Sla`], [`TunerChoice`], [`FixedParams`], and [`TransferPlan`] and
//! [`NetParams`] in the summary) are also here.
//!
//! Without the default `engine` feature the crate is the tuners, the simulated channel, the
//! actuator's report types and the summary's types, without tokio, rustls or the hash crates:
//! what a reader of summaries (`wattio report`) needs.
//!
//! The specification is Di Tacchio et al., "Energy-Efficient High-Throughput Data Transfers via
//! Dynamic CPU Frequency and Core Scaling"; docs/transfer.md says what is the paper's and what
//! is ours.

// Without the engine nothing applies CPU settings: only the actuator's report types are used.
#[cfg_attr(not(feature = "engine"), allow(dead_code))]
mod actuator;
#[cfg(feature = "engine")]
mod checksum;
#[cfg(feature = "engine")]
mod civil;
#[cfg(feature = "engine")]
mod client;
#[cfg(feature = "engine")]
mod dirindex;
#[cfg(all(test, feature = "engine"))]
mod fuzz;
#[cfg(feature = "engine")]
mod http;
#[cfg(feature = "engine")]
mod jail;
#[cfg(feature = "engine")]
mod listing;
#[cfg(feature = "engine")]
mod server;
pub mod sim;
mod summary;
#[cfg(feature = "engine")]
mod sums;
#[cfg(feature = "engine")]
mod tls;
pub mod tuner;
#[cfg(feature = "engine")]
mod urllist;

pub use actuator::{ApplyReport, CoreBackend, KnobOutcome};
pub use summary::{
    failed_lines_message, json_terminal_safe, terminal_safe, ChecksumFileReport, EnergySummary,
    FailedLine, IntervalLog, MirrorFallback, MirrorReport, ProcessEnergy, TransferSummary,
    Verification, HOST_ESTIMATE_SCOPE, UNVERIFIED_LISTED,
};
pub use tuner::{FixedParams, NetParams, Sla, TransferPlan, TunerChoice};

#[cfg(feature = "engine")]
pub use client::{
    default_window, run_transfer, EnergyFeedback, Notice, TransferOptions, TransferProgress,
    DEFAULT_INTERVAL, DEFAULT_MAX_CHANNELS, DEFAULT_RETRIES,
};
#[cfg(feature = "engine")]
pub use listing::{write_listing, ListedBlocks, ListedFile, Listing, LISTING_PATH};
#[cfg(feature = "engine")]
pub use server::{Server, ServerConfig, ServerHandle};
#[cfg(feature = "engine")]
pub use tls::{tls_server_config, ClientTlsOptions};
