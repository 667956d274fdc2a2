//! # wattio-iobench
//!
//! The Java I/O energy study of Ournani et al. (ICSME 2021) as a tool: the JMH benchmarks live in
//! the Maven module `iobench/`; this crate builds it when needed, generates the files of Table I,
//! runs one fresh JVM per measured run with the methods interleaved over rounds, serves energy to
//! the JVMs over a Unix socket ([`EnergyServer`]) from the wattio meter, and turns the runs into
//! tidy CSV/JSON, paper-shaped tables, MB/J rankings, plots and recommendations backed by
//! statistics.
//!
//! * The catalog — use cases ([`Op`]), methods ([`CATALOG_METHODS`], [`MethodInfo`]), sizes
//!   ([`Size`]) and buffer sizes, a mirror of the Java catalog.
//! * [`study`] — planning (cells, JMH invocations per round), then prepare / run a round /
//!   collect, each run appended to `results.csv` as it finishes, resumable. A public namespace
//!   rather than items at the crate root: its stages (`study::plan`, `study::prepare`,
//!   `study::run_round`, `study::collect`, `study::run`) read as one sequence under it, and would
//!   each need a `_study` suffix at the root.
//! * [`JmhExecutor`] — what the rounds run JMH through ([`InvocationEnd`]), and the real one,
//!   [`ProcessJmhExecutor`].
//! * [`EnergyServer`] — the documented local energy interface (line protocol;
//!   [`EnergyServerConfig`], [`EnergyServerEvent`]s carrying [`RunSample`]s, [`WindowEnergy`]).
//! * [`OperationDiskWatch`] — the disks holding each run's file and their energy interval over
//!   its window ([`OperationDisks`]), and per method whether the disk or the CPU dominates
//!   ([`EnergyDominance`]).
//! * [`CacheMode`] — cold/warm page cache without root (`posix_fadvise`, `mincore`).
//! * [`spin_cpu_ms`] — a test helper for the JVM's CPU time (read by
//!   `wattio_energy::attribution::cputime`).
//! * Results and analysis — [`RunRecord`] rows ([`write_results_csv`], [`read_results_csv`],
//!   [`RESULTS_CSV_COLUMNS`]); [`analyse`] into [`CellStats`] and [`Recommendation`]s
//!   ([`Comparison`]); [`write_outputs`] the tables and SVG plots, described by [`Meta`].
//! * [`Libs`], [`find_maven_module`], [`ensure_jar`], [`java_catalog`] — locating and building
//!   the Maven module, reading its catalog.

mod analysis;
mod cache;
mod catalog;
mod disk_table;
mod disks;
mod error;
mod invocation;
mod jmh;
mod maven;
mod procstat;
mod report;
mod results;
mod server;
pub mod study;

pub use analysis::{CellStats, Comparison, Recommendation};
pub use cache::CacheMode;
pub use catalog::{MethodInfo, Op, Size, CATALOG_METHODS};
pub use disks::{OperationDiskWatch, OperationDisks};
pub use error::IoBenchError;
pub use jmh::{InvocationEnd, JmhExecutor, ProcessJmhExecutor};
pub use maven::{ensure_jar, find_maven_module, java_catalog, Libs};
pub use procstat::spin_cpu_ms;
pub use results::{read_results_csv, write_results_csv, RunRecord, RESULTS_CSV_COLUMNS};
pub use server::{EnergyServer, EnergyServerConfig, EnergyServerEvent, RunSample, WindowEnergy};
// What the study and the report both compute from the rows lives with them.
pub use wattio_results::iobench::{provenance_of, EnergyDominance};

use analysis::{cell_stats, recommend};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where and how a study ran (goes into results.json and summary.md).
#[derive(Debug, Clone, Serialize)]
pub struct Meta {
    pub command: String,
    /// The machine the runs were made on, as `wattio_energy::Machine` writes it.
    pub machine: String,
    pub java: String,
    /// `estimated (model: ...)` or `measured (perf)` for the study's energy column.
    pub energy: String,
    pub cache: String,
    pub libs: String,
    pub jvm_args: String,
    pub runs: u32,
    pub started_unix_s: f64,
    pub notes: Vec<String>,
}

/// Everything written for a study.
#[derive(Debug, Serialize)]
pub struct StudyOutput {
    pub meta: Meta,
    pub runs: Vec<RunRecord>,
    pub cells: Vec<CellStats>,
    pub recommendations: Vec<Recommendation>,
}

/// Computes statistics and recommendations.
pub fn analyse(meta: Meta, runs: Vec<RunRecord>) -> StudyOutput {
    let cells = cell_stats(&runs);
    let prov = provenance_of(&runs);
    let recommendations = Op::EVERY
        .iter()
        .filter_map(|&op| recommend(&runs, op, &prov))
        .collect();
    StudyOutput {
        meta,
        runs,
        cells,
        recommendations,
    }
}

/// Files written by [`write_outputs`].
#[derive(Debug, Clone)]
pub struct Written {
    pub csv: PathBuf,
    pub json: PathBuf,
    pub summary: PathBuf,
    pub plots: Vec<PathBuf>,
}

