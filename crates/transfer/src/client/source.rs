//! What to fetch, tried in order: a wattio listing, a directory index (nginx, Apache, Python
//! `http.server`), a URL list (`-i FILE`), or the single file a URL names; with each file's
//! size, its origin, whether that origin honours `Range`, and the checksums the source gives.

use super::conn::Connector;
use super::fetch::{fetch, head_many, Fetched};
use super::mirrors::MirrorPlan;
use super::options::TransferOptions;
use super::url::HttpUrl;
use super::walk::walk_index;
use crate::checksum::{self, Algorithm};
use crate::dirindex::{join_url, IndexKind};
use crate::http::{percent_encode_path, ResponseHead};
use crate::listing::{is_safe_relative, Listing, LISTING_PATH};
use crate::urllist::UrlList;
use anyhow::{anyhow, bail};
use std::io::Read;
use std::sync::Arc;

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
        }
    }
}

/// A file's expected block checksums (from its listing entry).
#[derive(Debug, Clone)]
pub(super) struct BlockDigests {
    pub(super) size: u64,
    pub(super) xxh3: Vec<u64>,
}

impl BlockDigests {
    pub(super) fn from_listing(b: crate::listing::Blocks) -> BlockDigests {
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
}

/// The absolute URL of `path` (origin form) on `u`'s server.
pub(super) fn url_string(u: &HttpUrl, path: &str) -> String {
    format!("{}{path}", u.origin())
}

fn same_origin(a: &HttpUrl, b: &HttpUrl) -> bool {
    a.tls == b.tls && a.port == b.port && a.host.eq_ignore_ascii_case(&b.host)
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
        }
    }

    pub(super) fn origin_index(&mut self, u: &HttpUrl) -> usize {
        match self.origins.iter().position(|o| same_origin(o, u)) {
            Some(i) => i,
            None => {
                self.origins.push(u.clone());
                self.ranges.push(None);
                self.origins.len() - 1
            }
        }
    }

    /// Adds a file of known or unknown size.
    pub(super) fn add(&mut self, f: SourceFile, size: Option<u64>) {
        match size {
            Some(n) => self.files.push(SourceFile { size: n, ..f }),
            None => self.unsized_files.push(f),
        }
    }

    pub(super) fn note_ranges(&mut self, origin: usize, h: &ResponseHead) {
        if let Some(r) = accept_ranges(h) {
            // one answer that says `bytes` is enough: the origin serves ranges
            let cur = &mut self.ranges[origin];
            *cur = Some(cur.unwrap_or(false) || r);
        }
    }
}

/// Finds what `opts` asks to fetch.
pub(super) async fn resolve(
    connector: &Arc<Connector>,
    opts: &TransferOptions,
    first: &HttpUrl,
) -> anyhow::Result<Source> {
    let mut src = match &opts.input_file {
        Some(p) => {
            let list = read_url_list(p)?;
            super::mirrors::resolve_url_list(connector, list, &url_list_name(p), first).await?
        }
        None => resolve_url(connector, first).await?,
    };
    probe_ranges(connector, &mut src).await?;
    Ok(src)
}

/// The first URL of a transfer: the source URL, or the first reachable URL of the URL list's
/// first line (read here, and again by [`resolve`]: standard input is read once and kept).
pub(super) async fn first_url(opts: &TransferOptions) -> anyhow::Result<HttpUrl> {
    match &opts.input_file {
        Some(p) => super::mirrors::first_reachable(&read_url_list(p)?).await,
        None => HttpUrl::parse(&opts.source),
    }
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
            expect: None,
            mirrors: None,
        })
        .collect();
    Ok(Some(src))
}

/// A directory URL (ending with `/`): its wattio listing, else its index.
async fn resolve_directory(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    dir: &str,
) -> anyhow::Result<Source> {
    let lp = format!("{dir}{LISTING_PATH}");
    if let Some(s) = from_listing(connector, url, &lp, false).await? {
        return Ok(s);
    }
    let here = url_string(url, dir);
    let root = crate::dirindex::canonical_path(dir)
        .ok_or_else(|| anyhow!("{here}: the path is not valid percent-encoded UTF-8"))?;
    let walked = walk_index(connector, url, &root).await.map_err(|e| {
        anyhow!(
            "{here} has no wattio listing ({}) and {e:#}; serve the tree with `wattio serve`, turn on the server's directory index (nginx: autoindex on), or list the files in a URL list (-i FILE)",
            LISTING_PATH
        )
    })?;
    let mut src = Source::new(SourceKind::Index(walked.kind), url);
    src.notes = walked.notes;
    let without_size: Vec<usize> = (0..walked.files.len())
        .filter(|&i| walked.files[i].1.is_none())
        .collect();
    let paths: Vec<String> = without_size
        .iter()
        .map(|&i| walked.files[i].0.clone())
        .collect();
    let heads = head_many(connector, url, &paths, HEAD_CONNECTIONS, HEAD_DEPTH).await?;
    let mut sizes: Vec<Option<u64>> = walked.files.iter().map(|f| f.1).collect();
    for (k, h) in without_size.into_iter().zip(heads) {
        let path = &walked.files[k].0;
        if h.status != 200 {
            bail!(
                "{}: HTTP {} to HEAD, though the index lists it; {}",
                url_string(url, path),
                h.status,
                SourceKind::Index(walked.kind).changed_file_fix().0
            );
        }
        src.note_ranges(0, &h);
        sizes[k] = h.content_length;
    }
    for ((path, _), size) in walked.files.into_iter().zip(sizes) {
        let size = match size {
            Some(s) => Some(s),
            None => size_by_range_probe(connector, url, &path).await?,
        };
        let rel = crate::dirindex::relative_name(&root, &path).expect("walk keeps named entries");
        src.add(SourceFile::at(rel, 0, path), size);
    }
    Ok(src)
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
    src.add(SourceFile::at(name, 0, path), size);
    Ok(src)
}

/// Finds out, for every origin that did not say, whether it honours `Range`: one request for
/// the first byte of its first non-empty file (`206`: yes; `200`: the server sends whole files
/// only, and the transfer falls back to one stream per file).
async fn probe_ranges(connector: &Connector, src: &mut Source) -> anyhow::Result<()> {
    for o in 0..src.origins.len() {
        if src.ranges[o].is_some() {
            continue;
        }
        let Some(f) = src.files.iter().find(|f| f.origin == o && f.size > 0) else {
            src.ranges[o] = Some(true); // nothing to split
            continue;
        };
        let r = fetch(
            connector,
            &src.origins[o],
            "GET",
            &f.url_path,
            "Range: bytes=0-0\r\n",
            false,
        )
        .await?;
        src.ranges[o] = Some(r.head.status != 200);
    }
    Ok(())
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
        crate::http::parse_response_head(raw.as_bytes())
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
