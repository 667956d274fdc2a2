//! The result files wattio parts write, as typed data, and how to recognise them.
//!
//! Files are recognised by their CSV header or JSON fields, never by name, so a renamed
//! file still loads and an unknown file is skipped with a note instead of an error.

use crate::overhead::{IdleRun, LoadRun};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wattio_energy::{Mechanism, Provenance};

/// Reads a provenance from a result's `mechanism`, `estimated` and `model` fields (JSON
/// values or CSV cells). A file without `estimated` is an estimate when its mechanism is the
/// model; an unknown mechanism reads as none, so the figure is shown as of unrecorded origin.
fn provenance_of(
    mechanism: &str,
    estimated: Option<bool>,
    model: Option<&str>,
) -> Option<Provenance> {
    let mechanism: Mechanism = mechanism.parse().ok()?;
    Some(Provenance {
        mechanism,
        estimated: estimated.unwrap_or(mechanism == Mechanism::Model),
        model: model.filter(|m| !m.is_empty()).map(str::to_string),
    })
}

fn provenance_from_json(v: &Value) -> Option<Provenance> {
    let estimated = match v.get("estimated") {
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) => Some(s == "true"),
        _ => None,
    };
    provenance_of(
        v.get("mechanism")?.as_str()?,
        estimated,
        v.get("model").and_then(|m| m.as_str()),
    )
}

/// Joins the labels of several provenances ("measured (perf); estimated (…)").
pub fn label_all<'a>(ps: impl IntoIterator<Item = &'a Provenance>) -> String {
    let mut v: Vec<&Provenance> = ps.into_iter().collect();
    v.sort_by_key(|p| (p.mechanism.as_str(), p.estimated, p.model.as_deref()));
    v.dedup();
    if v.is_empty() {
        return "energy provenance not recorded".into();
    }
    v.iter().map(|p| p.label()).collect::<Vec<_>>().join("; ")
}

/// One counter's rows from `wattio record`: (unix seconds, joules since previous row).
#[derive(Debug, Clone)]
pub struct Counter {
    pub socket: u32,
    pub domain: String,
    pub provenance: Provenance,
    pub rows: Vec<(f64, f64)>,
}

impl Counter {
    /// Mean power between consecutive rows, as (seconds since the first row, watts),
    /// averaged into at most `max_points` time buckets so long recordings stay small.
    pub fn power_series(&self, max_points: usize) -> Vec<(f64, f64)> {
        let Some(&(t0, _)) = self.rows.first() else {
            return vec![];
        };
        let t_end = self.rows.last().map(|r| r.0).unwrap_or(t0);
        let span = (t_end - t0).max(1e-9);
        let nb = max_points.max(1);
        let mut e = vec![0.0; nb];
        let mut dt = vec![0.0; nb];
        for w in self.rows.windows(2) {
            let d = w[1].0 - w[0].0;
            if d <= 0.0 {
                continue;
            }
            // Bucket by the interval's midpoint so each interval lands where it happened.
            let mid = 0.5 * (w[0].0 + w[1].0) - t0;
            let b = ((mid / span) * nb as f64).min(nb as f64 - 1.0) as usize;
            e[b] += w[1].1;
            dt[b] += d;
        }
        (0..nb)
            .filter(|&b| dt[b] > 0.0)
            .map(|b| ((b as f64 + 0.5) / nb as f64 * span, e[b] / dt[b]))
            .collect()
    }
}

/// A `wattio measure --json` result (one run or `--repeat N`).
#[derive(Debug, Clone)]
pub struct MeasureRun {
    pub duration_s: f64,
    pub total_j: f64,
    pub mean_power_w: f64,
    pub exit_code: i64,
}

/// One `iobench` row (Java I/O study).
#[derive(Debug, Clone)]
pub struct IoRow {
    pub method: String,
    pub op: String,
    pub size: String,
    pub energy_j: f64,
    pub time_s: f64,
    pub bytes: f64,
    pub provenance: Option<Provenance>,
}

