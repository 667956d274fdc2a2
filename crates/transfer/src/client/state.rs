//! The state the control loop and the channels share: the files, their part files and `.done`
//! logs, the partitions' chunk queues and budgets, and the counters.

use super::conn::{Connector, Stream};
use super::jobs::Jobs;
use super::mirrors::FileSource;
use super::source::{BlockDigests, Expected, SourceKind};
use super::url::HttpUrl;
use crate::checksum::InOrderHasher;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One file to fetch.
pub(super) struct FileJob {
    pub(super) rel: String,
    /// Its URL (or URLs, with mirrors) and the one serving it now: `origin()`, `url_path()`.
    pub(super) source: FileSource,
    /// Its server ignores `Range`: fetched as one whole-file stream, never resumed midway.
    pub(super) whole: bool,
    pub(super) size: u64,
    pub(super) xxh3: Option<String>,
    /// The listing's per-block checksums, verified instead of `xxh3` when present.
    pub(super) blocks: Option<BlockDigests>,
    /// Block digests computed from the bytes as they arrived (None: not seen whole in one
    /// stream, hashed from the file when it is finished).
    pub(super) block_sums: Mutex<Vec<Option<u64>>>,
    /// The publisher's digest (checksum file, URL list), and its state over the bytes so far.
    pub(super) expect: Option<Expected>,
    pub(super) in_order: Mutex<Option<InOrderHasher>>,
    pub(super) final_path: PathBuf,
    pub(super) part_path: PathBuf,
    pub(super) done_path: PathBuf,
    /// Opened on first use and closed when the file is finished, so a dataset of many small
    /// files never holds more descriptors than files in flight.
    pub(super) file: Mutex<Option<Arc<File>>>,
    pub(super) done_log: Mutex<Option<File>>,
    /// No usable earlier progress: truncate the part file when first opening it.
    pub(super) fresh: AtomicBool,
    pub(super) remaining: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    pub(super) checksum_retry: AtomicBool,
}

impl FileJob {
    /// The part file, opened (created and sized) on first use.
    pub(super) fn part(&self) -> std::io::Result<Arc<File>> {
        let mut g = self.file.lock().unwrap();
        if let Some(f) = g.as_ref() {
            return Ok(f.clone());
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.part_path)?;
        if self.fresh.swap(false, Ordering::SeqCst) {
            f.set_len(0)?;
        }
        f.set_len(self.size)?;
        let f = Arc::new(f);
        *g = Some(f.clone());
        Ok(f)
    }

    /// Appends a finished range to the `.done` log.
    pub(super) fn log_done(&self, offset: u64, len: u64) {
        let mut g = self.done_log.lock().unwrap();
        if g.is_none() {
            *g = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.done_path)
                .ok();
        }
        if let Some(f) = g.as_mut() {
            let mut rec = [0u8; 16];
            rec[..8].copy_from_slice(&offset.to_le_bytes());
            rec[8..].copy_from_slice(&len.to_le_bytes());
            let _ = f.write_all(&rec);
        }
    }

    pub(super) fn store_block_sum(&self, index: u64, digest: u64) {
        if let Some(slot) = self.block_sums.lock().unwrap().get_mut(index as usize) {
            *slot = Some(digest);
        }
    }

    pub(super) fn close(&self) {
        *self.file.lock().unwrap() = None;
        *self.done_log.lock().unwrap() = None;
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Chunk {
    pub(super) file: usize,
    pub(super) offset: u64,
    pub(super) len: u64,
}

pub(super) struct PartQueue {
    pub(super) chunks: Mutex<VecDeque<Chunk>>,
    pub(super) target: AtomicUsize,
    pub(super) live: AtomicUsize,
    pub(super) pipelining: usize,
    pub(super) remaining: AtomicU64,
}

/// A connection left in [`Shared::spare`] longer than this is not used (the server may have
/// closed it) and is closed at the next timeout.
pub(super) const SPARE_MAX_AGE: Duration = Duration::from_secs(2);

pub(super) struct Shared {
    /// Connections to the first server that no channel holds, taken by the next channel that
    /// starts: those opened ahead (see `spawn_preconnect`), and while files are still being
    /// found, those of channels that ran out of chunks (see `discovering`); each with when it
    /// was left (see [`SPARE_MAX_AGE`]).
    pub(super) spare: Mutex<Vec<(Instant, Stream)>>,
    /// Discovery may still add files: a channel that runs out of chunks leaves its connection
    /// in `spare` for the channel the next batch starts (no new handshake, and the
    /// connection's congestion window kept).
    pub(super) discovering: AtomicBool,
    pub(super) connector: Arc<Connector>,
    pub(super) url: HttpUrl,
    /// The servers the files are on (`url`'s first); a channel's connection serves one.
    /// Grows while a URL list is still sized (a redirect to another server).
    pub(super) origins: Mutex<Vec<HttpUrl>>,
    /// How the files were found (it decides what a changed file's error advises).
    pub(super) kind: SourceKind,
    /// Grows while a directory index is walked or a URL list sized (see `Jobs`).
    pub(super) files: Jobs,
    pub(super) parts: Vec<PartQueue>,
    pub(super) received: AtomicU64,
    pub(super) files_done: AtomicUsize,
    pub(super) verified: AtomicUsize,
    pub(super) reconnects: AtomicU64,
    /// bits/s; 0 = no cap
    pub(super) rate_cap: AtomicU64,
    pub(super) cap_epoch: Mutex<(Instant, u64)>,
    /// Times the pacer held a read back since the last timeout.
    pub(super) cap_waits: AtomicU64,
    pub(super) fatal: Mutex<Option<String>>,
    /// The fatal error says itself what to do next (nothing is appended to it).
    pub(super) fatal_advised: AtomicBool,
    pub(super) retries: u32,
    pub(super) started: Instant,
}

impl Shared {
    /// Origin `o` (an index a file names).
    pub(super) fn origin(&self, o: usize) -> HttpUrl {
        self.origins.lock().unwrap()[o].clone()
    }

    /// Ends the transfer; rerunning the same command resumes it (interruptions, a server
    /// that stopped answering).
    pub(super) fn fail(&self, msg: String) {
        let mut f = self.fatal.lock().unwrap();
        if f.is_none() {
            *f = Some(msg);
        }
    }

    /// Ends the transfer with an error that says itself what to do (whether a rerun helps).
    pub(super) fn fail_advised(&self, msg: String) {
        let mut f = self.fatal.lock().unwrap();
        if f.is_none() {
            *f = Some(msg);
            self.fatal_advised.store(true, Ordering::SeqCst);
        }
    }

    /// Ends the transfer because `rel` no longer is what the source said; the message says
    /// what to do, according to the kind of source.
    pub(super) fn fail_changed(&self, rel: &str, what: &str) {
        let (fix, _) = self.kind.changed_file_fix();
        self.fail_advised(format!("{rel}: {what}; {fix}"));
    }
    pub(super) fn failed(&self) -> bool {
        self.fatal.lock().unwrap().is_some()
    }
}
