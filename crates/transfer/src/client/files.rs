//! The client's shared types: a file as discovery finds it ([`SourceFile`], in a [`Source`] or
//! a [`Batch`], with the digests its source gives and its mirrors) and as the transfer fetches
//! it ([`FileJob`], with the [`FileSource`] serving it now). Discovery (`source`, `walk`,
//! `mirrors`) makes them, `control`, `queue`, `resume`, `channel` and `verify` use them.

use super::dest::{with_suffix, Dest, DONE_SUFFIX, PART_SUFFIX};
use super::done_log::{log_header, record};
use super::url::HttpUrl;
use super::validator::{Compared, Validator};
use crate::dirindex::IndexKind;
use crate::error::EngineResult;
use crate::summary::{FailedLine, MirrorFallback};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc::UnboundedReceiver;
use wattio_http::checksum::{self, Algorithm, InOrderHasher};
use wattio_http::ResponseHead;

/// One file of the source.
pub(super) struct SourceFile {
    /// Path relative to the destination.
    pub(super) rel: String,
    /// Index into [`Source::origins`].
    pub(super) origin: usize,
    /// Origin-form request target (percent-encoded path, and the query of a listed URL).
    pub(super) url_path: String,
    pub(super) size: u64,
    /// Whole-file XXH3-64, hex (wattio listings).
    pub(super) xxh3: Option<String>,
    pub(super) blocks: Option<BlockDigests>,
    /// A digest the publisher gives (checksum file, URL list `checksum=`).
    pub(super) expect: Option<Expected>,
    /// The other URLs of its URL-list line (see `mirrors`).
    pub(super) mirrors: Option<Box<MirrorPlan>>,
    /// The server's validators of the file now (see `validator_origin`).
    pub(super) validator: Option<Validator>,
    /// The server an answer of this run about the file came from, which gave `validator`
    /// (`None` there then means that server gives none); `None` when nothing was asked about
    /// the file itself (a listing, an index with exact sizes).
    pub(super) validator_origin: Option<String>,
}

impl SourceFile {
    /// A file known by its place only (size and checksums set later).
    pub(super) fn at(rel: String, origin: usize, url_path: String) -> SourceFile {
        SourceFile {
            rel,
            origin,
            url_path,
            size: 0,
            xxh3: None,
            blocks: None,
            expect: None,
            mirrors: None,
            validator: None,
            validator_origin: None,
        }
    }

    /// Takes the validators of an answer about this file from `origin`.
    pub(super) fn with_validator(mut self, h: &ResponseHead, origin: &HttpUrl) -> SourceFile {
        let o = origin.origin();
        self.validator = Validator::from_head(h, &o);
        self.validator_origin = Some(o);
        self
    }
}

/// A file's expected block checksums (from its listing entry).
#[derive(Debug, Clone)]
pub(super) struct BlockDigests {
    pub(super) size: u64,
    pub(super) xxh3: Vec<u64>,
}

impl BlockDigests {
    pub(super) fn from_listing(b: wattio_http::ListedBlocks) -> BlockDigests {
        BlockDigests {
            size: b.size,
            // Listing::parse checked every digest
            xxh3: b
                .xxh3
                .iter()
                .map(|h| checksum::parse_digest(h).unwrap_or_default())
                .collect(),
        }
    }
}

/// A digest a publisher gives for a file.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    pub(super) algo: Algorithm,
    pub(super) digest: Vec<u8>,
    /// Where it comes from, for messages: `SHA256SUMS line 7`, `urls.txt:4`.
    pub(super) from: String,
}

/// How the files were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SourceKind {
    Listing,
    Index(IndexKind),
    UrlList,
    FileUrl,
}