/// One `cache sweep` / `cache replay` row.
#[derive(Debug, Clone)]
pub struct CacheRow {
    /// Trace the row replays (e.g. email, web); empty when not recorded.
    pub workload: String,
    pub strategy: String,
    pub knob: f64,
    pub ghost_hints: String,
    pub mean_response_s: f64,
    pub energy_j: f64,
    /// The simulator's own provenance text, e.g. "simulated (estimated from device profile …)".
    pub energy_kind: Option<String>,
}

/// One interval of a transfer.
#[derive(Debug, Clone, Default)]
pub struct TransferInterval {
    pub t_s: f64,
    pub throughput_mbps: f64,
    pub power_w: Option<f64>,
    /// Tuning parameters present in the interval (num_ch, pipelining, cores, freq_khz, …).
    pub params: BTreeMap<String, f64>,
}

/// A loaded result file.
#[derive(Debug, Clone)]
pub enum Dataset {
    Record {
        counters: Vec<Counter>,
    },
    Measure {
        command: String,
        provenance: Provenance,
        runs: Vec<MeasureRun>,
    },
    IoBench {
        rows: Vec<IoRow>,
    },
    Cache {
        rows: Vec<CacheRow>,
    },
    Transfer {
        summary: BTreeMap<String, String>,
        provenance: Option<Provenance>,
        energy_j: Option<f64>,
        intervals: Vec<TransferInterval>,
    },
    OverheadLoad {
        runs: Vec<LoadRun>,
    },
    OverheadIdle {
        runs: Vec<IdleRun>,
    },
}

