//! wattio-transfer: the `wattio transfer` client, energy-aware bulk data transfer over
//! HTTP/1.1 and HTTPS.
//!
//! - [`run_transfer`] with [`TransferOptions`]: a tokio engine with concurrency,
//!   parallelism and pipelining, BDP-sized chunks, discovery (a listing, a directory index, a
//!   URL list, checksum files, mirrors), verification, temporary names, resume and retries; it
//!   returns the `--json` summary, [`TransferSummary`], and tells [`Notice`]s and
//!   [`TransferProgress`] to the callbacks the options hold, or a [`TransferError`] whose
//!   variant says what stopped it (the options, the source, a server, verification, DEST, a
//!   cancel).
//! - The destination disks' energy over the run ([`DestDisks`], [`DestDiskEnergy`]): each
//!   disk under DEST with its interval (`wattio-devices`) over the run and per GB received.
//! - The CPU actuator that applies the tuners' core and frequency choices, and its reports:
//!   [`CoreBackend`], [`ApplyReport`], [`KnobOutcome`].
//!
//! Its parts live in their own crates: the server, the protocol parsers, TLS, the listing and
//! the checksums in `wattio-http`; the tuners of the paper (Algorithm 1, slow start, ME, EEMT,
//! EETT, the CPU scaler) and the simulated channel in `wattio-tuner`. The tuner types a caller
//! of the engine needs ([`Sla`], [`TunerChoice`], [`FixedParams`], and [`TransferPlan`] and
//! [`NetParams`] in the summary) are re-exported here.
//!
//! `wattio report` reads a summary without this crate, as `wattio_results::ReportedTransfer`.
//!
//! The specification is Di Tacchio et al., "Energy-Efficient High-Throughput Data Transfers via
//! Dynamic CPU Frequency and Core Scaling"; docs/transfer.md says what is the paper's and what
//! is ours.

mod actuator;
mod client;
mod dest_disks;
mod dirindex;
mod error;
#[cfg(test)]
mod fuzz;
mod summary;
mod sums;
mod urllist;

pub use actuator::{ApplyReport, CoreBackend, KnobOutcome};
pub use dest_disks::{DestDiskEnergy, DestDisks};
pub use summary::{
    failed_lines_message, json_terminal_safe, terminal_safe, ChecksumFileReport, EnergySummary,
    FailedLine, IntervalLog, MirrorFallback, MirrorReport, ProcessEnergy, TransferSummary,
    Verification, HOST_ESTIMATE_SCOPE, UNVERIFIED_LISTED,
};
// The tuner types the options and the summary hold, so that a caller of the engine needs no
// second import for them.
pub use wattio_tuner::{FixedParams, NetParams, Sla, TransferPlan, TunerChoice, TunerKind};

pub use client::{
    default_window, run_transfer, DataOptions, DiscoveryOptions, EnergyFeedback, Notice,
    TransferOptions, TransferProgress, TuningOptions, DEFAULT_INTERVAL, DEFAULT_MAX_CHANNELS,
    DEFAULT_RETRIES,
};
pub use error::TransferError;
// The options hold the client's TLS settings.
pub use wattio_http::ClientTlsOptions;
