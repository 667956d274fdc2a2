//! Requests made while finding out what to fetch: index pages and checksum files read whole
//! (bodies delimited by `Content-Length`, `Transfer-Encoding: chunked` — what nginx and
//! Apache send for generated indexes — or the end of the connection, as HTTP/1.0 servers do),
//! `HEAD` requests pipelined on a few keep-alive connections, and the one-byte `Range` probe.

use super::conn::{Connector, Stream};
use super::url::url_string;
use super::url::HttpUrl;
use crate::dirindex::join_url;
use crate::error::{fail, failure, EngineResult, Failure, Kind};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use wattio_http::{parse_response_head, ResponseHead};

/// Largest body read whole (an index page or a checksum file).
pub(crate) const MAX_BODY: usize = 256 << 20;
/// How long a discovery request may take before its first bytes (see [`Deadline`]).
const SILENCE: Duration = Duration::from_secs(60);
/// Bytes that buy a discovery request one more second (see [`Deadline`]).
const GRACE_BYTES: u64 = 64 << 10;

/// The deadline of one request made while finding files (a page, a listing, a checksum file,
/// a `HEAD`): [`SILENCE`] plus one second for every [`GRACE_BYTES`] received, so that a large
/// page on a slow link gets the time it needs (anything faster than 64 KiB/s keeps ahead of
/// it) while a server trickling bytes cannot hold the transfer: one byte every 59 s no longer
/// resets a timeout.
pub(crate) struct Deadline {
    /// tokio's clock, which tests can pause and advance.
    start: tokio::time::Instant,
    received: u64,
}

impl Deadline {
    pub(crate) fn new() -> Deadline {
        Deadline {
            start: tokio::time::Instant::now(),
            received: 0,
        }
    }

    /// Gives `d` more time (time the client itself held the reads back).
    pub(crate) fn extend(&mut self, d: Duration) {
        self.start += d;
    }

    /// Time left, `None` once it has passed.
    fn left(&self) -> Option<Duration> {
        let allowed = SILENCE + Duration::from_secs(self.received / GRACE_BYTES);
        allowed
            .checked_sub(self.start.elapsed())
            .filter(|d| !d.is_zero())
    }

    /// One read within the deadline; `what` names the request in the error.
    pub(crate) async fn read<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        buf: &mut [u8],
        what: &str,
    ) -> EngineResult<usize> {
        let late = || {
            failure!(
                Unreachable,
                "{what}: the server took too long (more than {} s, plus 1 s per {} KiB received)",
                SILENCE.as_secs(),
                GRACE_BYTES >> 10
            )
        };
        let left = self.left().ok_or_else(late)?;
        let n = match tokio::time::timeout(left, s.read(buf)).await {
            Err(_) => return Err(late().into()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => fail!(
                Protocol,
                "{what}: the server ended the TLS connection without close_notify, so what came may be cut short"
            ),
            Ok(r) => r?,
        };
        self.received += n as u64;
        Ok(n)
    }
}

/// A response read whole.
pub(crate) struct Fetched {
    pub(crate) head: ResponseHead,
    pub(crate) body: Vec<u8>,
}

/// Decodes a `Transfer-Encoding: chunked` body (RFC 9112 §7.1) fed in pieces of any size:
/// chunk sizes in hex (extensions after `;` ignored), a zero-size last chunk, trailers
/// skipped.
#[derive(Debug, Default)]
pub(crate) struct ChunkedDecoder {
    state: Chunked,
    /// A size or trailer line not complete yet.
    line: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Chunked {
    #[default]
    Size,
    Data(u64),
    /// The CRLF after a chunk's data (how many of its two bytes were seen).
    DataEnd(u8),
    Trailer,
    Done,
}

impl ChunkedDecoder {
    /// Whether the last chunk and the trailers were read.
    pub(crate) fn done(&self) -> bool {
        self.state == Chunked::Done
    }

    /// Whether the last (zero-size) chunk was read (its trailers may still be missing).
    pub(crate) fn after_last_chunk(&self) -> bool {
        matches!(self.state, Chunked::Trailer | Chunked::Done)
    }

