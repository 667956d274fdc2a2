//! `wattio transfer`: the client engine.
//!
//! A *channel* is one TCP connection that keeps up to `pipelining` Range requests in flight
//! (written back to back, answered in order). Each partition of Algorithm 1 has a queue of
//! chunks and a channel budget set by the tuner every interval; channels of a partition pull
//! chunks from its queue, so concurrency (files in flight) and parallelism (chunks of one file
//! in flight) follow from the channel count and the chunk size. Data is written with
//! positioned writes into `NAME.wattio-part`; every finished byte range is appended to
//! `NAME.wattio-part.done`, so an interrupted run resumes where it stopped; a file is
//! verified (size, XXH3-64 when the listing has it) and only then renamed to `NAME`.

use crate::actuator::{Actuator, ApplyReport, CoreBackend};
use crate::checksum;
use crate::http::percent_encode_path;
use crate::listing::{is_safe_relative, Listing, LISTING_PATH};
use crate::tuner::{
    channel_count, channel_split, initial_plan, AlanHeuristic, ChannelTuner, Controller, CpuScaler,
    Decision, EemtTuner, EettTuner, FixedParams, MeTuner, NetParams, Observation, Plan, Sla,
    SlaeeTuner, Split, State, StaticTuner, Thresholds,
};
use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wattio_energy::attribution::cputime;
use wattio_energy::SysRoot;
use wattio_meter::{Meter, MeterConfig};

/// Which tuner implementation runs the SLA.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum TunerChoice {
    /// ME / EEMT / EETT (the paper's algorithms).
    Wattio,
    /// MinE / HTEE / SLAEE baselines (Alan, Arslan, Kosar heuristics).
    Alan,
    /// Fixed concurrency, parallelism and pipelining.
    Fixed(FixedParams),
}

/// Everything `wattio transfer` needs.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    pub source: String,
    pub dest: PathBuf,
    pub sla: Sla,
    pub tuner: TunerChoice,
    pub rtt: Option<Duration>,
    pub bandwidth_bps: Option<f64>,
    pub window_bytes: Option<u64>,
    pub max_ch: usize,
    pub interval: Duration,
    /// Consecutive failed attempts a channel tolerates before the transfer fails.
    pub retries: u32,
    pub core_backend: CoreBackend,
    pub cpufreq: bool,
    /// Run Algorithm 3 (CPU scaling); off for the baselines by default.
    pub cpu_scaling: bool,
    pub progress: bool,
    /// Use the energy meter (feedback for ME, figures in the summary).
    pub meter: bool,
    /// What feeds ME's energy comparisons.
    pub energy_feedback: EnergyFeedback,
    /// Append one JSON line per interval to this file.
    pub log: Option<PathBuf>,
    /// System root for sysfs/proc reads (`WATTIO_ROOT`).
    pub root: SysRoot,
}

impl TransferOptions {
    /// Defaults for `source` → `dest` under `sla`.
    pub fn new(source: impl Into<String>, dest: impl Into<PathBuf>, sla: Sla) -> Self {
        TransferOptions {
            source: source.into(),
            dest: dest.into(),
            sla,
            tuner: TunerChoice::Wattio,
            rtt: None,
            bandwidth_bps: None,
            window_bytes: None,
            max_ch: 32,
            interval: Duration::from_secs(1),
            retries: 10,
            core_backend: CoreBackend::Affinity,
            cpufreq: true,
            cpu_scaling: true,
            progress: false,
            meter: true,
            energy_feedback: EnergyFeedback::Auto,
            log: None,
            root: SysRoot::from_env(),
        }
    }
}

/// Source of the per-interval energy the tuners see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EnergyFeedback {
    /// The meter when it measures (RAPL, perf); the process estimate when the meter itself is
    /// only a model — a system-wide model on a shared machine mostly measures the neighbours.
    Auto,
    /// The meter (whole machine).
    Meter,
    /// The estimated energy of a host running only this process: the model with this process's
    /// CPU time as the host's busy time, idle power of the CPUs it may use plus its CPU time at
    /// busy power (`ModelParams::energy_j(cpus, dt, cpu_s)`). Estimated; a dedicated-host
    /// figure, not this process's share of the machine.
    Process,
}

/// What `ProcessEnergy::total_j` is.
pub const HOST_ESTIMATE_SCOPE: &str = "estimated energy of a host running only this process: model(min W x vCPUs x wall + (max-min) W x its CPU s)";

/// This process's energy figures over the transfer.
///
/// `total_j` is the **estimated energy of a host running only this process** (a dedicated
/// client host): the model with this process's CPU time as the host's busy time, summed over
/// intervals — `min W × vCPUs it may use × Δt + (max − min) W × its CPU s`. It is what ME's
/// `process-estimate` feedback sees and what `docs/results/transfer.md` reports; it is not this
/// process's share of the machine's energy. That is `attributed_j`: the CPU-time share
/// (`wattio_energy::attribution::share_j`) of the meter's whole-machine energy over the transfer.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessEnergy {
    /// Estimated energy of a host running only this process, J.
    pub total_j: f64,
    /// `total_j` per GB received.
    pub joules_per_gb: Option<f64>,
    /// CPU seconds of this process over the transfer (`CLOCK_PROCESS_CPUTIME_ID`).
    pub cpu_s: f64,
    /// Always true: `total_j` is a model estimate.
    pub estimated: bool,
    /// Provenance of `total_j`: `estimated (model: ...)`.
    pub provenance: String,
    /// What `total_j` is ([`HOST_ESTIMATE_SCOPE`]).
    pub scope: &'static str,
    /// This process's CPU-time share of the meter's whole-machine energy over the transfer:
    /// `share_j(energy.total_j, online CPUs, meter window s, cpu_s)`; `None` without a meter.
    pub attributed_j: Option<f64>,
    /// `attributed_j` per GB received.
    pub attributed_joules_per_gb: Option<f64>,
    /// Label of `attributed_j`, e.g. `measured (perf), attributed (cpu-time share)`.
    pub attributed_label: Option<String>,
}

impl ProcessEnergy {
    /// The figures from the dedicated-host estimate `host_j`, this process's CPU seconds over
    /// the transfer, and the meter's whole-machine report over the same window (if any) on a
    /// machine of `n_cpus` online CPUs.
    pub fn new(
        host_j: f64,
        cpu_s: f64,
        received: u64,
        model: &wattio_energy::ModelParams,
        system: Option<&wattio_meter::EnergyReport>,
        n_cpus: usize,
    ) -> ProcessEnergy {
        let per_gb = |j: f64| (received > 0).then(|| j / (received as f64 / 1e9));
        let attributed_j = system
            .map(|r| wattio_energy::attribution::share_j(r.total_j, n_cpus, r.duration_s, cpu_s));
        ProcessEnergy {
            total_j: host_j,
            joules_per_gb: per_gb(host_j),
            cpu_s,
            estimated: true,
            provenance: format!("estimated (model: {})", model.name()),
            scope: HOST_ESTIMATE_SCOPE,
            attributed_j,
            attributed_joules_per_gb: attributed_j.and_then(per_gb),
            attributed_label: system
                .map(|r| wattio_energy::attribution::attributed_label(&r.provenance_label())),
        }
    }
}

/// Energy over the transfer, with its provenance.
#[derive(Debug, Clone, Serialize)]
pub struct EnergySummary {
    pub total_j: f64,
    pub mean_power_w: f64,
    pub joules_per_gb: Option<f64>,
    pub mechanism: String,
    pub estimated: bool,
    pub model: Option<String>,
    /// E.g. "estimated (model: ccf-linear(...))" — system-wide, not this process alone.
    pub provenance: String,
    pub scope: &'static str,
}

/// Parameters and measurements of one interval.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalLog {
    pub t_s: f64,
    pub bytes: u64,
    pub throughput_mbps: f64,
    pub tuner: &'static str,
    pub state: String,
    pub num_ch: usize,
    /// Channels per partition (concurrency budget).
    pub channels: Vec<usize>,
    /// Open connections at the end of the interval.
    pub open_channels: usize,
    pub pipelining: Vec<usize>,
    pub files_in_flight: usize,
    /// Mean chunks in flight per file in flight (effective parallelism).
    pub parallelism: f64,
    pub cores: Option<usize>,
    pub freq_khz: Option<u64>,
    pub cpu_load: Option<f64>,
    pub energy_j: Option<f64>,
    pub power_w: Option<f64>,
    pub rate_cap_mbps: Option<f64>,
}