/// Writes results.csv, results.json, summary.md and SVG plots into `dir`.
pub fn write_outputs(out: &StudyOutput, dir: &Path) -> Result<Written, IoBenchError> {
    std::fs::create_dir_all(dir)
        .map_err(IoBenchError::io(format!("creating {}", dir.display())))?;
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).map_err(IoBenchError::io(format!("writing {}", p.display())))
    };
    let csv = dir.join("results.csv");
    results::write_results_csv(&csv, &out.runs)?;
    let json = dir.join("results.json");
    let text = serde_json::to_string_pretty(out).map_err(|e| IoBenchError::Io {
        what: format!("writing {}", json.display()),
        err: e.into(),
    })?;
    write(&json, &text)?;
    let prov = provenance_of(&out.runs);
    let mut plots = vec![];
    for op in Op::EVERY {
        if let Some(svg) = report::ranking_svg(&out.cells, op, &prov) {
            let p = dir.join(format!("ranking-{op}.svg"));
            write(&p, &svg)?;
            plots.push(p);
        }
    }
    for op in Op::EVERY {
        if let Some(svg) = report::box_svg(&out.runs, op, &prov) {
            let p = dir.join(format!("box-{op}.svg"));
            write(&p, &svg)?;
            plots.push(p);
        }
    }
    if let Some(svg) = report::buffer_svg(&out.cells, &prov) {
        let p = dir.join("buffer-sweep.svg");
        write(&p, &svg)?;
        plots.push(p);
    }
    let summary = dir.join("summary.md");
    write(&summary, &summary_markdown(out))?;
    Ok(Written {
        csv,
        json,
        summary,
        plots,
    })
}

/// The whole report as markdown: provenance, recommendations, rankings, tables, buffer curve.
pub fn summary_markdown(out: &StudyOutput) -> String {
    let prov = provenance_of(&out.runs);
    let m = &out.meta;
    let mut s = format!(
        "# wattio iobench results\n\nCommand: `{}`\n\nMachine: {}; {}\n\nEnergy: **{}**. Cache: {}. Libraries: {}. Fork JVM options: `{}`. Runs per cell: {}.\n\n",
        m.command, m.machine, m.java, prov, m.cache, m.libs, m.jvm_args, m.runs
    );
    for n in &m.notes {
        s.push_str(&format!("Note: {n}\n\n"));
    }
    s.push_str("## Recommendations\n\n");
    s.push_str(&report::recommendations_text(&out.recommendations));
    s.push('\n');
    for op in Op::EVERY {
        if let Some(t) = report::ranking_table(&out.cells, op, &prov) {
            s.push_str(&format!("## {}\n\n{t}\n", op.title()));
        }
        if let Some(t) = report::paper_table(&out.cells, op, &prov) {
            s.push_str(&t);
            s.push('\n');
        }
        if let Some(t) = disk_table::disk_markdown(&out.runs, op, &prov) {
            s.push_str(&t);
            s.push('\n');
        }
    }
    if let Some(t) = report::flush_table(&out.cells, &prov) {
        s.push_str("## Flushed and unflushed writes\n\n");
        s.push_str(&t);
        s.push('\n');
    }
    if let Some(t) = report::buffer_table(&out.cells, &prov) {
        s.push_str("## Buffer size\n\n");
        s.push_str(&t);
    }
    s
}

/// The short console report: ranking per use case and the recommendation lines.
pub fn console_report(out: &StudyOutput) -> String {
    let prov = provenance_of(&out.runs);
    let mut s = format!("energy: {prov}\n");
    for op in Op::EVERY {
        let v = report::ranking_cells(&out.cells, op);
        if let Some(f) = v.first() {
            s.push_str(&format!(
                "\n{} — {} file, {}, best MB/J first:\n",
                op.title(),
                f.size,
                analysis::runs_label(f.n)
            ));
            s.push_str(&format!(
                "  {:>4}  {:<12} {:>10} {:>12} {:>12}\n",
                "rank", "method", "MB/J", "median J", "median ms"
            ));
            for (i, c) in v.iter().enumerate() {
                s.push_str(&format!(
                    "  {:>4}  {:<12} {:>10} {:>12} {:>12}\n",
                    i + 1,
                    c.method,
                    analysis::sig(c.mb_per_j),
                    analysis::sig(c.energy_median_j),
                    analysis::sig(c.time_median_s * 1e3)
                ));
            }
        }
        if let Some(t) = disk_table::disk_markdown(&out.runs, op, &prov) {
            s.push_str("  the disk beside the CPU (medians):\n");
            for l in t.lines().skip(2) {
                s.push_str(&format!("  {l}\n"));
            }
        }
    }
    if let Some(t) = report::flush_table(&out.cells, &prov) {
        s.push_str("\nwrites, unflushed and flushed:\n");
        for l in t.lines().skip(2) {
            s.push_str(&format!("  {l}\n"));
        }
    }
    if let Some(t) = report::buffer_table(&out.cells, &prov) {
        // The markdown table reads fine on a terminal too; skip its title line.
        s.push_str("\nbuffer sweep, median J per buffer size:\n");
        for l in t.lines().skip(2) {
            s.push_str(&format!("  {l}\n"));
        }
    }
    s.push_str("\nrecommendations:\n");
    s.push_str(&report::recommendations_text(&out.recommendations));
    s
}

/// `java -version`'s first line.
pub fn java_version(java: &str) -> String {
    std::process::Command::new(java)
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "java: unknown".into())
}
