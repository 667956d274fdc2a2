//! What to fetch, tried in order: a wattio listing, a directory index (nginx, Apache, Python
//! `http.server`), a URL list (`-i FILE`), or the single file a URL names; with each file's
//! size, its origin, whether that origin honours `Range`, and the checksums the source gives.

use super::conn::{Connector, Stream};
use super::fetch::{fetch, head_many, probe_on, Fetched};
use super::mirrors::MirrorPlan;
use super::options::TransferOptions;
use super::url::HttpUrl;
use super::validator::Validator;
use super::walk::{walk_index, WalkedPage};
use crate::dirindex::{join_url, IndexKind};
use crate::summary::FailedLine;
use crate::urllist::UrlList;
use anyhow::{anyhow, bail};
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use wattio_http::checksum::{self, Algorithm};
use wattio_http::{is_safe_relative, Listing, LISTING_PATH};
use wattio_http::{percent_encode_path, ResponseHead};

/// Most redirects followed for one URL (curl's `--max-redirs` default is 50, wget's 20; a
/// dataset URL that needs more is misconfigured).
const MAX_REDIRECTS: usize = 10;
/// Connections and pipelining depth of the `HEAD` requests that size files.
pub(super) const HEAD_CONNECTIONS: usize = 8;
pub(super) const HEAD_DEPTH: usize = 16;

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
pub(super) type Discovery = UnboundedReceiver<anyhow::Result<Batch>>;

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
    async fn absorb_next(&mut self) -> anyhow::Result<()> {
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
    pub(super) async fn until_first_bytes(&mut self, more: Discovery) -> anyhow::Result<()> {
        self.more = Some(more);
        while self.more.is_some() && !self.files.iter().any(|f| f.size > 0) {
            self.absorb_next().await?;
        }
        Ok(())
    }

    /// Waits for the rest of the walk (a checksum file is matched against every file).
    pub(super) async fn absorb_all(&mut self) -> anyhow::Result<()> {
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

/// Finds what `opts` asks to fetch (whether its servers honour `Range` is [`probe_ranges`]'s
/// to find out).
pub(super) async fn resolve(
    connector: &Arc<Connector>,
    opts: &TransferOptions,
    first: &HttpUrl,
) -> anyhow::Result<Source> {
    match &opts.input_file {
        Some(p) => {
            let list = read_url_list(p)?;
            super::mirrors::resolve_url_list(connector, list, &url_list_name(p), first).await
        }
        None => resolve_url(connector, first).await,
    }
}

/// The first URL of a transfer: the source URL, or the first reachable URL of the URL list's
/// first line (read here, and again by [`resolve`]: standard input is read once and kept).
pub(super) async fn first_url(opts: &TransferOptions) -> anyhow::Result<HttpUrl> {
    match &opts.input_file {
        Some(p) => super::mirrors::first_reachable(&read_url_list(p)?, opts.rtt.is_none()).await,
        None => HttpUrl::parse(&opts.source),
    }
}

/// Every URL of the URL list at `p` (mirrors included), as written.
pub(super) fn list_urls(p: &std::path::Path) -> anyhow::Result<Vec<String>> {
    Ok(read_url_list(p)?
        .entries
        .into_iter()
        .flat_map(|e| std::iter::once(e.url).chain(e.mirrors))
        .collect())
}

/// How messages name a URL list.
fn url_list_name(p: &std::path::Path) -> String {
    if p.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        p.display().to_string()
    }
}

static STDIN_LIST: std::sync::OnceLock<Result<Vec<u8>, String>> = std::sync::OnceLock::new();

fn read_url_list(p: &std::path::Path) -> anyhow::Result<UrlList> {
    let (bytes, name) = if p.as_os_str() == "-" {
        let b = STDIN_LIST.get_or_init(|| {
            let mut v = Vec::new();
            std::io::stdin()
                .read_to_end(&mut v)
                .map(|_| v)
                .map_err(|e| e.to_string())
        });
        let b = b
            .clone()
            .map_err(|e| anyhow!("cannot read the URL list from standard input: {e}"))?;
        (b, "standard input".to_string())
    } else {
        let b = std::fs::read(p)
            .map_err(|e| anyhow!("cannot read the URL list {}: {e}", p.display()))?;
        (b, p.display().to_string())
    };
    UrlList::parse_bytes(&bytes, &name).map_err(|e| anyhow!(e))
}

/// GET with redirects followed (at most [`MAX_REDIRECTS`]); returns the final URL too.
pub(super) async fn get_following(
    connector: &Connector,
    url: &HttpUrl,
    method: &str,
) -> anyhow::Result<(HttpUrl, Fetched)> {
    let mut u = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let f = fetch(connector, &u, method, &u.path, "", true).await?;
        if !matches!(f.head.status, 301 | 302 | 303 | 307 | 308) {
            return Ok((u, f));
        }
        let here = url_string(&u, &u.path);
        let loc = f
            .head
            .header("location")
            .ok_or_else(|| anyhow!("{here}: HTTP {} without a Location", f.head.status))?;
        let next = join_url(&here, loc)
            .ok_or_else(|| anyhow!("{here}: redirect to {loc}, which is not an http(s) URL"))?;
        if u.tls && next.starts_with("http://") {
            bail!("{here}: redirect from https to plain http ({next}) refused");
        }
        u = HttpUrl::parse(&next)?;
    }
    bail!(
        "{}: more than {MAX_REDIRECTS} redirects",
        url_string(url, &url.path)
    )
}