/// The `--json` summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub source: String,
    pub dest: String,
    pub sla: String,
    pub tuner: String,
    pub files: usize,
    /// Files already complete and verified in DEST before this run.
    pub files_skipped: usize,
    pub files_verified_checksum: usize,
    pub total_bytes: u64,
    /// Payload bytes received by this run.
    pub bytes: u64,
    /// Bytes found complete (files or ranges) from an earlier run.
    pub resumed_bytes: u64,
    pub seconds: f64,
    pub throughput_bps: f64,
    pub throughput_mbps: f64,
    pub reconnects: u64,
    pub energy: Option<EnergySummary>,
    pub energy_note: Option<String>,
    /// The estimated energy of a host running only this process (always present) and, with a
    /// meter, this process's attributed share of the machine's energy.
    pub energy_process: ProcessEnergy,
    /// What fed the tuner: "meter" or "process-estimate".
    pub energy_feedback: &'static str,
    pub net: NetParams,
    pub params_initial: Plan,
    pub cpu_actuator: Vec<ApplyReport>,
    pub intervals: Vec<IntervalLog>,
}

/// An `http://host:port/path` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Origin-form path, starting with `/`, as given (percent-encoded).
    pub path: String,
}

impl HttpUrl {
    /// Parses `http://HOST[:PORT]/PATH`.
    pub fn parse(s: &str) -> anyhow::Result<HttpUrl> {
        let rest = s.strip_prefix("http://").ok_or_else(|| {
            anyhow!("unsupported URL {s:?}: only http:// URLs are supported (e.g. http://127.0.0.1:8080/)")
        })?;
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(h) = auth.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| anyhow!("bad IPv6 address in {s:?}"))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or("80"))
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (auth.to_string(), "80"),
            }
        };
        if host.is_empty() {
            bail!("no host in URL {s:?}");
        }
        let port = port.parse().map_err(|_| anyhow!("bad port in URL {s:?}"))?;
        Ok(HttpUrl {
            host,
            port,
            path: path.to_string(),
        })
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    fn connect_addr(&self) -> String {
        self.authority()
    }
}

/// One file to fetch.
struct FileJob {
    rel: String,
    url_path: String,
    size: u64,
    xxh3: Option<String>,
    /// The listing's per-block checksums, verified instead of `xxh3` when present.
    blocks: Option<BlockDigests>,
    /// Block digests computed from the bytes as they arrived (None: not seen whole in one
    /// stream, hashed from the file when it is finished).
    block_sums: Mutex<Vec<Option<u64>>>,
    final_path: PathBuf,
    part_path: PathBuf,
    done_path: PathBuf,
    /// Opened on first use and closed when the file is finished, so a dataset of many small
    /// files never holds more descriptors than files in flight.
    file: Mutex<Option<Arc<File>>>,
    done_log: Mutex<Option<File>>,
    /// No usable earlier progress: truncate the part file when first opening it.
    fresh: AtomicBool,
    remaining: AtomicU64,
    in_flight: AtomicUsize,
    checksum_retry: AtomicBool,
}

impl FileJob {
    /// The part file, opened (created and sized) on first use.
    fn part(&self) -> std::io::Result<Arc<File>> {
        let mut g = self.file.lock().unwrap();
        if let Some(f) = g.as_ref() {
            return Ok(f.clone());
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.part_path)?;
        if self.fresh.swap(false, Ordering::SeqCst) {
            f.set_len(0)?;
        }
        f.set_len(self.size)?;
        let f = Arc::new(f);
        *g = Some(f.clone());
        Ok(f)
    }

    /// Appends a finished range to the `.done` log.
    fn log_done(&self, offset: u64, len: u64) {
        let mut g = self.done_log.lock().unwrap();
        if g.is_none() {
            *g = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.done_path)
                .ok();
        }
        if let Some(f) = g.as_mut() {
            let mut rec = [0u8; 16];
            rec[..8].copy_from_slice(&offset.to_le_bytes());
            rec[8..].copy_from_slice(&len.to_le_bytes());
            let _ = f.write_all(&rec);
        }
    }

    fn store_block_sum(&self, index: u64, digest: u64) {
        if let Some(slot) = self.block_sums.lock().unwrap().get_mut(index as usize) {
            *slot = Some(digest);
        }
    }

    fn close(&self) {
        *self.file.lock().unwrap() = None;
        *self.done_log.lock().unwrap() = None;
    }
}

#[derive(Debug, Clone, Copy)]
struct Chunk {
    file: usize,
    offset: u64,
    len: u64,
}

struct PartQueue {
    chunks: Mutex<VecDeque<Chunk>>,
    target: AtomicUsize,
    live: AtomicUsize,
    pipelining: usize,
    remaining: AtomicU64,
}

struct Shared {
    /// Connections opened ahead (see `spawn_preconnect`), taken by the first channels.
    spare: Mutex<Vec<(Instant, TcpStream)>>,
    url: HttpUrl,
    files: Vec<FileJob>,
    parts: Vec<PartQueue>,
    received: AtomicU64,
    files_done: AtomicUsize,
    verified: AtomicUsize,
    reconnects: AtomicU64,
    /// bits/s; 0 = no cap
    rate_cap: AtomicU64,
    cap_epoch: Mutex<(Instant, u64)>,
    /// Times the pacer held a read back since the last timeout.
    cap_waits: AtomicU64,
    fatal: Mutex<Option<String>>,
    retries: u32,
    started: Instant,
}

impl Shared {
    fn fail(&self, msg: String) {
        let mut f = self.fatal.lock().unwrap();
        if f.is_none() {
            *f = Some(msg);
        }
    }
    fn failed(&self) -> bool {
        self.fatal.lock().unwrap().is_some()
    }
}

fn read_proc_max(root: &SysRoot, p: &str) -> Option<u64> {
    std::fs::read_to_string(root.path(p))
        .ok()?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The default per-stream window: half of tcp_rmem's maximum (tcp_adv_win_scale = 1), at most
/// tcp_wmem's maximum (assuming the peer's send buffer is configured like ours); 4 MiB when
/// /proc cannot be read.
pub fn default_window(root: &SysRoot) -> u64 {
    let r = read_proc_max(root, "/proc/sys/net/ipv4/tcp_rmem").map(|x| x / 2);
    let w = read_proc_max(root, "/proc/sys/net/ipv4/tcp_wmem");
    match (r, w) {
        (Some(r), Some(w)) => r.min(w).max(64 * 1024),
        (Some(x), None) | (None, Some(x)) => x.max(64 * 1024),
        (None, None) => 4 << 20,
    }
}

/// Runs a transfer to completion on its own tokio runtime.
pub fn run_transfer(opts: &TransferOptions) -> anyhow::Result<Summary> {
    let mut actuator = Actuator::probe(opts.root.clone(), opts.core_backend, opts.cpufreq);
    let workers = actuator.n_cores();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let r = rt.block_on(transfer_async(opts, &mut actuator));
    let errs = actuator.restore();
    rt.shutdown_timeout(Duration::from_millis(200));
    for e in errs {
        eprintln!("wattio: warning: {e}");
    }
    r
}

/// Opens `n` connections in the background; failures are left to the channels, which connect
/// themselves and report errors.
fn spawn_preconnect(url: &HttpUrl, n: usize) -> tokio::task::JoinHandle<Vec<(Instant, TcpStream)>> {
    let url = url.clone();
    tokio::spawn(async move {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let u = url.clone();
            set.spawn(async move { connect(&u).await });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(Ok(s)) = r {
                out.push((Instant::now(), s));
            }
        }
        out
    })
}

/// Opens a fresh connection to the server, giving up after 10 s.
async fn connect(url: &HttpUrl) -> anyhow::Result<TcpStream> {
    tokio::time::timeout(
        Duration::from_secs(10),
        TcpStream::connect(url.connect_addr()),
    )
    .await
    .map_err(|_| anyhow!("connecting to {} timed out", url.authority()))?
    .with_context(|| {
        format!(
            "cannot connect to {}; is the server running?",
            url.authority()
        )
    })
}

async fn measure_rtt(url: &HttpUrl) -> anyhow::Result<Duration> {
    let mut best = Duration::from_secs(10);
    for _ in 0..3 {
        let t = Instant::now();
        let s = connect(url).await?;
        best = best.min(t.elapsed());
        drop(s);
    }
    Ok(best)
}

