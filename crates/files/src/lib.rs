//! wattio-files: the one way wattio writes a file it must never leave half written (a report, a
//! results CSV, a study's manifest, a dataset listing or manifest, a cache entry).
//!
//! [`write_atomically`] writes the new content to a temporary file beside the target
//! (`.tmp.NAME.PID.SEQ`, created exclusively, so two writers never share one), syncs it, renames
//! it over the target and syncs the directory: after a crash or a power cut the target holds
//! either its old content or all of the new (rename(2) is atomic within a file system; the
//! syncs keep the rename from reaching the disk before the data, and the rename itself from
//! being lost). On any error the temporary file is removed and the target is untouched. A
//! directory scan can recognise a temporary left by a killed writer by its `.tmp.` prefix
//! ([`is_temporary`]).

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a temporary file's name starts with.
pub const TEMP_PREFIX: &str = ".tmp.";

/// The step of [`write_atomically`] that failed, the file it was working on, and why.
#[derive(Debug)]
pub struct WriteError {
    /// `create`, `write`, `sync`, `rename` or `sync the directory of`.
    pub step: &'static str,
    pub path: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot {} {}: {}",
            self.step,
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<WriteError> for io::Error {
    fn from(e: WriteError) -> io::Error {
        io::Error::new(e.source.kind(), e.to_string())
    }
}

/// A mapper of an I/O error of `step` on `path` into a [`WriteError`].
fn fail(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WriteError {
    let path = path.to_path_buf();
    move |source| WriteError { step, path, source }
}

/// Whether `file_name` is a temporary file of [`write_atomically`] (left by a writer that was
/// killed; safe to delete when no writer runs).
pub fn is_temporary(file_name: &str) -> bool {
    file_name.starts_with(TEMP_PREFIX)
}

/// Replaces `path` with what `fill` writes (buffered), or leaves it as it was. See the crate
/// documentation for the guarantee.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), WriteError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| WriteError {
        step: "create",
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "not a file name"),
    })?;
    let tmp = dir.join(format!(
        "{TEMP_PREFIX}{}.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(fail("create", &tmp))?;
    let written = (|| {
        let mut w = BufWriter::new(file);
        fill(&mut w).map_err(fail("write", &tmp))?;
        let file = w
            .into_inner()
            .map_err(|e| fail("write", &tmp)(e.into_error()))?;
        file.sync_all().map_err(fail("sync", &tmp))?;
        std::fs::rename(&tmp, path).map_err(fail("rename", &tmp))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fail("sync the directory of", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.csv");
        std::fs::write(&p, "old").unwrap();
        write_atomically(&p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(entries(d.path()), ["a.csv"]);
    }

    #[test]
    fn a_failing_writer_leaves_the_old_file_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.csv");
        std::fs::write(&p, "old").unwrap();
        let e = write_atomically(&p, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("the row did not serialise"))
        })
        .unwrap_err();
        assert_eq!(e.step, "write");
        assert!(is_temporary(&e.path.file_name().unwrap().to_string_lossy()));
        assert!(e.to_string().contains("the row did not serialise"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(entries(d.path()), ["a.csv"]);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let d = tempfile::tempdir().unwrap();
        let e =
            write_atomically(&d.path().join("no/such/a.csv"), |w| w.write_all(b"x")).unwrap_err();
        assert_eq!(e.step, "create");
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().starts_with("cannot create "), "{e}");
    }

    #[test]
    fn a_target_that_is_a_directory_keeps_its_content() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), "kept").unwrap();
        let e = write_atomically(&p, |w| w.write_all(b"x")).unwrap_err();
        assert_eq!(e.step, "rename");
        assert_eq!(std::fs::read_to_string(p.join("inside")).unwrap(), "kept");
        assert_eq!(entries(d.path()), ["out"]);
    }
}
