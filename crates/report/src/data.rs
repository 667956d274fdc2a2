//! The result files wattio parts write, as typed data, and how to recognise them.
//!
//! Files are recognised by their CSV header or JSON fields, never by name, so a renamed
//! file still loads and an unknown file is skipped with a note instead of an error.

use crate::sections::{
    CacheSweep, IdleRuns, IoBenchRuns, LoadRuns, MeasuredCommand, Recording, RunFigures,
    TransferSection,
};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use wattio_plot::ReportSection;
use wattio_results::{
    ReportedComparison, ReportedRecordRow, ReportedRun, ReportedSingleRun, ReportedTransfer,
    RunRecord, RunResult, SweepRow,
};

/// A loaded result file, as its producer's type, which draws its own section of the page.
#[derive(Debug, Clone)]
pub enum Dataset {
    /// A `wattio record` CSV or JSON-lines file.
    Record(Recording),
    /// One command of a `wattio measure --json` result.
    Measure(MeasuredCommand),
    /// `wattio iobench` runs (`results.csv`, or the `runs` of `results.json`).
    IoBench(IoBenchRuns),
    /// `wattio cache sweep` rows (`sweep.csv`), or `cache replay --json` replays as rows of one
    /// seed.
    Cache(CacheSweep),
    /// A `wattio transfer --json` summary, read as the fields of it the page shows.
    Transfer(Box<TransferSection>),
    /// The overhead study's load runs (`runs.csv`).
    OverheadLoad(LoadRuns),
    /// The overhead study's idle runs (`idle.csv`).
    OverheadIdle(IdleRuns),
}

impl Dataset {
    /// The producer's section of the page for this result.
    pub fn section(&self) -> &dyn ReportSection {
        match self {
            Dataset::Record(d) => d,
            Dataset::Measure(d) => d,
            Dataset::IoBench(d) => d,
            Dataset::Cache(d) => d,
            Dataset::Transfer(d) => d.as_ref(),
            Dataset::OverheadLoad(d) => d,
            Dataset::OverheadIdle(d) => d,
        }
    }

    /// Short kind name used in headings and notes.
    pub fn kind(&self) -> &'static str {
        self.section().kind()
    }
}

/// A file that loaded.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub data: Dataset,
}

/// A file that did not, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Everything found under a directory.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub loaded: Vec<Loaded>,
    pub skipped: Vec<Skipped>,
    /// Files not read at all: their extension is not .csv/.json/.jsonl/.ndjson
    /// (datasets, binaries, logs, our own HTML/SVG).
    pub ignored: usize,
}

/// Extensions a result file can have; everything else is counted, not read.
pub const RESULT_EXTENSIONS: &[&str] = &["csv", "json", "jsonl", "ndjson"];

const DERIVED_TIME_HEADER: &str = "workload,mechanism,freq_hz,n_base,n,removed_base,";
const DERIVED_IDLE_HEADER: &str = "mechanism,freq_hz,n_base,n,est_power_base_w,";

