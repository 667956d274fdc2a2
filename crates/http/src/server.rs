//! `wattio serve`: a small HTTP/1.1 static-file server for datasets.
//!
//! Requests on one connection are parsed from the buffer before more bytes are read, so
//! pipelined requests are answered strictly in order; bodies go out with `sendfile(2)` from
//! the page cache (no copy through user space, which keeps the server's CPU cost low — the
//! quantity this project measures). Over TLS (`--tls-cert`, `--tls-key`) bodies are read from
//! the file and encrypted by rustls instead: sendfile cannot encrypt.
//!
//! Every quantity a client controls is bounded and every wait has a deadline: connections
//! (in all, per client address, and those being refused), TLS handshakes (within the
//! connection budget, with their own deadline), request heads (size and time), every write
//! (a peer that stops reading is dropped after one idle timeout, as nginx's `send_timeout`),
//! listing builds (one per subtree at a time, a few at once), and the descriptors all of that
//! needs, checked against `RLIMIT_NOFILE` at start-up. Files are opened beneath the root
//! without following links ([`crate::jail`]) and without blocking (`O_NONBLOCK`, so a FIFO in
//! the tree cannot hold a worker), and only regular files are served.

use crate::config::{ServerConfig, Shared};
use crate::confine::{confine, Confine};
use crate::error::HttpError;
use crate::limits::{client_of, ensure_descriptors, ClientSlot, REFUSING_AT_ONCE};
use crate::listing::ListingCache;
use crate::pages;
use crate::protocol::{self, Condition, Method, Parsed, RangeAnswer, Reject, Request, Validators};
use crate::reply::{connection, now_date, send, stalled, write_outside, write_simple};
use crate::tls::Conn;
use crate::waiting::{Ticket, WaitingRoom};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Longest back-off between failed `accept`s.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// A bound server, not yet running.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Server {
    /// Checks the root and the descriptor limit, and binds `addr`.
    pub async fn bind(cfg: ServerConfig, addr: &str) -> Result<Server, HttpError> {
        let root = cfg.root.canonicalize().map_err(|error| HttpError::NoRoot {
            root: cfg.root.clone(),
            error,
        })?;
        if !root.is_dir() {
            return Err(HttpError::NotADirectory {
                root: cfg.root.clone(),
            });
        }
        if cfg.max_connections == 0 || cfg.max_connections_per_client == Some(0) {
            return Err(HttpError::NoConnections);
        }
        ensure_descriptors(&cfg)?;
        let root_fd: OwnedFd = File::open(&root)
            .map_err(|source| HttpError::OpenRoot {
                root: root.clone(),
                source,
            })?
            .into();
        let listings =
            Arc::new(
                ListingCache::new(&root).map_err(|source| HttpError::ListRoot {
                    root: root.clone(),
                    source,
                })?,
            );
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| HttpError::Bind {
                addr: addr.to_string(),
                error,
            })?;
        let tls = cfg.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        Ok(Server {
            listener,
            tls,
            shared: Arc::new(Shared {
                root,
                root_fd,
                cfg,
                listings,
                per_client: Mutex::new(HashMap::new()),
                waiting: Arc::new(WaitingRoom::default()),
                index_builds: std::sync::atomic::AtomicUsize::new(0),
            }),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Hashes the whole tree now, so that the first listing request is answered at once
    /// (`wattio serve --hash-at-start`); returns the files and bytes listed.
    pub fn hash_tree(&self) -> io::Result<(usize, u64)> {
        let l = self.shared.listings.build(&self.shared.root)?;
        Ok((l.files.len(), l.total_bytes))
    }

    /// Serves until the process ends. `accept` errors never stop it: they are told to
    /// [`ServerConfig::warnings`] and retried with a back-off (10 ms, doubling to 1 s), as a
    /// descriptor shortage or a network that went down may pass.
    pub async fn run(self) -> io::Result<()> {
        let limit = Arc::new(Semaphore::new(self.shared.cfg.max_connections));
        let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
        let mut backoff = Duration::from_millis(10);
        loop {
            let (sock, peer) = match self.listener.accept().await {
                Ok(x) => {
                    backoff = Duration::from_millis(10);
                    x
                }
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(e) => {
                    self.shared.cfg.warnings.tell(&format!(
                        "accepting a connection failed ({e}); retrying in {} ms",
                        backoff.as_millis()
                    ));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                    continue;
                }
            };
            let _ = sock.set_nodelay(true);
            let shared = self.shared.clone();
            let acceptor = self.tls.clone();
            // The permit is taken before the TLS handshake: a flood of handshakes is bounded
            // like a flood of connections.
            let Some(slot) = ClientSlot::take(&shared, peer.ip()) else {
                refuse_or_drop(sock, acceptor, shared, &refusing);
                continue;
            };
            if let Ok(permit) = limit.clone().try_acquire_owned() {
                tokio::spawn(serve_admitted(sock, peer, acceptor, shared, slot, permit));
                continue;
            }
            // Full: the longest-waiting connection of the client with the most waiting ones gives
            // its slot up (waiting.rs).
            match shared.waiting.make_room_for(client_of(peer.ip())) {
                Some(permit) => {
                    tokio::spawn(serve_admitted(sock, peer, acceptor, shared, slot, permit));
                }
                None => {
                    drop(slot);
                    refuse_or_drop(sock, acceptor, shared, &refusing);
                }
            }
        }
    }
}

/// Serves one admitted connection, holding its slot's `permit`: its TLS handshake, then its
/// requests, waiting in the [`WaitingRoom`] whenever it has no complete request, and closed
/// when evicted from it (its permit then goes to the connection that evicted it).
async fn serve_admitted(
    sock: TcpStream,
    peer: SocketAddr,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    slot: ClientSlot,
    permit: OwnedSemaphorePermit,
) {
    let mut ticket = shared.waiting.admit(client_of(peer.ip()), permit);
    let conn = tokio::select! {
        conn = handshake(sock, acceptor, &shared) => conn,
        _ = ticket.evicted() => None,
    };
    if let Some(mut conn) = conn {
        let _ = serve_connection(&mut conn, &shared, &mut ticket).await;
    }
    drop((ticket, slot));
}

/// A connection past a limit: over plain HTTP answered 503 while few are; over TLS, and past
/// that, closed at once (dropped): a handshake to say 503 costs more CPU than a flood of
/// connections is worth.
fn refuse_or_drop(
    sock: TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    refusing: &Arc<Semaphore>,
) {
    if acceptor.is_some() {
        return;
    }
    if let Ok(refusal) = refusing.clone().try_acquire_owned() {
        tokio::spawn(refuse(sock, shared, refusal));
    }
}

/// The connection ready for HTTP: the TLS handshake done within its deadline, or `None`.
async fn handshake(
    sock: TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: &Shared,
) -> Option<Conn> {
    match acceptor {
        None => Some(Conn::Plain(sock)),
        Some(a) => match tokio::time::timeout(shared.cfg.handshake_timeout, a.accept(sock)).await {
            Ok(Ok(s)) => Some(Conn::Tls(Box::new(s.into()))),
            // a failed or stalled handshake: nothing to answer in HTTP
            _ => None,
        },
    }
}

/// Answers `503` to a plain-HTTP connection past a limit and closes it, within the handshake
/// deadline.
async fn refuse(sock: TcpStream, shared: Arc<Shared>, _refusal: OwnedSemaphorePermit) {
    let deadline = shared.cfg.handshake_timeout;
    let _ = tokio::time::timeout(deadline, async {
        let mut conn = Conn::Plain(sock);
        let msg = "connection limit reached; retry later\n";
        write_simple(
            &mut conn,
            &shared,
            503,
            "Service Unavailable",
            msg,
            false,
            false,
        )
        .await
        .ok()?;
        conn.shutdown().await.ok()
    })
    .await;
}

/// Closes the sending side, giving up after the idle timeout.
async fn close(sock: &mut Conn, sh: &Shared) {
    let _ = tokio::time::timeout(sh.cfg.idle_timeout, sock.shutdown()).await;
}

/// Answers 408 to a peer whose request head did not arrive within one idle timeout.
async fn write_head_timeout(sock: &mut Conn, sh: &Shared) -> io::Result<()> {
    write_simple(
        sock,
        sh,
        408,
        "Request Timeout",
        "request head too slow\n",
        false,
        false,
    )
    .await
    .map(|_| ())
}

async fn serve_connection(sock: &mut Conn, sh: &Shared, ticket: &mut Ticket) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut tmp = [0u8; 8192];
    // a head must arrive whole within one idle timeout, so a peer trickling bytes cannot hold a
    // connection slot forever
    let mut head_started: Option<Instant> = None;
    loop {
        match protocol::parse_request(&buf) {
            Ok(Parsed::Complete(req, n)) => {
                buf.drain(..n);
                head_started = None;
                if !ticket.busy() {
                    // evicted for a newer connection while its head was arriving
                    return Ok(());
                }
                let keep = respond(sock, sh, &req).await?;
                if !keep {
                    close(sock, sh).await;
                    return Ok(());
                }
                ticket.wait();
            }
            Ok(Parsed::Partial) => {
                let budget = match head_started {
                    Some(t) => match sh.cfg.idle_timeout.checked_sub(t.elapsed()) {
                        Some(left) => left,
                        None => return write_head_timeout(sock, sh).await,
                    },
                    None => sh.cfg.idle_timeout,
                };
                let r = tokio::select! {
                    r = tokio::time::timeout(budget, sock.read(&mut tmp)) => r,
                    // the server is full and this connection waited longest: it gives way
                    _ = ticket.evicted() => return Ok(()),
                };
                if head_started.is_none() {
                    head_started = Some(Instant::now());
                }
                match r {
                    // The budget ran out with part of a head received: say so before closing
                    // (an idle keep-alive connection with nothing pending just closes).
                    Err(_) if !buf.is_empty() => return write_head_timeout(sock, sh).await,
                    Ok(Ok(0)) | Err(_) => return Ok(()),
                    Ok(Ok(n)) => buf.extend_from_slice(&tmp[..n]),
                    Ok(Err(e)) => return Err(e),
                }
            }
            Err((reject, _)) => {
                let (code, reason, msg) = match reject {
                    Reject::BadRequest(why) => (400, "Bad Request", format!("{why}\n")),
                    Reject::Forbidden => (
                        403,
                        "Forbidden",
                        "the path leaves the served directory\n".to_string(),
                    ),
                    Reject::MethodNotAllowed => {
                        (405, "Method Not Allowed", "only GET and HEAD\n".to_string())
                    }
                };
                write_simple(sock, sh, code, reason, &msg, false, false).await?;
                close(sock, sh).await;
                return Ok(());
            }
        }
    }
}

