//! The exporter's HTTP/1.1 server: `GET /metrics`, `GET /healthz`, `GET /`, on std sockets with
//! one short-lived thread per connection (capped), parsing requests with `httparse`; over TLS
//! and behind basic authentication where a web-config file asks ([`WebConfig`]). Beside it, the
//! sampling clock: one thread that samples the [`Exporter`] every `interval`, whoever scrapes.

use super::web_config::{BearerToken, WebConfig};
use super::Exporter;
use crate::exposition::ExpositionFormat;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wattio_progress::Cancel;

const MAX_CONNECTIONS: usize = 64;
const MAX_REQUEST: usize = 8192;
/// How long a client has, from its connection, to finish its TLS handshake and send its whole
/// request; and how long each write of the answer may wait for it to read.
const IO_DEADLINE: Duration = Duration::from_secs(5);

/// How the exporter serves: the sampling clock's period, the optional web configuration and
/// bearer token (either credential admits a scraper when both are set).
pub struct ServeOptions {
    pub interval: Duration,
    pub web: Option<WebConfig>,
    pub bearer: Option<BearerToken>,
}

impl ServeOptions {
    /// Whether a request with this `Authorization` value may read the metrics.
    fn admits(&self, authorization: Option<&str>) -> bool {
        let users = self.web.as_ref().and_then(|w| w.users.as_ref());
        if users.is_none() && self.bearer.is_none() {
            return true;
        }
        users.is_some_and(|u| u.allows(authorization))
            || self
                .bearer
                .as_ref()
                .is_some_and(|b| b.allows(authorization))
    }

    /// The `WWW-Authenticate` challenge of a 401: Basic where users are set, else Bearer.
    fn challenge(&self) -> &'static str {
        match self.web.as_ref().and_then(|w| w.users.as_ref()) {
            Some(_) => "Basic realm=\"wattio\", charset=\"UTF-8\"",
            None => "Bearer realm=\"wattio\"",
        }
    }
}

struct Response<'a> {
    status: &'a str,
    content_type: &'a str,
    body: &'a str,
    /// `WWW-Authenticate` on a 401.
    challenge: Option<&'static str>,
}

fn respond(stream: &mut impl Write, r: &Response<'_>, web: Option<&WebConfig>) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nVary: Accept\r\nConnection: close\r\n",
        r.status,
        r.content_type,
        r.body.len()
    );
    if let Some(c) = r.challenge {
        head.push_str(&format!("WWW-Authenticate: {c}\r\n"));
    }
    for (name, value) in web.map(|w| w.headers.as_slice()).unwrap_or_default() {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(r.body.as_bytes())?;
    stream.flush()
}

fn plain<'a>(status: &'a str, body: &'a str) -> Response<'a> {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body,
        challenge: None,
    }
}

/// Reads one request from `stream` and answers it. `socket` is the connection under it, whose
/// read timeout is narrowed before each read so that the whole request (a TLS handshake
/// included) arrives within [`IO_DEADLINE`] of the connection, however slowly it trickles.
fn handle(
    stream: &mut (impl Read + Write),
    socket: &TcpStream,
    exporter: &Exporter,
    opts: &ServeOptions,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let web = opts.web.as_ref();
    let deadline = Instant::now() + IO_DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        socket.set_read_timeout(Some(left))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let path = req.path.unwrap_or("/");
                let path = path.split('?').next().unwrap_or(path);
                let header = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                };
                // `/healthz` answers without credentials (it tells only "ok" or why not), so a
                // liveness probe needs no secret; everything else asks for them when users are set.
                let authorised = path == "/healthz" || opts.admits(header("authorization"));
                if !authorised {
                    let r = Response {
                        challenge: Some(opts.challenge()),
                        ..plain("401 Unauthorized", "wattio exporter: credentials needed\n")
                    };
                    return respond(stream, &r, web);
                }
                return match (req.method, path) {
                    (Some("GET"), "/metrics") => {
                        let format = ExpositionFormat::from_accept(header("accept"));
                        let body = exporter.scrape(format, opts.interval);
                        let r = Response {
                            content_type: format.content_type(),
                            ..plain("200 OK", &body)
                        };
                        respond(stream, &r, web)
                    }
                    (Some("GET"), "/healthz") => match exporter.unhealthy(opts.interval) {
                        None => respond(stream, &plain("200 OK", "ok\n"), web),
                        Some(why) => respond(
                            stream,
                            &plain("503 Service Unavailable", &format!("{why}\n")),
                            web,
                        ),
                    },
                    (Some("GET"), "/") => respond(
                        stream,
                        &plain(
                            "200 OK",
                            "wattio exporter: metrics at /metrics, health at /healthz\n",
                        ),
                        web,
                    ),
                    (Some("GET"), _) => {
                        respond(stream, &plain("404 Not Found", "not found\n"), web)
                    }
                    _ => respond(stream, &plain("405 Method Not Allowed", "only GET\n"), web),
                };
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => continue,
            _ => return respond(stream, &plain("400 Bad Request", "bad request\n"), web),
        }
    }
}