/// A URL: its wattio listing, its directory index, or one file.
async fn resolve_url(connector: &Arc<Connector>, url: &HttpUrl) -> anyhow::Result<Source> {
    let path = url.path.split('#').next().unwrap_or("/").to_string();
    let listing_suffix = format!("/{LISTING_PATH}");
    if path.ends_with(&listing_suffix) {
        return from_listing(connector, url, &path, true)
            .await?
            .ok_or_else(|| unreachable_listing(url, &path));
    }
    if path.ends_with('/') {
        return resolve_directory(connector, url, &path).await;
    }
    // a file, or a directory named without its slash: HEAD tells (a redirect to PATH/, an
    // index page, or wattio serve's 404 for directories)
    let head = fetch(connector, url, "HEAD", &path, "", false).await?;
    let status = head.head.status;
    if matches!(status, 301 | 302 | 303 | 307 | 308) {
        if let Some(loc) = head.head.header("location") {
            let here = url_string(url, &path);
            if let Some(next) = join_url(&here, loc) {
                let n = HttpUrl::parse(&next)?;
                if same_origin(&n, url) && n.path == format!("{path}/") {
                    return resolve_directory(connector, &n, &n.path).await;
                }
            }
        }
    }
    if status == 404 {
        let lp = format!("{path}/{LISTING_PATH}");
        if let Some(s) = from_listing(connector, url, &lp, false).await? {
            return Ok(s);
        }
    }
    if status == 200
        && head
            .head
            .header("content-type")
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("text/html"))
    {
        // an index served without the trailing slash (the page's links are relative to PATH/)
        let page = fetch(connector, url, "GET", &path, "", true).await?;
        let dir = format!("{path}/");
        if page.head.status == 200
            && crate::dirindex::parse_index(
                &page.body,
                page.head.header("content-type"),
                &url_string(url, &dir),
                &dir,
            )
            .is_ok()
        {
            return resolve_directory(connector, url, &dir).await;
        }
    }
    single_file(connector, url).await
}

fn unreachable_listing(url: &HttpUrl, lp: &str) -> anyhow::Error {
    anyhow!(
        "no dataset listing at {}; serve the tree with `wattio serve` or write one with `wattio serve DIR --write-listing`",
        url_string(url, lp)
    )
}

/// The wattio listing at `lp`; `Ok(None)` when the server has none there (unless `required`).
async fn from_listing(
    connector: &Connector,
    url: &HttpUrl,
    lp: &str,
    required: bool,
) -> anyhow::Result<Option<Source>> {
    let f = fetch(connector, url, "GET", lp, "", true).await?;
    if f.head.status != 200 {
        if required {
            bail!(
                "no dataset listing at {} (HTTP {}); serve the tree with `wattio serve` or write one with `wattio serve DIR --write-listing`",
                url_string(url, lp),
                f.head.status
            );
        }
        return Ok(None);
    }
    let listing = Listing::parse(&f.body).map_err(|e| anyhow!("{}: {e}", url_string(url, lp)))?;
    let base = &lp[..lp.len() - LISTING_PATH.len()];
    let mut src = Source::new(SourceKind::Listing, url);
    src.note_ranges(0, &f.head);
    if f.head
        .header("server")
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("wattio"))
    {
        // `wattio serve` answers every file request with `Accept-Ranges: bytes` (its listing
        // is not a file and says nothing of ranges): no probe, one round trip saved
        src.ranges[0] = Some(true);
    }
    src.files = listing
        .files
        .into_iter()
        .map(|e| SourceFile {
            url_path: format!("{base}{}", percent_encode_path(&e.path)),
            rel: e.path,
            origin: 0,
            size: e.size,
            xxh3: e.xxh3,
            blocks: e.blocks.map(BlockDigests::from_listing),
            ..SourceFile::at(String::new(), 0, String::new())
        })
        .collect();
    Ok(Some(src))
}

