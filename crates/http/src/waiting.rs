//! Who gives up a slot when the server is full: a connection that has waited longest without
//! sending a complete request, taken from the client address that holds the most of them.
//!
//! A connection *waits* from its accept (through its TLS handshake) until its request head is
//! complete, and again after each response until the next head is (an idle keep-alive). While
//! it waits it sits in the [`WaitingRoom`], by the time it started waiting and its client's
//! address. When every slot is taken, a new connection takes the place of the longest-waiting
//! connection of the address that has the most waiting ones, unless the newcomer's own
//! address already has as many (then it is refused: it would only evict its own). nginx drains
//! its reusable (idle keep-alive) connections when it runs out (`ngx_drain_connections`,
//! `src/core/ngx_connection.c`); wattio extends that to connections that have not finished a
//! TLS handshake or a request head, so silent connections, slowloris heads and stalled
//! handshakes all give way to a client that asks for something, and a flood of them cannot lock
//! a real client out, per-client limit or not. Taking from the heaviest address, not simply the
//! oldest connection, keeps a flood from churning: once the flooding addresses share the
//! waiting slots, their new connections are refused at once (over TLS, before any handshake)
//! instead of each evicting another and costing a handshake, and they can no longer evict
//! anyone else's. A connection whose request is being answered never waits and is never
//! evicted.
//!
//! The evicted connection's slot (its permit of the connection limit) is handed to the new one
//! at once, under the room's lock: had the new one waited for the slot to be released, a third
//! connection accepted meanwhile could take it, and every such race would leave a newcomer
//! waiting for a slot nobody frees.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{Notify, OwnedSemaphorePermit};

/// What the room knows of one connection: how to tell it to close, and its slot.
struct Seat {
    evict: Notify,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

/// One waiting connection: its client, whether it is an idle keep-alive (it has had a request
/// answered), and its seat.
struct Waiter {
    client: IpAddr,
    kept_alive: bool,
    seat: Arc<Seat>,
}

/// The waiting connections, oldest first, with each one's client; and how many each client
/// has waiting.
#[derive(Default)]
struct Waiting {
    by_age: BTreeMap<(Instant, u64), Waiter>,
    per_client: HashMap<IpAddr, usize>,
}

impl Waiting {
    fn insert(&mut self, key: (Instant, u64), w: Waiter) {
        *self.per_client.entry(w.client).or_insert(0) += 1;
        self.by_age.insert(key, w);
    }

    fn remove(&mut self, key: &(Instant, u64)) -> Option<Waiter> {
        let w = self.by_age.remove(key)?;
        if let Some(n) = self.per_client.get_mut(&w.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&w.client);
            }
        }
        Some(w)
    }
}

/// The waiting connections.
#[derive(Default)]
pub(crate) struct WaitingRoom {
    waiting: Mutex<Waiting>,
    next_id: AtomicU64,
}

/// One connection's place in the room, and its slot while it has one.
pub(crate) struct Ticket {
    room: Arc<WaitingRoom>,
    id: u64,
    client: IpAddr,
    /// When it started waiting; `None` while its request is answered.
    since: Option<Instant>,
    /// Whether a request of it has been answered (it then waits as an idle keep-alive).
    served: bool,
    seat: Arc<Seat>,
}

impl WaitingRoom {
    /// A ticket for a connection of `client` just accepted with its slot's `permit`: waiting
    /// from now.
    pub(crate) fn admit(self: &Arc<Self>, client: IpAddr, permit: OwnedSemaphorePermit) -> Ticket {
        let mut t = Ticket {
            room: Arc::clone(self),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            client,
            since: None,
            served: false,
            seat: Arc::new(Seat {
                evict: Notify::new(),
                permit: Mutex::new(Some(permit)),
            }),
        };
        t.wait();
        t
    }

    /// Makes room for a new connection of `client`: evicts the longest-waiting connection of
    /// the client with the most waiting ones (it is taken out of the room and told to close)
    /// and returns its slot. When `client` itself has as many waiting as anyone, only one of
    /// its own idle keep-alives gives way (as a browser's next connection replaces its idle
    /// one); a connection of its that never had a request answered does not, and `None` is
    /// returned, as when nobody waits.
    pub(crate) fn make_room_for(&self, client: IpAddr) -> Option<OwnedSemaphorePermit> {
        let mut w = self.lock();
        loop {
            let mine = w.per_client.get(&client).copied().unwrap_or(0);
            let most = w.per_client.values().copied().max()?;
            let key = w
                .by_age
                .iter()
                .find(|(_, v)| match mine >= most {
                    true => v.client == client && v.kept_alive,
                    false => w.per_client.get(&v.client) == Some(&most),
                })
                .map(|(k, _)| *k)?;
            let seat = w.remove(&key)?.seat;
            let permit = seat
                .permit
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            seat.evict.notify_one();
            if permit.is_some() {
                return permit;
            }
        }
    }

