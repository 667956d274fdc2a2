//! Discovery's one entry: [`discover`] turns the source (a URL — a wattio listing, a directory
//! index or one file — or a URL list, with `--checksum-file`) into [`Discovered`], the files
//! with their sizes, digests and mirrors that the transfer then plans and fetches. How each
//! kind of source is read is `source` (with `walk` for directory indexes and `mirrors` for URL
//! lists); `published` matches the checksum file.

pub(crate) mod found;
pub(crate) mod published;
pub(crate) mod source;
pub(crate) mod url_list;
pub(crate) mod walk;

use crate::client::net::conn::{Connector, Stream};
use crate::client::net::url::HttpUrl;
use crate::client::options::{DiscoveryOptions, Notice};
use crate::error::EngineResult;
use crate::summary::ChecksumFileReport;
use found::{Discovery, Source, SourceFile};
use source::{probe_ranges, resolve};
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;
use wattio_progress::Sink;

/// What discovery found before the transfer starts, and what it is still finding.
pub(crate) struct Discovered {
    /// The files found so far (sized, with their digests and mirrors), their servers and what
    /// those said of `Range`, the notes to tell and the URL-list lines that failed.
    pub(crate) src: Source,
    /// The rest of discovery while it goes on (an index walk, a URL list being sized);
    /// `None` once everything is known.
    pub(crate) more: Option<Discovery>,
    /// What `--checksum-file` matched, for the summary.
    pub(crate) checksum_report: Option<ChecksumFileReport>,
    /// Connections opened ahead to the first server, still usable: the first channels take
    /// them.
    pub(crate) spare: Vec<(Instant, Stream)>,
}

/// Finds what `opts` asks to fetch, starting at `url` (the first URL, see
/// [`source::first_url`]): resolves the source while the connections of `preconnect`
/// open, asks the servers of files that `needs_ranges` whether they honour `Range`, attaches
/// the checksum file, and tells the source's notes.
pub(crate) async fn discover(
    connector: &Arc<Connector>,
    opts: &DiscoveryOptions,
    notices: &Sink<Notice>,
    url: &HttpUrl,
    preconnect: Option<JoinHandle<Vec<(Instant, Stream)>>>,
    needs_ranges: &dyn Fn(&SourceFile) -> bool,
) -> EngineResult<Discovered> {
    let mut src = resolve(connector, opts, url).await?;
    let mut spare = match preconnect {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    if src.origins[0].origin() != url.origin() {
        // the URL redirected elsewhere: the connections opened ahead go to the wrong server
        spare.clear();
    }
    probe_ranges(connector, &mut src, &mut spare, needs_ranges).await?;
    if opts.checksum_file.is_some() {
        // a checksum file names files anywhere in the tree: match it against all of them
        src.absorb_all().await?;
    }
    let more = src.more.take();
    let checksum_report = match &opts.checksum_file {
        Some(spec) => {
            let (report, plain_http) = published::attach(connector, spec, &mut src).await?;
            if plain_http {
                notices.tell(&Notice::Warning(format!(
                    "the checksum file {spec} came over plain http://: anyone on the way can change it, and with it what \"verified\" means; fetch it over https:// or give a local copy"
                )));
            }
            Some(report)
        }
        None => None,
    };
    for note in &src.notes {
        notices.tell(&Notice::Note(note.to_string()));
    }
    Ok(Discovered {
        src,
        more,
        checksum_report,
        spare,
    })
}
