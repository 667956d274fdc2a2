//! What `wattio serve` is told (its settings) and what its connections' tasks share (the root,
//! the listing cache, the per-client counts and the waiting room): in a file of their own, so
//! that the server and the pieces it is made of (`confine`, `limits`) depend on them and not
//! on each other.

use crate::listing::ListingCache;
use crate::waiting::WaitingRoom;
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattio_progress::Sink;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The served directory.
    pub root: PathBuf,
    /// Connections served at once (TLS handshakes included). When all are taken, a new one
    /// takes the place of the connection that has waited longest without a complete request
    /// (silent, mid-handshake, a head trickling in, an idle keep-alive); when none waits,
    /// it gets 503 (over TLS: closed).
    pub max_connections: usize,
    /// Connections served at once to one client address; `None`: no limit of its own.
    pub max_connections_per_client: Option<usize>,
    /// A connection idle, or a peer not reading (no progress on a write), this long is closed.
    pub idle_timeout: Duration,
    /// A TLS handshake not done within this is dropped.
    pub handshake_timeout: Duration,
    /// Per-connection pacing of response bodies in bytes/s (tests and demos: makes a loopback
    /// transfer last long enough to interrupt it). `None` = unpaced.
    pub rate_limit: Option<f64>,
    /// Serve HTTPS with this configuration ([`crate::tls_server_config`]); `None` = HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Where the server tells what goes wrong without stopping it (failing `accept`s).
    pub warnings: Sink<str>,
}

impl ServerConfig {
    /// Defaults for serving `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ServerConfig {
            root: root.into(),
            max_connections: 256,
            max_connections_per_client: None,
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            rate_limit: None,
            tls: None,
            warnings: Sink::none(),
        }
    }
}

pub(crate) struct Shared {
    /// The served root, canonical, and a descriptor of it every file is opened beneath.
    pub(crate) root: PathBuf,
    pub(crate) root_fd: OwnedFd,
    pub(crate) cfg: ServerConfig,
    pub(crate) listings: Arc<ListingCache>,
    /// Open connections per client address (only with a per-client limit).
    pub(crate) per_client: Mutex<HashMap<IpAddr, usize>>,
    /// The connections waiting for a request, which give way to a new one when all slots are
    /// taken.
    pub(crate) waiting: Arc<WaitingRoom>,
    /// HTML directory indexes being built now: one at a time, since each is read in place on a
    /// worker thread (as nginx's autoindex is), so the other workers keep serving files.
    pub(crate) index_builds: std::sync::atomic::AtomicUsize,
}