/// Files bigger than this are skipped (a report is meant to stay small and quick).
pub const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// Walks `dir` (recursively, at most 6 levels, hidden entries ignored) and loads every
/// recognised result file. A single file may be given instead of a directory.
pub fn scan(dir: &Path) -> std::io::Result<Scan> {
    let mut files = Vec::new();
    let meta = std::fs::metadata(dir)?;
    if meta.is_file() {
        files.push(dir.to_path_buf());
    } else {
        walk(dir, 0, &mut files)?;
    }
    files.sort();
    let mut s = Scan::default();
    let single = meta.is_file();
    for f in files {
        let ext = f
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !single && !RESULT_EXTENSIONS.contains(&ext.as_str()) {
            s.ignored += 1;
            continue;
        }
        match load_all(&f) {
            Ok(data) => s.loaded.extend(data.into_iter().map(|data| Loaded {
                path: f.clone(),
                data,
            })),
            Err(reason) => s.skipped.push(Skipped { path: f, reason }),
        }
    }
    // iobench writes the same runs as results.csv and results.json: keep the CSV.
    let csv_iobench: Vec<(PathBuf, usize)> = s
        .loaded
        .iter()
        .filter_map(|l| match &l.data {
            Dataset::IoBench(d) if l.path.extension().is_some_and(|e| e == "csv") => {
                Some((l.path.with_extension(""), d.rows.len()))
            }
            _ => None,
        })
        .collect();
    s.loaded.retain(|l| match &l.data {
        Dataset::IoBench(d) if l.path.extension().is_some_and(|e| e == "json") => {
            !csv_iobench.contains(&(l.path.with_extension(""), d.rows.len()))
        }
        _ => true,
    });
    Ok(s)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if depth > 6 {
        return Ok(());
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let ft = e.file_type()?;
        if ft.is_dir() {
            walk(&e.path(), depth + 1, out)?;
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
    Ok(())
}

/// Loads one file: its first dataset (see [`load_all`]). `Ok(None)`: silently ignored (our
/// own HTML/SVG/PNG/Markdown output). `Err(reason)`: skipped with a note in the report.
pub fn load_file(path: &Path) -> Result<Option<Dataset>, String> {
    load_all(path).map(|d| d.into_iter().next())
}

/// Loads one file: one dataset, or one per command of a `wattio measure` benchmark of several
/// commands; none for files silently ignored (our own HTML/SVG/PNG/Markdown output).
/// `Err(reason)`: skipped with a note in the report.
pub fn load_all(path: &Path) -> Result<Vec<Dataset>, String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if matches!(ext.as_str(), "html" | "svg" | "png" | "md" | "txt" | "log") {
        return Ok(vec![]);
    }
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot stat: {e}"))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "{} MB is larger than the {} MB limit",
            size >> 20,
            MAX_FILE_BYTES >> 20
        ));
    }
    if ext == "csv" {
        // Check the header before reading a possibly large CSV that is not ours.
        use std::io::Read;
        let mut head = vec![0u8; 64 * 1024];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| format!("cannot read: {e}"))?;
        head.truncate(n);
        if !head.contains(&0) {
            let first = String::from_utf8_lossy(&head);
            let header = first.lines().next().unwrap_or("");
            if !header.is_empty() && !known_csv_header(header) {
                return Err(format!(
                    "CSV with unknown columns ({})",
                    truncate_note(header)
                ));
            }
        }
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.contains(&0) {
        return Err("binary file (contains NUL bytes), not a result file".into());
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Err("not UTF-8 text (binary file?)".into());
    };
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err("empty file".into());
    }
    // Tables `wattio overhead` derives from runs.csv/idle.csv: the report recomputes them.
    if ext == "csv"
        && (text.starts_with(DERIVED_TIME_HEADER) || text.starts_with(DERIVED_IDLE_HEADER))
    {
        return Ok(vec![]);
    }
    match ext.as_str() {
        "csv" => parse_csv(&text),
        "json" => parse_json(&text),
        "jsonl" | "ndjson" => parse_jsonl(&text),
        _ if trimmed.starts_with('{') || trimmed.starts_with('[') => {
            // Unknown extension: a single JSON document, or JSON lines.
            parse_json(&text).or_else(|_| parse_jsonl(&text))
        }
        _ if text.lines().next().is_some_and(|l| l.contains(',')) => parse_csv(&text),
        _ => Err(format!("unrecognised file type '.{ext}'")),
    }
}

fn truncate_note(s: &str) -> String {
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(119).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Whether a CSV header line belongs to a format [`parse_csv`] understands: the columns every
/// version of a producer's rows has, as the producer lists them.
fn known_csv_header(header: &str) -> bool {
    csv_kind(
        &header
            .split(',')
            .map(|c| c.trim().trim_matches('"'))
            .collect::<Vec<_>>(),
    )
    .is_some()
        || header.starts_with(DERIVED_TIME_HEADER)
        || header.starts_with(DERIVED_IDLE_HEADER)
}

/// The kinds of CSV result files.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CsvKind {
    Record,
    OverheadLoad,
    OverheadIdle,
    IoBench,
    Cache,
}

fn csv_kind(cols: &[&str]) -> Option<CsvKind> {
    let has = |names: &[&str]| names.iter().all(|n| cols.contains(n));
    let record: Vec<&str> = wattio_results::RECORD_CSV_HEADER.split(',').collect();
    if has(&record) {
        Some(CsvKind::Record)
    } else if has(wattio_results::LOAD_COLUMNS) {
        Some(CsvKind::OverheadLoad)
    } else if has(wattio_results::IDLE_COLUMNS) {
        Some(CsvKind::OverheadIdle)
    } else if has(wattio_results::RESULTS_CSV_COLUMNS) {
        Some(CsvKind::IoBench)
    } else if has(wattio_results::SWEEP_COLUMNS) {
        Some(CsvKind::Cache)
    } else {
        None
    }
}

