//! Errors that name the problem and the fix.

use crate::types::Mechanism;
use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while discovering or reading energy counters.
///
/// Each message is one line that says what is wrong and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EnergyError {
    /// A file or device could not be read for lack of permission.
    #[error("{path}: permission denied; {fix}")]
    Permission { path: PathBuf, fix: String },
    /// A file or device does not exist.
    #[error("{path}: not found; {fix}")]
    Missing { path: PathBuf, fix: String },
    /// A file holds something that is not what the kernel writes there.
    #[error("{path}: malformed content {content:?} ({expected}); {fix}")]
    Malformed {
        path: PathBuf,
        content: String,
        expected: String,
        fix: String,
    },
    /// Another I/O error.
    // The io::Error is in the message, not a `source`, so chained printing does not repeat it.
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: io::Error },
    /// A counter went backwards and its wrap limit is unknown, so the delta cannot be trusted.
    #[error("{origin}: counter went back from {prev} to {new} and its wrap limit is unknown; no energy is reported for this interval ({fix})")]
    UncorrectableDecrease {
        origin: String,
        prev: u64,
        new: u64,
        fix: String,
    },
    /// The requested mechanism cannot be used here.
    #[error("{mechanism} is not usable: {reason}; {fix}")]
    Unusable {
        mechanism: Mechanism,
        reason: String,
        fix: String,
    },
    /// A request that makes no sense (unknown domain, empty selection...).
    #[error("{0}")]
    Invalid(String),
}

impl EnergyError {
    /// Classifies an I/O error on `path`, adding `fix` to permission and not-found errors.
    pub fn from_io(path: &Path, err: io::Error, fix: &str) -> Self {
        match err.kind() {
            io::ErrorKind::PermissionDenied => EnergyError::Permission {
                path: path.to_path_buf(),
                fix: fix.to_string(),
            },
            io::ErrorKind::NotFound => EnergyError::Missing {
                path: path.to_path_buf(),
                fix: fix.to_string(),
            },
            _ => EnergyError::Io {
                path: path.to_path_buf(),
                err,
            },
        }
    }
}
