//! The small writes every response shares: a whole buffer sent within the idle timeout, the
//! `Date` header, the `Connection` header, and short text answers (403, 405, 408, 4xx).
//! The server's connection loop and the directory pages both write through these.

use crate::config::Shared;
use crate::protocol;
use crate::tls::Conn;
use std::io;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;

/// The error of a write that made no progress within the idle timeout.
pub(crate) fn stalled() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "peer stopped reading")
}

/// Writes `bytes` whole, in pieces of at most 64 KiB each of which must go out within the
/// idle timeout (nginx's `send_timeout`: a peer that stops reading is dropped, one that
/// reads slowly is not), then flushes (rustls may hold the end of a record) on the same terms.
pub(crate) async fn send(sock: &mut Conn, sh: &Shared, bytes: &[u8]) -> io::Result<()> {
    let idle = sh.cfg.idle_timeout;
    for piece in bytes.chunks(64 << 10) {
        tokio::time::timeout(idle, sock.write_all(piece))
            .await
            .map_err(|_| stalled())??;
    }
    tokio::time::timeout(idle, sock.flush())
        .await
        .map_err(|_| stalled())?
}

/// The 403 for a request path that `confine` puts outside the served directory.
pub(crate) async fn write_outside(
    sock: &mut Conn,
    sh: &Shared,
    keep_alive: bool,
    head_only: bool,
) -> io::Result<bool> {
    write_simple(
        sock,
        sh,
        403,
        "Forbidden",
        "the path leaves the served directory\n",
        keep_alive,
        head_only,
    )
    .await
}

/// The `Date` header's value now, and the Unix time it says. Formatted once a second per
/// worker thread, not once per response.
pub(crate) fn now_date() -> (u64, String) {
    thread_local! {
        static LAST: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != now {
            *last = (now, protocol::http_date(now));
        }
        (now, last.1.clone())
    })
}

pub(crate) fn connection(keep_alive: bool) -> &'static str {
    if keep_alive {
        "keep-alive"
    } else {
        "close"
    }
}

/// Writes a small text response. Returns whether the connection stays open.
pub(crate) async fn write_simple(
    sock: &mut Conn,
    sh: &Shared,
    code: u16,
    reason: &str,
    body: &str,
    keep_alive: bool,
    head_only: bool,
) -> io::Result<bool> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nServer: wattio\r\nDate: {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: {}\r\n",
        now_date().1,
        body.len(),
        connection(keep_alive)
    );
    if code == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(body);
    }
    send(sock, sh, out.as_bytes()).await?;
    Ok(keep_alive)
}
