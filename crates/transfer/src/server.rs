//! `wattio serve`: a small HTTP/1.1 static-file server for datasets.
//!
//! Requests on one connection are parsed from the buffer before more bytes are read, so
//! pipelined requests are answered strictly in order; bodies go out with `sendfile(2)` from
//! the page cache (no copy through user space, which keeps the server's CPU cost low — the
//! quantity this project measures). Over TLS (`--tls-cert`, `--tls-key`) bodies are read from
//! the file and encrypted by rustls instead: sendfile cannot encrypt.

use crate::http::{self, Method, Parsed, RangeAnswer, Reject, Request};
use crate::listing::{ListingCache, LISTING_PATH};
use crate::tls::Conn;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The served directory.
    pub root: PathBuf,
    /// Connections served at once; further ones get 503 and are closed.
    pub max_connections: usize,
    /// A connection idle (or a peer not reading) this long is closed.
    pub idle_timeout: Duration,
    /// Per-connection pacing of response bodies in bytes/s (tests and demos: makes a loopback
    /// transfer last long enough to interrupt it). `None` = unpaced.
    pub rate_limit: Option<f64>,
    /// Serve HTTPS with this configuration ([`crate::tls_server_config`]); `None` = HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl ServerConfig {
    /// Defaults for serving `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ServerConfig {
            root: root.into(),
            max_connections: 256,
            idle_timeout: Duration::from_secs(60),
            rate_limit: None,
            tls: None,
        }
    }
}

struct Shared {
    root: PathBuf,
    cfg: ServerConfig,
    listings: ListingCache,
}

/// A bound server, not yet running.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Server {
    /// Checks the root and binds `addr`.
    pub async fn bind(cfg: ServerConfig, addr: &str) -> anyhow::Result<Server> {
        let root = cfg.root.canonicalize().map_err(|e| {
            anyhow::anyhow!(
                "cannot serve {}: {e}; give an existing directory",
                cfg.root.display()
            )
        })?;
        if !root.is_dir() {
            anyhow::bail!("cannot serve {}: not a directory", cfg.root.display());
        }
        if cfg.max_connections == 0 {
            anyhow::bail!("--max-connections must be at least 1");
        }
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {addr}: {e}; pick a free address, e.g. --listen 127.0.0.1:8080"
            )
        })?;
        let tls = cfg.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        Ok(Server {
            listener,
            tls,
            shared: Arc::new(Shared {
                root,
                cfg,
                listings: ListingCache::default(),
            }),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends.
    pub async fn run(self) -> io::Result<()> {
        let limit = Arc::new(Semaphore::new(self.shared.cfg.max_connections));
        loop {
            let (sock, _) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) if is_transient_accept_error(&e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let _ = sock.set_nodelay(true);
            let shared = self.shared.clone();
            // the permit is taken before the TLS handshake, so a flood of handshakes is
            // bounded like a flood of connections
            let permit = limit.clone().try_acquire_owned().ok();
            let acceptor = self.tls.clone();
            tokio::spawn(async move {
                let mut conn = match acceptor {
                    None => Conn::Plain(sock),
                    Some(a) => {
                        match tokio::time::timeout(shared.cfg.idle_timeout, a.accept(sock)).await {
                            Ok(Ok(s)) => Conn::Tls(Box::new(s.into())),
                            // a failed or stalled handshake: nothing to answer in HTTP
                            _ => return,
                        }
                    }
                };
                match permit {
                    Some(permit) => {
                        let _ = serve_connection(&mut conn, &shared).await;
                        drop(permit);
                    }
                    None => {
                        let _ = write_simple(
                            &mut conn,
                            503,
                            "Service Unavailable",
                            "connection limit reached; retry later\n",
                            false,
                            false,
                        )
                        .await;
                        let _ = conn.shutdown().await;
                    }
                }
            });
        }
    }
}

fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::ECONNABORTED)
    )
}

