//! The control loop. [`transfer_async`] runs a transfer in stages: `start_up` (the first URL,
//! the RTT, DEST, the meter and the first connections opening in the background), discovery
//! (`discover`), `Incoming::before_plan` (the files found so far prepared against DEST and
//! what earlier runs left), `plan_transfer` (Algorithm 1's plan, the controller, the shared
//! state), `Tuning::run` (the tuning intervals: energy and CPU feedback, channel budgets, rate
//! cap, CPU actuator, interval log; files discovery finds meanwhile join) and `summarise`.

use super::channel::channel_task;
use super::conn::{measure_rtt, spawn_preconnect, Connector, Stream};
use super::dest::{is_reserved, with_suffix, Dest, Entry, DONE_SUFFIX, PART_SUFFIX};
use super::discover::{discover, Discovered};
use super::fetch::{head_many, probe_origin, HEAD_CONNECTIONS, HEAD_DEPTH};
use super::files::{url_string, Batch, Discovery, FileJob, Source, SourceFile, SourceKind};
use super::jobs::Jobs;
use super::options::{default_window, EnergyFeedback, TransferOptions};
use super::queue::{build_queues, enqueue_found};
use super::resume::{prepare, worth_asking, EarlierRuns, Prepared};
use super::source::first_url;
use super::state::{Shared, SPARE_MAX_AGE};
use super::stream::{stream_file, Streamed};
use super::url::HttpUrl;
use super::verify::finish_file;
use crate::actuator::{ApplyReport, CpuActuator};
use crate::error::{fail, failure, Failure, Kind};
use crate::summary::{
    ChecksumFileReport, EnergySummary, IntervalLog, ProcessEnergy, TransferSummary, Verification,
    UNVERIFIED_LISTED,
};
use anyhow::Context;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use wattio_energy::attribution::cputime;
use wattio_energy::EnergyError;
use wattio_meter::{Meter, MeterConfig, Snapshot};
use wattio_progress::Cancel;
use wattio_tuner::{
    initial_plan, Controller, Decision, NetParams, Observation, StartRules, Timeouts, TransferPlan,
    TunerChoice, MIN_CHUNK,
};

pub(super) async fn transfer_async(
    opts: &TransferOptions,
    cancel: &Cancel,
    act: &mut CpuActuator,
) -> anyhow::Result<TransferSummary> {
    let mut start = start_up(opts).await?;
    let needs_ranges = needs_ranges(&start.net, opts, &start.dest);
    let mut found = discover(
        &start.connector,
        opts,
        &start.url,
        start.preconnect.take(),
        &needs_ranges,
    )
    .await?;
    let spare = std::mem::take(&mut found.spare);
    let (unsized_tx, unsized_rx) = unbounded_channel();
    let (mut incoming, prep) =
        Incoming::before_plan(found, Box::new(needs_ranges), unsized_tx, &start, opts).await?;
    let (ctl, plan, shared) = plan_transfer(&start, &incoming, prep, spare, opts, act);
    let streaming = spawn_streaming(&shared, &start.dest, unsized_rx);
    // files with nothing missing (complete .wattio-part from an interrupted rename)
    for i in 0..shared.files.len() {
        if shared.files[i].remaining.load(Ordering::SeqCst) == 0 {
            let sh = shared.clone();
            tokio::task::spawn_blocking(move || finish_file(&sh, i)).await?;
        }
    }
    let meter = open_meter(start.meter_open.take(), opts).await?;
    let mut energy = EnergyBook::start(meter, opts, act);
    let mut tuning = Tuning::start(ctl, plan, start.net, shared, &incoming, opts, act)?;
    tuning
        .run(cancel, act, &mut energy, &mut incoming, &streaming)
        .await?;
    let seconds = tuning.shared.started.elapsed().as_secs_f64();
    energy.tail(tuning.last_tick);
    // what arrived since the last interval, for a rerun (also after an error or a cancel)
    {
        let sh = tuning.shared.clone();
        tokio::task::spawn_blocking(move || sh.sync_records()).await?;
    }
    if let Some(mut f) = tuning.shared.fatal.lock().unwrap().take() {
        if !tuning.shared.fatal_advised.load(Ordering::SeqCst) {
            f.message += " (partial data kept; rerun the same command to resume)";
        }
        return Err(f.into());
    }
    let streamed = streaming.await?;
    Ok(summarise(tuning, energy, incoming, streamed, seconds, opts))
}

/// What the start-up opens before discovery: the first URL, the meter (opening in the
/// background), the connector, DEST, the network as the tuner sees it, and the first
/// channels' connections (opening in the background).
struct Startup {
    url: HttpUrl,
    meter_open: Option<JoinHandle<Result<Meter, EnergyError>>>,
    connector: Arc<Connector>,
    dest: Arc<Dest>,
    net: NetParams,
    rules: StartRules,
    preconnect: Option<JoinHandle<Vec<(Instant, Stream)>>>,
}

async fn start_up(opts: &TransferOptions) -> anyhow::Result<Startup> {
    let url = first_url(opts).await?;
    // The meter's discovery takes a while (it watches each counter for a moment to refuse dead
    // ones): it runs while the listing is fetched.
    let meter_open = opts.meter.then(|| {
        let cfg = MeterConfig {
            root: opts.root.clone(),
            ..MeterConfig::default()
        };
        tokio::task::spawn_blocking(move || Meter::open(&cfg))
    });
    let connector = Arc::new(Connector::new(opts.tls.clone(), named_origins(opts)));
    let dest = Arc::new(tokio::task::block_in_place(|| {
        Dest::open(&opts.dest, opts.fsync)
    })?);
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
    let rules = StartRules {
        tuner: opts.tuner,
        sla: opts.sla,
        max_ch: opts.max_ch,
        cpu_scaling: opts.cpu_scaling,
    };
    let opened = rules.preconnect(&net);
    let preconnect = (opened > 0).then(|| spawn_preconnect(&connector, &url, opened));
    Ok(Startup {
        url,
        meter_open,
        connector,
        dest,
        net,
        rules,
        preconnect,
    })
}

