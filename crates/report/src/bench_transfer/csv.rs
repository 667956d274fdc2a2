//! Every run of a bench as CSV (`results.csv`).

use super::BenchTransfer;

impl BenchTransfer {
    /// Every run as CSV, one line per run (the columns of [`BenchRow`]).
    pub fn csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &self.rows {
            w.serialize(r)?;
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}
