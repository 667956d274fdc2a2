//! The state the control loop and the channels share: the files, their part files and `.done`
//! logs, the partitions' chunk queues and budgets, and the counters.

use super::conn::{Connector, Stream};
use super::dest::{with_suffix, Dest, DONE_SUFFIX, PART_SUFFIX};
use super::jobs::Jobs;
use super::mirrors::FileSource;
use super::queue::ChunkQueue;
use super::resume::{log_header, record};
use super::source::{BlockDigests, Expected, SourceKind};
use super::url::HttpUrl;
use super::validator::{Compared, Validator};
use crate::checksum::InOrderHasher;
use crate::http::ResponseHead;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One file to fetch.
pub(super) struct FileJob {
    pub(super) rel: String,
    /// The destination every file operation goes through (no link is followed in it).
    pub(super) dest: Arc<Dest>,
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
    /// Opened on first use and closed when the file is finished, so a dataset of many small
    /// files never holds more descriptors than files in flight.
    pub(super) file: Mutex<Option<Arc<File>>>,
    pub(super) done_log: Mutex<Option<File>>,
    /// Ranges that arrived whose data is not synced to disk yet: their records go to the
    /// `.done` log only after it is ([`FileJob::sync_records`]), so that after a power cut no
    /// record claims bytes the disk does not hold.
    pub(super) unsynced: Mutex<Vec<(u64, u64)>>,
    /// No usable earlier progress: truncate the part file when first opening it.
    pub(super) fresh: AtomicBool,
    pub(super) remaining: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    pub(super) checksum_retry: AtomicBool,
    /// The server's validators of the version the part file holds (the log's, or the first
    /// answer's): sent as `If-Range`, compared with every answer.
    pub(super) validator: Mutex<Option<Validator>>,
}

impl FileJob {
    pub(super) fn part_rel(&self) -> String {
        with_suffix(&self.rel, PART_SUFFIX)
    }

    pub(super) fn done_rel(&self) -> String {
        with_suffix(&self.rel, DONE_SUFFIX)
    }

    /// The part file, opened (created and sized) on first use.
    pub(super) fn part(&self) -> std::io::Result<Arc<File>> {
        let mut g = self.file.lock().unwrap();
        if let Some(f) = g.as_ref() {
            return Ok(f.clone());
        }
        let f = self.dest.open_rw(&self.part_rel())?;
        if self.fresh.swap(false, Ordering::SeqCst) {
            f.set_len(0)?;
        }
        f.set_len(self.size)?;
        let f = Arc::new(f);
        *g = Some(f.clone());
        Ok(f)
    }

    /// Notes a finished range: its record waits for the data to be synced (see
    /// [`FileJob::sync_records`]); written at once when syncing is off. Returns true when it
    /// is the first record waiting (the caller then lists the file for the next sync).
    pub(super) fn log_done(&self, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        if !self.dest.syncs() {
            let _ = self.append_records(&[(offset, len)]);
            return false;
        }
        let mut u = self.unsynced.lock().unwrap();
        u.push((offset, len));
        u.len() == 1
    }

    /// Syncs the part file's data, then writes the records of the ranges that were waiting
    /// for it. Nothing to do when none wait or the file is closed (finished: its log is gone).
    pub(super) fn sync_records(&self) -> std::io::Result<()> {
        let recs = std::mem::take(&mut *self.unsynced.lock().unwrap());
        if recs.is_empty() {
            return Ok(());
        }
        let Some(part) = self.file.lock().unwrap().clone() else {
            return Ok(());
        };
        self.dest.sync_data(&part)?;
        self.append_records(&recs)
    }

    /// Appends records to the `.done` log in one write, after its header when the log is new.
    fn append_records(&self, recs: &[(u64, u64)]) -> std::io::Result<()> {
        let mut g = self.done_log.lock().unwrap();
        let mut out = Vec::with_capacity(recs.len() * 16 + 128);
        if g.is_none() {
            let f = self.dest.append(&self.done_rel())?;
            if f.metadata()?.len() == 0 {
                out = log_header(self.validator.lock().unwrap().as_ref());
            }
            *g = Some(f);
        }
        let f = g.as_mut().expect("opened above");
        for &(o, l) in recs {
            out.extend_from_slice(&record(o, l));
        }
        f.write_all(&out)
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

    /// The `If-Range` line of a range request: the validators of the version the part file
    /// holds, so that a server whose file changed answers the whole file instead of mixing
    /// versions (empty when the server gave none).
    pub(super) fn if_range(&self) -> String {
        match self
            .validator
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|v| v.if_range())
        {
            Some(v) => format!("If-Range: {v}\r\n"),
            None => String::new(),
        }
    }

    /// Checks the validators of an answer from `origin` against the part file's version: the
    /// first answer's become the file's; `Err` names both versions when they differ. An answer
    /// without validators says nothing either way.
    pub(super) fn check_validator(&self, head: &ResponseHead, origin: &str) -> Result<(), String> {
        let Some(now) = Validator::from_head(head, origin) else {
            return Ok(());
        };
        let mut g = self.validator.lock().unwrap();
        let verdict = g.as_ref().map(|was| was.compare(Some(&now), origin));
        match verdict {
            Some(Compared::Same) => Ok(()),
            Some(Compared::Changed) => Err(format!(
                "it changed on the server during the copy ({} became {})",
                g.as_ref().map_or_else(String::new, Validator::describe),
                now.describe()
            )),
            None | Some(Compared::OtherServer) => {
                *g = Some(now);
                Ok(())
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Chunk {
    pub(super) file: usize,
    pub(super) offset: u64,
    pub(super) len: u64,
}

pub(super) struct PartQueue {
    pub(super) chunks: Mutex<ChunkQueue>,
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
    /// Files with finished ranges whose records wait for their data to be synced (see
    /// [`FileJob::sync_records`]); the control loop syncs them every interval and at the end.
    pub(super) unsynced: Mutex<Vec<usize>>,
}

impl Shared {
    /// Notes a finished range of file `i` (see [`FileJob::log_done`]).
    pub(super) fn record_done(&self, i: usize, offset: u64, len: u64) {
        if self.files[i].log_done(offset, len) {
            self.unsynced.lock().unwrap().push(i);
        }
    }

    /// Syncs the data of every file with records waiting and writes those records: what a
    /// rerun resumes from. Run off the runtime's threads (it waits for the disk).
    pub(super) fn sync_records(&self) {
        let files = std::mem::take(&mut *self.unsynced.lock().unwrap());
        for i in files {
            let j = &self.files[i];
            if let Err(e) = j.sync_records() {
                self.fail(j.dest.explain(&j.done_rel(), "record the progress of", &e));
            }
        }
    }

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