/// Whether a file is requested in pieces, so that its server must honour Range: when it is
/// larger than the plan's piece (the BDP, at least MIN_CHUNK; one block with a listing's block
/// sums), a baseline tuner cuts it into parts, or it resumes from a part file's finished
/// ranges. Servers of files all requested whole are not asked (one RTT saved at the start).
fn needs_ranges(
    net: &NetParams,
    opts: &TransferOptions,
    dest: &Arc<Dest>,
) -> impl Fn(&SourceFile) -> bool + Send + Sync + 'static {
    let piece = net.bdp_bytes().max(MIN_CHUNK);
    let parts_tuner = !matches!(opts.tuner, TunerChoice::Wattio);
    let dest = dest.clone();
    move |f: &SourceFile| {
        let cut = f.blocks.as_ref().map_or(piece, |b| b.size.min(piece));
        let resumes = || {
            let log = with_suffix(&f.rel, DONE_SUFFIX);
            matches!(dest.entry(&log), Ok(Some(Entry::File(_))))
        };
        parts_tuner || f.size > cut || resumes()
    }
}

/// Discovery as the transfer sees it: the source found so far, the rest of discovery while it
/// goes on, the [`Intake`] every file passes through, and what earlier runs left of the files
/// prepared so far.
struct Incoming {
    src: Source,
    more: Option<Discovery>,
    checksum_report: Option<ChecksumFileReport>,
    intake: Intake,
    needs_ranges: Box<dyn Fn(&SourceFile) -> bool + Send + Sync>,
    /// What earlier runs left, over every batch of files prepared.
    earlier: EarlierRuns,
}

