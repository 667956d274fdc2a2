//! The summary's verification part: how each file of the transfer was checked.

use crate::client::data::files::FileJob;
use crate::client::data::resume::EarlierRuns;
use crate::client::data::state::Shared;
use crate::client::data::stream::StreamedFile;
use crate::summary::{ChecksumFileReport, Verification, UNVERIFIED_LISTED};

/// How the files were checked: by the listing, by a publisher's digest (collision-resistant
/// or not), or not at all; counting the files earlier runs finished and those streamed.
pub(super) fn verification(
    earlier: &EarlierRuns,
    shared: &Shared,
    streamed: &[StreamedFile],
    checksum_file: Option<ChecksumFileReport>,
) -> Verification {
    let jobs = &shared.files;
    let mut unverified: Vec<String> = earlier.skipped_unverified.clone();
    unverified.extend(
        streamed
            .iter()
            .filter(|f| !f.published)
            .map(|f| f.rel.clone()),
    );
    unverified.extend(
        jobs.iter()
            .filter(|j| j.xxh3.is_none() && j.blocks.is_none() && j.expect.is_none())
            .map(|j| j.rel.clone()),
    );
    unverified.sort();
    // files a digest checked: by a collision-resistant one, or only by others
    let strong_job = |j: &FileJob| {
        j.expect
            .as_ref()
            .is_some_and(|e| e.algo.collision_resistant())
    };
    let checked_job = |j: &FileJob| j.xxh3.is_some() || j.blocks.is_some() || j.expect.is_some();
    let strong = earlier.verified_strong
        + jobs.iter().filter(|j| strong_job(j)).count()
        + streamed.iter().filter(|f| f.strong).count();
    let mut weak: Vec<String> = earlier.verified_weak.clone();
    weak.extend(
        jobs.iter()
            .filter(|j| checked_job(j) && !strong_job(j))
            .map(|j| j.rel.clone()),
    );
    weak.extend(
        streamed
            .iter()
            .filter(|f| f.published && !f.strong)
            .map(|f| f.rel.clone()),
    );
    weak.sort();
    Verification {
        by_listing: earlier.verified_by_listing
            + jobs
                .iter()
                .filter(|j| j.xxh3.is_some() || j.blocks.is_some())
                .count(),
        by_publisher: earlier.verified_by_publisher
            + jobs.iter().filter(|j| j.expect.is_some()).count()
            + streamed.iter().filter(|f| f.published).count(),
        unverified: unverified.len(),
        unverified_files: unverified.into_iter().take(UNVERIFIED_LISTED).collect(),
        checksum_file,
        collision_resistant: strong,
        integrity_only: weak.len(),
        integrity_only_files: weak.into_iter().take(UNVERIFIED_LISTED).collect(),
        restarted: earlier
            .restarted
            .iter()
            .chain(shared.restarted.lock().unwrap().iter())
            .cloned()
            .collect(),
        resumed_unchecked: earlier.resumed_unchecked.clone(),
    }
}
