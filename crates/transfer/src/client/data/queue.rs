//! The partitions' chunk queues: each file's missing ranges cut into the plan's pieces, at
//! start-up and for files found while the transfer runs.

use super::files::FileJob;
use super::resume::Prepared;
use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use wattio_tuner::{classify, RequestSplit, TransferPlan};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunk {
    pub(crate) file: usize,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// The file's version it was cut for (see [`FileJob::version`]).
    pub(crate) version: u32,
}

pub(crate) struct PartQueue {
    pub(crate) chunks: Mutex<ChunkQueue>,
    pub(crate) target: AtomicUsize,
    pub(crate) live: AtomicUsize,
    pub(crate) pipelining: usize,
    pub(crate) remaining: AtomicU64,
}

/// A partition's chunks. Each file's missing ranges are kept as spans and cut into pieces
/// only when a channel takes one, so a queue's memory grows with the number of ranges, not
/// with the bytes they cover (a size a server makes up costs nothing until it is fetched).
/// Small files queued one after another whole, the bulk of a large index, share a [`Run`] of
/// 8 bytes a file.
#[derive(Debug, Default)]
pub(crate) struct ChunkQueue {
    entries: VecDeque<Entry>,
    /// Pieces the entries hold in all.
    pieces: u64,
}

#[derive(Debug)]
enum Entry {
    Span(Span),
    Run(Box<Run>),
}

/// Whole files of one piece each, at version 0 (not started), in the order queued.
#[derive(Debug, Default)]
struct Run {
    /// Each file's index and size.
    files: Vec<(u32, u32)>,
    /// Files already taken from the front.
    taken: usize,
}

/// Files in one run: a run's memory is freed when its last file is taken, so runs are kept
/// short enough to give memory back as the copy goes (512 KiB each).
const RUN_FILES: usize = 1 << 16;

/// A range of one file's version `version`, cut into `piece`-byte pieces at multiples of
/// `piece`.
///
/// One per queued file range, and a directory index may queue a million files before the
/// first is fetched: the file's index is kept in 32 bits (32 bytes a span, not 40).
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u64,
    len: u64,
    /// Never zero: the niche that keeps an [`Entry`] as small as a span.
    piece: NonZeroU64,
    file: u32,
    version: u32,
}

/// A file's index as a span keeps it (far fewer than 2^32 files fit in memory: each costs
/// a [`FileJob`] too).
fn span_file(file: usize) -> u32 {
    u32::try_from(file).expect("fewer than 2^32 files")
}

impl Span {
    /// The length of its first piece.
    fn first(&self) -> u64 {
        let piece = self.piece.get();
        self.len.min(piece - self.offset % piece)
    }

    /// How many pieces it holds.
    fn pieces(&self) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let first = self.first();
        1 + (self.len - first).div_ceil(self.piece.get())
    }

    /// The file and size, when the span is a whole file of one piece not yet started (what a
    /// [`Run`] holds).
    fn runnable(&self) -> Option<(u32, u32)> {
        let whole = self.offset == 0 && self.version == 0 && self.len <= self.piece.get();
        Some((self.file, u32::try_from(self.len).ok()?)).filter(|_| whole)
    }
}

impl ChunkQueue {
    /// Pieces queued.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.pieces).unwrap_or(usize::MAX)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pieces == 0
    }

    /// Queues `[offset, offset + len)` of version `version` of `file`, to be taken in
    /// `piece`-byte pieces cut at multiples of `piece` (`u64::MAX`: in one piece).
    pub(crate) fn push_range(
        &mut self,
        file: usize,
        offset: u64,
        len: u64,
        piece: u64,
        version: u32,
    ) {
        let s = Span {
            file: span_file(file),
            offset,
            len,
            piece: NonZeroU64::new(piece).unwrap_or(NonZeroU64::MIN),
            version,
        };
        self.pieces = self.pieces.saturating_add(s.pieces());
        if len == 0 {
            return;
        }
        let Some(one) = s.runnable() else {
            self.entries.push_back(Entry::Span(s));
            return;
        };
        match self.entries.back_mut() {
            Some(Entry::Run(r)) if r.files.len() < RUN_FILES => r.files.push(one),
            // two such files in a row begin a run
            Some(Entry::Span(last)) if last.runnable().is_some() => {
                let first = last.runnable().expect("checked");
                let mut files = Vec::with_capacity(64);
                files.extend([first, one]);
                *self.entries.back_mut().expect("checked") =
                    Entry::Run(Box::new(Run { files, taken: 0 }));
            }
            _ => self.entries.push_back(Entry::Span(s)),
        }
    }

    /// Puts a chunk back at the head, to be taken whole next.
    pub(crate) fn push_front(&mut self, c: Chunk) {
        if c.len > 0 {
            self.pieces = self.pieces.saturating_add(1);
            self.entries.push_front(Entry::Span(Span {
                file: span_file(c.file),
                offset: c.offset,
                len: c.len,
                piece: NonZeroU64::MAX,
                version: c.version,
            }));
        }
    }

    /// The next piece.
    pub(crate) fn pop_front(&mut self) -> Option<Chunk> {
        let (c, emptied) = match self.entries.front_mut()? {
            Entry::Span(s) => {
                let n = s.first();
                let c = Chunk {
                    file: s.file as usize,
                    offset: s.offset,
                    len: n,
                    version: s.version,
                };
                s.offset += n;
                s.len -= n;
                (c, s.len == 0)
            }
            Entry::Run(r) => {
                let (file, len) = r.files[r.taken];
                r.taken += 1;
                let c = Chunk {
                    file: file as usize,
                    offset: 0,
                    len: u64::from(len),
                    version: 0,
                };
                (c, r.taken == r.files.len())
            }
        };
        if emptied {
            self.entries.pop_front();
        }
        self.pieces -= 1;
        Some(c)
    }
}