    /// Decodes what it can of `input`, appending body bytes to `out`; returns how many input
    /// bytes it used (fewer than given only once the body is complete). `Err` names what is
    /// malformed.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                Chunked::Done => return Ok(i),
                Chunked::Data(left) => {
                    let n = (left as usize).min(input.len() - i);
                    out.extend_from_slice(&input[i..i + n]);
                    i += n;
                    self.state = match left - n as u64 {
                        0 => Chunked::DataEnd(0),
                        l => Chunked::Data(l),
                    };
                }
                Chunked::DataEnd(seen) => {
                    let want = if seen == 0 { b'\r' } else { b'\n' };
                    if input[i] != want {
                        return Err("chunk not followed by CRLF".into());
                    }
                    i += 1;
                    self.state = if seen == 0 {
                        Chunked::DataEnd(1)
                    } else {
                        Chunked::Size
                    };
                }
                Chunked::Size | Chunked::Trailer => {
                    let b = input[i];
                    i += 1;
                    if b != b'\n' {
                        self.line.push(b);
                        if self.line.len() > 8192 {
                            return Err("chunk size or trailer line longer than 8 KiB".into());
                        }
                        continue;
                    }
                    let line = std::mem::take(&mut self.line);
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    self.state = match self.state {
                        Chunked::Trailer if line.is_empty() => Chunked::Done,
                        Chunked::Trailer => Chunked::Trailer,
                        _ => match chunk_size(line)? {
                            0 => Chunked::Trailer,
                            n => Chunked::Data(n),
                        },
                    };
                }
            }
        }
        Ok(i)
    }
}

fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let text = std::str::from_utf8(line).map_err(|_| "chunk size is not text")?;
    let hex = text.split(';').next().unwrap_or("").trim();
    if hex.is_empty() || hex.len() > 15 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("bad chunk size line `{}`", text.escape_default()));
    }
    u64::from_str_radix(hex, 16).map_err(|e| e.to_string())
}

/// The body of a whole `Transfer-Encoding: chunked` message; `Err` when it is malformed or
/// cut short before its last chunk (a server that closes right after the last chunk, without
/// the final empty line, is accepted).
#[cfg(test)]
pub(crate) fn decode_chunked(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut d = ChunkedDecoder::default();
    let mut out = Vec::new();
    d.feed(data, &mut out)?;
    if out.len() > MAX_BODY {
        return Err(format!("body larger than {} MiB", MAX_BODY >> 20));
    }
    match d.state {
        Chunked::Done | Chunked::Trailer => Ok(out),
        _ => Err("chunked body cut short".into()),
    }
}

/// Writes one request for `path` (origin form) on `s`.
fn request(url: &HttpUrl, method: &str, path: &str, extra: &str, close: bool) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\n{extra}{}\r\n",
        url.authority(),
        if close { "Connection: close\r\n" } else { "" }
    )
}

