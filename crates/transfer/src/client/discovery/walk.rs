//! Walking a directory index: the pages under a root path, a few at a time, each parsed by
//! [`crate::dirindex`], never leaving the root's origin or path.

use crate::client::net::conn::Connector;
use crate::client::net::fetch::fetch;
use crate::client::net::url::url_string;
use crate::client::net::url::HttpUrl;
use crate::dirindex::{join_url, parse_index, relative_name, IndexKind};
use crate::error::{fail, failure, EngineResult};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc::Sender;

/// Index pages fetched at once.
const PAGES_AT_ONCE: usize = 4;
/// Deepest directory followed below the root: deeper trees are usually a symbolic link that
/// loops back on the server (nginx and Apache follow them).
pub(crate) const MAX_DEPTH: usize = 64;

/// One index page's findings, sent as soon as the page is read.
pub(crate) struct WalkedPage {
    pub(crate) kind: IndexKind,
    /// Its files: canonical origin-form path, and the size where the index states it exactly
    /// (a file another page listed too comes again).
    pub(crate) files: Vec<(String, Option<u64>)>,
    pub(crate) notes: Vec<String>,
}

/// Fetches one index page (a redirect that stays under the root is followed once, e.g. a
/// server that canonicalises a name) and parses it.
async fn page(
    connector: &Connector,
    url: &HttpUrl,
    path: &str,
    root: &str,
) -> EngineResult<(String, crate::dirindex::IndexPage)> {
    let mut p = path.to_string();
    for _ in 0..2 {
        let here = url_string(url, &p);
        let f = fetch(connector, url, "GET", &p, "", true).await?;
        match f.head.status {
            200 => {
                let page = parse_index(&f.body, f.head.header("content-type"), &here, root)
                    .map_err(|e| failure!(InvalidSource, "{here} is {e}"))?;
                return Ok((p, page));
            }
            301 | 302 | 303 | 307 | 308 => {
                let next = f
                    .head
                    .header("location")
                    .and_then(|l| join_url(&here, l))
                    .and_then(|n| HttpUrl::parse(&n).ok())
                    .filter(|n| {
                        n.tls == url.tls
                            && n.port == url.port
                            && n.host.eq_ignore_ascii_case(&url.host)
                            && n.path.starts_with(root)
                    })
                    .ok_or_else(|| {
                        failure!(
                            InvalidSource,
                            "{here} redirects outside {}",
                            url_string(url, root)
                        )
                    })?;
                p = next.path;
            }
            st => fail!(InvalidSource, "the index page {here} answers HTTP {st}"),
        }
    }
    fail!(
        InvalidSource,
        "{} redirects in a loop",
        url_string(url, path)
    )
}

/// Walks the index pages under `root` (a canonical path ending with `/`) on `url`'s server,
/// sending each page's findings to `found` as soon as it is read (the root page first), so
/// files can be fetched while the walk goes on. Ends at the first error, which it sends.
pub(crate) async fn walk_index(
    connector: Arc<Connector>,
    url: HttpUrl,
    root: String,
    found: Sender<EngineResult<WalkedPage>>,
) {
    if let Err(e) = walk(&connector, &url, &root, &found).await {
        let _ = found.send(Err(e)).await;
    }
}

async fn walk(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    root: &str,
    found: &Sender<EngineResult<WalkedPage>>,
) -> EngineResult<()> {
    let mut seen_dirs: HashSet<String> = HashSet::from([root.to_string()]);
    let mut todo: VecDeque<String> = VecDeque::from([root.to_string()]);
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < PAGES_AT_ONCE {
            let Some(dir) = todo.pop_front() else { break };
            let (c, u, r) = (connector.clone(), url.clone(), root.to_string());
            running.spawn(async move { page(&c, &u, &dir, &r).await });
        }
        let Some(done) = running.join_next().await else {
            return Ok(());
        };
        let (_, page) = done.map_err(|e| failure!(Other, "index task failed: {e}"))??;
        let mut files = Vec::new();
        let mut notes = Vec::new();
        // a file listed twice on a page is sent once (its first entry); one listed again on
        // another page is dropped further on (`Source::absorb`, the intake's claims), which
        // hold the names anyway: a set of every path here would cost as much again
        let mut on_page: HashSet<String> = HashSet::new();
        for e in page.entries {
            let Some(rel) = relative_name(root, &e.path) else {
                notes.push(format!(
                    "{} skipped: its name is not UTF-8 or not a plain relative path",
                    url_string(url, &e.path)
                ));
                continue;
            };
            if e.is_dir {
                if rel.split('/').count() > MAX_DEPTH {
                    fail!(
                        InvalidSource,
                        "{} is more than {MAX_DEPTH} directories deep (a symbolic link looping on the server?)",
                        url_string(url, &e.path)
                    );
                }
                if seen_dirs.insert(e.path.clone()) {
                    todo.push_back(e.path);
                }
            } else if on_page.insert(e.path.clone()) {
                files.push((e.path, e.size));
            }
        }
        files.sort();
        let page = WalkedPage {
            kind: page.kind,
            files,
            notes,
        };
        if found.send(Ok(page)).await.is_err() {
            // nobody listens any more: the transfer ended
            return Ok(());
        }
    }
}