/// The piece size of `split` for a file of `size` bytes; with `block` (the listing's checksum
/// block), rounded to whole blocks, so each stream covers whole blocks and can hash them as
/// they arrive.
fn piece_size(split: RequestSplit, size: u64, block: Option<u64>) -> u64 {
    let piece = match split {
        RequestSplit::Whole => u64::MAX,
        RequestSplit::Chunk(c) => c.max(1),
        RequestSplit::Parts(p) => size.div_ceil(p.max(1) as u64).max(1),
    };
    match block {
        Some(b) if b > 0 && piece != u64::MAX => {
            ((piece.saturating_add(b / 2)) / b).max(1).saturating_mul(b)
        }
        _ => piece,
    }
}

/// Appends a file's missing ranges, cut into `split`'s pieces, to a partition's queue; returns
/// the bytes added.
fn push_file(
    q: &mut ChunkQueue,
    file: usize,
    job: &FileJob,
    missing: &[(u64, u64)],
    split: RequestSplit,
) -> u64 {
    let block = job.blocks().map(|b| b.size);
    // a server that ignores Range sends a file in one piece
    let split = if job.whole() {
        RequestSplit::Whole
    } else {
        split
    };
    let piece = piece_size(split, job.size, block);
    let version = job.generation();
    let mut added = 0u64;
    for &(o, l) in missing {
        q.push_range(file, o, l, piece, version);
        added = added.saturating_add(l);
    }
    added
}

/// One queue per partition of `plan`, holding the missing ranges of its files cut into the
/// partition's pieces; budgets start at zero (the control loop sets them).
pub(crate) fn build_queues(plan: &TransferPlan, prep: &Prepared) -> Vec<PartQueue> {
    let mut parts = Vec::new();
    for part in &plan.partitions {
        let mut q = ChunkQueue::default();
        let mut rem = 0u64;
        for &fi in &part.files {
            rem = rem.saturating_add(push_file(
                &mut q,
                fi,
                &prep.jobs[fi],
                &prep.missing[fi],
                part.split,
            ));
        }
        parts.push(PartQueue {
            chunks: Mutex::new(q),
            target: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            pipelining: part.pipelining.max(1),
            remaining: AtomicU64::new(rem),
        });
    }
    parts
}