impl Dataset {
    /// Short kind name used in headings and notes.
    pub fn kind(&self) -> &'static str {
        match self {
            Dataset::Record { .. } => "record",
            Dataset::Measure { .. } => "measure",
            Dataset::IoBench { .. } => "iobench",
            Dataset::Cache { .. } => "cache",
            Dataset::Transfer { .. } => "transfer",
            Dataset::OverheadLoad { .. } => "overhead (running time)",
            Dataset::OverheadIdle { .. } => "overhead (idle)",
        }
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
        match load_file(&f) {
            Ok(Some(data)) => s.loaded.push(Loaded { path: f, data }),
            Ok(None) => {}
            Err(reason) => s.skipped.push(Skipped { path: f, reason }),
        }
    }
    // iobench writes the same runs as results.csv and results.json: keep the CSV.
    let csv_iobench: Vec<(PathBuf, usize)> = s
        .loaded
        .iter()
        .filter_map(|l| match &l.data {
            Dataset::IoBench { rows } if l.path.extension().is_some_and(|e| e == "csv") => {
                Some((l.path.with_extension(""), rows.len()))
            }
            _ => None,
        })
        .collect();
    s.loaded.retain(|l| match &l.data {
        Dataset::IoBench { rows } if l.path.extension().is_some_and(|e| e == "json") => {
            !csv_iobench.contains(&(l.path.with_extension(""), rows.len()))
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

/// Loads one file. `Ok(None)`: silently ignored (our own HTML/SVG/PNG/Markdown output).
/// `Err(reason)`: skipped with a note in the report.
pub fn load_file(path: &Path) -> Result<Option<Dataset>, String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if matches!(ext.as_str(), "html" | "svg" | "png" | "md" | "txt" | "log") {
        return Ok(None);
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
        return Ok(None);
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
    .map(Some)
}

fn truncate_note(s: &str) -> String {
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(119).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Columns a `wattio record` CSV must have for the report (`model` is read when present).
const METER_COLUMNS: &[&str] = &[
    "timestamp",
    "mechanism",
    "socket",
    "domain",
    "energy_j",
    "estimated",
];

/// Whether a CSV header line belongs to a format [`parse_csv`] understands.
fn known_csv_header(header: &str) -> bool {
    let cols: Vec<&str> = header
        .split(',')
        .map(|c| c.trim().trim_matches('"'))
        .collect();
    let has = |names: &[&str]| names.iter().all(|n| cols.contains(n));
    has(METER_COLUMNS)
        || has(crate::overhead::LOAD_COLUMNS)
        || has(crate::overhead::IDLE_COLUMNS)
        || has(&["method", "op", "energy_j"])
        || has(&["strategy", "knob", "energy_j"])
        || header.starts_with(DERIVED_TIME_HEADER)
        || header.starts_with(DERIVED_IDLE_HEADER)
}

fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn parse_json(text: &str) -> Result<Dataset, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    if let Some(arr) = v.as_array() {
        let first = arr.first().ok_or("empty JSON array")?;
        if has(first, &["method", "op", "energy_j"]) {
            return Ok(Dataset::IoBench {
                rows: arr.iter().map(io_row_json).collect::<Result<_, _>>()?,
            });
        }
        if has(first, &["strategy", "knob", "energy_j"]) {
            return Ok(Dataset::Cache {
                rows: arr.iter().map(cache_row_json).collect::<Result<_, _>>()?,
            });
        }
        if has(first, &["duration_s", "total_j"]) {
            return measure_from(&Value::Null, arr);
        }
        return Err(
            "JSON array of unknown records (expected iobench, cache or measure rows)".into(),
        );
    }
    for key in ["results", "rows"] {
        if let Some(arr) = v.get(key).and_then(|a| a.as_array()) {
            if let Some(first) = arr.first() {
                if has(first, &["method", "op", "energy_j"]) {
                    return Ok(Dataset::IoBench {
                        rows: arr.iter().map(io_row_json).collect::<Result<_, _>>()?,
                    });
                }
                if has(first, &["strategy", "knob", "energy_j"]) {
                    return Ok(Dataset::Cache {
                        rows: arr.iter().map(cache_row_json).collect::<Result<_, _>>()?,
                    });
                }
            }
        }
    }
    if let Some(runs) = v.get("runs").and_then(|r| r.as_array()) {
        if runs
            .first()
            .is_some_and(|r| has(r, &["duration_s", "total_j"]))
        {
            return measure_from(&v, runs);
        }
        if runs
            .first()
            .is_some_and(|r| has(r, &["method", "op", "energy_j"]))
        {
            return Ok(Dataset::IoBench {
                rows: runs.iter().map(io_row_json).collect::<Result<_, _>>()?,
            });
        }
    }
    if has(&v, &["duration_s", "total_j", "domains"]) {
        return measure_from(&v, std::slice::from_ref(&v));
    }
    if has(&v, &["throughput_mbps", "seconds"])
        || v.get("intervals").is_some_and(|i| i.is_array()) && v.get("bytes").is_some()
    {
        return transfer_from(&v);
    }
    Err("JSON of unknown shape (not a measure, iobench, cache or transfer result)".into())
}

fn has(v: &Value, keys: &[&str]) -> bool {
    keys.iter().all(|k| v.get(k).is_some())
}

fn measure_from(top: &Value, runs: &[Value]) -> Result<Dataset, String> {
    let provenance = provenance_from_json(top)
        .or_else(|| runs.first().and_then(provenance_from_json))
        .ok_or("measure result without a mechanism field")?;
    let command = top
        .get("command")
        .or_else(|| runs.first().and_then(|r| r.get("command")))
        .map(|c| match c {
            Value::Array(a) => a
                .iter()
                .filter_map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            Value::String(s) => s.clone(),
            _ => String::new(),
        })
        .unwrap_or_default();
    let runs = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let need = |k: &str| {
                num(r.get(k)).ok_or(format!("run {}: missing or non-numeric '{k}'", i + 1))
            };
            let duration_s = need("duration_s")?;
            let total_j = need("total_j")?;
            Ok(MeasureRun {
                duration_s,
                total_j,
                mean_power_w: num(r.get("mean_power_w")).unwrap_or(total_j / duration_s.max(1e-12)),
                exit_code: r.get("exit_code").and_then(|c| c.as_i64()).unwrap_or(0),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Dataset::Measure {
        command,
        provenance,
        runs,
    })
}

fn io_row_json(v: &Value) -> Result<IoRow, String> {
    let s = |k: &str| {
        v.get(k)
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| x.to_string())
            })
            .unwrap_or_default()
    };
    Ok(IoRow {
        method: s("method"),
        op: s("op"),
        size: s("size"),
        energy_j: num(v.get("energy_j")).ok_or("iobench row without numeric energy_j")?,
        time_s: num(v.get("time_s")).unwrap_or(f64::NAN),
        bytes: num(v.get("bytes")).unwrap_or(f64::NAN),
        provenance: provenance_from_json(v),
    })
}

fn cache_row_json(v: &Value) -> Result<CacheRow, String> {
    Ok(CacheRow {
        strategy: v
            .get("strategy")
            .and_then(|s| s.as_str())
            .unwrap_or("?")
            .to_string(),
        knob: num(v.get("knob")).ok_or("cache row without numeric knob")?,
        ghost_hints: v
            .get("ghost_hints")
            .map(|g| {
                g.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| g.to_string())
            })
            .unwrap_or_default(),
        mean_response_s: num(v.get("mean_response_s")).unwrap_or(f64::NAN),
        energy_j: num(v.get("energy_j")).ok_or("cache row without numeric energy_j")?,
        workload: v
            .get("workload")
            .and_then(|w| w.as_str())
            .unwrap_or("")
            .to_string(),
        energy_kind: v
            .get("energy_kind")
            .and_then(|w| w.as_str())
            .map(str::to_string),
    })
}