/// A directory URL (ending with `/`): its wattio listing, else its index. The index is walked
/// in the background: this returns once the root page is read and a file with bytes is known
/// (or the walk has ended), with the rest of the walk in [`Source::more`].
async fn resolve_directory(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    dir: &str,
) -> anyhow::Result<Source> {
    let here = url_string(url, dir);
    let root = crate::dirindex::canonical_path(dir);
    // The index walk starts at once, beside the request for a listing: on a server without
    // one (the usual case) that saves a connection's round trips. With a listing, the walk's
    // receiver is dropped and its tasks stop at their next page.
    let walk = root.clone().map(|root| {
        let (page_tx, page_rx) = unbounded_channel();
        let (batch_tx, batch_rx) = unbounded_channel();
        tokio::spawn(walk_index(
            connector.clone(),
            url.clone(),
            root.clone(),
            page_tx,
        ));
        tokio::spawn(size_pages(
            connector.clone(),
            url.clone(),
            root,
            page_rx,
            batch_tx,
        ));
        batch_rx
    });
    let lp = format!("{dir}{LISTING_PATH}");
    if let Some(s) = from_listing(connector, url, &lp, false).await? {
        return Ok(s);
    }
    let mut more =
        walk.ok_or_else(|| anyhow!("{here}: the path is not valid percent-encoded UTF-8"))?;
    let first = more
        .recv()
        .await
        .ok_or_else(|| anyhow!("{here}: the index walk ended without reading the page"))??;
    let kind = first
        .kind
        .expect("every batch of an index walk names its page's kind");
    let mut src = Source::new(SourceKind::Index(kind), url);
    src.absorb(first);
    src.until_first_bytes(more).await?;
    Ok(src)
}

/// Sizes the files of each page the walk sends (`HEAD` where the index gives no exact size)
/// and passes them on; stops at the first error, which it passes on.
async fn size_pages(
    connector: Arc<Connector>,
    url: HttpUrl,
    root: String,
    mut pages: UnboundedReceiver<anyhow::Result<WalkedPage>>,
    out: UnboundedSender<anyhow::Result<Batch>>,
) {
    while let Some(page) = pages.recv().await {
        let r = match page {
            Ok(p) => size_page(&connector, &url, &root, p).await,
            Err(e) => Err(anyhow!(
                "{} has no wattio listing ({}) and {e:#}; serve the tree with `wattio serve`, turn on the server's directory index (nginx: autoindex on), or list the files in a URL list (-i FILE)",
                url_string(&url, &root),
                LISTING_PATH
            )),
        };
        let failed = r.is_err();
        if out.send(r).is_err() || failed {
            return;
        }
    }
}

/// One index page's files with their sizes: the index's where exact, else `HEAD`'s
/// `Content-Length`, else a one-byte range probe; files none of those sizes are unsized.
async fn size_page(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    root: &str,
    page: WalkedPage,
) -> anyhow::Result<Batch> {
    let without_size: Vec<String> = page
        .files
        .iter()
        .filter(|f| f.1.is_none())
        .map(|f| f.0.clone())
        .collect();
    let heads = if without_size.is_empty() {
        Vec::new()
    } else {
        head_many(connector, url, &without_size, HEAD_CONNECTIONS, HEAD_DEPTH).await?
    };
    let mut heads = heads.into_iter();
    let mut b = Batch {
        kind: Some(page.kind),
        notes: page.notes,
        ..Batch::default()
    };
    let mut accept = None;
    for (path, size) in page.files {
        let mut answer = None;
        let size = match size {
            Some(s) => Some(s),
            None => {
                let h = heads.next().expect("one HEAD per file without a size");
                if h.status != 200 {
                    bail!(
                        "{}: HTTP {} to HEAD, though the index lists it; {}",
                        url_string(url, &path),
                        h.status,
                        SourceKind::Index(page.kind).changed_file_fix().0
                    );
                }
                merge_accept_ranges(&mut accept, &h);
                let n = match h.content_length {
                    Some(n) => Some(n),
                    None => size_by_range_probe(connector, url, &path).await?,
                };
                answer = Some(h);
                n
            }
        };
        let rel = crate::dirindex::relative_name(root, &path).expect("walk keeps named entries");
        let mut f = SourceFile::at(rel, 0, path);
        if let Some(h) = &answer {
            f = f.with_validator(h, url);
        }
        match size {
            Some(n) => b.files.push(SourceFile { size: n, ..f }),
            None => b.unsized_files.push(f),
        }
    }
    b.ranges.extend(accept.map(|r| (0, r)));
    Ok(b)
}

