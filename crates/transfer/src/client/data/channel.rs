//! A channel: one connection with up to `pipelining` Range requests in flight, pulling chunks
//! from its partition's queue while the partition's budget allows, streaming bodies into the
//! part files, reconnecting with backoff.

use super::files::Active;
use super::mirrors::MirrorVerdict;
use super::pace::pace;
use super::queue::Chunk;
use super::state::{Shared, SPARE_MAX_AGE};
use super::verify::finish_file;
use crate::client::net::conn::Stream;
use crate::client::net::fetch::Deadline;
use crate::client::net::response::ReadBuf;
use crate::client::net::url::HttpUrl;
use crate::client::net::validator::Validator;
use crate::error::{fail, failure, EngineError, EngineResult, Failure, Kind};
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use wattio_http::checksum;
use wattio_http::{ContentRange, ResponseHead};

pub(crate) enum ChannelEnd {
    /// No more work or over budget.
    Done,
    /// The server ended the connection cleanly (`Connection: close`, e.g. nginx's
    /// keepalive_requests): reconnect at once, no backoff.
    Reconnect,
}

pub(crate) async fn channel_task(sh: Arc<Shared>, pi: usize) {
    let mut failures = 0u32;
    let mut released = false;
    loop {
        if sh.failed() || released {
            break;
        }
        match run_connection(&sh, pi, &mut failures, &mut released).await {
            Ok(ChannelEnd::Done) => break,
            Ok(ChannelEnd::Reconnect) => continue,
            Err(e) => {
                failures += 1;
                sh.reconnects.fetch_add(1, Ordering::Relaxed);
                if failures > sh.retries {
                    // a server that keeps failing is unreachable, unless the error says more
                    let kind = Failure::kind_in(&e).unwrap_or(Kind::Unreachable);
                    sh.fail(kind.msg(format!(
                        "giving up on {} after {} attempts: {}",
                        sh.url.authority(),
                        failures,
                        e.one_line()
                    )));
                    break;
                }
                // exponential backoff: 200 ms after the first failure, doubling to 2 s, plus a little spread per channel
                let base = 100u64.saturating_mul(1 << failures.min(5)).min(2000);
                let spread = (pi as u64 * 37 + failures as u64 * 11) % 50;
                tokio::time::sleep(Duration::from_millis(base + spread)).await;
            }
        }
    }
    if !released {
        sh.parts[pi].live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Takes the next chunk unless the partition is over its channel budget. A channel over
/// budget gives up its slot with a CAS on `live` (so exactly the surplus channels leave) and
/// sets `released`; it then drains what it has in flight and ends.
pub(crate) fn next_chunk(
    sh: &Shared,
    pi: usize,
    leaving: &mut bool,
    released: &mut bool,
) -> Option<Chunk> {
    let p = &sh.parts[pi];
    if *leaving {
        return None;
    }
    loop {
        let live = p.live.load(Ordering::SeqCst);
        if live <= p.target.load(Ordering::SeqCst).max(1) {
            break;
        }
        if p.live
            .compare_exchange(live, live - 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            *leaving = true;
            *released = true;
            return None;
        }
    }
    let mut q = p.chunks.lock().unwrap();
    loop {
        let Some(c) = q.pop_front() else {
            *leaving = true;
            return None;
        };
        // cut for a version of its file that has since started over: dropped
        if c.version == sh.files[c.file].generation() {
            return Some(c);
        }
        p.remaining.fetch_sub(c.len, Ordering::SeqCst);
    }
}

/// Whether a channel with `in_flight` requests should queue one more, given the chunks left in
/// its partition's queue and the channels drawing from it: while the queue still holds
/// `in_flight` chunks for every channel, so that no channel takes more than its share. Ours:
/// Algorithm 1's pipelining depth is a ceiling, and a channel that filled it from a short
/// queue would hold the chunks other channels wait for — at the start of a transfer whose
/// files are still being found (the first channel to run took 43 of a URL list's first 128
/// files while 28 channels had none), and at the end, where a channel fetching two chunks in a
/// row while another sits idle leaves the transfer waiting for the slowest channel; the round
/// trip a channel then spends between its requests costs less (docs/transfer.md, *Engine*).
pub(crate) fn pipeline_another(in_flight: usize, queued: usize, channels: usize) -> bool {
    in_flight == 0 || in_flight * channels <= queued
}

/// Puts an unanswered chunk back at the head of its queue (one of a version of its file
/// that has since started over is dropped instead).
pub(crate) fn requeue(sh: &Shared, pi: usize, c: Chunk) {
    sh.chunk_ended(c.file);
    if c.version != sh.files[c.file].generation() {
        sh.parts[pi].remaining.fetch_sub(c.len, Ordering::SeqCst);
    } else if c.len > 0 {
        sh.parts[pi].chunks.lock().unwrap().push_front(c);
    }
}

/// What an answer is of.
enum Version {
    /// The version the part file holds: its body is written.
    Current,
    /// Another: the file started over (now, or since the chunk was asked for); the answer's
    /// body is not read, the connection is dropped.
    Other,
    /// The file keeps changing: the transfer is failed.
    GaveUp,
}

/// Compares an answer's validators with those of the version its file is fetched as; an
/// answer of another version (a file changed on the server during the copy, or a whole file
/// sent back for `If-Range`) starts the file over. An answer from a mirror the file has left
/// is not compared: mirrors' validators are their own.
fn version_of(
    sh: &Shared,
    c: &Chunk,
    head: &ResponseHead,
    origin: usize,
    server: &HttpUrl,
) -> Version {
    let j = &sh.files[c.file];
    // none: the file started over, or was finished, since `c` was cut
    let Some(a) = j.active_at(c.version) else {
        return Version::Other;
    };
    if !matches!(head.status, 200 | 206) || j.origin() != origin {
        return Version::Current;
    }
    let o = server.origin();
    let Err(why) = a.check_validator(head, &o) else {
        return Version::Current;
    };
    if sh.restart_file(c.file, Validator::from_head(head, &o), &why) {
        Version::Other
    } else {
        Version::GaveUp
    }
}

/// Runs one connection of channel `pi`'s: to the server of the first chunk it takes, serving
/// chunks of that server's files until the channel has nothing more to do there
/// (see [`ChannelEnd`]) or fails.
pub(crate) async fn run_connection(
    sh: &Arc<Shared>,
    pi: usize,
    failures: &mut u32,
    released: &mut bool,
) -> EngineResult<ChannelEnd> {
    let mut leaving = false;
    // nothing to do: do not even connect
    let first = match next_chunk(sh, pi, &mut leaving, released) {
        Some(c) => c,
        None => return Ok(ChannelEnd::Done),
    };
    sh.chunk_sent(first.file);
    // this connection serves the server of its first chunk's file (a URL list may name several)
    let origin = sh.files[first.file].origin();
    let server = sh.origin(origin);
    let (s, from_spare) = match connect(sh, origin, &server).await {
        Ok(c) => c,
        Err(e) => {
            requeue(sh, pi, first);
            if sh.mirror_after_connect_error(origin, &e) {
                return Ok(ChannelEnd::Reconnect);
            }
            return Err(e);
        }
    };
    let mut conn = Connection {
        sh,
        pi,
        origin,
        server,
        from_spare,
        wire: Wire {
            s,
            rb: ReadBuf::default(),
            body: vec![0u8; 256 * 1024],
        },
        inflight: VecDeque::from([first]),
        sent: 0,
        pp: sh.parts[pi].pipelining,
        leaving,
        other_server_next: false,
        idle_between_requests: false,
        answered: false,
    };
    let res = conn.serve(failures, released).await;
    conn.close(res)
}

/// A connection to `origin`: a spare one (opened ahead, or left by a channel) when there is
/// one, else a new one; true when it is a spare.
async fn connect(sh: &Shared, origin: usize, server: &HttpUrl) -> EngineResult<(Stream, bool)> {
    // a spare left idle for long (a slow resume check) may have been closed by the server;
    // spares are connected to the first server only
    let spare = (origin == 0)
        .then(|| sh.spare.lock().unwrap().pop())
        .flatten()
        .filter(|(t, _)| t.elapsed() < SPARE_MAX_AGE);
    match spare {
        Some((_, s)) => Ok((s, true)),
        None => Ok((sh.connector.connect(server).await?, false)),
    }
}

/// The connection's bytes: the stream, what was read past the last answer's head, and the
/// buffer bodies are read through.
struct Wire {
    s: Stream,
    rb: ReadBuf,
    body: Vec<u8>,
}

/// A channel's connection while it runs: the chunks in flight on it (the first `sent` of
/// them written), and what it has seen so far.
struct Connection<'a> {
    sh: &'a Arc<Shared>,
    /// The partition it draws chunks from.
    pi: usize,
    /// The server it is connected to (its files' origin), and that server's URL.
    origin: usize,
    server: HttpUrl,
    /// It was a spare connection, opened earlier.
    from_spare: bool,
    wire: Wire,
    inflight: VecDeque<Chunk>,
    sent: usize,
    /// The partition's pipelining depth.
    pp: usize,
    /// No more chunks are taken (the queue ran out, or the channel is over budget).
    leaving: bool,
    /// The next chunk is another server's: it waits for a connection to that server.
    other_server_next: bool,
    /// Every answer read whole, nothing in flight: the connection can serve another channel.
    idle_between_requests: bool,
    /// A response head came on this connection.
    answered: bool,
}

impl Connection<'_> {
    /// Keeps the pipeline full and reads the answers in order, writing each body into its
    /// part file, until the channel has nothing more to do here or the connection must go.
    async fn serve(&mut self, failures: &mut u32, released: &mut bool) -> EngineResult<ChannelEnd> {
        loop {
            self.fill_pipeline(released);
            self.send_requests().await?;
            if self.inflight.is_empty() {
                self.idle_between_requests = true;
                return Ok(if self.other_server_next {
                    ChannelEnd::Reconnect
                } else {
                    ChannelEnd::Done
                });
            }
            let w = &mut self.wire;
            let head = tokio::time::timeout(Duration::from_secs(60), w.rb.read_head(&mut w.s))
                .await
                .map_err(|_| failure!(Unreachable, "server silent for 60 s"))??;
            self.answered = true;
            if let Some(end) = self.judge(&head)? {
                return Ok(end);
            }
            if let Some(end) = self.receive_front().await? {
                return Ok(end);
            }
            let sh = self.sh;
            let c = self.inflight.pop_front().expect("front exists");
            self.sent -= 1;
            *failures = 0;
            sh.chunk_ended(c.file);
            if sh.count_fetched(self.pi, &c, c.len) {
                let sh2 = sh.clone();
                let fi = c.file;
                tokio::task::spawn_blocking(move || finish_file(&sh2, fi)).await?;
            }
            if head.close {
                // requeue what was pipelined behind and reconnect
                self.requeue_all();
                self.sent = 0;
                if self.leaving || sh.parts[self.pi].chunks.lock().unwrap().is_empty() {
                    return Ok(ChannelEnd::Done);
                }
                return Ok(ChannelEnd::Reconnect);
            }
        }
    }

    /// Takes chunks from the partition's queue while the pipeline has room and the channel
    /// its share (see [`pipeline_another`]).
    fn fill_pipeline(&mut self, released: &mut bool) {
        let sh = self.sh;
        while self.inflight.len() < self.pp {
            let queued = sh.parts[self.pi].chunks.lock().unwrap().len();
            // the budget's channels draw from the queue, even those not running yet
            let p = &sh.parts[self.pi];
            let channels = p
                .live
                .load(Ordering::SeqCst)
                .max(p.target.load(Ordering::SeqCst));
            if !pipeline_another(self.inflight.len(), queued, channels) {
                break;
            }
            match next_chunk(sh, self.pi, &mut self.leaving, released) {
                Some(c) if sh.files[c.file].origin() != self.origin => {
                    // another server's: it waits for a connection to that server
                    sh.parts[self.pi].chunks.lock().unwrap().push_front(c);
                    self.other_server_next = true;
                    break;
                }
                Some(c) => {
                    sh.chunk_sent(c.file);
                    self.inflight.push_back(c);
                }
                None => break,
            }
        }
    }

    /// Writes the requests of the chunks taken since the last write, back to back.
    async fn send_requests(&mut self) -> EngineResult<()> {
        if self.sent >= self.inflight.len() {
            return Ok(());
        }
        let mut out = String::new();
        for c in self.inflight.iter().skip(self.sent) {
            let j = &self.sh.files[c.file];
            // a server that ignores Range gets plain requests for whole files; a range names
            // the version its file's other bytes are of (If-Range)
            let range = if j.whole() {
                String::new()
            } else {
                format!(
                    "Range: bytes={}-{}\r\n{}",
                    c.offset,
                    c.offset + c.len - 1,
                    j.if_range()
                )
            };
            out.push_str(&format!(
                "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\n{range}\r\n",
                j.url_path(),
                self.server.authority(),
            ));
        }
        self.wire.s.send(out.as_bytes()).await?;
        self.sent = self.inflight.len();
        Ok(())
    }

    /// What the answer `head` to the first chunk in flight means before its body is read: the
    /// file's mirrors (see [`MirrorVerdict`]) and version (see [`version_of`]) may send the
    /// channel elsewhere, and its status and length must be those of the range asked for.
    /// `None`: read the body.
    fn judge(&mut self, head: &ResponseHead) -> EngineResult<Option<ChannelEnd>> {
        let sh = self.sh;
        let c = *self.inflight.front().expect("a chunk in flight");
        match sh.mirror_verdict(c.file, self.origin, head, c.offset, c.len) {
            MirrorVerdict::Serve => {}
            MirrorVerdict::Moved => {
                self.requeue_all();
                return Ok(Some(ChannelEnd::Reconnect));
            }
            MirrorVerdict::Refused(msg) => {
                sh.fail_advised(msg);
                return Ok(Some(ChannelEnd::Done));
            }
        }
        match version_of(sh, &c, head, self.origin, &self.server) {
            Version::Current => {}
            Version::Other => {
                self.requeue_all();
                return Ok(Some(ChannelEnd::Reconnect));
            }
            Version::GaveUp => return Ok(Some(ChannelEnd::Done)),
        }
        check_answer(sh, &c, head)
    }

    /// Streams the first chunk's body into its part file; on an error, what arrived is kept
    /// and the chunk shrinks to the rest. `None`: the chunk is complete.
    async fn receive_front(&mut self) -> EngineResult<Option<ChannelEnd>> {
        let sh = self.sh;
        let c = self.inflight.front_mut().expect("a chunk in flight");
        let j = &sh.files[c.file];
        // none: the file started over, or was finished, since the answer was judged
        let Some(a) = j.active_at(c.version) else {
            self.requeue_all();
            return Ok(Some(ChannelEnd::Reconnect));
        };
        let part = match j.part(&a, &sh.dest) {
            Ok(p) => p,
            // DEST refuses it (a link in the way, no permission): no retry can change that
            Err(e) => {
                sh.fail_advised(sh.dest.failed(&j.part_rel(), "write", &e));
                return Ok(Some(ChannelEnd::Done));
            }
        };
        let mut written = 0u64;
        let r = self.wire.stream_body(sh, c, &a, &part, &mut written).await;
        if let Err(e) = r {
            // keep what arrived; requeue the rest
            sh.count_fetched(self.pi, c, written);
            c.offset += written;
            c.len -= written;
            if matches!(e, EngineError::Superseded) {
                self.requeue_all();
                return Ok(Some(ChannelEnd::Reconnect));
            }
            return Err(e);
        }
        Ok(None)
    }

    /// Puts every chunk in flight back on the queue, in order.
    fn requeue_all(&mut self) {
        for c in self.inflight.drain(..).rev() {
            requeue(self.sh, self.pi, c);
        }
    }

    /// Ends the connection with `res`: an idle connection to the first server goes to
    /// `Shared::spare` while discovery may add files; after an error its chunks go back on the
    /// queue, and a reconnect follows at once when the error is no fault of the server's (a
    /// spare closed meanwhile) or the file moved to another mirror.
    fn close(mut self, res: EngineResult<ChannelEnd>) -> EngineResult<ChannelEnd> {
        let sh = self.sh;
        if self.idle_between_requests
            && self.origin == 0
            && self.wire.rb.avail().is_empty()
            && sh.discovering.load(Ordering::SeqCst)
            && !sh.failed()
        {
            sh.spare
                .lock()
                .unwrap()
                .push((std::time::Instant::now(), self.wire.s));
            return res;
        }
        if let Err(e) = &res {
            let failed_file = self.inflight.front().map(|c| c.file);
            self.requeue_all();
            if self.from_spare && !self.answered {
                // a connection left idle that the server closed meanwhile: no fault of the
                // server's or the file's, so a new connection follows at once
                return Ok(ChannelEnd::Reconnect);
            }
            if failed_file.is_some_and(|f| sh.mirror_after_error(f, self.origin, e)) {
                return Ok(ChannelEnd::Reconnect);
            }
        }
        res
    }
}

