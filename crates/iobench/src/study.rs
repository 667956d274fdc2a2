//! Planning and running a study: which (use case, method, size, buffer) cells, in which order,
//! through which JMH invocations; collecting the runs from the energy socket.

use crate::cache::CacheMode;
use crate::catalog::{self, MethodInfo, Op, Size, DEFAULT_BUFFER, SWEEP_BUFFERS};
use crate::maven::{self, Libs};
use crate::results::RunRecord;
use crate::server::{EnergyServer, Event, ServerConfig};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use wattio_energy::ModelParams;
use wattio_meter::Meter;

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
    /// Heap of the benchmark JVM (-Xms = -Xmx), e.g. "2g".
    pub heap: String,
    /// Show a progress bar (when stderr is a terminal).
    pub progress: bool,
}

/// One cell of the study: every run of it is a fresh JVM.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub op: Op,
    pub method: String,
    pub size: Size,
    pub buffer: u32,
}

/// One JMH invocation of a round: benchmarks × sizes × buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub benchmarks: Vec<(Op, &'static str)>,
    pub sizes: Vec<Size>,
    pub buffers: Vec<u32>,
    /// For a program (RQ2): its swappable methods, passed as `-p method=...`.
    pub app_methods: Vec<&'static str>,
}

impl Invocation {
    /// The number of forks (= runs) one execution of this invocation yields.
    pub fn forks(&self) -> usize {
        self.benchmarks
            .iter()
            .map(|(op, _)| {
                // JMH crosses every benchmark of a class with that class's parameters.
                let per_size = match op {
                    Op::Read | Op::Write => self.buffers.len(),
                    o if o.is_app() => self.app_methods.len(),
                    _ => 1,
                };
                self.sizes.len() * per_size
            })
            .sum()
    }

    /// JMH `-p` options besides the size.
    pub fn params(&self) -> Vec<String> {
        let mut v = vec![];
        if !self.buffers.is_empty() {
            v.push("-p".into());
            v.push(format!(
                "buffer={}",
                self.buffers
                    .iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if !self.app_methods.is_empty() {
            v.push("-p".into());
            v.push(format!("method={}", self.app_methods.join(",")));
        }
        v
    }

    /// JMH include patterns, one per benchmark, anchored.
    pub fn includes(&self) -> Vec<String> {
        self.benchmarks
            .iter()
            .map(|(op, m)| format!("^{}\\.{}$", op.bench_class().replace('.', "\\."), m))
            .collect()
    }
}

/// The plan: cells and the JMH invocations that make up one round.
#[derive(Debug, Clone)]
pub struct Plan {
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
                    .map_or(true, |l| l.iter().any(|n| n == m.name))
        })
        .collect()
}

/// The largest size the programs run on (their inputs follow Table I up to medium).
pub const APPS_MAX: Size = Size::Medium;

/// The chunk size a program reads or writes with (reported in the buffer column).
pub fn app_buffer(op: Op) -> u32 {
    if op == Op::Zip4j {
        4096 // Zip4j's own default read buffer
    } else {
        DEFAULT_BUFFER
    }
}

/// Expands the configuration into cells and the invocations of one round.
pub fn plan(cfg: &StudyConfig) -> Result<Plan> {
    if cfg.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if cfg.sizes.is_empty() || cfg.ops.is_empty() {
        bail!("nothing to run: give at least one size and one use case");
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
                bail!(
                    "unknown method '{n}' for the selected use cases: choose from {}",
                    names.join(", ")
                );
            }
        }
    }
    let mut notes = vec![];
    let mut cells = vec![];
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
    for inv in &round {
        for &(op, m) in &inv.benchmarks {
            if op.is_app() {
                for &size in &inv.sizes {
                    for am in &inv.app_methods {
                        cells.push(Cell {
                            op,
                            method: am.to_string(),
                            size,
                            buffer: app_buffer(op),
                        });
                    }
                }
                continue;
            }
            let buffered = catalog::find(op, m).is_some_and(|i| i.buffered);
            for &size in &inv.sizes {
                let bufs = if buffered {
                    inv.buffers.clone()
                } else {
                    vec![DEFAULT_BUFFER]
                };
                for buffer in bufs {
                    cells.push(Cell {
                        op,
                        method: m.to_string(),
                        size,
                        buffer,
                    });
                }
            }
        }
    }
    if cells.is_empty() {
        bail!("nothing to run: no selected method belongs to the selected use cases");
    }
    Ok(Plan {
        cells,
        round,
        notes,
    })
}