/// Reads a head from `s` into `buf` (which may already hold bytes) within `deadline`; returns
/// it and leaves the bytes after it in `buf`.
async fn read_head(
    s: &mut Stream,
    buf: &mut Vec<u8>,
    deadline: &mut Deadline,
    what: &str,
) -> EngineResult<ResponseHead> {
    loop {
        if let Some((h, n)) = parse_response_head(buf)? {
            buf.drain(..n);
            return Ok(h);
        }
        let mut tmp = [0u8; 16 * 1024];
        let n = deadline.read(s, &mut tmp, what).await?;
        if n == 0 {
            fail!(
                Protocol,
                "the server closed the connection without an answer"
            );
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Why a body that ended with the connection is not trusted: over plain HTTP a connection
/// cut short looks the same (over TLS the server's `close_notify` tells them apart, and rustls
/// refuses an end without one).
pub(crate) fn unterminated(what: &str) -> Failure {
    failure!(
        Protocol,
        "{what}: the server sent a body of unknown length (no Content-Length, not chunked) over plain HTTP and ended it by closing the connection, which a cut connection looks the same as; fetch it over https://, or from a server that sends lengths"
    )
}

/// One request on a fresh connection (`Connection: close`), its body read whole unless
/// `read_body` is false (the connection is then dropped after the head, which is how the
/// `Range` probe avoids downloading a whole file from a server that ignores ranges).
pub(crate) async fn fetch(
    connector: &Connector,
    url: &HttpUrl,
    method: &str,
    path: &str,
    extra_headers: &str,
    read_body: bool,
) -> EngineResult<Fetched> {
    let mut s = connector.connect(url).await?;
    s.send(request(url, method, path, extra_headers, true).as_bytes())
        .await?;
    let mut deadline = Deadline::new();
    let mut buf = Vec::new();
    let head = read_head(&mut s, &mut buf, &mut deadline, path).await?;
    let no_body = method == "HEAD" || head.status == 204 || head.status == 304;
    if !read_body || no_body {
        return Ok(Fetched {
            head,
            body: Vec::new(),
        });
    }
    let mut chunked = head
        .transfer_encoding
        .as_deref()
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
        .then(ChunkedDecoder::default);
    let want = if chunked.is_some() {
        None
    } else {
        head.content_length
    };
    if want.is_some_and(|n| n > MAX_BODY as u64) {
        fail!(Protocol, "{path}: body larger than {} MiB", MAX_BODY >> 20);
    }
    let too_large = || failure!(Protocol, "{path}: body larger than {} MiB", MAX_BODY >> 20);
    // a chunked body is decoded as it arrives (each byte once), and ends at its last chunk
    // even when the server keeps the connection open
    let mut body = Vec::new();
    let mut input = std::mem::take(&mut buf);
    let mut tmp = vec![0u8; 64 * 1024];
    loop {
        match chunked.as_mut() {
            Some(d) => {
                d.feed(&input, &mut body)
                    .map_err(|e| failure!(Protocol, "{path}: {e}"))?;
                if d.done() {
                    break;
                }
            }
            None => body.extend_from_slice(&input),
        }
        if body.len() > MAX_BODY {
            return Err(too_large().into());
        }
        if want.is_some_and(|n| body.len() as u64 >= n) {
            break;
        }
        let n = deadline.read(&mut s, &mut tmp, path).await?;
        if n == 0 {
            match (&chunked, want) {
                // a server that closes right after the last chunk, without the final empty
                // line, is accepted
                (Some(d), _) if d.after_last_chunk() => break,
                (Some(_), _) => fail!(Protocol, "{path}: chunked body cut short"),
                (None, Some(_)) => fail!(Protocol, "{path}: the connection closed mid-body"),
                (None, None) if url.tls => break,
                (None, None) => return Err(unterminated(path).into()),
            }
        }
        input.clear();
        input.extend_from_slice(&tmp[..n]);
    }
    if let Some(n) = want {
        body.truncate(n as usize);
    }
    Ok(Fetched { head, body })
}

/// The one-byte `Range` probe on an open keep-alive connection (one opened ahead for the
/// channels): the answer's head, and the connection back when the answer left it ready for
/// another request (a `206` whose one-byte body was read).
pub(crate) async fn probe_on(
    mut s: Stream,
    url: &HttpUrl,
    path: &str,
) -> EngineResult<(ResponseHead, Option<Stream>)> {
    s.send(request(url, "GET", path, "Range: bytes=0-0\r\n", false).as_bytes())
        .await?;
    let mut buf = Vec::new();
    let mut deadline = Deadline::new();
    let head = read_head(&mut s, &mut buf, &mut deadline, path).await?;
    let body = match head.content_length {
        Some(n) if head.status == 206 && n <= 64 && !head.close => n as usize,
        _ => return Ok((head, None)),
    };
    while buf.len() < body {
        let mut tmp = [0u8; 64];
        let n = deadline.read(&mut s, &mut tmp, path).await?;
        if n == 0 {
            return Ok((head, None));
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let clean = buf.len() == body;
    Ok((head, clean.then_some(s)))
}

/// `HEAD` of every path, pipelined `depth` deep on up to `conns` keep-alive connections; a
/// connection the server closes (HTTP/1.0, `keepalive_requests`) is reopened for the requests
/// still unanswered. Results are in the order of `paths`.
pub(crate) async fn head_many(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    paths: &[String],
    conns: usize,
    depth: usize,
) -> EngineResult<Vec<ResponseHead>> {
    head_many_kept(connector, url, paths, conns, depth, &mut Vec::new()).await
}

/// [`head_many`] on the connections in `idle` first (opening more up to `conns`), leaving in
/// `idle` those still open at the end: a URL list sized round after round reuses its
/// connections rather than paying a TCP (and TLS) handshake per round.
pub(crate) async fn head_many_kept(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    paths: &[String],
    conns: usize,
    depth: usize,
    idle: &mut Vec<Stream>,
) -> EngineResult<Vec<ResponseHead>> {
    let n = paths.len();
    let conns = conns.clamp(1, n.max(1));
    let mut set = tokio::task::JoinSet::new();
    for k in 0..conns {
        // every conns-th path, so each connection gets an even share
        let mine: Vec<(usize, String)> = (k..n)
            .step_by(conns)
            .map(|i| (i, paths[i].clone()))
            .collect();
        let url = url.clone();
        let connector = connector.clone();
        let kept = idle.pop();
        set.spawn(async move { head_on_one_connection(&connector, &url, mine, depth, kept).await });
    }
    let mut out: Vec<Option<ResponseHead>> = vec![None; n];
    while let Some(r) = set.join_next().await {
        let (answers, open) = r.map_err(|e| failure!(Other, "HEAD task failed: {e}"))??;
        for (i, h) in answers {
            out[i] = Some(h);
        }
        idle.extend(open);
    }
    out.into_iter()
        .enumerate()
        .map(|(i, h)| {
            h.ok_or_else(|| {
                failure!(
                    Protocol,
                    "{}: no answer to HEAD {}",
                    url.authority(),
                    paths[i]
                )
                .into()
            })
        })
        .collect()
}

/// The answers to `todo`'s `HEAD`s on one connection (`kept`, while it works, then new ones),
/// and that connection when it is still open.
async fn head_on_one_connection(
    connector: &Connector,
    url: &HttpUrl,
    mut todo: Vec<(usize, String)>,
    depth: usize,
    mut kept: Option<Stream>,
) -> EngineResult<(Vec<(usize, ResponseHead)>, Option<Stream>)> {
    let mut done = Vec::with_capacity(todo.len());
    todo.reverse();
    let mut failures = 0;
    let mut open = None;
    while !todo.is_empty() {
        // a kept connection the server closed since its last round fails at once: that is
        // no failure of the server's, and a new connection follows without a pause
        let reused = kept.is_some();
        let answered_before = done.len();
        // requests written (or about to be) and not answered: back to `todo` on any failure
        let mut sent: VecDeque<(usize, String)> = VecDeque::new();
        let r: EngineResult<()> = async {
            let mut s = match kept.take() {
                Some(s) => s,
                None => connector.connect(url).await?,
            };
            let mut buf = Vec::new();
            loop {
                let mut out = String::new();
                while sent.len() < depth.max(1) {
                    let Some(p) = todo.pop() else { break };
                    out.push_str(&request(url, "HEAD", &p.1, "", false));
                    sent.push_back(p);
                }
                if !out.is_empty() {
                    s.send(out.as_bytes()).await?;
                }
                let Some(front) = sent.pop_front() else {
                    // nothing unread is left on it: it can serve the next round
                    if buf.is_empty() {
                        open = Some(s);
                    }
                    return Ok(());
                };
                // each answer has its own deadline from when the one before it came
                let mut deadline = Deadline::new();
                let h = match read_head(&mut s, &mut buf, &mut deadline, &front.1).await {
                    Ok(h) => h,
                    Err(e) => {
                        sent.push_front(front);
                        return Err(e);
                    }
                };
                let close = h.close;
                done.push((front.0, h));
                failures = 0;
                if close {
                    todo.extend(sent.drain(..).rev());
                    return Ok(());
                }
            }
        }
        .await;
        todo.extend(sent.drain(..).rev());
        if let Err(e) = r {
            if reused && done.len() == answered_before {
                continue;
            }
            failures += 1;
            if failures > 3 {
                return Err(e.context(format!("HEAD requests to {} keep failing", url.authority())));
            }
            tokio::time::sleep(Duration::from_millis(100 << failures)).await;
        }
    }
    Ok((done, open))
}

/// Most redirects followed for one URL (curl's `--max-redirs` default is 50, wget's 20; a
/// dataset URL that needs more is misconfigured).
const MAX_REDIRECTS: usize = 10;

/// Connections and pipelining depth of the `HEAD` requests that size files.
pub(crate) const HEAD_CONNECTIONS: usize = 8;

pub(crate) const HEAD_DEPTH: usize = 16;

/// GET with redirects followed (at most [`MAX_REDIRECTS`]); returns the final URL too.
pub(crate) async fn get_following(
    connector: &Connector,
    url: &HttpUrl,
    method: &str,
) -> EngineResult<(HttpUrl, Fetched)> {
    let mut u = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let f = fetch(connector, &u, method, &u.path, "", true).await?;
        if !matches!(f.head.status, 301 | 302 | 303 | 307 | 308) {
            return Ok((u, f));
        }
        let here = url_string(&u, &u.path);
        let loc = f.head.header("location").ok_or_else(|| {
            failure!(
                Protocol,
                "{here}: HTTP {} without a Location",
                f.head.status
            )
        })?;
        let next = join_url(&here, loc).ok_or_else(|| {
            failure!(
                Protocol,
                "{here}: redirect to {loc}, which is not an http(s) URL"
            )
        })?;
        if u.tls && next.starts_with("http://") {
            fail!(
                Protocol,
                "{here}: redirect from https to plain http ({next}) refused"
            );
        }
        // a server's redirect, not the user's URL
        u = HttpUrl::parse(&next).map_err(|e| Kind::Protocol.msg(e.message))?;
    }
    fail!(
        Protocol,
        "{}: more than {MAX_REDIRECTS} redirects",
        url_string(url, &url.path)
    )
}

/// The size of a file whose `HEAD` gave no `Content-Length`: from the `Content-Range` of a
/// one-byte range request, or the `Content-Length` of the whole response a server that
/// ignores `Range` sends instead; `None` when neither says (a chunked body, or one that ends
/// with the connection).
pub(crate) async fn size_by_range_probe(
    connector: &Connector,
    url: &HttpUrl,
    path: &str,
) -> EngineResult<Option<u64>> {
    let f = fetch(connector, url, "GET", path, "Range: bytes=0-0\r\n", false).await?;
    Ok(match (f.head.status, f.head.content_range) {
        (206, Some(cr)) => Some(cr.size),
        // an empty file has no byte 0
        (416, _) => Some(0),
        (200, _) => f.head.content_length,
        (st, _) => fail!(
            InvalidSource,
            "{}: HTTP {st} to a GET of its first byte; check the URL",
            url_string(url, path)
        ),
    })
}

/// Whether `origin` honours `Range`, asked with a request for the first byte of its
/// non-empty file at `path` on a new connection (`206`: yes; `200`: it sends whole files).
pub(crate) async fn probe_origin(
    connector: &Connector,
    origin: &HttpUrl,
    path: &str,
) -> EngineResult<bool> {
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
    use proptest::prelude::*;

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            decode_chunked(b"5\r\nhello\r\n1;ext=1\r\n \r\n0\r\nX-Trailer: 1\r\n\r\n").unwrap(),
            b"hello "
        );
        assert_eq!(
            decode_chunked(b"A\r\n0123456789\r\n0\r\n").unwrap(),
            b"0123456789"
        );
        assert!(decode_chunked(b"5\r\nhel").is_err());
        assert!(decode_chunked(b"zz\r\n")
            .unwrap_err()
            .contains("bad chunk size"));
        assert!(decode_chunked(b"2\r\nabX\r\n0\r\n\r\n").is_err());
        assert!(decode_chunked(b"").is_err());
    }

    /// A server that sends one byte every 59 s runs out of time after 60 s (a timeout per
    /// read would have waited forever); one that keeps above 64 KiB/s is never cut off.
    #[tokio::test(start_paused = true)]
    async fn the_discovery_deadline_stops_a_trickle_but_not_a_slow_link() {
        use tokio::io::AsyncWriteExt;
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(59)).await;
                if server.write_all(b"x").await.is_err() {
                    return;
                }
            }
        });
        let t = tokio::time::Instant::now();
        let mut d = Deadline::new();
        let mut buf = [0u8; 64];
        let e = loop {
            if let Err(e) = d.read(&mut client, &mut buf, "/page").await {
                break e;
            }
        };
        assert!(t.elapsed() <= Duration::from_secs(61), "{:?}", t.elapsed());
        assert!(e.to_string().contains("took too long"), "{e}");
        // 100 KiB/s for ten minutes: 60 MB, always ahead of the deadline
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            for _ in 0..600 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                server.write_all(&vec![0u8; 100 << 10]).await.unwrap();
            }
        });
        let mut d = Deadline::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while got < 600 * (100 << 10) {
            got += d.read(&mut client, &mut buf, "/page").await.unwrap();
        }
    }

    proptest! {
        #[test]
        fn chunked_round_trip(body in proptest::collection::vec(any::<u8>(), 0..3000), cuts in proptest::collection::vec(1usize..500, 1..20)) {
            let mut enc = Vec::new();
            let mut rest = &body[..];
            let mut k = 0;
            while !rest.is_empty() {
                let n = cuts[k % cuts.len()].min(rest.len());
                enc.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                enc.extend_from_slice(&rest[..n]);
                enc.extend_from_slice(b"\r\n");
                rest = &rest[n..];
                k += 1;
            }
            enc.extend_from_slice(b"0\r\n\r\n");
            prop_assert_eq!(decode_chunked(&enc).unwrap(), body.clone());
            // fed in pieces of any size, the same body, and nothing read past its end
            let mut d = ChunkedDecoder::default();
            let mut out = Vec::new();
            let mut fed = enc.clone();
            fed.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
            let mut at = 0;
            let mut k = 0;
            while !d.done() {
                let n = cuts[k % cuts.len()].min(fed.len() - at);
                at += d.feed(&fed[at..at + n], &mut out).unwrap();
                k += 1;
            }
            prop_assert_eq!(&out, &body);
            prop_assert_eq!(at, enc.len());
            // any prefix short of the last chunk is incomplete, never a wrong body
            for cut in [enc.len() / 2, enc.len().saturating_sub(6)] {
                if let Ok(b) = decode_chunked(&enc[..cut]) {
                    prop_assert_eq!(b, body.clone());
                }
            }
        }

        #[test]
        fn chunked_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_chunked(&data);
        }
    }
}