/// Whether the answer `head` to chunk `c` is the range asked for (`206` with its
/// Content-Range, or the whole file where that was asked or the server ignores Range) with the
/// length asked for; a file that changed or a server that stopped honouring Range ends the
/// transfer. `None`: it is.
fn check_answer(sh: &Shared, c: &Chunk, head: &ResponseHead) -> EngineResult<Option<ChannelEnd>> {
    let j = &sh.files[c.file];
    match head.status {
        206 => {
            let want = ContentRange {
                first: c.offset,
                last: c.offset + c.len - 1,
                size: j.size,
            };
            if head.content_range != Some(want) {
                let got = head
                    .content_range
                    .map_or_else(|| "no valid Content-Range".to_string(), |r| r.to_string());
                sh.fail_changed(j.rel(), &format!("the server answered {got} for {want}"));
                return Ok(Some(ChannelEnd::Done));
            }
        }
        200 if c.offset == 0 && c.len == j.size && head.content_length == Some(j.size) => {}
        200 if j.whole() => {
            let got = head.content_length.map_or_else(
                || "a body of unknown length".to_string(),
                |n| format!("{n} bytes"),
            );
            sh.fail_changed(
                j.rel(),
                &format!("the server sent {got} where it had announced {}", j.size),
            );
            return Ok(Some(ChannelEnd::Done));
        }
        200 => {
            // it honoured Range when the transfer started (or said it would)
            sh.fail_advised(failure!(
                Protocol,
                "{}: the server stopped honouring Range requests during the transfer; rerun the same command: it checks again and fetches whole files from a server that ignores Range",
                j.rel()
            ));
            return Ok(Some(ChannelEnd::Done));
        }
        404 | 403 | 410 | 416 => {
            sh.fail_changed(j.rel(), &format!("HTTP {} from the server", head.status));
            return Ok(Some(ChannelEnd::Done));
        }
        st => fail!(InvalidSource, "HTTP {st} for {}", j.rel()),
    }
    if head.content_length != Some(c.len) {
        let got = head.content_length.map_or_else(
            || "no Content-Length".to_string(),
            |n| format!("Content-Length {n}"),
        );
        fail!(Protocol, "{}: {got} for a {}-byte range", j.rel(), c.len);
    }
    Ok(None)
}

