//! # wattio-report
//!
//! Turns a directory of wattio result files into one self-contained HTML page (inline CSS
//! and SVG, no network).
//!
//! * [`BenchTransfer`] reads a `make bench-transfer` run directory and writes its markdown
//!   tables and grouped bar charts (`wattio report bench-transfer`).
//! * [`scan_results`] / [`load_result_file`] recognise result files by their CSV header or
//!   JSON fields and read them through the result schemas of `wattio-results`: `wattio record`
//!   CSV/JSONL, `wattio measure --json`, iobench rows, cache sweep rows, transfer summaries,
//!   overhead runs, each a [`Dataset`]. Unknown files are skipped with a note. No producer
//!   crate is a dependency.
//! * [`render_html`] lays out the page: a heading and a table of contents, and for each result
//!   its section ([`wattio_plot::ReportSection`]), which the report draws itself: [`Recording`],
//!   [`MeasuredCommand`] with its [`RunEnergyStack`], [`IoBenchRuns`], [`CacheSweep`],
//!   [`TransferSection`], [`LoadRuns`], [`IdleRuns`].
//!   Every figure carries its energy provenance ("measured (perf)" / "estimated (model: …)")
//!   in its caption and SVG metadata. [`write_report`] scans and writes it.

mod bench_transfer;
mod data;
mod html;
mod sections;

use std::path::Path;

pub use data::{
    load_all as load_result_files, load_file as load_result_file, scan as scan_results, Dataset,
    Loaded, Scan, Skipped, MAX_FILE_BYTES, RESULT_EXTENSIONS,
};
pub use html::render as render_html;
pub use sections::{
    AttributedTotal, CacheSweep, IdleRuns, IoBenchRuns, LoadRuns, MeasuredCommand, RecordedCounter,
    Recording, RunEnergyStack, RunFigures, TransferSection, STACK_PARTS,
};

pub use bench_transfer::{
    read_runs, summarise, write_bench_transfer, BenchCell, BenchRow, BenchRunMeta, BenchTransfer,
    BenchTransferError, BenchTransferOutput, TOOL_ORDER,
};

/// What [`write_report`] did.
#[derive(Debug, Clone)]
pub struct ReportSummary {
    pub datasets: usize,
    pub skipped: Vec<(String, String)>,
    /// Files not read (extension not .csv/.json/.jsonl/.ndjson).
    pub ignored: usize,
    pub bytes: usize,
}

/// Errors of [`write_report`].
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read result directory {path}: {source}; give an existing directory or file")]
    Input {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}; check the directory exists and is writable")]
    Output {
        path: String,
        source: std::io::Error,
    },
}

/// Scans `input` (directory or file) and writes the HTML page to `output`.
pub fn write_report(
    input: &Path,
    output: &Path,
    title: &str,
) -> Result<ReportSummary, ReportError> {
    let scan = data::scan(input).map_err(|e| ReportError::Input {
        path: input.display().to_string(),
        source: e,
    })?;
    let base = if input.is_dir() {
        input
    } else {
        input.parent().unwrap_or(input)
    };
    let html = html::render(&scan, base, title);
    // A failed run never leaves half a page.
    wattio_files::write_atomically(output, |w| w.write_all(html.as_bytes())).map_err(|e| {
        ReportError::Output {
            path: output.display().to_string(),
            source: e.into(),
        }
    })?;
    Ok(ReportSummary {
        datasets: scan.loaded.len(),
        skipped: scan
            .skipped
            .iter()
            .map(|s| (s.path.display().to_string(), s.reason.clone()))
            .collect(),
        ignored: scan.ignored,
        bytes: html.len(),
    })
}