/// The `Date`, `Last-Modified` and `ETag` header lines of a file's response.
fn push_validators(out: &mut String, date: &str, v: &Validators) {
    out.push_str("Date: ");
    out.push_str(date);
    out.push_str("\r\nLast-Modified: ");
    protocol::push_http_date(out, v.last_modified);
    out.push_str("\r\nETag: ");
    out.push_str(&v.etag);
    out.push_str("\r\n");
}

async fn respond(sock: &mut Conn, sh: &Shared, req: &Request) -> io::Result<bool> {
    let keep = req.keep_alive;
    let head = req.method == Method::Head;
    if req.method == Method::Other {
        return write_simple(
            sock,
            sh,
            405,
            "Method Not Allowed",
            "only GET and HEAD\n",
            keep,
            false,
        )
        .await;
    }
    let n = req.path.len();
    if n >= 2 && req.path[n - 2] == ".wattio" && req.path[n - 1] == "listing.json" {
        return pages::respond_listing(sock, sh, &req.path[..n - 2], keep, head).await;
    }
    if req.path.is_empty() {
        return pages::respond_directory(sock, sh, req, sh.root_fd.try_clone()?.into()).await;
    }
    let file = match confine(sh, &req.path) {
        Ok(Some(f)) => f,
        Ok(None) | Err(Confine::NotFound) => {
            return write_simple(sock, sh, 404, "Not Found", "no such file\n", keep, head).await
        }
        Err(Confine::Denied) => {
            let msg = "permission denied\n";
            return write_simple(sock, sh, 403, "Forbidden", msg, keep, head).await;
        }
        Err(Confine::Outside) => return write_outside(sock, sh, keep, head).await,
    };
    let md = file.metadata()?;
    if md.is_dir() {
        return pages::respond_directory(sock, sh, req, file).await;
    }
    if !md.is_file() {
        let msg = "not a regular file\n";
        return write_simple(sock, sh, 403, "Forbidden", msg, keep, head).await;
    }
    let size = md.len();
    let (now, date) = now_date();
    let v = Validators::of(md.mtime(), md.mtime_nsec(), size, now);
    let mut validators = String::with_capacity(112);
    push_validators(&mut validators, &date, &v);
    let honour_range = match protocol::evaluate_conditions(&req.conditions, &v, now) {
        Condition::Proceed { honour_range } => honour_range,
        Condition::NotModified => {
            let h = format!(
                "HTTP/1.1 304 Not Modified\r\nServer: wattio\r\n{validators}Connection: {}\r\n\r\n",
                connection(keep)
            );
            send(sock, sh, h.as_bytes()).await?;
            return Ok(keep);
        }
        Condition::PreconditionFailed => {
            let msg = "the file does not match the request's If-Match or If-Unmodified-Since\n";
            return write_simple(sock, sh, 412, "Precondition Failed", msg, keep, head).await;
        }
    };
    let range = req.range.as_deref().filter(|_| honour_range);
    let (code, reason, start, len, crange) = match protocol::resolve_range(range, size) {
        RangeAnswer::Full => (200, "OK", 0, size, None),
        RangeAnswer::Partial(s, e) => (
            206,
            "Partial Content",
            s,
            e - s + 1,
            Some(format!("Content-Range: bytes {s}-{e}/{size}\r\n")),
        ),
        RangeAnswer::Unsatisfiable => {
            let h = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nServer: wattio\r\n{validators}Content-Range: bytes */{size}\r\nContent-Length: 0\r\nConnection: {}\r\n\r\n",
                connection(keep)
            );
            send(sock, sh, h.as_bytes()).await?;
            return Ok(keep);
        }
    };
    let mut h = String::with_capacity(256);
    let _ = write!(h, "HTTP/1.1 {code} {reason}\r\n");
    h.push_str("Server: wattio\r\n");
    h.push_str(&validators);
    h.push_str("Content-Type: ");
    h.push_str(crate::mime::content_type(
        req.path.last().map_or("", String::as_str),
    ));
    // The type is the extension's, never a browser's guess from the bytes.
    h.push_str("\r\nX-Content-Type-Options: nosniff\r\nAccept-Ranges: bytes\r\n");
    let _ = write!(h, "Content-Length: {len}\r\n");
    if let Some(crange) = crange {
        h.push_str(&crange);
    }
    h.push_str("Connection: ");
    h.push_str(connection(keep));
    h.push_str("\r\n\r\n");
    if head || len == 0 {
        send(sock, sh, h.as_bytes()).await?;
    } else {
        send_head_and_file(sock, sh, h.as_bytes(), &file, start, len).await?;
    }
    Ok(keep)
}