/// A simple one-shot request on a fresh connection: status, headers (lower-case), body.
async fn simple_request(
    url: &HttpUrl,
    method: &str,
    path: &str,
) -> anyhow::Result<(u16, Vec<(String, String)>, Vec<u8>)> {
    let mut s = connect(url).await?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\nConnection: close\r\n\r\n",
        url.authority()
    );
    s.write_all(req.as_bytes()).await?;
    let mut rb = ReadBuf::default();
    let head = tokio::time::timeout(Duration::from_secs(60), rb.read_head(&mut s))
        .await
        .map_err(|_| anyhow!("{} did not answer within 60 s", url.authority()))??;
    let mut body = Vec::new();
    if method != "HEAD" {
        let len = head
            .content_length
            .ok_or_else(|| anyhow!("{}{path}: response without Content-Length", url.authority()))?;
        if len > 1 << 30 {
            bail!("{}{path}: listing larger than 1 GiB", url.authority());
        }
        body.reserve(len as usize);
        let take = rb.take(len as usize);
        body.extend_from_slice(&take);
        while (body.len() as u64) < len {
            let mut tmp = vec![0u8; 64 * 1024];
            let n = s.read(&mut tmp).await?;
            if n == 0 {
                bail!("{}{path}: connection closed mid-body", url.authority());
            }
            body.extend_from_slice(&tmp[..n]);
        }
        body.truncate(len as usize);
    }
    Ok((head.status, head.headers, body))
}

struct SourceFile {
    rel: String,
    url_path: String,
    size: u64,
    xxh3: Option<String>,
    blocks: Option<BlockDigests>,
}

/// A file's expected block checksums (from its listing entry).
#[derive(Debug, Clone)]
struct BlockDigests {
    size: u64,
    xxh3: Vec<u64>,
}

impl BlockDigests {
    fn from_listing(b: crate::listing::Blocks) -> BlockDigests {
        BlockDigests {
            size: b.size,
            // Listing::parse checked every digest
            xxh3: b
                .xxh3
                .iter()
                .map(|h| checksum::parse_digest(h).unwrap_or_default())
                .collect(),
        }
    }
}

async fn resolve_source(url: &HttpUrl) -> anyhow::Result<Vec<SourceFile>> {
    let path = url.path.split('?').next().unwrap_or("/").to_string();
    let listing_suffix = format!("/{LISTING_PATH}");
    let listing_path = if path.ends_with('/') {
        Some(format!("{path}{LISTING_PATH}"))
    } else if path.ends_with(&listing_suffix) {
        Some(path.clone())
    } else {
        None
    };
    if let Some(lp) = listing_path {
        let (status, _, body) = simple_request(url, "GET", &lp).await?;
        if status != 200 {
            bail!(
                "no dataset listing at http://{}{lp} (HTTP {status}); serve the tree with `wattio serve` or write one with `wattio serve DIR --write-listing`",
                url.authority()
            );
        }
        let listing =
            Listing::parse(&body).map_err(|e| anyhow!("http://{}{lp}: {e}", url.authority()))?;
        let base = &lp[..lp.len() - LISTING_PATH.len()];
        return Ok(listing
            .files
            .into_iter()
            .map(|e| SourceFile {
                url_path: format!("{base}{}", percent_encode_path(&e.path)),
                rel: e.path,
                size: e.size,
                xxh3: e.xxh3,
                blocks: e.blocks.map(BlockDigests::from_listing),
            })
            .collect());
    }
    let (status, headers, _) = simple_request(url, "HEAD", &path).await?;
    if status != 200 {
        bail!(
            "http://{}{path}: HTTP {status}; check the URL",
            url.authority()
        );
    }
    let size = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            anyhow!(
                "http://{}{path}: no Content-Length; cannot split it",
                url.authority()
            )
        })?;
    let name = path.rsplit('/').next().unwrap_or("");
    let name = crate::http::percent_decode(name).unwrap_or_default();
    if !is_safe_relative(&name) {
        bail!("cannot derive a file name from {path:?}; give a URL ending in a file name");
    }
    Ok(vec![SourceFile {
        rel: name,
        url_path: path,
        size,
        xxh3: None,
        blocks: None,
    }])
}

/// Byte ranges of `[0, size)` not covered by `done` (a list of (offset, len)).
pub fn missing_ranges(size: u64, done: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut d: Vec<(u64, u64)> = done
        .iter()
        .filter(|(_, l)| *l > 0)
        .map(|&(o, l)| (o.min(size), (o.saturating_add(l)).min(size)))
        .collect();
    d.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for (a, b) in d {
        if a > at {
            out.push((at, a - at));
        }
        at = at.max(b);
    }
    if at < size {
        out.push((at, size - at));
    }
    out
}

fn read_done_log(p: &Path) -> Vec<(u64, u64)> {
    let Ok(b) = std::fs::read(p) else {
        return Vec::new();
    };
    // records are 16 bytes; a torn last record (crash mid-append) is ignored
    b.chunks_exact(16)
        .map(|r| {
            (
                u64::from_le_bytes(r[..8].try_into().unwrap()),
                u64::from_le_bytes(r[8..].try_into().unwrap()),
            )
        })
        .collect()
}

