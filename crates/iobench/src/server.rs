//! The local energy interface: a Unix-domain socket with a line protocol, served by wattio to
//! the forked benchmark JVM, so the JVM brackets exactly its measured operation and wattio's
//! meter supplies the energy (no energy counter is read in Java).
//!
//! One request line, one reply line (UTF-8, `\n`-terminated), in this order per run:
//!
//! | request | reply | what wattio does |
//! |---|---|---|
//! | `HELLO op=O method=M size=S buffer=B pid=P` | `OK` | labels the runs of this connection |
//! | `PREPARE <absolute path>` | `OK cache=cold resident=0.000` | evicts or pre-reads the input |
//! | `BEGIN` | `OK` | meter snapshot + the JVM's CPU time (schedstat) |
//! | `END ns=N` | one JSON object (see [`WindowEnergy`]) | second snapshot; energy of the window |
//! | `CHECK ok=B bytes=N got=H want=H` | `OK` | records the run with its output check |
//!
//! Anything else, or a request out of order, gets `ERR <why>`.

use crate::cache::{self, CacheMode};
use crate::catalog::{Op, Size};
use crate::disks::{OperationDiskWatch, OperationDisks};
use crate::IoBenchError;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;
use wattio_energy::attribution::{self, cputime};
use wattio_energy::{ModelParams, Provenance, SysRoot};
use wattio_meter::{Meter, Snapshot};

/// Energy of one measured window, as sent back to the JVM after `END`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowEnergy {
    /// The figure the study ranks methods by (see `scope`): a system figure either way.
    pub energy_j: f64,
    /// `process`: with the model mechanism, the estimated energy of a host running only the JVM
    /// over the window — the model with the JVM's schedstat CPU time as the host's busy time,
    /// `min W × vCPUs × window + (max − min) W × JVM CPU s` (a dedicated-host system estimate,
    /// not the JVM's share of this machine);
    /// `system`: with counters, the meter's measured whole-machine figure.
    pub scope: String,
    /// Where `energy_j` comes from: for the `process` scope the model, named with the vCPUs it
    /// charges; else the meter's mechanism. Written as the `mechanism`, `estimated` and `model`
    /// fields.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The meter's whole-machine figure over the same window, same mechanism.
    pub system_energy_j: f64,
    /// CPU seconds of the JVM's threads over the window.
    pub cpu_s: f64,
    /// Wall seconds between `BEGIN` and `END` as seen by wattio.
    pub window_s: f64,
    /// The JVM's attributed share of the window's whole-machine energy:
    /// `attribution::share_j(system_energy_j, n_cpus, window_s, cpu_s)`. `None` in results
    /// written before it existed.
    #[serde(alias = "process_j", default)]
    pub attributed_j: Option<f64>,
    /// Label of `attributed_j`: the meter's provenance with the split named, e.g.
    /// `estimated (model: ccf-linear(...)), attributed (cpu-time share)`.
    #[serde(alias = "process_label", default)]
    pub attributed_label: Option<String>,
    /// The energy interval of the disk(s) holding the operation's file over the window, where
    /// the study watches the disks. Absent in results written before it existed, and ignored by
    /// the JVM (it reads only the fields it needs).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub disk: Option<OperationDisks>,
}

/// One measured run as recorded by the server.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSample {
    pub op: Op,
    pub method: String,
    pub size: Size,
    pub buffer: u32,
    pub pid: u32,
    /// JVM-measured duration of the operation (System.nanoTime around the call).
    pub time_s: f64,
    pub energy: WindowEnergy,
    pub bytes: u64,
    pub ok: bool,
    pub got: String,
    pub want: String,
    pub cache: Option<CacheMode>,
    /// Fraction of the input in the page cache right after PREPARE.
    pub resident: Option<f64>,
}

/// What the server reports to the orchestrator.
#[derive(Debug)]
pub enum EnergyServerEvent {
    Sample(Box<RunSample>),
    /// A connection broke the protocol or failed to measure.
    Error(String),
}

