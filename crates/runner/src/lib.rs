//! # wattio-runner
//!
//! What every wattio experiment runner shares (the iobench study and the overhead study,
//! `wattio-overhead`, run on it).
//!
//! A runner walks a plan of runs through an *executor* (a trait per study: the real one starts
//! processes, tests use fakes, so scheduling and collection are tested without starting
//! anything), writes each finished run to its result file at once ([`CsvLog`]), reports
//! through the workspace's one callback holder (`wattio_progress::Sink<StudyProgress>`, with
//! an `Eta` from measured run times), stops between runs — or inside one, ending its
//! processes — when the workspace's one cancel flag (`wattio_progress::Cancel`) is set, and
//! can resume a directory where it stopped ([`open_study_dir`]: same plan or a clear
//! refusal). Runners never print, draw or install signal handlers: the binary does.
//!
//! * [`GroupChild`] — a child in its own process group, killed with its descendants on drop.
//! * [`CsvLog`], [`read_rows`] — append-as-you-go result files and their reader.
//! * [`StudyManifest`], [`open_study_dir`], [`StudyEnd`] — `study.json`, fresh start or resume.

mod log;
mod process;
mod study;

pub use log::{CsvLog, LogError};
// The one reader of CSV rows and the manifest's shape live with the other result schemas, which
// the report reads through.
pub use process::GroupChild;
pub use study::{
    check_study_dir, mark_complete, open_study_dir, read_manifest, write_manifest, StudyEnd,
    StudyError, StudyManifest, MANIFEST_FILE,
};
pub use wattio_results::{read_rows, row_from_record};