impl Wire {
    /// Reads the body of the answer for chunk `c` into `part` at the chunk's offset, hashing
    /// it as it arrives; `written` counts the bytes written, also when it fails.
    async fn stream_body(
        &mut self,
        sh: &Shared,
        c: &Chunk,
        a: &Active,
        part: &File,
        written: &mut u64,
    ) -> EngineResult<()> {
        let j = &sh.files[c.file];
        let mut block_hasher = j
            .blocks()
            .map(|b| checksum::BlockHasher::new(b.size, j.size, c.offset));
        // the body has a deadline as discovery's requests do (60 s plus 1 s per 64 KiB), the
        // time the rate cap holds reads back not counted
        let mut deadline = Deadline::new();
        while *written < c.len {
            let paced = std::time::Instant::now();
            pace(sh).await;
            deadline.extend(paced.elapsed());
            // smaller reads while paced keep the bursts above the cap small
            let step = if sh.rate_cap.load(Ordering::Relaxed) > 0 {
                32 * 1024
            } else {
                self.body.len()
            };
            let want = ((c.len - *written) as usize).min(step);
            let n = if !self.rb.avail().is_empty() {
                let t = self.rb.take(want);
                self.body[..t.len()].copy_from_slice(&t);
                t.len()
            } else {
                let n = deadline
                    .read(&mut self.s, &mut self.body[..want], j.rel())
                    .await?;
                if n == 0 {
                    fail!(Protocol, "server closed the connection mid-body");
                }
                n
            };
            // written (and hashed) only as the file's current version: a restart waits for
            // this write, and a write after it sees the new version
            let v = a.version.read().unwrap();
            if *v != c.version {
                return Err(EngineError::Superseded);
            }
            // page-cache writes are short; doing them inline keeps the engine simple
            part.write_all_at(&self.body[..n], c.offset + *written)
                .map_err(|e| sh.dest.failed(&j.part_rel(), "write", &e))?;
            a.hash_arrival(c.offset + *written, &self.body[..n], part)?;
            // hashed while the bytes are still in cache: reading them back later costs a pass
            // over memory per file
            if let Some(h) = block_hasher.as_mut() {
                h.update(&self.body[..n], |i, d| a.store_block_sum(i, d));
            }
            drop(v);
            *written += n as u64;
            sh.received.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_pipelines_no_more_than_its_share_of_the_queue() {
        assert!(pipeline_another(0, 0, 8), "an idle channel always asks");
        assert!(pipeline_another(1, 8, 8));
        assert!(!pipeline_another(1, 7, 8));
        assert!(!pipeline_another(2, 1, 3));
        // a short queue is shared: 128 chunks among 32 channels, 4 each
        assert!(pipeline_another(3, 125, 32));
        assert!(!pipeline_another(4, 124, 32));
    }
}
