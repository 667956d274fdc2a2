//! The restore record: every knob `power run --apply` may write, with its original value,
//! written (atomically, synced) before the first write, removed after every knob is restored.
//! A record left behind (the process was killed) is applied at the next start.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use super::knob::{read_knob, write_knob};
use super::ManageError;

/// The record's file name in the state directory.
pub const RESTORE_FILE: &str = "power-restore.json";

/// The largest record read back: a record is a few knobs, never more.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// One knob and the value it had before wattio touched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobOriginal {
    /// The knob's system path.
    pub path: PathBuf,
    /// Its original value.
    pub original: String,
}

/// The knobs to put back, as written to disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreRecord {
    /// The process that wrote it.
    pub pid: u32,
    /// The knobs.
    pub knobs: Vec<KnobOriginal>,
}

/// What applying a record did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RestoreOutcome {
    /// Knobs written back to their original value.
    pub restored: Vec<KnobOriginal>,
    /// Knobs that already held it.
    pub unchanged: usize,
    /// Knobs that could not be restored, with why (one line each).
    pub failed: Vec<String>,
}

/// The record's path, the state directory (a system path) resolved under `root`.
pub fn record_path(root: &SysRoot, state_dir: &Path) -> PathBuf {
    root.path(state_dir).join(RESTORE_FILE)
}

impl RestoreRecord {
    /// Writes the record under `state_dir` (created if needed), atomically and synced.
    pub fn save(&self, root: &SysRoot, state_dir: &Path) -> Result<(), ManageError> {
        let path = record_path(root, state_dir);
        let fail = |source: std::io::Error| ManageError::Record {
            path: path.clone(),
            what: source.to_string(),
        };
        std::fs::create_dir_all(root.path(state_dir)).map_err(fail)?;
        let json = serde_json::to_vec_pretty(self).map_err(|e| fail(e.into()))?;
        wattio_files::write_atomically(&path, |w| w.write_all(&json)).map_err(|e| fail(e.into()))
    }

    /// The record left under `state_dir`, if there is one.
    pub fn load(root: &SysRoot, state_dir: &Path) -> Result<Option<RestoreRecord>, ManageError> {
        use std::io::Read;
        let path = record_path(root, state_dir);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ManageError::Record {
                    path,
                    what: e.to_string(),
                })
            }
        };
        let mut text = Vec::new();
        file.take(MAX_RECORD_BYTES)
            .read_to_end(&mut text)
            .map_err(|e| ManageError::Record {
                path: path.clone(),
                what: e.to_string(),
            })?;
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| ManageError::Record {
                path,
                what: format!("{e} (restore the knobs it lists by hand, then delete it)"),
            })
    }

    /// Writes every knob back to its original value where it differs.
    pub fn apply(&self, root: &SysRoot) -> RestoreOutcome {
        let mut out = RestoreOutcome::default();
        for k in &self.knobs {
            match read_knob(root, &k.path) {
                Ok(now) if now == k.original => out.unchanged += 1,
                _ => match write_knob(root, &k.path, &k.original) {
                    Ok(()) => out.restored.push(k.clone()),
                    Err(e) => out.failed.push(e.to_string()),
                },
            }
        }
        out
    }
}

/// Removes the record under `state_dir` (gone already is fine).
pub fn remove_record(root: &SysRoot, state_dir: &Path) -> Result<(), ManageError> {
    let path = record_path(root, state_dir);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ManageError::Record {
            path,
            what: e.to_string(),
        }),
    }
}

/// Applies and removes a record left under `state_dir`; `None` when there was none. The record
/// stays where a knob could not be restored.
pub fn restore_pending(
    root: &SysRoot,
    state_dir: &Path,
) -> Result<Option<RestoreOutcome>, ManageError> {
    let Some(record) = RestoreRecord::load(root, state_dir)? else {
        return Ok(None);
    };
    let outcome = record.apply(root);
    if outcome.failed.is_empty() {
        remove_record(root, state_dir)?;
    }
    Ok(Some(outcome))
}
