//! The summary's verification part: how each file of the transfer was checked.

use crate::client::data::files::FileJob;
use crate::client::data::resume::EarlierRuns;
use crate::client::data::state::Shared;
use crate::client::data::stream::StreamedFile;
use crate::summary::{ChecksumFileReport, Verification, UNVERIFIED_LISTED};
use std::collections::BinaryHeap;

/// How the files were checked: by the listing, by a publisher's digest (collision-resistant
/// or not), or not at all; counting the files earlier runs finished and those streamed.
pub(super) fn verification(
    earlier: &EarlierRuns,
    shared: &Shared,
    streamed: &[StreamedFile],
    checksum_file: Option<ChecksumFileReport>,
) -> Verification {
    let jobs = &shared.files;
    // counted, and only the first names in order kept: a million unchecked files (an index
    // of a plain web server) would otherwise be copied into one list at the end
    let (n_unverified, unverified) = first_names(
        earlier
            .skipped_unverified
            .iter()
            .map(String::as_str)
            .chain(
                streamed
                    .iter()
                    .filter(|f| !f.published)
                    .map(|f| f.rel.as_str()),
            )
            .chain(jobs.iter().filter(|j| !j.checked()).map(FileJob::rel)),
    );
    // files a digest checked: by a collision-resistant one, or only by others
    let strong_job = |j: &FileJob| j.expect().is_some_and(|e| e.algo.collision_resistant());
    let strong = earlier.verified_strong
        + jobs.iter().filter(|j| strong_job(j)).count()
        + streamed.iter().filter(|f| f.strong).count();
    let (n_weak, weak) = first_names(
        earlier
            .verified_weak
            .iter()
            .map(String::as_str)
            .chain(
                jobs.iter()
                    .filter(|j| j.checked() && !strong_job(j))
                    .map(FileJob::rel),
            )
            .chain(
                streamed
                    .iter()
                    .filter(|f| f.published && !f.strong)
                    .map(|f| f.rel.as_str()),
            ),
    );
    Verification {
        by_listing: earlier.verified_by_listing
            + jobs
                .iter()
                .filter(|j| j.xxh3().is_some() || j.blocks().is_some())
                .count(),
        by_publisher: earlier.verified_by_publisher
            + jobs.iter().filter(|j| j.expect().is_some()).count()
            + streamed.iter().filter(|f| f.published).count(),
        unverified: n_unverified,
        unverified_files: unverified,
        checksum_file,
        collision_resistant: strong,
        integrity_only: n_weak,
        integrity_only_files: weak,
        restarted: earlier
            .restarted
            .iter()
            .chain(shared.restarted.lock().unwrap().iter())
            .cloned()
            .collect(),
        resumed_unchecked: earlier.resumed_unchecked.clone(),
    }
}

/// How many `names` there are, and the first [`UNVERIFIED_LISTED`] of them in sorted order
/// (what sorting them all and taking the head gives, holding only those).
fn first_names<'a>(names: impl Iterator<Item = &'a str>) -> (usize, Vec<String>) {
    let mut n = 0;
    // a max-heap of the smallest seen so far: its top is the first to go
    let mut keep: BinaryHeap<&str> = BinaryHeap::new();
    for name in names {
        n += 1;
        if keep.len() < UNVERIFIED_LISTED {
            keep.push(name);
        } else if keep.peek().is_some_and(|top| name < *top) {
            keep.pop();
            keep.push(name);
        }
    }
    (
        n,
        keep.into_sorted_vec()
            .into_iter()
            .map(String::from)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_names_are_the_head_of_the_sorted_list() {
        let names: Vec<String> = (0..2500).rev().map(|i| format!("f{i:05}")).collect();
        let (n, first) = first_names(names.iter().map(String::as_str));
        let mut all = names.clone();
        all.sort();
        assert_eq!(n, 2500);
        assert_eq!(first, all[..UNVERIFIED_LISTED]);
        let (n, first) = first_names(["b", "a"].into_iter());
        assert_eq!((n, first), (2, vec!["a".to_string(), "b".to_string()]));
    }
}