fn part_name(final_path: &Path, suffix: &str) -> PathBuf {
    let mut s = final_path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

struct Prepared {
    jobs: Vec<FileJob>,
    missing: Vec<Vec<(u64, u64)>>,
    skipped: usize,
    resumed_bytes: u64,
    verified: usize,
}

fn prepare(dest: &Path, src: Vec<SourceFile>) -> anyhow::Result<Prepared> {
    std::fs::create_dir_all(dest).with_context(|| {
        format!(
            "cannot create destination {}; check permissions",
            dest.display()
        )
    })?;
    let mut jobs = Vec::new();
    let mut missing = Vec::new();
    let (mut skipped, mut resumed, mut verified) = (0, 0, 0);
    for s in src {
        let final_path = dest.join(&s.rel);
        if let Ok(md) = std::fs::metadata(&final_path) {
            if md.is_file() && md.len() == s.size {
                let ok = match &s.xxh3 {
                    Some(h) => checksum::file_xxh3(&final_path).ok().as_deref() == Some(h.as_str()),
                    None => true,
                };
                if ok {
                    skipped += 1;
                    resumed += s.size;
                    verified += s.xxh3.is_some() as usize;
                    continue;
                }
            }
        }
        if let Some(parent) = final_path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let part_path = part_name(&final_path, ".wattio-part");
        let done_path = part_name(&final_path, ".wattio-part.done");
        let mut done = Vec::new();
        if let Ok(md) = std::fs::metadata(&part_path) {
            if md.len() == s.size {
                done = read_done_log(&done_path);
            }
        }
        let fresh = done.is_empty();
        if fresh {
            // no usable progress: start clean
            let _ = std::fs::remove_file(&done_path);
        }
        let miss = missing_ranges(s.size, &done);
        let left: u64 = miss.iter().map(|r| r.1).sum();
        resumed += s.size - left;
        missing.push(miss);
        jobs.push(FileJob {
            rel: s.rel,
            url_path: s.url_path,
            size: s.size,
            xxh3: s.xxh3,
            block_sums: Mutex::new(vec![None; s.blocks.as_ref().map_or(0, |b| b.xxh3.len())]),
            blocks: s.blocks,
            final_path,
            part_path,
            done_path,
            file: Mutex::new(None),
            done_log: Mutex::new(None),
            fresh: AtomicBool::new(fresh),
            remaining: AtomicU64::new(left),
            in_flight: AtomicUsize::new(0),
            checksum_retry: AtomicBool::new(false),
        });
    }
    Ok(Prepared {
        jobs,
        missing,
        skipped,
        resumed_bytes: resumed,
        verified,
    })
}

fn build_controller(
    opts: &TransferOptions,
    plan: &Plan,
    sizes: &[u64],
    net: &NetParams,
    n_cores: usize,
    n_freqs: usize,
) -> (Controller, Plan) {
    let th = Thresholds {
        max_ch: opts.max_ch,
        ..Thresholds::default()
    };
    let scaler = |cores| {
        opts.cpu_scaling
            .then(|| CpuScaler::new(cores, n_cores, 0, n_freqs))
    };
    match opts.tuner {
        TunerChoice::Wattio => {
            let first = first_channels(opts.sla, net);
            let mut plan = plan.clone();
            if matches!(opts.sla, Sla::MinEnergy | Sla::MaxThroughput) {
                // Algorithm 1 lines 10-13 again, for the channels opened at the start
                plan.num_ch = opened_channels(opts.sla, net);
                plan.channels = channel_split(&plan.partitions, plan.num_ch);
            }
            let t: Box<dyn ChannelTuner> = match opts.sla {
                Sla::MinEnergy => Box::new(MeTuner::new(first, net.bandwidth_bps, th)),
                Sla::MaxThroughput => Box::new(EemtTuner::new(first, net.bandwidth_bps, th)),
                Sla::Target(r) => Box::new(EettTuner::new(first, r, th)),
            };
            (Controller::new(t, scaler(plan.cores)), plan)
        }
        TunerChoice::Alan => {
            let mut p = plan.clone();
            let max_cc = match opts.sla {
                Sla::MinEnergy => 2,
                _ => opts.max_ch,
            };
            let mut total = 0;
            for (i, part) in p.partitions.iter_mut().enumerate() {
                let avg = part.bytes as f64 / part.n_files.max(1) as f64;
                let h = AlanHeuristic::best_params(
                    avg,
                    part.n_files,
                    plan.bdp_bytes,
                    net.window_bytes,
                    max_cc,
                );
                part.pipelining = h.pp;
                part.split = if h.p > 1 {
                    Split::Parts(h.p)
                } else {
                    Split::Whole
                };
                p.channels[i] = h.cc * h.p;
                total += h.cc * h.p;
            }
            let _ = sizes;
            p.num_ch = total.clamp(1, opts.max_ch);
            let t: Box<dyn ChannelTuner> = match opts.sla {
                Sla::MinEnergy => Box::new(StaticTuner::new("MinE", p.num_ch)),
                Sla::MaxThroughput => Box::new(StaticTuner::new("HTEE", p.num_ch)),
                Sla::Target(r) => Box::new(SlaeeTuner::new(r, opts.max_ch)),
            };
            (Controller::new(t, None), p)
        }
        TunerChoice::Fixed(f) => {
            let mut p = plan.clone();
            for part in p.partitions.iter_mut() {
                part.pipelining = f.pp.max(1);
                part.split = if f.p > 1 {
                    Split::Parts(f.p)
                } else {
                    Split::Whole
                };
            }
            p.num_ch = (f.cc * f.p).max(1);
            (
                Controller::new(Box::new(StaticTuner::new("fixed", p.num_ch)), None),
                p,
            )
        }
    }
}

/// EEMT opens this many times Algorithm 1's channels at the start (ours). Algorithm 1 counts
/// channels at full TCP window, but a new connection starts from its initial window and needs
/// several RTTs of slow start to reach it: with Algorithm 1's 2 channels on the CloudLab-like
/// testbed the first few hundred milliseconds carried little (docs/transfer.md). Slow start then
/// sizes the channel count from measurements as before.
const EEMT_START_FACTOR: usize = 3;

/// ME and EEMT open this many times their tuner's first channel count right away (ours). With
/// a known bandwidth, slow start's first timeout sees every new connection's TCP ramp and
/// doubles the count (its step limit); opening those channels at once saves them one timeout of
/// ramp. Where the first timeout does not double, the surplus finishes its ranges and leaves.
/// EETT aims below the link and starts from what its target needs.
const OPEN_AHEAD: usize = 2;

/// The channels the wattio tuners open before any feedback: Algorithm 1's count for ME, three
/// times that for EEMT, and for EETT the channels its target rate needs rather than the link.
fn first_channels(sla: Sla, net: &NetParams) -> usize {
    let max = net.max_ch.max(1);
    match sla {
        Sla::MinEnergy => channel_count(net),
        Sla::MaxThroughput => (channel_count(net) * EEMT_START_FACTOR).min(max),
        Sla::Target(r) => ((r / net.channel_tput_bps()).ceil() as usize).clamp(1, max),
    }
}

/// The channels opened at the start (and connected during the listing fetch): the tuner's
/// first count, for ME and EEMT [`OPEN_AHEAD`] times that.
fn opened_channels(sla: Sla, net: &NetParams) -> usize {
    let first = first_channels(sla, net);
    match sla {
        Sla::MinEnergy | Sla::MaxThroughput => (first * OPEN_AHEAD).min(net.max_ch.max(1)),
        Sla::Target(_) => first,
    }
}

/// Cuts a file's missing ranges into the plan's pieces. With `block` (the listing's checksum
/// block), pieces are rounded to whole blocks and cut at multiples of the piece size, so each
/// stream covers whole blocks and can hash them as they arrive.
fn split_ranges(
    miss: &[(u64, u64)],
    split: Split,
    size: u64,
    block: Option<u64>,
) -> Vec<(u64, u64)> {
    let piece = match split {
        Split::Whole => u64::MAX,
        Split::Chunk(c) => c.max(1),
        Split::Parts(p) => size.div_ceil(p.max(1) as u64).max(1),
    };
    let piece = match block {
        Some(b) if b > 0 && piece != u64::MAX => ((piece + b / 2) / b).max(1) * b,
        _ => piece,
    };
    let mut out = Vec::new();
    for &(mut o, mut l) in miss {
        while l > 0 {
            let n = l.min(piece - o % piece);
            out.push((o, n));
            o += n;
            l -= n;
        }
    }
    out
}

/// Slow start's timeout: six RTTs, at least 200 ms, at most the tuning interval.
///
/// Ours: the paper times slow start with the same timeout as the later states. With a 1 s
/// timeout every transfer spends its first seconds on the channels Algorithm 1 guessed, and a
/// small dataset is done before slow start has acted. Six RTTs are not enough for a new TCP
/// stream to finish its own slow start, so these timeouts underestimate the channels' rate;
/// slow start's ×2 step limit is what keeps that from opening too many channels.
fn slow_start_timeout(rtt_s: f64, interval: Duration) -> Duration {
    Duration::from_secs_f64(rtt_s.max(0.0) * 6.0)
        .max(Duration::from_millis(200))
        .min(interval)
}

async fn transfer_async(opts: &TransferOptions, act: &mut Actuator) -> anyhow::Result<Summary> {
    let url = HttpUrl::parse(&opts.source)?;
    // The meter's discovery takes a while (it watches each counter for a moment to refuse dead
    // ones): it runs while the listing is fetched.
    let meter_open = opts.meter.then(|| {
        let cfg = MeterConfig {
            root: opts.root.clone(),
            ..MeterConfig::default()
        };
        tokio::task::spawn_blocking(move || Meter::open(&cfg))
    });
    let rtt = match opts.rtt {
        Some(r) => r,
        None => measure_rtt(&url).await?,
    };
    let net = NetParams {
        rtt_s: rtt.as_secs_f64().max(1e-5),
        bandwidth_bps: opts.bandwidth_bps,
        window_bytes: opts
            .window_bytes
            .unwrap_or_else(|| default_window(&opts.root)),
        max_ch: opts.max_ch.max(1),
    };
    // The first channels connect while the listing is fetched, saving them a round trip.
    let preconnect = match opts.tuner {
        TunerChoice::Wattio => Some(spawn_preconnect(&url, opened_channels(opts.sla, &net))),
        _ => None,
    };
    let src = resolve_source(&url).await?;
    let total_bytes: u64 = src.iter().map(|s| s.size).sum();
    let n_files = src.len();
    let dest = opts.dest.clone();
    let prep = tokio::task::spawn_blocking(move || prepare(&dest, src)).await??;
    let sizes: Vec<u64> = prep.jobs.iter().map(|j| j.size).collect();
    let base_plan = initial_plan(&sizes, &net, opts.sla, act.n_cores());
    let n_freqs = act.ladder_khz().len().max(1);
    let (mut ctl, plan) = build_controller(opts, &base_plan, &sizes, &net, act.n_cores(), n_freqs);

    // queues
    let mut parts = Vec::new();
    for part in &plan.partitions {
        let mut q = VecDeque::new();
        let mut rem = 0;
        for &fi in &part.files {
            let block = prep.jobs[fi].blocks.as_ref().map(|b| b.size);
            for (o, l) in split_ranges(&prep.missing[fi], part.split, sizes[fi], block) {
                q.push_back(Chunk {
                    file: fi,
                    offset: o,
                    len: l,
                });
                rem += l;
            }
        }
        parts.push(PartQueue {
            chunks: Mutex::new(q),
            target: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            pipelining: part.pipelining.max(1),
            remaining: AtomicU64::new(rem),
        });
    }
    let spare = match preconnect {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let shared = Arc::new(Shared {
        spare: Mutex::new(spare),
        url: url.clone(),
        files: prep.jobs,
        parts,
        received: AtomicU64::new(0),
        files_done: AtomicUsize::new(0),
        verified: AtomicUsize::new(prep.verified),
        reconnects: AtomicU64::new(0),
        rate_cap: AtomicU64::new(0),
        cap_epoch: Mutex::new((Instant::now(), 0)),
        cap_waits: AtomicU64::new(0),
        fatal: Mutex::new(None),
        retries: opts.retries,
        started: Instant::now(),
    });
    // files with nothing missing (complete .wattio-part from an interrupted rename)
    for i in 0..shared.files.len() {
        if shared.files[i].remaining.load(Ordering::SeqCst) == 0 {
            let sh = shared.clone();
            tokio::task::spawn_blocking(move || finish_file(&sh, i)).await?;
        }
    }

    let meter = match meter_open {
        Some(task) => match task.await? {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("wattio: warning: no energy meter ({e}); ME holds its channel count");
                None
            }
        },
        None => None,
    };
    let snap0 = meter.as_ref().and_then(|m| m.snapshot().ok());
    let model = wattio_energy::ModelParams::default();
    let meter_measures = meter
        .as_ref()
        .map(|m| !m.provenance().estimated)
        .unwrap_or(false);
    let use_process_feedback = match opts.energy_feedback {
        EnergyFeedback::Process => true,
        EnergyFeedback::Meter => false,
        EnergyFeedback::Auto => !meter_measures,
    };
    let mut proc_energy_j = 0.0;
    // idle power is charged for every CPU the process may use, whatever Algorithm 3 does:
    // affinity does not power a core down, so charging only the active ones would credit the
    // scaler with savings the machine does not make
    let n_cpus = act.n_cores();
    let cpu_at_start = cputime::self_cpu_s();
    let mut prev_snap = snap0.clone();

    let pb = if opts.progress {
        let pb = indicatif::ProgressBar::new(total_bytes);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}",
            )
            .expect("template"),
        );
        pb
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_position(prep.resumed_bytes);

    let remaining_vec = |sh: &Shared| -> Vec<u64> {
        sh.parts
            .iter()
            .map(|p| p.remaining.load(Ordering::SeqCst))
            .collect()
    };
    let mut decision = ctl.initial(&remaining_vec(&shared));
    if let Some(cap) = decision.rate_cap_bps {
        shared.rate_cap.store(cap as u64, Ordering::SeqCst);
        *shared.cap_epoch.lock().unwrap() = (Instant::now(), 0);
    }
    // Algorithm 1's ccLevel split is the first budget
    for (i, p) in shared.parts.iter().enumerate() {
        p.target.store(
            plan.channels.get(i).copied().unwrap_or(1).max(1),
            Ordering::SeqCst,
        );
    }
    let mut reports: Vec<ApplyReport> = Vec::new();
    let mut applied: Option<(usize, usize)> = None;
    let mut apply_cpu = |d: &Decision, act: &mut Actuator, reports: &mut Vec<ApplyReport>| {
        if let (Some(c), Some(f)) = (d.cores, d.freq_idx) {
            if applied != Some((c, f)) {
                applied = Some((c, f));
                let r = act.apply(c, f);
                if reports.last() != Some(&r) {
                    reports.push(r);
                }
            }
        }
    };
    apply_cpu(&decision, act, &mut reports);

    let mut log_file = match &opts.log {
        Some(p) => Some(
            File::create(p)
                .with_context(|| format!("cannot write interval log {}", p.display()))?,
        ),
        None => None,
    };
    let mut intervals = Vec::new();
    let mut last_tick = Instant::now();
    let mut last_bytes = 0u64;
    let mut last_cpu = cputime::self_cpu_s();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let n_jobs = shared.files.len();
    // SIGINT/SIGTERM end the transfer through the normal error path, so the actuator puts
    // frequencies, governors and CPUs back before the process exits
    {
        let sh = shared.clone();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot install a SIGTERM handler")?;
        tokio::spawn(async move {
            let which = tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
            sh.fail(format!("interrupted by {which}"));
        });
    }
    loop {
        tick.tick().await;
        if shared.failed() {
            break;
        }
        if shared.files_done.load(Ordering::SeqCst) >= n_jobs {
            break;
        }
        // keep each partition's channel count at its budget
        for (pi, p) in shared.parts.iter().enumerate() {
            while p.live.load(Ordering::SeqCst) < p.target.load(Ordering::SeqCst)
                && !p.chunks.lock().unwrap().is_empty()
            {
                p.live.fetch_add(1, Ordering::SeqCst);
                let sh = shared.clone();
                tokio::spawn(async move { channel_task(sh, pi).await });
            }
        }
        let rec = shared.received.load(Ordering::Relaxed);
        pb.set_position(prep.resumed_bytes + rec);
        let el = last_tick.elapsed();
        let timeout = if decision.state == State::SlowStart {
            slow_start_timeout(net.rtt_s, opts.interval)
        } else {
            opts.interval
        };
        if el >= timeout {
            // connections opened ahead that no channel took by now are not needed
            shared.spare.lock().unwrap().clear();
            let dt = el.as_secs_f64();
            last_tick = Instant::now();
            let bytes = rec - last_bytes;
            last_bytes = rec;
            let now_snap = meter.as_ref().and_then(|m| m.snapshot().ok());
            let meter_energy = match (meter.as_ref(), prev_snap.as_ref(), now_snap.as_ref()) {
                (Some(m), Some(a), Some(b)) => Some(m.between(a, b).total_j),
                _ => None,
            };
            prev_snap = now_snap;
            let cpu = cputime::self_cpu_s();
            let cores_now = decision.cores.unwrap_or(act.n_cores()).max(1);
            let load = ((cpu - last_cpu) / (dt * cores_now as f64)).clamp(0.0, 1.0);
            // the dedicated-host estimate of this interval (ME's process feedback)
            let proc_j = model.energy_j(n_cpus, dt, (cpu - last_cpu).max(0.0));
            proc_energy_j += proc_j;
            last_cpu = cpu;
            let energy = if use_process_feedback {
                Some(proc_j)
            } else {
                meter_energy
            };
            let obs = Observation {
                dt_s: dt,
                bytes,
                energy_j: energy,
                remaining: remaining_vec(&shared),
                cpu_load: Some(load),
                cap_held: shared.cap_waits.swap(0, Ordering::Relaxed) > 0,
            };
            decision = ctl.on_interval(&obs);
            for (i, p) in shared.parts.iter().enumerate() {
                p.target.store(decision.channels[i], Ordering::SeqCst);
            }
            let cap = decision.rate_cap_bps.map(|c| c as u64).unwrap_or(0);
            if shared.rate_cap.swap(cap, Ordering::SeqCst) != cap {
                *shared.cap_epoch.lock().unwrap() =
                    (Instant::now(), shared.received.load(Ordering::SeqCst));
            }
            apply_cpu(&decision, act, &mut reports);
            let (fif, chunks) = shared.files.iter().fold((0, 0), |(f, c), j| {
                let n = j.in_flight.load(Ordering::Relaxed);
                (f + (n > 0) as usize, c + n)
            });
            let log = IntervalLog {
                t_s: shared.started.elapsed().as_secs_f64(),
                bytes,
                throughput_mbps: obs.tput_bps() / 1e6,
                tuner: ctl.name(),
                state: format!("{:?}", decision.state),
                num_ch: decision.num_ch,
                channels: decision.channels.clone(),
                open_channels: shared
                    .parts
                    .iter()
                    .map(|p| p.live.load(Ordering::Relaxed))
                    .sum(),
                pipelining: shared.parts.iter().map(|p| p.pipelining).collect(),
                files_in_flight: fif,
                parallelism: if fif > 0 {
                    chunks as f64 / fif as f64
                } else {
                    0.0
                },
                cores: decision.cores,
                freq_khz: decision
                    .freq_idx
                    .and_then(|i| act.ladder_khz().get(i).copied()),
                cpu_load: Some(load),
                energy_j: energy,
                power_w: energy.map(|e| e / dt),
                rate_cap_mbps: decision.rate_cap_bps.map(|c| c / 1e6),
            };
            pb.set_message(format!(
                "{} {} ch={}",
                log.tuner, log.state, log.open_channels
            ));
            if let Some(f) = log_file.as_mut() {
                let _ = writeln!(f, "{}", serde_json::to_string(&log).expect("serializes"));
            }
            intervals.push(log);
        }
    }
    pb.finish_and_clear();
    let seconds = shared.started.elapsed().as_secs_f64();
    // the tail since the last interval
    {
        let cpu = cputime::self_cpu_s();
        proc_energy_j += model.energy_j(
            n_cpus,
            last_tick.elapsed().as_secs_f64(),
            (cpu - last_cpu).max(0.0),
        );
    }
    if let Some(msg) = shared.fatal.lock().unwrap().clone() {
        bail!("{msg} (partial data kept; rerun the same command to resume)");
    }
    let end_snap = meter.as_ref().and_then(|m| m.snapshot().ok());
    let cpu_s = cputime::self_cpu_s() - cpu_at_start;
    let received = shared.received.load(Ordering::SeqCst);
    let system = match (meter.as_ref(), snap0.as_ref(), end_snap.as_ref()) {
        (Some(m), Some(a), Some(b)) => Some(m.between(a, b)),
        _ => None,
    };
    let (energy, energy_note) = match &system {
        Some(r) => (
            Some(EnergySummary {
                total_j: r.total_j,
                mean_power_w: r.mean_power_w(),
                joules_per_gb: (received > 0).then(|| r.total_j / (received as f64 / 1e9)),
                mechanism: format!("{:?}", r.mechanism).to_lowercase(),
                estimated: r.estimated,
                model: r.model.clone(),
                provenance: r.provenance_label(),
                scope: "whole machine (all processes), not this transfer alone",
            }),
            None,
        ),
        None => (None, Some("no energy meter available".to_string())),
    };
    // the share's capacity is the whole machine the meter measures, not the CPUs we may use
    let machine_cpus = wattio_energy::cpu::online_cpu_count(&opts.root)
        .ok()
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(n_cpus);
    let throughput_bps = if seconds > 0.0 {
        received as f64 * 8.0 / seconds
    } else {
        0.0
    };
    Ok(Summary {
        source: opts.source.clone(),
        dest: opts.dest.display().to_string(),
        sla: opts.sla.name(),
        tuner: ctl.name().to_string(),
        files: n_files,
        files_skipped: prep.skipped,
        files_verified_checksum: shared.verified.load(Ordering::SeqCst),
        total_bytes,
        bytes: received,
        resumed_bytes: prep.resumed_bytes,
        seconds,
        throughput_bps,
        throughput_mbps: throughput_bps / 1e6,
        reconnects: shared.reconnects.load(Ordering::SeqCst),
        energy,
        energy_note,
        energy_process: ProcessEnergy::new(
            proc_energy_j,
            cpu_s,
            received,
            &model,
            system.as_ref(),
            machine_cpus,
        ),
        energy_feedback: if use_process_feedback {
            "process-estimate"
        } else {
            "meter"
        },
        net,
        params_initial: plan,
        cpu_actuator: reports,
        intervals,
    })
}

