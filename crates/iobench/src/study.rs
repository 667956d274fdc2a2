//! Planning and running a study: which (use case, method, size, buffer) cells, in which order,
//! through which JMH invocations ([`plan`]); then [`prepare`] (output directory, jar, input
//! files, energy socket), [`run_round`] for each round (through a [`JmhExecutor`], each run
//! appended to `results.csv` as it arrives, resumable), and [`collect`].

use crate::cache::CacheMode;
use crate::catalog::{self, MethodInfo, Op, Size, DEFAULT_BUFFER, SWEEP_BUFFERS};
use crate::disks::OperationDiskWatch;
pub use crate::invocation::{app_buffer, Cell, Invocation};
use crate::jmh::{InvocationEnd, JmhExecutor, ProcessJmhExecutor};
use crate::maven::{self, Libs};
use crate::results::RunRecord;
use crate::server::{EnergyServer, EnergyServerConfig, EnergyServerEvent, RunSample};
use crate::IoBenchError;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use wattio_energy::{attribution, ModelParams, SysRoot};
use wattio_meter::Meter;
use wattio_progress::{Cancel, Eta, Sink, StudyProgress};
use wattio_runner::{mark_complete, open_study_dir, CsvLog, StudyEnd, StudyManifest};

/// What to run.
#[derive(Debug, Clone)]
pub struct StudyConfig {
    pub sizes: Vec<Size>,
    pub ops: Vec<Op>,
    /// Only these methods (names apply to every selected use case that has them).
    pub methods: Option<Vec<String>>,
    /// Fresh JVMs per cell.
    pub runs: u32,
    pub cache: CacheMode,
    pub buffer_sweep: bool,
    pub libs: Libs,
    pub out_dir: PathBuf,
    pub data_dir: PathBuf,
    pub module_dir: Option<PathBuf>,
    pub java: String,
    /// Where the machine the meter measures is read (`WATTIO_ROOT`, the meter's root): its online
    /// CPUs are the vCPUs of the model and the `n` of the JVM's attributed share.
    pub root: SysRoot,
    /// Heap of the benchmark JVM (-Xms = -Xmx), e.g. "2g".
    pub heap: String,
    /// Continue the interrupted study in `out_dir`: its runs are kept, the rest is run.
    pub resume: bool,
    /// The command line, kept in `study.json` (shown when a resume is refused).
    pub command: String,
}

/// The plan: cells and the JMH invocations that make up one round.
#[derive(Debug, Clone)]
pub struct StudyPlan {
    pub cells: Vec<Cell>,
    pub round: Vec<Invocation>,
    /// Things left out, and why (printed).
    pub notes: Vec<String>,
}

/// readall holds the file in the heap: sizes above medium are left out (as in the paper).
pub const READALL_MAX: Size = Size::Medium;

/// The methods of `op` to run: `--methods` filters the micro-benchmarks; a program runs all of
/// its methods (its comparison is the point).
fn selected(cfg: &StudyConfig, op: Op) -> Vec<&'static MethodInfo> {
    catalog::methods_of(op)
        .filter(|m| {
            op.is_app()
                || cfg
                    .methods
                    .as_ref()
                    .is_none_or(|l| l.iter().any(|n| n == m.name))
        })
        .collect()
}

/// The largest size the programs run on (their inputs follow Table I up to medium).
pub const APPS_MAX: Size = Size::Medium;

