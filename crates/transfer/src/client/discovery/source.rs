//! What to fetch, tried in order: a wattio listing, a directory index (nginx, Apache, Python
//! `http.server`), a URL list (`-i FILE`), or the single file a URL names; with each file's
//! size, its origin, whether that origin honours `Range`, and the checksums the source gives.

use super::found::{
    merge_accept_ranges, same_origin, Batch, BlockDigests, Source, SourceFile, SourceKind,
};
use super::walk::{walk_index, WalkedPage};
use crate::client::net::conn::{Connector, Stream};
use crate::client::net::fetch::{
    fetch, get_following, head_many, probe_on, probe_origin, size_by_range_probe, HEAD_CONNECTIONS,
    HEAD_DEPTH,
};
use crate::client::net::url::url_string;
use crate::client::net::url::HttpUrl;
use crate::client::options::DiscoveryOptions;
use crate::dirindex::join_url;
use crate::error::{fail, failure, EngineError, EngineResult, Failure, Kind};
use crate::urllist::UrlList;
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::{channel, Receiver, Sender};
use wattio_http::percent_encode_path;
use wattio_http::{is_safe_relative, Listing, LISTING_PATH};

/// Finds what `opts` asks to fetch (whether its servers honour `Range` is [`probe_ranges`]'s
/// to find out).
pub(crate) async fn resolve(
    connector: &Arc<Connector>,
    opts: &DiscoveryOptions,
    first: &HttpUrl,
) -> EngineResult<Source> {
    match &opts.input_file {
        Some(p) => {
            let list = read_url_list(p)?;
            super::url_list::resolve_url_list(connector, list, &url_list_name(p), first).await
        }
        None => resolve_url(connector, first).await,
    }
}

/// The first URL of a transfer: the source URL, or the first reachable URL of the URL list's
/// first line (read here, and again by [`resolve`]: standard input is read once and kept);
/// `measure`: the round-trip time will be measured to it (see
/// [`first_reachable`](super::url_list::first_reachable)).
pub(crate) async fn first_url(opts: &DiscoveryOptions, measure: bool) -> EngineResult<HttpUrl> {
    match &opts.input_file {
        Some(p) => super::url_list::first_reachable(&read_url_list(p)?, measure).await,
        None => Ok(HttpUrl::parse(&opts.source)?),
    }
}

/// Every URL of the URL list at `p` (mirrors included), as written.
pub(crate) fn list_urls(p: &std::path::Path) -> EngineResult<Vec<String>> {
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

fn read_url_list(p: &std::path::Path) -> EngineResult<UrlList> {
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
            .map_err(|e| failure!(Usage, "cannot read the URL list from standard input: {e}"))?;
        (b, "standard input".to_string())
    } else {
        let b = std::fs::read(p)
            .map_err(|e| failure!(Usage, "cannot read the URL list {}: {e}", p.display()))?;
        (b, p.display().to_string())
    };
    UrlList::parse_bytes(&bytes, &name).map_err(|e| failure!(Usage, "{e}").into())
}

/// A URL: its wattio listing, its directory index, or one file.
async fn resolve_url(connector: &Arc<Connector>, url: &HttpUrl) -> EngineResult<Source> {
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
                let n = HttpUrl::parse(&next).map_err(|e| Kind::Protocol.msg(e.message))?;
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

fn unreachable_listing(url: &HttpUrl, lp: &str) -> EngineError {
    failure!(
        InvalidSource,
        "no dataset listing at {}; serve the tree with `wattio serve` or write one with `wattio serve DIR --write-listing`",
        url_string(url, lp)
    )
    .into()
}

/// The wattio listing at `lp`; `Ok(None)` when the server has none there (unless `required`).
async fn from_listing(
    connector: &Connector,
    url: &HttpUrl,
    lp: &str,
    required: bool,
) -> EngineResult<Option<Source>> {
    let f = fetch(connector, url, "GET", lp, "", true).await?;
    if f.head.status != 200 {
        if required {
            fail!(
                InvalidSource,
                "no dataset listing at {} (HTTP {}); serve the tree with `wattio serve` or write one with `wattio serve DIR --write-listing`",
                url_string(url, lp),
                f.head.status
            );
        }
        return Ok(None);
    }
    let listing = Listing::parse(&f.body)
        .map_err(|e| failure!(InvalidSource, "{}: {e}", url_string(url, lp)))?;
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
) -> EngineResult<Source> {
    let here = url_string(url, dir);
    let root = crate::dirindex::canonical_path(dir);
    // The index walk starts at once, beside the request for a listing: on a server without
    // one (the usual case) that saves a connection's round trips. With a listing, the walk's
    // receiver is dropped and its tasks stop at their next page.
    let walk = root.clone().map(|root| {
        // a page or two read ahead of the sizing, and of the transfer (see `Discovery`)
        let (page_tx, page_rx) = channel(2);
        let (batch_tx, batch_rx) = channel(2);
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
    let mut more = walk.ok_or_else(|| {
        failure!(
            InvalidSource,
            "{here}: the path is not valid percent-encoded UTF-8"
        )
    })?;
    let first = more.recv().await.ok_or_else(|| {
        failure!(
            Other,
            "{here}: the index walk ended without reading the page"
        )
    })??;
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
    mut pages: Receiver<EngineResult<WalkedPage>>,
    out: Sender<EngineResult<Batch>>,
) {
    while let Some(page) = pages.recv().await {
        let r = match page {
            Ok(p) => size_page(&connector, &url, &root, p).await,
            Err(e) => {
                // a server that cannot be reached stays that
                let kind = Failure::kind_in(&e)
                    .filter(|k| matches!(k, Kind::Unreachable | Kind::Tls))
                    .unwrap_or(Kind::InvalidSource);
                Err(kind
                    .msg(format!(
                        "{} has no wattio listing ({}) and {}; serve the tree with `wattio serve`, turn on the server's directory index (nginx: autoindex on), or list the files in a URL list (-i FILE)",
                        url_string(&url, &root),
                        LISTING_PATH,
                        e.one_line()
                    ))
                    .into())
            }
        };
        let failed = r.is_err();
        if out.send(r).await.is_err() || failed {
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
) -> EngineResult<Batch> {
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
                    fail!(
                        InvalidSource,
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

/// One file URL: sized by `HEAD` (redirects followed).
async fn single_file(connector: &Connector, url: &HttpUrl) -> EngineResult<Source> {
    let (final_url, f) = get_following(connector, url, "HEAD").await?;
    let here = url_string(url, &url.path);
    let path = final_url.path.split('#').next().unwrap_or("/").to_string();
    // some servers refuse HEAD (405, 501): a GET of the first byte tells the size instead
    let head_refused = matches!(f.head.status, 405 | 501);
    if f.head.status != 200 && !head_refused {
        fail!(
            InvalidSource,
            "{here}: HTTP {}; check the URL",
            f.head.status
        );
    }
    let name = crate::urllist::url_file_name(&url_string(url, &url.path))
        .filter(|n| is_safe_relative(n))
        .ok_or_else(|| {
            failure!(
                Usage,
                "cannot derive a file name from {here}; give a URL ending in a file name, or a URL list (-i) with out=NAME"
            )
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
pub(crate) async fn probe_ranges(
    connector: &Connector,
    src: &mut Source,
    spare: &mut Vec<(Instant, Stream)>,
    needs_ranges: &dyn Fn(&SourceFile) -> bool,
) -> EngineResult<()> {
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
