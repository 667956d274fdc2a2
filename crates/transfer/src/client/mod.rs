//! `wattio transfer`: the client engine.
//!
//! A *channel* is one TCP connection that keeps up to `pipelining` Range requests in flight
//! (written back to back, answered in order). Each partition of Algorithm 1 has a queue of
//! chunks and a channel budget set by the tuner every interval; channels of a partition pull
//! chunks from its queue, so concurrency (files in flight) and parallelism (chunks of one file
//! in flight) follow from the channel count and the chunk size. Data is written with
//! positioned writes into `NAME.wattio-part`; every finished byte range is appended to
//! `NAME.wattio-part.done`, so an interrupted run resumes where it stopped; a file is
//! verified (size, XXH3-64 when the listing has it, the publisher's digest when one is given)
//! and only then renamed to `NAME`.
//!
//! The client is three stages over a common layer, in the order the data flows:
//!
//! - `discovery`: what finds the files. Its one entry, `discovery::discover`, turns the source
//!   (a wattio listing, a directory index walked by `walk`, a URL list sized by `url_list`, or
//!   one file: `source`) and the checksum file (`published`) into the files found so far and a
//!   channel of further batches (`found`: `SourceFile`, `Source`, `Batch`).
//! - `data`: what fetches and places them. `intake` takes each batch in against DEST and what
//!   earlier runs left (`resume`, `done_log`, `dest`); `jobs`, `files` and `queue` hold the
//!   files and their chunks; `channel` (with `mirrors` and `pace`) and `stream` fetch them;
//!   `verify` checks them and `placing` renames them into place; `state` is what the channels
//!   and the loop share.
//! - `control`: the control loop that runs the stages and tunes the data stage every interval
//!   (`energy`: the meter and the CPU feedback).
//! - `net`, below all three: URLs, connections, responses, the requests that find files and
//!   sizes, validators.
//!
//! Discovery imports nothing of `data` or `control`, and `data` nothing of `control`. The
//! options are [`options`]; the `--json` summary's types are [`crate::summary`]. Tuner
//! construction and timeouts are [`wattio_tuner::StartRules`] and [`wattio_tuner::Timeouts`].

mod control;
mod data;
mod discovery;
mod net;
mod options;

pub use options::{
    default_window, DataOptions, DiscoveryOptions, EnergyFeedback, Notice, TransferOptions,
    TransferProgress, TuningOptions, DEFAULT_INTERVAL, DEFAULT_MAX_CHANNELS, DEFAULT_RETRIES,
};

use crate::actuator::CpuActuator;
use crate::error::TransferError;
use crate::summary::TransferSummary;
use control::transfer_async;
use std::time::Duration;
use wattio_progress::Cancel;

/// Runs a transfer to completion on its own tokio runtime. Once `cancel` is set (the binary
/// sets it on SIGINT/SIGTERM), the transfer ends through its normal error path at the next
/// tuning interval: the actuator puts frequencies, governors and CPUs back and partial data is
/// kept for a resume, and the error is [`TransferError::Cancelled`] (unless another error
/// stopped it first).
pub fn run_transfer(
    opts: &TransferOptions,
    cancel: &Cancel,
) -> Result<TransferSummary, TransferError> {
    let mut actuator = CpuActuator::probe(
        opts.tuning.root.clone(),
        opts.tuning.core_backend,
        opts.tuning.cpufreq,
    );
    let workers = actuator.n_cores();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| TransferError::Io {
            message: format!("cannot start the async runtime: {e}"),
        })?;
    let r = rt
        .block_on(transfer_async(opts, cancel, &mut actuator))
        .map_err(|e| TransferError::from_engine(&e));
    let errs = actuator.restore();
    rt.shutdown_timeout(Duration::from_millis(200));
    for e in errs {
        opts.notices.tell(&Notice::Warning(e.to_string()));
    }
    r
}

/// The client's parsers of peer bytes, for the fuzz harness (`crate::fuzz`).
#[cfg(test)]
pub(crate) mod fuzz_targets {
    use super::net::fetch::ChunkedDecoder;
    use super::net::validator::Validator;
    use proptest::prelude::*;
    use wattio_http::ResponseHead;

    /// Reads a response's validators.
    pub(crate) fn validators(h: &ResponseHead) {
        if let Some(v) = Validator::from_head(h, "http://h:80") {
            assert_eq!(Validator::decode(&v.encode()), Some(v));
        }
    }

    /// Feeds `data` to the chunked decoder in pieces of the sizes `cuts` cycles through: it
    /// uses no more than it is given, stops early only at the end of the body, and never
    /// makes more body than input.
    pub(crate) fn chunked(data: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        let (mut at, mut k) = (0, 0);
        while at < data.len() && !d.done() {
            let n = cuts[k % cuts.len()].min(data.len() - at);
            match d.feed(&data[at..at + n], &mut out) {
                Ok(used) => {
                    prop_assert!(used <= n);
                    prop_assert!(used == n || d.done(), "stopped before the end");
                    at += used;
                }
                Err(_) => return Ok(()),
            }
            k += 1;
        }
        prop_assert!(out.len() <= data.len());
        Ok(())
    }

    /// Reads bytes as a `.done` log and as stored validators.
    pub(crate) fn stored_state(data: &[u8]) {
        let (_, ranges) = super::data::done_log::parse_log(data);
        assert!(ranges.len() <= data.len() / 16);
        let _ = Validator::decode(data);
    }
}