    /// How many connections wait now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().by_age.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A panic while holding it leaves a plain map behind: nothing to repair.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Ticket {
    /// The connection waits for a request from now on.
    pub(crate) fn wait(&mut self) {
        if self.since.is_none() {
            let now = Instant::now();
            self.room.lock().insert(
                (now, self.id),
                Waiter {
                    client: self.client,
                    kept_alive: self.served,
                    seat: Arc::clone(&self.seat),
                },
            );
            self.since = Some(now);
        }
    }

    /// A complete request arrived: the connection stops waiting while it is answered. Returns
    /// false when it was evicted meanwhile (it must close instead).
    #[must_use]
    pub(crate) fn busy(&mut self) -> bool {
        self.served = true;
        match self.since.take() {
            Some(since) => self.room.lock().remove(&(since, self.id)).is_some(),
            None => true,
        }
    }

    /// Completes when this connection is evicted.
    pub(crate) async fn evicted(&self) {
        self.seat.evict.notified().await
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(since) = self.since {
            self.room.lock().remove(&(since, self.id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[tokio::test]
    async fn the_longest_waiting_connection_gives_its_slot_to_the_newcomer() {
        let limit = Arc::new(tokio::sync::Semaphore::new(2));
        let permit = || limit.clone().try_acquire_owned().unwrap();
        let room = Arc::new(WaitingRoom::default());
        let mut first = room.admit(ip(2), permit());
        tokio::time::sleep(Duration::from_millis(2)).await;
        let second = room.admit(ip(3), permit());
        assert!(limit.clone().try_acquire_owned().is_err(), "full");
        assert!(first.busy(), "not evicted yet");
        first.wait();
        // `first` waits again, since after `second`: `second` is now the oldest.
        let handed = room.make_room_for(ip(1)).expect("a slot for the newcomer");
        tokio::time::timeout(Duration::from_secs(1), second.evicted())
            .await
            .expect("the oldest is told");
        let mut second = second;
        assert!(!second.busy(), "an evicted connection must close");
        drop(second);
        assert!(
            limit.clone().try_acquire_owned().is_err(),
            "the slot went to the newcomer"
        );
        let third = room.admit(ip(1), handed);
        assert!(first.busy());
        drop(third);
        assert!(
            room.make_room_for(ip(1)).is_none(),
            "a busy connection is never evicted"
        );
        drop(first);
        assert_eq!(room.len(), 0);
        assert_eq!(
            limit.available_permits(),
            2,
            "every slot goes back when its connection closes"
        );
    }

    #[tokio::test]
    async fn a_flood_from_one_address_evicts_only_its_own_and_is_then_refused() {
        let limit = Arc::new(tokio::sync::Semaphore::new(4));
        let permit = || limit.clone().try_acquire_owned().unwrap();
        let room = Arc::new(WaitingRoom::default());
        // A real client's idle keep-alive first (the oldest), then three silent connections.
        let _client = room.admit(ip(1), permit());
        let flood: Vec<Ticket> = (0..3).map(|_| room.admit(ip(9), permit())).collect();
        // The flood's next connection would evict one of its own: refused instead.
        assert!(room.make_room_for(ip(9)).is_none());
        // Another client takes the slot of the flood's oldest, not the older keep-alive's.
        let handed = room.make_room_for(ip(2)).expect("room for a new address");
        tokio::time::timeout(Duration::from_secs(1), flood[0].evicted())
            .await
            .expect("the flood's oldest is told");
        let _other = room.admit(ip(2), handed);
        // 9 has 2 waiting, 1 and 2 one each: 1 and 2 may still evict 9's, 9 nobody.
        assert!(room.make_room_for(ip(9)).is_none());
        assert!(room.make_room_for(ip(1)).is_some());
        assert_eq!(room.len(), 3);
    }

    #[tokio::test]
    async fn a_client_at_the_most_may_replace_its_own_idle_keep_alive_only() {
        let limit = Arc::new(tokio::sync::Semaphore::new(2));
        let permit = || limit.clone().try_acquire_owned().unwrap();
        let room = Arc::new(WaitingRoom::default());
        let silent = room.admit(ip(1), permit());
        let mut kept = room.admit(ip(1), permit());
        assert!(
            room.make_room_for(ip(1)).is_none(),
            "its own silent ones do not give way"
        );
        assert!(kept.busy());
        kept.wait();
        assert!(
            room.make_room_for(ip(1)).is_some(),
            "its idle keep-alive does"
        );
        tokio::time::timeout(Duration::from_secs(1), kept.evicted())
            .await
            .expect("the keep-alive is told");
        drop(silent);
    }
}
