//! Files no server gives a size for (no `Content-Length` on `HEAD` or `GET`, and no `Range`):
//! each comes as one stream — a chunked body, or one that ends with the connection — as curl,
//! wget and aria2 fetch it. The tuners plan with sizes, so these run beside the planned
//! transfer, one at a time, on a connection of their own; their bytes count in the summary.
//! Nothing says how much of such a file a cut-short stream missed, so an interrupted one is
//! fetched again whole.

use super::conn::Connector;
use super::fetch::ChunkedDecoder;
use super::published::mismatch_message;
use super::resume::part_name;
use super::source::{url_string, SourceFile};
use super::url::HttpUrl;
use crate::checksum;
use crate::http::parse_response_head;
use anyhow::{anyhow, bail, Context};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How a streamed file ended.
pub(super) enum Streamed {
    /// Fetched, this many bytes (and matched the publisher's digest, when there is one).
    Fetched(u64),
    /// Already in the destination, this many bytes, matching the publisher's digest.
    Skipped(u64),
    /// Its digest did not match twice: the message says why a rerun will not help.
    Refused(String),
}

/// Fetches `f` from `origin` into `dest`, counting its bytes in `received`; up to `retries`
/// attempts for connection failures, and one more fetch when the publisher's digest does not
/// match.
pub(super) async fn stream_file(
    connector: &Connector,
    origin: &HttpUrl,
    f: &SourceFile,
    dest: &Path,
    retries: u32,
    received: &AtomicU64,
) -> anyhow::Result<Streamed> {
    let final_path = dest.join(&f.rel);
    if let Some(e) = &f.expect {
        if checksum::file_digest(e.algo, &final_path).ok().as_deref() == Some(&e.digest[..]) {
            let len = std::fs::metadata(&final_path).map_or(0, |m| m.len());
            return Ok(Streamed::Skipped(len));
        }
    }
    if let Some(parent) = final_path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let part = part_name(&final_path, ".wattio-part");
    let mut failures = 0;
    let mut mismatches = 0;
    loop {
        match stream_once(connector, origin, f, &part, received).await {
            Ok((len, digest)) => {
                if let (Some(e), Some(d)) = (&f.expect, digest) {
                    if d != e.digest {
                        mismatches += 1;
                        if mismatches > 1 {
                            let _ = std::fs::remove_file(&part);
                            return Ok(Streamed::Refused(mismatch_message(&f.rel, e)));
                        }
                        continue;
                    }
                }
                std::fs::rename(&part, &final_path)
                    .with_context(|| format!("cannot rename into {}", final_path.display()))?;
                return Ok(Streamed::Fetched(len));
            }
            Err(e) => {
                failures += 1;
                if failures > retries {
                    return Err(e.context(format!(
                        "giving up on {} after {failures} attempts",
                        url_string(origin, &f.url_path)
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100u64 << failures.min(4))).await;
            }
        }
    }
}

/// One attempt: the whole body into `part`, hashed on the way with the publisher's algorithm.
async fn stream_once(
    connector: &Connector,
    origin: &HttpUrl,
    f: &SourceFile,
    part: &Path,
    received: &AtomicU64,
) -> anyhow::Result<(u64, Option<Vec<u8>>)> {
    let here = url_string(origin, &f.url_path);
    let mut s = connector.connect(origin).await?;
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\nConnection: close\r\n\r\n",
        f.url_path,
        origin.authority()
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let silent = || anyhow!("{here}: the server stalled for 60 s");
    let head = loop {
        if let Some((h, n)) = parse_response_head(&pending)? {
            pending.drain(..n);
            break h;
        }
        let n = tokio::time::timeout(Duration::from_secs(60), s.read(&mut buf))
            .await
            .map_err(|_| silent())??;
        if n == 0 {
            bail!("{here}: the server closed the connection without an answer");
        }
        pending.extend_from_slice(&buf[..n]);
    };
    if head.status != 200 {
        bail!("{here}: HTTP {}", head.status);
    }
    let mut chunked = head
        .transfer_encoding
        .as_deref()
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
        .then(ChunkedDecoder::default);
    let length = if chunked.is_some() {
        None
    } else {
        head.content_length
    };
    let mut out = std::fs::File::create(part)
        .with_context(|| format!("cannot write {}; check the disk", part.display()))?;
    let mut hasher = f.expect.as_ref().map(|e| e.algo.hasher());
    let mut body = Vec::with_capacity(buf.len());
    let mut written = 0u64;
    let mut input = pending;
    loop {
        body.clear();
        match chunked.as_mut() {
            // what follows the last chunk (nothing, with Connection: close) is not body
            Some(d) => {
                d.feed(&input, &mut body)
                    .map_err(|e| anyhow!("{here}: {e}"))?;
            }
            None => {
                let take = length.map_or(input.len(), |l| input.len().min((l - written) as usize));
                body.extend_from_slice(&input[..take]);
            }
        }
        if !body.is_empty() {
            out.write_all(&body)
                .with_context(|| format!("cannot write {}; check the disk", part.display()))?;
            if let Some(h) = hasher.as_mut() {
                h.update(&body);
            }
            written += body.len() as u64;
            received.fetch_add(body.len() as u64, Ordering::Relaxed);
        }
        let complete = match (&chunked, length) {
            (Some(d), _) => d.done(),
            (None, Some(l)) => written >= l,
            (None, None) => false,
        };
        if complete {
            break;
        }
        let n = tokio::time::timeout(Duration::from_secs(60), s.read(&mut buf))
            .await
            .map_err(|_| silent())??;
        if n == 0 {
            if chunked.is_some() || length.is_some() {
                bail!("{here}: the connection closed mid-body");
            }
            // the body ends with the connection
            break;
        }
        input = buf[..n].to_vec();
    }
    Ok((written, hasher.map(|h| h.finish())))
}
