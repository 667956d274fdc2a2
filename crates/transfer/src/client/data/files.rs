//! A file as the transfer fetches it: [`FileJob`], the compact entry every listed file keeps
//! for the whole run (where it goes, where it comes from, its size and expected digests, a few
//! flags), and [`Active`], the state only a file being fetched or resumed needs (part file,
//! `.done` log, unsynced ranges, validator, version, hashers), made when the file starts and
//! dropped when it is finished. `queue`, `resume`, `channel` and `verify` use them.

use super::dest::{with_suffix, Dest, DONE_SUFFIX, PART_SUFFIX};
use super::done_log::{log_header, record};
use crate::client::discovery::found::{BlockDigests, Expected, MirrorPlan, Place, SourceFile};
use crate::client::net::validator::{Compared, Validator};
use crate::summary::MirrorFallback;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use wattio_http::checksum::InOrderHasher;
use wattio_http::ResponseHead;

/// Where a file with mirrors comes from: its URLs and the one serving it now (most files have
/// one URL, kept in the [`FileJob`] itself).
pub(crate) struct FileSource {
    pub(crate) places: Vec<Place>,
    pub(crate) current: AtomicUsize,
    /// The place whose size the file was planned with.
    pub(crate) sized_at: usize,
    pub(crate) fallbacks: Mutex<Vec<MirrorFallback>>,
    pub(crate) line: String,
}

impl FileSource {
    /// The mirrors the start found for a file.
    pub(crate) fn new(m: MirrorPlan) -> Self {
        FileSource {
            current: AtomicUsize::new(m.current),
            sized_at: m.current,
            places: m.places,
            fallbacks: Mutex::new(m.fallbacks),
            line: m.line,
        }
    }

    pub(crate) fn place(&self) -> &Place {
        &self.places[self.current.load(Ordering::SeqCst)]
    }
}

/// The digests a file is checked against (in [`Extras`]: an index of a plain web server
/// gives none).
pub(crate) struct Checks {
    /// Whole-file XXH3-64, hex (wattio listings).
    pub(crate) xxh3: Option<String>,
    /// The listing's per-block checksums, verified instead of `xxh3` when present.
    pub(crate) blocks: Option<BlockDigests>,
    /// The publisher's digest (checksum file, URL list).
    pub(crate) expect: Option<Expected>,
}

/// A file's request target and its path under DEST in one allocation, and the index of its
/// origin. In a directory index the path is the target's tail wherever the index needed no
/// escaping (`/d001/f.bin`, `d001/f.bin`): the text is the target and the path starts at
/// `rel_at`. Otherwise both are stored, byte for byte as discovery gave them, the path after
/// the target (`rel_at` then also ends the target, and says so in its top bit).
pub(crate) struct Names {
    text: Box<str>,
    rel_at: u32,
    origin: u32,
}

/// `rel_at`'s bit for a path stored after the target.
const STORED_APART: u32 = 1 << 31;

impl Names {
    pub(crate) fn new(url_path: String, rel: String, origin: usize) -> Names {
        // a request target is at most an HTTP head long, far below 2 GiB
        let len = |n: usize| {
            u32::try_from(n)
                .ok()
                .filter(|&n| n < STORED_APART)
                .expect("a name shorter than 2 GiB")
        };
        // origins are the servers a source names: far fewer than 2^32
        let origin = u32::try_from(origin).expect("fewer than 2^32 origins");
        if url_path.ends_with(rel.as_str()) {
            // a suffix that matches a whole str starts on a character boundary
            let rel_at = len(url_path.len() - rel.len());
            return Names {
                text: url_path.into_boxed_str(),
                rel_at,
                origin,
            };
        }
        let url_end = len(url_path.len());
        let mut text = url_path;
        text.push_str(&rel);
        len(text.len());
        Names {
            text: text.into_boxed_str(),
            rel_at: url_end | STORED_APART,
            origin,
        }
    }

    pub(crate) fn url_path(&self) -> &str {
        if self.rel_at & STORED_APART != 0 {
            &self.text[..(self.rel_at & !STORED_APART) as usize]
        } else {
            &self.text
        }
    }

    pub(crate) fn rel(&self) -> &str {
        &self.text[(self.rel_at & !STORED_APART) as usize..]
    }
}

/// A job's flags, in one byte (a million-file list pays each of its bytes a million times).
pub(crate) struct Flags(AtomicU8);