impl SourceKind {
    /// Name in the summary (`source_kind`).
    pub(super) fn name(self) -> &'static str {
        match self {
            SourceKind::Listing => "wattio-listing",
            SourceKind::Index(_) => "directory-index",
            SourceKind::UrlList => "url-list",
            SourceKind::FileUrl => "file-url",
        }
    }

    /// What to do when a file no longer matches what the source said (another size, gone, a
    /// checksum that does not match), and whether rerunning the same command can succeed.
    pub(super) fn changed_file_fix(self) -> (&'static str, bool) {
        match self {
            SourceKind::Listing => (
                "the dataset listing is stale: regenerate it on the server with `wattio serve DIR --write-listing` (or serve the tree with `wattio serve`, which keeps it current)",
                false,
            ),
            SourceKind::Index(_) => (
                "the server's files changed during the copy; rerun the same command to read the index again and resume",
                true,
            ),
            SourceKind::UrlList | SourceKind::FileUrl => (
                "the file changed on the server; rerun the same command to fetch it again",
                true,
            ),
        }
    }
}

/// What a transfer fetches.
pub(super) struct Source {
    pub(super) kind: SourceKind,
    /// The servers, origin-form paths unused; the first is the one named on the command line
    /// (or the first of a URL list).
    pub(super) origins: Vec<HttpUrl>,
    /// Per origin: whether it honours `Range` (`None`: not known yet).
    pub(super) ranges: Vec<Option<bool>>,
    pub(super) files: Vec<SourceFile>,
    /// Files no server gives a size for (no `Content-Length`, no `Range`): fetched as single
    /// streams beside the planned transfer (`size` unused).
    pub(super) unsized_files: Vec<SourceFile>,
    /// Things the user should know (ignored options, skipped entries).
    pub(super) notes: Vec<String>,
    /// Files still being found (a directory index whose walk goes on while the first files
    /// are fetched); `None` once everything is known.
    pub(super) more: Option<Discovery>,
    /// How many files the whole source names, when it says before they are all sized (a URL
    /// list's lines).
    pub(super) files_expected: Option<usize>,
    /// URL-list lines none of whose URLs answered (the rest is copied; the command then ends
    /// with an error naming them).
    pub(super) failed: Vec<FailedLine>,
}

/// Files found while the transfer runs, one index page or a few URL-list lines at a time; the
/// channel closes when discovery has ended, and an error ends it.
pub(super) type Discovery = UnboundedReceiver<EngineResult<Batch>>;

/// Files found together (an index page, or URL-list lines), sized.
#[derive(Default)]
pub(super) struct Batch {
    /// The generator of the page (index walks).
    pub(super) kind: Option<IndexKind>,
    pub(super) files: Vec<SourceFile>,
    pub(super) unsized_files: Vec<SourceFile>,
    pub(super) notes: Vec<String>,
    /// Servers met since the last batch (redirects of a URL list), appended to the
    /// transfer's origins in order.
    pub(super) new_origins: Vec<HttpUrl>,
    /// What the answers said of `Range`, per origin index (see [`merge_accept_ranges`]).
    pub(super) ranges: Vec<(usize, bool)>,
    /// URL-list lines none of whose URLs answered.
    pub(super) failed: Vec<FailedLine>,
}

/// The absolute URL of `path` (origin form) on `u`'s server.
pub(super) fn url_string(u: &HttpUrl, path: &str) -> String {
    format!("{}{path}", u.origin())
}

pub(super) fn same_origin(a: &HttpUrl, b: &HttpUrl) -> bool {
    a.tls == b.tls && a.port == b.port && a.host.eq_ignore_ascii_case(&b.host)
}

/// Index of `u`'s server in `origins`, added (with nothing known of its `Range` support in
/// `ranges`) when new.
pub(super) fn origin_index(
    origins: &mut Vec<HttpUrl>,
    ranges: &mut Vec<Option<bool>>,
    u: &HttpUrl,
) -> usize {
    match origins.iter().position(|o| same_origin(o, u)) {
        Some(i) => i,
        None => {
            origins.push(u.clone());
            ranges.push(None);
            origins.len() - 1
        }
    }
}

