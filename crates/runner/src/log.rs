//! Result files written as runs finish.
//!
//! A study that ends early — Ctrl-C, SIGTERM, a failed run, a crash — keeps every run that
//! finished: each row is serialised whole and handed to the kernel in one `write(2)` on a
//! file opened for appending, before the next run starts. A row cut short by a kill in the
//! middle of that write (it ends without a newline) is dropped when the file is resumed.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use wattio_results::read_rows;

/// Why a result file could not be opened, read or appended to.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot write {path}: {source}; check the directory exists and is writable")]
    Io { path: String, source: io::Error },
    #[error("{path}: {why}; it was not written by this study (or was edited): start a new study with another output directory")]
    Unreadable { path: String, why: String },
}

/// An append-only CSV file of rows `T` (serde field names are the header).
#[derive(Debug)]
pub struct CsvLog<T> {
    file: File,
    path: PathBuf,
    rows: usize,
    _row: PhantomData<fn(&T)>,
}

impl<T: Serialize + DeserializeOwned> CsvLog<T> {
    /// Starts an empty file at `path` (replacing one that is there); the header is written
    /// with the first row.
    pub fn create(path: &Path) -> Result<CsvLog<T>, LogError> {
        let io_err = |source| LogError::Io {
            path: path.display().to_string(),
            source,
        };
        File::create(path).map_err(io_err)?;
        let file = OpenOptions::new().append(true).open(path).map_err(io_err)?;
        Ok(CsvLog {
            file,
            path: path.to_path_buf(),
            rows: 0,
            _row: PhantomData,
        })
    }

    /// Opens `path` to go on appending, with the rows already there. A missing file is an
    /// empty log; a last row without its newline (cut by a kill) is removed from the file.
    pub fn resume(path: &Path) -> Result<(CsvLog<T>, Vec<T>), LogError> {
        let io_err = |source| LogError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut text = Vec::new();
        match File::open(path) {
            Ok(mut f) => {
                f.read_to_end(&mut text).map_err(io_err)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let rows = read_rows(&text[..complete]).map_err(|why| LogError::Unreadable {
            path: path.display().to_string(),
            why,
        })?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_err)?;
        if complete < text.len() {
            file.set_len(complete as u64).map_err(io_err)?;
        }
        let log = CsvLog {
            file,
            path: path.to_path_buf(),
            rows: rows.len(),
            _row: PhantomData,
        };
        Ok((log, rows))
    }

    /// Appends one row (with the header first if the file is empty) in one write.
    pub fn append(&mut self, row: &T) -> Result<(), LogError> {
        let io_err = |source| LogError::Io {
            path: self.path.display().to_string(),
            source,
        };
        let empty = self.file.metadata().map_err(io_err)?.len() == 0;
        let mut w = csv::WriterBuilder::new()
            .has_headers(empty)
            .from_writer(Vec::new());
        w.serialize(row)
            .and_then(|_| w.flush().map_err(csv::Error::from))
            .map_err(|e| LogError::Io {
                path: self.path.display().to_string(),
                source: io::Error::other(e.to_string()),
            })?;
        let bytes = w.into_inner().map_err(|e| LogError::Io {
            path: self.path.display().to_string(),
            source: io::Error::other(e.to_string()),
        })?;
        self.file
            .write_all(&bytes)
            .and_then(|_| self.file.flush())
            .map_err(io_err)?;
        self.rows += 1;
        Ok(())
    }

    /// Rows in the file.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether the file has no row.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Where the rows go.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Row {
        n: u32,
        label: String,
        x: f64,
        #[serde(default)]
        extra: Option<f64>,
    }

    fn row(n: u32) -> Row {
        Row {
            n,
            label: format!("a, \"quoted\" label {n}"),
            x: n as f64 / 3.0,
            extra: (n % 2 == 0).then_some(0.5),
        }
    }

    #[test]
    fn rows_are_on_disk_as_soon_as_appended_and_resume_reads_them_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.csv");
        let mut log = CsvLog::create(&p).unwrap();
        log.append(&row(1)).unwrap();
        // Read by an independent reader while the log is still open.
        let mut rd = csv::Reader::from_path(&p).unwrap();
        let got: Vec<Row> = rd.deserialize().map(|r| r.unwrap()).collect();
        assert_eq!(got, vec![row(1)]);
        log.append(&row(2)).unwrap();
        drop(log);
        let (mut log, back) = CsvLog::<Row>::resume(&p).unwrap();
        assert_eq!(back, vec![row(1), row(2)]);
        log.append(&row(3)).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches("n,label,x,extra").count(), 1, "{text}");
        assert_eq!(text.lines().count(), 4);
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn a_half_written_last_row_is_dropped_from_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.csv");
        let mut log = CsvLog::create(&p).unwrap();
        log.append(&row(1)).unwrap();
        log.append(&row(2)).unwrap();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"3,\"a, cut").unwrap();
        drop(f);
        let (mut log, back) = CsvLog::<Row>::resume(&p).unwrap();
        assert_eq!(back, vec![row(1), row(2)]);
        log.append(&row(3)).unwrap();
        let (_, back) = CsvLog::<Row>::resume(&p).unwrap();
        assert_eq!(back, vec![row(1), row(2), row(3)]);
    }

    #[test]
    fn a_missing_file_resumes_empty_and_bad_rows_name_line_and_column() {
        let d = tempfile::tempdir().unwrap();
        let (log, back) = CsvLog::<Row>::resume(&d.path().join("none.csv")).unwrap();
        assert!(back.is_empty() && log.is_empty());
        let e = read_rows::<Row>(b"n,label,x\n1,a,2.5\n2,b,oops\n").unwrap_err();
        assert!(
            e.starts_with("line 3: column x: ") && e.contains("'oops'"),
            "{e}"
        );
        // An older file without the optional column.
        let rows = read_rows::<Row>(b"n,label,x\n1, a ,2.5\n").unwrap();
        assert_eq!(rows[0].extra, None);
        assert_eq!(rows[0].label, "a");
    }
}
