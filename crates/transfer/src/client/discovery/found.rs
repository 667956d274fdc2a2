//! What discovery yields: a file as discovery finds it ([`SourceFile`], in a [`Source`] or a
//! [`Batch`], with the digests its source gives and its mirrors). Discovery (`source`, `walk`,
//! `url_list`) makes them; the data stage (`data::intake`) takes them in as
//! [`FileJob`](crate::client::data::files::FileJob)s.

use crate::client::net::url::HttpUrl;
use crate::client::net::validator::Validator;
use crate::dirindex::IndexKind;
use crate::error::EngineResult;
use crate::summary::{FailedLine, MirrorFallback};
use std::collections::HashSet;
use tokio::sync::mpsc::Receiver;
use wattio_http::checksum::{self, Algorithm};
use wattio_http::ResponseHead;

/// One file of the source.
pub(crate) struct SourceFile {
    /// Path relative to the destination.
    pub(crate) rel: String,
    /// Index into [`Source::origins`].
    pub(crate) origin: usize,
    /// Origin-form request target (percent-encoded path, and the query of a listed URL).
    pub(crate) url_path: String,
    pub(crate) size: u64,
    /// Whole-file XXH3-64, hex (wattio listings).
    pub(crate) xxh3: Option<String>,
    pub(crate) blocks: Option<BlockDigests>,
    /// A digest the publisher gives (checksum file, URL list `checksum=`).
    pub(crate) expect: Option<Expected>,
    /// The other URLs of its URL-list line (see `mirrors`).
    pub(crate) mirrors: Option<Box<MirrorPlan>>,
    /// The server's validators of the file now (see `validator_origin`).
    pub(crate) validator: Option<Validator>,
    /// The server an answer of this run about the file came from, which gave `validator`
    /// (`None` there then means that server gives none); `None` when nothing was asked about
    /// the file itself (a listing, an index with exact sizes).
    pub(crate) validator_origin: Option<String>,
}

impl SourceFile {
    /// A file known by its place only (size and checksums set later).
    pub(crate) fn at(rel: String, origin: usize, url_path: String) -> SourceFile {
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
    pub(crate) fn with_validator(mut self, h: &ResponseHead, origin: &HttpUrl) -> SourceFile {
        let o = origin.origin();
        self.validator = Validator::from_head(h, &o);
        self.validator_origin = Some(o);
        self
    }
}

/// A file's expected block checksums (from its listing entry).
#[derive(Debug, Clone)]
pub(crate) struct BlockDigests {
    pub(crate) size: u64,
    pub(crate) xxh3: Vec<u64>,
}

impl BlockDigests {
    pub(crate) fn from_listing(b: wattio_http::ListedBlocks) -> BlockDigests {
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
pub(crate) struct Expected {
    pub(crate) algo: Algorithm,
    pub(crate) digest: Vec<u8>,
    /// Where it comes from, for messages: `SHA256SUMS line 7`, `urls.txt:4`.
    pub(crate) from: String,
}

/// How the files were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourceKind {
    Listing,
    Index(IndexKind),
    UrlList,
    FileUrl,
}

impl SourceKind {
    /// Name in the summary (`source_kind`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            SourceKind::Listing => "wattio-listing",
            SourceKind::Index(_) => "directory-index",
            SourceKind::UrlList => "url-list",
            SourceKind::FileUrl => "file-url",
        }
    }