/// Folds a response's `Accept-Ranges` into what is known of its origin: one answer that says
/// `bytes` is enough (the origin serves ranges).
pub(super) fn merge_accept_ranges(known: &mut Option<bool>, h: &ResponseHead) {
    if let Some(r) = accept_ranges(h) {
        fold_ranges(known, r);
    }
}

fn fold_ranges(known: &mut Option<bool>, ranges: bool) {
    *known = Some(known.unwrap_or(false) || ranges);
}

/// `Accept-Ranges` of a response: `Some(true)` for `bytes`, `Some(false)` for `none`.
fn accept_ranges(h: &ResponseHead) -> Option<bool> {
    let v = h.header("accept-ranges")?.trim().to_ascii_lowercase();
    if v.split(',').any(|t| t.trim() == "bytes") {
        Some(true)
    } else if v == "none" {
        Some(false)
    } else {
        None
    }
}

impl Source {
    pub(super) fn new(kind: SourceKind, origin: &HttpUrl) -> Source {
        Source {
            kind,
            origins: vec![origin.clone()],
            ranges: vec![None],
            files: Vec::new(),
            unsized_files: Vec::new(),
            notes: Vec::new(),
            more: None,
            files_expected: None,
            failed: Vec::new(),
        }
    }

    /// Adds a batch found by discovery.
    pub(super) fn absorb(&mut self, b: Batch) {
        for u in b.new_origins {
            self.origins.push(u);
            self.ranges.push(None);
        }
        for (o, r) in b.ranges {
            fold_ranges(&mut self.ranges[o], r);
        }
        self.files.extend(b.files);
        self.unsized_files.extend(b.unsized_files);
        self.notes.extend(b.notes);
        self.failed.extend(b.failed);
    }

    /// Waits for the walk's next batch and adds it; `more` becomes `None` when the walk ended.
    async fn absorb_next(&mut self) -> EngineResult<()> {
        let Some(rx) = self.more.as_mut() else {
            return Ok(());
        };
        match rx.recv().await {
            Some(b) => self.absorb(b?),
            None => self.more = None,
        }
        Ok(())
    }

    /// Starts discovery with `more`: returns once a file with bytes is known (the plan needs a
    /// size and the Range probe a file with bytes) or discovery has ended; the rest of it stays
    /// in [`Source::more`] and comes while the transfer runs.
    pub(super) async fn until_first_bytes(&mut self, more: Discovery) -> EngineResult<()> {
        self.more = Some(more);
        while self.more.is_some() && !self.files.iter().any(|f| f.size > 0) {
            self.absorb_next().await?;
        }
        Ok(())
    }

    /// Waits for the rest of the walk (a checksum file is matched against every file).
    pub(super) async fn absorb_all(&mut self) -> EngineResult<()> {
        while self.more.is_some() {
            self.absorb_next().await?;
        }
        Ok(())
    }

    pub(super) fn origin_index(&mut self, u: &HttpUrl) -> usize {
        origin_index(&mut self.origins, &mut self.ranges, u)
    }

    /// Adds a file of known or unknown size.
    pub(super) fn add(&mut self, f: SourceFile, size: Option<u64>) {
        match size {
            Some(n) => self.files.push(SourceFile { size: n, ..f }),
            None => self.unsized_files.push(f),
        }
    }

    pub(super) fn note_ranges(&mut self, origin: usize, h: &ResponseHead) {
        merge_accept_ranges(&mut self.ranges[origin], h);
    }
}

/// One URL a file can come from.
#[derive(Debug, Clone)]
pub(super) struct Place {
    /// Index into the transfer's origins.
    pub(super) origin: usize,
    /// Origin-form request target.
    pub(super) url_path: String,
    /// The whole URL, for messages and the summary.
    pub(super) url: String,
}

