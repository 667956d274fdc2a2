//! wattio-overhead: the measurement-overhead study of the RAPL paper (section V), behind
//! `wattio overhead` — plan, schedule, runner, rows, and their analysis into the paper's
//! appendix tables.
//!
//! * **Load runs**: a fixed amount of work (a `stress-ng` method or the user's command)
//!   is timed with no recorder ("off") and with `wattio record` sampling at each
//!   frequency, for each mechanism. Repetitions are spread over time: each combination
//!   gets `reps_per_visit` consecutive runs, then the next combination, and the whole
//!   cycle is repeated `rounds` times (the paper's Figure 6).
//! * **Idle runs**: the same recorder around a sleep; what is measured is the machine's
//!   busy CPU time (`/proc/stat`), the recorder's own CPU time (`wait4` rusage; both read by
//!   `wattio_energy::attribution::cputime`), the model-estimated power from those, and
//!   C-state residency where `/sys/devices/system/cpu/cpu*/cpuidle` exists.
//!
//! The rows are `wattio-results`' ([`LoadRun`], [`IdleRun`]), the schemas the report reads
//! through. The runner writes them as it goes through `wattio-runner` (result logs, resume, process
//! groups: what every study shares). The analysis (outliers, Wilcoxon, Holm, Hodges–Lehmann)
//! is `wattio-results`' too, re-exported here ([`analyze_load`], [`analyze_idle_with`]), so the
//! report draws it without this crate; [`analyze_idle`] gives it the recorder's attributed share
//! by the meter's attribution, and the table writers turn it into the appendix-shaped tables.
//! `wattio report` reads the same rows and draws them itself.

mod analysis;

mod executor;
mod plan;
mod record;
mod runner;
mod summary;

pub use analysis::{
    analyze_idle, idle_table_markdown, idle_tests_csv, time_table_markdown, time_tests_csv,
};
pub use executor::{
    cstate_times, scratch_dir, IdleReadings, Measured, OverheadExecutor, ProcessOverheadExecutor,
    RunBody, RunSpec,
};
pub use plan::{default_workloads, OverheadPlan, RunOrder, ScheduledRun, Visit, Workload};
pub use record::{RecordCommand, RecorderStats};
// The rows live with the other result schemas, which the report reads through.
pub use runner::{OverheadRunner, OverheadRuns, WarmUp};
pub use summary::{write_summary, StudyCommand};
pub use wattio_results::{
    idle_runs_from_csv, load_runs_from_csv, IdleRun, LoadRun, IDLE_COLUMNS, IDLE_OPTIONAL_COLUMNS,
    LOAD_COLUMNS, OFF,
};
// So do the statistics over them, which the report draws too.
pub use wattio_results::{analyze_idle_with, analyze_load, fmt_p, IdleTest, TimeTest};

/// Errors of the overhead study, each naming the fix.
#[derive(Debug, thiserror::Error)]
pub enum OverheadError {
    #[error("cannot start {cmd:?}: {source}; is it installed? (stress-ng: `make deps` or apt-get install stress-ng)")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("workload {cmd:?} failed with exit status {status}; run it by hand to see why")]
    WorkloadFailed { cmd: String, status: String },
    #[error("`wattio record --source {mechanism} --freq {freq}` exited early: {stderr}")]
    RecorderDied {
        mechanism: String,
        freq: f64,
        stderr: String,
    },
    #[error(
        "`wattio record` wrote no header within 10 s (mechanism {0}); is the machine overloaded?"
    )]
    RecorderSlow(String),
    #[error("{file} row with seq {seq} is not run {seq} of this plan ({why}): the directory holds another study's runs; start a new study with another output directory")]
    NotThisPlan {
        file: &'static str,
        seq: usize,
        why: String,
    },
    /// The study was cancelled (the runner turns this into `StudyEnd::Interrupted`).
    #[error("cancelled")]
    Cancelled,
    #[error(transparent)]
    Study(#[from] wattio_runner::StudyError),
    #[error(transparent)]
    Log(#[from] wattio_runner::LogError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
