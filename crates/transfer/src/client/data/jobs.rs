//! The transfer's files, a list that grows while channels read it: a directory index is still
//! being walked when the first files are fetched, so files are appended as they are found, and
//! a file's index (what chunks carry) stays valid and its entry in place for the whole run.

use super::files::FileJob;
use once_cell::race::OnceBox;
use std::ops::Index;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Slots in the first segment; segment `k` has `FIRST << k`, so 40 segments hold more files
/// than any dataset (2^45).
const FIRST: usize = 32;
const SEGMENTS: usize = 40;

/// A segment's slots, allocated together.
type Segment = Box<[OnceBox<FileJob>]>;

/// Append-only: [`Jobs::push`] takes `&self`, entries never move (segments are allocated
/// once, never reallocated), and indexing needs no lock. Each slot holds a box set once (a
/// pointer: 8 bytes, where a `OnceLock` of a box takes 16), so the slots a segment has beyond
/// the last file (up to half of the list) cost a pointer each, not a job.
pub(crate) struct Jobs {
    segments: [OnceLock<Segment>; SEGMENTS],
    /// Entries pushed and readable.
    len: AtomicUsize,
    /// Serialises pushes, so `len` counts only entries already in place.
    push: Mutex<()>,
}

/// Segment and offset of entry `i`.
fn place(i: usize) -> (usize, usize) {
    let b = i / FIRST + 1;
    let seg = (usize::BITS - 1 - b.leading_zeros()) as usize;
    (seg, i - FIRST * ((1 << seg) - 1))
}

impl Jobs {
    pub(crate) fn new() -> Jobs {
        Jobs {
            segments: std::array::from_fn(|_| OnceLock::new()),
            len: AtomicUsize::new(0),
            push: Mutex::new(()),
        }
    }

    /// Appends `job`; returns its index.
    pub(crate) fn push(&self, job: Box<FileJob>) -> usize {
        let _g = self.push.lock().unwrap();
        let i = self.len.load(Ordering::SeqCst);
        let (seg, off) = place(i);
        let slots =
            self.segments[seg].get_or_init(|| (0..FIRST << seg).map(|_| OnceBox::new()).collect());
        if slots[off].set(job).is_err() {
            unreachable!("pushes are serialised, each slot is set once");
        }
        self.len.store(i + 1, Ordering::SeqCst);
        i
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }

    pub(crate) fn get(&self, i: usize) -> Option<&FileJob> {
        if i >= self.len() {
            return None;
        }
        let (seg, off) = place(i);
        self.segments[seg].get()?.get(off)?.get()
    }

    /// The entries pushed so far, in order.
    pub(crate) fn iter(&self) -> JobsIter<'_> {
        JobsIter {
            jobs: self,
            next: 0,
            end: self.len(),
        }
    }
}

/// The entries of a [`Jobs`] pushed before the iteration began.
pub(crate) struct JobsIter<'a> {
    jobs: &'a Jobs,
    next: usize,
    end: usize,
}

impl<'a> Iterator for JobsIter<'a> {
    type Item = &'a FileJob;

    fn next(&mut self) -> Option<&'a FileJob> {
        if self.next >= self.end {
            return None;
        }
        self.next += 1;
        self.jobs.get(self.next - 1)
    }
}

impl<'a> IntoIterator for &'a Jobs {
    type Item = &'a FileJob;
    type IntoIter = JobsIter<'a>;

    fn into_iter(self) -> JobsIter<'a> {
        self.iter()
    }
}

impl Index<usize> for Jobs {
    type Output = FileJob;

    fn index(&self, i: usize) -> &FileJob {
        self.get(i).expect("a chunk names a file already pushed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_fill_segments_in_order() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(FIRST - 1), (0, FIRST - 1));
        assert_eq!(place(FIRST), (1, 0));
        assert_eq!(place(3 * FIRST - 1), (1, 2 * FIRST - 1));
        assert_eq!(place(3 * FIRST), (2, 0));
        // every index has one place, and consecutive indexes fill each segment
        let mut last = (0, 0);
        for i in 1..100_000 {
            let p = place(i);
            assert!(
                p == (last.0, last.1 + 1) || p == (last.0 + 1, 0),
                "{i}: {p:?}"
            );
            assert!(p.1 < FIRST << p.0);
            last = p;
        }
    }

    /// Every byte of a job is paid once per file of the list (1,000,000 files: 72 MB at 72 B,
    /// which glibc's allocator keeps in 80; at 88 it took 96), and an unused slot costs a
    /// pointer: a hasher's state, a lock or another field that
    /// only a file in flight needs put inline again (the publisher digest's was 448 B, the
    /// in-flight state 392) fails here before it shows in a benchmark; it goes in `Active`.
    #[test]
    fn a_job_and_an_unused_slot_stay_small() {
        assert!(
            std::mem::size_of::<FileJob>() <= 72,
            "FileJob is {} bytes: box what most files do not use",
            std::mem::size_of::<FileJob>()
        );
        assert_eq!(
            std::mem::size_of::<OnceBox<FileJob>>(),
            std::mem::size_of::<usize>()
        );
    }
}
