//! A file as the transfer fetches it: [`FileJob`], with the [`FileSource`] serving it now
//! (discovery's [`SourceFile`](crate::client::discovery::found::SourceFile) prepared against
//! DEST). `queue`, `resume`, `channel` and `verify` use them.

use super::dest::{with_suffix, Dest, DONE_SUFFIX, PART_SUFFIX};
use super::done_log::{log_header, record};
use crate::client::discovery::found::{BlockDigests, Expected, MirrorPlan, Place};
use crate::client::net::validator::{Compared, Validator};
use crate::summary::MirrorFallback;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use wattio_http::checksum::InOrderHasher;
use wattio_http::ResponseHead;

/// Where a file being fetched comes from: its URLs and the one serving it now.
pub(crate) struct FileSource {
    pub(crate) places: Vec<Place>,
    pub(crate) current: AtomicUsize,
    /// The place whose size the file was planned with.
    pub(crate) sized_at: usize,
    pub(crate) fallbacks: Mutex<Vec<MirrorFallback>>,
    pub(crate) line: String,
}

impl FileSource {
    /// A file at `origin`/`url_path`, with the mirrors the start found for it.
    pub(crate) fn new(origin: usize, url_path: String, mirrors: Option<Box<MirrorPlan>>) -> Self {
        match mirrors {
            Some(m) => FileSource {
                current: AtomicUsize::new(m.current),
                sized_at: m.current,
                places: m.places,
                fallbacks: Mutex::new(m.fallbacks),
                line: m.line,
            },
            None => FileSource {
                places: vec![Place {
                    origin,
                    url_path,
                    url: String::new(),
                }],
                current: AtomicUsize::new(0),
                sized_at: 0,
                fallbacks: Mutex::new(Vec::new()),
                line: String::new(),
            },
        }
    }

    pub(crate) fn place(&self) -> &Place {
        &self.places[self.current.load(Ordering::SeqCst)]
    }
}

/// One file to fetch.
pub(crate) struct FileJob {
    pub(crate) rel: String,
    /// The destination every file operation goes through (no link is followed in it).
    pub(crate) dest: Arc<Dest>,
    /// Its URL (or URLs, with mirrors) and the one serving it now: `origin()`, `url_path()`.
    pub(crate) source: FileSource,
    /// Its server ignores `Range`: fetched as one whole-file stream, never resumed midway.
    pub(crate) whole: bool,
    pub(crate) size: u64,
    pub(crate) xxh3: Option<String>,
    /// The listing's per-block checksums, verified instead of `xxh3` when present.
    pub(crate) blocks: Option<BlockDigests>,
    /// Block digests computed from the bytes as they arrived (None: not seen whole in one
    /// stream, hashed from the file when it is finished).
    pub(crate) block_sums: Mutex<Vec<Option<u64>>>,
    /// The publisher's digest (checksum file, URL list), and its state over the bytes so far.
    pub(crate) expect: Option<Expected>,
    /// Boxed: a hasher's state is hundreds of bytes, and most files have no publisher digest
    /// (every byte of a [`FileJob`] is paid once per file of the dataset).
    pub(crate) in_order: Mutex<Option<Box<InOrderHasher>>>,
    /// Opened on first use and closed when the file is finished, so a dataset of many small
    /// files never holds more descriptors than files in flight.
    pub(crate) file: Mutex<Option<Arc<File>>>,
    pub(crate) done_log: Mutex<Option<File>>,
    /// A `.done` log exists on disk (an earlier run's, or one this run began): deleted when
    /// the file is placed. Most small files finish before their first record is due and never
    /// have one, which saves a create and an unlink per file.
    pub(crate) logged: AtomicBool,
    /// Ranges that arrived whose data is not synced to disk yet: their records go to the
    /// `.done` log only after it is ([`FileJob::sync_records`]), so that after a power cut no
    /// record claims bytes the disk does not hold.
    pub(crate) unsynced: Mutex<Vec<(u64, u64)>>,
    /// No usable earlier progress: truncate the part file when first opening it.
    pub(crate) fresh: AtomicBool,
    pub(crate) remaining: AtomicU64,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) checksum_retry: AtomicBool,
    /// The server's validators of the version the part file holds (the log's, or the first
    /// answer's): sent as `If-Range`, compared with every answer.
    pub(crate) validator: Mutex<Option<Validator>>,
    /// The version of the file being fetched: it grows when the file starts over (see
    /// [`Shared::restart_file`]). Chunks carry the version they were cut for; bytes are written
    /// and counted only under this lock's read side and only for the current version, so a
    /// restart (the write side) never interleaves with a write of the old version.
    pub(crate) version: RwLock<u32>,
    /// Times the file started over in this run.
    pub(crate) restarts: AtomicU32,
    /// Verified and being renamed into place: no record may be written any more (set under
    /// the `done_log` lock, which record writes hold).
    pub(crate) finished: AtomicBool,
}

impl FileJob {
    /// The file's current version (see [`FileJob::version`]).
    pub(crate) fn generation(&self) -> u32 {
        *self.version.read().unwrap()
    }

    pub(crate) fn part_rel(&self) -> String {
        with_suffix(&self.rel, PART_SUFFIX)
    }

    pub(crate) fn done_rel(&self) -> String {
        with_suffix(&self.rel, DONE_SUFFIX)
    }

    /// The part file, opened (created and sized) on first use.
    pub(crate) fn part(&self) -> std::io::Result<Arc<File>> {
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
    /// [`FileJob::sync_records`]), or with syncing off for the next interval all the same, so
    /// that a file finished within one interval never gets a log. Returns true when it is the
    /// first record waiting (the caller then lists the file for the next sync).
    pub(crate) fn log_done(&self, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let mut u = self.unsynced.lock().unwrap();
        u.push((offset, len));
        u.len() == 1
    }

    /// Syncs the part file's data, then writes the records of the ranges that were waiting
    /// for it. Nothing to do when none wait or the file is closed (finished: its log is gone).
    pub(crate) fn sync_records(&self) -> std::io::Result<()> {
        // held to the end: a restart for a new version (which takes it to write) cannot drop
        // the log between taking these records and writing them, which would put the old
        // version's ranges under the new version's header
        let _version = self.version.read().unwrap();
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
            self.logged.store(true, Ordering::SeqCst);
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

    pub(crate) fn store_block_sum(&self, index: u64, digest: u64) {
        if let Some(slot) = self.block_sums.lock().unwrap().get_mut(index as usize) {
            *slot = Some(digest);
        }
    }

    /// Forgets the ranges recorded so far (the file is fetched again): the `.done` log is
    /// closed and deleted and records waiting for a sync are dropped.
    pub(crate) fn forget_progress(&self) {
        let mut log = self.done_log.lock().unwrap();
        *log = None;
        self.remove_log();
        self.unsynced.lock().unwrap().clear();
    }

    /// Deletes the `.done` log, when there is one.
    pub(crate) fn remove_log(&self) {
        if self.logged.swap(false, Ordering::SeqCst) {
            let _ = self.dest.remove(&self.done_rel());
        }
    }

    /// Marks the file finished and closes it: a record sync racing with the rename cannot
    /// create its `.done` log again.
    pub(crate) fn close_finished(&self) {
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
    pub(crate) fn if_range(&self) -> String {
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
    pub(crate) fn check_validator(&self, head: &ResponseHead, origin: &str) -> Result<(), String> {
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
