//! The control loop. [`transfer_async`] runs a transfer in stages: `start_up` (the first URL,
//! the RTT, DEST, the meter, the destination disks' watch (`disks`) and the first connections
//! opening in the background), discovery
//! (`discover`), `Incoming::before_plan` (the files found so far prepared against DEST and
//! what earlier runs left), `plan_transfer` (Algorithm 1's plan, the controller, the shared
//! state), `Tuning::run` (the tuning intervals: energy and CPU feedback, channel budgets, rate
//! cap, CPU actuator, interval log; files discovery finds meanwhile join) and `summarise`
//! (with `checked`: how each file was checked, and the disks' window closed after the last
//! sync).

mod checked;
mod disks;
mod energy;

use crate::actuator::CpuActuator;
use crate::client::data::channel::channel_task;
use crate::client::data::dest::{with_suffix, Dest, Entry, DONE_SUFFIX};
use crate::client::data::intake::{add_found, Intake};
use crate::client::data::jobs::Jobs;
use crate::client::data::queue::build_queues;
use crate::client::data::resume::{EarlierRuns, Prepared};
use crate::client::data::state::{Shared, SPARE_MAX_AGE};
use crate::client::data::stream::{spawn_streaming, StreamedFile};
use crate::client::data::verify::finish_file;
use crate::client::discovery::found::{Discovery, Source, SourceFile, SourceKind};
use crate::client::discovery::source::first_url;
use crate::client::discovery::{discover, Discovered};
use crate::client::net::conn::{measure_rtt, spawn_preconnect, Connector, Stream};
use crate::client::net::url::HttpUrl;
use crate::client::options::{default_window, TransferOptions};
use crate::error::{failure, EngineError, EngineResult, Failure};
use crate::summary::{ChecksumFileReport, IntervalLog, TransferSummary};
use checked::verification;
use disks::DiskBook;
use energy::{open_meter, CpuSteps, EnergyBook};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::JoinHandle;
use wattio_energy::attribution::cputime;
use wattio_energy::EnergyError;
use wattio_meter::{Meter, MeterConfig};
use wattio_progress::Cancel;
use wattio_tuner::{
    initial_plan, Controller, Decision, NetParams, Observation, StartRules, Timeouts, TransferPlan,
    TunerChoice, MIN_CHUNK,
};

pub(crate) async fn transfer_async(
    opts: &TransferOptions,
    cancel: &Cancel,
    act: &mut CpuActuator,
) -> EngineResult<TransferSummary> {
    let mut start = start_up(opts).await?;
    let needs_ranges = needs_ranges(&start.net, opts, &start.dest);
    let mut found = discover(
        &start.connector,
        &opts.discovery,
        &opts.notices,
        &start.url,
        start.preconnect.take(),
        &needs_ranges,
    )
    .await?;
    let spare = std::mem::take(&mut found.spare);
    let (unsized_tx, unsized_rx) = unbounded_channel();
    let (mut incoming, prep) =
        Incoming::before_plan(found, Box::new(needs_ranges), unsized_tx, &start, opts).await?;
    // the disks' window opens before the first byte is written
    let disks = match start.disks_open.take() {
        Some(task) => task.await?,
        None => DiskBook::open(&opts.tuning.root, &opts.data.dest),
    };
    let (ctl, plan, shared) = plan_transfer(&start, &incoming, prep, spare, opts, act);
    let streaming = spawn_streaming(&shared, &start.dest, unsized_rx);
    // files with nothing missing (complete .wattio-part from an interrupted rename)
    for i in 0..shared.files.len() {
        if shared.files[i].remaining.load(Ordering::SeqCst) == 0 {
            let sh = shared.clone();
            tokio::task::spawn_blocking(move || finish_file(&sh, i)).await?;
        }
    }
    let synced = opts.data.fsync;
    let meter = open_meter(start.meter_open.take(), opts).await?;
    let mut energy = EnergyBook::start(meter, opts, act);
    let mut tuning = Tuning::start(ctl, plan, start.net, shared, &incoming, opts, act)?;
    tuning
        .run(cancel, act, &mut energy, &mut incoming, &streaming)
        .await?;
    let seconds = tuning.shared.started.elapsed().as_secs_f64();
    energy.tail(tuning.last_tick);
    // the verified files still waiting go into place, and what arrived since the last
    // interval becomes resumable (also after an error or a cancel)
    {
        let sh = tuning.shared.clone();
        tokio::task::spawn_blocking(move || {
            sh.place_waiting();
            sh.sync_records()
        })
        .await?;
    }
    if let Some(mut f) = tuning.shared.fatal.lock().unwrap().take() {
        if !tuning.shared.fatal_advised.load(Ordering::SeqCst) {
            f.message += " (partial data kept; rerun the same command to resume)";
        }
        return Err(f.into());
    }
    let streamed = streaming.await?;
    // what the test of freed in-flight states reads while the file list is still held
    #[cfg(test)]
    crate::client::data::files::LIVE_AT_END.store(
        crate::client::data::files::LIVE_ACTIVE.load(Ordering::SeqCst),
        Ordering::SeqCst,
    );
    // every file is synced (with --fsync on) and in place: the disks' window closes
    let received = tuning.shared.received.load(Ordering::SeqCst);
    let dest_disks = tokio::task::spawn_blocking(move || disks.finish(received, synced)).await?;
    let mut summary = summarise(tuning, energy, incoming, streamed, seconds, opts);
    summary.dest_disks = Some(dest_disks);
    Ok(summary)
}