/// A server running on its own thread and runtime (tests, benches). Dropping it stops the
/// runtime, which drops every connection at once, as a killed server would.
pub struct ServerHandle {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Starts a server for `cfg` on `addr` (e.g. `127.0.0.1:0`).
    pub fn start(cfg: ServerConfig, addr: &str) -> anyhow::Result<ServerHandle> {
        let (tx_addr, rx_addr) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let addr = addr.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let server = match Server::bind(cfg, &addr).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx_addr.send(Err(e));
                        return;
                    }
                };
                let _ = tx_addr.send(Ok(server.local_addr().expect("bound")));
                tokio::select! {
                    _ = server.run() => {}
                    _ = stop_rx => {}
                }
            });
            rt.shutdown_background();
        });
        let addr = rx_addr
            .recv()
            .map_err(|_| anyhow::anyhow!("server thread died"))??;
        Ok(ServerHandle {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers 408 to a peer whose request head did not arrive within one idle timeout.
async fn write_head_timeout(sock: &mut Conn) -> io::Result<()> {
    write_simple(
        sock,
        408,
        "Request Timeout",
        "request head too slow\n",
        false,
        false,
    )
    .await
    .map(|_| ())
}

async fn serve_connection(sock: &mut Conn, sh: &Shared) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut tmp = [0u8; 8192];
    // a head must arrive whole within one idle timeout, so a peer trickling bytes cannot hold a
    // connection slot forever
    let mut head_started: Option<Instant> = None;
    loop {
        match http::parse_request(&buf) {
            Ok(Parsed::Complete(req, n)) => {
                buf.drain(..n);
                head_started = None;
                let keep = respond(sock, sh, &req).await?;
                // rustls may hold the end of the response until the next write
                sock.flush().await?;
                if !keep {
                    sock.shutdown().await.ok();
                    return Ok(());
                }
            }
            Ok(Parsed::Partial) => {
                let budget = match head_started {
                    Some(t) => match sh.cfg.idle_timeout.checked_sub(t.elapsed()) {
                        Some(left) => left,
                        None => return write_head_timeout(sock).await,
                    },
                    None => sh.cfg.idle_timeout,
                };
                let r = tokio::time::timeout(budget, sock.read(&mut tmp)).await;
                if head_started.is_none() {
                    head_started = Some(Instant::now());
                }
                match r {
                    // The budget ran out with part of a head received: say so before closing
                    // (an idle keep-alive connection with nothing pending just closes).
                    Err(_) if !buf.is_empty() => return write_head_timeout(sock).await,
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
                };
                write_simple(sock, code, reason, &msg, false, false).await?;
                sock.shutdown().await.ok();
                return Ok(());
            }
        }
    }
}

/// The 403 for a request path that `confine` puts outside the served directory.
async fn write_outside(sock: &mut Conn, keep_alive: bool, head_only: bool) -> io::Result<bool> {
    write_simple(
        sock,
        403,
        "Forbidden",
        "the path leaves the served directory\n",
        keep_alive,
        head_only,
    )
    .await
}

/// Writes a small text response. Returns whether the connection stays open.
async fn write_simple(
    sock: &mut Conn,
    code: u16,
    reason: &str,
    body: &str,
    keep_alive: bool,
    head_only: bool,
) -> io::Result<bool> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nServer: wattio\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: {}\r\n",
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    if code == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(body);
    }
    sock.write_all(out.as_bytes()).await?;
    sock.flush().await?;
    Ok(keep_alive)
}