impl Incoming {
    /// Takes in what discovery `found` before the plan (its spare connections aside) and
    /// prepares its sized files; files of unknown size go to `unsized_tx`.
    ///
    /// Before the plan, the files discovery has found already join it. A rerun can find every
    /// file known so far complete, which leaves Algorithm 1 no size to plan partitions by and a
    /// file found later no partition to join: then the walk's next files are waited for until
    /// one has bytes to fetch. A walk that has ended (a one-page index, often) leaves a plan of
    /// every file, whose size tells whether the transfer is short (see `StartRules`).
    async fn before_plan(
        found: Discovered,
        needs_ranges: Box<dyn Fn(&SourceFile) -> bool + Send + Sync>,
        unsized_tx: UnboundedSender<SourceFile>,
        start: &Startup,
        opts: &TransferOptions,
    ) -> anyhow::Result<(Incoming, Prepared)> {
        let Discovered {
            mut src,
            mut more,
            checksum_report,
            ..
        } = found;
        let connector = &start.connector;
        let mut intake = Intake::start(&mut src, unsized_tx, more.is_some(), &start.dest)?;
        let files = std::mem::take(&mut src.files);
        let mut prep = intake.prepare(files, &src, connector).await?;
        while let Some(rx) = more.as_mut() {
            let next = if prep.jobs.is_empty() {
                rx.recv().await
            } else {
                match rx.try_recv() {
                    Ok(batch) => Some(batch),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            match next {
                Some(batch) => {
                    let p = intake
                        .take(batch?, &mut src, None, connector, &needs_ranges, opts)
                        .await?;
                    prep.append(p);
                }
                None => {
                    more = None;
                    intake.unsized_tx = None;
                }
            }
        }
        let incoming = Incoming {
            src,
            more,
            checksum_report,
            intake,
            needs_ranges,
            earlier: prep.earlier.clone(),
        };
        Ok((incoming, prep))
    }

    /// Adds the files discovery found since the last tick to the running transfer; an error of
    /// discovery fails the transfer.
    async fn since_last_tick(
        &mut self,
        shared: &Arc<Shared>,
        plan: &TransferPlan,
        opts: &TransferOptions,
    ) -> anyhow::Result<()> {
        while let Some(rx) = self.more.as_mut() {
            let batch = match rx.try_recv() {
                Ok(Ok(b)) => b,
                Ok(Err(e)) => {
                    shared.fail_advised(Failure::classify(&e, None));
                    break;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.more = None;
                    self.intake.unsized_tx = None;
                    shared.discovering.store(false, Ordering::SeqCst);
                    break;
                }
            };
            let origins = Some(&shared.origins);
            let p = self
                .intake
                .take(
                    batch,
                    &mut self.src,
                    origins,
                    &shared.connector,
                    &self.needs_ranges,
                    opts,
                )
                .await?;
            self.earlier.add(&p.earlier);
            add_found(shared, plan, p).await?;
        }
        Ok(())
    }
}

/// Algorithm 1's plan of the files prepared so far, the controller, and the state the loop
/// and the channels share, with the prepared files in its file list and queues.
fn plan_transfer(
    start: &Startup,
    incoming: &Incoming,
    mut prep: Prepared,
    spare: Vec<(Instant, Stream)>,
    opts: &TransferOptions,
    act: &CpuActuator,
) -> (Controller, TransferPlan, Arc<Shared>) {
    let net = &start.net;
    let sizes: Vec<u64> = prep.jobs.iter().map(|j| j.size).collect();
    let base_plan = initial_plan(&sizes, net, opts.sla, act.n_cores());
    let n_freqs = act.ladder_khz().len().max(1);
    // Whether the transfer is short is judged on all the bytes it fetches: those of the plan
    // when it has every file; for a URL list still being sized, those of the lines sized so
    // far (complete files of a rerun count as lines with nothing to fetch) scaled to all its
    // lines.
    let sized_bytes: u64 = sizes.iter().sum();
    let n_files = incoming.intake.n_files;
    let transfer_bytes = match (incoming.more.is_none(), incoming.src.files_expected) {
        (true, _) => Some(sized_bytes),
        (false, Some(n)) if n_files > 0 => {
            Some((sized_bytes as u128 * n as u128 / n_files as u128) as u64)
        }
        _ => None,
    };
    let (ctl, plan) =
        start
            .rules
            .controller(&base_plan, net, act.n_cores(), n_freqs, transfer_bytes);
    let parts = build_queues(&plan, &prep);
    let jobs = Jobs::new();
    for j in std::mem::take(&mut prep.jobs) {
        jobs.push(j);
    }
    let src = &incoming.src;
    let shared = Arc::new(Shared {
        spare: Mutex::new(spare),
        discovering: AtomicBool::new(incoming.more.is_some()),
        connector: start.connector.clone(),
        url: src.origins[0].clone(),
        origins: Mutex::new(src.origins.clone()),
        kind: src.kind,
        files: jobs,
        parts,
        received: AtomicU64::new(0),
        files_done: AtomicUsize::new(0),
        verified: AtomicUsize::new(prep.earlier.verified),
        reconnects: AtomicU64::new(0),
        rate_cap: AtomicU64::new(0),
        cap_epoch: Mutex::new((Instant::now(), 0)),
        cap_waits: AtomicU64::new(0),
        fatal: Mutex::new(None),
        fatal_advised: AtomicBool::new(false),
        retries: opts.retries,
        started: Instant::now(),
        unsynced: Mutex::new(Vec::new()),
        restarted: Mutex::new(Vec::new()),
        restart_piece: plan.bdp_bytes.max(MIN_CHUNK),
    });
    (ctl, plan, shared)
}

/// A file of unknown size as it came.
struct StreamedFile {
    rel: String,
    /// It had a publisher digest, and it matched.
    published: bool,
    bytes: u64,
    /// It was complete from an earlier run.
    skipped: bool,
    /// That digest resists a forger (see [`strong`]).
    strong: bool,
}

/// Files of unknown size: one stream at a time beside the planned transfer.
fn spawn_streaming(
    shared: &Arc<Shared>,
    dest: &Arc<Dest>,
    mut todo: UnboundedReceiver<SourceFile>,
) -> JoinHandle<Vec<StreamedFile>> {
    let sh = shared.clone();
    let dest = dest.clone();
    tokio::spawn(async move {
        let mut done = Vec::new();
        while let Some(f) = todo.recv().await {
            if sh.failed() {
                break;
            }
            let origin = sh.origin(f.origin);
            // what the planned files still need of DEST
            let reserved = || {
                sh.parts
                    .iter()
                    .map(|p| p.remaining.load(Ordering::Relaxed))
                    .fold(0u64, u64::saturating_add)
            };
            let received = &sh.received;
            match stream_file(
                &sh.connector,
                &origin,
                &f,
                &dest,
                sh.retries,
                received,
                &reserved,
            )
            .await
            {
                Ok(Streamed::Refused(msg)) => {
                    sh.fail_advised(msg);
                    break;
                }
                Ok(Streamed::Fetched(n)) => done.push(StreamedFile::new(f, n, false)),
                Ok(Streamed::Skipped(n)) => done.push(StreamedFile::new(f, n, true)),
                Err(e) => {
                    sh.fail(Failure::classify(&e, Some(Kind::Unreachable)));
                    break;
                }
            }
        }
        // the publisher's digests of the streamed files that matched
        let verified = done.iter().filter(|f| f.published).count();
        sh.verified.fetch_add(verified, Ordering::SeqCst);
        done
    })
}

impl StreamedFile {
    fn new(f: SourceFile, bytes: u64, skipped: bool) -> StreamedFile {
        let strong = strong(&f);
        StreamedFile {
            published: f.expect.is_some(),
            rel: f.rel,
            bytes,
            skipped,
            strong,
        }
    }
}

/// The meter opened at the start, once it is ready; without one, ME holds its channel count.
async fn open_meter(
    meter_open: Option<JoinHandle<Result<Meter, EnergyError>>>,
    opts: &TransferOptions,
) -> anyhow::Result<Option<Meter>> {
    Ok(match meter_open {
        Some(task) => match task.await? {
            Ok(m) => Some(m),
            Err(e) => {
                opts.notices.tell(&super::Notice::Warning(format!(
                    "no energy meter ({e}); ME holds its channel count"
                )));
                None
            }
        },
        None => None,
    })
}

/// The transfer's energy as it goes: the meter's snapshots, and the process estimate that is
/// ME's feedback when no meter measures.
struct EnergyBook {
    meter: Option<Meter>,
    snap0: Option<Snapshot>,
    prev_snap: Option<Snapshot>,
    model: wattio_energy::ModelParams,
    use_process_feedback: bool,
    proc_energy_j: f64,
    /// The CPUs idle power is charged for.
    n_cpus: usize,
    cpu_at_start: f64,
    /// The process's CPU time at the last interval.
    last_cpu: f64,
}

impl EnergyBook {
    fn start(meter: Option<Meter>, opts: &TransferOptions, act: &CpuActuator) -> EnergyBook {
        let snap0 = meter.as_ref().and_then(|m| m.snapshot().ok());
        // The process estimate (ME's feedback without a measuring meter) keeps CCF's average
        // line rather than this machine's: it is the model `testbed exec --stats` charges every
        // tool with in `make bench-transfer`, so ME minimises what the energy-per-byte goal is
        // judged by. Its label names that model, so a summary beside a per-architecture meter
        // says both.
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
        // idle power is charged for every CPU the process may use, whatever Algorithm 3 does:
        // affinity does not power a core down, so charging only the active ones would credit
        // the scaler with savings the machine does not make
        let n_cpus = act.n_cores();
        let cpu_at_start = cputime::self_cpu_s();
        EnergyBook {
            meter,
            prev_snap: snap0.clone(),
            snap0,
            model,
            use_process_feedback,
            proc_energy_j: 0.0,
            n_cpus,
            cpu_at_start,
            last_cpu: cpu_at_start,
        }
    }

    /// One interval of `dt_s` on `cores_now` cores: the energy the tuner is fed (the meter's,
    /// or the process estimate) and the CPU load.
    fn interval(&mut self, dt_s: f64, cores_now: usize) -> (Option<f64>, f64) {
        let now_snap = self.meter.as_ref().and_then(|m| m.snapshot().ok());
        let meter_energy = match (
            self.meter.as_ref(),
            self.prev_snap.as_ref(),
            now_snap.as_ref(),
        ) {
            (Some(m), Some(a), Some(b)) => Some(m.between(a, b).total_j),
            _ => None,
        };
        self.prev_snap = now_snap;
        let cpu = cputime::self_cpu_s();
        let load = ((cpu - self.last_cpu) / (dt_s * cores_now as f64)).clamp(0.0, 1.0);
        // the dedicated-host estimate of this interval (ME's process feedback)
        let proc_j = self
            .model
            .energy_j(self.n_cpus, dt_s, (cpu - self.last_cpu).max(0.0));
        self.proc_energy_j += proc_j;
        self.last_cpu = cpu;
        let energy = if self.use_process_feedback {
            Some(proc_j)
        } else {
            meter_energy
        };
        (energy, load)
    }

    /// The tail since the last interval (which ended at `last_tick`).
    fn tail(&mut self, last_tick: Instant) {
        let cpu = cputime::self_cpu_s();
        self.proc_energy_j += self.model.energy_j(
            self.n_cpus,
            last_tick.elapsed().as_secs_f64(),
            (cpu - self.last_cpu).max(0.0),
        );
    }
}

/// The energy figures of the summary.
struct EnergyFigures {
    energy: Option<EnergySummary>,
    energy_note: Option<String>,
    energy_process: ProcessEnergy,
    energy_feedback: String,
}

impl EnergyBook {
    /// The summary's energy figures, at the end of a transfer that received `received` bytes.
    fn figures(&self, received: u64, opts: &TransferOptions) -> EnergyFigures {
        let meter = self.meter.as_ref();
        let end_snap = meter.and_then(|m| m.snapshot().ok());
        let cpu_s = cputime::self_cpu_s() - self.cpu_at_start;
        let system = match (meter, self.snap0.as_ref(), end_snap.as_ref()) {
            (Some(m), Some(a), Some(b)) => Some(m.between(a, b)),
            _ => None,
        };
        let (energy, energy_note) = match &system {
            Some(r) => (
                Some(EnergySummary {
                    total_j: r.total_j,
                    mean_power_w: r.mean_power_w(),
                    joules_per_gb: (received > 0).then(|| r.total_j / (received as f64 / 1e9)),
                    source: r.provenance.clone(),
                    provenance: r.provenance_label(),
                    scope: "whole machine (all processes), not this transfer alone".into(),
                }),
                None,
            ),
            None => (None, Some("no energy meter available".to_string())),
        };
        // the share's capacity is the whole machine the meter measures, not the CPUs we may use
        let machine_cpus = wattio_energy::attribution::machine_cpus(&opts.root);
        EnergyFigures {
            energy,
            energy_note,
            energy_process: ProcessEnergy::new(
                self.proc_energy_j,
                cpu_s,
                received,
                &self.model,
                system.as_ref(),
                machine_cpus,
            ),
            energy_feedback: if self.use_process_feedback {
                "process-estimate"
            } else {
                "meter"
            }
            .into(),
        }
    }
}

/// The CPU actuator's steps: the cores and frequency applied last, and each outcome that
/// differed from the one before.
#[derive(Default)]
struct CpuSteps {
    applied: Option<(usize, usize)>,
    reports: Vec<ApplyReport>,
}

impl CpuSteps {
    /// Applies a decision's cores and frequency, when it names both and they changed.
    fn apply(&mut self, d: &Decision, act: &mut CpuActuator) {
        if let (Some(c), Some(f)) = (d.cores, d.freq_idx) {
            if self.applied != Some((c, f)) {
                self.applied = Some((c, f));
                let r = act.apply(c, f);
                if self.reports.last() != Some(&r) {
                    self.reports.push(r);
                }
            }
        }
    }
}

/// Each partition's bytes still to fetch.
fn remaining(sh: &Shared) -> Vec<u64> {
    sh.parts
        .iter()
        .map(|p| p.remaining.load(Ordering::SeqCst))
        .collect()
}

/// The control loop's state: the controller and its last decision, the CPU actuator's steps,
/// the interval log, the progress shown, and where the last interval ended.
struct Tuning<'a> {
    opts: &'a TransferOptions,
    shared: Arc<Shared>,
    ctl: Controller,
    plan: TransferPlan,
    net: NetParams,
    timeouts: Timeouts,
    decision: Decision,
    cpu: CpuSteps,
    log_file: Option<File>,
    intervals: Vec<IntervalLog>,
    progress: super::TransferProgress,
    last_tick: Instant,
    last_bytes: u64,
}

impl<'a> Tuning<'a> {
    /// The first decision (Algorithm 1's ccLevel split is the first budget) applied, and the
    /// interval log opened.
    fn start(
        ctl: Controller,
        plan: TransferPlan,
        net: NetParams,
        shared: Arc<Shared>,
        incoming: &Incoming,
        opts: &'a TransferOptions,
        act: &mut CpuActuator,
    ) -> anyhow::Result<Tuning<'a>> {
        let timeouts = Timeouts::new(net.rtt_s, opts.interval);
        let progress = super::TransferProgress {
            planned_bytes: incoming.intake.planned_bytes,
            total_known: incoming.more.is_none(),
            done_bytes: incoming.earlier.resumed_bytes,
            status: None,
            finished: false,
        };
        opts.progress.tell(&progress);
        let decision = ctl.initial(&remaining(&shared));
        if let Some(cap) = decision.rate_cap_bps {
            shared.rate_cap.store(cap as u64, Ordering::SeqCst);
            *shared.cap_epoch.lock().unwrap() = (Instant::now(), 0);
        }
        for (i, p) in shared.parts.iter().enumerate() {
            p.target.store(
                plan.channels.get(i).copied().unwrap_or(1).max(1),
                Ordering::SeqCst,
            );
        }
        let mut cpu = CpuSteps::default();
        cpu.apply(&decision, act);
        let log_file = match &opts.log {
            Some(p) => Some(
                File::create(p)
                    .with_context(|| format!("cannot write interval log {}", p.display()))?,
            ),
            None => None,
        };
        Ok(Tuning {
            opts,
            shared,
            ctl,
            plan,
            net,
            timeouts,
            decision,
            cpu,
            log_file,
            intervals: Vec::new(),
            progress,
            last_tick: Instant::now(),
            last_bytes: 0,
        })
    }

