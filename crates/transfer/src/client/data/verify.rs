//! Verification of a received file (size, whole-file or per-block XXH3-64), its hand-over to
//! `placing`, and the one re-fetch of what did not match.

use super::dest::Dest;
use super::files::{Active, FileJob, Flags};
use super::resume::VALIDATOR_ATTR;
use super::state::Shared;
use crate::client::discovery::found::BlockDigests;
use crate::client::discovery::found::Expected;
use crate::error::{Failure, Kind};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use wattio_http::checksum;
use wattio_http::checksum::InOrderHasher;

/// Verifies a fully received file and queues it to be put into place (`placing`: its data
/// synced first, the rename after, so that after a power cut a file under its final name is
/// whole).
pub(crate) fn finish_file(sh: &Shared, i: usize) {
    let j = &sh.files[i];
    // none: already finished (nothing else calls it twice for a file)
    let Some(a) = j.active_at(j.generation()) else {
        return;
    };
    let dest = &sh.dest;
    // Ok(ranges to fetch again, empty when the file is good; whether the listing's checksum
    // (rather than the publisher's) is the one that did not match)
    let res = (|| -> Result<(Vec<(u64, u64)>, bool), Failure> {
        let part_rel = j.part_rel();
        let in_dest = |what: &str, e: std::io::Error| dest.failed(&part_rel, what, &e);
        let f = j.part(&a, dest).map_err(|e| in_dest("open", e))?;
        let read_back = |e: std::io::Error| in_dest("read back", e);
        let md = f.metadata().map_err(read_back)?;
        if md.len() != j.size {
            return Err(Kind::Dest.msg(format!(
                "{}: size {} but expected {}",
                j.rel(),
                md.len(),
                j.size
            )));
        }
        if let Some(b) = j.blocks() {
            let bad = bad_blocks(&a, b, &f).map_err(read_back)?;
            if !bad.is_empty() {
                // a server without Range sends whole files only
                let again = if j.whole() {
                    vec![(0, j.size)]
                } else {
                    block_ranges(&bad, b.size, j.size)
                };
                return Ok((again, true));
            }
        } else if let Some(want) = j.xxh3() {
            let got = checksum::file_xxh3(&f).map_err(read_back)?;
            if got != want {
                return Ok((vec![(0, j.size)], true));
            }
        }
        let published = j.check_published(&a, &f).map_err(read_back)?;
        if published == Some(false) {
            return Ok((vec![(0, j.size)], false));
        }
        // its data is synced when it is put into place, with the others of its batch
        if let Some(v) = a.validator.lock().unwrap().as_ref() {
            // what a rerun compares with the server's validators (best effort: not every
            // file system keeps extended attributes)
            Dest::set_attr(&f, VALIDATOR_ATTR, &v.encode());
        }
        drop(f);
        j.close_finished(&a);
        Ok((Vec::new(), false))
    })();
    match res {
        Ok((refetch, _)) if refetch.is_empty() => sh.queue_for_placing(i),
        Ok((refetch, by_listing)) => {
            // checksum mismatch: fetch the bad blocks (or the whole file) once more, then give
            // up; an empty file has nothing to fetch again
            if j.size == 0 || j.flags.swap(Flags::CHECKSUM_RETRY, true) {
                match (j.expect(), by_listing) {
                    (Some(e), false) => sh.fail_advised(mismatch(j.rel(), e)),
                    _ if j.size == 0 => sh.fail_mismatch(
                        j.rel(),
                        "it is empty on the server, but the listing's XXH3-64 is of other content",
                    ),
                    _ => sh.fail_mismatch(
                        j.rel(),
                        "its XXH3-64 does not match the listing even after fetching it again",
                    ),
                }
                return;
            }
            j.forget_progress(&a, dest);
            // whatever is fetched again, the publisher's digest is taken over the file anew
            j.restart_published(&a);
            let again: u64 = refetch.iter().map(|r| r.1).sum();
            if let Some(b) = j.blocks() {
                let mut sums = a.block_sums.lock().unwrap();
                for &(o, l) in &refetch {
                    for i in o / b.size..(o + l).div_ceil(b.size) {
                        sums[i as usize] = None;
                    }
                }
            }
            j.remaining.store(again, Ordering::SeqCst);
            // any partition can carry it: prefer one that still has channels
            let pi = sh
                .parts
                .iter()
                .position(|p| p.target.load(Ordering::SeqCst) > 0)
                .unwrap_or(0);
            sh.parts[pi].remaining.fetch_add(again, Ordering::SeqCst);
            sh.parts[pi].target.fetch_max(1, Ordering::SeqCst);
            let mut q = sh.parts[pi].chunks.lock().unwrap();
            let version = j.generation();
            for (offset, len) in refetch {
                q.push_range(i, offset, len, u64::MAX, version);
            }
        }
        Err(e) => sh.fail(e),
    }
}

