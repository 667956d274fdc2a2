//! The command's own output files (a calibrated model, `--stats`, a sweep's CSV and charts),
//! replaced atomically like every file the libraries write: an interrupted command never leaves
//! half a file where a whole one was.

use anyhow::Context;
use std::path::Path;

/// Writes `bytes` to `path` through a synced temporary file renamed over it.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    wattio_files::write_atomically(path, |w| w.write_all(bytes)).with_context(|| {
        format!(
            "cannot write {}: check the directory exists and is writable",
            path.display()
        )
    })
}
