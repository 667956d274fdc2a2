//! Files no server gives a size for (no `Content-Length` on `HEAD` or `GET`, and no `Range`):
//! each comes as one stream — a chunked body, or one that ends with the connection — as curl,
//! wget and aria2 fetch it. The tuners plan with sizes, so these run beside the planned
//! transfer, one at a time, on a connection of their own; their bytes count in the summary.
//! Nothing says how much of such a file a cut-short stream missed, so an interrupted one is
//! fetched again whole. [`spawn_streaming`] fetches them, one after another, while the control
//! loop runs the planned transfer.

use super::dest::{with_suffix, Dest, Entry, PART_SUFFIX};
use super::state::Shared;
use super::verify::mismatch;
use crate::client::discovery::found::SourceFile;
use crate::client::net::conn::{Connector, Stream};
use crate::client::net::fetch::{unterminated, ChunkedDecoder, Deadline};
use crate::client::net::url::url_string;
use crate::client::net::url::HttpUrl;
use crate::error::{fail, failure, EngineError, EngineResult, Failure, Kind};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use wattio_http::checksum;
use wattio_http::{parse_response_head, ResponseHead};

/// How a streamed file ended.
pub(crate) enum Streamed {
    /// Fetched, this many bytes (and matched the publisher's digest, when there is one).
    Fetched(u64),
    /// Already in the destination, this many bytes, matching the publisher's digest.
    Skipped(u64),
    /// Its digest did not match twice: the message says why a rerun will not help.
    Refused(Failure),
}

