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
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use wattio_http::checksum::InOrderHasher;
use wattio_http::ResponseHead;

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
    /// The version of the file being fetched: it grows when the file starts over (see
    /// [`Shared::restart_file`]). Chunks carry the version they were cut for; bytes are written
    /// and counted only under this lock's read side and only for the current version, so a
    /// restart (the write side) never interleaves with a write of the old version.
    pub(super) version: RwLock<u32>,
    /// Times the file started over in this run.
    pub(super) restarts: AtomicU32,
    /// Verified and being renamed into place: no record may be written any more (set under
    /// the `done_log` lock, which record writes hold).
    pub(super) finished: AtomicBool,
}

impl FileJob {
    /// The file's current version (see [`FileJob::version`]).
    pub(super) fn generation(&self) -> u32 {
        *self.version.read().unwrap()
    }

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

    /// Appends records to the `.done` log in one write, after its header when the log is new;
    /// nothing once the file is finished (its log is gone for good).
    fn append_records(&self, recs: &[(u64, u64)]) -> std::io::Result<()> {
        let mut g = self.done_log.lock().unwrap();
        if self.finished.load(Ordering::SeqCst) {
            return Ok(());
        }
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

    /// Forgets the ranges recorded so far (the file is fetched again): the `.done` log is
    /// closed and deleted and records waiting for a sync are dropped.
    pub(super) fn forget_progress(&self) {
        let mut log = self.done_log.lock().unwrap();
        *log = None;
        let _ = self.dest.remove(&self.done_rel());
        self.unsynced.lock().unwrap().clear();
    }

    /// Marks the file finished and closes it: a record sync racing with the rename cannot
    /// create its `.done` log again.
    pub(super) fn close_finished(&self) {
        let mut log = self.done_log.lock().unwrap();
        self.finished.store(true, Ordering::SeqCst);
        *log = None;
        drop(log);
        *self.file.lock().unwrap() = None;
        self.unsynced.lock().unwrap().clear();
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
            Some(Compared::Same | Compared::Unknown) => Ok(()),
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
    /// The file's version it was cut for (see [`FileJob::version`]).
    pub(super) version: u32,
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
    /// Files that started over in this run because the server's copy changed under them.
    pub(super) restarted: Mutex<Vec<String>>,
    /// The piece a file that starts over is cut into (the plan's BDP, at least `MIN_CHUNK`).
    pub(super) restart_piece: u64,
}

/// Times one file may start over in one run before the transfer gives up on it: a server
/// whose validators change from one answer to the next is not serving one file.
const MAX_RESTARTS: u32 = 2;

impl Shared {
    /// Counts `len` bytes from the start of chunk `c` as fetched (in partition `pi`'s count
    /// whatever their version; in the file's, and recorded for a resume, only when `c` is of
    /// the file's current version). Returns whether the file is now complete.
    pub(super) fn count_fetched(&self, pi: usize, c: &Chunk, len: u64) -> bool {
        self.parts[pi].remaining.fetch_sub(len, Ordering::SeqCst);
        let j = &self.files[c.file];
        let v = j.version.read().unwrap();
        if *v != c.version || len == 0 {
            return false;
        }
        self.record_done(c.file, c.offset, len);
        j.remaining.fetch_sub(len, Ordering::SeqCst) == len
    }

    /// File `i` changed on the server during the copy (`why`; its validators are now `now`):
    /// its bytes so far are dropped — no record of them is kept, every chunk cut for the old
    /// version is discarded when met — and the whole file is queued again. False, with the
    /// transfer failed, when it already started over [`MAX_RESTARTS`] times in this run.
    pub(super) fn restart_file(&self, i: usize, now: Option<Validator>, why: &str) -> bool {
        let j = &self.files[i];
        if j.restarts.fetch_add(1, Ordering::SeqCst) >= MAX_RESTARTS {
            self.fail_advised(format!(
                "{}: {why}, again after starting over {MAX_RESTARTS} times: the server's validators keep changing from one answer to the next (replicas that are not identical behind one name?); fetch it from one replica's address, or give a checksum file",
                j.rel
            ));
            return false;
        }
        {
            let mut v = j.version.write().unwrap();
            *v += 1;
            j.forget_progress();
            *j.validator.lock().unwrap() = now;
            j.block_sums
                .lock()
                .unwrap()
                .iter_mut()
                .for_each(|s| *s = None);
            j.restart_published();
            j.remaining.store(j.size, Ordering::SeqCst);
        }
        self.restarted.lock().unwrap().push(j.rel.clone());
        // any partition can carry it: prefer one that still has channels
        let pi = self
            .parts
            .iter()
            .position(|p| p.target.load(Ordering::SeqCst) > 0)
            .unwrap_or(0);
        let p = &self.parts[pi];
        p.remaining.fetch_add(j.size, Ordering::SeqCst);
        p.target.fetch_max(1, Ordering::SeqCst);
        p.chunks
            .lock()
            .unwrap()
            .push_range(i, 0, j.size, self.restart_piece, j.generation());
        true
    }

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