    /// Runs the loop until every file is done (discovery and the streams too), or the transfer
    /// failed or was cancelled: every 20 ms it takes in the files discovery found, keeps each
    /// partition's channel count at its budget and tells the progress; every timeout it runs
    /// a tuning interval.
    async fn run(
        &mut self,
        cancel: &Cancel,
        act: &mut CpuActuator,
        energy: &mut EnergyBook,
        incoming: &mut Incoming,
        streaming: &JoinHandle<Vec<StreamedFile>>,
    ) -> anyhow::Result<()> {
        let shared = self.shared.clone();
        energy.last_cpu = cputime::self_cpu_s();
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            // A cancel ends the transfer through the normal error path, so the actuator puts
            // frequencies, governors and CPUs back before the caller goes on.
            if cancel.is_set() {
                shared.fail(failure!(Cancelled, "the transfer was cancelled"));
            }
            if shared.failed() {
                break;
            }
            // files the index walk found since the last tick
            incoming
                .since_last_tick(&shared, &self.plan, self.opts)
                .await?;
            if shared.failed() {
                break;
            }
            if incoming.more.is_none()
                && shared.files_done.load(Ordering::SeqCst) >= shared.files.len()
                && streaming.is_finished()
            {
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
            self.progress.planned_bytes = incoming.intake.planned_bytes;
            self.progress.total_known = incoming.more.is_none();
            self.progress.done_bytes = incoming.earlier.resumed_bytes + rec;
            self.opts.progress.tell(&self.progress);
            let el = self.last_tick.elapsed();
            let timeout = self.timeouts.for_state(self.decision.state);
            if el >= timeout {
                self.interval(el, timeout, rec, act, energy).await?;
            }
        }
        self.progress.done_bytes =
            incoming.earlier.resumed_bytes + shared.received.load(Ordering::Relaxed);
        self.progress.finished = true;
        self.opts.progress.tell(&self.progress);
        Ok(())
    }