/// A file's mirrors as the start found them (for files whose line has more than one URL).
#[derive(Debug, Clone)]
pub(super) struct MirrorPlan {
    /// Every URL of the line (redirects followed), in the order written.
    pub(super) places: Vec<Place>,
    /// The one the file starts on (it gave the file's size).
    pub(super) current: usize,
    /// URLs passed over at the start, with why.
    pub(super) fallbacks: Vec<MirrorFallback>,
    /// `urls.txt:4`, for messages.
    pub(super) line: String,
}

/// Where a file being fetched comes from: its URLs and the one serving it now.
pub(super) struct FileSource {
    pub(super) places: Vec<Place>,
    pub(super) current: AtomicUsize,
    /// The place whose size the file was planned with.
    pub(super) sized_at: usize,
    pub(super) fallbacks: Mutex<Vec<MirrorFallback>>,
    pub(super) line: String,
}

impl FileSource {
    /// A file at `origin`/`url_path`, with the mirrors the start found for it.
    pub(super) fn new(origin: usize, url_path: String, mirrors: Option<Box<MirrorPlan>>) -> Self {
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

    pub(super) fn place(&self) -> &Place {
        &self.places[self.current.load(Ordering::SeqCst)]
    }
}

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
    /// Boxed: a hasher's state is hundreds of bytes, and most files have no publisher digest
    /// (every byte of a [`FileJob`] is paid once per file of the dataset).
    pub(super) in_order: Mutex<Option<Box<InOrderHasher>>>,
    /// Opened on first use and closed when the file is finished, so a dataset of many small
    /// files never holds more descriptors than files in flight.
    pub(super) file: Mutex<Option<Arc<File>>>,
    pub(super) done_log: Mutex<Option<File>>,
    /// A `.done` log exists on disk (an earlier run's, or one this run began): deleted when
    /// the file is placed. Most small files finish before their first record is due and never
    /// have one, which saves a create and an unlink per file.
    pub(super) logged: AtomicBool,
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
    /// [`FileJob::sync_records`]), or with syncing off for the next interval all the same, so
    /// that a file finished within one interval never gets a log. Returns true when it is the
    /// first record waiting (the caller then lists the file for the next sync).
    pub(super) fn log_done(&self, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let mut u = self.unsynced.lock().unwrap();
        u.push((offset, len));
        u.len() == 1
    }

    /// Syncs the part file's data, then writes the records of the ranges that were waiting
    /// for it. Nothing to do when none wait or the file is closed (finished: its log is gone).
    pub(super) fn sync_records(&self) -> std::io::Result<()> {
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
        self.remove_log();
        self.unsynced.lock().unwrap().clear();
    }

    /// Deletes the `.done` log, when there is one.
    pub(super) fn remove_log(&self) {
        if self.logged.swap(false, Ordering::SeqCst) {
            let _ = self.dest.remove(&self.done_rel());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn head(accept: Option<&str>) -> ResponseHead {
        let mut raw = String::from("HTTP/1.1 200 OK\r\n");
        if let Some(a) = accept {
            raw.push_str(&format!("Accept-Ranges: {a}\r\n"));
        }
        raw.push_str("\r\n");
        wattio_http::parse_response_head(raw.as_bytes())
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn accept_ranges_values() {
        assert_eq!(accept_ranges(&head(Some("bytes"))), Some(true));
        assert_eq!(accept_ranges(&head(Some("none"))), Some(false));
        assert_eq!(accept_ranges(&head(Some("Bytes, other"))), Some(true));
        assert_eq!(accept_ranges(&head(None)), None);
    }

    #[test]
    fn fixes_name_the_command_that_helps() {
        let (fix, rerun) = SourceKind::Listing.changed_file_fix();
        assert!(fix.contains("--write-listing") && !rerun);
        let (fix, rerun) = SourceKind::Index(IndexKind::NginxHtml).changed_file_fix();
        assert!(fix.contains("rerun") && rerun);
    }
}
