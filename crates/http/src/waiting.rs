//! Who gives up a slot when the server is full: the connection that has waited longest without
//! sending a complete request.
//!
//! A connection *waits* from its accept (through its TLS handshake) until its request head is
//! complete, and again after each response until the next head is (an idle keep-alive). While
//! it waits it sits in the [`WaitingRoom`], by the time it started waiting. When every slot is
//! taken, a new connection evicts the one that has waited longest, as nginx drains its
//! reusable (idle keep-alive) connections when it runs out (`ngx_drain_connections`,
//! `src/core/ngx_connection.c`), extended here to connections that have not finished a TLS
//! handshake or a request head: silent connections, slowloris heads and stalled handshakes all
//! give way to a client that asks for something, so a flood of them cannot lock a real client
//! out, per-client limit or not. A connection whose request is being answered never waits and
//! is never evicted.
//!
//! The evicted connection's slot (its permit of the connection limit) is handed to the new one
//! at once, under the room's lock: had the new one waited for the slot to be released, a third
//! connection accepted meanwhile could take it, and every such race would leave a newcomer
//! waiting for a slot nobody frees.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{Notify, OwnedSemaphorePermit};

/// What the room knows of one connection: how to tell it to close, and its slot.
struct Seat {
    evict: Notify,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

/// The waiting connections, oldest first.
#[derive(Default)]
pub(crate) struct WaitingRoom {
    waiting: Mutex<BTreeMap<(Instant, u64), Arc<Seat>>>,
    next_id: AtomicU64,
}

/// One connection's place in the room, and its slot while it has one.
pub(crate) struct Ticket {
    room: Arc<WaitingRoom>,
    id: u64,
    /// When it started waiting; `None` while its request is answered.
    since: Option<Instant>,
    seat: Arc<Seat>,
}

impl WaitingRoom {
    /// A ticket for a connection just accepted with its slot's `permit`: waiting from now.
    pub(crate) fn admit(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Ticket {
        let mut t = Ticket {
            room: Arc::clone(self),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            since: None,
            seat: Arc::new(Seat {
                evict: Notify::new(),
                permit: Mutex::new(Some(permit)),
            }),
        };
        t.wait();
        t
    }

    /// Evicts the connection that has waited longest, if any waits: it is taken out of the
    /// room and told to close, and its slot is returned for the connection that takes its
    /// place.
    pub(crate) fn evict_oldest(&self) -> Option<OwnedSemaphorePermit> {
        let mut waiting = self.lock();
        while let Some((_, seat)) = waiting.pop_first() {
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
        None
    }

    /// How many connections wait now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Instant, u64), Arc<Seat>>> {
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
            self.room
                .lock()
                .insert((now, self.id), Arc::clone(&self.seat));
            self.since = Some(now);
        }
    }

    /// A complete request arrived: the connection stops waiting while it is answered. Returns
    /// false when it was evicted meanwhile (it must close instead).
    #[must_use]
    pub(crate) fn busy(&mut self) -> bool {
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

    #[tokio::test]
    async fn the_longest_waiting_connection_gives_its_slot_to_the_newcomer() {
        let limit = Arc::new(tokio::sync::Semaphore::new(2));
        let permit = || limit.clone().try_acquire_owned().unwrap();
        let room = Arc::new(WaitingRoom::default());
        let mut first = room.admit(permit());
        tokio::time::sleep(Duration::from_millis(2)).await;
        let second = room.admit(permit());
        assert!(limit.clone().try_acquire_owned().is_err(), "full");
        assert!(first.busy(), "not evicted yet");
        first.wait();
        // `first` waits again, since after `second`: `second` is now the oldest.
        let handed = room.evict_oldest().expect("a slot for the newcomer");
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
        let third = room.admit(handed);
        assert!(first.busy());
        assert!(room.evict_oldest().is_some(), "the newcomer waits");
        drop(third);
        assert!(
            room.evict_oldest().is_none(),
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
}