fn transfer_from(v: &Value) -> Result<Dataset, String> {
    let mut summary = BTreeMap::new();
    for k in [
        "bytes",
        "files",
        "seconds",
        "throughput_mbps",
        "sla",
        "tuner",
    ] {
        if let Some(x) = v.get(k) {
            summary.insert(
                k.to_string(),
                x.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| x.to_string()),
            );
        }
    }
    let energy = v.get("energy").filter(|e| !e.is_null());
    let provenance = energy.and_then(provenance_from_json);
    let energy_j = energy.and_then(|e| num(e.get("total_j")));
    let mut intervals = Vec::new();
    if let Some(arr) = v.get("intervals").and_then(|i| i.as_array()) {
        for it in arr {
            let mut params = BTreeMap::new();
            for k in [
                "num_ch",
                "pipelining",
                "cores",
                "freq_khz",
                "parallelism",
                "concurrency",
            ] {
                if let Some(x) = num(it.get(k)) {
                    params.insert(k.to_string(), x);
                }
            }
            intervals.push(TransferInterval {
                t_s: num(it.get("t_s")).unwrap_or(f64::NAN),
                throughput_mbps: num(it.get("throughput_mbps")).unwrap_or(f64::NAN),
                power_w: num(it.get("power_w")),
                params,
            });
        }
    }
    Ok(Dataset::Transfer {
        summary,
        provenance,
        energy_j,
        intervals,
    })
}

fn parse_jsonl(text: &str) -> Result<Dataset, String> {
    let mut counters: BTreeMap<(u32, String, Provenance), Vec<(f64, f64)>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: invalid JSON: {e}", i + 1))?;
        if !has(&v, &["timestamp", "domain", "energy_j"]) {
            return Err(format!(
                "line {}: not a `wattio record` JSON line (needs timestamp, domain, energy_j)",
                i + 1
            ));
        }
        if v.get("entity").is_some_and(|e| !e.is_null()) {
            continue; // a `record --by` attribution row: see parse_csv
        }
        let p = provenance_from_json(&v).ok_or(format!(
            "line {}: no known mechanism (perf, ebpf, powercap, msr, model or nvml)",
            i + 1
        ))?;
        let t = num(v.get("timestamp")).ok_or(format!("line {}: bad timestamp", i + 1))?;
        let e = num(v.get("energy_j")).ok_or(format!("line {}: bad energy_j", i + 1))?;
        let socket = v.get("socket").and_then(|s| s.as_u64()).unwrap_or(0) as u32;
        let domain = v
            .get("domain")
            .and_then(|d| d.as_str())
            .unwrap_or("?")
            .to_string();
        counters
            .entry((socket, domain, p))
            .or_default()
            .push((t, e));
    }
    if counters.is_empty() {
        return Err("no rows".into());
    }
    Ok(record_dataset(counters))
}