/// How windows are turned into energy.
#[derive(Debug, Clone)]
pub struct EnergyServerConfig {
    pub cache: CacheMode,
    pub model: ModelParams,
    /// CPUs the model's idle power is counted for, and the capacity (`n_cpus × window`) the
    /// JVM's attributed share is taken of.
    pub n_cpus: usize,
    /// Where `/proc` is read (`SysRoot::new("/")` for the live JVM; tests may point elsewhere).
    pub root: SysRoot,
    /// The disks, read at `BEGIN` and `END`; `None`: no disk figures (the study says why).
    pub disks: Option<OperationDiskWatch>,
}

/// The socket server; stops and removes its socket when dropped.
pub struct EnergyServer {
    dir: tempfile::TempDir,
    path: PathBuf,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    rx: Receiver<EnergyServerEvent>,
}

impl EnergyServer {
    /// Binds a socket in a fresh private temporary directory and starts serving.
    pub fn start(meter: Arc<Meter>, cfg: EnergyServerConfig) -> Result<EnergyServer, IoBenchError> {
        let dir = tempfile::Builder::new()
            .prefix("wattio-iobench-")
            .tempdir()
            .map_err(IoBenchError::io(
                "creating a directory for the energy socket",
            ))?;
        let path = dir.path().join("energy.sock");
        let listener = UnixListener::bind(&path).map_err(IoBenchError::io(format!(
            "binding the energy socket {}",
            path.display()
        )))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let handle = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("wattio-iobench-energy".into())
                .spawn(move || serve(listener, meter, cfg, stop, tx))
                .map_err(IoBenchError::io("starting the energy socket thread"))?
        };
        Ok(EnergyServer {
            dir,
            path,
            stop,
            handle: Some(handle),
            rx,
        })
    }

    /// Where the JVM must connect.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Events received so far (non-blocking).
    pub fn drain(&self) -> Vec<EnergyServerEvent> {
        self.rx.try_iter().collect()
    }

    /// The next event, waiting at most `timeout` for it.
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Option<EnergyServerEvent> {
        self.rx.recv_timeout(timeout).ok()
    }
}

impl Drop for EnergyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = UnixStream::connect(&self.path);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.path);
        let _ = self.dir.path();
    }
}

fn serve(
    listener: UnixListener,
    meter: Arc<Meter>,
    cfg: EnergyServerConfig,
    stop: Arc<AtomicBool>,
    tx: Sender<EnergyServerEvent>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        match conn {
            Ok(stream) => {
                if let Err(e) = handle(stream, &meter, &cfg, &tx) {
                    let _ = tx.send(EnergyServerEvent::Error(e));
                }
            }
            Err(e) => {
                let _ = tx.send(EnergyServerEvent::Error(format!(
                    "accepting on the energy socket: {e}"
                )));
            }
        }
    }
}

#[derive(Default)]
struct Conn {
    labels: Option<(Op, String, Size, u32, u32)>,
    cache: Option<CacheMode>,
    resident: Option<f64>,
    begin: Option<(Snapshot, u64, Instant)>,
    ended: Option<(WindowEnergy, f64)>,
    /// The disks holding the prepared file, or why they are not known.
    disks: Option<Result<Vec<String>, Why>>,
    disk_begin: Option<wattio_devices::StorageMark>,
}

/// What went wrong with a connection or a request, in one line: reported as an
/// [`EnergyServerEvent::Error`] and, for a request, answered with `ERR <why>`.
type Why = String;

/// `what: e`, the one-line form of a failure while doing `what`.
fn because(what: impl std::fmt::Display, e: impl std::fmt::Display) -> Why {
    format!("{what}: {e}")
}