/// Sends a response head and then `len` bytes of `file` from `start`, the head in the same
/// packets as the start of the body where the connection allows: on a plain connection the
/// head goes with `MSG_MORE` (the kernel holds it for the sendfile that follows, as nginx's
/// `tcp_nopush` does), on TLS the head and the first piece of the body are one write, so one
/// record run and one syscall instead of two. A paced response keeps them apart.
async fn send_head_and_file(
    sock: &mut Conn,
    sh: &Shared,
    head: &[u8],
    file: &File,
    start: u64,
    len: u64,
) -> io::Result<()> {
    if sh.cfg.rate_limit.is_some() {
        send(sock, sh, head).await?;
        return send_file(sock, file, start, len, sh).await;
    }
    match sock {
        Conn::Plain(tcp) => {
            send_more(tcp, sh, head).await?;
            send_file(sock, file, start, len, sh).await
        }
        Conn::Tls(_) => {
            let first = len.min(TLS_PIECE) as usize;
            let mut buf = Vec::with_capacity(head.len() + first);
            buf.extend_from_slice(head);
            buf.resize(head.len() + first, 0);
            let n = file.read_at(&mut buf[head.len()..], start)?;
            if n == 0 {
                return Err(shrank());
            }
            buf.truncate(head.len() + n);
            send(sock, sh, &buf).await?;
            let rest = len - n as u64;
            if rest > 0 {
                send_file(sock, file, start + n as u64, rest, sh).await?;
            }
            Ok(())
        }
    }
}