fn record_dataset(counters: BTreeMap<(u32, String, Provenance), Vec<(f64, f64)>>) -> Dataset {
    Dataset::Record {
        counters: counters
            .into_iter()
            .map(|((socket, domain, provenance), mut rows)| {
                rows.sort_by(|a, b| a.0.total_cmp(&b.0));
                Counter {
                    socket,
                    domain,
                    provenance,
                    rows,
                }
            })
            .collect(),
    }
}

fn parse_csv(text: &str) -> Result<Dataset, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = rdr
        .headers()
        .map_err(|e| format!("unreadable CSV header: {e}"))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let has_all = |names: &[&str]| names.iter().all(|n| col(n).is_some());
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        // Line numbers count the header as line 1.
        rows.push(rec.map_err(|e| format!("line {}: {e}", i + 2))?);
    }
    let get = |r: &csv::StringRecord, name: &str| {
        col(name)
            .and_then(|c| r.get(c))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let getf = |r: &csv::StringRecord, i: usize, name: &str| -> Result<f64, String> {
        let s = get(r, name);
        s.parse::<f64>()
            .map_err(|_| format!("line {}: column {name}: '{s}' is not a number", i + 2))
    };
    let prov_of = |r: &csv::StringRecord| -> Option<Provenance> {
        let estimated = col("estimated").map(|_| get(r, "estimated") == "true");
        provenance_of(&get(r, "mechanism"), estimated, Some(&get(r, "model")))
    };

    if has_all(METER_COLUMNS) {
        let mut counters: BTreeMap<(u32, String, Provenance), Vec<(f64, f64)>> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            // `record --by` attribution rows (entity set) split the counters' energy: the
            // counter rows alone are the machine's energy.
            if !get(r, "entity").is_empty() {
                continue;
            }
            let t = getf(r, i, "timestamp")?;
            let e = getf(r, i, "energy_j")?;
            let socket = get(r, "socket")
                .parse()
                .map_err(|_| format!("line {}: bad socket", i + 2))?;
            let p = prov_of(r).ok_or(format!(
                "line {}: no known mechanism (perf, ebpf, powercap, msr, model or nvml)",
                i + 2
            ))?;
            counters
                .entry((socket, get(r, "domain"), p))
                .or_default()
                .push((t, e));
        }
        if counters.is_empty() {
            return Err("record CSV with a header but no rows".into());
        }
        return Ok(record_dataset(counters));
    }
    if has_all(crate::overhead::LOAD_COLUMNS) {
        return crate::overhead::load_runs_from_csv(&headers, &rows)
            .map(|runs| Dataset::OverheadLoad { runs });
    }
    if has_all(crate::overhead::IDLE_COLUMNS) {
        return crate::overhead::idle_runs_from_csv(&headers, &rows)
            .map(|runs| Dataset::OverheadIdle { runs });
    }
    if has_all(&["method", "op", "energy_j"]) {
        let mut out = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            out.push(IoRow {
                method: get(r, "method"),
                op: get(r, "op"),
                size: get(r, "size"),
                energy_j: getf(r, i, "energy_j")?,
                time_s: getf(r, i, "time_s").unwrap_or(f64::NAN),
                bytes: getf(r, i, "bytes").unwrap_or(f64::NAN),
                provenance: prov_of(r),
            });
        }
        return Ok(Dataset::IoBench { rows: out });
    }
    if has_all(&["strategy", "knob", "energy_j"]) {
        let mut out = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            let kind = get(r, "energy_kind");
            out.push(CacheRow {
                workload: get(r, "workload"),
                energy_kind: if kind.is_empty() { None } else { Some(kind) },
                strategy: get(r, "strategy"),
                knob: getf(r, i, "knob")?,
                ghost_hints: get(r, "ghost_hints"),
                mean_response_s: getf(r, i, "mean_response_s").unwrap_or(f64::NAN),
                energy_j: getf(r, i, "energy_j")?,
            });
        }
        return Ok(Dataset::Cache { rows: out });
    }
    Err(format!("CSV with unknown columns ({})", headers.join(",")))
}