/// `wattio measure --repeat N --json` before runs were kept apart from failed ones (a run then
/// was its energy and exit code, as [`ReportedRun`] reads it).
#[derive(Deserialize)]
struct EarlierMeasureRepeat {
    #[serde(default)]
    command: Vec<String>,
    runs: Vec<ReportedRun>,
}

/// The `results.json` of `wattio iobench`: its runs are what the report reads.
#[derive(Deserialize)]
struct IoBenchStudy {
    runs: Vec<RunRecord>,
}

/// Why a file of `what` did not read as its producer's rows: `error`, and for a column the rows
/// need but the file lacks, the fix (the file predates the column: `producer` rewrites it).
fn row_error(what: &str, producer: &str, error: impl std::fmt::Display) -> String {
    let error = error.to_string();
    if error.contains("missing field") {
        format!("{what}: {error}; written by an older wattio? run `{producer}` again to rewrite it")
    } else {
        format!("{what}: {error}")
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    v: Value,
    what: &str,
    producer: &str,
) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| row_error(what, producer, e))
}

fn parse_json(text: &str) -> Result<Vec<Dataset>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    if let Some(arr) = v.as_array() {
        let first = arr.first().ok_or("empty JSON array")?;
        if has(first, &["method", "op", "energy_j"]) {
            let rows: Vec<RunRecord> = typed(v, "iobench runs", "wattio iobench")?;
            return Ok(vec![Dataset::IoBench(IoBenchRuns { rows })]);
        }
        if has(first, &["strategy", "knob", "energy_j"]) {
            let replays: Vec<RunResult> =
                typed(v, "cache replay results", "wattio cache replay --json")?;
            let rows = replays.iter().map(|r| SweepRow::of_replay("", r)).collect();
            return Ok(vec![Dataset::Cache(CacheSweep { rows })]);
        }
        if has(first, &["duration_s", "total_j"]) {
            let runs: Vec<ReportedRun> = typed(v, "measure runs", "wattio measure --json")?;
            return measure_dataset(String::new(), runs);
        }
        return Err(
            "JSON array of unknown records (expected iobench, cache or measure rows)".into(),
        );
    }
    // `wattio measure --json` of several runs or commands.
    if v.get("results")
        .and_then(|r| r.as_array())
        .and_then(|r| r.first())
        .is_some_and(|c| has(c, &["command", "runs"]))
    {
        let report: ReportedComparison = typed(v, "measure result", "wattio measure --json")?;
        let provenance = report.provenance.clone();
        return Ok(report
            .results
            .iter()
            .map(|c| {
                Dataset::Measure(MeasuredCommand {
                    command: c.command.clone(),
                    provenance: provenance.clone(),
                    runs: c
                        .runs
                        .iter()
                        .filter(|r| r.kept())
                        .map(|r| RunFigures::of(&r.run))
                        .collect(),
                })
            })
            .collect());
    }
    if has(&v, &["total_label", "command"]) {
        let single: ReportedSingleRun = typed(v, "measure result", "wattio measure --json")?;
        return Ok(vec![Dataset::Measure(MeasuredCommand {
            command: single.command.join(" "),
            provenance: single.run.provenance.clone(),
            runs: vec![RunFigures::of(&single.run)],
        })]);
    }
    if let Some(first) = v
        .get("runs")
        .and_then(|r| r.as_array())
        .and_then(|r| r.first())
    {
        if has(first, &["method", "op", "energy_j"]) {
            let study: IoBenchStudy = typed(v, "iobench results", "wattio iobench")?;
            return Ok(vec![Dataset::IoBench(IoBenchRuns { rows: study.runs })]);
        }
        if has(first, &["duration_s", "total_j"]) {
            let repeat: EarlierMeasureRepeat = typed(v, "measure result", "wattio measure --json")?;
            return measure_dataset(repeat.command.join(" "), repeat.runs);
        }
    }
    if has(&v, &["duration_s", "total_j", "domains"]) {
        let command = match v.get("command") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        };
        let run: ReportedRun = typed(v, "measure result", "wattio measure --json")?;
        return measure_dataset(command, vec![run]);
    }
    if has(&v, &["throughput_mbps", "seconds", "intervals"]) {
        let summary: ReportedTransfer = typed(v, "transfer summary", "wattio transfer --json")?;
        return Ok(vec![Dataset::Transfer(Box::new(TransferSection {
            summary,
        }))]);
    }
    if has(&v, &["study", "plan", "total_runs", "complete"]) {
        let m: wattio_results::StudyManifest = typed(v, "study manifest", "the study")?;
        return Err(format!(
            "the manifest of a `{}` study (its plan, read by --resume), not a result: its runs are in the CSV files beside it",
            m.study
        ));
    }
    Err("JSON of unknown shape (not a measure, iobench, cache or transfer result)".into())
}

