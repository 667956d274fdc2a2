//! The partitions' chunk queues: each file's missing ranges cut into the plan's pieces, at
//! start-up and for files found while the transfer runs.

use super::resume::Prepared;
use super::state::{Chunk, FileJob, PartQueue};
use crate::tuner::{classify, RequestSplit, TransferPlan};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Cuts a file's missing ranges into the plan's pieces. With `block` (the listing's checksum
/// block), pieces are rounded to whole blocks and cut at multiples of the piece size, so each
/// stream covers whole blocks and can hash them as they arrive.
fn split_ranges(
    miss: &[(u64, u64)],
    split: RequestSplit,
    size: u64,
    block: Option<u64>,
) -> Vec<(u64, u64)> {
    let piece = match split {
        RequestSplit::Whole => u64::MAX,
        RequestSplit::Chunk(c) => c.max(1),
        RequestSplit::Parts(p) => size.div_ceil(p.max(1) as u64).max(1),
    };
    let piece = match block {
        Some(b) if b > 0 && piece != u64::MAX => ((piece + b / 2) / b).max(1) * b,
        _ => piece,
    };
    let mut out = Vec::new();
    for &(mut o, mut l) in miss {
        while l > 0 {
            let n = l.min(piece - o % piece);
            out.push((o, n));
            o += n;
            l -= n;
        }
    }
    out
}

/// Appends a file's missing ranges, cut into `split`'s pieces, to a partition's queue; returns
/// the bytes added.
fn push_file(
    q: &mut VecDeque<Chunk>,
    file: usize,
    job: &FileJob,
    missing: &[(u64, u64)],
    split: RequestSplit,
) -> u64 {
    let block = job.blocks.as_ref().map(|b| b.size);
    // a server that ignores Range sends a file in one piece
    let split = if job.whole {
        RequestSplit::Whole
    } else {
        split
    };
    let mut added = 0;
    for (o, l) in split_ranges(missing, split, job.size, block) {
        q.push_back(Chunk {
            file,
            offset: o,
            len: l,
        });
        added += l;
    }
    added
}

/// One queue per partition of `plan`, holding the missing ranges of its files cut into the
/// partition's pieces; budgets start at zero (the control loop sets them).
pub(super) fn build_queues(plan: &TransferPlan, prep: &Prepared) -> Vec<PartQueue> {
    let mut parts = Vec::new();
    for part in &plan.partitions {
        let mut q = VecDeque::new();
        let mut rem = 0;
        for &fi in &part.files {
            rem += push_file(&mut q, fi, &prep.jobs[fi], &prep.missing[fi], part.split);
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
pub(super) fn enqueue_found(
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