/// What the start-up opens before discovery: the first URL, the meter (opening in the
/// background), the connector, DEST, the network as the tuner sees it, and the first
/// channels' connections (opening in the background).
struct Startup {
    url: HttpUrl,
    meter_open: Option<JoinHandle<Result<Meter, EnergyError>>>,
    /// The destination disks' watch, opening in the background once DEST exists.
    disks_open: Option<JoinHandle<DiskBook>>,
    connector: Arc<Connector>,
    dest: Arc<Dest>,
    net: NetParams,
    rules: StartRules,
    preconnect: Option<JoinHandle<Vec<(Instant, Stream)>>>,
}

async fn start_up(opts: &TransferOptions) -> EngineResult<Startup> {
    let url = first_url(&opts.discovery, opts.tuning.rtt.is_none()).await?;
    // The meter's discovery takes a while (it watches each counter for a moment to refuse dead
    // ones): it runs while the listing is fetched.
    let meter_open = opts.tuning.meter.then(|| {
        let cfg = MeterConfig {
            root: opts.tuning.root.clone(),
            ..MeterConfig::default()
        };
        tokio::task::spawn_blocking(move || Meter::open(&cfg))
    });
    let connector = Arc::new(Connector::new(opts.data.tls.clone(), named_origins(opts)));
    let dest = Arc::new(tokio::task::block_in_place(|| {
        Dest::open(&opts.data.dest, opts.data.fsync)
    })?);
    let disks_open = {
        let (root, dest) = (opts.tuning.root.clone(), opts.data.dest.clone());
        Some(tokio::task::spawn_blocking(move || {
            DiskBook::open(&root, &dest)
        }))
    };
    let rtt = match opts.tuning.rtt {
        Some(r) => r,
        None => measure_rtt(&url).await?,
    };
    let net = NetParams {
        rtt_s: rtt.as_secs_f64().max(1e-5),
        bandwidth_bps: opts.tuning.bandwidth_bps,
        window_bytes: opts
            .tuning
            .window_bytes
            .unwrap_or_else(|| default_window(&opts.tuning.root)),
        max_ch: opts.tuning.max_ch.max(1),
    };
    // The first channels connect while the listing is fetched, saving them a round trip.
    let rules = StartRules {
        tuner: opts.tuning.tuner,
        sla: opts.tuning.sla,
        max_ch: opts.tuning.max_ch,
        cpu_scaling: opts.tuning.cpu_scaling,
    };
    let opened = rules.preconnect(&net);
    let preconnect = (opened > 0).then(|| spawn_preconnect(&connector, &url, opened));
    Ok(Startup {
        url,
        meter_open,
        disks_open,
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
    let parts_tuner = !matches!(opts.tuning.tuner, TunerChoice::Wattio);
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

/// How long batches found after the first file with bytes to fetch may still join the plan.
const JOIN_BEFORE_PLAN: Duration = Duration::from_millis(200);

/// How long a tick of the control loop goes on taking batches of found files.
const INTAKE_PER_TICK: Duration = Duration::from_millis(5);

impl Incoming {
    /// Takes in what discovery `found` before the plan (its spare connections aside) and
    /// prepares its sized files; files of unknown size go to `unsized_tx`.
    ///
    /// Before the plan, the files discovery has found already join it. A rerun can find every
    /// file known so far complete, which leaves Algorithm 1 no size to plan partitions by and a
    /// file found later no partition to join: then the walk's next files are waited for until
    /// one has bytes to fetch. A walk that has ended (a one-page index, often) leaves a plan of
    /// every file, whose size tells whether the transfer is short (see `StartRules`). Once a
    /// file has bytes to fetch, more batches join for at most [`JOIN_BEFORE_PLAN`]: a walk
    /// that keeps pace with the intake (an index of a million files on a fast server) would
    /// otherwise be taken in whole, 20 s and 360 MB of it, before the first byte is fetched.
    async fn before_plan(
        found: Discovered,
        needs_ranges: Box<dyn Fn(&SourceFile) -> bool + Send + Sync>,
        unsized_tx: UnboundedSender<SourceFile>,
        start: &Startup,
        opts: &TransferOptions,
    ) -> EngineResult<(Incoming, Prepared)> {
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
        let mut planning_from: Option<Instant> = None;
        while let Some(rx) = more.as_mut() {
            let next = if prep.jobs.is_empty() {
                rx.recv().await
            } else {
                if planning_from.get_or_insert_with(Instant::now).elapsed() > JOIN_BEFORE_PLAN {
                    break;
                }
                match rx.try_recv() {
                    Ok(batch) => Some(batch),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            match next {
                Some(batch) => {
                    let p = intake
                        .take(
                            batch?,
                            &mut src,
                            None,
                            connector,
                            &needs_ranges,
                            &opts.notices,
                        )
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

    /// Adds the files discovery found since the last tick to the running transfer, taking
    /// batches for at most [`INTAKE_PER_TICK`] (at least one): a walk that keeps pace with the
    /// intake would otherwise hold the tick, and with it the placing of finished files, until
    /// the whole index is read. An error of discovery fails the transfer.
    async fn since_last_tick(
        &mut self,
        shared: &Arc<Shared>,
        plan: &TransferPlan,
        opts: &TransferOptions,
    ) -> EngineResult<()> {
        let began = Instant::now();
        while let Some(rx) = self.more.as_mut() {
            if began.elapsed() > INTAKE_PER_TICK {
                break;
            }
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
                    &opts.notices,
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
    let base_plan = initial_plan(&sizes, net, opts.tuning.sla, act.n_cores());
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
        dest: start.dest.clone(),
        parts,
        received: AtomicU64::new(0),
        files_done: AtomicUsize::new(0),
        verified: AtomicUsize::new(prep.earlier.verified),
        chunks_in_flight: AtomicUsize::new(0),
        files_in_flight: AtomicUsize::new(0),
        reconnects: AtomicU64::new(0),
        rate_cap: AtomicU64::new(0),
        cap_epoch: Mutex::new((Instant::now(), 0)),
        cap_waits: AtomicU64::new(0),
        fatal: Mutex::new(None),
        fatal_advised: AtomicBool::new(false),
        retries: opts.data.retries,
        started: Instant::now(),
        unsynced: Mutex::new(Vec::new()),
        placing: Default::default(),
        restarted: Mutex::new(Vec::new()),
        restart_piece: plan.bdp_bytes.max(MIN_CHUNK),
    });
    (ctl, plan, shared)
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
    ) -> EngineResult<Tuning<'a>> {
        let timeouts = Timeouts::new(net.rtt_s, opts.tuning.interval);
        let progress = super::TransferProgress {
            planned_bytes: incoming.intake.planned_bytes,
            total_known: incoming.more.is_none(),
            done_bytes: incoming.earlier.resumed_bytes,
            status: None,
            finished: false,
        };
        opts.tuning.progress.tell(&progress);
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
        let log_file = match &opts.tuning.log {
            Some(p) => Some(File::create(p).map_err(|e| {
                EngineError::from(e).context(format!("cannot write interval log {}", p.display()))
            })?),
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
    /// failed or was cancelled: every 20 ms it puts verified files into place, takes in the
    /// files discovery found, keeps each partition's channel count at its budget and tells the
    /// progress; every timeout it runs a tuning interval.
    async fn run(
        &mut self,
        cancel: &Cancel,
        act: &mut CpuActuator,
        energy: &mut EnergyBook,
        incoming: &mut Incoming,
        streaming: &JoinHandle<Vec<StreamedFile>>,
    ) -> EngineResult<()> {
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
            // verified files into place, off the runtime (see `placing`)
            if shared.placing.due() {
                shared.placing.start();
                let sh = shared.clone();
                tokio::task::spawn_blocking(move || sh.place_waiting());
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
            self.opts.tuning.progress.tell(&self.progress);
            let el = self.last_tick.elapsed();
            let timeout = self.timeouts.for_state(self.decision.state);
            if el >= timeout {
                self.interval(el, timeout, rec, act, energy).await?;
            }
        }
        self.progress.done_bytes =
            incoming.earlier.resumed_bytes + shared.received.load(Ordering::Relaxed);
        self.progress.finished = true;
        self.opts.tuning.progress.tell(&self.progress);
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
    ) -> EngineResult<()> {
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
        if self.opts.tuning.progress.is_set() {
            self.progress.status = Some(format!(
                "{} {} ch={}",
                log.tuner, log.state, log.open_channels
            ));
            self.opts.tuning.progress.tell(&self.progress);
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
        let fif = shared.files_in_flight.load(Ordering::Relaxed);
        let chunks = shared.chunks_in_flight.load(Ordering::Relaxed);
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
        source: match &opts.discovery.input_file {
            Some(p) if p.as_os_str() == "-" => "URL list from standard input".to_string(),
            Some(p) => format!("URL list {}", p.display()),
            None => opts.discovery.source.clone(),
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
        dest: opts.data.dest.display().to_string(),
        sla: opts.tuning.sla.name(),
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
        dest_disks: None,
        net: tuning.net,
        params_initial: tuning.plan,
        cpu_actuator: tuning.cpu.reports,
        intervals: tuning.intervals,
    }
}

/// The servers named on the command line (the source URL, or every URL of the URL list):
/// what `--insecure` covers.
fn named_origins(opts: &TransferOptions) -> Vec<String> {
    let urls: Vec<String> = match &opts.discovery.input_file {
        Some(p) => crate::client::discovery::source::list_urls(p).unwrap_or_default(),
        None => vec![opts.discovery.source.clone()],
    };
    urls.iter()
        .filter_map(|u| HttpUrl::parse(u).ok())
        .map(|u| u.authority().to_ascii_lowercase())
        .collect()
}
