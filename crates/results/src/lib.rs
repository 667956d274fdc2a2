//! # wattio-results
//!
//! The rows and summaries wattio's producers write to result files, and how they are read back:
//! one small crate that the producers write through and `wattio report` reads through, so the
//! report depends on the schemas and not on the producers. Only serde, serde_json, csv and
//! `wattio-stats` (for the analyses the producers and the report share): no measurement, no I/O
//! beyond the bytes given.
//!
//! * [`row_from_record`], [`read_rows`] — the one way a CSV row is read back as its type (errors
//!   name the line and the column).
//! * [`StudyManifest`] — a long study's `study.json` (`wattio overhead`, `wattio iobench`).
//! * [`SweepRow`], [`RunResult`] — `wattio cache sweep` rows (`sweep.csv`, [`sweep_csv`]) and
//!   `cache replay --json` results.
//! * [`LoadRun`], [`IdleRun`] — the overhead study's rows (`runs.csv`, `idle.csv`), and the
//!   statistics the study and the report draw from them: [`analyze_load`] ([`TimeTest`]),
//!   [`analyze_idle_with`] ([`IdleTest`]), p-values as the paper prints them ([`fmt_p`]).
//! * [`RunStats`] — `wattio testbed exec --stats`: what one run cost.
//! * [`EnergyInterval`] — an energy that cannot be measured, bounded (a disk's or a NIC's over a
//!   window), as `wattio-devices` works it out and result files carry it.
//! * [`RunRecord`] — `wattio iobench` runs (`results.csv`, `results.json`), with the study's
//!   vocabulary in [`iobench`] (use cases, sizes, library sets) and what the study and the report
//!   both compute from the runs (`iobench::provenance_of`, `iobench::disk_table`).
//! * [`provenance_label`], [`join_provenance_labels`] — the one wording of where an energy
//!   figure comes from (`measured (perf)`, `estimated (model: …)`), which rows that store their
//!   provenance as text label themselves with.
//!
//! * [`ReportedRecordRow`], [`ReportedRun`], [`ReportedSingleRun`], [`ReportedComparison`] —
//!   what the report reads of `wattio record` files and `wattio measure --json` documents of
//!   every version, with their provenance as written ([`ReportedProvenance`]).
//! * [`ReportedTransfer`] — what the report reads of a `wattio transfer --json` summary, with
//!   the [`IntervalLog`] the transfer writes through and the destination disks' wording.
//!
//! * [`Table`] — the one table writer, Markdown and CSV, with one escaping rule each.
//!
//! The producers re-export these at their old paths (`wattio_sim::SweepRow`,
//! `wattio_runner::row_from_record`, …). The bytes each type writes are pinned by
//! `tests/schema_bytes.rs` against files the build before this crate wrote.

mod cache;
mod csv_rows;
mod interval;
pub mod iobench;
mod measure;
mod overhead;
mod provenance;
mod record;
mod runstats;
mod study;
mod table;
mod transfer;

pub use cache::{sweep_csv, RunResult, SweepRow, SWEEP_COLUMNS};
pub use csv_rows::{read_rows, row_from_record};
pub use interval::EnergyInterval;
pub use iobench::{RunRecord, RESULTS_CSV_COLUMNS};
pub use measure::{
    disks_interval_total, ReportedBenchRun, ReportedCommand, ReportedComparison, ReportedDisk,
    ReportedDomainEnergy, ReportedMachine, ReportedPlatform, ReportedProvenance, ReportedRun,
    ReportedSingleRun,
};
pub use overhead::{
    analyze_idle_with, analyze_load, fmt_p, idle_runs_from_csv, load_runs_from_csv, IdleRun,
    IdleTest, LoadRun, TimeTest, IDLE_COLUMNS, IDLE_OPTIONAL_COLUMNS, LOAD_COLUMNS, OFF,
};
pub use provenance::{join_provenance_labels, provenance_label};
pub use record::{ReportedRecordRow, RECORD_CSV_HEADER};
pub use runstats::RunStats;
pub use study::{StudyManifest, MANIFEST_FILE};
pub use table::{markdown_cell, Align, Table};
pub use transfer::{
    dest_disk_figures, dest_disk_name, IntervalLog, ReportedDestDisk, ReportedDestDisks,
    ReportedHostEstimate, ReportedTransfer, ReportedTransferEnergy,
};
