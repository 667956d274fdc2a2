//! What to fetch: the files of a wattio listing, or the single file a URL names.

use super::conn::Connector;
use super::response::simple_request;
use super::url::HttpUrl;
use crate::checksum;
use crate::http::percent_encode_path;
use crate::listing::{is_safe_relative, Listing, LISTING_PATH};
use anyhow::{anyhow, bail};

/// One file of the source, as its listing (or `HEAD`) describes it.
pub(super) struct SourceFile {
    /// Path relative to the destination.
    pub(super) rel: String,
    /// Origin-form request path (percent-encoded).
    pub(super) url_path: String,
    pub(super) size: u64,
    /// Whole-file XXH3-64, hex.
    pub(super) xxh3: Option<String>,
    pub(super) blocks: Option<BlockDigests>,
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

/// The files `url` names: a directory URL (or one naming the listing) reads the wattio
/// listing; any other URL is one file, sized by `HEAD`.
pub(super) async fn resolve_source(
    connector: &Connector,
    url: &HttpUrl,
) -> anyhow::Result<Vec<SourceFile>> {
    let path = url.path.split('?').next().unwrap_or("/").to_string();
    let listing_suffix = format!("/{LISTING_PATH}");
    let listing_path = if path.ends_with('/') {
        Some(format!("{path}{LISTING_PATH}"))
    } else if path.ends_with(&listing_suffix) {
        Some(path.clone())
    } else {
        None
    };
    if let Some(lp) = listing_path {
        let (status, _, body) = simple_request(connector, url, "GET", &lp).await?;
        if status != 200 {
            bail!(
                "no dataset listing at {}{lp} (HTTP {status}); serve the tree with `wattio serve` or write one with `wattio serve DIR --write-listing`",
                url.origin()
            );
        }
        let listing = Listing::parse(&body).map_err(|e| anyhow!("{}{lp}: {e}", url.origin()))?;
        let base = &lp[..lp.len() - LISTING_PATH.len()];
        return Ok(listing
            .files
            .into_iter()
            .map(|e| SourceFile {
                url_path: format!("{base}{}", percent_encode_path(&e.path)),
                rel: e.path,
                size: e.size,
                xxh3: e.xxh3,
                blocks: e.blocks.map(BlockDigests::from_listing),
            })
            .collect());
    }
    let (status, headers, _) = simple_request(connector, url, "HEAD", &path).await?;
    if status != 200 {
        bail!("{}{path}: HTTP {status}; check the URL", url.origin());
    }
    let size = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        .ok_or_else(|| anyhow!("{}{path}: no Content-Length; cannot split it", url.origin()))?;
    let name = path.rsplit('/').next().unwrap_or("");
    let name = crate::http::percent_decode(name).unwrap_or_default();
    if !is_safe_relative(&name) {
        bail!("cannot derive a file name from {path:?}; give a URL ending in a file name");
    }
    Ok(vec![SourceFile {
        rel: name,
        url_path: path,
        size,
        xxh3: None,
        blocks: None,
    }])
}
