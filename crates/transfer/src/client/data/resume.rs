//! Resume: what an earlier run left in the destination (finished files, `.wattio-part` files
//! and their `.done` logs of finished byte ranges) and what is still missing.
//!
//! A `.done` log is a header — the server's validators of the version whose bytes the part
//! file holds ([`Validator`]) — then 16-byte records (offset, length, little-endian) of the
//! ranges whose data was on disk before the record was written (see `state`). A log written
//! before validators were recorded has no header and is read as records only.

use super::dest::{with_suffix, Dest, Entry, DONE_SUFFIX, PART_SUFFIX};
use super::done_log::{parse_log, DoneLog};
use super::files::{FileJob, NewJob};
use crate::client::discovery::found::SourceFile;
use crate::client::net::validator::{Compared, Validator};
use crate::error::EngineResult;
use std::io::Read as _;
use std::sync::Arc;
use wattio_http::checksum;

/// The extended attribute a finished file keeps its server's validators in.
pub(crate) const VALIDATOR_ATTR: &str = "user.wattio.validator";

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

/// The log an earlier run left for `rel`, when its part file has `size` bytes.
pub(crate) fn earlier_log(dest: &Dest, rel: &str, size: u64) -> Option<DoneLog> {
    if dest.entry(&with_suffix(rel, PART_SUFFIX)).ok()?? != Entry::File(size) {
        return None;
    }
    let f = dest.open_read(&with_suffix(rel, DONE_SUFFIX)).ok()?;
    let mut b = Vec::new();
    (&f).take(64 << 20).read_to_end(&mut b).ok()?;
    Some(parse_log(&b))
}

/// A batch of files made ready to fetch: their jobs, the ranges each still misses, and what
/// earlier runs had already done.
pub(crate) struct Prepared {
    /// Boxed: they move into [`super::jobs::Jobs`] as they are, never copied (a list of many
    /// small files would otherwise be held twice while it moves).
    #[allow(clippy::vec_box)]
    pub(crate) jobs: Vec<Box<FileJob>>,
    pub(crate) missing: Vec<Vec<(u64, u64)>>,
    pub(crate) earlier: EarlierRuns,
}

/// What earlier runs had already done for a set of files, as the summary counts it.
#[derive(Debug, Default, Clone)]
pub(crate) struct EarlierRuns {
    /// Files complete in the destination.
    pub(crate) skipped: usize,
    /// Bytes found complete (files or ranges).
    pub(crate) resumed_bytes: u64,
    /// Files skipped because they were complete and matched a checksum.
    pub(crate) verified: usize,
    /// Of those, the ones checked against the listing and against a publisher's digest.
    pub(crate) verified_by_listing: usize,
    pub(crate) verified_by_publisher: usize,
    /// Of those, the ones a collision-resistant digest checked (SHA-2, BLAKE2b), and the
    /// others (XXH3-64, xxHash, MD5, SHA-1 only).
    pub(crate) verified_strong: usize,
    pub(crate) verified_weak: Vec<String>,
    /// Files skipped because they were complete, with no checksum to check them against.
    pub(crate) skipped_unverified: Vec<String>,
    /// Files whose earlier copy (complete or partial) was dropped because the server's
    /// validators changed since: they are fetched again from the start.
    pub(crate) restarted: Vec<String>,
    /// Files whose partial copy is kept with neither a validator nor a checksum to confirm it
    /// is of the server's current version.
    pub(crate) resumed_unchecked: Vec<String>,
}

impl EarlierRuns {
    /// Adds the counts of another set of files.
    pub(crate) fn add(&mut self, other: &EarlierRuns) {
        self.skipped += other.skipped;
        self.resumed_bytes += other.resumed_bytes;
        self.verified += other.verified;
        self.verified_by_listing += other.verified_by_listing;
        self.verified_by_publisher += other.verified_by_publisher;
        self.verified_strong += other.verified_strong;
        self.verified_weak
            .extend(other.verified_weak.iter().cloned());
        self.skipped_unverified
            .extend(other.skipped_unverified.iter().cloned());
        self.restarted.extend(other.restarted.iter().cloned());
        self.resumed_unchecked
            .extend(other.resumed_unchecked.iter().cloned());
    }
}

impl Prepared {
    /// Adds the files of a later batch, prepared on their own.
    pub(crate) fn append(&mut self, other: Prepared) {
        self.jobs.extend(other.jobs);
        self.missing.extend(other.missing);
        self.earlier.add(&other.earlier);
    }
}

/// Whether a complete file in the destination matches every checksum the source gives.
fn complete_file_matches(s: &SourceFile, f: &std::fs::File) -> bool {
    let listing_ok = match &s.xxh3 {
        Some(h) => checksum::file_xxh3(f).ok().as_deref() == Some(h.as_str()),
        None => true,
    };
    listing_ok
        && s.expect
            .as_ref()
            .is_none_or(|e| checksum::file_digest(e.algo, f).ok().as_deref() == Some(&e.digest[..]))
}

