//! The server's limits: connections per client address (`--max-connections-per-client`, an
//! IPv4 address or an IPv6 /64), and the descriptors they all need, checked against
//! `RLIMIT_NOFILE` at start-up.

use crate::config::{ServerConfig, Shared};
use crate::error::HttpError;
use std::net::IpAddr;
use std::sync::Arc;

/// Plain-HTTP connections past a limit that are still answered `503` at once; further ones
/// (and every one over TLS) are closed as soon as they are accepted, so refusing costs no more
/// descriptors than this.
pub(crate) const REFUSING_AT_ONCE: usize = 32;
/// Descriptors the process needs besides its connections (standard streams, the runtime's
/// epoll and wakers, the listener, the root, listing builds).
pub(crate) const BASE_DESCRIPTORS: u64 = 64;
/// Descriptors `cfg` may hold at once: a socket and a file per connection, the sockets of
/// connections being refused, and the process's own.
pub(crate) fn descriptors_needed(cfg: &ServerConfig) -> u64 {
    2 * cfg.max_connections as u64 + REFUSING_AT_ONCE as u64 + BASE_DESCRIPTORS
}

/// Raises the soft `RLIMIT_NOFILE` to what `cfg` needs (up to the hard limit), or says which
/// limit to change.
pub(crate) fn ensure_descriptors(cfg: &ServerConfig) -> Result<(), HttpError> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let need = descriptors_needed(cfg);
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current.is_none_or(|c| c >= need) {
        return Ok(());
    }
    if lim.maximum.is_some_and(|m| m < need) {
        let most = lim
            .maximum
            .unwrap_or(0)
            .saturating_sub(REFUSING_AT_ONCE as u64 + BASE_DESCRIPTORS)
            / 2;
        return Err(HttpError::TooFewDescriptors {
            max_connections: cfg.max_connections,
            need,
            reserved: REFUSING_AT_ONCE as u64 + BASE_DESCRIPTORS,
            limit: lim.maximum.unwrap_or(0),
            most,
        });
    }
    lim.current = Some(need);
    setrlimit(Resource::Nofile, lim).map_err(|source| HttpError::RaiseDescriptors { need, source })
}

/// One connection counted against its client address's limit while it lives.
pub(crate) struct ClientSlot {
    shared: Arc<Shared>,
    ip: Option<IpAddr>,
}

/// The client a connection counts against: its IPv4 address (an IPv4-mapped IPv6 one read as
/// IPv4), or the /64 network of its IPv6 address (the least a site gets, so one client cannot
/// pass the limit by taking more of its own addresses).
pub(crate) fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
        v4 => v4,
    }
}

impl ClientSlot {
    /// A slot for a connection from `ip`, or `None` when its client has its limit.
    pub(crate) fn take(shared: &Arc<Shared>, ip: IpAddr) -> Option<ClientSlot> {
        let ip = client_of(ip);
        let Some(max) = shared.cfg.max_connections_per_client else {
            return Some(ClientSlot {
                shared: shared.clone(),
                ip: None,
            });
        };
        let mut m = shared.per_client.lock().unwrap();
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            shared: shared.clone(),
            ip: Some(ip),
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            let mut m = self.shared.per_client.lock().unwrap();
            if let Some(n) = m.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&ip);
                }
            }
        }
    }
}