fn has(v: &Value, keys: &[&str]) -> bool {
    keys.iter().all(|k| v.get(k).is_some())
}

fn measure_dataset(command: String, runs: Vec<ReportedRun>) -> Result<Vec<Dataset>, String> {
    let provenance = runs
        .first()
        .map(|r| r.provenance.clone())
        .ok_or("measure result without runs")?;
    Ok(vec![Dataset::Measure(MeasuredCommand {
        command,
        provenance,
        runs: runs.iter().map(RunFigures::of).collect(),
    })])
}

fn parse_jsonl(text: &str) -> Result<Vec<Dataset>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: ReportedRecordRow = serde_json::from_str(line)
            .map_err(|e| format!("line {}: not a `wattio record` JSON line: {e}", i + 1))?;
        rows.push((i + 1, row));
    }
    record_dataset(rows)
}

/// A `wattio record` file's rows (with their line numbers) as the meter groups them.
fn record_dataset(rows: Vec<(usize, ReportedRecordRow)>) -> Result<Vec<Dataset>, String> {
    Recording::from_rows(rows).map(|r| vec![Dataset::Record(r)])
}

/// The rows of a CSV (header split off, cells trimmed) read as `T`, each with its line number;
/// errors read `what: line N: column C: why` ([`row_error`]).
fn typed_rows<T: serde::de::DeserializeOwned>(
    header: &csv::StringRecord,
    rows: &[csv::StringRecord],
    what: &str,
    producer: &str,
) -> Result<Vec<(usize, T)>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            // Line numbers count the header as line 1.
            wattio_results::row_from_record(header, r, i + 2)
                .map(|row| (i + 2, row))
                .map_err(|e| row_error(what, producer, e))
        })
        .collect()
}

fn parse_csv(text: &str) -> Result<Vec<Dataset>, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = rdr
        .headers()
        .map_err(|e| format!("unreadable CSV header: {e}"))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let cols: Vec<&str> = headers.iter().map(String::as_str).collect();
    let Some(kind) = csv_kind(&cols) else {
        return Err(format!("CSV with unknown columns ({})", headers.join(",")));
    };
    let header = csv::StringRecord::from(cols.clone());
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        // Line numbers count the header as line 1.
        let mut rec = rec.map_err(|e| format!("line {}: {e}", i + 2))?;
        rec.trim();
        rows.push(rec);
    }
    match kind {
        CsvKind::Record => {
            let rows = typed_rows(&header, &rows, "`wattio record` CSV", "wattio record")?;
            if rows.is_empty() {
                return Err("record CSV with a header but no rows".into());
            }
            record_dataset(rows)
        }
        CsvKind::OverheadLoad => wattio_results::load_runs_from_csv(&headers, &rows)
            .map(|runs| vec![Dataset::OverheadLoad(LoadRuns { runs })]),
        CsvKind::OverheadIdle => wattio_results::idle_runs_from_csv(&headers, &rows)
            .map(|runs| vec![Dataset::OverheadIdle(IdleRuns { runs })]),
        CsvKind::IoBench => {
            let rows = typed_rows(&header, &rows, "iobench results", "wattio iobench")?;
            Ok(vec![Dataset::IoBench(IoBenchRuns {
                rows: rows.into_iter().map(|(_, r)| r).collect(),
            })])
        }
        CsvKind::Cache => {
            let rows = typed_rows(&header, &rows, "cache sweep rows", "wattio cache sweep")?;
            Ok(vec![Dataset::Cache(CacheSweep {
                rows: rows.into_iter().map(|(_, r)| r).collect(),
            })])
        }
    }
}