/// One connection, over TLS where the options say.
fn connection(stream: TcpStream, exporter: &Exporter, opts: &ServeOptions) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_DEADLINE))?;
    stream.set_write_timeout(Some(IO_DEADLINE))?;
    match opts.web.as_ref().and_then(|w| w.tls.clone()) {
        Some(tls) => {
            // A TLS connection opens with a handshake record (content type 22); anything else
            // is a plain HTTP request, answered in plain text with the fix, as Go's servers do.
            let mut first = [0u8; 1];
            if stream.peek(&mut first)? == 1 && first[0] != 0x16 {
                let mut stream = stream;
                let r = plain(
                    "400 Bad Request",
                    "wattio exporter: this port speaks HTTPS; scrape it with scheme: https\n",
                );
                return respond(&mut stream, &r, None);
            }
            let conn = rustls::ServerConnection::new(tls).map_err(io::Error::other)?;
            let socket = stream.try_clone()?;
            let mut tls = rustls::StreamOwned::new(conn, stream);
            handle(&mut tls, &socket, exporter, opts)?;
            tls.conn.send_close_notify();
            tls.flush()
        }
        None => {
            let socket = stream.try_clone()?;
            let mut stream = stream;
            handle(&mut stream, &socket, exporter, opts)
        }
    }
}

/// Samples `exporter` every `interval` from now until `cancel` is set, the first sample at once.
/// A sample that overruns its period skips the ticks it missed rather than bunching up.
fn sampling_clock(exporter: &Exporter, interval: Duration, cancel: &Cancel) {
    let start = Instant::now();
    let mut tick = start;
    loop {
        exporter.sample(tick.elapsed());
        exporter.render_ahead(interval);
        let since = start.elapsed().as_secs_f64();
        let k = (since / interval.as_secs_f64()).floor() + 1.0;
        tick = start + interval.mul_f64(k);
        if cancel.sleep(tick.saturating_duration_since(Instant::now())) {
            return;
        }
    }
}

/// Serves `exporter` on `listener` until `cancel` is set, sampling it on its own clock. Between
/// connections it sleeps in one `poll(2)` on the listener and the cancel flag. An accept error
/// sets `cancel` (to stop the clock) and is returned.
pub fn serve_metrics(
    listener: TcpListener,
    exporter: Arc<Exporter>,
    opts: ServeOptions,
    cancel: &Cancel,
) -> io::Result<()> {
    // Non-blocking, so a connection gone between the wake-up and `accept` cannot block it.
    listener.set_nonblocking(true)?;
    let active = Arc::new(AtomicUsize::new(0));
    let opts = Arc::new(opts);
    std::thread::scope(|scope| {
        let clock = Arc::clone(&exporter);
        let interval = opts.interval;
        scope.spawn(move || sampling_clock(&clock, interval, cancel));
        let result = accept_loop(&listener, &exporter, &opts, &active, cancel);
        if result.is_err() {
            cancel.set();
        }
        result
    })
}

fn accept_loop(
    listener: &TcpListener,
    exporter: &Arc<Exporter>,
    opts: &Arc<ServeOptions>,
    active: &Arc<AtomicUsize>,
    cancel: &Cancel,
) -> io::Result<()> {
    while !cancel.is_set() {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    // Over TLS a plain answer would be noise to the client: close instead.
                    if opts.web.as_ref().is_none_or(|w| w.tls.is_none()) {
                        let mut s = stream;
                        let _ = respond(&mut s, &plain("503 Service Unavailable", "busy\n"), None);
                    }
                    continue;
                }
                active.fetch_add(1, Ordering::Relaxed);
                let (ex, act, opts) = (Arc::clone(exporter), Arc::clone(active), Arc::clone(opts));
                std::thread::spawn(move || {
                    let _ = connection(stream, &ex, &opts);
                    act.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                cancel.wait_readable(listener, None)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
