//! [`IoBenchError`]: what the study's public functions return.

use std::io;
use std::path::PathBuf;

/// Everything that stops the Java I/O study. Each message is one line that names the problem
/// and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum IoBenchError {
    #[error("--runs must be at least 1")]
    NoRuns,
    #[error("nothing to run: give at least one size and one use case")]
    NothingSelected,
    #[error("unknown method '{name}' for the selected use cases: choose from {choices}")]
    UnknownMethod { name: String, choices: String },
    #[error("nothing to run: no selected method belongs to the selected use cases")]
    NoMethodInUseCases,
    /// `--iobench-dir` names a directory without a `pom.xml`.
    #[error("{0} has no pom.xml: pass the wattio checkout's iobench/ directory")]
    NoPom(PathBuf),
    /// `WATTIO_IOBENCH_DIR` names a directory without a `pom.xml`.
    #[error("WATTIO_IOBENCH_DIR={0} has no pom.xml: point it at the checkout's iobench/")]
    NoPomInEnv(PathBuf),
    #[error("cannot find the iobench Maven module (iobench/pom.xml): run from the wattio checkout or pass --iobench-dir")]
    NoModule,
    #[error("mvn not found: install Maven 3 and a JDK 17 (Debian: apt-get install maven openjdk-17-jdk-headless)")]
    NoMaven,
    /// `output`: the last lines Maven printed.
    #[error("building iobench with Maven failed ({status}): {output}")]
    MavenFailed { status: String, output: String },
    #[error("Maven succeeded but {0} is missing: check iobench/pom.xml's shade finalName")]
    NoJar(PathBuf),
    /// The `java` launcher (`--java`) is not there.
    #[error("'{0}' not found: install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless) or pass --java")]
    NoJava(String),
    /// A Java helper of the module (the file generator, the catalog) failed; `output` is the
    /// end of what it printed.
    #[error("{what} failed: {output}")]
    JavaFailed { what: &'static str, output: String },
    /// There is not room for the input files (`need_gb` without the 1 GB margin).
    #[error("not enough free disk in {dir} for sizes {sizes}: need {need_gb:.1} GB (+1 GB margin), have {free_gb:.1} GB: free space, drop a size, or pass --data-dir on a bigger disk")]
    NoRoom {
        dir: PathBuf,
        sizes: String,
        need_gb: f64,
        free_gb: f64,
    },
    /// A run's output check failed (`run`: `op/method on size (buffer B)`; `check`: `got HASH
    /// (N bytes), expected HASH`).
    #[error("{run} produced a wrong output: {check}: either the method does not do the study's work or the input changed (delete {sums} to regenerate the files); see {jmh_log}")]
    WrongOutput {
        run: String,
        check: String,
        sums: PathBuf,
        jmh_log: PathBuf,
    },
    /// JMH ran a cell the round did not ask for.
    #[error("JMH ran {run}, which {round} did not ask for (see {jmh_log}): is the jar in the output directory's jmh/ from another version?")]
    UnaskedRun {
        run: String,
        round: String,
        jmh_log: PathBuf,
    },
    /// JMH failed, or exited before every run of its invocation was made.
    #[error("{round}: JMH exited with {status} after {got} of {expected} runs: {failure} (full output in {jmh_log})")]
    JmhExited {
        round: String,
        status: String,
        got: usize,
        expected: usize,
        failure: String,
        jmh_log: PathBuf,
    },
    /// A benchmark JVM broke the energy socket's protocol, or a window could not be measured.
    #[error("energy socket: {errors} (JMH output in {jmh_log})")]
    EnergySocket { errors: String, jmh_log: PathBuf },
    /// A row kept from an earlier attempt that this plan does not have room for (`why`: "is
    /// not in this plan", "has more than the plan's N runs").
    #[error("{file} row {row}: {run} {why}: the directory holds another study's runs; start a new study with another -o")]
    NotThisPlan {
        file: PathBuf,
        row: usize,
        run: String,
        why: String,
    },
    #[error("{file} row {row}: not an iobench results row: {why}")]
    NotAResultsRow {
        file: PathBuf,
        row: usize,
        why: String,
    },
    /// Another I/O error; `what` says what was being done (`creating DIR`, `statvfs DIR`).
    // The io::Error is in the message, not a `source`, so chained printing does not repeat it.
    #[error("{what}: {err}")]
    Io { what: String, err: io::Error },
    #[error(transparent)]
    Write(#[from] wattio_files::WriteError),
    #[error(transparent)]
    Study(#[from] wattio_runner::StudyError),
    #[error(transparent)]
    Log(#[from] wattio_runner::LogError),
}

impl IoBenchError {
    /// An I/O error while doing `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> IoBenchError {
        let what = what.into();
        move |err| IoBenchError::Io { what, err }
    }
}