/// Expands the configuration into cells and the invocations of one round.
pub fn plan(cfg: &StudyConfig) -> Result<StudyPlan, IoBenchError> {
    if cfg.runs == 0 {
        return Err(IoBenchError::NoRuns);
    }
    if cfg.sizes.is_empty() || cfg.ops.is_empty() {
        return Err(IoBenchError::NothingSelected);
    }
    if let Some(list) = &cfg.methods {
        for n in list {
            if !cfg.ops.iter().any(|&op| catalog::find(op, n).is_some()) {
                let names: Vec<String> = cfg
                    .ops
                    .iter()
                    .flat_map(|&op| {
                        catalog::methods_of(op).map(move |m| format!("{op}:{}", m.name))
                    })
                    .collect();
                return Err(IoBenchError::UnknownMethod {
                    name: n.clone(),
                    choices: names.join(", "),
                });
            }
        }
    }
    let mut notes = vec![];
    let mut round = vec![];
    let mut big: Vec<(Op, &'static str)> = vec![];
    let mut readall: Vec<(Op, &'static str)> = vec![];
    for &op in cfg.ops.iter().filter(|o| o.is_app()) {
        let sizes: Vec<Size> = cfg
            .sizes
            .iter()
            .copied()
            .filter(|&s| s <= APPS_MAX)
            .collect();
        if sizes.len() < cfg.sizes.len() {
            notes.push(format!("{op} runs on sizes up to {APPS_MAX} only"));
        }
        if !sizes.is_empty() {
            round.push(Invocation {
                benchmarks: vec![(op, op.as_str())],
                sizes,
                buffers: vec![],
                app_methods: selected(cfg, op).iter().map(|m| m.name).collect(),
            });
        }
    }
    for &op in cfg.ops.iter().filter(|o| !o.is_app()) {
        for m in selected(cfg, op) {
            if op == Op::Readall {
                readall.push((op, m.name));
            } else {
                big.push((op, m.name));
            }
        }
    }
    if !big.is_empty() {
        round.push(Invocation {
            benchmarks: big,
            sizes: cfg.sizes.clone(),
            buffers: vec![DEFAULT_BUFFER],
            app_methods: vec![],
        });
    }
    let ra_sizes: Vec<Size> = cfg
        .sizes
        .iter()
        .copied()
        .filter(|&s| s <= READALL_MAX)
        .collect();
    if !readall.is_empty() {
        if ra_sizes.len() < cfg.sizes.len() {
            notes.push(format!(
                "readall runs on sizes up to {READALL_MAX} only (the whole file is held in the heap, as in the paper)"
            ));
        }
        if !ra_sizes.is_empty() {
            round.push(Invocation {
                benchmarks: readall,
                sizes: ra_sizes,
                buffers: vec![DEFAULT_BUFFER],
                app_methods: vec![],
            });
        }
    }
    if cfg.buffer_sweep {
        let sweep: Vec<(Op, &'static str)> = cfg
            .ops
            .iter()
            .flat_map(|&op| selected(cfg, op))
            .filter(|m| m.buffered)
            .map(|m| (m.op, m.name))
            .collect();
        if sweep.is_empty() {
            notes.push("--buffer-sweep: none of the selected methods takes a buffer size".into());
        } else {
            round.push(Invocation {
                benchmarks: sweep,
                sizes: cfg.sizes.clone(),
                buffers: SWEEP_BUFFERS
                    .iter()
                    .copied()
                    .filter(|&b| b != DEFAULT_BUFFER)
                    .collect(),
                app_methods: vec![],
            });
        }
    }
    let cells: Vec<Cell> = round.iter().flat_map(Invocation::cells).collect();
    if cells.is_empty() {
        return Err(IoBenchError::NoMethodInUseCases);
    }
    Ok(StudyPlan {
        cells,
        round,
        notes,
    })
}

/// Free bytes on the filesystem holding `dir` (or its nearest existing parent).
pub fn free_bytes(dir: &Path) -> Result<u64, IoBenchError> {
    let mut d = dir.to_path_buf();
    while !d.exists() {
        if !d.pop() {
            break;
        }
    }
    let c =
        std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).map_err(|e| IoBenchError::Io {
            what: "path with a NUL byte".into(),
            err: e.into(),
        })?;
    // SAFETY: statvfs fills the zeroed struct; c is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(IoBenchError::io(format!("statvfs {}", d.display()))(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

/// Bytes the data directory still needs for `sizes` (text + binary per size not yet there, plus
/// room for the largest written file).
pub fn disk_needed(data_dir: &Path, sizes: &[Size], writes: bool) -> u64 {
    let mut need = 0;
    for &s in sizes {
        let have = |n: String| {
            std::fs::metadata(data_dir.join(n))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        need += s.bytes().saturating_sub(have(format!("text-{s}.txt")));
        need += s.bytes().saturating_sub(have(format!("bin-{s}.bin")));
    }
    if writes {
        need += sizes.iter().map(|s| s.bytes()).max().unwrap_or(0);
    }
    need
}

/// Everything a finished study produced.
#[derive(Debug, Clone)]
pub struct StudyRun {
    /// Every run, those of an interrupted attempt (`--resume`) included.
    pub records: Vec<RunRecord>,
    pub notes: Vec<String>,
    pub jvm_args: String,
    pub jar: PathBuf,
}

/// The JVM options of the benchmark forks: fixed heap, compiler threads that live as long as the
/// JVM (so schedstat CPU time is not lost with an exiting thread). Nothing else.
pub fn fork_jvm_args(heap: &str) -> String {
    format!("-Xms{heap} -Xmx{heap} -XX:-UseDynamicNumberOfCompilerThreads")
}

/// The study's name in `study.json`.
const STUDY: &str = "wattio iobench";

/// A run as messages name it: `op/method on size (buffer B)`.
fn run_label(op: Op, method: &str, size: Size, buffer: u32) -> String {
    format!("{op}/{method} on {size} (buffer {buffer})")
}

/// Where a run's row belongs: its cell. Programs report no buffer of their own (0); their
/// cell has the chunk size they use ([`app_buffer`]).
fn cell_of(op: Op, method: &str, size: Size, buffer: u32) -> Cell {
    Cell {
        op,
        method: method.to_string(),
        size,
        buffer: if op.is_app() { app_buffer(op) } else { buffer },
    }
}

/// `study.json` for `cfg` measured with energy labelled `energy`: what a resume must match.
pub fn manifest(cfg: &StudyConfig, plan: &StudyPlan, energy: &str) -> StudyManifest {
    StudyManifest {
        study: STUDY.into(),
        command: cfg.command.clone(),
        plan: serde_json::json!({
            "sizes": cfg.sizes,
            "ops": cfg.ops,
            "methods": cfg.methods,
            "runs": cfg.runs,
            "cache": cfg.cache,
            "buffer_sweep": cfg.buffer_sweep,
            "libs": cfg.libs,
            "heap": cfg.heap,
            "energy": energy,
        }),
        total_runs: plan.cells.len() * cfg.runs as usize,
        complete: false,
    }
}

/// The study's runs so far, written as they come: `results.csv`, a row per run appended as
/// it finishes, and the runs per cell that number the next one.
pub struct Collector {
    log: CsvLog<RunRecord>,
    records: Vec<RunRecord>,
    counts: BTreeMap<Cell, u32>,
    libs: Libs,
    /// Runs kept from an earlier attempt.
    resumed: usize,
    total: usize,
    /// Seconds per run by cell, JVM start to the run's end as seen here.
    eta: Eta<Cell>,
}

impl Collector {
    /// A collector over `log` holding the `kept` runs of an earlier attempt (checked against
    /// `plan`: every row must be one of its cells, at most `runs` times).
    pub fn new(
        log: CsvLog<RunRecord>,
        kept: Vec<RunRecord>,
        plan: &StudyPlan,
        runs: u32,
        libs: Libs,
    ) -> Result<Collector, IoBenchError> {
        let mut counts: BTreeMap<Cell, u32> = plan.cells.iter().map(|c| (c.clone(), 0)).collect();
        for (i, r) in kept.iter().enumerate() {
            let cell = cell_of(r.op, &r.method, r.size, r.buffer);
            let why = match counts.get_mut(&cell) {
                Some(n) if *n < runs => {
                    *n += 1;
                    continue;
                }
                Some(_) => format!("has more than the plan's {runs} runs"),
                None => "is not in this plan".to_string(),
            };
            return Err(IoBenchError::NotThisPlan {
                file: log.path().to_path_buf(),
                row: i + 2,
                run: run_label(r.op, &r.method, r.size, r.buffer),
                why,
            });
        }
        Ok(Collector {
            log,
            resumed: kept.len(),
            records: kept,
            counts,
            libs,
            total: plan.cells.len() * runs as usize,
            eta: Eta::new(),
        })
    }

    /// Runs kept so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no run is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Whether `cell` has had the run of round `round` (0-based).
    fn has_run(&self, cell: &Cell, round: u32) -> bool {
        self.counts.get(cell).is_some_and(|&n| n > round)
    }

    fn progress(&self, label: String, runs: u32) -> StudyProgress {
        let left = self
            .counts
            .iter()
            .flat_map(|(c, &n)| std::iter::repeat_n(c, runs.saturating_sub(n) as usize));
        StudyProgress {
            done: self.records.len(),
            total: self.total,
            resumed: self.resumed,
            label,
            eta: self.eta.remaining(left),
        }
    }

    /// Keeps one run: numbered within its cell, appended to `results.csv`.
    fn keep(&mut self, cell: Cell, s: &RunSample, seconds: f64) -> Result<(), IoBenchError> {
        let n = self.counts.entry(cell.clone()).or_insert(0);
        *n += 1;
        let record = crate::results::record_of_sample(s, *n, self.libs);
        self.log.append(&record)?;
        self.records.push(record);
        self.eta.record(cell, seconds);
        Ok(())
    }

    /// Every run kept.
    pub fn into_records(self) -> Vec<RunRecord> {
        self.records
    }
}

/// What [`run_round`] needs to know besides the plan.
pub struct RoundContext<'a> {
    /// Rounds in the study (for labels and the ETA).
    pub runs: u32,
    /// The input files (named when a run's output check fails).
    pub data_dir: &'a Path,
}

/// Runs round `round` (0-based) of `plan` through `exec`: every invocation (in reverse order
/// on odd rounds, since JMH fixes the order inside one), less the cells that already have
/// this round's run. Each run is kept as it arrives. Returns `false` when cancelled.
pub fn run_round(
    round: u32,
    plan: &StudyPlan,
    ctx: &RoundContext<'_>,
    exec: &mut dyn JmhExecutor,
    collector: &mut Collector,
    progress: &Sink<StudyProgress>,
    cancel: &Cancel,
) -> Result<bool, IoBenchError> {
    let order: Vec<&Invocation> = if round % 2 == 1 {
        plan.round.iter().rev().collect()
    } else {
        plan.round.iter().collect()
    };
    let shown_round = format!("round {}/{}", round + 1, ctx.runs);
    for whole in order {
        for inv in whole.remaining(|c| collector.has_run(c, round)) {
            if cancel.is_set() {
                return Ok(false);
            }
            let expected = inv.cells();
            progress.tell(&collector.progress(
                format!("{shown_round}: starting JMH ({} runs)", expected.len()),
                ctx.runs,
            ));
            let log_path = exec.log_path().to_path_buf();
            let mut got = 0usize;
            let mut errors: Vec<String> = vec![];
            let mut last = Instant::now();
            let end = exec.run_invocation(round + 1, &inv, cancel, &mut |ev| {
                let s = match ev {
                    EnergyServerEvent::Sample(s) => s,
                    EnergyServerEvent::Error(e) => {
                        errors.push(e);
                        return Ok(());
                    }
                };
                let run = || run_label(s.op, &s.method, s.size, s.buffer);
                if !s.ok {
                    return Err(IoBenchError::WrongOutput {
                        run: run(),
                        check: format!("got {} ({} bytes), expected {}", s.got, s.bytes, s.want),
                        sums: ctx.data_dir.join(format!("{}.sums", s.size)),
                        jmh_log: log_path.clone(),
                    });
                }
                let cell = cell_of(s.op, &s.method, s.size, s.buffer);
                if !expected.contains(&cell) || collector.has_run(&cell, round) {
                    return Err(IoBenchError::UnaskedRun {
                        run: run(),
                        round: shown_round.clone(),
                        jmh_log: log_path.clone(),
                    });
                }
                let now = Instant::now();
                collector.keep(cell, &s, now.duration_since(last).as_secs_f64())?;
                last = now;
                got += 1;
                let label = format!("{shown_round}: {}/{} {}", s.op, s.method, s.size);
                progress.tell(&collector.progress(label, ctx.runs));
                Ok(())
            })?;
            if !errors.is_empty() {
                return Err(IoBenchError::EnergySocket {
                    errors: errors.join("; "),
                    jmh_log: log_path,
                });
            }
            match end {
                InvocationEnd::Cancelled => return Ok(false),
                InvocationEnd::Exited {
                    success,
                    status,
                    failure,
                } => {
                    if !success || got != expected.len() {
                        return Err(IoBenchError::JmhExited {
                            round: shown_round,
                            status,
                            got,
                            expected: expected.len(),
                            failure,
                            jmh_log: log_path,
                        });
                    }
                }
            }
        }
    }
    Ok(true)
}

/// A study ready to run its rounds: the plan, the files, the energy socket, the result file.
pub struct Prepared {
    pub plan: StudyPlan,
    pub executor: ProcessJmhExecutor,
    pub collector: Collector,
}

/// Prepares a study: checks the output directory (a fresh start, or a resume with the same
/// plan), builds the jar if needed and copies it into the study (a resume keeps its copy),
/// generates the input files, starts the energy socket, opens `results.csv`.
pub fn prepare(
    cfg: &StudyConfig,
    meter: Arc<Meter>,
    model: ModelParams,
    log: &Sink<str>,
) -> Result<Prepared, IoBenchError> {
    let plan = plan(cfg)?;
    let m = manifest(cfg, &plan, &meter.provenance().label());
    open_study_dir(&cfg.out_dir, &m, cfg.resume, &["results.csv"])?;
    for n in &plan.notes {
        log.tell(n);
    }
    let scratch = cfg.out_dir.join("jmh");
    std::fs::create_dir_all(&scratch)
        .map_err(IoBenchError::io(format!("creating {}", scratch.display())))?;
    let private_jar = scratch.join("benchmarks.jar");
    // Run a private copy: a rebuild of the module during a long study must not change its
    // code, nor may one between an interruption and the resume.
    if !(cfg.resume && private_jar.is_file()) {
        let module = maven::find_maven_module(cfg.module_dir.as_deref())?;
        let jar = maven::ensure_jar(&module, cfg.libs, log)?;
        std::fs::copy(&jar, &private_jar).map_err(IoBenchError::io(format!(
            "copying {} to {}",
            jar.display(),
            private_jar.display()
        )))?;
    }
    let jar = std::fs::canonicalize(&private_jar).map_err(IoBenchError::io(format!(
        "finding {}",
        private_jar.display()
    )))?;
    std::fs::create_dir_all(&cfg.data_dir).map_err(IoBenchError::io(format!(
        "creating {}",
        cfg.data_dir.display()
    )))?;
    let data_dir = std::fs::canonicalize(&cfg.data_dir).map_err(IoBenchError::io(format!(
        "finding {}",
        cfg.data_dir.display()
    )))?;
    let sizes: Vec<Size> = {
        let mut s: Vec<Size> = plan.cells.iter().map(|c| c.size).collect();
        s.sort();
        s.dedup();
        s
    };
    let need = disk_needed(&data_dir, &sizes, cfg.ops.iter().any(|o| o.writes()));
    let free = free_bytes(&data_dir)?;
    if need + (1 << 30) > free {
        return Err(IoBenchError::NoRoom {
            dir: data_dir,
            sizes: sizes
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(","),
            need_gb: need as f64 / 1e9,
            free_gb: free as f64 / 1e9,
        });
    }
    log.tell(&format!(
        "preparing files ({}) in {}",
        sizes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        data_dir.display()
    ));
    let names: Vec<&str> = sizes.iter().map(|s| s.as_str()).collect();
    maven::generate(&cfg.java, &jar, &data_dir, &names)?;

    let disks = match OperationDiskWatch::open(&cfg.root) {
        Ok(w) => Some(w),
        Err(why) => {
            log.tell(&format!("no disk energy intervals: {why}"));
            None
        }
    };
    let server = EnergyServer::start(meter, server_config(cfg, model, disks))?;
    let log_path = cfg.out_dir.join("jmh.log");
    let log_err = || IoBenchError::io(format!("opening {}", log_path.display()));
    let jmh_log = OpenOptions::new()
        .create(true)
        .append(true)
        .truncate(false)
        .open(&log_path)
        .map_err(log_err())?;
    if !cfg.resume {
        jmh_log.set_len(0).map_err(log_err())?;
    }
    let results = cfg.out_dir.join("results.csv");
    let (csv_log, kept) = if cfg.resume {
        CsvLog::resume(&results)?
    } else {
        (CsvLog::create(&results)?, vec![])
    };
    let collector = Collector::new(csv_log, kept, &plan, cfg.runs, cfg.libs)?;
    Ok(Prepared {
        executor: ProcessJmhExecutor {
            java: cfg.java.clone(),
            jar,
            jvm_args: fork_jvm_args(&cfg.heap),
            data_dir,
            scratch,
            server,
            jmh_log,
            log_path,
        },
        plan,
        collector,
    })
}

/// How the energy socket turns the JVM's windows into energy: the model, and the machine's
/// online CPUs under `cfg.root` (`attribution::machine_cpus`, as the meter's share counts them)
/// for its idle power and for the capacity the JVM's share is taken of.
/// The disks are watched under `cfg.root`, as the meter's counters are.
fn server_config(
    cfg: &StudyConfig,
    model: ModelParams,
    disks: Option<OperationDiskWatch>,
) -> EnergyServerConfig {
    EnergyServerConfig {
        cache: cfg.cache,
        model,
        n_cpus: attribution::machine_cpus(&cfg.root),
        // the live JVM's /proc, whatever WATTIO_ROOT says about the energy counters
        root: SysRoot::new("/"),
        disks,
    }
}

/// The finished study: every run, the notes of its plan, how its JVMs ran. Marks the output
/// directory's study complete.
pub fn collect(p: Prepared, out_dir: &Path) -> Result<StudyRun, IoBenchError> {
    mark_complete(out_dir)?;
    Ok(StudyRun {
        records: p.collector.into_records(),
        notes: p.plan.notes,
        jvm_args: p.executor.jvm_args,
        jar: p.executor.jar,
    })
}

/// Runs the study: [`prepare`], [`run_round`] for every round, [`collect`]. `progress` is told
/// whenever a JMH invocation starts or a run finishes. When `cancel` is set, JMH and its
/// forks are ended and the study returns [`StudyEnd::Interrupted`] with the runs kept in
/// `results.csv`; `--resume` continues it.
pub fn run(
    cfg: &StudyConfig,
    meter: Arc<Meter>,
    model: ModelParams,
    log: &Sink<str>,
    progress: &Sink<StudyProgress>,
    cancel: &Cancel,
) -> Result<StudyEnd<StudyRun>, IoBenchError> {
    let mut p = prepare(cfg, meter, model, log)?;
    let data_dir = p.executor.data_dir.clone();
    let ctx = RoundContext {
        runs: cfg.runs,
        data_dir: &data_dir,
    };
    for round in 0..cfg.runs {
        let finished = run_round(
            round,
            &p.plan,
            &ctx,
            &mut p.executor,
            &mut p.collector,
            progress,
            cancel,
        )?;
        if !finished {
            return Ok(StudyEnd::Interrupted {
                kept: p.collector.len(),
                total: p.plan.cells.len() * cfg.runs as usize,
            });
        }
    }
    collect(p, &cfg.out_dir).map(StudyEnd::Complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn cfg() -> StudyConfig {
        StudyConfig {
            sizes: vec![Size::Tiny, Size::Small, Size::Medlarge],
            ops: vec![Op::Read, Op::Readall, Op::Seek, Op::Write],
            methods: None,
            runs: 3,
            cache: CacheMode::Warm,
            buffer_sweep: false,
            libs: Libs::Paper,
            out_dir: "o".into(),
            data_dir: "d".into(),
            module_dir: None,
            java: "java".into(),
            root: SysRoot::new("/"),
            heap: "1g".into(),
            resume: false,
            command: "wattio iobench".into(),
        }
    }

    #[test]
    fn full_plan_counts() {
        let p = plan(&cfg()).unwrap();
        // 23 non-readall methods × 3 sizes + 5 readall × 2 sizes (medlarge left out).
        assert_eq!(p.cells.len(), 23 * 3 + 5 * 2);
        assert_eq!(
            p.round.iter().map(|i| i.forks()).sum::<usize>(),
            p.cells.len()
        );
        assert!(p.notes.iter().any(|n| n.contains("readall")));
    }

    #[test]
    fn sweep_and_filters() {
        let mut c = cfg();
        c.ops = vec![Op::Read];
        c.sizes = vec![Size::Tiny];
        c.methods = Some(vec!["channel".into(), "scanner".into()]);
        c.buffer_sweep = true;
        let p = plan(&c).unwrap();
        // channel: 8 KiB + 6 other buffers; scanner: 8 KiB only.
        assert_eq!(p.cells.len(), 1 + 1 + 6);
        assert_eq!(p.round.iter().map(|i| i.forks()).sum::<usize>(), 8);
        assert_eq!(
            p.round[0].includes()[0],
            "^io\\.wattio\\.iobench\\.ReadBench\\.channel$"
        );
        c.methods = Some(vec!["fsync".into()]);
        let e = plan(&c).unwrap_err().to_string();
        assert!(
            e.contains("unknown method 'fsync'") && e.contains("read:channel"),
            "{e}"
        );
        c.methods = None;
        c.runs = 0;
        assert!(plan(&c).is_err());
    }

    #[test]
    fn programs_plan() {
        let mut c = cfg();
        c.ops = vec![Op::Zip4j, Op::Fasta];
        c.methods = Some(vec!["channel".into()]);
        let p = plan(&c).unwrap();
        // Two programs × 5 methods × 2 sizes (medlarge left out, with a note).
        assert_eq!(p.cells.len(), 2 * 5 * 2);
        assert_eq!(
            p.round.iter().map(|i| i.forks()).sum::<usize>(),
            p.cells.len()
        );
        assert_eq!(
            p.round[0].includes(),
            vec!["^io\\.wattio\\.iobench\\.AppsBench\\.zip4j$".to_string()]
        );
        assert_eq!(
            p.round[0].params(),
            vec!["-p", "method=iostream,biostream,niof,channel,omchannel"]
        );
        assert!(p
            .cells
            .iter()
            .all(|c| c.buffer == if c.op == Op::Zip4j { 4096 } else { 8192 }));
        assert!(p.notes.iter().any(|n| n.contains("zip4j")));
    }

    #[test]
    fn the_energy_socket_counts_the_online_cpus_under_the_meters_root() {
        let d = tempfile::tempdir().unwrap();
        // Seven CPUs, a count no test machine has.
        wattio_fixture::online_cpus(d.path(), 7).unwrap();
        let mut c = cfg();
        c.root = SysRoot::new(d.path());
        let server = server_config(&c, ModelParams::default(), None);
        assert_eq!(server.n_cpus, 7);
        // The JVM's CPU time is still read from the live /proc.
        assert_eq!(server.root.path("/proc"), Path::new("/proc"));
    }

    #[test]
    fn disk_check_counts_missing_files() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(disk_needed(d.path(), &[Size::Tiny], false), 200_000);
        std::fs::write(d.path().join("text-tiny.txt"), vec![0u8; 100_000]).unwrap();
        assert_eq!(disk_needed(d.path(), &[Size::Tiny], true), 200_000);
        assert!(free_bytes(d.path()).unwrap() > 0);
    }
}

#[cfg(test)]
mod round_tests {
    use super::*;
    use crate::server::WindowEnergy;

    fn sample(c: &Cell, ok: bool) -> RunSample {
        RunSample {
            op: c.op,
            method: c.method.clone(),
            size: c.size,
            // Programs report no buffer of their own.
            buffer: if c.op.is_app() { 0 } else { c.buffer },
            pid: 1,
            time_s: 0.01,
            energy: WindowEnergy {
                energy_j: 1.0,
                scope: "process".into(),
                provenance: wattio_energy::Provenance::estimated("m"),
                system_energy_j: 2.0,
                cpu_s: 0.01,
                window_s: 0.02,
                attributed_j: Some(0.5),
                attributed_label: None,
                disk: None,
            },
            bytes: 100_000,
            ok,
            got: "a".into(),
            want: "a".into(),
            cache: Some(CacheMode::Warm),
            resident: Some(1.0),
        }
    }

    /// Plays JMH: one sample per cell of the invocation, in order. `stop_after` total runs it
    /// cancels the study (as a signal would, mid-invocation); `bad` fails one cell's check;
    /// `short` drops the last run of every invocation.
    struct FakeJmh<'c> {
        asked: Vec<Vec<Cell>>,
        runs: usize,
        stop_after: Option<(usize, &'c Cancel)>,
        bad: Option<Cell>,
        short: bool,
        log: PathBuf,
    }

    impl FakeJmh<'_> {
        fn new(log: PathBuf) -> Self {
            FakeJmh {
                asked: vec![],
                runs: 0,
                stop_after: None,
                bad: None,
                short: false,
                log,
            }
        }
    }

    impl JmhExecutor for FakeJmh<'_> {
        fn run_invocation(
            &mut self,
            _round: u32,
            inv: &Invocation,
            cancel: &Cancel,
            on_event: &mut dyn FnMut(EnergyServerEvent) -> Result<(), IoBenchError>,
        ) -> Result<InvocationEnd, IoBenchError> {
            let cells = inv.cells();
            self.asked.push(cells.clone());
            let n = cells.len() - usize::from(self.short);
            for c in &cells[..n] {
                if let Some((k, flag)) = self.stop_after {
                    if self.runs >= k {
                        flag.set();
                    }
                }
                if cancel.is_set() {
                    return Ok(InvocationEnd::Cancelled);
                }
                let ok = self.bad.as_ref() != Some(c);
                on_event(EnergyServerEvent::Sample(Box::new(sample(c, ok))))?;
                self.runs += 1;
            }
            Ok(InvocationEnd::Exited {
                success: true,
                status: "exit status: 0".into(),
                failure: "no output".into(),
            })
        }

        fn log_path(&self) -> &Path {
            &self.log
        }
    }

    fn study_cfg() -> StudyConfig {
        let mut c = super::tests::cfg();
        c.sizes = vec![Size::Tiny, Size::Small];
        c.ops = vec![Op::Read, Op::Seek, Op::Zip4j];
        c.methods = Some(vec!["channel".into(), "scanner".into(), "raf".into()]);
        c.buffer_sweep = true;
        c
    }

    fn run_all(
        p: &StudyPlan,
        runs: u32,
        exec: &mut FakeJmh<'_>,
        col: &mut Collector,
        cancel: &Cancel,
        seen: &mut Vec<(usize, Option<std::time::Duration>)>,
    ) -> Result<bool, IoBenchError> {
        let ctx = RoundContext {
            runs,
            data_dir: Path::new("d"),
        };
        let heard = Arc::new(std::sync::Mutex::new(vec![]));
        let h = Arc::clone(&heard);
        let progress = Sink::new(move |s: &StudyProgress| h.lock().unwrap().push((s.done, s.eta)));
        let mut finished = true;
        for round in 0..runs {
            if !run_round(round, p, &ctx, exec, col, &progress, cancel)? {
                finished = false;
                break;
            }
        }
        seen.extend(heard.lock().unwrap().drain(..));
        Ok(finished)
    }

    fn rows(path: &Path) -> Vec<RunRecord> {
        crate::results::read_results_csv(path).unwrap()
    }

    #[test]
    fn rounds_run_every_cell_once_each_reversed_on_odd_rounds_and_write_as_they_go() {
        let d = tempfile::tempdir().unwrap();
        let c = study_cfg();
        let p = plan(&c).unwrap();
        let csv = d.path().join("results.csv");
        let mut col =
            Collector::new(CsvLog::create(&csv).unwrap(), vec![], &p, c.runs, c.libs).unwrap();
        let mut exec = FakeJmh::new(d.path().join("jmh.log"));
        let cancel = Cancel::new().unwrap();
        let mut seen = vec![];
        assert!(run_all(&p, c.runs, &mut exec, &mut col, &cancel, &mut seen).unwrap());
        let n = p.round.len();
        assert_eq!(exec.asked.len(), n * 3);
        let first: Vec<Vec<Cell>> = p.round.iter().map(Invocation::cells).collect();
        let mut reversed = first.clone();
        reversed.reverse();
        assert_eq!(exec.asked[..n], first[..]);
        assert_eq!(exec.asked[n..2 * n], reversed[..]);
        let on_disk = rows(&csv);
        assert_eq!(on_disk.len(), p.cells.len() * 3);
        assert_eq!(on_disk, col.into_records());
        for cell in &p.cells {
            let mut runs: Vec<u32> = on_disk
                .iter()
                .filter(|r| cell_of(r.op, &r.method, r.size, r.buffer) == *cell)
                .map(|r| r.run)
                .collect();
            runs.sort();
            assert_eq!(runs, [1, 2, 3], "{cell:?}");
        }
        // Programs keep the buffer they report (0); their cell is found all the same.
        assert!(on_disk.iter().any(|r| r.op == Op::Zip4j && r.buffer == 0));
        // The ETA appears once a run is measured and comes down to zero.
        assert_eq!(seen[0], (0, None));
        assert!(seen[1].1.is_some());
        assert_eq!(seen.last().unwrap().1, Some(std::time::Duration::ZERO));
    }

    #[test]
    fn an_interrupted_round_keeps_its_runs_and_a_resume_runs_exactly_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let c = study_cfg();
        let p = plan(&c).unwrap();
        let total = p.cells.len() * 3;
        let csv = d.path().join("results.csv");
        let cancel = Cancel::new().unwrap();
        // Stop inside an invocation of the second round.
        let stop = p.cells.len() + 5;
        let mut col =
            Collector::new(CsvLog::create(&csv).unwrap(), vec![], &p, c.runs, c.libs).unwrap();
        let mut exec = FakeJmh::new(d.path().join("jmh.log"));
        exec.stop_after = Some((stop, &cancel));
        let mut seen = vec![];
        assert!(!run_all(&p, c.runs, &mut exec, &mut col, &cancel, &mut seen).unwrap());
        assert_eq!(col.len(), stop);
        drop(col);
        assert_eq!(rows(&csv).len(), stop, "every finished run is on disk");

        let (log, kept) = CsvLog::resume(&csv).unwrap();
        let mut col = Collector::new(log, kept, &p, c.runs, c.libs).unwrap();
        let fresh = Cancel::new().unwrap();
        let mut exec = FakeJmh::new(d.path().join("jmh.log"));
        let mut seen = vec![];
        assert!(run_all(&p, c.runs, &mut exec, &mut col, &fresh, &mut seen).unwrap());
        let asked: usize = exec.asked.iter().map(Vec::len).sum();
        assert_eq!(asked, total - stop, "only the missing runs were asked for");
        let all = rows(&csv);
        assert_eq!(all.len(), total);
        let mut keys: Vec<(Cell, u32)> = all
            .iter()
            .map(|r| (cell_of(r.op, &r.method, r.size, r.buffer), r.run))
            .collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), total, "no run twice");
        assert_eq!(seen[0].0, stop);
    }

    #[test]
    fn a_partly_run_invocation_is_split_into_exactly_its_missing_cells() {
        let c = study_cfg();
        let p = plan(&c).unwrap();
        for inv in &p.round {
            let cells = inv.cells();
            assert_eq!(cells.len(), inv.forks());
            assert_eq!(inv.remaining(|_| false), vec![inv.clone()]);
            assert!(inv.remaining(|_| true).is_empty());
            // Every other cell done.
            let done: Vec<&Cell> = cells.iter().step_by(2).collect();
            let parts = inv.remaining(|c| done.contains(&c));
            let mut got: Vec<Cell> = parts.iter().flat_map(Invocation::cells).collect();
            let mut want: Vec<Cell> = cells
                .iter()
                .filter(|c| !done.contains(c))
                .cloned()
                .collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{:?}", inv.includes());
            assert_eq!(
                parts.iter().map(Invocation::forks).sum::<usize>(),
                want.len()
            );
        }
    }

    #[test]
    fn failed_checks_short_rounds_and_foreign_rows_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let c = study_cfg();
        let p = plan(&c).unwrap();
        let csv = d.path().join("results.csv");
        let cancel = Cancel::new().unwrap();
        let mut col =
            Collector::new(CsvLog::create(&csv).unwrap(), vec![], &p, c.runs, c.libs).unwrap();
        let mut exec = FakeJmh::new(d.path().join("jmh.log"));
        exec.bad = Some(p.cells[1].clone());
        let e = run_all(&p, c.runs, &mut exec, &mut col, &cancel, &mut vec![])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{}/{}", p.cells[1].op, p.cells[1].method))
                && e.contains("wrong output"),
            "{e}"
        );
        assert_eq!(rows(&csv).len(), 1, "the run before the failure is kept");

        let mut col =
            Collector::new(CsvLog::create(&csv).unwrap(), vec![], &p, c.runs, c.libs).unwrap();
        let mut exec = FakeJmh::new(d.path().join("jmh.log"));
        exec.short = true;
        let e = run_all(&p, c.runs, &mut exec, &mut col, &cancel, &mut vec![])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("round 1/3: JMH exited with") && e.contains("jmh.log"),
            "{e}"
        );

        // Rows of a cell the plan lacks, or too many runs, are not this plan's.
        let mut other = study_cfg();
        other.ops = vec![Op::Read, Op::Seek];
        let small = plan(&other).unwrap();
        let kept = rows(&csv);
        assert!(kept.iter().any(|r| r.op == Op::Zip4j));
        let (log, kept) = CsvLog::resume(&csv).unwrap();
        let e = Collector::new(log, kept, &small, 3, Libs::Paper)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is not in this plan"), "{e}");
        let (log, kept) = CsvLog::resume(&csv).unwrap();
        let e = Collector::new(log, kept, &p, 0, Libs::Paper)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("more than the plan's 0 runs"), "{e}");
    }

    #[test]
    fn the_manifest_holds_what_decides_the_runs() {
        let c = study_cfg();
        let p = plan(&c).unwrap();
        let m = manifest(&c, &p, "estimated (model: m)");
        assert_eq!(m.total_runs, p.cells.len() * 3);
        assert_eq!(m.plan["runs"], 3);
        assert_eq!(m.plan["sizes"], serde_json::json!(["tiny", "small"]));
        assert_eq!(m.plan["energy"], "estimated (model: m)");
        let mut more = c.clone();
        more.runs = 5;
        assert_ne!(manifest(&more, &plan(&more).unwrap(), "x").plan, m.plan);
        // The launcher and the directories do not change the runs.
        let mut moved = c.clone();
        moved.java = "/opt/jdk/bin/java".into();
        moved.out_dir = "elsewhere".into();
        assert_eq!(manifest(&moved, &p, "estimated (model: m)").plan, m.plan);
    }
}