impl Flags {
    /// Its server ignores `Range`: fetched as one whole-file stream, never resumed midway.
    pub(crate) const WHOLE: u8 = 1;
    /// A `.done` log exists on disk (an earlier run's, or one this run began): deleted when
    /// the file is placed. Most small files finish before their first record is due and never
    /// have one, which saves a create and an unlink per file.
    pub(crate) const LOGGED: u8 = 2;
    /// No usable earlier progress: truncate the part file when first opening it.
    pub(crate) const FRESH: u8 = 4;
    pub(crate) const CHECKSUM_RETRY: u8 = 8;
    /// Verified and being renamed into place: no record may be written any more, and its
    /// [`Active`] state is gone (set under the `done_log` lock, which record writes hold).
    pub(crate) const FINISHED: u8 = 16;

    pub(crate) fn get(&self, flag: u8) -> bool {
        self.0.load(Ordering::SeqCst) & flag != 0
    }

    /// Sets `flag` to `on`; returns what it was.
    pub(crate) fn swap(&self, flag: u8, on: bool) -> bool {
        let was = if on {
            self.0.fetch_or(flag, Ordering::SeqCst)
        } else {
            self.0.fetch_and(!flag, Ordering::SeqCst)
        };
        was & flag != 0
    }
}

/// What few files have: digests to check and mirrors (boxed together in [`FileJob`]).
pub(crate) struct Extras {
    pub(crate) checks: Option<Checks>,
    /// Its URL-list line's mirrors (see `mirrors`).
    pub(crate) mirrors: Option<FileSource>,
}

/// One listed file: what the whole run needs of it. Every byte here is paid once per file of
/// the dataset (a million files of an index: see the size test in `jobs`); what only a file in
/// flight needs is in its [`Active`] state.
pub(crate) struct FileJob {
    /// Its names, and the index of its origin when it has no mirrors (else `mirrors` says).
    names: Names,
    pub(crate) size: u64,
    pub(crate) remaining: AtomicU64,
    /// Chunks of it in flight (the interval log's count).
    pub(crate) in_flight: AtomicU32,
    pub(crate) flags: Flags,
    extras: Option<Box<Extras>>,
    /// Made when the file starts (its first chunk, or earlier progress found by resume),
    /// dropped when it is finished.
    active: Mutex<Option<Arc<Active>>>,
}

/// What a file being fetched or resumed needs, beyond its [`FileJob`].
pub(crate) struct Active {
    /// Block digests computed from the bytes as they arrived (None: not seen whole in one
    /// stream, hashed from the file when it is finished).
    pub(crate) block_sums: Mutex<Vec<Option<u64>>>,
    /// The publisher digest's state over the bytes so far (boxed: hundreds of bytes).
    pub(crate) in_order: Mutex<Option<Box<InOrderHasher>>>,
    /// Opened on first use and closed when the file is finished, so a dataset of many small
    /// files never holds more descriptors than files in flight.
    pub(crate) file: Mutex<Option<Arc<File>>>,
    pub(crate) done_log: Mutex<Option<File>>,
    /// Ranges that arrived whose data is not synced to disk yet: their records go to the
    /// `.done` log only after it is ([`FileJob::sync_records`]), so that after a power cut no
    /// record claims bytes the disk does not hold.
    pub(crate) unsynced: Mutex<Vec<(u64, u64)>>,
    /// The server's validators of the version the part file holds (the log's, or the first
    /// answer's): sent as `If-Range`, compared with every answer.
    pub(crate) validator: Mutex<Option<Validator>>,
    /// The version of the file being fetched: it grows when the file starts over (see
    /// [`Shared::restart_file`](super::state::Shared::restart_file)). Chunks carry the version
    /// they were cut for; bytes are written and counted only under this lock's read side and
    /// only for the current version, so a restart (the write side) never interleaves with a
    /// write of the old version.
    pub(crate) version: RwLock<u32>,
    /// Times the file started over in this run.
    pub(crate) restarts: AtomicU32,
}

/// Live [`Active`] states in this test process (the test that a finished file's is freed).
#[cfg(test)]
pub(crate) static LIVE_ACTIVE: AtomicUsize = AtomicUsize::new(0);