/// Verifies a fully received file and renames it into place.
fn finish_file(sh: &Shared, i: usize) {
    let j = &sh.files[i];
    // Ok(ranges to fetch again; empty when the file is good)
    let res = (|| -> Result<Vec<(u64, u64)>, String> {
        let f = j
            .part()
            .map_err(|e| format!("cannot open {}: {e}", j.part_path.display()))?;
        let md = f.metadata().map_err(|e| e.to_string())?;
        drop(f);
        j.close();
        if md.len() != j.size {
            return Err(format!(
                "{}: size {} but expected {}",
                j.rel,
                md.len(),
                j.size
            ));
        }
        if let Some(b) = &j.blocks {
            let bad = bad_blocks(j, b)
                .map_err(|e| format!("cannot read back {}: {e}", j.part_path.display()))?;
            if !bad.is_empty() {
                return Ok(block_ranges(&bad, b.size, j.size));
            }
        } else if let Some(want) = &j.xxh3 {
            let got = checksum::file_xxh3(&j.part_path).map_err(|e| e.to_string())?;
            if &got != want {
                return Ok(vec![(0, j.size)]);
            }
        }
        std::fs::rename(&j.part_path, &j.final_path)
            .map_err(|e| format!("cannot rename into {}: {e}", j.final_path.display()))?;
        let _ = std::fs::remove_file(&j.done_path);
        Ok(Vec::new())
    })();
    match res {
        Ok(refetch) if refetch.is_empty() => {
            if j.xxh3.is_some() || j.blocks.is_some() {
                sh.verified.fetch_add(1, Ordering::SeqCst);
            }
            sh.files_done.fetch_add(1, Ordering::SeqCst);
        }
        Ok(refetch) => {
            // checksum mismatch: fetch the bad blocks (or the whole file) once more, then give up
            if j.checksum_retry.swap(true, Ordering::SeqCst) {
                sh.fail(format!(
                    "{}: checksum mismatch twice; the server's file changed or is corrupt",
                    j.rel
                ));
                return;
            }
            let _ = std::fs::remove_file(&j.done_path);
            let again: u64 = refetch.iter().map(|r| r.1).sum();
            if let Some(b) = &j.blocks {
                let mut sums = j.block_sums.lock().unwrap();
                for &(o, l) in &refetch {
                    for i in o / b.size..(o + l).div_ceil(b.size) {
                        sums[i as usize] = None;
                    }
                }
            }
            j.remaining.store(again, Ordering::SeqCst);
            // any partition can carry it: prefer one that still has channels
            let pi = sh
                .parts
                .iter()
                .position(|p| p.target.load(Ordering::SeqCst) > 0)
                .unwrap_or(0);
            sh.parts[pi].remaining.fetch_add(again, Ordering::SeqCst);
            sh.parts[pi].target.fetch_max(1, Ordering::SeqCst);
            let mut q = sh.parts[pi].chunks.lock().unwrap();
            for (offset, len) in refetch {
                q.push_back(Chunk {
                    file: i,
                    offset,
                    len,
                });
            }
        }
        Err(e) => sh.fail(e),
    }
}

