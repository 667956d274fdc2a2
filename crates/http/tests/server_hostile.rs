//! `wattio serve` against clients that misbehave on purpose, over real loopback sockets: a
//! client that stops reading, too many connections from one address, a FIFO in the tree,
//! concurrent first listing requests, and conditional requests as RFC 9110 has them. Every
//! wait in these tests is bounded.

mod common;

use common::{connect, connect_from, get, header, read_response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use wattio_http::{ServerConfig, ServerHandle};

/// Waits until a fresh client gets `want` for `req`, for at most `secs` seconds.
fn until_status(h: &ServerHandle, req: &str, want: u16, secs: u64) -> Duration {
    let t = Instant::now();
    loop {
        let mut s = connect(h);
        let ok = s.write_all(req.as_bytes()).is_ok()
            && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                read_response(&mut s, false).0
            }))
            .is_ok_and(|st| st == want);
        if ok {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "no {want} within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Pipelined `GET`s of a 1 MiB file on a socket with a 4 KiB receive buffer that is never read:
/// 64 MiB of answers fill both buffers, whatever their sizes, and the server's write makes no
/// progress. With one connection allowed, that client held the server for good (every other one
/// got 503); the write now gives up after the idle timeout.
#[test]
fn a_client_that_stops_reading_is_dropped_after_the_idle_timeout() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a"), b"a").unwrap();
    std::fs::write(d.path().join("big"), vec![7u8; 1 << 20]).unwrap();
    let mut cfg = ServerConfig::new(d.path());
    cfg.max_connections = 1;
    cfg.idle_timeout = Duration::from_secs(1);
    let h = ServerHandle::start(cfg, "127.0.0.1:0").unwrap();
    let mut stuck = connect_from("127.0.0.1:0", h.addr, Some(4096));
    stuck
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stuck
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // Answers far beyond any socket buffer (HEADs' answers could all fit in an autotuned 4 MiB
    // send buffer, leaving the server idle and the connection evictable).
    let gets = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n".repeat(64);
    // The server reads what fits and stops reading while its writes are stuck, so this write
    // may block (until the server drops us, or its own timeout): it runs on its own thread.
    let mut writer = stuck.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        let _ = writer.write_all(gets.as_bytes());
    });
    // The first byte of an answer: from here the server is busy writing to this connection,
    // not waiting for a request it could be evicted from, and the idle timeout runs.
    let mut first = [0u8; 1];
    stuck.read_exact(&mut first).unwrap();
    let waited = until_status(&h, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 200, 15);
    assert!(
        waited >= Duration::from_millis(500),
        "never held: {waited:?}"
    );
    drop(stuck);
    writing.join().unwrap();
}

/// One address may hold `--max-connections-per-client` connections; another address is still
/// served while it does.
#[test]
fn one_address_cannot_take_every_connection() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a"), b"a").unwrap();
    let mut cfg = ServerConfig::new(d.path());
    cfg.max_connections = 8;
    cfg.max_connections_per_client = Some(2);
    let h = ServerHandle::start(cfg, "127.0.0.1:0").unwrap();
    let req = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| connect_from("127.0.0.2:0", h.addr, None))
        .collect();
    for s in held.iter_mut() {
        s.write_all(req).unwrap();
        assert_eq!(read_response(s, false).0, 200);
    }
    let mut third = connect_from("127.0.0.2:0", h.addr, None);
    let (st, _, body) = read_response(&mut third, false);
    assert_eq!(st, 503, "{}", String::from_utf8_lossy(&body));
    let mut other = connect_from("127.0.0.3:0", h.addr, None);
    other.write_all(req).unwrap();
    assert_eq!(read_response(&mut other, false).0, 200);
    drop(held);
    until_status(&h, std::str::from_utf8(req).unwrap(), 200, 5);
}