    /// A tuning interval that lasted `el` (`timeout` the state's): the tuner decides on what
    /// it observed (bytes, energy, CPU load, the rate cap holding reads back), the decision's
    /// budgets, rate cap and CPU setting are applied, and the interval is logged.
    async fn interval(
        &mut self,
        el: Duration,
        timeout: Duration,
        rec: u64,
        act: &mut CpuActuator,
        energy: &mut EnergyBook,
    ) -> anyhow::Result<()> {
        let shared = self.shared.clone();
        // connections opened ahead that no channel took by now are not needed, nor those left
        // by channels an interval ago
        let keep = shared.discovering.load(Ordering::SeqCst);
        shared
            .spare
            .lock()
            .unwrap()
            .retain(|(at, _)| keep && at.elapsed() < timeout.min(SPARE_MAX_AGE));
        // what arrived this interval becomes resumable: its data synced, then its records
        if !shared.unsynced.lock().unwrap().is_empty() {
            let sh = shared.clone();
            tokio::task::spawn_blocking(move || sh.sync_records()).await?;
        }
        let dt = el.as_secs_f64();
        self.last_tick = Instant::now();
        let bytes = rec - self.last_bytes;
        self.last_bytes = rec;
        let cores_now = self.decision.cores.unwrap_or(act.n_cores()).max(1);
        let (energy_j, load) = energy.interval(dt, cores_now);
        let obs = Observation {
            dt_s: dt,
            bytes,
            energy_j,
            remaining: remaining(&shared),
            cpu_load: Some(load),
            cap_held: shared.cap_waits.swap(0, Ordering::Relaxed) > 0,
        };
        self.decision = self.ctl.on_interval(&obs);
        for (i, p) in shared.parts.iter().enumerate() {
            p.target.store(self.decision.channels[i], Ordering::SeqCst);
        }
        let cap = self.decision.rate_cap_bps.map(|c| c as u64).unwrap_or(0);
        if shared.rate_cap.swap(cap, Ordering::SeqCst) != cap {
            *shared.cap_epoch.lock().unwrap() =
                (Instant::now(), shared.received.load(Ordering::SeqCst));
        }
        self.cpu.apply(&self.decision, act);
        let log = self.interval_log(&obs, act);
        if self.opts.progress.is_set() {
            self.progress.status = Some(format!(
                "{} {} ch={}",
                log.tuner, log.state, log.open_channels
            ));
            self.opts.progress.tell(&self.progress);
        }
        if let Some(f) = self.log_file.as_mut() {
            let _ = writeln!(f, "{}", serde_json::to_string(&log).expect("serializes"));
        }
        self.intervals.push(log);
        Ok(())
    }

