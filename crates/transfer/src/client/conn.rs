//! Connections to the server: opening them (with a timeout), opening them ahead of need, and
//! measuring the round-trip time from connection set-up.

use super::url::HttpUrl;
use anyhow::{anyhow, Context};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// One connection to the server.
pub(super) type Stream = TcpStream;

/// Opens `n` connections in the background; failures are left to the channels, which connect
/// themselves and report errors.
pub(super) fn spawn_preconnect(
    url: &HttpUrl,
    n: usize,
) -> tokio::task::JoinHandle<Vec<(Instant, Stream)>> {
    let url = url.clone();
    tokio::spawn(async move {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let u = url.clone();
            set.spawn(async move { connect(&u).await });
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

/// Opens a fresh connection to the server, giving up after 10 s.
pub(super) async fn connect(url: &HttpUrl) -> anyhow::Result<Stream> {
    tokio::time::timeout(
        Duration::from_secs(10),
        TcpStream::connect(url.connect_addr()),
    )
    .await
    .map_err(|_| anyhow!("connecting to {} timed out", url.authority()))?
    .with_context(|| {
        format!(
            "cannot connect to {}; is the server running?",
            url.authority()
        )
    })
}

/// The round-trip time: the quickest of three TCP handshakes.
pub(super) async fn measure_rtt(url: &HttpUrl) -> anyhow::Result<Duration> {
    let mut best = Duration::from_secs(10);
    for _ in 0..3 {
        let t = Instant::now();
        let s = connect(url).await?;
        best = best.min(t.elapsed());
        drop(s);
    }
    Ok(best)
}