async fn respond(sock: &mut Conn, sh: &Shared, req: &Request) -> io::Result<bool> {
    let keep = req.keep_alive;
    let head = req.method == Method::Head;
    if req.method == Method::Other {
        return write_simple(
            sock,
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
        // the listing of the directory the `.wattio/` sits in: the whole tree at `/`, a
        // subtree at `/sub/dir/`
        let root = match confine(&sh.root, &req.path[..n - 2]) {
            Ok(d) if d.is_dir() => d,
            Ok(_) | Err(Confine::NotFound) => {
                return write_simple(sock, 404, "Not Found", "no such directory\n", keep, head)
                    .await
            }
            Err(Confine::Outside) => return write_outside(sock, keep, head).await,
        };
        // Hashing reads every file: keep it off the reactor threads.
        let built = tokio::task::block_in_place(|| sh.listings.build(&root));
        return match built {
            Ok(l) => {
                let body = serde_json::to_vec(&l).expect("listing serializes");
                let h = format!(
                    "HTTP/1.1 200 OK\r\nServer: wattio\r\nContent-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: {}\r\n\r\n",
                    body.len(),
                    if keep { "keep-alive" } else { "close" }
                );
                sock.write_all(h.as_bytes()).await?;
                if !head {
                    sock.write_all(&body).await?;
                }
                Ok(keep)
            }
            Err(e) => {
                write_simple(
                    sock,
                    500,
                    "Internal Server Error",
                    &format!("cannot list dataset: {e}\n"),
                    false,
                    head,
                )
                .await
            }
        };
    }
    let path = match confine(&sh.root, &req.path) {
        Ok(p) => p,
        Err(Confine::NotFound) => {
            return write_simple(sock, 404, "Not Found", "no such file\n", keep, head).await
        }
        Err(Confine::Outside) => return write_outside(sock, keep, head).await,
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return write_simple(sock, 403, "Forbidden", "permission denied\n", keep, head).await
        }
        Err(_) => return write_simple(sock, 404, "Not Found", "no such file\n", keep, head).await,
    };
    let md = file.metadata()?;
    if md.is_dir() {
        let mut dir = req.path.join("/");
        if !dir.is_empty() {
            dir.push('/');
        }
        let msg = format!("a directory; its dataset listing is at /{dir}{LISTING_PATH}\n");
        return write_simple(sock, 404, "Not Found", &msg, keep, head).await;
    }
    if !md.is_file() {
        return write_simple(sock, 403, "Forbidden", "not a regular file\n", keep, head).await;
    }
    let size = md.len();
    let (code, reason, start, len, crange) = match http::resolve_range(req.range.as_deref(), size) {
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
                "HTTP/1.1 416 Range Not Satisfiable\r\nServer: wattio\r\nContent-Range: bytes */{size}\r\nContent-Length: 0\r\nConnection: {}\r\n\r\n",
                if keep { "keep-alive" } else { "close" }
            );
            sock.write_all(h.as_bytes()).await?;
            return Ok(keep);
        }
    };
    let h = format!(
        "HTTP/1.1 {code} {reason}\r\nServer: wattio\r\nContent-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\nContent-Length: {len}\r\n{}Connection: {}\r\n\r\n",
        crange.unwrap_or_default(),
        if keep { "keep-alive" } else { "close" }
    );
    sock.write_all(h.as_bytes()).await?;
    if !head && len > 0 {
        send_file(sock, &file, start, len, &sh.cfg).await?;
    }
    Ok(keep)
}

enum Confine {
    NotFound,
    Outside,
}

/// Resolves decoded components under the root, refusing anything whose real path (after
/// symlinks) is outside it.
fn confine(root: &Path, comps: &[String]) -> Result<PathBuf, Confine> {
    let mut p = root.to_path_buf();
    for c in comps {
        p.push(c);
    }
    let real = p.canonicalize().map_err(|_| Confine::NotFound)?;
    if real.starts_with(root) {
        Ok(real)
    } else {
        Err(Confine::Outside)
    }
}

/// Sends `len` bytes of `file` from `off`: with sendfile(2) on a plain connection, read and
/// encrypted on a TLS one; paced to `cfg.rate_limit`.
async fn send_file(
    sock: &mut Conn,
    file: &std::fs::File,
    mut off: u64,
    mut left: u64,
    cfg: &ServerConfig,
) -> io::Result<()> {
    let started = Instant::now();
    let mut sent = 0u64;
    let step: u64 = if cfg.rate_limit.is_some() {
        64 << 10
    } else {
        4 << 20
    };
    // TLS: one read buffer per response, 16 TLS records of 16 KiB
    let mut buf = match sock {
        Conn::Tls(_) => vec![0u8; (step as usize).min(256 << 10)],
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
                    tokio::time::timeout(cfg.idle_timeout, sock.write_all(&buf[..n]))
                        .await
                        .map_err(|_| {
                            io::Error::new(io::ErrorKind::TimedOut, "peer stopped reading")
                        })??;
                }
                n
            }
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            ));
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
    file: &std::fs::File,
    off: u64,
    want: usize,
    cfg: &ServerConfig,
) -> io::Result<usize> {
    tokio::time::timeout(cfg.idle_timeout, sock.writable())
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "peer stopped reading"))??;
    sock.try_io(Interest::WRITABLE, || {
        let mut o = off;
        rustix::fs::sendfile(sock.as_fd(), file.as_fd(), Some(&mut o), want)
            .map_err(io::Error::from)
    })
}