/// Indexes of the blocks of a received file whose digest differs from the listing's; blocks
/// not hashed on arrival are hashed from the file now.
pub(crate) fn bad_blocks(a: &Active, want: &BlockDigests, f: &File) -> std::io::Result<Vec<u64>> {
    let mut sums = a.block_sums.lock().unwrap().clone();
    let unseen: Vec<u64> = (0..sums.len() as u64)
        .filter(|&i| sums[i as usize].is_none())
        .collect();
    if !unseen.is_empty() {
        let hashed = checksum::file_blocks_xxh3(f, want.size, &unseen)?;
        for (i, d) in unseen.into_iter().zip(hashed) {
            sums[i as usize] = Some(d);
        }
    }
    Ok((0..sums.len() as u64)
        .filter(|&i| sums[i as usize] != want.xxh3.get(i as usize).copied())
        .collect())
}

/// Byte ranges of the given blocks (ascending indexes), adjacent blocks merged.
pub(crate) fn block_ranges(blocks: &[u64], block_size: u64, file_size: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &i in blocks {
        let start = i * block_size;
        let end = ((i + 1) * block_size).min(file_size);
        match out.last_mut() {
            Some(last) if last.0 + last.1 == start => last.1 = end - last.0,
            _ => out.push((start, end - start)),
        }
    }
    out
}

impl Active {
    /// Feeds bytes just written at `offset` to the publisher digest (see [`InOrderHasher`]);
    /// bytes that came early are read back from `part` once the digest reaches them.
    pub(crate) fn hash_arrival(
        &self,
        offset: u64,
        data: &[u8],
        part: &File,
    ) -> std::io::Result<()> {
        let mut g = self.in_order.lock().unwrap();
        let Some(h) = g.as_mut() else {
            return Ok(());
        };
        h.on_data(offset, data);
        h.catch_up(|o, b| part.read_exact_at(b, o))
    }
}

impl FileJob {
    /// Whether the finished part file matches the publisher digest (`None`: there is none);
    /// bytes not hashed on arrival are read now.
    pub(crate) fn check_published(&self, a: &Active, f: &File) -> std::io::Result<Option<bool>> {
        let Some(e) = self.expect() else {
            return Ok(None);
        };
        let h = a
            .in_order
            .lock()
            .unwrap()
            .take()
            .map_or_else(|| InOrderHasher::new(e.algo, self.size, &[]), |h| *h);
        let got = h.finish(|o, b| f.read_exact_at(b, o))?;
        Ok(Some(got == e.digest))
    }

    /// Starts the publisher digest over (the file is fetched again).
    pub(crate) fn restart_published(&self, a: &Active) {
        if let Some(e) = self.expect() {
            *a.in_order.lock().unwrap() =
                Some(Box::new(InOrderHasher::new(e.algo, self.size, &[])));
        }
    }
}

/// The message of a publisher digest that did not match twice.
pub(crate) fn mismatch(rel: &str, e: &Expected) -> Failure {
    Kind::ChecksumMismatch { file: rel.into() }.msg(format!(
        "{rel}: its {} does not match {} even after fetching it again: the checksum file does not describe the server's copy (an older or another checksum file), or that copy is corrupt",
        e.algo, e.from
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_ranges_merge_neighbours() {
        assert_eq!(block_ranges(&[0, 1, 3, 4], 10, 45), vec![(0, 20), (30, 15)]);
        assert_eq!(block_ranges(&[], 10, 45), vec![]);
    }
}