    /// The interval log's line for the interval just observed and decided.
    fn interval_log(&self, obs: &Observation, act: &CpuActuator) -> IntervalLog {
        let shared = &self.shared;
        let decision = &self.decision;
        let (fif, chunks) = shared.files.iter().fold((0, 0), |(f, c), j| {
            let n = j.in_flight.load(Ordering::Relaxed);
            (f + (n > 0) as usize, c + n)
        });
        IntervalLog {
            t_s: shared.started.elapsed().as_secs_f64(),
            bytes: obs.bytes,
            throughput_mbps: obs.tput_bps() / 1e6,
            tuner: self.ctl.name().into(),
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
            cpu_load: obs.cpu_load,
            energy_j: obs.energy_j,
            power_w: obs.energy_j.map(|e| e / obs.dt_s),
            rate_cap_mbps: decision.rate_cap_bps.map(|c| c / 1e6),
        }
    }
}

/// The `--json` summary of a transfer that ended after `seconds`.
fn summarise(
    tuning: Tuning<'_>,
    energy: EnergyBook,
    incoming: Incoming,
    streamed: Vec<StreamedFile>,
    seconds: f64,
    opts: &TransferOptions,
) -> TransferSummary {
    let Incoming {
        src,
        intake,
        checksum_report,
        earlier,
        ..
    } = incoming;
    let shared = &tuning.shared;
    let mut whole_file_streams = intake.whole_file_streams;
    if !streamed.is_empty() {
        whole_file_streams.push(format!(
            "{} files of unknown size (no Content-Length, no Range) came as single streams, one at a time beside the planned transfer; an interrupted one is fetched again whole",
            streamed.len()
        ));
    }
    let total_bytes = intake.planned_bytes + streamed.iter().map(|f| f.bytes).sum::<u64>();
    let resumed_bytes = earlier.resumed_bytes
        + streamed
            .iter()
            .filter(|f| f.skipped)
            .map(|f| f.bytes)
            .sum::<u64>();
    let verification = verification(&earlier, shared, &streamed, checksum_report);
    let received = shared.received.load(Ordering::SeqCst);
    let figures = energy.figures(received, opts);
    let throughput_bps = if seconds > 0.0 {
        received as f64 * 8.0 / seconds
    } else {
        0.0
    };
    TransferSummary {
        source: match &opts.input_file {
            Some(p) if p.as_os_str() == "-" => "URL list from standard input".to_string(),
            Some(p) => format!("URL list {}", p.display()),
            None => opts.source.clone(),
        },
        source_kind: src.kind.name().into(),
        source_detail: match src.kind {
            SourceKind::Index(k) => Some(k.name().to_string()),
            _ => None,
        },
        whole_file_streams,
        notes: src.notes,
        mirrors: shared.mirror_reports(),
        failed_lines: src.failed,
        dest: opts.dest.display().to_string(),
        sla: opts.sla.name(),
        tuner: tuning.ctl.name().to_string(),
        files: intake.n_files,
        files_skipped: earlier.skipped,
        files_verified_checksum: shared.verified.load(Ordering::SeqCst),
        verification,
        total_bytes,
        bytes: received,
        resumed_bytes,
        seconds,
        throughput_bps,
        throughput_mbps: throughput_bps / 1e6,
        reconnects: shared.reconnects.load(Ordering::SeqCst),
        energy: figures.energy,
        energy_note: figures.energy_note,
        energy_process: figures.energy_process,
        energy_feedback: figures.energy_feedback,
        net: tuning.net,
        params_initial: tuning.plan,
        cpu_actuator: tuning.cpu.reports,
        intervals: tuning.intervals,
    }
}

/// How the files were checked: by the listing, by a publisher's digest (collision-resistant
/// or not), or not at all; counting the files earlier runs finished and those streamed.
fn verification(
    earlier: &EarlierRuns,
    shared: &Shared,
    streamed: &[StreamedFile],
    checksum_file: Option<ChecksumFileReport>,
) -> Verification {
    let jobs = &shared.files;
    let mut unverified: Vec<String> = earlier.skipped_unverified.clone();
    unverified.extend(
        streamed
            .iter()
            .filter(|f| !f.published)
            .map(|f| f.rel.clone()),
    );
    unverified.extend(
        jobs.iter()
            .filter(|j| j.xxh3.is_none() && j.blocks.is_none() && j.expect.is_none())
            .map(|j| j.rel.clone()),
    );
    unverified.sort();
    // files a digest checked: by a collision-resistant one, or only by others
    let strong_job = |j: &FileJob| {
        j.expect
            .as_ref()
            .is_some_and(|e| e.algo.collision_resistant())
    };
    let checked_job = |j: &FileJob| j.xxh3.is_some() || j.blocks.is_some() || j.expect.is_some();
    let strong = earlier.verified_strong
        + jobs.iter().filter(|j| strong_job(j)).count()
        + streamed.iter().filter(|f| f.strong).count();
    let mut weak: Vec<String> = earlier.verified_weak.clone();
    weak.extend(
        jobs.iter()
            .filter(|j| checked_job(j) && !strong_job(j))
            .map(|j| j.rel.clone()),
    );
    weak.extend(
        streamed
            .iter()
            .filter(|f| f.published && !f.strong)
            .map(|f| f.rel.clone()),
    );
    weak.sort();
    Verification {
        by_listing: earlier.verified_by_listing
            + jobs
                .iter()
                .filter(|j| j.xxh3.is_some() || j.blocks.is_some())
                .count(),
        by_publisher: earlier.verified_by_publisher
            + jobs.iter().filter(|j| j.expect.is_some()).count()
            + streamed.iter().filter(|f| f.published).count(),
        unverified: unverified.len(),
        unverified_files: unverified.into_iter().take(UNVERIFIED_LISTED).collect(),
        checksum_file,
        collision_resistant: strong,
        integrity_only: weak.len(),
        integrity_only_files: weak.into_iter().take(UNVERIFIED_LISTED).collect(),
        restarted: earlier
            .restarted
            .iter()
            .chain(shared.restarted.lock().unwrap().iter())
            .cloned()
            .collect(),
        resumed_unchecked: earlier.resumed_unchecked.clone(),
    }
}