/// The size of a file whose `HEAD` gave no `Content-Length`: from the `Content-Range` of a
/// one-byte range request, or the `Content-Length` of the whole response a server that
/// ignores `Range` sends instead; `None` when neither says (a chunked body, or one that ends
/// with the connection).
pub(super) async fn size_by_range_probe(
    connector: &Connector,
    url: &HttpUrl,
    path: &str,
) -> anyhow::Result<Option<u64>> {
    let f = fetch(connector, url, "GET", path, "Range: bytes=0-0\r\n", false).await?;
    Ok(match (f.head.status, f.head.content_range) {
        (206, Some(cr)) => Some(cr.size),
        // an empty file has no byte 0
        (416, _) => Some(0),
        (200, _) => f.head.content_length,
        (st, _) => bail!(
            "{}: HTTP {st} to a GET of its first byte; check the URL",
            url_string(url, path)
        ),
    })
}

/// One file URL: sized by `HEAD` (redirects followed).
async fn single_file(connector: &Connector, url: &HttpUrl) -> anyhow::Result<Source> {
    let (final_url, f) = get_following(connector, url, "HEAD").await?;
    let here = url_string(url, &url.path);
    let path = final_url.path.split('#').next().unwrap_or("/").to_string();
    // some servers refuse HEAD (405, 501): a GET of the first byte tells the size instead
    let head_refused = matches!(f.head.status, 405 | 501);
    if f.head.status != 200 && !head_refused {
        bail!("{here}: HTTP {}; check the URL", f.head.status);
    }
    let name = crate::urllist::url_file_name(&url_string(url, &url.path))
        .filter(|n| is_safe_relative(n))
        .ok_or_else(|| {
            anyhow!("cannot derive a file name from {here}; give a URL ending in a file name, or a URL list (-i) with out=NAME")
        })?;
    let size = match f.head.content_length.filter(|_| !head_refused) {
        Some(n) => Some(n),
        None => size_by_range_probe(connector, &final_url, &path).await?,
    };
    let mut src = Source::new(SourceKind::FileUrl, &final_url);
    src.note_ranges(0, &f.head);
    let file = SourceFile::at(name, 0, path);
    let file = if head_refused {
        file
    } else {
        file.with_validator(&f.head, &final_url)
    };
    src.add(file, size);
    Ok(src)
}

/// Finds out, for every origin that did not say and has a file that `needs_ranges`, whether it
/// honours `Range`: one request for the first byte of the first such file (`206`: yes;
/// `200`: the server sends whole files only, and the transfer falls back to one stream per
/// file). An origin whose files are all requested whole is not asked: a whole file comes whole
/// either way, and a file found later that needs ranges brings the question then
/// ([`probe_origin`]). The first origin's request goes on a connection from `spare` (opened
/// ahead, handshakes done) when there is one, and the connection goes back there for a
/// channel.
pub(super) async fn probe_ranges(
    connector: &Connector,
    src: &mut Source,
    spare: &mut Vec<(Instant, Stream)>,
    needs_ranges: &dyn Fn(&SourceFile) -> bool,
) -> anyhow::Result<()> {
    for o in 0..src.origins.len() {
        if src.ranges[o].is_some() {
            continue;
        }
        let needing = |f: &&SourceFile| f.origin == o && f.size > 0 && needs_ranges(f);
        let Some(f) = src.files.iter().find(needing) else {
            continue;
        };
        let on_spare = match spare.pop().filter(|_| o == 0) {
            Some((at, s)) => match probe_on(s, &src.origins[o], &f.url_path).await {
                Ok((head, back)) => {
                    spare.extend(back.map(|s| (at, s)));
                    Some(head.status != 200)
                }
                // closed meanwhile: a fresh connection asks instead
                Err(_) => None,
            },
            None => None,
        };
        let honours = match on_spare {
            Some(h) => h,
            None => probe_origin(connector, &src.origins[o], &f.url_path).await?,
        };
        src.ranges[o] = Some(honours);
    }
    Ok(())
}

/// Whether `origin` honours `Range`, asked with a request for the first byte of its
/// non-empty file at `path` on a new connection (`206`: yes; `200`: it sends whole files).
pub(super) async fn probe_origin(
    connector: &Connector,
    origin: &HttpUrl,
    path: &str,
) -> anyhow::Result<bool> {
    let f = fetch(
        connector,
        origin,
        "GET",
        path,
        "Range: bytes=0-0\r\n",
        false,
    )
    .await?;
    Ok(f.head.status != 200)
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