/// Queues a file found after the plan was made (a directory index still being walked): in the
/// partition of its size class, or the nearest class the plan has (the partitions, and so the
/// tuner's state, stay as the start-up made them). A file larger than the path's BDP is cut
/// into BDP pieces even in a partition of whole-file requests, as Algorithm 1 cuts large ones.
pub(crate) fn enqueue_found(
    parts: &[PartQueue],
    plan: &TransferPlan,
    file: usize,
    job: &FileJob,
    missing: &[(u64, u64)],
) {
    let class = classify(job.size, plan.bdp_bytes) as i64;
    let Some(pi) =
        (0..plan.partitions.len()).min_by_key(|&i| (plan.partitions[i].class as i64 - class).abs())
    else {
        unreachable!("a plan made from a file with bytes has a partition");
    };
    let split = match plan.partitions[pi].split {
        RequestSplit::Whole if job.size > plan.bdp_bytes => RequestSplit::Chunk(plan.bdp_bytes),
        s => s,
    };
    let p = &parts[pi];
    let added = push_file(&mut p.chunks.lock().unwrap(), file, job, missing, split);
    p.remaining.fetch_add(added, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces a queue hands out for `miss` cut by `split` (the old eager cut's results).
    fn split_ranges(
        miss: &[(u64, u64)],
        split: RequestSplit,
        size: u64,
        block: Option<u64>,
    ) -> Vec<(u64, u64)> {
        let mut q = ChunkQueue::default();
        let piece = piece_size(split, size, block);
        for &(o, l) in miss {
            q.push_range(0, o, l, piece, 0);
        }
        let n = q.len();
        let out: Vec<(u64, u64)> = std::iter::from_fn(|| q.pop_front())
            .map(|c| (c.offset, c.len))
            .collect();
        assert_eq!(out.len(), n, "len() counts the pieces");
        assert!(q.is_empty());
        out
    }

    #[test]
    fn a_huge_range_costs_one_span() {
        let mut q = ChunkQueue::default();
        q.push_range(3, 0, u64::MAX, 1 << 20, 0);
        assert_eq!(q.entries.len(), 1);
        assert_eq!(q.len() as u64, u64::MAX.div_ceil(1 << 20));
        let c = q.pop_front().unwrap();
        assert_eq!((c.file, c.offset, c.len), (3, 0, 1 << 20));
        q.push_front(c);
        assert_eq!(q.pop_front().unwrap().len, 1 << 20);
    }

    /// Whole small files queued in a row share runs (8 bytes a file): they come out in the
    /// order queued, each whole, between the spans queued before and after them, and a chunk
    /// put back comes out first.
    #[test]
    fn small_whole_files_in_a_row_share_a_run() {
        assert_eq!(
            std::mem::size_of::<Entry>(),
            32,
            "an entry is no larger than a span"
        );
        let mut q = ChunkQueue::default();
        q.push_range(0, 0, 10, 4, 0); // three pieces: a span
        let n = 2 * RUN_FILES + 5;
        for f in 1..=n {
            q.push_range(f, 0, (f % 4 + 1) as u64, 4, 0);
        }
        q.push_range(n + 1, 2, 2, 4, 0); // resumed midway: a span
        q.push_range(n + 2, 0, 3, 4, 1); // restarted: a span
        assert_eq!(
            q.entries.len(),
            1 + 3 + 2,
            "the files in a row take three runs"
        );
        assert_eq!(q.len(), 3 + n + 2);
        let out: Vec<(usize, u64, u64, u32)> = std::iter::from_fn(|| q.pop_front())
            .map(|c| (c.file, c.offset, c.len, c.version))
            .collect();
        let mut want = vec![(0, 0, 4, 0), (0, 4, 4, 0), (0, 8, 2, 0)];
        want.extend((1..=n).map(|f| (f, 0, (f % 4 + 1) as u64, 0)));
        want.extend([(n + 1, 2, 2, 0), (n + 2, 0, 3, 1)]);
        assert_eq!(out, want);
        assert!(q.is_empty() && q.entries.is_empty());

        q.push_range(7, 0, 3, 4, 0);
        q.push_range(8, 0, 3, 4, 0);
        let c = q.pop_front().unwrap();
        q.push_front(Chunk { len: 1, ..c });
        let out: Vec<(usize, u64)> = std::iter::from_fn(|| q.pop_front())
            .map(|c| (c.file, c.len))
            .collect();
        assert_eq!(out, [(7, 1), (8, 3)]);
    }

    #[test]
    fn split_ranges_by_plan() {
        assert_eq!(
            split_ranges(&[(0, 10)], RequestSplit::Chunk(4), 10, None),
            vec![(0, 4), (4, 4), (8, 2)]
        );
        assert_eq!(
            split_ranges(&[(0, 10)], RequestSplit::Parts(2), 10, None),
            vec![(0, 5), (5, 5)]
        );
        assert_eq!(
            split_ranges(&[(3, 7)], RequestSplit::Whole, 10, None),
            vec![(3, 7)]
        );
        // with checksum blocks of 4: pieces of 5 round to 4 and are cut at multiples of 4, so a
        // resumed range starting midway ends its first piece on a block boundary
        assert_eq!(
            split_ranges(&[(0, 10)], RequestSplit::Chunk(5), 10, Some(4)),
            vec![(0, 4), (4, 4), (8, 2)]
        );
        assert_eq!(
            split_ranges(&[(2, 8)], RequestSplit::Chunk(8), 10, Some(4)),
            vec![(2, 6), (8, 2)]
        );
        assert_eq!(
            split_ranges(&[(0, 10)], RequestSplit::Chunk(1), 10, Some(4)),
            vec![(0, 4), (4, 4), (8, 2)]
        );
    }
}
