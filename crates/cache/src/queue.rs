//! The deferred write queue: capped in bytes, FIFO so renames and deletes keep their order.

use std::collections::VecDeque;

/// Something that can be queued: it reports how many bytes it holds in memory.
pub(crate) trait Queued {
    /// Bytes held by this item (data plus metadata).
    fn bytes(&self) -> u64;
}

/// Default cap: 4 MB, as in the paper (§4.3).
pub(crate) const DEFAULT_CAP_BYTES: u64 = 4 * 1024 * 1024;

/// A FIFO of deferred operations whose total size never exceeds its cap.
#[derive(Debug, Clone)]
pub(crate) struct WriteQueue<T> {
    items: VecDeque<T>,
    bytes: u64,
    cap: u64,
}

impl<T: Queued> WriteQueue<T> {
    /// An empty queue holding at most `cap` bytes.
    pub fn new(cap: u64) -> Self {
        Self {
            items: VecDeque::new(),
            bytes: 0,
            cap,
        }
    }

    /// The cap in bytes.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Bytes queued.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether `item` fits without passing the cap.
    pub fn fits(&self, item: &T) -> bool {
        self.bytes + item.bytes() <= self.cap
    }

    /// Queue `item`, or give it back when it would pass the cap (the caller flushes first, or
    /// writes an item larger than the cap straight through).
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if !self.fits(&item) {
            return Err(item);
        }
        self.bytes += item.bytes();
        self.items.push_back(item);
        Ok(())
    }

    /// Take everything, oldest first.
    pub fn drain(&mut self) -> Vec<T> {
        self.bytes = 0;
        self.items.drain(..).collect()
    }

    /// Iterate oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct B(u64);
    impl Queued for B {
        fn bytes(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let mut q = WriteQueue::new(10);
        assert!(q.push(B(6)).is_ok());
        assert!(q.push(B(5)).is_err());
        assert!(q.push(B(4)).is_ok());
        assert_eq!(q.bytes(), 10);
        assert_eq!(q.drain().len(), 2);
        assert_eq!(q.bytes(), 0);
        assert!(q.push(B(11)).is_err());
    }

    proptest! {
        /// The queue never passes its cap, and its byte count is the sum of its items.
        #[test]
        fn never_passes_cap(cap in 0u64..10_000, sizes in proptest::collection::vec(0u64..4000, 0..200), drains in proptest::collection::vec(any::<bool>(), 200)) {
            let mut q = WriteQueue::new(cap);
            for (i, s) in sizes.into_iter().enumerate() {
                let _ = q.push(B(s));
                prop_assert!(q.bytes() <= cap);
                prop_assert_eq!(q.bytes(), q.iter().map(|b| b.0).sum::<u64>());
                if drains[i] { q.drain(); }
            }
        }
    }
}
