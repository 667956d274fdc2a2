//! The state the control loop and the channels share: the files, their part files and `.done`
//! logs, the partitions' chunk queues and budgets, and the counters.

use super::dest::Dest;
use super::files::FileJob;
use super::jobs::Jobs;
use super::queue::{Chunk, PartQueue};
use crate::client::discovery::found::SourceKind;
use crate::client::net::conn::{Connector, Stream};
use crate::client::net::url::HttpUrl;
use crate::client::net::validator::Validator;
use crate::error::{Failure, Kind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A connection left in [`Shared::spare`] longer than this is not used (the server may have
/// closed it) and is closed at the next timeout.
pub(crate) const SPARE_MAX_AGE: Duration = Duration::from_secs(2);

pub(crate) struct Shared {
    /// Connections to the first server that no channel holds, taken by the next channel that
    /// starts: those opened ahead (see `spawn_preconnect`), and while files are still being
    /// found, those of channels that ran out of chunks (see `discovering`); each with when it
    /// was left (see [`SPARE_MAX_AGE`]).
    pub(crate) spare: Mutex<Vec<(Instant, Stream)>>,
    /// Discovery may still add files: a channel that runs out of chunks leaves its connection
    /// in `spare` for the channel the next batch starts (no new handshake, and the
    /// connection's congestion window kept).
    pub(crate) discovering: AtomicBool,
    pub(crate) connector: Arc<Connector>,
    pub(crate) url: HttpUrl,
    /// The servers the files are on (`url`'s first); a channel's connection serves one.
    /// Grows while a URL list is still sized (a redirect to another server).
    pub(crate) origins: Mutex<Vec<HttpUrl>>,
    /// How the files were found (it decides what a changed file's error advises).
    pub(crate) kind: SourceKind,
    /// Grows while a directory index is walked or a URL list sized (see `Jobs`).
    pub(crate) files: Jobs,
    /// The destination every file operation goes through (no link is followed in it).
    pub(crate) dest: Arc<Dest>,
    pub(crate) parts: Vec<PartQueue>,
    pub(crate) received: AtomicU64,
    pub(crate) files_done: AtomicUsize,
    pub(crate) verified: AtomicUsize,
    /// Requests sent and not yet answered, and the files they are of (see
    /// [`Shared::chunk_sent`]): counted as they change, since the interval log would otherwise
    /// walk every listed file each interval (a million at a time).
    pub(crate) chunks_in_flight: AtomicUsize,
    pub(crate) files_in_flight: AtomicUsize,
    pub(crate) reconnects: AtomicU64,
    /// bits/s; 0 = no cap
    pub(crate) rate_cap: AtomicU64,
    pub(crate) cap_epoch: Mutex<(Instant, u64)>,
    /// Times the pacer held a read back since the last timeout.
    pub(crate) cap_waits: AtomicU64,
    pub(crate) fatal: Mutex<Option<Failure>>,
    /// The fatal error says itself what to do next (nothing is appended to it).
    pub(crate) fatal_advised: AtomicBool,
    pub(crate) retries: u32,
    pub(crate) started: Instant,
    /// Files with finished ranges whose records wait for their data to be synced (see
    /// [`FileJob::sync_records`]); the control loop syncs them every interval and at the end.
    pub(crate) unsynced: Mutex<Vec<usize>>,
    /// Verified files waiting to be put into place (see `placing`).
    pub(crate) placing: Placing,
    /// Files that started over in this run because the server's copy changed under them.
    pub(crate) restarted: Mutex<Vec<String>>,
    /// The piece a file that starts over is cut into (the plan's BDP, at least `MIN_CHUNK`).
    pub(crate) restart_piece: u64,
}

/// Times one file may start over in one run before the transfer gives up on it: a server
/// whose validators change from one answer to the next is not serving one file.
const MAX_RESTARTS: u32 = 2;

impl Shared {
    /// A request for a chunk of file `file` was sent.
    pub(crate) fn chunk_sent(&self, file: usize) {
        if self.files[file].in_flight.fetch_add(1, Ordering::Relaxed) == 0 {
            self.files_in_flight.fetch_add(1, Ordering::Relaxed);
        }
        self.chunks_in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A request for a chunk of file `file` was answered, or given up and queued again.
    pub(crate) fn chunk_ended(&self, file: usize) {
        if self.files[file].in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.files_in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        self.chunks_in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts `len` bytes from the start of chunk `c` as fetched (in partition `pi`'s count
    /// whatever their version; in the file's, and recorded for a resume, only when `c` is of
    /// the file's current version). Returns whether the file is now complete.
    pub(crate) fn count_fetched(&self, pi: usize, c: &Chunk, len: u64) -> bool {
        self.parts[pi].remaining.fetch_sub(len, Ordering::SeqCst);
        let j = &self.files[c.file];
        // none: finished meanwhile, so `c` is of an older version
        let Some(a) = j.active_if() else {
            return false;
        };
        let v = a.version.read().unwrap();
        if *v != c.version || len == 0 {
            return false;
        }
        if FileJob::log_done(&a, c.offset, len) {
            self.unsynced.lock().unwrap().push(c.file);
        }
        j.remaining.fetch_sub(len, Ordering::SeqCst) == len
    }

    /// File `i` changed on the server during the copy (`why`; its validators are now `now`):
    /// its bytes so far are dropped — no record of them is kept, every chunk cut for the old
    /// version is discarded when met — and the whole file is queued again. False, with the
    /// transfer failed, when it already started over [`MAX_RESTARTS`] times in this run.
    pub(crate) fn restart_file(&self, i: usize, now: Option<Validator>, why: &str) -> bool {
        let j = &self.files[i];
        // none: finished meanwhile (the answer was to a chunk of an older version)
        let Some(a) = j.active_if() else {
            return true;
        };
        if a.restarts.fetch_add(1, Ordering::SeqCst) >= MAX_RESTARTS {
            self.fail_advised(Kind::SourceChanged { file: j.rel().into() }.msg(format!(
                "{}: {why}, again after starting over {MAX_RESTARTS} times: the server's validators keep changing from one answer to the next (replicas that are not identical behind one name?); fetch it from one replica's address, or give a checksum file",
                j.rel()
            )));
            return false;
        }
        {
            let mut v = a.version.write().unwrap();
            *v += 1;
            j.forget_progress(&a, &self.dest);
            *a.validator.lock().unwrap() = now;
            a.block_sums
                .lock()
                .unwrap()
                .iter_mut()
                .for_each(|s| *s = None);
            j.restart_published(&a);
            j.remaining.store(j.size, Ordering::SeqCst);
        }
        self.restarted.lock().unwrap().push(j.rel().into());
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

    /// Syncs the data of every file with records waiting and writes those records: what a
    /// rerun resumes from. Run off the runtime's threads (it waits for the disk).
    pub(crate) fn sync_records(&self) {
        let files = std::mem::take(&mut *self.unsynced.lock().unwrap());
        for i in files {
            let j = &self.files[i];
            if let Err(e) = j.sync_records(&self.dest) {
                self.fail(
                    self.dest
                        .failed(&j.done_rel(), "record the progress of", &e),
                );
            }
        }
    }

    /// Origin `o` (an index a file names).
    pub(crate) fn origin(&self, o: usize) -> HttpUrl {
        self.origins.lock().unwrap()[o].clone()
    }

    /// Ends the transfer; rerunning the same command resumes it (interruptions, a server
    /// that stopped answering).
    pub(crate) fn fail(&self, msg: Failure) {
        let mut f = self.fatal.lock().unwrap();
        if f.is_none() {
            *f = Some(msg);
        }
    }

    /// Ends the transfer with an error that says itself what to do (whether a rerun helps).
    pub(crate) fn fail_advised(&self, msg: Failure) {
        let mut f = self.fatal.lock().unwrap();
        if f.is_none() {
            *f = Some(msg);
            self.fatal_advised.store(true, Ordering::SeqCst);
        }
    }

    /// Ends the transfer because `rel` no longer is what the source said; the message says
    /// what to do, according to the kind of source.
    pub(crate) fn fail_changed(&self, rel: &str, what: &str) {
        self.fail_not_as_listed(Kind::SourceChanged { file: rel.into() }, rel, what);
    }

    /// Ends the transfer because `rel` does not match its checksum even after fetching it
    /// again (`what`); the message says what to do, as for [`Shared::fail_changed`].
    pub(crate) fn fail_mismatch(&self, rel: &str, what: &str) {
        self.fail_not_as_listed(Kind::ChecksumMismatch { file: rel.into() }, rel, what);
    }

    fn fail_not_as_listed(&self, kind: Kind, rel: &str, what: &str) {
        let (fix, _) = self.kind.changed_file_fix();
        self.fail_advised(kind.msg(format!("{rel}: {what}; {fix}")));
    }
    pub(crate) fn failed(&self) -> bool {
        self.fatal.lock().unwrap().is_some()
    }
}

/// The files verified and not yet in place (put there by `placing`).
#[derive(Default)]
pub(crate) struct Placing {
    pub(crate) waiting: Mutex<Vec<usize>>,
    /// Held while a batch is placed: batches go into place one after another.
    pub(crate) placing: Mutex<()>,
    /// A placement is running or spawned (the control loop starts no second one).
    pub(crate) busy: AtomicBool,
}

impl Placing {
    /// Whether files wait and no placement runs: the control loop then starts one.
    pub(crate) fn due(&self) -> bool {
        !self.busy.load(Ordering::SeqCst) && !self.waiting.lock().unwrap().is_empty()
    }

    /// Marks a placement as started by the control loop (see [`Placing::due`]).
    pub(crate) fn start(&self) {
        self.busy.store(true, Ordering::SeqCst);
    }
}
