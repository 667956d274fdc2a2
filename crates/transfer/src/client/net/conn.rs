//! Connections to the server: opening them (TCP, then TLS for `https` URLs, each with a
//! timeout), opening them ahead of need, and measuring the round-trip time from TCP set-up.

use super::url::HttpUrl;
use crate::error::{failure, EngineResult, Failure, Kind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use wattio_http::tls::{self, ClientTlsOptions};

/// One connection to the server.
pub(crate) type Stream = tls::Conn;

/// How long a TCP connect, and then a TLS handshake, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens connections for one transfer. Each TLS configuration (verifying, and not verifying
/// for `--insecure`) is built on its first `https` connection and shared by all later ones, so
/// they share its session cache: a channel that reconnects resumes its TLS session instead of
/// a full handshake.
pub(crate) struct Connector {
    tls_options: ClientTlsOptions,
    /// The servers (`host:port`, lower case) `--insecure` covers: those named on the command
    /// line.
    named: Vec<String>,
    /// Indexed by whether certificates are verified.
    tls: Mutex<[Option<tokio_rustls::TlsConnector>; 2]>,
}

impl Connector {
    pub(crate) fn new(tls_options: ClientTlsOptions, named: Vec<String>) -> Connector {
        Connector {
            tls_options,
            named,
            tls: Mutex::new([None, None]),
        }
    }

    /// Whether `url`'s certificate is verified: unless `--insecure-all`, or `--insecure` and
    /// the server was named on the command line.
    fn verifies(&self, url: &HttpUrl) -> bool {
        let o = &self.tls_options;
        !(o.insecure_all
            || o.insecure && self.named.contains(&url.authority().to_ascii_lowercase()))
    }

    fn tls_connector(&self, verify: bool) -> EngineResult<tokio_rustls::TlsConnector> {
        let mut g = self.tls.lock().unwrap();
        if let Some(c) = g[verify as usize].as_ref() {
            return Ok(c.clone());
        }
        let config = tls::client_config(&self.tls_options, verify).map_err(as_tls)?;
        let c = tokio_rustls::TlsConnector::from(config);
        g[verify as usize] = Some(c.clone());
        Ok(c)
    }

    /// A fresh connection to `url`'s server, with TLS for `https`.
    pub(crate) async fn connect(&self, url: &HttpUrl) -> EngineResult<Stream> {
        let tcp = tcp_connect(url).await?;
        let _ = tcp.set_nodelay(true);
        if !url.tls {
            return Ok(Stream::Plain(tcp));
        }
        let name = tls::server_name(&url.host).map_err(as_tls)?;
        let verify = self.verifies(url);
        let skip = if self.named.contains(&url.authority().to_ascii_lowercase()) {
            "--insecure"
        } else {
            "--insecure-all (this server was not named on the command line, so --insecure does not cover it)"
        };
        let s = tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.tls_connector(verify)?.connect(name, tcp),
        )
        .await
        .map_err(|_| {
            failure!(
                Unreachable,
                "TLS handshake with {} timed out",
                url.authority()
            )
        })?
        .map_err(|e| as_tls(tls::handshake_error(&url.host, &e, skip)))?;
        Ok(Stream::Tls(Box::new(s.into())))
    }
}

/// Opens `n` connections in the background; failures are left to the channels, which connect
/// themselves and report errors.
pub(crate) fn spawn_preconnect(
    connector: &Arc<Connector>,
    url: &HttpUrl,
    n: usize,
) -> tokio::task::JoinHandle<Vec<(Instant, Stream)>> {
    let url = url.clone();
    let connector = connector.clone();
    tokio::spawn(async move {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let u = url.clone();
            let c = connector.clone();
            set.spawn(async move { c.connect(&u).await });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(Ok(s)) = r {
                out.push((Instant::now(), s));
            }
        }
        out
    })
}

/// A TCP connection to the server, giving up after 10 s.
async fn tcp_connect(url: &HttpUrl) -> EngineResult<TcpStream> {
    tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(url.connect_addr()))
        .await
        .map_err(|_| failure!(Unreachable, "connecting to {} timed out", url.authority()))?
        .map_err(|e| {
            failure!(
                Unreachable,
                "cannot connect to {}; is the server running?: {e}",
                url.authority()
            )
            .into()
        })
}

/// An error of `wattio_http::tls` as a [`Kind::Tls`] failure.
fn as_tls(e: wattio_http::HttpError) -> Failure {
    Kind::Tls.msg(e.message())
}

/// The round-trip time: the quickest of three TCP handshakes (no TLS: its handshake costs
/// CPU time on both sides as well as round trips).
pub(crate) async fn measure_rtt(url: &HttpUrl) -> EngineResult<Duration> {
    let mut best = Duration::from_secs(10);
    for _ in 0..3 {
        let t = Instant::now();
        let s = tcp_connect(url).await?;
        best = best.min(t.elapsed());
        drop(s);
    }
    Ok(best)
}