/// Deletes the `.wattio-part` file and `.done` log of a file that is complete under its final
/// name. A run stopped between the rename into place and the deletion of the log (the two
/// cannot be one atomic step) leaves them behind; nothing reads them again.
fn remove_leftovers(dest: &Dest, rel: &str) {
    for suffix in [PART_SUFFIX, DONE_SUFFIX] {
        let _ = dest.remove(&with_suffix(rel, suffix));
    }
}

/// How a complete file already in DEST stands against the source.
enum Complete {
    /// It matches (checksums, or validators, or size alone where nothing else is known).
    Keep,
    /// Its server's validators changed since it was fetched: fetch it again.
    Changed,
    /// Not there, of another size, or a checksum that does not match.
    No,
}

fn complete_file(dest: &Dest, s: &SourceFile) -> Complete {
    if dest.entry(&s.rel).ok().flatten() != Some(Entry::File(s.size)) {
        return Complete::No;
    }
    let Ok(f) = dest.open_read(&s.rel) else {
        return Complete::No;
    };
    if s.xxh3.is_some() || s.expect.is_some() {
        return if complete_file_matches(s, &f) {
            Complete::Keep
        } else {
            Complete::No
        };
    }
    let stored = stored_validator(&f);
    match (&stored, &s.validator_origin) {
        (Some(was), Some(o)) if was.compare(s.validator.as_ref(), o) == Compared::Changed => {
            Complete::Changed
        }
        _ => Complete::Keep,
    }
}

/// The validators a finished file was stored with (an extended attribute).
fn stored_validator(f: &std::fs::File) -> Option<Validator> {
    Validator::decode(&Dest::attr(f, VALIDATOR_ATTR)?)
}

/// Whether a rerun asks the server about `s` (a `HEAD`) before preparing it: an earlier run
/// finished it and stored the server's validators with it, no checksum can check it, and this
/// run has not asked about the file itself. (A part file needs no question: its ranges are
/// asked for with `If-Range`, and the first answer says whether the file changed.)
pub(crate) fn worth_asking(dest: &Dest, s: &SourceFile) -> bool {
    let checksummed = s.xxh3.is_some() || s.blocks.is_some() || s.expect.is_some();
    s.validator_origin.is_none()
        && !checksummed
        && dest.entry(&s.rel).ok().flatten() == Some(Entry::File(s.size))
        && dest
            .open_read(&s.rel)
            .ok()
            .and_then(|f| stored_validator(&f))
            .is_some()
}

/// What is already in `dest` for each file of `src` and what is still missing. `whole[o]`:
/// origin `o` ignores `Range`, so its partly fetched files start over.
pub(crate) fn prepare(
    dest: &Arc<Dest>,
    src: Vec<SourceFile>,
    whole: &[bool],
    origins: &[String],
) -> EngineResult<Prepared> {
    let mut jobs = Vec::new();
    let mut missing = Vec::new();
    let mut e = EarlierRuns::default();
    for s in src {
        match complete_file(dest, &s) {
            Complete::Keep => {
                e.skipped += 1;
                e.resumed_bytes += s.size;
                e.verified_by_listing += s.xxh3.is_some() as usize;
                e.verified_by_publisher += s.expect.is_some() as usize;
                let strong = s
                    .expect
                    .as_ref()
                    .is_some_and(|x| x.algo.collision_resistant());
                if s.xxh3.is_some() || s.expect.is_some() {
                    e.verified += 1;
                    if strong {
                        e.verified_strong += 1;
                    } else {
                        e.verified_weak.push(s.rel.clone());
                    }
                } else {
                    e.skipped_unverified.push(s.rel.clone());
                }
                remove_leftovers(dest, &s.rel);
                continue;
            }
            Complete::Changed => e.restarted.push(s.rel.clone()),
            Complete::No => {}
        }
        let is_whole = whole.get(s.origin).copied().unwrap_or(false);
        let done_rel = with_suffix(&s.rel, DONE_SUFFIX);
        // a server without Range cannot send the rest of a file: start it over
        let earlier = if is_whole {
            None
        } else {
            earlier_log(dest, &s.rel, s.size)
        };
        let (mut validator, mut done) = earlier.unwrap_or_default();
        let checksummed = s.xxh3.is_some() || s.blocks.is_some() || s.expect.is_some();
        let serving = origins.get(s.origin).map(String::as_str).unwrap_or("");
        if !done.is_empty() {
            let verdict = match (&validator, &s.validator_origin) {
                (Some(was), Some(o)) => Some(was.compare(s.validator.as_ref(), o)),
                (Some(was), None) if was.origin != serving => Some(Compared::OtherServer),
                _ => None,
            };
            match verdict {
                // the server's version now is not the one the part file holds
                Some(Compared::Changed) => {
                    e.restarted.push(s.rel.clone());
                    done.clear();
                }
                // the part file came from a mirror (its validators mean nothing here, and If-Range
                // with them would fail), or the server gave none this time: the first answer
                // gives this server's
                Some(Compared::OtherServer | Compared::Unknown) => {
                    validator = s.validator.clone().filter(|v| v.origin == serving);
                    if !checksummed {
                        e.resumed_unchecked.push(s.rel.clone());
                    }
                }
                _ if validator.is_none() && !checksummed => {
                    e.resumed_unchecked.push(s.rel.clone());
                }
                _ => {}
            }
        }
        let fresh = done.is_empty();
        if fresh {
            // no usable progress: start clean
            let _ = dest.remove(&done_rel);
            validator = s.validator.clone();
        }
        let miss = missing_ranges(s.size, &done);
        let left: u64 = miss.iter().map(|r| r.1).sum();
        e.resumed_bytes += s.size - left;
        missing.push(miss);
        jobs.push(Box::new(FileJob::new(NewJob {
            file: s,
            remaining: left,
            whole: is_whole,
            fresh,
            done,
            validator,
        })));
    }
    Ok(Prepared {
        jobs,
        missing,
        earlier: e,
    })
}

