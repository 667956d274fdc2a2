//! Resume: what an earlier run left in the destination (finished files, `.wattio-part` files
//! and their `.done` logs of finished byte ranges) and what is still missing.

use super::mirrors::FileSource;
use super::source::SourceFile;
use super::state::FileJob;
use crate::checksum::{self, InOrderHasher};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Mutex;

/// Byte ranges of `[0, size)` not covered by `done` (a list of (offset, len)).
pub(crate) fn missing_ranges(size: u64, done: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut d: Vec<(u64, u64)> = done
        .iter()
        .filter(|(_, l)| *l > 0)
        .map(|&(o, l)| (o.min(size), (o.saturating_add(l)).min(size)))
        .collect();
    d.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for (a, b) in d {
        if a > at {
            out.push((at, a - at));
        }
        at = at.max(b);
    }
    if at < size {
        out.push((at, size - at));
    }
    out
}

pub(super) fn read_done_log(p: &Path) -> Vec<(u64, u64)> {
    let Ok(b) = std::fs::read(p) else {
        return Vec::new();
    };
    // records are 16 bytes; a torn last record (crash mid-append) is ignored
    b.chunks_exact(16)
        .map(|r| {
            (
                u64::from_le_bytes(r[..8].try_into().unwrap()),
                u64::from_le_bytes(r[8..].try_into().unwrap()),
            )
        })
        .collect()
}