fn handle(
    stream: UnixStream,
    meter: &Meter,
    cfg: &EnergyServerConfig,
    tx: &Sender<EnergyServerEvent>,
) -> Result<(), Why> {
    let mut out = stream
        .try_clone()
        .map_err(|e| because("cloning the socket", e))?;
    let reader = BufReader::new(stream);
    let mut c = Conn::default();
    for line in reader.lines() {
        let line = line.map_err(|e| because("reading from the benchmark JVM", e))?;
        let reply = match step(&mut c, line.trim_end(), meter, cfg, tx) {
            Ok(r) => r,
            Err(e) => {
                let msg = e.replace('\n', " ");
                let _ = tx.send(EnergyServerEvent::Error(msg.clone()));
                format!("ERR {msg}")
            }
        };
        out.write_all(reply.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn kv<'a>(rest: &'a str, key: &str) -> Result<&'a str, Why> {
    rest.split_ascii_whitespace()
        .find_map(|t| t.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .ok_or_else(|| format!("missing {key}=..."))
}

/// The value of `key=` in `rest`, parsed.
fn parsed<T: std::str::FromStr>(rest: &str, key: &str) -> Result<T, Why>
where
    T::Err: std::fmt::Display,
{
    kv(rest, key)?
        .parse()
        .map_err(|e: T::Err| because(format!("{key}="), e))
}

/// `Err(why)` unless `ok`.
fn require(ok: bool, why: impl FnOnce() -> Why) -> Result<(), Why> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

fn step(
    c: &mut Conn,
    line: &str,
    meter: &Meter,
    cfg: &EnergyServerConfig,
    tx: &Sender<EnergyServerEvent>,
) -> Result<String, Why> {
    let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
    match cmd {
        "HELLO" => {
            let op: Op = kv(rest, "op")?.parse()?;
            let size: Size = kv(rest, "size")?.parse()?;
            let buffer: u32 = parsed(rest, "buffer")?;
            let pid: u32 = parsed(rest, "pid")?;
            c.labels = Some((op, kv(rest, "method")?.to_string(), size, buffer, pid));
            Ok("OK".into())
        }
        "PREPARE" => {
            require(c.labels.is_some(), || "PREPARE before HELLO".into())?;
            let path = Path::new(rest.trim());
            require(path.is_absolute(), || {
                format!("PREPARE needs an absolute path, got '{rest}'")
            })?;
            cache::prepare(path, cfg.cache).map_err(|e| {
                because(
                    format!(
                        "making {} {} in the page cache",
                        path.display(),
                        cfg.cache.as_str()
                    ),
                    e,
                )
            })?;
            let r = cache::resident_fraction(path).ok();
            c.cache = Some(cfg.cache);
            c.resident = r;
            c.disks = cfg.disks.as_ref().map(|w| w.disks_of(path));
            Ok(format!(
                "OK cache={} resident={:.3}",
                cfg.cache.as_str(),
                r.unwrap_or(f64::NAN)
            ))
        }
        "BEGIN" => {
            let (_, _, _, _, pid) = c.labels.as_ref().ok_or("BEGIN before HELLO")?;
            let cpu = jvm_cpu_ns(cfg, *pid)?;
            let snap = meter
                .snapshot()
                .map_err(|e| because("meter snapshot at BEGIN", e))?;
            c.disk_begin = cfg.disks.as_ref().map(OperationDiskWatch::mark);
            c.begin = Some((snap, cpu, Instant::now()));
            c.ended = None;
            Ok("OK".into())
        }
        "END" => {
            let now = Instant::now();
            let snap = meter
                .snapshot()
                .map_err(|e| because("meter snapshot at END", e))?;
            let (_, _, _, _, pid) = c.labels.as_ref().ok_or("END before HELLO")?;
            let cpu = jvm_cpu_ns(cfg, *pid)?;
            let (a, cpu0, t0) = c.begin.take().ok_or("END without BEGIN")?;
            let ns: f64 = parsed(rest, "ns")?;
            let window_s = now.duration_since(t0).as_secs_f64();
            let cpu_s = cpu.saturating_sub(cpu0) as f64 * 1e-9;
            let mut w = window_energy(meter, &a, &snap, window_s, cpu_s, cfg);
            w.disk = window_disks(c, cfg);
            let json = serde_json::to_string(&w).map_err(|e| e.to_string())?;
            c.ended = Some((w, ns * 1e-9));
            Ok(json)
        }
        "CHECK" => {
            let (op, method, size, buffer, pid) = c.labels.clone().ok_or("CHECK before HELLO")?;
            let (energy, time_s) = c.ended.take().ok_or("CHECK without END")?;
            let s = RunSample {
                op,
                method,
                size,
                buffer,
                pid,
                time_s,
                energy,
                bytes: parsed(rest, "bytes")?,
                ok: kv(rest, "ok")? == "true",
                got: kv(rest, "got")?.to_string(),
                want: kv(rest, "want")?.to_string(),
                cache: c.cache,
                resident: c.resident,
            };
            let _ = tx.send(EnergyServerEvent::Sample(Box::new(s)));
            Ok("OK".into())
        }
        other => Err(format!(
            "unknown request '{other}': expected HELLO, PREPARE, BEGIN, END or CHECK"
        )),
    }
}

/// The interval of the prepared file's disks since `BEGIN`, where the disks are watched.
fn window_disks(c: &mut Conn, cfg: &EnergyServerConfig) -> Option<OperationDisks> {
    let watch = cfg.disks.as_ref()?;
    let end = watch.mark();
    let begin = c.disk_begin.take()?;
    Some(match c.disks.as_ref()? {
        Ok(disks) => watch.between(disks, &begin, &end),
        Err(why) => OperationDisks {
            disks: vec![],
            interval: None,
            label: format!("no interval: the file's disk is not known ({why})"),
        },
    })
}

/// CPU nanoseconds the JVM `pid` has used so far.
fn jvm_cpu_ns(cfg: &EnergyServerConfig, pid: u32) -> Result<u64, Why> {
    cputime::process_cpu_ns(&cfg.root, pid)
        .map_err(|e| because(format!("reading the CPU time of JVM {pid}"), e))
}

/// The window's energy. `energy_j`, which the study ranks by: with counters the meter's
/// measured whole-machine figure; with the model, the estimated energy of a host running only
/// the JVM (the model with the JVM's schedstat CPU time as busy time — system-wide tick counts
/// are too coarse for millisecond windows and include other processes). `attributed_j`: the JVM's
/// CPU-time share of the meter's whole-machine figure (`attribution::share_j`).
pub(crate) fn window_energy(
    meter: &Meter,
    a: &Snapshot,
    b: &Snapshot,
    window_s: f64,
    cpu_s: f64,
    cfg: &EnergyServerConfig,
) -> WindowEnergy {
    let r = meter.between(a, b);
    let attributed_j = Some(attribution::share_j(r.total_j, cfg.n_cpus, window_s, cpu_s));
    let attributed_label = Some(attribution::attributed_label(&r.provenance_label()));
    if r.provenance.estimated {
        WindowEnergy {
            energy_j: cfg.model.energy_j(cfg.n_cpus, window_s, cpu_s),
            scope: "process".into(),
            provenance: Provenance {
                mechanism: r.provenance.mechanism,
                estimated: true,
                model: Some(process_model_name(&cfg.model, cfg.n_cpus)),
            },
            system_energy_j: r.total_j,
            cpu_s,
            window_s,
            attributed_j,
            attributed_label,
            disk: None,
        }
    } else {
        WindowEnergy {
            energy_j: r.total_j,
            scope: "system".into(),
            provenance: Provenance::measured(r.provenance.mechanism),
            system_energy_j: r.total_j,
            cpu_s,
            window_s,
            attributed_j,
            attributed_label,
            disk: None,
        }
    }
}

/// The model string of the `process`-scope `energy_j`: the estimated energy of a host running
/// only the JVM (idle power of every vCPU + the JVM's CPU time at busy power).
pub(crate) fn process_model_name(m: &ModelParams, n_cpus: usize) -> String {
    format!(
        "{} x {n_cpus} vCPU idle + JVM CPU time (schedstat)",
        m.name()
    )
}