/// Whether a file's publisher digest resists a forger (SHA-2, BLAKE2b).
fn strong(f: &SourceFile) -> bool {
    f.expect
        .as_ref()
        .is_some_and(|e| e.algo.collision_resistant())
}

/// The servers named on the command line (the source URL, or every URL of the URL list):
/// what `--insecure` covers.
fn named_origins(opts: &TransferOptions) -> Vec<String> {
    let urls: Vec<String> = match &opts.input_file {
        Some(p) => super::source::list_urls(p).unwrap_or_default(),
        None => vec![opts.source.clone()],
    };
    urls.iter()
        .filter_map(|u| HttpUrl::parse(u).ok())
        .map(|u| u.authority().to_ascii_lowercase())
        .collect()
}

/// What the transfer learns from its sources besides the sized files it plans: which servers
/// ignore `Range`, how many files and planned bytes there are, and where files of unknown size
/// go (the streaming task, while discovery may still find some). Every file passes through it
/// once, whatever found it, so it is also where what a source may not do is refused: two files
/// for one output path, names wattio keeps for itself, sizes that overflow or do not fit DEST.
struct Intake {
    /// Per origin: it ignores Range, so each of its files comes as one whole-file stream.
    whole: Vec<bool>,
    /// Per origin: no answer has spoken for Range yet; its first file found later decides.
    undecided: Vec<bool>,
    /// The summary's lines on whole-file streams.
    whole_file_streams: Vec<String>,
    n_files: usize,
    planned_bytes: u64,
    unsized_tx: Option<UnboundedSender<SourceFile>>,
    dest: Arc<Dest>,
    /// Output paths taken so far, with the URL each comes from.
    claimed: HashMap<String, String>,
    /// Directories the output paths so far need.
    dirs: HashSet<String>,
    /// Bytes still to fetch of the files prepared so far, and DEST's free space at the start.
    needed_bytes: u64,
    free_bytes: Option<u64>,
}

impl Intake {
    /// What `src` knows before the transfer starts; its files of unknown size go to
    /// `unsized_tx` now, and later ones too while `more_to_come`.
    fn start(
        src: &mut Source,
        unsized_tx: UnboundedSender<SourceFile>,
        more_to_come: bool,
        dest: &Arc<Dest>,
    ) -> anyhow::Result<Intake> {
        let whole: Vec<bool> = src.ranges.iter().map(|r| *r == Some(false)).collect();
        let whole_file_streams = (0..src.origins.len())
            .filter(|&o| whole[o])
            .map(|o| ignores_ranges(&src.origins[o]))
            .collect();
        let mut intake = Intake {
            undecided: src.ranges.iter().map(Option::is_none).collect(),
            whole,
            whole_file_streams,
            n_files: 0,
            planned_bytes: 0,
            unsized_tx: None,
            dest: dest.clone(),
            claimed: HashMap::new(),
            dirs: HashSet::new(),
            needed_bytes: 0,
            free_bytes: None,
        };
        intake.count(&src.files, &src.unsized_files, &src.origins)?;
        for f in std::mem::take(&mut src.unsized_files) {
            let _ = unsized_tx.send(f);
        }
        intake.unsized_tx = more_to_come.then_some(unsized_tx);
        Ok(intake)
    }

    /// Counts a batch's files and bytes, claiming their output paths.
    fn count(
        &mut self,
        files: &[SourceFile],
        unsized_files: &[SourceFile],
        origins: &[HttpUrl],
    ) -> anyhow::Result<()> {
        for f in files.iter().chain(unsized_files) {
            self.claim(&f.rel, &url_string(&origins[f.origin], &f.url_path))?;
        }
        for f in files {
            self.planned_bytes = self.planned_bytes.checked_add(f.size).ok_or_else(|| {
                failure!(
                    InvalidSource,
                    "the source's sizes add up to more than 16 EiB ({} claims {} bytes): a broken or hostile server; refusing it",
                    f.rel,
                    f.size
                )
            })?;
        }
        self.n_files += files.len() + unsized_files.len();
        Ok(())
    }

    /// Takes `rel` as an output path for the file at `from`: refused when another file of the
    /// source has it, when a file and a directory of the source would share a path, and for
    /// the names of wattio's own temporary files.
    fn claim(&mut self, rel: &str, from: &str) -> anyhow::Result<()> {
        if is_reserved(rel) {
            fail!(
                InvalidSource,
                "{from}: its name {rel} ends in {PART_SUFFIX} or {DONE_SUFFIX}, which wattio keeps for its temporary files; refusing the source (rename that file on the server, or give it another out= in a URL list)"
            );
        }
        if let Some(prev) = self.claimed.get(rel) {
            fail!(
                InvalidSource,
                "two files of the source go to the same path {}: {prev} and {from}; wattio will not guess which to keep (fix the listing, or the out= of those URL-list lines)",
                self.dest.shown(rel)
            );
        }
        if self.dirs.contains(rel) {
            fail!(
                InvalidSource,
                "{} would be both a file ({from}) and a directory of other files of the source; refusing the source",
                self.dest.shown(rel)
            );
        }
        let parents: Vec<&str> = rel.match_indices('/').map(|(i, _)| &rel[..i]).collect();
        if let Some(p) = parents.iter().find(|p| self.claimed.contains_key(**p)) {
            fail!(
                InvalidSource,
                "{} would be both a file ({}) and the directory of {from}; refusing the source",
                self.dest.shown(p),
                self.claimed[*p]
            );
        }
        self.dirs.extend(parents.into_iter().map(str::to_string));
        self.claimed.insert(rel.to_string(), from.to_string());
        Ok(())
    }