/// Indexes of the blocks of a received file whose digest differs from the listing's; blocks
/// not hashed on arrival are hashed from the file now.
fn bad_blocks(j: &FileJob, want: &BlockDigests) -> std::io::Result<Vec<u64>> {
    let mut sums = j.block_sums.lock().unwrap().clone();
    let unseen: Vec<u64> = (0..sums.len() as u64)
        .filter(|&i| sums[i as usize].is_none())
        .collect();
    if !unseen.is_empty() {
        let f = File::open(&j.part_path)?;
        let hashed = checksum::file_blocks_xxh3(&f, want.size, &unseen)?;
        for (i, d) in unseen.into_iter().zip(hashed) {
            sums[i as usize] = Some(d);
        }
    }
    Ok((0..sums.len() as u64)
        .filter(|&i| sums[i as usize] != want.xxh3.get(i as usize).copied())
        .collect())
}

/// Byte ranges of the given blocks (ascending indexes), adjacent blocks merged.
fn block_ranges(blocks: &[u64], block_size: u64, file_size: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &i in blocks {
        let start = i * block_size;
        let end = ((i + 1) * block_size).min(file_size);
        match out.last_mut() {
            Some(last) if last.0 + last.1 == start => last.1 = end - last.0,
            _ => out.push((start, end - start)),
        }
    }
    out
}

/// Response head fields the engine needs.
struct Head {
    status: u16,
    content_length: Option<u64>,
    content_range: Option<(u64, u64, u64)>,
    close: bool,
    headers: Vec<(String, String)>,
}

#[derive(Default)]
struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl ReadBuf {
    fn avail(&self) -> &[u8] {
        &self.buf[self.pos..]
    }
    fn take(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.buf.len() - self.pos);
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        v
    }
    async fn read_head(&mut self, s: &mut TcpStream) -> anyhow::Result<Head> {
        loop {
            if self.pos > 0 && self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            }
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            match r.parse(self.avail()) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = r.code.unwrap_or(0);
                    let mut h = Head {
                        status,
                        content_length: None,
                        content_range: None,
                        close: r.version == Some(0),
                        headers: Vec::new(),
                    };
                    for x in r.headers.iter() {
                        let k = x.name.to_ascii_lowercase();
                        let v = String::from_utf8_lossy(x.value).to_string();
                        match k.as_str() {
                            "content-length" => h.content_length = v.trim().parse().ok(),
                            "content-range" => h.content_range = parse_content_range(&v),
                            "connection" => {
                                let l = v.to_ascii_lowercase();
                                if l.contains("close") {
                                    h.close = true;
                                } else if l.contains("keep-alive") {
                                    h.close = false;
                                }
                            }
                            "transfer-encoding" => {
                                bail!("server sent Transfer-Encoding {v}; only Content-Length bodies are supported")
                            }
                            _ => {}
                        }
                        h.headers.push((k, v));
                    }
                    self.pos += n;
                    return Ok(h);
                }
                Ok(httparse::Status::Partial) => {
                    if self.avail().len() > 64 * 1024 {
                        bail!("response head larger than 64 KiB");
                    }
                }
                Err(e) => bail!("malformed response from server: {e}"),
            }
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            let mut tmp = [0u8; 16 * 1024];
            let n = s.read(&mut tmp).await?;
            if n == 0 {
                bail!("server closed the connection");
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }
}

/// Parses `bytes a-b/size`.
fn parse_content_range(v: &str) -> Option<(u64, u64, u64)> {
    let r = v.trim().strip_prefix("bytes ")?;
    let (ab, size) = r.split_once('/')?;
    let (a, b) = ab.split_once('-')?;
    Some((
        a.trim().parse().ok()?,
        b.trim().parse().ok()?,
        size.trim().parse().ok()?,
    ))
}

enum ChannelEnd {
    /// No more work or over budget.
    Done,
    /// The server ended the connection cleanly (`Connection: close`, e.g. nginx's
    /// keepalive_requests): reconnect at once, no backoff.
    Reconnect,
}