#[cfg(test)]
mod tests {
    use super::super::done_log::{log_header, record};
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
        let d = tempfile::tempdir().unwrap();
        let dest = Arc::new(Dest::open(d.path(), true).unwrap());
        let final_path = d.path().join("f.bin");
        std::fs::write(&final_path, b"0123456789").unwrap();
        let done = d.path().join("f.bin.wattio-part.done");
        std::fs::write(&done, [0u8; 16]).unwrap();
        let src = vec![SourceFile {
            size: 10,
            ..SourceFile::at("f.bin".into(), 0, "/f.bin".into())
        }];
        let p = prepare(&dest, src, &[false], &["http://h:80".into()]).unwrap();
        assert_eq!(
            (p.earlier.skipped, p.earlier.resumed_bytes, p.jobs.len()),
            (1, 10, 0)
        );
        assert!(!done.exists(), "the stale .done log is left behind");
        assert_eq!(std::fs::read(&final_path).unwrap(), b"0123456789");
    }

    /// A part file of another version (its log's validator is not the server's now) is
    /// started over; one of the same version keeps its ranges; one without a validator and
    /// without a checksum is kept and reported unchecked, and so is one whose validator came
    /// from another server (a mirror), which is not sent to this one.
    #[test]
    fn a_part_file_of_another_version_starts_over() {
        // its files resume, so they have in-flight states
        let _counted = super::super::files::ACTIVE_COUNTED
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let d = tempfile::tempdir().unwrap();
        let dest = Arc::new(Dest::open(d.path(), true).unwrap());
        let at = |origin: &str, tag: &str| Validator {
            origin: origin.into(),
            etag: Some(format!("\"{tag}\"")),
            last_modified: None,
        };
        let (h, m) = ("http://h:80", "http://mirror:80");
        let v1 = at(h, "v1");
        let v2 = at(h, "v2");
        let stored = [Some(&v1), Some(&v1), None, Some(&v1)];
        for (name, v) in ["a", "b", "c", "d"].iter().zip(stored) {
            std::fs::write(d.path().join(format!("{name}.wattio-part")), [7u8; 10]).unwrap();
            let mut log = log_header(v);
            log.extend_from_slice(&record(0, 6));
            std::fs::write(d.path().join(format!("{name}.wattio-part.done")), log).unwrap();
        }
        let file = |rel: &str, origin: usize, v: Option<Validator>| SourceFile {
            size: 10,
            validator_origin: v.as_ref().map(|v| v.origin.clone()),
            validator: v,
            ..SourceFile::at(rel.into(), origin, format!("/{rel}"))
        };
        let src = vec![
            file("a", 0, Some(v2.clone())),
            file("b", 0, Some(v1.clone())),
            file("c", 0, None),
            file("d", 1, Some(at(m, "m1"))),
        ];
        let p = prepare(&dest, src, &[false, false], &[h.into(), m.into()]).unwrap();
        assert_eq!(
            p.missing,
            vec![vec![(0, 10)], vec![(6, 4)], vec![(6, 4)], vec![(6, 4)]]
        );
        assert_eq!(p.earlier.restarted, vec!["a".to_string()]);
        assert_eq!(
            p.earlier.resumed_unchecked,
            vec!["c".to_string(), "d".to_string()]
        );
        let validator = |i: usize| {
            let a = p.jobs[i].active_if().expect("resumed: started");
            let v = a.validator.lock().unwrap().clone();
            v
        };
        assert_eq!(validator(0), Some(v2));
        assert_eq!(validator(1), Some(v1));
        assert_eq!(
            validator(3),
            Some(at(m, "m1")),
            "the mirror's own, not the log's"
        );
    }
}