    /// Prepares sized files (see [`prepare`]) after asking their servers, for the files an
    /// earlier run finished without a checksum to check them by, whether they are still the
    /// version it fetched (pipelined `HEAD`s, see [`worth_asking`]); refuses a batch whose
    /// missing bytes do not fit in DEST's free space.
    async fn prepare(
        &mut self,
        mut files: Vec<SourceFile>,
        src: &Source,
        connector: &Arc<Connector>,
    ) -> anyhow::Result<Prepared> {
        // the files an earlier run finished, with validators and no checksum
        let dest = self.dest.clone();
        let whole = self.whole.clone();
        let (files_back, ask) = tokio::task::spawn_blocking(move || {
            let ask: Vec<usize> = (0..files.len())
                .filter(|&i| {
                    !whole.get(files[i].origin).copied().unwrap_or(false)
                        && worth_asking(&dest, &files[i])
                })
                .collect();
            (files, ask)
        })
        .await?;
        files = files_back;
        for o in 0..src.origins.len() {
            let idx: Vec<usize> = ask
                .iter()
                .copied()
                .filter(|&i| files[i].origin == o)
                .collect();
            if idx.is_empty() {
                continue;
            }
            let paths: Vec<String> = idx.iter().map(|&i| files[i].url_path.clone()).collect();
            let heads = head_many(
                connector,
                &src.origins[o],
                &paths,
                HEAD_CONNECTIONS,
                HEAD_DEPTH,
            )
            .await?;
            for (i, h) in idx.into_iter().zip(heads) {
                if h.status == 200 {
                    let f = std::mem::replace(
                        &mut files[i],
                        SourceFile::at(String::new(), 0, String::new()),
                    );
                    files[i] = f.with_validator(&h, &src.origins[o]);
                }
            }
        }
        let dest = self.dest.clone();
        let whole = self.whole.clone();
        let origins: Vec<String> = src.origins.iter().map(HttpUrl::origin).collect();
        let p =
            tokio::task::spawn_blocking(move || prepare(&dest, files, &whole, &origins)).await??;
        let needed: u64 = p
            .jobs
            .iter()
            .map(|j| j.remaining.load(Ordering::SeqCst))
            .fold(0u64, u64::saturating_add);
        self.needed_bytes = self.needed_bytes.saturating_add(needed);
        if self.free_bytes.is_none() {
            let dest = self.dest.clone();
            self.free_bytes = tokio::task::spawn_blocking(move || dest.free_bytes().ok()).await?;
        }
        if let Some(free) = self.free_bytes.filter(|&f| self.needed_bytes > f) {
            let no_space = Kind::NoSpace {
                needed_bytes: self.needed_bytes,
                free_bytes: free,
            };
            return Err(no_space
                .msg(format!(
                    "the files to fetch need {} bytes, but {} has {free} bytes free; free some space or give another DEST",
                    self.needed_bytes,
                    self.dest.shown("")
                ))
                .into());
        }
        Ok(p)
    }

    /// Takes in a batch discovery found: tells its notes, adds its servers (to `origins` too,
    /// the channels' list, once the transfer runs), records what they said of Range (asking
    /// one that has not said once a file of it needs ranges: see `needs_ranges` in the
    /// start-up) and passes its files of unknown size on; returns its sized files prepared.
    async fn take(
        &mut self,
        batch: Batch,
        src: &mut Source,
        origins: Option<&Mutex<Vec<HttpUrl>>>,
        connector: &Arc<Connector>,
        needs_ranges: &dyn Fn(&SourceFile) -> bool,
        opts: &TransferOptions,
    ) -> anyhow::Result<Prepared> {
        for note in &batch.notes {
            opts.notices.tell(&super::Notice::Note(note.to_string()));
        }
        src.notes.extend(batch.notes);
        src.failed.extend(batch.failed);
        for u in batch.new_origins {
            if let Some(o) = origins {
                o.lock().unwrap().push(u.clone());
            }
            src.origins.push(u);
            self.whole.push(false);
            self.undecided.push(true);
        }
        for (o, ranges) in batch.ranges {
            if std::mem::take(&mut self.undecided[o]) && !ranges {
                self.mark_whole(o, &src.origins[o]);
            }
        }
        // until a file needs ranges its server's answer does not matter: a file requested
        // whole comes whole either way
        for f in &batch.files {
            let o = f.origin;
            if self.undecided[o] && f.size > 0 && needs_ranges(f) {
                self.undecided[o] = false;
                if !probe_origin(connector, &src.origins[o], &f.url_path).await? {
                    self.mark_whole(o, &src.origins[o]);
                }
            }
        }
        self.count(&batch.files, &batch.unsized_files, &src.origins)?;
        if let Some(tx) = &self.unsized_tx {
            for f in batch.unsized_files {
                let _ = tx.send(f);
            }
        }
        self.prepare(batch.files, src, connector).await
    }

    /// Origin `o` ignores Range: each of its files comes as one whole-file stream.
    fn mark_whole(&mut self, o: usize, origin: &HttpUrl) {
        self.whole[o] = true;
        self.whole_file_streams.push(ignores_ranges(origin));
    }
}

/// Adds files found while the transfer runs: each joins the file list, then its missing
/// ranges join a queue (so a channel never sees a chunk of a file it cannot look up); a file
/// with nothing missing is finished at once.
async fn add_found(sh: &Arc<Shared>, plan: &TransferPlan, p: Prepared) -> anyhow::Result<()> {
    sh.verified.fetch_add(p.earlier.verified, Ordering::SeqCst);
    for (job, missing) in p.jobs.into_iter().zip(p.missing) {
        let complete = job.remaining.load(Ordering::SeqCst) == 0;
        let i = sh.files.push(job);
        if complete {
            let sh = sh.clone();
            tokio::task::spawn_blocking(move || finish_file(&sh, i)).await?;
        } else {
            enqueue_found(&sh.parts, plan, i, &sh.files[i], &missing);
        }
    }
    Ok(())
}

/// The summary's line for a server that ignores `Range`.
fn ignores_ranges(origin: &super::url::HttpUrl) -> String {
    format!(
        "{} ignores Range requests: each of its files came as one whole-file stream (no parallel ranges within a file; a file cut short restarts)",
        origin.origin()
    )
}