/// Fetches `f` from `origin` into `dest`, counting its bytes in `received`; up to `retries`
/// attempts for connection failures, and one more fetch when the publisher's digest does not
/// match. A body that ends with the connection is taken only where its end can be trusted:
/// over TLS (rustls refuses an end without `close_notify`) or with the publisher's digest.
pub(crate) async fn stream_file(
    connector: &Connector,
    origin: &HttpUrl,
    f: &SourceFile,
    dest: &Arc<Dest>,
    retries: u32,
    received: &AtomicU64,
    reserved: &(dyn Fn() -> u64 + Sync),
) -> EngineResult<Streamed> {
    if let Some(e) = &f.expect {
        let same = dest
            .open_read(&f.rel)
            .ok()
            .and_then(|file| checksum::file_digest(e.algo, &file).ok())
            .is_some_and(|d| d == e.digest);
        if same {
            let len = match dest.entry(&f.rel) {
                Ok(Some(Entry::File(n))) => n,
                _ => 0,
            };
            return Ok(Streamed::Skipped(len));
        }
    }
    let part = with_suffix(&f.rel, PART_SUFFIX);
    let mut failures = 0;
    let mut mismatches = 0;
    loop {
        match stream_once(connector, origin, f, dest, &part, received, reserved).await {
            Ok((len, digest)) => {
                if let (Some(e), Some(d)) = (&f.expect, digest) {
                    if d != e.digest {
                        mismatches += 1;
                        if mismatches > 1 {
                            let _ = dest.remove(&part);
                            return Ok(Streamed::Refused(mismatch(&f.rel, e)));
                        }
                        continue;
                    }
                }
                dest.rename_into_place(&part, &f.rel)
                    .map_err(|e| dest.failed(&f.rel, "rename into", &e))?;
                return Ok(Streamed::Fetched(len));
            }
            Err(e) => {
                if let EngineError::Refused(why) = e {
                    let _ = dest.remove(&part);
                    return Ok(Streamed::Refused(why));
                }
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

/// Bytes of DEST's free space a stream leaves for the rest (besides what the planned
/// transfer still needs).
const STREAM_SPARE: u64 = 64 << 20;
/// How often a stream checks DEST's free space.
const STREAM_SPACE_CHECK: u64 = 16 << 20;

/// Reads the response head (within `deadline`); returns it with the bytes after it.
async fn read_head(
    s: &mut Stream,
    deadline: &mut Deadline,
    buf: &mut [u8],
    here: &str,
) -> EngineResult<(ResponseHead, Vec<u8>)> {
    let mut pending: Vec<u8> = Vec::new();
    loop {
        if let Some((h, n)) = parse_response_head(&pending)? {
            pending.drain(..n);
            return Ok((h, pending));
        }
        let n = deadline.read(s, buf, here).await?;
        if n == 0 {
            fail!(
                Protocol,
                "{here}: the server closed the connection without an answer"
            );
        }
        pending.extend_from_slice(&buf[..n]);
    }
}

/// Refuses a stream with no announced end once DEST's free space drops below what the planned
/// transfer still needs (`reserved`) plus [`STREAM_SPARE`].
fn check_room(
    dest: &Dest,
    reserved: &(dyn Fn() -> u64 + Sync),
    written: u64,
    here: &str,
) -> EngineResult<()> {
    let free = dest.free_bytes().unwrap_or(u64::MAX);
    let needed_bytes = reserved().saturating_add(STREAM_SPARE);
    if free >= needed_bytes {
        return Ok(());
    }
    let no_space = Kind::NoSpace {
        needed_bytes,
        free_bytes: free,
    };
    Err(EngineError::Refused(no_space.msg(format!(
        "{here}: still sending after {written} bytes with no end announced, and {} has {free} bytes free, which the rest of the transfer needs; free some space, or fetch that file on its own",
        dest.shown("")
    ))))
}

/// One attempt: the whole body into `part`, hashed on the way with the publisher's algorithm,
/// then synced. The body has the discovery deadline (60 s plus 1 s per 64 KiB), and a body
/// with no announced end stops, refused, before it leaves DEST less free space than the
/// planned transfer still needs (`reserved`) plus [`STREAM_SPARE`].
async fn stream_once(
    connector: &Connector,
    origin: &HttpUrl,
    f: &SourceFile,
    dest: &Dest,
    part: &str,
    received: &AtomicU64,
    reserved: &(dyn Fn() -> u64 + Sync),
) -> EngineResult<(u64, Option<Vec<u8>>)> {
    let here = url_string(origin, &f.url_path);
    let mut s = connector.connect(origin).await?;
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\nConnection: close\r\n\r\n",
        f.url_path,
        origin.authority()
    );
    s.send(req.as_bytes()).await?;
    let mut buf = vec![0u8; 256 * 1024];
    // the head within the discovery deadline; the body may take as long as it keeps coming
    let mut deadline = Deadline::new();
    let (head, pending) = read_head(&mut s, &mut deadline, &mut buf, &here).await?;
    if head.status != 200 {
        fail!(InvalidSource, "{here}: HTTP {}", head.status);
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
    let trusted_end = origin.tls || f.expect.is_some();
    if chunked.is_none() && length.is_none() && !trusted_end {
        return Err(EngineError::Refused(failure!(
            Protocol,
            "{:#}; or give its checksum (--checksum-file, or checksum= in a URL list), which then vouches for its end",
            unterminated(&here)
        )));
    }
    let out = dest
        .create(part)
        .map_err(|e| dest.failed(part, "write", &e))?;
    let mut hasher = f.expect.as_ref().map(|e| e.algo.hasher());
    let mut body = Vec::with_capacity(buf.len());
    let mut written = 0u64;
    let mut next_space_check = 0u64;
    let mut input = pending;
    loop {
        if written >= next_space_check {
            next_space_check = written + STREAM_SPACE_CHECK;
            check_room(dest, reserved, written, &here)?;
        }
        body.clear();
        match chunked.as_mut() {
            // what follows the last chunk (nothing, with Connection: close) is not body
            Some(d) => {
                d.feed(&input, &mut body)
                    .map_err(|e| failure!(Protocol, "{here}: {e}"))?;
            }
            None => {
                let take = length.map_or(input.len(), |l| input.len().min((l - written) as usize));
                body.extend_from_slice(&input[..take]);
            }
        }
        if !body.is_empty() {
            (&out)
                .write_all(&body)
                .map_err(|e| dest.failed(part, "write", &e))?;
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
        let n = deadline.read(&mut s, &mut buf, &here).await?;
        if n == 0 {
            if chunked.is_some() || length.is_some() {
                fail!(Protocol, "{here}: the connection closed mid-body");
            }
            // the body ends with the connection (trusted: see above)
            break;
        }
        input = buf[..n].to_vec();
    }
    dest.sync_data(&out)
        .map_err(|e| dest.failed(part, "sync", &e))?;
    Ok((written, hasher.map(|h| h.finish())))
}

/// A file of unknown size as it came.
pub(crate) struct StreamedFile {
    pub(crate) rel: String,
    /// It had a publisher digest, and it matched.
    pub(crate) published: bool,
    pub(crate) bytes: u64,
    /// It was complete from an earlier run.
    pub(crate) skipped: bool,
    /// That digest resists a forger (see [`strong`]).
    pub(crate) strong: bool,
}

/// Files of unknown size: one stream at a time beside the planned transfer.
pub(crate) fn spawn_streaming(
    shared: &Arc<Shared>,
    dest: &Arc<Dest>,
    mut todo: UnboundedReceiver<SourceFile>,
) -> JoinHandle<Vec<StreamedFile>> {
    let sh = shared.clone();
    let dest = dest.clone();
    tokio::spawn(async move {
        let mut done = Vec::new();
        while let Some(f) = todo.recv().await {
            if sh.failed() {
                break;
            }
            let origin = sh.origin(f.origin);
            // what the planned files still need of DEST
            let reserved = || {
                sh.parts
                    .iter()
                    .map(|p| p.remaining.load(Ordering::Relaxed))
                    .fold(0u64, u64::saturating_add)
            };
            let received = &sh.received;
            match stream_file(
                &sh.connector,
                &origin,
                &f,
                &dest,
                sh.retries,
                received,
                &reserved,
            )
            .await
            {
                Ok(Streamed::Refused(msg)) => {
                    sh.fail_advised(msg);
                    break;
                }
                Ok(Streamed::Fetched(n)) => done.push(StreamedFile::new(f, n, false)),
                Ok(Streamed::Skipped(n)) => done.push(StreamedFile::new(f, n, true)),
                Err(e) => {
                    sh.fail(Failure::classify(&e, Some(Kind::Unreachable)));
                    break;
                }
            }
        }
        // the publisher's digests of the streamed files that matched
        let verified = done.iter().filter(|f| f.published).count();
        sh.verified.fetch_add(verified, Ordering::SeqCst);
        done
    })
}

impl StreamedFile {
    fn new(f: SourceFile, bytes: u64, skipped: bool) -> StreamedFile {
        let strong = strong(&f);
        StreamedFile {
            published: f.expect.is_some(),
            rel: f.rel,
            bytes,
            skipped,
            strong,
        }
    }
}

/// Whether a file's publisher digest resists a forger (SHA-2, BLAKE2b).
fn strong(f: &SourceFile) -> bool {
    f.expect
        .as_ref()
        .is_some_and(|e| e.algo.collision_resistant())
}