/// A FIFO in the served tree: opening it for reading would wait for a writer and hold a
/// worker thread; it is opened without blocking and refused as not a regular file, and the
/// listing leaves it out.
#[test]
fn a_fifo_in_the_tree_is_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a"), b"a").unwrap();
    let fifo = d.path().join("pipe");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let h = ServerHandle::start(ServerConfig::new(d.path()), "127.0.0.1:0").unwrap();
    for _ in 0..4 {
        let (st, _, body) = get(&h, "GET /pipe HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(st, 403, "{}", String::from_utf8_lossy(&body));
    }
    let (st, _, body) = get(&h, "GET /.wattio/listing.json HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(st, 200);
    let l = wattio_http::Listing::parse(&body).unwrap();
    let paths: Vec<&str> = l.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["a"]);
    assert_eq!(get(&h, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").0, 200);
}

/// Bytes this process has read through read-like calls (`/proc/self/io`, `rchar`).
fn bytes_read() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Eight clients ask for the listing of a tree not hashed yet, at once: the tree is read
/// once, not once per request (it was read eight times, each on its own blocking thread).
#[test]
fn concurrent_first_listing_requests_read_the_tree_once() {
    let d = tempfile::tempdir().unwrap();
    let size = 32 << 20;
    for i in 0..4 {
        std::fs::write(d.path().join(format!("f{i}")), common::bytes(i, size)).unwrap();
    }
    let tree = 4 * size as u64;
    let h = ServerHandle::start(ServerConfig::new(d.path()), "127.0.0.1:0").unwrap();
    let req = b"GET /.wattio/listing.json HTTP/1.1\r\nHost: x\r\n\r\n";
    let before = bytes_read();
    let mut clients: Vec<TcpStream> = (0..8).map(|_| connect(&h)).collect();
    for c in clients.iter_mut() {
        c.write_all(req).unwrap();
    }
    let bodies: Vec<Vec<u8>> = clients
        .iter_mut()
        .map(|c| {
            let (st, _, body) = read_response(c, false);
            assert_eq!(st, 200);
            body
        })
        .collect();
    let read = bytes_read() - before;
    assert!(bodies.windows(2).all(|w| w[0] == w[1]));
    assert!(
        read < tree + tree / 2,
        "read {read} bytes for a {tree}-byte tree asked 8 times"
    );
    // a later request is answered from the checksum cache: nothing is read again
    let before = bytes_read();
    assert_eq!(get(&h, std::str::from_utf8(req).unwrap()).0, 200);
    assert!(bytes_read() - before < tree / 4);
}

/// Validators on every file and conditional requests as RFC 9110 §13 has them: a resuming
/// client whose `If-Range` no longer matches gets the whole file, never a range of another
/// version.
#[test]
fn conditional_requests_follow_rfc_9110() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("f"), b"0123456789").unwrap();
    let h = ServerHandle::start(ServerConfig::new(d.path()), "127.0.0.1:0").unwrap();
    let (st, hd, _) = get(&h, "HEAD /f HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(st, 200);
    let etag = header(&hd, "etag").unwrap().to_string();
    let lm = header(&hd, "last-modified").unwrap().to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert!(lm.ends_with(" GMT") && header(&hd, "date").is_some());
    let ask = |extra: &str| {
        get(
            &h,
            &format!("GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=2-4\r\n{extra}\r\n"),
        )
    };
    // If-Range
    let (st, _, body) = ask(&format!("If-Range: {etag}\r\n"));
    assert_eq!((st, body.as_slice()), (206, &b"234"[..]));
    let (st, _, body) = ask("If-Range: \"nope\"\r\n");
    assert_eq!((st, body.as_slice()), (200, &b"0123456789"[..]));
    let (st, _, _) = ask(&format!("If-Range: W/{etag}\r\n"));
    assert_eq!(st, 200, "a weak tag never validates a range");
    // a date validates only as Last-Modified exactly, and only once the file is a second old
    std::thread::sleep(Duration::from_millis(1100));
    let (st, _, _) = ask(&format!("If-Range: {lm}\r\n"));
    assert_eq!(st, 206);
    let (st, _, _) = ask("If-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
    assert_eq!(st, 200);
    // If-None-Match, If-Modified-Since
    let (st, hd, body) = ask(&format!("If-None-Match: \"x\", {etag}\r\n"));
    assert_eq!((st, body.len()), (304, 0));
    assert_eq!(header(&hd, "etag"), Some(etag.as_str()));
    assert_eq!(ask("If-None-Match: *\r\n").0, 304);
    assert_eq!(ask("If-None-Match: \"x\"\r\n").0, 206);
    assert_eq!(
        ask("If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n").0,
        304
    );
    assert_eq!(ask(&format!("If-Modified-Since: {lm}\r\n")).0, 304);
    assert_eq!(
        ask("If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n").0,
        206
    );
    assert_eq!(
        ask("If-Modified-Since: yesterday\r\n").0,
        206,
        "an invalid date is ignored"
    );
    // If-None-Match wins over If-Modified-Since
    assert_eq!(
        ask("If-None-Match: \"x\"\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n").0,
        206
    );
    // If-Match, If-Unmodified-Since
    assert_eq!(ask(&format!("If-Match: {etag}\r\n")).0, 206);
    assert_eq!(ask("If-Match: \"x\"\r\n").0, 412);
    assert_eq!(
        ask("If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n").0,
        412
    );
    // the file changes: its tag with it
    std::fs::write(d.path().join("f"), b"abcdefghij").unwrap();
    let (st, _, body) = ask(&format!("If-Range: {etag}\r\n"));
    assert_eq!((st, body.as_slice()), (200, &b"abcdefghij"[..]));
}