pub(super) fn part_name(final_path: &Path, suffix: &str) -> PathBuf {
    let mut s = final_path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A batch of files made ready to fetch: their jobs, the ranges each still misses, and what
/// earlier runs had already done.
pub(super) struct Prepared {
    pub(super) jobs: Vec<FileJob>,
    pub(super) missing: Vec<Vec<(u64, u64)>>,
    pub(super) earlier: EarlierRuns,
}

/// What earlier runs had already done for a set of files, as the summary counts it.
#[derive(Debug, Default, Clone)]
pub(super) struct EarlierRuns {
    /// Files complete in the destination.
    pub(super) skipped: usize,
    /// Bytes found complete (files or ranges).
    pub(super) resumed_bytes: u64,
    /// Files skipped because they were complete and matched a checksum.
    pub(super) verified: usize,
    /// Of those, the ones checked against the listing and against a publisher's digest.
    pub(super) verified_by_listing: usize,
    pub(super) verified_by_publisher: usize,
    /// Files skipped because they were complete, with no checksum to check them against.
    pub(super) skipped_unverified: Vec<String>,
}

impl EarlierRuns {
    /// Adds the counts of another set of files.
    pub(super) fn add(&mut self, other: &EarlierRuns) {
        self.skipped += other.skipped;
        self.resumed_bytes += other.resumed_bytes;
        self.verified += other.verified;
        self.verified_by_listing += other.verified_by_listing;
        self.verified_by_publisher += other.verified_by_publisher;
        self.skipped_unverified
            .extend(other.skipped_unverified.iter().cloned());
    }
}

impl Prepared {
    /// Adds the files of a later batch, prepared on their own.
    pub(super) fn append(&mut self, other: Prepared) {
        self.jobs.extend(other.jobs);
        self.missing.extend(other.missing);
        self.earlier.add(&other.earlier);
    }
}

/// Whether a complete file in the destination matches every checksum the source gives.
fn complete_file_matches(s: &SourceFile, path: &Path) -> bool {
    let listing_ok = match &s.xxh3 {
        Some(h) => checksum::file_xxh3(path).ok().as_deref() == Some(h.as_str()),
        None => true,
    };
    listing_ok
        && s.expect.as_ref().is_none_or(|e| {
            checksum::file_digest(e.algo, path).ok().as_deref() == Some(&e.digest[..])
        })
}

/// Deletes the `.wattio-part` file and `.done` log of a file that is complete under its final
/// name. A run stopped between the rename into place and the deletion of the log (the two
/// cannot be one atomic step) leaves them behind; nothing reads them again.
fn remove_leftovers(final_path: &Path) {
    for suffix in [".wattio-part", ".wattio-part.done"] {
        let _ = std::fs::remove_file(part_name(final_path, suffix));
    }
}

/// What is already in `dest` for each file of `src` and what is still missing. `whole[o]`:
/// origin `o` ignores `Range`, so its partly fetched files start over.
pub(super) fn prepare(
    dest: &Path,
    src: Vec<SourceFile>,
    whole: &[bool],
) -> anyhow::Result<Prepared> {
    std::fs::create_dir_all(dest).with_context(|| {
        format!(
            "cannot create destination {}; check permissions",
            dest.display()
        )
    })?;
    let mut jobs = Vec::new();
    let mut missing = Vec::new();
    let (mut skipped, mut resumed, mut verified) = (0, 0, 0);
    let mut skipped_unverified = Vec::new();
    let (mut by_listing, mut by_publisher) = (0, 0);
    for s in src {
        let final_path = dest.join(&s.rel);
        if let Ok(md) = std::fs::metadata(&final_path) {
            if md.is_file() && md.len() == s.size && complete_file_matches(&s, &final_path) {
                skipped += 1;
                resumed += s.size;
                by_listing += s.xxh3.is_some() as usize;
                by_publisher += s.expect.is_some() as usize;
                if s.xxh3.is_some() || s.expect.is_some() {
                    verified += 1;
                } else {
                    skipped_unverified.push(s.rel);
                }
                remove_leftovers(&final_path);
                continue;
            }
        }
        let is_whole = whole.get(s.origin).copied().unwrap_or(false);
        if let Some(parent) = final_path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let part_path = part_name(&final_path, ".wattio-part");
        let done_path = part_name(&final_path, ".wattio-part.done");
        let mut done = Vec::new();
        if let Ok(md) = std::fs::metadata(&part_path) {
            // a server without Range cannot send the rest of a file: start it over
            if md.len() == s.size && !is_whole {
                done = read_done_log(&done_path);
            }
        }
        let fresh = done.is_empty();
        if fresh {
            // no usable progress: start clean
            let _ = std::fs::remove_file(&done_path);
        }
        let miss = missing_ranges(s.size, &done);
        let left: u64 = miss.iter().map(|r| r.1).sum();
        resumed += s.size - left;
        missing.push(miss);
        let in_order = s
            .expect
            .as_ref()
            .map(|e| InOrderHasher::new(e.algo, s.size, &done));
        jobs.push(FileJob {
            rel: s.rel,
            source: FileSource::new(s.origin, s.url_path, s.mirrors),
            whole: is_whole,
            size: s.size,
            xxh3: s.xxh3,
            block_sums: Mutex::new(vec![None; s.blocks.as_ref().map_or(0, |b| b.xxh3.len())]),
            blocks: s.blocks,
            expect: s.expect,
            in_order: Mutex::new(in_order),
            final_path,
            part_path,
            done_path,
            file: Mutex::new(None),
            done_log: Mutex::new(None),
            fresh: AtomicBool::new(fresh),
            remaining: AtomicU64::new(left),
            in_flight: AtomicUsize::new(0),
            checksum_retry: AtomicBool::new(false),
        });
    }
    Ok(Prepared {
        jobs,
        missing,
        earlier: EarlierRuns {
            skipped,
            resumed_bytes: resumed,
            verified,
            verified_by_listing: by_listing,
            verified_by_publisher: by_publisher,
            skipped_unverified,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ranges_subtracts_done() {
        assert_eq!(missing_ranges(10, &[]), vec![(0, 10)]);
        assert_eq!(missing_ranges(10, &[(0, 4), (6, 2)]), vec![(4, 2), (8, 2)]);
        assert_eq!(
            missing_ranges(10, &[(2, 3), (0, 3), (5, 5)]),
            Vec::<(u64, u64)>::new()
        );
        assert_eq!(missing_ranges(10, &[(8, 100)]), vec![(0, 8)]);
        assert_eq!(missing_ranges(0, &[]), Vec::<(u64, u64)>::new());
    }

    /// A run killed after renaming a file into place but before deleting its `.done` log: the
    /// rerun counts the file as complete and deletes the log, so the destination ends up
    /// holding the source tree and nothing else.
    #[test]
    fn a_complete_file_left_with_its_done_log_is_kept_and_the_log_deleted() {
        let dest = tempfile::tempdir().unwrap();
        let final_path = dest.path().join("f.bin");
        std::fs::write(&final_path, b"0123456789").unwrap();
        let done = part_name(&final_path, ".wattio-part.done");
        std::fs::write(&done, [0u8; 16]).unwrap();
        let src = vec![SourceFile {
            size: 10,
            ..SourceFile::at("f.bin".into(), 0, "/f.bin".into())
        }];
        let p = prepare(dest.path(), src, &[false]).unwrap();
        assert_eq!(
            (p.earlier.skipped, p.earlier.resumed_bytes, p.jobs.len()),
            (1, 10, 0)
        );
        assert!(!done.exists(), "the stale .done log is left behind");
        assert_eq!(std::fs::read(&final_path).unwrap(), b"0123456789");
    }
}