/// Writes `bytes` whole with `MSG_MORE`: more data follows at once, so the kernel does not
/// push out a short segment for them alone. Each write must go out within the idle timeout.
async fn send_more(tcp: &TcpStream, sh: &Shared, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        tokio::time::timeout(sh.cfg.idle_timeout, tcp.writable())
            .await
            .map_err(|_| stalled())??;
        match tcp.try_io(Interest::WRITABLE, || {
            rustix::net::send(tcp.as_fd(), bytes, rustix::net::SendFlags::MORE)
                .map_err(io::Error::from)
        }) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The most of a file read and encrypted at once on TLS: 16 records of 16 KiB.
const TLS_PIECE: u64 = 256 << 10;

fn shrank() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being sent")
}

/// Sends `len` bytes of `file` from `off`: with sendfile(2) on a plain connection, read and
/// encrypted on a TLS one; paced to `cfg.rate_limit`.
async fn send_file(
    sock: &mut Conn,
    file: &File,
    mut off: u64,
    mut left: u64,
    sh: &Shared,
) -> io::Result<()> {
    let cfg = &sh.cfg;
    let started = Instant::now();
    let mut sent = 0u64;
    let step: u64 = if cfg.rate_limit.is_some() {
        64 << 10
    } else {
        4 << 20
    };
    // TLS: one read buffer per response, no larger than the response
    let mut buf = match sock {
        Conn::Tls(_) => vec![0u8; step.min(TLS_PIECE).min(left) as usize],
        Conn::Plain(_) => Vec::new(),
    };
    while left > 0 {
        if let Some(rate) = cfg.rate_limit {
            let due = Duration::from_secs_f64(sent as f64 / rate);
            let el = started.elapsed();
            if due > el {
                tokio::time::sleep(due - el).await;
            }
        }
        let n = match sock {
            Conn::Plain(tcp) => {
                match sendfile_some(tcp, file, off, left.min(step) as usize, cfg).await {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    r => r?,
                }
            }
            Conn::Tls(_) => {
                let want = left.min(buf.len() as u64) as usize;
                // page-cache reads are short; a read from disk blocks this worker briefly, as
                // sendfile would
                let n = file.read_at(&mut buf[..want], off)?;
                if n > 0 {
                    send(sock, sh, &buf[..n]).await?;
                }
                n
            }
        };
        if n == 0 {
            return Err(shrank());
        }
        off += n as u64;
        left -= n as u64;
        sent += n as u64;
    }
    Ok(())
}

