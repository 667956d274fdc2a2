//! The answers wattio makes up rather than reads from a file: a directory's dataset listing
//! (JSON, for wattio clients) and its HTML index (for a browser, [`crate::index`]).

use crate::config::Shared;
use crate::confine::{confine, resolve, Confine};
use crate::index;
use crate::protocol::{percent_encode_path, Method, Request};
use crate::reply::{connection, now_date, send, write_outside, write_simple};
use crate::tls::Conn;
use std::fs::File;
use std::io;

/// The listing of the directory the `.wattio/` sits in: the whole tree at `/`, a subtree at
/// `/sub/dir/`.
pub(crate) async fn respond_listing(
    sock: &mut Conn,
    sh: &Shared,
    dir: &[String],
    keep: bool,
    head: bool,
) -> io::Result<bool> {
    let root = match resolve(sh, dir) {
        Ok(d) if d.is_dir() => d,
        Ok(_) | Err(Confine::NotFound) | Err(Confine::Denied) => {
            return write_simple(
                sock,
                sh,
                404,
                "Not Found",
                "no such directory\n",
                keep,
                head,
            )
            .await
        }
        Err(Confine::Outside) => return write_outside(sock, sh, keep, head).await,
    };
    match sh.listings.body(root).await {
        Ok(body) => {
            let extra = "Cache-Control: no-cache\r\n";
            let ctype = "application/json";
            write_page(sock, sh, ("200 OK", extra), ctype, &body, keep, head).await
        }
        Err(e) => {
            let msg = format!("cannot list dataset: {e}\n");
            write_simple(sock, sh, 500, "Internal Server Error", &msg, false, head).await
        }
    }
}

/// A directory asked for by `req` (already opened as `dir`): its HTML index, or, asked for
/// without the final `/`, a redirect to the URL with it (as nginx answers), so the page's
/// relative links resolve inside the directory.
pub(crate) async fn respond_directory(
    sock: &mut Conn,
    sh: &Shared,
    req: &Request,
    dir: File,
) -> io::Result<bool> {
    let (keep, head) = (req.keep_alive, req.method == Method::Head);
    let mut url = String::from("/");
    for c in &req.path {
        url.push_str(c);
        url.push('/');
    }
    if !req.path.is_empty() && !req.trailing_slash {
        let location = percent_encode_path(&url);
        let body = format!("a directory: {location}\n");
        let status = (
            "301 Moved Permanently",
            &*format!("Location: {location}\r\n"),
        );
        let ctype = "text/plain; charset=utf-8";
        return write_page(sock, sh, status, ctype, body.as_bytes(), keep, head).await;
    }
    // Read in place, as nginx's autoindex reads: one directory, bounded by index::MAX_ENTRIES,
    // one index at a time; a request meanwhile is told to come back.
    use std::sync::atomic::Ordering;
    if sh.index_builds.fetch_add(1, Ordering::AcqRel) > 0 {
        sh.index_builds.fetch_sub(1, Ordering::AcqRel);
        let status = ("503 Service Unavailable", "Retry-After: 1\r\n");
        let body = b"another directory index is being built: retry in a second\n";
        let ctype = "text/plain; charset=utf-8";
        return write_page(sock, sh, status, ctype, body, keep, head).await;
    }
    let follow = |name: &str| {
        let mut comps = req.path.clone();
        comps.push(name.to_string());
        confine(sh, &comps).ok().flatten()?.metadata().ok()
    };
    let built = index::entries(&dir, follow);
    sh.index_builds.fetch_sub(1, Ordering::AcqRel);
    let (entries, left_out) = match built {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let msg = "permission denied\n";
            return write_simple(sock, sh, 403, "Forbidden", msg, keep, head).await;
        }
        Err(e) => return Err(e),
    };
    let body = index::page(&url, &entries, left_out);
    let status = ("200 OK", "Cache-Control: no-cache\r\n");
    let ctype = "text/html; charset=utf-8";
    write_page(sock, sh, status, ctype, body.as_bytes(), keep, head).await
}

/// Sends a made-up page: `status` (its line and any extra header lines), its type and body
/// (left out for `HEAD`).
async fn write_page(
    sock: &mut Conn,
    sh: &Shared,
    (status, extra): (&str, &str),
    content_type: &str,
    body: &[u8],
    keep: bool,
    head: bool,
) -> io::Result<bool> {
    let h = format!(
        "HTTP/1.1 {status}\r\nServer: wattio\r\nDate: {}\r\n{extra}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        now_date().1,
        body.len(),
        connection(keep)
    );
    send(sock, sh, h.as_bytes()).await?;
    if !head {
        send(sock, sh, body).await?;
    }
    Ok(keep)
}