/// Free bytes on the filesystem holding `dir` (or its nearest existing parent).
pub fn free_bytes(dir: &Path) -> Result<u64> {
    let mut d = dir.to_path_buf();
    while !d.exists() {
        if !d.pop() {
            break;
        }
    }
    let c =
        std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).context("path with a NUL byte")?;
    // SAFETY: statvfs fills the zeroed struct; c is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statvfs {}", d.display()));
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

/// Runs the study: builds the jar if needed, generates files, serves energy, runs `runs` rounds.
pub fn run(
    cfg: &StudyConfig,
    meter: Arc<Meter>,
    model: ModelParams,
    log: &mut dyn FnMut(&str),
) -> Result<StudyRun> {
    let plan = plan(cfg)?;
    for n in &plan.notes {
        log(n);
    }
    let module = maven::find_module(cfg.module_dir.as_deref())?;
    let jar = maven::ensure_jar(&module, cfg.libs, log)?;
    std::fs::create_dir_all(&cfg.out_dir)
        .with_context(|| format!("creating {}", cfg.out_dir.display()))?;
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("creating {}", cfg.data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&cfg.data_dir)?;
    let sizes: Vec<Size> = {
        let mut s: Vec<Size> = plan.cells.iter().map(|c| c.size).collect();
        s.sort();
        s.dedup();
        s
    };
    let need = disk_needed(&data_dir, &sizes, cfg.ops.contains(&Op::Write));
    let free = free_bytes(&data_dir)?;
    if need + (1 << 30) > free {
        bail!(
            "not enough free disk in {} for sizes {}: need {:.1} GB (+1 GB margin), have {:.1} GB: free space, drop a size, or pass --data-dir on a bigger disk",
            data_dir.display(),
            sizes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","),
            need as f64 / 1e9,
            free as f64 / 1e9
        );
    }
    log(&format!(
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

    let n_cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let server = EnergyServer::start(
        meter,
        ServerConfig {
            cache: cfg.cache,
            model,
            n_cpus,
            // the live JVM's /proc, whatever WATTIO_ROOT says about the energy counters
            root: wattio_energy::SysRoot::new("/"),
        },
    )?;
    let total = plan.cells.len() as u64 * cfg.runs as u64;
    let bar = if cfg.progress {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}  (ETA {eta})",
            )
            .expect("static template"),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let jvm_args = fork_jvm_args(&cfg.heap);
    let scratch = cfg.out_dir.join("jmh");
    std::fs::create_dir_all(&scratch)?;
    // Run a private copy: a rebuild of the module during a long study must not change its code.
    let jar = {
        let copy = scratch.join("benchmarks.jar");
        std::fs::copy(&jar, &copy)
            .with_context(|| format!("copying {} to {}", jar.display(), copy.display()))?;
        std::fs::canonicalize(copy)?
    };
    let log_path = cfg.out_dir.join("jmh.log");
    let mut jmh_log = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&log_path)?;
    let mut counts: BTreeMap<Cell, u32> = BTreeMap::new();
    let mut records = vec![];
    for round in 0..cfg.runs {
        // Odd rounds run the invocations in reverse order (JMH fixes the order inside one).
        let order: Vec<&Invocation> = if round % 2 == 1 {
            plan.round.iter().rev().collect()
        } else {
            plan.round.iter().collect()
        };
        for inv in order {
            let mut cmd = Command::new(&cfg.java);
            // The host JVM only launches forks: keep it light. Forks get exactly `jvm_args`.
            cmd.args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar"])
                .arg(&jar)
                .args([
                    "-bm", "ss", "-wi", "0", "-i", "1", "-f", "1", "-foe", "true",
                ])
                .args(["-jvmArgs", &jvm_args])
                .arg("-p")
                .arg(format!(
                    "size={}",
                    inv.sizes
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ))
                .args(inv.includes())
                .args(inv.params())
                .env("WATTIO_IOBENCH_SOCKET", server.path())
                .env("WATTIO_IOBENCH_DATA", &data_dir)
                .current_dir(&scratch)
                .stdin(Stdio::null());
            bar.set_message(format!("round {}/{}", round + 1, cfg.runs));
            writeln!(jmh_log, "=== round {} {:?}", round + 1, inv.includes())?;
            jmh_log.flush()?;
            let start = jmh_log.metadata()?.len();
            // JMH writes straight into the log, so a long round can be followed with tail -f.
            cmd.stdout(Stdio::from(jmh_log.try_clone()?))
                .stderr(Stdio::from(jmh_log.try_clone()?));
            let status = cmd.status().map_err(|e| maven::java_error(&cfg.java, e))?;
            let mut got = 0usize;
            let mut errors = vec![];
            for ev in server.drain() {
                match ev {
                    Event::Sample(s) => {
                        let s = *s;
                        if !s.ok {
                            bail!(
                                "{}/{} on {} (buffer {}) produced a wrong output: got {} ({} bytes), expected {}: either the method does not do the study's work or the input changed (delete {}/{}.sums to regenerate the files); see {}",
                                s.op, s.method, s.size, s.buffer, s.got, s.bytes, s.want, data_dir.display(), s.size, log_path.display()
                            );
                        }
                        let cell = Cell {
                            op: s.op,
                            method: s.method.clone(),
                            size: s.size,
                            buffer: s.buffer,
                        };
                        let run = counts.entry(cell).or_insert(0);
                        *run += 1;
                        records.push(RunRecord::from_sample(&s, *run, cfg.libs));
                        got += 1;
                        bar.inc(1);
                        bar.set_message(format!(
                            "round {}/{}: {}/{} {}",
                            round + 1,
                            cfg.runs,
                            s.op,
                            s.method,
                            s.size
                        ));
                    }
                    Event::Error(e) => errors.push(e),
                }
            }
            if !errors.is_empty() {
                bail!(
                    "energy socket: {} (JMH output in {})",
                    errors.join("; "),
                    log_path.display()
                );
            }
            if !status.success() || got != inv.forks() {
                let text = std::fs::read(&log_path).unwrap_or_default();
                let this_round =
                    String::from_utf8_lossy(&text[(start as usize).min(text.len())..]).into_owned();
                bail!(
                    "round {}: JMH exited with {} after {got} of {} runs: {} (full output in {})",
                    round + 1,
                    status,
                    inv.forks(),
                    jmh_failure(&this_round),
                    log_path.display()
                );
            }
        }
    }
    bar.finish_and_clear();
    Ok(StudyRun {
        records,
        notes: plan.notes,
        jvm_args,
        jar,
    })
}

/// The first exception line JMH printed, or its last line.
fn jmh_failure(stdout: &str) -> String {
    if stdout.contains("Unable to acquire the JMH lock") {
        return "another JMH run holds /tmp/jmh.lock (concurrent benchmarks disturb each other): wait for it to finish".into();
    }
    stdout
        .lines()
        .find(|l| {
            l.contains("Exception")
                || l.contains("<failure>")
                || l.contains("Error:")
                || l.starts_with("ERROR")
        })
        .or_else(|| stdout.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("no output")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> StudyConfig {
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
            heap: "1g".into(),
            progress: false,
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
    fn jmh_failures_are_summarised() {
        assert!(
            jmh_failure("x\nERROR: ... Unable to acquire the JMH lock (/tmp/jmh.lock)")
                .contains("another JMH run")
        );
        assert_eq!(
            jmh_failure("a\njava.lang.IllegalStateException: bad\nb"),
            "java.lang.IllegalStateException: bad"
        );
        assert_eq!(jmh_failure(""), "no output");
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
