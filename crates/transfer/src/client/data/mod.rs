//! The data stage: the files discovery found, fetched and placed. `intake` takes each batch
//! in (its output paths kept in `claims`; prepared against DEST and what earlier runs left:
//! `resume`, `done_log`), `jobs` and `files` hold the files being fetched, `queue` cuts them
//! into chunks, `channel` runs the connections that fetch them (with `mirrors` to move a file
//! to its next mirror, `pace` for EETT's rate cap), `stream` fetches files of unknown size,
//! `verify` checks them and `placing` renames them into place in DEST (`dest`); `state` is
//! what the channels and the control loop share.

pub(crate) mod channel;
pub(crate) mod claims;
pub(crate) mod dest;
pub(crate) mod done_log;
pub(crate) mod files;
pub(crate) mod intake;
pub(crate) mod jobs;
pub(crate) mod mirrors;
pub(crate) mod pace;
pub(crate) mod placing;
pub(crate) mod queue;
pub(crate) mod resume;
pub(crate) mod state;
pub(crate) mod stream;
pub(crate) mod verify;