#[cfg(test)]
impl Drop for Active {
    fn drop(&mut self) {
        LIVE_ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Active {
    /// The state of a file starting with `validator`, whose bytes in `done` are on disk.
    fn new(job: &FileJob, validator: Option<Validator>, done: &[(u64, u64)]) -> Active {
        #[cfg(test)]
        {
            LIVE_ACTIVE.fetch_add(1, Ordering::SeqCst);
            MADE_ACTIVE.fetch_add(1, Ordering::SeqCst);
        }
        Active {
            block_sums: Mutex::new(vec![None; job.blocks().map_or(0, |b| b.xxh3.len())]),
            in_order: Mutex::new(
                job.expect()
                    .map(|x| Box::new(InOrderHasher::new(x.algo, job.size, done))),
            ),
            file: Mutex::new(None),
            done_log: Mutex::new(None),
            unsynced: Mutex::new(Vec::new()),
            validator: Mutex::new(validator),
            version: RwLock::new(0),
            restarts: AtomicU32::new(0),
        }
    }

    pub(crate) fn generation(&self) -> u32 {
        *self.version.read().unwrap()
    }
}

/// What [`FileJob::new`] takes: a file discovery found, with what preparing it against DEST
/// added.
pub(crate) struct NewJob {
    pub(crate) file: SourceFile,
    pub(crate) remaining: u64,
    pub(crate) whole: bool,
    /// The part file holds earlier progress (`done`), which its `.done` log records.
    pub(crate) fresh: bool,
    pub(crate) done: Vec<(u64, u64)>,
    /// The version to fetch (the log's, or the server's now): `file.validator` decided.
    pub(crate) validator: Option<Validator>,
}

impl FileJob {
    /// A listed file; its [`Active`] state is made now only when the file resumes earlier
    /// progress or a validator is already known for it.
    pub(crate) fn new(n: NewJob) -> FileJob {
        let f = n.file;
        let checks =
            (f.xxh3.is_some() || f.blocks.is_some() || f.expect.is_some()).then_some(Checks {
                xxh3: f.xxh3,
                blocks: f.blocks,
                expect: f.expect,
            });
        let mirrors = f.mirrors.map(|m| FileSource::new(*m));
        let extras =
            (checks.is_some() || mirrors.is_some()).then(|| Box::new(Extras { checks, mirrors }));
        // a fresh file's log was deleted (see `prepare`)
        let mut flags = if n.fresh { Flags::FRESH } else { Flags::LOGGED };
        if n.whole {
            flags |= Flags::WHOLE;
        }
        let job = FileJob {
            names: Names::new(f.url_path, f.rel, f.origin),
            size: f.size,
            remaining: AtomicU64::new(n.remaining),
            in_flight: AtomicU32::new(0),
            flags: Flags(AtomicU8::new(flags)),
            extras,
            active: Mutex::new(None),
        };
        if !n.fresh || n.validator.is_some() {
            let a = Active::new(&job, n.validator, &n.done);
            *job.active.lock().unwrap() = Some(Arc::new(a));
        }
        job
    }

    /// Path relative to the destination.
    pub(crate) fn rel(&self) -> &str {
        self.names.rel()
    }

    /// Index of the origin serving this file now.
    pub(crate) fn origin(&self) -> usize {
        match self.mirrors() {
            Some(m) => m.place().origin,
            None => self.names.origin as usize,
        }
    }

    /// Its URL-list line's mirrors, if it has any.
    pub(crate) fn mirrors(&self) -> Option<&FileSource> {
        self.extras.as_ref()?.mirrors.as_ref()
    }

    /// Its server ignores `Range` (see [`Flags::WHOLE`]).
    pub(crate) fn whole(&self) -> bool {
        self.flags.get(Flags::WHOLE)
    }

    fn checks(&self) -> Option<&Checks> {
        self.extras.as_ref()?.checks.as_ref()
    }

    /// The request target on that origin.
    pub(crate) fn url_path(&self) -> &str {
        match self.mirrors() {
            Some(m) => &m.place().url_path,
            None => self.names.url_path(),
        }
    }

    pub(crate) fn xxh3(&self) -> Option<&str> {
        self.checks()?.xxh3.as_deref()
    }

    pub(crate) fn blocks(&self) -> Option<&BlockDigests> {
        self.checks()?.blocks.as_ref()
    }

    pub(crate) fn expect(&self) -> Option<&Expected> {
        self.checks()?.expect.as_ref()
    }

    /// Whether a checksum checks it (the listing's or the publisher's).
    pub(crate) fn checked(&self) -> bool {
        self.checks().is_some()
    }

    /// Its in-flight state if it has one (none before it starts and once it is finished).
    pub(crate) fn active_if(&self) -> Option<Arc<Active>> {
        self.active.lock().unwrap().clone()
    }

    /// Its in-flight state (made now if it starts) when `version` is its current version;
    /// `None` once the file is finished (a chunk of an older version met afterwards).
    pub(crate) fn active_at(&self, version: u32) -> Option<Arc<Active>> {
        let mut g = self.active.lock().unwrap();
        if self.flags.get(Flags::FINISHED) {
            return None;
        }
        let a = g
            .get_or_insert_with(|| Arc::new(Active::new(self, None, &[])))
            .clone();
        drop(g);
        (a.generation() == version).then_some(a)
    }

    /// The file's current version (see [`Active::version`]): 0 before it starts, and none a
    /// chunk carries once it is finished.
    pub(crate) fn generation(&self) -> u32 {
        match self.active_if() {
            Some(a) => a.generation(),
            None if self.flags.get(Flags::FINISHED) => u32::MAX,
            None => 0,
        }
    }

    pub(crate) fn part_rel(&self) -> String {
        with_suffix(self.rel(), PART_SUFFIX)
    }

    pub(crate) fn done_rel(&self) -> String {
        with_suffix(self.rel(), DONE_SUFFIX)
    }

    /// The part file, opened (created and sized) on first use.
    pub(crate) fn part(&self, a: &Active, dest: &Dest) -> std::io::Result<Arc<File>> {
        let mut g = a.file.lock().unwrap();
        if let Some(f) = g.as_ref() {
            return Ok(f.clone());
        }
        let f = dest.open_rw(&self.part_rel())?;
        if self.flags.swap(Flags::FRESH, false) {
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
    pub(crate) fn log_done(a: &Active, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let mut u = a.unsynced.lock().unwrap();
        u.push((offset, len));
        u.len() == 1
    }

    /// Syncs the part file's data, then writes the records of the ranges that were waiting
    /// for it. Nothing to do when none wait or the file is closed (finished: its log is gone).
    pub(crate) fn sync_records(&self, dest: &Dest) -> std::io::Result<()> {
        let Some(a) = self.active_if() else {
            return Ok(());
        };
        // held to the end: a restart for a new version (which takes it to write) cannot drop
        // the log between taking these records and writing them, which would put the old
        // version's ranges under the new version's header
        let _version = a.version.read().unwrap();
        let recs = std::mem::take(&mut *a.unsynced.lock().unwrap());
        if recs.is_empty() {
            return Ok(());
        }
        let Some(part) = a.file.lock().unwrap().clone() else {
            return Ok(());
        };
        dest.sync_data(&part)?;
        self.append_records(&a, dest, &recs)
    }

    /// Appends records to the `.done` log in one write, after its header when the log is new;
    /// nothing once the file is finished (its log is gone for good).
    fn append_records(&self, a: &Active, dest: &Dest, recs: &[(u64, u64)]) -> std::io::Result<()> {
        let mut g = a.done_log.lock().unwrap();
        if self.flags.get(Flags::FINISHED) {
            return Ok(());
        }
        let mut out = Vec::with_capacity(recs.len() * 16 + 128);
        if g.is_none() {
            let f = dest.append(&self.done_rel())?;
            self.flags.swap(Flags::LOGGED, true);
            if f.metadata()?.len() == 0 {
                out = log_header(a.validator.lock().unwrap().as_ref());
            }
            *g = Some(f);
        }
        let f = g.as_mut().expect("opened above");
        for &(o, l) in recs {
            out.extend_from_slice(&record(o, l));
        }
        f.write_all(&out)
    }

    /// Forgets the ranges recorded so far (the file is fetched again): the `.done` log is
    /// closed and deleted and records waiting for a sync are dropped.
    pub(crate) fn forget_progress(&self, a: &Active, dest: &Dest) {
        let mut log = a.done_log.lock().unwrap();
        *log = None;
        self.remove_log(dest);
        a.unsynced.lock().unwrap().clear();
    }

    /// Deletes the `.done` log, when there is one.
    pub(crate) fn remove_log(&self, dest: &Dest) {
        if self.flags.swap(Flags::LOGGED, false) {
            let _ = dest.remove(&self.done_rel());
        }
    }

    /// Marks the file finished, closes it and drops its in-flight state: a record sync racing
    /// with the rename cannot create its `.done` log again.
    pub(crate) fn close_finished(&self, a: &Active) {
        let mut log = a.done_log.lock().unwrap();
        {
            // under both locks: `active_at` sees either the state or `finished`
            let mut g = self.active.lock().unwrap();
            self.flags.swap(Flags::FINISHED, true);
            *g = None;
        }
        *log = None;
        drop(log);
        *a.file.lock().unwrap() = None;
        a.unsynced.lock().unwrap().clear();
    }

    /// The `If-Range` line of a range request: the validators of the version the part file
    /// holds, so that a server whose file changed answers the whole file instead of mixing
    /// versions (empty when the server gave none).
    pub(crate) fn if_range(&self) -> String {
        let Some(a) = self.active_if() else {
            return String::new();
        };
        let v = a.validator.lock().unwrap();
        match v.as_ref().and_then(|v| v.if_range()) {
            Some(v) => format!("If-Range: {v}\r\n"),
            None => String::new(),
        }
    }
}

impl Active {
    pub(crate) fn store_block_sum(&self, index: u64, digest: u64) {
        if let Some(slot) = self.block_sums.lock().unwrap().get_mut(index as usize) {
            *slot = Some(digest);
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

/// Tests that count [`LIVE_ACTIVE`] hold it, so that no other test's states are counted.
#[cfg(test)]
pub(crate) static ACTIVE_COUNTED: Mutex<()> = Mutex::new(());

/// [`LIVE_ACTIVE`] when the last transfer ended, its file list still held.
#[cfg(test)]
pub(crate) static LIVE_AT_END: AtomicUsize = AtomicUsize::new(usize::MAX);

/// [`Active`] states made in this test process.
#[cfg(test)]
pub(crate) static MADE_ACTIVE: AtomicUsize = AtomicUsize::new(0);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CoreBackend, Sla, TransferOptions};

    #[test]
    fn names_are_stored_once_where_the_path_is_the_targets_tail() {
        let n = Names::new("/d001/f.bin".into(), "d001/f.bin".into(), 0);
        assert_eq!(
            (n.url_path(), n.rel(), n.text.len()),
            ("/d001/f.bin", "d001/f.bin", 11)
        );
        let n = Names::new("/a%20b/%C3%A9".into(), "a b/é".into(), 3);
        assert_eq!(n.origin, 3);
        assert_eq!((n.url_path(), n.rel()), ("/a%20b/%C3%A9", "a b/é"));
        let n = Names::new("/x?v=1".into(), "x".into(), 0);
        assert_eq!((n.url_path(), n.rel()), ("/x?v=1", "x"));
    }

    /// Every file of a copy gets an in-flight state when it starts, and each is freed when
    /// its file is finished: none is left when the transfer ends.
    #[test]
    fn a_finished_files_in_flight_state_is_freed() {
        let _only_us = ACTIVE_COUNTED.lock().unwrap_or_else(|e| e.into_inner());
        let src = tempfile::tempdir().unwrap();
        let n = 60;
        for i in 0..n {
            let d = src.path().join(format!("d{}", i % 3));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("f{i}.bin")), vec![i as u8; 1000 + i * 37]).unwrap();
        }
        let h = wattio_http::ServerHandle::start(
            wattio_http::ServerConfig::new(src.path()),
            "127.0.0.1:0",
        )
        .unwrap();
        let dst = tempfile::tempdir().unwrap();
        let mut o = TransferOptions::new(
            format!("http://{}/", h.addr),
            dst.path(),
            Sla::MaxThroughput,
        );
        o.tuning.core_backend = CoreBackend::None;
        o.tuning.cpufreq = false;
        let (live, made) = (
            LIVE_ACTIVE.load(Ordering::SeqCst),
            MADE_ACTIVE.load(Ordering::SeqCst),
        );
        let s = crate::run_transfer(&o, &wattio_progress::Cancel::new().unwrap()).unwrap();
        assert_eq!(s.files, n);
        assert!(
            MADE_ACTIVE.load(Ordering::SeqCst) - made >= n,
            "every file started"
        );
        assert_eq!(
            LIVE_AT_END.load(Ordering::SeqCst),
            live,
            "a finished file's in-flight state is still held at the end of the transfer"
        );
    }
}