    /// What to do when a file no longer matches what the source said (another size, gone, a
    /// checksum that does not match), and whether rerunning the same command can succeed.
    pub(crate) fn changed_file_fix(self) -> (&'static str, bool) {
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
pub(crate) struct Source {
    pub(crate) kind: SourceKind,
    /// The servers, origin-form paths unused; the first is the one named on the command line
    /// (or the first of a URL list).
    pub(crate) origins: Vec<HttpUrl>,
    /// Per origin: whether it honours `Range` (`None`: not known yet).
    pub(crate) ranges: Vec<Option<bool>>,
    pub(crate) files: Vec<SourceFile>,
    /// Files no server gives a size for (no `Content-Length`, no `Range`): fetched as single
    /// streams beside the planned transfer (`size` unused).
    pub(crate) unsized_files: Vec<SourceFile>,
    /// Things the user should know (ignored options, skipped entries).
    pub(crate) notes: Vec<String>,
    /// Files still being found (a directory index whose walk goes on while the first files
    /// are fetched); `None` once everything is known.
    pub(crate) more: Option<Discovery>,
    /// How many files the whole source names, when it says before they are all sized (a URL
    /// list's lines).
    pub(crate) files_expected: Option<usize>,
    /// URL-list lines none of whose URLs answered (the rest is copied; the command then ends
    /// with an error naming them).
    pub(crate) failed: Vec<FailedLine>,
    /// An index's file paths absorbed so far: a file another page listed too is dropped here
    /// (emptied when the intake takes the files, whose claims drop it from then on).
    pub(crate) seen: HashSet<String>,
}

/// Files found while the transfer runs, one index page or a few URL-list lines at a time; the
/// channel closes when discovery has ended, and an error ends it. Bounded: discovery waits
/// while the transfer has not taken in what it found (a found file waiting here costs several
/// times what it costs in the file list, and an index on loopback is read far faster than its
/// files are copied).
pub(crate) type Discovery = Receiver<EngineResult<Batch>>;

/// Files found together (an index page, or URL-list lines), sized.
#[derive(Default)]
pub(crate) struct Batch {
    /// The generator of the page (index walks).
    pub(crate) kind: Option<IndexKind>,
    pub(crate) files: Vec<SourceFile>,
    pub(crate) unsized_files: Vec<SourceFile>,
    pub(crate) notes: Vec<String>,
    /// Servers met since the last batch (redirects of a URL list), appended to the
    /// transfer's origins in order.
    pub(crate) new_origins: Vec<HttpUrl>,
    /// What the answers said of `Range`, per origin index (see [`merge_accept_ranges`]).
    pub(crate) ranges: Vec<(usize, bool)>,
    /// URL-list lines none of whose URLs answered.
    pub(crate) failed: Vec<FailedLine>,
}

pub(crate) fn same_origin(a: &HttpUrl, b: &HttpUrl) -> bool {
    a.tls == b.tls && a.port == b.port && a.host.eq_ignore_ascii_case(&b.host)
}

/// Index of `u`'s server in `origins`, added (with nothing known of its `Range` support in
/// `ranges`) when new.
pub(crate) fn origin_index(
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
pub(crate) fn merge_accept_ranges(known: &mut Option<bool>, h: &ResponseHead) {
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
    pub(crate) fn new(kind: SourceKind, origin: &HttpUrl) -> Source {
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
            seen: HashSet::new(),
        }
    }

    /// Adds a batch found by discovery (a file of an index listed on an earlier page too is
    /// dropped: its first listing stands).
    pub(crate) fn absorb(&mut self, mut b: Batch) {
        if matches!(self.kind, SourceKind::Index(_)) {
            let seen = &mut self.seen;
            b.files.retain(|f| seen.insert(f.url_path.clone()));
            b.unsized_files.retain(|f| seen.insert(f.url_path.clone()));
        }
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
    pub(crate) async fn until_first_bytes(&mut self, more: Discovery) -> EngineResult<()> {
        self.more = Some(more);
        while self.more.is_some() && !self.files.iter().any(|f| f.size > 0) {
            self.absorb_next().await?;
        }
        Ok(())
    }

    /// Waits for the rest of the walk (a checksum file is matched against every file).
    pub(crate) async fn absorb_all(&mut self) -> EngineResult<()> {
        while self.more.is_some() {
            self.absorb_next().await?;
        }
        Ok(())
    }

    pub(crate) fn origin_index(&mut self, u: &HttpUrl) -> usize {
        origin_index(&mut self.origins, &mut self.ranges, u)
    }

    /// Adds a file of known or unknown size.
    pub(crate) fn add(&mut self, f: SourceFile, size: Option<u64>) {
        match size {
            Some(n) => self.files.push(SourceFile { size: n, ..f }),
            None => self.unsized_files.push(f),
        }
    }

    pub(crate) fn note_ranges(&mut self, origin: usize, h: &ResponseHead) {
        merge_accept_ranges(&mut self.ranges[origin], h);
    }
}

/// One URL a file can come from.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// Index into the transfer's origins.
    pub(crate) origin: usize,
    /// Origin-form request target.
    pub(crate) url_path: String,
    /// The whole URL, for messages and the summary.
    pub(crate) url: String,
}

/// A file's mirrors as the start found them (for files whose line has more than one URL).
#[derive(Debug, Clone)]
pub(crate) struct MirrorPlan {
    /// Every URL of the line (redirects followed), in the order written.
    pub(crate) places: Vec<Place>,
    /// The one the file starts on (it gave the file's size).
    pub(crate) current: usize,
    /// URLs passed over at the start, with why.
    pub(crate) fallbacks: Vec<MirrorFallback>,
    /// `urls.txt:4`, for messages.
    pub(crate) line: String,
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

    /// A file of an index listed on a second page is absorbed once, its first listing kept;
    /// a URL list keeps every line (the intake refuses repeated paths).
    #[test]
    fn an_index_file_listed_again_is_absorbed_once() {
        let origin = HttpUrl::parse("http://h:80/").unwrap();
        let page = |files: &[(&str, u64)]| Batch {
            files: files
                .iter()
                .map(|&(p, size)| SourceFile {
                    size,
                    ..SourceFile::at(p[1..].into(), 0, p.into())
                })
                .collect(),
            ..Batch::default()
        };
        let mut src = Source::new(SourceKind::Index(IndexKind::NginxHtml), &origin);
        src.absorb(page(&[("/a", 1), ("/d/b", 2)]));
        src.absorb(page(&[("/d/b", 3), ("/c", 4)]));
        let got: Vec<(&str, u64)> = src
            .files
            .iter()
            .map(|f| (f.url_path.as_str(), f.size))
            .collect();
        assert_eq!(got, [("/a", 1), ("/d/b", 2), ("/c", 4)]);
        let mut list = Source::new(SourceKind::UrlList, &origin);
        list.absorb(page(&[("/a", 1)]));
        list.absorb(page(&[("/a", 1)]));
        assert_eq!(list.files.len(), 2);
    }

    #[test]
    fn fixes_name_the_command_that_helps() {
        let (fix, rerun) = SourceKind::Listing.changed_file_fix();
        assert!(fix.contains("--write-listing") && !rerun);
        let (fix, rerun) = SourceKind::Index(IndexKind::NginxHtml).changed_file_fix();
        assert!(fix.contains("rerun") && rerun);
    }
}