/// One sendfile(2) of up to `want` bytes once the socket is writable.
async fn sendfile_some(
    sock: &TcpStream,
    file: &File,
    off: u64,
    want: usize,
    cfg: &ServerConfig,
) -> io::Result<usize> {
    tokio::time::timeout(cfg.idle_timeout, sock.writable())
        .await
        .map_err(|_| stalled())??;
    sock.try_io(Interest::WRITABLE, || {
        let mut o = off;
        rustix::fs::sendfile(sock.as_fd(), file.as_fd(), Some(&mut o), want)
            .map_err(io::Error::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::{open_resolved, resolve};
    use crate::limits::{descriptors_needed, BASE_DESCRIPTORS};
    use std::net::IpAddr;

    #[test]
    fn clients_are_addresses_and_ipv6_networks() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(client_of(ip("10.0.0.7")), ip("10.0.0.7"));
        assert_eq!(client_of(ip("::ffff:10.0.0.7")), ip("10.0.0.7"));
        assert_eq!(client_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            client_of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            client_of(ip("2001:db8:1:2::1"))
        );
        assert_ne!(
            client_of(ip("2001:db8:1:3::1")),
            client_of(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn descriptors_cover_two_per_connection_and_the_refusals() {
        let mut cfg = ServerConfig::new("/");
        cfg.max_connections = 4;
        assert_eq!(
            descriptors_needed(&cfg),
            8 + REFUSING_AT_ONCE as u64 + BASE_DESCRIPTORS
        );
    }

    /// A directory swapped for a link to elsewhere between the resolution of a path and its
    /// open: the open refuses the link instead of serving what it points at.
    #[test]
    fn a_component_swapped_for_a_link_after_resolution_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/f"), b"inside").unwrap();
        std::fs::write(outside.path().join("f"), b"secret").unwrap();
        let root = d.path().canonicalize().unwrap();
        let sh = Shared {
            root_fd: File::open(&root).unwrap().into(),
            listings: Arc::new(ListingCache::new(&root).unwrap()),
            cfg: ServerConfig::new(&root),
            per_client: Mutex::new(HashMap::new()),
            waiting: Arc::new(WaitingRoom::default()),
            index_builds: std::sync::atomic::AtomicUsize::new(0),
            root,
        };
        let comps = ["sub".to_string(), "f".to_string()];
        let real = resolve(&sh, &comps).ok().unwrap();
        assert!(matches!(open_resolved(&sh, &real), Ok(Some(_))));
        std::fs::rename(d.path().join("sub"), d.path().join("old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("sub")).unwrap();
        assert!(matches!(open_resolved(&sh, &real), Err(Confine::Outside)));
        // resolved afresh, the link leads out and is refused before any open
        assert!(matches!(resolve(&sh, &comps), Err(Confine::Outside)));
    }
}