async fn channel_task(sh: Arc<Shared>, pi: usize) {
    let mut failures = 0u32;
    let mut released = false;
    loop {
        if sh.failed() || released {
            break;
        }
        match run_connection(&sh, pi, &mut failures, &mut released).await {
            Ok(ChannelEnd::Done) => break,
            Ok(ChannelEnd::Reconnect) => continue,
            Err(e) => {
                failures += 1;
                sh.reconnects.fetch_add(1, Ordering::Relaxed);
                if failures > sh.retries {
                    sh.fail(format!(
                        "giving up on {} after {} attempts: {e:#}",
                        sh.url.authority(),
                        failures
                    ));
                    break;
                }
                // exponential backoff: 200 ms after the first failure, doubling to 2 s, plus a little spread per channel
                let base = 100u64.saturating_mul(1 << failures.min(5)).min(2000);
                let spread = (pi as u64 * 37 + failures as u64 * 11) % 50;
                tokio::time::sleep(Duration::from_millis(base + spread)).await;
            }
        }
    }
    if !released {
        sh.parts[pi].live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Takes the next chunk unless the partition is over its channel budget. A channel over
/// budget gives up its slot with a CAS on `live` (so exactly the surplus channels leave) and
/// sets `released`; it then drains what it has in flight and ends.
fn next_chunk(sh: &Shared, pi: usize, leaving: &mut bool, released: &mut bool) -> Option<Chunk> {
    let p = &sh.parts[pi];
    if *leaving {
        return None;
    }
    loop {
        let live = p.live.load(Ordering::SeqCst);
        if live <= p.target.load(Ordering::SeqCst).max(1) {
            break;
        }
        if p.live
            .compare_exchange(live, live - 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            *leaving = true;
            *released = true;
            return None;
        }
    }
    let c = p.chunks.lock().unwrap().pop_front();
    if c.is_none() {
        *leaving = true;
    }
    c
}

/// Whether a channel with `in_flight` requests should queue one more, given the chunks left in
/// its partition's queue and the channels drawing from it. Ours: once fewer chunks are left
/// than channels, a second request would make one channel fetch two chunks in a row while
/// another sits idle, and the transfer's end waits for the slowest channel; the round trip a
/// channel then spends between its last two requests costs less (docs/transfer.md, *Engine*).
fn pipeline_another(in_flight: usize, queued: usize, live_channels: usize) -> bool {
    in_flight == 0 || queued >= live_channels
}

fn requeue(sh: &Shared, pi: usize, c: Chunk) {
    sh.files[c.file].in_flight.fetch_sub(1, Ordering::Relaxed);
    if c.len > 0 {
        sh.parts[pi].chunks.lock().unwrap().push_front(c);
    }
}

fn record_done(sh: &Shared, c: &Chunk, len: u64) {
    if len == 0 {
        return;
    }
    sh.files[c.file].log_done(c.offset, len);
}

async fn pace(sh: &Shared) {
    // sleep in short steps so a lifted or changed cap takes effect quickly
    loop {
        let cap = sh.rate_cap.load(Ordering::Relaxed);
        if cap == 0 {
            return;
        }
        let (t0, b0) = *sh.cap_epoch.lock().unwrap();
        let got = sh.received.load(Ordering::Relaxed).saturating_sub(b0);
        let due = Duration::from_secs_f64(got as f64 * 8.0 / cap as f64);
        let el = t0.elapsed();
        if due <= el {
            return;
        }
        sh.cap_waits.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep((due - el).min(Duration::from_millis(100))).await;
    }
}

async fn run_connection(
    sh: &Arc<Shared>,
    pi: usize,
    failures: &mut u32,
    released: &mut bool,
) -> anyhow::Result<ChannelEnd> {
    let mut leaving = false;
    // nothing to do: do not even connect
    let first = match next_chunk(sh, pi, &mut leaving, released) {
        Some(c) => c,
        None => return Ok(ChannelEnd::Done),
    };
    sh.files[first.file]
        .in_flight
        .fetch_add(1, Ordering::Relaxed);
    let mut inflight: VecDeque<Chunk> = VecDeque::new();
    inflight.push_back(first);
    // a spare left idle for long (a slow resume check) may have been closed by the server
    let spare = sh
        .spare
        .lock()
        .unwrap()
        .pop()
        .filter(|(t, _)| t.elapsed() < Duration::from_secs(2));
    let connected = match spare {
        Some((_, s)) => Ok(Ok(s)),
        None => {
            tokio::time::timeout(
                Duration::from_secs(10),
                TcpStream::connect(sh.url.connect_addr()),
            )
            .await
        }
    };
    let mut s = match connected {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            requeue(sh, pi, first);
            return Err(anyhow!("cannot connect to {}: {e}", sh.url.authority()));
        }
        Err(_) => {
            requeue(sh, pi, first);
            return Err(anyhow!("connecting to {} timed out", sh.url.authority()));
        }
    };
    let _ = s.set_nodelay(true);
    let mut rb = ReadBuf::default();
    let mut sent = 0usize; // requests of `inflight` already written
    let pp = sh.parts[pi].pipelining;
    let mut body = vec![0u8; 256 * 1024];
    let res: anyhow::Result<ChannelEnd> = async {
        loop {
            // fill the pipeline
            while inflight.len() < pp {
                let queued = sh.parts[pi].chunks.lock().unwrap().len();
                if !pipeline_another(inflight.len(), queued, sh.parts[pi].live.load(Ordering::SeqCst)) {
                    break;
                }
                match next_chunk(sh, pi, &mut leaving, released) {
                    Some(c) => {
                        sh.files[c.file].in_flight.fetch_add(1, Ordering::Relaxed);
                        inflight.push_back(c);
                    }
                    None => break,
                }
            }
            if sent < inflight.len() {
                let mut out = String::new();
                for c in inflight.iter().skip(sent) {
                    let j = &sh.files[c.file];
                    out.push_str(&format!(
                        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\nRange: bytes={}-{}\r\n\r\n",
                        j.url_path,
                        sh.url.authority(),
                        c.offset,
                        c.offset + c.len - 1
                    ));
                }
                s.write_all(out.as_bytes()).await?;
                sent = inflight.len();
            }
            let Some(c) = inflight.front_mut() else {
                return Ok(ChannelEnd::Done);
            };
            let head = tokio::time::timeout(Duration::from_secs(60), rb.read_head(&mut s))
                .await
                .map_err(|_| anyhow!("server silent for 60 s"))??;
            let j = &sh.files[c.file];
            match head.status {
                206 => {
                    let want = (c.offset, c.offset + c.len - 1, j.size);
                    if head.content_range != Some(want) {
                        sh.fail(format!(
                            "{}: server answered range {:?} for bytes {}-{}/{}; the file changed on the server?",
                            j.rel, head.content_range, want.0, want.1, want.2
                        ));
                        return Ok(ChannelEnd::Done);
                    }
                }
                200 if c.offset == 0 && c.len == j.size && head.content_length == Some(j.size) => {}
                200 => {
                    sh.fail(format!(
                        "{}: the server ignores Range requests; wattio needs HTTP Range support",
                        j.rel
                    ));
                    return Ok(ChannelEnd::Done);
                }
                404 | 403 | 410 | 416 => {
                    sh.fail(format!(
                        "{}: HTTP {} from the server; the dataset changed since its listing was made",
                        j.rel, head.status
                    ));
                    return Ok(ChannelEnd::Done);
                }
                st => bail!("HTTP {st} for {}", j.rel),
            }
            if head.content_length != Some(c.len) {
                bail!("{}: Content-Length {:?} for a {}-byte range", j.rel, head.content_length, c.len);
            }
            // stream the body into the file at its offset
            let mut written = 0u64;
            let mut block_hasher = j
                .blocks
                .as_ref()
                .map(|b| checksum::BlockHasher::new(b.size, j.size, c.offset));
            let r: anyhow::Result<()> = async {
                let part = j
                    .part()
                    .with_context(|| format!("cannot write {}; check the disk", j.part_path.display()))?;
                while written < c.len {
                    pace(sh).await;
                    // smaller reads while paced keep the bursts above the cap small
                    let step = if sh.rate_cap.load(Ordering::Relaxed) > 0 {
                        32 * 1024
                    } else {
                        body.len()
                    };
                    let want = ((c.len - written) as usize).min(step);
                    let n = if !rb.avail().is_empty() {
                        let t = rb.take(want);
                        body[..t.len()].copy_from_slice(&t);
                        t.len()
                    } else {
                        let n = tokio::time::timeout(Duration::from_secs(60), s.read(&mut body[..want]))
                            .await
                            .map_err(|_| anyhow!("server stalled for 60 s mid-body"))??;
                        if n == 0 {
                            bail!("server closed the connection mid-body");
                        }
                        n
                    };
                    // page-cache writes are short; doing them inline keeps the engine simple
                    part.write_all_at(&body[..n], c.offset + written)?;
                    // hashed while the bytes are still in cache: reading them back later costs
                    // a pass over memory per file
                    if let Some(h) = block_hasher.as_mut() {
                        h.update(&body[..n], |i, d| j.store_block_sum(i, d));
                    }
                    written += n as u64;
                    sh.received.fetch_add(n as u64, Ordering::Relaxed);
                }
                Ok(())
            }
            .await;
            if let Err(e) = r {
                // keep what arrived; requeue the rest
                record_done(sh, c, written);
                j.remaining.fetch_sub(written, Ordering::SeqCst);
                sh.parts[pi].remaining.fetch_sub(written, Ordering::SeqCst);
                c.offset += written;
                c.len -= written;
                return Err(e);
            }
            let c = inflight.pop_front().expect("front exists");
            sent -= 1;
            *failures = 0;
            record_done(sh, &c, c.len);
            j.in_flight.fetch_sub(1, Ordering::Relaxed);
            sh.parts[pi].remaining.fetch_sub(c.len, Ordering::SeqCst);
            if j.remaining.fetch_sub(c.len, Ordering::SeqCst) == c.len {
                let sh2 = sh.clone();
                let fi = c.file;
                tokio::task::spawn_blocking(move || finish_file(&sh2, fi)).await?;
            }
            if head.close {
                // requeue what was pipelined behind and reconnect
                for c in inflight.drain(..).rev() {
                    requeue(sh, pi, c);
                }
                sent = 0;
                if leaving || sh.parts[pi].chunks.lock().unwrap().is_empty() {
                    return Ok(ChannelEnd::Done);
                }
                return Ok(ChannelEnd::Reconnect);
            }
        }
    }
    .await;
    if res.is_err() {
        for c in inflight.drain(..).rev() {
            requeue(sh, pi, c);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = HttpUrl::parse("http://127.0.0.1:8080/a/b").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/a/b")
        );
        let u = HttpUrl::parse("http://host").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        let u = HttpUrl::parse("http://[::1]:9/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.authority()),
            ("::1", "[::1]:9".to_string())
        );
        assert!(HttpUrl::parse("https://x/")
            .unwrap_err()
            .to_string()
            .contains("only http://"));
        assert!(HttpUrl::parse("http://x:port/").is_err());
    }

    #[test]
    fn slow_start_timeout_is_six_rtts_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(slow_start_timeout(0.036, ms(1000)), ms(216));
        assert_eq!(
            slow_start_timeout(0.0001, ms(1000)),
            ms(200),
            "floor on short paths"
        );
        assert_eq!(
            slow_start_timeout(0.5, ms(1000)),
            ms(1000),
            "never past --interval"
        );
        assert_eq!(slow_start_timeout(0.036, ms(100)), ms(100));
    }

    #[test]
    fn missing_ranges_subtracts_done() {
        assert_eq!(missing_ranges(10, &[]), vec![(0, 10)]);
        assert_eq!(missing_ranges(10, &[(0, 4), (6, 2)]), vec![(4, 2), (8, 2)]);
        assert_eq!(
            missing_ranges(10, &[(2, 3), (0, 3), (5, 5)]),
            Vec::<(u64, u64)>::new()
        );
        assert_eq!(missing_ranges(10, &[(8, 100)]), vec![(0, 8)]);
        assert_eq!(missing_ranges(0, &[]), Vec::<(u64, u64)>::new());
    }

    #[test]
    fn split_ranges_by_plan() {
        assert_eq!(
            split_ranges(&[(0, 10)], Split::Chunk(4), 10, None),
            vec![(0, 4), (4, 4), (8, 2)]
        );
        assert_eq!(
            split_ranges(&[(0, 10)], Split::Parts(2), 10, None),
            vec![(0, 5), (5, 5)]
        );
        assert_eq!(
            split_ranges(&[(3, 7)], Split::Whole, 10, None),
            vec![(3, 7)]
        );
        // with checksum blocks of 4: pieces of 5 round to 4 and are cut at multiples of 4, so a
        // resumed range starting midway ends its first piece on a block boundary
        assert_eq!(
            split_ranges(&[(0, 10)], Split::Chunk(5), 10, Some(4)),
            vec![(0, 4), (4, 4), (8, 2)]
        );
        assert_eq!(
            split_ranges(&[(2, 8)], Split::Chunk(8), 10, Some(4)),
            vec![(2, 6), (8, 2)]
        );
        assert_eq!(
            split_ranges(&[(0, 10)], Split::Chunk(1), 10, Some(4)),
            vec![(0, 4), (4, 4), (8, 2)]
        );
    }

    #[test]
    fn first_channels_per_sla() {
        // 1 MiB windows over 36 ms: 233 Mbit/s a channel, 5 channels for 1 Gbit/s
        let mut net = NetParams {
            rtt_s: 0.036,
            bandwidth_bps: Some(1e9),
            window_bytes: 1 << 20,
            max_ch: 32,
        };
        assert_eq!(first_channels(Sla::MinEnergy, &net), 5);
        assert_eq!(first_channels(Sla::MaxThroughput, &net), 15);
        assert_eq!(first_channels(Sla::Target(400e6), &net), 2);
        net.max_ch = 8;
        assert_eq!(first_channels(Sla::MaxThroughput, &net), 8);
        // ME and EEMT open twice their first count at once, within --max-channels; EETT as many
        assert_eq!(opened_channels(Sla::MaxThroughput, &net), 8);
        net.max_ch = 32;
        assert_eq!(opened_channels(Sla::MaxThroughput, &net), 30);
        assert_eq!(opened_channels(Sla::MinEnergy, &net), 10);
        assert_eq!(opened_channels(Sla::Target(400e6), &net), 2);
    }

    #[test]
    fn pipelining_stops_when_fewer_chunks_than_channels_are_left() {
        assert!(pipeline_another(0, 0, 8), "an idle channel always asks");
        assert!(pipeline_another(1, 8, 8));
        assert!(!pipeline_another(1, 7, 8));
        assert!(!pipeline_another(2, 1, 3));
    }

    #[test]
    fn block_ranges_merge_neighbours() {
        assert_eq!(block_ranges(&[0, 1, 3, 4], 10, 45), vec![(0, 20), (30, 15)]);
        assert_eq!(block_ranges(&[], 10, 45), vec![]);
    }

    #[test]
    fn content_range() {
        assert_eq!(parse_content_range("bytes 0-9/100"), Some((0, 9, 100)));
        assert_eq!(parse_content_range("bytes */100"), None);
    }

    #[test]
    fn window_from_proc_fixture() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("proc/sys/net/ipv4");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("tcp_rmem"), "4096 131072 33554432\n").unwrap();
        std::fs::write(p.join("tcp_wmem"), "4096 16384 4194304\n").unwrap();
        assert_eq!(default_window(&SysRoot::new(d.path())), 4194304);
        assert_eq!(default_window(&SysRoot::new("/nonexistent")), 4 << 20);
    }

    #[test]
    fn process_energy_keeps_the_host_estimate_and_adds_the_attributed_share() {
        let model = wattio_energy::ModelParams::default();
        // 10 s on 4 CPUs, 2.5 CPU-s of ours, 2 GB; the meter saw 120 J on the whole machine.
        let host_j = model.energy_j(4, 10.0, 2.5);
        let report = wattio_meter::EnergyReport {
            duration_s: 10.0,
            mechanism: wattio_energy::Mechanism::Powercap,
            estimated: false,
            model: None,
            domains: vec![],
            total_j: 120.0,
            psys_j: None,
            gpu_j: None,
            gpu_label: None,
            read_errors: vec![],
        };
        let pe = ProcessEnergy::new(host_j, 2.5, 2_000_000_000, &model, Some(&report), 4);
        assert_eq!(pe.total_j, host_j);
        assert_eq!(pe.joules_per_gb, Some(host_j / 2.0));
        assert_eq!(pe.scope, HOST_ESTIMATE_SCOPE);
        assert!(pe.provenance.starts_with("estimated (model: ccf-linear"));
        let a = pe.attributed_j.unwrap();
        assert_eq!(a, wattio_energy::attribution::share_j(120.0, 4, 10.0, 2.5));
        // 120 J × 2.5 / (4 × 10) = 7.5 J, within the window's total.
        assert!((a - 7.5).abs() < 1e-12 && a <= report.total_j);
        assert_eq!(pe.attributed_joules_per_gb, Some(a / 2.0));
        assert_eq!(
            pe.attributed_label.as_deref(),
            Some("measured (powercap), attributed (cpu-time share)")
        );
        let none = ProcessEnergy::new(host_j, 2.5, 0, &model, None, 4);
        assert!(none.attributed_j.is_none() && none.attributed_label.is_none());
        assert!(none.joules_per_gb.is_none());
    }
}
